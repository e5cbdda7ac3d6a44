//! Decoded actions kept in memory, so a feed page of hot actions decodes
//! nothing.
//!
//! No writer can leave it stale. Every write of an action happens in this
//! process (RocksDB locks the directory), under the action's stripe lock, and
//! after its commit the writer replaces (or drops) the cached copy and moves
//! the shard's generation on. A reader that missed remembers the generation
//! before it reads the database, and keeps what it read only if no writer
//! touched the shard since: a value read before a commit can never be cached
//! after it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::model::{Action, ObjectId};

const SHARDS: usize = 64;
/// Actions kept per shard; past it, a shard drops an arbitrary half.
const PER_SHARD: usize = 2048;

struct Shard {
    generation: u64,
    map: HashMap<ObjectId, Arc<Action>>,
}

pub struct ActionCache {
    shards: Box<[Mutex<Shard>]>,
}

/// What a miss remembers: the shard's generation when it looked.
pub struct Miss(u64);

impl ActionCache {
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        generation: 0,
                        map: HashMap::new(),
                    })
                })
                .collect(),
        }
    }

    fn shard(&self, id: &ObjectId) -> std::sync::MutexGuard<'_, Shard> {
        let bytes = id.bytes();
        // The counter bytes of an ObjectId vary fastest.
        let n = u16::from_le_bytes([bytes[11], bytes[10]]) as usize % SHARDS;
        self.shards[n]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached action, or the generation to hand to [`Self::fill`].
    pub fn get(&self, tenant: &str, id: &ObjectId) -> Result<Arc<Action>, Miss> {
        let shard = self.shard(id);
        match shard.map.get(id) {
            Some(action) if action.tenant == tenant => Ok(action.clone()),
            _ => Err(Miss(shard.generation)),
        }
    }

    /// Keeps an action read from the database after a miss, unless a writer
    /// changed the shard since.
    pub fn fill(&self, miss: Miss, action: Arc<Action>) {
        let mut shard = self.shard(&action.id);
        if shard.generation != miss.0 {
            return;
        }
        if shard.map.len() >= PER_SHARD {
            let drop: Vec<ObjectId> = shard.map.keys().step_by(2).copied().collect();
            for id in drop {
                shard.map.remove(&id);
            }
        }
        shard.map.insert(action.id, action);
    }

    /// After a committed write: the action as it is now.
    pub fn put(&self, action: Arc<Action>) {
        let mut shard = self.shard(&action.id);
        shard.generation += 1;
        if shard.map.len() < PER_SHARD || shard.map.contains_key(&action.id) {
            shard.map.insert(action.id, action);
        } else {
            shard.map.remove(&action.id);
        }
    }

    /// After a committed delete.
    pub fn forget(&self, id: &ObjectId) {
        let mut shard = self.shard(id);
        shard.generation += 1;
        shard.map.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::{Descriptor, StatusPost};
    use crate::model::{Counts, FanOut, Scope};

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
            descriptor: Descriptor::StatusPost(StatusPost { text: text.into() }),
            fan_out: FanOut::pending(),
            counts: Counts::default(),
        }
    }

    #[test]
    fn a_read_from_before_a_write_is_not_kept() {
        let cache = ActionCache::new();
        let old = action("old");
        let Err(miss) = cache.get("acme", &old.id) else {
            panic!("empty cache answered");
        };
        // A writer commits and drops the copy between the miss and the fill.
        cache.forget(&old.id);
        cache.fill(miss, Arc::new(old.clone()));
        assert!(cache.get("acme", &old.id).is_err());
        // A fill with nothing in between is kept.
        let Err(miss) = cache.get("acme", &old.id) else {
            panic!("stale copy kept");
        };
        cache.fill(miss, Arc::new(old.clone()));
        assert_eq!(*cache.get("acme", &old.id).ok().unwrap(), old);
        // Another tenant never sees it.
        assert!(cache.get("globex", &old.id).is_err());
        // A write replaces it.
        cache.put(Arc::new(action("new")));
        assert_eq!(
            cache.get("acme", &old.id).ok().unwrap().descriptor,
            action("new").descriptor
        );
    }
}
