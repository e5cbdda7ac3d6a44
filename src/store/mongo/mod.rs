//! The MongoDB backend, for when one machine is not enough: any number of API and
//! worker processes share one replica set or sharded cluster.
//!
//! Collections (created with their indexes at start-up, idempotently):
//! - `actions`: one document per action, the descriptor embedded with a `type`
//!   tag; `fanOut.lockedUntil` exists only while the fan-out is open, so a
//!   partial index on it holds just the claimable work;
//! - `feed_items`: one reference per reader and action, unique on
//!   `{tenant, owner, actionId}` so a re-run delivers nothing twice;
//! - `users`, `edges` (follows and friendships, both directions indexed),
//!   `groups`, `memberships`;
//! - `comments` and `likes` (one per user and action); their counts are kept
//!   on the action with `$inc`;
//! - `assignments` (a user on a ref); a user's supervisor is a field of `users`.
//!
//! No call needs a multi-document transaction, so a standalone `mongod` works as
//! well as a replica set: a delivery that races a hide or delete checks the
//! action again after writing and takes its items back.
//!
//! Export and import of whole stores are in `archive.rs`.

mod archive;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bson::{doc, Bson, DateTime, Document};
use futures_util::TryStreamExt;
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::{ClientOptions, IndexOptions, ReturnDocument};
use mongodb::{Client, Collection, Database, IndexModel};
use serde::{Deserialize, Serialize};

use super::{
    BumpClaim, Claim, Delivery, Direction, ErrorKind, FeedRange, JoinOutcome, Store, StoreError,
    StoreResult, ActionStore, GraphStore, QueueStore, ReactionStore, TimelineStore,
};
use crate::descriptor::{Descriptor, NAMED_REF_FIELDS};
use crate::model::{
    Action, Comment, Counts, EdgeKind, FanOut, FanOutState, FeedItem, Group, GroupKind, Membership,
    MembershipRole, Millis, ObjectId, Position, Reason, Scope, Stamp, User,
};

/// Server-selection timeout unless the URI sets `serverSelectionTimeoutMS`:
/// how long a request waits for a lost database before it answers `UNAVAILABLE`.
pub const DEFAULT_SERVER_SELECTION: Duration = Duration::from_secs(2);

const DUPLICATE_KEY: i32 = 11000;

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
    feed_items: Collection<FeedItemDoc>,
    users: Collection<Document>,
    edges: Collection<Document>,
    groups: Collection<Document>,
    memberships: Collection<Document>,
    comments: Collection<CommentDoc>,
    likes: Collection<Document>,
    assignments: Collection<Document>,
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
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FanOutDoc {
    state: FanOutState,
    /// Present while the fan-out is open: the epoch while pending, the lease's
    /// end while in progress.
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
    /// Present while the comment's bump is to do: the epoch while queued, the
    /// lease's end while a worker holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bump_due: Option<DateTime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bump_worker: Option<String>,
}

impl CommentDoc {
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
}

impl From<&Action> for ActionDoc {
    fn from(a: &Action) -> Self {
        let fan_out = match a.fan_out.state {
            FanOutState::Pending => FanOutDoc {
                state: FanOutState::Pending,
                locked_until: Some(DateTime::from_millis(0)),
                worker: None,
            },
            FanOutState::InProgress => FanOutDoc {
                state: FanOutState::InProgress,
                locked_until: Some(DateTime::from_millis(a.fan_out.locked_until.unwrap_or(0))),
                worker: a.fan_out.worker.clone(),
            },
            FanOutState::Done => FanOutDoc {
                state: FanOutState::Done,
                locked_until: None,
                worker: None,
            },
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
        }
    }
}

impl From<ActionDoc> for Action {
    fn from(d: ActionDoc) -> Self {
        let fan_out = FanOut {
            state: d.fan_out.state,
            locked_until: match d.fan_out.state {
                FanOutState::InProgress => d.fan_out.locked_until.map(|t| t.timestamp_millis()),
                _ => None,
            },
            worker: match d.fan_out.state {
                FanOutState::InProgress => d.fan_out.worker,
                _ => None,
            },
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
        || err.contains_label("TransientTransactionError");
    let kind = if unavailable {
        ErrorKind::Unavailable
    } else {
        ErrorKind::Internal
    };
    StoreError::from_source(kind, "MongoDB", err)
}

/// True when a single write failed on a unique index.
fn is_duplicate(err: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind as K, WriteFailure};
    matches!(&*err.kind, K::Write(WriteFailure::WriteError(e)) if e.code == DUPLICATE_KEY)
}

fn kind_name(kind: EdgeKind) -> &'static str {
    match kind {
        EdgeKind::Follows => "follows",
        EdgeKind::Friend => "friend",
    }
}

fn group_kind_name(kind: GroupKind) -> &'static str {
    match kind {
        GroupKind::Team => "TEAM",
        GroupKind::Department => "DEPARTMENT",
    }
}

fn group_kind_from(name: &str) -> GroupKind {
    if name == "TEAM" {
        GroupKind::Team
    } else {
        GroupKind::Department
    }
}

