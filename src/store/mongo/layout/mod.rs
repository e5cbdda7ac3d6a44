//! How MongoDB stores what push and rivers materialise: readers' timelines.
//! One contract ([`Layout`]), three shapes, picked with `--timeline-layout`:
//!
//! - [`items`]: one document per reader and action (`feed_items`), unique
//!   on `{tenant, owner, actionId}`;
//! - time buckets: one document per reader and day of relevancy
//!   (`timed_buckets`), written by an upsert that `$push`es the entry;
//! - sized buckets: one document per reader and run of `--bucket-size`
//!   entries (`sized_buckets`), filled by an upsert into one with room.
//!
//! Each may carry copies of the actions in its entries (`--embed-actions`,
//! see [`copy`]).
//!
//! Every layout passes the same conformance suite and serves the same feeds
//! (the cross-model test runs on each); they differ in documents and bytes
//! written per delivery and in round trips per page (see the README).

mod bucket_archive;
mod bucket_copies;
mod buckets;
mod cache;
mod cached;
pub(super) mod copy;
mod items;

use std::collections::HashSet;

use async_trait::async_trait;
use bson::DateTime;
use futures_util::stream::BoxStream;
use serde::Serialize;

pub(super) use buckets::Buckets;
pub(super) use cache::RiverCache;
pub(super) use items::Items;

use crate::model::{ActionCopy, FeedItem, Millis, ObjectId, Position, Reason, ReasonKind, Stamp};
use crate::store::{FeedRange, StoreResult};

/// Where push and rivers keep readers' timelines on MongoDB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum TimelineLayout {
    /// One document per reader and action.
    #[default]
    Items,
    /// One document per reader and day, entries pushed in.
    #[value(name = "time_buckets")]
    TimeBuckets,
    /// Documents of `--bucket-size` entries per reader.
    #[value(name = "sized_buckets")]
    SizedBuckets,
}

impl TimelineLayout {
    pub const ALL: [TimelineLayout; 3] = [
        TimelineLayout::Items,
        TimelineLayout::TimeBuckets,
        TimelineLayout::SizedBuckets,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TimelineLayout::Items => "items",
            TimelineLayout::TimeBuckets => "time_buckets",
            TimelineLayout::SizedBuckets => "sized_buckets",
        }
    }
}

impl std::fmt::Display for TimelineLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Entries a sized bucket holds unless `--bucket-size` says otherwise.
pub const DEFAULT_BUCKET_SIZE: usize = 100;

/// One item as a layout stores it (a tombstone is `hidden`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Stored {
    pub tenant: String,
    pub item: FeedItem,
    pub hidden: bool,
}

/// Which of one reader's visible items a removal takes: those of one of
/// `reasons`, narrowed by actor, by action, and to those strictly below a
/// position.
#[derive(Clone, Copy, Debug)]
pub(super) struct Which<'a> {
    pub owner: &'a str,
    pub reasons: &'a [ReasonKind],
    pub ids: Option<&'a [ObjectId]>,
    pub below: Option<Position>,
}

impl Which<'_> {
    pub fn takes(&self, item: &FeedItem) -> bool {
        item.owner == self.owner
            && self.reasons.contains(&item.reason.kind)
            && self.ids.is_none_or(|ids| ids.contains(&item.action_id))
            && self.below.is_none_or(|b| item.position() < b)
    }
}

