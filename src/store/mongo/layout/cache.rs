//! Rivers on `timeline_cache`: one document per reader with a river, that
//! is both the river's record and its items, newest first and capped at
//! `--river-size` entries:
//! `{_id: tenant␟reader, tenant, reader, from, touched, v, e: [entry]}`.
//!
//! - A delivery `$push`es `{$each, $sort, $slice}` with `upsert: false`, so
//!   it reaches exactly the readers who have a river, and the river never
//!   outgrows its size: what `$slice` cuts is below the last entry kept.
//! - Nothing is ever pulled out of the array but by a compaction: an item
//!   taken out (an unfollow, a delete, a hide, a bump that moves it to the
//!   timeline) is marked gone (`g`) and keeps its place. So while the
//!   array is full, `$slice` may have cut below its last entry, and the
//!   river is complete only down to that entry: where it is complete from
//!   is read as the higher of `from` (where it was built complete from)
//!   and the last entry of a full array.
//! - A compaction (at a touch) drops the gone entries and raises `from`,
//!   guarded by the version `v` every write bumps, so it never races a
//!   delivery.
//!
//! What the river holds is only ever a pulled item (a follow's, a
//! friend's, a followed group's, a named reader's); everything else a
//! reader's timeline holds, and every tombstone, stays in the layout under
//! it (see `cached`), so a dropped river loses nothing but what its
//! sources give again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bson::{doc, Bson, DateTime, Document};
use futures_util::TryStreamExt;
use mongodb::{Collection, Database};
use serde::Deserialize;

use super::buckets::Entry;
use super::copy::CopyDoc;
use super::{date, reason_bson};
use crate::model::{ActionCopy, FeedItem, Millis, ObjectId, Position, Reason, ReasonKind};
use crate::store::mongo::sources::{position_doc, position_of};
use crate::store::mongo::{bulk::upsert_all, db_err, read_all};
use crate::store::{River, StoreResult};

/// The collection.
pub(super) const NAME: &str = "timeline_cache";

/// Readers named per query when asking who has a river.
const NAMED: usize = 1_000;

/// One reader's river as stored (its record fields read apart).
#[derive(Debug, Deserialize)]
pub(super) struct Cache {
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    reader: String,
    #[serde(default)]
    v: i64,
    #[serde(default)]
    from: Option<Document>,
    #[serde(default)]
    e: Vec<Entry>,
}

impl Cache {
    /// The river's items still in it.
    pub(super) fn live(&self) -> impl Iterator<Item = FeedItem> + '_ {
        self.e
            .iter()
            .filter(|e| e.visible())
            .map(|e| e.item(&self.tenant, &self.reader))
    }
}

/// Where rivers live: `timeline_cache`, each capped at `cap` entries.
#[derive(Clone)]
pub(in crate::store::mongo) struct RiverCache {
    db: Database,
    coll: Collection<Document>,
    cap: usize,
    /// Whether deliveries look for rivers to go into: when the feed model
    /// keeps them, or once this process made one. (Under another model no
    /// reader gets a river, and looking would cost a query per delivery.)
    active: Arc<AtomicBool>,
    /// Whether reads look for rivers: as deliveries, or while rivers from
    /// an earlier model are left (their items are the readers' own, with
    /// the relevancy their fan-out gave them).
    read: Arc<AtomicBool>,
}

pub(super) fn cache_id(tenant: &str, reader: &str) -> String {
    format!("{tenant}\u{1f}{reader}")
}

impl RiverCache {
    /// Rivers in `db` of `cap` entries, looked for by deliveries if the
    /// model keeps them (`active`), and by reads too if any are left.
    pub(in crate::store::mongo) async fn open(
        db: &Database,
        cap: usize,
        active: bool,
    ) -> StoreResult<RiverCache> {
        let coll: Collection<Document> = db.collection(NAME);
        let left = active || coll.find_one(doc! {}).await.map_err(db_err)?.is_some();
        Ok(RiverCache {
            db: db.clone(),
            coll,
            cap: cap.max(1),
            active: Arc::new(AtomicBool::new(active)),
            read: Arc::new(AtomicBool::new(left)),
        })
    }

    /// Whether deliveries go into rivers (see `active`).
    pub(super) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Whether reads merge rivers (see `read`).
    pub(super) fn read(&self) -> bool {
        self.read.load(Ordering::Relaxed)
    }

    async fn caches(&self, filter: Document) -> StoreResult<Vec<Cache>> {
        read_all(self.coll.clone_with_type::<Cache>().find(filter)).await
    }

    /// `reader`'s river, whole, if they have one.
    pub(super) async fn of(&self, tenant: &str, reader: &str) -> StoreResult<Option<Cache>> {
        self.coll
            .clone_with_type::<Cache>()
            .find_one(doc! { "_id": cache_id(tenant, reader) })
            .await
            .map_err(db_err)
    }

