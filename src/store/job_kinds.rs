//! What each kind of job carries, and how its key is made: a fan-out (the
//! action's id), a bump (the comment), a webhook delivery, an unfollow's
//! cleanup (reader, kind and actor), and a follow's backfill (the same). The queue
//! itself is [`super::jobs`]; what a job does lives above the port.

use serde::{Deserialize, Serialize};

use super::{codes, records, ErrorKind, Job, JobKind, StoreError, StoreResult};
use crate::model::{Action, Comment, EdgeKind, FeedItem, Millis, ObjectId, ReasonKind, Scope};

/// An action's fan-out, as its job: keyed by the action's id, with nothing
/// else to carry (the worker reads the action). The backend queues it with
/// the action, in the same step ([`super::ActionStore::insert_action`]), and
/// again when the action's scope changes.
pub struct FanOutJob;

impl FanOutJob {
    /// The job of action `id`'s fan-out, queued when it was recorded.
    pub fn of(tenant: &str, id: ObjectId) -> StoreResult<Job> {
        Job::new(
            JobKind::FanOut,
            tenant,
            &id.to_hex(),
            &(),
            id.timestamp().timestamp_millis(),
        )
    }

    /// The action a fan-out job is for; a key that is no id is corrupt.
    pub fn action_id(job: &Job) -> StoreResult<ObjectId> {
        ObjectId::parse_str(&job.key).map_err(|e| {
            StoreError::internal(
                format!("a fan-out job of tenant {:?} has no action id", job.tenant),
                e,
            )
        })
    }
}

/// The bump a comment causes, as its job carries it: the comment whole
/// (it is never changed), under the comment's id. The backend queues it
/// with the comment, in the same step ([`super::ReactionStore::add_comment`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BumpJob {
    pub tenant: String,
    pub comment: Comment,
}

impl BumpJob {
    pub fn to_job(&self) -> StoreResult<Job> {
        Job::new(
            JobKind::Bump,
            &self.tenant,
            &self.comment.id.to_hex(),
            &self.comment,
            self.comment.created,
        )
    }

    /// The bump a queued job carries.
    pub fn of_job(job: &Job) -> StoreResult<BumpJob> {
        Ok(BumpJob {
            tenant: job.tenant.clone(),
            comment: job.payload()?,
        })
    }
}

/// A webhook delivery, as its job carries it, keyed by webhook and
/// message (`<webhook> <message>`): queued by the job that carries its
/// event, before that job is finished (see [`crate::webhooks`]).
pub struct WebhookJob;

impl WebhookJob {
    /// The job of `delivery` in `tenant`, queued at `queued`, counting the
    /// attempts it carries as its failures.
    pub fn of(tenant: &str, delivery: &crate::model::Delivery, queued: Millis) -> StoreResult<Job> {
        let key = records::dead_delivery_key(&delivery.webhook, &delivery.message);
        let job = Job::new(JobKind::Webhook, tenant, &key, delivery, queued)?;
        Ok(Job {
            failures: delivery.tried.attempts,
            ..job
        })
    }

    /// The failures of a webhook job stored before jobs kept theirs (its
    /// stored count is none): the attempts its delivery carries, which the
    /// sender wrote there. A payload that does not read counts none.
    pub fn carried_failures(job: &Job) -> u32 {
        job.payload::<crate::model::Delivery>()
            .map_or(0, |delivery| delivery.tried.attempts)
    }
}

/// Separates the parts of a cleanup or follow job's key.
const KEY_SEP: char = '\u{1f}';

/// The key of a job of one edge and direction: `reader␟kind␟actor` (ids
/// hold no control characters).
fn edge_key(reader: &str, kind: &str, actor: &str) -> String {
    format!("{reader}{KEY_SEP}{kind}{KEY_SEP}{actor}")
}

/// The reader, kind and actor of an [`edge_key`]; a key of another shape
/// is corrupt data.
fn edge_key_parts<'j>(job: &'j Job, what: &str) -> StoreResult<(&'j str, &'j str, &'j str)> {
    let mut parts = job.key.splitn(3, KEY_SEP);
    match (parts.next(), parts.next(), parts.next()) {
        (Some(reader), Some(kind), Some(actor)) => Ok((reader, kind, actor)),
        _ => Err(StoreError::new(
            ErrorKind::Internal,
            format!(
                "a {what} job of tenant {:?} has a corrupt key {:?}",
                job.tenant, job.key
            ),
        )),
    }
}

