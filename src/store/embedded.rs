//! The embedded backend: one redb file under the data directory.
//!
//! redb runs one write transaction at a time, so each call here is one
//! transaction and the fan-out worker hands many deliveries to a single call
//! (group commit). redb is blocking; every call runs on tokio's blocking pool.
//!
//! Key layout (all keys start with the tenant, so nothing crosses tenants):
//! - `feed`       `(tenant, owner, relevancy, actionId)` → reason and change
//!   stamp: feed range scans;
//! - `feed_changes` `(tenant, owner, changed, actionId)`: the feed in the order it
//!   changed, for resumable subscriptions;
//! - `feed_index` `(tenant, owner, actionId)` → `(relevancy, hidden)`: idempotent
//!   delivery, hidden-item tombstones, cheap moves of one item;
//! - `readers`    `(tenant, actionId, owner)`: who got an action, for cascades;
//! - `actions`    `(tenant, actionId)` → JSON; `slices` `(tenant, refId, actionId)`;
//! - `pending`    `(actionId, tenant)` → `(lockedUntil, worker)`: the fan-out queue,
//!   oldest first across tenants;
//! - `edges`      `(tenant, kind, from, to)`, both directions of every edge;
//! - `users`, `groups`, `members` `(tenant, group, user)`, `member_of` `(tenant, user, group)`;
//! - `comments` `(tenant, actionId, commentId)` → JSON and `likes`
//!   `(tenant, actionId, user)`; their counts live in the action's record;
//! - `assigned_to` `(tenant, refId, user)` and `assignments` `(tenant, user,
//!   refId)`; `supervisors` `(tenant, user)` → supervisor and `supervisees`
//!   `(tenant, supervisor, user)`;
//! - `bumps` `(commentId, tenant)` → `(lockedUntil, worker, actionId)`: the queue
//!   of comments whose bump is still to do.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::stream::{self, BoxStream, StreamExt};
use redb::{Database, ReadableTable, TableDefinition, TableHandle};

use super::{
    Archive, BumpClaim, Claim, Delivery, Direction, ErrorKind, FeedRange, JoinOutcome, Record,
    Store, StoreError, StoreResult,
};
use crate::model::{
    Action, Comment, Counts, EdgeKind, FanOut, FanOutState, FeedItem, Group, GroupKind, Membership,
    MembershipRole, Millis, ObjectId, Reason, Scope, Stamp, User,
};

type Oid = [u8; 12];
/// A tenant or user id as raw bytes in a key (see the feed tables).
type Bytes = &'static [u8];

const USERS: TableDefinition<(&str, &str), Option<&str>> = TableDefinition::new("users");
const EDGES: TableDefinition<(&str, u8, &str, &str), ()> = TableDefinition::new("edges");
const GROUPS: TableDefinition<(&str, &str), u8> = TableDefinition::new("groups");
const MEMBERS: TableDefinition<(&str, &str, &str), u8> = TableDefinition::new("members");
const MEMBER_OF: TableDefinition<(&str, &str, &str), (u8, u8)> = TableDefinition::new("member_of");
const ACTIONS: TableDefinition<(&str, Oid), &[u8]> = TableDefinition::new("actions");
const SLICES: TableDefinition<(&str, &str, Oid), ()> = TableDefinition::new("slices");
const PENDING: TableDefinition<(Oid, &str), (i64, &str)> = TableDefinition::new("pending");
// The feed tables are the hot path of every fan-out, so their keys hold the
// tenant and owner as raw bytes: a byte key compares with one `memcmp`, where a
// `&str` key is checked as UTF-8 again on every comparison inside the B-tree.
/// `(tenant, owner, relevancy, action)` → the item (reason, change stamp): a
/// reader's feed in relevancy order.
const FEED: TableDefinition<(Bytes, Bytes, i64, Oid), &[u8]> = TableDefinition::new("feed_items");
/// `(tenant, owner, action)` → `(relevancy, hidden)`: finds a reader's item of
/// an action; `hidden` 1 is a tombstone the reader asked for.
const FEED_INDEX: TableDefinition<(Bytes, Bytes, Oid), (i64, u8)> =
    TableDefinition::new("feed_by_action");
/// `(tenant, action, first owner)` → the owners one delivery batch wrote, packed
/// (see [`pack_owners`]): one entry per batch rather than per reader, read back
/// only when the action is hidden or deleted.
const READERS: TableDefinition<(Bytes, Oid, Bytes), &[u8]> = TableDefinition::new("action_readers");
/// Table names of the first store format, whose feed keys were strings.
const FORMAT_1_TABLES: [&str; 3] = ["feed", "feed_index", "readers"];
const COMMENTS: TableDefinition<(&str, Oid, Oid), &[u8]> = TableDefinition::new("comments");
const LIKES: TableDefinition<(&str, Oid, &str), ()> = TableDefinition::new("likes");
const ASSIGNED_TO: TableDefinition<(&str, &str, &str), ()> = TableDefinition::new("assigned_to");
const ASSIGNMENTS: TableDefinition<(&str, &str, &str), ()> = TableDefinition::new("assignments");
const SUPERVISORS: TableDefinition<(&str, &str), &str> = TableDefinition::new("supervisors");
const SUPERVISEES: TableDefinition<(&str, &str, &str), ()> = TableDefinition::new("supervisees");
/// `(tenant, owner, changed, action)`: a reader's items in the order they last
/// changed (delivered or bumped), for resuming live subscriptions.
const FEED_CHANGES: TableDefinition<(Bytes, Bytes, i64, Oid), ()> =
    TableDefinition::new("feed_changed");
const BUMPS: TableDefinition<(Oid, &str), (i64, &str, Oid)> = TableDefinition::new("bumps");

/// A feed item's value in `feed`.
#[derive(serde::Serialize, serde::Deserialize)]
struct ItemValue {
    #[serde(flatten)]
    reason: Reason,
    #[serde(default)]
    changed: Millis,
}

fn encode_item(reason: &Reason, changed: Millis) -> StoreResult<Vec<u8>> {
    serde_json::to_vec(&ItemValue {
        reason: reason.clone(),
        changed,
    })
    .map_err(json_err)
}

fn decode_item(bytes: &[u8]) -> StoreResult<ItemValue> {
    serde_json::from_slice(bytes).map_err(json_err)
}

const EDGE_FOLLOWS_OUT: u8 = 0;
const EDGE_FOLLOWS_IN: u8 = 1;
const EDGE_FRIEND: u8 = 2;

/// The redb-backed store.
pub struct EmbeddedStore {
    db: Arc<Database>,
}

fn db_err(err: impl Into<redb::Error>) -> StoreError {
    StoreError::internal("embedded store", err.into())
}

fn json_err(err: serde_json::Error) -> StoreError {
    StoreError::internal("embedded store: corrupt record", err)
}

fn group_kind_code(kind: GroupKind) -> u8 {
    match kind {
        GroupKind::Team => 0,
        GroupKind::Department => 1,
    }
}

fn group_kind(code: u8) -> GroupKind {
    if code == 0 {
        GroupKind::Team
    } else {
        GroupKind::Department
    }
}

fn role_code(role: MembershipRole) -> u8 {
    match role {
        MembershipRole::Member => 0,
        MembershipRole::Lead => 1,
    }
}

fn role(code: u8) -> MembershipRole {
    if code == 0 {
        MembershipRole::Member
    } else {
        MembershipRole::Lead
    }
}

fn edge_code(kind: EdgeKind, direction: Direction) -> u8 {
    match (kind, direction) {
        (EdgeKind::Follows, Direction::Out) => EDGE_FOLLOWS_OUT,
        (EdgeKind::Follows, Direction::In) => EDGE_FOLLOWS_IN,
        (EdgeKind::Friend, _) => EDGE_FRIEND,
    }
}

