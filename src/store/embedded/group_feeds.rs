//! Group feeds are records (see [`crate::store::group_feeds`]). Earlier
//! versions kept each group's ring in the `graph` family (a counter, one
//! entry per slot, and which action stands in which slot): it is moved
//! into its record at open, once (group feeds version 1 in `meta`).

use rocksdb::WriteBatch;

use super::families::{GRAPH, META};
use super::keys::{self, graph as tag, Reader};
use super::records::put_first;
use super::Inner;
use crate::store::group_feeds::{Ring, Slot};
use crate::store::{RecordKind, StoreResult};

/// The `meta` key of the group feeds version reached.
const GROUP_FEEDS_VERSION_KEY: &[u8] = b"group-feeds-version";
const GROUP_FEEDS_VERSION: u8 = 1;

impl Inner {
    /// Moves the rings earlier versions kept in `graph` into their records,
    /// once, in one batch with the version reached.
    pub(super) fn migrate_group_feeds(&self) -> StoreResult<()> {
        match self.get(META, GROUP_FEEDS_VERSION_KEY)?.as_deref() {
            Some([v]) if *v >= GROUP_FEEDS_VERSION => return Ok(()),
            Some([_]) | None => {}
            Some(_) => return Err(keys::corrupt("group feeds version")),
        }
        let graph = self.cf(GRAPH);
        let mut batch = WriteBatch::default();
        // Slots are keyed (tenant, group, slot): each group's are together.
        let mut rings: Vec<((String, String), Ring)> = Vec::new();
        let prefix = [tag::RING_SLOT];
        self.scan_prefix(GRAPH, &prefix, &prefix, usize::MAX, |k, v| {
            let mut r = Reader(&k[1..]);
            let (tenant, group) = (r.str()?, r.str()?);
            let slot = u64_of(r.0)?;
            let slot_value = Slot {
                n: u64_of(v)?,
                at: keys::decode_position(v.get(8..).unwrap_or_default())?,
            };
            let here = (tenant.to_owned(), group.to_owned());
            match rings.last_mut() {
                Some((at, ring)) if *at == here => {
                    ring.slots.insert(slot, slot_value);
                }
                _ => {
                    let mut ring = Ring::default();
                    ring.slots.insert(slot, slot_value);
                    rings.push((here, ring));
                }
            }
            batch.delete_cf(graph, k);
            Ok(())
        })?;
        for ((tenant, group), ring) in &mut rings {
            let counter = keys::Key::tag(tag::RING_COUNTER)
                .str(tenant)
                .last(group)
                .into_vec();
            let newest = ring.slots.values().map(|s| s.n).max().unwrap_or(0);
            ring.last = match self.get(GRAPH, &counter)? {
                Some(v) => u64_of(&v)?.max(newest),
                None => newest,
            };
            put_first(
                &mut batch,
                self,
                RecordKind::GroupFeed,
                (tenant, group),
                &ring.encode(),
            );
        }
        for earlier in [tag::RING_COUNTER, tag::RING_ACTION] {
            let prefix = [earlier];
            self.scan_prefix(GRAPH, &prefix, &prefix, usize::MAX, |k, _| {
                batch.delete_cf(graph, k);
                Ok(())
            })?;
        }
        batch.put_cf(
            self.cf(META),
            GROUP_FEEDS_VERSION_KEY,
            [GROUP_FEEDS_VERSION],
        );
        self.commit(batch)?;
        if !rings.is_empty() {
            tracing::info!(rings = rings.len(), "group feeds moved to records");
        }
        Ok(())
    }
}

fn u64_of(v: &[u8]) -> StoreResult<u64> {
    Ok(u64::from_be_bytes(
        v.get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| keys::corrupt("earlier group feed"))?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ObjectId, Position};
    use crate::store::embedded::EmbeddedStore;
    use crate::store::group_feeds::GroupFeeds;
    use crate::store::FeedRange;

    /// A store as an earlier version left it: a group's ring of size 3 in
    /// `graph` (a counter at 4, slots 1, 2 and 0 holding posts 4, 2 and 3,
    /// which action stands where) and no group feeds version noted. Open
    /// moves it once: reads find the ring as it was, a post goes on from
    /// its counter, and nothing is left in `graph`.
    #[tokio::test]
    async fn earlier_group_feeds_are_moved_once() -> StoreResult<()> {
        let dir = tempfile::tempdir().expect("temp dir");
        let at = |r: i64| Position {
            relevancy: r,
            action_id: ObjectId::from_bytes([r as u8; 12]),
        };
        let all = FeedRange {
            older_than: None,
            newer_than: None,
            limit: 10,
            from_oldest: false,
        };
        {
            let store = EmbeddedStore::open(dir.path())?;
            let db = &store.inner().unwrap();
            let graph = db.cf(GRAPH);
            let mut batch = WriteBatch::default();
            let counter = keys::Key::tag(tag::RING_COUNTER).str("t").last("g");
            batch.put_cf(graph, counter.into_vec(), 4u64.to_be_bytes());
            for (slot, n, r) in [(1u64, 4u64, 4), (2, 2, 2), (0, 3, 3)] {
                let mut key = keys::Key::tag(tag::RING_SLOT).str("t").str("g").into_vec();
                key.extend_from_slice(&slot.to_be_bytes());
                let mut value = n.to_be_bytes().to_vec();
                value.extend_from_slice(&keys::encode_position(at(r)));
                batch.put_cf(graph, key, value);
                let marker = keys::Key::tag(tag::RING_ACTION)
                    .str("t")
                    .str("g")
                    .oid(at(r).action_id.bytes());
                batch.put_cf(graph, marker.into_vec(), slot.to_be_bytes());
            }
            batch.delete_cf(db.cf(META), GROUP_FEEDS_VERSION_KEY);
            db.commit(batch)?;
        }
        for round in 0..2 {
            let store = EmbeddedStore::open(dir.path())?;
            if round == 0 {
                assert_eq!(
                    store.group_feed("t", "g", 3, all).await?,
                    [at(4), at(3), at(2)]
                );
                assert_eq!(store.group_feed("t", "g", 1, all).await?, [at(4)]);
                assert!(!store.post_to_group("t", "g", at(3), 3).await?, "held");
                // Post 5 takes slot 2, replacing post 2.
                assert!(store.post_to_group("t", "g", at(5), 3).await?);
            }
            assert_eq!(
                store.group_feed("t", "g", 3, all).await?,
                [at(5), at(4), at(3)]
            );
            for earlier in [tag::RING_COUNTER, tag::RING_SLOT, tag::RING_ACTION] {
                let left = store.inner().unwrap().count_under(GRAPH, &[earlier])?;
                assert_eq!(left, 0, "tag {earlier} is empty");
            }
        }
        Ok(())
    }
}
