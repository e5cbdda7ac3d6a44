//! The worker: runs the background work the API queues, each kind under a
//! lease so that any number of workers can share it and a crashed one's
//! work is taken over when its lease runs out. One round does, in order:
//! fan-outs, bumps, notice jobs, unfollow and group cleanups, expiry, and
//! the feed model's upkeep (idle rivers).
//!
//! All of it comes from the job queue ([`crate::store::jobs`]), each kind
//! claimed under a lease.
//!
//! Fan-out: every recorded action queues its fan-out job. The worker claims
//! them, reads their actions, computes each one's audience, writes one feed
//! item per reader in large batches (each batch one store step that renews
//! the lease; the last marks the action `DONE` and finishes the job; small
//! fan-outs share one step), and publishes `ADDED` events. A worker that
//! dies leaves its lease to run out; the next claim takes the job over, and
//! because delivery skips readers that already have the item, the re-run
//! duplicates nothing.
//!
//! Every comment queues a bump job, which a worker claims under a lease,
//! waits while the action's fan-out job is queued or running (gives the
//! job back, due at once, so the items that fan-out writes are there),
//! raises the action for the readers the relevancy rules pick (see
//! [`crate::relevancy`]), renewing the lease before each batch, publishes
//! `BUMPED` events and finishes. A bump raises to a fixed target (the
//! comment's time plus the boost), so a re-run, or two workers at once,
//! change nothing further. A notice job (a like, an assignment) writes its
//! notices and is finished.
//! Cleanups take the items an ended follow, friendship or group brought
//! out of the reader's feed (reads leave them out from the moment it
//! ended) and put back those another source still gives. Expiry deletes
//! actions whose time has come and tells live readers `REMOVED`; upkeep
//! runs at most once a minute.
//!
//! Each job that carries an event (a fan-out, a bump, a notice job) queues
//! its webhook deliveries ([`crate::webhooks`]) before it is finished.
//! The bumps and notice jobs are in `jobs`; cleanups, expiry and upkeep in
//! `upkeep`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, instrument, warn};

use crate::clock::Clock;
use crate::events::{FeedEventKind, Hub, NoticeEvent};
use crate::metrics::Metrics;
use crate::model::{Action, Bump, Comment, EventType, Millis, Position, Reason, ReasonKind};
use crate::notify::{self, NoticeRules};
use crate::relevancy::{self, BumpRules};
use crate::store::GroupFeeds;
use crate::store::{
    Backfill, BumpJob, Delivery, DeliveryBatch, Ended, ErrorKind, FanOutJob, JobKind, Jobs, Lease,
    NoticeJob, Removal, Store, StoreResult, Timelines, Unfollow,
};
use crate::timeline::{audience, FeedModel};

mod jobs;
mod leases;
mod upkeep;
use crate::webhooks::outbox::{self, Event, Outbox};
use leases::Holding;
#[cfg(debug_assertions)]
pub use leases::JobPause;

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Identifies this worker in leases.
    pub id: String,
    /// How long a claim stays ours without progress.
    pub lease_ms: Millis,
    /// Feed items written per store call (one transaction each).
    pub batch_size: usize,
    /// Actions (and, separately, bumps) claimed at once.
    pub claim_limit: usize,
    /// Who a comment bumps, and how far.
    pub bump_rules: BumpRules,
    /// How often an idle worker looks for work it was not woken for (other
    /// processes' actions, leases that ran out).
    pub poll_interval: Duration,
    /// What the fan-out materialises.
    pub model: FeedModel,
    /// `--item-ttl` in milliseconds: older actions are not shown.
    pub item_ttl: Option<Millis>,
    /// `--group-feed-size`: the posts a group's feed keeps.
    pub group_feed_size: usize,
    /// Who hears of what happened to them, and how it groups.
    pub notice_rules: NoticeRules,
    /// The descriptor types, whose `@notify` rules say who an action
    /// notifies.
    pub descriptors: Arc<crate::descriptor::Catalog>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            id: format!(
                "worker-{}-{}",
                std::process::id(),
                bson::oid::ObjectId::new()
            ),
            lease_ms: 30_000,
            batch_size: 10_000,
            claim_limit: 64,
            bump_rules: BumpRules::default(),
            poll_interval: Duration::from_millis(500),
            model: FeedModel::default(),
            item_ttl: None,
            group_feed_size: crate::store::group_feeds::DEFAULT_SIZE,
            notice_rules: NoticeRules::default(),
            descriptors: crate::descriptor::Catalog::builtin(),
        }
    }
}

