//! The `items` layout: one `feed_items` document per reader and action,
//! unique on `{tenant, owner, actionId}`, so a re-run writes nothing twice;
//! a tombstone is the item at the epoch, marked `hidden`.

use std::collections::HashSet;

use async_trait::async_trait;
use bson::{doc, Document};
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use mongodb::options::ReturnDocument;
use mongodb::{Collection, Database};

use super::copy::{CopyDoc, ACTOR_ID, ACTOR_NAME};
use super::{date, narrow_to, reason_bson, Layout, Stored, Which};
use crate::model::{ActionCopy, FeedItem, Millis, ObjectId, Reason, ReasonKind, Stamp};
use crate::store::mongo::{
    bulk::upsert_all, db_err, epoch, indexes, read_all, within, FeedItemDoc, DUPLICATE_KEY,
    TIE_SLACK, TOMBSTONE,
};
use crate::store::{FeedRange, StoreError, StoreResult};

pub(in crate::store::mongo) struct Items {
    db: Database,
    feed_items: Collection<FeedItemDoc>,
}

impl Items {
    pub fn new(db: &Database) -> Items {
        Items {
            db: db.clone(),
            feed_items: db.collection("feed_items"),
        }
    }

    /// Items matching `filter` in timeline order (newest first, or oldest
    /// first when `ascending`), at most `limit`.
    async fn timeline(
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

    /// Reads what `filter` selects, then deletes it; returns the visible.
    async fn delete(&self, filter: Document) -> StoreResult<Vec<FeedItem>> {
        let docs: Vec<FeedItemDoc> = read_all(self.feed_items.find(filter.clone())).await?;
        if docs.is_empty() {
            return Ok(Vec::new());
        }
        self.feed_items.delete_many(filter).await.map_err(db_err)?;
        Ok(docs
            .into_iter()
            .filter(|d| !d.hidden)
            .map(FeedItemDoc::into_item)
            .collect())
    }
}

fn item_doc(tenant: &str, item: &FeedItem, hidden: bool) -> FeedItemDoc {
    FeedItemDoc {
        tenant: tenant.to_owned(),
        owner: item.owner.clone(),
        action_id: item.action_id,
        relevancy: date(item.relevancy),
        reason: item.reason.clone(),
        changed: date(item.changed),
        hidden,
        x: item.copy.as_deref().map(CopyDoc::of).filter(|_| !hidden),
    }
}

#[async_trait]
impl Layout for Items {
    async fn insert(&self, tenant: &str, items: &[FeedItem]) -> StoreResult<HashSet<usize>> {
        if items.is_empty() {
            return Ok(HashSet::new());
        }
        let docs: Vec<FeedItemDoc> = items.iter().map(|i| item_doc(tenant, i, false)).collect();
        // Unordered: one duplicate (a reader who has the item, or hid it)
        // must not stop the others.
        match self.feed_items.insert_many(docs).ordered(false).await {
            Ok(_) => Ok(HashSet::new()),
            Err(err) => match &*err.kind {
                mongodb::error::ErrorKind::InsertMany(failure)
                    if failure.write_concern_error.is_none()
                        && failure
                            .write_errors
                            .iter()
                            .flatten()
                            .all(|e| e.code == DUPLICATE_KEY) =>
                {
                    Ok(failure
                        .write_errors
                        .iter()
                        .flatten()
                        .map(|e| e.index)
                        .collect())
                }
                _ => Err(db_err(err)),
            },
        }
    }

