//! MongoDB: the job queue. `jobs` holds one document per waiting or leased
//! job, unique on `{kind, tenant, key}`; `{kind, until, queued, _id}` orders
//! the due ones, and `{kind, tenant, failures, key}` pages those that failed
//! (or never did). A claim reads the due jobs it wants, takes those still
//! due with one `updateMany` (two, when some were held before) and reads
//! back the ones it got: each document is updated atomically, so two
//! workers never take the same one, and an empty queue costs one `find` a
//! round. A claim of one job is one `findAndModify`. A worker's writes are
//! made [promptly](prompt); [`migrate`] brought earlier queues here.

use async_trait::async_trait;
use bson::{doc, Document};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use super::{db_err, is_duplicate, read_all, MongoStore};
use crate::model::{Millis, ObjectId};
use crate::store::jobs::{
    lease_lost, Job, JobBacklog, JobEnd, JobKind, JobStore, Lease, Queued, QueuedRead,
};
use crate::store::StoreResult;
use prompt::{conflicted, JobWrite};

mod migrate;
mod prompt;

/// `jobs` as stored.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct JobDoc {
    #[serde(rename = "_id")]
    id: ObjectId,
    kind: String,
    tenant: String,
    key: String,
    payload: String,
    queued: Millis,
    /// `Millis::MIN` while the job waits, the lease's end once claimed.
    until: Millis,
    /// Whoever claimed it last; absent until then, and while deferred.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) worker: Option<String>,
    /// [`Job::failures`]; absent from jobs stored before it was kept.
    #[serde(default)]
    failures: u32,
}

impl JobDoc {
    pub(super) fn new(job: &Job, until: Millis, worker: Option<String>) -> JobDoc {
        JobDoc {
            id: ObjectId::new(),
            kind: job.kind.code().to_owned(),
            tenant: job.tenant.clone(),
            key: job.key.clone(),
            payload: job.payload.clone(),
            queued: job.queued,
            until,
            worker,
            failures: job.failures,
        }
    }

    pub(super) fn into_job(self) -> StoreResult<Job> {
        Ok(Job {
            kind: JobKind::of_code(&self.kind)?,
            tenant: self.tenant,
            key: self.key,
            payload: self.payload,
            queued: self.queued,
            failures: self.failures,
        })
    }
}

