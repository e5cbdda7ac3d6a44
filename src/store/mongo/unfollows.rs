//! MongoDB: unfollows (`unfollows`), one document per ended edge whose
//! cleanup has not run: the record reads apply and the job, with its lease.

use bson::{doc, DateTime, Document};
use mongodb::options::ReturnDocument;

use crate::model::{FeedItem, Millis, ObjectId};
use crate::store::{Ended, ErrorKind, StoreError, StoreResult, Unfollow, UnfollowClaim};

use super::layout::Which;
use super::{db_err, epoch, read_all, DocAt, MongoStore};
use crate::store::codes::ENDED;

/// How an unfollow's kind is stored: the edge's kind, or `group`.
fn ended_name(kind: Ended) -> &'static str {
    ENDED.name(kind)
}

fn key(u: &Unfollow) -> Document {
    doc! { "tenant": &u.tenant, "reader": &u.reader, "kind": ended_name(u.kind), "actor": &u.actor }
}

/// The unfollow a document records; `None` for one missing a field.
fn decode(d: &Document) -> StoreResult<Option<Unfollow>> {
    let (Ok(tenant), Ok(reader), Ok(actor), Ok(kind)) = (
        d.get_str("tenant"),
        d.get_str("reader"),
        d.get_str("actor"),
        d.get_str("kind"),
    ) else {
        return Ok(None);
    };
    Ok(Some(Unfollow {
        tenant: tenant.to_owned(),
        reader: reader.to_owned(),
        actor: actor.to_owned(),
        kind: ENDED.read_name(kind, DocAt("unfollows", d))?,
    }))
}

impl MongoStore {
    pub(super) async fn start_unfollow_doc(&self, u: &Unfollow) -> StoreResult<()> {
        self.unfollows
            .update_one(
                key(u),
                doc! { "$set": { "lockedUntil": epoch(), "worker": "" } },
            )
            .upsert(true)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    pub(super) async fn end_unfollow_doc(&self, u: &Unfollow) -> StoreResult<()> {
        self.unfollows.delete_one(key(u)).await.map_err(db_err)?;
        Ok(())
    }

    pub(super) async fn unfollows_of(
        &self,
        tenant: &str,
        reader: &str,
    ) -> StoreResult<Vec<Unfollow>> {
        let docs: Vec<Document> = read_all(
            self.unfollows
                .find(doc! { "tenant": tenant, "reader": reader }),
        )
        .await?;
        docs.iter().filter_map(|d| decode(d).transpose()).collect()
    }

    pub(super) async fn claim_unfollow_docs(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<UnfollowClaim>> {
        let mut claims = Vec::new();
        while claims.len() < limit {
            let claimed = self
                .unfollows
                .find_one_and_update(
                    doc! { "lockedUntil": { "$lte": DateTime::from_millis(now) } },
                    doc! { "$set": {
                        "lockedUntil": DateTime::from_millis(now + lease_ms),
                        "worker": worker,
                    } },
                )
                .return_document(ReturnDocument::After)
                .await
                .map_err(db_err)?;
            let Some(unfollow) = claimed.as_ref().map(decode).transpose()?.flatten() else {
                break;
            };
            claims.push(UnfollowClaim {
                unfollow,
                worker: worker.to_owned(),
                lease_ms,
            });
        }
        Ok(claims)
    }

    /// The claimed job's document as its holder has it, or `None` if it
    /// ended meanwhile; `LeaseLost` if another worker took it over.
    async fn held(&self, claim: &UnfollowClaim) -> StoreResult<Option<Document>> {
        let u = &claim.unfollow;
        let mut held = key(u);
        held.insert("worker", &claim.worker);
        if self
            .unfollows
            .find_one(held.clone())
            .await
            .map_err(db_err)?
            .is_some()
        {
            return Ok(Some(held));
        }
        match self.unfollows.find_one(key(u)).await.map_err(db_err)? {
            None => Ok(None),
            Some(_) => Err(StoreError::new(
                ErrorKind::LeaseLost,
                format!(
                    "the cleanup of {} leaving {} was taken over",
                    u.reader, u.actor
                ),
            )),
        }
    }

    /// Takes the items `which` selects out and ends the job.
    async fn take_out(&self, held: Document, which: Which<'_>) -> StoreResult<Vec<FeedItem>> {
        let tenant = held.get_str("tenant").unwrap_or_default().to_owned();
        let taken = self.layout.take(&tenant, which).await?;
        self.unfollows.delete_one(held).await.map_err(db_err)?;
        Ok(taken)
    }

    pub(super) async fn clean_unfollow_docs(
        &self,
        claim: &UnfollowClaim,
    ) -> StoreResult<Vec<FeedItem>> {
        let u = &claim.unfollow;
        if u.kind.names_items() {
            // Such a cleanup names its items.
            return self.clean_named_docs(claim, &[]).await;
        }
        let Some(held) = self.held(claim).await? else {
            return Ok(Vec::new());
        };
        let which = Which {
            owner: &u.reader,
            reasons: u.kind.reasons(),
            actor: Some(&u.actor),
            ids: None,
            below: None,
        };
        self.take_out(held, which).await
    }

    pub(super) async fn clean_named_docs(
        &self,
        claim: &UnfollowClaim,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<FeedItem>> {
        let u = &claim.unfollow;
        let Some(held) = self.held(claim).await? else {
            return Ok(Vec::new());
        };
        let which = Which {
            owner: &u.reader,
            reasons: u.kind.reasons(),
            actor: None,
            ids: Some(action_ids),
            below: None,
        };
        self.take_out(held, which).await
    }
}
