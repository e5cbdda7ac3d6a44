//! The leases of a round: every job a worker claimed for a round is
//! renewed while the round runs, those waiting their turn as much as the
//! one being worked, in one store call per tick ([`JobStore::renew_all`]).
//! A claim takes up to the claim limit of a kind and works them one after
//! another or a few at once; on a slow database the round can outlast the
//! lease, and a job whose lease ran out while it waited would be taken
//! over by another worker and run twice, each run finding at its end that
//! its lease was lost.
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

/// Debug builds only: what each claimed job (a fan-out, a bump, a notice
/// job, a follow's backfill) waits for as it starts, so that tests can make
/// a round outlast its leases.
#[cfg(debug_assertions)]
pub type JobPause =
    Arc<dyn Fn(&Job) -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>;

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
