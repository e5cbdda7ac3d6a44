//! MongoDB: the fan-out queue, leased by `findOneAndUpdate`, and bumps'
//! raises.

use async_trait::async_trait;
use bson::{doc, DateTime};
use futures_util::StreamExt;
use mongodb::options::ReturnDocument;

use crate::model::{Action, FanOut, FanOutState, FeedItem, Millis, ObjectId, Reason};
use crate::store::{Claim, Delivery, ErrorKind, Lease, QueueStore, StoreError, StoreResult};

use super::layout::copy::same as copies_agree;
use super::{db_err, MongoStore};

impl MongoStore {
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

    /// Checks `claim` still holds its lease and extends it to `until`. `Ok(None)`
    /// when the action is gone, `LeaseLost` when another worker holds it.
    pub(super) async fn renew_lease(
        &self,
        claim: &Claim,
        until: Millis,
    ) -> StoreResult<Option<Action>> {
        let id = claim.action.id;
        let tenant = claim.action.tenant.as_str();
        let renewed = self
            .actions
            .find_one_and_update(
                doc! {
                    "_id": id,
                    "tenant": tenant,
                    "fanOut.state": "IN_PROGRESS",
                    "fanOut.worker": &claim.worker,
                },
                doc! { "$set": { "fanOut.lockedUntil": DateTime::from_millis(until) } },
            )
            .return_document(ReturnDocument::After)
            .await
            .map_err(db_err)?;
        match renewed {
            Some(doc) => Ok(Some(doc.into())),
            None => self.lease_lost(tenant, id).await.map(|()| None),
        }
    }

    /// Explains a failed lease check: `Ok` if the action was deleted, else `LeaseLost`.
    pub(super) async fn lease_lost(&self, tenant: &str, id: ObjectId) -> StoreResult<()> {
        match self.find_action(tenant, id).await? {
            None => Ok(()),
            Some(action) => Err(StoreError::new(
                ErrorKind::LeaseLost,
                format!(
                    "fan-out of {id} is {:?} by {}",
                    action.fan_out.state,
                    action.fan_out.worker.as_deref().unwrap_or("nobody")
                ),
            )),
        }
    }
}

#[async_trait]
impl QueueStore for MongoStore {
    async fn claim_fan_out(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Claim>> {
        let until = DateTime::from_millis(now + lease_ms);
        let mut claims = Vec::new();
        // One findAndModify per action: each claim is atomic, so two workers
        // never hold the same action.
        while claims.len() < limit {
            let claimed = self
                .actions
                .find_one_and_update(
                    doc! { "fanOut.lockedUntil": { "$lte": DateTime::from_millis(now) } },
                    doc! { "$set": {
                        "fanOut.state": "IN_PROGRESS",
                        "fanOut.lockedUntil": until,
                        "fanOut.worker": worker,
                    } },
                )
                .sort(doc! { "fanOut.lockedUntil": 1, "_id": 1 })
                .return_document(ReturnDocument::Before)
                .await
                .map_err(db_err)?;
            let Some(before) = claimed else { break };
            let taken_over = before.fan_out.worker.is_some();
            let mut action: Action = before.into();
            action.fan_out = FanOut {
                state: FanOutState::InProgress,
                locked_until: Some(now + lease_ms),
                worker: Some(worker.to_owned()),
            };
            claims.push(Claim {
                action,
                worker: worker.to_owned(),
                lease_ms,
                taken_over,
            });
        }
        Ok(claims)
    }

    async fn fan_out_backlog(&self) -> StoreResult<crate::store::Backlog> {
        // One aggregate over the open fan-outs' partial index: how many,
        // and the smallest id (the oldest recorded).
        let mut cursor = self
            .actions
            .aggregate([
                doc! { "$match": { "fanOut.lockedUntil": { "$exists": true } } },
                doc! { "$group": { "_id": null, "n": { "$sum": 1 }, "oldest": { "$min": "$_id" } } },
            ])
            .await
            .map_err(db_err)?;
        let Some(found) = cursor.next().await else {
            return Ok(crate::store::Backlog::default());
        };
        let found = found.map_err(db_err)?;
        let actions = found
            .get_i32("n")
            .map(i64::from)
            .or_else(|_| found.get_i64("n"))
            .unwrap_or(0)
            .max(0) as u64;
        let oldest = found
            .get_object_id("oldest")
            .ok()
            .map(|id| id.timestamp().timestamp_millis());
        Ok(crate::store::Backlog { actions, oldest })
    }

    async fn deliver(
        &self,
        claim: &Claim,
        now: Millis,
        items: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        let Some(action) = self.renew_lease(claim, now + claim.lease_ms).await? else {
            return Ok(Vec::new());
        };
        if action.hidden || items.is_empty() {
            return Ok(Vec::new());
        }
        let copy = self
            .copies_of(&action.tenant, &[&action])
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
            self.refresh_reasons(&action, &kept).await?;
        }
        // Hidden or deleted while we wrote: take the items back. Changed
        // otherwise: copy it again (the change may have copied before our
        // write landed).
        let now_stored = self.find_action(&action.tenant, action.id).await?;
        if let Some(stored) = now_stored.as_ref().filter(|a| !a.hidden) {
            if copy.is_some() && !copies_agree(&action, stored) {
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

    async fn finish_fan_out(&self, claim: &Claim) -> StoreResult<()> {
        let id = claim.action.id;
        let tenant = claim.action.tenant.as_str();
        let finished = self
            .actions
            .update_one(
                doc! {
                    "_id": id,
                    "tenant": tenant,
                    "fanOut.state": "IN_PROGRESS",
                    "fanOut.worker": &claim.worker,
                },
                doc! {
                    "$set": { "fanOut.state": "DONE" },
                    "$unset": { "fanOut.lockedUntil": "", "fanOut.worker": "" },
                },
            )
            .await
            .map_err(db_err)?;
        if finished.matched_count == 0 {
            return self.lease_lost(tenant, id).await;
        }
        Ok(())
    }

    async fn raise(
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

    async fn clean(&self, lease: &Lease, named: Option<&[ObjectId]>) -> StoreResult<Vec<FeedItem>> {
        self.clean_docs(lease, named).await
    }
}
