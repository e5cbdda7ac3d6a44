//! The ids a request gives what it creates (actions, comments, webhooks,
//! a deletion), the secrets it draws, and the time it stamps on them. A request sent with an `Idempotency-Key` draws
//! them from the key's seed, kept in the store with the key before the
//! request runs: a retry of a request whose process died before it
//! answered draws the same ones, and finds what the first attempt wrote
//! under them instead of writing it again.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use async_graphql::Context;

use crate::clock::Clock;
use crate::model::{Millis, ObjectId};

/// Where a request's ids come from: fresh ones, or a key's seed.
#[derive(Clone, Default)]
pub struct Minter(Option<Arc<Seeded>>);

struct Seeded {
    seed: [u8; 16],
    at: Millis,
    /// Ids drawn so far: the operations of a request (and the fields of a
    /// mutation) run one after the other, so the n-th id is the same one
    /// on every attempt.
    drawn: AtomicU32,
}

impl Minter {
    /// Ids drawn from `seed`, stamped `at` (the first attempt's time).
    pub fn seeded(seed: [u8; 16], at: Millis) -> Minter {
        Minter(Some(Arc::new(Seeded {
            seed,
            at,
            drawn: AtomicU32::new(0),
        })))
    }

    /// Whether the request has a key: what it draws is drawn again by
    /// its retries.
    pub fn keyed(&self) -> bool {
        self.0.is_some()
    }

    /// The next id: a new one, or the seed's next.
    pub fn id(&self) -> ObjectId {
        let Some(seeded) = &self.0 else {
            return ObjectId::new();
        };
        let digest = seeded.next();
        // An ObjectId's first four bytes are its time in seconds, which
        // orders ids as `ObjectId::new` does; the other eight are drawn.
        let secs = u32::try_from(seeded.at.div_euclid(1000)).unwrap_or(u32::MAX);
        let mut bytes = [0; 12];
        bytes[..4].copy_from_slice(&secs.to_be_bytes());
        bytes[4..].copy_from_slice(&digest.as_ref()[..8]);
        ObjectId::from_bytes(bytes)
    }

    /// `len` bytes drawn from the seed (the same on every attempt), or
    /// none for a request without a key: the caller draws its own.
    pub fn bytes(&self, len: usize) -> Option<Vec<u8>> {
        let seeded = self.0.as_ref()?;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let digest = seeded.next();
            let take = (len - out.len()).min(digest.as_ref().len());
            out.extend_from_slice(&digest.as_ref()[..take]);
        }
        Some(out)
    }

    /// The time to stamp on what the request creates: the first
    /// attempt's, or now.
    pub fn now(&self, clock: &dyn Clock) -> Millis {
        match &self.0 {
            Some(seeded) => seeded.at,
            None => clock.now(),
        }
    }
}

impl Seeded {
    /// The digest of the seed and the number of what is drawn next.
    fn next(&self) -> ring::digest::Digest {
        let n = self.drawn.fetch_add(1, Ordering::Relaxed);
        let mut input = self.seed.to_vec();
        input.extend_from_slice(&n.to_be_bytes());
        ring::digest::digest(&ring::digest::SHA256, &input)
    }
}

/// The request's minter (fresh ids when it has none).
pub fn minter(ctx: &Context<'_>) -> Minter {
    ctx.data_opt::<Minter>().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_the_same_ids_in_the_same_order() {
        let (one, again) = (
            Minter::seeded([7; 16], 1_700_000_000_123),
            Minter::seeded([7; 16], 1_700_000_000_123),
        );
        let first: Vec<ObjectId> = (0..3).map(|_| one.id()).collect();
        let second: Vec<ObjectId> = (0..3).map(|_| again.id()).collect();
        assert_eq!(first, second);
        assert_ne!(first[0], first[1]);
        assert_eq!(first[0].timestamp().timestamp_millis(), 1_700_000_000_000);
        assert_ne!(
            Minter::seeded([8; 16], 0).id(),
            Minter::seeded([7; 16], 0).id()
        );
    }
}
