//! Export and import of the embedded store's records (see
//! [`crate::store::archive`]).
//!
//! Export reads on a blocking thread and hands records over a bounded channel,
//! so a large store streams in constant memory and a slow consumer slows the
//! reader rather than filling memory. Import writes each call's records in one
//! synced batch, then its notification records through the store's
//! [`crate::store::NoticeStore`] (see [`crate::store::archive::import_notices`]).

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use rocksdb::WriteBatch;
use tokio::sync::mpsc;

use super::actions::{action_lock, comment_key, foreign_entry};
use super::families::{ACTIONS, GRAPH, ITEMS, REACTIONS, RECORDS};
use super::keys::{self, graph as tag, reaction, ItemState, Key, Reader};
use super::records::put_first;
use super::relations::{delete_relation, put_relation, relation_prefix};
use super::users::{ensure_user_in, user_key, user_name, user_value};
use super::{records, EmbeddedStore, Inner};
use crate::model::{EdgeKind, ObjectId, Reason, ReasonKind};
use crate::store::archive::relation_record;
use crate::store::archive::{import_notices, import_webhooks, webhook_record};
use crate::store::codes::{GROUP_KIND, RECORD_KIND};
use crate::store::records::decode_inbox;
use crate::store::relations::membership_attrs;
use crate::store::{
    Archive, Direction, EdgeRecordKind, ErrorKind, ItemRecord, JobKind, NoticeJob, Record,
    RecordKind, Relation, StoreError, StoreResult, Unfollow,
};

/// Records in flight between the reading thread and the consumer.
const CHANNEL: usize = 1024;

/// The prefix of a family's keys for one tenant (after `tag`, if any), or of
/// all its keys.
fn tenant_prefix(tag: Option<u8>, tenant: Option<&str>) -> Vec<u8> {
    let mut key = match tag {
        Some(t) => Key::tag(t),
        None => Key::new(),
    };
    if let Some(tenant) = tenant {
        key = key.str(tenant);
    }
    key.into_vec()
}

/// Sends one record; `false` once the consumer is gone.
type Send<'a> = &'a mut dyn FnMut(Record) -> bool;

impl Inner {
    /// Every relation of one kind (of one tenant, or all), as the records
    /// that carry it.
    fn export_relations(
        &self,
        relation: Relation,
        tenant: Option<&str>,
        emit: &mut dyn FnMut(Record) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let prefix = relation_prefix(Direction::Out, relation);
        let prefix = match tenant {
            Some(tenant) => prefix.str(tenant),
            None => prefix,
        }
        .into_vec();
        self.scan_prefix(GRAPH, &prefix, &prefix, usize::MAX, |k, v| {
            let mut r = Reader(&k[2..]);
            let (tenant, from, to) = (
                r.str()?.to_owned(),
                r.str()?.to_owned(),
                r.last()?.to_owned(),
            );
            match relation_record(relation, tenant, from, to, v)? {
                Some(record) => emit(record),
                None => Ok(()),
            }
        })
    }

