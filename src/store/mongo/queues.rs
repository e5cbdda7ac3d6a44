//! MongoDB: a fan-out's deliveries under its job's lease, and bumps'
//! raises. Each batch is fenced: a transaction that holds the job's fence
//! and reads its lease stays open while the batch writes, so a scope change
//! that queues the fan-out again (and writes the fence) lands before or
//! after the whole batch, never inside it.

use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, DateTime, Document};
use mongodb::error::TRANSIENT_TRANSACTION_ERROR;
use mongodb::ClientSession;

use crate::model::{Action, FanOutState, FeedItem, Millis, ObjectId, Reason, ReasonKind};
use crate::store::jobs::lease_lost;
use crate::store::{
    Delivery, DeliveryBatch, ErrorKind, FanOutJob, Job, Lease, QueueStore, StoreError, StoreResult,
};

use super::jobs::{job_filter, requeue};
use super::layout::copy::same as copies_agree;
use super::{db_err, MongoStore};

/// The fence of `job`'s runs in `fences`, and the update that raises it:
/// one document per job, written by every batch's transaction and by the
/// one that queues the job again, so that the two never overlap (see
/// [`MongoStore::fence`]). A count, so that every write changes it (a
/// write that changes nothing holds nothing), and the time, for the TTL
/// index that removes fences an hour after their last use.
pub(super) fn fence_of(job: &Job, now: Millis) -> (Document, Document) {
    let id = doc! { "_id": { "kind": job.kind.code(), "tenant": &job.tenant, "key": &job.key } };
    let raise = doc! { "$inc": { "n": 1_i64 }, "$set": { "at": DateTime::from_millis(now) } };
    (id, raise)
}

/// The first wait before a fence is tried again, after a scope change's
/// transaction held it; doubled each time.
const FENCE_RETRY_FIRST: Duration = Duration::from_millis(5);
/// The longest wait: about 5 s in all (a scope change's transaction takes
/// milliseconds), then the batch fails and is tried again later.
const FENCE_RETRY_LAST: Duration = Duration::from_millis(2_560);

impl MongoStore {
    /// Raises `action_id` in readers' feeds: see
    /// [`TimelineWrite::Raise`](crate::store::TimelineWrite::Raise).
    pub(super) async fn raise(
        &self,
        tenant: &str,
        action_id: ObjectId,
        now: Millis,
        bumps: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        // Readers a rule matches share their target and reason: one raise
        // for each such group, only upwards, however many workers bump at
        // once.
        let mut groups: Vec<(&Delivery, Vec<&str>)> = Vec::new();
        for bump in bumps {
            match groups
                .iter_mut()
                .find(|(first, _)| first.relevancy == bump.relevancy && first.reason == bump.reason)
            {
                Some((_, owners)) => owners.push(&bump.owner),
                None => groups.push((bump, vec![&bump.owner])),
            }
        }
        let mut raised = Vec::new();
        for (bump, owners) in groups {
            raised.extend(
                self.layout
                    .raise(
                        tenant,
                        action_id,
                        &owners,
                        bump.relevancy,
                        &bump.reason,
                        now,
                    )
                    .await?,
            );
        }
        Ok(raised)
    }

    /// Readers a re-run found holding the item keep it, and take the reason
    /// that applies now (a new scope's) unless theirs is their own or a
    /// bump's. One update per distinct reason.
    async fn refresh_reasons(&self, action: &Action, kept: &[&Delivery]) -> StoreResult<()> {
        let mut by_reason: Vec<(&Reason, Vec<&str>)> = Vec::new();
        for d in kept {
            match by_reason.iter_mut().find(|(r, _)| **r == d.reason) {
                Some((_, owners)) => owners.push(&d.owner),
                None => by_reason.push((&d.reason, vec![&d.owner])),
            }
        }
        for (reason, owners) in by_reason {
            self.layout
                .refresh(
                    &action.tenant,
                    action.id,
                    &owners,
                    reason,
                    &ReasonKind::PULLED,
                )
                .await?;
        }
        Ok(())
    }

