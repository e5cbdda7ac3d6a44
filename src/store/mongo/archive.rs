//! Export and import of a MongoDB store: each collection streamed through a
//! cursor (never loaded whole), and records written back with one bulk
//! `update` command of upserts per collection and batch, so that an import is
//! a handful of round trips per thousand records and a second import of the
//! same records replaces rather than duplicates.
//!
//! Imported documents are written in the shapes the API writes them (see the
//! collections in `mod.rs`): a hidden item sits at the tombstone relevancy.
//! Notification records (notice groups, inboxes, notice jobs) and queued
//! fan-outs, bumps and cleanups are written
//! last, one at a time through [`crate::store::NoticeStore`] and
//! [`crate::store::JobStore`] as every backend writes them (see [`crate::store::archive::import_notices`]):
//! groups and inboxes under their version (an insert, or where one is stored
//! already an insert refused, a read and a replace) rather than as upserts.

use std::collections::HashMap;
use std::future::{ready, Future};

use async_trait::async_trait;
use bson::{doc, Bson, Document};
use futures_util::stream::{self, BoxStream, Stream, StreamExt, TryStreamExt};

use super::bulk::upsert_all;
use super::layout::Stored;
use super::notices::group_of;
use super::records::{id_range, record_id, stored_of};
use super::relations::{attrs_of, keep_relation, relation_doc, replace_relation};
use super::{db_err, ActionDoc, CommentDoc, MongoStore, TOMBSTONE};
use crate::model::{Action, EdgeKind, FanOut, FanOutState, FeedItem, ObjectId};
use crate::store::archive::{import_notices, import_webhooks, relation_record, webhook_record};
use crate::store::codes::{GROUP_KIND, RECORD_KIND, RELATION};
use crate::store::records::{decode_inbox, SEPARATOR};
use crate::store::relations::membership_attrs;
use crate::store::{
    ActionStore, Archive, EdgeRecordKind, ErrorKind, ItemRecord, JobKind, NoticeJob, Record,
    RecordKind, Relation, StoreError, StoreResult, Unfollow,
};

/// A stream that runs `open` (a query) only when it is first polled, then
/// yields what the query's cursor yields: sections run one after the other,
/// each cursor opened when the one before is done.
fn section<'a, S>(
    open: impl Future<Output = StoreResult<S>> + Send + 'a,
) -> BoxStream<'a, StoreResult<Record>>
where
    S: Stream<Item = StoreResult<Record>> + Send + 'a,
{
    stream::once(open)
        .map(|opened| match opened {
            Ok(records) => records.boxed(),
            Err(err) => stream::once(ready(Err(err))).boxed(),
        })
        .flatten()
        .boxed()
}

impl MongoStore {
    /// The records of `kind` (of `tenant`, or of all) in key order, each
    /// made an archive's by `record` from its tenant, key and body.
    fn records_section<'a>(
        &'a self,
        kind: RecordKind,
        tenant: Option<&'a str>,
        record: impl Fn(&str, &str, &crate::store::Stored) -> StoreResult<Record> + Send + Sync + 'a,
    ) -> BoxStream<'a, StoreResult<Record>> {
        section(async move {
            let prefix = match tenant {
                Some(tenant) => record_id(kind, tenant, ""),
                None => format!("{}{SEPARATOR}", RECORD_KIND.name(kind)),
            };
            let cursor = self
                .records
                .find(id_range(&prefix))
                .sort(doc! { "_id": 1 })
                .await
                .map_err(db_err)?;
            Ok(cursor.map(move |found| {
                let found = found.map_err(db_err)?;
                let id = found.get_str("_id").unwrap_or_default();
                let mut parts = id.splitn(3, SEPARATOR).skip(1);
                let (tenant, key) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                record(tenant, key, &stored_of(&found)?)
            }))
        })
    }
}

fn corrupt(what: &str, doc: &Document) -> StoreError {
    StoreError::new(
        ErrorKind::Internal,
        format!(
            "MongoDB: corrupt {what} document {}",
            doc.get("_id").map(ToString::to_string).unwrap_or_default()
        ),
    )
}