fn encode_action(action: &Action) -> StoreResult<Vec<u8>> {
    serde_json::to_vec(action).map_err(json_err)
}

fn decode_action(bytes: &[u8]) -> StoreResult<Action> {
    serde_json::from_slice(bytes).map_err(json_err)
}

impl EmbeddedStore {
    /// Opens (or creates) `riverfeed.redb` in `dir`, creating the directory.
    pub fn open(dir: &Path) -> StoreResult<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::from_source(
                ErrorKind::Unavailable,
                format!("cannot create data directory {}", dir.display()),
                e,
            )
        })?;
        let path = dir.join("riverfeed.redb");
        let db = Database::create(&path).map_err(|e| {
            let hint = match e {
                redb::DatabaseError::DatabaseAlreadyOpen => {
                    " (another riverfeed process is using this data directory)"
                }
                _ => "",
            };
            StoreError::from_source(
                ErrorKind::Unavailable,
                format!("cannot open {}{hint}", path.display()),
                e,
            )
        })?;
        let txn = db.begin_write().map_err(db_err)?;
        let tables: Vec<String> = txn
            .list_tables()
            .map_err(db_err)?
            .map(|t| t.name().to_owned())
            .collect();
        if tables.iter().any(|t| FORMAT_1_TABLES.contains(&t.as_str())) {
            return Err(StoreError::new(
                ErrorKind::Unavailable,
                format!(
                    "{} holds an earlier store format, with string-keyed feeds, that this \
                     version does not read; start on an empty data directory",
                    path.display()
                ),
            ));
        }
        {
            txn.open_table(USERS).map_err(db_err)?;
            txn.open_table(EDGES).map_err(db_err)?;
            txn.open_table(GROUPS).map_err(db_err)?;
            txn.open_table(MEMBERS).map_err(db_err)?;
            txn.open_table(MEMBER_OF).map_err(db_err)?;
            txn.open_table(ACTIONS).map_err(db_err)?;
            txn.open_table(SLICES).map_err(db_err)?;
            txn.open_table(PENDING).map_err(db_err)?;
            txn.open_table(FEED).map_err(db_err)?;
            txn.open_table(FEED_INDEX).map_err(db_err)?;
            txn.open_table(READERS).map_err(db_err)?;
            txn.open_table(COMMENTS).map_err(db_err)?;
            txn.open_table(LIKES).map_err(db_err)?;
            txn.open_table(ASSIGNED_TO).map_err(db_err)?;
            txn.open_table(ASSIGNMENTS).map_err(db_err)?;
            txn.open_table(SUPERVISORS).map_err(db_err)?;
            txn.open_table(SUPERVISEES).map_err(db_err)?;
            txn.open_table(FEED_CHANGES).map_err(db_err)?;
            txn.open_table(BUMPS).map_err(db_err)?;
        }
        txn.commit().map_err(db_err)?;
        Ok(Self { db: Arc::new(db) })
    }

    /// Runs `work` in one write transaction, committed when it succeeds (and
    /// dropped, so rolled back, when it fails).
    async fn write<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&redb::WriteTransaction) -> StoreResult<T> + Send + 'static,
    {
        self.write_with(redb::Durability::Immediate, work).await
    }

    /// As [`Self::write`], but the commit is not flushed to disk: it becomes
    /// durable with the next durable commit of any kind. For work a crash may
    /// lose because it is redone: a fan-out's intermediate batches, which its
    /// final, durable commit covers. A crash before that leaves the action's
    /// lease as last flushed, so it is claimed again and delivered whole.
    async fn write_unflushed<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&redb::WriteTransaction) -> StoreResult<T> + Send + 'static,
    {
        self.write_with(redb::Durability::None, work).await
    }

    async fn write_with<T, F>(&self, durability: redb::Durability, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&redb::WriteTransaction) -> StoreResult<T> + Send + 'static,
    {
        self.blocking(move |db| {
            let mut txn = db.begin_write().map_err(db_err)?;
            txn.set_durability(durability);
            let out = work(&txn)?;
            txn.commit().map_err(db_err)?;
            Ok(out)
        })
        .await
    }

    /// Runs a short read right here, on the caller's thread. Reads that are
    /// bounded by a page or a handful of keys take microseconds from redb's
    /// page cache, less than handing them to the blocking pool and back, which
    /// cost a feed page two thread switches per store call. Unbounded reads
    /// (audiences, member lists) still go through [`Self::blocking`].
    fn inline<T, F>(&self, work: F) -> StoreResult<T>
    where
        F: FnOnce(&Database) -> StoreResult<T>,
    {
        work(&self.db)
    }

    /// Runs blocking redb work off the async threads.
    async fn blocking<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> StoreResult<T> + Send + 'static,
    {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || work(&db))
            .await
            .map_err(|e| StoreError::internal("embedded store task failed", e))?
    }
}

