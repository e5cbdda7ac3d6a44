//! MongoDB: comments and likes, counted on their action with `$inc`; a
//! comment is written with its count and its bump job in one transaction,
//! a like with its count and its notice job.

use async_trait::async_trait;
use bson::{doc, Bson, DateTime, Document};
use futures_util::FutureExt;
use mongodb::options::ReturnDocument;

use crate::model::{Comment, Counts, Millis, ObjectId, Position};
use crate::store::{
    BumpJob, FeedRange, NoticeJob, NoticeSource, Reaction, ReactionStore, Relation, StoreError,
    StoreResult,
};

use super::jobs::JobDoc;
use super::relations::relation_doc;
use super::{db_err, is_duplicate, read_all, within, CommentDoc, MongoStore};

impl MongoStore {
    /// Brings `comment`'s action up to the comment's time in the discussions
    /// of everyone who commented on it, its author included (added if new).
    /// `$max` makes it idempotent and order-free.
    pub(super) async fn note_discussion(&self, tenant: &str, comment: &Comment) -> StoreResult<()> {
        let at = DateTime::from_millis(comment.created);
        self.discussions
            .update_one(
                doc! { "tenant": tenant, "userId": &comment.author_id, "actionId": comment.action_id },
                doc! { "$max": { "latest": at } },
            )
            .upsert(true)
            .await
            .map_err(db_err)?;
        self.discussions
            .update_many(
                doc! { "tenant": tenant, "actionId": comment.action_id },
                doc! { "$max": { "latest": at } },
            )
            .await
            .map_err(db_err)?;
        Ok(())
    }
}

#[async_trait]
impl ReactionStore for MongoStore {
    async fn react(&self, tenant: &str, reaction: Reaction<'_>) -> StoreResult<(bool, Counts)> {
        match reaction {
            Reaction::Comment(comment) => Ok((true, self.add_comment(tenant, comment).await?)),
            Reaction::Like {
                action_id,
                user,
                on,
                at,
            } => self.set_like(tenant, action_id, user, on, at).await,
        }
    }