/// Readers' timelines, as one MongoDB layout keeps them. Every call is
/// confined to one tenant.
#[async_trait]
pub(super) trait Layout: Send + Sync {
    /// Writes `items` (of any readers and actions), skipping every reader
    /// who holds the action already, as an item or a tombstone. Returns the
    /// positions in `items` skipped.
    async fn insert(&self, tenant: &str, items: &[FeedItem]) -> StoreResult<HashSet<usize>>;
    /// A range of one reader's visible items, newest first (as
    /// [`TimelineStore::feed_page`](crate::store::TimelineStore::feed_page)).
    async fn page(&self, tenant: &str, owner: &str, range: FeedRange)
        -> StoreResult<Vec<FeedItem>>;
    /// One reader's visible items changed after `after`, oldest change
    /// first, at most `limit`.
    async fn changes(
        &self,
        tenant: &str,
        owner: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>>;
    /// Which of `owners` hold which of `ids`, as items or tombstones.
    /// One query.
    async fn holders(
        &self,
        tenant: &str,
        owners: &[&str],
        ids: &[ObjectId],
    ) -> StoreResult<HashSet<(String, ObjectId)>>;
    /// The reader's visible item of `id`, if any. One query.
    async fn item(&self, tenant: &str, owner: &str, id: ObjectId) -> StoreResult<Option<FeedItem>>;
    /// Turns the reader's item into a tombstone, or lays a tombstone where
    /// they hold none. Returns the item hidden, if it was visible.
    async fn hide(&self, tenant: &str, owner: &str, id: ObjectId) -> StoreResult<Option<FeedItem>>;
    /// Removes the items of `ids`: every reader's, tombstones too (`owner`
    /// `None`), or one reader's visible ones. Returns the visible items
    /// removed.
    async fn remove(
        &self,
        tenant: &str,
        owner: Option<&str>,
        ids: &[ObjectId],
    ) -> StoreResult<Vec<FeedItem>>;
    /// Removes the visible items `which` selects; returns them.
    async fn take(&self, tenant: &str, which: Which<'_>) -> StoreResult<Vec<FeedItem>>;
    /// Raises `owners`' visible items of `action` below `relevancy` to it,
    /// with `reason`, changed at `changed`: only upwards, however many raise
    /// at once. Returns the items raised.
    async fn raise(
        &self,
        tenant: &str,
        action: ObjectId,
        owners: &[&str],
        relevancy: Millis,
        reason: &Reason,
        changed: Millis,
    ) -> StoreResult<Vec<FeedItem>>;
    /// Gives `owners`' visible items of `action` whose reason is of a kind
    /// in `from` `reason` instead.
    async fn refresh(
        &self,
        tenant: &str,
        action: ObjectId,
        owners: &[&str],
        reason: &Reason,
        from: &[ReasonKind],
    ) -> StoreResult<()>;
    /// Visible items in all tenants.
    async fn count(&self) -> StoreResult<u64>;
    /// Every item of `tenant` (of every tenant if `None`), tombstones too,
    /// each reader's newest first.
    async fn export(
        &self,
        tenant: Option<&str>,
    ) -> StoreResult<BoxStream<'static, StoreResult<Stored>>>;
    /// Writes items as an import gives them, replacing any the reader holds
    /// for the same action.
    async fn import(&self, items: Vec<Stored>) -> StoreResult<()>;
    /// Creates the layout's collections' indexes (with those that find
    /// copies by actor when the store `embeds` actions).
    async fn create_indexes(&self, embeds: bool) -> StoreResult<()>;
    /// Takes the copies of the actions `ids` out of every entry (reads
    /// load those actions until they are copied again).
    async fn uncopy(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<()>;
    /// Gives every visible entry of each copy's action that copy.
    async fn recopy(&self, tenant: &str, copies: &[ActionCopy]) -> StoreResult<()>;
    /// Names `actor` `name` in the copies of their actions.
    async fn rename_actor(&self, tenant: &str, actor: &str, name: Option<&str>) -> StoreResult<()>;
}

/// Readers named in a filter at most: more are picked from what it finds.
pub(super) const MAX_NAMED_OWNERS: usize = 64;

/// Narrows `filter` to `owners` where they are few; the caller keeps only
/// theirs from what it finds either way (a long `$in` on a second field is
/// slow on some servers, and the action's own entries are few).
pub(super) fn narrow_to(filter: &mut bson::Document, owners: &[&str]) {
    if owners.len() <= MAX_NAMED_OWNERS {
        filter.insert("owner", bson::doc! { "$in": owners });
    }
}

/// How many array entries of the documents in `collection` match
/// `entry` (a filter on `e.*` after unwinding), across all tenants.
pub(super) async fn count_entries(
    collection: &mongodb::Collection<bson::Document>,
    entry: bson::Document,
) -> StoreResult<u64> {
    use futures_util::TryStreamExt;
    let mut counted = collection
        .aggregate([
            bson::doc! { "$unwind": "$e" },
            bson::doc! { "$match": entry },
            bson::doc! { "$count": "n" },
        ])
        .await
        .map_err(crate::store::mongo::db_err)?;
    let n = counted
        .try_next()
        .await
        .map_err(crate::store::mongo::db_err)?;
    Ok(n.and_then(|d| {
        d.get("n")
            .and_then(bson::Bson::as_i64)
            .or_else(|| d.get_i32("n").ok().map(i64::from))
    })
    .unwrap_or(0) as u64)
}

/// A bucket entry or item field: a millisecond time as a BSON date.
pub(super) fn date(ms: Millis) -> DateTime {
    DateTime::from_millis(ms)
}

/// Keeps, of items that name one action more than once for one reader (a
/// move between buckets cut short), the highest.
pub(super) fn dedup(items: &mut Vec<FeedItem>) {
    let mut seen: HashSet<(String, ObjectId)> = HashSet::new();
    items.sort_by_key(|i| std::cmp::Reverse(i.position()));
    items.retain(|i| seen.insert((i.owner.clone(), i.action_id)));
}

/// A reason as a layout's filters compare it.
pub(super) fn reason_bson(reason: &impl Serialize) -> StoreResult<bson::Bson> {
    bson::to_bson(reason)
        .map_err(|e| crate::store::StoreError::internal("MongoDB: cannot encode a reason", e))
}

/// `layout` over `db` (sized buckets of `bucket_size` entries), with
/// `rivers` over it.
pub(super) fn open(
    db: &mongodb::Database,
    layout: TimelineLayout,
    bucket_size: usize,
    rivers: RiverCache,
) -> Box<dyn Layout> {
    Box::new(cached::Cached {
        base: base(db, layout, bucket_size),
        rivers,
    })
}

fn base(db: &mongodb::Database, layout: TimelineLayout, bucket_size: usize) -> Box<dyn Layout> {
    match layout {
        TimelineLayout::Items => Box::new(Items::new(db)),
        TimelineLayout::TimeBuckets => Box::new(Buckets::new(
            db,
            buckets::Shape::Time { span: buckets::DAY },
        )),
        TimelineLayout::SizedBuckets => Box::new(Buckets::new(
            db,
            buckets::Shape::Sized {
                size: bucket_size.max(1),
            },
        )),
    }
}
