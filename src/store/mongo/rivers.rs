//! MongoDB: rivers. One record per reader who has one (`rivers`); their
//! items are the timeline's items that came from a pulled source and were
//! not bumped.

use async_trait::async_trait;
use bson::{doc, DateTime};
use mongodb::options::UpdateOptions;

use crate::model::{Millis, ReasonKind};
use crate::store::{River, RiverStore, StoreResult};

use super::layout::Which;
use super::sources::{position_doc, position_of};
use super::{db_err, read_all, MongoStore};

/// A reader's river items: what came from a pulled source, not bumped.
fn river(reader: &str) -> Which<'_> {
    Which {
        owner: reader,
        reasons: &ReasonKind::PULLED,
        actor: None,
        ids: None,
        below: None,
    }
}

/// River items read per step while finding where a trim cuts.
const TRIM_STEP: usize = 500;

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
        let gone = self.layout.take(tenant, river(reader)).await?;
        Ok(gone.len() as u64)
    }

    async fn trim_river(&self, tenant: &str, reader: &str, keep: usize) -> StoreResult<u64> {
        // The oldest item kept: everything of the river below it goes.
        let mut seen = 0;
        let mut oldest = None;
        let mut older_than = None;
        while keep > 0 && oldest.is_none() {
            let range = crate::store::FeedRange {
                older_than,
                newer_than: None,
                limit: TRIM_STEP,
                from_oldest: false,
            };
            let page = self.layout.page(tenant, reader, range).await?;
            let last_page = page.len() < TRIM_STEP;
            older_than = page.last().map(crate::model::FeedItem::position);
            for item in page.iter().filter(|i| i.reason.kind.pulled()) {
                seen += 1;
                if seen == keep {
                    oldest = Some(item.position());
                    break;
                }
            }
            if last_page {
                break;
            }
        }
        let Some(from) = oldest else {
            return Ok(0);
        };
        let below = Which {
            below: Some(from),
            ..river(reader)
        };
        let gone = self.layout.take(tenant, below).await?;
        if !gone.is_empty() {
            self.rivers
                .update_one(
                    doc! { "tenant": tenant, "reader": reader,
                    "completeFrom.r": { "$lt": from.relevancy } },
                    doc! { "$set": { "completeFrom": position_doc(from) } },
                )
                .await
                .map_err(db_err)?;
        }
        Ok(gone.len() as u64)
    }
}