fn field(doc: &Document, name: &str, what: &str) -> StoreResult<String> {
    doc.get_str(name)
        .map(str::to_owned)
        .map_err(|_| corrupt(what, doc))
}

fn tenant_filter(tenant: Option<&str>) -> Document {
    tenant.map_or_else(Document::new, |t| doc! { "tenant": t })
}

fn encode<T: serde::Serialize>(value: &T, what: &str) -> StoreResult<Document> {
    bson::to_document(value)
        .map_err(|e| StoreError::internal(format!("MongoDB: cannot encode {what}"), e))
}

/// One upsert statement of an `update` command.
fn upsert(q: Document, u: Document) -> Document {
    doc! { "q": q, "u": u, "upsert": true }
}

/// The statements of one import, by collection, in the order they are sent:
/// what others refer to first.
#[derive(Default)]
struct Statements {
    users: Vec<Document>,
    /// Each user's one supervisor: the others the target has go first.
    supervisors: Vec<Document>,
    relations: Vec<Document>,
    /// Groups' kinds.
    records: Vec<Document>,
    actions: Vec<Document>,
    comments: Vec<Document>,
    /// Readers' items, written by the timeline layout.
    feed_items: Vec<Stored>,
}

impl Statements {
    fn add(&mut self, record: &Record) -> StoreResult<()> {
        match record {
            Record::User { tenant, id, name } => {
                let name = name.as_deref().map_or(Bson::Null, Bson::from);
                self.users.push(upsert(
                    doc! { "tenant": tenant, "userId": id },
                    doc! { "$set": { "name": name } },
                ));
            }
            Record::Edge {
                tenant,
                kind,
                from,
                to,
            } => {
                let kind = match kind {
                    EdgeRecordKind::Follows => EdgeKind::Follows,
                    EdgeRecordKind::Friend => EdgeKind::Friend,
                    EdgeRecordKind::Group => EdgeKind::Group,
                };
                let mut pairs = vec![(from, to)];
                if kind == EdgeKind::Friend {
                    pairs.push((to, from));
                }
                for (from, to) in pairs {
                    let relation = relation_doc(Relation::Edge(kind), tenant, from, to, &[]);
                    self.relations.push(keep_relation(relation));
                }
                self.users.push(upsert(
                    doc! { "tenant": tenant, "userId": from },
                    doc! { "$setOnInsert": { "name": Bson::Null } },
                ));
            }
            Record::Membership {
                tenant,
                group,
                group_kind,
                user,
                role,
                since,
            } => {
                let body = bson::Binary {
                    subtype: bson::spec::BinarySubtype::Generic,
                    bytes: vec![GROUP_KIND.byte(*group_kind)],
                };
                self.records.push(upsert(
                    doc! { "_id": record_id(RecordKind::Group, tenant, group) },
                    doc! { "$set": { "body": body }, "$setOnInsert": { "v": 1_i64 } },
                ));
                let attrs = membership_attrs(*group_kind, *role, *since);
                let relation = relation_doc(Relation::Member, tenant, user, group, &attrs);
                self.relations.push(replace_relation(relation));
                self.users.push(upsert(
                    doc! { "tenant": tenant, "userId": user },
                    doc! { "$setOnInsert": { "name": Bson::Null } },
                ));
            }
            Record::Assignment {
                tenant,
                user,
                ref_id,
            } => {
                let relation = relation_doc(Relation::Assigned, tenant, user, ref_id, &[]);
                self.relations.push(keep_relation(relation));
            }
            Record::Supervisor {
                tenant,
                user,
                supervisor,
            } => {
                self.supervisors.push(doc! {
                    "t": tenant,
                    "r": RELATION.name(Relation::ReportsTo),
                    "f": user,
                    "o": { "$ne": supervisor },
                });
                let relation = relation_doc(Relation::ReportsTo, tenant, user, supervisor, &[]);
                self.relations.push(keep_relation(relation));
            }
            Record::Action { action } => {
                let mut action = action.clone();
                // A fan-out not done when the records were taken is queued
                // again after the records (`import_notices`), as after a
                // crash: a worker of this store runs it, and delivery skips
                // readers who have the item.
                if action.fan_out.state != FanOutState::Done {
                    action.fan_out = FanOut::pending();
                }
                let document = encode(&ActionDoc::from(&action), "an action")?;
                self.actions
                    .push(upsert(doc! { "_id": action.id }, document));
            }
            Record::Comment {
                tenant, comment, ..
            } => {
                // The action's counts come with the action's record; its
                // bump, if queued, is queued after the records
                // (`import_notices`).
                let document = encode(&CommentDoc::new(tenant, comment), "a comment")?;
                self.comments
                    .push(upsert(doc! { "_id": comment.id }, document));
            }
            Record::Like {
                tenant,
                action_id,
                user,
            } => {
                let action = action_id.to_hex();
                let relation = relation_doc(Relation::Likes, tenant, user, &action, &[]);
                self.relations.push(keep_relation(relation));
            }
            Record::FeedItem { tenant, item } => {
                let relevancy = if item.hidden {
                    TOMBSTONE
                } else {
                    item.relevancy
                };
                self.feed_items.push(Stored {
                    tenant: tenant.clone(),
                    hidden: item.hidden,
                    item: FeedItem {
                        owner: item.owner.clone(),
                        action_id: item.action_id,
                        relevancy,
                        reason: item.reason.clone(),
                        changed: item.changed,
                        copy: None,
                    },
                });
            }
            // Written after the statements, under their versions.
            Record::NoticeGroup { .. }
            | Record::Inbox { .. }
            | Record::NoticeJob { .. }
            | Record::Cleanup { .. }
            | Record::Webhook { .. }
            | Record::DeadDelivery { .. }
            | Record::WebhookDelivery { .. } => {}
        }
        Ok(())
    }
}

