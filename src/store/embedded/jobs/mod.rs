//! The job queue in the `jobs` family: each job under
//! `(JOB, kind, tenant, key)` with its lease, and a due index
//! `(DUE, kind, until, queued, tenant, key)` (empty values) that a claim
//! reads in order and stops at the first lease still running, and a state
//! index `(STATE, kind, tenant, failed, key)` (empty values) that pages of
//! the jobs that failed, or of those that never did, read in key order.
//! Every step decides under the lock of the job's key. The queues of earlier versions
//! are moved here at open (`earlier.rs`).

use async_trait::async_trait;
use rocksdb::WriteBatch;
use serde::{Deserialize, Serialize};

use super::families::JOBS;
use super::keys::{self, Key, Reader};
use super::{EmbeddedStore, Inner};
use std::sync::atomic::Ordering;

use crate::model::Millis;
use crate::store::jobs::{
    lease_lost, Job, JobBacklog, JobEnd, JobKind, JobStore, Lease, Queued, QueuedRead,
};
use crate::store::StoreResult;

mod earlier;
mod floors;
mod listed;

pub(super) use floors::Floors;

/// Tags that share the `jobs` family.
mod tag {
    pub const JOB: u8 = 0;
    pub const DUE: u8 = 1;
    pub const STATE: u8 = 2;
}

/// The `meta` key of the jobs layout's version: which earlier queues were
/// moved into the `jobs` family.
const JOBS_VERSION_KEY: &[u8] = b"jobs-version";
/// 1: notice jobs moved from the `queue` family; 2: bumps too; 3: unfollow
/// cleanups too; 4: fan-outs too; 5: every job in the state index; 6:
/// webhook jobs stored before jobs kept their failures counted from their
/// deliveries' attempts.
const JOBS_VERSION: u8 = 6;

fn kind_byte(kind: JobKind) -> u8 {
    match kind {
        JobKind::Notice => 0,
        JobKind::Cleanup => 1,
        JobKind::Bump => 2,
        JobKind::FanOut => 3,
        JobKind::Webhook => 4,
        JobKind::Follow => 5,
    }
}

/// Where a kind's counter of queued jobs is.
fn slot(kind: JobKind) -> usize {
    kind_byte(kind) as usize
}

fn kind_of(byte: u8) -> StoreResult<JobKind> {
    match byte {
        0 => Ok(JobKind::Notice),
        1 => Ok(JobKind::Cleanup),
        2 => Ok(JobKind::Bump),
        3 => Ok(JobKind::FanOut),
        4 => Ok(JobKind::Webhook),
        5 => Ok(JobKind::Follow),
        _ => Err(keys::corrupt("job kind")),
    }
}

fn job_key(kind: JobKind, tenant: &str, key: &str) -> Vec<u8> {
    Key::tag(tag::JOB)
        .byte(kind_byte(kind))
        .str(tenant)
        .last(key)
        .into_vec()
}

fn due_key(kind: JobKind, until: Millis, queued: Millis, tenant: &str, key: &str) -> Vec<u8> {
    Key::tag(tag::DUE)
        .byte(kind_byte(kind))
        .num(until)
        .num(queued)
        .str(tenant)
        .last(key)
        .into_vec()
}

fn state_key(kind: JobKind, tenant: &str, failures: u32, key: &str) -> Vec<u8> {
    Key::tag(tag::STATE)
        .byte(kind_byte(kind))
        .str(tenant)
        .byte(u8::from(failures > 0))
        .last(key)
        .into_vec()
}

/// The regions of a kind's due index: waiting jobs (`until` is
/// `Millis::MIN`), then leased ones by the lease's end.
const WAITING: usize = 0;
const LEASED: usize = 1;

/// A job as stored: its payload and lease (its kind, tenant and key are
/// its key's).
#[derive(Serialize, Deserialize)]
struct Stored {
    payload: String,
    queued: Millis,
    /// `Millis::MIN` while it waits, else the lease's end.
    until: Millis,
    /// Whoever claimed it last; none before the first claim and while it
    /// is deferred (its `until` then is its time).
    worker: Option<String>,
    /// [`Job::failures`]; absent from jobs stored before it was kept.
    #[serde(default)]
    failures: u32,
}

