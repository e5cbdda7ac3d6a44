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

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{stream, StreamExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, instrument, warn};

use crate::clock::Clock;
use crate::events::{FeedEventKind, Hub, NoticeEvent};
use crate::metrics::Metrics;
use crate::model::{Action, Bump, Comment, Millis, Position, Reason, ReasonKind};
use crate::notify::{self, NoticeRules};
use crate::relevancy::{self, BumpRules};
use crate::store::GroupFeeds;
use crate::store::{
    Backfill, BumpJob, Delivery, DeliveryBatch, Ended, ErrorKind, FanOutJob, JobKind, Jobs, Lease,
    NoticeJob, Removal, Store, StoreResult, Timelines, Unfollow,
};
use crate::timeline::{audience, follow, groups, Expiry, FeedModel};
use crate::webhooks::outbox::{self, Event, Outbox};
use crate::webhooks::EventType;

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
    /// Deliveries, takeovers and jobs are counted here.
    metrics: Arc<Metrics>,
    /// Where the events of the jobs it runs are queued for webhooks.
    outbox: Arc<Outbox>,
}

/// A fan-out this worker holds: its job's lease and the action.
#[derive(Clone, Debug)]
pub struct Claim {
    pub lease: Lease,
    pub action: Action,
}

/// Jobs of one kind (bumps, notice jobs) run at once, as many as one claim
/// takes by default. Their reads overlap, and their synced writes wait
/// together: the engine makes one sync of the writes waiting at once
/// (RocksDB's write groups; MongoDB's requests run side by side), so a
/// claimed batch costs a few syncs rather than a few per job.
const JOBS_AT_ONCE: usize = 64;

/// What a claimed job owes once read: what it does next, its tenant and
/// the notices it owes (or why it could not be read).
type Owed<T> = StoreResult<(T, String, Vec<notify::Addressed>)>;

/// A claimed job and what it owes.
type Owing<T> = (Lease, Owed<T>);

/// A bump whose action is there to raise.
struct Bumped {
    action: Action,
    comment: Comment,
}

/// Times a failed fan-out is tried again by the worker that holds it;
/// after that it waits for its lease to run out, and any worker takes it.
const RETRIES: u32 = 5;