    /// The river records of `readers`, in order: where each is complete
    /// from (its `from`, or the last entry of a full array if higher) and
    /// when it was touched. One query per [`NAMED`] readers.
    pub(in crate::store::mongo) async fn rivers(
        &self,
        tenant: &str,
        readers: &[String],
    ) -> StoreResult<Vec<Option<River>>> {
        let last = i64::try_from(self.cap - 1).unwrap_or(i64::MAX);
        let mut found: HashMap<String, River> = HashMap::new();
        for chunk in readers.chunks(NAMED) {
            let ids: Vec<String> = chunk.iter().map(|r| cache_id(tenant, r)).collect();
            let docs = read_all(
                self.coll
                    .find(doc! { "_id": { "$in": ids } })
                    .projection(doc! {
                        "reader": 1,
                        "from": 1,
                        "touched": 1,
                        "e": { "$slice": [last, 1] },
                    }),
            )
            .await?;
            found.extend(
                docs.iter()
                    .filter_map(|d| Some((d.get_str("reader").ok()?.to_owned(), river_of(d)?))),
            );
        }
        Ok(readers.iter().map(|r| found.remove(r)).collect())
    }

    /// Creates `reader`'s river (empty) or sets its record.
    pub(in crate::store::mongo) async fn put(
        &self,
        tenant: &str,
        reader: &str,
        river: &River,
    ) -> StoreResult<()> {
        self.active.store(true, Ordering::Relaxed);
        self.read.store(true, Ordering::Relaxed);
        self.coll
            .update_one(
                doc! { "_id": cache_id(tenant, reader) },
                doc! {
                    "$set": {
                        "tenant": tenant,
                        "reader": reader,
                        "from": position_doc(river.complete_from),
                        "touched": DateTime::from_millis(river.touched),
                    },
                    "$setOnInsert": { "e": [], "v": 0_i64 },
                },
            )
            .upsert(true)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    /// Up to `limit` rivers (tenant, reader) last touched before `before`.
    pub(in crate::store::mongo) async fn idle(
        &self,
        before: Millis,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        let filter = doc! { "touched": { "$lt": DateTime::from_millis(before) } };
        self.readers_of(filter, limit).await
    }

    /// Up to `limit` rivers (tenant, reader) being built: complete from
    /// nowhere (a full array of a river being built says no more).
    pub(in crate::store::mongo) async fn building(
        &self,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        let filter = doc! { "from.r": Position::MAX.relevancy };
        self.readers_of(filter, limit).await
    }

    /// Up to `limit` rivers (tenant, reader) that `filter` finds.
    async fn readers_of(
        &self,
        filter: Document,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        let docs = read_all(
            self.coll
                .find(filter)
                .projection(doc! { "tenant": 1, "reader": 1 })
                .limit(i64::try_from(limit).unwrap_or(i64::MAX)),
        )
        .await?;
        Ok(docs
            .iter()
            .filter_map(|d| {
                Some((
                    d.get_str("tenant").ok()?.to_owned(),
                    d.get_str("reader").ok()?.to_owned(),
                ))
            })
            .collect())
    }

    /// Removes `reader`'s river; how many items it still held.
    pub(in crate::store::mongo) async fn drop(
        &self,
        tenant: &str,
        reader: &str,
    ) -> StoreResult<u64> {
        let gone = self
            .coll
            .clone_with_type::<Cache>()
            .find_one_and_delete(doc! { "_id": cache_id(tenant, reader) })
            .await
            .map_err(db_err)?;
        Ok(gone.map_or(0, |c| c.live().count() as u64))
    }

    /// Keeps the newest `keep` of `reader`'s river items and drops the
    /// rest and every gone entry, raising `from` to the oldest kept. Only
    /// if no write came between the read and the rewrite (else the next
    /// touch does it). How many items went.
    pub(in crate::store::mongo) async fn compact(
        &self,
        tenant: &str,
        reader: &str,
        keep: usize,
    ) -> StoreResult<u64> {
        let Some(cache) = self.of(tenant, reader).await? else {
            return Ok(0);
        };
        let full = cache.e.len() >= self.cap;
        let mut live: Vec<&Entry> = cache.e.iter().filter(|e| e.visible()).collect();
        let gone = live.len() < cache.e.len();
        live.sort_by_key(|e| std::cmp::Reverse((e.r, e.a.bytes())));
        let cut = live.len().saturating_sub(keep);
        live.truncate(keep);
        let position = |e: &Entry| Position {
            relevancy: e.r.timestamp_millis(),
            action_id: e.a,
        };
        // Complete from the oldest kept if anything was cut (by this, or
        // earlier by `$slice` when the array was full).
        let floor = if cut > 0 || full {
            live.last()
                .map(|e| position(e))
                .or_else(|| cache.e.last().map(position))
        } else {
            None
        };
        let was = cache.from.as_ref().and_then(position_of);
        let from = match (was, floor) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if !gone && cut == 0 && from == was {
            return Ok(0);
        }
        let entries: Vec<Bson> = live.iter().map(|e| e.bson()).collect::<StoreResult<_>>()?;
        let mut set = doc! { "e": entries };
        if let Some(from) = from {
            set.insert("from", position_doc(from));
        }
        self.coll
            .update_one(
                doc! { "_id": cache_id(tenant, reader), "v": cache.v },
                doc! { "$set": set, "$inc": { "v": 1_i64 } },
            )
            .await
            .map_err(db_err)?;
        Ok(cut as u64)
    }

    /// Which of `owners` have a river, each with which of `actions` it
    /// holds. One query per thousand readers. One action: the first match
    /// says; more (a backfill, one reader): the whole river is read.
    pub(super) async fn holding(
        &self,
        tenant: &str,
        owners: &[&str],
        actions: &[ObjectId],
    ) -> StoreResult<HashMap<String, HashSet<ObjectId>>> {
        let projection = match actions {
            [one] => {
                doc! { "reader": 1, "e": { "$elemMatch": { "a": one, "g": { "$ne": true } } } }
            }
            _ => doc! { "reader": 1, "e.a": 1, "e.g": 1 },
        };
        let mut holding: HashMap<String, HashSet<ObjectId>> = HashMap::new();
        for chunk in owners.chunks(NAMED) {
            let ids: Vec<String> = chunk.iter().map(|r| cache_id(tenant, r)).collect();
            let mut found = self
                .coll
                .find(doc! { "_id": { "$in": ids } })
                .projection(projection.clone())
                .await
                .map_err(db_err)?;
            while let Some(d) = found.try_next().await.map_err(db_err)? {
                let Ok(reader) = d.get_str("reader") else {
                    continue;
                };
                let held = holding.entry(reader.to_owned()).or_default();
                for e in d.get_array("e").into_iter().flatten() {
                    let Some(e) = e.as_document() else { continue };
                    if !e.get_bool("g").unwrap_or(false) {
                        held.extend(e.get_object_id("a").ok());
                    }
                }
            }
        }
        Ok(holding)
    }

    /// Pushes `items` into their readers' rivers, newest first, cut at the
    /// river size: one statement per item (all in as few commands as the
    /// limits allow), each guarded on its own, so a river that gained the
    /// action meanwhile is left as it is, and one dropped meanwhile is not
    /// made again.
    pub(super) async fn push(&self, tenant: &str, items: &[&FeedItem]) -> StoreResult<()> {
        let cap = i64::try_from(self.cap).unwrap_or(i64::MAX);
        let mut statements = Vec::with_capacity(items.len());
        for item in items {
            let entry = Entry::of(item, false);
            statements.push(doc! {
                "q": {
                    "_id": cache_id(tenant, &item.owner),
                    "e": { "$not": { "$elemMatch": { "a": entry.a, "g": { "$ne": true } } } },
                },
                "u": {
                    "$push": { "e": { "$each": [entry.bson()?], "$sort": { "r": -1, "a": -1 }, "$slice": cap } },
                    "$inc": { "v": 1_i64 },
                },
                "upsert": false,
            });
        }
        upsert_all(&self.db, NAME, statements).await
    }

    /// Rivers whose entries name one of `ids` (of `owner` only, if given).
    pub(super) async fn naming(
        &self,
        tenant: &str,
        owners: Option<&[&str]>,
        ids: &[ObjectId],
    ) -> StoreResult<Vec<Cache>> {
        let mut filter = doc! { "tenant": tenant, "e.a": { "$in": ids } };
        // Named where they are few; else found by action and picked here.
        if let Some(owners) = owners.filter(|o| o.len() <= super::MAX_NAMED_OWNERS) {
            let named: Vec<String> = owners.iter().map(|o| cache_id(tenant, o)).collect();
            filter.insert("_id", doc! { "$in": named });
        }
        let mut found = self.caches(filter).await?;
        if let Some(owners) = owners {
            let owners: HashSet<&str> = owners.iter().copied().collect();
            found.retain(|c| owners.contains(c.reader.as_str()));
        }
        Ok(found)
    }

    /// Marks the entries of `ids` gone in the rivers `filter` selects.
    pub(super) async fn mark_gone(&self, filter: Document, ids: &[ObjectId]) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.coll
            .update_many(
                filter,
                doc! { "$set": { "e.$[y].g": true }, "$inc": { "v": 1_i64 } },
            )
            .array_filters(vec![doc! { "y.a": { "$in": ids }, "y.g": { "$ne": true } }])
            .await
            .map_err(db_err)?;
        Ok(())
    }

