//! MongoDB: a worker's writes of job documents, each in a transaction of
//! its own so that one never waits on another transaction.

use bson::{doc, Document};
use mongodb::options::ReturnDocument;

use super::due_order;
use crate::model::Millis;
use crate::store::jobs::Lease;
use crate::store::mongo::MongoStore;

impl MongoStore {
    /// Extends the leases of `keys` (of `first`'s kind, tenant and worker)
    /// in one `updateMany`, written [promptly](MongoStore::promptly).
    /// Returns how many jobs were still the worker's.
    pub(super) async fn renew_keys(
        &self,
        first: &Lease,
        keys: &[&str],
        now: Millis,
    ) -> Result<u64, mongodb::error::Error> {
        let held = doc! {
            "kind": first.job.kind.code(),
            "tenant": &first.job.tenant,
            "key": { "$in": keys },
            "worker": &first.worker,
        };
        let renew = doc! { "$set": { "until": now.saturating_add(first.lease_ms) } };
        let renewed = self.promptly(JobWrite::UpdateMany(held, renew)).await?;
        Ok(renewed.matched)
    }

    /// Writes job documents for a worker in a transaction of its own, so
    /// that a document another transaction has written fails the write at
    /// once with a write conflict, where a write outside a transaction
    /// would wait for that transaction to end: a minute for one a killed
    /// process left open, during which the worker would do nothing else
    /// (and the wire server the tests run, which spins such a write while
    /// it holds the collection, could not end the abandoned transaction at
    /// all). A conflict with a live transaction (a like queueing a held
    /// bump again, a change of scope queueing a fan-out) ends within
    /// milliseconds: the write is tried again a few times, for under a
    /// second in all, before the conflict is answered; the worker's next
    /// tick or round tries again. Returns how many documents matched.
    pub(super) async fn promptly(&self, write: JobWrite) -> Result<Written, mongodb::error::Error> {
        let mut session = self.db.client().start_session().await?;
        let mut wait = PROMPT_RETRY_FIRST;
        loop {
            session.start_transaction().await?;
            let matched = |n| Written {
                matched: n,
                before: None,
            };
            let written = match &write {
                JobWrite::UpdateMany(filter, update) => self
                    .jobs
                    .update_many(filter.clone(), update.clone())
                    .session(&mut session)
                    .await
                    .map(|r| matched(r.matched_count)),
                JobWrite::DeleteOne(filter) => self
                    .jobs
                    .delete_one(filter.clone())
                    .session(&mut session)
                    .await
                    .map(|r| matched(r.deleted_count)),
                JobWrite::TakeFirst(filter, update) => self
                    .jobs
                    .clone_with_type::<Document>()
                    .find_one_and_update(filter.clone(), update.clone())
                    .sort(due_order())
                    .return_document(ReturnDocument::Before)
                    .session(&mut session)
                    .await
                    .map(|before| Written {
                        matched: u64::from(before.is_some()),
                        before,
                    }),
            };
            let failed = match written {
                Ok(n) => match session.commit_transaction().await {
                    Ok(()) => return Ok(n),
                    Err(err) => err,
                },
                Err(err) => {
                    let _ = session.abort_transaction().await;
                    err
                }
            };
            if !conflicted(&failed) || wait > PROMPT_RETRY_LAST {
                return Err(failed);
            }
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
    }
}

/// A worker's write of job documents, made [promptly](MongoStore::promptly).
pub(super) enum JobWrite {
    UpdateMany(Document, Document),
    DeleteOne(Document),
    /// Updates the first due job in the order claims take them, answering
    /// it as it was.
    TakeFirst(Document, Document),
}

/// What a prompt write did: how many documents it matched, and for
/// [`JobWrite::TakeFirst`] the one it took, as it was.
pub(super) struct Written {
    pub(super) matched: u64,
    pub(super) before: Option<Document>,
}

/// The first and the last wait of a prompt write that met another
/// transaction (doubling in between: 635 ms in all).
const PROMPT_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(5);
const PROMPT_RETRY_LAST: std::time::Duration = std::time::Duration::from_millis(320);

/// A write that met another transaction's write: nothing was written, and
/// the same write may succeed once that transaction ends.
pub(super) fn conflicted(err: &mongodb::error::Error) -> bool {
    const WRITE_CONFLICT: i32 = 112;
    err.contains_label(mongodb::error::TRANSIENT_TRANSACTION_ERROR)
        || crate::store::mongo::server_codes(err).any(|code| code == WRITE_CONFLICT)
}
