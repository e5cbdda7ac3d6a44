//! The storage port: one object-safe trait, used as `Arc<dyn Store>`, that every
//! backend implements and the API and the fan-out worker are written against.
//! It is the sum of one trait per concern ([`RelationStore`], [`ActionStore`],
//! [`ReactionStore`], [`QueueStore`], [`TimelineStore`], [`NoticeStore`], …); bring
//! [`prelude`] into scope to call them.
//!
//! Some concerns are primitives that rules are written on, once, above the
//! backends: [records](records) (keyed values under a version: cuts,
//! celebrities, inboxes, groups' kinds, group feeds' rings) and
//! [relations](relations) (the graph and likes, from both ends); [`Records`],
//! [`GroupFeeds`] and [`Graph`] hold what each kind means and how it changes,
//! for every backend.
//!
//! Each entity has one read, told what to answer by a selector
//! ([`TimelineRead`], [`Others`], [`Keys`], [`NoticeSelect`]), and one write,
//! told what to change ([`TimelineWrite`], [`RiverWrite`], [`NoticeWrite`],
//! [`Reaction`], [`Removal`], [`JobEnd`]), beside the queries a primitive
//! cannot serve well, each named for what it answers (outboxes, slices,
//! expired actions, discussions, notice counts, idle rivers). Callers use
//! the names of what they do through traits every store has ([`Timelines`],
//! [`Reactions`], [`Jobs`], [`Notices`]), so a backend writes each entry
//! point once.
//!
//! Backends: [`embedded`] (RocksDB, the default) and [`mongo`]. [`open`] picks
//! one from a URL; [`metered`] wraps any of them and counts and times every
//! call. Each trait is declared through `metered::port!`, which meters it as
//! it declares it (see [`metered`] for adding one). The conformance suite in
//! `tests/it/store_suite/` holds every backend to the same contract.
//!
//! Enums are stored by the codes in `codes.rs`, one table per enum for both
//! backends, read strictly: an unknown code is a corrupt record
//! ([`StoreError::corrupt`]), never a default.

pub mod archive;
pub(crate) mod codes;
pub mod embedded;
mod error;
pub mod event_log;
pub mod group_feeds;
pub mod job_kinds;
pub mod jobs;
pub mod metered;
pub mod mongo;
pub mod notices;
pub mod records;
pub mod relations;
mod sources;

use std::sync::Arc;

use async_trait::async_trait;

pub use archive::{Archive, EdgeRecordKind, ItemRecord, Record};
pub use error::{ErrorKind, StoreError, StoreResult};
pub use group_feeds::GroupFeeds;
pub use job_kinds::{BumpJob, Ended, FanOutJob, FollowJob, Unfollow, WebhookJob};
pub use jobs::{Held, Job, JobBacklog, JobEnd, JobKind, JobStore, Jobs, Lease, Queued, QueuedRead};
use metered::port;
pub use notices::{NoticeJob, NoticeSelect, NoticeSource, NoticeStore, NoticeWrite, Notices};
pub use records::{Keys, RecordKind, RecordStore, Records, Stored};
pub use relations::{Change, Existing, Graph, Others, Related, Relation, RelationStore, UserStore};
pub use sources::{
    Cut, Outbox, Posted, River, RiverStore, RiverWrite, SourceStore, DEFAULT_RIVER_SIZE,
};

/// The concern traits, for calling a store's methods.
pub mod prelude {
    pub use super::{
        ActionStore, Graph, GroupFeeds, JobStore, Jobs, NoticeStore, Notices, QueueStore,
        ReactionStore, Reactions, RecordStore, Records, RelationStore, RiverStore, SourceStore,
        Store, TimelineStore, Timelines, UserStore,
    };
}

use crate::model::{
    Action, Comment, Counts, FeedItem, Group, Membership, Millis, ObjectId, Position, Reason,
    Scope, Stamp,
};

/// Which way to follow an edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the user to others (whom `user` follows).
    Out,
    /// From others to the user (who follows `user`).
    In,
}

