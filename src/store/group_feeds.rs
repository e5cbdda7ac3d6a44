//! Group feeds: each group's last actions as a capped, segmented ring (the
//! Kandels layout), one [record](super::records) per group (its kind
//! [`RecordKind::GroupFeed`], its key the group), changed by the rule
//! written here once for every backend. A counter numbers what is posted to
//! the group, and post `n` takes slot `n mod size`, replacing what stood
//! there, so the feed keeps the newest `size` and never needs a count or a
//! cleanup. A smaller size later hides the slots beyond it (only the newest
//! `size` posts are read); a larger one lets the ring grow into new slots as
//! posts come (a few of the last posts before the change may be replaced
//! early while it refills).
//!
//! A post reads the ring and writes it back under the version it read
//! (compare and set), reading again if another post came first: posts to
//! one group are few (one per action sent to it, whatever its audience), so
//! they seldom meet.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::{FeedRange, RecordKind, RecordStore, Records, StoreError, StoreResult};
use crate::model::Position;

/// Default `--group-feed-size`.
pub const DEFAULT_SIZE: usize = 1_000;

/// One slot of a ring: the post's number and the action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub n: u64,
    pub at: Position,
}

/// Bytes of one slot in a ring's body: the slot, the post's number and the
/// action's position.
const SLOT_BYTES: usize = 8 + 8 + 20;

/// A group's ring as its record holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ring {
    /// The number of the last post (posts are numbered from 1).
    pub last: u64,
    /// What stands in each slot taken so far.
    pub slots: BTreeMap<u64, Slot>,
}

impl Ring {
    /// Posts `at` in the slot after the last post's, unless the ring holds
    /// it already (in any slot). Returns whether it was posted.
    pub fn post(&mut self, at: Position, size: usize) -> bool {
        if self.slots.values().any(|s| s.at.action_id == at.action_id) {
            return false;
        }
        let n = self.last + 1;
        self.slots.insert(n % size.max(1) as u64, Slot { n, at });
        self.last = n;
        true
    }

    /// The newest `size` posts, as `range` asks for them, newest first by
    /// when the actions happened.
    pub fn range(&self, size: usize, range: FeedRange) -> Vec<Position> {
        let first = self.last.saturating_sub(size as u64);
        let mut positions: Vec<Position> = self
            .slots
            .values()
            .filter(|s| s.n > first && range.holds(s.at))
            .map(|s| s.at)
            .collect();
        range.cut(&mut positions, |p| *p);
        positions
    }

    /// The record's body: the last post's number (8 bytes, big endian),
    /// then each slot (the slot and the post's number, 8 bytes each, and
    /// the position, 20).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.slots.len() * SLOT_BYTES);
        out.extend_from_slice(&self.last.to_be_bytes());
        for (slot, s) in &self.slots {
            out.extend_from_slice(&slot.to_be_bytes());
            out.extend_from_slice(&s.n.to_be_bytes());
            out.extend_from_slice(&s.at.to_bytes());
        }
        out
    }

    /// The ring a record's body holds; `tenant` and `group` name it for
    /// errors.
    pub fn decode(body: &[u8], tenant: &str, group: &str) -> StoreResult<Ring> {
        let corrupt =
            |what: String| StoreError::corrupt(format!("group feed {tenant}/{group}"), what);
        let u64_at = |b: &[u8]| u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
        if body.len() < 8 || !(body.len() - 8).is_multiple_of(SLOT_BYTES) {
            return Err(corrupt(format!("{} bytes", body.len())));
        }
        let mut ring = Ring {
            last: u64_at(body),
            slots: BTreeMap::new(),
        };
        for entry in body[8..].chunks(SLOT_BYTES) {
            let at = Position::from_bytes(&entry[16..])
                .ok_or_else(|| corrupt("a slot without a position".to_owned()))?;
            let n = u64_at(&entry[8..]);
            ring.slots.insert(u64_at(entry), Slot { n, at });
        }
        Ok(ring)
    }
}

/// Group feeds, on the records of every [`RecordStore`].
#[async_trait]
pub trait GroupFeeds: RecordStore {
    /// Posts the action at `at` to `group`'s feed, in the slot after the
    /// last post's, unless the ring holds it already (so a fan-out run
    /// again posts nothing twice). Returns whether it was posted.
    async fn post_to_group(
        &self,
        tenant: &str,
        group: &str,
        at: Position,
        size: usize,
    ) -> StoreResult<bool> {
        loop {
            let (version, mut ring) = ring(self, tenant, group).await?;
            if !ring.post(at, size) {
                return Ok(false);
            }
            let body = Some(ring.encode());
            if self
                .put_record(RecordKind::GroupFeed, tenant, group, body, Some(version))
                .await?
            {
                return Ok(true);
            }
        }
    }

    /// A range of `group`'s feed, newest first by when the actions
    /// happened: of the newest `size` posts. One round trip.
    async fn group_feed(
        &self,
        tenant: &str,
        group: &str,
        size: usize,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>> {
        Ok(ring(self, tenant, group).await?.1.range(size, range))
    }
}

impl<T: RecordStore + ?Sized> GroupFeeds for T {}

/// `group`'s ring and its record's version (0 and an empty ring if none).
async fn ring<S: RecordStore + ?Sized>(
    store: &S,
    tenant: &str,
    group: &str,
) -> StoreResult<(u64, Ring)> {
    match store.record(RecordKind::GroupFeed, tenant, group).await? {
        Some(stored) => Ok((stored.version, Ring::decode(&stored.body, tenant, group)?)),
        None => Ok((0, Ring::default())),
    }
}
