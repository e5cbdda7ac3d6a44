//! Records in the `records` family: `(kind, tenant, key)` → the version (8
//! bytes, big endian) and the body. A write reads the version and writes
//! under the key's lock, in one synced batch.
//!
//! Earlier versions kept cuts, celebrities and inboxes in the `graph`
//! family and the deployment's values in `meta`: they are moved here at
//! open, once (records version 1 in `meta`).

use async_trait::async_trait;
use rocksdb::WriteBatch;

use super::families::{GRAPH, META, RECORDS};
use super::keys::{self, graph as tag, Key, Reader};
use super::{db_err, EmbeddedStore, Inner};
use crate::model::{Inbox, Position};
use crate::store::codes::{EDGE_KIND, RECORD_KIND};
use crate::store::records::{cut_key, encode_cut, CutRange};
use crate::store::{Keys, RecordKind, RecordStore, StoreResult, Stored};

/// The `meta` key of the records version reached.
const RECORDS_VERSION_KEY: &[u8] = b"records-version";
const RECORDS_VERSION: u8 = 1;

fn record_key(kind: RecordKind, tenant: &str, key: &str) -> Vec<u8> {
    Key::tag(RECORD_KIND.byte(kind))
        .str(tenant)
        .last(key)
        .into_vec()
}

fn encode(version: u64, body: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(8 + body.len());
    value.extend_from_slice(&version.to_be_bytes());
    value.extend_from_slice(body);
    value
}

pub(super) fn decode(value: &[u8]) -> StoreResult<Stored> {
    let version: [u8; 8] = value
        .get(..8)
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| keys::corrupt("record version"))?;
    Ok(Stored {
        version: u64::from_be_bytes(version),
        body: value[8..].to_vec(),
    })
}

/// Puts a record at its first version into a batch (a move at open, an
/// import).
pub(super) fn put_first(
    batch: &mut WriteBatch,
    inner: &Inner,
    kind: RecordKind,
    (tenant, key): (&str, &str),
    body: &[u8],
) {
    batch.put_cf(
        inner.cf(RECORDS),
        record_key(kind, tenant, key),
        encode(1, body),
    );
}

impl Inner {
    fn records(
        &self,
        kind: RecordKind,
        tenant: &str,
        keys: Keys<'_>,
    ) -> StoreResult<Vec<(String, Stored)>> {
        let (prefix, after, limit) = match keys {
            Keys::Under(prefix) => (prefix, None, usize::MAX),
            Keys::Page {
                under,
                after,
                limit,
            } => (under, after, limit),
            Keys::These(keys) => {
                let at: Vec<Vec<u8>> = keys.iter().map(|k| record_key(kind, tenant, k)).collect();
                let found = self.db.batched_multi_get_cf(self.cf(RECORDS), &at, false);
                let mut out = Vec::new();
                for (key, value) in keys.iter().zip(found) {
                    if let Some(value) = value.map_err(db_err)? {
                        out.push((key.clone(), decode(&value)?));
                    }
                }
                return Ok(out);
            }
        };
        let start = record_key(kind, tenant, prefix);
        let keys_from = start.len() - prefix.len();
        // Past `after`: its key and a zero byte is the first key after it.
        let lower = match after {
            Some(after) => {
                let mut past = record_key(kind, tenant, after);
                past.push(0);
                past.max(start.clone())
            }
            None => start.clone(),
        };
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.scan_prefix(RECORDS, &start, &lower, limit, |k, v| {
            let key = std::str::from_utf8(&k[keys_from..])
                .map_err(|_| keys::corrupt("record key"))?
                .to_owned();
            out.push((key, decode(v)?));
            Ok(())
        })?;
        Ok(out)
    }

    fn put_record(
        &self,
        kind: RecordKind,
        tenant: &str,
        key: &str,
        body: Option<Vec<u8>>,
        expect: Option<u64>,
    ) -> StoreResult<bool> {
        let key = record_key(kind, tenant, key);
        let _lock = self.lock(&[&key]);
        let stored = match self.get(RECORDS, &key)? {
            Some(v) => decode(&v)?.version,
            None => 0,
        };
        if expect.is_some_and(|e| e != stored) {
            return Ok(false);
        }
        let mut batch = WriteBatch::default();
        match body {
            Some(body) => batch.put_cf(self.cf(RECORDS), &key, encode(stored + 1, &body)),
            None => batch.delete_cf(self.cf(RECORDS), &key),
        }
        self.commit(batch)?;
        Ok(true)
    }

