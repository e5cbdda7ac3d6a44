//! MongoDB: notifications. `notice_groups` holds one document per group,
//! the group's fields at the top (its id as `_id`) so pages, counts and
//! trims query `last`, `visible` and `unread` directly; `inboxes` one per
//! owner (notice jobs are on the job queue, `jobs.rs`). Groups and inboxes
//! are written under their version: a new one is an insert that a unique
//! index refuses twice, a change a replace of the version before, a
//! removal a delete of the version read. Only plain finds, counts and
//! single-document writes, so any wire-protocol server will do.

use async_trait::async_trait;
use bson::{doc, Document};
use mongodb::Collection;
use serde::Serialize;

use super::{db_err, is_duplicate, read_all, MongoStore};
use crate::model::{Millis, NoticeCounts, NoticeGroup, NoticeRange};
use crate::store::{NoticeSelect, NoticeStore, NoticeWrite, StoreError, StoreResult};

/// A group as stored: its fields, with its id as `_id` (the order pages
/// break ties in).
fn group_doc(group: &NoticeGroup) -> StoreResult<Document> {
    let mut doc = bson::to_document(group)
        .map_err(|e| StoreError::internal("MongoDB: cannot encode a notice group", e))?;
    doc.remove("id");
    doc.insert("_id", group.id);
    Ok(doc)
}

pub(super) fn group_of(mut doc: Document) -> StoreResult<NoticeGroup> {
    if let Some(id) = doc.remove("_id") {
        doc.insert("id", id);
    }
    bson::from_document(doc)
        .map_err(|e| StoreError::internal("MongoDB: corrupt notice group document", e))
}

fn groups_of(docs: Vec<Document>) -> StoreResult<Vec<NoticeGroup>> {
    docs.into_iter().map(group_of).collect()
}

/// A count or a version as the driver takes it.
fn int(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// Writes `record`, version `version` of what `filter` names: for version 1
/// a new document (false if a unique index holds one already), else over
/// the document of the version before (false if another write came first).
async fn put_versioned<T>(
    collection: &Collection<T>,
    mut filter: Document,
    version: u64,
    record: &T,
) -> StoreResult<bool>
where
    T: Serialize + Send + Sync,
{
    match version {
        0 => Ok(false),
        1 => match collection.insert_one(record).await {
            Ok(_) => Ok(true),
            Err(err) if is_duplicate(&err) => Ok(false),
            Err(err) => Err(db_err(err)),
        },
        n => {
            filter.insert("version", int(n - 1));
            let replaced = collection
                .replace_one(filter, record)
                .await
                .map_err(db_err)?;
            Ok(replaced.matched_count == 1)
        }
    }
}

impl MongoStore {
    async fn notice_page(
        &self,
        tenant: &str,
        owner: &str,
        range: NoticeRange,
    ) -> StoreResult<Vec<NoticeGroup>> {
        // A limit of 0 would be no limit to the server.
        if range.limit == 0 {
            return Ok(Vec::new());
        }
        let mut filter = doc! { "tenant": tenant, "owner": owner, "visible": { "$gt": 0 } };
        if range.unread_only {
            filter.insert("unread", doc! { "$gt": 0 });
        }
        if let Some((last, id)) = range.before {
            filter.insert(
                "$or",
                vec![
                    doc! { "last": { "$lt": last } },
                    doc! { "last": last, "_id": { "$lt": id } },
                ],
            );
        }
        groups_of(
            read_all(
                self.notice_groups
                    .find(filter)
                    .sort(doc! { "last": -1, "_id": -1 })
                    .limit(int(range.limit)),
            )
            .await?,
        )
    }
}

#[async_trait]
impl NoticeStore for MongoStore {
    async fn notice_groups(
        &self,
        tenant: &str,
        owner: &str,
        select: NoticeSelect<'_>,
    ) -> StoreResult<Vec<NoticeGroup>> {
        let found = match select {
            NoticeSelect::Key(key) => {
                let filter = doc! { "tenant": tenant, "owner": owner, "key": key };
                let found = self.notice_groups.find_one(filter).await.map_err(db_err)?;
                found.into_iter().collect()
            }
            NoticeSelect::Ids([]) => Vec::new(),
            NoticeSelect::Ids(ids) => {
                let filter = doc! { "_id": { "$in": ids }, "tenant": tenant, "owner": owner };
                read_all(self.notice_groups.find(filter)).await?
            }
            NoticeSelect::Page(range) => return self.notice_page(tenant, owner, range).await,
            NoticeSelect::Beyond(keep) => {
                read_all(
                    self.notice_groups
                        .find(doc! { "tenant": tenant, "owner": owner })
                        .sort(doc! { "last": -1, "_id": -1 })
                        .skip(u64::try_from(keep).unwrap_or(u64::MAX)),
                )
                .await?
            }
        };
        groups_of(found)
    }

    async fn write_notice_group(&self, write: NoticeWrite<'_>) -> StoreResult<bool> {
        // The key too: a version is only ever written over its own group.
        let filter = |group: &NoticeGroup| {
            doc! {
                "_id": group.id,
                "tenant": &group.tenant,
                "owner": &group.owner,
                "key": &group.key,
            }
        };
        match write {
            NoticeWrite::Put(group) => {
                put_versioned(
                    &self.notice_groups,
                    filter(group),
                    group.version,
                    &group_doc(group)?,
                )
                .await
            }
            NoticeWrite::Remove(group) => {
                let mut filter = filter(group);
                filter.insert("version", int(group.version));
                let deleted = self
                    .notice_groups
                    .delete_one(filter)
                    .await
                    .map_err(db_err)?;
                Ok(deleted.deleted_count == 1)
            }
        }
    }

    async fn notice_counts(
        &self,
        tenant: &str,
        owner: &str,
        seen_until: Millis,
    ) -> StoreResult<NoticeCounts> {
        let visible = doc! { "tenant": tenant, "owner": owner, "visible": { "$gt": 0 } };
        let mut unseen = visible.clone();
        unseen.insert("last", doc! { "$gt": seen_until });
        let mut unread = visible;
        unread.insert("unread", doc! { "$gt": 0 });
        Ok(NoticeCounts {
            unseen: self
                .notice_groups
                .count_documents(unseen)
                .await
                .map_err(db_err)?,
            unread: self
                .notice_groups
                .count_documents(unread)
                .await
                .map_err(db_err)?,
        })
    }
}
