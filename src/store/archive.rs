//! Every record a store holds, in a form that does not depend on the backend:
//! what `riverfeed export` writes as JSON Lines and `riverfeed import` reads
//! back, into the same backend or another one. A deployment moves from the
//! embedded store to MongoDB this way, and backups are made this way.
//!
//! What is carried, as it was: users and their profiles, edges (follows,
//! friendships, group follows), memberships (role, start), assignments,
//! supervisors, actions (ids, counts, scope, fan-out state), comments and
//! likes, feed items (relevancies, reasons, change stamps, hidden-item
//! tombstones) and the notification records below. Work in flight is
//! carried as work to do: a fan-out that was in progress is queued again, as
//! after a crash; queued bumps, notice jobs and the cleanups of pending
//! unfollows and group leaves stay queued (a job a worker held waits again).
//! Importing the same records twice leaves one copy of each.
//!
//! Rebuilt on import rather than carried: discussions (from the comments),
//! group feeds (from the actions), and rivers (on a reader's next read). A
//! hidden tombstone the embedded store exports keeps no reason of its own
//! (the action's actor stands in, as a follow). Not carried, so an import changes what the pulling
//! models show: cuts and the ranges `keepHistory` kept (a pulling model
//! then reads a followee's whole outbox), celebrity marks (`hybrid` marks an
//! actor again at their next action), and the deployment's `meta`
//! values (the feed model last run, MongoDB's timeline layout, the cursor
//! key: the target keeps its own). Under `push`, which materialises everything, an import is
//! complete.
//!
//! Webhooks travel too: each registration (its secrets included: an
//! archive is as secret as the store), each dead delivery, and each
//! delivery still to send, which imports as waiting ([`import_webhooks`]).
//!
//! Notifications travel as whole records: each notice group with its members
//! (read and archived ones included), each user's inbox (seen watermark,
//! preferences, mutes, markers) and each queued notice job. They are written
//! through [`NoticeStore`] and [`Records`], the way every backend writes
//! them, by [`import_notices`]: groups and inboxes under their version
//! (compare and set), jobs as queued.

use std::collections::HashSet;

use async_trait::async_trait;
use futures_util::stream::{self, BoxStream, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::records::SEPARATOR;
use super::relations::membership_of;
use super::{
    BumpJob, ErrorKind, FanOutJob, JobStore, NoticeJob, NoticeSource, NoticeStore, StoreError,
    StoreResult, Unfollow,
};
use super::{Notices, RecordKind, RecordStore, Records, Relation};
use crate::model::limits::{check_kept_id, check_text, InputError};
use crate::model::{
    Action, Comment, EdgeKind, FanOutState, FeedItem, GroupKind, Inbox, MembershipRole, Millis,
    NoticeGroup, ObjectId, Reason,
};

/// Which kind of edge a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EdgeRecordKind {
    /// `from` follows `to`.
    Follows,
    /// `from` and `to` are friends (one record per pair, `from < to`).
    Friend,
    /// `from` follows the group `to`.
    Group,
}

/// One feed item as stored, with its tombstone flag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemRecord {
    pub owner: String,
    pub action_id: ObjectId,
    pub relevancy: Millis,
    pub reason: Reason,
    pub changed: Millis,
    /// The reader hid the item: it stays out of the feed, and a re-run of the
    /// fan-out does not bring it back.
    #[serde(default)]
    pub hidden: bool,
}

impl ItemRecord {
    /// The record of a visible item.
    pub fn visible(item: FeedItem) -> Self {
        Self {
            owner: item.owner,
            action_id: item.action_id,
            relevancy: item.relevancy,
            reason: item.reason,
            changed: item.changed,
            hidden: false,
        }
    }
}