/// Collects the last components of keys that share a prefix, in key order.
/// `lower` is the first key to consider; iteration stops at the first key
/// `in_prefix` rejects.
fn scan_prefix<K, V, T>(
    table: &impl ReadableTable<K, V>,
    lower: Bound<K::SelfType<'_>>,
    limit: usize,
    mut extract: impl FnMut(K::SelfType<'_>) -> Option<T>,
) -> StoreResult<Vec<T>>
where
    K: redb::Key + 'static,
    V: redb::Value + 'static,
{
    let mut out = Vec::new();
    for entry in table
        .range::<K::SelfType<'_>>((lower, Bound::Unbounded))
        .map_err(db_err)?
    {
        if out.len() >= limit {
            break;
        }
        let (key, _) = entry.map_err(db_err)?;
        match extract(key.value()) {
            Some(item) => out.push(item),
            None => break,
        }
    }
    Ok(out)
}

/// Removes every feed item of an action and returns the items that were visible.
fn remove_items(txn: &redb::WriteTransaction, tenant: &str, id: Oid) -> StoreResult<Vec<FeedItem>> {
    let mut readers = txn.open_table(READERS).map_err(db_err)?;
    let mut index = txn.open_table(FEED_INDEX).map_err(db_err)?;
    let mut feed = txn.open_table(FEED).map_err(db_err)?;
    let mut changes = txn.open_table(FEED_CHANGES).map_err(db_err)?;
    let t = tenant.as_bytes();
    let mut owners = Vec::new();
    let batches: Vec<Vec<u8>> = scan_prefix(
        &readers,
        Bound::Included((t, id, &[][..])),
        usize::MAX,
        |(bt, a, first)| (bt == t && a == id).then(|| first.to_vec()),
    )?;
    for first in batches {
        if let Some(packed) = readers.remove((t, id, first.as_slice())).map_err(db_err)? {
            unpack_owners(packed.value(), &mut owners)?;
        }
    }
    let mut removed = Vec::new();
    for owner in owners {
        let o = owner.as_bytes();
        let entry = index.remove((t, o, id)).map_err(db_err)?.map(|g| g.value());
        let Some((relevancy, 0)) = entry else {
            continue;
        };
        let value = feed
            .remove((t, o, relevancy, id))
            .map_err(db_err)?
            .map(|g| decode_item(g.value()))
            .transpose()?;
        if let Some(value) = value {
            changes.remove((t, o, value.changed, id)).map_err(db_err)?;
            removed.push(FeedItem {
                owner,
                action_id: ObjectId::from_bytes(id),
                relevancy,
                reason: value.reason,
                changed: value.changed,
            });
        }
    }
    Ok(removed)
}

fn put_action(txn: &redb::WriteTransaction, action: &Action) -> StoreResult<()> {
    let bytes = encode_action(action)?;
    let mut actions = txn.open_table(ACTIONS).map_err(db_err)?;
    actions
        .insert(
            (action.tenant.as_str(), action.id.bytes()),
            bytes.as_slice(),
        )
        .map_err(db_err)?;
    Ok(())
}

fn get_action(txn: &redb::WriteTransaction, tenant: &str, id: Oid) -> StoreResult<Option<Action>> {
    let actions = txn.open_table(ACTIONS).map_err(db_err)?;
    let found = actions.get((tenant, id)).map_err(db_err)?;
    found.map(|g| decode_action(g.value())).transpose()
}

fn ensure_user_in(txn: &redb::WriteTransaction, tenant: &str, id: &str) -> StoreResult<()> {
    let mut users = txn.open_table(USERS).map_err(db_err)?;
    if users.get((tenant, id)).map_err(db_err)?.is_none() {
        users.insert((tenant, id), None).map_err(db_err)?;
    }
    Ok(())
}

/// The jobs of a queue (`(id, tenant)` → a value holding the lease's end) that
/// are due by `now`, oldest first, at most `limit`. Read in a read transaction:
/// an idle worker polls, and polling must not queue behind the writers. The
/// claim re-checks each one in its write transaction.
fn due_jobs<V: redb::Value + 'static>(
    db: &Database,
    queue: TableDefinition<(Oid, &str), V>,
    now: Millis,
    limit: usize,
    until: impl Fn(V::SelfType<'_>) -> Millis,
) -> StoreResult<Vec<(Oid, String)>> {
    let txn = db.begin_read().map_err(db_err)?;
    let table = txn.open_table(queue).map_err(db_err)?;
    let mut due = Vec::new();
    for entry in table.iter().map_err(db_err)? {
        if due.len() >= limit {
            break;
        }
        let (key, value) = entry.map_err(db_err)?;
        if until(value.value()) <= now {
            let (id, tenant) = key.value();
            due.push((id, tenant.to_owned()));
        }
    }
    Ok(due)
}

/// Raises items for a claimed bump inside `txn` (see [`Store::bump`]).
fn bump_in(
    txn: &redb::WriteTransaction,
    claim: &BumpClaim,
    now: Millis,
    bumps: &[Delivery],
) -> StoreResult<Vec<FeedItem>> {
    let id = claim.comment.action_id.bytes();
    {
        let mut jobs = txn.open_table(BUMPS).map_err(db_err)?;
        let key = (claim.comment.id.bytes(), claim.tenant.as_str());
        if !bump_lease_held(&jobs, key, claim)? {
            return Ok(Vec::new());
        }
        jobs.insert(key, (now + claim.lease_ms, claim.worker.as_str(), id))
            .map_err(db_err)?;
    }
    let mut raised = Vec::new();
    {
        let mut feed = txn.open_table(FEED).map_err(db_err)?;
        let mut index = txn.open_table(FEED_INDEX).map_err(db_err)?;
        let mut changes = txn.open_table(FEED_CHANGES).map_err(db_err)?;
        let t = claim.tenant.as_bytes();
        for bump in bumps {
            let o = bump.owner.as_bytes();
            let entry = index.get((t, o, id)).map_err(db_err)?.map(|g| g.value());
            // Only live items, and only upwards.
            let Some((relevancy, 0)) = entry else {
                continue;
            };
            if relevancy >= bump.relevancy {
                continue;
            }
            let old = feed
                .remove((t, o, relevancy, id))
                .map_err(db_err)?
                .map(|g| decode_item(g.value()))
                .transpose()?;
            if let Some(old) = old {
                changes.remove((t, o, old.changed, id)).map_err(db_err)?;
            }
            let bytes = encode_item(&bump.reason, now)?;
            feed.insert((t, o, bump.relevancy, id), bytes.as_slice())
                .map_err(db_err)?;
            index
                .insert((t, o, id), (bump.relevancy, 0))
                .map_err(db_err)?;
            changes.insert((t, o, now, id), ()).map_err(db_err)?;
            raised.push(FeedItem {
                owner: bump.owner.clone(),
                action_id: claim.comment.action_id,
                relevancy: bump.relevancy,
                reason: bump.reason.clone(),
                changed: now,
            });
        }
    }
    Ok(raised)
}

/// Marks a claimed bump done inside `txn` (see [`Store::finish_bump`]).
fn finish_bump_in(txn: &redb::WriteTransaction, claim: &BumpClaim) -> StoreResult<()> {
    {
        let mut jobs = txn.open_table(BUMPS).map_err(db_err)?;
        let key = (claim.comment.id.bytes(), claim.tenant.as_str());
        if bump_lease_held(&jobs, key, claim)? {
            jobs.remove(key).map_err(db_err)?;
        }
    }
    Ok(())
}

/// Checks that a bump claim still holds its job. `Ok(false)` when the job is
/// gone with its comment, `Err(LeaseLost)` when another worker owns it.
fn bump_lease_held(
    jobs: &impl ReadableTable<(Oid, &'static str), (i64, &'static str, Oid)>,
    key: (Oid, &str),
    claim: &BumpClaim,
) -> StoreResult<bool> {
    let holder = jobs
        .get(key)
        .map_err(db_err)?
        .map(|g| g.value().1.to_owned());
    match holder {
        Some(worker) if worker == claim.worker => Ok(true),
        Some(worker) => Err(StoreError::new(
            ErrorKind::LeaseLost,
            format!(
                "bump for comment {} was taken over by {worker}",
                claim.comment.id
            ),
        )),
        None => Ok(false),
    }
}

/// Writes one batch of a claimed fan-out inside `txn` (see [`Store::deliver`]).
fn deliver_in(
    txn: &redb::WriteTransaction,
    claim: &Claim,
    now: Millis,
    items: &[Delivery],
) -> StoreResult<Vec<FeedItem>> {
    if !lease_held(txn, claim)? {
        return Ok(Vec::new());
    }
    let (t, id) = (claim.action.tenant.as_str(), claim.action.id.bytes());
    let Some(mut action) = get_action(txn, t, id)? else {
        return Ok(Vec::new());
    };
    let until = now + claim.lease_ms;
    {
        let mut pending = txn.open_table(PENDING).map_err(db_err)?;
        pending
            .insert((id, t), (until, claim.worker.as_str()))
            .map_err(db_err)?;
    }
    action.fan_out.locked_until = Some(until);
    put_action(txn, &action)?;
    let mut written = Vec::new();
    if !action.hidden {
        let mut feed = txn.open_table(FEED).map_err(db_err)?;
        let mut index = txn.open_table(FEED_INDEX).map_err(db_err)?;
        let mut readers = txn.open_table(READERS).map_err(db_err)?;
        let mut changes = txn.open_table(FEED_CHANGES).map_err(db_err)?;
        let mut reason_bytes: Option<(Reason, Vec<u8>)> = None;
        let mut packed = Vec::new();
        let t = t.as_bytes();
        for item in items {
            let owner = item.owner.as_bytes();
            // Writing the index entry first and looking at what it replaced
            // finds a reader who already has the item (a re-run after a lost
            // lease) in the same B-tree walk as the write.
            let previous = index
                .insert((t, owner, id), (item.relevancy, 0))
                .map_err(db_err)?
                .map(|g| g.value());
            if let Some(previous) = previous {
                index.insert((t, owner, id), previous).map_err(db_err)?;
                continue;
            }
            // Most deliveries of one batch share a reason: encode it once.
            if reason_bytes.as_ref().is_none_or(|(r, _)| *r != item.reason) {
                let bytes = encode_item(&item.reason, now)?;
                reason_bytes = Some((item.reason.clone(), bytes));
            }
            let bytes = reason_bytes
                .as_ref()
                .map(|(_, b)| b.as_slice())
                .unwrap_or(&[]);
            feed.insert((t, owner, item.relevancy, id), bytes)
                .map_err(db_err)?;
            changes.insert((t, owner, now, id), ()).map_err(db_err)?;
            pack_owner(&mut packed, &item.owner);
            written.push(FeedItem {
                owner: item.owner.clone(),
                action_id: claim.action.id,
                relevancy: item.relevancy,
                reason: item.reason.clone(),
                changed: now,
            });
        }
        if let Some(first) = written.first() {
            let key = (t, id, first.owner.as_bytes());
            // A batch's first new reader is new to this action, so no earlier
            // batch can have used it as its key; merge rather than trust that.
            let earlier = readers
                .insert(key, packed.as_slice())
                .map_err(db_err)?
                .map(|g| g.value().to_vec());
            if let Some(earlier) = earlier {
                packed.extend_from_slice(&earlier);
                readers.insert(key, packed.as_slice()).map_err(db_err)?;
            }
        }
    }
    Ok(written)
}

/// Appends one owner to a packed list: its length as a little-endian `u32`,
/// then its bytes.
fn pack_owner(packed: &mut Vec<u8>, owner: &str) {
    packed.extend_from_slice(&(owner.len() as u32).to_le_bytes());
    packed.extend_from_slice(owner.as_bytes());
}

/// Reads a list written by [`pack_owner`] into `out`.
fn unpack_owners(mut packed: &[u8], out: &mut Vec<String>) -> StoreResult<()> {
    let corrupt = || {
        StoreError::new(
            ErrorKind::Internal,
            "corrupt reader list in the embedded store",
        )
    };
    while !packed.is_empty() {
        let (len, rest) = packed.split_first_chunk::<4>().ok_or_else(corrupt)?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(corrupt());
        }
        let (owner, rest) = rest.split_at(len);
        out.push(String::from_utf8(owner.to_vec()).map_err(|_| corrupt())?);
        packed = rest;
    }
    Ok(())
}

