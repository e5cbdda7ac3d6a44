//! Notifications in the `graph` family: each group whole under its key,
//! with an index by id and one by position (`last` then id, newest first)
//! whose value says whether the group is visible and unread, and each
//! owner's count of groups listed and unread (inboxes are records, notice
//! jobs are on the job queue). Every write decides under the lock of its
//! group's key and its owner's count, a removal as well as a put, and
//! changes the count in the batch that changes the group.
//!
//! The badge counts read no more than they count: the unread count is one
//! read, and the unseen groups are the newest, read from the top of the
//! position index down to the seen watermark.

use async_trait::async_trait;
use rocksdb::WriteBatch;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::families::GRAPH;
use super::keys::{self, graph as tag, Key};
use super::{EmbeddedStore, Inner};
use crate::model::{Millis, NoticeCounts, NoticeGroup, NoticeRange, ObjectId};
use crate::store::{NoticeSelect, NoticeStore, NoticeWrite, StoreResult};

fn group_key(tenant: &str, owner: &str, key: &str) -> Vec<u8> {
    Key::tag(tag::NOTICE_GROUP)
        .str(tenant)
        .str(owner)
        .last(key)
        .into_vec()
}

fn id_key(tenant: &str, owner: &str, id: ObjectId) -> Vec<u8> {
    Key::tag(tag::NOTICE_ID)
        .str(tenant)
        .str(owner)
        .oid(id.bytes())
        .into_vec()
}

fn order_prefix(tenant: &str, owner: &str) -> Vec<u8> {
    Key::tag(tag::NOTICE_ORDER)
        .str(tenant)
        .str(owner)
        .into_vec()
}

fn unread_key(tenant: &str, owner: &str) -> Vec<u8> {
    Key::tag(tag::NOTICE_UNREAD)
        .str(tenant)
        .str(owner)
        .into_vec()
}

/// Newest first: `last` and then the id, both descending.
fn order_key(tenant: &str, owner: &str, last: Millis, id: ObjectId) -> Vec<u8> {
    let mut key = order_prefix(tenant, owner);
    key.extend_from_slice(&(!(last as u64 ^ (1 << 63))).to_be_bytes());
    key.extend(id.bytes().iter().map(|b| !b));
    key
}

/// What the position index says of a group: its key, and whether it is
/// listed and unread.
#[derive(Serialize, Deserialize)]
struct Entry {
    key: String,
    last: Millis,
    visible: bool,
    unread: bool,
}

/// An [`Entry`] without its key, as counts read it.
#[derive(Deserialize)]
struct Flags {
    last: Millis,
    visible: bool,
    unread: bool,
}

/// Whether `group` counts as unread: listed, with an unread member.
fn counted_unread(group: &NoticeGroup) -> bool {
    group.visible > 0 && group.unread > 0
}

/// Index entries one scan of an owner's groups reads at a time.
const ENTRIES_PER_SCAN: usize = 64;

impl Inner {
    fn notice_group(
        &self,
        tenant: &str,
        owner: &str,
        key: &str,
    ) -> StoreResult<Option<NoticeGroup>> {
        self.get(GRAPH, &group_key(tenant, owner, key))?
            .map(|v| keys::decode_record(&v))
            .transpose()
    }

    fn notice_groups(
        &self,
        tenant: &str,
        owner: &str,
        ids: &[ObjectId],
    ) -> StoreResult<Vec<NoticeGroup>> {
        let mut groups = Vec::new();
        for id in ids {
            let Some(key) = self.get(GRAPH, &id_key(tenant, owner, *id))? else {
                continue;
            };
            let key = String::from_utf8(key).map_err(|_| keys::corrupt("notice id"))?;
            if let Some(group) = self.notice_group(tenant, owner, &key)? {
                if !groups.iter().any(|g: &NoticeGroup| g.id == group.id) {
                    groups.push(group);
                }
            }
        }
        Ok(groups)
    }