    fn export_all(&self, tenant: Option<&str>, send: Send<'_>) -> StoreResult<()> {
        let mut emit = |record: Record| {
            if send(record) {
                Ok(())
            } else {
                Err(StoreError::new(
                    ErrorKind::Internal,
                    "export stopped: nobody reads",
                ))
            }
        };
        let each = |inner: &Inner,
                    family: &str,
                    tag: Option<u8>,
                    f: &mut dyn FnMut(&mut Reader, &[u8]) -> StoreResult<()>| {
            let prefix = tenant_prefix(tag, tenant);
            inner.scan_prefix(family, &prefix, &prefix, usize::MAX, |k, v| {
                let mut r = Reader(&k[usize::from(tag.is_some())..]);
                f(&mut r, v)
            })
        };
        each(self, GRAPH, Some(tag::USER), &mut |r, v| {
            let (tenant, id) = (r.str()?.to_owned(), r.last()?.to_owned());
            let name = user_name(v, format_args!("graph/user {tenant}/{id}"))?;
            emit(Record::User { tenant, id, name })
        })?;
        // Likes refer to actions: they follow the comments.
        let graph = Relation::ALL.into_iter().filter(|r| *r != Relation::Likes);
        for relation in graph {
            self.export_relations(relation, tenant, &mut emit)?;
        }
        each(self, ACTIONS, None, &mut |_, v| {
            emit(Record::Action {
                action: keys::decode_record(v)?,
            })
        })?;
        each(self, REACTIONS, Some(reaction::COMMENT), &mut |r, v| {
            let tenant = r.str()?.to_owned();
            let comment: crate::model::Comment = keys::decode_record(v)?;
            let bump_queued = self.job_queued(JobKind::Bump, &tenant, &comment.id.to_hex())?;
            emit(Record::Comment {
                tenant,
                comment,
                bump_queued,
            })
        })?;
        self.export_relations(Relation::Likes, tenant, &mut emit)?;
        let mut key = Vec::with_capacity(64);
        each(self, ITEMS, None, &mut |r, v| {
            let tenant = r.str()?.to_owned();
            let id = r.oid()?;
            let owner = r.last()?.to_owned();
            let state = ItemState::decode(v)?;
            let entry = match state.hidden {
                false => self.entry(&mut key, &tenant, &owner, id, state.relevancy)?,
                true => None,
            };
            let (changed, reason) = match entry {
                Some(entry) => entry,
                // A hidden item keeps no reason; the action's actor stands in.
                _ => {
                    let actor = self
                        .action(&tenant, ObjectId::from_bytes(id))?
                        .map(|a| a.actor_id.clone())
                        .unwrap_or_default();
                    (state.changed, Reason::new(ReasonKind::Follows, actor))
                }
            };
            let item = ItemRecord {
                owner,
                action_id: ObjectId::from_bytes(id),
                relevancy: state.relevancy,
                reason,
                changed,
                hidden: state.hidden,
            };
            emit(Record::FeedItem { tenant, item })
        })?;
        // Groups and inboxes only: their id and position indexes follow from
        // them, and are rebuilt by the import's writes.
        each(self, GRAPH, Some(tag::NOTICE_GROUP), &mut |_, v| {
            emit(Record::NoticeGroup {
                group: keys::decode_record(v)?,
            })
        })?;
        let inboxes = RECORD_KIND.byte(RecordKind::Inbox);
        each(self, RECORDS, Some(inboxes), &mut |r, v| {
            let (tenant, owner) = (r.str()?, r.last()?);
            let stored = records::decode(v)?;
            emit(Record::Inbox {
                inbox: decode_inbox(&stored, tenant, owner)?,
            })
        })?;
        // Waiting or held by a worker: either way still to do.
        self.jobs_of(JobKind::Notice, tenant, &mut |job| {
            emit(Record::NoticeJob {
                job: NoticeJob::of_job(&job)?,
            })
        })?;
        self.jobs_of(JobKind::Cleanup, tenant, &mut |job| {
            emit(Record::Cleanup {
                unfollow: Unfollow::of_job(&job)?,
            })
        })?;
        for kind in [RecordKind::Webhook, RecordKind::DeadDelivery] {
            each(self, RECORDS, Some(RECORD_KIND.byte(kind)), &mut |r, v| {
                let (tenant, key) = (r.str()?, r.last()?);
                let stored = records::decode(v)?;
                emit(webhook_record(kind, tenant, key, &stored)?)
            })?;
        }
        self.jobs_of(JobKind::Webhook, tenant, &mut |job| {
            emit(Record::WebhookDelivery {
                delivery: job.payload()?,
                tenant: job.tenant,
                queued: job.queued,
            })
        })?;
        Ok(())
    }

