//! MongoDB: actions, their scopes, slices by ref and renamed refs.

use async_trait::async_trait;
use bson::{doc, DateTime, Document};
use futures_util::FutureExt;
use mongodb::options::ReturnDocument;

use crate::model::{Action, FanOutState, FeedItem, Millis, ObjectId, Position, Scope, User};
use crate::store::codes::RELATION;
use crate::store::{
    ActionStore, ErrorKind, FanOutJob, FeedRange, Inserted, Posted, Relation, Removal, StoreError,
    StoreResult,
};

use super::jobs::{requeue, JobDoc};
use super::queues::fence_of;
use super::{dated, db_err, is_duplicate, read_all, within, ActionDoc, MongoStore, TIE_SLACK};

/// How many times an insert under a foreign id is tried when the id is
/// taken but its action cannot be read (deleted meanwhile).
const FOREIGN_ATTEMPTS: usize = 3;

impl MongoStore {
    /// Positions (`conducted`, id) of the actions matching `filter`, newest
    /// first (oldest first when `ascending`), at most `limit`.
    async fn outbox_positions(
        &self,
        filter: Document,
        ascending: bool,
        limit: usize,
    ) -> StoreResult<Vec<Posted>> {
        let direction = if ascending { 1 } else { -1 };
        let docs: Vec<Document> = read_all(
            self.actions
                .clone_with_type::<Document>()
                .find(filter)
                .sort(doc! { "conducted": direction, "_id": direction })
                .limit(i64::try_from(limit).unwrap_or(i64::MAX))
                .projection(doc! { "_id": 1, "conducted": 1, "actorId": 1 }),
        )
        .await?;
        Ok(docs
            .into_iter()
            .filter_map(|d| {
                Some(Posted {
                    position: Position {
                        relevancy: d.get_datetime("conducted").ok()?.timestamp_millis(),
                        action_id: d.get_object_id("_id").ok()?,
                    },
                    actor: d.get_str("actorId").ok()?.to_owned(),
                })
            })
            .collect())
    }

    /// A range of the actions `all` selects, newest first by `conducted`
    /// then id: an outbox read (`all` names the actor, the group or the
    /// named reader). As a feed page: one range on `conducted`, read a
    /// little past the limit, cut exactly here; the exact keyset only when
    /// more actions share a boundary millisecond than the slack covers.
    pub(super) async fn ranked_actions(
        &self,
        all: Document,
        range: FeedRange,
    ) -> StoreResult<Vec<Posted>> {
        let range = dated(range);
        let mut conducted = Document::new();
        if let Some(p) = range.newer_than {
            conducted.insert("$gt", DateTime::from_millis(p.relevancy.saturating_sub(1)));
        }
        if let Some(p) = range.older_than {
            conducted.insert("$lt", DateTime::from_millis(p.relevancy.saturating_add(1)));
        }
        let mut filter = all.clone();
        if !conducted.is_empty() {
            filter.insert("conducted", conducted);
        }
        let slack =
            TIE_SLACK * (range.older_than.is_some() as usize + range.newer_than.is_some() as usize);
        let fetch = range.limit.saturating_add(slack);
        let in_range = |p: &Posted| range.holds(p.position);
        let read = self
            .outbox_positions(filter, range.from_oldest, fetch)
            .await?;
        let cut_short = read.len() == fetch;
        let mut posted: Vec<Posted> = read.into_iter().filter(in_range).collect();
        if posted.len() < range.limit && cut_short {
            let exact = within(all, ("conducted", "_id"), &range);
            posted = self
                .outbox_positions(exact, range.from_oldest, range.limit)
                .await?;
        }
        posted.truncate(range.limit);
        if range.from_oldest {
            posted.reverse();
        }
        Ok(posted)
    }

    /// Stores an action and, unless it is done, its fan-out job, in one
    /// transaction: none without the other.
    async fn try_insert_action(
        &self,
        record: &ActionDoc,
        job: Option<&JobDoc>,
    ) -> mongodb::error::Result<()> {
        let Some(job) = job else {
            return self.actions.insert_one(record).await.map(|_| ());
        };
        let mut session = self.db.client().start_session().await?;
        session
            .start_transaction()
            .and_run((self, record, job), |session, (store, record, job)| {
                async move {
                    store
                        .actions
                        .insert_one(*record)
                        .session(&mut *session)
                        .await?;
                    store.jobs.insert_one(*job).session(&mut *session).await?;
                    Ok(())
                }
                .boxed()
            })
            .await
    }

    /// The action `action`'s actor recorded under its foreign id, if any.
    async fn under_foreign_id(&self, action: &Action) -> StoreResult<Option<Action>> {
        let Some(foreign) = &action.foreign else {
            return Ok(None);
        };
        let filter = doc! {
            "tenant": &action.tenant,
            "actorId": &action.actor_id,
            "foreign.id": &foreign.id,
        };
        let found = self.actions.find_one(filter).await.map_err(db_err)?;
        Ok(found.map(Action::from))
    }

