//! The [`Store`] port over [`Inner`]'s blocking calls: writes (which may wait
//! for a sync) on tokio's blocking pool, reads bounded by a page in place.

use async_trait::async_trait;

use super::EmbeddedStore;
use crate::model::{Action, Comment, Counts, FeedItem, Millis, ObjectId, Position, Scope, User};
use crate::store::{
    ActionStore, Backend, DeliveryBatch, Existing, FeedRange, Inserted, Lease, Measure, QueueStore,
    Reaction, ReactionStore, Removal, Stats, Store, StoreResult, TimelineRead, TimelineStore,
    TimelineWrite, UserStore,
};

/// Owned copies of borrowed arguments, for work moved to the blocking pool.
macro_rules! owned {
    ($($name:ident),+) => { $(let $name = $name.to_owned();)+ };
}

#[async_trait]
impl Store for EmbeddedStore {
    fn backend(&self) -> Backend {
        Backend {
            name: "embedded",
            event_log: None,
        }
    }

    fn write_fault(&self) -> Option<String> {
        self.engine.fault()
    }

    async fn stats(&self, measure: Measure) -> StoreResult<Stats> {
        let footprint = match measure {
            Measure::Counters => None,
            Measure::Footprint => Some(self.blocking(|db| db.footprint()).await?),
        };
        Ok(Stats {
            counters: Vec::new(),
            footprint,
        })
    }
}

#[async_trait]
impl UserStore for EmbeddedStore {
    async fn put_user(&self, tenant: &str, user: &User, existing: Existing) -> StoreResult<()> {
        owned!(tenant, user);
        self.blocking(move |db| db.put_user(&tenant, &user, existing))
            .await
    }

    async fn get_users(&self, tenant: &str, ids: &[String]) -> StoreResult<Vec<User>> {
        self.inner()?.get_users(tenant, ids)
    }
}

#[async_trait]
impl ActionStore for EmbeddedStore {
    async fn insert_action(&self, action: &Action) -> StoreResult<Inserted> {
        owned!(action);
        self.blocking(move |db| db.insert_action(&action)).await
    }

