//! A layout with rivers over it: pulled items of readers who have a river
//! go into `timeline_cache` (see `cache`), everything else into the layout
//! under it. Reads merge the two; removals, hides, bumps and copies reach
//! both. A reader's action is in one of them (the river takes only what
//! the layout does not hold), or, for a moment during a bump that moves it
//! from the river to the layout, in both; reads keep the higher.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use futures_util::stream::BoxStream;

use super::cache::{cache_id, RiverCache};
use super::{dedup, Layout, Stored, Which};
use crate::model::{ActionCopy, FeedItem, Millis, ObjectId, Reason, ReasonKind, Stamp};
use crate::store::{FeedRange, StoreResult};

pub(in crate::store::mongo) struct Cached {
    pub(super) base: Box<dyn Layout>,
    pub(super) rivers: RiverCache,
}

#[async_trait]
impl Layout for Cached {
    async fn insert(&self, tenant: &str, items: &[FeedItem]) -> StoreResult<HashSet<usize>> {
        let pulled: Vec<(usize, &FeedItem)> = items
            .iter()
            .enumerate()
            .filter(|(_, i)| i.reason.kind.pulled())
            .collect();
        let (mut taken, mut skipped) = (HashSet::new(), HashSet::new());
        if !pulled.is_empty() && self.rivers.active() {
            let owners: HashSet<&str> = pulled.iter().map(|(_, i)| i.owner.as_str()).collect();
            let owners: Vec<&str> = owners.into_iter().collect();
            let actions: HashSet<ObjectId> = pulled.iter().map(|(_, i)| i.action_id).collect();
            let actions: Vec<ObjectId> = actions.into_iter().collect();
            let mut holding = self.rivers.holding(tenant, &owners, &actions).await?;
            let to_rivers: Vec<(usize, &FeedItem)> = pulled
                .into_iter()
                .filter(|(_, i)| holding.contains_key(&i.owner))
                .collect();
            if !to_rivers.is_empty() {
                // Not into a river what the layout holds (an own or bumped
                // item, a tombstone of a hidden one), nor what it holds.
                let owners: Vec<&str> = holding.keys().map(String::as_str).collect();
                let below = self.base.holders(tenant, &owners, &actions).await?;
                let mut fresh = Vec::new();
                for (i, item) in to_rivers {
                    taken.insert(i);
                    let held_here = holding
                        .get_mut(&item.owner)
                        .is_some_and(|h| !h.insert(item.action_id));
                    if held_here || below.contains(&(item.owner.clone(), item.action_id)) {
                        skipped.insert(i);
                    } else {
                        fresh.push(item);
                    }
                }
                self.rivers.push(tenant, &fresh).await?;
                // Looked for again once pushed: one the layout came to hold
                // meanwhile (hidden, or raised, while this was under way)
                // goes out of the river. A hide writes its tombstone before
                // it marks the river's entry gone, so one of the two sees
                // the other.
                if !fresh.is_empty() {
                    let pushed: Vec<ObjectId> = fresh.iter().map(|i| i.action_id).collect();
                    let readers: HashSet<&str> = fresh.iter().map(|i| i.owner.as_str()).collect();
                    let readers: Vec<&str> = readers.into_iter().collect();
                    let mut since: HashMap<String, Vec<ObjectId>> = HashMap::new();
                    for (owner, id) in self.base.holders(tenant, &readers, &pushed).await? {
                        since.entry(owner).or_default().push(id);
                    }
                    for (owner, ids) in since {
                        self.rivers
                            .mark_gone(bson::doc! { "_id": cache_id(tenant, &owner) }, &ids)
                            .await?;
                    }
                }
            }
        }
        let rest: Vec<usize> = (0..items.len()).filter(|i| !taken.contains(i)).collect();
        let below: Vec<FeedItem> = rest.iter().map(|&i| items[i].clone()).collect();
        let refused = self.base.insert(tenant, &below).await?;
        skipped.extend(refused.into_iter().map(|k| rest[k]));
        Ok(skipped)
    }

