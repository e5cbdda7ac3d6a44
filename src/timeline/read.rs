//! Reading a feed under a model: a [`Plan`] says which sources a reader
//! pulls and below which position; a page merges the reader's timeline with
//! those sources' outboxes, in one order, with the same positions (so the
//! same cursors) whatever the model.

use super::sources::{self, newest_first_within, Source};
use crate::model::{FeedItem, ObjectId, Position, Scope, Stamp};
use crate::store::{FeedRange, Store, StoreResult};

/// One entry of a merged page.
#[derive(Clone, Debug)]
pub struct Entry {
    pub item: FeedItem,
    /// Merged in from a source, not read from the timeline: shown only if
    /// the timeline does not hold the action (elsewhere, or as hidden), and
    /// only while the action is public.
    pub pulled: bool,
}

/// How one reader's feed is read.
#[derive(Debug, Default)]
pub struct Plan {
    /// The sources merged in at read; under `rivers`, read only once a
    /// page reaches below the river.
    sources: tokio::sync::OnceCell<Vec<Source>>,
    /// Whether there are sources to merge at all.
    pulls: bool,
    /// They are merged in strictly below this (above it, the timeline holds
    /// all they give).
    below: Option<Position>,
}

impl Plan {
    /// Nothing merged at read: the timeline holds the whole feed.
    pub fn timeline_only() -> Plan {
        Plan::default()
    }

    /// `sources` merged in at read, everywhere or strictly `below` a
    /// position.
    pub fn pulling(sources: Vec<Source>, below: Option<Position>) -> Plan {
        Plan {
            pulls: !sources.is_empty(),
            sources: tokio::sync::OnceCell::new_with(Some(sources)),
            below,
        }
    }

    /// The reader's sources merged in strictly below `below`, read only
    /// when a page reaches there (unless `known` already).
    pub fn pulling_below(below: Position, known: Option<Vec<Source>>) -> Plan {
        Plan {
            pulls: true,
            sources: tokio::sync::OnceCell::new_with(known),
            below: Some(below),
        }
    }

    /// The sources, read now if they were not yet.
    async fn sources(
        &self,
        store: &dyn Store,
        tenant: &str,
        reader: &str,
    ) -> StoreResult<&[Source]> {
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
        let (timeline, pulled) = match pulled_range {
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
            return Ok(timeline
                .into_iter()
                .map(|item| Entry {
                    item,
                    pulled: false,
                })
                .collect());
        }
        let held: std::collections::HashSet<ObjectId> =
            timeline.iter().map(|i| i.action_id).collect();
        let pulled_ids: std::collections::HashSet<ObjectId> =
            pulled.iter().map(|i| i.action_id).collect();
        let merged = timeline
            .into_iter()
            .chain(pulled.into_iter().filter(|i| !held.contains(&i.action_id)))
            .collect();
        Ok(newest_first_within(merged, range)
            .into_iter()
            .map(|item| Entry {
                pulled: pulled_ids.contains(&item.action_id) && !held.contains(&item.action_id),
                item,
            })
            .collect())
    }

    /// What the pulled sources added after `after` (a change stamp; a
    /// pulled item's stamp is its own time), oldest first, at most `limit`:
    /// the pulled part of a resumed subscription's replay. Only public
    /// actions not hidden, and not held by the timeline.
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
            .map(|item| Entry { item, pulled: true })
            .collect();
        settle(store, tenant, reader, &mut entries).await?;
        let ids: Vec<ObjectId> = entries.iter().map(|e| e.item.action_id).collect();
        let public: std::collections::HashSet<ObjectId> = store
            .get_actions(tenant, &ids)
            .await?
            .into_iter()
            .filter(|a| a.scope == Scope::Public && !a.hidden)
            .map(|a| a.id)
            .collect();
        let mut items: Vec<FeedItem> = entries
            .into_iter()
            .map(|e| e.item)
            .filter(|i| public.contains(&i.action_id))
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
/// was pulled.
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
    entries.retain(|e| !(e.pulled && held.contains(&e.item.action_id)));
    Ok(())
}
