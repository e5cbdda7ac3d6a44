//! The MongoDB backend, for when one machine is not enough: any number of API and
//! worker processes share one replica set or sharded cluster.
//!
//! Collections (created with their indexes at start-up, idempotently):
//! - `actions`: one document per action, the descriptor embedded with a `type`
//!   tag and whether its fan-out is done (the fan-out is a job); the outboxes the
//!   feed models pull are indexes on `actorId`, `scopeGroups` and `readers`
//!   (newest first);
//! - readers' timelines, as `--timeline-layout` keeps them (see
//!   `layout/`): `feed_items` (one reference per reader and action, unique
//!   on `{tenant, owner, actionId}` so a re-run delivers nothing twice),
//!   `timed_buckets` or `sized_buckets`; and `timeline_cache`, one document
//!   per reader with a river (its entries capped inside);
//! - `users` (display profiles) and `relations` (follows, friendships,
//!   group follows, memberships, assignments to refs, supervisors, likes:
//!   one document each, indexed from both ends; see `relations.rs`);
//! - `comments`; comments' and likes' counts are kept on the action with
//!   `$inc`; `discussions` (one per user and action
//!   they commented on, at the thread's latest comment);
//! - `records`: values kept by key under a version (see `records.rs`):
//!   cuts, celebrities, inboxes, groups' kinds, group feeds' rings and the
//!   deployment's own values;
//! - `notice_groups` (one document per notice group, its members inside);
//! - `jobs`: the job queue (see `jobs.rs`), one document per waiting or
//!   leased job (an action's fan-out, a comment's bump, a notice job, an
//!   unfollow's cleanup, which is also the record reads apply until it has
//!   run);
//! - `fences`: one document per fan-out job that a batch or a change of
//!   scope held lately (see `queues.rs`), removed an hour after (TTL);
//! - `events`: the event log live events cross processes by (see
//!   `events.rs`), kept a while (TTL);
//! - `meta`: the timeline layout the database was written in, whether its entries carry copies of actions, and the
//!   versions of layouts migrated on open.
//!
//! Three writes are multi-document transactions: an action with its fan-out
//! job, a change of scope with the job queued again (`actions.rs`), and a
//! comment with its count and its bump job (`reactions.rs`); a replica set,
//! which the change streams need anyway, runs them. A fan-out's batch is
//! fenced by one (`queues.rs`): it holds the job's fence and reads the
//! lease while the batch writes, and a change of scope writes that fence
//! too, so it lands before the batch or after it. Nothing else needs one:
//! a delivery that races a hide or delete checks the action again after
//! writing and takes its items back.
//!
//! One file per concern: `graph.rs`, `actions.rs`, `reactions.rs`,
//! `queues.rs` (fan-out leases, bumps' raises), `jobs.rs` (the job queue),
//! `timelines.rs` (feeds), `records.rs`,
//! `sources.rs` and `rivers.rs` (what the feed models read and keep),
//! `cleanups.rs`, `group_feeds.rs`, `notices.rs`, `indexes.rs` and
//! `archive.rs` (export and import of whole stores); this file holds the
//! connection and the stored document shapes.

mod actions;
mod archive;
mod bulk;
mod cleanups;
mod copies;
mod events;
mod group_feeds;
mod indexes;
mod jobs;
mod layout;
mod notices;
mod queues;
mod reactions;
mod records;
mod relations;
mod rivers;
mod sources;
mod timelines;
mod users;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, DateTime, Document};
use futures_util::TryStreamExt;
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection, Database};
use serde::{Deserialize, Serialize};

use super::codes::Codes;
use super::{ErrorKind, Store, StoreError, StoreResult};
use crate::descriptor::Descriptor;
use crate::model::{
    Action, Comment, Counts, FanOut, FanOutState, FeedItem, Foreign, Millis, ObjectId, Reason,
    Scope,
};

pub use layout::{TimelineLayout, DEFAULT_BUCKET_SIZE};

/// How a MongoDB store keeps readers' timelines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MongoSettings {
    /// `None`: the layout the database was written in (items for a new
    /// one). A database keeps the layout it began with.
    pub layout: Option<TimelineLayout>,
    /// Entries per sized bucket.
    pub bucket_size: usize,
    /// Whether timeline entries carry copies of their actions.
    pub embed_actions: bool,
    /// Entries a river keeps (`--river-size`).
    pub river_size: usize,
    /// Whether the feed model keeps rivers (deliveries and reads then look
    /// for them; under another model they do only once a river is made).
    pub keeps_rivers: bool,
    /// The descriptors' id fields that carry a copied name: indexed, for
    /// renames to find the actions naming an id.
    pub ref_fields: Vec<String>,
}