/// One record of one tenant. The JSON form is an object with a `record` field
/// naming the variant.
// Unboxed on purpose: records live one at a time in a stream, or a batch (a
// thousand) at a time in a Vec, where a few hundred bytes each is nothing and
// a box per action would be an allocation per action.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "record",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Record {
    /// A user, with a display name if one was set.
    User {
        tenant: String,
        id: String,
        name: Option<String>,
    },
    Edge {
        tenant: String,
        kind: EdgeRecordKind,
        from: String,
        to: String,
    },
    Membership {
        tenant: String,
        group: String,
        group_kind: GroupKind,
        user: String,
        role: MembershipRole,
        /// When the membership began (0 in archives written before
        /// memberships had a start).
        #[serde(default)]
        since: Millis,
    },
    Assignment {
        tenant: String,
        user: String,
        ref_id: String,
    },
    Supervisor {
        tenant: String,
        user: String,
        supervisor: String,
    },
    /// An action, with its counts and fan-out state (tenant inside).
    Action {
        action: Action,
    },
    /// A comment; `bumpQueued` when the bump it causes is still to do.
    Comment {
        tenant: String,
        comment: Comment,
        bump_queued: bool,
    },
    Like {
        tenant: String,
        action_id: ObjectId,
        user: String,
    },
    FeedItem {
        tenant: String,
        item: ItemRecord,
    },
    /// A notice group whole, its members inside (tenant and owner inside).
    /// Its `version` is the source store's; an import stores it anew (see
    /// [`import_notices`]).
    NoticeGroup {
        group: NoticeGroup,
    },
    /// A user's inbox whole: what was seen, preferences, mutes, markers.
    Inbox {
        inbox: Inbox,
    },
    /// A queued notice job, without its lease: one a worker held when the
    /// records were taken imports as waiting, as after a crash.
    NoticeJob {
        job: NoticeJob,
    },
    /// An unfollow or a group left whose cleanup has not run, without its
    /// lease: reads in the target apply it, and a worker there takes its
    /// items out.
    Cleanup {
        unfollow: Unfollow,
    },
    /// A webhook registration, its secrets included.
    Webhook {
        tenant: String,
        webhook: crate::model::Webhook,
    },
    /// A webhook delivery given up on, kept to replay.
    DeadDelivery {
        tenant: String,
        dead: crate::model::DeadDelivery,
    },
    /// A webhook delivery still to send, without its lease: it imports as
    /// waiting, its day of retries counted from `queued`.
    WebhookDelivery {
        tenant: String,
        delivery: crate::model::Delivery,
        queued: Millis,
    },
}

impl Record {
    /// The tenant the record belongs to.
    pub fn tenant(&self) -> &str {
        match self {
            Record::User { tenant, .. }
            | Record::Edge { tenant, .. }
            | Record::Membership { tenant, .. }
            | Record::Assignment { tenant, .. }
            | Record::Supervisor { tenant, .. }
            | Record::Comment { tenant, .. }
            | Record::Like { tenant, .. }
            | Record::FeedItem { tenant, .. }
            | Record::Webhook { tenant, .. }
            | Record::DeadDelivery { tenant, .. }
            | Record::WebhookDelivery { tenant, .. } => tenant,
            Record::Action { action } => &action.tenant,
            Record::NoticeGroup { group } => &group.tenant,
            Record::Inbox { inbox } => &inbox.tenant,
            Record::NoticeJob { job } => &job.tenant,
            Record::Cleanup { unfollow } => &unfollow.tenant,
        }
    }

