//! The leases of a round: every job a worker claimed for a round is
//! renewed while the round runs, those waiting their turn as much as the
//! one being worked, in one store call per tick ([`JobStore::renew_all`]).
//! A claim takes up to the claim limit of a kind and works them one after
//! another or a few at once; on a slow database the round can outlast the
//! lease, and a job whose lease ran out while it waited would be taken
//! over by another worker and run twice, each run finding at its end that
//! its lease was lost.
//!
//! A claimed job that does not read is set aside, and its round goes on
//! ([`Worker::readable`]).
//!
//! [`JobStore::renew_all`]: crate::store::JobStore::renew_all

use super::*;
use crate::store::Job;

/// The jobs a worker holds in one round, renewed together by
/// [`Worker::keeping`] until each is let go of (it ended) or found lost.
pub(super) struct Holding {
    /// A plain mutex: held only to copy or change the list, never across
    /// an await.
    leases: std::sync::Mutex<Vec<Lease>>,
}

impl Holding {
    pub(super) fn new<'a>(leases: impl IntoIterator<Item = &'a Lease>) -> Self {
        Holding {
            leases: std::sync::Mutex::new(leases.into_iter().cloned().collect()),
        }
    }

    /// `job` ended (finished, given back, failed): it is renewed no more.
    pub(super) fn let_go(&self, job: &Job) {
        self.held()
            .retain(|l| !(l.job.tenant == job.tenant && l.job.key == job.key));
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Vec<Lease>> {
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Worker {
    /// Runs `work` (a round's jobs, or one long job) while renewing every
    /// lease `holding` holds every third of a lease, in one store call: a
    /// job waiting its turn keeps its lease as the one being worked does.
    /// A lease found lost (taken over, finished elsewhere) is renewed no
    /// more; the job's own last step says it was lost. A renewal that
    /// fails, as a whole or for one job (on MongoDB, a job another
    /// transaction wrote and has not ended), is tried again at the next
    /// tick. The renewals run beside the work, never instead of it.
    pub(super) async fn keeping<T>(
        &self,
        holding: &Holding,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let lease_ms = holding
            .held()
            .iter()
            .map(|l| l.lease_ms)
            .min()
            .unwrap_or(self.config.lease_ms);
        let every = Duration::from_millis((lease_ms / 3).max(1) as u64);
        let renewals = async {
            loop {
                tokio::time::sleep(every).await;
                let held = holding.held().clone();
                if held.is_empty() {
                    continue;
                }
                match self.store.renew_all(&held, self.clock.now()).await {
                    Ok(renewed) => {
                        for (lease, renewed) in held.iter().zip(renewed) {
                            match renewed {
                                Err(err) if err.kind == ErrorKind::LeaseLost => {
                                    debug!(key = %lease.job.key, cause = %err.chain(), "a held job's lease is lost; renewed no more");
                                    holding.let_go(&lease.job);
                                }
                                Err(err) => {
                                    debug!(key = %lease.job.key, cause = %err.chain(), "a held job's lease was not renewed; tried again at the next tick")
                                }
                                Ok(()) => {}
                            }
                        }
                    }
                    Err(err) => {
                        debug!(jobs = held.len(), cause = %err.chain(), "renewing a round's leases failed; tried again at the next tick")
                    }
                }
            }
        };
        tokio::select! {
            out = work => out,
            _ = renewals => unreachable!("the renewals never end"),
        }
    }
}

impl Worker {
    /// The claimed jobs of `kind` that `read` reads, each with what it
    /// read. One that does not read (a payload or key no version of
    /// Riverfeed wrote, or damaged) would fail every round that claims it:
    /// it is set aside instead, counted (`outcome="set_aside"`) and logged
    /// with its key, given back with its failure counted to wait for ever
    /// (held by nobody, never due again, still listed and exported, so
    /// nothing is lost and it can be mended), and the round goes on.
    pub(super) async fn readable<T>(
        &self,
        kind: &'static str,
        leases: Vec<Lease>,
        holding: &Holding,
        read: impl Fn(&Job) -> StoreResult<T>,
    ) -> Vec<(Lease, T)> {
        let mut readable = Vec::with_capacity(leases.len());
        for lease in leases {
            match read(&lease.job) {
                Ok(t) => readable.push((lease, t)),
                Err(cause) => {
                    holding.let_go(&lease.job);
                    self.set_aside(kind, lease, cause).await;
                }
            }
        }
        readable
    }

    /// Sets a claimed job that does not read aside: see
    /// [`Worker::readable`].
    async fn set_aside(
        &self,
        kind: &'static str,
        mut lease: Lease,
        cause: crate::store::StoreError,
    ) {
        let (tenant, key) = (lease.job.tenant.clone(), lease.job.key.clone());
        lease.job.failures = lease.job.failures.saturating_add(1);
        self.metrics.job_set_aside(kind);
        match self.store.defer(&lease, Millis::MAX).await {
            Ok(()) => {
                error!(job = kind, %tenant, %key, cause = %cause.chain(), "a job that does not read is set aside: it waits, held by nobody, until it is mended")
            }
            Err(err) => {
                error!(job = kind, %tenant, %key, cause = %cause.chain(), error = %err.chain(), "a job that does not read could not be set aside; its lease runs out instead")
            }
        }
    }
}

/// Debug builds only: what each claimed job (a fan-out, a bump, a notice
/// job, a follow's backfill) waits for as it starts, so that tests can make
/// a round outlast its leases.
#[cfg(debug_assertions)]
pub type JobPause = Arc<dyn Fn(&Job) -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>;

impl Worker {
    /// Debug builds only: each claimed job waits for `pause` as it starts.
    #[cfg(debug_assertions)]
    pub fn with_job_pause(mut self, pause: JobPause) -> Self {
        self.pause = Some(pause);
        self
    }

    /// A claimed job starts its work (in debug builds, after the pause a
    /// test set).
    pub(super) async fn starting(&self, job: &Job) {
        #[cfg(debug_assertions)]
        if let Some(pause) = &self.pause {
            pause(job).await;
        }
        #[cfg(not(debug_assertions))]
        let _ = job;
    }
}