    async fn page(
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
        let mut relevancy = doc! { "$gt": date(lower) };
        if let Some(p) = range.older_than {
            relevancy.insert("$lt", date(p.relevancy.saturating_add(1)));
        }
        let filter = doc! { "tenant": tenant, "owner": owner, "relevancy": relevancy };
        let slack =
            TIE_SLACK * (range.older_than.is_some() as usize + range.newer_than.is_some() as usize);
        let fetch = range.limit.saturating_add(slack);
        let in_range = |item: &FeedItem| range.holds(item.position());
        let read = self.timeline(filter, range.from_oldest, fetch).await?;
        let cut_short = read.len() == fetch;
        let mut items: Vec<FeedItem> = read.into_iter().filter(in_range).collect();
        if items.len() < range.limit && cut_short {
            // More items share a boundary millisecond than the slack covered:
            // ask with the exact keyset instead.
            let all = doc! {
                "tenant": tenant,
                "owner": owner,
                "relevancy": { "$gt": date(TOMBSTONE) },
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

    async fn changes(
        &self,
        tenant: &str,
        owner: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        let changed = date(after.changed);
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

    async fn holders(
        &self,
        tenant: &str,
        owners: &[&str],
        ids: &[ObjectId],
    ) -> StoreResult<HashSet<(String, ObjectId)>> {
        if ids.is_empty() || owners.is_empty() {
            return Ok(HashSet::new());
        }
        let mut filter = doc! { "tenant": tenant, "actionId": { "$in": ids } };
        narrow_to(&mut filter, owners);
        let docs: Vec<Document> = read_all(
            self.feed_items
                .clone_with_type::<Document>()
                .find(filter)
                .projection(doc! { "_id": 0, "owner": 1, "actionId": 1 }),
        )
        .await?;
        let owners: HashSet<&str> = owners.iter().copied().collect();
        Ok(docs
            .iter()
            .filter_map(|d| Some((d.get_str("owner").ok()?, d.get_object_id("actionId").ok()?)))
            .filter(|(owner, _)| owners.contains(owner))
            .map(|(owner, a)| (owner.to_owned(), a))
            .collect())
    }

    async fn item(&self, tenant: &str, owner: &str, id: ObjectId) -> StoreResult<Option<FeedItem>> {
        let found = self
            .feed_items
            .find_one(doc! {
                "tenant": tenant,
                "owner": owner,
                "actionId": id,
                "relevancy": { "$gt": date(TOMBSTONE) },
            })
            .await
            .map_err(db_err)?;
        Ok(found.map(FeedItemDoc::into_item))
    }

    async fn hide(&self, tenant: &str, owner: &str, id: ObjectId) -> StoreResult<Option<FeedItem>> {
        // The item becomes a tombstone: it keeps its place in the unique index
        // (so it is not delivered again) and drops below every feed range.
        let before = self
            .feed_items
            .find_one_and_update(
                doc! {
                    "tenant": tenant,
                    "owner": owner,
                    "actionId": id,
                    "relevancy": { "$gt": date(TOMBSTONE) },
                },
                doc! { "$set": { "hidden": true, "relevancy": date(TOMBSTONE) } },
            )
            .return_document(ReturnDocument::Before)
            .await
            .map_err(db_err)?;
        if before.is_none() {
            // Not materialised (a pulled item): a tombstone alone keeps it
            // out from now on.
            let tombstone = item_doc(tenant, &tombstone(owner, id), true);
            let set = bson::to_document(&tombstone)
                .map_err(|e| StoreError::internal("cannot encode a tombstone", e))?;
            self.feed_items
                .update_one(
                    doc! { "tenant": tenant, "owner": owner, "actionId": id },
                    doc! { "$setOnInsert": set },
                )
                .upsert(true)
                .await
                .map_err(db_err)?;
        }
        Ok(before.map(FeedItemDoc::into_item))
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
        let mut filter = doc! { "tenant": tenant, "actionId": { "$in": ids } };
        if let Some(owner) = owner {
            filter.insert("owner", owner);
            filter.insert("hidden", doc! { "$ne": true });
        }
        self.delete(filter).await
    }

    async fn take(&self, tenant: &str, which: Which<'_>) -> StoreResult<Vec<FeedItem>> {
        let mut filter = doc! {
            "tenant": tenant,
            "owner": which.owner,
            "reason.kind": { "$in": reason_bson(&which.reasons)? },
            "hidden": { "$ne": true },
        };
        if let Some(ids) = which.ids {
            filter.insert("actionId", doc! { "$in": ids });
        }
        if let Some(below) = which.below {
            filter.insert(
                "$or",
                vec![
                    doc! { "relevancy": { "$lt": date(below.relevancy) } },
                    doc! { "relevancy": date(below.relevancy), "actionId": { "$lt": below.action_id } },
                ],
            );
        }
        self.delete(filter).await
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
        let (at, when) = (date(relevancy), date(changed));
        // One conditional update raises them all, only upwards (tombstones
        // sit at the epoch and are never raised); a read of what it raised
        // follows.
        let updated = self
            .feed_items
            .update_many(
                doc! {
                    "tenant": tenant,
                    "actionId": action,
                    "owner": { "$in": owners },
                    "relevancy": { "$gt": epoch(), "$lt": at },
                },
                doc! { "$set": { "relevancy": at, "reason": reason_bson(reason)?, "changed": when } },
            )
            .await
            .map_err(db_err)?;
        if updated.modified_count == 0 {
            return Ok(Vec::new());
        }
        let docs: Vec<FeedItemDoc> = read_all(self.feed_items.find(doc! {
            "tenant": tenant,
            "actionId": action,
            "owner": { "$in": owners },
            "relevancy": at,
            "changed": when,
        }))
        .await?;
        Ok(docs.into_iter().map(FeedItemDoc::into_item).collect())
    }

    async fn refresh(
        &self,
        tenant: &str,
        action: ObjectId,
        owners: &[&str],
        reason: &Reason,
        from: &[ReasonKind],
    ) -> StoreResult<()> {
        let reason = reason_bson(reason)?;
        self.feed_items
            .update_many(
                doc! {
                    "tenant": tenant,
                    "actionId": action,
                    "owner": { "$in": owners },
                    "hidden": { "$ne": true },
                    "reason.kind": { "$in": reason_bson(&from)? },
                    "reason": { "$ne": reason.clone() },
                },
                doc! { "$set": { "reason": reason } },
            )
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn count(&self) -> StoreResult<u64> {
        self.feed_items
            .count_documents(doc! { "hidden": { "$ne": true } })
            .await
            .map_err(db_err)
    }

    async fn export(
        &self,
        tenant: Option<&str>,
    ) -> StoreResult<BoxStream<'static, StoreResult<Stored>>> {
        let filter = tenant.map_or_else(Document::new, |t| doc! { "tenant": t });
        let cursor = self
            .feed_items
            .find(filter)
            .sort(doc! { "tenant": 1, "owner": 1, "relevancy": -1, "actionId": -1 })
            .await
            .map_err(db_err)?;
        Ok(cursor
            .map_err(db_err)
            .map_ok(|doc| Stored {
                tenant: doc.tenant.clone(),
                hidden: doc.hidden,
                item: doc.into_item(),
            })
            .boxed())
    }

    async fn import(&self, items: Vec<Stored>) -> StoreResult<()> {
        let mut statements = Vec::with_capacity(items.len());
        for stored in &items {
            let document =
                bson::to_document(&item_doc(&stored.tenant, &stored.item, stored.hidden))
                    .map_err(|e| StoreError::internal("MongoDB: cannot encode a feed item", e))?;
            statements.push(doc! {
                "q": { "tenant": &stored.tenant, "owner": &stored.item.owner, "actionId": stored.item.action_id },
                "u": document,
                "upsert": true,
            });
        }
        upsert_all(&self.db, "feed_items", statements).await
    }

    async fn uncopy(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.feed_items
            .update_many(
                doc! { "tenant": tenant, "actionId": { "$in": ids }, "x": { "$exists": true } },
                doc! { "$unset": { "x": "" } },
            )
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn recopy(&self, tenant: &str, copies: &[ActionCopy]) -> StoreResult<()> {
        let mut statements = Vec::with_capacity(copies.len());
        for copy in copies {
            statements.push(doc! {
                "q": { "tenant": tenant, "actionId": copy.action.id, "hidden": { "$ne": true } },
                "u": { "$set": { "x": CopyDoc::of(copy).bson()? } },
                "multi": true,
            });
        }
        upsert_all(&self.db, "feed_items", statements).await
    }

    async fn rename_actor(&self, tenant: &str, actor: &str, name: Option<&str>) -> StoreResult<()> {
        let path = format!("x.{ACTOR_NAME}");
        let update = match name {
            Some(name) => doc! { "$set": { path: name } },
            None => doc! { "$unset": { path: "" } },
        };
        self.feed_items
            .update_many(
                doc! { "tenant": tenant, format!("x.{ACTOR_ID}"): actor },
                update,
            )
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn create_indexes(&self, embeds: bool) -> StoreResult<()> {
        use indexes::{index, named, unique};
        if embeds {
            self.feed_items
                .create_index(index(
                    doc! { "tenant": 1, "x.actorId": 1 },
                    named("copies_by_actor"),
                ))
                .await
                .map_err(db_err)?;
        }
        self.feed_items
            .create_indexes([
                index(
                    doc! { "tenant": 1, "owner": 1, "actionId": 1 },
                    unique("one_item_per_reader"),
                ),
                index(
                    doc! { "tenant": 1, "owner": 1, "relevancy": -1, "actionId": -1 },
                    named("timeline"),
                ),
                index(doc! { "tenant": 1, "actionId": 1 }, named("by_action")),
                index(
                    doc! { "tenant": 1, "owner": 1, "changed": 1, "actionId": 1 },
                    named("changes"),
                ),
            ])
            .await
            .map_err(db_err)?;
        Ok(())
    }
}

/// The tombstone laid for an item the reader never held (a pulled one).
pub(super) fn tombstone(owner: &str, id: ObjectId) -> FeedItem {
    FeedItem {
        owner: owner.to_owned(),
        action_id: id,
        relevancy: TOMBSTONE,
        reason: Reason::new(ReasonKind::Bumped, ""),
        changed: 0,
        copy: None,
    }
}
