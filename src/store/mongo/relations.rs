//! MongoDB: relations in `relations`, one document each: `_id` is the
//! relation's name, the tenant and both ends joined by the records'
//! separator; `t`, `r`, `f` and `o` repeat them for the two indexes that
//! read a relation from either end, and `a` holds the attributes (absent
//! when there are none).
//!
//! Earlier versions kept edges, memberships and assignments in collections
//! of their own, supervisors on the users' documents and groups' kinds in
//! `groups`: they are moved here and to the records at open, once
//! (`relations` in `meta`), and the earlier collections dropped.

use std::collections::HashMap;

use async_trait::async_trait;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};
use futures_util::{FutureExt, TryStreamExt};
use mongodb::options::ReturnDocument;

use super::bulk::upsert_all;
use super::records::record_id;
use super::{code_of, db_err, is_duplicate, read_all, MongoStore};
use crate::model::{MembershipRole, Millis};
use crate::store::codes::{EDGE_KIND, GROUP_KIND, RELATION, ROLE};
use crate::store::records::SEPARATOR;
use crate::store::relations::membership_attrs;
use crate::store::{
    Change, Direction, Job, Others, RecordKind, Related, Relation, RelationStore, StoreError,
    StoreResult,
};

/// The `meta` document noting the relations version reached.
const RELATIONS_VERSION_ID: &str = "relations";
const RELATIONS_VERSION: i32 = 2;

/// The `_id` of `from` → `to`.
fn relation_id(relation: Relation, tenant: &str, from: &str, to: &str) -> String {
    format!(
        "{}{SEPARATOR}{tenant}{SEPARATOR}{from}{SEPARATOR}{to}",
        RELATION.name(relation)
    )
}

/// A relation's document whole.
pub(super) fn relation_doc(
    relation: Relation,
    tenant: &str,
    from: &str,
    to: &str,
    attrs: &[u8],
) -> Document {
    let mut d = doc! {
        "_id": relation_id(relation, tenant, from, to),
        "t": tenant,
        "r": RELATION.name(relation),
        "f": from,
        "o": to,
    };
    if !attrs.is_empty() {
        d.insert(
            "a",
            Binary {
                subtype: BinarySubtype::Generic,
                bytes: attrs.to_vec(),
            },
        );
    }
    d
}

/// A relation's attributes as its document holds them.
pub(super) fn attrs_of(d: &Document) -> Vec<u8> {
    match d.get("a") {
        Some(Bson::Binary(b)) => b.bytes.clone(),
        _ => Vec::new(),
    }
}

/// The upsert statement that writes a relation unless it is there.
pub(super) fn keep_relation(d: Document) -> Document {
    let id = d.get("_id").cloned().unwrap_or(Bson::Null);
    doc! { "q": { "_id": id }, "u": { "$setOnInsert": d }, "upsert": true }
}

/// The upsert statement that writes a relation whole.
pub(super) fn replace_relation(d: Document) -> Document {
    let id = d.get("_id").cloned().unwrap_or(Bson::Null);
    doc! { "q": { "_id": id }, "u": d, "upsert": true }
}

/// The field holding an end, from `direction`'s start: the id asked about,
/// then the other end.
fn ends(direction: Direction) -> (&'static str, &'static str) {
    match direction {
        Direction::Out => ("f", "o"),
        Direction::In => ("o", "f"),
    }
}

#[async_trait]
impl RelationStore for MongoStore {
    async fn relate(&self, tenant: &str, changes: &[Change]) -> StoreResult<Vec<Option<Vec<u8>>>> {
        let mut before = Vec::with_capacity(changes.len());
        for c in changes {
            let id = relation_id(c.relation, tenant, &c.from, &c.to);
            // With the shard key (`t`, `o`), so a sharded cluster sends it to
            // one shard.
            let filter = doc! { "_id": &id, "t": tenant, "o": &c.to };
            let had = match &c.attrs {
                Some(attrs) => self
                    .relations
                    .find_one_and_replace(
                        filter,
                        relation_doc(c.relation, tenant, &c.from, &c.to, attrs),
                    )
                    .upsert(true)
                    .return_document(ReturnDocument::Before)
                    .await
                    .map_err(db_err)?,
                None => self
                    .relations
                    .find_one_and_delete(filter)
                    .await
                    .map_err(db_err)?,
            };
            before.push(had.as_ref().map(attrs_of));
        }
        Ok(before)
    }

