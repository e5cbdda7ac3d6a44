//! Queues of earlier versions, moved into the `jobs` family at open, once,
//! leases in flight included: notice jobs, bumps, unfollow cleanups and
//! fan-outs from the `queue` family; and jobs stored before the state
//! index, indexed. The version reached is recorded under `meta`.

use rocksdb::WriteBatch;
use serde::Deserialize;

use super::super::families::{JOBS, META, QUEUE, REACTIONS};
use super::super::keys::{self, queue, Reader};
use super::super::Inner;
use super::{Stored, JOBS_VERSION, JOBS_VERSION_KEY};
use crate::model::{Comment, Millis, ObjectId};
use crate::store::codes::ENDED;
use crate::store::{
    BumpJob, FanOutJob, Job, JobKind, NoticeJob, StoreResult, Unfollow, WebhookJob,
};

impl Stored {
    /// `job` stored under the lease an earlier queue held it with: waiting
    /// while that was unclaimed (`until` 0, no worker).
    fn leased_as(job: &Job, lease: keys::Lease) -> Stored {
        Stored {
            payload: job.payload.clone(),
            queued: job.queued,
            until: if lease.until > 0 {
                lease.until
            } else {
                Millis::MIN
            },
            worker: Some(lease.worker).filter(|w| !w.is_empty()),
            failures: 0,
        }
    }
}