/// Marks a claimed fan-out done inside `txn` (see [`Store::finish_fan_out`]).
fn finish_in(txn: &redb::WriteTransaction, claim: &Claim) -> StoreResult<()> {
    if !lease_held(txn, claim)? {
        return Ok(());
    }
    let (t, id) = (claim.action.tenant.as_str(), claim.action.id.bytes());
    {
        let mut pending = txn.open_table(PENDING).map_err(db_err)?;
        pending.remove((id, t)).map_err(db_err)?;
    }
    if let Some(mut action) = get_action(txn, t, id)? {
        action.fan_out = FanOut {
            state: FanOutState::Done,
            locked_until: None,
            worker: None,
        };
        put_action(txn, &action)?;
    }
    Ok(())
}

/// Checks that `claim` still holds its lease. `Ok(false)` when the action is
/// gone (deleted), `Err(LeaseLost)` when another worker owns it or it is done.
fn lease_held(txn: &redb::WriteTransaction, claim: &Claim) -> StoreResult<bool> {
    let tenant = claim.action.tenant.as_str();
    let id = claim.action.id.bytes();
    let pending = txn.open_table(PENDING).map_err(db_err)?;
    let holder = pending
        .get((id, tenant))
        .map_err(db_err)?
        .map(|g| g.value().1.to_owned());
    match holder {
        Some(worker) if worker == claim.worker => Ok(true),
        Some(worker) => Err(StoreError::new(
            ErrorKind::LeaseLost,
            format!("fan-out of {} was taken over by {worker}", claim.action.id),
        )),
        None if get_action(txn, tenant, id)?.is_none() => Ok(false),
        None => Err(StoreError::new(
            ErrorKind::LeaseLost,
            format!(
                "fan-out of {} was finished by another worker",
                claim.action.id
            ),
        )),
    }
}

/// This redb store is the earlier format now: it exports through the legacy
/// reader and imports nothing (`riverfeed migrate` moves its data into the new
/// embedded store). Goes with the redb store.
#[async_trait]
impl Archive for EmbeddedStore {
    fn export<'a>(&'a self, tenant: Option<&'a str>) -> BoxStream<'a, StoreResult<Record>> {
        match super::legacy::export_db(self.db.clone(), tenant.map(str::to_owned)) {
            Ok(records) => records,
            Err(err) => stream::once(async move { Err(err) }).boxed(),
        }
    }

    async fn import(&self, _records: &[Record]) -> StoreResult<()> {
        Err(StoreError::invalid(
            "the redb embedded store does not import records: it is the earlier format, \
             which `riverfeed migrate` converts; import into the current embedded store or MongoDB",
        ))
    }
}

