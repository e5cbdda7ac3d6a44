//! The worker's reaction jobs: a comment's bump and a like's or an
//! assignment's notice job, each claimed many at once, their notices
//! written together, and their webhook events queued before they finish.

use futures_util::{stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::store::{NoticeSource, QueuedRead};

use super::leases::Holding;
use super::*;

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

/// What a claimed bump job does once read.
enum BumpNext {
    /// Its action's fan-out is queued or running: the bump waits for it
    /// (given back, due at once), so that every item the fan-out writes is
    /// there to raise, the actor's own included.
    Held,
    /// The action is gone or hidden: nothing to raise, nobody to tell.
    Nothing,
    Raise(Box<Bumped>),
}

impl Worker {
    /// Writes notices into their owners' groups and tells the owners'
    /// live subscriptions.
    pub(super) async fn notify(
        &self,
        tenant: &str,
        notices: Vec<notify::Addressed>,
    ) -> StoreResult<()> {
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
    pub(super) async fn notice_jobs(
        &self,
        shutdown: &CancellationToken,
        failure: &mut Option<crate::store::StoreError>,
    ) -> StoreResult<usize> {
        let leases = self.claim(JobKind::Notice).await?;
        let claimed = leases.len();
        if shutdown.is_cancelled() {
            return Ok(claimed);
        }
        let holding = Holding::new(&leases);
        let round = async {
            let jobs = self
                .readable("notice", leases, &holding, NoticeJob::of_job)
                .await;
            self.run_notice_jobs(jobs, &holding, failure).await
        };
        self.keeping(&holding, round).await;
        Ok(claimed)
    }

    /// Runs claimed notice jobs, read: see [`Worker::notice_jobs`].
    async fn run_notice_jobs(
        &self,
        jobs: Vec<(Lease, NoticeJob)>,
        holding: &Holding,
        failure: &mut Option<crate::store::StoreError>,
    ) {
        let (store, rules) = (self.store.as_ref(), &self.config.notice_rules);
        let owing = stream::iter(jobs)
            .map(|(lease, job)| async move {
                let owed = async {
                    self.starting(&lease.job).await;
                    let notices = notify::for_job(store, rules, &job).await?;
                    // Before the job is finished: see `webhooks`.
                    if let NoticeSource::Like { action_id, user } = &job.source {
                        let (tenant, id) = (&job.tenant, action_id.to_hex());
                        let like = || Event::reaction_added(tenant, &id, user, job.at);
                        self.outbox
                            .tell(tenant, |l| outbox::one(l, EventType::ReactionAdded, like))
                            .await?;
                    }
                    Ok(((), job.tenant, notices))
                }
                .await;
                (lease, owed)
            })
            .buffered(JOBS_AT_ONCE)
            .collect()
            .await;
        let written = self.notify_jobs("notice", owing, holding, failure).await;
        self.end_jobs(
            "notice",
            written,
            holding,
            failure,
            |lease, ()| async move { self.store.finish(&lease).await },
        )
        .await;
    }

    /// Runs the last step of claimed jobs of `kind`, `JOBS_AT_ONCE` at a
    /// time (so their synced writes share syncs), and counts and notes how
    /// each ended.
    async fn end_jobs<T, F, Fut>(
        &self,
        kind: &'static str,
        jobs: Vec<(Lease, T)>,
        holding: &Holding,
        failure: &mut Option<crate::store::StoreError>,
        last: F,
    ) where
        F: Fn(Lease, T) -> Fut,
        Fut: std::future::Future<Output = StoreResult<()>>,
    {
        let ended: Vec<(String, StoreResult<()>)> = stream::iter(jobs)
            .map(|(lease, t)| {
                let job = lease.job.clone();
                let done = last(lease, t);
                async move {
                    let done = done.await;
                    holding.let_go(&job);
                    (job.key, done)
                }
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
        holding: &Holding,
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
                    holding.let_go(&lease.job);
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
                        holding.let_go(&lease.job);
                        self.metrics.job(kind, false);
                        note_outcome(Err(err.clone()), kind, &lease.job.key, failure);
                    }
                }
            }
        }
        ready
    }

    /// Claims bump jobs and runs them together: each comment's action and
    /// whom it notifies are read for all at once, their notices written by
    /// one [`notify::deliver`] per tenant, then each action raised
    /// ([`Worker::raise`]), many at once. A bump whose action's fan-out is
    /// not done is given back to wait for it ([`BumpNext::Held`]). Returns
    /// how many were claimed, the held ones left out: a worker waiting for
    /// another's fan-out then sleeps until its next poll rather than claim
    /// them again at once.
    pub(super) async fn bumps(
        &self,
        shutdown: &CancellationToken,
        failure: &mut Option<crate::store::StoreError>,
    ) -> StoreResult<usize> {
        let leases = self.claim(JobKind::Bump).await?;
        let claimed = leases.len();
        if shutdown.is_cancelled() {
            return Ok(claimed);
        }
        let holding = Holding::new(&leases);
        let round = async {
            let jobs = self
                .readable("bump", leases, &holding, BumpJob::of_job)
                .await;
            self.run_bumps(jobs, &holding, shutdown, failure).await
        };
        let held = self.keeping(&holding, round).await;
        Ok(claimed - held)
    }

    /// Runs claimed bump jobs, read: see [`Worker::bumps`]. Returns how
    /// many were held.
    async fn run_bumps(
        &self,
        jobs: Vec<(Lease, BumpJob)>,
        holding: &Holding,
        shutdown: &CancellationToken,
        failure: &mut Option<crate::store::StoreError>,
    ) -> usize {
        let owing = stream::iter(jobs)
            .map(|(lease, job)| async move {
                let owed = self.read_bump(&lease, job).await;
                (lease, owed)
            })
            .buffered(JOBS_AT_ONCE)
            .collect::<Vec<_>>()
            .await;
        let held = owing
            .iter()
            .filter(|(_, owed)| matches!(owed, Ok((BumpNext::Held, ..))))
            .count();
        let noticed = self.notify_jobs("bump", owing, holding, failure).await;
        if shutdown.is_cancelled() {
            return held;
        }
        self.end_jobs(
            "bump",
            noticed,
            holding,
            failure,
            |lease, next| async move {
                match next {
                    BumpNext::Held => self.store.defer(&lease, self.clock.now()).await,
                    BumpNext::Nothing => self.store.finish(&lease).await,
                    BumpNext::Raise(bumped) => self.raise(&lease, *bumped).await,
                }
            },
        )
        .await;
        held
    }

    /// What the bump job `lease` holds needs: whether its action's fan-out
    /// is done (until it is, the items it writes are not there to raise),
    /// its action and comment, and whom the comment notifies.
    async fn read_bump(&self, lease: &Lease, job: BumpJob) -> Owed<BumpNext> {
        self.starting(&lease.job).await;
        let BumpJob { tenant, comment } = job;
        let fan_out = comment.action_id.to_hex();
        let running = self
            .store
            .queued(JobKind::FanOut, &tenant, QueuedRead::under(&fan_out))
            .await?;
        // A fan-out given back after failing every try a worker gave it
        // (set aside, or waiting to be tried again) runs nowhere, and may
        // never succeed: the bump does not wait for it.
        if running
            .iter()
            .any(|q| q.job.key == fan_out && !(q.job.failures > 0 && q.held.is_none()))
        {
            return Ok((BumpNext::Held, tenant, Vec::new()));
        }
        let action = self
            .store
            .get_actions(&tenant, &[comment.action_id])
            .await?
            .pop();
        let Some(action) = action.filter(|a| !a.hidden) else {
            return Ok((BumpNext::Nothing, tenant, Vec::new()));
        };
        let notices = notify::for_comment(
            self.store.as_ref(),
            &self.config.notice_rules,
            &action,
            &comment,
        )
        .await?;
        let bumped = Box::new(Bumped { action, comment });
        Ok((BumpNext::Raise(bumped), tenant, notices))
    }

    /// Runs the rest of the bump job `lease` holds, its notices written:
    /// the action raised for the readers the rules pick, in batches, the
    /// lease renewed before each; then finishes the job. Two raises of one
    /// action at once end where the higher leaves it.
    async fn raise(&self, lease: &Lease, bumped: Bumped) -> StoreResult<()> {
        let Bumped { action, comment } = bumped;
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
}
