//! Group feeds: each group's ring in the `graph` family (a counter, one
//! entry per slot, and which action stands in which slot), changed under
//! the group's lock.

use async_trait::async_trait;
use rocksdb::WriteBatch;

use super::families::GRAPH;
use super::keys::{self, graph as tag, Key};
use super::{EmbeddedStore, Inner};
use crate::model::{ObjectId, Position};
use crate::store::group_feeds::{ring_range, Slot};
use crate::store::{FeedRange, GroupFeedStore, StoreResult};

fn counter_key(tenant: &str, group: &str) -> Vec<u8> {
    Key::tag(tag::RING_COUNTER)
        .str(tenant)
        .last(group)
        .into_vec()
}

fn slot_prefix(tenant: &str, group: &str) -> Vec<u8> {
    Key::tag(tag::RING_SLOT).str(tenant).str(group).into_vec()
}

fn slot_key(tenant: &str, group: &str, slot: u64) -> Vec<u8> {
    let mut key = slot_prefix(tenant, group);
    key.extend_from_slice(&slot.to_be_bytes());
    key
}

fn action_key(tenant: &str, group: &str, id: ObjectId) -> Vec<u8> {
    Key::tag(tag::RING_ACTION)
        .str(tenant)
        .str(group)
        .oid(id.bytes())
        .into_vec()
}

fn u64_of(v: &[u8]) -> StoreResult<u64> {
    Ok(u64::from_be_bytes(
        v.get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| keys::corrupt("group feed"))?,
    ))
}

fn decode_slot(v: &[u8]) -> StoreResult<Slot> {
    Ok(Slot {
        n: u64_of(v)?,
        at: keys::decode_position(v.get(8..).unwrap_or_default())?,
    })
}

impl Inner {
    fn post_to_group(
        &self,
        tenant: &str,
        group: &str,
        at: Position,
        size: usize,
    ) -> StoreResult<bool> {
        let counter = counter_key(tenant, group);
        let _lock = self.lock(&[&counter]);
        let marker = action_key(tenant, group, at.action_id);
        if self.get(GRAPH, &marker)?.is_some() {
            return Ok(false);
        }
        let n = match self.get(GRAPH, &counter)? {
            Some(v) => u64_of(&v)? + 1,
            None => 1,
        };
        let slot = n % size.max(1) as u64;
        let key = slot_key(tenant, group, slot);
        let cf = self.cf(GRAPH);
        let mut batch = WriteBatch::default();
        // The post it replaces no longer stands in the ring.
        if let Some(old) = self.get(GRAPH, &key)? {
            let old = decode_slot(&old)?;
            batch.delete_cf(cf, action_key(tenant, group, old.at.action_id));
        }
        let mut value = n.to_be_bytes().to_vec();
        value.extend_from_slice(&keys::encode_position(at));
        batch.put_cf(cf, &key, value);
        batch.put_cf(cf, &marker, slot.to_be_bytes());
        batch.put_cf(cf, &counter, n.to_be_bytes());
        self.commit(batch)?;
        Ok(true)
    }

    fn group_feed(
        &self,
        tenant: &str,
        group: &str,
        size: usize,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>> {
        let prefix = slot_prefix(tenant, group);
        let mut slots = Vec::new();
        self.scan_prefix(GRAPH, &prefix, &prefix, usize::MAX, |_, v| {
            slots.push(decode_slot(v)?);
            Ok(())
        })?;
        Ok(ring_range(slots, size, range))
    }
}

#[async_trait]
impl GroupFeedStore for EmbeddedStore {
    async fn post_to_group(
        &self,
        tenant: &str,
        group: &str,
        at: Position,
        size: usize,
    ) -> StoreResult<bool> {
        let (tenant, group) = (tenant.to_owned(), group.to_owned());
        self.blocking(move |db| db.post_to_group(&tenant, &group, at, size))
            .await
    }

    async fn group_feed(
        &self,
        tenant: &str,
        group: &str,
        size: usize,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>> {
        self.inner.group_feed(tenant, group, size, range)
    }
}