impl Inner {
    /// Moves the queues earlier versions kept in the `queue` family into
    /// `jobs`, once, leases in flight included; the version reached is
    /// recorded under `meta` in the same batch.
    pub(in crate::store::embedded) fn migrate_jobs(&self) -> StoreResult<()> {
        let version = self.get(META, JOBS_VERSION_KEY)?;
        let at = match version.as_deref() {
            None => 0,
            Some([v]) => *v,
            Some(_) => return Err(keys::corrupt("jobs version")),
        };
        if at >= JOBS_VERSION {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        let mut moved = 0usize;
        if at < 1 {
            moved += self.move_notice_jobs(&mut batch)?;
        }
        if at < 2 {
            moved += self.move_bumps(&mut batch)?;
        }
        if at < 3 {
            moved += self.move_cleanups(&mut batch)?;
        }
        if at < 4 {
            moved += self.move_fan_outs(&mut batch)?;
        }
        if at < 5 {
            // What the moves above put in the batch is indexed there.
            self.index_job_states(&mut batch)?;
        }
        if at < 6 {
            // After the index above: what this corrects there wins.
            self.count_webhook_failures(&mut batch)?;
        }
        batch.put_cf(self.cf(META), JOBS_VERSION_KEY, [JOBS_VERSION]);
        self.commit(batch)?;
        if moved > 0 {
            tracing::info!(moved, "queued jobs moved to the jobs family");
        }
        Ok(())
    }

    /// Puts every stored job in the state index (none had failures then).
    fn index_job_states(&self, batch: &mut WriteBatch) -> StoreResult<()> {
        let prefix = [super::tag::JOB];
        self.scan_prefix(JOBS, &prefix, &prefix, usize::MAX, |k, _| {
            let mut r = Reader(&k[1..]);
            let kind = super::kind_of(r.byte()?)?;
            let tenant = r.str()?;
            let key = r.last()?;
            batch.put_cf(self.cf(JOBS), super::state_key(kind, tenant, 0, key), []);
            Ok(())
        })
    }

    /// Webhook jobs stored before jobs kept their failures: each whose
    /// delivery carries failed attempts counts them, and is indexed as
    /// failed (the deliveries view pages failed ones by that index).
    fn count_webhook_failures(&self, batch: &mut WriteBatch) -> StoreResult<()> {
        let kind = JobKind::Webhook;
        let prefix = [super::tag::JOB, super::kind_byte(kind)];
        let mut counted = 0usize;
        self.scan_prefix(JOBS, &prefix, &prefix, usize::MAX, |k, v| {
            let old: Stored = keys::decode_record(v)?;
            if old.failures > 0 {
                return Ok(());
            }
            let mut r = Reader(&k[2..]);
            let tenant = r.str()?;
            let key = r.last()?;
            let job = old.job(kind, tenant, key);
            let failures = WebhookJob::carried_failures(&job);
            if failures == 0 {
                return Ok(());
            }
            let stored = Stored {
                payload: old.payload.clone(),
                queued: old.queued,
                until: old.until,
                worker: old.worker.clone(),
                failures,
            };
            counted += 1;
            self.put_job(batch, &job, Some(&old), &stored)
        })?;
        if counted > 0 {
            tracing::info!(counted, "failed webhook deliveries counted as failed");
        }
        Ok(())
    }

    /// Notice jobs as the `queue` family held them:
    /// `(NOTICE_JOB, tenant, source key)` → the job and its lease.
    fn move_notice_jobs(&self, batch: &mut WriteBatch) -> StoreResult<usize> {
        #[derive(Deserialize)]
        struct Earlier {
            job: NoticeJob,
            until: Millis,
            worker: Option<String>,
        }
        let prefix = [queue::NOTICE_JOB];
        let mut moved = 0;
        self.scan_prefix(QUEUE, &prefix, &prefix, usize::MAX, |k, v| {
            let earlier: Earlier = keys::decode_record(v)?;
            let job = earlier.job.to_job()?;
            let stored = Stored {
                payload: job.payload.clone(),
                queued: job.queued,
                until: earlier.until,
                worker: earlier.worker,
                failures: 0,
            };
            self.put_job(batch, &job, None, &stored)?;
            batch.delete_cf(self.cf(QUEUE), k);
            moved += 1;
            Ok(())
        })?;
        Ok(moved)
    }

    /// Unfollow cleanups as the `queue` family held them:
    /// `(UNFOLLOW, tenant, reader, kind code, actor)` → the lease.
    fn move_cleanups(&self, batch: &mut WriteBatch) -> StoreResult<usize> {
        let prefix = [queue::UNFOLLOW];
        let mut moved = 0;
        self.scan_prefix(QUEUE, &prefix, &prefix, usize::MAX, |k, v| {
            batch.delete_cf(self.cf(QUEUE), k);
            let mut r = Reader(&k[1..]);
            let tenant = r.str()?.to_owned();
            let reader = r.str()?.to_owned();
            let code = r.byte()?;
            let actor = r.last()?.to_owned();
            let kind = ENDED.read_byte(
                code,
                format_args!("queue/unfollow {tenant}/{reader}/{actor}"),
            )?;
            let unfollow = Unfollow {
                tenant,
                reader,
                actor,
                kind,
            };
            let lease = keys::Lease::decode(v)?;
            let job = unfollow.to_job(0)?;
            self.put_job(batch, &job, None, &Stored::leased_as(&job, lease))?;
            moved += 1;
            Ok(())
        })?;
        Ok(moved)
    }

    /// Fan-outs as the `queue` family held them: `(FAN_OUT, action,
    /// tenant)` → the lease.
    fn move_fan_outs(&self, batch: &mut WriteBatch) -> StoreResult<usize> {
        let prefix = [queue::FAN_OUT];
        let mut moved = 0;
        self.scan_prefix(QUEUE, &prefix, &prefix, usize::MAX, |k, v| {
            batch.delete_cf(self.cf(QUEUE), k);
            let mut r = Reader(&k[1..]);
            let id = ObjectId::from_bytes(r.oid()?);
            let job = FanOutJob::of(r.last()?, id)?;
            let lease = keys::Lease::decode(v)?;
            self.put_job(batch, &job, None, &Stored::leased_as(&job, lease))?;
            moved += 1;
            Ok(())
        })?;
        Ok(moved)
    }

    /// Bumps as the `queue` family held them: `(BUMP, comment, tenant)` →
    /// the lease (its action inside); the comment itself is read from
    /// `reactions`. A bump whose comment is gone had nothing left to do.
    fn move_bumps(&self, batch: &mut WriteBatch) -> StoreResult<usize> {
        let prefix = [queue::BUMP];
        let mut moved = 0;
        self.scan_prefix(QUEUE, &prefix, &prefix, usize::MAX, |k, v| {
            batch.delete_cf(self.cf(QUEUE), k);
            let mut r = Reader(&k[1..]);
            let comment = r.oid()?;
            let tenant = r.last()?;
            let lease = keys::Lease::decode(v)?;
            let Some(action) = lease.action else {
                return Ok(());
            };
            let Some(record) = self.get(
                REACTIONS,
                &crate::store::embedded::actions::comment_key(tenant, action, comment),
            )?
            else {
                return Ok(());
            };
            let comment: Comment = keys::decode_record(&record)?;
            let job = BumpJob {
                tenant: tenant.to_owned(),
                comment,
            }
            .to_job()?;
            self.put_job(batch, &job, None, &Stored::leased_as(&job, lease))?;
            moved += 1;
            Ok(())
        })?;
        Ok(moved)
    }
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::*;
    use crate::store::embedded::keys::Key;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::{JobKind, JobStore, NoticeSource, QueuedRead, StoreError};

    /// That nothing is left under the earlier queue's `tag`, and that
    /// opening the store again moves nothing twice: `jobs` of `kind` wait.
    async fn moved_once(
        store: EmbeddedStore,
        dir: &std::path::Path,
        tag: u8,
        kind: JobKind,
        jobs: u64,
    ) -> Result<(), StoreError> {
        let left = store.inner().unwrap().count_under(QUEUE, &[tag])?;
        assert_eq!(left, 0, "the earlier entries are gone");
        drop(store);
        let store = EmbeddedStore::open(dir)?;
        assert_eq!(store.backlog(kind).await?.jobs, jobs, "moved once");
        Ok(())
    }

    /// A data directory written before the `jobs` family, with a notice job
    /// waiting and one leased, opens with both pending, the lease released
    /// with its holder named; the move is recorded and not made twice.
    #[tokio::test]
    async fn earlier_notice_jobs_are_moved_once() -> Result<(), StoreError> {
        #[derive(Serialize)]
        struct Earlier<'a> {
            job: &'a NoticeJob,
            until: Millis,
            worker: Option<&'a str>,
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let job = |user: &str, at| NoticeJob {
            tenant: "acme".into(),
            source: NoticeSource::Assigned {
                ref_id: "mary".into(),
                user: user.into(),
                by: "ann".into(),
            },
            at,
        };
        let (waiting, held) = (job("john", 10), job("rita", 20));
        {
            let store = EmbeddedStore::open(dir.path())?;
            let db = &store.inner().unwrap();
            let mut batch = WriteBatch::default();
            for (job, until, worker) in [(&waiting, Millis::MIN, None), (&held, 5_000, Some("w1"))]
            {
                let key = Key::tag(queue::NOTICE_JOB)
                    .str(&job.tenant)
                    .last(&job.source.key())
                    .into_vec();
                let earlier = Earlier { job, until, worker };
                batch.put_cf(db.cf(QUEUE), key, keys::encode_record(&earlier)?);
            }
            // As the earlier version left it: no jobs version noted.
            batch.delete_cf(db.cf(META), JOBS_VERSION_KEY);
            db.commit(batch)?;
        }
        let store = EmbeddedStore::open(dir.path())?;
        let leases = store.claim(JobKind::Notice, "w2", 0, 1_000, 10).await?;
        let got: Vec<(NoticeJob, bool)> = leases
            .iter()
            .map(|l| Ok((NoticeJob::of_job(&l.job)?, l.taken_over)))
            .collect::<StoreResult<_>>()?;
        assert_eq!(got, vec![(waiting, false), (held, true)]);
        moved_once(store, dir.path(), queue::NOTICE_JOB, JobKind::Notice, 2).await?;
        Ok(())
    }

    /// A data directory of the release before bumps were jobs (notice jobs
    /// moved already), with a bump waiting, one leased and one whose
    /// comment is gone, opens with the first two queued as jobs carrying
    /// their comments, the held one's holder named; the move is recorded.
    #[tokio::test]
    async fn earlier_bumps_are_moved_once() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let action = ObjectId::new();
        let comment = |text: &str, created| Comment {
            id: ObjectId::new(),
            action_id: action,
            author_id: "rita".into(),
            text: text.into(),
            created,
        };
        let (waiting, held, gone) = (comment("one", 10), comment("two", 20), comment("x", 30));
        {
            let store = EmbeddedStore::open(dir.path())?;
            let db = &store.inner().unwrap();
            let mut batch = WriteBatch::default();
            for (c, until, worker) in [(&waiting, 0, ""), (&held, 5_000, "w1"), (&gone, 0, "")] {
                let key = Key::tag(queue::BUMP)
                    .oid(c.id.bytes())
                    .last("acme")
                    .into_vec();
                let lease = keys::Lease {
                    until,
                    worker: worker.into(),
                    action: Some(action.bytes()),
                };
                batch.put_cf(db.cf(QUEUE), key, lease.encode());
                if c.text != "x" {
                    batch.put_cf(
                        db.cf(REACTIONS),
                        crate::store::embedded::actions::comment_key(
                            "acme",
                            action.bytes(),
                            c.id.bytes(),
                        ),
                        keys::encode_record(c)?,
                    );
                }
            }
            // As that release left it: its notice jobs moved, nothing more.
            batch.put_cf(db.cf(META), JOBS_VERSION_KEY, [1]);
            db.commit(batch)?;
        }
        let store = EmbeddedStore::open(dir.path())?;
        let leases = store.claim(JobKind::Bump, "w2", 0, 1_000, 10).await?;
        let got: Vec<(Comment, bool)> = leases
            .iter()
            .map(|l| Ok((BumpJob::of_job(&l.job)?.comment, l.taken_over)))
            .collect::<StoreResult<_>>()?;
        assert_eq!(got, vec![(waiting, false), (held, true)]);
        moved_once(store, dir.path(), queue::BUMP, JobKind::Bump, 2).await?;
        Ok(())
    }