impl Stored {
    fn job(&self, kind: JobKind, tenant: &str, key: &str) -> Job {
        Job {
            kind,
            tenant: tenant.to_owned(),
            key: key.to_owned(),
            payload: self.payload.clone(),
            queued: self.queued,
            failures: self.failures,
        }
    }
}

impl Inner {
    fn stored_job(&self, key: &[u8]) -> StoreResult<Option<Stored>> {
        self.get(JOBS, key)?
            .map(|v| keys::decode_record(&v))
            .transpose()
    }

    /// Writes a job with its due entry into `batch`, over `old` (its record
    /// as stored, whose due entry goes).
    fn put_job(
        &self,
        batch: &mut WriteBatch,
        job: &Job,
        old: Option<&Stored>,
        stored: &Stored,
    ) -> StoreResult<()> {
        let (kind, t, k) = (job.kind, job.tenant.as_str(), job.key.as_str());
        if let Some(old) = old {
            batch.delete_cf(self.cf(JOBS), due_key(kind, old.until, old.queued, t, k));
        }
        let state = state_key(kind, t, stored.failures, k);
        let old_state = old.map(|old| state_key(kind, t, old.failures, k));
        if old_state.as_ref() != Some(&state) {
            if let Some(old_state) = old_state {
                batch.delete_cf(self.cf(JOBS), old_state);
            }
            batch.put_cf(self.cf(JOBS), state, []);
        }
        batch.put_cf(
            self.cf(JOBS),
            job_key(kind, t, k),
            keys::encode_record(stored)?,
        );
        let due = due_key(kind, stored.until, stored.queued, t, k);
        let region = if stored.until == Millis::MIN {
            WAITING
        } else {
            LEASED
        };
        Floors::note(slot(kind) * 2 + region, due.clone());
        batch.put_cf(self.cf(JOBS), due, []);
        Ok(())
    }

    /// Takes a job stored as `old`, with its index entries, out in `batch`.
    fn delete_job(&self, batch: &mut WriteBatch, kind: JobKind, t: &str, k: &str, old: &Stored) {
        batch.delete_cf(self.cf(JOBS), job_key(kind, t, k));
        batch.delete_cf(self.cf(JOBS), due_key(kind, old.until, old.queued, t, k));
        batch.delete_cf(self.cf(JOBS), state_key(kind, t, old.failures, k));
    }

    /// Queues `job` in `batch`, with the record it belongs to: the caller
    /// holds that record's lock, and the job's key is new (it is the
    /// record's).
    pub(super) fn queue_in(&self, batch: &mut WriteBatch, job: &Job) -> StoreResult<()> {
        let stored = Stored {
            payload: job.payload.clone(),
            queued: job.queued,
            until: Millis::MIN,
            worker: None,
            failures: job.failures,
        };
        self.put_job(batch, job, None, &stored)?;
        // Counted before it is written: `queued` may look in vain, never
        // miss one.
        self.counted(job.kind, 1);
        Ok(())
    }

    /// Queues `job` in `batch` afresh, waiting, over a job of its key that
    /// waits or is leased (whose holder then finds its lease lost): the
    /// work starts over (an action's fan-out under its new scope). The
    /// caller holds [`Inner::job_lock`].
    pub(super) fn requeue_in(&self, batch: &mut WriteBatch, job: &Job) -> StoreResult<()> {
        let old = self.stored_job(&job_key(job.kind, &job.tenant, &job.key))?;
        let stored = Stored {
            payload: job.payload.clone(),
            queued: job.queued,
            until: Millis::MIN,
            worker: None,
            failures: job.failures,
        };
        self.put_job(batch, job, old.as_ref(), &stored)?;
        if old.is_none() {
            self.counted(job.kind, 1);
        }
        Ok(())
    }

    /// Changes the count of `kind`'s queued jobs by `by`.
    fn counted(&self, kind: JobKind, by: isize) {
        let counter = &self.queued_jobs[slot(kind)];
        if by >= 0 {
            counter.fetch_add(by.unsigned_abs(), Ordering::SeqCst);
        } else {
            counter.fetch_sub(by.unsigned_abs(), Ordering::SeqCst);
        }
    }