impl Default for MongoSettings {
    fn default() -> Self {
        Self {
            layout: None,
            bucket_size: DEFAULT_BUCKET_SIZE,
            embed_actions: false,
            river_size: crate::store::DEFAULT_RIVER_SIZE,
            keeps_rivers: false,
            ref_fields: ref_fields(&crate::descriptor::Catalog::builtin()),
        }
    }
}

/// The id fields of `catalog`'s named refs, for [`MongoSettings::ref_fields`].
pub fn ref_fields(catalog: &crate::descriptor::Catalog) -> Vec<String> {
    let mut fields: Vec<String> = catalog
        .named_refs()
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    fields.dedup();
    fields
}

/// The `meta` key of the layout a database's timelines were written in.
const LAYOUT_KEY: &str = "timeline-layout";

/// Server-selection timeout unless the URI sets `serverSelectionTimeoutMS`:
/// how long a request waits for a lost database before it answers `STORAGE_UNAVAILABLE`.
pub const DEFAULT_SERVER_SELECTION: Duration = Duration::from_secs(2);

const DUPLICATE_KEY: i32 = 11000;
const INDEX_NOT_FOUND: i32 = 27;

/// Relevancy of a reader's hidden-item tombstone: the epoch, below every real
/// item (the API only takes times after it), so feed ranges leave tombstones
/// out with a bound on an indexed field rather than a filter on `hidden`.
const TOMBSTONE: Millis = 0;

/// Extra items read past a page's limit to cut items that share the boundary
/// item's millisecond exactly.
const TIE_SLACK: usize = 16;

/// The MongoDB-backed store.
pub struct MongoStore {
    db: Database,
    actions: Collection<ActionDoc>,
    /// Whether timeline entries written carry copies of their actions.
    embeds: bool,
    /// Readers' timelines, in the layout the deployment picked.
    layout: Box<dyn layout::Layout>,
    users: Collection<Document>,
    /// Relations, kept from both ends (see [`relations`]).
    relations: Collection<Document>,
    comments: Collection<CommentDoc>,
    /// One per user and action they commented on, at the action's latest
    /// comment.
    discussions: Collection<Document>,
    /// Records by key (see [`records`]).
    records: Collection<Document>,
    /// Readers' rivers, on `timeline_cache` (the layout reaches them too).
    rivers: layout::RiverCache,
    /// The store's own notes: its layout, what it migrated.
    meta: Collection<Document>,
    /// Signals between processes (see [`events`]).
    event_log: Arc<events::MongoEventLog>,
    /// Notice groups, one document each (see [`notices`]).
    notice_groups: Collection<Document>,
    /// The job queue (see [`jobs`]).
    jobs: Collection<jobs::JobDoc>,
    /// Fan-out jobs' fences (see [`queues`]).
    fences: Collection<Document>,
    /// Commands sent, by name. A std mutex: the driver calls the handler
    /// synchronously and the critical section is one map update.
    commands: Arc<Mutex<BTreeMap<String, u64>>>,
}

/// `actions` as stored.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ActionDoc {
    #[serde(rename = "_id")]
    id: ObjectId,
    tenant: String,
    actor_id: String,
    conducted: DateTime,
    hidden: bool,
    scope: Scope,
    readers: Vec<String>,
    scope_groups: Vec<String>,
    ref_ids: Vec<String>,
    tags: Vec<String>,
    descriptor: Descriptor,
    fan_out: FanOutDoc,
    #[serde(default)]
    counts: Counts,
    /// When the action expires, if it does: a date, so a TTL index can
    /// find it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expire_at: Option<DateTime>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    to: Vec<String>,
    /// Unique per tenant and actor (the `foreign` index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    foreign: Option<Foreign>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FanOutDoc {
    state: FanOutState,
    /// Earlier versions' lease, present while the fan-out was open: moved
    /// to its job at start-up (`jobs.rs`), never written now.
    #[serde(skip_serializing_if = "Option::is_none")]
    locked_until: Option<DateTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    worker: Option<String>,
}