/// The worker: fan-outs, bumps, notice jobs, cleanups, expiry and upkeep.
#[derive(Clone)]
pub struct Worker {
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    clock: Arc<dyn Clock>,
    config: WorkerConfig,
    wake: Arc<Notify>,
    /// When idle rivers were last swept for.
    last_sweep: Arc<AtomicI64>,
    /// When expired actions are next looked for: the soonest expiry this
    /// worker fanned out, or a minute after the last look.
    next_expiry: Arc<AtomicI64>,
    /// Fan-outs that failed while still ours (a store error the database
    /// may not repeat), each with the tries so far: tried again at the next
    /// round, after the worker's backoff, not only once their lease runs out.
    retry: Arc<std::sync::Mutex<Vec<(Claim, u32)>>>,
    /// Fan-outs that failed every try this worker gave them: given back
    /// at the end of the round (see [`Worker::give_back_failed`]).
    given_up: Arc<std::sync::Mutex<Vec<Lease>>>,
    /// Deliveries, takeovers and jobs are counted here.
    metrics: Arc<Metrics>,
    /// Where the events of the jobs it runs are queued for webhooks.
    outbox: Arc<Outbox>,
    /// Debug builds only: a pause each job takes as it starts.
    #[cfg(debug_assertions)]
    pause: Option<JobPause>,
}

/// A fan-out this worker holds: its job's lease and the action.
#[derive(Clone, Debug)]
pub struct Claim {
    pub lease: Lease,
    pub action: Action,
}

/// Times a failed fan-out is tried again by the worker that holds it;
/// after that it waits for its lease to run out, and any worker takes it.
const RETRIES: u32 = 5;

impl Worker {
    pub fn new(
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        clock: Arc<dyn Clock>,
        config: WorkerConfig,
        wake: Arc<Notify>,
    ) -> Self {
        Self {
            outbox: Outbox::new(store.clone(), clock.clone()),
            store,
            hub,
            clock,
            config,
            wake,
            last_sweep: Arc::new(AtomicI64::new(Millis::MIN)),
            next_expiry: Arc::new(AtomicI64::new(Millis::MIN)),
            metrics: Arc::default(),
            retry: Arc::default(),
            given_up: Arc::default(),
            #[cfg(debug_assertions)]
            pause: None,
        }
    }

    /// Counts this worker's deliveries, lease takeovers and jobs into
    /// `metrics` (the process's, for `/metrics`).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The store it works on.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// What it counts into.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Queues webhook deliveries into `outbox` (the process's, shared with
    /// its API and its sender).
    pub fn with_outbox(mut self, outbox: Arc<Outbox>) -> Self {
        self.outbox = outbox;
        self
    }

