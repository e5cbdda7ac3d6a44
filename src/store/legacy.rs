//! The earlier embedded format, read: a data directory's `riverfeed.redb`
//! (redb, the format of the embedded store before RocksDB) streamed as
//! [`Record`]s, for `riverfeed migrate` and `riverfeed export`. Nothing here
//! writes that format (except the test fixture writer at the end); redb stays a
//! dependency only to read it.
//!
//! What the format does not keep is filled in, the same way every time:
//! - a hidden feed item (a tombstone, `feed_by_action` with hidden = 1) has lost
//!   its reason and change stamp with its `feed_items` entry: it is exported
//!   with reason `FOLLOWS` by the action's actor and change stamp 0 (the epoch).
//!   Neither is ever shown (a tombstone stays out of every feed and every
//!   change list); the relevancy it had is kept;
//! - an action with an entry in `pending` (queued, or claimed by a worker) is
//!   exported with its fan-out `PENDING`, so the store it is imported into
//!   runs it again; delivery is idempotent, so readers who had it keep one item.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::stream::{self, BoxStream};
use redb::{Database, ReadTransaction, TableDefinition};
use tokio::sync::mpsc;

use super::{EdgeRecordKind, ErrorKind, ItemRecord, Record, StoreError, StoreResult};
use crate::model::{
    Action, Comment, FanOut, FanOutState, GroupKind, MembershipRole, Millis, ObjectId, Reason,
    ReasonKind,
};

/// The file of the earlier format in a data directory.
pub const LEGACY_FILE: &str = "riverfeed.redb";

type Oid = [u8; 12];
type Bytes = &'static [u8];

// The tables of the format, as `src/store/embedded.rs` wrote them (redb).
const USERS: TableDefinition<(&str, &str), Option<&str>> = TableDefinition::new("users");
/// `(tenant, direction code, from, to)`: see the `EDGE_*` codes.
const EDGES: TableDefinition<(&str, u8, &str, &str), ()> = TableDefinition::new("edges");
/// `(tenant, group)` → kind code.
const GROUPS: TableDefinition<(&str, &str), u8> = TableDefinition::new("groups");
/// `(tenant, group, user)` → role code.
const MEMBERS: TableDefinition<(&str, &str, &str), u8> = TableDefinition::new("members");
/// `(tenant, user, group)` → `(kind code, role code)`.
const MEMBER_OF: TableDefinition<(&str, &str, &str), (u8, u8)> = TableDefinition::new("member_of");
/// `(tenant, action)` → the action as JSON.
const ACTIONS: TableDefinition<(&str, Oid), &[u8]> = TableDefinition::new("actions");
/// `(tenant, refId, action)`.
const SLICES: TableDefinition<(&str, &str, Oid), ()> = TableDefinition::new("slices");
/// `(action, tenant)` → `(lockedUntil, worker)`: the fan-out queue.
const PENDING: TableDefinition<(Oid, &str), (i64, &str)> = TableDefinition::new("pending");
/// `(tenant, owner, relevancy, action)` → reason and change stamp as JSON.
const FEED: TableDefinition<(Bytes, Bytes, i64, Oid), &[u8]> = TableDefinition::new("feed_items");
/// `(tenant, owner, action)` → `(relevancy, hidden)`.
const FEED_INDEX: TableDefinition<(Bytes, Bytes, Oid), (i64, u8)> =
    TableDefinition::new("feed_by_action");
/// `(tenant, action, first owner)` → owners of one delivery batch, packed.
const READERS: TableDefinition<(Bytes, Oid, Bytes), &[u8]> = TableDefinition::new("action_readers");
/// `(tenant, action, comment)` → the comment as JSON.
const COMMENTS: TableDefinition<(&str, Oid, Oid), &[u8]> = TableDefinition::new("comments");
/// `(tenant, action, user)`.
const LIKES: TableDefinition<(&str, Oid, &str), ()> = TableDefinition::new("likes");
/// `(tenant, refId, user)`.
const ASSIGNED_TO: TableDefinition<(&str, &str, &str), ()> = TableDefinition::new("assigned_to");
/// `(tenant, user, refId)`.
const ASSIGNMENTS: TableDefinition<(&str, &str, &str), ()> = TableDefinition::new("assignments");
/// `(tenant, user)` → supervisor.
const SUPERVISORS: TableDefinition<(&str, &str), &str> = TableDefinition::new("supervisors");
/// `(tenant, supervisor, user)`.
const SUPERVISEES: TableDefinition<(&str, &str, &str), ()> = TableDefinition::new("supervisees");
/// `(tenant, owner, changed, action)`.
const FEED_CHANGES: TableDefinition<(Bytes, Bytes, i64, Oid), ()> =
    TableDefinition::new("feed_changed");