    /// Raises `action`'s entry in `owner`'s river in place (a pulled
    /// reason). Whether it did.
    pub(super) async fn raise_in_place(
        &self,
        tenant: &str,
        owner: &str,
        entry: &Entry,
        to: (Millis, &Reason, Millis),
    ) -> StoreResult<bool> {
        let (relevancy, reason, changed) = to;
        let done = self
            .coll
            .update_one(
                doc! {
                    "_id": cache_id(tenant, owner),
                    "e": { "$elemMatch": { "a": entry.a, "r": entry.r, "g": { "$ne": true } } },
                },
                doc! {
                    "$set": { "e.$.r": date(relevancy), "e.$.c": date(changed), "e.$.w": reason_bson(reason)? },
                    "$inc": { "v": 1_i64 },
                },
            )
            .await
            .map_err(db_err)?;
        Ok(done.modified_count > 0)
    }

    /// Gives the live entries of `action` in `owners`' rivers whose reason
    /// is of a kind in `from` `reason` instead.
    pub(super) async fn refresh(
        &self,
        tenant: &str,
        action: ObjectId,
        owners: &[&str],
        reason: &Reason,
        from: &[ReasonKind],
    ) -> StoreResult<()> {
        let why = reason_bson(reason)?;
        let kinds = reason_bson(&from)?;
        for chunk in owners.chunks(NAMED) {
            let ids: Vec<String> = chunk.iter().map(|o| cache_id(tenant, o)).collect();
            self.coll
                .update_many(
                    doc! { "_id": { "$in": ids }, "e.a": action },
                    doc! { "$set": { "e.$[x].w": why.clone() }, "$inc": { "v": 1_i64 } },
                )
                .array_filters(vec![doc! {
                    "x.a": action,
                    "x.g": { "$ne": true },
                    "x.w.kind": { "$in": kinds.clone() },
                    "x.w": { "$ne": why.clone() },
                }])
                .await
                .map_err(db_err)?;
        }
        Ok(())
    }

