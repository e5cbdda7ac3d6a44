//! Unfollows: recorded at once for reads to apply, cleaned up by a worker
//! under a lease. An entry in the queue family is both the record and the
//! job: `(tenant, reader, edge kind or group, actor or group)` → its lease.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use rocksdb::WriteBatch;

use super::actions::action_lock;
use super::families::{ITEMS, QUEUE};
use super::keys::{self, queue, ItemState, Key, Lease, Reader};
use super::Inner;

use crate::model::{FeedItem, Millis, ObjectId};
use crate::store::codes::ENDED;
use crate::store::{Ended, FeedRange, StoreResult, Unfollow, UnfollowClaim};

/// A whole feed, as a range.
const WHOLE: FeedRange = FeedRange {
    older_than: None,
    newer_than: None,
    limit: usize::MAX,
    from_oldest: false,
};

fn kind_code(kind: Ended) -> u8 {
    ENDED.byte(kind)
}

fn unfollow_key(u: &Unfollow) -> Vec<u8> {
    Key::tag(queue::UNFOLLOW)
        .str(&u.tenant)
        .str(&u.reader)
        .byte(kind_code(u.kind))
        .last(&u.actor)
        .into_vec()
}

/// The unfollow a key (after its tag) names.
fn decode_key(rest: &[u8]) -> StoreResult<Unfollow> {
    let mut r = Reader(rest);
    let tenant = r.str()?.to_owned();
    let reader = r.str()?.to_owned();
    let code = r.byte()?;
    let actor = r.last()?.to_owned();
    let kind = ENDED.read_byte(
        code,
        format_args!("queue/unfollow {tenant}/{reader}/{actor}"),
    )?;
    Ok(Unfollow {
        tenant,
        reader,
        actor,
        kind,
    })
}

impl Inner {
    /// Counts the pending unfollows, at open.
    pub(super) fn count_unfollows(&self) -> StoreResult<()> {
        let prefix = [queue::UNFOLLOW];
        let mut n = 0;
        self.scan_prefix(QUEUE, &prefix, &prefix, usize::MAX, |_, _| {
            n += 1;
            Ok(())
        })?;
        self.pending_unfollows.store(n, Ordering::SeqCst);
        Ok(())
    }

    pub(super) fn start_unfollow(&self, u: &Unfollow) -> StoreResult<()> {
        let key = unfollow_key(u);
        let _lock = self.lock(&[&key]);
        if !self.exists(QUEUE, &key)? {
            // Counted before it is written: a page may look in vain, never
            // miss it.
            self.pending_unfollows.fetch_add(1, Ordering::SeqCst);
        }
        let queued = Lease {
            until: 0,
            worker: String::new(),
            action: None,
        };
        let mut batch = WriteBatch::default();
        batch.put_cf(self.cf(QUEUE), key, queued.encode());
        self.commit(batch)
    }

