//! MongoDB: group feeds as capped rings (`group_feeds`, one document per
//! slot, `{tenant, group, slot}` unique) with a counter per group
//! (`group_counters`, `$inc` in `findOneAndUpdate`).

use async_trait::async_trait;
use bson::{doc, Document};
use mongodb::options::ReturnDocument;

use crate::model::Position;
use crate::store::group_feeds::{ring_range, Slot};
use crate::store::{FeedRange, GroupFeedStore, StoreResult};

use super::{db_err, is_duplicate, read_all, MongoStore};

fn slot_of(d: &Document) -> Option<Slot> {
    Some(Slot {
        n: u64::try_from(d.get_i64("n").ok()?).ok()?,
        at: Position {
            relevancy: d.get_i64("r").ok()?,
            action_id: d.get_object_id("id").ok()?,
        },
    })
}

#[async_trait]
impl GroupFeedStore for MongoStore {
    async fn post_to_group(
        &self,
        tenant: &str,
        group: &str,
        at: Position,
        size: usize,
    ) -> StoreResult<bool> {
        let held = doc! { "tenant": tenant, "group": group, "id": at.action_id };
        if self
            .group_feeds
            .find_one(held)
            .await
            .map_err(db_err)?
            .is_some()
        {
            return Ok(false);
        }
        let counter = self
            .group_counters
            .find_one_and_update(
                doc! { "tenant": tenant, "group": group },
                doc! { "$inc": { "n": 1_i64 } },
            )
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await
            .map_err(db_err)?;
        let n = counter.and_then(|d| d.get_i64("n").ok()).unwrap_or(1);
        let slot = n % i64::try_from(size.max(1)).unwrap_or(i64::MAX);
        // Only over an older post: a newer one that took the slot first
        // stands (the upsert then collides on the slot and is dropped).
        let written = self
            .group_feeds
            .update_one(
                doc! { "tenant": tenant, "group": group, "slot": slot, "n": { "$lt": n } },
                doc! { "$set": { "n": n, "r": at.relevancy, "id": at.action_id } },
            )
            .upsert(true)
            .await;
        match written {
            Ok(_) => Ok(true),
            Err(err) if is_duplicate(&err) => Ok(false),
            Err(err) => Err(db_err(err)),
        }
    }

    async fn group_feed(
        &self,
        tenant: &str,
        group: &str,
        size: usize,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>> {
        let docs = read_all(
            self.group_feeds
                .find(doc! { "tenant": tenant, "group": group })
                .projection(doc! { "n": 1, "r": 1, "id": 1 }),
        )
        .await?;
        Ok(ring_range(
            docs.iter().filter_map(slot_of).collect(),
            size,
            range,
        ))
    }
}