    /// See [`RelationStore::relate_owing`]: the relation and the job in one
    /// transaction.
    async fn relate_owing(&self, tenant: &str, change: &Change, owed: &Job) -> StoreResult<bool> {
        let id = relation_id(change.relation, tenant, &change.from, &change.to);
        // With the shard key (`t`, `o`), as every write of a relation.
        let filter = doc! { "_id": &id, "t": tenant, "o": &change.to };
        let written = change
            .attrs
            .as_ref()
            .map(|attrs| relation_doc(change.relation, tenant, &change.from, &change.to, attrs));
        let requeue = doc! {
            "$set": { "payload": &owed.payload, "queued": owed.queued, "until": Millis::MIN },
            "$unset": { "worker": "" },
        };
        let job = doc! { "kind": owed.kind.code(), "tenant": &owed.tenant, "key": &owed.key };
        let mut session = self.db.client().start_session().await.map_err(db_err)?;
        session
            .start_transaction()
            .and_run(
                (self, &filter, &written, &requeue, &job),
                |session, (store, filter, written, requeue, job)| {
                    async move {
                        let relations = &store.relations;
                        let Some(written) = written else {
                            let had = relations
                                .find_one_and_delete((*filter).clone())
                                .session(&mut *session)
                                .await?;
                            return Ok(had.is_some());
                        };
                        let had = relations
                            .find_one_and_replace((*filter).clone(), (*written).clone())
                            .upsert(true)
                            .session(&mut *session)
                            .await?;
                        if had.is_some() {
                            return Ok(false);
                        }
                        store
                            .jobs
                            .update_one((*job).clone(), (*requeue).clone())
                            .upsert(true)
                            .session(&mut *session)
                            .await?;
                        Ok(true)
                    }
                    .boxed()
                },
            )
            .await
            .map_err(db_err)
    }

    async fn relate_only(
        &self,
        tenant: &str,
        relation: Relation,
        from: &str,
        to: Option<&str>,
    ) -> StoreResult<Vec<String>> {
        // Two calls at once for a `from` no relation stands from yet would
        // each write a document of its own and neither would conflict: the
        // duplicate-key error a first guard's insert may meet is the same
        // race, lost, and the next try finds the guard there.
        let mut tries = 0;
        loop {
            match self.relate_only_once(tenant, relation, from, to).await {
                Err(err) if is_duplicate(&err) && tries < GUARD_TRIES => tries += 1,
                done => return done.map_err(db_err),
            }
        }
    }

    async fn related(
        &self,
        tenant: &str,
        relation: Relation,
        direction: Direction,
        ids: &[String],
        others: Others<'_>,
    ) -> StoreResult<Vec<Related>> {
        match others {
            Others::After { after, limit } => {
                self.related_after(tenant, relation, direction, ids, after, limit)
                    .await
            }
            Others::Among(others) => {
                self.related_among(tenant, relation, direction, ids, others)
                    .await
            }
        }
    }
}

/// Times [`RelationStore::relate_only`] tries again after losing the race
/// to write the first guard of a `from`.
const GUARD_TRIES: usize = 3;

impl MongoStore {
    /// [`RelationStore::relate_only`], in one transaction that first writes
    /// the guard of `from`'s side of the relation (a document of its own in
    /// `relations`, with no `r`, so no read of a relation finds it): two
    /// calls at once both write it, so the second to commit conflicts and
    /// the driver runs it again, reading what the first wrote.
    async fn relate_only_once(
        &self,
        tenant: &str,
        relation: Relation,
        from: &str,
        to: Option<&str>,
    ) -> mongodb::error::Result<Vec<String>> {
        let mut session = self.db.client().start_session().await?;
        session
            .start_transaction()
            .and_run(
                (self, tenant, relation, from, to),
                |session, (store, tenant, relation, from, to)| {
                    let (store, tenant, relation, from, to) = (*store, *tenant, *relation, *from, *to);
                    async move {
                        let name = RELATION.name(relation);
                        store
                            .relations
                            .update_one(
                                doc! {
                                    "_id": relation_id(relation, tenant, from, ""),
                                    "t": tenant,
                                    "o": "",
                                },
                                doc! {
                                    "$inc": { "n": 1_i64 },
                                    "$setOnInsert": { "f": from, "g": name },
                                },
                            )
                            .upsert(true)
                            .session(&mut *session)
                            .await?;
                        let mut cursor = store
                            .relations
                            .find(doc! { "t": tenant, "r": name, "f": from })
                            .projection(doc! { "_id": 0, "o": 1 })
                            .session(&mut *session)
                            .await?;
                        let had: Vec<Document> = cursor.stream(&mut *session).try_collect().await?;
                        let ended: Vec<String> = had
                            .iter()
                            .filter_map(|d| d.get_str("o").ok())
                            .filter(|o| Some(*o) != to)
                            .map(str::to_owned)
                            .collect();
                        if !ended.is_empty() {
                            let ids: Vec<String> = ended
                                .iter()
                                .map(|o| relation_id(relation, tenant, from, o))
                                .collect();
                            store
                                .relations
                                .delete_many(doc! { "_id": { "$in": ids }, "t": tenant })
                                .session(&mut *session)
                                .await?;
                        }
                        if let Some(to) = to {
                            let d = relation_doc(relation, tenant, from, to, &[]);
                            store
                                .relations
                                .replace_one(
                                    doc! { "_id": relation_id(relation, tenant, from, to), "t": tenant, "o": to },
                                    d,
                                )
                                .upsert(true)
                                .session(&mut *session)
                                .await?;
                        }
                        Ok(ended)
                    }
                    .boxed()
                },
            )
            .await
    }

