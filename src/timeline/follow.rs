//! A new follow (or friendship, or follow of a group) shows the other
//! user's (the group's) recent actions at once, as Stream's copy limit
//! does: their public actions (the public actions sent to the group),
//! newest first, at most the backfill size, in the reader's feed where
//! their own time places them. A backfill of 0 means going forward only.
//!
//! Every model records where the new edge begins (its cut: just below the
//! oldest action shown), which is all a model that pulls the followee at
//! read needs; a model that materialises the follow also writes the items.

use crate::events::{FeedEventKind, Hub, Signal};
use crate::model::{EdgeKind, FeedItem, Millis, ObjectId, Position, Reason, Scope};
use crate::store::{
    Backfill, Cut, FeedRange, FollowJob, JobKind, Jobs, Outbox, Store, StoreResult, Timelines,
};

use super::{sources, FeedModel};
use crate::store::Records;

/// Actions a follow shows at once unless the request or `--follow-backfill`
/// says otherwise.
pub const DEFAULT_BACKFILL: usize = 100;
/// The most a follow may ask for.
pub const MAX_BACKFILL: usize = 1_000;

/// Outbox entries read per round while looking for actions the reader may see.
const ROUND: usize = 200;
/// Rounds at most: an outbox mostly hidden from the reader is not read whole.
const MAX_ROUNDS: usize = 10;

/// A new edge: `reader` now follows (or befriended) `actor`, or follows
/// the group `actor`.
#[derive(Clone, Copy, Debug)]
pub struct NewEdge<'a> {
    pub tenant: &'a str,
    pub reader: &'a str,
    pub actor: &'a str,
    pub kind: EdgeKind,
}

/// Queues `job`, before its edge is written: a kill before the backfill
/// is in leaves it to the worker ([`FollowJob`]). Answers whether it was
/// queued now (`false`: one for the same edge is pending).
pub async fn start(store: &dyn Store, job: &FollowJob) -> StoreResult<bool> {
    store.enqueue(&job.to_job()?).await
}

/// Shows what `job`'s new edge brings ([`backfill`], written from where
/// the feed model writes), as of the follow's time.
pub async fn show(
    store: &dyn Store,
    hub: &Hub,
    model: &FeedModel,
    job: &FollowJob,
) -> StoreResult<Vec<FeedItem>> {
    let (tenant, reader, actor, kind) = (&*job.tenant, &*job.reader, &*job.actor, job.kind);
    let write = model
        .behaviour()
        .written_from(store, tenant, reader, kind, actor)
        .await?;
    let edge = NewEdge {
        tenant,
        reader,
        actor,
        kind,
    };
    backfill(store, hub, edge, job.backfill, job.at, write).await
}

/// Ends `job` once its backfill is in (or not wanted). A no-op if it is
/// gone.
pub async fn done(store: &dyn Store, job: &FollowJob) -> StoreResult<()> {
    store
        .cancel(JobKind::Follow, &job.tenant, &job.key())
        .await
        .map(drop)
}

/// The outbox a `kind` edge to `to` reads.
fn outbox_of(kind: EdgeKind, to: &str) -> Outbox {
    match kind {
        EdgeKind::Group => Outbox::Sent(to.to_owned()),
        EdgeKind::Follows | EdgeKind::Friend => Outbox::Actor(to.to_owned()),
    }
}

