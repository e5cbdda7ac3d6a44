//! Placeholder until MongoDB export and import land.

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;

use super::mongo::MongoStore;
use super::{Archive, ErrorKind, Record, StoreError, StoreResult};

#[async_trait]
impl Archive for MongoStore {
    fn export<'a>(&'a self, _tenant: Option<&'a str>) -> BoxStream<'a, StoreResult<Record>> {
        futures_util::stream::once(async { Err(unsupported()) }).boxed()
    }

    async fn import(&self, _records: &[Record]) -> StoreResult<()> {
        Err(unsupported())
    }
}

fn unsupported() -> StoreError {
    StoreError::new(ErrorKind::Unavailable, "MongoDB export is not built yet")
}
