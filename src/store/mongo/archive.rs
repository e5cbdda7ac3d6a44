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

use std::future::{ready, Future};

use async_trait::async_trait;
use bson::{doc, Bson, Document};
use futures_util::stream::{self, BoxStream, Stream, StreamExt, TryStreamExt};

use super::bulk::upsert_all;
use super::graph::stored_role;
use super::layout::Stored;
use super::notices::group_of;
use super::records::{id_range, record_id, stored_of};
use super::{
    code_of, db_err, group_kind_name, kind_name, role_name, ActionDoc, CommentDoc, MongoStore,
    TOMBSTONE,
};
use crate::model::{EdgeKind, FanOut, FanOutState, FeedItem};
use crate::store::archive::import_notices;
use crate::store::codes::{EDGE_KIND, GROUP_KIND, RECORD_KIND};
use crate::store::records::{decode_inbox, SEPARATOR};
use crate::store::{
    Archive, EdgeRecordKind, ErrorKind, ItemRecord, JobKind, NoticeJob, Record, RecordKind,
    StoreError, StoreResult, Unfollow,
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
    edges: Vec<Document>,
    groups: Vec<Document>,
    memberships: Vec<Document>,
    assignments: Vec<Document>,
    actions: Vec<Document>,
    comments: Vec<Document>,
    likes: Vec<Document>,
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
                let (kind, both) = match kind {
                    EdgeRecordKind::Follows => (kind_name(EdgeKind::Follows), false),
                    EdgeRecordKind::Friend => (kind_name(EdgeKind::Friend), true),
                    EdgeRecordKind::Group => (kind_name(EdgeKind::Group), false),
                };
                let mut pairs = vec![(from, to)];
                if both {
                    pairs.push((to, from));
                }
                for (from, to) in pairs {
                    let edge = doc! { "tenant": tenant, "kind": kind, "from": from, "to": to };
                    self.edges.push(upsert(edge.clone(), edge));
                }
            }
            Record::Membership {
                tenant,
                group,
                group_kind,
                user,
                role,
                since,
            } => {
                let kind = group_kind_name(*group_kind);
                self.groups.push(upsert(
                    doc! { "tenant": tenant, "groupId": group },
                    doc! { "$set": { "kind": kind } },
                ));
                self.memberships.push(upsert(
                    doc! { "tenant": tenant, "groupId": group, "userId": user },
                    doc! { "$set": { "kind": kind, "role": role_name(*role), "since": since } },
                ));
            }
            Record::Assignment {
                tenant,
                user,
                ref_id,
            } => {
                let assignment = doc! { "tenant": tenant, "refId": ref_id, "userId": user };
                self.assignments
                    .push(upsert(assignment.clone(), assignment));
            }
            Record::Supervisor {
                tenant,
                user,
                supervisor,
            } => {
                self.users.push(upsert(
                    doc! { "tenant": tenant, "userId": user },
                    doc! { "$set": { "supervisorId": supervisor } },
                ));
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
                let like = doc! { "tenant": tenant, "actionId": action_id, "userId": user };
                self.likes.push(upsert(like.clone(), like));
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
            | Record::Cleanup { .. } => {}
        }
        Ok(())
    }
}