impl MongoStore {}

impl MongoStore {
    /// Readies the store for the actions of an archive, before anything
    /// of it is written. Their foreign ids are checked against the archive
    /// as a whole and the store: the archive may move one from an action
    /// to another, but not leave two actions under one, nor take one its
    /// actor recorded under an action it does not give (a record racing
    /// the import); either refuses the batch, nothing written. Then each
    /// action the store holds is cleared for its replacement: its copies,
    /// feed items, comments and discussion entries go (the archive's are
    /// written after), and its foreign id is let go (the archive's version
    /// takes its own, or none).
    async fn clear_replaced(&self, records: &[Record]) -> StoreResult<()> {
        let mut archived: HashMap<ObjectId, &Action> = HashMap::new();
        for record in records {
            if let Record::Action { action } = record {
                archived.insert(action.id, action);
            }
        }
        let mut tenants: Vec<&str> = archived.values().map(|a| a.tenant.as_str()).collect();
        tenants.sort_unstable();
        tenants.dedup();
        for tenant in tenants {
            let of_tenant: Vec<&Action> = archived
                .values()
                .filter(|a| a.tenant == tenant)
                .copied()
                .collect();
            let mut claimed: HashMap<(&str, &str), ObjectId> = HashMap::new();
            for action in &of_tenant {
                let Some(foreign) = &action.foreign else {
                    continue;
                };
                let key = (action.actor_id.as_str(), foreign.id.as_str());
                if let Some(other) = claimed.insert(key, action.id) {
                    return Err(StoreError::invalid(format!(
                        "actions {other} and {} of tenant {tenant:?}: the archive gives both \
                         foreignId {:?} of actor {:?}, and an actor's foreignId names one \
                         action: nothing of this batch was written",
                        action.id, foreign.id, action.actor_id
                    )));
                }
            }
            let under: Vec<(String, String)> = claimed
                .keys()
                .map(|(actor, id)| ((*actor).to_owned(), (*id).to_owned()))
                .collect();
            for holder in self.foreign_actions(tenant, &under).await? {
                let Some(foreign) = &holder.foreign else {
                    continue;
                };
                let key = (holder.actor_id.as_str(), foreign.id.as_str());
                match claimed.get(&key) {
                    Some(id) if *id != holder.id && !archived.contains_key(&holder.id) => {
                        return Err(StoreError::invalid(format!(
                            "action {id} of tenant {tenant:?}: its actor {:?} recorded \
                             foreignId {:?} as action {} since the archive was checked, and \
                             an actor's foreignId names one action: nothing of this batch was \
                             written; leave one of the two out (or give it another foreignId) \
                             and import again",
                            holder.actor_id, foreign.id, holder.id
                        )));
                    }
                    _ => {}
                }
            }
            let ids: Vec<ObjectId> = of_tenant.iter().map(|a| a.id).collect();
            let held: Vec<ObjectId> = self
                .get_actions(tenant, &ids)
                .await?
                .iter()
                .map(|a| a.id)
                .collect();
            if held.is_empty() {
                continue;
            }
            // Copies first, then what hangs off the actions (as a removal).
            self.uncopy(tenant, &held).await?;
            let of = doc! { "tenant": tenant, "actionId": { "$in": &held } };
            self.comments
                .delete_many(of.clone())
                .await
                .map_err(db_err)?;
            self.discussions.delete_many(of).await.map_err(db_err)?;
            self.layout.remove(tenant, None, &held).await?;
            self.actions
                .update_many(
                    doc! { "_id": { "$in": &held }, "tenant": tenant },
                    doc! { "$unset": { "foreign": "" } },
                )
                .await
                .map_err(db_err)?;
        }
        Ok(())
    }
}

