//! The engine's own rate for what a fan-out writes, which `riverfeed bench`
//! sets the worker's rate beside: a delivery's keys (its timeline, item and
//! change entries, exactly as [`Inner::put_item`] writes them) put in
//! batches of the worker's size and committed as the worker commits a batch
//! that does not end a fan-out, with nothing else around them: no job, no
//! lease, no action read, no cache, no events.

use std::time::Instant;

use rocksdb::WriteBatch;

use super::families::{CHANGES, ITEMS, TIMELINE};
use super::keys::{self, ItemState, Key};
use super::{EmbeddedStore, Inner};
use crate::model::{ObjectId, Reason, ReasonKind};
use crate::store::StoreResult;

/// The tenant the reference writes under, removed again afterwards. Not a
/// tenant name the API accepts (it has a space), so no request can meet it.
const SCRATCH: &str = "engine reference";

impl EmbeddedStore {
    /// Writes `deliveries` items of one action to as many readers, in
    /// batches of `batch`, and returns deliveries per second; then removes
    /// every key it wrote.
    pub fn engine_delivery_rate(&self, deliveries: usize, batch: usize) -> StoreResult<f64> {
        let inner = &self.inner()?;
        let rate = inner.write_reference(deliveries, batch.max(1));
        let cleared = inner.clear_scratch();
        let rate = rate?;
        cleared?;
        Ok(rate)
    }
}

impl Inner {
    fn write_reference(&self, deliveries: usize, batch_size: usize) -> StoreResult<f64> {
        let families = self.item_families();
        let id = ObjectId::new().bytes();
        let reason = Reason::new(ReasonKind::Follows, "actor");
        let now = crate::clock::Clock::now(&crate::clock::SystemClock);
        let (mut key, mut value) = (Vec::with_capacity(64), Vec::with_capacity(32));
        let mut owner = String::with_capacity(16);
        let started = Instant::now();
        let mut written = 0;
        while written < deliveries {
            let mut batch = WriteBatch::default();
            for n in written..deliveries.min(written + batch_size) {
                owner.clear();
                use std::fmt::Write as _;
                let _ = write!(owner, "r{n}");
                let state = ItemState {
                    relevancy: now,
                    changed: now,
                    hidden: false,
                };
                let buffers = (&mut key, &mut value);
                Inner::put_item(
                    &families, &mut batch, buffers, SCRATCH, &owner, id, state, &reason,
                );
            }
            written = deliveries.min(written + batch_size);
            self.commit_unsynced(batch)?;
        }
        Ok(deliveries as f64 / started.elapsed().as_secs_f64().max(f64::MIN_POSITIVE))
    }

    /// Removes whatever the reference wrote, one range per family.
    fn clear_scratch(&self) -> StoreResult<()> {
        let prefix = Key::new().str(SCRATCH).into_vec();
        let end = keys::successor(&prefix).unwrap_or_else(|| vec![0xff; prefix.len() + 1]);
        let mut batch = WriteBatch::default();
        for family in [TIMELINE, ITEMS, CHANGES] {
            batch.delete_range_cf(self.cf(family), &prefix, &end);
        }
        self.commit(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_writes_what_a_delivery_writes_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let inner = &store.inner().unwrap();
        let count = |family: &str| {
            let mut n = 0;
            inner
                .scan(family, &[], None, usize::MAX, |_, _| {
                    n += 1;
                    Ok(())
                })
                .unwrap();
            n
        };
        inner.write_reference(250, 100).unwrap();
        // Three keys a delivery: the timeline entry, the item, the change.
        for family in [TIMELINE, ITEMS, CHANGES] {
            assert_eq!(count(family), 250, "{family}");
        }
        inner.clear_scratch().unwrap();
        let rate = store.engine_delivery_rate(250, 100).unwrap();
        assert!(rate > 0.0);
        for family in [TIMELINE, ITEMS, CHANGES] {
            assert_eq!(count(family), 0, "{family}");
        }
    }
}