/// `(comment, tenant)` → `(lockedUntil, worker, action)`: the bump queue.
const BUMPS: TableDefinition<(Oid, &str), (i64, &str, Oid)> = TableDefinition::new("bumps");

const EDGE_FOLLOWS_OUT: u8 = 0;
const EDGE_FRIEND: u8 = 2;

/// Records the reader thread may run ahead of the consumer. A bound keeps
/// memory flat when the consumer (an import over the network) is slower than
/// the file; 1,024 covers one import batch, so the next batch is read while
/// the last one is written.
const CHANNEL_CAPACITY: usize = 1024;

/// A feed item's value in `feed_items`.
#[derive(serde::Serialize, serde::Deserialize)]
struct ItemValue {
    #[serde(flatten)]
    reason: Reason,
    #[serde(default)]
    changed: Millis,
}

/// True when `dir` holds a store of the earlier format (`riverfeed.redb`).
pub fn is_legacy_dir(dir: &Path) -> bool {
    legacy_path(dir).is_file()
}

/// The file of the earlier format in `dir`.
pub fn legacy_path(dir: &Path) -> PathBuf {
    dir.join(LEGACY_FILE)
}

fn db_err(err: impl Into<redb::Error>) -> StoreError {
    StoreError::internal("legacy redb store", err.into())
}

fn corrupt(what: &str) -> StoreError {
    StoreError::new(
        ErrorKind::Internal,
        format!("legacy redb store: corrupt {what}"),
    )
}

fn json_err(what: &'static str) -> impl Fn(serde_json::Error) -> StoreError {
    move |err| StoreError::internal(format!("legacy redb store: corrupt {what}"), err)
}

fn utf8(bytes: &[u8], what: &str) -> StoreResult<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| corrupt(what))
}

/// Every record of `tenant` (or of every tenant) in the data directory `dir`,
/// streamed in the order [`super::Archive::export`] states. The file is opened
/// here, so a missing or locked file fails now; redb 2 has no read-only open,
/// but nothing here starts a write transaction (redb repairs a file that was
/// not closed cleanly as it opens it).
pub fn export(
    dir: &Path,
    tenant: Option<String>,
) -> StoreResult<BoxStream<'static, StoreResult<Record>>> {
    let path = legacy_path(dir);
    if !path.is_file() {
        return Err(StoreError::not_found(format!(
            "no {LEGACY_FILE} in {}",
            dir.display()
        )));
    }
    let db = Database::open(&path).map_err(|e| {
        let hint = match e {
            redb::DatabaseError::DatabaseAlreadyOpen => {
                " (a riverfeed process is using this data directory; stop it first)"
            }
            _ => "",
        };
        StoreError::from_source(
            ErrorKind::Unavailable,
            format!("cannot open {}{hint}", path.display()),
            e,
        )
    })?;
    export_db(Arc::new(db), tenant)
}

/// As [`export`], from a database already open (the redb embedded store's own).
pub(crate) fn export_db(
    db: Arc<Database>,
    tenant: Option<String>,
) -> StoreResult<BoxStream<'static, StoreResult<Record>>> {
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    // A thread of its own rather than tokio's blocking pool: the read lasts as
    // long as the consumer takes, and must not hold a pool thread that calls
    // of the running store need.
    std::thread::Builder::new()
        .name("legacy-export".into())
        .spawn(move || {
            let read = Reader {
                tenant: tenant.as_deref(),
                tx: &tx,
            }
            .run(&db);
            // The database goes before the channel closes: when the stream
            // ends, the file is no longer held by this thread.
            drop(db);
            if let Err(Halt::Failed(err)) = read {
                let _ = tx.blocking_send(Err(err));
            }
        })
        .map_err(|e| StoreError::internal("cannot start the legacy reader thread", e))?;
    Ok(Box::pin(stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|record| (record, rx))
    })))
}

/// Why the reader stopped early.
enum Halt {
    /// The consumer dropped the stream: nothing more to do.
    Closed,
    Failed(StoreError),
}

impl From<StoreError> for Halt {
    fn from(err: StoreError) -> Self {
        Halt::Failed(err)
    }
}

/// Walks the tables in export order and sends each record down the channel.
struct Reader<'a> {
    tenant: Option<&'a str>,
    tx: &'a mpsc::Sender<StoreResult<Record>>,
}

