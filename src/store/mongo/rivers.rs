//! MongoDB: rivers, on `timeline_cache` (see `layout::cache`): one
//! document per reader who has a river, its record and its items.

use async_trait::async_trait;

use super::MongoStore;
use crate::model::Millis;
use crate::store::{River, RiverStore, RiverWrite, StoreResult};

#[async_trait]
impl RiverStore for MongoStore {
    async fn rivers(&self, tenant: &str, readers: &[String]) -> StoreResult<Vec<Option<River>>> {
        self.rivers.rivers(tenant, readers).await
    }

    async fn idle_rivers(
        &self,
        before: Millis,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        self.rivers.idle(before, limit).await
    }

    async fn building_rivers(&self, limit: usize) -> StoreResult<Vec<(String, String)>> {
        self.rivers.building(limit).await
    }

    async fn write_river(&self, tenant: &str, reader: &str, write: RiverWrite) -> StoreResult<u64> {
        match write {
            RiverWrite::Put(river) => self.rivers.put(tenant, reader, &river).await.map(|()| 0),
            RiverWrite::Keep(keep) => self.rivers.compact(tenant, reader, keep).await,
            RiverWrite::Drop => self.rivers.drop(tenant, reader).await,
        }
    }
}