/// A range of one feed, in newest-first order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedRange {
    /// Only items strictly older than this.
    pub older_than: Option<Position>,
    /// Only items strictly newer than this.
    pub newer_than: Option<Position>,
    /// How many items at most.
    pub limit: usize,
    /// Take the items nearest `newer_than` (the end of the range) rather than
    /// the newest ones. Results are newest first either way.
    pub from_oldest: bool,
}

impl FeedRange {
    /// Whether `p` lies within the range's bounds (strictly).
    pub fn holds(&self, p: Position) -> bool {
        self.older_than.is_none_or(|o| p < o) && self.newer_than.is_none_or(|n| p > n)
    }

    /// Sorts `items` newest first by `position` and keeps the `limit` the
    /// range asks for: the newest, or with `from_oldest` the oldest. (The
    /// bounds are the caller's to apply.)
    pub fn cut<T>(&self, items: &mut Vec<T>, position: impl Fn(&T) -> Position) {
        items.sort_by_key(|i| std::cmp::Reverse(position(i)));
        if items.len() > self.limit {
            if self.from_oldest {
                items.drain(..items.len() - self.limit);
            } else {
                items.truncate(self.limit);
            }
        }
    }
}

/// One batch of a fan-out's deliveries, under the job's lease.
#[derive(Clone, Debug)]
pub struct DeliveryBatch {
    pub lease: Lease,
    pub items: Vec<Delivery>,
    /// The fan-out ends with it: the action is marked `Done` and the job
    /// finished, in the same step as the writes where the backend can.
    pub last: bool,
}

/// One feed item to write (a delivery), or to raise (a bump).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub owner: String,
    pub relevancy: Millis,
    pub reason: Reason,
}

/// One action to put into one reader's feed outside a fan-out: a new
/// follow's backfill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backfill {
    pub action_id: ObjectId,
    pub relevancy: Millis,
    pub reason: Reason,
    /// Its change stamp: when it is put in (a follow), or, for an item the
    /// reader already saw pulled (a river built), its own time.
    pub changed: Millis,
}

/// Outcome of a group-membership change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinOutcome {
    Joined(Membership),
    /// The group exists with the other kind.
    KindMismatch(Group),
}

port! {
/// Everything Riverfeed stores, one trait per concern. Every call is confined
/// to one tenant, except the fan-out claim, which serves all tenants. Export
/// and import of whole stores are their own concern, in [`Archive`].
pub trait Store:
    UserStore
    + RelationStore
    + ActionStore
    + ReactionStore
    + QueueStore
    + TimelineStore
    + SourceStore
    + RiverStore
    + NoticeStore
    + JobStore
    + RecordStore
    + Archive
    + Send
    + Sync
    + 'static
{
    /// Which backend this is, and what it offers beside the port.
    fn backend(&self) -> Backend;

    /// The backend's counters (MongoDB: commands sent, by name), for
    /// `/metrics` and the bench, and with [`Measure::Footprint`] what the
    /// materialised timelines hold and the store's size on disk (the feed
    /// models' costs, for the bench), which counts every item: not for a
    /// hot path.
    async fn stats(&self, measure: Measure) -> StoreResult<Stats>;

    /// Why the store refuses writes now (a full or failing disk), if it
    /// does while it still serves reads: what `/healthz` and `/readyz`
    /// report beside a store that does not answer at all.
    fn write_fault(&self) -> Option<String> {
        None
    }
}
}

/// How much [`Store::stats`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// The backend's counters alone: cheap, for every `/metrics` scrape.
    Counters,
    /// The counters and the [`Footprint`], which counts every item.
    Footprint,
}

/// What [`Store::stats`] answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Backend-specific counters, by name (MongoDB: commands sent, read
    /// after the footprint's own; none elsewhere).
    pub counters: Vec<(String, u64)>,
    /// What the store holds, if [`Measure::Footprint`] asked for it.
    pub footprint: Option<Footprint>,
}

/// A backend as [`Store::backend`] describes it.
#[derive(Clone)]
pub struct Backend {
    /// A short name, for logs.
    pub name: &'static str,
    /// The log live events travel by between processes sharing the store;
    /// `None` where the store is one process's (embedded).
    pub event_log: Option<Arc<dyn event_log::EventLog>>,
}

