//! Jobs: one leased queue for every kind of background work.
//!
//! A job is `(kind, tenant, key)` and a payload its kind decodes. The worker
//! claims jobs of one kind under a lease, does them, and finishes them; the
//! store keeps them, orders them and enforces the lease. What a job *does*
//! lives above the port (the worker, the timeline layer), once for every
//! backend. Kinds: [`JobKind`].
//!
//! # Lease semantics (the contract `tests/it/store_jobs.rs` holds backends to)
//! - [`JobStore::enqueue`] is idempotent by kind, tenant and key: while a job
//!   of that key waits or is leased, queueing it again changes nothing (its
//!   payload and place included) and answers `false`. Once it is finished, the
//!   key may be queued again.
//! - A job is *due* when it waits (never claimed) or its lease ran out
//!   (`until <= now`). [`JobStore::claim`] leases up to `limit` due jobs of one
//!   kind to a worker until `now + lease_ms`, waiting jobs first in the order
//!   they were queued, then expired leases, the longest expired first. A
//!   claim of a job another worker held says so (`taken_over`): its work may
//!   be half done, which every handler must tolerate (delivery is idempotent:
//!   one item per reader and action).
//! - Two workers never hold one job: a claim is one atomic step per job.
//! - Only the holder may [`Jobs::renew`] (extend to `now + lease_ms`; many
//!   at once with [`JobStore::renew_all`]) or
//!   [`Jobs::finish`] (remove) a job. The holder is whoever claimed it
//!   last: a lease that ran out but was not taken over is still its worker's.
//!   Another worker's lease is `ErrorKind::LeaseLost`, and so is renewing a
//!   job that is gone (someone else finished it): the caller stops and
//!   writes nothing more. Finishing a job that is gone is not an error; the
//!   work is done either way.
//! - [`JobStore::defer`] gives a held job back to wait until a time: it is
//!   due then, held by nobody (the next claim is not `taken_over`), and
//!   nothing but [`JobStore::hasten`] ends that wait early, a restart
//!   included. It keeps the payload its lease carries (`lease.job.payload`,
//!   which the holder may have changed: a delivery records its attempts),
//!   in the same step.
//! - [`JobStore::hasten`] makes the jobs of a kind and tenant under a key
//!   prefix that wait for a later time due at once, each in one step with
//!   no moment when it is not queued (a crash leaves it waiting or due,
//!   never gone). Leases running at that time are left be, and so are jobs
//!   already due. It answers how many it brought forward.
//! - [`JobStore::backlog`] counts the jobs of a kind, waiting or leased, and
//!   says when the oldest was queued: for `/metrics`.
//! - [`Jobs::cancel`] removes a job whether it waits or is leased; its
//!   holder's next renewal or finish is `LeaseLost`, or nothing if it is gone.
//! - [`JobStore::queued`] lists the waiting and leased jobs of a kind and
//!   tenant under a key prefix, in key order, a page at a time if asked
//!   ([`QueuedRead`]: past a key, of jobs that failed or not, at most so
//!   many), reading no more than the page holds.
//! - [`JobStore::defer`] keeps the [`Job::failures`] its lease carries; an
//!   enqueue starts at 0.
//! - Kinds and tenants are independent: a claim of one kind never returns
//!   another's; the same key in two tenants is two jobs.
//! - The embedded store belongs to one process: at open, every lease is
//!   released (its holder's name kept, so the next claim says `taken_over`);
//!   a deferred job is held by nobody, and keeps its time.
//!
//! # Which work runs on it
//! All of it: fan-outs, bumps, cleanups, follows' backfills, notice jobs and webhook deliveries. What a job writes
//! to the feed goes through [`super::QueueStore`], which checks the lease in
//! the same step as the writes.
//!
//! # Jobs that must be atomic with a record
//! A fan-out is queued with its action, a bump with its comment: a record
//! without its job would never be worked on, and a job without its record
//! would be claimed for nothing. The backend writes the record and the job
//! in one step: on the embedded store, one `WriteBatch` (the way every write
//! there already is); on MongoDB, one multi-document transaction, which any
//! replica set supports, and Riverfeed already needs a replica set for its
//! change streams. The alternative, queueing the job first and letting its
//! handler tolerate a record that never appears, needs a grace period
//! before a job without its record may be dropped (the record may still
//! be on its way), which is a timing rule to get wrong; one step has none.
//!
//! A worker renews its lease before each batch of writes, and the writes
//! are idempotent (a delivery writes one item per reader and action, a
//! raise only ever raises): a worker that lost its lease stops at its next
//! batch, and what it wrote meanwhile a re-run by the new holder writes
//! again to the same effect.
//!
//! A cleanup's job is its record: the pending unfollow reads apply
//! ([`JobStore::queued`]) until the cleanup finishes it or a re-follow
//! cancels it. Its removals and its finish are one step where the backend
//! can (one `WriteBatch` under the job's lock on the embedded store), so a
//! cancel in between keeps every item.
//!
//! A job whose record went (a bump whose action was deleted) is claimed,
//! finds nothing to do, and is finished: deletions need not find the jobs
//! of what they delete.

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::metered::port;
use super::{ErrorKind, StoreError, StoreResult};
use crate::model::Millis;