#[async_trait]
impl Archive for MongoStore {
    fn export<'a>(&'a self, tenant: Option<&'a str>) -> BoxStream<'a, StoreResult<Record>> {
        let users = section(async move {
            let cursor = self
                .users
                .find(tenant_filter(tenant))
                .sort(doc! { "tenant": 1, "userId": 1 })
                .await
                .map_err(db_err)?;
            Ok(cursor.map(|found| {
                let doc = found.map_err(db_err)?;
                Ok(Record::User {
                    tenant: field(&doc, "tenant", "user")?,
                    id: field(&doc, "userId", "user")?,
                    name: doc.get_str("name").ok().map(str::to_owned),
                })
            }))
        });
        // One relation after another, in the order records are listed.
        let relations_of = move |relation: Relation| {
            section(async move {
                let mut filter = tenant.map_or_else(Document::new, |t| doc! { "t": t });
                filter.insert("r", RELATION.name(relation));
                let cursor = self
                    .relations
                    .find(filter)
                    .sort(doc! { "t": 1, "r": 1, "f": 1, "o": 1 })
                    .await
                    .map_err(db_err)?;
                Ok(cursor.filter_map(move |found| {
                    ready(
                        (|| {
                            let doc = found.map_err(db_err)?;
                            relation_record(
                                relation,
                                field(&doc, "t", "relation")?,
                                field(&doc, "f", "relation")?,
                                field(&doc, "o", "relation")?,
                                &attrs_of(&doc),
                            )
                        })()
                        .transpose(),
                    )
                }))
            })
        };
        // Likes refer to actions: they follow the comments.
        let relations = stream::iter(Relation::ALL)
            .filter(|r| ready(*r != Relation::Likes))
            .flat_map(relations_of)
            .boxed();
        let likes = relations_of(Relation::Likes);
        let actions = section(async move {
            let cursor = self
                .actions
                .find(tenant_filter(tenant))
                .sort(doc! { "_id": 1 })
                .await
                .map_err(db_err)?;
            Ok(cursor.map(|found| {
                Ok(Record::Action {
                    action: found.map_err(db_err)?.into(),
                })
            }))
        });
        let comments = section(async move {
            let cursor = self
                .comments
                .find(tenant_filter(tenant))
                .sort(doc! { "tenant": 1, "actionId": 1, "_id": 1 })
                .await
                .map_err(db_err)?;
            // Queued or held by a worker: either way still to do.
            let mut queued = std::collections::HashSet::new();
            let mut bumps = self.jobs_of(JobKind::Bump, tenant).await?;
            while let Some(job) = bumps.next().await {
                let job = job.map_err(db_err)?.into_job()?;
                queued.insert((job.tenant, job.key));
            }
            Ok(cursor.map(move |found| {
                let doc = found.map_err(db_err)?;
                let bump_queued = queued.contains(&(doc.tenant.clone(), doc.id.to_hex()));
                Ok(Record::Comment {
                    tenant: doc.tenant.clone(),
                    comment: doc.into_comment(),
                    bump_queued,
                })
            }))
        });
        let feed_items = section(async move {
            let items = self.layout.export(tenant).await?;
            Ok(items.map_ok(|stored| {
                let hidden = stored.hidden;
                let item = ItemRecord {
                    hidden,
                    ..ItemRecord::visible(stored.item)
                };
                Record::FeedItem {
                    tenant: stored.tenant,
                    item,
                }
            }))
        });
        let notice_groups = section(async move {
            let cursor = self
                .notice_groups
                .find(tenant_filter(tenant))
                .sort(doc! { "tenant": 1, "owner": 1, "key": 1 })
                .await
                .map_err(db_err)?;
            Ok(cursor.map(|found| {
                Ok(Record::NoticeGroup {
                    group: group_of(found.map_err(db_err)?)?,
                })
            }))
        });
        let inboxes = self.records_section(RecordKind::Inbox, tenant, |tenant, owner, stored| {
            Ok(Record::Inbox {
                inbox: decode_inbox(stored, tenant, owner)?,
            })
        });
        let notice_jobs = section(async move {
            let cursor = self.jobs_of(JobKind::Notice, tenant).await?;
            // Waiting or held by a worker: either way still to do.
            Ok(cursor.map(|found| {
                let job = found.map_err(db_err)?.into_job()?;
                Ok(Record::NoticeJob {
                    job: NoticeJob::of_job(&job)?,
                })
            }))
        });
        let cleanups = section(async move {
            let cursor = self.jobs_of(JobKind::Cleanup, tenant).await?;
            Ok(cursor.map(|found| {
                let job = found.map_err(db_err)?.into_job()?;
                Ok(Record::Cleanup {
                    unfollow: Unfollow::of_job(&job)?,
                })
            }))
        });
        let kept = |kind| {
            self.records_section(kind, tenant, move |t, key, stored| {
                webhook_record(kind, t, key, stored)
            })
        };
        let (webhooks, dead_deliveries) =
            (kept(RecordKind::Webhook), kept(RecordKind::DeadDelivery));
        let webhook_deliveries = section(async move {
            let cursor = self.jobs_of(JobKind::Webhook, tenant).await?;
            Ok(cursor.map(|found| {
                let job = found.map_err(db_err)?.into_job()?;
                Ok(Record::WebhookDelivery {
                    delivery: job.payload()?,
                    tenant: job.tenant,
                    queued: job.queued,
                })
            }))
        });
        stream::iter([
            users,
            relations,
            actions,
            comments,
            likes,
            feed_items,
            notice_groups,
            inboxes,
            notice_jobs,
            cleanups,
            webhooks,
            dead_deliveries,
            webhook_deliveries,
        ])
        .flatten()
        .boxed()
    }

    async fn import(&self, records: &[Record]) -> StoreResult<()> {
        let mut statements = Statements::default();
        for record in records {
            statements.add(record)?;
        }
        self.clear_replaced(records).await?;
        let Statements {
            users,
            supervisors,
            relations,
            records: group_kinds,
            actions,
            comments,
            feed_items,
        } = statements;
        for (collection, statements) in [("users", users), ("records", group_kinds)] {
            upsert_all(&self.db, collection, statements).await?;
        }
        for chunk in supervisors.chunks(1000) {
            self.relations
                .delete_many(doc! { "$or": chunk })
                .await
                .map_err(db_err)?;
        }
        for (collection, statements) in [
            ("relations", relations),
            ("actions", actions),
            ("comments", comments),
        ] {
            upsert_all(&self.db, collection, statements).await?;
        }
        self.layout.import(feed_items).await?;
        // Discussions are derived from comments, as `add_comment` keeps them.
        for record in records {
            if let Record::Comment {
                tenant, comment, ..
            } = record
            {
                self.note_discussion(tenant, comment).await?;
            }
        }
        import_notices(self, records).await?;
        import_webhooks(self, records).await
    }
}