/// Shows up to `limit` of the actor's most recent public actions: records
/// the edge's cut, writes those at or above `write_from` into the reader's
/// timeline (the rest are pulled at read), and tells a live reader of all.
/// Returns the items shown.
pub async fn backfill(
    store: &dyn Store,
    hub: &Hub,
    edge: NewEdge<'_>,
    limit: usize,
    now: Millis,
    write_from: Option<Position>,
) -> StoreResult<Vec<FeedItem>> {
    let NewEdge {
        tenant,
        reader,
        actor,
        kind,
    } = edge;
    let via = kind.reason();
    let mut picked: Vec<Backfill> = Vec::new();
    let mut older_than = None;
    // Going forward only: from just before now (an action of this very
    // millisecond is after the follow).
    let began = Position {
        relevancy: now - 1,
        action_id: ObjectId::from_bytes([0xff; 12]),
    };
    let mut since = began;
    for round in 0..MAX_ROUNDS {
        if picked.len() >= limit {
            break;
        }
        let range = FeedRange {
            older_than,
            newer_than: None,
            limit: ROUND,
            from_oldest: false,
        };
        let read = [(outbox_of(kind, actor), range)];
        let positions: Vec<Position> = store
            .outboxes(tenant, &read)
            .await?
            .pop()
            .unwrap_or_default()
            .into_iter()
            .map(|p| p.position)
            .collect();
        let Some(last) = positions.last() else {
            // The whole outbox was looked at.
            since = Position::MIN;
            break;
        };
        older_than = Some(*last);
        let ids: Vec<_> = positions.iter().map(|p| p.action_id).collect();
        let mut actions = store.get_actions(tenant, &ids).await?;
        // The outbox's order, newest first.
        actions.sort_by_key(|a| std::cmp::Reverse((a.conducted, a.id.bytes())));
        // Group and named actions reach the reader by their own routes.
        let shown = actions
            .iter()
            .filter(|a| a.scope == Scope::Public && !a.hidden)
            .take(limit - picked.len());
        picked.extend(shown.map(|a| Backfill {
            action_id: a.id,
            relevancy: a.conducted,
            reason: Reason::new(via, &a.actor_id),
            changed: now,
        }));
        if picked.len() >= limit {
            let oldest = picked.last().map(|b| Position {
                relevancy: b.relevancy,
                action_id: b.action_id,
            });
            since = oldest.map_or(since, |p| p.just_below());
        } else if positions.len() < ROUND {
            since = Position::MIN;
        } else if round + 1 == MAX_ROUNDS {
            since = *last;
        }
    }
    let cut = Cut {
        kind,
        actor: actor.to_owned(),
        since,
        began,
        until: None,
    };
    store.set_cut(tenant, reader, &cut).await?;
    if picked.is_empty() {
        return Ok(Vec::new());
    }
    let (written, pulled): (Vec<Backfill>, Vec<Backfill>) = picked.into_iter().partition(|b| {
        write_from.is_some_and(|from| {
            Position {
                relevancy: b.relevancy,
                action_id: b.action_id,
            } >= from
        })
    });
    let mut shown = store.backfill(tenant, reader, &written).await?;
    let ids: Vec<ObjectId> = pulled.iter().map(|b| b.action_id).collect();
    let held = store.materialised(tenant, reader, &ids).await?;
    // An item held of an action merged at read keeps its place, but takes
    // the follow's reason if its own is a scope's the action no longer has,
    // as one written does: its unfollow then takes it out, as every model
    // does (it came by the follow). The backfill writes nothing else for it.
    let refreshed: Vec<Backfill> = pulled
        .iter()
        .filter(|b| held.contains(&b.action_id))
        .cloned()
        .collect();
    if !refreshed.is_empty() {
        store.backfill(tenant, reader, &refreshed).await?;
    }
    shown.extend(
        pulled
            .into_iter()
            .filter(|b| !held.contains(&b.action_id))
            .map(|b| FeedItem {
                owner: reader.to_owned(),
                action_id: b.action_id,
                relevancy: b.relevancy,
                reason: b.reason,
                changed: b.relevancy,
                copy: None,
            }),
    );
    hub.publish_feed_items(FeedEventKind::Added, tenant, None, shown.iter().cloned());
    Ok(shown)
}

/// Most pulled items an ended edge announces as removed to a live reader:
/// the newest, which are the ones on their screen.
const MAX_ANNOUNCED: usize = 1_000;

/// An edge ended (`reader` no longer follows or befriends `actor`, or
/// follows the group `actor`): tells a live reader that the items they
/// pulled by it, and no other source of theirs gives, are gone (the
/// materialised ones are announced by the cleanup that removes them).
/// Call before the edge's cut is cleared; the edge itself is already gone.
pub async fn announce_unfollow(
    store: &dyn Store,
    hub: &Hub,
    tenant: &str,
    reader: &str,
    actor: &str,
    kind: EdgeKind,
) -> StoreResult<()> {
    if !hub.relays() && !hub.is_online(tenant, reader) {
        return Ok(());
    }
    let cuts = store.cuts(tenant, reader).await?;
    let since = cuts
        .iter()
        .find(|c| c.kind == kind && c.actor == actor && c.until.is_none())
        .map_or(Position::MIN, |c| c.since);
    hub.forward(Signal::Unfollowed {
        tenant: tenant.to_owned(),
        reader: reader.to_owned(),
        actor: actor.to_owned(),
        edge: kind.into(),
        since: since.into(),
    });
    tell_unfollowed(store, hub, tenant, reader, actor, kind, since).await
}