    /// One batch of a fan-out, fenced by its job's lease (see [`fence`]):
    /// the lease renewed, the items written, and for the last the action
    /// marked `Done` and the job finished. `LeaseLost`, with nothing
    /// written, if the worker no longer holds the job.
    ///
    /// [`fence`]: MongoStore::fence
    async fn deliver_batch(
        &self,
        session: &mut ClientSession,
        now: Millis,
        batch: &DeliveryBatch,
    ) -> StoreResult<Vec<FeedItem>> {
        let lease = &batch.lease;
        if !batch.last {
            crate::store::Jobs::renew(self, lease, now).await?;
        }
        self.fence(session, lease, now).await?;
        let written = match self.write_batch(now, batch).await {
            Ok(written) => written,
            Err(err) => {
                // What was written is written again by the next run, which
                // skips it.
                let _ = session.abort_transaction().await;
                return Err(err);
            }
        };
        self.unfence(session, lease).await?;
        if batch.last {
            self.finish(lease).await?;
        }
        Ok(written)
    }

    /// Opens a transaction on `session` that writes the job's fence (see
    /// [`fence_of`]) and then finds the lease still the worker's, and
    /// leaves it open while the batch writes. A scope change writes the
    /// same fence in the transaction that queues the fan-out again, so it
    /// either commits before this one reads the job (which then finds the
    /// lease lost, and nothing is written) or waits until every write of
    /// the batch is done (and the run it queues writes after them). The
    /// batch's own writes stay outside: the layouts skip duplicates by
    /// their unique keys, which inside a transaction would abort it.
    async fn fence(
        &self,
        session: &mut ClientSession,
        lease: &Lease,
        now: Millis,
    ) -> StoreResult<()> {
        let job = &lease.job;
        let (fence, raise) = fence_of(job, now);
        let mut wait = FENCE_RETRY_FIRST;
        loop {
            session.start_transaction().await.map_err(db_err)?;
            let raised = self
                .fences
                .update_one(fence.clone(), raise.clone())
                .upsert(true)
                .session(&mut *session)
                .await;
            let found = match raised {
                Ok(_) => {
                    let found = self.jobs.find_one(job_filter(job));
                    found.session(&mut *session).await
                }
                Err(err) => Err(err),
            };
            match found {
                Ok(Some(held)) if held.worker.as_deref() == Some(lease.worker.as_str()) => {
                    return Ok(())
                }
                Ok(found) => {
                    let _ = session.abort_transaction().await;
                    let holder = found.and_then(|d| d.worker);
                    return Err(lease_lost(job, holder.as_deref()));
                }
                // A scope change holds the fence: once it commits, the
                // lease is read again.
                Err(err)
                    if err.contains_label(TRANSIENT_TRANSACTION_ERROR)
                        && wait <= FENCE_RETRY_LAST =>
                {
                    let _ = session.abort_transaction().await;
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                Err(err) => {
                    let _ = session.abort_transaction().await;
                    return Err(db_err(err));
                }
            }
        }
    }

    /// Commits the fence of a batch whose writes are done. Should that fail
    /// (the server ended the transaction, or the connection went), the
    /// writes may have landed after the lease was lost. If the worker still
    /// holds the job, they did not: a change of scope queueing it again
    /// would have taken it from the worker. Otherwise the fan-out is queued
    /// again, so that a run under a lease writes over them.
    async fn unfence(&self, session: &mut ClientSession, lease: &Lease) -> StoreResult<()> {
        let Err(err) = session.commit_transaction().await else {
            return Ok(());
        };
        let job = &lease.job;
        match self.holder(job).await? {
            Some(Some(worker)) if worker == lease.worker => {
                tracing::debug!(key = %job.key, cause = %err, "a fan-out batch's fence did not commit; the lease is still held");
                Ok(())
            }
            _ => {
                tracing::warn!(key = %job.key, cause = %err, "a fan-out batch's fence did not commit; its fan-out is queued again");
                let (filter, update) = requeue(job);
                self.jobs
                    .update_one(filter, update)
                    .upsert(true)
                    .await
                    .map_err(db_err)?;
                Err(lease_lost(job, None))
            }
        }
    }

    /// A fenced batch's writes: the items (unless the action is hidden or
    /// gone) and the fan-out's state, `Done` with the last batch (before
    /// the job goes: a crash in between leaves the job, whose re-run
    /// writes nothing new and finishes it), in progress from the first of
    /// several.
    async fn write_batch(&self, now: Millis, batch: &DeliveryBatch) -> StoreResult<Vec<FeedItem>> {
        let job = &batch.lease.job;
        let tenant = job.tenant.as_str();
        let id = FanOutJob::action_id(job)?;
        let Some(action) = self.find_action(tenant, id).await? else {
            // Deleted: nothing to write, the job done.
            return Ok(Vec::new());
        };
        let written = if !action.hidden && !batch.items.is_empty() {
            self.write_deliveries(&action, now, &batch.items).await?
        } else {
            Vec::new()
        };
        let state = if batch.last {
            FanOutState::Done
        } else {
            FanOutState::InProgress
        };
        if action.fan_out.state != state {
            let code = bson::to_bson(&state)
                .map_err(|e| StoreError::internal("MongoDB: cannot encode a fan-out state", e))?;
            self.actions
                .update_one(
                    doc! { "_id": id, "tenant": tenant },
                    doc! { "$set": { "fanOut.state": code } },
                )
                .await
                .map_err(db_err)?;
        }
        Ok(written)
    }

    /// Writes `items` of `action` (skipping readers who have it, whose
    /// reason is refreshed), and takes them back if the action was hidden
    /// or deleted meanwhile. Returns the items newly written.
    async fn write_deliveries(
        &self,
        action: &Action,
        now: Millis,
        items: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        let copy = self
            .copies_of(&action.tenant, &[action])
            .await?
            .remove(&action.id);
        let new: Vec<FeedItem> = items
            .iter()
            .map(|d| FeedItem {
                owner: d.owner.clone(),
                action_id: action.id,
                relevancy: d.relevancy,
                reason: d.reason.clone(),
                changed: now,
                copy: copy.clone(),
            })
            .collect();
        // One duplicate (a reader who already has the item, from an earlier
        // run or a hidden tombstone) must not stop the others.
        let skipped = self.layout.insert(&action.tenant, &new).await?;
        if !skipped.is_empty() {
            let kept: Vec<&Delivery> = skipped.iter().filter_map(|&i| items.get(i)).collect();
            self.refresh_reasons(action, &kept).await?;
        }
        // Hidden or deleted while we wrote: take the items back. Changed
        // otherwise: copy it again (the change may have copied before our
        // write landed).
        let now_stored = self.find_action(&action.tenant, action.id).await?;
        if let Some(stored) = now_stored.as_ref().filter(|a| !a.hidden) {
            if copy.is_some() && !copies_agree(action, stored) {
                self.recopy(&action.tenant, &[action.id]).await?;
            }
        }
        let still_visible = now_stored.is_some_and(|a| !a.hidden);
        if !still_visible {
            self.layout
                .remove(&action.tenant, None, &[action.id])
                .await?;
            return Ok(Vec::new());
        }
        Ok(items
            .iter()
            .enumerate()
            .filter(|(i, _)| !skipped.contains(i))
            .map(|(_, d)| FeedItem {
                owner: d.owner.clone(),
                action_id: action.id,
                relevancy: d.relevancy,
                reason: d.reason.clone(),
                changed: now,
                copy: None,
            })
            .collect())
    }
}

#[async_trait]
impl QueueStore for MongoStore {
    async fn deliver(
        &self,
        now: Millis,
        batches: &[DeliveryBatch],
    ) -> StoreResult<Vec<StoreResult<Vec<FeedItem>>>> {
        // One session for the batches' fences, one after another.
        let mut session = self.db.client().start_session().await.map_err(db_err)?;
        let mut results = Vec::with_capacity(batches.len());
        for batch in batches {
            match self.deliver_batch(&mut session, now, batch).await {
                Err(err) if err.kind != ErrorKind::LeaseLost => return Err(err),
                done => results.push(done),
            }
        }
        Ok(results)
    }

    async fn clean(&self, lease: &Lease, named: &[ObjectId]) -> StoreResult<Vec<FeedItem>> {
        self.clean_docs(lease, named).await
    }
}