/// A reader stopped following (or befriending) an actor, or left a group:
/// the items that came that way leave the reader's feed. Reads leave them
/// out at once (by the pending cleanup job; for a group, by the access
/// check); the cleanup job takes them out of storage.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Unfollow {
    pub tenant: String,
    pub reader: String,
    /// The actor whose edge ended, or the group left.
    pub actor: String,
    pub kind: Ended,
}

/// What an [`Unfollow`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ended {
    /// A follow or friendship: the items of the actor's `PUBLIC` actions
    /// go, bumped or not. A group follow: the items of `PUBLIC` actions
    /// sent to the group go. What another edge still brings comes back,
    /// for that edge's reason. Which items, the cleanup works out.
    Edge(EdgeKind),
    /// A membership: the group's `TEAM` / `DEPARTMENT` items the reader may
    /// no longer read go, bumped or not; which ones, the cleanup works out.
    Group,
}

/// Written by its stored name (`follows`, `friend`, `group`,
/// `followsGroup`), as archives carry it.
impl Serialize for Ended {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(codes::ENDED.name(*self))
    }
}

impl<'de> Deserialize<'de> for Ended {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        codes::ENDED
            .read_name(&name, "an unfollow")
            .map_err(|e| serde::de::Error::custom(e.message))
    }
}

impl Ended {
    /// The reasons an item its cleanup takes out may stand for: the
    /// reason the ended edge or group gave, or a bump's, which a comment
    /// put in place of it ([`Unfollow::covers`] says which bumped items
    /// came that way).
    pub fn reasons(self) -> &'static [ReasonKind] {
        match self {
            Ended::Edge(EdgeKind::Follows) => &[ReasonKind::Follows, ReasonKind::Bumped],
            Ended::Edge(EdgeKind::Friend) => &[ReasonKind::Friend, ReasonKind::Bumped],
            Ended::Edge(EdgeKind::Group) => &[ReasonKind::Group, ReasonKind::Bumped],
            Ended::Group => &[ReasonKind::Team, ReasonKind::Department, ReasonKind::Bumped],
        }
    }
}

impl Unfollow {
    /// The end of a `kind` edge from `reader` to `actor`.
    pub fn edge(tenant: &str, reader: &str, kind: EdgeKind, actor: &str) -> Unfollow {
        Unfollow {
            tenant: tenant.to_owned(),
            reader: reader.to_owned(),
            actor: actor.to_owned(),
            kind: Ended::Edge(kind),
        }
    }

    /// `reader` leaving `group`.
    pub fn group(tenant: &str, reader: &str, group: &str) -> Unfollow {
        Unfollow {
            tenant: tenant.to_owned(),
            reader: reader.to_owned(),
            actor: group.to_owned(),
            kind: Ended::Group,
        }
    }

    /// `reader` no longer following `group`.
    pub fn group_follow(tenant: &str, reader: &str, group: &str) -> Unfollow {
        Unfollow::edge(tenant, reader, EdgeKind::Group, group)
    }

    /// Its cleanup job: a [`JobKind::Cleanup`] job keyed by reader, kind
    /// and actor, so a reader's pending ones are one key range
    /// ([`Unfollow::reader_prefix`]). The key says it all; the payload is
    /// empty.
    pub fn to_job(&self, queued: Millis) -> StoreResult<Job> {
        Job::new(JobKind::Cleanup, &self.tenant, &self.key(), &(), queued)
    }

    /// The key of its cleanup job: `reader␟kind␟actor` (ids hold no control
    /// characters).
    pub fn key(&self) -> String {
        edge_key(&self.reader, codes::ENDED.name(self.kind), &self.actor)
    }

    /// Where the keys of `reader`'s cleanup jobs begin.
    pub fn reader_prefix(reader: &str) -> String {
        format!("{reader}{KEY_SEP}")
    }

    /// The unfollow a cleanup job is for; a key of another shape is
    /// corrupt data.
    pub fn of_job(job: &Job) -> StoreResult<Unfollow> {
        let (reader, kind, actor) = edge_key_parts(job, "cleanup")?;
        Ok(Unfollow {
            tenant: job.tenant.clone(),
            reader: reader.to_owned(),
            actor: actor.to_owned(),
            kind: codes::ENDED.read_name(
                kind,
                format_args!("cleanup job {:?} of tenant {:?}", job.key, job.tenant),
            )?,
        })
    }

