//! The worker's upkeep: follows a kill cut off, unfollow and group
//! cleanups, expiry, and the feed model's own upkeep (idle rivers).

use super::leases::Holding;
use super::*;
use crate::store::{FollowJob, Graph, QueuedRead};
use crate::timeline::{follow, groups, rivers, Expiry, FeedModelKind};

/// How often the feed model's upkeep runs (idle rivers are looked for).
const SWEEP_EVERY_MS: Millis = 60_000;
/// How often expired actions are looked for at the latest (actions fanned
/// out by another process, or before a restart).
const EXPIRY_CHECK_MS: Millis = 60_000;

/// How long an unfollow's writes may take, queued cleanup to ended edge:
/// a cleanup finding its edge standing before this looks again later.
const UNFOLLOW_SETTLES_MS: Millis = 10_000;
/// When it looks again.
const UNFOLLOW_LOOK_AGAIN_MS: Millis = 100;
/// Queued fan-outs (of every tenant) past which a cleanup waiting for the
/// ones that may bring its items does not list them: it waits for the
/// backlog to drain.
const FAN_OUTS_LOOKED_AT: u64 = 1_000;
/// When a cleanup waiting for fan-outs or a river build looks again: each
/// look costs a few reads, and either takes a while under load.
const FAN_OUTS_LOOK_AGAIN_MS: Millis = 1_000;
/// How long a follow's writes may take, queued backfill to backfill in:
/// the worker leaves a follow job alone until then.
const FOLLOW_SETTLES_MS: Millis = 10_000;

impl Worker {
    /// Claims the follows whose backfill is still queued and finishes those
    /// a kill cut off: a follow's own request ends its job once the
    /// backfill is in, so the worker looks at one only once the follow has
    /// had time to (before, it gives the job back to wait). An edge that
    /// stands gets its backfill, as of the follow's time; one that does not
    /// (the follow never wrote it, or an unfollow came since) gets none.
    /// Returns how many were claimed.
    pub(super) async fn finish_follows(
        &self,
        shutdown: &CancellationToken,
        failure: &mut Option<crate::store::StoreError>,
    ) -> StoreResult<usize> {
        if shutdown.is_cancelled() {
            return Ok(0);
        }
        let leases = self.claim(JobKind::Follow).await?;
        let claimed = leases.len();
        let holding = Holding::new(&leases);
        let round = async {
            let jobs = self
                .readable("follow", leases, &holding, FollowJob::of_job)
                .await;
            for (lease, job) in jobs {
                let done = self.finish_follow(&lease, job).await;
                holding.let_go(&lease.job);
                if let Err(err) = done {
                    if err.kind == ErrorKind::LeaseLost {
                        debug!(key = %lease.job.key, "a follow job was ended meanwhile");
                        continue;
                    }
                    error!(key = %lease.job.key, cause = %err.chain(), "a cut-off follow's backfill failed; it is retried when its lease runs out");
                    failure.get_or_insert(err);
                }
            }
        };
        self.keeping(&holding, round).await;
        Ok(claimed)
    }

    async fn finish_follow(&self, lease: &Lease, job: FollowJob) -> StoreResult<()> {
        self.starting(&lease.job).await;
        let store = self.store.as_ref();
        let settled = job.at.saturating_add(FOLLOW_SETTLES_MS);
        if self.clock.now() < settled {
            return store.defer(lease, settled).await;
        }
        let readers = [job.reader.clone()];
        let standing = store.edges_among(&job.tenant, job.kind, &readers, &job.actor);
        if !standing.await?.is_empty() {
            let shown = follow::show(store, &self.hub, &self.config.model, &job).await?;
            info!(reader = %job.reader, actor = %job.actor, shown = shown.len(), "a follow cut off before its backfill has it now");
            outbox::tell_followed(&self.outbox, &job).await?;
        }
        self.metrics.job("follow", true);
        store.finish(lease).await
    }
}