    pub(super) fn end_unfollow(&self, u: &Unfollow) -> StoreResult<()> {
        let key = unfollow_key(u);
        let _lock = self.lock(&[&key]);
        if !self.exists(QUEUE, &key)? {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        batch.delete_cf(self.cf(QUEUE), key);
        self.commit(batch)?;
        self.pending_unfollows.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }

    pub(super) fn unfollows(&self, tenant: &str, reader: &str) -> StoreResult<Vec<Unfollow>> {
        if self.pending_unfollows.load(Ordering::SeqCst) == 0 {
            return Ok(Vec::new());
        }
        let prefix = Key::tag(queue::UNFOLLOW).str(tenant).str(reader).into_vec();
        let mut out = Vec::new();
        self.scan_prefix(QUEUE, &prefix, &prefix, usize::MAX, |k, _| {
            out.push(decode_key(&k[1..])?);
            Ok(())
        })?;
        Ok(out)
    }

    pub(super) fn claim_unfollows(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<UnfollowClaim>> {
        let prefix = [queue::UNFOLLOW];
        let mut due = Vec::new();
        self.scan_prefix(QUEUE, &prefix, &prefix, usize::MAX, |k, v| {
            if due.len() < limit && Lease::decode(v)?.until <= now {
                due.push(k.to_vec());
            }
            Ok(())
        })?;
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let _lock = self.lock(&due);
        let lease = Lease {
            until: now + lease_ms,
            worker: worker.to_owned(),
            action: None,
        };
        let mut batch = WriteBatch::default();
        let mut claims = Vec::with_capacity(due.len());
        for key in due {
            let still_due = match self.get(QUEUE, &key)? {
                Some(v) => Lease::decode(&v)?.until <= now,
                None => false,
            };
            if !still_due {
                continue;
            }
            batch.put_cf(self.cf(QUEUE), &key, lease.encode());
            claims.push(UnfollowClaim {
                unfollow: decode_key(&key[1..])?,
                worker: worker.to_owned(),
                lease_ms,
            });
        }
        self.commit_unsynced(batch)?;
        Ok(claims)
    }

    pub(super) fn clean_unfollow(&self, claim: &UnfollowClaim) -> StoreResult<Vec<FeedItem>> {
        let u = &claim.unfollow;
        if u.kind.names_items() {
            return self.clean_named(claim, &[]);
        }
        // The reader's items that came by the ended edge, read without locks.
        let mut covered = self.feed_page(&u.tenant, &u.reader, WHOLE)?;
        covered.retain(|item| u.covers(item, None));
        self.take_out(claim, covered)
    }

    pub(super) fn clean_named(
        &self,
        claim: &UnfollowClaim,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<FeedItem>> {
        let u = &claim.unfollow;
        // Each named item looked up where it stands: work that grows with
        // the items named, not with the feed.
        let mut covered = Vec::with_capacity(action_ids.len());
        let mut key = Vec::with_capacity(64);
        let unique: HashSet<ObjectId> = action_ids.iter().copied().collect();
        for id in unique {
            keys::item(&mut key, &u.tenant, id.bytes(), &u.reader);
            let Some(state) = self.get(ITEMS, &key)? else {
                continue;
            };
            let state = ItemState::decode(&state)?;
            if state.hidden {
                continue;
            }
            let entry = self.entry(&mut key, &u.tenant, &u.reader, id.bytes(), state.relevancy)?;
            if let Some((changed, reason)) = entry {
                if u.kind.reasons().contains(&reason.kind) {
                    covered.push(FeedItem {
                        owner: u.reader.clone(),
                        action_id: id,
                        relevancy: state.relevancy,
                        reason,
                        changed,
                        copy: None,
                    });
                }
            }
        }
        self.take_out(claim, covered)
    }

    /// Takes `covered` out of the claimed job's reader's feed and ends the
    /// job: under its and the actions' locks, each item only if it still
    /// stands where it was read (a bump moves it on).
    fn take_out(
        &self,
        claim: &UnfollowClaim,
        covered: Vec<FeedItem>,
    ) -> StoreResult<Vec<FeedItem>> {
        let u = &claim.unfollow;
        let key = unfollow_key(u);
        let what = || format!("the cleanup of {} leaving {}", u.reader, u.actor);
        let mut locks = vec![key.clone()];
        locks.extend(
            covered
                .iter()
                .map(|i| action_lock(&u.tenant, i.action_id.bytes())),
        );
        let _lock = self.lock(&locks);
        if self.holder(&key, &claim.worker, what)?.is_none() {
            return Ok(Vec::new());
        }
        let families = self.item_families();
        let mut batch = WriteBatch::default();
        let mut scratch = Vec::with_capacity(64);
        let mut removed = Vec::with_capacity(covered.len());
        for item in covered {
            let id = item.action_id.bytes();
            keys::item(&mut scratch, &u.tenant, id, &u.reader);
            let item_key = scratch.clone();
            let Some(state) = self.get(ITEMS, &item_key)? else {
                continue;
            };
            let state = ItemState::decode(&state)?;
            if state.hidden || state.relevancy != item.relevancy || state.changed != item.changed {
                continue;
            }
            Inner::drop_entries(
                &families,
                &mut batch,
                &mut scratch,
                &u.tenant,
                &u.reader,
                id,
                &state,
            );
            batch.delete_cf(self.cf(ITEMS), &item_key);
            removed.push(item);
        }
        batch.delete_cf(self.cf(QUEUE), &key);
        self.commit(batch)?;
        self.pending_unfollows.fetch_sub(1, Ordering::SeqCst);
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EdgeKind;
    use crate::store::embedded::EmbeddedStore;

    /// Pages skip the lookup while no unfollow is pending; the count that
    /// decides it must survive a restart and follow starts and ends.
    #[test]
    fn pending_unfollows_are_counted_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let u = Unfollow::edge("acme", "alice", EdgeKind::Follows, "bob");
        {
            let store = EmbeddedStore::open(dir.path()).unwrap();
            let db = &store.inner;
            assert!(db.unfollows("acme", "alice").unwrap().is_empty());
            db.start_unfollow(&u).unwrap();
            db.start_unfollow(&u).unwrap();
            assert_eq!(db.pending_unfollows.load(Ordering::SeqCst), 1, "once");
        }
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let db = &store.inner;
        assert_eq!(
            db.unfollows("acme", "alice").unwrap(),
            std::slice::from_ref(&u)
        );
        db.end_unfollow(&u).unwrap();
        db.end_unfollow(&u).unwrap();
        assert_eq!(db.pending_unfollows.load(Ordering::SeqCst), 0);
        assert!(db.unfollows("acme", "alice").unwrap().is_empty());
    }
}