    /// Moves the records earlier versions kept in `graph` and `meta` into
    /// `records`, once, in one batch with the version reached.
    pub(super) fn migrate_records(&self) -> StoreResult<()> {
        match self.get(META, RECORDS_VERSION_KEY)?.as_deref() {
            Some([v]) if *v >= RECORDS_VERSION => return Ok(()),
            Some([_]) | None => {}
            Some(_) => return Err(keys::corrupt("records version")),
        }
        let mut batch = WriteBatch::default();
        let moved = self.move_cuts(&mut batch)?
            + self.move_tagged(&mut batch, tag::CELEBRITY, RecordKind::Celebrity)?
            + self.move_tagged(&mut batch, tag::INBOX, RecordKind::Inbox)?
            + self.move_deployment_values(&mut batch)?;
        batch.put_cf(self.cf(META), RECORDS_VERSION_KEY, [RECORDS_VERSION]);
        self.commit(batch)?;
        if moved > 0 {
            tracing::info!(moved, "records moved to the records family");
        }
        Ok(())
    }

    fn move_cuts(&self, batch: &mut WriteBatch) -> StoreResult<usize> {
        let prefix = [tag::CUT];
        let mut moved = 0;
        self.scan_prefix(GRAPH, &prefix, &prefix, usize::MAX, |k, v| {
            let mut r = Reader(&k[1..]);
            let (tenant, reader) = (r.str()?, r.str()?);
            let code = r.byte()?;
            let actor = r.last()?;
            let kind = EDGE_KIND.read_byte(code, format_args!("graph/cut {tenant}/{reader}"))?;
            let key = cut_key(reader, kind, actor);
            let body = encode_cut(&earlier_ranges(v)?);
            batch.put_cf(
                self.cf(RECORDS),
                record_key(RecordKind::Cut, tenant, &key),
                encode(1, &body),
            );
            batch.delete_cf(self.cf(GRAPH), k);
            moved += 1;
            Ok(())
        })?;
        Ok(moved)
    }

    /// Moves `(tenant, last)` keys of one tag, their values as bodies (an
    /// inbox at the version it notes).
    fn move_tagged(&self, batch: &mut WriteBatch, tag: u8, kind: RecordKind) -> StoreResult<usize> {
        let prefix = [tag];
        let mut moved = 0;
        self.scan_prefix(GRAPH, &prefix, &prefix, usize::MAX, |k, v| {
            let mut r = Reader(&k[1..]);
            let (tenant, key) = (r.str()?, r.last()?);
            let version = match kind {
                RecordKind::Inbox => keys::decode_record::<Inbox>(v)?.version.max(1),
                _ => 1,
            };
            batch.put_cf(
                self.cf(RECORDS),
                record_key(kind, tenant, key),
                encode(version, v),
            );
            batch.delete_cf(self.cf(GRAPH), k);
            moved += 1;
            Ok(())
        })?;
        Ok(moved)
    }

    fn move_deployment_values(&self, batch: &mut WriteBatch) -> StoreResult<usize> {
        let prefix = b"deployment/";
        let mut moved = 0;
        self.scan_prefix(META, prefix, prefix, usize::MAX, |k, v| {
            let key =
                std::str::from_utf8(&k[prefix.len()..]).map_err(|_| keys::corrupt("meta key"))?;
            batch.put_cf(
                self.cf(RECORDS),
                record_key(RecordKind::Meta, "", key),
                encode(1, v),
            );
            batch.delete_cf(self.cf(META), k);
            moved += 1;
            Ok(())
        })?;
        Ok(moved)
    }
}

/// An edge's ranges as earlier versions kept them: 60 bytes each, or a
/// 40-byte standing cut from before ranges were kept side by side.
fn earlier_ranges(v: &[u8]) -> StoreResult<Vec<CutRange>> {
    let position = |b: &[u8]| keys::decode_position(b);
    if v.len() == 40 {
        return Ok(vec![(position(v)?, position(&v[20..])?, None)]);
    }
    if !v.len().is_multiple_of(60) {
        return Err(keys::corrupt("cut"));
    }
    v.chunks(60)
        .map(|r| {
            let until = position(&r[40..])?;
            Ok((
                position(r)?,
                position(&r[20..])?,
                (until != Position::MAX).then_some(until),
            ))
        })
        .collect()
}