/// `comments` as stored.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommentDoc {
    #[serde(rename = "_id")]
    id: ObjectId,
    tenant: String,
    action_id: ObjectId,
    author_id: String,
    text: String,
    created: DateTime,
}

impl CommentDoc {
    fn new(tenant: &str, comment: &Comment) -> CommentDoc {
        CommentDoc {
            id: comment.id,
            tenant: tenant.to_owned(),
            action_id: comment.action_id,
            author_id: comment.author_id.clone(),
            text: comment.text.clone(),
            created: DateTime::from_millis(comment.created),
        }
    }

    fn into_comment(self) -> Comment {
        Comment {
            id: self.id,
            action_id: self.action_id,
            author_id: self.author_id,
            text: self.text,
            created: self.created.timestamp_millis(),
        }
    }
}

/// `feed_items` as stored.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FeedItemDoc {
    tenant: String,
    owner: String,
    action_id: ObjectId,
    relevancy: DateTime,
    reason: Reason,
    /// When the item was delivered or last bumped.
    #[serde(default = "epoch")]
    changed: DateTime,
    /// A tombstone: the reader hid the item; it stays (at the epoch) so it is
    /// not delivered again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    hidden: bool,
    /// A copy of the action (`--embed-actions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    x: Option<layout::copy::CopyDoc>,
}

impl From<&Action> for ActionDoc {
    fn from(a: &Action) -> Self {
        // How far it got; a fan-out's lease is its job's.
        let fan_out = FanOutDoc {
            state: a.fan_out.state,
            locked_until: None,
            worker: None,
        };
        ActionDoc {
            id: a.id,
            tenant: a.tenant.clone(),
            actor_id: a.actor_id.clone(),
            conducted: DateTime::from_millis(a.conducted),
            hidden: a.hidden,
            scope: a.scope,
            readers: a.readers.clone(),
            scope_groups: a.scope_groups.clone(),
            ref_ids: a.ref_ids.clone(),
            tags: a.tags.clone(),
            descriptor: a.descriptor.clone(),
            fan_out,
            counts: a.counts,
            expire_at: a.expires_at.map(DateTime::from_millis),
            to: a.to.clone(),
            foreign: a.foreign.clone(),
        }
    }
}

impl From<ActionDoc> for Action {
    fn from(d: ActionDoc) -> Self {
        let fan_out = FanOut {
            state: d.fan_out.state,
            locked_until: None,
            worker: None,
        };
        Action {
            id: d.id,
            tenant: d.tenant,
            actor_id: d.actor_id,
            conducted: d.conducted.timestamp_millis(),
            hidden: d.hidden,
            scope: d.scope,
            readers: d.readers,
            scope_groups: d.scope_groups,
            ref_ids: d.ref_ids,
            tags: d.tags,
            descriptor: d.descriptor,
            fan_out,
            counts: d.counts,
            expires_at: d.expire_at.map(|t| t.timestamp_millis()),
            to: d.to,
            foreign: d.foreign,
        }
    }
}

fn epoch() -> DateTime {
    DateTime::from_millis(0)
}

impl FeedItemDoc {
    fn into_item(self) -> FeedItem {
        FeedItem {
            owner: self.owner,
            action_id: self.action_id,
            relevancy: self.relevancy.timestamp_millis(),
            reason: self.reason,
            changed: self.changed.timestamp_millis(),
            copy: self
                .x
                .map(|x| std::sync::Arc::new(x.copy(&self.tenant, self.action_id))),
        }
    }
}

/// Classifies a driver error: a database that cannot be reached is
/// `Unavailable` (try again), anything else `Internal`.
fn db_err(err: mongodb::error::Error) -> StoreError {
    use mongodb::error::ErrorKind as K;
    let unavailable = matches!(
        *err.kind,
        K::ServerSelection { .. } | K::Io(_) | K::ConnectionPoolCleared { .. } | K::Shutdown
    ) || err.contains_label("RetryableWriteError")
        || err.contains_label("TransientTransactionError")
        || server_codes(&err).any(|code| STORAGE_FAULTS.contains(&code));
    let kind = if unavailable {
        ErrorKind::Unavailable
    } else {
        ErrorKind::Internal
    };
    StoreError::from_source(kind, "MongoDB", err)
}