#[async_trait]
impl Store for EmbeddedStore {
    fn backend(&self) -> &'static str {
        "embedded"
    }

    async fn upsert_user(&self, tenant: &str, user: &User) -> StoreResult<()> {
        let (tenant, user) = (tenant.to_owned(), user.clone());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            {
                let mut users = txn.open_table(USERS).map_err(db_err)?;
                users
                    .insert((tenant.as_str(), user.id.as_str()), user.name.as_deref())
                    .map_err(db_err)?;
            }
            txn.commit().map_err(db_err)
        })
        .await
    }

    async fn ensure_user(&self, tenant: &str, id: &str) -> StoreResult<()> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.blocking(move |db| {
            // A read first: most calls find the user and need no write transaction.
            {
                let txn = db.begin_read().map_err(db_err)?;
                let users = txn.open_table(USERS).map_err(db_err)?;
                if users
                    .get((tenant.as_str(), id.as_str()))
                    .map_err(db_err)?
                    .is_some()
                {
                    return Ok(());
                }
            }
            let txn = db.begin_write().map_err(db_err)?;
            ensure_user_in(&txn, &tenant, &id)?;
            txn.commit().map_err(db_err)
        })
        .await
    }

    async fn get_users(&self, tenant: &str, ids: &[String]) -> StoreResult<Vec<User>> {
        self.inline(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let users = txn.open_table(USERS).map_err(db_err)?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(name) = users.get((tenant, id.as_str())).map_err(db_err)? {
                    let name = name.value().map(str::to_owned);
                    out.push(User {
                        id: id.clone(),
                        name,
                    });
                }
            }
            Ok(out)
        })
    }

    async fn set_edge(
        &self,
        tenant: &str,
        kind: EdgeKind,
        from: &str,
        to: &str,
        on: bool,
    ) -> StoreResult<bool> {
        let (tenant, from, to) = (tenant.to_owned(), from.to_owned(), to.to_owned());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let (forward, backward) = match kind {
                EdgeKind::Follows => (EDGE_FOLLOWS_OUT, EDGE_FOLLOWS_IN),
                EdgeKind::Friend => (EDGE_FRIEND, EDGE_FRIEND),
            };
            let changed = {
                let mut edges = txn.open_table(EDGES).map_err(db_err)?;
                let (t, f, o) = (tenant.as_str(), from.as_str(), to.as_str());
                if on {
                    let added = edges
                        .insert((t, forward, f, o), ())
                        .map_err(db_err)?
                        .is_none();
                    edges.insert((t, backward, o, f), ()).map_err(db_err)?;
                    added
                } else {
                    let removed = edges.remove((t, forward, f, o)).map_err(db_err)?.is_some();
                    edges.remove((t, backward, o, f)).map_err(db_err)?;
                    removed
                }
            };
            if on {
                ensure_user_in(&txn, &tenant, &from)?;
            }
            txn.commit().map_err(db_err)?;
            Ok(changed)
        })
        .await
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
        let (tenant, user) = (tenant.to_owned(), user.to_owned());
        let after = after.map(str::to_owned);
        let code = edge_code(kind, direction);
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(db_err)?;
            let edges = txn.open_table(EDGES).map_err(db_err)?;
            let (t, u) = (tenant.as_str(), user.as_str());
            let lower = match after.as_deref() {
                Some(a) => Bound::Excluded((t, code, u, a)),
                None => Bound::Included((t, code, u, "")),
            };
            scan_prefix(&edges, lower, limit, |(kt, kc, ku, other)| {
                (kt == t && kc == code && ku == u).then(|| other.to_owned())
            })
        })
        .await
    }

    async fn join_group(
        &self,
        tenant: &str,
        group: &Group,
        user: &str,
        role: MembershipRole,
    ) -> StoreResult<JoinOutcome> {
        let (tenant, group, user) = (tenant.to_owned(), group.clone(), user.to_owned());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let (t, g, u) = (tenant.as_str(), group.id.as_str(), user.as_str());
            {
                let mut groups = txn.open_table(GROUPS).map_err(db_err)?;
                let existing = groups.get((t, g)).map_err(db_err)?.map(|k| k.value());
                match existing {
                    Some(code) if code != group_kind_code(group.kind) => {
                        return Ok(JoinOutcome::KindMismatch(Group {
                            id: group.id.clone(),
                            kind: group_kind(code),
                        }));
                    }
                    Some(_) => {}
                    None => {
                        groups
                            .insert((t, g), group_kind_code(group.kind))
                            .map_err(db_err)?;
                    }
                }
                let mut members = txn.open_table(MEMBERS).map_err(db_err)?;
                members.insert((t, g, u), role_code(role)).map_err(db_err)?;
                let mut member_of = txn.open_table(MEMBER_OF).map_err(db_err)?;
                member_of
                    .insert((t, u, g), (group_kind_code(group.kind), role_code(role)))
                    .map_err(db_err)?;
            }
            ensure_user_in(&txn, t, u)?;
            txn.commit().map_err(db_err)?;
            Ok(JoinOutcome::Joined(Membership {
                group_id: group.id,
                kind: group.kind,
                role,
            }))
        })
        .await
    }

    async fn leave_group(&self, tenant: &str, group_id: &str, user: &str) -> StoreResult<bool> {
        let (tenant, group_id, user) = (tenant.to_owned(), group_id.to_owned(), user.to_owned());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let (t, g, u) = (tenant.as_str(), group_id.as_str(), user.as_str());
            let was_member = {
                let mut members = txn.open_table(MEMBERS).map_err(db_err)?;
                let mut member_of = txn.open_table(MEMBER_OF).map_err(db_err)?;
                member_of.remove((t, u, g)).map_err(db_err)?;
                let removed = members.remove((t, g, u)).map_err(db_err)?;
                removed.is_some()
            };
            txn.commit().map_err(db_err)?;
            Ok(was_member)
        })
        .await
    }

    async fn group_members(
        &self,
        tenant: &str,
        group_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        let (tenant, group_id) = (tenant.to_owned(), group_id.to_owned());
        let after = after.map(str::to_owned);
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(db_err)?;
            let members = txn.open_table(MEMBERS).map_err(db_err)?;
            let (t, g) = (tenant.as_str(), group_id.as_str());
            let lower = match after.as_deref() {
                Some(a) => Bound::Excluded((t, g, a)),
                None => Bound::Included((t, g, "")),
            };
            scan_prefix(&members, lower, limit, |(kt, kg, user)| {
                (kt == t && kg == g).then(|| user.to_owned())
            })
        })
        .await
    }

    async fn memberships(&self, tenant: &str, user: &str) -> StoreResult<Vec<Membership>> {
        self.inline(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let member_of = txn.open_table(MEMBER_OF).map_err(db_err)?;
            let (t, u) = (tenant, user);
            let mut out = Vec::new();
            for entry in member_of.range((t, u, "")..).map_err(db_err)? {
                let (key, value) = entry.map_err(db_err)?;
                let (kt, ku, group) = key.value();
                if kt != t || ku != u {
                    break;
                }
                let (kind, r) = value.value();
                out.push(Membership {
                    group_id: group.to_owned(),
                    kind: group_kind(kind),
                    role: role(r),
                });
            }
            Ok(out)
        })
    }

    async fn set_assignment(
        &self,
        tenant: &str,
        user: &str,
        ref_id: &str,
        on: bool,
    ) -> StoreResult<bool> {
        let (tenant, user, ref_id) = (tenant.to_owned(), user.to_owned(), ref_id.to_owned());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let (t, u, r) = (tenant.as_str(), user.as_str(), ref_id.as_str());
            let changed = {
                let mut to = txn.open_table(ASSIGNED_TO).map_err(db_err)?;
                let mut of = txn.open_table(ASSIGNMENTS).map_err(db_err)?;
                if on {
                    of.insert((t, u, r), ()).map_err(db_err)?;
                    to.insert((t, r, u), ()).map_err(db_err)?.is_none()
                } else {
                    of.remove((t, u, r)).map_err(db_err)?;
                    to.remove((t, r, u)).map_err(db_err)?.is_some()
                }
            };
            txn.commit().map_err(db_err)?;
            Ok(changed)
        })
        .await
    }

    async fn assignees(
        &self,
        tenant: &str,
        ref_ids: &[String],
    ) -> StoreResult<Vec<(String, String)>> {
        let (tenant, ref_ids) = (tenant.to_owned(), ref_ids.to_vec());
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(db_err)?;
            let to = txn.open_table(ASSIGNED_TO).map_err(db_err)?;
            let t = tenant.as_str();
            let mut out = Vec::new();
            for r in &ref_ids {
                let users = scan_prefix(
                    &to,
                    Bound::Included((t, r.as_str(), "")),
                    usize::MAX,
                    |(kt, kr, user)| (kt == t && kr == r).then(|| user.to_owned()),
                )?;
                out.extend(users.into_iter().map(|u| (r.clone(), u)));
            }
            Ok(out)
        })
        .await
    }

    async fn assignments(&self, tenant: &str, user: &str) -> StoreResult<Vec<String>> {
        self.inline(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let of = txn.open_table(ASSIGNMENTS).map_err(db_err)?;
            let (t, u) = (tenant, user);
            scan_prefix(
                &of,
                Bound::Included((t, u, "")),
                usize::MAX,
                |(kt, ku, r)| (kt == t && ku == u).then(|| r.to_owned()),
            )
        })
    }

    async fn set_supervisor(
        &self,
        tenant: &str,
        user: &str,
        supervisor: Option<&str>,
    ) -> StoreResult<()> {
        let (tenant, user) = (tenant.to_owned(), user.to_owned());
        let supervisor = supervisor.map(str::to_owned);
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            {
                let mut table = txn.open_table(SUPERVISORS).map_err(db_err)?;
                let mut reverse = txn.open_table(SUPERVISEES).map_err(db_err)?;
                let (t, u) = (tenant.as_str(), user.as_str());
                let previous = match &supervisor {
                    Some(s) => table.insert((t, u), s.as_str()).map_err(db_err)?,
                    None => table.remove((t, u)).map_err(db_err)?,
                }
                .map(|g| g.value().to_owned());
                if let Some(previous) = previous {
                    reverse.remove((t, previous.as_str(), u)).map_err(db_err)?;
                }
                if let Some(s) = &supervisor {
                    reverse.insert((t, s.as_str(), u), ()).map_err(db_err)?;
                }
            }
            txn.commit().map_err(db_err)
        })
        .await
    }

    async fn supervisor(&self, tenant: &str, user: &str) -> StoreResult<Option<String>> {
        self.inline(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let table = txn.open_table(SUPERVISORS).map_err(db_err)?;
            Ok(table
                .get((tenant, user))
                .map_err(db_err)?
                .map(|g| g.value().to_owned()))
        })
    }

    async fn supervisees(&self, tenant: &str, supervisor: &str) -> StoreResult<Vec<String>> {
        let (tenant, supervisor) = (tenant.to_owned(), supervisor.to_owned());
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(db_err)?;
            let table = txn.open_table(SUPERVISEES).map_err(db_err)?;
            let (t, s) = (tenant.as_str(), supervisor.as_str());
            scan_prefix(
                &table,
                Bound::Included((t, s, "")),
                usize::MAX,
                |(kt, ks, user)| (kt == t && ks == s).then(|| user.to_owned()),
            )
        })
        .await
    }

    async fn insert_action(&self, action: &Action) -> StoreResult<()> {
        let action = action.clone();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let (t, id) = (action.tenant.as_str(), action.id.bytes());
            put_action(&txn, &action)?;
            {
                let mut slices = txn.open_table(SLICES).map_err(db_err)?;
                for ref_id in &action.ref_ids {
                    slices
                        .insert((t, ref_id.as_str(), id), ())
                        .map_err(db_err)?;
                }
                if action.fan_out.state != FanOutState::Done {
                    let mut pending = txn.open_table(PENDING).map_err(db_err)?;
                    let until = action.fan_out.locked_until.unwrap_or(0);
                    let worker = action.fan_out.worker.as_deref().unwrap_or("");
                    pending.insert((id, t), (until, worker)).map_err(db_err)?;
                }
            }
            ensure_user_in(&txn, t, &action.actor_id)?;
            txn.commit().map_err(db_err)
        })
        .await
    }

    async fn get_actions(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<Vec<Action>> {
        self.inline(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let actions = txn.open_table(ACTIONS).map_err(db_err)?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(bytes) = actions.get((tenant, id.bytes())).map_err(db_err)? {
                    out.push(decode_action(bytes.value())?);
                }
            }
            Ok(out)
        })
    }

    async fn hide_action(&self, tenant: &str, id: ObjectId) -> StoreResult<Vec<FeedItem>> {
        let tenant = tenant.to_owned();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let Some(mut action) = get_action(&txn, &tenant, id.bytes())? else {
                return Err(StoreError::not_found(format!("no action {id}")));
            };
            action.hidden = true;
            put_action(&txn, &action)?;
            let removed = remove_items(&txn, &tenant, id.bytes())?;
            txn.commit().map_err(db_err)?;
            Ok(removed)
        })
        .await
    }

    async fn delete_action(&self, tenant: &str, id: ObjectId) -> StoreResult<Vec<FeedItem>> {
        let tenant = tenant.to_owned();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let t = tenant.as_str();
            let Some(action) = get_action(&txn, t, id.bytes())? else {
                return Err(StoreError::not_found(format!("no action {id}")));
            };
            let removed = remove_items(&txn, t, id.bytes())?;
            {
                let mut actions = txn.open_table(ACTIONS).map_err(db_err)?;
                actions.remove((t, id.bytes())).map_err(db_err)?;
                let mut slices = txn.open_table(SLICES).map_err(db_err)?;
                for ref_id in &action.ref_ids {
                    slices
                        .remove((t, ref_id.as_str(), id.bytes()))
                        .map_err(db_err)?;
                }
                let mut pending = txn.open_table(PENDING).map_err(db_err)?;
                pending.remove((id.bytes(), t)).map_err(db_err)?;
                let oid = id.bytes();
                let mut comments = txn.open_table(COMMENTS).map_err(db_err)?;
                let thread = (t, oid, [0u8; 12])..=(t, oid, [0xffu8; 12]);
                let ids: Vec<Oid> = comments
                    .range(thread.clone())
                    .map_err(db_err)?
                    .map(|entry| entry.map(|(key, _)| key.value().2).map_err(db_err))
                    .collect::<StoreResult<_>>()?;
                comments.retain_in(thread, |_, _| false).map_err(db_err)?;
                // A queued bump goes with its comment.
                let mut bumps = txn.open_table(BUMPS).map_err(db_err)?;
                for id in ids {
                    bumps.remove((id, t)).map_err(db_err)?;
                }
                let mut likes = txn.open_table(LIKES).map_err(db_err)?;
                let likers: Vec<String> = scan_prefix(
                    &likes,
                    Bound::Included((t, oid, "")),
                    usize::MAX,
                    |(kt, ka, user)| (kt == t && ka == oid).then(|| user.to_owned()),
                )?;
                for user in likers {
                    likes.remove((t, oid, user.as_str())).map_err(db_err)?;
                }
            }
            txn.commit().map_err(db_err)?;
            Ok(removed)
        })
        .await
    }

    async fn set_action_scope(
        &self,
        tenant: &str,
        id: ObjectId,
        scope: Scope,
        readers: &[String],
        scope_groups: &[String],
    ) -> StoreResult<Action> {
        let tenant = tenant.to_owned();
        let (readers, scope_groups) = (readers.to_vec(), scope_groups.to_vec());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let Some(mut action) = get_action(&txn, &tenant, id.bytes())? else {
                return Err(StoreError::not_found(format!("no action {id}")));
            };
            action.scope = scope;
            action.readers = readers;
            action.scope_groups = scope_groups;
            action.fan_out = FanOut::pending();
            put_action(&txn, &action)?;
            {
                let mut pending = txn.open_table(PENDING).map_err(db_err)?;
                pending
                    .insert((id.bytes(), tenant.as_str()), (0, ""))
                    .map_err(db_err)?;
            }
            txn.commit().map_err(db_err)?;
            Ok(action)
        })
        .await
    }

    async fn slice(
        &self,
        tenant: &str,
        ref_id: &str,
        before: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<ObjectId>> {
        self.inline(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let slices = txn.open_table(SLICES).map_err(db_err)?;
            let (t, r) = (tenant, ref_id);
            let upper = match before {
                Some(id) => Bound::Excluded((t, r, id.bytes())),
                None => Bound::Included((t, r, [0xff; 12])),
            };
            let lower = Bound::Included((t, r, [0u8; 12]));
            let mut out = Vec::new();
            for entry in slices.range((lower, upper)).map_err(db_err)?.rev() {
                if out.len() >= limit {
                    break;
                }
                let (key, _) = entry.map_err(db_err)?;
                out.push(ObjectId::from_bytes(key.value().2));
            }
            Ok(out)
        })
    }

    async fn rename_ref(&self, tenant: &str, ref_id: &str, name: &str) -> StoreResult<u64> {
        let (tenant, ref_id, name) = (tenant.to_owned(), ref_id.to_owned(), name.to_owned());
        self.blocking(move |db| {
            // Batches keep each write transaction short: other writers (the
            // fan-out worker) get their turn between them.
            const BATCH: usize = 500;
            let t = tenant.as_str();
            let mut after: Option<Oid> = None;
            let mut changed = 0u64;
            loop {
                let batch: Vec<Action> = {
                    let txn = db.begin_read().map_err(db_err)?;
                    let actions = txn.open_table(ACTIONS).map_err(db_err)?;
                    let lower = match after {
                        Some(id) => Bound::Excluded((t, id)),
                        None => Bound::Included((t, [0u8; 12])),
                    };
                    let upper = Bound::Included((t, [0xffu8; 12]));
                    let mut batch = Vec::new();
                    for entry in actions.range((lower, upper)).map_err(db_err)?.take(BATCH) {
                        let (_, value) = entry.map_err(db_err)?;
                        batch.push(decode_action(value.value())?);
                    }
                    batch
                };
                let Some(last) = batch.last() else { break };
                after = Some(last.id.bytes());
                let done = batch.len() < BATCH;
                let txn = db.begin_write().map_err(db_err)?;
                for action in batch {
                    // Re-read inside the write: the action may have changed
                    // (or gone) since the batch was read.
                    let Some(mut current) = get_action(&txn, t, action.id.bytes())? else {
                        continue;
                    };
                    let renamed = current.descriptor.rename(&ref_id, &name);
                    if renamed > 0 {
                        put_action(&txn, &current)?;
                        changed += renamed as u64;
                    }
                }
                txn.commit().map_err(db_err)?;
                if done {
                    break;
                }
            }
            Ok(changed)
        })
        .await
    }

    async fn add_comment(&self, tenant: &str, comment: &Comment) -> StoreResult<Counts> {
        let (tenant, comment) = (tenant.to_owned(), comment.clone());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let (t, a) = (tenant.as_str(), comment.action_id.bytes());
            let Some(mut action) = get_action(&txn, t, a)? else {
                return Err(StoreError::not_found(format!(
                    "no action {}",
                    comment.action_id
                )));
            };
            {
                let bytes = serde_json::to_vec(&comment).map_err(json_err)?;
                let mut comments = txn.open_table(COMMENTS).map_err(db_err)?;
                comments
                    .insert((t, a, comment.id.bytes()), bytes.as_slice())
                    .map_err(db_err)?;
                let mut bumps = txn.open_table(BUMPS).map_err(db_err)?;
                bumps
                    .insert((comment.id.bytes(), t), (0, "", a))
                    .map_err(db_err)?;
            }
            action.counts.comments += 1;
            put_action(&txn, &action)?;
            txn.commit().map_err(db_err)?;
            Ok(action.counts)
        })
        .await
    }

    async fn comments(
        &self,
        tenant: &str,
        action_id: ObjectId,
        after: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<Comment>> {
        self.inline(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let comments = txn.open_table(COMMENTS).map_err(db_err)?;
            let (t, a) = (tenant, action_id.bytes());
            let lower = match after {
                Some(id) => Bound::Excluded((t, a, id.bytes())),
                None => Bound::Included((t, a, [0u8; 12])),
            };
            let upper = Bound::Included((t, a, [0xffu8; 12]));
            let mut out = Vec::new();
            for entry in comments.range((lower, upper)).map_err(db_err)?.take(limit) {
                let (_, value) = entry.map_err(db_err)?;
                out.push(serde_json::from_slice(value.value()).map_err(json_err)?);
            }
            Ok(out)
        })
    }

    async fn set_like(
        &self,
        tenant: &str,
        action_id: ObjectId,
        user: &str,
        on: bool,
    ) -> StoreResult<(bool, Counts)> {
        let (tenant, user) = (tenant.to_owned(), user.to_owned());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let (t, a) = (tenant.as_str(), action_id.bytes());
            let Some(mut action) = get_action(&txn, t, a)? else {
                return Err(StoreError::not_found(format!("no action {action_id}")));
            };
            let changed = {
                let mut likes = txn.open_table(LIKES).map_err(db_err)?;
                if on {
                    likes
                        .insert((t, a, user.as_str()), ())
                        .map_err(db_err)?
                        .is_none()
                } else {
                    likes
                        .remove((t, a, user.as_str()))
                        .map_err(db_err)?
                        .is_some()
                }
            };
            if changed {
                action.counts.likes = if on {
                    action.counts.likes + 1
                } else {
                    action.counts.likes.saturating_sub(1)
                };
                put_action(&txn, &action)?;
            }
            txn.commit().map_err(db_err)?;
            Ok((changed, action.counts))
        })
        .await
    }

    async fn liked(
        &self,
        tenant: &str,
        user: &str,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>> {
        self.inline(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let likes = txn.open_table(LIKES).map_err(db_err)?;
            let mut out = Vec::new();
            for &id in action_ids {
                if likes
                    .get((tenant, id.bytes(), user))
                    .map_err(db_err)?
                    .is_some()
                {
                    out.push(id);
                }
            }
            Ok(out)
        })
    }

    async fn claim_fan_out(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Claim>> {
        let worker = worker.to_owned();
        self.blocking(move |db| {
            let due = due_jobs(db, PENDING, now, limit, |(until, _)| until)?;
            if due.is_empty() {
                return Ok(Vec::new());
            }
            let txn = db.begin_write().map_err(db_err)?;
            let until = now + lease_ms;
            let mut claims = Vec::with_capacity(due.len());
            for (id, tenant) in due {
                // Re-check inside the write transaction: another worker may have
                // claimed it since the read.
                {
                    let mut pending = txn.open_table(PENDING).map_err(db_err)?;
                    let still_due = pending
                        .get((id, tenant.as_str()))
                        .map_err(db_err)?
                        .is_some_and(|g| g.value().0 <= now);
                    if !still_due {
                        continue;
                    }
                    pending
                        .insert((id, tenant.as_str()), (until, worker.as_str()))
                        .map_err(db_err)?;
                }
                let Some(mut action) = get_action(&txn, &tenant, id)? else {
                    continue;
                };
                action.fan_out = FanOut {
                    state: FanOutState::InProgress,
                    locked_until: Some(until),
                    worker: Some(worker.clone()),
                };
                put_action(&txn, &action)?;
                claims.push(Claim {
                    action,
                    worker: worker.clone(),
                    lease_ms,
                });
            }
            txn.commit().map_err(db_err)?;
            Ok(claims)
        })
        .await
    }

    async fn deliver(
        &self,
        claim: &Claim,
        now: Millis,
        items: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        let (claim, items) = (claim.clone(), items.to_vec());
        self.write_unflushed(move |txn| deliver_in(txn, &claim, now, &items))
            .await
    }

    async fn finish_fan_out(&self, claim: &Claim) -> StoreResult<()> {
        let claim = claim.clone();
        self.write(move |txn| finish_in(txn, &claim)).await
    }

    async fn deliver_all_and_finish(
        &self,
        now: Millis,
        jobs: &[(Claim, Vec<Delivery>)],
    ) -> StoreResult<Vec<StoreResult<Vec<FeedItem>>>> {
        let jobs = jobs.to_vec();
        self.write(move |txn| {
            let mut results = Vec::with_capacity(jobs.len());
            for (claim, items) in &jobs {
                // Both check the lease before they write, so a lost lease
                // leaves nothing of its job behind in the shared transaction.
                let done = deliver_in(txn, claim, now, items)
                    .and_then(|written| finish_in(txn, claim).map(|()| written));
                match done {
                    Err(err) if err.kind != ErrorKind::LeaseLost => return Err(err),
                    done => results.push(done),
                }
            }
            Ok(results)
        })
        .await
    }

    async fn claim_bumps(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<BumpClaim>> {
        let worker = worker.to_owned();
        self.blocking(move |db| {
            let due = due_jobs(db, BUMPS, now, limit, |(until, _, _)| until)?;
            if due.is_empty() {
                return Ok(Vec::new());
            }
            let txn = db.begin_write().map_err(db_err)?;
            let until = now + lease_ms;
            let mut claims = Vec::with_capacity(due.len());
            {
                let mut bumps = txn.open_table(BUMPS).map_err(db_err)?;
                let comments = txn.open_table(COMMENTS).map_err(db_err)?;
                for (id, tenant) in due {
                    let t = tenant.as_str();
                    // Re-check inside the write transaction: another worker may
                    // have claimed it since the read.
                    let job = bumps.get((id, t)).map_err(db_err)?.map(|g| {
                        let (until, _, action) = g.value();
                        (until, action)
                    });
                    let Some(action) = job.filter(|j| j.0 <= now).map(|j| j.1) else {
                        continue;
                    };
                    let comment = comments.get((t, action, id)).map_err(db_err)?;
                    let Some(comment) = comment else {
                        // Its comment is gone: nothing to bump.
                        bumps.remove((id, t)).map_err(db_err)?;
                        continue;
                    };
                    let comment: Comment =
                        serde_json::from_slice(comment.value()).map_err(json_err)?;
                    bumps
                        .insert((id, t), (until, worker.as_str(), action))
                        .map_err(db_err)?;
                    claims.push(BumpClaim {
                        tenant,
                        comment,
                        worker: worker.clone(),
                        lease_ms,
                    });
                }
            }
            txn.commit().map_err(db_err)?;
            Ok(claims)
        })
        .await
    }

    async fn bump(
        &self,
        claim: &BumpClaim,
        now: Millis,
        bumps: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        let (claim, bumps) = (claim.clone(), bumps.to_vec());
        self.write(move |txn| bump_in(txn, &claim, now, &bumps))
            .await
    }

    async fn finish_bump(&self, claim: &BumpClaim) -> StoreResult<()> {
        let claim = claim.clone();
        self.write(move |txn| finish_bump_in(txn, &claim)).await
    }

    async fn bump_and_finish(
        &self,
        claim: &BumpClaim,
        now: Millis,
        bumps: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        let (claim, bumps) = (claim.clone(), bumps.to_vec());
        self.write(move |txn| {
            let raised = bump_in(txn, &claim, now, &bumps)?;
            finish_bump_in(txn, &claim)?;
            Ok(raised)
        })
        .await
    }

    async fn feed_changes(
        &self,
        tenant: &str,
        owner: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        self.inline(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let changes = txn.open_table(FEED_CHANGES).map_err(db_err)?;
            let index = txn.open_table(FEED_INDEX).map_err(db_err)?;
            let feed = txn.open_table(FEED).map_err(db_err)?;
            let (t, o) = (tenant.as_bytes(), owner.as_bytes());
            let lower = Bound::Excluded((t, o, after.changed, after.action_id.bytes()));
            let upper = Bound::Included((t, o, i64::MAX, [0xffu8; 12]));
            let mut out = Vec::new();
            for entry in changes.range((lower, upper)).map_err(db_err)? {
                if out.len() >= limit {
                    break;
                }
                let (key, _) = entry.map_err(db_err)?;
                let (_, _, changed, id) = key.value();
                let Some((relevancy, 0)) =
                    index.get((t, o, id)).map_err(db_err)?.map(|g| g.value())
                else {
                    continue;
                };
                let Some(value) = feed.get((t, o, relevancy, id)).map_err(db_err)? else {
                    continue;
                };
                out.push(FeedItem {
                    owner: owner.to_owned(),
                    action_id: ObjectId::from_bytes(id),
                    relevancy,
                    reason: decode_item(value.value())?.reason,
                    changed,
                });
            }
            Ok(out)
        })
    }

    async fn feed_page(
        &self,
        tenant: &str,
        owner: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<FeedItem>> {
        self.inline(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let feed = txn.open_table(FEED).map_err(db_err)?;
            let (t, o) = (tenant.as_bytes(), owner.as_bytes());
            let lower = match range.newer_than {
                Some(p) => Bound::Excluded((t, o, p.relevancy, p.action_id.bytes())),
                None => Bound::Included((t, o, i64::MIN, [0u8; 12])),
            };
            let upper = match range.older_than {
                Some(p) => Bound::Excluded((t, o, p.relevancy, p.action_id.bytes())),
                None => Bound::Included((t, o, i64::MAX, [0xffu8; 12])),
            };
            let entries = feed.range((lower, upper)).map_err(db_err)?;
            let decode = |entry: Result<
                (
                    redb::AccessGuard<'_, (&[u8], &[u8], i64, Oid)>,
                    redb::AccessGuard<'_, &[u8]>,
                ),
                redb::StorageError,
            >|
             -> StoreResult<FeedItem> {
                let (key, value) = entry.map_err(db_err)?;
                let (_, _, relevancy, id) = key.value();
                let value = decode_item(value.value())?;
                Ok(FeedItem {
                    owner: owner.to_owned(),
                    action_id: ObjectId::from_bytes(id),
                    relevancy,
                    reason: value.reason,
                    changed: value.changed,
                })
            };
            if range.from_oldest {
                let mut items = entries
                    .take(range.limit)
                    .map(decode)
                    .collect::<StoreResult<Vec<_>>>()?;
                items.reverse();
                Ok(items)
            } else {
                entries.rev().take(range.limit).map(decode).collect()
            }
        })
    }

    async fn hide_feed_item(
        &self,
        tenant: &str,
        owner: &str,
        action_id: ObjectId,
    ) -> StoreResult<Option<FeedItem>> {
        let (tenant, owner) = (tenant.to_owned(), owner.to_owned());
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            let (t, o, id) = (tenant.as_bytes(), owner.as_bytes(), action_id.bytes());
            let item = {
                let mut index = txn.open_table(FEED_INDEX).map_err(db_err)?;
                let entry = index.get((t, o, id)).map_err(db_err)?.map(|g| g.value());
                let Some((relevancy, 0)) = entry else {
                    return Ok(None);
                };
                // Keep a tombstone so a re-run of the fan-out does not bring it back.
                index.insert((t, o, id), (relevancy, 1)).map_err(db_err)?;
                let mut feed = txn.open_table(FEED).map_err(db_err)?;
                let value = feed
                    .remove((t, o, relevancy, id))
                    .map_err(db_err)?
                    .map(|g| decode_item(g.value()))
                    .transpose()?;
                if let Some(value) = &value {
                    let mut changes = txn.open_table(FEED_CHANGES).map_err(db_err)?;
                    changes.remove((t, o, value.changed, id)).map_err(db_err)?;
                }
                value.map(|value| FeedItem {
                    owner: owner.clone(),
                    action_id,
                    relevancy,
                    reason: value.reason,
                    changed: value.changed,
                })
            };
            txn.commit().map_err(db_err)?;
            Ok(item)
        })
        .await
    }
}

impl EmbeddedStore {
    /// Adds many follow edges `(follower, followed)` in one write transaction:
    /// bulk loading (the benchmark's follow graphs), where one transaction per
    /// edge would spend its time in commits. Same records as
    /// [`Store::set_edge`]: both directions, and the follower noted as a user.
    pub async fn follow_many(&self, tenant: &str, edges: Vec<(String, String)>) -> StoreResult<()> {
        let tenant = tenant.to_owned();
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(db_err)?;
            {
                let mut table = txn.open_table(EDGES).map_err(db_err)?;
                let mut users = txn.open_table(USERS).map_err(db_err)?;
                let t = tenant.as_str();
                for (from, to) in &edges {
                    let (f, o) = (from.as_str(), to.as_str());
                    table
                        .insert((t, EDGE_FOLLOWS_OUT, f, o), ())
                        .map_err(db_err)?;
                    table
                        .insert((t, EDGE_FOLLOWS_IN, o, f), ())
                        .map_err(db_err)?;
                    if users.get((t, f)).map_err(db_err)?.is_none() {
                        users.insert((t, f), None).map_err(db_err)?;
                    }
                }
            }
            txn.commit().map_err(db_err)
        })
        .await
    }
}
