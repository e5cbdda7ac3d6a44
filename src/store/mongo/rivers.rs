//! MongoDB: rivers, on `timeline_cache` (see `layout::cache`): one
//! document per reader who has a river, its record and its items.

use async_trait::async_trait;

use super::MongoStore;
use crate::model::Millis;
use crate::store::{River, RiverStore, StoreResult};

#[async_trait]
impl RiverStore for MongoStore {
    async fn river(&self, tenant: &str, reader: &str) -> StoreResult<Option<River>> {
        self.rivers.river(tenant, reader).await
    }

    async fn put_river(&self, tenant: &str, reader: &str, river: &River) -> StoreResult<()> {
        self.rivers.put(tenant, reader, river).await
    }

    async fn rivers_among(&self, tenant: &str, readers: &[String]) -> StoreResult<Vec<String>> {
        let readers: Vec<&str> = readers.iter().map(String::as_str).collect();
        Ok(self
            .rivers
            .among(tenant, &readers)
            .await?
            .into_iter()
            .collect())
    }

    async fn idle_rivers(
        &self,
        before: Millis,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        self.rivers.idle(before, limit).await
    }

    async fn drop_river(&self, tenant: &str, reader: &str) -> StoreResult<u64> {
        self.rivers.drop(tenant, reader).await
    }

    async fn trim_river(&self, tenant: &str, reader: &str, keep: usize) -> StoreResult<u64> {
        self.rivers.compact(tenant, reader, keep).await
    }
}