    /// A data directory of the release before cleanups were jobs, with an
    /// unfollow waiting for its cleanup and a group left whose cleanup was
    /// leased, opens with both pending as cleanup jobs (reads apply them),
    /// the held one's holder named; the move is recorded.
    #[tokio::test]
    async fn earlier_cleanups_are_moved_once() -> Result<(), StoreError> {
        use crate::model::EdgeKind;
        let dir = tempfile::tempdir().expect("tempdir");
        let unfollowed = Unfollow::edge("acme", "ann", EdgeKind::Follows, "bob");
        let left = Unfollow::group("acme", "ann", "team-1");
        {
            let store = EmbeddedStore::open(dir.path())?;
            let db = &store.inner().unwrap();
            let mut batch = WriteBatch::default();
            for (u, until, worker) in [(&unfollowed, 0, ""), (&left, 5_000, "w1")] {
                let key = Key::tag(queue::UNFOLLOW)
                    .str(&u.tenant)
                    .str(&u.reader)
                    .byte(ENDED.byte(u.kind))
                    .last(&u.actor)
                    .into_vec();
                let lease = keys::Lease {
                    until,
                    worker: worker.into(),
                    action: None,
                };
                batch.put_cf(db.cf(QUEUE), key, lease.encode());
            }
            // As that release left it: notice jobs and bumps moved.
            batch.put_cf(db.cf(META), JOBS_VERSION_KEY, [2]);
            db.commit(batch)?;
        }
        let store = EmbeddedStore::open(dir.path())?;
        let pending: Vec<Unfollow> = store
            .queued(
                JobKind::Cleanup,
                "acme",
                QueuedRead::under(&Unfollow::reader_prefix("ann")),
            )
            .await?
            .iter()
            .map(|q| Unfollow::of_job(&q.job))
            .collect::<StoreResult<_>>()?;
        assert_eq!(pending.len(), 2, "{pending:?}");
        assert!(pending.contains(&unfollowed) && pending.contains(&left));
        let leases = store.claim(JobKind::Cleanup, "w2", 0, 1_000, 10).await?;
        let held = leases
            .iter()
            .find(|l| Unfollow::of_job(&l.job).ok().as_ref() == Some(&left))
            .expect("the group left");
        assert!(held.taken_over, "its holder named");
        moved_once(store, dir.path(), queue::UNFOLLOW, JobKind::Cleanup, 2).await?;
        Ok(())
    }