    pub(super) async fn find_action(
        &self,
        tenant: &str,
        id: ObjectId,
    ) -> StoreResult<Option<Action>> {
        Ok(self
            .actions
            .find_one(doc! { "_id": id, "tenant": tenant })
            .await
            .map_err(db_err)?
            .map(Action::from))
    }
}

#[async_trait]
impl ActionStore for MongoStore {
    async fn insert_action(&self, action: &Action) -> StoreResult<Inserted> {
        // A foreign id is held unique by the `foreign` index: an insert
        // under one taken answers the action that took it. One taken by an
        // action deleted since is free again; the insert is tried once
        // more then.
        let record = ActionDoc::from(action);
        let job = match action.fan_out.state {
            FanOutState::Done => None,
            _ => Some(JobDoc::new(
                &FanOutJob::of(&action.tenant, action.id)?,
                Millis::MIN,
                None,
            )),
        };
        for _ in 0..FOREIGN_ATTEMPTS {
            match self.try_insert_action(&record, job.as_ref()).await {
                Err(err) if is_duplicate(&err) => {
                    // Under its id (a retry of a request whose first
                    // attempt stored it), or under its foreign id.
                    if let Some(existing) = self.find_action(&action.tenant, action.id).await? {
                        return Ok(Inserted::Existing(Box::new(existing)));
                    }
                    if let Some(existing) = self.under_foreign_id(action).await? {
                        return Ok(Inserted::Existing(Box::new(existing)));
                    }
                    if action.foreign.is_none() {
                        return Err(db_err(err));
                    }
                }
                Err(err) => return Err(db_err(err)),
                Ok(()) => {
                    self.note_user(&action.tenant, &User::unnamed(&action.actor_id))
                        .await?;
                    return Ok(Inserted::New);
                }
            }
        }
        Err(StoreError::new(
            ErrorKind::Internal,
            format!(
                "the foreign id of action {} was taken and freed {FOREIGN_ATTEMPTS} times in a row",
                action.id
            ),
        ))
    }

    async fn foreign_actions(
        &self,
        tenant: &str,
        under: &[(String, String)],
    ) -> StoreResult<Vec<Action>> {
        if under.is_empty() {
            return Ok(Vec::new());
        }
        let each: Vec<Document> = under
            .iter()
            .map(|(actor, foreign)| doc! { "actorId": actor, "foreign.id": foreign })
            .collect();
        let docs: Vec<ActionDoc> =
            read_all(self.actions.find(doc! { "tenant": tenant, "$or": each })).await?;
        Ok(docs.into_iter().map(Action::from).collect())
    }

