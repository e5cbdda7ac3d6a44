//! MongoDB: rivers, on `timeline_cache` (see `layout::cache`): one
//! document per reader who has a river, its record and its items.

use async_trait::async_trait;

use super::MongoStore;
use crate::model::Millis;
use crate::store::{River, RiverCut, RiverStore, StoreResult};

#[async_trait]
impl RiverStore for MongoStore {
    async fn rivers(&self, tenant: &str, readers: &[String]) -> StoreResult<Vec<Option<River>>> {
        self.rivers.rivers(tenant, readers).await
    }

    async fn put_river(&self, tenant: &str, reader: &str, river: &River) -> StoreResult<()> {
        self.rivers.put(tenant, reader, river).await
    }

    async fn idle_rivers(
        &self,
        before: Millis,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        self.rivers.idle(before, limit).await
    }

    async fn cut_river(&self, tenant: &str, reader: &str, cut: RiverCut) -> StoreResult<u64> {
        match cut {
            RiverCut::Keep(keep) => self.rivers.compact(tenant, reader, keep).await,
            RiverCut::Drop => self.rivers.drop(tenant, reader).await,
        }
    }
}