    /// A job queued before the state index opens indexed: a page of the
    /// jobs that never failed lists it.
    #[tokio::test]
    async fn earlier_jobs_are_indexed_by_state() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let job = Job::new(JobKind::Webhook, "acme", "h a", &"payload", 10)?;
        {
            let store = EmbeddedStore::open(dir.path())?;
            store.enqueue(&job).await?;
            let db = &store.inner().unwrap();
            let mut batch = WriteBatch::default();
            // As that release left it: no state index.
            let entry = super::super::state_key(JobKind::Webhook, "acme", 0, "h a");
            batch.delete_cf(db.cf(JOBS), entry);
            batch.put_cf(db.cf(META), JOBS_VERSION_KEY, [4]);
            db.commit(batch)?;
        }
        let store = EmbeddedStore::open(dir.path())?;
        let read = QueuedRead {
            failed: Some(false),
            ..QueuedRead::under("h ")
        };
        let listed = store.queued(JobKind::Webhook, "acme", read).await?;
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].job, job);
        Ok(())
    }

    /// A webhook delivery that failed and waits for its retry, stored by
    /// the release that kept its attempts in its delivery alone (the job's
    /// failures absent, indexed as never failed), opens counted as failed:
    /// a page of the failed lists it, a page of the never failed does not.
    #[tokio::test]
    async fn earlier_failed_webhook_deliveries_are_counted_as_failed() -> Result<(), StoreError> {
        use crate::model::{Delivery, EventType, Tried};
        let dir = tempfile::tempdir().expect("tempdir");
        let delivery = |message: &str, attempts| Delivery {
            webhook: "wh_1".into(),
            message: message.into(),
            event: EventType::ActionRecorded,
            body: "{}".into(),
            hold: None,
            tried: Tried {
                attempts,
                error: Some("the endpoint answered 503".into()),
                status: Some(503),
            },
        };
        let (failed, fresh) = (delivery("msg_a", 2), delivery("msg_b", 0));
        {
            let store = EmbeddedStore::open(dir.path())?;
            for delivery in [&failed, &fresh] {
                let job = WebhookJob::of("acme", delivery, 10)?;
                // As that release queued it: no failures of the job's own.
                store.enqueue(&Job { failures: 0, ..job }).await?;
            }
            let db = &store.inner().unwrap();
            let mut batch = WriteBatch::default();
            batch.put_cf(db.cf(META), JOBS_VERSION_KEY, [5]);
            db.commit(batch)?;
        }
        let store = EmbeddedStore::open(dir.path())?;
        let listed = |failed| QueuedRead {
            failed: Some(failed),
            ..QueuedRead::under("wh_1")
        };
        let of = |queued: Vec<crate::store::Queued>| -> Vec<(String, u32)> {
            queued
                .into_iter()
                .map(|q| (q.job.key.clone(), q.job.failures))
                .collect()
        };
        let key = |d: &Delivery| WebhookJob::of("acme", d, 10).unwrap().key;
        let failing = store.queued(JobKind::Webhook, "acme", listed(true)).await?;
        assert_eq!(of(failing), [(key(&failed), 2)]);
        let never = store
            .queued(JobKind::Webhook, "acme", listed(false))
            .await?;
        assert_eq!(of(never), [(key(&fresh), 0)]);
        Ok(())
    }

    /// A data directory of the release before fan-outs were jobs, with a
    /// fan-out waiting and one leased, opens with both queued as fan-out
    /// jobs of their actions, the held one's holder named; the move is
    /// recorded.
    #[tokio::test]
    async fn earlier_fan_outs_are_moved_once() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let (waiting, held) = (ObjectId::new(), ObjectId::new());
        {
            let store = EmbeddedStore::open(dir.path())?;
            let db = &store.inner().unwrap();
            let mut batch = WriteBatch::default();
            for (id, until, worker) in [(waiting, 0, ""), (held, 5_000, "w1")] {
                let key = Key::tag(queue::FAN_OUT).oid(id.bytes()).last("acme");
                let lease = keys::Lease {
                    until,
                    worker: worker.into(),
                    action: None,
                };
                batch.put_cf(db.cf(QUEUE), key.into_vec(), lease.encode());
            }
            // As that release left it: every other queue moved.
            batch.put_cf(db.cf(META), JOBS_VERSION_KEY, [3]);
            db.commit(batch)?;
        }
        let store = EmbeddedStore::open(dir.path())?;
        let leases = store.claim(JobKind::FanOut, "w2", 0, 1_000, 10).await?;
        let mut got: Vec<(ObjectId, bool)> = leases
            .iter()
            .map(|l| Ok((FanOutJob::action_id(&l.job)?, l.taken_over)))
            .collect::<StoreResult<_>>()?;
        got.sort();
        let mut want = vec![(waiting, false), (held, true)];
        want.sort();
        assert_eq!(got, want);
        moved_once(store, dir.path(), queue::FAN_OUT, JobKind::FanOut, 2).await?;
        Ok(())
    }
}