impl MongoStore {}

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
        let edges = section(async move {
            let cursor = self
                .edges
                .find(tenant_filter(tenant))
                .sort(doc! { "tenant": 1, "kind": 1, "from": 1, "to": 1 })
                .await
                .map_err(db_err)?;
            Ok(cursor.filter_map(|found| {
                ready(
                    (|| {
                        let doc = found.map_err(db_err)?;
                        let (from, to) = (field(&doc, "from", "edge")?, field(&doc, "to", "edge")?);
                        let kind = match code_of(&EDGE_KIND, "edges", &doc, "kind")? {
                            EdgeKind::Follows => EdgeRecordKind::Follows,
                            // Stored both ways: the pair once, from the smaller id.
                            EdgeKind::Friend if from < to => EdgeRecordKind::Friend,
                            EdgeKind::Friend => return Ok(None),
                            EdgeKind::Group => EdgeRecordKind::Group,
                        };
                        Ok(Some(Record::Edge {
                            tenant: field(&doc, "tenant", "edge")?,
                            kind,
                            from,
                            to,
                        }))
                    })()
                    .transpose(),
                )
            }))
        });
        let memberships = section(async move {
            let cursor = self
                .memberships
                .find(tenant_filter(tenant))
                .sort(doc! { "tenant": 1, "groupId": 1, "userId": 1 })
                .await
                .map_err(db_err)?;
            Ok(cursor.map(|found| {
                let doc = found.map_err(db_err)?;
                Ok(Record::Membership {
                    tenant: field(&doc, "tenant", "membership")?,
                    group: field(&doc, "groupId", "membership")?,
                    group_kind: code_of(&GROUP_KIND, "memberships", &doc, "kind")?,
                    user: field(&doc, "userId", "membership")?,
                    role: stored_role(&doc)?,
                    since: doc.get_i64("since").unwrap_or(0),
                })
            }))
        });
        let assignments = section(async move {
            let cursor = self
                .assignments
                .find(tenant_filter(tenant))
                .sort(doc! { "tenant": 1, "userId": 1, "refId": 1 })
                .await
                .map_err(db_err)?;
            Ok(cursor.map(|found| {
                let doc = found.map_err(db_err)?;
                Ok(Record::Assignment {
                    tenant: field(&doc, "tenant", "assignment")?,
                    user: field(&doc, "userId", "assignment")?,
                    ref_id: field(&doc, "refId", "assignment")?,
                })
            }))
        });
        let supervisors = section(async move {
            let mut filter = tenant_filter(tenant);
            filter.insert("supervisorId", doc! { "$exists": true });
            let cursor = self
                .users
                .find(filter)
                .sort(doc! { "tenant": 1, "userId": 1 })
                .await
                .map_err(db_err)?;
            Ok(cursor.map(|found| {
                let doc = found.map_err(db_err)?;
                Ok(Record::Supervisor {
                    tenant: field(&doc, "tenant", "user")?,
                    user: field(&doc, "userId", "user")?,
                    supervisor: field(&doc, "supervisorId", "user")?,
                })
            }))
        });
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
        let likes = section(async move {
            let cursor = self
                .likes
                .find(tenant_filter(tenant))
                .sort(doc! { "tenant": 1, "actionId": 1, "userId": 1 })
                .await
                .map_err(db_err)?;
            Ok(cursor.map(|found| {
                let doc = found.map_err(db_err)?;
                Ok(Record::Like {
                    tenant: field(&doc, "tenant", "like")?,
                    action_id: doc
                        .get_object_id("actionId")
                        .map_err(|_| corrupt("like", &doc))?,
                    user: field(&doc, "userId", "like")?,
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
        let inboxes = section(async move {
            let prefix = match tenant {
                Some(tenant) => record_id(RecordKind::Inbox, tenant, ""),
                None => format!("{}{SEPARATOR}", RECORD_KIND.name(RecordKind::Inbox)),
            };
            let cursor = self
                .records
                .find(id_range(&prefix))
                .sort(doc! { "_id": 1 })
                .await
                .map_err(db_err)?;
            Ok(cursor.map(|found| {
                let found = found.map_err(db_err)?;
                let id = found.get_str("_id").unwrap_or_default();
                let mut parts = id.splitn(3, SEPARATOR).skip(1);
                let (tenant, owner) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                Ok(Record::Inbox {
                    inbox: decode_inbox(&stored_of(&found)?, tenant, owner)?,
                })
            }))
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
        stream::iter([
            users,
            edges,
            memberships,
            assignments,
            supervisors,
            actions,
            comments,
            likes,
            feed_items,
            notice_groups,
            inboxes,
            notice_jobs,
            cleanups,
        ])
        .flatten()
        .boxed()
    }

    async fn import(&self, records: &[Record]) -> StoreResult<()> {
        let mut statements = Statements::default();
        for record in records {
            statements.add(record)?;
        }
        let Statements {
            users,
            edges,
            groups,
            memberships,
            assignments,
            actions,
            comments,
            likes,
            feed_items,
        } = statements;
        for (collection, statements) in [
            ("users", users),
            ("edges", edges),
            ("groups", groups),
            ("memberships", memberships),
            ("assignments", assignments),
            ("actions", actions),
            ("comments", comments),
            ("likes", likes),
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
        import_notices(self, records).await
    }
}