    /// Puts `group`, or removes it, under its version (see [`NoticeWrite`]),
    /// and moves its owner's unread count with it.
    fn write_notice_group(&self, group: &NoticeGroup, remove: bool) -> StoreResult<bool> {
        let (t, o) = (group.tenant.as_str(), group.owner.as_str());
        let key = group_key(t, o, &group.key);
        let unread_at = unread_key(t, o);
        let _lock = self.lock(&[&key, &unread_at]);
        let stored: Option<NoticeGroup> = self
            .get(GRAPH, &key)?
            .map(|v| keys::decode_record(&v))
            .transpose()?;
        let cf = self.cf(GRAPH);
        let mut batch = WriteBatch::default();
        let was_unread = match &stored {
            None if !remove && group.version == 1 => false,
            Some(old) if !remove && old.version + 1 == group.version && old.id == group.id => {
                batch.delete_cf(cf, order_key(t, o, old.last, old.id));
                counted_unread(old)
            }
            Some(old) if remove && old.version == group.version && old.id == group.id => {
                batch.delete_cf(cf, &key);
                batch.delete_cf(cf, id_key(t, o, old.id));
                batch.delete_cf(cf, order_key(t, o, old.last, old.id));
                self.move_unread(&mut batch, t, o, counted_unread(old), false)?;
                self.commit(batch)?;
                return Ok(true);
            }
            _ => return Ok(false),
        };
        batch.put_cf(cf, &key, keys::encode_record(group)?);
        batch.put_cf(cf, id_key(t, o, group.id), group.key.as_bytes());
        let entry = Entry {
            key: group.key.clone(),
            last: group.last,
            visible: group.visible > 0,
            unread: counted_unread(group),
        };
        batch.put_cf(
            cf,
            order_key(t, o, group.last, group.id),
            keys::encode_record(&entry)?,
        );
        self.move_unread(&mut batch, t, o, was_unread, entry.unread)?;
        self.commit(batch)?;
        Ok(true)
    }

    /// Puts into `batch` the owner's unread count as a group that was
    /// counted (`was`) is now counted or not (`is`); the caller holds the
    /// count's lock. An owner whose groups were written before counts were
    /// kept is counted from the index first.
    fn move_unread(
        &self,
        batch: &mut WriteBatch,
        tenant: &str,
        owner: &str,
        was: bool,
        is: bool,
    ) -> StoreResult<()> {
        if was == is {
            return Ok(());
        }
        let count = match self.stored_unread(tenant, owner)? {
            Some(count) => count,
            None => self.unread_in_index(tenant, owner)?,
        };
        let count = if is {
            count + 1
        } else {
            count.saturating_sub(1)
        };
        let key = unread_key(tenant, owner);
        batch.put_cf(self.cf(GRAPH), key, count.to_be_bytes());
        Ok(())
    }

    /// The owner's unread count as kept, if it is.
    fn stored_unread(&self, tenant: &str, owner: &str) -> StoreResult<Option<u64>> {
        let Some(value) = self.get(GRAPH, &unread_key(tenant, owner))? else {
            return Ok(None);
        };
        let bytes: [u8; 8] = value
            .as_slice()
            .try_into()
            .map_err(|_| keys::corrupt("notice unread count"))?;
        Ok(Some(u64::from_be_bytes(bytes)))
    }

    /// The owner's unread count, counted from the position index.
    fn unread_in_index(&self, tenant: &str, owner: &str) -> StoreResult<u64> {
        let mut unread = 0;
        self.entries(tenant, owner, None, |e: Flags| {
            unread += u64::from(e.visible && e.unread);
            Ok(true)
        })?;
        Ok(unread)
    }

    /// Every index entry of `owner`, newest first, from `before` on, read
    /// whole ([`Entry`]) or without its key ([`Flags`]).
    fn entries<E: DeserializeOwned>(
        &self,
        tenant: &str,
        owner: &str,
        before: Option<(Millis, ObjectId)>,
        mut each: impl FnMut(E) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        let prefix = order_prefix(tenant, owner);
        let lower = match before {
            Some((last, id)) => keys::after(&order_key(tenant, owner, last, id)),
            None => prefix.clone(),
        };
        // In batches, so a caller that has what it needs (a page of 21)
        // stops the scan instead of riding it to the owner's last group.
        let mut lower = lower;
        loop {
            let (mut stop, mut read, mut last) = (false, 0usize, None);
            self.scan_prefix(GRAPH, &prefix, &lower, ENTRIES_PER_SCAN, |k, v| {
                read += 1;
                last = Some(k.to_vec());
                if !stop {
                    stop = !each(keys::decode_record(v)?)?;
                }
                Ok(())
            })?;
            match last {
                Some(key) if !stop && read == ENTRIES_PER_SCAN => lower = keys::after(&key),
                _ => return Ok(()),
            }
        }
    }

    fn notice_page(
        &self,
        tenant: &str,
        owner: &str,
        range: NoticeRange,
    ) -> StoreResult<Vec<NoticeGroup>> {
        // The scan below looks at one entry before it asks whether to stop.
        if range.limit == 0 {
            return Ok(Vec::new());
        }
        let mut keys_listed = Vec::new();
        self.entries(tenant, owner, range.before, |e: Entry| {
            if e.visible && (!range.unread_only || e.unread) {
                keys_listed.push(e.key);
            }
            Ok(keys_listed.len() < range.limit)
        })?;
        self.groups_of_keys(tenant, owner, keys_listed)
    }