impl Reader<'_> {
    fn send(&self, record: Record) -> Result<(), Halt> {
        self.tx.blocking_send(Ok(record)).map_err(|_| Halt::Closed)
    }

    /// The smallest tenant key to start a scan at: the tenant's own, or the
    /// empty string (the smallest of all) for every tenant.
    fn start(&self) -> &str {
        self.tenant.unwrap_or("")
    }

    /// Whether a key's tenant is past the one exported (a scan stops there),
    /// and whether it is the one exported.
    fn past(&self, key_tenant: &str) -> bool {
        self.tenant.is_some_and(|t| key_tenant > t)
    }

    fn run(&self, db: &Database) -> Result<(), Halt> {
        // One read transaction: a consistent snapshot of the whole store.
        let txn = db.begin_read().map_err(db_err)?;
        self.users(&txn)?;
        self.edges(&txn)?;
        self.memberships(&txn)?;
        self.assignments(&txn)?;
        self.supervisors(&txn)?;
        self.actions(&txn)?;
        self.comments(&txn)?;
        self.likes(&txn)?;
        self.feed_items(&txn)?;
        Ok(())
    }

    fn users(&self, txn: &ReadTransaction) -> Result<(), Halt> {
        let table = txn.open_table(USERS).map_err(db_err)?;
        for entry in table.range((self.start(), "")..).map_err(db_err)? {
            let (key, value) = entry.map_err(db_err)?;
            let (tenant, id) = key.value();
            if self.past(tenant) {
                break;
            }
            self.send(Record::User {
                tenant: tenant.to_owned(),
                id: id.to_owned(),
                name: value.value().map(str::to_owned),
            })?;
        }
        Ok(())
    }

    fn edges(&self, txn: &ReadTransaction) -> Result<(), Halt> {
        let table = txn.open_table(EDGES).map_err(db_err)?;
        for entry in table.range((self.start(), 0u8, "", "")..).map_err(db_err)? {
            let (key, _) = entry.map_err(db_err)?;
            let (tenant, code, from, to) = key.value();
            if self.past(tenant) {
                break;
            }
            // Follows are stored both ways (out and in): the out entry is the
            // edge. A friendship is stored both ways with one code: the pair
            // is exported once, from the smaller id.
            let kind = match code {
                EDGE_FOLLOWS_OUT => EdgeRecordKind::Follows,
                EDGE_FRIEND if from < to => EdgeRecordKind::Friend,
                _ => continue,
            };
            self.send(Record::Edge {
                tenant: tenant.to_owned(),
                kind,
                from: from.to_owned(),
                to: to.to_owned(),
            })?;
        }
        Ok(())
    }

    fn memberships(&self, txn: &ReadTransaction) -> Result<(), Halt> {
        let members = txn.open_table(MEMBERS).map_err(db_err)?;
        let groups = txn.open_table(GROUPS).map_err(db_err)?;
        let member_of = txn.open_table(MEMBER_OF).map_err(db_err)?;
        for entry in members.range((self.start(), "", "")..).map_err(db_err)? {
            let (key, value) = entry.map_err(db_err)?;
            let (tenant, group, user) = key.value();
            if self.past(tenant) {
                break;
            }
            // The group's kind; the membership's own copy if the group entry
            // is missing.
            let kind = match groups.get((tenant, group)).map_err(db_err)? {
                Some(code) => code.value(),
                None => match member_of.get((tenant, user, group)).map_err(db_err)? {
                    Some(v) => v.value().0,
                    None => return Err(corrupt("membership without a group kind").into()),
                },
            };
            self.send(Record::Membership {
                tenant: tenant.to_owned(),
                group: group.to_owned(),
                group_kind: group_kind(kind),
                user: user.to_owned(),
                role: role(value.value()),
                since: 0,
            })?;
        }
        Ok(())
    }

    fn assignments(&self, txn: &ReadTransaction) -> Result<(), Halt> {
        let table = txn.open_table(ASSIGNMENTS).map_err(db_err)?;
        for entry in table.range((self.start(), "", "")..).map_err(db_err)? {
            let (key, _) = entry.map_err(db_err)?;
            let (tenant, user, ref_id) = key.value();
            if self.past(tenant) {
                break;
            }
            self.send(Record::Assignment {
                tenant: tenant.to_owned(),
                user: user.to_owned(),
                ref_id: ref_id.to_owned(),
            })?;
        }
        Ok(())
    }

    fn supervisors(&self, txn: &ReadTransaction) -> Result<(), Halt> {
        let table = txn.open_table(SUPERVISORS).map_err(db_err)?;
        for entry in table.range((self.start(), "")..).map_err(db_err)? {
            let (key, value) = entry.map_err(db_err)?;
            let (tenant, user) = key.value();
            if self.past(tenant) {
                break;
            }
            self.send(Record::Supervisor {
                tenant: tenant.to_owned(),
                user: user.to_owned(),
                supervisor: value.value().to_owned(),
            })?;
        }
        Ok(())
    }

    fn actions(&self, txn: &ReadTransaction) -> Result<(), Halt> {
        let table = txn.open_table(ACTIONS).map_err(db_err)?;
        let pending = txn.open_table(PENDING).map_err(db_err)?;
        for entry in table.range((self.start(), [0u8; 12])..).map_err(db_err)? {
            let (key, value) = entry.map_err(db_err)?;
            let (tenant, id) = key.value();
            if self.past(tenant) {
                break;
            }
            let mut action: Action =
                serde_json::from_slice(value.value()).map_err(json_err("action"))?;
            if pending.get((id, tenant)).map_err(db_err)?.is_some() {
                action.fan_out = FanOut::pending();
            } else if action.fan_out.state != FanOutState::Done {
                // Out of the queue means finished, whatever the copy says.
                action.fan_out = FanOut {
                    state: FanOutState::Done,
                    locked_until: None,
                    worker: None,
                };
            }
            self.send(Record::Action { action })?;
        }
        Ok(())
    }

    fn comments(&self, txn: &ReadTransaction) -> Result<(), Halt> {
        let table = txn.open_table(COMMENTS).map_err(db_err)?;
        let bumps = txn.open_table(BUMPS).map_err(db_err)?;
        let lower = (self.start(), [0u8; 12], [0u8; 12]);
        for entry in table.range(lower..).map_err(db_err)? {
            let (key, value) = entry.map_err(db_err)?;
            let (tenant, _, id) = key.value();
            if self.past(tenant) {
                break;
            }
            let comment: Comment =
                serde_json::from_slice(value.value()).map_err(json_err("comment"))?;
            let bump_queued = bumps.get((id, tenant)).map_err(db_err)?.is_some();
            self.send(Record::Comment {
                tenant: tenant.to_owned(),
                comment,
                bump_queued,
            })?;
        }
        Ok(())
    }

    fn likes(&self, txn: &ReadTransaction) -> Result<(), Halt> {
        let table = txn.open_table(LIKES).map_err(db_err)?;
        for entry in table
            .range((self.start(), [0u8; 12], "")..)
            .map_err(db_err)?
        {
            let (key, _) = entry.map_err(db_err)?;
            let (tenant, action, user) = key.value();
            if self.past(tenant) {
                break;
            }
            self.send(Record::Like {
                tenant: tenant.to_owned(),
                action_id: ObjectId::from_bytes(action),
                user: user.to_owned(),
            })?;
        }
        Ok(())
    }

    /// Visible items from `feed_items`, then the tombstones of `feed_by_action`.
    fn feed_items(&self, txn: &ReadTransaction) -> Result<(), Halt> {
        let start = self.start().as_bytes();
        let past = |t: &[u8]| self.tenant.is_some_and(|want| t > want.as_bytes());
        let feed = txn.open_table(FEED).map_err(db_err)?;
        let lower = (start, &[][..], i64::MIN, [0u8; 12]);
        for entry in feed
            .range::<(&[u8], &[u8], i64, Oid)>((Bound::Included(lower), Bound::Unbounded))
            .map_err(db_err)?
        {
            let (key, value) = entry.map_err(db_err)?;
            let (tenant, owner, relevancy, action) = key.value();
            if past(tenant) {
                break;
            }
            let value: ItemValue =
                serde_json::from_slice(value.value()).map_err(json_err("feed item"))?;
            self.send(Record::FeedItem {
                tenant: utf8(tenant, "tenant of a feed item")?,
                item: ItemRecord {
                    owner: utf8(owner, "owner of a feed item")?,
                    action_id: ObjectId::from_bytes(action),
                    relevancy,
                    reason: value.reason,
                    changed: value.changed,
                    hidden: false,
                },
            })?;
        }
        let index = txn.open_table(FEED_INDEX).map_err(db_err)?;
        let actions = txn.open_table(ACTIONS).map_err(db_err)?;
        let lower = (start, &[][..], [0u8; 12]);
        for entry in index
            .range::<(&[u8], &[u8], Oid)>((Bound::Included(lower), Bound::Unbounded))
            .map_err(db_err)?
        {
            let (key, value) = entry.map_err(db_err)?;
            let (tenant, owner, action) = key.value();
            if past(tenant) {
                break;
            }
            let (relevancy, hidden) = value.value();
            if hidden == 0 {
                continue;
            }
            let tenant = utf8(tenant, "tenant of a feed item")?;
            // The tombstone's reason went with its `feed_items` entry: the
            // action's actor stands in (see the module docs). A tombstone of an
            // action that is gone refers to nothing and is left out.
            let Some(bytes) = actions.get((tenant.as_str(), action)).map_err(db_err)? else {
                continue;
            };
            let actor: ActorOnly =
                serde_json::from_slice(bytes.value()).map_err(json_err("action"))?;
            self.send(Record::FeedItem {
                tenant,
                item: ItemRecord {
                    owner: utf8(owner, "owner of a feed item")?,
                    action_id: ObjectId::from_bytes(action),
                    relevancy,
                    reason: Reason::new(ReasonKind::Follows, actor.actor_id),
                    changed: 0,
                    hidden: true,
                },
            })?;
        }
        Ok(())
    }
}

