//! Rivers: one record per reader who has one (in the `rivers` family), and
//! their items, which are the timeline's items that came from a pulled
//! source and were not bumped.
//!
//! A river is what the reader's sources give, kept ahead: everything
//! written here is committed without waiting for a sync. Writes land in
//! the log in order, so a crash of the machine before the next synced
//! commit (any fan-out's) loses the newest of them together, and leaves a
//! river as one of its earlier states: unbuilt, being built (read as if
//! empty), or less trimmed.

use async_trait::async_trait;
use rocksdb::WriteBatch;

use super::actions::action_lock;
use super::families::{GRAPH, ITEMS, RIVERS};
use super::keys::{self, graph as tag, ItemState, Key, Reader};
use super::{EmbeddedStore, Inner};
use crate::model::{FeedItem, Millis};
use crate::store::{FeedRange, River, RiverStore, RiverWrite, StoreResult};

/// Timeline entries read per step while dropping or trimming a river.
const STEP: usize = 2_000;

fn river_key(tenant: &str, reader: &str) -> Vec<u8> {
    Key::new().str(tenant).last(reader).into_vec()
}

fn encode_river(river: &River) -> Vec<u8> {
    let mut out = keys::encode_position(river.complete_from).to_vec();
    out.extend_from_slice(&river.touched.to_be_bytes());
    out
}

fn decode_river(bytes: &[u8]) -> StoreResult<River> {
    let touched = bytes
        .get(20..28)
        .and_then(|b| b.try_into().ok())
        .map(i64::from_be_bytes)
        .ok_or_else(|| keys::corrupt("river"))?;
    Ok(River {
        complete_from: keys::decode_position(bytes)?,
        touched,
    })
}

/// Whether a timeline item belongs to the reader's river.
fn in_river(item: &FeedItem) -> bool {
    item.reason.kind.pulled()
}

impl Inner {
    /// Moves the river records earlier versions kept in the `graph` family
    /// to `rivers`, in one batch. Once moved, the seek finds none.
    pub(super) fn move_rivers(&self) -> StoreResult<()> {
        let prefix = [tag::EARLIER_RIVER];
        let mut batch = WriteBatch::default();
        let mut moved = 0;
        self.scan_prefix(GRAPH, &prefix, &prefix, usize::MAX, |k, v| {
            batch.put_cf(self.cf(RIVERS), &k[1..], v);
            batch.delete_cf(self.cf(GRAPH), k);
            moved += 1;
            Ok(())
        })?;
        if moved > 0 {
            self.commit(batch)?;
            tracing::info!(moved, "rivers moved to the rivers family");
        }
        Ok(())
    }

    fn river(&self, tenant: &str, reader: &str) -> StoreResult<Option<River>> {
        self.get(RIVERS, &river_key(tenant, reader))?
            .map(|v| decode_river(&v))
            .transpose()
    }

    /// Removes river items of `reader` older than the newest `keep`, then
    /// sets (or, with `drop`, deletes) the record. Returns how many went.
    fn cut_river(&self, tenant: &str, reader: &str, keep: usize, drop: bool) -> StoreResult<u64> {
        let mut kept = 0usize;
        let mut oldest_kept = None;
        let mut removed = 0u64;
        let mut older_than = None;
        let families = self.item_families();
        let mut key = Vec::with_capacity(64);
        loop {
            let range = FeedRange {
                older_than,
                newer_than: None,
                limit: STEP,
                from_oldest: false,
            };
            let page = self.feed_page(tenant, reader, range)?;
            let Some(last) = page.last() else { break };
            older_than = Some(last.position());
            let mut doomed = Vec::new();
            for item in page.iter().filter(|i| in_river(i)) {
                if kept < keep {
                    kept += 1;
                    oldest_kept = Some(item.position());
                } else {
                    doomed.push(item);
                }
            }
            if !doomed.is_empty() {
                let locks: Vec<Vec<u8>> = doomed
                    .iter()
                    .map(|i| action_lock(tenant, i.action_id.bytes()))
                    .collect();
                let _lock = self.lock(&locks);
                let mut batch = WriteBatch::default();
                for item in doomed {
                    let oid = item.action_id.bytes();
                    keys::item(&mut key, tenant, oid, reader);
                    let Some(state) = self.get(ITEMS, &key)? else {
                        continue;
                    };
                    let state = ItemState::decode(&state)?;
                    // Raised by a bump since it was read: no longer the river's.
                    if state.hidden || state.relevancy != item.relevancy {
                        continue;
                    }
                    batch.delete_cf(self.cf(ITEMS), &key);
                    Inner::drop_entries(
                        &families, &mut batch, &mut key, tenant, reader, oid, &state,
                    );
                    removed += 1;
                }
                self.commit_unsynced(batch)?;
            }
            if page.len() < STEP {
                break;
            }
        }
        let mut batch = WriteBatch::default();
        let record = river_key(tenant, reader);
        if drop {
            batch.delete_cf(self.cf(RIVERS), &record);
        } else if removed > 0 {
            if let (Some(mut river), Some(oldest)) = (self.river(tenant, reader)?, oldest_kept) {
                river.complete_from = river.complete_from.max(oldest);
                batch.put_cf(self.cf(RIVERS), &record, encode_river(&river));
            }
        }
        self.commit_unsynced(batch)?;
        Ok(removed)
    }
}

