//! What the feed models read beside the timelines: edges and members looked
//! up for many readers at once, and many outbox ranges in one blocking step.

use async_trait::async_trait;
use rocksdb::WriteBatch;

use super::families::{GRAPH, OUTBOX};
use super::graph::{decode_member, edge_codes, edge_key, member_key};
use super::keys::{self};
use super::{db_err, EmbeddedStore, Inner};
use crate::model::{EdgeKind, Millis};
use crate::store::{FeedRange, Outbox, Posted, SourceStore, StoreResult};

/// The ids whose flag is set.
pub(super) fn picked(ids: &[String], found: Vec<bool>) -> Vec<String> {
    ids.iter()
        .zip(found)
        .filter(|(_, f)| *f)
        .map(|(id, _)| id.clone())
        .collect()
}

impl Inner {
    /// Which of `keys` exist in `family`, as flags in order. One multi-get.
    pub(super) fn exist_many(&self, family: &str, keys: &[Vec<u8>]) -> StoreResult<Vec<bool>> {
        let cf = self.cf(family);
        self.db
            .batched_multi_get_cf(cf, keys, false)
            .into_iter()
            .map(|found| found.map(|v| v.is_some()).map_err(db_err))
            .collect()
    }

    fn edges_among(
        &self,
        tenant: &str,
        kind: EdgeKind,
        readers: &[String],
        actor: &str,
    ) -> StoreResult<Vec<String>> {
        let (out, _) = edge_codes(kind);
        let keys: Vec<Vec<u8>> = readers
            .iter()
            .map(|r| edge_key(tenant, out, r, actor))
            .collect();
        Ok(picked(readers, self.exist_many(GRAPH, &keys)?))
    }

    fn outboxes(
        &self,
        tenant: &str,
        reads: &[(Outbox, FeedRange)],
    ) -> StoreResult<Vec<Vec<Posted>>> {
        reads
            .iter()
            .map(|(outbox, range)| {
                let owner = keys::outbox_owner(outbox);
                self.ranked_range(OUTBOX, tenant, &owner, *range, |position, value| {
                    let actor = match outbox {
                        Outbox::Actor(actor) => actor.clone(),
                        _ => std::str::from_utf8(value)
                            .map_err(|_| keys::corrupt("outbox entry"))?
                            .to_owned(),
                    };
                    Ok(Posted { position, actor })
                })
            })
            .collect()
    }

    fn members_among(
        &self,
        tenant: &str,
        group_id: &str,
        users: &[String],
    ) -> StoreResult<Vec<(String, Millis)>> {
        let keys: Vec<Vec<u8>> = users
            .iter()
            .map(|u| member_key(tenant, group_id, u))
            .collect();
        let cf = self.cf(GRAPH);
        let mut out = Vec::new();
        for (user, found) in users
            .iter()
            .zip(self.db.batched_multi_get_cf(cf, &keys, false))
        {
            if let Some(value) = found.map_err(db_err)? {
                let record = format_args!("graph/member {tenant}/{group_id}/{user}");
                out.push((user.clone(), decode_member(&value, record)?.1));
            }
        }
        Ok(out)
    }
}

impl EmbeddedStore {
    /// Puts (or, with `None`, deletes) one key, off the async threads: a
    /// record that stands alone.
    pub(super) async fn write_one(
        &self,
        family: &'static str,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    ) -> StoreResult<()> {
        self.blocking(move |db| {
            let mut batch = WriteBatch::default();
            match value {
                Some(value) => batch.put_cf(db.cf(family), &key, &value),
                None => batch.delete_cf(db.cf(family), &key),
            }
            db.commit(batch)
        })
        .await
    }
}

#[async_trait]
impl SourceStore for EmbeddedStore {
    async fn edges_among(
        &self,
        tenant: &str,
        kind: EdgeKind,
        readers: &[String],
        actor: &str,
    ) -> StoreResult<Vec<String>> {
        if readers.is_empty() {
            return Ok(Vec::new());
        }
        let (tenant, readers, actor) = (tenant.to_owned(), readers.to_vec(), actor.to_owned());
        self.blocking(move |db| db.edges_among(&tenant, kind, &readers, &actor))
            .await
    }

    async fn members_among(
        &self,
        tenant: &str,
        group_id: &str,
        users: &[String],
    ) -> StoreResult<Vec<(String, Millis)>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        self.inner.members_among(tenant, group_id, users)
    }

    async fn outboxes(
        &self,
        tenant: &str,
        reads: &[(Outbox, FeedRange)],
    ) -> StoreResult<Vec<Vec<Posted>>> {
        if reads.len() <= 4 {
            return self.inner.outboxes(tenant, reads);
        }
        let (tenant, reads) = (tenant.to_owned(), reads.to_vec());
        self.blocking(move |db| db.outboxes(&tenant, &reads)).await
    }
}
