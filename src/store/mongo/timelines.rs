//! MongoDB: readers' feeds, through the timeline layout: ranges, changes,
//! backfills, hidden items.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use bson::{doc, Document};

use crate::model::{Action, FeedItem, ObjectId, ReasonKind};
use crate::store::{
    ActionStore, Backfill, StoreResult, TimelineRead, TimelineStore, TimelineWrite,
};

use super::{read_all, MongoStore};

impl MongoStore {
    /// Backfills `owner`'s feed: see
    /// [`TimelineWrite::Backfill`](crate::store::TimelineWrite::Backfill).
    async fn backfill(
        &self,
        tenant: &str,
        owner: &str,
        items: &[Backfill],
    ) -> StoreResult<Vec<FeedItem>> {
        let mut seen = HashSet::new();
        let items: Vec<&Backfill> = items.iter().filter(|b| seen.insert(b.action_id)).collect();
        let ids: Vec<ObjectId> = items.iter().map(|b| b.action_id).collect();
        // What is still there to write; with copies, the actions whole.
        let (visible, copies) = if self.embeds {
            let actions = self.get_actions(tenant, &ids).await?;
            let actions: Vec<&Action> = actions.iter().filter(|a| !a.hidden).collect();
            let copies = self.copies_of(tenant, &actions).await?;
            (actions.iter().map(|a| a.id).collect(), copies)
        } else {
            (self.visible_actions(tenant, &ids).await?, HashMap::new())
        };
        let items: Vec<&Backfill> = items
            .into_iter()
            .filter(|b| visible.contains(&b.action_id))
            .collect();
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let new: Vec<FeedItem> = items
            .iter()
            .map(|b| FeedItem {
                owner: owner.to_owned(),
                action_id: b.action_id,
                relevancy: b.relevancy,
                reason: b.reason.clone(),
                changed: b.changed,
                copy: copies.get(&b.action_id).cloned(),
            })
            .collect();
        // As a fan-out: an item the reader has (or hid) is skipped, the
        // others written.
        let skipped = self.layout.insert(tenant, &new).await?;
        // Held already: each keeps its place, and takes the reason the
        // backfill gives if its own is a scope's that no longer applies
        // (see `Reason::stale_beside`).
        for b in skipped.iter().filter_map(|&i| items.get(i)) {
            let owners = [owner];
            let refresh =
                self.layout
                    .refresh(tenant, b.action_id, &owners, &b.reason, &ReasonKind::SCOPED);
            refresh.await?;
        }
        let written: Vec<&Backfill> = items
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !skipped.contains(i))
            .map(|(_, b)| b)
            .collect();
        // Hidden or deleted while we wrote: take those items back.
        let written_ids: Vec<ObjectId> = written.iter().map(|b| b.action_id).collect();
        let still = self.visible_actions(tenant, &written_ids).await?;
        let gone: Vec<ObjectId> = written_ids
            .iter()
            .copied()
            .filter(|id| !still.contains(id))
            .collect();
        self.layout.remove(tenant, Some(owner), &gone).await?;
        Ok(written
            .into_iter()
            .filter(|b| !gone.contains(&b.action_id))
            .map(|b| FeedItem {
                owner: owner.to_owned(),
                action_id: b.action_id,
                relevancy: b.relevancy,
                reason: b.reason.clone(),
                changed: b.changed,
                copy: None,
            })
            .collect())
    }

    /// Which of `ids` are actions of `tenant` that are not hidden.
    async fn visible_actions(
        &self,
        tenant: &str,
        ids: &[ObjectId],
    ) -> StoreResult<HashSet<ObjectId>> {
        if ids.is_empty() {
            return Ok(HashSet::new());
        }
        let docs: Vec<Document> = read_all(
            self.actions
                .clone_with_type::<Document>()
                .find(doc! { "tenant": tenant, "_id": { "$in": ids }, "hidden": { "$ne": true } })
                .projection(doc! { "_id": 1 }),
        )
        .await?;
        Ok(docs
            .into_iter()
            .filter_map(|d| d.get_object_id("_id").ok())
            .collect())
    }
}

#[async_trait]
impl TimelineStore for MongoStore {
    async fn timeline(
        &self,
        tenant: &str,
        owner: &str,
        read: TimelineRead,
    ) -> StoreResult<Vec<FeedItem>> {
        match read {
            TimelineRead::Range(range) => self.layout.page(tenant, owner, range).await,
            TimelineRead::ChangedAfter { after, limit } => {
                self.layout.changes(tenant, owner, after, limit).await
            }
            TimelineRead::Item(id) => Ok(self
                .layout
                .item(tenant, owner, id)
                .await?
                .into_iter()
                .collect()),
        }
    }

    async fn write_timeline(
        &self,
        tenant: &str,
        write: TimelineWrite<'_>,
    ) -> StoreResult<Vec<FeedItem>> {
        match write {
            // MongoDB acknowledges every write as the deployment's write
            // concern says: derived or not, one path.
            TimelineWrite::Backfill { owner, items, .. } => {
                self.backfill(tenant, owner, items).await
            }
            TimelineWrite::Raise {
                action_id,
                now,
                raises,
            } => self.raise(tenant, action_id, now, raises).await,
            TimelineWrite::Hide { owner, action_id } => Ok(self
                .layout
                .hide(tenant, owner, action_id)
                .await?
                .into_iter()
                .collect()),
        }
    }

    async fn materialised(
        &self,
        tenant: &str,
        owner: &str,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>> {
        let held = self.layout.holders(tenant, &[owner], action_ids).await?;
        Ok(held.into_iter().map(|(_, a)| a).collect())
    }
}