    fn import(&self, records: &[Record]) -> StoreResult<()> {
        // The actions' locks and their foreign ids', which a record takes
        // too, held until the batch is written: a record racing the import
        // under a foreign id of the archive finds the imported action, or
        // the import finds the recorded one and refuses the batch.
        let mut locks = Vec::new();
        for record in records {
            if let Record::Action { action } = record {
                locks.push(action_lock(&action.tenant, action.id.bytes()));
                locks.extend(foreign_entry(action));
            }
        }
        let locked = self.lock(&locks);
        let mut batch = WriteBatch::default();
        let written = self.import_actions(&mut batch, records)?;
        let graph = self.cf(GRAPH);
        let families = self.item_families();
        let mut key = Vec::with_capacity(64);
        let mut value = Vec::with_capacity(64);
        for record in records {
            match record {
                Record::User { tenant, id, name } => {
                    batch.put_cf(graph, user_key(tenant, id), user_value(name.as_deref()));
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
                    let relation = Relation::Edge(kind);
                    put_relation(&mut batch, self, relation, tenant, (from, to), &[]);
                    if kind == EdgeKind::Friend {
                        put_relation(&mut batch, self, relation, tenant, (to, from), &[]);
                    }
                    ensure_user_in(&mut batch, self, tenant, from);
                }
                Record::Membership {
                    tenant,
                    group,
                    group_kind,
                    user,
                    role,
                    since,
                } => {
                    let kind = [GROUP_KIND.byte(*group_kind)];
                    put_first(&mut batch, self, RecordKind::Group, (tenant, group), &kind);
                    let attrs = membership_attrs(*group_kind, *role, *since);
                    put_relation(
                        &mut batch,
                        self,
                        Relation::Member,
                        tenant,
                        (user, group),
                        &attrs,
                    );
                    ensure_user_in(&mut batch, self, tenant, user);
                }
                Record::Assignment {
                    tenant,
                    user,
                    ref_id,
                } => {
                    put_relation(
                        &mut batch,
                        self,
                        Relation::Assigned,
                        tenant,
                        (user, ref_id),
                        &[],
                    );
                }
                Record::Supervisor {
                    tenant,
                    user,
                    supervisor,
                } => {
                    // One supervisor: the one the target had goes.
                    let had = self.supervisors(tenant, user)?;
                    for previous in had.iter().filter(|p| *p != supervisor) {
                        delete_relation(
                            &mut batch,
                            self,
                            Relation::ReportsTo,
                            tenant,
                            (user, previous),
                        );
                    }
                    let pair = (user.as_str(), supervisor.as_str());
                    put_relation(&mut batch, self, Relation::ReportsTo, tenant, pair, &[]);
                }
                // Written before the other records, by `import_actions`.
                Record::Action { .. } => {}
                Record::Comment {
                    tenant, comment, ..
                } => {
                    let (a, c) = (comment.action_id.bytes(), comment.id.bytes());
                    batch.put_cf(
                        self.cf(REACTIONS),
                        comment_key(tenant, a, c),
                        keys::encode_record(comment)?,
                    );
                    // Its bump, if queued, is queued after the records
                    // (`import_notices`).
                }
                Record::Like {
                    tenant,
                    action_id,
                    user,
                } => {
                    let pair = (user.as_str(), action_id.to_hex());
                    let pair = (pair.0, pair.1.as_str());
                    put_relation(&mut batch, self, Relation::Likes, tenant, pair, &[]);
                }
                Record::FeedItem { tenant, item } => {
                    let (o, id) = (item.owner.as_str(), item.action_id.bytes());
                    keys::item(&mut key, tenant, id, o);
                    // Replacing an item takes its old entries out first.
                    if let Some(old) = self.get(ITEMS, &key)? {
                        let old = ItemState::decode(&old)?;
                        Inner::drop_entries(&families, &mut batch, &mut key, tenant, o, id, &old);
                    }
                    let state = ItemState {
                        relevancy: item.relevancy,
                        changed: item.changed,
                        hidden: item.hidden,
                    };
                    let buffers = (&mut key, &mut value);
                    Inner::put_item(
                        &families,
                        &mut batch,
                        buffers,
                        tenant,
                        o,
                        id,
                        state,
                        &item.reason,
                    );
                }
                // Written after the batch, under their versions.
                Record::NoticeGroup { .. }
                | Record::Inbox { .. }
                | Record::NoticeJob { .. }
                | Record::Cleanup { .. }
                | Record::Webhook { .. }
                | Record::DeadDelivery { .. }
                | Record::WebhookDelivery { .. } => {}
            }
        }
        self.commit(batch)?;
        self.settle(written.into_values().collect(), &[]);
        drop(locked);
        // Discussions are derived from comments: each imported comment moves
        // its action up for its thread's participants, as a new one would.
        // The last one is synced, and with it those before.
        let comments: Vec<_> = records
            .iter()
            .filter_map(|r| match r {
                Record::Comment {
                    tenant, comment, ..
                } => Some((tenant, comment)),
                _ => None,
            })
            .collect();
        for (n, (tenant, comment)) in comments.iter().enumerate() {
            let _lock = self.lock(&[action_lock(tenant, comment.action_id.bytes())]);
            let mut batch = WriteBatch::default();
            self.note_discussion(&mut batch, tenant, comment)?;
            if n + 1 == comments.len() {
                self.commit(batch)?;
            } else {
                self.commit_unsynced(batch)?;
            }
        }
        for record in records {
            if let Record::User { tenant, id, .. } = record {
                self.profiles.forget(super::cache::profile_key(tenant, id));
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Archive for EmbeddedStore {
    fn export<'a>(&'a self, tenant: Option<&'a str>) -> BoxStream<'a, StoreResult<Record>> {
        let inner = match self.inner() {
            Ok(inner) => inner,
            Err(err) => return futures_util::stream::once(async { Err(err) }).boxed(),
        };
        let (tx, rx) = mpsc::channel(CHANNEL);
        let tenant = tenant.map(str::to_owned);
        tokio::task::spawn_blocking(move || {
            let mut send = |record: Record| tx.blocking_send(Ok(record)).is_ok();
            if let Err(err) = inner.export_all(tenant.as_deref(), &mut send) {
                // The consumer may be gone already; then nobody needs the error.
                let _ = tx.blocking_send(Err(err));
            }
        });
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) })
            .boxed()
    }

    async fn import(&self, records: &[Record]) -> StoreResult<()> {
        let batch = records.to_vec();
        self.blocking(move |db| db.import(&batch)).await?;
        import_notices(self, records).await?;
        import_webhooks(self, records).await
    }
}