    /// Every relation of `ids` along `relation`, in order, other ends
    /// after `after`, at most `limit`.
    async fn related_after(
        &self,
        tenant: &str,
        relation: Relation,
        direction: Direction,
        ids: &[String],
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<Related>> {
        if ids.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let (id, other) = ends(direction);
        let mut filter = doc! { "t": tenant, "r": RELATION.name(relation) };
        match ids {
            [one] => filter.insert(id, one),
            many => filter.insert(id, doc! { "$in": many }),
        };
        if let Some(after) = after {
            filter.insert(other, doc! { "$gt": after });
        }
        let mut find = self
            .relations
            .find(filter)
            .sort(doc! { id: 1, other: 1 })
            .projection(doc! { "_id": 0, id: 1, other: 1, "a": 1 });
        if limit < i64::MAX as usize {
            find = find.limit(limit as i64);
        }
        let found: Vec<Document> = read_all(find).await?;
        let index: HashMap<&str, usize> = ids
            .iter()
            .enumerate()
            .rev()
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        found
            .iter()
            .map(|d| {
                let corrupt = || StoreError::corrupt("relations", "a relation without its ends");
                let of = d.get_str(id).ok().and_then(|i| index.get(i));
                Ok(Related {
                    of: *of.ok_or_else(corrupt)?,
                    other: d.get_str(other).map_err(|_| corrupt())?.to_owned(),
                    attrs: attrs_of(d),
                })
            })
            .collect()
    }

    /// The relations of each of `ids` with those of `others` that stand,
    /// by id then in the order of `others`, read by `_id`.
    async fn related_among(
        &self,
        tenant: &str,
        relation: Relation,
        direction: Direction,
        ids: &[String],
        others: &[String],
    ) -> StoreResult<Vec<Related>> {
        if ids.is_empty() || others.is_empty() {
            return Ok(Vec::new());
        }
        let pairs: Vec<(usize, &String, String)> = ids
            .iter()
            .enumerate()
            .flat_map(|(of, id)| {
                others.iter().map(move |other| {
                    let key = match direction {
                        Direction::Out => relation_id(relation, tenant, id, other),
                        Direction::In => relation_id(relation, tenant, other, id),
                    };
                    (of, other, key)
                })
            })
            .collect();
        let keys: Vec<&str> = pairs.iter().map(|(_, _, key)| key.as_str()).collect();
        // With the shard key where it is one value (`In` from one id: the
        // other end is that id), so a sharded cluster reads one shard.
        let mut among = doc! { "_id": { "$in": &keys }, "t": tenant };
        if let (Direction::In, [id]) = (direction, ids) {
            among.insert("o", id);
        }
        let found: Vec<Document> =
            read_all(self.relations.find(among).projection(doc! { "a": 1 })).await?;
        let mut by_id: HashMap<&str, Vec<u8>> = found
            .iter()
            .filter_map(|d| Some((d.get_str("_id").ok()?, attrs_of(d))))
            .collect();
        Ok(pairs
            .iter()
            .filter_map(|(of, other, key)| {
                Some(Related {
                    of: *of,
                    other: (*other).clone(),
                    attrs: by_id.remove(key.as_str())?,
                })
            })
            .collect())
    }

    /// Moves the relations earlier versions kept elsewhere into
    /// `relations`, and groups' kinds into the records, once. A move cut
    /// short is made again: what it moved already is kept.
    pub(super) async fn migrate_relations(&self) -> StoreResult<()> {
        let noted = self.noted_version(RELATIONS_VERSION_ID).await?;
        if noted >= RELATIONS_VERSION {
            return Ok(());
        }
        let mut moved = Vec::new();
        let field = |d: &Document, name: &str, collection: &str| -> StoreResult<String> {
            d.get_str(name).map(str::to_owned).map_err(|_| {
                StoreError::corrupt(
                    format_args!("{collection}/{:?}", d.get("_id")),
                    format_args!("no {name}"),
                )
            })
        };
        for d in self.earlier("edges").await? {
            let kind = code_of(&EDGE_KIND, "edges", &d, "kind")?;
            let (tenant, from, to) = (
                field(&d, "tenant", "edges")?,
                field(&d, "from", "edges")?,
                field(&d, "to", "edges")?,
            );
            moved.push(relation_doc(Relation::Edge(kind), &tenant, &from, &to, &[]));
        }
        for d in self.earlier("memberships").await? {
            let (tenant, group, user) = (
                field(&d, "tenant", "memberships")?,
                field(&d, "groupId", "memberships")?,
                field(&d, "userId", "memberships")?,
            );
            let kind = code_of(&GROUP_KIND, "memberships", &d, "kind")?;
            let role = match d.contains_key("role") {
                true => code_of(&ROLE, "memberships", &d, "role")?,
                false => MembershipRole::Member,
            };
            let attrs = membership_attrs(kind, role, d.get_i64("since").unwrap_or(0));
            moved.push(relation_doc(
                Relation::Member,
                &tenant,
                &user,
                &group,
                &attrs,
            ));
        }
        for d in self.earlier("assignments").await? {
            let (tenant, user, ref_id) = (
                field(&d, "tenant", "assignments")?,
                field(&d, "userId", "assignments")?,
                field(&d, "refId", "assignments")?,
            );
            moved.push(relation_doc(
                Relation::Assigned,
                &tenant,
                &user,
                &ref_id,
                &[],
            ));
        }
        for d in self.earlier("likes").await? {
            let (tenant, user) = (field(&d, "tenant", "likes")?, field(&d, "userId", "likes")?);
            let action = d.get_object_id("actionId").map_err(|_| {
                StoreError::corrupt(format_args!("likes/{:?}", d.get("_id")), "no actionId")
            })?;
            let relation = Relation::Likes;
            moved.push(relation_doc(
                relation,
                &tenant,
                &user,
                &action.to_hex(),
                &[],
            ));
        }
        let supervised = doc! { "supervisorId": { "$exists": true } };
        for d in read_all(self.users.find(supervised.clone())).await? {
            let (tenant, user, supervisor) = (
                field(&d, "tenant", "users")?,
                field(&d, "userId", "users")?,
                field(&d, "supervisorId", "users")?,
            );
            let relation = Relation::ReportsTo;
            moved.push(relation_doc(relation, &tenant, &user, &supervisor, &[]));
        }
        let count = moved.len();
        upsert_all(
            &self.db,
            "relations",
            moved.into_iter().map(keep_relation).collect(),
        )
        .await?;
        let mut kinds = Vec::new();
        let with_kind = doc! { "kind": { "$exists": true } };
        let groups = self.db.collection::<Document>("groups");
        for d in read_all(groups.find(with_kind)).await? {
            let (tenant, group) = (
                field(&d, "tenant", "groups")?,
                field(&d, "groupId", "groups")?,
            );
            let kind = code_of(&GROUP_KIND, "groups", &d, "kind")?;
            let body = Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![GROUP_KIND.byte(kind)],
            };
            kinds.push(doc! {
                "q": { "_id": record_id(RecordKind::Group, &tenant, &group) },
                "u": { "$setOnInsert": { "v": 1_i64, "body": body } },
                "upsert": true,
            });
        }
        upsert_all(&self.db, "records", kinds).await?;
        self.users
            .update_many(supervised, doc! { "$unset": { "supervisorId": "" } })
            .await
            .map_err(db_err)?;
        for earlier in ["edges", "memberships", "assignments", "groups", "likes"] {
            self.db
                .collection::<Document>(earlier)
                .drop()
                .await
                .map_err(db_err)?;
        }
        self.note_version(RELATIONS_VERSION_ID, RELATIONS_VERSION)
            .await?;
        if count > 0 {
            tracing::info!(moved = count, "graph documents moved to relations");
        }
        Ok(())
    }

    /// Every document of an earlier collection.
    pub(super) async fn earlier(&self, collection: &str) -> StoreResult<Vec<Document>> {
        self.db
            .collection::<Document>(collection)
            .find(doc! {})
            .await
            .map_err(db_err)?
            .try_collect()
            .await
            .map_err(db_err)
    }
}