    /// Checks the ids and texts a record holds the way the API checks them
    /// ([`check_kept_id`], [`check_text`]), so that an import never writes
    /// what the API would have refused.
    pub fn check(&self) -> Result<(), InputError> {
        check_kept_id("tenant", self.tenant())?;
        match self {
            Record::User { id, name, .. } => {
                check_kept_id("id", id)?;
                name.as_deref()
                    .map_or(Ok(()), |name| check_text("name", name))
            }
            Record::Edge { from, to, .. } => {
                check_kept_id("from", from)?;
                check_kept_id("to", to)?;
                if from == to {
                    return Err(InputError::new(format!("an edge from {from:?} to itself")));
                }
                Ok(())
            }
            Record::Membership { group, user, .. } => {
                check_kept_id("group", group)?;
                check_kept_id("user", user)
            }
            Record::Assignment { user, ref_id, .. } => {
                check_kept_id("user", user)?;
                check_kept_id("refId", ref_id)
            }
            Record::Supervisor {
                user, supervisor, ..
            } => {
                check_kept_id("user", user)?;
                check_kept_id("supervisor", supervisor)
            }
            Record::Action { action } => check_action(action),
            Record::Comment { comment, .. } => {
                check_kept_id("authorId", &comment.author_id)?;
                check_text("text", &comment.text)
            }
            Record::Like { user, .. } => check_kept_id("user", user),
            Record::FeedItem { item, .. } => check_kept_id("owner", &item.owner),
            Record::NoticeGroup { group } => {
                // The key is not an id: it joins ids and may be longer.
                check_kept_id("owner", &group.owner)?;
                group
                    .members
                    .iter()
                    .try_for_each(|m| check_kept_id("actor", &m.actor))
            }
            Record::Inbox { inbox } => check_kept_id("owner", &inbox.owner),
            Record::NoticeJob { job } => match &job.source {
                NoticeSource::Like { user, .. } => check_kept_id("user", user),
                NoticeSource::Assigned { ref_id, user, by } => {
                    check_kept_id("refId", ref_id)?;
                    check_kept_id("user", user)?;
                    check_kept_id("by", by)
                }
            },
            Record::Cleanup { unfollow } => {
                check_kept_id("reader", &unfollow.reader)?;
                check_kept_id("actor", &unfollow.actor)
            }
            Record::Webhook { webhook, .. } => {
                check_kept_id("id", &webhook.id)?;
                crate::model::Webhook::check_url(&webhook.url)
                    .map(drop)
                    .map_err(InputError::new)
            }
            Record::DeadDelivery { dead, .. } => {
                check_kept_id("webhook", &dead.delivery.webhook)?;
                check_kept_id("message", &dead.delivery.message)
            }
            Record::WebhookDelivery { delivery, .. } => {
                check_kept_id("webhook", &delivery.webhook)?;
                check_kept_id("message", &delivery.message)
            }
        }
    }

    /// A short name of the variant, for counts and messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::User { .. } => "user",
            Record::Edge { .. } => "edge",
            Record::Membership { .. } => "membership",
            Record::Assignment { .. } => "assignment",
            Record::Supervisor { .. } => "supervisor",
            Record::Action { .. } => "action",
            Record::Comment { .. } => "comment",
            Record::Like { .. } => "like",
            Record::FeedItem { .. } => "feedItem",
            Record::NoticeGroup { .. } => "noticeGroup",
            Record::Inbox { .. } => "inbox",
            Record::NoticeJob { .. } => "noticeJob",
            Record::Cleanup { .. } => "cleanup",
            Record::Webhook { .. } => "webhook",
            Record::DeadDelivery { .. } => "deadDelivery",
            Record::WebhookDelivery { .. } => "webhookDelivery",
        }
    }
}

/// An action's ids, and its descriptor's strings: every one is an id, a
/// name or a text, so none is longer than a text may be (which of them is
/// which is the descriptor file's to say, and an import does not read it).
fn check_action(action: &Action) -> Result<(), InputError> {
    check_kept_id("actorId", &action.actor_id)?;
    let lists = [
        ("readers", &action.readers),
        ("scopeGroups", &action.scope_groups),
        ("refIds", &action.ref_ids),
        ("tags", &action.tags),
        ("to", &action.to),
    ];
    for (field, ids) in lists {
        ids.iter().try_for_each(|id| check_kept_id(field, id))?;
    }
    fn strings(field: &str, value: &serde_json::Value) -> Result<(), InputError> {
        match value {
            serde_json::Value::String(text) => check_text(field, text),
            serde_json::Value::Array(items) => items.iter().try_for_each(|v| strings(field, v)),
            serde_json::Value::Object(fields) => {
                fields.iter().try_for_each(|(name, v)| strings(name, v))
            }
            _ => Ok(()),
        }
    }
    let descriptor = &action.descriptor;
    descriptor
        .fields()
        .iter()
        .try_for_each(|(name, value)| strings(&format!("{}.{name}", descriptor.type_name()), value))
}

