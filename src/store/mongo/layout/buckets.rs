//! The bucket layouts: a reader's timeline as documents that each hold many
//! entries, as the Socialite layouts keep them.
//!
//! A bucket: `{_id, tenant, owner, lo, hi, ch, s, e: [entry]}`, where an
//! entry is `{a: actionId, r: relevancy, c: changed, w: reason, h: hidden}`;
//! `lo` and `hi` bound the relevancy of the entries it was given and `ch`
//! their last change (bounds only widen: an entry moved or removed leaves
//! them as they were, which reads allow for), `s` counts the entries given.
//!
//! - Time buckets (`timed_buckets`): `_id` the tenant, owner and day (as
//!   one string, the parts apart by U+001F);
//!   a delivery upserts the day of the entry's relevancy and `$push`es it;
//!   a bump to another day moves the entry (pushed into the new day, then
//!   pulled from the old: a crash between leaves two, and reads keep the
//!   higher).
//! - Sized buckets (`sized_buckets`): a delivery upserts a bucket of the
//!   reader's with room (fewer than `--bucket-size` entries given; `_id`
//!   an ObjectId) and `$push`es the entry, so a full bucket is never
//!   touched again by deliveries and a new one opens by itself. A bump
//!   raises the entry in place.
//!
//! Tombstones of items never held (pulled ones a reader hid) go to one
//! bucket per reader (day -1) that no range reaches.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use bson::{doc, Bson, DateTime, Document};
use futures_util::stream::{BoxStream, TryStreamExt};
use mongodb::{Collection, Database};
use serde::{Deserialize, Serialize};

use super::copy::CopyDoc;
use super::{date, dedup, narrow_to, reason_bson, Layout, Stored, Which, MAX_NAMED_OWNERS};
use crate::model::{ActionCopy, FeedItem, Millis, ObjectId, Reason, ReasonKind, Stamp};
use crate::store::mongo::{bulk::upsert_all, db_err, indexes, read_all, TOMBSTONE};
use crate::store::{FeedRange, StoreResult};

/// Which bucket an entry goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One bucket per reader and `span` milliseconds of relevancy.
    Time { span: Millis },
    /// One bucket per reader and `size` entries.
    Sized { size: usize },
}

/// One day, the span of a time bucket.
pub const DAY: Millis = 24 * 3600 * 1000;

/// Buckets read per round of a page.
const BATCH: u32 = 4;

/// The `t` of a reader's tombstone bucket.
const TOMB: i64 = -1;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Entry {
    pub(super) a: ObjectId,
    pub(super) r: DateTime,
    pub(super) c: DateTime,
    pub(super) w: Reason,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) h: bool,
    /// A copy of the action (`--embed-actions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) x: Option<CopyDoc>,
    /// Gone: taken out of a river (which keeps its place, see `cache`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) g: bool,
}

impl Entry {
    pub(super) fn of(item: &FeedItem, hidden: bool) -> Entry {
        Entry {
            a: item.action_id,
            r: date(item.relevancy),
            c: date(item.changed),
            w: item.reason.clone(),
            h: hidden,
            x: item.copy.as_deref().map(CopyDoc::of).filter(|_| !hidden),
            g: false,
        }
    }

    pub(super) fn item(&self, tenant: &str, owner: &str) -> FeedItem {
        FeedItem {
            owner: owner.to_owned(),
            action_id: self.a,
            relevancy: self.r.timestamp_millis(),
            reason: self.w.clone(),
            changed: self.c.timestamp_millis(),
            copy: self.x.as_ref().map(|x| Arc::new(x.copy(tenant, self.a))),
        }
    }

    pub(super) fn visible(&self) -> bool {
        !self.h && !self.g && self.r.timestamp_millis() > TOMBSTONE
    }

