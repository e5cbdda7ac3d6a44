//! A new follow (or friendship) shows the other user's recent actions at once,
//! as Stream's copy limit does: the actions the reader may see, newest first,
//! at most the backfill size, put into the reader's feed where their own time
//! places them. A backfill of 0 means going forward only.

use crate::events::{FeedEventKind, Hub};
use crate::model::{Action, FeedItem, Millis, Reason, ReasonKind, Scope};
use crate::store::{Backfill, FeedRange, Store, StoreResult};

use super::Access;

/// Actions a follow shows at once unless the request or `--follow-backfill`
/// says otherwise.
pub const DEFAULT_BACKFILL: usize = 100;
/// The most a follow may ask for.
pub const MAX_BACKFILL: usize = 1_000;

/// Outbox entries read per round while looking for actions the reader may see.
const ROUND: usize = 200;
/// Rounds at most: an outbox mostly hidden from the reader is not read whole.
const MAX_ROUNDS: usize = 10;

/// A new edge: `reader` now follows (or befriended) `actor`.
#[derive(Clone, Copy, Debug)]
pub struct NewEdge<'a> {
    pub tenant: &'a str,
    pub reader: &'a str,
    pub actor: &'a str,
    /// `Follows` or `Friend`.
    pub via: ReasonKind,
}

/// Puts up to `limit` of the actor's most recent actions that the reader may
/// see into the reader's feed, and tells a live reader. Returns the items
/// written.
pub async fn backfill(
    store: &dyn Store,
    hub: &Hub,
    edge: NewEdge<'_>,
    limit: usize,
    now: Millis,
) -> StoreResult<Vec<FeedItem>> {
    let NewEdge {
        tenant,
        reader,
        actor,
        via,
    } = edge;
    let mut picked: Vec<Backfill> = Vec::new();
    let mut older_than = None;
    for _ in 0..MAX_ROUNDS {
        if picked.len() >= limit {
            break;
        }
        let range = FeedRange {
            older_than,
            newer_than: None,
            limit: ROUND,
            from_oldest: false,
        };
        let positions = store.outbox(tenant, actor, range).await?;
        let Some(last) = positions.last() else {
            break;
        };
        older_than = Some(*last);
        let ids: Vec<_> = positions.iter().map(|p| p.action_id).collect();
        let mut actions = store.get_actions(tenant, &ids).await?;
        // The outbox's order, newest first.
        actions.sort_by_key(|a| std::cmp::Reverse((a.conducted, a.id.bytes())));
        let access = Access::load(store, tenant, reader, actions.iter()).await?;
        picked.extend(
            actions
                .iter()
                .filter(|a| !a.hidden && access.can_read(a))
                .take(limit - picked.len())
                .map(|a| Backfill {
                    action_id: a.id,
                    relevancy: a.conducted,
                    reason: Reason::new(reason(a, reader, via), &a.actor_id),
                }),
        );
        if positions.len() < ROUND {
            break;
        }
    }
    if picked.is_empty() {
        return Ok(Vec::new());
    }
    let written = store.backfill(tenant, reader, now, &picked).await?;
    hub.publish_feed_items(FeedEventKind::Added, tenant, None, written.iter().cloned());
    Ok(written)
}

/// Why the reader has the item: what a fan-out would have said, the most
/// specific reason first.
fn reason(action: &Action, reader: &str, via: ReasonKind) -> ReasonKind {
    match action.scope {
        Scope::Restricted if action.readers.iter().any(|r| r == reader) => ReasonKind::Restricted,
        Scope::Team => ReasonKind::Team,
        Scope::Department => ReasonKind::Department,
        _ => via,
    }
}
