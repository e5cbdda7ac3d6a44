//! Cleanups: the items an ended edge or a group left brought (named by the
//! cleanup's caller), taken out of the reader's feed by the cleanup job (see [`crate::store::jobs`]), the
//! removals and the job's finish in one batch under the job's lock, so a
//! re-follow that cancels the job first keeps every item.

use std::collections::HashSet;

use rocksdb::WriteBatch;

use super::actions::action_lock;
use super::families::ITEMS;
use super::keys::{self, ItemState};
use super::Inner;

use crate::model::{FeedItem, ObjectId};
use crate::store::{Lease, StoreResult, Unfollow};

impl Inner {
    pub(super) fn clean(&self, lease: &Lease, named: &[ObjectId]) -> StoreResult<Vec<FeedItem>> {
        let u = Unfollow::of_job(&lease.job)?;
        let covered = self.named(&u, named)?;
        self.take_out(lease, &u, covered)
    }

    /// The named items that stand for one of the ended source's reasons
    /// and are not hidden, each looked up where it stands: work that grows
    /// with the items named, not with the feed.
    fn named(&self, u: &Unfollow, action_ids: &[ObjectId]) -> StoreResult<Vec<FeedItem>> {
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
        Ok(covered)
    }

    /// Takes `covered` out of the reader's feed and finishes the job: under
    /// its and the actions' locks, each item only if it still stands where
    /// it was read (a bump moves it on).
    fn take_out(
        &self,
        lease: &Lease,
        u: &Unfollow,
        covered: Vec<FeedItem>,
    ) -> StoreResult<Vec<FeedItem>> {
        let mut locks = vec![Inner::job_lock(&lease.job)];
        locks.extend(
            covered
                .iter()
                .map(|i| action_lock(&u.tenant, i.action_id.bytes())),
        );
        let _lock = self.lock(&locks);
        let mut batch = WriteBatch::default();
        if !self.finish_in(&mut batch, lease)? {
            return Ok(Vec::new());
        }
        let families = self.item_families();
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
        self.commit(batch)?;
        self.finished(&lease.job);
        Ok(removed)
    }
}