/// Server error codes that say the server's storage failed, not the
/// request: `OutOfDiskSpace` (14031), which a server answers a write with
/// once its disk is full. Retried later, the write may succeed.
const STORAGE_FAULTS: [i32; 1] = [14031];

/// The server error codes `err` carries: a command's, a write's, or each
/// of a batch's.
pub(super) fn server_codes(err: &mongodb::error::Error) -> impl Iterator<Item = i32> + '_ {
    use mongodb::error::{ErrorKind as K, WriteFailure};
    let (one, many): (Option<i32>, &[mongodb::error::IndexedWriteError]) = match &*err.kind {
        K::Command(e) => (Some(e.code), &[]),
        K::Write(WriteFailure::WriteError(e)) => (Some(e.code), &[]),
        K::Write(WriteFailure::WriteConcernError(e)) => (Some(e.code), &[]),
        K::InsertMany(e) => (
            e.write_concern_error.as_ref().map(|c| c.code),
            e.write_errors.as_deref().unwrap_or_default(),
        ),
        _ => (None, &[]),
    };
    one.into_iter().chain(many.iter().map(|e| e.code))
}

/// The times a stored date can hold (years 1 to 9999).
const DATES: std::ops::RangeInclusive<Millis> = -62_135_596_800_000..=253_402_300_799_999;

/// `range` with bounds beyond what dates hold dropped (they bound nothing):
/// `Position::MIN` and `MAX` as bounds.
fn dated(mut range: super::FeedRange) -> super::FeedRange {
    if range.older_than.is_some_and(|p| p.relevancy > *DATES.end()) {
        range.older_than = None;
    }
    if range
        .newer_than
        .is_some_and(|p| p.relevancy < *DATES.start())
    {
        range.newer_than = None;
    }
    range
}

/// `all` narrowed to the positions strictly inside `range`'s bounds, exactly:
/// `fields` name the rank (a date) and the id that breaks its ties, the
/// order positions compare in.
fn within(all: Document, (rank, id): (&str, &str), range: &super::FeedRange) -> Document {
    let mut clauses = vec![all];
    for (bound, op) in [(range.older_than, "$lt"), (range.newer_than, "$gt")] {
        if let Some(p) = bound {
            let at = DateTime::from_millis(p.relevancy);
            clauses.push(doc! { "$or": [
                { rank: { op: at } },
                { rank: at, id: { op: p.action_id } },
            ] });
        }
    }
    doc! { "$and": clauses }
}

/// Runs a query and reads its cursor whole.
async fn read_all<T, Q>(query: Q) -> StoreResult<Vec<T>>
where
    Q: std::future::IntoFuture<Output = mongodb::error::Result<mongodb::Cursor<T>>>,
    T: serde::de::DeserializeOwned + Send + Sync + Unpin,
{
    query
        .await
        .map_err(db_err)?
        .try_collect()
        .await
        .map_err(db_err)
}

/// True when a single write failed on a unique index.
fn is_duplicate(err: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind as K, WriteFailure};
    matches!(&*err.kind, K::Write(WriteFailure::WriteError(e)) if e.code == DUPLICATE_KEY)
}

/// A stored document, for messages: its collection and `_id`.
struct DocAt<'a>(&'a str, &'a Document);

impl std::fmt::Display for DocAt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1.get("_id") {
            Some(id) => write!(f, "{} {id}", self.0),
            None => write!(f, "{} (no _id)", self.0),
        }
    }
}

/// The stored code in `field` of `doc` (from `collection`), as `codes`
/// reads it: corrupt if it is missing or unknown.
fn code_of<T: Copy + PartialEq + std::fmt::Debug>(
    codes: &Codes<T>,
    collection: &str,
    doc: &Document,
    field: &str,
) -> StoreResult<T> {
    let at = DocAt(collection, doc);
    match doc.get_str(field) {
        Ok(name) => codes.read_name(name, at),
        Err(_) => Err(StoreError::corrupt(
            at,
            format_args!("no {} in `{field}`", codes.what),
        )),
    }
}

/// The hosts of a MongoDB URI, for messages: never its credentials.
pub fn describe_hosts(options: &ClientOptions) -> String {
    options
        .hosts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A URL safe to log: the password of `scheme://user:password@host/…` masked.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{hosts}{tail}")
        }
        None => url.to_owned(),
    }
}