    /// Counts the queued jobs of every kind, at open.
    pub(super) fn count_jobs(&self) -> StoreResult<()> {
        for kind in JobKind::ALL {
            let prefix = Key::tag(tag::JOB).byte(kind_byte(kind)).into_vec();
            let mut n = 0;
            self.scan_prefix(JOBS, &prefix, &prefix, usize::MAX, |_, _| {
                n += 1;
                Ok(())
            })?;
            self.queued_jobs[slot(kind)].store(n, Ordering::SeqCst);
        }
        Ok(())
    }

    /// The lock a job's steps take.
    pub(super) fn job_lock(job: &Job) -> Vec<u8> {
        job_key(job.kind, &job.tenant, &job.key)
    }

    /// Finishes the job `lease` holds in `batch`, with what its work
    /// writes: `Ok(false)` if it is gone (nothing is to be written),
    /// `LeaseLost` if another worker holds it. The caller holds
    /// [`Inner::job_lock`] and, once `batch` is committed, calls
    /// [`Inner::finished`].
    pub(super) fn finish_in(&self, batch: &mut WriteBatch, lease: &Lease) -> StoreResult<bool> {
        let job = &lease.job;
        let Some(old) = self.held(lease)? else {
            return Ok(false);
        };
        self.delete_job(batch, job.kind, &job.tenant, &job.key, &old);
        Ok(true)
    }

    /// Counts a job finished in a batch of the caller's.
    pub(super) fn finished(&self, job: &Job) {
        self.counted(job.kind, -1);
    }

    /// Whether a job of `kind` and `key` waits or is leased: for export.
    pub(super) fn job_queued(&self, kind: JobKind, tenant: &str, key: &str) -> StoreResult<bool> {
        self.exists(JOBS, &job_key(kind, tenant, key))
    }

    fn enqueue(&self, job: &Job) -> StoreResult<bool> {
        let key = job_key(job.kind, &job.tenant, &job.key);
        let _lock = self.lock(&[&key]);
        if self.exists(JOBS, &key)? {
            return Ok(false);
        }
        let stored = Stored {
            payload: job.payload.clone(),
            queued: job.queued,
            until: Millis::MIN,
            worker: None,
            failures: job.failures,
        };
        let mut batch = WriteBatch::default();
        self.put_job(&mut batch, job, None, &stored)?;
        self.counted(job.kind, 1);
        if let Err(err) = self.commit(batch) {
            self.counted(job.kind, -1);
            return Err(err);
        }
        Ok(true)
    }

    fn claim(
        &self,
        kind: JobKind,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Lease>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        // Read without a lock: an idle worker polls, and polling must not
        // queue behind writers. Each one is looked at again under its lock.
        // Only the due entries are read (the index is ordered by the lease's
        // end), at most `limit`, from each region's floor: a claim costs the
        // same however long the queue and however many jobs were done.
        let at = |until: Millis| {
            Key::tag(tag::DUE)
                .byte(kind_byte(kind))
                .num(until)
                .into_vec()
        };
        let leased_from = at(Millis::MIN.saturating_add(1));
        let mut due = Vec::new();
        let mut reads = Vec::with_capacity(2);
        let regions = [
            (WAITING, at(Millis::MIN), leased_from.clone()),
            (LEASED, leased_from, at(now.saturating_add(1))),
        ];
        for (region, begin, end) in regions {
            if due.len() < limit {
                reads.push(self.read_due(kind, region, begin..end, limit, &mut due)?);
            }
        }
        if due.is_empty() {
            for (read, to) in reads {
                read.raise(to);
            }
            return Ok(Vec::new());
        }
        let keys: Vec<Vec<u8>> = due.iter().map(|(t, k)| job_key(kind, t, k)).collect();
        let _lock = self.lock(&keys);
        let until = now.saturating_add(lease_ms);
        let mut batch = WriteBatch::default();
        let mut leases = Vec::with_capacity(due.len());
        for ((tenant, key), stored_at) in due.iter().zip(&keys) {
            let Some(old) = self.stored_job(stored_at)? else {
                continue;
            };
            if old.until > now {
                continue;
            }
            let job = old.job(kind, tenant, key);
            let stored = Stored {
                payload: old.payload.clone(),
                queued: old.queued,
                until,
                worker: Some(worker.to_owned()),
                failures: old.failures,
            };
            self.put_job(&mut batch, &job, Some(&old), &stored)?;
            leases.push(Lease {
                job,
                worker: worker.to_owned(),
                lease_ms,
                taken_over: old.worker.is_some(),
            });
        }
        // Not synced: a claim lost in a crash is claimed again.
        self.commit_unsynced(batch)?;
        for (read, to) in reads {
            read.raise(to);
        }
        Ok(leases)
    }

