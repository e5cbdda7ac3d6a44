//! Writing a fan-out's feed items under its job's lease, and raising them
//! for a bump.
//!
//! A delivery writes three keys: the reader's timeline entry, the action's
//! item entry (who has it, where it stands) and the reader's change entry.
//! Whether a reader already has the item is asked only when the action has
//! items at all: a first fan-out, the usual case, writes blind.

use rocksdb::WriteBatch;

use super::actions::action_lock;
use super::families::ITEMS;
use super::keys::{self, ItemState, Key, Oid};
use super::Inner;
use crate::model::{Action, FanOut, FanOutState, FeedItem, Millis, ObjectId, Reason};
use crate::store::jobs::lease_lost;
use crate::store::{Delivery, DeliveryBatch, ErrorKind, FanOutJob, StoreResult};

/// What one job of a batch did, for the cache and the caller.
pub(super) struct Done {
    pub written: Vec<FeedItem>,
    pub action: Option<Action>,
}

/// Whether a re-delivery's reason replaces the one an item holds: the item
/// came from a source (not the actor's own, not raised by a bump) and the
/// reason that applies now differs.
fn refreshes(held: &Reason, now: &Reason) -> bool {
    held.kind.pulled() && held.bump.is_none() && held != now
}

impl Inner {
    /// One batch of a fan-out into `batch`: the job's lease renewed, or
    /// (the last batch) the job finished and the action marked `Done`,
    /// then the items written. `LeaseLost`, with nothing written, if the
    /// worker no longer holds the job. The caller holds the action's and
    /// the job's locks and commits.
    fn deliver_batch(
        &self,
        batch: &mut WriteBatch,
        now: Millis,
        delivery: &DeliveryBatch,
    ) -> StoreResult<Done> {
        let lease = &delivery.lease;
        if delivery.last {
            if !self.finish_in(batch, lease)? {
                return Err(lease_lost(&lease.job, None));
            }
        } else {
            self.renew_in(batch, lease, now)?;
        }
        let t = lease.job.tenant.as_str();
        let id = FanOutJob::action_id(&lease.job)?;
        let mut done = Done {
            written: Vec::new(),
            action: None,
        };
        let Some(action) = self.action(t, id)? else {
            return Ok(done);
        };
        if !action.hidden && !delivery.items.is_empty() {
            done.written = self.write_items(batch, t, id, now, &delivery.items)?;
        }
        // Done with the last batch; in progress from the first of several.
        let state = if delivery.last {
            FanOutState::Done
        } else {
            FanOutState::InProgress
        };
        if action.fan_out.state != state {
            let mut action = Action::clone(&action);
            action.fan_out = FanOut {
                state,
                locked_until: None,
                worker: None,
            };
            self.put_action(batch, &action)?;
            done.action = Some(action);
        }
        Ok(done)
    }

    /// Whether any reader has (or hid) an item of the action.
    fn has_items(&self, tenant: &str, id: Oid) -> StoreResult<bool> {
        let prefix = Key::new().str(tenant).oid(id).into_vec();
        let mut any = false;
        self.scan_prefix(ITEMS, &prefix, &prefix, 1, |_, _| {
            any = true;
            Ok(())
        })?;
        Ok(any)
    }

    fn write_items(
        &self,
        batch: &mut WriteBatch,
        tenant: &str,
        id: ObjectId,
        now: Millis,
        items: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        let oid = id.bytes();
        let mut key = Vec::with_capacity(64);
        // A re-run (a lease lost, a new scope) finds readers who already have
        // the item, or hid it; they keep what they have.
        let known: Vec<Option<ItemState>> = if self.has_items(tenant, oid)? {
            let keys: Vec<Vec<u8>> = items
                .iter()
                .map(|d| {
                    keys::item(&mut key, tenant, oid, &d.owner);
                    key.clone()
                })
                .collect();
            let found = self.db.batched_multi_get_cf(self.cf(ITEMS), &keys, false);
            found
                .into_iter()
                .map(|v| {
                    v.map_err(super::db_err)?
                        .map(|v| ItemState::decode(&v))
                        .transpose()
                })
                .collect::<StoreResult<_>>()?
        } else {
            Vec::new()
        };
        let families = self.item_families();
        let mut value = Vec::with_capacity(32);
        let mut written = Vec::with_capacity(items.len());
        for (n, item) in items.iter().enumerate() {
            let kept = match known.get(n) {
                // The reason it holds may be an earlier scope's: it takes
                // the one that applies now, unless a bump gave it its own.
                Some(Some(state)) if !state.hidden => {
                    let had = self.entry(&mut key, tenant, &item.owner, oid, state.relevancy)?;
                    if !had.is_some_and(|(_, held)| refreshes(&held, &item.reason)) {
                        continue;
                    }
                    Some(*state)
                }
                Some(Some(_)) => continue,
                _ => None,
            };
            let state = kept.unwrap_or(ItemState {
                relevancy: item.relevancy,
                changed: now,
                hidden: false,
            });
            let buffers = (&mut key, &mut value);
            Inner::put_item(
                &families,
                batch,
                buffers,
                tenant,
                &item.owner,
                oid,
                state,
                &item.reason,
            );
            if kept.is_none() {
                written.push(FeedItem {
                    owner: item.owner.clone(),
                    action_id: id,
                    relevancy: item.relevancy,
                    reason: item.reason.clone(),
                    changed: now,
                    copy: None,
                });
            }
        }
        Ok(written)
    }