impl MongoStore {
    /// Connects to the URI (database from its path, `riverfeed` by default),
    /// checks the server answers within the server-selection timeout, and
    /// creates collections and indexes.
    pub async fn connect(uri: &str, settings: &MongoSettings) -> StoreResult<Self> {
        let mut options = ClientOptions::parse(uri).await.map_err(|e| {
            StoreError::from_source(
                ErrorKind::InvalidInput,
                format!("invalid MongoDB URI {}", redact(uri)),
                e,
            )
        })?;
        if options.server_selection_timeout.is_none() {
            options.server_selection_timeout = Some(DEFAULT_SERVER_SELECTION);
        }
        if options.app_name.is_none() {
            options.app_name = Some("riverfeed".into());
        }
        let database = options
            .default_database
            .clone()
            .unwrap_or_else(|| "riverfeed".into());
        Self::connect_with(options, &database, settings).await
    }

    /// Connects with prepared options to one database.
    pub async fn connect_with(
        mut options: ClientOptions,
        database: &str,
        settings: &MongoSettings,
    ) -> StoreResult<Self> {
        let commands: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
        let counter = commands.clone();
        options.command_event_handler = Some(EventHandler::callback(move |event| {
            if let CommandEvent::Started(started) = event {
                let mut counts = counter.lock().unwrap_or_else(|e| e.into_inner());
                *counts.entry(started.command_name).or_default() += 1;
            }
        }));
        let hosts = describe_hosts(&options);
        let client = Client::with_options(options).map_err(|e| {
            StoreError::from_source(
                ErrorKind::InvalidInput,
                format!("invalid MongoDB options for {hosts}"),
                e,
            )
        })?;
        let db = client.database(database);
        db.run_command(doc! { "ping": 1 }).await.map_err(|e| {
            StoreError::from_source(
                ErrorKind::Unavailable,
                format!("cannot reach MongoDB at {hosts}"),
                e,
            )
        })?;
        let layout = Self::resolve_layout(&db, settings.layout).await?;
        let embeds = Self::resolve_embeds(&db, settings.embed_actions).await?;
        let rivers =
            layout::RiverCache::open(&db, settings.river_size, settings.keeps_rivers).await?;
        let store = Self {
            actions: db.collection("actions"),
            layout: layout::open(&db, layout, settings.bucket_size, rivers.clone()),
            rivers,
            embeds,
            users: db.collection("users"),
            relations: db.collection("relations"),
            comments: db.collection("comments"),
            discussions: db.collection("discussions"),
            records: db.collection("records"),
            meta: db.collection("meta"),
            notice_groups: db.collection("notice_groups"),
            jobs: db.collection("jobs"),
            fences: db.collection("fences"),
            event_log: Arc::new(events::MongoEventLog::new(db.collection("events"))),
            db,
            commands,
        };
        store.create_indexes(&settings.ref_fields).await?;
        store.migrate_jobs().await?;
        store.migrate_records().await?;
        store.migrate_relations().await?;
        store.migrate_group_feeds().await?;
        Ok(store)
    }

    /// The layout to open: the one asked for, which must be the one the
    /// database's timelines were written in (a database from before
    /// layouts has items), noted in a new database.
    async fn resolve_layout(
        db: &Database,
        asked: Option<TimelineLayout>,
    ) -> StoreResult<TimelineLayout> {
        let meta = db.collection::<Document>("meta");
        let noted = meta
            .find_one(doc! { "_id": LAYOUT_KEY })
            .await
            .map_err(db_err)?
            .and_then(|d| d.get_str("layout").ok().map(str::to_owned));
        let written = match noted {
            Some(name) => Some(
                TimelineLayout::ALL
                    .into_iter()
                    .find(|l| l.name() == name)
                    .ok_or_else(|| {
                        StoreError::invalid(format!(
                            "this database notes an unknown timeline layout {name:?}"
                        ))
                    })?,
            ),
            None => db
                .collection::<Document>("feed_items")
                .find_one(doc! {})
                .await
                .map_err(db_err)?
                .map(|_| TimelineLayout::Items),
        };
        match (written, asked) {
            (Some(written), Some(asked)) if written != asked => Err(StoreError::invalid(format!(
                "this database keeps its timelines as {written}, not {asked}: start with \
                 --timeline-layout {written}, or `riverfeed export` it and `riverfeed import` it into a \
                 new database to change the layout"
            ))),
            (Some(written), _) => Ok(written),
            (None, asked) => {
                let layout = asked.unwrap_or_default();
                meta.update_one(
                    doc! { "_id": LAYOUT_KEY },
                    doc! { "$set": { "layout": layout.name() } },
                )
                .upsert(true)
                .await
                .map_err(db_err)?;
                Ok(layout)
            }
        }
    }