    /// Reads the due entries of one region of `kind`'s index, from its
    /// floor (within `bounds`) to its end, into `due` (up to `limit` in
    /// all). Returns the read, and how far it shows nothing else lives: to
    /// the first entry read, or, if the read came to its end, to the end
    /// (once what it found is claimed, moved to its lease's end, or found
    /// gone).
    fn read_due(
        &self,
        kind: JobKind,
        region: usize,
        bounds: std::ops::Range<Vec<u8>>,
        limit: usize,
        due: &mut Vec<(String, String)>,
    ) -> StoreResult<(floors::Reading<'_>, Vec<u8>)> {
        let prefix = Key::tag(tag::DUE).byte(kind_byte(kind)).into_vec();
        let std::ops::Range { start: begin, end } = bounds;
        let read = self.due_floors.read(slot(kind) * 2 + region, begin);
        let before = due.len();
        let mut first = None;
        self.scan(
            JOBS,
            &read.start,
            Some(end.clone()),
            limit - before,
            |k, _| {
                first.get_or_insert_with(|| k.to_vec());
                let mut r = Reader(&k[prefix.len()..]);
                r.num()?;
                r.num()?;
                let tenant = r.str()?.to_owned();
                due.push((tenant, r.last()?.to_owned()));
                Ok(())
            },
        )?;
        let read_to = match first {
            Some(first) if due.len() == limit => first,
            _ => end,
        };
        Ok((read, read_to))
    }

    /// The job `lease` names, as stored, if `lease`'s worker holds it;
    /// `LeaseLost` if another does, `None` if it is gone.
    fn held(&self, lease: &Lease) -> StoreResult<Option<Stored>> {
        let job = &lease.job;
        let Some(stored) = self.stored_job(&job_key(job.kind, &job.tenant, &job.key))? else {
            return Ok(None);
        };
        if stored.worker.as_deref() != Some(lease.worker.as_str()) {
            return Err(lease_lost(job, stored.worker.as_deref()));
        }
        Ok(Some(stored))
    }

    /// Renews the lease `lease` holds in `batch`, to `now + lease_ms`:
    /// `LeaseLost` if another worker holds the job or it is gone. The caller
    /// holds [`Inner::job_lock`].
    pub(super) fn renew_in(
        &self,
        batch: &mut WriteBatch,
        lease: &Lease,
        now: Millis,
    ) -> StoreResult<()> {
        let job = &lease.job;
        let Some(old) = self.held(lease)? else {
            return Err(lease_lost(job, None));
        };
        let stored = Stored {
            until: now.saturating_add(lease.lease_ms),
            worker: old.worker.clone(),
            payload: old.payload.clone(),
            queued: old.queued,
            failures: old.failures,
        };
        self.put_job(batch, job, Some(&old), &stored)
    }

    /// Renews every lease of `leases` it can in one batch, under their
    /// jobs' locks; a lease lost writes nothing.
    fn renew_all(&self, leases: &[Lease], now: Millis) -> StoreResult<Vec<StoreResult<()>>> {
        let locks: Vec<Vec<u8>> = leases.iter().map(|l| Inner::job_lock(&l.job)).collect();
        let _lock = self.lock(&locks);
        let mut batch = WriteBatch::default();
        let mut renewed = Vec::with_capacity(leases.len());
        for lease in leases {
            // A lease lost is found before anything is written for it.
            match self.renew_in(&mut batch, lease, now) {
                Err(err) if err.kind == crate::store::ErrorKind::LeaseLost => {
                    renewed.push(Err(err))
                }
                other => renewed.push(Ok(other?)),
            }
        }
        // Not synced: a lease lost in a crash is released at open anyway.
        self.commit_unsynced(batch)?;
        Ok(renewed)
    }

