//! MongoDB: the migration that brought the queues earlier versions kept
//! in collections of their own into `jobs`, recorded in `meta`.

use bson::doc;
use futures_util::StreamExt;
use serde::Deserialize;

use super::JobDoc;
use crate::model::{Comment, Millis, ObjectId};
use crate::store::codes::ENDED;
use crate::store::jobs::JobKind;
use crate::store::mongo::{db_err, is_duplicate, MongoStore};
use crate::store::{BumpJob, FanOutJob, NoticeJob, StoreResult, Unfollow, WebhookJob};

/// The `meta` document of the jobs layout's version: which earlier queues
/// were moved into `jobs`.
const JOBS_VERSION_ID: &str = "jobs";
/// 1: notice jobs moved from `notice_jobs`; 2: bumps moved off their
/// comments; 3: cleanups moved from `unfollows`; 4: fan-outs moved off
/// their actions; 5: webhook jobs stored before jobs kept their failures
/// counted from their deliveries' attempts.
const JOBS_VERSION: i32 = 5;

impl MongoStore {
    /// Moves the queues earlier versions kept in their own collections into
    /// `jobs`, once, leases in flight included, and notes the version
    /// reached in `meta`. A move cut short is made again: what it moved
    /// already is a duplicate and skipped.
    pub(in crate::store::mongo) async fn migrate_jobs(&self) -> StoreResult<()> {
        let noted = self.noted_version(JOBS_VERSION_ID).await?;
        if noted >= JOBS_VERSION {
            return Ok(());
        }
        let mut moved = 0usize;
        if noted < 1 {
            moved += self.move_notice_jobs().await?;
        }
        if noted < 2 {
            moved += self.move_bumps().await?;
        }
        if noted < 3 {
            moved += self.move_cleanups().await?;
        }
        if noted < 4 {
            moved += self.move_fan_outs().await?;
        }
        if noted < 5 {
            self.count_webhook_failures().await?;
        }
        self.note_version(JOBS_VERSION_ID, JOBS_VERSION).await?;
        if moved > 0 {
            tracing::info!(moved, "queued jobs moved to the jobs collection");
        }
        Ok(())
    }

    /// Notice jobs as `notice_jobs` held them: `{tenant, key, job, until,
    /// worker?}`.
    async fn move_notice_jobs(&self) -> StoreResult<usize> {
        #[derive(Deserialize)]
        struct Earlier {
            job: NoticeJob,
            until: Millis,
            #[serde(default)]
            worker: Option<String>,
        }
        let earlier = self.db.collection::<Earlier>("notice_jobs");
        let mut cursor = earlier.find(doc! {}).await.map_err(db_err)?;
        let mut moved = 0;
        while let Some(found) = cursor.next().await {
            let found = found.map_err(db_err)?;
            let job = found.job.to_job()?;
            let record = JobDoc::new(&job, found.until, found.worker);
            match self.jobs.insert_one(&record).await {
                Err(err) if !is_duplicate(&err) => return Err(db_err(err)),
                _ => moved += 1,
            }
        }
        earlier.drop().await.map_err(db_err)?;
        Ok(moved)
    }
}

impl MongoStore {
    /// Webhook jobs stored before jobs kept their failures (the field is
    /// absent): each counts the failed attempts its delivery carries, so
    /// the deliveries view's pages of failed ones (by `failures`) list it.
    /// A count cut short is made again: one set already is not looked at.
    async fn count_webhook_failures(&self) -> StoreResult<()> {
        let uncounted = doc! {
            "kind": JobKind::Webhook.code(),
            "failures": { "$exists": false },
        };
        let mut cursor = self.jobs.find(uncounted).await.map_err(db_err)?;
        let mut counted = 0usize;
        while let Some(found) = cursor.next().await {
            let found = found.map_err(db_err)?;
            let id = found.id;
            let failures = WebhookJob::carried_failures(&found.into_job()?);
            if failures == 0 {
                continue;
            }
            let filter = doc! { "_id": id, "failures": { "$exists": false } };
            let set = doc! { "$set": { "failures": failures } };
            self.jobs.update_one(filter, set).await.map_err(db_err)?;
            counted += 1;
        }
        if counted > 0 {
            tracing::info!(counted, "failed webhook deliveries counted as failed");
        }
        Ok(())
    }

