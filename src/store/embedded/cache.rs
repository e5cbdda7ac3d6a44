//! Decoded records kept in memory (actions, and users' display names), so a
//! feed page of hot actions by known actors decodes nothing.
//!
//! No writer can leave them stale. Every write happens in this process
//! (RocksDB locks the directory), and after its commit the writer replaces
//! (or drops) the cached copy and moves its shard's generation on. A reader
//! that missed remembers the generation before it reads the database, and
//! keeps what it read only if no writer touched the shard since: a value read
//! before a commit can never be cached after it.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::model::ObjectId;

const SHARDS: usize = 64;

struct Shard<V> {
    generation: u64,
    map: HashMap<u64, Arc<V>>,
}

/// A sharded map of records by key hash, with the generation protocol above.
pub struct Versioned<V> {
    shards: Box<[Mutex<Shard<V>>]>,
    /// Records kept per shard; past it, a shard drops an arbitrary half.
    per_shard: usize,
}

/// What a miss remembers: the shard's generation when it looked.
pub struct Miss {
    hash: u64,
    generation: u64,
}

/// The key of an action in the cache.
pub fn action_key(id: &ObjectId) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(id.bytes())
}

/// The key of a user's profile in the cache.
pub fn profile_key(tenant: &str, id: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one((tenant, id))
}

/// Records are found by a 64-bit key; two records may share one, so a hit is
/// checked with `matches` against what was asked for.
impl<V> Versioned<V> {
    pub fn new(capacity: usize) -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        generation: 0,
                        map: HashMap::new(),
                    })
                })
                .collect(),
            per_shard: (capacity / SHARDS).max(1),
        }
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard<V>> {
        self.shards[(hash >> 58) as usize % SHARDS]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached record, or what to hand to [`Self::fill`].
    pub fn get(&self, hash: u64, matches: impl Fn(&V) -> bool) -> Result<Arc<V>, Miss> {
        let shard = self.shard(hash);
        match shard.map.get(&hash) {
            Some(value) if matches(value) => Ok(value.clone()),
            _ => Err(Miss {
                hash,
                generation: shard.generation,
            }),
        }
    }

    /// Keeps a record read from the database after a miss, unless a writer
    /// changed the shard since.
    pub fn fill(&self, miss: Miss, value: Arc<V>) {
        let mut shard = self.shard(miss.hash);
        if shard.generation != miss.generation {
            return;
        }
        if shard.map.len() >= self.per_shard {
            let drop: Vec<u64> = shard.map.keys().step_by(2).copied().collect();
            for hash in drop {
                shard.map.remove(&hash);
            }
        }
        shard.map.insert(miss.hash, value);
    }

    /// After a committed write: the record as it is now.
    pub fn put(&self, hash: u64, value: Arc<V>) {
        let mut shard = self.shard(hash);
        shard.generation += 1;
        if shard.map.len() < self.per_shard || shard.map.contains_key(&hash) {
            shard.map.insert(hash, value);
        } else {
            shard.map.remove(&hash);
        }
    }

    /// After a committed delete (or a write whose result is not at hand).
    pub fn forget(&self, hash: u64) {
        let mut shard = self.shard(hash);
        shard.generation += 1;
        shard.map.remove(&hash);
    }
}

/// A user's display name, as cached: `(tenant, id)` and the name.
pub struct Profile {
    pub tenant: String,
    pub id: String,
    pub name: Option<String>,
}

impl Profile {
    pub fn is(&self, tenant: &str, id: &str) -> bool {
        self.tenant == tenant && self.id == id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::Descriptor;
    use crate::model::{Action, Counts, FanOut, Scope};

    fn action(text: &str) -> Action {
        Action {
            id: ObjectId::from_bytes([3; 12]),
            tenant: "acme".into(),
            actor_id: "bob".into(),
            conducted: 1,
            hidden: false,
            scope: Scope::Public,
            readers: vec![],
            scope_groups: vec![],
            ref_ids: vec![],
            tags: vec![],
            descriptor: Descriptor::new("StatusPost", serde_json::json!({ "text": text })),
            fan_out: FanOut::pending(),
            counts: Counts::default(),
            expires_at: None,
            to: Vec::new(),
            foreign: None,
        }
    }

    #[test]
    fn a_read_from_before_a_write_is_not_kept() {
        let cache: Versioned<Action> = Versioned::new(1024);
        let old = action("old");
        let key = action_key(&old.id);
        let is_old = |a: &Action| a.id == old.id;
        let Err(miss) = cache.get(key, is_old) else {
            panic!("empty cache answered");
        };
        // A writer commits and drops the copy between the miss and the fill.
        cache.forget(key);
        cache.fill(miss, Arc::new(old.clone()));
        assert!(cache.get(key, is_old).is_err());
        // A fill with nothing in between is kept.
        let Err(miss) = cache.get(key, is_old) else {
            panic!("stale copy kept");
        };
        cache.fill(miss, Arc::new(old.clone()));
        assert_eq!(*cache.get(key, is_old).ok().unwrap(), old);
        // A write replaces it.
        let new = action("new");
        cache.put(key, Arc::new(new.clone()));
        assert_eq!(
            cache.get(key, is_old).ok().unwrap().descriptor,
            new.descriptor
        );
    }

    #[test]
    fn a_shard_stays_within_its_share() {
        let cache: Versioned<Action> = Versioned::new(SHARDS * 4);
        for n in 0..10_000u32 {
            let mut a = action("x");
            let mut bytes = [0u8; 12];
            bytes[8..].copy_from_slice(&n.to_be_bytes());
            a.id = ObjectId::from_bytes(bytes);
            if let Err(miss) = cache.get(action_key(&a.id), |_| false) {
                cache.fill(miss, Arc::new(a));
            }
        }
        for shard in cache.shards.iter() {
            assert!(shard.lock().unwrap().map.len() <= 4);
        }
    }

    #[test]
    fn profiles_match_tenant_and_id() {
        let cache: Versioned<Profile> = Versioned::new(1024);
        let key = profile_key("acme", "bob");
        let Err(miss) = cache.get(key, |p| p.is("acme", "bob")) else {
            panic!("empty cache answered");
        };
        cache.fill(
            miss,
            Arc::new(Profile {
                tenant: "acme".into(),
                id: "bob".into(),
                name: Some("Bob".into()),
            }),
        );
        let found = cache.get(key, |p| p.is("acme", "bob")).ok().unwrap();
        assert_eq!(found.name.as_deref(), Some("Bob"));
        // Another tenant's user under the same key is a miss.
        assert!(cache.get(key, |p| p.is("globex", "bob")).is_err());
    }
}