    fn defer(&self, lease: &Lease, at: Millis) -> StoreResult<()> {
        let _lock = self.lock(&[Inner::job_lock(&lease.job)]);
        let job = &lease.job;
        let Some(old) = self.held(lease)? else {
            return Err(lease_lost(job, None));
        };
        // Held by nobody, so that the release at open leaves its time be;
        // `Millis::MIN` is waiting, so the earliest time is one after.
        let stored = Stored {
            until: at.max(Millis::MIN + 1),
            worker: None,
            payload: job.payload.clone(),
            queued: old.queued,
            failures: job.failures,
        };
        let mut batch = WriteBatch::default();
        self.put_job(&mut batch, job, Some(&old), &stored)?;
        // Not synced, as a renewal: a process killed keeps it (the write is
        // in the log); one lost with the machine leaves the lease, which the
        // release at open ends: the job is tried early, never lost.
        self.commit_unsynced(batch)
    }

    fn finish(&self, lease: &Lease) -> StoreResult<()> {
        let job = &lease.job;
        let key = job_key(job.kind, &job.tenant, &job.key);
        let _lock = self.lock(&[&key]);
        let mut batch = WriteBatch::default();
        if !self.finish_in(&mut batch, lease)? {
            return Ok(());
        }
        self.commit(batch)?;
        self.finished(job);
        Ok(())
    }

    fn cancel(&self, kind: JobKind, tenant: &str, key: &str) -> StoreResult<bool> {
        let at = job_key(kind, tenant, key);
        let _lock = self.lock(&[&at]);
        let Some(old) = self.stored_job(&at)? else {
            return Ok(false);
        };
        let mut batch = WriteBatch::default();
        self.delete_job(&mut batch, kind, tenant, key, &old);
        self.commit(batch)?;
        self.counted(kind, -1);
        Ok(true)
    }

    fn backlog(&self, kind: JobKind) -> StoreResult<JobBacklog> {
        let prefix = Key::tag(tag::JOB).byte(kind_byte(kind)).into_vec();
        let mut backlog = JobBacklog::default();
        self.scan_prefix(JOBS, &prefix, &prefix, usize::MAX, |_, v| {
            let stored: Stored = keys::decode_record(v)?;
            backlog.jobs += 1;
            backlog.oldest = Some(
                backlog
                    .oldest
                    .map_or(stored.queued, |o| o.min(stored.queued)),
            );
            Ok(())
        })?;
        Ok(backlog)
    }

    /// Every job of `kind` (of `tenant`, or of all), waiting or leased:
    /// for export.
    pub(super) fn jobs_of(
        &self,
        kind: JobKind,
        tenant: Option<&str>,
        each: &mut dyn FnMut(Job) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let of_kind = Key::tag(tag::JOB).byte(kind_byte(kind));
        let kind_len = of_kind.0.len();
        let prefix = match tenant {
            Some(tenant) => of_kind.str(tenant),
            None => of_kind,
        }
        .into_vec();
        self.scan_prefix(JOBS, &prefix, &prefix, usize::MAX, |k, v| {
            let mut r = Reader(&k[kind_len..]);
            let tenant = r.str()?;
            let key = r.last()?;
            let stored: Stored = keys::decode_record(v)?;
            each(stored.job(kind, tenant, key))
        })
    }

