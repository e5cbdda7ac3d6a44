//! MongoDB: comments and likes, counted on their action with `$inc`.

use async_trait::async_trait;
use bson::{doc, DateTime, Document};

use crate::model::{Comment, Counts, ObjectId, Position};
use crate::store::{FeedRange, ReactionStore, StoreError, StoreResult};

use super::{db_err, epoch, is_duplicate, read_all, within, CommentDoc, MongoStore};

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
    async fn add_comment(&self, tenant: &str, comment: &Comment) -> StoreResult<Counts> {
        // Count first: a comment on a missing action is never stored.
        let Some(counts) = self.count(tenant, comment.action_id, "comments", 1).await? else {
            return Err(StoreError::not_found(format!(
                "no action {}",
                comment.action_id
            )));
        };
        let stored = self
            .comments
            .insert_one(CommentDoc {
                id: comment.id,
                tenant: tenant.to_owned(),
                action_id: comment.action_id,
                author_id: comment.author_id.clone(),
                text: comment.text.clone(),
                created: DateTime::from_millis(comment.created),
                // The comment is its own bump job: one write queues both.
                bump_due: Some(epoch()),
                bump_worker: None,
            })
            .await;
        if let Err(err) = stored {
            // Keep the count true to the comments stored.
            let _ = self.count(tenant, comment.action_id, "comments", -1).await;
            return Err(db_err(err));
        }
        self.note_discussion(tenant, comment).await?;
        Ok(counts)
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

    async fn set_like(
        &self,
        tenant: &str,
        action_id: ObjectId,
        user: &str,
        on: bool,
    ) -> StoreResult<(bool, Counts)> {
        let Some(action) = self.find_action(tenant, action_id).await? else {
            return Err(StoreError::not_found(format!("no action {action_id}")));
        };
        let like = doc! { "tenant": tenant, "actionId": action_id, "userId": user };
        let changed = if on {
            match self.likes.insert_one(like).await {
                Ok(_) => true,
                Err(err) if is_duplicate(&err) => false,
                Err(err) => return Err(db_err(err)),
            }
        } else {
            self.likes
                .delete_one(like)
                .await
                .map_err(db_err)?
                .deleted_count
                > 0
        };
        if !changed {
            return Ok((false, action.counts));
        }
        let counts = self
            .count(tenant, action_id, "likes", if on { 1 } else { -1 })
            .await?
            .unwrap_or(action.counts);
        Ok((true, counts))
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

    async fn liked(
        &self,
        tenant: &str,
        user: &str,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>> {
        let docs: Vec<Document> = read_all(
            self.likes
                .find(doc! { "tenant": tenant, "userId": user, "actionId": { "$in": action_ids } })
                .projection(doc! { "actionId": 1, "_id": 0 }),
        )
        .await?;
        Ok(docs
            .into_iter()
            .filter_map(|d| d.get_object_id("actionId").ok())
            .collect())
    }
}