    /// Unfollow cleanups as earlier versions kept them in `unfollows`:
    /// `{tenant, reader, kind, actor, lockedUntil, worker}` (`worker` empty
    /// and `lockedUntil` the epoch while queued). Each becomes a job (a
    /// duplicate, from a move cut short, is skipped), then the collection
    /// goes.
    async fn move_cleanups(&self) -> StoreResult<usize> {
        #[derive(Deserialize)]
        struct Earlier {
            tenant: String,
            reader: String,
            kind: String,
            actor: String,
            #[serde(rename = "lockedUntil")]
            locked_until: bson::DateTime,
            #[serde(default)]
            worker: String,
        }
        let earlier = self.db.collection::<Earlier>("unfollows");
        let mut cursor = earlier.find(doc! {}).await.map_err(db_err)?;
        let mut moved = 0;
        while let Some(found) = cursor.next().await {
            let found = found.map_err(db_err)?;
            let unfollow = Unfollow {
                kind: ENDED.read_name(
                    &found.kind,
                    format_args!(
                        "unfollows {}/{}/{}",
                        found.tenant, found.reader, found.actor
                    ),
                )?,
                tenant: found.tenant,
                reader: found.reader,
                actor: found.actor,
            };
            let due = found.locked_until.timestamp_millis();
            let until = if due > 0 { due } else { Millis::MIN };
            let worker = Some(found.worker).filter(|w| !w.is_empty());
            let record = JobDoc::new(&unfollow.to_job(0)?, until, worker);
            match self.jobs.insert_one(&record).await {
                Err(err) if !is_duplicate(&err) => return Err(db_err(err)),
                _ => moved += 1,
            }
        }
        earlier.drop().await.map_err(db_err)?;
        Ok(moved)
    }

    /// Fan-outs as earlier versions kept them: `fanOut.lockedUntil` (the
    /// epoch while queued, the lease's end once claimed) and
    /// `fanOut.worker` on their action. Each becomes a job (a duplicate,
    /// from a move cut short, is skipped), then the fields go and the
    /// action says only that its fan-out is pending.
    async fn move_fan_outs(&self) -> StoreResult<usize> {
        #[derive(Deserialize)]
        struct Lease {
            #[serde(rename = "lockedUntil")]
            locked_until: bson::DateTime,
            #[serde(default)]
            worker: Option<String>,
        }
        #[derive(Deserialize)]
        struct Earlier {
            #[serde(rename = "_id")]
            id: ObjectId,
            tenant: String,
            #[serde(rename = "fanOut")]
            fan_out: Lease,
        }
        let open = doc! { "fanOut.lockedUntil": { "$exists": true } };
        let earlier = self.db.collection::<Earlier>("actions");
        let mut cursor = earlier
            .find(open.clone())
            .projection(doc! { "tenant": 1, "fanOut": 1 })
            .await
            .map_err(db_err)?;
        let mut moved = 0;
        while let Some(found) = cursor.next().await {
            let found = found.map_err(db_err)?;
            let due = found.fan_out.locked_until.timestamp_millis();
            let until = if due > 0 { due } else { Millis::MIN };
            let job = FanOutJob::of(&found.tenant, found.id)?;
            let record = JobDoc::new(&job, until, found.fan_out.worker);
            match self.jobs.insert_one(&record).await {
                Err(err) if !is_duplicate(&err) => return Err(db_err(err)),
                _ => moved += 1,
            }
        }
        earlier
            .update_many(
                open,
                doc! {
                    "$set": { "fanOut.state": "PENDING" },
                    "$unset": { "fanOut.lockedUntil": "", "fanOut.worker": "" },
                },
            )
            .await
            .map_err(db_err)?;
        Ok(moved)
    }

    /// Bumps as earlier versions kept them: fields of their comment,
    /// `bumpDue` (the epoch while queued, the lease's end once claimed) and
    /// `bumpWorker`. Each becomes a job (a duplicate, from a move cut
    /// short, is skipped), then the fields go.
    async fn move_bumps(&self) -> StoreResult<usize> {
        #[derive(Deserialize)]
        struct Earlier {
            #[serde(rename = "_id")]
            id: ObjectId,
            tenant: String,
            #[serde(rename = "actionId")]
            action_id: ObjectId,
            #[serde(rename = "authorId")]
            author_id: String,
            text: String,
            created: bson::DateTime,
            #[serde(rename = "bumpDue")]
            bump_due: bson::DateTime,
            #[serde(rename = "bumpWorker", default)]
            bump_worker: Option<String>,
        }
        let queued = doc! { "bumpDue": { "$exists": true } };
        let earlier = self.db.collection::<Earlier>("comments");
        let mut cursor = earlier.find(queued.clone()).await.map_err(db_err)?;
        let mut moved = 0;
        while let Some(found) = cursor.next().await {
            let found = found.map_err(db_err)?;
            let bump = BumpJob {
                tenant: found.tenant,
                comment: Comment {
                    id: found.id,
                    action_id: found.action_id,
                    author_id: found.author_id,
                    text: found.text,
                    created: found.created.timestamp_millis(),
                },
            };
            let due = found.bump_due.timestamp_millis();
            let until = if due > 0 { due } else { Millis::MIN };
            let record = JobDoc::new(&bump.to_job()?, until, found.bump_worker);
            match self.jobs.insert_one(&record).await {
                Err(err) if !is_duplicate(&err) => return Err(db_err(err)),
                _ => moved += 1,
            }
        }
        earlier
            .update_many(
                queued,
                doc! { "$unset": { "bumpDue": "", "bumpWorker": "" } },
            )
            .await
            .map_err(db_err)?;
        Ok(moved)
    }
}