    pub(super) fn bson(&self) -> StoreResult<Bson> {
        bson::to_bson(self)
            .map_err(|e| crate::store::StoreError::internal("MongoDB: cannot encode an entry", e))
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct Bucket {
    #[serde(rename = "_id")]
    pub(super) id: Bson,
    #[serde(default)]
    pub(super) tenant: String,
    pub(super) owner: String,
    #[serde(default)]
    pub(super) hi: Option<DateTime>,
    #[serde(default)]
    pub(super) lo: Option<DateTime>,
    #[serde(default)]
    pub(super) e: Vec<Entry>,
}

impl Bucket {
    fn hi(&self) -> Millis {
        self.hi.map_or(TOMBSTONE, |d| d.timestamp_millis())
    }

    fn lo(&self) -> Millis {
        self.lo.map_or(TOMBSTONE, |d| d.timestamp_millis())
    }
}

pub(in crate::store::mongo) struct Buckets {
    pub(super) db: Database,
    pub(super) name: &'static str,
    pub(super) buckets: Collection<Bucket>,
    shape: Shape,
}

impl Buckets {
    pub fn new(db: &Database, shape: Shape) -> Buckets {
        let name = match shape {
            Shape::Time { .. } => "timed_buckets",
            Shape::Sized { .. } => "sized_buckets",
        };
        Buckets {
            db: db.clone(),
            name,
            buckets: db.collection(name),
            shape,
        }
    }

    pub(super) fn raw(&self) -> Collection<Document> {
        self.buckets.clone_with_type()
    }

    /// A time bucket's `_id`: tenant, owner and day, apart by a control
    /// character (which no id holds). A string rather than a document:
    /// every server we test against finds it by the `_id` index.
    fn day_id(tenant: &str, owner: &str, t: i64) -> String {
        format!("{tenant}\u{1f}{owner}\u{1f}{t}")
    }

    fn day(&self, relevancy: Millis) -> i64 {
        match self.shape {
            Shape::Time { span } => relevancy.div_euclid(span.max(1)),
            Shape::Sized { .. } => 0,
        }
    }

    /// The update that gives a bucket `entries`.
    fn push(entries: &[Entry]) -> StoreResult<Document> {
        let each: Vec<Bson> = entries
            .iter()
            .map(|e| e.bson())
            .collect::<StoreResult<_>>()?;
        let hi = entries.iter().map(|e| e.r).max().unwrap_or(date(TOMBSTONE));
        let lo = entries.iter().map(|e| e.r).min().unwrap_or(date(TOMBSTONE));
        let ch = entries.iter().map(|e| e.c).max().unwrap_or(date(TOMBSTONE));
        Ok(doc! {
            "$push": { "e": { "$each": each } },
            "$min": { "lo": lo },
            "$max": { "hi": hi, "ch": ch },
            "$inc": { "s": entries.len() as i64 },
        })
    }

    /// Appends entries to time buckets, one upsert per reader and day, all
    /// in as few commands as the limits allow.
    async fn push_by_day(&self, tenant: &str, entries: &[(&str, Entry)]) -> StoreResult<()> {
        let mut by_bucket: HashMap<(&str, i64), Vec<Entry>> = HashMap::new();
        for (owner, entry) in entries {
            let day = self.day(entry.r.timestamp_millis());
            by_bucket
                .entry((owner, day))
                .or_default()
                .push(entry.clone());
        }
        let mut statements = Vec::with_capacity(by_bucket.len());
        for ((owner, day), entries) in by_bucket {
            let mut update = Self::push(&entries)?;
            update.insert("$setOnInsert", doc! { "tenant": tenant, "owner": owner });
            statements.push(doc! {
                "q": { "_id": Self::day_id(tenant, owner, day) },
                "u": update,
                "upsert": true,
            });
        }
        upsert_all(&self.db, self.name, statements).await
    }

    /// Appends entries to their readers' sized buckets: one upsert per
    /// reader, all in as few commands as the limits allow, into a bucket of
    /// the reader's that has room (fewer than `size` entries given), or a
    /// new one (`_id` an ObjectId) when none has. Each statement is one
    /// atomic step, so an entry is in exactly one bucket from the moment it
    /// is written; readers delivered to at once may each open a bucket,
    /// and later deliveries fill whichever has room. A bucket is never
    /// copied or split: a batch may take one past `size`.
    async fn push_sized(
        &self,
        tenant: &str,
        entries: &[(&str, Entry)],
        size: usize,
    ) -> StoreResult<()> {
        let mut by_owner: HashMap<&str, Vec<Entry>> = HashMap::new();
        for (owner, entry) in entries {
            by_owner.entry(owner).or_default().push(entry.clone());
        }
        let mut statements = Vec::with_capacity(by_owner.len());
        for (owner, entries) in &by_owner {
            statements.push(doc! {
                "q": { "tenant": tenant, "owner": *owner, "s": { "$lt": size as i64 } },
                "u": Self::push(entries)?,
                "upsert": true,
            });
        }
        upsert_all(&self.db, self.name, statements).await
    }

    /// Appends entries where the shape puts them.
    pub(super) async fn append(
        &self,
        tenant: &str,
        entries: Vec<(&str, Entry)>,
    ) -> StoreResult<()> {
        if entries.is_empty() {
            return Ok(());
        }
        match self.shape {
            Shape::Time { .. } => self.push_by_day(tenant, &entries).await,
            Shape::Sized { size } => self.push_sized(tenant, &entries, size).await,
        }
    }

    /// Lays a tombstone (a hidden entry at the epoch) in the reader's
    /// tombstone bucket.
    pub(super) async fn lay_tombstone(
        &self,
        tenant: &str,
        owner: &str,
        item: &FeedItem,
    ) -> StoreResult<()> {
        let entry = Entry::of(
            &FeedItem {
                relevancy: TOMBSTONE,
                ..item.clone()
            },
            true,
        );
        self.raw()
            .update_one(
                doc! { "_id": Self::day_id(tenant, owner, TOMB) },
                doc! {
                    "$push": { "e": entry.bson()? },
                    "$setOnInsert": {
                        "tenant": tenant, "owner": owner, "tomb": true,
                        "lo": date(TOMBSTONE), "hi": date(TOMBSTONE),
                        // Never a sized bucket with room.
                        "s": i64::MAX,
                    },
                },
            )
            .upsert(true)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    /// Buckets matching `filter`, read whole.
    async fn find(&self, filter: Document) -> StoreResult<Vec<Bucket>> {
        read_all(self.buckets.find(filter)).await
    }

    /// Pulls the entries of `ids` (visible ones only, with `visible_only`)
    /// from the buckets `filter` selects.
    pub(super) async fn pull(
        &self,
        filter: Document,
        ids: &[ObjectId],
        extra: Document,
    ) -> StoreResult<()> {
        let mut which = doc! { "a": { "$in": ids } };
        which.extend(extra);
        self.raw()
            .update_many(filter, doc! { "$pull": { "e": which } })
            .await
            .map_err(db_err)?;
        Ok(())
    }
}

#[async_trait]
impl Layout for Buckets {
    async fn insert(&self, tenant: &str, items: &[FeedItem]) -> StoreResult<HashSet<usize>> {
        if items.is_empty() {
            return Ok(HashSet::new());
        }
        let owners: HashSet<&str> = items.iter().map(|i| i.owner.as_str()).collect();
        let owners: Vec<&str> = owners.into_iter().collect();
        let ids: HashSet<ObjectId> = items.iter().map(|i| i.action_id).collect();
        let ids: Vec<ObjectId> = ids.into_iter().collect();
        // Who holds these actions already, as items or tombstones.
        let mut held = self.holders(tenant, &owners, &ids).await?;
        let mut skipped = HashSet::new();
        let mut entries = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if !held.insert((item.owner.clone(), item.action_id)) {
                skipped.insert(i);
                continue;
            }
            entries.push((item.owner.as_str(), Entry::of(item, false)));
        }
        self.append(tenant, entries).await?;
        Ok(skipped)
    }

    async fn page(
        &self,
        tenant: &str,
        owner: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<FeedItem>> {
        let mut filter = doc! { "tenant": tenant, "owner": owner };
        let mut hi = doc! { "$gt": date(TOMBSTONE) };
        if let Some(n) = range.newer_than {
            hi.insert("$gte", date(n.relevancy));
        }
        filter.insert("hi", hi);
        if let Some(o) = range.older_than {
            filter.insert("lo", doc! { "$lte": date(o.relevancy) });
        }
        let sort = if range.from_oldest {
            doc! { "lo": 1 }
        } else {
            doc! { "hi": -1 }
        };
        let in_range = |item: &FeedItem| range.holds(item.position());
        let mut cursor = self
            .buckets
            .find(filter)
            .sort(sort)
            .batch_size(BATCH)
            .await
            .map_err(db_err)?;
        let mut items: Vec<FeedItem> = Vec::new();
        while let Some(bucket) = cursor.try_next().await.map_err(db_err)? {
            // Done once `limit` items lie beyond anything this bucket (and
            // every later one) can hold.
            if items.len() >= range.limit {
                dedup(&mut items);
                let done = items.len() >= range.limit
                    && if range.from_oldest {
                        items[items.len() - range.limit].relevancy < bucket.lo()
                    } else {
                        items[range.limit - 1].relevancy > bucket.hi()
                    };
                if done {
                    break;
                }
            }
            items.extend(
                bucket
                    .e
                    .iter()
                    .filter(|e| e.visible())
                    .map(|e| e.item(&bucket.tenant, &bucket.owner))
                    .filter(in_range),
            );
        }
        dedup(&mut items);
        range.cut(&mut items, FeedItem::position);
        Ok(items)
    }

    async fn changes(
        &self,
        tenant: &str,
        owner: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        let buckets = self
            .find(doc! { "tenant": tenant, "owner": owner, "ch": { "$gte": date(after.changed) } })
            .await?;
        let mut items: Vec<FeedItem> = buckets
            .iter()
            .flat_map(|b| {
                b.e.iter()
                    .filter(|e| e.visible())
                    .map(|e| e.item(&b.tenant, &b.owner))
            })
            .filter(|i| i.stamp() > after)
            .collect();
        dedup(&mut items);
        items.sort_by_key(FeedItem::stamp);
        items.truncate(limit);
        Ok(items)
    }

    async fn holders(
        &self,
        tenant: &str,
        owners: &[&str],
        ids: &[ObjectId],
    ) -> StoreResult<HashSet<(String, ObjectId)>> {
        if ids.is_empty() || owners.is_empty() {
            return Ok(HashSet::new());
        }
        let mut filter = doc! { "tenant": tenant, "e.a": { "$in": ids } };
        narrow_to(&mut filter, owners);
        let found: Vec<Document> = read_all(
            self.raw()
                .find(filter)
                .projection(doc! { "owner": 1, "e.a": 1 }),
        )
        .await?;
        let owners: HashSet<&str> = owners.iter().copied().collect();
        let wanted: HashSet<&ObjectId> = ids.iter().collect();
        let mut held = HashSet::new();
        for bucket in &found {
            let owner = bucket.get_str("owner").unwrap_or_default();
            if !owners.contains(owner) {
                continue;
            }
            for entry in bucket.get_array("e").into_iter().flatten() {
                if let Some(a) = entry.as_document().and_then(|d| d.get_object_id("a").ok()) {
                    if wanted.contains(&a) {
                        held.insert((owner.to_owned(), a));
                    }
                }
            }
        }
        Ok(held)
    }

    async fn item(&self, tenant: &str, owner: &str, id: ObjectId) -> StoreResult<Option<FeedItem>> {
        let visible = doc! { "$elemMatch": { "a": id, "h": { "$ne": true } } };
        let buckets = self
            .find(doc! { "tenant": tenant, "owner": owner, "e": visible })
            .await?;
        // A move between buckets cut short may leave the entry in two: the
        // higher stands.
        let mut items: Vec<FeedItem> = buckets
            .iter()
            .flat_map(|b| {
                b.e.iter()
                    .filter(|e| e.a == id && e.visible())
                    .map(|e| e.item(&b.tenant, &b.owner))
            })
            .collect();
        dedup(&mut items);
        Ok(items.pop())
    }

    async fn hide(&self, tenant: &str, owner: &str, id: ObjectId) -> StoreResult<Option<FeedItem>> {
        let visible = doc! { "$elemMatch": { "a": id, "h": { "$ne": true } } };
        let found = self
            .buckets
            .find_one(doc! { "tenant": tenant, "owner": owner, "e": visible.clone() })
            .await
            .map_err(db_err)?;
        if let Some(bucket) = found {
            let hidden = self
                .raw()
                .update_one(
                    doc! { "_id": bucket.id.clone(), "e": visible },
                    doc! { "$set": { "e.$.h": true } },
                )
                .await
                .map_err(db_err)?;
            let item = bucket
                .e
                .iter()
                .find(|e| e.a == id && !e.h)
                .map(|e| e.item(&bucket.tenant, &bucket.owner))
                .filter(|_| hidden.modified_count > 0);
            // A copy left by a move cut short goes too.
            self.pull(
                doc! { "tenant": tenant, "owner": owner, "e.a": id, "_id": { "$ne": bucket.id } },
                &[id],
                doc! { "h": { "$ne": true } },
            )
            .await?;
            return Ok(item);
        }
        if self.holders(tenant, &[owner], &[id]).await?.is_empty() {
            let tombstone = super::items::tombstone(owner, id);
            self.lay_tombstone(tenant, owner, &tombstone).await?;
        }
        Ok(None)
    }

    async fn remove(
        &self,
        tenant: &str,
        owner: Option<&str>,
        ids: &[ObjectId],
    ) -> StoreResult<Vec<FeedItem>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut filter = doc! { "tenant": tenant, "e.a": { "$in": ids } };
        let mut extra = Document::new();
        if let Some(owner) = owner {
            filter.insert("owner", owner);
            extra.insert("h", doc! { "$ne": true });
        }
        let buckets = self.find(filter.clone()).await?;
        let wanted: HashSet<&ObjectId> = ids.iter().collect();
        if buckets.is_empty() {
            return Ok(Vec::new());
        }
        let mut removed: Vec<FeedItem> = buckets
            .iter()
            .flat_map(|b| {
                b.e.iter()
                    .filter(|e| wanted.contains(&e.a) && e.visible())
                    .map(|e| e.item(&b.tenant, &b.owner))
            })
            .collect();
        self.pull(filter, ids, extra).await?;
        dedup(&mut removed);
        Ok(removed)
    }

    async fn take(&self, tenant: &str, which: Which<'_>) -> StoreResult<Vec<FeedItem>> {
        let kinds = reason_bson(&which.reasons)?;
        let mut filter = doc! {
            "tenant": tenant, "owner": which.owner, "e.w.kind": { "$in": kinds.clone() },
        };
        if let Some(ids) = which.ids {
            filter.insert("e.a", doc! { "$in": ids });
        }
        let buckets = self.find(filter).await?;
        let mut taken: Vec<FeedItem> = buckets
            .iter()
            .flat_map(|b| {
                b.e.iter()
                    .filter(|e| e.visible())
                    .map(|e| e.item(&b.tenant, &b.owner))
            })
            .filter(|i| which.takes(i))
            .collect();
        if taken.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<ObjectId> = taken.iter().map(|i| i.action_id).collect();
        self.pull(
            doc! { "tenant": tenant, "owner": which.owner, "e.a": { "$in": &ids } },
            &ids,
            doc! { "h": { "$ne": true }, "w.kind": { "$in": kinds } },
        )
        .await?;
        dedup(&mut taken);
        Ok(taken)
    }

    async fn raise(
        &self,
        tenant: &str,
        action: ObjectId,
        owners: &[&str],
        relevancy: Millis,
        reason: &Reason,
        changed: Millis,
    ) -> StoreResult<Vec<FeedItem>> {
        let mut filter = doc! { "tenant": tenant, "e.a": action };
        narrow_to(&mut filter, owners);
        let mut buckets = self.find(filter).await?;
        buckets.retain(|b| owners.contains(&b.owner.as_str()));
        let (at, when, why) = (date(relevancy), date(changed), reason_bson(reason)?);
        let mut raised = Vec::new();
        let mut moved: Vec<(&str, Entry)> = Vec::new();
        let mut from: Vec<(&Bucket, DateTime)> = Vec::new();
        for bucket in &buckets {
            let Some(entry) = bucket
                .e
                .iter()
                .find(|e| e.a == action && e.visible() && e.r < at)
            else {
                continue;
            };
            let new = Entry {
                a: action,
                r: at,
                c: when,
                w: reason.clone(),
                h: false,
                x: entry.x.clone(),
                g: false,
            };
            let in_place = match self.shape {
                Shape::Sized { .. } => true,
                Shape::Time { .. } => self.day(relevancy) == self.day(entry.r.timestamp_millis()),
            };
            if in_place {
                // Only upwards: the entry as it was read, or nothing.
                let updated = self
                    .raw()
                    .update_one(
                        doc! {
                            "_id": bucket.id.clone(),
                            "e": { "$elemMatch": { "a": action, "r": entry.r, "h": { "$ne": true } } },
                        },
                        doc! {
                            "$set": { "e.$.r": at, "e.$.c": when, "e.$.w": why.clone() },
                            "$max": { "hi": at, "ch": when },
                        },
                    )
                    .await
                    .map_err(db_err)?;
                if updated.modified_count > 0 {
                    raised.push(new.item(&bucket.tenant, &bucket.owner));
                }
            } else {
                from.push((bucket, entry.r));
                moved.push((bucket.owner.as_str(), new));
            }
        }
        if !moved.is_empty() {
            // Pushed where it now belongs, then pulled from where it was.
            raised.extend(moved.iter().map(|(owner, e)| e.item(tenant, owner)));
            self.append(tenant, moved).await?;
            for (bucket, r) in from {
                self.raw()
                    .update_one(
                        doc! { "_id": bucket.id.clone() },
                        doc! { "$pull": { "e": { "a": action, "r": r } } },
                    )
                    .await
                    .map_err(db_err)?;
            }
        }
        Ok(raised)
    }

    async fn refresh(
        &self,
        tenant: &str,
        action: ObjectId,
        owners: &[&str],
        reason: &Reason,
        from: &[ReasonKind],
    ) -> StoreResult<()> {
        let why = reason_bson(reason)?;
        let kinds = reason_bson(&from)?;
        // Readers named a few at a time (see `narrow_to`).
        for owners in owners.chunks(MAX_NAMED_OWNERS) {
            self.raw()
                .update_many(
                    doc! { "tenant": tenant, "e.a": action, "owner": { "$in": owners } },
                    doc! { "$set": { "e.$[x].w": why.clone() } },
                )
                .array_filters(vec![doc! {
                    "x.a": action,
                    "x.h": { "$ne": true },
                    "x.w.kind": { "$in": kinds.clone() },
                    "x.w": { "$ne": why.clone() },
                }])
                .await
                .map_err(db_err)?;
        }
        Ok(())
    }

    async fn count(&self) -> StoreResult<u64> {
        let visible = doc! { "e.h": { "$ne": true }, "tomb": { "$ne": true } };
        super::count_entries(&self.raw(), visible).await
    }

    async fn export(
        &self,
        tenant: Option<&str>,
    ) -> StoreResult<BoxStream<'static, StoreResult<Stored>>> {
        self.export_all(tenant).await
    }

    async fn import(&self, items: Vec<Stored>) -> StoreResult<()> {
        self.import_all(items).await
    }

    async fn uncopy(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<()> {
        self.uncopy_entries(tenant, ids).await
    }

    async fn recopy(&self, tenant: &str, copies: &[ActionCopy]) -> StoreResult<()> {
        self.recopy_entries(tenant, copies).await
    }

    async fn rename_actor(&self, tenant: &str, actor: &str, name: Option<&str>) -> StoreResult<()> {
        self.rename_in_entries(tenant, actor, name).await
    }

    async fn create_indexes(&self, embeds: bool) -> StoreResult<()> {
        use indexes::{index, named};
        let mut models = vec![
            index(
                doc! { "tenant": 1, "owner": 1, "hi": -1 },
                named("timeline"),
            ),
            index(
                doc! { "tenant": 1, "owner": 1, "lo": 1 },
                named("timeline_oldest"),
            ),
            index(
                doc! { "tenant": 1, "e.a": 1, "owner": 1 },
                named("by_action"),
            ),
            index(doc! { "tenant": 1, "owner": 1, "ch": 1 }, named("changes")),
        ];
        if embeds {
            models.push(index(
                doc! { "tenant": 1, "e.x.actorId": 1 },
                named("copies_by_actor"),
            ));
        }
        if let Shape::Sized { .. } = self.shape {
            models.push(index(
                doc! { "tenant": 1, "owner": 1, "s": 1 },
                named("with_room"),
            ));
        }
        self.buckets.create_indexes(models).await.map_err(db_err)?;
        Ok(())
    }
}
