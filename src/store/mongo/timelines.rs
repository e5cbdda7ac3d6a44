//! MongoDB: readers' feeds (`feed_items`): ranges, changes, hidden items.

use std::collections::HashSet;

use async_trait::async_trait;
use bson::{doc, DateTime, Document};
use mongodb::options::ReturnDocument;

use crate::model::{FeedItem, ObjectId, Stamp};
use crate::store::{Backfill, FeedRange, StoreResult, TimelineStore, Unfollow};

use super::{db_err, epoch, read_all, within, FeedItemDoc, MongoStore, TIE_SLACK, TOMBSTONE};

impl MongoStore {
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

    /// Feed items matching `filter` in timeline order (newest first, or oldest
    /// first when `ascending`), at most `limit`.
    pub(super) async fn timeline(
        &self,
        filter: Document,
        ascending: bool,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        let direction = if ascending { 1 } else { -1 };
        let docs: Vec<FeedItemDoc> = read_all(
            self.feed_items
                .find(filter)
                .sort(doc! { "relevancy": direction, "actionId": direction })
                .limit(i64::try_from(limit).unwrap_or(i64::MAX)),
        )
        .await?;
        Ok(docs.into_iter().map(FeedItemDoc::into_item).collect())
    }

    pub(super) async fn remove_items(
        &self,
        tenant: &str,
        id: ObjectId,
    ) -> StoreResult<Vec<FeedItem>> {
        let items: Vec<FeedItemDoc> = read_all(
            self.feed_items
                .find(doc! { "tenant": tenant, "actionId": id }),
        )
        .await?;
        self.feed_items
            .delete_many(doc! { "tenant": tenant, "actionId": id })
            .await
            .map_err(db_err)?;
        Ok(items
            .into_iter()
            .filter(|doc| !doc.hidden)
            .map(FeedItemDoc::into_item)
            .collect())
    }
}

#[async_trait]
impl TimelineStore for MongoStore {
    async fn feed_changes(
        &self,
        tenant: &str,
        owner: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        let changed = DateTime::from_millis(after.changed);
        let docs: Vec<FeedItemDoc> = read_all(
            self.feed_items
                .find(doc! {
                    "tenant": tenant,
                    "owner": owner,
                    "relevancy": { "$gt": epoch() },
                    "$or": [
                        { "changed": { "$gt": changed } },
                        { "changed": changed, "actionId": { "$gt": after.action_id } },
                    ],
                })
                .sort(doc! { "changed": 1, "actionId": 1 })
                .limit(i64::try_from(limit).unwrap_or(i64::MAX)),
        )
        .await?;
        Ok(docs.into_iter().map(FeedItemDoc::into_item).collect())
    }