/// What a job is for. Each kind is its own queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobKind {
    /// An action's fan-out: its delivery to every reader.
    FanOut,
    /// The bump a comment causes.
    Bump,
    /// An unfollow's or a group left's cleanup.
    Cleanup,
    /// A notice with no job of its own (a like, an assignment):
    /// [`super::NoticeJob`].
    Notice,
    /// One event's delivery to one webhook endpoint
    /// ([`crate::webhooks::outbox`]).
    Webhook,
    /// A new follow's backfill, queued before its edge is written and
    /// finished once the backfill is in: the worker does one a kill cut
    /// off ([`super::FollowJob`]).
    Follow,
}

impl JobKind {
    pub const ALL: [JobKind; 6] = [
        JobKind::FanOut,
        JobKind::Bump,
        JobKind::Cleanup,
        JobKind::Notice,
        JobKind::Webhook,
        JobKind::Follow,
    ];

    /// How the kind is stored (and named in `/metrics`).
    pub fn code(self) -> &'static str {
        match self {
            JobKind::FanOut => "fanout",
            JobKind::Bump => "bump",
            JobKind::Cleanup => "cleanup",
            JobKind::Notice => "notice",
            JobKind::Webhook => "webhook",
            JobKind::Follow => "follow",
        }
    }

    /// The kind stored as `code`; an unknown code is corrupt data.
    pub fn of_code(code: &str) -> StoreResult<JobKind> {
        JobKind::ALL
            .into_iter()
            .find(|k| k.code() == code)
            .ok_or_else(|| {
                StoreError::new(
                    ErrorKind::Internal,
                    format!("a stored job has an unknown kind {code:?}"),
                )
            })
    }
}

/// One unit of background work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub kind: JobKind,
    pub tenant: String,
    /// Unique among the waiting and leased jobs of its kind and tenant.
    pub key: String,
    /// What the worker needs to do it, as JSON: the kind decodes it.
    pub payload: String,
    /// When it was queued: the order waiting jobs are claimed in.
    pub queued: Millis,
    /// How many times its work failed so far, as its holder counts them
    /// (a delivery's attempts): 0 when queued, and what [`JobStore::defer`]
    /// gives back with its lease; [`QueuedRead::failed`] selects by it.
    pub failures: u32,
}

impl Job {
    /// A job carrying `payload`.
    pub fn new<T: Serialize>(
        kind: JobKind,
        tenant: &str,
        key: &str,
        payload: &T,
        queued: Millis,
    ) -> StoreResult<Job> {
        let payload = serde_json::to_string(payload)
            .map_err(|e| StoreError::internal(format!("cannot encode a {} job", kind.code()), e))?;
        Ok(Job {
            kind,
            tenant: tenant.to_owned(),
            key: key.to_owned(),
            payload,
            queued,
            failures: 0,
        })
    }