/// How often the feed model's upkeep runs (idle rivers are looked for).
const SWEEP_EVERY_MS: Millis = 60_000;
/// How often expired actions are looked for at the latest (actions fanned
/// out by another process, or before a restart).
const EXPIRY_CHECK_MS: Millis = 60_000;

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
        // Each job claimed counts, one whose action is gone too.
        let mut claimed = claims.len() + leases.len();
        let takeovers = leases.iter().filter(|l| l.taken_over).count();
        claims.extend(self.actions_of(leases).await?);
        if takeovers > 0 {
            info!(takeovers, "took over fan-outs whose lease ran out");
            self.metrics.lease_takeovers.inc_by(takeovers as u64);
        }
        // One job failing must not hold up the others claimed with it: each is
        // tried, and the first failure is reported once all were.
        let mut failure = None;
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
            let audience = match self
                .keeping_lease(&claim, self.audience_of(&claim.action))
                .await
            {
                Ok(audience) => audience,
                Err(err) => {
                    self.fanned_out(&claim, Err(err), &mut tries, &mut failure);
                    continue;
                }
            };
            if audience.len() > batch {
                let done = self
                    .keeping_lease(&claim, self.deliver_audience(&claim, audience))
                    .await;
                self.fanned_out(&claim, done, &mut tries, &mut failure);
                continue;
            }
            if grouped + audience.len() > batch {
                self.deliver_group(std::mem::take(&mut group), &mut tries, &mut failure)
                    .await;
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
        self.deliver_group(group, &mut tries, &mut failure).await;
        if shutdown.is_cancelled() {
            return Ok(claimed);
        }
        // Bumps after deliveries: a comment on a fresh action then finds the
        // items it raises already written.
        claimed += self.bumps(shutdown, &mut failure).await?;
        claimed += self.notice_jobs(shutdown, &mut failure).await?;
        claimed += self.clean_unfollows(shutdown, &mut failure).await?;
        claimed += self.expire().await?;
        self.upkeep().await?;
        match failure {
            Some(err) => Err(err),
            None => Ok(claimed),
        }
    }

    /// Writes notices into their owners' groups and tells the owners'
    /// live subscriptions.
    async fn notify(&self, tenant: &str, notices: Vec<notify::Addressed>) -> StoreResult<()> {
        if notices.is_empty() {
            return Ok(());
        }
        let store = self.store.as_ref();
        let now = self.clock.now();
        let rules = &self.config.notice_rules;
        let delivered = notify::deliver(store, rules, tenant, notices, now).await?;
        // Before the job that owes them is finished: see `webhooks`.
        self.outbox
            .tell(tenant, |l| outbox::notice_events(l, tenant, &delivered))
            .await?;
        for done in delivered {
            if done.change == NoticeEvent::default() {
                continue;
            }
            self.metrics
                .notices_written
                .inc_by(done.change.added.len() as u64 + done.change.updated.len() as u64);
            notify::publish(&self.hub, tenant, &done.owner, done.change);
        }
        Ok(())
    }

    /// Claims notice jobs (likes, assignments) and runs them together:
    /// whom each notifies is read for all at once, their notices written by
    /// one [`notify::deliver`] per tenant, and the jobs finished at once.
    /// Returns how many were claimed.
    async fn notice_jobs(
        &self,
        shutdown: &CancellationToken,
        failure: &mut Option<crate::store::StoreError>,
    ) -> StoreResult<usize> {
        let leases = self.claim(JobKind::Notice).await?;
        let claimed = leases.len();
        if shutdown.is_cancelled() {
            return Ok(claimed);
        }
        let (store, rules) = (self.store.as_ref(), &self.config.notice_rules);
        let owing = stream::iter(leases)
            .map(|lease| async move {
                let owed = async {
                    let job = NoticeJob::of_job(&lease.job)?;
                    let notices = notify::for_job(store, rules, &job).await?;
                    Ok(((), job.tenant, notices))
                }
                .await;
                (lease, owed)
            })
            .buffered(JOBS_AT_ONCE)
            .collect()
            .await;
        let written = self.notify_jobs("notice", owing, failure).await;
        self.end_jobs("notice", written, failure, |lease, ()| async move {
            self.store.finish(&lease).await
        })
        .await;
        Ok(claimed)
    }

    /// Runs the last step of claimed jobs of `kind`, `JOBS_AT_ONCE` at a
    /// time (so their synced writes share syncs), and counts and notes how
    /// each ended.
    async fn end_jobs<T, F, Fut>(
        &self,
        kind: &'static str,
        jobs: Vec<(Lease, T)>,
        failure: &mut Option<crate::store::StoreError>,
        last: F,
    ) where
        F: Fn(Lease, T) -> Fut,
        Fut: std::future::Future<Output = StoreResult<()>>,
    {
        let ended: Vec<(String, StoreResult<()>)> = stream::iter(jobs)
            .map(|(lease, t)| {
                let key = lease.job.key.clone();
                let done = last(lease, t);
                async move { (key, done.await) }
            })
            .buffer_unordered(JOBS_AT_ONCE)
            .collect()
            .await;
        for (key, done) in ended {
            self.metrics.job(kind, done.is_ok());
            note_outcome(done, kind, &key, failure);
        }
    }

    /// Writes the notices of claimed jobs, read at once ([`Owing`]): one
    /// [`notify::deliver`] per tenant for all of them, so the writes of
    /// many jobs share their syncs and a group many notices go to is
    /// written once. Returns the jobs whose notices are written, each with
    /// what it does next; those that failed are counted and noted (run
    /// again once their lease runs out; a notice is written once however
    /// often its job runs).
    async fn notify_jobs<T>(
        &self,
        kind: &'static str,
        owing: Vec<Owing<T>>,
        failure: &mut Option<crate::store::StoreError>,
    ) -> Vec<(Lease, T)> {
        // Per tenant: its jobs, and all their notices.
        type Tenant<T> = (Vec<(Lease, T)>, Vec<notify::Addressed>);
        let mut by_tenant: HashMap<String, Tenant<T>> = HashMap::new();
        for (lease, owed) in owing {
            match owed {
                Ok((next, tenant, notices)) => {
                    let (jobs, all) = by_tenant.entry(tenant).or_default();
                    jobs.push((lease, next));
                    all.extend(notices);
                }
                Err(err) => {
                    self.metrics.job(kind, false);
                    note_outcome(Err(err), kind, &lease.job.key, failure);
                }
            }
        }
        let mut ready = Vec::new();
        for (tenant, (jobs, notices)) in by_tenant {
            match self.notify(&tenant, notices).await {
                Ok(()) => ready.extend(jobs),
                Err(err) => {
                    for (lease, _) in jobs {
                        self.metrics.job(kind, false);
                        note_outcome(Err(err.clone()), kind, &lease.job.key, failure);
                    }
                }
            }
        }
        ready
    }

    /// Claims unfollow cleanups and runs them: each takes the items that came
    /// by an ended edge (or, for a group left, the group items the reader may
    /// no longer read) out of the reader's feed, and a reader online gets
    /// `REMOVED` for each. Returns how many were claimed.
    async fn clean_unfollows(
        &self,
        shutdown: &CancellationToken,
        failure: &mut Option<crate::store::StoreError>,
    ) -> StoreResult<usize> {
        let leases = self.claim(JobKind::Cleanup).await?;
        let claimed = leases.len();
        for lease in leases {
            if shutdown.is_cancelled() {
                break;
            }
            let u = match Unfollow::of_job(&lease.job) {
                Ok(u) => u,
                Err(err) => {
                    error!(key = %lease.job.key, cause = %err.chain(), "a cleanup job is unreadable");
                    failure.get_or_insert(err);
                    continue;
                }
            };
            let u = &u;
            let store = self.store.as_ref();
            let cleaned = if u.kind.names_items() {
                let expiry = Expiry {
                    now: self.clock.now(),
                    item_ttl: self.config.item_ttl,
                };
                match groups::named_items(store, u, expiry).await {
                    Ok(ids) => store.clean(&lease, Some(&ids)).await,
                    Err(err) => Err(err),
                }
            } else {
                store.clean(&lease, None).await
            };
            self.metrics.job("cleanup", cleaned.is_ok());
            match cleaned {
                Ok(removed) => {
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
        Ok(claimed)
    }

    /// Claims up to the claim limit of `kind`'s due jobs for this worker.
    async fn claim(&self, kind: JobKind) -> StoreResult<Vec<Lease>> {
        let now = self.clock.now();
        let (id, config) = (&self.config.id, &self.config);
        self.store
            .claim(kind, id, now, config.lease_ms, config.claim_limit)
            .await
    }

    /// The actions of claimed fan-out jobs, read in one call per tenant. A
    /// job whose action is gone (deleted since) has nothing to do and is
    /// finished.
    async fn actions_of(&self, leases: Vec<Lease>) -> StoreResult<Vec<Claim>> {
        let mut by_tenant: HashMap<String, Vec<(Lease, crate::model::ObjectId)>> = HashMap::new();
        for lease in leases {
            let id = FanOutJob::action_id(&lease.job)?;
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
                    None => self.store.finish(&lease).await?,
                }
            }
        }
        // Oldest first, as claimed.
        claims.sort_by_key(|c| c.action.id);
        Ok(claims)
    }

    /// Delivers one claimed action to its whole audience and marks it done.
    pub async fn fan_out(&self, claim: &Claim) -> StoreResult<()> {
        let audience = self
            .keeping_lease(claim, self.audience_of(&claim.action))
            .await?;
        self.keeping_lease(claim, self.deliver_audience(claim, audience))
            .await
    }

    /// Runs `work` on a claimed fan-out, renewing the claim's lease every
    /// third of it meanwhile: reading a large audience, or writing a batch
    /// on a slow database, may take longer than the lease, and a lease
    /// that runs out mid-way hands the work to another worker, which would
    /// start over and lose it the same way. Ends with `LeaseLost` if the
    /// lease was lost anyway.
    async fn keeping_lease<T>(
        &self,
        claim: &Claim,
        work: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let every = Duration::from_millis((claim.lease.lease_ms / 3).max(1) as u64);
        tokio::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return out,
                _ = tokio::time::sleep(every) => {
                    self.store.renew(&claim.lease, self.clock.now()).await?;
                }
            }
        }
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
        tries: &mut HashMap<crate::model::ObjectId, u32>,
        failure: &mut Option<crate::store::StoreError>,
    ) {
        if claims.is_empty() {
            return;
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
            self.fanned_out(claim, done, tries, failure);
        }
    }

    /// Notes how a fan-out went: one that failed while still ours is kept
    /// to be tried again at the next round (up to `RETRIES` times).
    fn fanned_out(
        &self,
        claim: &Claim,
        done: StoreResult<()>,
        tries: &mut HashMap<crate::model::ObjectId, u32>,
        failure: &mut Option<crate::store::StoreError>,
    ) {
        let lost = matches!(&done, Err(err) if err.kind == ErrorKind::LeaseLost);
        if done.is_err() && !lost {
            let n = tries.get(&claim.action.id).copied().unwrap_or(0) + 1;
            if n <= RETRIES {
                tries.insert(claim.action.id, n);
                self.retry
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((claim.clone(), n));
            }
        }
        self.metrics.job("fanout", done.is_ok());
        note_outcome(done, "fan-out", &claim.action.id, failure);
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

    /// Claims bump jobs and runs them together: each comment's action and
    /// whom it notifies are read for all at once, their notices written by
    /// one [`notify::deliver`] per tenant, then each action raised
    /// ([`Worker::raise`]), many at once. Returns how many were claimed.
    async fn bumps(
        &self,
        shutdown: &CancellationToken,
        failure: &mut Option<crate::store::StoreError>,
    ) -> StoreResult<usize> {
        let leases = self.claim(JobKind::Bump).await?;
        let claimed = leases.len();
        if shutdown.is_cancelled() {
            return Ok(claimed);
        }
        let owing = stream::iter(leases)
            .map(|lease| async move {
                let owed = self.read_bump(&lease).await;
                (lease, owed)
            })
            .buffered(JOBS_AT_ONCE)
            .collect()
            .await;
        let noticed = self.notify_jobs("bump", owing, failure).await;
        if shutdown.is_cancelled() {
            return Ok(claimed);
        }
        self.end_jobs("bump", noticed, failure, |lease, bumped| async move {
            self.raise(&lease, bumped).await
        })
        .await;
        Ok(claimed)
    }

    /// What the bump job `lease` holds needs: its action and comment (none
    /// if the action is gone or hidden: nothing to raise, nobody to tell),
    /// and whom the comment notifies.
    async fn read_bump(&self, lease: &Lease) -> Owed<Option<Bumped>> {
        let BumpJob { tenant, comment } = BumpJob::of_job(&lease.job)?;
        let action = self
            .store
            .get_actions(&tenant, &[comment.action_id])
            .await?
            .pop();
        let Some(action) = action.filter(|a| !a.hidden) else {
            return Ok((None, tenant, Vec::new()));
        };
        let notices = notify::for_comment(
            self.store.as_ref(),
            &self.config.notice_rules,
            &action,
            &comment,
        )
        .await?;
        Ok((Some(Bumped { action, comment }), tenant, notices))
    }

    /// Runs the rest of the bump job `lease` holds, its notices written:
    /// the action raised for the readers the rules pick, in batches, the
    /// lease renewed before each; then finishes the job. Two raises of one
    /// action at once end where the higher leaves it.
    async fn raise(&self, lease: &Lease, bumped: Option<Bumped>) -> StoreResult<()> {
        let Some(Bumped { action, comment }) = bumped else {
            return self.store.finish(lease).await;
        };
        let tenant = action.tenant.clone();
        self.outbox
            .tell(&tenant, |l| {
                let wanted = l.wants(EventType::CommentAdded);
                let event = || Event::comment_added(&tenant, &action, &comment);
                wanted.then(event).into_iter().collect()
            })
            .await?;
        let rules = &self.config.bump_rules;
        let targets = relevancy::targets(self.store.as_ref(), rules, &action, &comment).await?;
        if !self.config.model.pushes_all() {
            self.place_pulled(&tenant, &action, &targets).await?;
        }
        let raises: Vec<Delivery> = targets
            .iter()
            .filter_map(|(owner, rule)| {
                let boost = rules.boost(*rule)?;
                Some(Delivery {
                    owner: owner.clone(),
                    relevancy: comment.created.saturating_add(boost),
                    reason: Reason {
                        kind: ReasonKind::Bumped,
                        actor_id: action.actor_id.clone(),
                        bump: Some(Bump {
                            rule: *rule,
                            by: comment.author_id.clone(),
                            at: comment.created,
                        }),
                    },
                })
            })
            .collect();
        let mut raised = 0usize;
        let mut shared = None;
        for chunk in raises.chunks(self.config.batch_size.max(1)) {
            let now = self.clock.now();
            // Still ours? Another worker that took it over raises the same.
            self.store.renew(lease, now).await?;
            let items = self.store.raise(&tenant, action.id, now, chunk).await?;
            raised += items.len();
            self.publish(FeedEventKind::Bumped, &action, items, &mut shared);
        }
        self.store.finish(lease).await?;
        debug!(action = %action.id, comment = %comment.id, targets = targets.len(), raised, "bump done");
        Ok(())
    }

    /// Puts the action into the timelines of the targets who pull it (not
    /// materialised there), so the bump raises it for them as for everyone.
    async fn place_pulled(
        &self,
        tenant: &str,
        action: &Action,
        targets: &[(String, crate::model::BumpRule)],
    ) -> StoreResult<()> {
        let owners: Vec<String> = targets.iter().map(|(o, _)| o.clone()).collect();
        let store = self.store.as_ref();
        let now = self.clock.now();
        for (owner, kind) in audience::pulled_readers(store, action, &owners, true).await? {
            let item = Backfill {
                action_id: action.id,
                relevancy: action.conducted,
                reason: Reason::new(kind, &action.actor_id),
                changed: now,
            };
            store.backfill(tenant, &owner, &[item]).await?;
        }
        Ok(())
    }

    /// The model's upkeep (rivers: dropping idle ones), at most once a
    /// minute.
    async fn upkeep(&self) -> StoreResult<()> {
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
    async fn expire(&self) -> StoreResult<usize> {
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