    /// Live river items in all tenants.
    pub(super) async fn count(&self) -> StoreResult<u64> {
        super::count_entries(&self.coll, doc! { "e.g": { "$ne": true } }).await
    }

    pub(super) async fn uncopy(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.coll
            .update_many(
                doc! { "tenant": tenant, "e.a": { "$in": ids } },
                doc! { "$unset": { "e.$[y].x": "" }, "$inc": { "v": 1_i64 } },
            )
            .array_filters(vec![doc! { "y.a": { "$in": ids } }])
            .await
            .map_err(db_err)?;
        Ok(())
    }

    pub(super) async fn recopy(&self, tenant: &str, copies: &[ActionCopy]) -> StoreResult<()> {
        let mut statements = Vec::with_capacity(copies.len());
        for copy in copies {
            let id = copy.action.id;
            statements.push(doc! {
                "q": { "tenant": tenant, "e.a": id },
                "u": { "$set": { "e.$[y].x": CopyDoc::of(copy).bson()? }, "$inc": { "v": 1_i64 } },
                "multi": true,
                "arrayFilters": [ { "y.a": id, "y.g": { "$ne": true } } ],
            });
        }
        upsert_all(&self.db, NAME, statements).await
    }

    pub(super) async fn rename_actor(
        &self,
        tenant: &str,
        actor: &str,
        name: Option<&str>,
    ) -> StoreResult<()> {
        let version = doc! { "$inc": { "v": 1_i64 } };
        super::copy::rename_in_entries(&self.coll, tenant, actor, name, version).await
    }

    pub(super) async fn create_indexes(&self, embeds: bool) -> StoreResult<()> {
        use crate::store::mongo::indexes::{index, named};
        let mut models = vec![
            index(doc! { "touched": 1 }, named("idle")),
            // Rivers being built, looked for at start.
            index(doc! { "from.r": 1 }, named("building")),
            index(doc! { "tenant": 1, "e.a": 1 }, named("by_action")),
        ];
        if embeds {
            models.push(index(
                doc! { "tenant": 1, "e.x.actorId": 1 },
                named("copies_by_actor"),
            ));
        }
        self.coll.create_indexes(models).await.map_err(db_err)?;
        Ok(())
    }
}

/// A river record as [`RiverCache::rivers`] projects it.
fn river_of(d: &Document) -> Option<River> {
    let from = position_of(d.get_document("from").ok()?)?;
    let floor = d
        .get_array("e")
        .ok()
        .and_then(|e| e.first())
        .and_then(Bson::as_document)
        .and_then(|e| {
            Some(Position {
                relevancy: e.get_datetime("r").ok()?.timestamp_millis(),
                action_id: e.get_object_id("a").ok()?,
            })
        });
    Some(River {
        complete_from: floor.map_or(from, |f| from.max(f)),
        touched: d.get_datetime("touched").ok()?.timestamp_millis(),
    })
}