#[async_trait]
impl RiverStore for EmbeddedStore {
    async fn rivers(&self, tenant: &str, readers: &[String]) -> StoreResult<Vec<Option<River>>> {
        if let [reader] = readers {
            return Ok(vec![self.inner()?.river(tenant, reader)?]);
        }
        let keys: Vec<Vec<u8>> = readers.iter().map(|r| river_key(tenant, r)).collect();
        self.blocking(move |db| {
            db.values(RIVERS, &keys)?
                .into_iter()
                .map(|v| v.map(|v| decode_river(&v)).transpose())
                .collect()
        })
        .await
    }

    async fn idle_rivers(
        &self,
        before: Millis,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        self.blocking(move |db| {
            let mut out = Vec::new();
            db.scan(RIVERS, &[], None, usize::MAX, |k, v| {
                if out.len() < limit && decode_river(v)?.touched < before {
                    let mut r = Reader(k);
                    let tenant = r.str()?.to_owned();
                    out.push((tenant, r.last()?.to_owned()));
                }
                Ok(())
            })?;
            Ok(out)
        })
        .await
    }

    async fn building_rivers(&self, limit: usize) -> StoreResult<Vec<(String, String)>> {
        self.blocking(move |db| {
            let mut out = Vec::new();
            db.scan(RIVERS, &[], None, usize::MAX, |k, v| {
                if out.len() < limit && decode_river(v)?.building() {
                    let mut r = Reader(k);
                    let tenant = r.str()?.to_owned();
                    out.push((tenant, r.last()?.to_owned()));
                }
                Ok(())
            })?;
            Ok(out)
        })
        .await
    }

    async fn write_river(&self, tenant: &str, reader: &str, write: RiverWrite) -> StoreResult<u64> {
        let (tenant, reader) = (tenant.to_owned(), reader.to_owned());
        match write {
            // One key, not synced: written in place, as a read is.
            RiverWrite::Put(river) => {
                let mut batch = WriteBatch::default();
                let key = river_key(&tenant, &reader);
                let inner = self.inner()?;
                batch.put_cf(inner.cf(RIVERS), key, encode_river(&river));
                inner.commit_unsynced(batch).map(|()| 0)
            }
            RiverWrite::Keep(keep) => {
                self.blocking(move |db| db.cut_river(&tenant, &reader, keep, false))
                    .await
            }
            RiverWrite::Drop => {
                self.blocking(move |db| db.cut_river(&tenant, &reader, 0, true))
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ObjectId, Position};

    /// A store as an earlier version left it, with two readers' rivers in
    /// `graph`: open moves them to `rivers`, where reads, the idle sweep
    /// and writes find them, and leaves none behind.
    #[tokio::test]
    async fn earlier_rivers_are_moved_to_their_family() -> StoreResult<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        let river = |r: i64| River {
            complete_from: Position {
                relevancy: r,
                action_id: ObjectId::from_bytes([r as u8; 12]),
            },
            touched: r * 1000,
        };
        {
            let store = EmbeddedStore::open(dir.path())?;
            let db = &store.inner().unwrap();
            let mut batch = WriteBatch::default();
            for (reader, r) in [("ann", 5), ("bob", 7)] {
                let key = Key::tag(tag::EARLIER_RIVER).str("t").last(reader);
                batch.put_cf(db.cf(GRAPH), key.into_vec(), encode_river(&river(r)));
            }
            db.commit(batch)?;
        }
        let store = EmbeddedStore::open(dir.path())?;
        let readers = ["ann".to_owned(), "bob".to_owned(), "cy".to_owned()];
        assert_eq!(
            store.rivers("t", &readers).await?,
            [Some(river(5)), Some(river(7)), None]
        );
        assert_eq!(
            store
                .inner()
                .unwrap()
                .count_under(GRAPH, &[tag::EARLIER_RIVER])?,
            0
        );
        let idle = store.idle_rivers(6000, 10).await?;
        assert_eq!(idle, [("t".to_owned(), "ann".to_owned())]);
        store.write_river("t", "ann", RiverWrite::Drop).await?;
        assert_eq!(store.rivers("t", &readers[..1]).await?, [None]);
        Ok(())
    }
}