    /// Whether `item` (of `action`, where known) came by the ended edge,
    /// by how it came rather than by the reason it shows now: a bump puts
    /// its own reason in place of the edge's, and the item still came by
    /// the edge if its action is a `PUBLIC` one the edge brings (the ended
    /// follow's or friendship's actor did it; it was sent to the group no
    /// longer followed), not the reader's own. A comment, the reader's own
    /// included, is no reason to see an action: another edge that still
    /// brings it puts it back (see [`Ended::Edge`]). Never for a membership
    /// (reads leave those out by access). Telling needs the action for a
    /// bumped item and for a group follow's ([`Unfollow::needs_action`]);
    /// without it, only items that still show the edge's reason are known.
    pub fn covers(&self, item: &FeedItem, action: Option<&Action>) -> bool {
        if item.owner != self.reader {
            return false;
        }
        let bumped = item.reason.kind == ReasonKind::Bumped;
        let brought = |a: &Action| {
            a.scope == Scope::Public
                && a.actor_id != self.reader
                && match self.kind {
                    Ended::Edge(EdgeKind::Group) => a.to.contains(&self.actor),
                    Ended::Edge(_) => a.actor_id == self.actor,
                    Ended::Group => false,
                }
        };
        match self.kind {
            Ended::Group => false,
            _ if bumped => action.is_some_and(brought),
            Ended::Edge(EdgeKind::Group) => {
                item.reason.kind == ReasonKind::Group && action.is_some_and(brought)
            }
            Ended::Edge(kind) => {
                item.reason.kind == kind.reason() && item.reason.actor_id == self.actor
            }
        }
    }

    /// Whether a bumped `item` is of an action the ended edge brings by
    /// whom it is from (or where it was sent), whatever its scope now: one
    /// narrowed since it came no longer shows it came by the edge, and is
    /// taken out too unless the reader may still read it (widened again,
    /// it would show by no edge).
    pub fn covers_narrowed(&self, item: &FeedItem, action: &Action) -> bool {
        item.owner == self.reader
            && item.reason.kind == ReasonKind::Bumped
            && self.may_bring(action)
    }

    /// Whether a fan-out of `action` may deliver it to the reader by the
    /// ended edge, whatever its scope (a scope change may widen it): the
    /// edge's actor did it, or it was sent to the group no longer
    /// followed. Never for a membership (reads leave those out by access).
    pub fn may_bring(&self, action: &Action) -> bool {
        action.actor_id != self.reader
            && match self.kind {
                Ended::Edge(EdgeKind::Group) => action.to.contains(&self.actor),
                Ended::Edge(_) => action.actor_id == self.actor,
                Ended::Group => false,
            }
    }

    /// Whether [`Unfollow::covers`] needs `item`'s action to tell whether
    /// it covers it.
    pub fn needs_action(&self, item: &FeedItem) -> bool {
        match self.kind {
            Ended::Group => false,
            Ended::Edge(EdgeKind::Group) => {
                matches!(item.reason.kind, ReasonKind::Group | ReasonKind::Bumped)
            }
            Ended::Edge(_) => {
                item.reason.kind == ReasonKind::Bumped && item.reason.actor_id == self.actor
            }
        }
    }
}

/// A new follow (friendship, group follow) whose backfill has not run yet:
/// queued before the edge is written and finished once the backfill is in,
/// so a kill between the two leaves work the worker finishes (it waits a
/// while first: the follow may still be under way). Keyed like an
/// unfollow, `reader␟kind␟actor`; one per edge and direction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowJob {
    pub tenant: String,
    pub reader: String,
    pub actor: String,
    pub kind: EdgeKind,
    /// How many recent actions to show.
    pub backfill: usize,
    /// When the follow was asked for: where the edge begins.
    pub at: Millis,
}

/// What a follow job carries beside its key.
#[derive(Serialize, Deserialize)]
struct FollowPayload {
    backfill: usize,
    at: Millis,
}

impl FollowJob {
    /// Its job, queued at the follow's time.
    pub fn to_job(&self) -> StoreResult<Job> {
        let payload = FollowPayload {
            backfill: self.backfill,
            at: self.at,
        };
        Job::new(
            JobKind::Follow,
            &self.tenant,
            &self.key(),
            &payload,
            self.at,
        )
    }

    /// `reader␟kind␟actor`.
    pub fn key(&self) -> String {
        edge_key(&self.reader, codes::EDGE_KIND.name(self.kind), &self.actor)
    }

    /// The follow a job is for; a key of another shape is corrupt data.
    pub fn of_job(job: &Job) -> StoreResult<FollowJob> {
        let (reader, kind, actor) = edge_key_parts(job, "follow")?;
        let payload: FollowPayload = job.payload()?;
        Ok(FollowJob {
            tenant: job.tenant.clone(),
            reader: reader.to_owned(),
            actor: actor.to_owned(),
            kind: codes::EDGE_KIND.read_name(
                kind,
                format_args!("follow job {:?} of tenant {:?}", job.key, job.tenant),
            )?,
            backfill: payload.backfill,
            at: payload.at,
        })
    }
}