/// Export and import of whole stores. Part of every [`super::Store`].
#[async_trait]
pub trait Archive: Send + Sync {
    /// Every record of `tenant`, or of all tenants, streamed. Users and the
    /// graph come first, then actions, then what refers to actions (comments,
    /// likes, feed items, then notice groups, inboxes and notice jobs, then
    /// pending cleanups), so
    /// that an import in stream order never meets a reference to something it
    /// has not written yet.
    fn export<'a>(&'a self, tenant: Option<&'a str>) -> BoxStream<'a, StoreResult<Record>>;

    /// Writes records as they are. A record that is already there is
    /// replaced, so importing twice leaves one copy.
    async fn import(&self, records: &[Record]) -> StoreResult<()>;
}

/// Whether the store holds anything of `tenant` that an export carries:
/// the first record of its export, or none.
pub async fn holds_tenant<S: Archive + ?Sized>(store: &S, tenant: &str) -> StoreResult<bool> {
    use futures_util::StreamExt as _;
    match store.export(Some(tenant)).next().await {
        None => Ok(false),
        Some(Ok(_)) => Ok(true),
        Some(Err(err)) => Err(err),
    }
}

/// Writes the webhook records among `records` through [`RecordStore`] and
/// [`JobStore`], for every backend's [`Archive::import`]: registrations
/// and dead deliveries replace what the target has under their keys, and
/// deliveries are queued as waiting (one queued already stays as it is).
pub async fn import_webhooks<S>(store: &S, records: &[Record]) -> StoreResult<()>
where
    S: JobStore + RecordStore + ?Sized,
{
    use super::records::{dead_delivery_key, encode_body};
    for record in records {
        match record {
            Record::Webhook { tenant, webhook } => {
                let body = encode_body(webhook, "webhook")?;
                let kind = RecordKind::Webhook;
                store
                    .put_record(kind, tenant, &webhook.id, Some(body), None)
                    .await?;
            }
            Record::DeadDelivery { tenant, dead } => {
                let key = dead_delivery_key(&dead.delivery.webhook, &dead.delivery.message);
                let body = encode_body(dead, "dead delivery")?;
                let kind = RecordKind::DeadDelivery;
                store
                    .put_record(kind, tenant, &key, Some(body), None)
                    .await?;
            }
            Record::WebhookDelivery {
                tenant,
                delivery,
                queued,
            } => {
                store
                    .enqueue(&super::WebhookJob::of(tenant, delivery, *queued)?)
                    .await?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// A stored webhook or dead delivery (by `kind`) as an archive carries it,
/// for the backends' exports.
pub fn webhook_record(
    kind: RecordKind,
    tenant: &str,
    key: &str,
    stored: &super::Stored,
) -> StoreResult<Record> {
    match kind {
        RecordKind::Webhook => Ok(Record::Webhook {
            webhook: super::records::decode_webhook(stored, tenant, key)?,
            tenant: tenant.to_owned(),
        }),
        _ => Ok(Record::DeadDelivery {
            dead: super::records::decode_body(
                &stored.body,
                format_args!("dead delivery {tenant}/{}", key.replace(SEPARATOR, "/")),
            )?,
            tenant: tenant.to_owned(),
        }),
    }
}

/// Tries at writing one group or inbox over what is stored, when other
/// writes keep coming first.
const NOTICE_ATTEMPTS: usize = 10;

/// Notification records written at once: writes of different keys do not
/// wait for each other (the embedded store syncs them together, MongoDB
/// takes them over several connections).
const NOTICE_WRITES_AT_ONCE: usize = 32;

/// Imports the notification records among `records` through [`NoticeStore`],
/// and queues the bumps of the comments whose bump was still to do
/// ([`JobStore`]), for every backend's [`Archive::import`], after the
/// records the jobs belong to; other records are skipped.
///
/// - A group is stored as version 1, as a new group is. Where its owner has a
///   group of the same key already (a second import, or a target in use), the
///   archive's group replaces it as other records replace theirs: its
///   members, counts and position, written as the next version of the stored
///   group, which keeps the id it has in the target (an owner has one group
///   per key; pages and live events there name that id).
/// - An inbox is stored as version 1, or as the next version of the one
///   stored, which it replaces.
/// - A job is queued as waiting; a job of the same key queued already (or
///   held by a worker) stays as it is, as queueing it again would leave it.
///
/// Records of different keys are written concurrently; of one key, only the
/// one that writing them in order would leave is written (the last group or
/// inbox, the first job).
pub async fn import_notices<S>(store: &S, records: &[Record]) -> StoreResult<()>
where
    S: NoticeStore + JobStore + RecordStore + ?Sized,
{
    let mut seen = HashSet::new();
    let mut keep = vec![false; records.len()];
    // A job: the first of its key is queued; the others would change nothing.
    for (n, record) in records.iter().enumerate() {
        if let Some(key @ (NoticeKind::Job, ..)) = notice_key(record) {
            keep[n] = seen.insert(key);
        }
    }
    // A group or an inbox: the last of its key replaces the others.
    for (n, record) in records.iter().enumerate().rev() {
        if let Some(key @ (NoticeKind::Group | NoticeKind::Inbox, ..)) = notice_key(record) {
            keep[n] = seen.insert(key);
        }
    }
    let writes = records.iter().zip(keep).filter(|(_, kept)| *kept);
    stream::iter(writes.map(|(record, _)| Ok(record)))
        .try_for_each_concurrent(NOTICE_WRITES_AT_ONCE, |record| async move {
            match record {
                Record::NoticeGroup { group } => import_group(store, group).await,
                Record::Inbox { inbox } => import_inbox(store, inbox).await,
                Record::NoticeJob { job } => store.enqueue(&job.to_job()?).await.map(|_| ()),
                _ => Ok(()),
            }
        })
        .await?;
    // A pending cleanup is queued again (reads apply it from now on), and
    // so are an action's fan-out and a comment's bump still to do, as
    // `insert_action` and `add_comment` queue them (a second import of any
    // changes nothing).
    let fan_outs = records.iter().filter_map(|record| match record {
        Record::Action { action } if action.fan_out.state != FanOutState::Done => {
            Some(FanOutJob::of(&action.tenant, action.id))
        }
        _ => None,
    });
    stream::iter(fan_outs)
        .try_for_each_concurrent(NOTICE_WRITES_AT_ONCE, |job| async move {
            store.enqueue(&job).await.map(|_| ())
        })
        .await?;
    let cleanups = records.iter().filter_map(|record| match record {
        Record::Cleanup { unfollow } => Some(unfollow),
        _ => None,
    });
    stream::iter(cleanups.map(Ok))
        .try_for_each_concurrent(NOTICE_WRITES_AT_ONCE, |unfollow| async move {
            store.enqueue(&unfollow.to_job(0)?).await.map(|_| ())
        })
        .await?;
    let bumps = records.iter().filter_map(|record| match record {
        Record::Comment {
            tenant,
            comment,
            bump_queued: true,
        } => Some(BumpJob {
            tenant: tenant.clone(),
            comment: comment.clone(),
        }),
        _ => None,
    });
    stream::iter(bumps.map(Ok))
        .try_for_each_concurrent(NOTICE_WRITES_AT_ONCE, |bump| async move {
            store.enqueue(&bump.to_job()?).await.map(|_| ())
        })
        .await
}

/// The record that carries one relation as a backend keeps it (from its
/// outgoing side); `None` for the second side of a friendship, which the
/// first one carries.
pub fn relation_record(
    relation: Relation,
    tenant: String,
    from: String,
    to: String,
    attrs: &[u8],
) -> StoreResult<Option<Record>> {
    let edge = |kind| Record::Edge {
        tenant: tenant.clone(),
        kind,
        from: from.clone(),
        to: to.clone(),
    };
    Ok(Some(match relation {
        Relation::Edge(EdgeKind::Follows) => edge(EdgeRecordKind::Follows),
        Relation::Edge(EdgeKind::Friend) if from < to => edge(EdgeRecordKind::Friend),
        Relation::Edge(EdgeKind::Friend) => return Ok(None),
        Relation::Edge(EdgeKind::Group) => edge(EdgeRecordKind::Group),
        Relation::Member => {
            let membership = membership_of(&tenant, &from, &to, attrs)?;
            Record::Membership {
                tenant,
                group: to,
                group_kind: membership.kind,
                user: from,
                role: membership.role,
                since: membership.since,
            }
        }
        Relation::Assigned => Record::Assignment {
            tenant,
            user: from,
            ref_id: to,
        },
        Relation::ReportsTo => Record::Supervisor {
            tenant,
            user: from,
            supervisor: to,
        },
        Relation::Likes => Record::Like {
            action_id: ObjectId::parse_str(&to).map_err(|_| {
                StoreError::corrupt(
                    format_args!("like {tenant}/{from}"),
                    format_args!("an action id {to:?}"),
                )
            })?,
            tenant,
            user: from,
        },
    }))
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum NoticeKind {
    Group,
    Inbox,
    Job,
}

/// What a notification record is stored under (tenant, owner, key): of one
/// key, one record is written.
fn notice_key(record: &Record) -> Option<(NoticeKind, &str, &str, String)> {
    match record {
        Record::NoticeGroup { group } => Some((
            NoticeKind::Group,
            &group.tenant,
            &group.owner,
            group.key.clone(),
        )),
        Record::Inbox { inbox } => Some((
            NoticeKind::Inbox,
            &inbox.tenant,
            &inbox.owner,
            String::new(),
        )),
        Record::NoticeJob { job } => Some((NoticeKind::Job, &job.tenant, "", job.source.key())),
        _ => None,
    }
}

async fn import_group<S>(store: &S, group: &NoticeGroup) -> StoreResult<()>
where
    S: NoticeStore + ?Sized,
{
    let mut group = group.clone();
    group.version = 1;
    for _ in 0..NOTICE_ATTEMPTS {
        if store.put_notice_group(&group).await? {
            return Ok(());
        }
        if let Some(stored) = store
            .notice_group(&group.tenant, &group.owner, &group.key)
            .await?
        {
            group.id = stored.id;
            group.version = stored.version + 1;
        }
    }
    Err(lost("notice group", &group.owner, &group.key))
}

async fn import_inbox<S>(store: &S, inbox: &Inbox) -> StoreResult<()>
where
    S: RecordStore + ?Sized,
{
    let mut inbox = inbox.clone();
    inbox.version = 1;
    for _ in 0..NOTICE_ATTEMPTS {
        if store.put_inbox(&inbox).await? {
            return Ok(());
        }
        inbox.version = store.inbox(&inbox.tenant, &inbox.owner).await?.version + 1;
    }
    Err(lost("inbox", &inbox.owner, ""))
}

fn lost(what: &str, owner: &str, key: &str) -> StoreError {
    StoreError::new(
        ErrorKind::Unavailable,
        format!(
            "importing {owner}'s {what} {key}: not written over what is stored in \
             {NOTICE_ATTEMPTS} attempts (other writes kept coming first); import it \
             again when the store is quiet"
        ),
    )
}
