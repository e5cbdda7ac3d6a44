//! Reading a feed under a model: a [`Plan`] says which sources a reader
//! pulls and below which position; a page merges the reader's timeline with
//! those sources' outboxes, in one order, with the same positions (so the
//! same cursors) whatever the model.

use super::sources::{self, newest_first_within, Sources};
use crate::model::{Action, FeedItem, ObjectId, Position, ReasonKind, Scope, Stamp};
use crate::store::{FeedRange, Store, StoreResult, Timelines};

/// Store rounds one page may take to get past items the reader cannot see.
pub const MAX_ROUNDS: usize = 4;

/// One entry of a merged page.
#[derive(Clone, Debug)]
pub struct Entry {
    pub item: FeedItem,
    /// Merged in from a source, not read from the timeline: shown only if
    /// the timeline does not hold the action (elsewhere, or as hidden), and
    /// only while the source still gives it ([`still_pulled`]).
    pub pulled: bool,
    /// For an item the timeline holds from a source, the reason the
    /// sources give it now, if another: a later scope's, which a fan-out
    /// run again would have written. It applies where it stands
    /// ([`Entry::reason_now`]).
    pub fresh: Option<crate::model::Reason>,
}

impl Entry {
    fn held(item: FeedItem) -> Entry {
        Entry {
            item,
            pulled: false,
            fresh: None,
        }
    }

    /// The item as it is shown with `action`: with the reason the sources
    /// give it now, where that still stands.
    pub fn reason_now(mut self, action: &Action) -> FeedItem {
        if let Some(reason) = self.fresh.take() {
            if still_pulled(reason.kind, action) {
                self.item.reason = reason;
            }
        }
        self.item
    }
}

/// Whether a pulled item still stands for its action as it is now: a
/// follow or friendship brings only public actions; a group's and a named
/// reader's outboxes list only what is scoped to them (who may read it
/// stays the access check's); a hidden action stays only in its actor's
/// feed, which never pulls it.
pub fn still_pulled(kind: ReasonKind, action: &Action) -> bool {
    !action.hidden
        && match kind {
            ReasonKind::Follows | ReasonKind::Friend => action.scope == Scope::Public,
            _ => true,
        }
}

/// How one reader's feed is read.
#[derive(Debug, Default)]
pub struct Plan {
    /// The sources merged in at read; under `rivers`, read only once a
    /// page reaches below the river.
    sources: tokio::sync::OnceCell<Sources>,
    /// Whether there are sources to merge at all.
    pulls: bool,
    /// They are merged in strictly below this (above it, the timeline holds
    /// all they give).
    below: Option<Position>,
    /// The reader is dormant: a river would serve their next reads (rivers).
    river_wanted: bool,
}

impl Plan {
    /// Nothing merged at read: the timeline holds the whole feed.
    pub fn timeline_only() -> Plan {
        Plan::default()
    }

    /// `sources` merged in at read, everywhere or strictly `below` a
    /// position.
    pub fn pulling(sources: Sources, below: Option<Position>) -> Plan {
        Plan {
            pulls: !sources.is_empty(),
            sources: tokio::sync::OnceCell::new_with(Some(sources)),
            below,
            river_wanted: false,
        }
    }

    /// The reader's sources merged in strictly below `below`, read only
    /// when a page reaches there.
    pub fn pulling_below(below: Position) -> Plan {
        Plan {
            pulls: true,
            below: Some(below),
            ..Plan::default()
        }
    }

    /// This plan, saying the reader is dormant: their river is for the
    /// reader of the plan to ask for, off the read's path
    /// ([`super::builds`]).
    pub fn wanting_river(self) -> Plan {
        Plan {
            river_wanted: true,
            ..self
        }
    }

    /// Whether the reader is dormant and wants a river built.
    pub fn river_wanted(&self) -> bool {
        self.river_wanted
    }

    /// The sources, read now if they were not yet.
    async fn sources(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
    ) -> StoreResult<&Sources> {
        let all = self
            .sources
            .get_or_try_init(|| sources::load(store, tenant, reader))
            .await?;
        Ok(all)
    }

