//! Reading feeds (ranges by relevancy, changes since a stamp) and taking
//! items out of them (one reader's, or every reader's of an action).

use rocksdb::{ColumnFamily, ReadOptions, WriteBatch};

use super::actions::action_lock;
use super::families::{CHANGES, ITEMS, TIMELINE};
use super::keys::{self, ItemState, Key, Oid, Reader};
use super::Inner;
use crate::model::{FeedItem, Millis, ObjectId, Position, Reason, Stamp};
use crate::store::{Backfill, FeedRange, StoreResult};

/// Bytes after the `(tenant, owner)` prefix of a timeline key.
const ENTRY_SUFFIX: usize = 8 + 12;

/// The three families an item lives in, looked up once per batch rather
/// than once per delivery.
pub(super) struct ItemFamilies<'a> {
    timeline: &'a ColumnFamily,
    items: &'a ColumnFamily,
    changes: &'a ColumnFamily,
}

impl Inner {
    pub(super) fn item_families(&self) -> ItemFamilies<'_> {
        ItemFamilies {
            timeline: self.cf(TIMELINE),
            items: self.cf(ITEMS),
            changes: self.cf(CHANGES),
        }
    }

    /// Adds an item's entries to `batch`: its state under the action and,
    /// unless it is a hidden tombstone, its timeline entry (change stamp and
    /// reason) and its change entry. `key` and `value` are scratch buffers.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn put_item(
        families: &ItemFamilies<'_>,
        batch: &mut WriteBatch,
        (key, value): (&mut Vec<u8>, &mut Vec<u8>),
        tenant: &str,
        owner: &str,
        id: Oid,
        state: ItemState,
        reason: &Reason,
    ) {
        keys::item(key, tenant, id, owner);
        batch.put_cf(families.items, &key, state.encode());
        if state.hidden {
            return;
        }
        keys::encode_entry(value, reason, state.changed);
        keys::timeline(key, tenant, owner, state.relevancy, id);
        batch.put_cf(families.timeline, &key, &value);
        keys::change(key, tenant, owner, state.changed, id);
        batch.put_cf(families.changes, &key, []);
    }

    /// Takes an item's timeline and change entries out of the feed (into
    /// `batch`); its state under the action is the caller's to replace.
    pub(super) fn drop_entries(
        families: &ItemFamilies<'_>,
        batch: &mut WriteBatch,
        key: &mut Vec<u8>,
        tenant: &str,
        owner: &str,
        id: Oid,
        state: &ItemState,
    ) {
        keys::timeline(key, tenant, owner, state.relevancy, id);
        batch.delete_cf(families.timeline, &key);
        keys::change(key, tenant, owner, state.changed, id);
        batch.delete_cf(families.changes, &key);
    }

    /// An item's timeline entry: its change stamp and reason.
    pub(super) fn entry(
        &self,
        key: &mut Vec<u8>,
        tenant: &str,
        owner: &str,
        id: Oid,
        relevancy: Millis,
    ) -> StoreResult<Option<(Millis, Reason)>> {
        keys::timeline(key, tenant, owner, relevancy, id);
        self.get(TIMELINE, key)?
            .map(|entry| {
                let id = ObjectId::from_bytes(id);
                keys::decode_entry(&entry, format_args!("timeline {tenant}/{owner}/{id}"))
            })
            .transpose()
    }

    /// Removes every reader's item of an action (into `batch`) and returns the
    /// items that were visible. The caller holds the action's lock.
    pub(super) fn remove_items(
        &self,
        batch: &mut WriteBatch,
        tenant: &str,
        id: ObjectId,
    ) -> StoreResult<Vec<FeedItem>> {
        let oid = id.bytes();
        let prefix = Key::new().str(tenant).oid(oid).into_vec();
        let mut found = Vec::new();
        self.scan_prefix(ITEMS, &prefix, &prefix, usize::MAX, |k, v| {
            batch.delete_cf(self.cf(ITEMS), k);
            let state = ItemState::decode(v)?;
            if !state.hidden {
                found.push((Reader(&k[prefix.len()..]).last()?.to_owned(), state));
            }
            Ok(())
        })?;
        let mut key = Vec::with_capacity(64);
        let families = self.item_families();
        let mut removed = Vec::with_capacity(found.len());
        for (owner, state) in found {
            let entry = self.entry(&mut key, tenant, &owner, oid, state.relevancy)?;
            Inner::drop_entries(&families, batch, &mut key, tenant, &owner, oid, &state);
            if let Some((changed, reason)) = entry {
                removed.push(FeedItem {
                    owner,
                    action_id: id,
                    relevancy: state.relevancy,
                    reason,
                    changed,
                    copy: None,
                });
            }
        }
        Ok(removed)
    }

    pub(super) fn feed_page(
        &self,
        tenant: &str,
        owner: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<FeedItem>> {
        self.ranked_range(TIMELINE, tenant, owner, range, |position, value| {
            let id = position.action_id;
            let (changed, reason) =
                keys::decode_entry(value, format_args!("timeline {tenant}/{owner}/{id}"))?;
            Ok(FeedItem {
                owner: owner.to_owned(),
                action_id: position.action_id,
                relevancy: position.relevancy,
                reason,
                changed,
                copy: None,
            })
        })
    }

    /// A range of a family keyed like a timeline, `(tenant, owner, rank desc,
    /// action desc)`, newest first; `decode` makes each entry from its
    /// position and value.
    pub(super) fn ranked_range<T>(
        &self,
        family: &str,
        tenant: &str,
        owner: &str,
        range: FeedRange,
        decode: impl FnMut(Position, &[u8]) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let bounds = RankedBounds::of(tenant, owner, range);
        // The engine stops at the bounds itself, past deleted keys too.
        let mut opts = ReadOptions::default();
        opts.set_iterate_lower_bound(bounds.lower.clone());
        opts.set_iterate_upper_bound(bounds.upper.clone());
        let mut it = self.db.raw_iterator_cf_opt(self.cf(family), opts);
        ranked_range_in(&mut it, &bounds, range, decode)
    }

    /// Many ranges of one family, as [`ranked_range`](Inner::ranked_range)
    /// reads each, through one iterator: a merge of a hundred outboxes
    /// would otherwise make and drop a hundred, which costs about what
    /// their seeks do. They read one view of the store.
    pub(super) fn ranked_ranges<'r, T>(
        &self,
        family: &str,
        tenant: &str,
        ranges: impl IntoIterator<Item = (&'r str, FeedRange)>,
        mut decode: impl FnMut(usize, Position, &[u8]) -> StoreResult<T>,
    ) -> StoreResult<Vec<Vec<T>>> {
        let mut it = self.db.raw_iterator_cf(self.cf(family));
        let mut out = Vec::new();
        for (n, (owner, range)) in ranges.into_iter().enumerate() {
            let bounds = RankedBounds::of(tenant, owner, range);
            out.push(ranked_range_in(&mut it, &bounds, range, |p, v| {
                decode(n, p, v)
            })?);
        }
        Ok(out)
    }

    pub(super) fn feed_changes(
        &self,
        tenant: &str,
        owner: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        let prefix = Key::new().str(tenant).str(owner).into_vec();
        let mut key = Vec::with_capacity(64);
        keys::change(
            &mut key,
            tenant,
            owner,
            after.changed,
            after.action_id.bytes(),
        );
        let lower = keys::after(&key);
        let mut stamps = Vec::new();
        self.scan_prefix(CHANGES, &prefix, &lower, limit, |k, _| {
            let mut r = Reader(&k[prefix.len()..]);
            let changed = r.num()?;
            stamps.push((changed, r.oid()?));
            Ok(())
        })?;
        let mut out = Vec::with_capacity(stamps.len());
        for (changed, id) in stamps {
            keys::item(&mut key, tenant, id, owner);
            let Some(state) = self.get(ITEMS, &key)? else {
                continue;
            };
            let state = ItemState::decode(&state)?;
            if state.hidden {
                continue;
            }
            let Some((_, reason)) = self.entry(&mut key, tenant, owner, id, state.relevancy)?
            else {
                continue;
            };
            out.push(FeedItem {
                owner: owner.to_owned(),
                action_id: ObjectId::from_bytes(id),
                relevancy: state.relevancy,
                reason,
                changed,
                copy: None,
            });
        }
        Ok(out)
    }

    pub(super) fn hide_feed_item(
        &self,
        tenant: &str,
        owner: &str,
        action_id: ObjectId,
    ) -> StoreResult<Option<FeedItem>> {
        let oid = action_id.bytes();
        let _lock = self.lock(&[action_lock(tenant, oid)]);
        let mut key = Vec::with_capacity(64);
        keys::item(&mut key, tenant, oid, owner);
        let item_key = key.clone();
        let Some(state) = self.get(ITEMS, &item_key)? else {
            // Not materialised (a pulled item): the tombstone alone keeps
            // it out from now on.
            let mut batch = WriteBatch::default();
            let tombstone = ItemState {
                relevancy: 0,
                changed: 0,
                hidden: true,
            };
            batch.put_cf(self.cf(ITEMS), &item_key, tombstone.encode());
            self.commit(batch)?;
            return Ok(None);
        };
        let state = ItemState::decode(&state)?;
        if state.hidden {
            return Ok(None);
        }
        let mut batch = WriteBatch::default();
        // Keep a tombstone so a re-run of the fan-out does not bring it back.
        let tombstone = ItemState {
            hidden: true,
            ..state
        };
        batch.put_cf(self.cf(ITEMS), &item_key, tombstone.encode());
        let entry = self.entry(&mut key, tenant, owner, oid, state.relevancy)?;
        let families = self.item_families();
        Inner::drop_entries(&families, &mut batch, &mut key, tenant, owner, oid, &state);
        self.commit(batch)?;
        Ok(entry.map(|entry| item_of(owner, action_id, state.relevancy, entry)))
    }

    pub(super) fn feed_item(
        &self,
        tenant: &str,
        owner: &str,
        action_id: ObjectId,
    ) -> StoreResult<Option<FeedItem>> {
        let oid = action_id.bytes();
        let mut key = Vec::with_capacity(64);
        keys::item(&mut key, tenant, oid, owner);
        let Some(state) = self.get(ITEMS, &key)? else {
            return Ok(None);
        };
        let state = ItemState::decode(&state)?;
        if state.hidden {
            return Ok(None);
        }
        let entry = self.entry(&mut key, tenant, owner, oid, state.relevancy)?;
        Ok(entry.map(|entry| item_of(owner, action_id, state.relevancy, entry)))
    }

    pub(super) fn materialised(
        &self,
        tenant: &str,
        owner: &str,
        ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>> {
        let mut key = Vec::with_capacity(64);
        let keys: Vec<Vec<u8>> = ids
            .iter()
            .map(|id| {
                keys::item(&mut key, tenant, id.bytes(), owner);
                key.clone()
            })
            .collect();
        let found = self.exist_many(ITEMS, &keys)?;
        Ok(ids
            .iter()
            .zip(found)
            .filter_map(|(id, f)| f.then_some(*id))
            .collect())
    }

    pub(super) fn backfill(
        &self,
        tenant: &str,
        owner: &str,
        items: &[Backfill],
        derived: bool,
    ) -> StoreResult<Vec<FeedItem>> {
        let locks: Vec<Vec<u8>> = items
            .iter()
            .map(|b| action_lock(tenant, b.action_id.bytes()))
            .collect();
        // Under the actions' locks, a hide or delete cannot slip between the
        // check and the write.
        let _lock = self.lock(&locks);
        let families = self.item_families();
        let mut batch = WriteBatch::default();
        let (mut key, mut value) = (Vec::with_capacity(64), Vec::with_capacity(32));
        let mut written = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut refreshed = false;
        for b in items {
            let oid = b.action_id.bytes();
            if !seen.insert(oid) || self.action(tenant, b.action_id)?.is_none_or(|a| a.hidden) {
                continue;
            }
            keys::item(&mut key, tenant, oid, owner);
            if let Some(held) = self.get(ITEMS, &key)? {
                // Held already: it keeps its place, and takes the reason
                // the backfill gives if its own is a scope's that no
                // longer applies.
                let state = ItemState::decode(&held)?;
                if !state.hidden {
                    let entry = self.entry(&mut key, tenant, owner, oid, state.relevancy)?;
                    if entry.is_some_and(|(_, reason)| reason.stale_beside(&b.reason)) {
                        let buffers = (&mut key, &mut value);
                        Inner::put_item(
                            &families, &mut batch, buffers, tenant, owner, oid, state, &b.reason,
                        );
                        refreshed = true;
                    }
                }
                continue;
            }
            let state = ItemState {
                relevancy: b.relevancy,
                changed: b.changed,
                hidden: false,
            };
            let buffers = (&mut key, &mut value);
            Inner::put_item(
                &families, &mut batch, buffers, tenant, owner, oid, state, &b.reason,
            );
            written.push(FeedItem {
                owner: owner.to_owned(),
                action_id: b.action_id,
                relevancy: b.relevancy,
                reason: b.reason.clone(),
                changed: b.changed,
                copy: None,
            });
        }
        match (written.is_empty() && !refreshed, derived) {
            (true, _) => {}
            // Not synced: a later synced commit (any fan-out's) takes it to
            // disk, and until then only a crash of the machine, not of the
            // process, could lose it, with everything written after it.
            (false, true) => self.commit_unsynced(batch)?,
            (false, false) => self.commit(batch)?,
        }
        Ok(written)
    }
}

/// The feed item an entry of `owner`'s timeline stands for.
fn item_of(
    owner: &str,
    action_id: ObjectId,
    relevancy: Millis,
    (changed, reason): (Millis, Reason),
) -> FeedItem {
    FeedItem {
        owner: owner.to_owned(),
        action_id,
        relevancy,
        reason,
        changed,
        copy: None,
    }
}

/// The keys of one owner's range in a family keyed like a timeline: from
/// `lower` (included) to `upper` (excluded), under `prefix`.
struct RankedBounds {
    prefix: Vec<u8>,
    lower: Vec<u8>,
    upper: Vec<u8>,
}

impl RankedBounds {
    fn of(tenant: &str, owner: &str, range: FeedRange) -> RankedBounds {
        let prefix = Key::new().str(tenant).str(owner).into_vec();
        let mut key = Vec::with_capacity(64);
        // Keys run newest first: "older than p" is after p's key.
        let lower = match range.older_than {
            Some(p) => {
                keys::timeline(&mut key, tenant, owner, p.relevancy, p.action_id.bytes());
                keys::after(&key)
            }
            None => prefix.clone(),
        };
        let upper = match range.newer_than {
            Some(p) => {
                keys::timeline(&mut key, tenant, owner, p.relevancy, p.action_id.bytes());
                key.clone()
            }
            None => keys::successor(&prefix).unwrap_or_else(|| vec![0xff; prefix.len() + 1]),
        };
        RankedBounds {
            prefix,
            lower,
            upper,
        }
    }

    fn holds(&self, key: &[u8]) -> bool {
        key >= self.lower.as_slice() && key < self.upper.as_slice()
    }
}

/// Reads one range with `it`, which may have bounds of its own or none:
/// every key is checked against `bounds`.
fn ranked_range_in<T>(
    it: &mut rocksdb::DBRawIterator<'_>,
    bounds: &RankedBounds,
    range: FeedRange,
    mut decode: impl FnMut(Position, &[u8]) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    if range.limit == 0 || bounds.lower >= bounds.upper {
        return Ok(Vec::new());
    }
    if range.from_oldest {
        // The last key before the (excluded) upper end; with no upper
        // end, the largest key the prefix can hold.
        let mut last = bounds.upper.clone();
        if range.newer_than.is_none() {
            last = bounds.prefix.clone();
            last.extend_from_slice(&[0xff; ENTRY_SUFFIX]);
        }
        it.seek_for_prev(&last);
        if it.key() == Some(bounds.upper.as_slice()) {
            it.prev();
        }
    } else {
        it.seek(&bounds.lower);
    }
    let mut out = Vec::with_capacity(range.limit.min(128));
    while it.valid() && out.len() < range.limit {
        let (Some(k), Some(v)) = (it.key(), it.value()) else {
            break;
        };
        if !bounds.holds(k) {
            break;
        }
        let mut r = Reader(k.get(bounds.prefix.len()..).unwrap_or_default());
        let relevancy = r.num_desc()?;
        let action_id = ObjectId::from_bytes(r.oid_desc()?);
        out.push(decode(
            Position {
                relevancy,
                action_id,
            },
            v,
        )?);
        if range.from_oldest {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().map_err(super::db_err)?;
    if range.from_oldest {
        out.reverse();
    }
    Ok(out)
}
