//! What the feed models read beside the timelines: many outbox ranges in
//! one blocking step.

use async_trait::async_trait;

use super::families::OUTBOX;
use super::keys::{self};
use super::{db_err, EmbeddedStore, Inner};
use crate::store::{FeedRange, Outbox, Posted, SourceStore, StoreResult};

impl Inner {
    /// Which of `keys` exist in `family`, as flags in order. One multi-get.
    /// The values stored at each of `keys` in `family`, in order. One
    /// multi-get.
    pub(super) fn values(
        &self,
        family: &str,
        keys: &[Vec<u8>],
    ) -> StoreResult<Vec<Option<Vec<u8>>>> {
        self.db
            .batched_multi_get_cf(self.cf(family), keys, false)
            .into_iter()
            .map(|found| Ok(found.map_err(db_err)?.map(|v| v.to_vec())))
            .collect()
    }

    pub(super) fn exist_many(&self, family: &str, keys: &[Vec<u8>]) -> StoreResult<Vec<bool>> {
        let cf = self.cf(family);
        self.db
            .batched_multi_get_cf(cf, keys, false)
            .into_iter()
            .map(|found| found.map(|v| v.is_some()).map_err(db_err))
            .collect()
    }

    pub(super) fn outboxes(
        &self,
        tenant: &str,
        reads: &[(Outbox, FeedRange)],
    ) -> StoreResult<Vec<Vec<Posted>>> {
        let owners: Vec<String> = reads.iter().map(|(o, _)| keys::outbox_owner(o)).collect();
        let ranges = owners.iter().zip(reads).map(|(o, (_, r))| (o.as_str(), *r));
        self.ranked_ranges(OUTBOX, tenant, ranges, |n, position, value| {
            let actor = match &reads[n].0 {
                Outbox::Actor(actor) => actor.clone(),
                _ => std::str::from_utf8(value)
                    .map_err(|_| keys::corrupt("outbox entry"))?
                    .to_owned(),
            };
            Ok(Posted { position, actor })
        })
    }
}

#[async_trait]
impl SourceStore for EmbeddedStore {
    async fn outboxes(
        &self,
        tenant: &str,
        reads: &[(Outbox, FeedRange)],
    ) -> StoreResult<Vec<Vec<Posted>>> {
        if reads.len() <= 4 {
            return self.inner()?.outboxes(tenant, reads);
        }
        let (tenant, reads) = (tenant.to_owned(), reads.to_vec());
        self.blocking(move |db| db.outboxes(&tenant, &reads)).await
    }
}
