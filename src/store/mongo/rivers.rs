//! MongoDB: rivers. One record per reader who has one (`rivers`); their
//! items are the `feed_items` that came from a pulled source and were not
//! bumped.

use async_trait::async_trait;
use bson::{doc, DateTime, Document};
use mongodb::options::UpdateOptions;

use crate::model::{Millis, ReasonKind};
use crate::store::{River, RiverStore, StoreResult};

use super::sources::{position_doc, position_of};
use super::{db_err, read_all, MongoStore};

fn river_kinds() -> bson::Bson {
    bson::to_bson(&ReasonKind::PULLED).unwrap_or(bson::Bson::Null)
}

impl MongoStore {
    fn river_items(&self, tenant: &str, reader: &str) -> Document {
        doc! {
            "tenant": tenant, "owner": reader,
            "reason.kind": { "$in": river_kinds() }, "hidden": { "$ne": true },
        }
    }
}

#[async_trait]
impl RiverStore for MongoStore {
    async fn river(&self, tenant: &str, reader: &str) -> StoreResult<Option<River>> {
        let found = self
            .rivers
            .find_one(doc! { "tenant": tenant, "reader": reader })
            .await
            .map_err(db_err)?;
        Ok(found.and_then(|d| {
            Some(River {
                complete_from: position_of(d.get_document("completeFrom").ok()?)?,
                touched: d.get_datetime("touched").ok()?.timestamp_millis(),
            })
        }))
    }

    async fn put_river(&self, tenant: &str, reader: &str, river: &River) -> StoreResult<()> {
        self.rivers
            .update_one(
                doc! { "tenant": tenant, "reader": reader },
                doc! { "$set": {
                    "completeFrom": position_doc(river.complete_from),
                    "touched": DateTime::from_millis(river.touched),
                } },
            )
            .with_options(UpdateOptions::builder().upsert(true).build())
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn rivers_among(&self, tenant: &str, readers: &[String]) -> StoreResult<Vec<String>> {
        if readers.is_empty() {
            return Ok(Vec::new());
        }
        let filter = doc! { "tenant": tenant, "reader": { "$in": readers } };
        self.strings(&self.rivers, filter, "reader", usize::MAX)
            .await
    }

    async fn idle_rivers(
        &self,
        before: Millis,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        let docs = read_all(
            self.rivers
                .find(doc! { "touched": { "$lt": DateTime::from_millis(before) } })
                .limit(i64::try_from(limit).unwrap_or(i64::MAX)),
        )
        .await?;
        Ok(docs
            .iter()
            .filter_map(|d| {
                Some((
                    d.get_str("tenant").ok()?.to_owned(),
                    d.get_str("reader").ok()?.to_owned(),
                ))
            })
            .collect())
    }

    async fn drop_river(&self, tenant: &str, reader: &str) -> StoreResult<u64> {
        self.rivers
            .delete_one(doc! { "tenant": tenant, "reader": reader })
            .await
            .map_err(db_err)?;
        let gone = self
            .feed_items
            .delete_many(self.river_items(tenant, reader))
            .await
            .map_err(db_err)?;
        Ok(gone.deleted_count)
    }

    async fn trim_river(&self, tenant: &str, reader: &str, keep: usize) -> StoreResult<u64> {
        // The oldest item kept: everything of the river below it goes.
        let oldest = self
            .feed_items
            .find_one(self.river_items(tenant, reader))
            .sort(doc! { "relevancy": -1, "actionId": -1 })
            .skip(u64::try_from(keep.saturating_sub(1)).unwrap_or(u64::MAX))
            .await
            .map_err(db_err)?;
        let Some(oldest) = oldest.filter(|_| keep > 0) else {
            return Ok(0);
        };
        let mut below = self.river_items(tenant, reader);
        below.insert(
            "$or",
            vec![
                doc! { "relevancy": { "$lt": oldest.relevancy } },
                doc! { "relevancy": oldest.relevancy, "actionId": { "$lt": oldest.action_id } },
            ],
        );
        let gone = self.feed_items.delete_many(below).await.map_err(db_err)?;
        if gone.deleted_count > 0 {
            let from = crate::model::Position {
                relevancy: oldest.relevancy.timestamp_millis(),
                action_id: oldest.action_id,
            };
            self.rivers
                .update_one(
                    doc! { "tenant": tenant, "reader": reader,
                    "completeFrom.r": { "$lt": from.relevancy } },
                    doc! { "$set": { "completeFrom": position_doc(from) } },
                )
                .await
                .map_err(db_err)?;
        }
        Ok(gone.deleted_count)
    }
}