    /// Its payload, as its kind wrote it; corrupt data names the job.
    pub fn payload<T: DeserializeOwned>(&self) -> StoreResult<T> {
        serde_json::from_str(&self.payload).map_err(|e| {
            StoreError::internal(
                format!(
                    "corrupt payload of {} job {:?} of tenant {:?}",
                    self.kind.code(),
                    self.key,
                    self.tenant
                ),
                e,
            )
        })
    }
}

/// A job not finished yet, as [`JobStore::queued`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queued {
    pub job: Job,
    /// Its lease, while one is held (it may have run out).
    pub held: Option<Held>,
    /// The time it waits for, when it was deferred and nobody holds it;
    /// none when it is due since it was queued, or held.
    pub waits_until: Option<Millis>,
}

impl Queued {
    /// A stored job whose lease is `worker` until `until`, as listed.
    pub fn of(job: Job, worker: Option<&str>, until: Millis) -> Queued {
        let waits_until = (worker.is_none() && until != Millis::MIN).then_some(until);
        Queued {
            job,
            held: Held::of(worker, until),
            waits_until,
        }
    }
}

/// Which queued jobs of a kind and tenant [`JobStore::queued`] lists, in
/// key order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuedRead<'a> {
    /// Those whose key begins with this.
    pub under: &'a str,
    /// Only those whose key comes after this one.
    pub after: Option<&'a str>,
    /// Only those that failed at least once (`Some(true)`) or never did
    /// (`Some(false)`), by [`Job::failures`].
    pub failed: Option<bool>,
    /// At most this many: a page costs what it holds, whatever else is
    /// queued under the prefix.
    pub limit: usize,
}

impl<'a> QueuedRead<'a> {
    /// Every job whose key begins with `prefix`.
    pub fn under(prefix: &'a str) -> Self {
        QueuedRead {
            under: prefix,
            after: None,
            failed: None,
            limit: usize::MAX,
        }
    }

    /// Whether a job of `key` that failed `failures` times is one it asks
    /// for, its prefix aside.
    pub fn wants(&self, key: &str, failures: u32) -> bool {
        self.after.is_none_or(|a| key > a) && self.failed.is_none_or(|f| f == (failures > 0))
    }
}

/// A lease as the queue holds it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Held {
    pub worker: String,
    pub until: Millis,
}

impl Held {
    /// The lease a stored job holds: none while it waits (its end is
    /// `Millis::MIN`, whoever held it before).
    pub fn of(worker: Option<&str>, until: Millis) -> Option<Held> {
        match worker {
            Some(worker) if until != Millis::MIN => Some(Held {
                worker: worker.to_owned(),
                until,
            }),
            _ => None,
        }
    }
}

/// A job a worker holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub job: Job,
    pub worker: String,
    /// How long each claim or renewal holds it.
    pub lease_ms: Millis,
    /// Another worker held it before, and its lease ran out.
    pub taken_over: bool,
}

/// The jobs of one kind not finished yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobBacklog {
    /// Waiting or leased.
    pub jobs: u64,
    /// When the oldest of them was queued.
    pub oldest: Option<Millis>,
}

/// How a job ends, as [`JobStore::end`] ends it.
#[derive(Clone, Copy, Debug)]
pub enum JobEnd<'a> {
    /// Its holder finished it: it is removed. `LeaseLost` if another
    /// worker holds it; nothing if it is gone.
    Finished(&'a Lease),
    /// The work is no longer wanted (a re-follow ends the unfollow's
    /// cleanup): it is removed whatever its state, and its holder, if any,
    /// finds its lease lost.
    Cancelled {
        kind: JobKind,
        tenant: &'a str,
        key: &'a str,
    },
}

/// The ends of jobs by what they are, over [`JobStore::end`]. Every
/// [`JobStore`] has them.
#[async_trait]
pub trait Jobs: JobStore {
    /// Extends one held lease to `now + lease_ms`. `LeaseLost` if another
    /// worker holds the job or it is gone. See [`JobStore::renew_all`].
    async fn renew(&self, lease: &Lease, now: Millis) -> StoreResult<()> {
        let mut renewed = self.renew_all(std::slice::from_ref(lease), now).await?;
        renewed
            .pop()
            .unwrap_or_else(|| Err(lease_lost(&lease.job, None)))
    }