    async fn page(
        &self,
        tenant: &str,
        owner: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<FeedItem>> {
        if !self.rivers.read() {
            return self.base.page(tenant, owner, range).await;
        }
        let (below, river) = tokio::join!(
            self.base.page(tenant, owner, range),
            self.rivers.of(tenant, owner)
        );
        let mut items = below?;
        if let Some(river) = river? {
            items.extend(river.live().filter(|i| range.holds(i.position())));
            dedup(&mut items);
            range.cut(&mut items, FeedItem::position);
        }
        Ok(items)
    }

    async fn changes(
        &self,
        tenant: &str,
        owner: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        if !self.rivers.read() {
            return self.base.changes(tenant, owner, after, limit).await;
        }
        let (below, river) = tokio::join!(
            self.base.changes(tenant, owner, after, limit),
            self.rivers.of(tenant, owner)
        );
        let mut items = below?;
        if let Some(river) = river? {
            items.extend(river.live().filter(|i| i.stamp() > after));
            dedup(&mut items);
            items.sort_by_key(FeedItem::stamp);
            items.truncate(limit);
        }
        Ok(items)
    }

    async fn holders(
        &self,
        tenant: &str,
        owners: &[&str],
        ids: &[ObjectId],
    ) -> StoreResult<HashSet<(String, ObjectId)>> {
        let mut held = self.base.holders(tenant, owners, ids).await?;
        let wanted: HashSet<&ObjectId> = ids.iter().collect();
        for river in self.rivers.naming(tenant, Some(owners), ids).await? {
            held.extend(
                river
                    .live()
                    .filter(|i| wanted.contains(&i.action_id))
                    .map(|i| (i.owner, i.action_id)),
            );
        }
        Ok(held)
    }

    async fn item(&self, tenant: &str, owner: &str, id: ObjectId) -> StoreResult<Option<FeedItem>> {
        let below = self.base.item(tenant, owner, id).await?;
        if !self.rivers.read() {
            return Ok(below);
        }
        let mut items: Vec<FeedItem> = self
            .rivers
            .naming(tenant, Some(&[owner]), &[id])
            .await?
            .iter()
            .flat_map(|r| r.live().filter(|i| i.action_id == id).collect::<Vec<_>>())
            .chain(below)
            .collect();
        // In both for a moment during a bump's move: the higher stands.
        dedup(&mut items);
        Ok(items.pop())
    }

    async fn hide(&self, tenant: &str, owner: &str, id: ObjectId) -> StoreResult<Option<FeedItem>> {
        // A tombstone in the layout (which outlives the river), then out
        // of the river: a delivery into the river under way meanwhile sees
        // the tombstone once it has pushed (see `insert`).
        let in_river = self
            .rivers
            .naming(tenant, Some(&[owner]), &[id])
            .await?
            .iter()
            .flat_map(|r| r.live().filter(|i| i.action_id == id).collect::<Vec<_>>())
            .next();
        let below = self.base.hide(tenant, owner, id).await?;
        self.rivers
            .mark_gone(
                bson::doc! { "_id": cache_id(tenant, owner) },
                std::slice::from_ref(&id),
            )
            .await?;
        Ok(in_river.or(below))
    }

    async fn remove(
        &self,
        tenant: &str,
        owner: Option<&str>,
        ids: &[ObjectId],
    ) -> StoreResult<Vec<FeedItem>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let owners = owner.map(|o| [o]);
        let rivers = self
            .rivers
            .naming(tenant, owners.as_ref().map(|o| &o[..]), ids)
            .await?;
        let wanted: HashSet<&ObjectId> = ids.iter().collect();
        let mut removed: Vec<FeedItem> = rivers
            .iter()
            .flat_map(|r| {
                r.live()
                    .filter(|i| wanted.contains(&i.action_id))
                    .collect::<Vec<_>>()
            })
            .collect();
        if !removed.is_empty() {
            let mut filter = bson::doc! { "tenant": tenant, "e.a": { "$in": ids } };
            if let Some(owner) = owner {
                filter.insert("_id", cache_id(tenant, owner));
            }
            self.rivers.mark_gone(filter, ids).await?;
        }
        removed.extend(self.base.remove(tenant, owner, ids).await?);
        dedup(&mut removed);
        Ok(removed)
    }

