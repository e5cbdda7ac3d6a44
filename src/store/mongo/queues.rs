//! MongoDB: a fan-out's deliveries under its job's lease, and bumps'
//! raises.

use async_trait::async_trait;
use bson::doc;

use crate::model::{Action, FanOutState, FeedItem, Millis, ObjectId, Reason};
use crate::store::jobs::lease_lost;
use crate::store::{
    Delivery, DeliveryBatch, ErrorKind, FanOutJob, JobStore, Lease, QueueStore, StoreError,
    StoreResult,
};

use super::layout::copy::same as copies_agree;
use super::{db_err, MongoStore};

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
                .refresh(&action.tenant, action.id, &owners, reason)
                .await?;
        }
        Ok(())
    }

    /// One batch of a fan-out: the job's lease renewed (or, for the last,
    /// checked), the items written, and for the last the action marked
    /// `Done` and the job finished. `LeaseLost`, with nothing written, if
    /// the worker no longer holds the job.
    async fn deliver_batch(
        &self,
        now: Millis,
        batch: &DeliveryBatch,
    ) -> StoreResult<Vec<FeedItem>> {
        let lease = &batch.lease;
        if !batch.last {
            JobStore::renew(self, lease, now).await?;
        } else if !self.holds(lease).await? {
            return Err(lease_lost(&lease.job, None));
        }
        let tenant = lease.job.tenant.as_str();
        let id = FanOutJob::action_id(&lease.job)?;
        let Some(action) = self.find_action(tenant, id).await? else {
            // Deleted: nothing to write, the job done.
            if batch.last {
                self.finish(lease).await?;
            }
            return Ok(Vec::new());
        };
        let written = if !action.hidden && !batch.items.is_empty() {
            self.write_deliveries(&action, now, &batch.items).await?
        } else {
            Vec::new()
        };
        // Done with the last batch (before the job goes: a crash in between
        // leaves the job, whose re-run writes nothing new and finishes it);
        // in progress from the first of several.
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
        if batch.last {
            self.finish(lease).await?;
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
        let mut results = Vec::with_capacity(batches.len());
        for batch in batches {
            match self.deliver_batch(now, batch).await {
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