    /// Ends every lease at once: called at open, when no worker can hold one,
    /// since the store belongs to this one process. The holder's name stays
    /// (the next claim says `taken_over`); a job deferred to a time keeps
    /// it. Returns how many were held.
    pub(super) fn release_jobs(&self) -> StoreResult<usize> {
        let prefix = [tag::JOB];
        let mut batch = WriteBatch::default();
        let mut released = 0;
        self.scan_prefix(JOBS, &prefix, &prefix, usize::MAX, |k, v| {
            let stored: Stored = keys::decode_record(v)?;
            // Waiting, or deferred to a time (held by nobody): no lease.
            if stored.until == Millis::MIN || stored.worker.is_none() {
                return Ok(());
            }
            let mut r = Reader(&k[1..]);
            let kind = kind_of(r.byte()?)?;
            let tenant = r.str()?;
            let key = r.last()?;
            let job = stored.job(kind, tenant, key);
            let waiting = Stored {
                until: Millis::MIN,
                worker: stored.worker.clone(),
                payload: stored.payload.clone(),
                queued: stored.queued,
                failures: stored.failures,
            };
            self.put_job(&mut batch, &job, Some(&stored), &waiting)?;
            released += 1;
            Ok(())
        })?;
        if released > 0 {
            self.commit(batch)?;
        }
        Ok(released)
    }
}

#[async_trait]
impl JobStore for EmbeddedStore {
    async fn enqueue(&self, job: &Job) -> StoreResult<bool> {
        let job = job.clone();
        self.blocking(move |db| db.enqueue(&job)).await
    }

    async fn claim(
        &self,
        kind: JobKind,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Lease>> {
        // A worker claims every kind each round, and most kinds have none
        // queued: answered here, without a trip to the blocking pool.
        if self.inner()?.queued_jobs[slot(kind)].load(Ordering::SeqCst) == 0 {
            return Ok(Vec::new());
        }
        let worker = worker.to_owned();
        self.blocking(move |db| db.claim(kind, &worker, now, lease_ms, limit))
            .await
    }

    async fn renew_all(&self, leases: &[Lease], now: Millis) -> StoreResult<Vec<StoreResult<()>>> {
        let leases = leases.to_vec();
        self.blocking(move |db| db.renew_all(&leases, now)).await
    }

    async fn defer(&self, lease: &Lease, at: Millis) -> StoreResult<()> {
        let lease = lease.clone();
        self.blocking(move |db| db.defer(&lease, at)).await
    }

    async fn end(&self, end: JobEnd<'_>) -> StoreResult<bool> {
        match end {
            JobEnd::Finished(lease) => {
                let lease = lease.clone();
                self.blocking(move |db| db.finish(&lease))
                    .await
                    .map(|()| true)
            }
            JobEnd::Cancelled { kind, tenant, key } => {
                let (tenant, key) = (tenant.to_owned(), key.to_owned());
                self.blocking(move |db| db.cancel(kind, &tenant, &key))
                    .await
            }
        }
    }

    async fn queued(
        &self,
        kind: JobKind,
        tenant: &str,
        read: QueuedRead<'_>,
    ) -> StoreResult<Vec<Queued>> {
        // Every feed page asks, and nearly always there are none: answered
        // here, without a trip to the blocking pool.
        if self.inner()?.queued_jobs[slot(kind)].load(Ordering::SeqCst) == 0 || read.limit == 0 {
            return Ok(Vec::new());
        }
        let tenant = tenant.to_owned();
        let (under, after) = (read.under.to_owned(), read.after.map(str::to_owned));
        let (failed, limit) = (read.failed, read.limit);
        self.blocking(move |db| {
            let read = QueuedRead {
                under: &under,
                after: after.as_deref(),
                failed,
                limit,
            };
            db.queued(kind, &tenant, &read)
        })
        .await
    }

    async fn backlog(&self, kind: JobKind) -> StoreResult<JobBacklog> {
        self.blocking(move |db| db.backlog(kind)).await
    }

    async fn hasten(
        &self,
        kind: JobKind,
        tenant: &str,
        prefix: &str,
        now: Millis,
    ) -> StoreResult<u64> {
        if self.inner()?.queued_jobs[slot(kind)].load(Ordering::SeqCst) == 0 {
            return Ok(0);
        }
        let (tenant, prefix) = (tenant.to_owned(), prefix.to_owned());
        self.blocking(move |db| db.hasten(kind, &tenant, &prefix, now))
            .await
    }
}