    /// Works until `shutdown` is cancelled: does whatever is due, then waits
    /// to be woken (a new action) or for the poll interval. Everything it
    /// logs carries its `worker` id.
    #[instrument(skip_all, fields(worker = %self.config.id))]
    pub async fn run(self, shutdown: CancellationToken) {
        info!(bump_rules = %self.config.bump_rules.describe(), "fan-out worker started");
        let mut backoff = Duration::from_millis(100);
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            let wait = match self.run_until(&shutdown).await {
                Ok(0) => self.config.poll_interval,
                Ok(_) => {
                    backoff = Duration::from_millis(100);
                    continue;
                }
                Err(err) => {
                    warn!(cause = %err.chain(), "backing off after a failed fan-out");
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    backoff
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
        info!("fan-out worker stopped");
    }

    /// Claims what is due (fan-outs, bumps, notice jobs, cleanups, expired
    /// actions) and does it, and runs the model's upkeep when it is time.
    /// Returns how many jobs it claimed.
    pub async fn run_once(&self) -> StoreResult<usize> {
        self.run_until(&CancellationToken::new()).await
    }

    /// As `run_once`, but stops between actions once `shutdown` is cancelled;
    /// actions claimed and not started wait for their lease to run out.
    async fn run_until(&self, shutdown: &CancellationToken) -> StoreResult<usize> {
        let retried: Vec<(Claim, u32)> =
            std::mem::take(&mut *self.retry.lock().unwrap_or_else(|e| e.into_inner()));
        let mut tries: HashMap<crate::model::ObjectId, u32> =
            retried.iter().map(|(c, n)| (c.action.id, *n)).collect();
        let mut claims: Vec<Claim> = retried.into_iter().map(|(c, _)| c).collect();
        let leases = self.claim(JobKind::FanOut).await?;
        // A retried fan-out claimed again is stale: a scope change queued
        // it anew, and the store cannot tell this worker's two leases of it
        // apart, so the old one (its action read under the old scope) would
        // write and finish the job in the new one's place. The new claim
        // reads the action as it is now.
        claims.retain(|c| {
            let job = &c.lease.job;
            !leases
                .iter()
                .any(|l| l.job.tenant == job.tenant && l.job.key == job.key)
        });
        // Each job claimed counts, one whose action is gone too.
        let mut claimed = claims.len() + leases.len();
        let takeovers = leases.iter().filter(|l| l.taken_over).count();
        if takeovers > 0 {
            info!(takeovers, "took over fan-outs whose lease ran out");
            self.metrics.lease_takeovers.inc_by(takeovers as u64);
        }
        // One job failing must not hold up the others claimed with it: each is
        // tried, and the first failure is reported once all were.
        let mut failure = None;
        // Every fan-out of the round keeps its lease until it ends.
        let holding = Holding::new(claims.iter().map(|c| &c.lease).chain(&leases));
        let round = async {
            claims.extend(self.actions_of(leases, &holding).await?);
            let (tries, failure) = (&mut tries, &mut failure);
            self.fan_outs(claims, &holding, tries, failure, shutdown)
                .await;
            StoreResult::Ok(())
        };
        self.keeping(&holding, round).await?;
        self.give_back_failed().await;
        if shutdown.is_cancelled() {
            return Ok(claimed);
        }
        // Bumps after deliveries: a comment on a fresh action then finds the
        // items it raises already written.
        claimed += self.bumps(shutdown, &mut failure).await?;
        claimed += self.notice_jobs(shutdown, &mut failure).await?;
        claimed += self.finish_follows(shutdown, &mut failure).await?;
        claimed += self.clean_unfollows(shutdown, &mut failure).await?;
        claimed += self.expire().await?;
        self.upkeep().await?;
        match failure {
            Some(err) => Err(err),
            None => Ok(claimed),
        }
    }

    /// Runs the claimed fan-outs of a round, one after another, in the
    /// order claimed; stops between them once `shutdown` is cancelled.
    async fn fan_outs(
        &self,
        claims: Vec<Claim>,
        holding: &Holding,
        tries: &mut HashMap<crate::model::ObjectId, u32>,
        failure: &mut Option<crate::store::StoreError>,
        shutdown: &CancellationToken,
    ) {
        // Audiences that fit in one batch are gathered and written together,
        // one commit for many actions; larger ones go batch by batch.
        let batch = self.config.batch_size.max(1);
        // The claims of a group, and their last (only) batches.
        let mut group: (Vec<Claim>, Vec<DeliveryBatch>) = Default::default();
        let mut grouped = 0usize;
        for claim in claims {
            if shutdown.is_cancelled() {
                break;
            }
            self.starting(&claim.lease.job).await;
            let audience = match self.audience_of(&claim.action).await {
                Ok(audience) => audience,
                Err(err) => {
                    self.fanned_out(&claim, Err(err), holding, tries, failure);
                    continue;
                }
            };
            if audience.len() > batch {
                // Each of its batches renews its lease as it starts.
                holding.let_go(&claim.lease.job);
                let done = self.deliver_audience(&claim, audience).await;
                self.fanned_out(&claim, done, holding, tries, failure);
                continue;
            }
            if grouped + audience.len() > batch {
                let full = std::mem::take(&mut group);
                self.deliver_group(full, holding, tries, failure).await;
                grouped = 0;
            }
            grouped += audience.len();
            group.1.push(DeliveryBatch {
                lease: claim.lease.clone(),
                items: deliveries(&claim.action, audience),
                last: true,
            });
            group.0.push(claim);
        }
        // Claimed before any cancellation: finishing them is one commit.
        self.deliver_group(group, holding, tries, failure).await;
    }

    /// Claims up to the claim limit of `kind`'s due jobs for this worker.
    async fn claim(&self, kind: JobKind) -> StoreResult<Vec<Lease>> {
        self.claim_up_to(kind, self.config.claim_limit).await
    }

    /// Claims up to `limit` of `kind`'s due jobs for this worker.
    async fn claim_up_to(&self, kind: JobKind, limit: usize) -> StoreResult<Vec<Lease>> {
        let now = self.clock.now();
        let (id, lease_ms) = (&self.config.id, self.config.lease_ms);
        self.store.claim(kind, id, now, lease_ms, limit).await
    }

    /// The actions of claimed fan-out jobs, read in one call per tenant. A
    /// job whose action is gone (deleted since) has nothing to do and is
    /// finished; one that names no action is set aside.
    async fn actions_of(&self, leases: Vec<Lease>, holding: &Holding) -> StoreResult<Vec<Claim>> {
        let mut by_tenant: HashMap<String, Vec<(Lease, crate::model::ObjectId)>> = HashMap::new();
        for (lease, id) in self
            .readable("fanout", leases, holding, FanOutJob::action_id)
            .await
        {
            by_tenant
                .entry(lease.job.tenant.clone())
                .or_default()
                .push((lease, id));
        }
        let mut claims = Vec::new();
        for (tenant, leases) in by_tenant {
            let ids: Vec<_> = leases.iter().map(|(_, id)| *id).collect();
            let mut actions: HashMap<_, Action> = self
                .store
                .get_actions(&tenant, &ids)
                .await?
                .into_iter()
                .map(|a| (a.id, a))
                .collect();
            for (lease, id) in leases {
                match actions.remove(&id) {
                    Some(action) => claims.push(Claim { lease, action }),
                    None => {
                        holding.let_go(&lease.job);
                        self.store.finish(&lease).await?
                    }
                }
            }
        }
        // Oldest first, as claimed.
        claims.sort_by_key(|c| c.action.id);
        Ok(claims)
    }

    /// Delivers one claimed action to its whole audience and marks it done.
    pub async fn fan_out(&self, claim: &Claim) -> StoreResult<()> {
        let work = async {
            let audience = self.audience_of(&claim.action).await?;
            self.deliver_audience(claim, audience).await
        };
        self.keeping(&Holding::new([&claim.lease]), work).await
    }

    /// The readers an action's fan-out writes for, under the model: none
    /// once it is hidden. Live readers who pull it instead are told now.
    async fn audience_of(&self, action: &Action) -> StoreResult<Vec<(String, ReasonKind)>> {
        let store = self.store.as_ref();
        if action.hidden {
            return Ok(Vec::new());
        }
        // Its expiry, if it comes before the next look for expired ones.
        if let Some(at) = action.expiry(self.config.item_ttl) {
            self.next_expiry.fetch_min(at, Ordering::Relaxed);
        }
        // Its group feeds first (a run again posts nothing twice).
        let at = Position {
            relevancy: action.conducted,
            action_id: action.id,
        };
        for group in action.group_feeds() {
            let size = self.config.group_feed_size;
            store.post_to_group(&action.tenant, group, at, size).await?;
        }
        // Its notices (a rating request, a hire), likewise written once.
        let notices = notify::for_action(
            store,
            &self.config.notice_rules,
            &self.config.descriptors,
            action,
        )
        .await?;
        self.notify(&action.tenant, notices).await?;
        // Its webhook events, before the last delivery finishes the job.
        let now = self.clock.now();
        self.outbox
            .tell(&action.tenant, |l| outbox::action_events(l, action, now))
            .await?;
        let planned = self
            .config
            .model
            .behaviour()
            .audience(store, action)
            .await?;
        // Whom to tell matters only where someone may listen: here, or in
        // another process. A fan-out with neither copies nothing.
        let listened = self.hub.relays() || self.hub.live_topics() > 0;
        if planned.pulled && listened {
            let shared = Arc::new(action.clone());
            // The readers it was written for (sorted) heard already.
            let written = planned.readers.iter().map(|(r, _)| r.clone()).collect();
            audience::tell_online(store, &self.hub, FeedEventKind::Added, &shared, written).await?;
        }
        Ok(planned.readers)
    }

    /// Delivers several whole fan-outs in one store call (`claims` and
    /// their last batches, in the same order) and publishes what each wrote.
    async fn deliver_group(
        &self,
        (claims, batches): (Vec<Claim>, Vec<DeliveryBatch>),
        holding: &Holding,
        tries: &mut HashMap<crate::model::ObjectId, u32>,
        failure: &mut Option<crate::store::StoreError>,
    ) {
        if claims.is_empty() {
            return;
        }
        // Written now, each under its fence: a renewal beside them would
        // only meet the batches' own writes of their leases.
        for claim in &claims {
            holding.let_go(&claim.lease.job);
        }
        let results = match self.store.deliver(self.clock.now(), &batches).await {
            Ok(results) => results,
            Err(err) => claims.iter().map(|_| Err(err.clone())).collect(),
        };
        self.outbox.released();
        for ((claim, batch), done) in claims.iter().zip(&batches).zip(results) {
            let done = done.map(|written| {
                debug!(action = %claim.action.id, audience = batch.items.len(), delivered = written.len(), "fan-out done");
                self.publish(FeedEventKind::Added, &claim.action, written, &mut None);
            });
            self.fanned_out(claim, done, holding, tries, failure);
        }
    }

    /// Notes how a fan-out went: one that failed while still ours is kept
    /// to be tried again at the next round (up to `RETRIES` times).
    fn fanned_out(
        &self,
        claim: &Claim,
        done: StoreResult<()>,
        holding: &Holding,
        tries: &mut HashMap<crate::model::ObjectId, u32>,
        failure: &mut Option<crate::store::StoreError>,
    ) {
        holding.let_go(&claim.lease.job);
        let lost = matches!(&done, Err(err) if err.kind == ErrorKind::LeaseLost);
        if done.is_err() && !lost {
            let n = tries.get(&claim.action.id).copied().unwrap_or(0) + 1;
            if n <= RETRIES {
                tries.insert(claim.action.id, n);
                self.retry
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((claim.clone(), n));
            } else {
                self.given_up
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(claim.lease.clone());
            }
        }
        self.metrics.job("fanout", done.is_ok());
        note_outcome(done, "fan-out", &claim.action.id, failure);
    }

    /// Gives back the fan-outs that failed every try this round gave them,
    /// their failure counted on the job, to be tried again once a lease's
    /// length has passed (as when a lease runs out), by any worker. A
    /// failed fan-out waiting so runs nowhere: an unfollow's cleanup need
    /// not wait for it (see `fan_outs_under_way`), since its next run reads
    /// its audience, and so the edge, anew. One whose lease was lost
    /// meanwhile is its new holder's.
    async fn give_back_failed(&self) {
        let given_up =
            std::mem::take(&mut *self.given_up.lock().unwrap_or_else(|e| e.into_inner()));
        for mut lease in given_up {
            lease.job.failures = lease.job.failures.saturating_add(1);
            let at = self.clock.now().saturating_add(lease.lease_ms);
            match self.store.defer(&lease, at).await {
                Ok(()) => {
                    warn!(key = %lease.job.key, failures = lease.job.failures, "a fan-out failed every try; given back to be tried again later")
                }
                Err(err) => {
                    debug!(key = %lease.job.key, cause = %err.chain(), "a failed fan-out could not be given back; its lease runs out instead")
                }
            }
        }
    }

    /// Delivers a claimed action to `audience` batch by batch and marks it done.
    async fn deliver_audience(
        &self,
        claim: &Claim,
        audience: Vec<(String, ReasonKind)>,
    ) -> StoreResult<()> {
        let action = &claim.action;
        let mut delivered = 0usize;
        let mut shared = None;
        let size = self.config.batch_size.max(1);
        let audience_len = audience.len();
        let batches = audience_len.div_ceil(size);
        let mut readers = audience.into_iter();
        // At least one batch: the last marks the fan-out done, in the same
        // store call as its writes (one commit instead of two).
        for n in 0..batches.max(1) {
            let batch = DeliveryBatch {
                lease: claim.lease.clone(),
                items: deliveries(action, readers.by_ref().take(size).collect()),
                last: n + 1 >= batches,
            };
            let mut results = self.store.deliver(self.clock.now(), &[batch]).await?;
            let written = results.pop().unwrap_or_else(|| Ok(Vec::new()))?;
            delivered += written.len();
            self.publish(FeedEventKind::Added, action, written, &mut shared);
        }
        self.outbox.released();
        debug!(action = %action.id, audience = audience_len, delivered, "fan-out done");
        Ok(())
    }

    /// Publishes one event per item, all sharing one copy of the action.
    fn publish(
        &self,
        kind: FeedEventKind,
        action: &Action,
        items: Vec<crate::model::FeedItem>,
        shared: &mut Option<Arc<Action>>,
    ) {
        if items.is_empty() {
            return;
        }
        if kind == FeedEventKind::Added {
            self.metrics.deliveries.inc_by(items.len() as u64);
        }
        let action = shared.get_or_insert_with(|| Arc::new(action.clone()));
        self.hub
            .publish_feed_items(kind, &action.tenant, Some(action), items);
    }
}

/// One feed item per reader, at the action's own time.
fn deliveries(action: &Action, audience: Vec<(String, ReasonKind)>) -> Vec<Delivery> {
    audience
        .into_iter()
        .map(|(owner, kind)| Delivery {
            owner,
            relevancy: action.conducted,
            reason: Reason::new(kind, &action.actor_id),
        })
        .collect()
}

/// Logs one job's failure and keeps the first for the caller.
fn note_outcome(
    done: StoreResult<()>,
    job: &str,
    id: &dyn std::fmt::Display,
    failure: &mut Option<crate::store::StoreError>,
) {
    match done {
        Ok(()) => {}
        Err(err) if err.kind == ErrorKind::LeaseLost => {
            warn!(%id, job, cause = %err.chain(), "lease lost; leaving the job to its new owner");
        }
        Err(err) => {
            error!(%id, job, cause = %err.chain(), "one job failed; it is tried again (a fan-out soon, others when their lease runs out)");
            failure.get_or_insert(err);
        }
    }
}
