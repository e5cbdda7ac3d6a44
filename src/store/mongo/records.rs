//! MongoDB: records in `records`, one document each: `_id` is the kind's
//! name, the tenant and the key joined by the records' separator, `v` the
//! version and `body` the bytes. Reading by prefix is a range on `_id`; a
//! write under a version is an insert (over none) or an update matching
//! the version.
//!
//! Earlier versions kept cuts, celebrities and inboxes in collections of
//! their own and the deployment's values in `meta`: they are moved here at
//! open, once (`records` in `meta`), and the earlier collections dropped.

use async_trait::async_trait;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};

use super::sources::position_of;
use super::{code_of, db_err, is_duplicate, read_all, MongoStore};
use crate::model::Inbox;
use crate::store::codes::{EDGE_KIND, RECORD_KIND};
use crate::store::records::{cut_key, encode_cut, encode_inbox, CutRange, SEPARATOR};
use crate::store::{Keys, RecordKind, RecordStore, StoreError, StoreResult, Stored};

/// The `meta` document noting the records version reached.
const RECORDS_VERSION_ID: &str = "records";
const RECORDS_VERSION: i32 = 1;

/// The `_id` of a record.
pub(super) fn record_id(kind: RecordKind, tenant: &str, key: &str) -> String {
    format!(
        "{}{SEPARATOR}{tenant}{SEPARATOR}{key}",
        RECORD_KIND.name(kind)
    )
}

/// The first string after every one that starts with `prefix`.
fn successor(prefix: &str) -> String {
    let mut end: Vec<char> = prefix.chars().collect();
    while let Some(last) = end.pop() {
        let next = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32);
        if let Some(next) = next {
            end.push(next);
            return end.into_iter().collect();
        }
    }
    char::MAX.to_string()
}

/// The `_id` range of every record that starts with `prefix`.
pub(super) fn id_range(prefix: &str) -> Document {
    doc! { "_id": { "$gte": prefix, "$lt": successor(prefix) } }
}

fn binary(bytes: Vec<u8>) -> Binary {
    Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    }
}

pub(super) fn stored_of(d: &Document) -> StoreResult<Stored> {
    let corrupt = |what| {
        let id = d.get_str("_id").unwrap_or_default().replace(SEPARATOR, "/");
        StoreError::corrupt(format_args!("records/{id}"), what)
    };
    let version = d.get_i64("v").map_err(|_| corrupt("no version"))?;
    let body = d
        .get_binary_generic("body")
        .map_err(|_| corrupt("no body"))?;
    Ok(Stored {
        version: version as u64,
        body: body.clone(),
    })
}

#[async_trait]
impl RecordStore for MongoStore {
    async fn records(
        &self,
        kind: RecordKind,
        tenant: &str,
        keys: Keys<'_>,
    ) -> StoreResult<Vec<(String, Stored)>> {
        let keys = match keys {
            Keys::These([]) => return Ok(Vec::new()),
            Keys::These(keys) => keys,
            Keys::Under(prefix) => {
                return self.records_under(kind, tenant, prefix, None, None).await
            }
            Keys::Page {
                under,
                after,
                limit,
            } => {
                return self
                    .records_under(kind, tenant, under, after, Some(limit))
                    .await
            }
        };
        let ids: Vec<String> = keys.iter().map(|k| record_id(kind, tenant, k)).collect();
        let found: Vec<Document> =
            read_all(self.records.find(doc! { "_id": { "$in": &ids } })).await?;
        let mut by_id = std::collections::HashMap::with_capacity(found.len());
        for d in &found {
            by_id.insert(d.get_str("_id").unwrap_or_default(), stored_of(d)?);
        }
        Ok(keys
            .iter()
            .zip(&ids)
            .filter_map(|(key, id)| Some((key.clone(), by_id.remove(id.as_str())?)))
            .collect())
    }

    async fn put_record(
        &self,
        kind: RecordKind,
        tenant: &str,
        key: &str,
        body: Option<Vec<u8>>,
        expect: Option<u64>,
    ) -> StoreResult<bool> {
        let id = record_id(kind, tenant, key);
        match (body, expect) {
            (Some(body), Some(0)) => {
                let record = doc! { "_id": &id, "v": 1_i64, "body": binary(body) };
                match self.records.insert_one(record).await {
                    Ok(_) => Ok(true),
                    Err(err) if is_duplicate(&err) => Ok(false),
                    Err(err) => Err(db_err(err)),
                }
            }
            (Some(body), Some(version)) => {
                let updated = self
                    .records
                    .update_one(
                        doc! { "_id": &id, "v": version as i64 },
                        doc! { "$set": { "body": binary(body) }, "$inc": { "v": 1_i64 } },
                    )
                    .await
                    .map_err(db_err)?;
                Ok(updated.matched_count == 1)
            }
            (Some(body), None) => {
                self.records
                    .update_one(
                        doc! { "_id": &id },
                        doc! { "$set": { "body": binary(body) }, "$inc": { "v": 1_i64 } },
                    )
                    .upsert(true)
                    .await
                    .map_err(db_err)?;
                Ok(true)
            }
            (None, expect) => {
                let mut filter = doc! { "_id": &id };
                match expect {
                    Some(0) => {
                        let stored = self.records.find_one(filter).await.map_err(db_err)?;
                        return Ok(stored.is_none());
                    }
                    Some(version) => {
                        filter.insert("v", version as i64);
                    }
                    None => {}
                }
                let gone = self.records.delete_one(filter).await.map_err(db_err)?;
                Ok(expect.is_none() || gone.deleted_count == 1)
            }
        }
    }
}