/// The first string after every string that begins with `prefix`: the
/// prefix with its last character that can be raised raised by one (and
/// what follows it dropped). `None` when there is none (all `char::MAX`).
fn past_prefix(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let raised = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32);
        if let Some(raised) = raised {
            chars.push(raised);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The jobs of `kind` due at `now`: `until <= now`, asked as `until < now +
/// 1` (the same, in whole milliseconds): the test wire server misses the
/// equal key of an inclusive bound on the due index.
fn due_filter(kind: JobKind, now: Millis) -> Document {
    doc! { "kind": kind.code(), "until": { "$lt": now.saturating_add(1) } }
}

/// The order claims take due jobs in, the due index's.
fn due_order() -> Document {
    doc! { "until": 1, "queued": 1, "_id": 1 }
}

pub(super) fn job_filter(job: &Job) -> Document {
    doc! { "kind": job.kind.code(), "tenant": &job.tenant, "key": &job.key }
}

/// The filter and upsert that queue `job` again, due at once and held by
/// nobody: a run under way starts over (its worker finds its lease lost).
pub(super) fn requeue(job: &Job) -> (Document, Document) {
    let update = doc! {
        "$set": {
            "payload": &job.payload,
            "queued": job.queued,
            "until": Millis::MIN,
            "failures": job.failures,
        },
        "$unset": { "worker": "" },
    };
    (job_filter(job), update)
}

impl MongoStore {
    /// The worker holding `job` now, if it is stored: to explain a failed
    /// renewal or finish.
    pub(super) async fn holder(&self, job: &Job) -> StoreResult<Option<Option<String>>> {
        let found = self.jobs.find_one(job_filter(job)).await.map_err(db_err)?;
        Ok(found.map(|d| d.worker))
    }

    /// Whether `lease`'s worker still holds its job: `false` if it is gone
    /// (finished, or cancelled), `LeaseLost` if another worker holds it.
    pub(super) async fn holds(&self, lease: &Lease) -> StoreResult<bool> {
        let job = &lease.job;
        match self.holder(job).await? {
            None => Ok(false),
            Some(Some(worker)) if worker == lease.worker => Ok(true),
            Some(holder) => Err(lease_lost(job, holder.as_deref())),
        }
    }

    /// Every job of `kind` (of `tenant`, or of all), waiting or leased:
    /// for export.
    pub(super) async fn jobs_of(
        &self,
        kind: JobKind,
        tenant: Option<&str>,
    ) -> StoreResult<mongodb::Cursor<JobDoc>> {
        let mut filter = doc! { "kind": kind.code() };
        if let Some(tenant) = tenant {
            filter.insert("tenant", tenant);
        }
        self.jobs
            .find(filter)
            .sort(doc! { "tenant": 1, "key": 1 })
            .await
            .map_err(db_err)
    }
}

#[async_trait]
impl JobStore for MongoStore {
    async fn enqueue(&self, job: &Job) -> StoreResult<bool> {
        match self
            .jobs
            .insert_one(JobDoc::new(job, Millis::MIN, None))
            .await
        {
            Ok(_) => Ok(true),
            // A duplicate: the job of this key waits (or runs) already.
            Err(err) if is_duplicate(&err) => Ok(false),
            Err(err) => Err(db_err(err)),
        }
    }

    async fn claim(
        &self,
        kind: JobKind,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Lease>> {
        let until = now.saturating_add(lease_ms);
        // One job (a cleanup is claimed as it starts): one step.
        if limit == 1 {
            return Ok(self
                .claim_one(kind, worker, now, lease_ms)
                .await?
                .into_iter()
                .collect());
        }
        let mut leases = Vec::new();
        // Each round reads the due jobs it may take, then takes those still
        // due in two updates (those held before, those not), then reads back
        // the ones it took: three or four commands for a whole claim rather
        // than one per job (and on a server that scans the due jobs to sort
        // them, one scan per claim rather than per job). Each document is
        // updated atomically, so two workers never take one job; one that
        // loses some to another worker's claim looks again.
        while leases.len() < limit {
            let want = limit - leases.len();
            let due = self.due_jobs(kind, now, want).await?;
            if due.is_empty() {
                break;
            }
            let (held, waiting): (Vec<&JobDoc>, Vec<&JobDoc>) =
                due.iter().partition(|d| d.worker.is_some());
            let mut taken_over = Vec::new();
            for (group, was_held) in [(held, true), (waiting, false)] {
                if group.is_empty() {
                    continue;
                }
                let ids: Vec<ObjectId> = group.iter().map(|d| d.id).collect();
                let mut still_due = due_filter(kind, now);
                still_due.insert("_id", doc! { "$in": &ids });
                still_due.insert("worker", doc! { "$exists": was_held });
                let take = doc! { "$set": { "until": until, "worker": worker } };
                self.promptly(JobWrite::UpdateMany(still_due, take))
                    .await
                    .map_err(db_err)?;
                if was_held {
                    taken_over = ids;
                }
            }
            let ids: Vec<ObjectId> = due.iter().map(|d| d.id).collect();
            let filter = doc! { "_id": { "$in": &ids }, "worker": worker, "until": until };
            let mut taken: Vec<JobDoc> = read_all(self.jobs.find(filter)).await?;
            // In the order they were due.
            taken.sort_by_key(|d| ids.iter().position(|id| *id == d.id));
            let complete = taken.len() == due.len();
            let mut came_round = false;
            for doc in taken {
                let lease = Lease {
                    taken_over: taken_over.contains(&doc.id),
                    job: doc.into_job()?,
                    worker: worker.to_owned(),
                    lease_ms,
                };
                // Due again while this call runs (a scope change queued the
                // fan-out anew): leased once, the earlier entry replaced,
                // and the claim ends there, since it came round to what it
                // took.
                let same =
                    |l: &Lease| l.job.tenant == lease.job.tenant && l.job.key == lease.job.key;
                match leases.iter_mut().find(|l| same(l)) {
                    Some(earlier) => {
                        *earlier = lease;
                        came_round = true;
                    }
                    None => leases.push(lease),
                }
            }
            // Fewer due than wanted, all taken: nothing more is due.
            if came_round || (complete && due.len() < want) {
                break;
            }
        }
        Ok(leases)
    }

    async fn renew_all(&self, leases: &[Lease], now: Millis) -> StoreResult<Vec<StoreResult<()>>> {
        let mut renewed: Vec<StoreResult<()>> = leases.iter().map(|_| Ok(())).collect();
        // One `updateMany` per kind, tenant, worker and lease length (a
        // round's jobs share all four), over the unique index; when it
        // matches fewer than it names, one `find` says which were lost.
        let mut groups: Vec<(&Lease, Vec<usize>)> = Vec::new();
        for (n, lease) in leases.iter().enumerate() {
            let same = |first: &Lease| {
                first.job.kind == lease.job.kind
                    && first.job.tenant == lease.job.tenant
                    && first.worker == lease.worker
                    && first.lease_ms == lease.lease_ms
            };
            match groups.iter_mut().find(|(first, _)| same(first)) {
                Some((_, members)) => members.push(n),
                None => groups.push((lease, vec![n])),
            }
        }
        for (first, members) in groups {
            let keys: Vec<&str> = members
                .iter()
                .map(|&n| leases[n].job.key.as_str())
                .collect();
            let matched = match self.renew_keys(first, &keys, now).await {
                Ok(matched) => matched,
                // Another transaction wrote one of them: each is renewed
                // alone, so that only that one waits for the next try.
                Err(err) if conflicted(&err) && members.len() > 1 => {
                    let mut matched = 0;
                    for &n in &members {
                        let key = [leases[n].job.key.as_str()];
                        match self.renew_keys(first, &key, now).await {
                            Ok(one) => matched += one,
                            Err(err) if conflicted(&err) => {
                                matched += 1;
                                renewed[n] = Err(db_err(err));
                            }
                            Err(err) => return Err(db_err(err)),
                        }
                    }
                    matched
                }
                Err(err) if conflicted(&err) => {
                    renewed[members[0]] = Err(db_err(err));
                    continue;
                }
                Err(err) => return Err(db_err(err)),
            };
            if matched as usize == members.len() {
                continue;
            }
            // Ours now means ours when updated: only this worker claims as it.
            let of_group = doc! {
                "kind": first.job.kind.code(),
                "tenant": &first.job.tenant,
                "key": { "$in": &keys },
            };
            let found: Vec<JobDoc> = read_all(self.jobs.find(of_group)).await?;
            for n in members {
                let job = &leases[n].job;
                let holder = found.iter().find(|d| d.key == job.key).map(|d| &d.worker);
                if holder != Some(&Some(first.worker.clone())) {
                    renewed[n] = Err(lease_lost(job, holder.and_then(|w| w.as_deref())));
                }
            }
        }
        Ok(renewed)
    }

    async fn defer(&self, lease: &Lease, at: Millis) -> StoreResult<()> {
        let job = &lease.job;
        let mut filter = job_filter(job);
        filter.insert("worker", &lease.worker);
        // Held by nobody: the next claim is not a takeover.
        let defer = doc! {
            "$set": {
                "until": at.max(Millis::MIN + 1),
                "payload": &job.payload,
                "failures": job.failures,
            },
            "$unset": { "worker": "" },
        };
        // Outside a transaction: a deferral must land (it keeps a retry's
        // time), and waits for a transaction that holds its job.
        let deferred = self.jobs.update_one(filter, defer).await.map_err(db_err)?;
        if deferred.matched_count == 1 {
            return Ok(());
        }
        let holder = self.holder(job).await?.flatten();
        Err(lease_lost(job, holder.as_deref()))
    }

    async fn end(&self, end: JobEnd<'_>) -> StoreResult<bool> {
        match end {
            JobEnd::Finished(lease) => self.finish(lease).await.map(|()| true),
            JobEnd::Cancelled { kind, tenant, key } => {
                let deleted = self
                    .jobs
                    .delete_one(doc! { "kind": kind.code(), "tenant": tenant, "key": key })
                    .await
                    .map_err(db_err)?;
                Ok(deleted.deleted_count == 1)
            }
        }
    }

    async fn queued(
        &self,
        kind: JobKind,
        tenant: &str,
        read: QueuedRead<'_>,
    ) -> StoreResult<Vec<Queued>> {
        if read.limit == 0 {
            return Ok(Vec::new());
        }
        // A range of the unique `{kind, tenant, key}` index (or, by state,
        // of `{kind, tenant, failures, key}`): keys from the prefix up to
        // the first string past every key it begins, past `after`.
        let mut key = doc! { "$gte": read.under };
        if let Some(end) = past_prefix(read.under) {
            key.insert("$lt", end);
        }
        if let Some(after) = read.after {
            key.insert("$gt", after);
        }
        let mut filter = doc! { "kind": kind.code(), "tenant": tenant, "key": key };
        match read.failed {
            Some(true) => filter.insert("failures", doc! { "$gt": 0 }),
            // Jobs stored before failures were kept have none.
            Some(false) => filter.insert("failures", doc! { "$in": [0, null] }),
            None => None,
        };
        let mut find = self.jobs.find(filter).sort(doc! { "key": 1 });
        if let Ok(limit) = i64::try_from(read.limit) {
            find = find.limit(limit);
        }
        let mut cursor = find.await.map_err(db_err)?;
        let mut jobs = Vec::new();
        while let Some(found) = cursor.next().await {
            let found = found.map_err(db_err)?;
            let (worker, until) = (found.worker.clone(), found.until);
            jobs.push(Queued::of(found.into_job()?, worker.as_deref(), until));
        }
        Ok(jobs)
    }

    async fn hasten(
        &self,
        kind: JobKind,
        tenant: &str,
        prefix: &str,
        now: Millis,
    ) -> StoreResult<u64> {
        let mut key = doc! { "$gte": prefix };
        if let Some(end) = past_prefix(prefix) {
            key.insert("$lt", end);
        }
        // One update per document, each atomic: a deferred job (nobody
        // holds it) whose time is still to come is due now instead. A
        // claim racing it takes the job either way.
        let filter = doc! {
            "kind": kind.code(),
            "tenant": tenant,
            "key": key,
            "worker": { "$exists": false },
            "until": { "$gt": now },
        };
        let hastened = self
            .jobs
            .update_many(
                filter,
                doc! { "$set": { "until": now.max(Millis::MIN + 1) } },
            )
            .await
            .map_err(db_err)?;
        Ok(hastened.modified_count)
    }

    async fn backlog(&self, kind: JobKind) -> StoreResult<JobBacklog> {
        // One aggregate over the due index's `kind` prefix.
        let mut cursor = self
            .jobs
            .aggregate([
                doc! { "$match": { "kind": kind.code() } },
                doc! { "$group": { "_id": null, "n": { "$sum": 1 }, "oldest": { "$min": "$queued" } } },
            ])
            .await
            .map_err(db_err)?;
        let Some(found) = cursor.next().await else {
            return Ok(JobBacklog::default());
        };
        let found = found.map_err(db_err)?;
        let number = |field: &str| {
            found
                .get_i32(field)
                .map(i64::from)
                .or_else(|_| found.get_i64(field))
                .ok()
        };
        let jobs = number("n").unwrap_or(0).max(0) as u64;
        Ok(JobBacklog {
            jobs,
            oldest: number("oldest"),
        })
    }
}

impl MongoStore {
    /// Claims the first due job of `kind`, if any, in one `findAndModify`.
    async fn claim_one(
        &self,
        kind: JobKind,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
    ) -> StoreResult<Option<Lease>> {
        loop {
            let take = doc! { "$set": { "until": now.saturating_add(lease_ms), "worker": worker } };
            let claimed = self
                .promptly(JobWrite::TakeFirst(due_filter(kind, now), take))
                .await
                .map_err(db_err)?
                .before;
            let Some(before) = claimed else {
                return Ok(None);
            };
            if let Some(before) = self.readable(kind, before).await? {
                return Ok(Some(Lease {
                    taken_over: before.worker.is_some(),
                    job: before.into_job()?,
                    worker: worker.to_owned(),
                    lease_ms,
                }));
            }
        }
    }

    /// A job document as a claim reads it, or `None` if it does not read
    /// (written by hand, or damaged): that one is set aside (held by
    /// nobody, never due again, left as it is to be mended) and logged, so
    /// that it fails no claim and holds up no job behind it.
    async fn readable(&self, kind: JobKind, raw: Document) -> StoreResult<Option<JobDoc>> {
        let err = match bson::from_document::<JobDoc>(raw.clone()) {
            Ok(doc) => return Ok(Some(doc)),
            Err(err) => err,
        };
        let id = raw.get("_id").cloned().unwrap_or(bson::Bson::Null);
        tracing::error!(job = kind.code(), id = %id, cause = %err, "a job document that does not read is set aside: it waits, held by nobody, until it is mended");
        self.jobs
            .update_one(
                doc! { "_id": id },
                doc! { "$set": { "until": Millis::MAX }, "$unset": { "worker": "" } },
            )
            .await
            .map_err(db_err)?;
        Ok(None)
    }

    /// Up to `limit` jobs of `kind` due at `now`, in the order a claim
    /// takes them: waiting jobs in the order they were queued, then expired
    /// leases, the longest expired first (the `job_due` index's order).
    async fn due_jobs(&self, kind: JobKind, now: Millis, limit: usize) -> StoreResult<Vec<JobDoc>> {
        let raw = self.jobs.clone_with_type::<Document>();
        let find = raw
            .find(due_filter(kind, now))
            .sort(due_order())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX));
        let mut due = Vec::new();
        for raw in read_all(find).await? {
            due.extend(self.readable(kind, raw).await?);
        }
        Ok(due)
    }

    /// Removes a held job: see [`JobEnd::Finished`].
    pub(super) async fn finish(&self, lease: &Lease) -> StoreResult<()> {
        let job = &lease.job;
        let mut filter = job_filter(job);
        filter.insert("worker", &lease.worker);
        let deleted = self
            .promptly(JobWrite::DeleteOne(filter))
            .await
            .map_err(db_err)?;
        if deleted.matched == 1 {
            return Ok(());
        }
        match self.holder(job).await? {
            None => Ok(()),
            Some(holder) => Err(lease_lost(job, holder.as_deref())),
        }
    }
}