    /// A range of the merged feed, newest first, at most `range.limit`
    /// entries (as a timeline range would give them).
    pub async fn page(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<Entry>> {
        let pulled_range = self.pulled_range(range);
        let timeline = store.feed_page(tenant, reader, range);
        let (timeline, mut pulled) = match pulled_range {
            // The sources are merged in strictly below `below`: a page the
            // timeline fills down to there holds nothing of theirs, so a
            // reader with a river reads only the river until a page
            // reaches below it. (From the oldest end, the sources come
            // first: read both at once.)
            Some(pulled_range)
                if !range.from_oldest && self.below.is_some_and(|b| b < Position::MAX) =>
            {
                let timeline = timeline.await?;
                let below = self.below.unwrap_or(Position::MAX);
                let full = timeline.len() >= range.limit;
                if full && timeline.last().is_some_and(|i| i.position() >= below) {
                    return Ok(timeline.into_iter().map(Entry::held).collect());
                }
                let all = self.sources(store, tenant, reader).await?;
                let pulled = sources::pull(store, tenant, reader, all, pulled_range).await?;
                (timeline, pulled)
            }
            Some(pulled_range) => {
                let pulled = async {
                    let all = self.sources(store, tenant, reader).await?;
                    sources::pull(store, tenant, reader, all, pulled_range).await
                };
                let (timeline, pulled) = tokio::join!(timeline, pulled);
                (timeline?, pulled?)
            }
            None => (timeline.await?, Vec::new()),
        };
        if pulled.is_empty() {
            return Ok(timeline.into_iter().map(Entry::held).collect());
        }
        let held: std::collections::HashSet<ObjectId> =
            timeline.iter().map(|i| i.action_id).collect();
        // The merge is whole only up to the pulled read's last item. The
        // pulled items the timeline holds too (raised by a bump) drop out
        // of it, so a pulled read cut at the limit may give fewer than the
        // range asks for, and the timeline's items past its last one would
        // be merged over pulled items never read. It reads on by as many as
        // dropped out (at most the timeline's page of them).
        if let Some(mut pulled_range) = pulled_range {
            let all = self.sources(store, tenant, reader).await?;
            loop {
                let in_both = pulled
                    .iter()
                    .filter(|i| held.contains(&i.action_id))
                    .count();
                if pulled.len() < pulled_range.limit || pulled.len() - in_both >= range.limit {
                    break;
                }
                pulled_range.limit = range.limit + in_both;
                pulled = sources::pull(store, tenant, reader, all, pulled_range).await?;
            }
        }
        let pulled_ids: std::collections::HashSet<ObjectId> =
            pulled.iter().map(|i| i.action_id).collect();
        // What the sources give for items the timeline holds from one.
        let mut fresh: std::collections::HashMap<ObjectId, crate::model::Reason> = pulled
            .iter()
            .filter(|i| held.contains(&i.action_id))
            .map(|i| (i.action_id, i.reason.clone()))
            .collect();
        let merged = timeline
            .into_iter()
            .chain(pulled.into_iter().filter(|i| !held.contains(&i.action_id)))
            .collect();
        Ok(newest_first_within(merged, range)
            .into_iter()
            .map(|item| {
                let from_source = held.contains(&item.action_id);
                Entry {
                    pulled: pulled_ids.contains(&item.action_id) && !from_source,
                    fresh: (from_source && item.reason.kind.pulled())
                        .then(|| fresh.remove(&item.action_id))
                        .flatten()
                        .filter(|r| *r != item.reason),
                    item,
                }
            })
            .collect())
    }

    /// What the pulled sources added after `after` (a change stamp; a
    /// pulled item's stamp is its own time), oldest first, at most `limit`:
    /// the pulled part of a resumed subscription's replay. Only what the
    /// sources still give ([`still_pulled`]), and not held by the timeline.
    pub async fn changes(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        let range = FeedRange {
            older_than: None,
            newer_than: Some(Position {
                relevancy: after.changed,
                action_id: after.action_id,
            }),
            limit,
            from_oldest: true,
        };
        let Some(range) = self.pulled_range(range) else {
            return Ok(Vec::new());
        };
        let all = self.sources(store, tenant, reader).await?;
        let items = sources::pull(store, tenant, reader, all, range).await?;
        let mut entries: Vec<Entry> = items
            .into_iter()
            .map(|item| Entry {
                item,
                pulled: true,
                fresh: None,
            })
            .collect();
        settle(store, tenant, reader, &mut entries).await?;
        let ids: Vec<ObjectId> = entries.iter().map(|e| e.item.action_id).collect();
        let actions: std::collections::HashMap<ObjectId, Action> = store
            .get_actions(tenant, &ids)
            .await?
            .into_iter()
            .map(|a| (a.id, a))
            .collect();
        let mut items: Vec<FeedItem> = entries
            .into_iter()
            .map(|e| e.item)
            .filter(|i| {
                actions
                    .get(&i.action_id)
                    .is_some_and(|a| still_pulled(i.reason.kind, a))
            })
            .collect();
        items.reverse();
        Ok(items)
    }

    /// The part of `range` the sources are read for, if any.
    fn pulled_range(&self, range: FeedRange) -> Option<FeedRange> {
        if !self.pulls {
            return None;
        }
        let older_than = match (range.older_than, self.below) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if older_than == Some(Position::MIN) {
            return None;
        }
        if let (Some(o), Some(n)) = (older_than, range.newer_than) {
            if o <= n {
                return None;
            }
        }
        Some(FeedRange {
            older_than,
            ..range
        })
    }
}

/// Drops the pulled entries whose action the reader's timeline holds
/// elsewhere (raised by a bump) or as hidden. One store call, if any entry
/// was pulled, and one more per entry the timeline holds: it may hold it
/// where it was pulled, written since the page read the timeline (a river
/// being built beside the read), and then it stays.
pub async fn settle(
    store: &dyn Store,
    tenant: &str,
    reader: &str,
    entries: &mut Vec<Entry>,
) -> StoreResult<()> {
    let pulled: Vec<ObjectId> = entries
        .iter()
        .filter(|e| e.pulled)
        .map(|e| e.item.action_id)
        .collect();
    if pulled.is_empty() {
        return Ok(());
    }
    let held = store.materialised(tenant, reader, &pulled).await?;
    if held.is_empty() {
        return Ok(());
    }
    let where_held = futures_util::future::try_join_all(
        held.iter().map(|id| store.feed_item(tenant, reader, *id)),
    )
    .await?;
    let in_place: std::collections::HashSet<(ObjectId, Position)> = where_held
        .into_iter()
        .flatten()
        .map(|i| (i.action_id, i.position()))
        .collect();
    entries.retain_mut(|e| {
        if !(e.pulled && held.contains(&e.item.action_id)) {
            return true;
        }
        let stays = in_place.contains(&(e.item.action_id, e.item.position()));
        e.pulled = !stays;
        stays
    });
    Ok(())
}