/// What a store holds, as [`Store::stats`] measures it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Materialised feed items (timeline entries), hidden tombstones aside.
    pub feed_items: u64,
    /// Bytes the whole store takes (data files and buffers).
    pub bytes: u64,
    /// Documents the store holds, of every kind (MongoDB; 0 elsewhere).
    pub documents: u64,
}

/// How [`ActionStore::remove_action`] takes an action away. Either way its
/// feed items go (hidden tombstones with them), and copies of it (MongoDB)
/// go before the action changes, so none left by a crash still shows it; a
/// delivery racing the removal checks the action again after writing and
/// takes its items back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The action stays stored, marked hidden, with its reactions: it
    /// leaves every feed and slice, and no delivery brings it back.
    Hide,
    /// The action goes, with its slice entries, comments, likes and
    /// discussion entries, in the same step where the backend can (a bump
    /// or fan-out still queued finds it gone, and is finished).
    Delete,
}

impl Removal {
    /// Whether the action's record and reactions go too.
    pub fn deletes(self) -> bool {
        self == Removal::Delete
    }

    /// The answer for an action that is not there.
    pub fn not_found(id: ObjectId) -> StoreError {
        StoreError::not_found(format!("no action {id}"))
    }
}

/// What [`ActionStore::insert_action`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Inserted {
    /// The action is stored, with its fan-out job.
    New,
    /// Its actor has an action under its foreign id already: this one, as
    /// stored. Nothing was written.
    Existing(Box<Action>),
}

