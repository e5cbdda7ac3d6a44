//! What the feed models read beside the timelines: edges looked up for
//! many readers at once, cuts, celebrities (all in the `graph` family), and
//! many outbox ranges in one blocking step.

use async_trait::async_trait;
use rocksdb::WriteBatch;

use super::families::{GRAPH, META, OUTBOX};
use super::graph::{edge_codes, edge_key, EDGE_FOLLOWS_OUT, EDGE_FRIEND};
use super::keys::{self, graph as tag, Key, Reader};
use super::{db_err, EmbeddedStore, Inner};
use crate::model::{EdgeKind, Position};
use crate::store::{Cut, FeedRange, SourceStore, StoreResult};

fn cut_key(tenant: &str, reader: &str, code: u8, actor: &str) -> Vec<u8> {
    Key::tag(tag::CUT)
        .str(tenant)
        .str(reader)
        .byte(code)
        .last(actor)
        .into_vec()
}

/// Keys of [`SourceStore::meta`] values, apart from the store's own.
fn meta_key(key: &str) -> Vec<u8> {
    format!("deployment/{key}").into_bytes()
}

fn celebrity_key(tenant: &str, user: &str) -> Vec<u8> {
    Key::tag(tag::CELEBRITY).str(tenant).last(user).into_vec()
}

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

    fn cuts(&self, tenant: &str, reader: &str) -> StoreResult<Vec<Cut>> {
        let prefix = Key::tag(tag::CUT).str(tenant).str(reader).into_vec();
        let mut out = Vec::new();
        self.scan_prefix(GRAPH, &prefix, &prefix, usize::MAX, |k, v| {
            let mut r = Reader(&k[prefix.len()..]);
            let kind = match r.byte()? {
                EDGE_FRIEND => EdgeKind::Friend,
                EDGE_FOLLOWS_OUT => EdgeKind::Follows,
                _ => return Err(keys::corrupt("cut")),
            };
            out.push(Cut {
                kind,
                actor: r.last()?.to_owned(),
                since: keys::decode_position(v)?,
                began: keys::decode_position(v.get(20..).unwrap_or_default())?,
                until: v
                    .get(40..)
                    .filter(|u| !u.is_empty())
                    .map(keys::decode_position)
                    .transpose()?,
            });
            Ok(())
        })?;
        Ok(out)
    }

    fn outboxes(
        &self,
        tenant: &str,
        reads: &[(String, FeedRange)],
    ) -> StoreResult<Vec<Vec<Position>>> {
        reads
            .iter()
            .map(|(actor, range)| self.ranked_range(OUTBOX, tenant, actor, *range, |p, _| Ok(p)))
            .collect()
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

    async fn set_cut(&self, tenant: &str, reader: &str, cut: &Cut) -> StoreResult<()> {
        let key = cut_key(tenant, reader, edge_codes(cut.kind).0, &cut.actor);
        let mut value = keys::encode_position(cut.since).to_vec();
        value.extend_from_slice(&keys::encode_position(cut.began));
        if let Some(until) = cut.until {
            value.extend_from_slice(&keys::encode_position(until));
        }
        self.write_one(GRAPH, key, Some(value)).await
    }

    async fn clear_cut(
        &self,
        tenant: &str,
        reader: &str,
        kind: EdgeKind,
        actor: &str,
    ) -> StoreResult<()> {
        let key = cut_key(tenant, reader, edge_codes(kind).0, actor);
        self.write_one(GRAPH, key, None).await
    }

    async fn cuts(&self, tenant: &str, reader: &str) -> StoreResult<Vec<Cut>> {
        self.inner.cuts(tenant, reader)
    }

    async fn mark_celebrity(&self, tenant: &str, user: &str) -> StoreResult<()> {
        let key = celebrity_key(tenant, user);
        self.write_one(GRAPH, key, Some(Vec::new())).await
    }

    async fn celebrities(&self, tenant: &str, users: &[String]) -> StoreResult<Vec<String>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<Vec<u8>> = users.iter().map(|u| celebrity_key(tenant, u)).collect();
        Ok(picked(users, self.inner.exist_many(GRAPH, &keys)?))
    }

    async fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        self.inner.get(META, &meta_key(key))
    }

    async fn set_meta(&self, key: &str, value: &[u8]) -> StoreResult<()> {
        let (key, value) = (meta_key(key), value.to_vec());
        self.write_one(META, key, Some(value)).await
    }

    async fn outboxes(
        &self,
        tenant: &str,
        reads: &[(String, FeedRange)],
    ) -> StoreResult<Vec<Vec<Position>>> {
        if reads.len() <= 4 {
            return self.inner.outboxes(tenant, reads);
        }
        let (tenant, reads) = (tenant.to_owned(), reads.to_vec());
        self.blocking(move |db| db.outboxes(&tenant, &reads)).await
    }
}
