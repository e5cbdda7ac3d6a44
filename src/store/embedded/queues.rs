//! The fan-out queue and its leases, writing feed items for a claimed
//! action, and raising them for a bump.
//!
//! A delivery writes three keys: the reader's timeline entry, the action's
//! item entry (who has it, where it stands) and the reader's change entry.
//! Whether a reader already has the item is asked only when the action has
//! items at all: a first fan-out, the usual case, writes blind.

use rocksdb::WriteBatch;

use super::actions::{action_lock, pending_key};
use super::families::{ITEMS, QUEUE};
use super::keys::{self, queue, ItemState, Key, Lease, Oid, Reader};
use super::Inner;
use crate::model::{Action, FanOut, FanOutState, FeedItem, Millis, ObjectId, Reason};
use crate::store::{Claim, Delivery, ErrorKind, StoreError, StoreResult};

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
    /// Due entries of one queue, oldest first: `(tenant, id, lease)`.
    fn due(&self, tag: u8, now: Millis, limit: usize) -> StoreResult<Vec<(String, Oid, Lease)>> {
        let mut opts = rocksdb::ReadOptions::default();
        opts.set_iterate_upper_bound([tag + 1]);
        // Read without a lock: an idle worker polls, and polling must not
        // queue behind writers. The claim checks each one again under its lock.
        let mut it = self.db.raw_iterator_cf_opt(self.cf(QUEUE), opts);
        it.seek([tag]);
        let mut due = Vec::new();
        while due.len() < limit && it.valid() {
            if let (Some(k), Some(v)) = (it.key(), it.value()) {
                let lease = Lease::decode(v)?;
                if lease.until <= now {
                    let mut r = Reader(&k[1..]);
                    let id = r.oid()?;
                    due.push((r.last()?.to_owned(), id, lease));
                }
            }
            it.next();
        }
        it.status().map_err(super::db_err)?;
        Ok(due)
    }

    /// Ends every lease at once: called at open, when no worker can hold
    /// one, since the store belongs to this one process. A process killed
    /// in the middle of a fan-out or a cleanup leaves its leases
    /// behind; its restart takes the work up again now rather than when
    /// they run out. The holder's name stays (a takeover is told as such).
    pub(super) fn release_leases(&self) -> StoreResult<usize> {
        let mut batch = WriteBatch::default();
        let mut released = 0;
        for tag in [queue::FAN_OUT] {
            let mut opts = rocksdb::ReadOptions::default();
            opts.set_iterate_upper_bound([tag + 1]);
            let mut it = self.db.raw_iterator_cf_opt(self.cf(QUEUE), opts);
            it.seek([tag]);
            while it.valid() {
                if let (Some(k), Some(v)) = (it.key(), it.value()) {
                    let mut lease = Lease::decode(v)?;
                    if lease.until > 0 && !lease.worker.is_empty() {
                        lease.until = 0;
                        batch.put_cf(self.cf(QUEUE), k, lease.encode());
                        released += 1;
                    }
                }
                it.next();
            }
            it.status().map_err(super::db_err)?;
        }
        if released > 0 {
            self.commit(batch)?;
        }
        Ok(released)
    }

    pub(super) fn fan_out_backlog(&self) -> StoreResult<crate::store::Backlog> {
        let tag = queue::FAN_OUT;
        let mut opts = rocksdb::ReadOptions::default();
        opts.set_iterate_upper_bound([tag + 1]);
        let mut it = self.db.raw_iterator_cf_opt(self.cf(QUEUE), opts);
        it.seek([tag]);
        let mut backlog = crate::store::Backlog::default();
        while it.valid() {
            if let Some(k) = it.key() {
                if backlog.oldest.is_none() {
                    // Keyed by action id: the first is the oldest recorded.
                    let id = ObjectId::from_bytes(Reader(&k[1..]).oid()?);
                    backlog.oldest = Some(id.timestamp().timestamp_millis());
                }
                backlog.actions += 1;
            }
            it.next();
        }
        it.status().map_err(super::db_err)?;
        Ok(backlog)
    }

    pub(super) fn claim_fan_out(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Claim>> {
        let due = self.due(queue::FAN_OUT, now, limit)?;
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let locks: Vec<Vec<u8>> = due.iter().map(|(t, id, _)| action_lock(t, *id)).collect();
        let _lock = self.lock(&locks);
        let until = now + lease_ms;
        let mut batch = WriteBatch::default();
        let mut claims = Vec::with_capacity(due.len());
        for (tenant, id, _) in due {
            let key = pending_key(&tenant, id);
            let held_by = match self.get(QUEUE, &key)? {
                Some(v) => Lease::decode(&v)?,
                None => continue,
            };
            if held_by.until > now {
                continue;
            }
            let held_by = held_by.worker;
            let Some(action) = self.action(&tenant, ObjectId::from_bytes(id))? else {
                continue;
            };
            let lease = Lease {
                until,
                worker: worker.to_owned(),
                action: None,
            };
            batch.put_cf(self.cf(QUEUE), &key, lease.encode());
            let mut action = Action::clone(&action);
            action.fan_out = FanOut {
                state: FanOutState::InProgress,
                locked_until: Some(until),
                worker: Some(worker.to_owned()),
            };
            self.put_action(&mut batch, &action)?;
            claims.push(Claim {
                action,
                worker: worker.to_owned(),
                lease_ms,
                taken_over: !held_by.is_empty(),
            });
        }
        // Not synced: a claim lost in a crash is claimed again.
        self.commit_unsynced(batch)?;
        self.settle(claims.iter().map(|c| c.action.clone()).collect(), &[]);
        Ok(claims)
    }

    /// Checks that `claim` still holds its lease. `Ok(false)` when the action
    /// is gone (deleted), `Err(LeaseLost)` when another worker owns it or it
    /// is done.
    fn lease_held(&self, claim: &Claim) -> StoreResult<bool> {
        let (t, id) = (claim.action.tenant.as_str(), claim.action.id);
        let key = pending_key(t, id.bytes());
        match self.holder(&key, &claim.worker, || format!("fan-out of {id}"))? {
            Some(()) => Ok(true),
            None if self.action(t, id)?.is_none() => Ok(false),
            None => Err(StoreError::new(
                ErrorKind::LeaseLost,
                format!("fan-out of {id} was finished by another worker"),
            )),
        }
    }

    /// Whether `worker` holds the queue entry at `key`: `Some` when it does,
    /// `None` when there is no entry, `LeaseLost` (naming the job with
    /// `what`) when another worker does.
    pub(super) fn holder(
        &self,
        key: &[u8],
        worker: &str,
        what: impl FnOnce() -> String,
    ) -> StoreResult<Option<()>> {
        let Some(value) = self.get(QUEUE, key)? else {
            return Ok(None);
        };
        let lease = Lease::decode(&value)?;
        if lease.worker == worker {
            return Ok(Some(()));
        }
        Err(StoreError::new(
            ErrorKind::LeaseLost,
            format!("{} was taken over by {}", what(), lease.worker),
        ))
    }

    /// One job of a fan-out: writes `items` into `batch` for a claimed action
    /// and extends the lease, or (`finish`) ends it. The caller holds the
    /// action's lock and commits.
    pub(super) fn deliver_job(
        &self,
        batch: &mut WriteBatch,
        claim: &Claim,
        now: Millis,
        items: &[Delivery],
        finish: bool,
    ) -> StoreResult<Done> {
        let nothing = Done {
            written: Vec::new(),
            action: None,
        };
        if !self.lease_held(claim)? {
            return Ok(nothing);
        }
        let (t, id) = (claim.action.tenant.as_str(), claim.action.id);
        let Some(action) = self.action(t, id)? else {
            return Ok(nothing);
        };
        let mut action = Action::clone(&action);
        let written = if action.hidden || items.is_empty() {
            Vec::new()
        } else {
            self.write_items(batch, t, id, now, items)?
        };
        let pending = pending_key(t, id.bytes());
        if finish {
            batch.delete_cf(self.cf(QUEUE), pending);
            action.fan_out = FanOut {
                state: FanOutState::Done,
                locked_until: None,
                worker: None,
            };
        } else {
            let until = now + claim.lease_ms;
            let lease = Lease {
                until,
                worker: claim.worker.clone(),
                action: None,
            };
            batch.put_cf(self.cf(QUEUE), pending, lease.encode());
            action.fan_out.locked_until = Some(until);
        }
        self.put_action(batch, &action)?;
        Ok(Done {
            written,
            action: Some(action),
        })
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

    /// Writes jobs in one batch under their actions' locks. A job whose lease
    /// was lost fails alone and writes nothing.
    pub(super) fn deliver_jobs(
        &self,
        now: Millis,
        jobs: &[(&Claim, &[Delivery])],
        finish: bool,
    ) -> StoreResult<Vec<StoreResult<Vec<FeedItem>>>> {
        let locks: Vec<Vec<u8>> = jobs
            .iter()
            .map(|(c, _)| action_lock(&c.action.tenant, c.action.id.bytes()))
            .collect();
        let _lock = self.lock(&locks);
        let mut batch = WriteBatch::default();
        let mut results = Vec::with_capacity(jobs.len());
        let mut settled = Vec::new();
        for (claim, items) in jobs {
            match self.deliver_job(&mut batch, claim, now, items, finish) {
                Ok(done) => {
                    settled.extend(done.action);
                    results.push(Ok(done.written));
                }
                Err(err) if err.kind == ErrorKind::LeaseLost => results.push(Err(err)),
                Err(err) => return Err(err),
            }
        }
        if finish {
            self.commit(batch)?;
        } else {
            self.commit_unsynced(batch)?;
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
