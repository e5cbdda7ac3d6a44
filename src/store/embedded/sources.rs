//! What the feed models read beside the timelines: edges looked up for
//! many readers at once, cuts, celebrities (all in the `graph` family), and
//! many outbox ranges in one blocking step.

use async_trait::async_trait;
use rocksdb::WriteBatch;

use super::families::{GRAPH, META, OUTBOX};
use super::graph::{decode_member, edge_codes, edge_key, member_key};
use super::keys::{self, graph as tag, Key, Reader};
use super::{db_err, EmbeddedStore, Inner};
use crate::model::{EdgeKind, Millis, Position};
use crate::store::codes::EDGE_KIND;
use crate::store::{Cut, FeedRange, Outbox, Posted, SourceStore, StoreResult};

fn cut_key(tenant: &str, reader: &str, code: u8, actor: &str) -> Vec<u8> {
    Key::tag(tag::CUT)
        .str(tenant)
        .str(reader)
        .byte(code)
        .last(actor)
        .into_vec()
}

/// One range of an edge's cut: since, began, until (none: standing).
type Range = (Position, Position, Option<Position>);

/// An edge's ranges, 60 bytes each (since, began, until; an end of
/// `Position::MAX` stands for none). A 40-byte value is a standing cut
/// written before ranges were kept side by side.
fn encode_ranges(ranges: &[Range]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ranges.len() * 60);
    for (since, began, until) in ranges {
        out.extend_from_slice(&keys::encode_position(*since));
        out.extend_from_slice(&keys::encode_position(*began));
        out.extend_from_slice(&keys::encode_position(until.unwrap_or(Position::MAX)));
    }
    out
}

fn decode_ranges(v: &[u8]) -> StoreResult<Vec<Range>> {
    if v.len() == 40 {
        return Ok(vec![(
            keys::decode_position(v)?,
            keys::decode_position(&v[20..])?,
            None,
        )]);
    }
    if !v.len().is_multiple_of(60) {
        return Err(keys::corrupt("cut"));
    }
    v.chunks(60)
        .map(|r| {
            let until = keys::decode_position(&r[40..])?;
            Ok((
                keys::decode_position(r)?,
                keys::decode_position(&r[20..])?,
                (until != Position::MAX).then_some(until),
            ))
        })
        .collect()
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
            let code = r.byte()?;
            let actor = r.last()?.to_owned();
            let record = format_args!("graph/cut {tenant}/{reader}/{actor}");
            let kind = EDGE_KIND.read_byte(code, record)?;
            for (since, began, until) in decode_ranges(v)? {
                out.push(Cut {
                    kind,
                    actor: actor.clone(),
                    since,
                    began,
                    until,
                });
            }
            Ok(())
        })?;
        Ok(out)
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

    async fn set_cut(&self, tenant: &str, reader: &str, cut: &Cut) -> StoreResult<()> {
        let key = cut_key(tenant, reader, edge_codes(cut.kind).0, &cut.actor);
        let cut = cut.clone();
        self.blocking(move |db| {
            let _lock = db.lock(&[&key]);
            // One value per edge: its ranges, the standing one without an
            // end; a range replaces the one with the same end.
            let mut ranges = match db.get(GRAPH, &key)? {
                Some(v) => decode_ranges(&v)?,
                None => Vec::new(),
            };
            ranges.retain(|r| r.2 != cut.until);
            ranges.push((cut.since, cut.began, cut.until));
            let mut batch = WriteBatch::default();
            batch.put_cf(db.cf(GRAPH), &key, encode_ranges(&ranges));
            db.commit(batch)
        })
        .await
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