    /// Removes a held job: it is done. See [`JobEnd::Finished`].
    async fn finish(&self, lease: &Lease) -> StoreResult<()> {
        self.end(JobEnd::Finished(lease)).await.map(drop)
    }

    /// Removes a job whatever its state. Returns whether there was one.
    /// See [`JobEnd::Cancelled`].
    async fn cancel(&self, kind: JobKind, tenant: &str, key: &str) -> StoreResult<bool> {
        self.end(JobEnd::Cancelled { kind, tenant, key }).await
    }
}

impl<T: JobStore + ?Sized> Jobs for T {}

port! {
/// The job queue. See the module doc for the lease semantics.
pub trait JobStore: Send + Sync {
    /// Queues `job` unless one of its kind, tenant and key waits or is
    /// leased. Returns whether it was queued.
    async fn enqueue(&self, job: &Job) -> StoreResult<bool>;
    /// Leases up to `limit` due jobs of `kind` to `worker` until
    /// `now + lease_ms`: waiting ones in the order queued, then those whose
    /// lease ran out. Each job at most once, even one due again before the
    /// call ends (a scope change queues a fan-out anew): two leases of one
    /// job to one worker cannot be told apart.
    async fn claim(
        &self,
        kind: JobKind,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Lease>>;
    /// Extends each held lease of `leases` to `now + lease_ms`, in one step
    /// per tenant where the backend can: a worker renews every job it holds
    /// in a round at once. Answers each lease's outcome in their order:
    /// `LeaseLost` (nothing written for it) if another worker holds the
    /// job or it is gone; another error if it could not be renewed now (a
    /// transaction not ended yet wrote it), to be tried again.
    async fn renew_all(&self, leases: &[Lease], now: Millis)
        -> StoreResult<Vec<StoreResult<()>>>;
    /// Gives a held job back to wait until `at` with the payload and
    /// failures `lease.job` carries: nobody holds it, and it is due from `at` on,
    /// across a restart too (a retry's time). `LeaseLost` as for
    /// [`Jobs::renew`].
    async fn defer(&self, lease: &Lease, at: Millis) -> StoreResult<()>;
    /// Ends a job as `end` says. Returns whether there was one to end.
    async fn end(&self, end: JobEnd<'_>) -> StoreResult<bool>;
    /// How many jobs of `kind` wait or are leased, and the oldest's time.
    async fn backlog(&self, kind: JobKind) -> StoreResult<JobBacklog>;
    /// The jobs of `kind` and `tenant` that `read` asks for, waiting or
    /// leased, in key order: work not done yet that reads must apply (a
    /// reader's pending cleanups), or a page of it (a webhook's failed
    /// deliveries), read as far as the page goes. Cheap when there are
    /// none.
    async fn queued(&self, kind: JobKind, tenant: &str, read: QueuedRead<'_>)
        -> StoreResult<Vec<Queued>>;
    /// Makes the jobs of `kind` and `tenant` whose key begins with `prefix`
    /// and that wait for a time past `now` due at `now`; jobs held under a
    /// lease running at `now` are not touched. Returns how many were
    /// brought forward (an operator's "retry now").
    async fn hasten(&self, kind: JobKind, tenant: &str, prefix: &str, now: Millis)
        -> StoreResult<u64>;
}
}

/// The error a holder gets when `holder` (or nobody) has its job now.
pub fn lease_lost(job: &Job, holder: Option<&str>) -> StoreError {
    let what = format!(
        "{} job {:?} of tenant {:?}",
        job.kind.code(),
        job.key,
        job.tenant
    );
    StoreError::new(
        ErrorKind::LeaseLost,
        match holder {
            Some(worker) => format!("{what} was taken over by {worker}"),
            None => format!("{what} was finished by another worker"),
        },
    )
}