impl MongoStore {
    /// Moves the records earlier versions kept elsewhere into `records`,
    /// once. A move cut short is made again: what it moved already is kept.
    pub(super) async fn migrate_records(&self) -> StoreResult<()> {
        let noted = self.noted_version(RECORDS_VERSION_ID).await?;
        if noted >= RECORDS_VERSION {
            return Ok(());
        }
        let mut moved = self.move_cuts().await?;
        moved += self.move_celebrities().await?;
        moved += self.move_inboxes().await?;
        moved += self.move_deployment_values().await?;
        for earlier in ["cuts", "celebrities", "inboxes"] {
            self.db
                .collection::<Document>(earlier)
                .drop()
                .await
                .map_err(db_err)?;
        }
        self.note_version(RECORDS_VERSION_ID, RECORDS_VERSION)
            .await?;
        if moved > 0 {
            tracing::info!(moved, "records moved to the records collection");
        }
        Ok(())
    }

    /// Writes a moved record unless it is there already.
    pub(super) async fn keep(&self, id: String, version: i64, body: Vec<u8>) -> StoreResult<()> {
        self.records
            .update_one(
                doc! { "_id": &id },
                doc! { "$setOnInsert": { "v": version, "body": binary(body) } },
            )
            .upsert(true)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn move_cuts(&self) -> StoreResult<usize> {
        let docs = self.earlier("cuts").await?;
        for d in &docs {
            let kind = code_of(&EDGE_KIND, "cuts", d, "kind")?;
            let field = |name: &str| d.get_str(name).map_err(|_| corrupt_cut(d));
            let (tenant, reader, actor) = (field("tenant")?, field("reader")?, field("actor")?);
            let range = |d: &Document| -> Option<CutRange> {
                Some((
                    position_of(d.get_document("since").ok()?)?,
                    position_of(d.get_document("began").ok()?)?,
                    d.get_document("until").ok().and_then(position_of),
                ))
            };
            let mut ranges: Vec<CutRange> = range(d).into_iter().collect();
            for kept in d.get_array("kept").into_iter().flatten() {
                ranges.extend(kept.as_document().and_then(range));
            }
            let key = cut_key(reader, kind, actor);
            self.keep(
                record_id(RecordKind::Cut, tenant, &key),
                1,
                encode_cut(&ranges),
            )
            .await?;
        }
        Ok(docs.len())
    }

    async fn move_celebrities(&self) -> StoreResult<usize> {
        let docs = self.earlier("celebrities").await?;
        for d in &docs {
            let (Ok(tenant), Ok(user)) = (d.get_str("tenant"), d.get_str("userId")) else {
                continue;
            };
            let id = record_id(RecordKind::Celebrity, tenant, user);
            self.keep(id, 1, Vec::new()).await?;
        }
        Ok(docs.len())
    }

    async fn move_inboxes(&self) -> StoreResult<usize> {
        let docs = self.earlier("inboxes").await?;
        for d in &docs {
            let inbox: Inbox = bson::from_document(d.clone())
                .map_err(|e| StoreError::corrupt("inboxes", e.to_string()))?;
            let id = record_id(RecordKind::Inbox, &inbox.tenant, &inbox.owner);
            let version = inbox.version.max(1) as i64;
            self.keep(id, version, encode_inbox(&inbox)?).await?;
        }
        Ok(docs.len())
    }

    /// The deployment's values: the `meta` documents holding a `value`.
    async fn move_deployment_values(&self) -> StoreResult<usize> {
        let docs = read_all(self.meta.find(doc! { "value": { "$exists": true } })).await?;
        for d in &docs {
            let (Ok(key), Some(Bson::Binary(value))) = (d.get_str("_id"), d.get("value")) else {
                continue;
            };
            let id = record_id(RecordKind::Meta, "", key);
            self.keep(id, 1, value.bytes.clone()).await?;
            self.meta
                .delete_one(doc! { "_id": key })
                .await
                .map_err(db_err)?;
        }
        Ok(docs.len())
    }
}

impl MongoStore {
    /// The records of `kind` whose key begins with `prefix`, in key order:
    /// past `after` if given, at most `limit` if given.
    async fn records_under(
        &self,
        kind: RecordKind,
        tenant: &str,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> StoreResult<Vec<(String, Stored)>> {
        if limit == Some(0) {
            return Ok(Vec::new());
        }
        let start = record_id(kind, tenant, prefix);
        let keys_from = start.len() - prefix.len();
        let filter = match after {
            Some(after) => {
                let past = record_id(kind, tenant, after);
                doc! { "$and": [id_range(&start), { "_id": { "$gt": past } }] }
            }
            None => id_range(&start),
        };
        let mut find = self.records.find(filter).sort(doc! { "_id": 1 });
        if let Some(limit) = limit {
            find = find.limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        let found: Vec<Document> = read_all(find).await?;
        found
            .iter()
            .map(|d| {
                let id = d.get_str("_id").unwrap_or_default();
                Ok((id[keys_from..].to_owned(), stored_of(d)?))
            })
            .collect()
    }
}

fn corrupt_cut(d: &Document) -> StoreError {
    StoreError::corrupt(
        format_args!("cuts/{:?}", d.get("_id")),
        "a cut without its ids",
    )
}