    async fn take(&self, tenant: &str, which: Which<'_>) -> StoreResult<Vec<FeedItem>> {
        let mut taken: Vec<FeedItem> = match self.rivers.of(tenant, which.owner).await? {
            Some(river) => river.live().filter(|i| which.takes(i)).collect(),
            None => Vec::new(),
        };
        if !taken.is_empty() {
            let ids: Vec<ObjectId> = taken.iter().map(|i| i.action_id).collect();
            self.rivers
                .mark_gone(bson::doc! { "_id": cache_id(tenant, which.owner) }, &ids)
                .await?;
        }
        taken.extend(self.base.take(tenant, which).await?);
        dedup(&mut taken);
        Ok(taken)
    }

    async fn raise(
        &self,
        tenant: &str,
        action: ObjectId,
        owners: &[&str],
        relevancy: Millis,
        reason: &Reason,
        changed: Millis,
    ) -> StoreResult<Vec<FeedItem>> {
        let mut raised = self
            .base
            .raise(tenant, action, owners, relevancy, reason, changed)
            .await?;
        let rivers = self.rivers.naming(tenant, Some(owners), &[action]).await?;
        let mut moved: Vec<FeedItem> = Vec::new();
        let mut moved_from: Vec<String> = Vec::new();
        for river in &rivers {
            let Some(item) = river
                .live()
                .find(|i| i.action_id == action && i.relevancy < relevancy)
            else {
                continue;
            };
            let new = FeedItem {
                relevancy,
                reason: reason.clone(),
                changed,
                ..item.clone()
            };
            if reason.kind.pulled() {
                let entry = super::buckets::Entry::of(&item, false);
                let to = (relevancy, reason, changed);
                if self
                    .rivers
                    .raise_in_place(tenant, &item.owner, &entry, to)
                    .await?
                {
                    raised.push(new);
                }
            } else {
                // A bumped item belongs to the timeline: written there
                // first, then marked gone in the river (reads keep the
                // higher if both are seen).
                moved_from.push(cache_id(tenant, &item.owner));
                moved.push(new);
            }
        }
        if !moved.is_empty() {
            self.base.insert(tenant, &moved).await?;
            self.rivers
                .mark_gone(bson::doc! { "_id": { "$in": moved_from } }, &[action])
                .await?;
            raised.extend(moved);
        }
        Ok(raised)
    }

    async fn refresh(
        &self,
        tenant: &str,
        action: ObjectId,
        owners: &[&str],
        reason: &Reason,
        from: &[ReasonKind],
    ) -> StoreResult<()> {
        self.base
            .refresh(tenant, action, owners, reason, from)
            .await?;
        self.rivers
            .refresh(tenant, action, owners, reason, from)
            .await
    }

    async fn count(&self) -> StoreResult<u64> {
        Ok(self.base.count().await? + self.rivers.count().await?)
    }

    /// The layout's items only: rivers are built again on read.
    async fn export(
        &self,
        tenant: Option<&str>,
    ) -> StoreResult<BoxStream<'static, StoreResult<Stored>>> {
        self.base.export(tenant).await
    }

    async fn import(&self, items: Vec<Stored>) -> StoreResult<()> {
        self.base.import(items).await
    }

    async fn create_indexes(&self, embeds: bool) -> StoreResult<()> {
        self.base.create_indexes(embeds).await?;
        self.rivers.create_indexes(embeds).await
    }

    async fn uncopy(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<()> {
        self.base.uncopy(tenant, ids).await?;
        self.rivers.uncopy(tenant, ids).await
    }

    async fn recopy(&self, tenant: &str, copies: &[ActionCopy]) -> StoreResult<()> {
        self.base.recopy(tenant, copies).await?;
        self.rivers.recopy(tenant, copies).await
    }

    async fn rename_actor(&self, tenant: &str, actor: &str, name: Option<&str>) -> StoreResult<()> {
        self.base.rename_actor(tenant, actor, name).await?;
        self.rivers.rename_actor(tenant, actor, name).await
    }
}