    async fn get_actions(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<Vec<Action>> {
        self.inner()?.get_actions(tenant, ids)
    }

    async fn foreign_actions(
        &self,
        tenant: &str,
        under: &[(String, String)],
    ) -> StoreResult<Vec<Action>> {
        owned!(tenant, under);
        self.blocking(move |db| db.foreign_actions(&tenant, &under))
            .await
    }

    async fn remove_action(
        &self,
        tenant: &str,
        id: ObjectId,
        removal: Removal,
    ) -> StoreResult<Vec<FeedItem>> {
        owned!(tenant);
        self.blocking(move |db| db.remove_action(&tenant, id, removal))
            .await
    }

    async fn set_action_scope(
        &self,
        tenant: &str,
        id: ObjectId,
        scope: Scope,
        readers: &[String],
        scope_groups: &[String],
    ) -> StoreResult<Action> {
        owned!(tenant, readers, scope_groups);
        self.blocking(move |db| db.set_action_scope(&tenant, id, scope, &readers, &scope_groups))
            .await
    }

    async fn slice(
        &self,
        tenant: &str,
        ref_id: &str,
        before: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<ObjectId>> {
        self.inner()?.slice(tenant, ref_id, before, limit)
    }

    async fn expired(
        &self,
        now: Millis,
        item_ttl: Option<Millis>,
        limit: usize,
    ) -> StoreResult<Vec<(Millis, String, ObjectId)>> {
        self.blocking(move |db| db.expired(now, item_ttl, limit))
            .await
    }

    async fn rename_ref(
        &self,
        tenant: &str,
        ref_id: &str,
        name: &str,
        pairs: &[(String, String)],
    ) -> StoreResult<u64> {
        owned!(tenant, ref_id, name);
        let pairs = pairs.to_vec();
        self.blocking(move |db| db.rename_ref(&tenant, &ref_id, &name, &pairs))
            .await
    }
}

#[async_trait]
impl ReactionStore for EmbeddedStore {
    async fn react(&self, tenant: &str, reaction: Reaction<'_>) -> StoreResult<(bool, Counts)> {
        let tenant = tenant.to_owned();
        match reaction {
            Reaction::Comment(comment) => {
                let comment = comment.clone();
                let counts = self
                    .blocking(move |db| db.add_comment(&tenant, &comment))
                    .await?;
                Ok((true, counts))
            }
            Reaction::Like {
                action_id,
                user,
                on,
                at,
            } => {
                let user = user.to_owned();
                self.blocking(move |db| db.set_like(&tenant, action_id, &user, on, at))
                    .await
            }
        }
    }

    async fn comments(
        &self,
        tenant: &str,
        action_id: ObjectId,
        after: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<Comment>> {
        self.inner()?.comments(tenant, action_id, after, limit)
    }

    async fn discussions(
        &self,
        tenant: &str,
        user: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>> {
        self.inner()?.discussions(tenant, user, range)
    }
}

#[async_trait]
impl QueueStore for EmbeddedStore {
    async fn deliver(
        &self,
        now: Millis,
        batches: &[DeliveryBatch],
    ) -> StoreResult<Vec<StoreResult<Vec<FeedItem>>>> {
        owned!(batches);
        self.blocking(move |db| db.deliver(now, &batches)).await
    }

    async fn clean(&self, lease: &Lease, named: &[ObjectId]) -> StoreResult<Vec<FeedItem>> {
        let (lease, named) = (lease.clone(), named.to_vec());
        self.blocking(move |db| db.clean(&lease, &named)).await
    }
}

#[async_trait]
impl TimelineStore for EmbeddedStore {
    async fn timeline(
        &self,
        tenant: &str,
        owner: &str,
        read: TimelineRead,
    ) -> StoreResult<Vec<FeedItem>> {
        match read {
            TimelineRead::Range(range) => self.inner()?.feed_page(tenant, owner, range),
            TimelineRead::ChangedAfter { after, limit } => {
                self.inner()?.feed_changes(tenant, owner, after, limit)
            }
            TimelineRead::Item(id) => Ok(self
                .inner()?
                .feed_item(tenant, owner, id)?
                .into_iter()
                .collect()),
        }
    }

    async fn write_timeline(
        &self,
        tenant: &str,
        write: TimelineWrite<'_>,
    ) -> StoreResult<Vec<FeedItem>> {
        let tenant = tenant.to_owned();
        match write {
            TimelineWrite::Backfill {
                owner,
                items,
                derived,
            } => {
                let (owner, items) = (owner.to_owned(), items.to_vec());
                self.blocking(move |db| db.backfill(&tenant, &owner, &items, derived))
                    .await
            }
            TimelineWrite::Raise {
                action_id,
                now,
                raises,
            } => {
                let raises = raises.to_vec();
                self.blocking(move |db| db.raise(&tenant, action_id, now, &raises))
                    .await
            }
            TimelineWrite::Hide { owner, action_id } => {
                let owner = owner.to_owned();
                self.blocking(move |db| db.hide_feed_item(&tenant, &owner, action_id))
                    .await
                    .map(|hidden| hidden.into_iter().collect())
            }
        }
    }

    async fn materialised(
        &self,
        tenant: &str,
        owner: &str,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>> {
        if action_ids.is_empty() {
            return Ok(Vec::new());
        }
        self.inner()?.materialised(tenant, owner, action_ids)
    }
}

impl EmbeddedStore {
    /// Adds many follow edges `(follower, followed)` in one synced batch: bulk
    /// loading (the benchmark's follow graphs), where a commit per edge would
    /// spend its time in syncs. Same relations as [`Graph::set_edge`](crate::store::Graph::set_edge): both
    /// directions, and the follower noted as a user.
    pub async fn follow_many(&self, tenant: &str, edges: Vec<(String, String)>) -> StoreResult<()> {
        owned!(tenant);
        self.blocking(move |db| db.follow_many(&tenant, &edges))
            .await
    }
}