/// The one field of an action a tombstone needs.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ActorOnly {
    actor_id: String,
}

fn group_kind(code: u8) -> GroupKind {
    if code == 0 {
        GroupKind::Team
    } else {
        GroupKind::Department
    }
}

fn role(code: u8) -> MembershipRole {
    if code == 0 {
        MembershipRole::Member
    } else {
        MembershipRole::Lead
    }
}

fn group_kind_code(kind: GroupKind) -> u8 {
    match kind {
        GroupKind::Team => 0,
        GroupKind::Department => 1,
    }
}

fn role_code(role: MembershipRole) -> u8 {
    match role {
        MembershipRole::Member => 0,
        MembershipRole::Lead => 1,
    }
}

/// Writes records into a new `riverfeed.redb` in `dir`, table by table as the
/// redb embedded store laid them out: test fixtures of the earlier format,
/// which outlive the store that wrote it. Not for production use (it is the
/// one writer of a format that is only read now).
#[doc(hidden)]
pub fn write_fixture(dir: &Path, records: &[Record]) -> StoreResult<()> {
    std::fs::create_dir_all(dir).map_err(|e| {
        StoreError::from_source(
            ErrorKind::Unavailable,
            format!("cannot create {}", dir.display()),
            e,
        )
    })?;
    let db = Database::create(legacy_path(dir)).map_err(db_err)?;
    let txn = db.begin_write().map_err(db_err)?;
    {
        let mut users = txn.open_table(USERS).map_err(db_err)?;
        let mut edges = txn.open_table(EDGES).map_err(db_err)?;
        let mut groups = txn.open_table(GROUPS).map_err(db_err)?;
        let mut members = txn.open_table(MEMBERS).map_err(db_err)?;
        let mut member_of = txn.open_table(MEMBER_OF).map_err(db_err)?;
        let mut actions = txn.open_table(ACTIONS).map_err(db_err)?;
        let mut slices = txn.open_table(SLICES).map_err(db_err)?;
        let mut pending = txn.open_table(PENDING).map_err(db_err)?;
        let mut feed = txn.open_table(FEED).map_err(db_err)?;
        let mut index = txn.open_table(FEED_INDEX).map_err(db_err)?;
        let mut readers = txn.open_table(READERS).map_err(db_err)?;
        let mut comments = txn.open_table(COMMENTS).map_err(db_err)?;
        let mut likes = txn.open_table(LIKES).map_err(db_err)?;
        let mut assigned_to = txn.open_table(ASSIGNED_TO).map_err(db_err)?;
        let mut assignments = txn.open_table(ASSIGNMENTS).map_err(db_err)?;
        let mut supervisors = txn.open_table(SUPERVISORS).map_err(db_err)?;
        let mut supervisees = txn.open_table(SUPERVISEES).map_err(db_err)?;
        let mut changes = txn.open_table(FEED_CHANGES).map_err(db_err)?;
        let mut bumps = txn.open_table(BUMPS).map_err(db_err)?;
        for record in records {
            match record {
                Record::User { tenant, id, name } => {
                    users
                        .insert((tenant.as_str(), id.as_str()), name.as_deref())
                        .map_err(db_err)?;
                }
                Record::Edge {
                    tenant,
                    kind,
                    from,
                    to,
                } => {
                    let (t, f, o) = (tenant.as_str(), from.as_str(), to.as_str());
                    let (forward, backward) = match kind {
                        EdgeRecordKind::Follows => (EDGE_FOLLOWS_OUT, 1),
                        EdgeRecordKind::Friend => (EDGE_FRIEND, EDGE_FRIEND),
                        // The old layout had no group follows.
                        EdgeRecordKind::Group => continue,
                    };
                    edges.insert((t, forward, f, o), ()).map_err(db_err)?;
                    edges.insert((t, backward, o, f), ()).map_err(db_err)?;
                }
                Record::Membership {
                    tenant,
                    group,
                    group_kind,
                    user,
                    role,
                    since: _,
                } => {
                    let (t, g, u) = (tenant.as_str(), group.as_str(), user.as_str());
                    let (k, r) = (group_kind_code(*group_kind), role_code(*role));
                    groups.insert((t, g), k).map_err(db_err)?;
                    members.insert((t, g, u), r).map_err(db_err)?;
                    member_of.insert((t, u, g), (k, r)).map_err(db_err)?;
                }
                Record::Assignment {
                    tenant,
                    user,
                    ref_id,
                } => {
                    let (t, u, r) = (tenant.as_str(), user.as_str(), ref_id.as_str());
                    assignments.insert((t, u, r), ()).map_err(db_err)?;
                    assigned_to.insert((t, r, u), ()).map_err(db_err)?;
                }
                Record::Supervisor {
                    tenant,
                    user,
                    supervisor,
                } => {
                    let (t, u, s) = (tenant.as_str(), user.as_str(), supervisor.as_str());
                    supervisors.insert((t, u), s).map_err(db_err)?;
                    supervisees.insert((t, s, u), ()).map_err(db_err)?;
                }
                Record::Action { action } => {
                    let (t, id) = (action.tenant.as_str(), action.id.bytes());
                    let bytes = serde_json::to_vec(action).map_err(json_err("action"))?;
                    actions.insert((t, id), bytes.as_slice()).map_err(db_err)?;
                    for ref_id in &action.ref_ids {
                        slices
                            .insert((t, ref_id.as_str(), id), ())
                            .map_err(db_err)?;
                    }
                    if action.fan_out.state != FanOutState::Done {
                        let until = action.fan_out.locked_until.unwrap_or(0);
                        let worker = action.fan_out.worker.as_deref().unwrap_or("");
                        pending.insert((id, t), (until, worker)).map_err(db_err)?;
                    }
                }
                Record::Comment {
                    tenant,
                    comment,
                    bump_queued,
                } => {
                    let (t, a, c) = (
                        tenant.as_str(),
                        comment.action_id.bytes(),
                        comment.id.bytes(),
                    );
                    let bytes = serde_json::to_vec(comment).map_err(json_err("comment"))?;
                    comments
                        .insert((t, a, c), bytes.as_slice())
                        .map_err(db_err)?;
                    if *bump_queued {
                        bumps.insert((c, t), (0, "", a)).map_err(db_err)?;
                    }
                }
                Record::Like {
                    tenant,
                    action_id,
                    user,
                } => {
                    likes
                        .insert((tenant.as_str(), action_id.bytes(), user.as_str()), ())
                        .map_err(db_err)?;
                }
                Record::FeedItem { tenant, item } => {
                    let (t, o, a) = (
                        tenant.as_bytes(),
                        item.owner.as_bytes(),
                        item.action_id.bytes(),
                    );
                    index
                        .insert((t, o, a), (item.relevancy, u8::from(item.hidden)))
                        .map_err(db_err)?;
                    let mut packed = (item.owner.len() as u32).to_le_bytes().to_vec();
                    packed.extend_from_slice(o);
                    readers
                        .insert((t, a, o), packed.as_slice())
                        .map_err(db_err)?;
                    if !item.hidden {
                        let value = serde_json::to_vec(&ItemValue {
                            reason: item.reason.clone(),
                            changed: item.changed,
                        })
                        .map_err(json_err("feed item"))?;
                        feed.insert((t, o, item.relevancy, a), value.as_slice())
                            .map_err(db_err)?;
                        changes
                            .insert((t, o, item.changed, a), ())
                            .map_err(db_err)?;
                    }
                }
                // The old layout had no notifications.
                Record::NoticeGroup { .. } | Record::Inbox { .. } | Record::NoticeJob { .. } => {
                    continue
                }
            }
        }
    }
    txn.commit().map_err(db_err)
}
