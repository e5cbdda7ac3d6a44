//! Where a claim starts reading the due index, per job kind and region
//! (waiting jobs, then leased ones by the lease's end).
//!
//! A finished or moved job leaves a deletion in the index that reads step
//! over one by one until RocksDB compacts it away: read from the start, a
//! claim would cost more with every job done since. Below a region's floor
//! nothing lives, so a claim starts there, and moves the floor up to where
//! its read showed nothing else lives.
//!
//! The one rule that keeps it true: a due entry is never left below the
//! floor. An entry written is noted when its batch commits (never before,
//! or a claim could read before it is there and raise the floor past it):
//! it moves the floor down to itself, and it caps how far any claim reading
//! meanwhile may raise it, since that claim may not have seen it. In
//! memory: one process owns the data directory, and a store opened starts
//! every floor at its region's start.
//!
//! The regions have floors of their own because a new job waits at the
//! head of the index: one floor would send every claim back over the
//! leased region's deletions.

use std::cell::RefCell;
use std::sync::{Mutex, MutexGuard};

/// Floors of the job kinds' two regions each.
#[derive(Default)]
pub(in crate::store::embedded) struct Floors {
    regions: [Mutex<Floor>; 2 * crate::store::JobKind::ALL.len()],
}

#[derive(Default)]
struct Floor {
    /// The lowest key that may be live (empty: the region's start).
    key: Vec<u8>,
    /// Claims reading now, each with the lowest key written since it began.
    readers: Vec<(u64, Option<Vec<u8>>)>,
    next_reader: u64,
}

thread_local! {
    /// Due entries put in batches this thread has not committed yet.
    static WRITTEN: RefCell<Vec<(usize, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
}

impl Floors {
    fn region(&self, index: usize) -> MutexGuard<'_, Floor> {
        self.regions[index]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Notes a due entry put in a batch of this thread, to be settled when
    /// the batch commits.
    pub fn note(index: usize, key: Vec<u8>) {
        WRITTEN.with(|w| w.borrow_mut().push((index, key)));
    }

    /// Settles the entries noted on this thread once its batch committed:
    /// each moves its region's floor down to itself and caps the claims
    /// reading meanwhile. (A batch that failed wrote nothing; its notes go.)
    pub fn settle(&self, committed: bool) {
        let written = WRITTEN.with(|w| std::mem::take(&mut *w.borrow_mut()));
        if !committed {
            return;
        }
        for (index, key) in written {
            let mut floor = self.region(index);
            for (_, low) in &mut floor.readers {
                if low.as_ref().is_none_or(|l| key < *l) {
                    *low = Some(key.clone());
                }
            }
            if key < floor.key {
                floor.key = key;
            }
        }
    }

    /// Begins a claim's read of one region: where to start (the floor, or
    /// `begin` if that is higher).
    pub fn read(&self, index: usize, begin: Vec<u8>) -> Reading<'_> {
        let mut floor = self.region(index);
        let id = floor.next_reader;
        floor.next_reader += 1;
        floor.readers.push((id, None));
        Reading {
            floors: self,
            index,
            id: Some(id),
            start: floor.key.clone().max(begin),
        }
    }
}

/// A claim's read of one region, from `start`.
pub(in crate::store::embedded) struct Reading<'a> {
    floors: &'a Floors,
    index: usize,
    id: Option<u64>,
    pub start: Vec<u8>,
}

impl Reading<'_> {
    /// Ends the read having shown that nothing below `to` lives: the floor
    /// moves up to it, or to the lowest entry written meanwhile if lower.
    pub fn raise(mut self, to: Vec<u8>) {
        let low = self.leave();
        let to = match low {
            Some(low) if low < to => low,
            _ => to,
        };
        let mut floor = self.floors.region(self.index);
        if floor.key < to {
            floor.key = to;
        }
    }

    /// Takes the read off its region; the lowest key written meanwhile.
    fn leave(&mut self) -> Option<Vec<u8>> {
        let id = self.id.take()?;
        let mut floor = self.floors.region(self.index);
        let at = floor.readers.iter().position(|(r, _)| *r == id)?;
        floor.readers.swap_remove(at).1
    }
}

impl Drop for Reading<'_> {
    /// A read that ends without raising (a claim that failed) leaves the
    /// floor as it was.
    fn drop(&mut self) {
        self.leave();
    }
}