    /// Writes fan-out batches in one `WriteBatch` under their actions' and
    /// jobs' locks: synced if one ends its fan-out. A batch whose lease was
    /// lost fails alone and writes nothing.
    pub(super) fn deliver(
        &self,
        now: Millis,
        batches: &[DeliveryBatch],
    ) -> StoreResult<Vec<StoreResult<Vec<FeedItem>>>> {
        let mut locks = Vec::with_capacity(batches.len() * 2);
        for b in batches {
            let job = &b.lease.job;
            locks.push(action_lock(&job.tenant, FanOutJob::action_id(job)?.bytes()));
            locks.push(Inner::job_lock(job));
        }
        let _lock = self.lock(&locks);
        let mut batch = WriteBatch::default();
        let mut results = Vec::with_capacity(batches.len());
        let mut settled = Vec::new();
        for b in batches {
            match self.deliver_batch(&mut batch, now, b) {
                Ok(done) => {
                    settled.extend(done.action);
                    results.push(Ok(done.written));
                }
                Err(err) if err.kind == ErrorKind::LeaseLost => results.push(Err(err)),
                Err(err) => return Err(err),
            }
        }
        let finished: Vec<&DeliveryBatch> = batches
            .iter()
            .zip(&results)
            .filter(|(b, r)| b.last && r.is_ok())
            .map(|(b, _)| b)
            .collect();
        if finished.is_empty() {
            // A lease lost in a crash is released at open anyway, and
            // what was written is written again by the re-run.
            self.commit_unsynced(batch)?;
        } else {
            self.commit(batch)?;
        }
        for b in finished {
            self.finished(&b.lease.job);
        }
        self.settle(settled, &[]);
        Ok(results)
    }

    /// Raises the action's items for `raises`, only upwards, in one synced
    /// batch under the action's lock.
    pub(super) fn raise(
        &self,
        t: &str,
        id: ObjectId,
        now: Millis,
        bumps: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        let oid = id.bytes();
        let _lock = self.lock(&[action_lock(t, oid)]);
        let mut batch = WriteBatch::default();
        let mut key = Vec::with_capacity(64);
        let item_keys: Vec<Vec<u8>> = bumps
            .iter()
            .map(|b| {
                keys::item(&mut key, t, oid, &b.owner);
                key.clone()
            })
            .collect();
        let states = self
            .db
            .batched_multi_get_cf(self.cf(ITEMS), &item_keys, false);
        let families = self.item_families();
        let mut value = Vec::with_capacity(48);
        let mut raised = Vec::new();
        for (bump, state) in bumps.iter().zip(states) {
            let Some(state) = state.map_err(super::db_err)? else {
                continue;
            };
            let state = ItemState::decode(&state)?;
            // Only live items, and only upwards.
            if state.hidden || state.relevancy >= bump.relevancy {
                continue;
            }
            let o = bump.owner.as_str();
            Inner::drop_entries(&families, &mut batch, &mut key, t, o, oid, &state);
            let raised_to = ItemState {
                relevancy: bump.relevancy,
                changed: now,
                hidden: false,
            };
            let buffers = (&mut key, &mut value);
            Inner::put_item(
                &families,
                &mut batch,
                buffers,
                t,
                o,
                oid,
                raised_to,
                &bump.reason,
            );
            raised.push(FeedItem {
                owner: bump.owner.clone(),
                action_id: id,
                relevancy: bump.relevancy,
                reason: bump.reason.clone(),
                changed: now,
                copy: None,
            });
        }
        if !raised.is_empty() {
            self.commit(batch)?;
        }
        Ok(raised)
    }
}