    fn notice_counts(
        &self,
        tenant: &str,
        owner: &str,
        seen_until: Millis,
    ) -> StoreResult<NoticeCounts> {
        // The unseen are the newest: read down to the watermark, without
        // their keys (only the flags count).
        let mut unseen = 0;
        self.entries(tenant, owner, None, |e: Flags| {
            if e.last <= seen_until {
                return Ok(false);
            }
            unseen += u64::from(e.visible);
            Ok(true)
        })?;
        let unread = match self.stored_unread(tenant, owner)? {
            Some(unread) => unread,
            None => self.unread_in_index(tenant, owner)?,
        };
        Ok(NoticeCounts { unseen, unread })
    }

    fn beyond(&self, tenant: &str, owner: &str, keep: usize) -> StoreResult<Vec<NoticeGroup>> {
        let mut keys_beyond = Vec::new();
        let mut seen = 0usize;
        self.entries(tenant, owner, None, |e: Entry| {
            seen += 1;
            if seen > keep {
                keys_beyond.push(e.key);
            }
            Ok(true)
        })?;
        self.groups_of_keys(tenant, owner, keys_beyond)
    }

    /// The groups stored under `keys`, in their order.
    fn groups_of_keys(
        &self,
        tenant: &str,
        owner: &str,
        keys: Vec<String>,
    ) -> StoreResult<Vec<NoticeGroup>> {
        let mut groups = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(group) = self.notice_group(tenant, owner, &key)? {
                groups.push(group);
            }
        }
        Ok(groups)
    }

    fn select(
        &self,
        tenant: &str,
        owner: &str,
        select: NoticeSelect<'_>,
    ) -> StoreResult<Vec<NoticeGroup>> {
        match select {
            NoticeSelect::Key(key) => {
                Ok(self.notice_group(tenant, owner, key)?.into_iter().collect())
            }
            NoticeSelect::Ids(ids) => self.notice_groups(tenant, owner, ids),
            NoticeSelect::Page(range) => self.notice_page(tenant, owner, range),
            NoticeSelect::Beyond(keep) => self.beyond(tenant, owner, keep),
        }
    }
}

#[async_trait]
impl NoticeStore for EmbeddedStore {
    async fn notice_groups(
        &self,
        tenant: &str,
        owner: &str,
        select: NoticeSelect<'_>,
    ) -> StoreResult<Vec<NoticeGroup>> {
        self.inner()?.select(tenant, owner, select)
    }

    async fn write_notice_group(&self, write: NoticeWrite<'_>) -> StoreResult<bool> {
        let (group, remove) = match write {
            NoticeWrite::Put(group) => (group.clone(), false),
            NoticeWrite::Remove(group) => (group.clone(), true),
        };
        self.blocking(move |db| db.write_notice_group(&group, remove))
            .await
    }

    async fn notice_counts(
        &self,
        tenant: &str,
        owner: &str,
        seen_until: Millis,
    ) -> StoreResult<NoticeCounts> {
        self.inner()?.notice_counts(tenant, owner, seen_until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Notice, NoticeReason};

    fn group(owner: &str, key: &str, at: Millis) -> NoticeGroup {
        let mut group = NoticeGroup::new("t", owner, key, NoticeReason::Like);
        group.add(Notice {
            id: ObjectId::new(),
            source: format!("{key}:0"),
            reason: NoticeReason::Like,
            actor: "ann".into(),
            action_id: Some(ObjectId::new()),
            comment_id: None,
            ref_id: None,
            at,
            read: false,
            archived: false,
        });
        group.version = 1;
        group
    }

    #[test]
    fn an_owner_written_before_counts_were_kept_is_counted_from_the_index_then_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let inner = &store.inner().unwrap();
        let mut groups: Vec<NoticeGroup> = (0..3)
            .map(|n| group("mary", &format!("g{n}"), 100 + n))
            .collect();
        for g in &groups {
            assert!(inner.write_notice_group(g, false).unwrap());
        }
        assert_eq!(inner.stored_unread("t", "mary").unwrap(), Some(3));
        // As an earlier version left it: groups, no count.
        let mut batch = WriteBatch::default();
        batch.delete_cf(inner.cf(GRAPH), unread_key("t", "mary"));
        inner.commit(batch).unwrap();
        let counts = inner.notice_counts("t", "mary", 100).unwrap();
        assert_eq!((counts.unseen, counts.unread), (2, 3));
        assert_eq!(inner.stored_unread("t", "mary").unwrap(), None);
        // A write that leaves the count alone keeps none; one that moves
        // it counts the index first.
        groups[1].version = 2;
        assert!(inner.write_notice_group(&groups[1], false).unwrap());
        assert_eq!(inner.stored_unread("t", "mary").unwrap(), None);
        groups[0].mark_read(None);
        groups[0].version = 2;
        assert!(inner.write_notice_group(&groups[0], false).unwrap());
        assert_eq!(inner.stored_unread("t", "mary").unwrap(), Some(2));
        let counts = inner.notice_counts("t", "mary", 0).unwrap();
        assert_eq!((counts.unseen, counts.unread), (3, 2));
    }
}