port! {
/// Actions, stored once: their records, scopes and the slices by ref.
pub trait ActionStore: Send + Sync {
    /// Stores a new action (its fan-out `Pending`) and notes its actor as a
    /// user; unless an action is stored under its id already (a retry of a
    /// request that drew the id before), or it has a foreign id
    /// ([`Action::foreign`]) its actor has an action under already: then
    /// nothing is written and that action is answered. The backend holds a foreign id unique per tenant and actor
    /// in the same step as the write, so of records racing under one id (in
    /// any number of processes) one is stored and the others answer it.
    async fn insert_action(&self, action: &Action) -> StoreResult<Inserted>;
    /// The actions that exist among `ids`, in no particular order. One round trip.
    async fn get_actions(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<Vec<Action>>;
    /// The actions recorded under foreign ids: of each `(actor, foreign
    /// id)` in `under`, the actor's action under it, if there is one, in
    /// no particular order (what an import checks its own against). One
    /// round trip.
    async fn foreign_actions(
        &self,
        tenant: &str,
        under: &[(String, String)],
    ) -> StoreResult<Vec<Action>>;
    /// Takes an action out of every feed, and hides or deletes it as
    /// `removal` says (see [`Removal`]). Returns the feed items removed;
    /// `NotFound` ([`Removal::not_found`]) if there is no such action.
    async fn remove_action(
        &self,
        tenant: &str,
        id: ObjectId,
        removal: Removal,
    ) -> StoreResult<Vec<FeedItem>>;
    /// Changes who may see an action and queues its fan-out again, so readers it
    /// now reaches get it (those who have it keep one item). Returns the
    /// updated action; `NotFound` if there is none.
    async fn set_action_scope(
        &self,
        tenant: &str,
        id: ObjectId,
        scope: Scope,
        readers: &[String],
        scope_groups: &[String],
    ) -> StoreResult<Action>;
    /// Ids of actions whose `refIds` contain `ref_id`, newest first, older than `before`.
    async fn slice(
        &self,
        tenant: &str,
        ref_id: &str,
        before: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<ObjectId>>;

    /// Up to `limit` actions, across tenants, whose expiry (their own
    /// `expires_at`, or `item_ttl` after `conducted`) lies at or before
    /// `until`, soonest first, as (expiry, tenant, id): what the expiry
    /// sweeper deletes, and when it looks next. One round trip per kind of
    /// expiry.
    async fn expired(
        &self,
        until: Millis,
        item_ttl: Option<Millis>,
        limit: usize,
    ) -> StoreResult<Vec<(Millis, String, ObjectId)>>;

    /// Sets the display name copied next to `ref_id` in every action of the
    /// tenant that refers to it, by the descriptors' `(id field, name
    /// field)` pairs (`applicantName` beside `applicantId`…), in batches.
    /// Returns how many copied names changed.
    async fn rename_ref(
        &self,
        tenant: &str,
        ref_id: &str,
        name: &str,
        pairs: &[(String, String)],
    ) -> StoreResult<u64>;
}
}

/// A reaction to an action, as [`ReactionStore::react`] makes it.
#[derive(Clone, Copy, Debug)]
pub enum Reaction<'a> {
    /// A comment, with the bump it causes (its [`BumpJob`]) queued in the
    /// same step. Always a change, but for a comment stored under its id
    /// already (a retry of a request that drew the id before): nothing is
    /// written then.
    Comment(&'a Comment),
    /// `user` likes (`on`) or unlikes an action; a user likes an action at
    /// most once. A like that turns on queues the notice it owes (its
    /// [`NoticeJob`], at `at`) in the same step, afresh over a job of its
    /// key that waits or runs: that job's worker may have read the like as
    /// taken back, so it finds its lease lost and the job runs again.
    Like {
        action_id: ObjectId,
        user: &'a str,
        on: bool,
        at: Millis,
    },
}

/// The reactions by what they are, over [`ReactionStore::react`]. Every
/// [`ReactionStore`] has them.
#[async_trait]
pub trait Reactions: ReactionStore {
    /// Adds a comment: see [`Reaction::Comment`]. Returns the counts after.
    async fn add_comment(&self, tenant: &str, comment: &Comment) -> StoreResult<Counts> {
        let (_, counts) = self.react(tenant, Reaction::Comment(comment)).await?;
        Ok(counts)
    }

    /// Likes or unlikes an action at `at`: see [`Reaction::Like`].
    async fn set_like(
        &self,
        tenant: &str,
        action_id: ObjectId,
        user: &str,
        on: bool,
        at: Millis,
    ) -> StoreResult<(bool, Counts)> {
        let like = Reaction::Like {
            action_id,
            user,
            on,
            at,
        };
        self.react(tenant, like).await
    }
}

impl<T: ReactionStore + ?Sized> Reactions for T {}

port! {
/// Comments and likes on actions, counted on the action.
pub trait ReactionStore: Send + Sync {
    /// Makes one reaction (see [`Reaction`]) and counts it on its action.
    /// Returns whether anything changed and the action's counts after.
    /// `NotFound` if there is no such action.
    async fn react(&self, tenant: &str, reaction: Reaction<'_>) -> StoreResult<(bool, Counts)>;
    /// Comments on an action, oldest first, after `after`.
    async fn comments(
        &self,
        tenant: &str,
        action_id: ObjectId,
        after: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<Comment>>;
    /// A range of `user`'s discussions: the actions they commented on, each
    /// at the time of its latest comment by anyone, newest first. One round
    /// trip.
    async fn discussions(
        &self,
        tenant: &str,
        user: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>>;
}
}

port! {
/// The writes of the feed's jobs done under their leases: a fan-out's
/// deliveries and a cleanup's removals.
pub trait QueueStore: Send + Sync {
    /// Writes each batch's feed items for the action its lease's fan-out
    /// job names, skipping readers that already have one (so a re-run
    /// delivers nothing twice; they take the reason that applies now, a
    /// new scope's, unless theirs is their own or a bump's, and keep where
    /// it stands); writes none for an action hidden or deleted meanwhile.
    /// A batch that is not the `last` renews its lease to `now + lease_ms`;
    /// the last marks the action's fan-out `Done` and finishes the job.
    /// Answers one result per batch, in order, each the items it newly
    /// wrote: a batch whose lease is lost (another worker holds the job, or
    /// it is gone) fails alone with `LeaseLost`. Backends that can write
    /// every batch in one step (one commit) do; an error of the step
    /// itself fails them all.
    async fn deliver(
        &self,
        now: Millis,
        batches: &[DeliveryBatch],
    ) -> StoreResult<Vec<StoreResult<Vec<FeedItem>>>>;

    /// Runs the cleanup `lease` holds (an [`Unfollow`]'s job): takes the
    /// items it covers out of the reader's feed and finishes the job, in
    /// one step where the backend can (a re-follow that cancels the job
    /// meanwhile then keeps every item). It covers the `named` items
    /// (the ones [`Unfollow::covers`] picked) that still stand for one of
    /// its [`Ended::reasons`] and are not hidden (no tombstone: a later delivery may bring one
    /// back). Returns the items removed. `LeaseLost` if another worker
    /// holds the job; nothing if it is gone.
    async fn clean(&self, lease: &Lease, named: &[ObjectId]) -> StoreResult<Vec<FeedItem>>;
}
}

/// What a [`TimelineStore::timeline`] read answers of one reader's visible
/// items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimelineRead {
    /// A range of the home feed, newest first.
    Range(FeedRange),
    /// The items that changed (were delivered or bumped) after a stamp, in
    /// the order they changed, at most `limit`.
    ChangedAfter { after: Stamp, limit: usize },
    /// The item of one action, as the timeline holds it: none where it
    /// holds none or a hidden tombstone (an item a pull model merges at
    /// read is not held).
    Item(ObjectId),
}

/// A change to readers' timelines, as [`TimelineStore::write_timeline`]
/// makes it.
#[derive(Clone, Copy, Debug)]
pub enum TimelineWrite<'a> {
    /// Puts items into `owner`'s feed, each stamped as it says (a new
    /// follow's backfill, a river built). Actions the reader already has
    /// an item of, or hid, and actions hidden or deleted meanwhile are
    /// skipped; an item held keeps its place, and takes the reason given
    /// if its own is a scope's that no longer applies
    /// ([`Reason::stale_beside`](crate::model::Reason::stale_beside)).
    /// Answers the items written, in the order asked.
    ///
    /// `derived` items are read again from the reader's sources if lost (a
    /// river being built): the backend need not make them durable before
    /// it answers. Writes land in the order they are made, so a crash that
    /// loses them loses whatever was written after them too (the river's
    /// record saying it is complete), never them alone.
    Backfill {
        owner: &'a str,
        items: &'a [Backfill],
        derived: bool,
    },
    /// Raises `action_id` in each `raises` owner's feed to the given
    /// relevancy, with the given reason, where that is higher than where
    /// the item stands; owners without the item (or who hid it) are
    /// skipped. Stamps what it changed `now`. Answers the items raised.
    /// Only ever upwards, so raising again, or two raises at once, end
    /// where the highest leaves it.
    Raise {
        action_id: ObjectId,
        now: Millis,
        raises: &'a [Delivery],
    },
    /// Removes one action from `owner`'s feed for good, materialised or
    /// not: a tombstone stays, so no later delivery, backfill or pull
    /// brings it back. Answers the item if one was materialised.
    Hide { owner: &'a str, action_id: ObjectId },
}

port! {
/// Readers' feeds as materialised: ranges, changes since a stamp, hidden items.
pub trait TimelineStore: Send + Sync {
    /// What `read` asks of `owner`'s visible items. One round trip.
    async fn timeline(
        &self,
        tenant: &str,
        owner: &str,
        read: TimelineRead,
    ) -> StoreResult<Vec<FeedItem>>;
    /// Which of `action_ids` `owner`'s timeline holds, as an item or as a
    /// hidden tombstone: a pulled entry of one of them is already placed
    /// (or hidden) and is left out. One round trip.
    async fn materialised(
        &self,
        tenant: &str,
        owner: &str,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>>;
    /// Makes one change to `tenant`'s timelines (see [`TimelineWrite`]).
    /// Returns the items it changed, as they stand after it.
    async fn write_timeline(
        &self,
        tenant: &str,
        write: TimelineWrite<'_>,
    ) -> StoreResult<Vec<FeedItem>>;
}
}

/// The timeline reads and writes by what they do, over
/// [`TimelineStore::timeline`] and [`TimelineStore::write_timeline`].
/// Every [`TimelineStore`] has them.
#[async_trait]
pub trait Timelines: TimelineStore {
    /// A range of `owner`'s home feed, newest first. One round trip.
    async fn feed_page(
        &self,
        tenant: &str,
        owner: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<FeedItem>> {
        self.timeline(tenant, owner, TimelineRead::Range(range))
            .await
    }

    /// Items of `owner`'s feed that changed after `after`, in the order
    /// they changed, at most `limit`.
    async fn feed_changes(
        &self,
        tenant: &str,
        owner: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        let read = TimelineRead::ChangedAfter { after, limit };
        self.timeline(tenant, owner, read).await
    }

    /// `owner`'s visible item of one action, as the timeline holds it.
    async fn feed_item(
        &self,
        tenant: &str,
        owner: &str,
        action_id: ObjectId,
    ) -> StoreResult<Option<FeedItem>> {
        let read = TimelineRead::Item(action_id);
        Ok(self.timeline(tenant, owner, read).await?.pop())
    }

    /// Backfills `owner`'s feed: see [`TimelineWrite::Backfill`].
    async fn backfill(
        &self,
        tenant: &str,
        owner: &str,
        items: &[Backfill],
    ) -> StoreResult<Vec<FeedItem>> {
        let write = TimelineWrite::Backfill {
            owner,
            items,
            derived: false,
        };
        self.write_timeline(tenant, write).await
    }

    /// Fills `reader`'s river being built: a backfill whose items the
    /// reader's sources give again (see [`TimelineWrite::Backfill`]).
    async fn fill_river(
        &self,
        tenant: &str,
        reader: &str,
        items: &[Backfill],
    ) -> StoreResult<Vec<FeedItem>> {
        let write = TimelineWrite::Backfill {
            owner: reader,
            items,
            derived: true,
        };
        self.write_timeline(tenant, write).await
    }

    /// Raises an action in readers' feeds: see [`TimelineWrite::Raise`].
    async fn raise(
        &self,
        tenant: &str,
        action_id: ObjectId,
        now: Millis,
        raises: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        let write = TimelineWrite::Raise {
            action_id,
            now,
            raises,
        };
        self.write_timeline(tenant, write).await
    }

    /// Hides one action in `owner`'s feed for good: see
    /// [`TimelineWrite::Hide`].
    async fn hide_feed_item(
        &self,
        tenant: &str,
        owner: &str,
        action_id: ObjectId,
    ) -> StoreResult<Option<FeedItem>> {
        let write = TimelineWrite::Hide { owner, action_id };
        Ok(self.write_timeline(tenant, write).await?.pop())
    }
}

impl<T: TimelineStore + ?Sized> Timelines for T {}

/// Opens the store a URL names: `embedded:<dir>`, or a `mongodb://` /
/// `mongodb+srv://` URI (database from its path, `riverfeed` by default).
pub async fn open(url: &str) -> StoreResult<Arc<dyn Store>> {
    open_with(url, &StoreSettings::default()).await
}

/// The backends' settings; each reads its own.
#[derive(Clone, Debug, Default)]
pub struct StoreSettings {
    pub embedded: embedded::EmbeddedOptions,
    pub mongo: mongo::MongoSettings,
}

/// As [`open_with`], for reading the store whole (an export) while servers
/// may be using it: MongoDB serves any number of clients, and an embedded
/// store a server holds is read through a view of it as of one moment.
pub async fn open_to_read(url: &str, settings: &StoreSettings) -> StoreResult<Arc<dyn Store>> {
    match url.strip_prefix("embedded:") {
        Some(dir) => Ok(Arc::new(embedded::EmbeddedStore::open_to_read(
            std::path::Path::new(dir),
            &settings.embedded,
        )?)),
        None => open_with(url, settings).await,
    }
}

/// As [`open`], with the backends' settings.
pub async fn open_with(url: &str, settings: &StoreSettings) -> StoreResult<Arc<dyn Store>> {
    if let Some(dir) = url.strip_prefix("embedded:") {
        let store =
            embedded::EmbeddedStore::open_with(std::path::Path::new(dir), &settings.embedded)?;
        return Ok(Arc::new(store));
    }
    if url.starts_with("mongodb://") || url.starts_with("mongodb+srv://") {
        return Ok(Arc::new(
            mongo::MongoStore::connect(url, &settings.mongo).await?,
        ));
    }
    Err(StoreError::invalid(format!(
        "unknown store URL scheme {:?}; expected embedded:<dir>, mongodb:// or mongodb+srv://",
        url.split(':').next().unwrap_or_default()
    )))
}