/// As [`announce_unfollow`], for a reader online in this process, with the
/// edge's cut read before it was cleared (`since`).
pub async fn tell_unfollowed(
    store: &dyn Store,
    hub: &Hub,
    tenant: &str,
    reader: &str,
    actor: &str,
    kind: EdgeKind,
    since: Position,
) -> StoreResult<()> {
    if !hub.is_online(tenant, reader) {
        return Ok(());
    }
    let (actors, followed) = sources::followed(store, tenant, reader).await?;
    let range = FeedRange {
        older_than: None,
        newer_than: Some(since),
        limit: MAX_ANNOUNCED,
        from_oldest: false,
    };
    let read = [(outbox_of(kind, actor), range)];
    let positions = store
        .outboxes(tenant, &read)
        .await?
        .pop()
        .unwrap_or_default();
    let ids: Vec<ObjectId> = positions.iter().map(|p| p.position.action_id).collect();
    let held = store.materialised(tenant, reader, &ids).await?;
    // What the reader's remaining edges still give stays.
    let remaining = sources::Sources {
        actors,
        followed,
        ..sources::Sources::default()
    };
    let gone: std::collections::HashSet<ObjectId> = store
        .get_actions(tenant, &ids)
        .await?
        .into_iter()
        .filter(|a| a.scope == Scope::Public && !a.hidden && !held.contains(&a.id))
        .filter(|a| remaining.public_reason(a).is_none())
        .map(|a| a.id)
        .collect();
    let gone = positions
        .into_iter()
        .filter(|p| gone.contains(&p.position.action_id))
        .map(|p| FeedItem {
            owner: reader.to_owned(),
            action_id: p.position.action_id,
            relevancy: p.position.relevancy,
            reason: Reason::new(kind.reason(), &p.actor),
            changed: p.position.relevancy,
            copy: None,
        });
    hub.deliver_feed_items(FeedEventKind::Removed, tenant, None, gone);
    Ok(())
}

/// An edge ended keeping its history: what came by it stays, so a model
/// that pulls it keeps reading the actor's outbox up to now for the reader
/// (a range beside any kept before; a later edge adds its own).
pub async fn keep_history(
    store: &dyn Store,
    tenant: &str,
    reader: &str,
    actor: &str,
    kind: EdgeKind,
    now: Millis,
) -> StoreResult<()> {
    let cuts = store.cuts(tenant, reader).await?;
    let mut cut = cuts
        .into_iter()
        .find(|c| c.kind == kind && c.actor == actor && c.until.is_none())
        .unwrap_or(Cut {
            kind,
            actor: actor.to_owned(),
            since: Position::MIN,
            began: Position::MIN,
            until: None,
        });
    cut.until = Some(Position {
        relevancy: now.saturating_add(1),
        action_id: ObjectId::from_bytes([0; 12]),
    });
    store.set_cut(tenant, reader, &cut).await
}

/// Puts back what an ended edge's cleanup took out that the reader's other
/// edges still give (a follow beside a friendship, an account followed
/// beside a group it sends to): it stays in their feed, now for the reason
/// those give ([`sources::Sources::public_reason`]). Returns the items put
/// back.
pub async fn put_back(
    store: &dyn Store,
    tenant: &str,
    reader: &str,
    removed: &[FeedItem],
    now: Millis,
) -> StoreResult<Vec<FeedItem>> {
    if removed.is_empty() {
        return Ok(Vec::new());
    }
    let (actors, followed) = sources::followed(store, tenant, reader).await?;
    if actors.is_empty() && followed.is_empty() {
        return Ok(Vec::new());
    }
    let remaining = sources::Sources {
        actors,
        followed,
        ..sources::Sources::default()
    };
    let ids: Vec<ObjectId> = removed.iter().map(|i| i.action_id).collect();
    let back: Vec<Backfill> = store
        .get_actions(tenant, &ids)
        .await?
        .into_iter()
        .filter(|a| !a.hidden)
        .filter_map(|a| {
            let kind = remaining.public_reason(&a)?;
            Some(Backfill {
                action_id: a.id,
                relevancy: a.conducted,
                reason: Reason::new(kind, &a.actor_id),
                changed: now,
            })
        })
        .collect();
    store.backfill(tenant, reader, &back).await
}