    async fn comments(
        &self,
        tenant: &str,
        action_id: ObjectId,
        after: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<Comment>> {
        let mut filter = doc! { "tenant": tenant, "actionId": action_id };
        if let Some(after) = after {
            filter.insert("_id", doc! { "$gt": after });
        }
        let docs: Vec<CommentDoc> = read_all(
            self.comments
                .find(filter)
                .sort(doc! { "_id": 1 })
                .limit(i64::try_from(limit).unwrap_or(i64::MAX)),
        )
        .await?;
        Ok(docs.into_iter().map(CommentDoc::into_comment).collect())
    }

    async fn discussions(
        &self,
        tenant: &str,
        user: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>> {
        let all = doc! { "tenant": tenant, "userId": user };
        let exact = within(all, ("latest", "actionId"), &range);
        let direction = if range.from_oldest { 1 } else { -1 };
        let docs: Vec<Document> = read_all(
            self.discussions
                .find(exact)
                .sort(doc! { "latest": direction, "actionId": direction })
                .limit(i64::try_from(range.limit).unwrap_or(i64::MAX)),
        )
        .await?;
        let mut positions: Vec<Position> = docs
            .into_iter()
            .filter_map(|d| {
                Some(Position {
                    relevancy: d.get_datetime("latest").ok()?.timestamp_millis(),
                    action_id: d.get_object_id("actionId").ok()?,
                })
            })
            .collect();
        if range.from_oldest {
            positions.reverse();
        }
        Ok(positions)
    }
}

impl MongoStore {
    /// Adds a comment: see [`Reaction::Comment`].
    async fn add_comment(&self, tenant: &str, comment: &Comment) -> StoreResult<Counts> {
        let record = CommentDoc::new(tenant, comment);
        let bump = BumpJob {
            tenant: tenant.to_owned(),
            comment: comment.clone(),
        };
        let job = JobDoc::new(&bump.to_job()?, Millis::MIN, None);
        // The count, the comment and its bump job in one transaction: none
        // without the others. The driver runs it again on a transient
        // error (a write conflict on the action's document).
        let mut session = self.db.client().start_session().await.map_err(db_err)?;
        let counts = session
            .start_transaction()
            .and_run((self, &record, &job), |session, (store, record, job)| {
                async move {
                    let counted = store
                        .actions
                        .find_one_and_update(
                            doc! { "_id": record.action_id, "tenant": &record.tenant },
                            doc! { "$inc": { "counts.comments": 1 } },
                        )
                        .return_document(ReturnDocument::After)
                        .session(&mut *session)
                        .await?;
                    let Some(action) = counted else {
                        return Ok(None);
                    };
                    store
                        .comments
                        .insert_one(*record)
                        .session(&mut *session)
                        .await?;
                    store.jobs.insert_one(*job).session(&mut *session).await?;
                    Ok(Some(action.counts))
                }
                .boxed()
            })
            .await;
        let counts = match counts {
            // Stored under its id already (by a retry's first attempt,
            // counted and bumped then): nothing of this one is written.
            Err(err) if is_duplicate(&err) => {
                let found = self.find_action(tenant, comment.action_id).await?;
                found.map(|action| action.counts)
            }
            counts => counts.map_err(db_err)?,
        };
        let Some(counts) = counts else {
            return Err(StoreError::not_found(format!(
                "no action {}",
                comment.action_id
            )));
        };
        self.note_discussion(tenant, comment).await?;
        Ok(counts)
    }

    /// Likes or unlikes an action: see [`Reaction::Like`]. The like, the
    /// count and, for a like, its notice job, in one transaction: none
    /// without the others.
    async fn set_like(
        &self,
        tenant: &str,
        action_id: ObjectId,
        user: &str,
        on: bool,
        at: Millis,
    ) -> StoreResult<(bool, Counts)> {
        let Some(action) = self.find_action(tenant, action_id).await? else {
            return Err(StoreError::not_found(format!("no action {action_id}")));
        };
        let hex = action_id.to_hex();
        let like = relation_doc(Relation::Likes, tenant, user, &hex, &[]);
        // With the shard key (`t`, `o`), as every write of a relation.
        let id = like.get("_id").cloned().unwrap_or(Bson::Null);
        let filter = doc! { "_id": id, "t": tenant, "o": &hex };
        let by: i64 = if on { 1 } else { -1 };
        let notice = NoticeJob {
            tenant: tenant.to_owned(),
            source: NoticeSource::Like {
                action_id,
                user: user.to_owned(),
            },
            at,
        }
        .to_job()?;
        // Afresh over a job of its key that waits or runs: its worker finds
        // its lease lost.
        let requeue = doc! {
            "$set": { "payload": &notice.payload, "queued": notice.queued, "until": Millis::MIN },
            "$unset": { "worker": "" },
        };
        let job = doc! { "kind": notice.kind.code(), "tenant": tenant, "key": &notice.key };
        let mut session = self.db.client().start_session().await.map_err(db_err)?;
        let counted = session
            .start_transaction()
            .and_run(
                (self, &like, &filter, &requeue, &job),
                |session, (store, like, filter, requeue, job)| {
                    async move {
                        let relations = &store.relations;
                        let had = if on {
                            relations
                                .find_one_and_replace((*filter).clone(), (*like).clone())
                                .upsert(true)
                                .session(&mut *session)
                                .await?
                        } else {
                            relations
                                .find_one_and_delete((*filter).clone())
                                .session(&mut *session)
                                .await?
                        };
                        if had.is_some() == on {
                            return Ok(None);
                        }
                        let counted = store
                            .actions
                            .find_one_and_update(
                                doc! { "_id": action_id, "tenant": tenant },
                                doc! { "$inc": { "counts.likes": by } },
                            )
                            .return_document(ReturnDocument::After)
                            .session(&mut *session)
                            .await?;
                        if on {
                            store
                                .jobs
                                .update_one((*job).clone(), (*requeue).clone())
                                .upsert(true)
                                .session(&mut *session)
                                .await?;
                        }
                        Ok(Some(counted.map(|a| a.counts)))
                    }
                    .boxed()
                },
            )
            .await
            .map_err(db_err)?;
        Ok(match counted {
            None => (false, action.counts),
            Some(counts) => (true, counts.unwrap_or(action.counts)),
        })
    }
}