impl Worker {
    /// Claims unfollow cleanups and runs them: each takes the items that came
    /// by an ended edge (or, for a group left, the group items the reader may
    /// no longer read) out of the reader's feed, and a reader online gets
    /// `REMOVED` for each. A cleanup reads the reader's whole feed, so each
    /// is claimed when it starts (one claimed with others would wait for
    /// them while its lease runs) and its lease is renewed while it runs.
    /// Returns how many were claimed.
    pub(super) async fn clean_unfollows(
        &self,
        shutdown: &CancellationToken,
        failure: &mut Option<crate::store::StoreError>,
    ) -> StoreResult<usize> {
        let mut claimed = 0;
        while claimed < self.config.claim_limit && !shutdown.is_cancelled() {
            let Some(lease) = self.claim_up_to(JobKind::Cleanup, 1).await?.pop() else {
                break;
            };
            claimed += 1;
            let holding = Holding::new([&lease]);
            let read = self
                .readable("cleanup", vec![lease], &holding, Unfollow::of_job)
                .await;
            for (lease, u) in read {
                self.keeping(&holding, self.clean_unfollow(&lease, &u, failure))
                    .await;
            }
        }
        Ok(claimed)
    }

    /// Runs one claimed cleanup, read; the caller keeps its lease until the
    /// items are out and the job finished.
    async fn clean_unfollow(
        &self,
        lease: &Lease,
        u: &Unfollow,
        failure: &mut Option<crate::store::StoreError>,
    ) {
        let store = self.store.as_ref();
        let cleaning = async {
            let expiry = Expiry {
                now: self.clock.now(),
                item_ttl: self.config.item_ttl,
            };
            // The edge still standing: its unfollow is queued before the
            // edge goes, so it may be under way (looked at again shortly),
            // or was cut off before the edge went, or a follow again came
            // too late to cancel this; an edge standing that long brought
            // what it covers, and nothing is taken out.
            if let Ended::Edge(kind) = u.kind {
                let readers = [u.reader.clone()];
                let standing = store.edges_among(&u.tenant, kind, &readers, &u.actor);
                if !standing.await?.is_empty() {
                    let now = self.clock.now();
                    if now - lease.job.queued < UNFOLLOW_SETTLES_MS {
                        store.defer(lease, now + UNFOLLOW_LOOK_AGAIN_MS).await?;
                        return Ok(None);
                    }
                    return store.clean(lease, &[]).await.map(Some);
                }
                // The edge is gone, but a fan-out that read it before may
                // still be writing: its item would land after the cleanup
                // and stay. Once none is queued or running, all are in.
                if self.fan_outs_under_way(u).await? {
                    let now = self.clock.now();
                    store.defer(lease, now + FAN_OUTS_LOOK_AGAIN_MS).await?;
                    return Ok(None);
                }
            }
            // A river being built may have read the ended source before
            // it ended: what it brings lands once the build is done.
            if self.config.model.kind == FeedModelKind::Rivers {
                let now = self.clock.now();
                if rivers::being_built(store, &u.tenant, &u.reader, now).await? {
                    store.defer(lease, now + FAN_OUTS_LOOK_AGAIN_MS).await?;
                    return Ok(None);
                }
            }
            let ids = groups::named_items(store, u, expiry).await?;
            store.clean(lease, &ids).await.map(Some)
        };
        let cleaned = cleaning.await;
        if !matches!(cleaned, Ok(None)) {
            self.metrics.job("cleanup", cleaned.is_ok());
        }
        match cleaned {
            Ok(None) => {
                debug!(reader = %u.reader, actor = %u.actor, "unfollow under way: its cleanup looks again")
            }
            Ok(Some(removed)) => {
                debug!(reader = %u.reader, actor = %u.actor, removed = removed.len(), "unfollow cleaned up");
                let now = self.clock.now();
                let put_back = match u.kind {
                    Ended::Edge(_) => {
                        follow::put_back(store, &u.tenant, &u.reader, &removed, now).await
                    }
                    Ended::Group => Ok(Vec::new()),
                };
                let kept = match put_back {
                    Ok(kept) => kept,
                    Err(err) => {
                        failure.get_or_insert(err);
                        Vec::new()
                    }
                };
                self.hub
                    .publish_feed_items(FeedEventKind::Removed, &u.tenant, None, removed);
                self.hub
                    .publish_feed_items(FeedEventKind::Added, &u.tenant, None, kept);
            }
            Err(err) if err.kind == ErrorKind::LeaseLost => {
                warn!(reader = %u.reader, actor = %u.actor, cause = %err.chain(), "lease lost; leaving the cleanup to its new owner");
            }
            Err(err) => {
                error!(reader = %u.reader, actor = %u.actor, cause = %err.chain(), "an unfollow cleanup failed; it is retried when its lease runs out");
                failure.get_or_insert(err);
            }
        }
    }

