//! MongoDB: the collections' indexes, created at start-up, idempotently.

use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::{Collection, IndexModel};

use super::{db_err, MongoStore, INDEX_NOT_FOUND};
use crate::store::StoreResult;

/// How long after an action's expiry MongoDB's TTL monitor deletes its
/// record if no worker has: a backstop, not the way expiry works.
const EXPIRY_GRACE_SECS: u64 = 24 * 3600;

/// An index on `keys`.
pub(super) fn index(keys: Document, options: IndexOptions) -> IndexModel {
    IndexModel::builder().keys(keys).options(options).build()
}

pub(super) fn named(name: &str) -> IndexOptions {
    IndexOptions::builder().name(name.to_owned()).build()
}

pub(super) fn unique(name: &str) -> IndexOptions {
    IndexOptions::builder()
        .name(name.to_owned())
        .unique(true)
        .build()
}

impl MongoStore {
    pub(super) async fn create_indexes(&self, ref_fields: &[String]) -> StoreResult<()> {
        fn sparse(name: &str) -> IndexOptions {
            IndexOptions::builder()
                .name(name.to_owned())
                .sparse(true)
                .build()
        }
        // The worker deletes an action when it expires (and announces it);
        // should no worker run for a day, the server drops the record.
        let expiry = IndexOptions::builder()
            .name("expiry".to_owned())
            .expire_after(std::time::Duration::from_secs(EXPIRY_GRACE_SECS))
            .build();
        // One action per foreign id of an actor: the index refuses a
        // second, in whichever process it is recorded. Actions without one
        // are not in it.
        let foreign = IndexOptions::builder()
            .name("foreign".to_owned())
            .unique(true)
            .partial_filter_expression(doc! { "foreign.id": { "$exists": true } })
            .build();
        self.actions
            .create_indexes([
                index(doc! { "tenant": 1, "refIds": 1, "_id": -1 }, named("slice")),
                index(
                    doc! { "tenant": 1, "actorId": 1, "conducted": -1, "_id": -1 },
                    named("actor_outbox"),
                ),
                index(
                    doc! { "tenant": 1, "scopeGroups": 1, "conducted": -1, "_id": -1 },
                    named("group_outbox"),
                ),
                index(
                    doc! { "tenant": 1, "readers": 1, "conducted": -1, "_id": -1 },
                    named("named_outbox"),
                ),
                index(
                    doc! { "tenant": 1, "to": 1, "conducted": -1, "_id": -1 },
                    named("sent_outbox"),
                ),
                index(doc! { "tenant": 1, "actorId": 1, "foreign.id": 1 }, foreign),
                // What the expiry sweeper reads: by expiry, and by age.
                index(doc! { "expireAt": 1 }, expiry),
                index(doc! { "conducted": 1 }, named("age")),
            ])
            .await
            .map_err(db_err)?;
        // Renames find the actions naming an id by these; the built-in
        // types' were named for the id without its `Id`.
        let by_ref = ref_fields.iter().map(|field| {
            let name = format!("descriptor_{}", field.strip_suffix("Id").unwrap_or(field));
            index(doc! { format!("descriptor.{field}"): 1 }, sparse(&name))
        });
        self.actions
            .create_indexes(by_ref.collect::<Vec<_>>())
            .await
            .map_err(db_err)?;
        self.layout.create_indexes(self.embeds).await?;
        self.users
            .create_indexes([index(doc! { "tenant": 1, "userId": 1 }, unique("user"))])
            .await
            .map_err(db_err)?;
        self.relations
            .create_indexes([
                index(
                    doc! { "t": 1, "r": 1, "f": 1, "o": 1 },
                    named("relation_out"),
                ),
                index(
                    doc! { "t": 1, "r": 1, "o": 1, "f": 1 },
                    named("relation_in"),
                ),
            ])
            .await
            .map_err(db_err)?;
        // A group's key is unique per owner (a second new group of a key is
        // refused); pages, counts and trims read an owner's groups newest
        // first.
        self.notice_groups
            .create_indexes([
                index(
                    doc! { "tenant": 1, "owner": 1, "key": 1 },
                    unique("notice_key"),
                ),
                index(
                    doc! { "tenant": 1, "owner": 1, "last": -1, "_id": -1 },
                    named("notice_order"),
                ),
            ])
            .await
            .map_err(db_err)?;
        self.jobs
            .create_indexes([
                index(doc! { "kind": 1, "tenant": 1, "key": 1 }, unique("job")),
                index(
                    doc! { "kind": 1, "until": 1, "queued": 1, "_id": 1 },
                    named("job_due"),
                ),
                // A page of a webhook's failed (or untried) deliveries.
                index(
                    doc! { "kind": 1, "tenant": 1, "failures": 1, "key": 1 },
                    named("job_state"),
                ),
            ])
            .await
            .map_err(db_err)?;
        // A fence matters while one batch writes: an hour outlasts any.
        let fence_age = IndexOptions::builder()
            .name("fence_age".to_owned())
            .expire_after(std::time::Duration::from_secs(3_600))
            .build();
        self.fences
            .create_index(index(doc! { "at": 1 }, fence_age))
            .await
            .map_err(db_err)?;
        // Rivers were once records in `rivers` beside items in the layout;
        // they live in `timeline_cache` now. The old records go (their
        // items stay in the layout as timeline items; readers get a new
        // river on their next read).
        self.db
            .collection::<Document>("rivers")
            .drop()
            .await
            .map_err(db_err)?;
        self.comments
            .create_index(index(
                doc! { "tenant": 1, "actionId": 1, "_id": 1 },
                named("thread"),
            ))
            .await
            .map_err(db_err)?;
        self.discussions
            .create_indexes([
                index(
                    doc! { "tenant": 1, "userId": 1, "actionId": 1 },
                    unique("participant"),
                ),
                index(
                    doc! { "tenant": 1, "userId": 1, "latest": -1, "actionId": -1 },
                    named("discussions"),
                ),
                index(doc! { "tenant": 1, "actionId": 1 }, named("thread")),
            ])
            .await
            .map_err(db_err)?;
        self.event_log.create_indexes().await?;
        // Earlier versions kept an unused `outbox` index by id (`actor_outbox`,
        // by when the action happened, replaces it), and indexes of queued
        // fan-outs on actions and bumps on comments (both are jobs now).
        drop_earlier(&self.users, "supervisees").await?;
        drop_earlier(&self.actions, "outbox").await?;
        drop_earlier(&self.actions, "claimable").await?;
        drop_earlier(&self.comments, "bumpable").await?;
        Ok(())
    }
}

/// Drops an index earlier versions made, if it is there.
async fn drop_earlier<T: Send + Sync>(collection: &Collection<T>, name: &str) -> StoreResult<()> {
    match collection.drop_index(name).await {
        Err(err)
            if !(matches!(
                err.kind.as_ref(),
                mongodb::error::ErrorKind::Command(c) if c.code == INDEX_NOT_FOUND
            ) || err.to_string().contains("not found")) =>
        {
            Err(db_err(err))
        }
        _ => Ok(()),
    }
}