#[async_trait]
impl RecordStore for EmbeddedStore {
    async fn records(
        &self,
        kind: RecordKind,
        tenant: &str,
        keys: Keys<'_>,
    ) -> StoreResult<Vec<(String, Stored)>> {
        self.inner()?.records(kind, tenant, keys)
    }

    async fn put_record(
        &self,
        kind: RecordKind,
        tenant: &str,
        key: &str,
        body: Option<Vec<u8>>,
        expect: Option<u64>,
    ) -> StoreResult<bool> {
        let (tenant, key) = (tenant.to_owned(), key.to_owned());
        self.blocking(move |db| db.put_record(kind, &tenant, &key, body, expect))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EdgeKind, ObjectId};
    use crate::store::{Cut, Records};

    /// A store as an earlier version left it: a cut in the 40-byte form and
    /// one with a kept range, a celebrity, an inbox and a deployment value,
    /// in `graph` and `meta`, and no records version noted. Open moves them
    /// once; reads through the records find them as they were.
    #[tokio::test]
    async fn earlier_records_are_moved_once() -> StoreResult<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        let at = |r: i64| Position {
            relevancy: r,
            action_id: ObjectId::from_bytes([r as u8; 12]),
        };
        {
            let store = EmbeddedStore::open(dir.path())?;
            let db = &store.inner().unwrap();
            let mut batch = WriteBatch::default();
            let cut = |reader: &str, code: u8, actor: &str| {
                Key::tag(tag::CUT)
                    .str("t")
                    .str(reader)
                    .byte(code)
                    .last(actor)
                    .into_vec()
            };
            let mut standing = at(5).to_bytes().to_vec();
            standing.extend_from_slice(&at(4).to_bytes());
            let follows = EDGE_KIND.byte(EdgeKind::Follows);
            batch.put_cf(db.cf(GRAPH), cut("ann", follows, "bob"), standing);
            let kept = encode_cut(&[(at(1), at(2), Some(at(3)))]);
            let friend = EDGE_KIND.byte(EdgeKind::Friend);
            batch.put_cf(db.cf(GRAPH), cut("ann", friend, "cy"), kept);
            batch.put_cf(
                db.cf(GRAPH),
                Key::tag(tag::CELEBRITY).str("t").last("bob").into_vec(),
                [],
            );
            let mut inbox = Inbox::new("t", "ann");
            inbox.seen_until = 42;
            inbox.version = 3;
            batch.put_cf(
                db.cf(GRAPH),
                Key::tag(tag::INBOX).str("t").last("ann").into_vec(),
                keys::encode_record(&inbox)?,
            );
            batch.put_cf(db.cf(META), b"deployment/last-model", b"push");
            batch.delete_cf(db.cf(META), RECORDS_VERSION_KEY);
            // Moved by this open already: gone again, as before the move.
            for kind in RecordKind::ALL {
                let prefix = [RECORD_KIND.byte(kind)];
                db.scan_prefix(RECORDS, &prefix, &prefix, usize::MAX, |k, _| {
                    batch.delete_cf(db.cf(RECORDS), k);
                    Ok(())
                })?;
            }
            db.commit(batch)?;
        }
        for _ in 0..2 {
            let store = EmbeddedStore::open(dir.path())?;
            let mut cuts = store.cuts("t", "ann").await?;
            cuts.sort_by(|a, b| a.actor.cmp(&b.actor));
            assert_eq!(
                cuts,
                [
                    Cut {
                        kind: EdgeKind::Follows,
                        actor: "bob".into(),
                        since: at(5),
                        began: at(4),
                        until: None,
                    },
                    Cut {
                        kind: EdgeKind::Friend,
                        actor: "cy".into(),
                        since: at(1),
                        began: at(2),
                        until: Some(at(3)),
                    },
                ]
            );
            let users = ["bob".to_owned(), "cy".to_owned()];
            assert_eq!(store.celebrities("t", &users).await?, ["bob"]);
            let inbox = store.inbox("t", "ann").await?;
            assert_eq!((inbox.seen_until, inbox.version), (42, 3));
            assert_eq!(
                store.meta("last-model").await?.as_deref(),
                Some(&b"push"[..])
            );
            // Nothing is left where it was.
            let earlier = store
                .inner()
                .unwrap()
                .get(META, b"deployment/last-model")?
                .or(store.inner().unwrap().get(
                    GRAPH,
                    &Key::tag(tag::CELEBRITY).str("t").last("bob").into_vec(),
                )?);
            assert_eq!(earlier, None);
        }
        Ok(())
    }
}