    async fn get_actions(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<Vec<Action>> {
        let docs: Vec<ActionDoc> = read_all(
            self.actions
                .find(doc! { "tenant": tenant, "_id": { "$in": ids } }),
        )
        .await?;
        Ok(docs.into_iter().map(Action::from).collect())
    }

    async fn remove_action(
        &self,
        tenant: &str,
        id: ObjectId,
        removal: Removal,
    ) -> StoreResult<Vec<FeedItem>> {
        // Copies first, then the action, then its items (see `Removal`).
        self.uncopy(tenant, &[id]).await?;
        let action = doc! { "_id": id, "tenant": tenant };
        let found = if removal.deletes() {
            let deleted = self.actions.delete_one(action).await.map_err(db_err)?;
            deleted.deleted_count
        } else {
            let hidden = doc! { "$set": { "hidden": true } };
            let updated = self
                .actions
                .update_one(action, hidden)
                .await
                .map_err(db_err)?;
            updated.matched_count
        };
        if found == 0 {
            return Err(Removal::not_found(id));
        }
        if removal.deletes() {
            let reactions = doc! { "tenant": tenant, "actionId": id };
            let comments = self.comments.delete_many(reactions.clone());
            comments.await.map_err(db_err)?;
            let discussions = self.discussions.delete_many(reactions);
            discussions.await.map_err(db_err)?;
            let likes = doc! { "t": tenant, "r": RELATION.name(Relation::Likes), "o": id.to_hex() };
            self.relations.delete_many(likes).await.map_err(db_err)?;
        }
        self.layout.remove(tenant, None, &[id]).await
    }

    async fn set_action_scope(
        &self,
        tenant: &str,
        id: ObjectId,
        scope: Scope,
        readers: &[String],
        scope_groups: &[String],
    ) -> StoreResult<Action> {
        let scope = bson::to_bson(&scope)
            .map_err(|e| StoreError::internal("MongoDB: cannot encode a scope", e))?;
        self.uncopy(tenant, &[id]).await?;
        let change = doc! {
            "$set": {
                "scope": scope,
                "readers": readers,
                "scopeGroups": scope_groups,
                "fanOut.state": "PENDING",
            },
            "$unset": { "fanOut.lockedUntil": "", "fanOut.worker": "" },
        };
        // Fanned out again under the new scope, in the same transaction: a
        // fan-out under way starts over (its worker finds its lease lost).
        // The fan-out's fence too: a batch under way lands wholly before
        // this or wholly after.
        let job = FanOutJob::of(tenant, id)?;
        let (filter, requeue) = requeue(&job);
        let (fence, raise) = fence_of(&job, DateTime::now().timestamp_millis());
        let mut session = self.db.client().start_session().await.map_err(db_err)?;
        let updated = session
            .start_transaction()
            .and_run(
                (self, &change, (&filter, &requeue), (&fence, &raise)),
                |session, (store, change, (filter, requeue), (fence, raise))| {
                    async move {
                        let updated = store
                            .actions
                            .find_one_and_update(
                                doc! { "_id": id, "tenant": tenant },
                                (*change).clone(),
                            )
                            .return_document(ReturnDocument::After)
                            .session(&mut *session)
                            .await?;
                        if updated.is_some() {
                            store
                                .jobs
                                .update_one((*filter).clone(), (*requeue).clone())
                                .upsert(true)
                                .session(&mut *session)
                                .await?;
                            store
                                .fences
                                .update_one((*fence).clone(), (*raise).clone())
                                .upsert(true)
                                .session(&mut *session)
                                .await?;
                        }
                        Ok(updated)
                    }
                    .boxed()
                },
            )
            .await
            .map_err(db_err)?;
        let updated = updated
            .map(Action::from)
            .ok_or_else(|| StoreError::not_found(format!("no action {id}")))?;
        self.recopy(tenant, &[id]).await?;
        Ok(updated)
    }

    async fn slice(
        &self,
        tenant: &str,
        ref_id: &str,
        before: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<ObjectId>> {
        let mut filter = doc! { "tenant": tenant, "refIds": ref_id };
        if let Some(before) = before {
            filter.insert("_id", doc! { "$lt": before });
        }
        let docs: Vec<Document> = read_all(
            self.actions
                .clone_with_type::<Document>()
                .find(filter)
                .sort(doc! { "_id": -1 })
                .limit(i64::try_from(limit).unwrap_or(i64::MAX))
                .projection(doc! { "_id": 1 }),
        )
        .await?;
        Ok(docs
            .into_iter()
            .filter_map(|d| d.get_object_id("_id").ok())
            .collect())
    }

    async fn expired(
        &self,
        now: Millis,
        item_ttl: Option<Millis>,
        limit: usize,
    ) -> StoreResult<Vec<(Millis, String, ObjectId)>> {
        let limit_i64 = i64::try_from(limit).unwrap_or(i64::MAX);
        let actions = self.actions.clone_with_type::<Document>();
        let due = |field: &'static str, until: Millis| {
            actions
                .find(doc! { field: { "$lte": DateTime::from_millis(until) } })
                .sort(doc! { field: 1 })
                .limit(limit_i64)
                .projection(doc! { "_id": 1, "tenant": 1, field: 1 })
        };
        let mut found: Vec<(Millis, String, ObjectId)> = Vec::new();
        let mut read = |docs: Vec<Document>, field: &str, offset: Millis| {
            found.extend(docs.iter().filter_map(|d| {
                let at = d.get_datetime(field).ok()?.timestamp_millis();
                let tenant = d.get_str("tenant").ok()?.to_owned();
                Some((
                    at.saturating_add(offset),
                    tenant,
                    d.get_object_id("_id").ok()?,
                ))
            }));
        };
        read(read_all(due("expireAt", now)).await?, "expireAt", 0);
        if let Some(ttl) = item_ttl {
            let docs = read_all(due("conducted", now.saturating_sub(ttl))).await?;
            read(docs, "conducted", ttl);
        }
        found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.2.bytes().cmp(&b.2.bytes())));
        // By its own expiry and by age: the sooner counts.
        let mut seen = std::collections::HashSet::new();
        found.retain(|(_, _, id)| seen.insert(*id));
        found.truncate(limit);
        Ok(found)
    }

    async fn rename_ref(
        &self,
        tenant: &str,
        ref_id: &str,
        name: &str,
        pairs: &[(String, String)],
    ) -> StoreResult<u64> {
        // One updateMany per id / name pair: the server rewrites its matches
        // in place, without shipping actions back and forth.
        let mut changed = 0;
        for (id_field, name_field) in pairs {
            let name_path = format!("descriptor.{name_field}");
            // With copies: which actions change, to copy them again after.
            let ids = if self.embeds {
                let named = doc! {
                    "tenant": tenant,
                    format!("descriptor.{id_field}"): ref_id,
                    name_path.clone(): { "$ne": name },
                };
                let docs = read_all(
                    self.actions
                        .clone_with_type::<bson::Document>()
                        .find(named)
                        .projection(doc! { "_id": 1 }),
                )
                .await?;
                let ids: Vec<ObjectId> = docs
                    .iter()
                    .filter_map(|d| d.get_object_id("_id").ok())
                    .collect();
                self.uncopy(tenant, &ids).await?;
                ids
            } else {
                Vec::new()
            };
            let result = self
                .actions
                .update_many(
                    doc! {
                        "tenant": tenant,
                        format!("descriptor.{id_field}"): ref_id,
                        name_path.clone(): { "$ne": name },
                    },
                    doc! { "$set": { name_path: name } },
                )
                .await
                .map_err(db_err)?;
            changed += result.modified_count;
            self.recopy(tenant, &ids).await?;
        }
        Ok(changed)
    }
}