    async fn feed_page(
        &self,
        tenant: &str,
        owner: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<FeedItem>> {
        // One range on `relevancy` (above the tombstones' epoch), read a little
        // past the limit so that items sharing the boundary's millisecond can be
        // cut exactly here: plain ranges on indexed fields keep every query
        // planner on the timeline index. The bounds are strict, on whole
        // milliseconds (`> r - 1` for `>= r`): the same range, in the form every
        // MongoDB-compatible server we test against answers right through an index.
        let lower = range
            .newer_than
            .map_or(TOMBSTONE, |p| (p.relevancy - 1).max(TOMBSTONE));
        let mut relevancy = doc! { "$gt": DateTime::from_millis(lower) };
        if let Some(p) = range.older_than {
            relevancy.insert("$lt", DateTime::from_millis(p.relevancy.saturating_add(1)));
        }
        let filter = doc! { "tenant": tenant, "owner": owner, "relevancy": relevancy };
        let slack =
            TIE_SLACK * (range.older_than.is_some() as usize + range.newer_than.is_some() as usize);
        let fetch = range.limit.saturating_add(slack);
        let in_range = |item: &FeedItem| {
            let position = item.position();
            range.older_than.is_none_or(|p| position < p)
                && range.newer_than.is_none_or(|p| position > p)
        };
        let read = self.timeline(filter, range.from_oldest, fetch).await?;
        let cut_short = read.len() == fetch;
        let mut items: Vec<FeedItem> = read.into_iter().filter(in_range).collect();
        if items.len() < range.limit && cut_short {
            // More items share a boundary millisecond than the slack covered:
            // ask with the exact keyset instead.
            let all = doc! {
                "tenant": tenant,
                "owner": owner,
                "relevancy": { "$gt": DateTime::from_millis(TOMBSTONE) },
            };
            let exact = within(all, ("relevancy", "actionId"), &range);
            items = self.timeline(exact, range.from_oldest, range.limit).await?;
        }
        items.truncate(range.limit);
        if range.from_oldest {
            items.reverse();
        }
        Ok(items)
    }

    async fn start_unfollow(&self, unfollow: &Unfollow) -> StoreResult<()> {
        self.start_unfollow_doc(unfollow).await
    }

    async fn end_unfollow(&self, unfollow: &Unfollow) -> StoreResult<()> {
        self.end_unfollow_doc(unfollow).await
    }

    async fn unfollows(&self, tenant: &str, reader: &str) -> StoreResult<Vec<Unfollow>> {
        self.unfollows_of(tenant, reader).await
    }

    async fn backfill(
        &self,
        tenant: &str,
        owner: &str,
        items: &[Backfill],
    ) -> StoreResult<Vec<FeedItem>> {
        let mut seen = HashSet::new();
        let items: Vec<&Backfill> = items.iter().filter(|b| seen.insert(b.action_id)).collect();
        let ids: Vec<ObjectId> = items.iter().map(|b| b.action_id).collect();
        let visible = self.visible_actions(tenant, &ids).await?;
        let items: Vec<&Backfill> = items
            .into_iter()
            .filter(|b| visible.contains(&b.action_id))
            .collect();
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let docs: Vec<FeedItemDoc> = items
            .iter()
            .map(|b| FeedItemDoc {
                tenant: tenant.to_owned(),
                owner: owner.to_owned(),
                action_id: b.action_id,
                relevancy: DateTime::from_millis(b.relevancy),
                reason: b.reason.clone(),
                changed: DateTime::from_millis(b.changed),
                hidden: false,
            })
            .collect();
        // Unordered, as a fan-out: an item the reader has (or hid) is a
        // duplicate that must not stop the others.
        let skipped = self.insert_items(docs).await?;
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
        if !gone.is_empty() {
            self.feed_items
                .delete_many(doc! {
                    "tenant": tenant, "owner": owner,
                    "actionId": { "$in": &gone }, "hidden": { "$ne": true },
                })
                .await
                .map_err(db_err)?;
        }
        Ok(written
            .into_iter()
            .filter(|b| !gone.contains(&b.action_id))
            .map(|b| FeedItem {
                owner: owner.to_owned(),
                action_id: b.action_id,
                relevancy: b.relevancy,
                reason: b.reason.clone(),
                changed: b.changed,
            })
            .collect())
    }

    async fn materialised(
        &self,
        tenant: &str,
        owner: &str,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>> {
        if action_ids.is_empty() {
            return Ok(Vec::new());
        }
        let docs: Vec<Document> = read_all(
            self.feed_items
                .clone_with_type::<Document>()
                .find(doc! { "tenant": tenant, "owner": owner, "actionId": { "$in": action_ids } })
                .projection(doc! { "_id": 0, "actionId": 1 }),
        )
        .await?;
        Ok(docs
            .iter()
            .filter_map(|d| d.get_object_id("actionId").ok())
            .collect())
    }

    async fn hide_feed_item(
        &self,
        tenant: &str,
        owner: &str,
        action_id: ObjectId,
    ) -> StoreResult<Option<FeedItem>> {
        // The item becomes a tombstone: it keeps its place in the unique index
        // (so it is not delivered again) and drops below every feed range.
        let before = self
            .feed_items
            .find_one_and_update(
                doc! {
                    "tenant": tenant,
                    "owner": owner,
                    "actionId": action_id,
                    "relevancy": { "$gt": DateTime::from_millis(TOMBSTONE) },
                },
                doc! { "$set": { "hidden": true, "relevancy": DateTime::from_millis(TOMBSTONE) } },
            )
            .return_document(ReturnDocument::Before)
            .await
            .map_err(db_err)?;
        if before.is_none() {
            // Not materialised (a pulled item): a tombstone alone keeps it
            // out from now on.
            let tombstone = FeedItemDoc {
                tenant: tenant.to_owned(),
                owner: owner.to_owned(),
                action_id,
                relevancy: DateTime::from_millis(TOMBSTONE),
                reason: crate::model::Reason::new(crate::model::ReasonKind::Bumped, ""),
                changed: epoch(),
                hidden: true,
            };
            let set = bson::to_document(&tombstone)
                .map_err(|e| crate::store::StoreError::internal("cannot encode a tombstone", e))?;
            self.feed_items
                .update_one(
                    doc! { "tenant": tenant, "owner": owner, "actionId": action_id },
                    doc! { "$setOnInsert": set },
                )
                .upsert(true)
                .await
                .map_err(db_err)?;
        }
        Ok(before.map(FeedItemDoc::into_item))
    }
}