fn role_name(role: MembershipRole) -> &'static str {
    match role {
        MembershipRole::Member => "MEMBER",
        MembershipRole::Lead => "LEAD",
    }
}

fn role_from(name: &str) -> MembershipRole {
    if name == "LEAD" {
        MembershipRole::Lead
    } else {
        MembershipRole::Member
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

fn keyset(position: Position, older: bool) -> Document {
    let op = if older { "$lt" } else { "$gt" };
    let relevancy = DateTime::from_millis(position.relevancy);
    doc! { "$or": [
        { "relevancy": { op: relevancy } },
        { "relevancy": relevancy, "actionId": { op: position.action_id } },
    ] }
}

impl MongoStore {
    /// Connects to the URI (database from its path, `riverfeed` by default),
    /// checks the server answers within the server-selection timeout, and
    /// creates collections and indexes.
    pub async fn connect(uri: &str) -> StoreResult<Self> {
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
        Self::connect_with(options, &database).await
    }

    /// Connects with prepared options to one database.
    pub async fn connect_with(mut options: ClientOptions, database: &str) -> StoreResult<Self> {
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
        let store = Self {
            actions: db.collection("actions"),
            feed_items: db.collection("feed_items"),
            users: db.collection("users"),
            edges: db.collection("edges"),
            groups: db.collection("groups"),
            memberships: db.collection("memberships"),
            comments: db.collection("comments"),
            likes: db.collection("likes"),
            assignments: db.collection("assignments"),
            db,
            commands,
        };
        store.create_indexes().await?;
        Ok(store)
    }

    /// The database this store uses.
    pub fn database(&self) -> &Database {
        &self.db
    }

    async fn create_indexes(&self) -> StoreResult<()> {
        fn index(keys: Document, options: IndexOptions) -> IndexModel {
            IndexModel::builder().keys(keys).options(options).build()
        }
        fn named(name: &str) -> IndexOptions {
            IndexOptions::builder().name(name.to_owned()).build()
        }
        fn unique(name: &str) -> IndexOptions {
            IndexOptions::builder()
                .name(name.to_owned())
                .unique(true)
                .build()
        }
        fn sparse(name: &str) -> IndexOptions {
            IndexOptions::builder()
                .name(name.to_owned())
                .sparse(true)
                .build()
        }
        let claimable = IndexOptions::builder()
            .name("claimable".to_owned())
            .partial_filter_expression(doc! { "fanOut.lockedUntil": { "$exists": true } })
            .build();
        self.actions
            .create_indexes([
                index(doc! { "tenant": 1, "refIds": 1, "_id": -1 }, named("slice")),
                index(
                    doc! { "tenant": 1, "actorId": 1, "_id": -1 },
                    named("outbox"),
                ),
                index(doc! { "fanOut.lockedUntil": 1, "_id": 1 }, claimable),
                index(doc! { "descriptor.raterId": 1 }, sparse("descriptor_rater")),
                index(
                    doc! { "descriptor.applicantId": 1 },
                    sparse("descriptor_applicant"),
                ),
                index(
                    doc! { "descriptor.positionId": 1 },
                    sparse("descriptor_position"),
                ),
            ])
            .await
            .map_err(db_err)?;
        self.feed_items
            .create_indexes([
                index(
                    doc! { "tenant": 1, "owner": 1, "actionId": 1 },
                    unique("one_item_per_reader"),
                ),
                index(
                    doc! { "tenant": 1, "owner": 1, "relevancy": -1, "actionId": -1 },
                    named("timeline"),
                ),
                index(doc! { "tenant": 1, "actionId": 1 }, named("by_action")),
                index(
                    doc! { "tenant": 1, "owner": 1, "changed": 1, "actionId": 1 },
                    named("changes"),
                ),
            ])
            .await
            .map_err(db_err)?;
        self.users
            .create_indexes([
                index(doc! { "tenant": 1, "userId": 1 }, unique("user")),
                index(
                    doc! { "tenant": 1, "supervisorId": 1, "userId": 1 },
                    named("supervisees"),
                ),
            ])
            .await
            .map_err(db_err)?;
        self.edges
            .create_indexes([
                index(
                    doc! { "tenant": 1, "kind": 1, "from": 1, "to": 1 },
                    unique("edge_out"),
                ),
                index(
                    doc! { "tenant": 1, "kind": 1, "to": 1, "from": 1 },
                    named("edge_in"),
                ),
            ])
            .await
            .map_err(db_err)?;
        self.groups
            .create_index(index(doc! { "tenant": 1, "groupId": 1 }, unique("group")))
            .await
            .map_err(db_err)?;
        self.memberships
            .create_indexes([
                index(
                    doc! { "tenant": 1, "groupId": 1, "userId": 1 },
                    unique("member"),
                ),
                index(
                    doc! { "tenant": 1, "userId": 1, "groupId": 1 },
                    named("member_of"),
                ),
            ])
            .await
            .map_err(db_err)?;
        let bumpable = IndexOptions::builder()
            .name("bumpable".to_owned())
            .partial_filter_expression(doc! { "bumpDue": { "$exists": true } })
            .build();
        self.comments
            .create_indexes([
                index(
                    doc! { "tenant": 1, "actionId": 1, "_id": 1 },
                    named("thread"),
                ),
                index(doc! { "bumpDue": 1, "_id": 1 }, bumpable),
            ])
            .await
            .map_err(db_err)?;
        self.likes
            .create_indexes([
                index(
                    doc! { "tenant": 1, "actionId": 1, "userId": 1 },
                    unique("one_like"),
                ),
                index(
                    doc! { "tenant": 1, "userId": 1, "actionId": 1 },
                    named("liked"),
                ),
            ])
            .await
            .map_err(db_err)?;
        self.assignments
            .create_indexes([
                index(
                    doc! { "tenant": 1, "refId": 1, "userId": 1 },
                    unique("assigned_to"),
                ),
                index(
                    doc! { "tenant": 1, "userId": 1, "refId": 1 },
                    named("assignments"),
                ),
            ])
            .await
            .map_err(db_err)?;
        Ok(())
    }

    /// Adds `by` to one of an action's counters; the counts after, or `None`
    /// if there is no such action.
    async fn count(
        &self,
        tenant: &str,
        id: ObjectId,
        counter: &str,
        by: i64,
    ) -> StoreResult<Option<Counts>> {
        let updated = self
            .actions
            .find_one_and_update(
                doc! { "_id": id, "tenant": tenant },
                doc! { "$inc": { format!("counts.{counter}"): by } },
            )
            .return_document(ReturnDocument::After)
            .await
            .map_err(db_err)?;
        Ok(updated.map(|doc| doc.counts))
    }

    async fn find_action(&self, tenant: &str, id: ObjectId) -> StoreResult<Option<Action>> {
        Ok(self
            .actions
            .find_one(doc! { "_id": id, "tenant": tenant })
            .await
            .map_err(db_err)?
            .map(Action::from))
    }

    /// Checks `claim` still holds its lease and extends it to `until`. `Ok(None)`
    /// when the action is gone, `LeaseLost` when another worker holds it.
    async fn renew_lease(&self, claim: &Claim, until: Millis) -> StoreResult<Option<Action>> {
        let id = claim.action.id;
        let tenant = claim.action.tenant.as_str();
        let renewed = self
            .actions
            .find_one_and_update(
                doc! {
                    "_id": id,
                    "tenant": tenant,
                    "fanOut.state": "IN_PROGRESS",
                    "fanOut.worker": &claim.worker,
                },
                doc! { "$set": { "fanOut.lockedUntil": DateTime::from_millis(until) } },
            )
            .return_document(ReturnDocument::After)
            .await
            .map_err(db_err)?;
        match renewed {
            Some(doc) => Ok(Some(doc.into())),
            None => self.lease_lost(tenant, id).await.map(|()| None),
        }
    }

    /// Checks that `claim` still holds its bump job and extends its lease to
    /// `until`, or with `None` marks the job done. `Ok(false)` when the comment
    /// is gone, `LeaseLost` when another worker holds the job.
    async fn renew_bump(&self, claim: &BumpClaim, until: Option<DateTime>) -> StoreResult<bool> {
        let filter = doc! {
            "_id": claim.comment.id,
            "tenant": &claim.tenant,
            "bumpWorker": &claim.worker,
        };
        let update = match until {
            Some(until) => doc! { "$set": { "bumpDue": until } },
            None => doc! { "$unset": { "bumpDue": "", "bumpWorker": "" } },
        };
        let result = self
            .comments
            .update_one(filter, update)
            .await
            .map_err(db_err)?;
        if result.matched_count == 1 {
            return Ok(true);
        }
        let current = self
            .comments
            .find_one(doc! { "_id": claim.comment.id, "tenant": &claim.tenant })
            .await
            .map_err(db_err)?;
        match current {
            None => Ok(false),
            Some(doc) => Err(StoreError::new(
                ErrorKind::LeaseLost,
                format!(
                    "bump for comment {} is held by {}",
                    claim.comment.id,
                    doc.bump_worker.as_deref().unwrap_or("nobody (done)")
                ),
            )),
        }
    }

    /// Explains a failed lease check: `Ok` if the action was deleted, else `LeaseLost`.
    async fn lease_lost(&self, tenant: &str, id: ObjectId) -> StoreResult<()> {
        match self.find_action(tenant, id).await? {
            None => Ok(()),
            Some(action) => Err(StoreError::new(
                ErrorKind::LeaseLost,
                format!(
                    "fan-out of {id} is {:?} by {}",
                    action.fan_out.state,
                    action.fan_out.worker.as_deref().unwrap_or("nobody")
                ),
            )),
        }
    }

    /// Feed items matching `filter` in timeline order (newest first, or oldest
    /// first when `ascending`), at most `limit`.
    async fn timeline(
        &self,
        filter: Document,
        ascending: bool,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        let direction = if ascending { 1 } else { -1 };
        let docs: Vec<FeedItemDoc> = self
            .feed_items
            .find(filter)
            .sort(doc! { "relevancy": direction, "actionId": direction })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        Ok(docs.into_iter().map(FeedItemDoc::into_item).collect())
    }

    async fn remove_items(&self, tenant: &str, id: ObjectId) -> StoreResult<Vec<FeedItem>> {
        let items: Vec<FeedItemDoc> = self
            .feed_items
            .find(doc! { "tenant": tenant, "actionId": id })
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        self.feed_items
            .delete_many(doc! { "tenant": tenant, "actionId": id })
            .await
            .map_err(db_err)?;
        Ok(items
            .into_iter()
            .filter(|doc| !doc.hidden)
            .map(FeedItemDoc::into_item)
            .collect())
    }

    async fn strings(
        &self,
        collection: &Collection<Document>,
        filter: Document,
        field: &str,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let docs: Vec<Document> = collection
            .find(filter)
            .sort(doc! { field: 1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .projection(doc! { field: 1, "_id": 0 })
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        Ok(docs
            .into_iter()
            .filter_map(|d| d.get_str(field).ok().map(str::to_owned))
            .collect())
    }
}

#[async_trait]
impl Store for MongoStore {
    fn backend(&self) -> &'static str {
        "mongodb"
    }

    fn backend_metrics(&self) -> Vec<(String, u64)> {
        self.commands
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, count)| (name.clone(), *count))
            .collect()
    }

    async fn ping(&self) -> StoreResult<()> {
        self.db
            .run_command(doc! { "ping": 1 })
            .await
            .map(|_| ())
            .map_err(db_err)
    }
}

#[async_trait]
impl GraphStore for MongoStore {
    async fn upsert_user(&self, tenant: &str, user: &User) -> StoreResult<()> {
        let name = user.name.as_deref().map_or(Bson::Null, Bson::from);
        self.users
            .update_one(
                doc! { "tenant": tenant, "userId": &user.id },
                doc! { "$set": { "name": name } },
            )
            .upsert(true)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn ensure_user(&self, tenant: &str, id: &str) -> StoreResult<()> {
        let result = self
            .users
            .update_one(
                doc! { "tenant": tenant, "userId": id },
                doc! { "$setOnInsert": { "name": Bson::Null } },
            )
            .upsert(true)
            .await;
        match result {
            // Two upserts racing: the loser's insert hits the unique index, and
            // the user exists, which is all this call promises.
            Err(err) if is_duplicate(&err) => Ok(()),
            other => other.map(|_| ()).map_err(db_err),
        }
    }

    async fn get_users(&self, tenant: &str, ids: &[String]) -> StoreResult<Vec<User>> {
        let docs: Vec<Document> = self
            .users
            .find(doc! { "tenant": tenant, "userId": { "$in": ids } })
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        Ok(docs
            .into_iter()
            .filter_map(|d| {
                Some(User {
                    id: d.get_str("userId").ok()?.to_owned(),
                    name: d.get_str("name").ok().map(str::to_owned),
                })
            })
            .collect())
    }

    async fn set_edge(
        &self,
        tenant: &str,
        kind: EdgeKind,
        from: &str,
        to: &str,
        on: bool,
    ) -> StoreResult<bool> {
        let kind = kind_name(kind);
        let forward = doc! { "tenant": tenant, "kind": kind, "from": from, "to": to };
        let backward = doc! { "tenant": tenant, "kind": kind, "from": to, "to": from };
        let symmetric = kind == "friend";
        if !on {
            let removed = self.edges.delete_one(forward).await.map_err(db_err)?;
            if symmetric {
                self.edges.delete_one(backward).await.map_err(db_err)?;
            }
            return Ok(removed.deleted_count > 0);
        }
        self.ensure_user(tenant, from).await?;
        let mut docs = vec![forward];
        if symmetric {
            docs.push(backward);
        }
        let mut added = false;
        for (i, edge) in docs.into_iter().enumerate() {
            match self.edges.insert_one(edge).await {
                Ok(_) => added |= i == 0,
                Err(err) if is_duplicate(&err) => {}
                Err(err) => return Err(db_err(err)),
            }
        }
        Ok(added)
    }

    async fn edges(
        &self,
        tenant: &str,
        kind: EdgeKind,
        direction: Direction,
        user: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let (anchor, other) = match (kind, direction) {
            (EdgeKind::Follows, Direction::In) => ("to", "from"),
            _ => ("from", "to"),
        };
        let mut filter = doc! { "tenant": tenant, "kind": kind_name(kind), anchor: user };
        if let Some(after) = after {
            filter.insert(other, doc! { "$gt": after });
        }
        self.strings(&self.edges, filter, other, limit).await
    }

    async fn join_group(
        &self,
        tenant: &str,
        group: &Group,
        user: &str,
        role: MembershipRole,
    ) -> StoreResult<JoinOutcome> {
        let filter = doc! { "tenant": tenant, "groupId": &group.id };
        let upsert = self
            .groups
            .find_one_and_update(
                filter.clone(),
                doc! { "$setOnInsert": { "kind": group_kind_name(group.kind) } },
            )
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await;
        let existing = match upsert {
            Ok(doc) => doc,
            // A concurrent first join created it: read what it created.
            Err(err) if is_duplicate(&err) => self.groups.find_one(filter).await.map_err(db_err)?,
            Err(err) => return Err(db_err(err)),
        };
        let kind = existing
            .as_ref()
            .and_then(|d| d.get_str("kind").ok())
            .map_or(group.kind, group_kind_from);
        if kind != group.kind {
            return Ok(JoinOutcome::KindMismatch(Group {
                id: group.id.clone(),
                kind,
            }));
        }
        self.memberships
            .update_one(
                doc! { "tenant": tenant, "groupId": &group.id, "userId": user },
                doc! { "$set": { "kind": group_kind_name(kind), "role": role_name(role) } },
            )
            .upsert(true)
            .await
            .map_err(db_err)?;
        self.ensure_user(tenant, user).await?;
        Ok(JoinOutcome::Joined(Membership {
            group_id: group.id.clone(),
            kind,
            role,
        }))
    }

    async fn leave_group(&self, tenant: &str, group_id: &str, user: &str) -> StoreResult<bool> {
        let removed = self
            .memberships
            .delete_one(doc! { "tenant": tenant, "groupId": group_id, "userId": user })
            .await
            .map_err(db_err)?;
        Ok(removed.deleted_count > 0)
    }

    async fn group_members(
        &self,
        tenant: &str,
        group_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let mut filter = doc! { "tenant": tenant, "groupId": group_id };
        if let Some(after) = after {
            filter.insert("userId", doc! { "$gt": after });
        }
        self.strings(&self.memberships, filter, "userId", limit)
            .await
    }

    async fn memberships(&self, tenant: &str, user: &str) -> StoreResult<Vec<Membership>> {
        let docs: Vec<Document> = self
            .memberships
            .find(doc! { "tenant": tenant, "userId": user })
            .sort(doc! { "groupId": 1 })
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        Ok(docs
            .into_iter()
            .filter_map(|d| {
                Some(Membership {
                    group_id: d.get_str("groupId").ok()?.to_owned(),
                    kind: group_kind_from(d.get_str("kind").ok()?),
                    role: role_from(d.get_str("role").unwrap_or("MEMBER")),
                })
            })
            .collect())
    }

    async fn set_assignment(
        &self,
        tenant: &str,
        user: &str,
        ref_id: &str,
        on: bool,
    ) -> StoreResult<bool> {
        let assignment = doc! { "tenant": tenant, "refId": ref_id, "userId": user };
        if on {
            match self.assignments.insert_one(assignment).await {
                Ok(_) => Ok(true),
                Err(err) if is_duplicate(&err) => Ok(false),
                Err(err) => Err(db_err(err)),
            }
        } else {
            let removed = self
                .assignments
                .delete_one(assignment)
                .await
                .map_err(db_err)?;
            Ok(removed.deleted_count > 0)
        }
    }

    async fn assignees(
        &self,
        tenant: &str,
        ref_ids: &[String],
    ) -> StoreResult<Vec<(String, String)>> {
        let docs: Vec<Document> = self
            .assignments
            .find(doc! { "tenant": tenant, "refId": { "$in": ref_ids } })
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        Ok(docs
            .into_iter()
            .filter_map(|d| {
                Some((
                    d.get_str("refId").ok()?.to_owned(),
                    d.get_str("userId").ok()?.to_owned(),
                ))
            })
            .collect())
    }

    async fn assignments(&self, tenant: &str, user: &str) -> StoreResult<Vec<String>> {
        self.strings(
            &self.assignments,
            doc! { "tenant": tenant, "userId": user },
            "refId",
            usize::MAX,
        )
        .await
    }

    async fn set_supervisor(
        &self,
        tenant: &str,
        user: &str,
        supervisor: Option<&str>,
    ) -> StoreResult<()> {
        let filter = doc! { "tenant": tenant, "userId": user };
        let update = match supervisor {
            Some(s) => doc! { "$set": { "supervisorId": s } },
            None => doc! { "$unset": { "supervisorId": "" } },
        };
        let result = self
            .users
            .update_one(filter.clone(), update.clone())
            .upsert(true)
            .await;
        match result {
            // An upsert that lost a race to create the user: the user exists
            // now, so a plain update does.
            Err(err) if is_duplicate(&err) => self
                .users
                .update_one(filter, update)
                .await
                .map(|_| ())
                .map_err(db_err),
            other => other.map(|_| ()).map_err(db_err),
        }
    }

    async fn supervisor(&self, tenant: &str, user: &str) -> StoreResult<Option<String>> {
        let doc = self
            .users
            .find_one(doc! { "tenant": tenant, "userId": user })
            .await
            .map_err(db_err)?;
        Ok(doc.and_then(|d| d.get_str("supervisorId").ok().map(str::to_owned)))
    }

    async fn supervisees(&self, tenant: &str, supervisor: &str) -> StoreResult<Vec<String>> {
        let docs: Vec<Document> = self
            .users
            .find(doc! { "tenant": tenant, "supervisorId": supervisor })
            .sort(doc! { "userId": 1 })
            .projection(doc! { "userId": 1, "_id": 0 })
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        Ok(docs
            .iter()
            .filter_map(|d| d.get_str("userId").ok().map(str::to_owned))
            .collect())
    }
}

#[async_trait]
impl ActionStore for MongoStore {
    async fn insert_action(&self, action: &Action) -> StoreResult<()> {
        self.actions
            .insert_one(ActionDoc::from(action))
            .await
            .map_err(db_err)?;
        self.ensure_user(&action.tenant, &action.actor_id).await
    }

    async fn get_actions(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<Vec<Action>> {
        let docs: Vec<ActionDoc> = self
            .actions
            .find(doc! { "tenant": tenant, "_id": { "$in": ids } })
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        Ok(docs.into_iter().map(Action::from).collect())
    }

    async fn hide_action(&self, tenant: &str, id: ObjectId) -> StoreResult<Vec<FeedItem>> {
        let updated = self
            .actions
            .update_one(
                doc! { "_id": id, "tenant": tenant },
                doc! { "$set": { "hidden": true } },
            )
            .await
            .map_err(db_err)?;
        if updated.matched_count == 0 {
            return Err(StoreError::not_found(format!("no action {id}")));
        }
        self.remove_items(tenant, id).await
    }

    async fn delete_action(&self, tenant: &str, id: ObjectId) -> StoreResult<Vec<FeedItem>> {
        // The action goes first: a delivery racing this one checks it again
        // after writing and takes its items back.
        let deleted = self
            .actions
            .delete_one(doc! { "_id": id, "tenant": tenant })
            .await
            .map_err(db_err)?;
        if deleted.deleted_count == 0 {
            return Err(StoreError::not_found(format!("no action {id}")));
        }
        let reactions = doc! { "tenant": tenant, "actionId": id };
        self.comments
            .delete_many(reactions.clone())
            .await
            .map_err(db_err)?;
        self.likes.delete_many(reactions).await.map_err(db_err)?;
        self.remove_items(tenant, id).await
    }

    async fn set_action_scope(
        &self,
        tenant: &str,
        id: ObjectId,
        scope: Scope,
        readers: &[String],
        scope_groups: &[String],
    ) -> StoreResult<Action> {
        let scope = bson::to_bson(&scope)
            .map_err(|e| StoreError::internal("MongoDB: cannot encode a scope", e))?;
        let updated = self
            .actions
            .find_one_and_update(
                doc! { "_id": id, "tenant": tenant },
                doc! {
                    "$set": {
                        "scope": scope,
                        "readers": readers,
                        "scopeGroups": scope_groups,
                        "fanOut.state": "PENDING",
                        "fanOut.lockedUntil": DateTime::from_millis(0),
                    },
                    "$unset": { "fanOut.worker": "" },
                },
            )
            .return_document(ReturnDocument::After)
            .await
            .map_err(db_err)?;
        updated
            .map(Action::from)
            .ok_or_else(|| StoreError::not_found(format!("no action {id}")))
    }

    async fn slice(
        &self,
        tenant: &str,
        ref_id: &str,
        before: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<ObjectId>> {
        let mut filter = doc! { "tenant": tenant, "refIds": ref_id };
        if let Some(before) = before {
            filter.insert("_id", doc! { "$lt": before });
        }
        let docs: Vec<Document> = self
            .actions
            .clone_with_type::<Document>()
            .find(filter)
            .sort(doc! { "_id": -1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .projection(doc! { "_id": 1 })
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        Ok(docs
            .into_iter()
            .filter_map(|d| d.get_object_id("_id").ok())
            .collect())
    }

    async fn rename_ref(&self, tenant: &str, ref_id: &str, name: &str) -> StoreResult<u64> {
        // One updateMany per id / name pair: the server rewrites its matches
        // in place, without shipping actions back and forth.
        let mut changed = 0;
        for (id_field, name_field) in NAMED_REF_FIELDS {
            let name_path = format!("descriptor.{name_field}");
            let result = self
                .actions
                .update_many(
                    doc! {
                        "tenant": tenant,
                        format!("descriptor.{id_field}"): ref_id,
                        name_path.clone(): { "$ne": name },
                    },
                    doc! { "$set": { name_path: name } },
                )
                .await
                .map_err(db_err)?;
            changed += result.modified_count;
        }
        Ok(changed)
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
        let docs: Vec<CommentDoc> = self
            .comments
            .find(filter)
            .sort(doc! { "_id": 1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
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

    async fn liked(
        &self,
        tenant: &str,
        user: &str,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>> {
        let docs: Vec<Document> = self
            .likes
            .find(doc! { "tenant": tenant, "userId": user, "actionId": { "$in": action_ids } })
            .projection(doc! { "actionId": 1, "_id": 0 })
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        Ok(docs
            .into_iter()
            .filter_map(|d| d.get_object_id("actionId").ok())
            .collect())
    }
}

#[async_trait]
impl QueueStore for MongoStore {
    async fn claim_fan_out(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Claim>> {
        let until = DateTime::from_millis(now + lease_ms);
        let mut claims = Vec::new();
        // One findAndModify per action: each claim is atomic, so two workers
        // never hold the same action.
        while claims.len() < limit {
            let claimed = self
                .actions
                .find_one_and_update(
                    doc! { "fanOut.lockedUntil": { "$lte": DateTime::from_millis(now) } },
                    doc! { "$set": {
                        "fanOut.state": "IN_PROGRESS",
                        "fanOut.lockedUntil": until,
                        "fanOut.worker": worker,
                    } },
                )
                .sort(doc! { "fanOut.lockedUntil": 1, "_id": 1 })
                .return_document(ReturnDocument::After)
                .await
                .map_err(db_err)?;
            let Some(doc) = claimed else { break };
            claims.push(Claim {
                action: doc.into(),
                worker: worker.to_owned(),
                lease_ms,
            });
        }
        Ok(claims)
    }

    async fn deliver(
        &self,
        claim: &Claim,
        now: Millis,
        items: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        let Some(action) = self.renew_lease(claim, now + claim.lease_ms).await? else {
            return Ok(Vec::new());
        };
        if action.hidden || items.is_empty() {
            return Ok(Vec::new());
        }
        let docs: Vec<FeedItemDoc> = items
            .iter()
            .map(|d| FeedItemDoc {
                tenant: action.tenant.clone(),
                owner: d.owner.clone(),
                action_id: action.id,
                relevancy: DateTime::from_millis(d.relevancy),
                reason: d.reason.clone(),
                changed: DateTime::from_millis(now),
                hidden: false,
            })
            .collect();
        // Unordered: one duplicate (a reader who already has the item, from an
        // earlier run or a hidden tombstone) must not stop the others.
        let skipped: HashSet<usize> = match self.feed_items.insert_many(docs).ordered(false).await {
            Ok(_) => HashSet::new(),
            Err(err) => match &*err.kind {
                mongodb::error::ErrorKind::InsertMany(failure)
                    if failure.write_concern_error.is_none()
                        && failure
                            .write_errors
                            .iter()
                            .flatten()
                            .all(|e| e.code == DUPLICATE_KEY) =>
                {
                    failure
                        .write_errors
                        .iter()
                        .flatten()
                        .map(|e| e.index)
                        .collect()
                }
                _ => return Err(db_err(err)),
            },
        };
        // Hidden or deleted while we wrote: take the items back.
        let still_visible = self
            .find_action(&action.tenant, action.id)
            .await?
            .is_some_and(|a| !a.hidden);
        if !still_visible {
            self.feed_items
                .delete_many(doc! { "tenant": &action.tenant, "actionId": action.id })
                .await
                .map_err(db_err)?;
            return Ok(Vec::new());
        }
        Ok(items
            .iter()
            .enumerate()
            .filter(|(i, _)| !skipped.contains(i))
            .map(|(_, d)| FeedItem {
                owner: d.owner.clone(),
                action_id: action.id,
                relevancy: d.relevancy,
                reason: d.reason.clone(),
                changed: now,
            })
            .collect())
    }

    async fn finish_fan_out(&self, claim: &Claim) -> StoreResult<()> {
        let id = claim.action.id;
        let tenant = claim.action.tenant.as_str();
        let finished = self
            .actions
            .update_one(
                doc! {
                    "_id": id,
                    "tenant": tenant,
                    "fanOut.state": "IN_PROGRESS",
                    "fanOut.worker": &claim.worker,
                },
                doc! {
                    "$set": { "fanOut.state": "DONE" },
                    "$unset": { "fanOut.lockedUntil": "", "fanOut.worker": "" },
                },
            )
            .await
            .map_err(db_err)?;
        if finished.matched_count == 0 {
            return self.lease_lost(tenant, id).await;
        }
        Ok(())
    }

    async fn claim_bumps(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<BumpClaim>> {
        let until = DateTime::from_millis(now + lease_ms);
        let mut claims = Vec::new();
        while claims.len() < limit {
            let claimed = self
                .comments
                .find_one_and_update(
                    doc! { "bumpDue": { "$lte": DateTime::from_millis(now) } },
                    doc! { "$set": { "bumpDue": until, "bumpWorker": worker } },
                )
                .sort(doc! { "bumpDue": 1, "_id": 1 })
                .return_document(ReturnDocument::After)
                .await
                .map_err(db_err)?;
            let Some(doc) = claimed else { break };
            claims.push(BumpClaim {
                tenant: doc.tenant.clone(),
                comment: doc.into_comment(),
                worker: worker.to_owned(),
                lease_ms,
            });
        }
        Ok(claims)
    }

    async fn bump(
        &self,
        claim: &BumpClaim,
        now: Millis,
        bumps: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        if !self
            .renew_bump(claim, Some(DateTime::from_millis(now + claim.lease_ms)))
            .await?
        {
            return Ok(Vec::new());
        }
        let tenant = claim.tenant.as_str();
        let action_id = claim.comment.action_id;
        let changed = DateTime::from_millis(now);
        // Readers a rule matches share their target and reason: one
        // conditional update for each such group raises them all, only
        // upwards, however many workers bump at once (tombstones sit at the
        // epoch and are never raised); a read of what it raised follows.
        let mut groups: Vec<(&Delivery, Vec<&str>)> = Vec::new();
        for bump in bumps {
            match groups
                .iter_mut()
                .find(|(first, _)| first.relevancy == bump.relevancy && first.reason == bump.reason)
            {
                Some((_, owners)) => owners.push(&bump.owner),
                None => groups.push((bump, vec![&bump.owner])),
            }
        }
        let mut raised = Vec::new();
        for (bump, owners) in groups {
            let relevancy = DateTime::from_millis(bump.relevancy);
            let reason = bson::to_bson(&bump.reason)
                .map_err(|e| StoreError::internal("MongoDB: encoding a reason", e))?;
            let updated = self
                .feed_items
                .update_many(
                    doc! {
                        "tenant": tenant,
                        "actionId": action_id,
                        "owner": { "$in": &owners },
                        "relevancy": { "$gt": epoch(), "$lt": relevancy },
                    },
                    doc! { "$set": { "relevancy": relevancy, "reason": reason, "changed": changed } },
                )
                .await
                .map_err(db_err)?;
            if updated.modified_count == 0 {
                continue;
            }
            let docs: Vec<FeedItemDoc> = self
                .feed_items
                .find(doc! {
                    "tenant": tenant,
                    "actionId": action_id,
                    "owner": { "$in": &owners },
                    "relevancy": relevancy,
                    "changed": changed,
                })
                .await
                .map_err(db_err)?
                .try_collect()
                .await
                .map_err(db_err)?;
            raised.extend(docs.into_iter().map(FeedItemDoc::into_item));
        }
        Ok(raised)
    }

    async fn finish_bump(&self, claim: &BumpClaim) -> StoreResult<()> {
        self.renew_bump(claim, None).await.map(|_| ())
    }
}

#[async_trait]
impl TimelineStore for MongoStore {
    async fn feed_changes(
        &self,
        tenant: &str,
        owner: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        let changed = DateTime::from_millis(after.changed);
        let docs: Vec<FeedItemDoc> = self
            .feed_items
            .find(doc! {
                "tenant": tenant,
                "owner": owner,
                "relevancy": { "$gt": epoch() },
                "$or": [
                    { "changed": { "$gt": changed } },
                    { "changed": changed, "actionId": { "$gt": after.action_id } },
                ],
            })
            .sort(doc! { "changed": 1, "actionId": 1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)?;
        Ok(docs.into_iter().map(FeedItemDoc::into_item).collect())
    }

    async fn feed_page(
        &self,
        tenant: &str,
        owner: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<FeedItem>> {
        // One range on `relevancy` (above the tombstones' epoch), read a little
        // past the limit so that items sharing the boundary's millisecond can be
        // cut exactly here: plain ranges on indexed fields keep every query
        // planner on the timeline index. The bounds are strict, on whole
        // milliseconds (`> r - 1` for `>= r`): the same range, in the form every
        // MongoDB-compatible server we test against answers right through an index.
        let lower = range
            .newer_than
            .map_or(TOMBSTONE, |p| (p.relevancy - 1).max(TOMBSTONE));
        let mut relevancy = doc! { "$gt": DateTime::from_millis(lower) };
        if let Some(p) = range.older_than {
            relevancy.insert("$lt", DateTime::from_millis(p.relevancy.saturating_add(1)));
        }
        let filter = doc! { "tenant": tenant, "owner": owner, "relevancy": relevancy };
        let slack =
            TIE_SLACK * (range.older_than.is_some() as usize + range.newer_than.is_some() as usize);
        let fetch = range.limit.saturating_add(slack);
        let in_range = |item: &FeedItem| {
            let position = item.position();
            range.older_than.is_none_or(|p| position < p)
                && range.newer_than.is_none_or(|p| position > p)
        };
        let read = self.timeline(filter, range.from_oldest, fetch).await?;
        let cut_short = read.len() == fetch;
        let mut items: Vec<FeedItem> = read.into_iter().filter(in_range).collect();
        if items.len() < range.limit && cut_short {
            // More items share a boundary millisecond than the slack covered:
            // ask with the exact keyset instead.
            let mut clauses = vec![doc! {
                "tenant": tenant,
                "owner": owner,
                "relevancy": { "$gt": DateTime::from_millis(TOMBSTONE) },
            }];
            if let Some(p) = range.older_than {
                clauses.push(keyset(p, true));
            }
            if let Some(p) = range.newer_than {
                clauses.push(keyset(p, false));
            }
            items = self
                .timeline(doc! { "$and": clauses }, range.from_oldest, range.limit)
                .await?;
        }
        items.truncate(range.limit);
        if range.from_oldest {
            items.reverse();
        }
        Ok(items)
    }

    async fn hide_feed_item(
        &self,
        tenant: &str,
        owner: &str,
        action_id: ObjectId,
    ) -> StoreResult<Option<FeedItem>> {
        // The item becomes a tombstone: it keeps its place in the unique index
        // (so it is not delivered again) and drops below every feed range.
        let before = self
            .feed_items
            .find_one_and_update(
                doc! {
                    "tenant": tenant,
                    "owner": owner,
                    "actionId": action_id,
                    "relevancy": { "$gt": DateTime::from_millis(TOMBSTONE) },
                },
                doc! { "$set": { "hidden": true, "relevancy": DateTime::from_millis(TOMBSTONE) } },
            )
            .return_document(ReturnDocument::Before)
            .await
            .map_err(db_err)?;
        Ok(before.map(FeedItemDoc::into_item))
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

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