    /// Whether a fan-out that may bring the reader of the ended edge `u`
    /// an item by it (of an action its actor did, or sent to the group it
    /// followed) is queued or running. Its audience may have been read
    /// while the edge stood: the cleanup waits for its writes, which are in
    /// once its job is gone (the last batch finishes it after writing).
    /// A fan-out that failed and waits to be tried again (given back by
    /// the worker whose tries it spent) does not count: it runs nowhere,
    /// and its next run reads the audience anew, so one that never
    /// succeeds holds no cleanup back for good.
    /// Past `FAN_OUTS_LOOKED_AT` queued fan-outs it waits without looking:
    /// reads apply the pending cleanup meanwhile.
    async fn fan_outs_under_way(&self, u: &Unfollow) -> StoreResult<bool> {
        let store = self.store.as_ref();
        let backlog = store.backlog(JobKind::FanOut).await?;
        if backlog.jobs == 0 {
            return Ok(false);
        }
        if backlog.jobs > FAN_OUTS_LOOKED_AT {
            return Ok(true);
        }
        let read = QueuedRead {
            limit: FAN_OUTS_LOOKED_AT as usize + 1,
            ..QueuedRead::under("")
        };
        let queued = store.queued(JobKind::FanOut, &u.tenant, read).await?;
        if queued.len() as u64 > FAN_OUTS_LOOKED_AT {
            return Ok(true);
        }
        // A fan-out that failed and waits to be tried again runs nowhere:
        // its next run reads its audience after the edge went.
        let ids = queued
            .iter()
            .filter(|q| !(q.job.failures > 0 && q.held.is_none()))
            .map(|q| FanOutJob::action_id(&q.job))
            .collect::<StoreResult<Vec<_>>>()?;
        if ids.is_empty() {
            return Ok(false);
        }
        let actions = store.get_actions(&u.tenant, &ids).await?;
        Ok(actions.iter().any(|a| u.may_bring(a)))
    }

    /// The model's upkeep (rivers: dropping idle ones), at most once a
    /// minute.
    pub(super) async fn upkeep(&self) -> StoreResult<()> {
        let now = self.clock.now();
        let last = self.last_sweep.load(Ordering::Relaxed);
        if now.saturating_sub(last) < SWEEP_EVERY_MS {
            return Ok(());
        }
        self.last_sweep.store(now, Ordering::Relaxed);
        let model = self.config.model.behaviour();
        let done = model.upkeep(self.store.as_ref(), now).await?;
        if done > 0 {
            info!(model = %self.config.model.kind, done, "feed model upkeep");
        }
        Ok(())
    }

    /// Deletes the actions whose expiry has come (reads have left them out
    /// since that moment) and tells live readers `REMOVED`: when one this
    /// worker fanned out comes due, and at least once a minute. Returns how
    /// many.
    pub(super) async fn expire(&self) -> StoreResult<usize> {
        let store = self.store.as_ref();
        let now = self.clock.now();
        if now < self.next_expiry.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let limit = self.config.claim_limit;
        // A minute ahead: what comes due then says when to look next.
        let ahead = now.saturating_add(EXPIRY_CHECK_MS);
        let mut due = store.expired(ahead, self.config.item_ttl, limit).await?;
        let next = match due.iter().find(|(at, _, _)| *at > now) {
            Some((at, _, _)) => *at,
            None if due.len() >= limit => now,
            None => ahead,
        };
        self.next_expiry.store(next, Ordering::Relaxed);
        due.retain(|(at, _, _)| *at <= now);
        let pulls = !self.config.model.pushes_all();
        for (_, tenant, id) in &due {
            let Some(action) = store.get_actions(tenant, &[*id]).await?.pop() else {
                continue;
            };
            let removed = match store.remove_action(tenant, *id, Removal::Delete).await {
                Ok(removed) => removed,
                // Deleted meanwhile.
                Err(err) if err.kind == ErrorKind::NotFound => continue,
                Err(err) => return Err(err),
            };
            debug!(%tenant, action = %id, items = removed.len(), "expired action deleted");
            self.metrics.job("expiry", true);
            audience::announce_removed(store, &self.hub, pulls, &action, removed).await?;
        }
        Ok(due.len())
    }
}