    /// The database this store uses.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The version a one-time move noted in `meta` under `id` (0: none).
    async fn noted_version(&self, id: &str) -> StoreResult<i32> {
        let noted = self
            .meta
            .find_one(doc! { "_id": id })
            .await
            .map_err(db_err)?;
        Ok(noted.and_then(|d| d.get_i32("version").ok()).unwrap_or(0))
    }

    /// Notes in `meta` that a one-time move reached `version`.
    async fn note_version(&self, id: &str, version: i32) -> StoreResult<()> {
        self.meta
            .update_one(doc! { "_id": id }, doc! { "$set": { "version": version } })
            .upsert(true)
            .await
            .map_err(db_err)?;
        Ok(())
    }
}

#[async_trait]
impl Store for MongoStore {
    fn backend(&self) -> super::Backend {
        super::Backend {
            name: "mongodb",
            event_log: Some(self.event_log.clone()),
        }
    }

    async fn stats(&self, measure: super::Measure) -> StoreResult<super::Stats> {
        let footprint = match measure {
            super::Measure::Counters => None,
            super::Measure::Footprint => Some(self.footprint().await?),
        };
        let counters = self
            .commands
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, count)| (name.clone(), *count))
            .collect();
        Ok(super::Stats {
            counters,
            footprint,
        })
    }
}

impl MongoStore {
    /// Timeline entries, counted, and the documents and bytes (data and
    /// indexes) of the database.
    async fn footprint(&self) -> StoreResult<super::Footprint> {
        let feed_items = self.layout.count().await?;
        let stats = self
            .db
            .run_command(doc! { "dbStats": 1 })
            .await
            .map_err(db_err)?;
        let number = |field: &str| {
            stats
                .get(field)
                .and_then(|v| v.as_f64().or_else(|| v.as_i64().map(|n| n as f64)))
                .or_else(|| stats.get_i32(field).ok().map(f64::from))
                .unwrap_or(0.0)
        };
        let bytes = (number("dataSize") + number("indexSize")) as u64;
        Ok(super::Footprint {
            feed_items,
            bytes,
            documents: number("objects") as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;
    use mongodb::error::{Error, ErrorKind as K, WriteFailure};

    use super::{db_err, redact};
    use crate::store::ErrorKind;

    #[test]
    fn a_full_disk_is_a_storage_fault() {
        let full = doc! { "code": 14031, "codeName": "OutOfDiskSpace", "errmsg": "disk full" };
        let command = Error::from(K::Command(
            bson::from_document(full.clone()).expect("error"),
        ));
        assert_eq!(db_err(command).kind, ErrorKind::Unavailable);
        let write = WriteFailure::WriteError(bson::from_document(full.clone()).expect("error"));
        assert_eq!(
            db_err(Error::from(K::Write(write))).kind,
            ErrorKind::Unavailable
        );
        let mut indexed = full;
        indexed.insert("index", 3);
        let batch = doc! { "writeErrors": [indexed] };
        let batch = K::InsertMany(bson::from_document(batch).expect("error"));
        assert_eq!(db_err(Error::from(batch)).kind, ErrorKind::Unavailable);
        // Other server errors stay internal.
        let other = doc! { "code": 2, "codeName": "BadValue", "errmsg": "bad" };
        let other = Error::from(K::Command(bson::from_document(other).expect("error")));
        assert_eq!(db_err(other).kind, ErrorKind::Internal);
    }

    #[test]
    fn passwords_never_reach_logs() {
        assert_eq!(
            redact("mongodb://app:s3cret@db1:27017,db2:27017/feeds?replicaSet=rs0"),
            "mongodb://app:***@db1:27017,db2:27017/feeds?replicaSet=rs0"
        );
        assert_eq!(
            redact("mongodb+srv://app:p%40ss@cluster.example.net/"),
            "mongodb+srv://app:***@cluster.example.net/"
        );
        assert_eq!(redact("mongodb://db1:27017"), "mongodb://db1:27017");
        assert_eq!(redact("embedded:./data"), "embedded:./data");
    }
}
