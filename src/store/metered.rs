//! A store wrapper that counts calls per operation, for `/metrics` and for tests
//! that prove a feed page costs a fixed number of round trips.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use prometheus_client::metrics::histogram::Histogram;

use async_trait::async_trait;
use futures_util::stream::BoxStream;

use crate::metrics::Metrics;

use super::jobs::{Job, JobBacklog, JobKind, JobStore, Lease};
use super::{
    ActionStore, Archive, Backfill, BumpClaim, Claim, Cut, Delivery, Direction, FeedRange,
    GraphStore, GroupFeedStore, JoinOutcome, NoticeStore, Outbox, Posted, QueueStore,
    ReactionStore, Record, River, RiverStore, SourceStore, Store, StoreResult, TimelineStore,
    Unfollow, UnfollowClaim,
};
use crate::model::{
    Action, Comment, Counts, EdgeKind, FeedItem, Group, Inbox, Membership, MembershipRole, Millis,
    NoticeCounts, NoticeGroup, NoticeRange, ObjectId, Position, Scope, Stamp, User,
};

macro_rules! ops {
    ($($op:ident),+ $(,)?) => {
        /// The store operations that are counted.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Op { $($op,)+ }

        impl Op {
            pub const ALL: &'static [Op] = &[$(Op::$op,)+];

            pub fn name(self) -> &'static str {
                match self { $(Op::$op => stringify!($op),)+ }
            }
        }
    };
}

ops!(
    upsert_user,
    ensure_user,
    get_users,
    set_edge,
    edges,
    join_group,
    leave_group,
    group_members,
    memberships,
    set_assignment,
    assignees,
    assignments,
    set_supervisor,
    supervisor,
    supervisees,
    insert_action,
    get_actions,
    hide_action,
    delete_action,
    set_action_scope,
    slice,
    outbox,
    expired,
    outboxes,
    members_among,
    post_to_group,
    group_feed,
    notice_group,
    notice_groups,
    put_notice_group,
    notice_page,
    notice_counts,
    trim_notices,
    inbox,
    put_inbox,
    meta,
    set_meta,
    edges_among,
    set_cut,
    clear_cut,
    cuts,
    mark_celebrity,
    celebrities,
    river,
    put_river,
    rivers_among,
    idle_rivers,
    drop_river,
    trim_river,
    materialised,
    feed_item,
    rename_ref,
    add_comment,
    comments,
    set_like,
    discussions,
    liked,
    claim_fan_out,
    deliver,
    finish_fan_out,
    deliver_all_and_finish,
    claim_bumps,
    bump,
    finish_bump,
    bump_and_finish,
    feed_changes,
    feed_page,
    backfill,
    start_unfollow,
    end_unfollow,
    unfollows,
    claim_unfollows,
    clean_unfollow,
    clean_named,
    hide_feed_item,
    enqueue,
    claim,
    renew,
    finish,
    backlog,
);

/// Wraps a store and counts and times every call made through it.
pub struct Metered {
    inner: Arc<dyn Store>,
    calls: Vec<AtomicU64>,
    metrics: Arc<Metrics>,
    /// Each operation's latency histogram, made at its first call.
    latency: Vec<OnceLock<Histogram>>,
}

impl Metered {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self::with_metrics(inner, Arc::default())
    }

    /// Times calls into `metrics`' store latency histograms.
    pub fn with_metrics(inner: Arc<dyn Store>, metrics: Arc<Metrics>) -> Self {
        Self {
            inner,
            calls: Op::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
            metrics,
            latency: Op::ALL.iter().map(|_| OnceLock::new()).collect(),
        }
    }

    /// Counts a call of `op` and times it.
    async fn timed<T>(&self, op: Op, call: impl std::future::Future<Output = T>) -> T {
        // Relaxed: counters are statistics, read without ordering guarantees.
        self.calls[op as usize].fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let out = call.await;
        self.latency[op as usize]
            .get_or_init(|| self.metrics.store_histogram(op.name()))
            .observe(started.elapsed().as_secs_f64());
        out
    }

    /// Calls so far of one operation.
    pub fn calls(&self, op: Op) -> u64 {
        self.calls[op as usize].load(Ordering::Relaxed)
    }

    /// Calls so far of every operation, in declaration order.
    pub fn snapshot(&self) -> Vec<(Op, u64)> {
        Op::ALL.iter().map(|&op| (op, self.calls(op))).collect()
    }
}

#[async_trait]
impl Archive for Metered {
    fn export<'a>(&'a self, tenant: Option<&'a str>) -> BoxStream<'a, StoreResult<Record>> {
        self.inner.export(tenant)
    }

    async fn import(&self, records: &[Record]) -> StoreResult<()> {
        self.inner.import(records).await
    }
}

#[async_trait]
impl Store for Metered {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn backend_metrics(&self) -> Vec<(String, u64)> {
        self.inner.backend_metrics()
    }

    fn event_log(&self) -> Option<Arc<dyn super::event_log::EventLog>> {
        self.inner.event_log()
    }

    async fn ping(&self) -> StoreResult<()> {
        self.inner.ping().await
    }

    async fn footprint(&self) -> StoreResult<super::Footprint> {
        self.inner.footprint().await
    }
}

#[async_trait]
impl GraphStore for Metered {
    async fn upsert_user(&self, tenant: &str, user: &User) -> StoreResult<()> {
        self.timed(Op::upsert_user, self.inner.upsert_user(tenant, user))
            .await
    }

    async fn ensure_user(&self, tenant: &str, id: &str) -> StoreResult<()> {
        self.timed(Op::ensure_user, self.inner.ensure_user(tenant, id))
            .await
    }

    async fn get_users(&self, tenant: &str, ids: &[String]) -> StoreResult<Vec<User>> {
        self.timed(Op::get_users, self.inner.get_users(tenant, ids))
            .await
    }

    async fn set_edge(
        &self,
        tenant: &str,
        kind: EdgeKind,
        from: &str,
        to: &str,
        on: bool,
    ) -> StoreResult<bool> {
        self.timed(
            Op::set_edge,
            self.inner.set_edge(tenant, kind, from, to, on),
        )
        .await
    }

    async fn edges(
        &self,
        tenant: &str,
        kind: EdgeKind,
        direction: Direction,
        user: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        self.timed(
            Op::edges,
            self.inner
                .edges(tenant, kind, direction, user, after, limit),
        )
        .await
    }

    async fn join_group(
        &self,
        tenant: &str,
        group: &Group,
        user: &str,
        role: MembershipRole,
        since: Millis,
    ) -> StoreResult<JoinOutcome> {
        self.timed(
            Op::join_group,
            self.inner.join_group(tenant, group, user, role, since),
        )
        .await
    }

    async fn leave_group(&self, tenant: &str, group_id: &str, user: &str) -> StoreResult<bool> {
        self.timed(
            Op::leave_group,
            self.inner.leave_group(tenant, group_id, user),
        )
        .await
    }

    async fn group_members(
        &self,
        tenant: &str,
        group_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        self.timed(
            Op::group_members,
            self.inner.group_members(tenant, group_id, after, limit),
        )
        .await
    }

    async fn memberships(&self, tenant: &str, user: &str) -> StoreResult<Vec<Membership>> {
        self.timed(Op::memberships, self.inner.memberships(tenant, user))
            .await
    }

    async fn set_assignment(
        &self,
        tenant: &str,
        user: &str,
        ref_id: &str,
        on: bool,
    ) -> StoreResult<bool> {
        self.timed(
            Op::set_assignment,
            self.inner.set_assignment(tenant, user, ref_id, on),
        )
        .await
    }

    async fn assignees(
        &self,
        tenant: &str,
        ref_ids: &[String],
    ) -> StoreResult<Vec<(String, String)>> {
        self.timed(Op::assignees, self.inner.assignees(tenant, ref_ids))
            .await
    }

    async fn assignments(&self, tenant: &str, user: &str) -> StoreResult<Vec<String>> {
        self.timed(Op::assignments, self.inner.assignments(tenant, user))
            .await
    }

    async fn set_supervisor(
        &self,
        tenant: &str,
        user: &str,
        supervisor: Option<&str>,
    ) -> StoreResult<()> {
        self.timed(
            Op::set_supervisor,
            self.inner.set_supervisor(tenant, user, supervisor),
        )
        .await
    }

    async fn supervisor(&self, tenant: &str, user: &str) -> StoreResult<Option<String>> {
        self.timed(Op::supervisor, self.inner.supervisor(tenant, user))
            .await
    }

    async fn supervisees(&self, tenant: &str, supervisor: &str) -> StoreResult<Vec<String>> {
        self.timed(Op::supervisees, self.inner.supervisees(tenant, supervisor))
            .await
    }
}

#[async_trait]
impl ActionStore for Metered {
    async fn insert_action(&self, action: &Action) -> StoreResult<()> {
        self.timed(Op::insert_action, self.inner.insert_action(action))
            .await
    }

    async fn get_actions(&self, tenant: &str, ids: &[ObjectId]) -> StoreResult<Vec<Action>> {
        self.timed(Op::get_actions, self.inner.get_actions(tenant, ids))
            .await
    }

    async fn hide_action(&self, tenant: &str, id: ObjectId) -> StoreResult<Vec<FeedItem>> {
        self.timed(Op::hide_action, self.inner.hide_action(tenant, id))
            .await
    }

    async fn delete_action(&self, tenant: &str, id: ObjectId) -> StoreResult<Vec<FeedItem>> {
        self.timed(Op::delete_action, self.inner.delete_action(tenant, id))
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
        self.timed(
            Op::set_action_scope,
            self.inner
                .set_action_scope(tenant, id, scope, readers, scope_groups),
        )
        .await
    }

    async fn slice(
        &self,
        tenant: &str,
        ref_id: &str,
        before: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<ObjectId>> {
        self.timed(Op::slice, self.inner.slice(tenant, ref_id, before, limit))
            .await
    }

    async fn expired(
        &self,
        now: Millis,
        item_ttl: Option<Millis>,
        limit: usize,
    ) -> StoreResult<Vec<(Millis, String, ObjectId)>> {
        self.timed(Op::expired, self.inner.expired(now, item_ttl, limit))
            .await
    }

    async fn outbox(
        &self,
        tenant: &str,
        actor: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>> {
        self.timed(Op::outbox, self.inner.outbox(tenant, actor, range))
            .await
    }

    async fn rename_ref(&self, tenant: &str, ref_id: &str, name: &str) -> StoreResult<u64> {
        self.timed(Op::rename_ref, self.inner.rename_ref(tenant, ref_id, name))
            .await
    }
}

#[async_trait]
impl ReactionStore for Metered {
    async fn add_comment(&self, tenant: &str, comment: &Comment) -> StoreResult<Counts> {
        self.timed(Op::add_comment, self.inner.add_comment(tenant, comment))
            .await
    }

    async fn comments(
        &self,
        tenant: &str,
        action_id: ObjectId,
        after: Option<ObjectId>,
        limit: usize,
    ) -> StoreResult<Vec<Comment>> {
        self.timed(
            Op::comments,
            self.inner.comments(tenant, action_id, after, limit),
        )
        .await
    }

    async fn set_like(
        &self,
        tenant: &str,
        action_id: ObjectId,
        user: &str,
        on: bool,
    ) -> StoreResult<(bool, Counts)> {
        self.timed(
            Op::set_like,
            self.inner.set_like(tenant, action_id, user, on),
        )
        .await
    }

    async fn discussions(
        &self,
        tenant: &str,
        user: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>> {
        self.timed(Op::discussions, self.inner.discussions(tenant, user, range))
            .await
    }

    async fn liked(
        &self,
        tenant: &str,
        user: &str,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>> {
        self.timed(Op::liked, self.inner.liked(tenant, user, action_ids))
            .await
    }
}

#[async_trait]
impl QueueStore for Metered {
    async fn fan_out_backlog(&self) -> StoreResult<super::Backlog> {
        self.inner.fan_out_backlog().await
    }

    async fn claim_fan_out(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Claim>> {
        self.timed(
            Op::claim_fan_out,
            self.inner.claim_fan_out(worker, now, lease_ms, limit),
        )
        .await
    }

    async fn deliver(
        &self,
        claim: &Claim,
        now: Millis,
        items: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        self.timed(Op::deliver, self.inner.deliver(claim, now, items))
            .await
    }

    async fn finish_fan_out(&self, claim: &Claim) -> StoreResult<()> {
        self.timed(Op::finish_fan_out, self.inner.finish_fan_out(claim))
            .await
    }

    async fn deliver_all_and_finish(
        &self,
        now: Millis,
        jobs: &[(Claim, Vec<Delivery>)],
    ) -> StoreResult<Vec<StoreResult<Vec<FeedItem>>>> {
        self.timed(
            Op::deliver_all_and_finish,
            self.inner.deliver_all_and_finish(now, jobs),
        )
        .await
    }

    async fn claim_bumps(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<BumpClaim>> {
        self.timed(
            Op::claim_bumps,
            self.inner.claim_bumps(worker, now, lease_ms, limit),
        )
        .await
    }

    async fn bump(
        &self,
        claim: &BumpClaim,
        now: Millis,
        bumps: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        self.timed(Op::bump, self.inner.bump(claim, now, bumps))
            .await
    }

    async fn claim_unfollows(
        &self,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<UnfollowClaim>> {
        self.timed(
            Op::claim_unfollows,
            self.inner.claim_unfollows(worker, now, lease_ms, limit),
        )
        .await
    }

    async fn clean_unfollow(&self, claim: &UnfollowClaim) -> StoreResult<Vec<FeedItem>> {
        self.timed(Op::clean_unfollow, self.inner.clean_unfollow(claim))
            .await
    }

    async fn clean_named(
        &self,
        claim: &UnfollowClaim,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<FeedItem>> {
        self.timed(Op::clean_named, self.inner.clean_named(claim, action_ids))
            .await
    }

    async fn finish_bump(&self, claim: &BumpClaim) -> StoreResult<()> {
        self.timed(Op::finish_bump, self.inner.finish_bump(claim))
            .await
    }

    async fn bump_and_finish(
        &self,
        claim: &BumpClaim,
        now: Millis,
        bumps: &[Delivery],
    ) -> StoreResult<Vec<FeedItem>> {
        self.timed(
            Op::bump_and_finish,
            self.inner.bump_and_finish(claim, now, bumps),
        )
        .await
    }
}

#[async_trait]
impl TimelineStore for Metered {
    async fn feed_changes(
        &self,
        tenant: &str,
        owner: &str,
        after: Stamp,
        limit: usize,
    ) -> StoreResult<Vec<FeedItem>> {
        self.timed(
            Op::feed_changes,
            self.inner.feed_changes(tenant, owner, after, limit),
        )
        .await
    }

    async fn feed_page(
        &self,
        tenant: &str,
        owner: &str,
        range: FeedRange,
    ) -> StoreResult<Vec<FeedItem>> {
        self.timed(Op::feed_page, self.inner.feed_page(tenant, owner, range))
            .await
    }

    async fn start_unfollow(&self, unfollow: &Unfollow) -> StoreResult<()> {
        self.timed(Op::start_unfollow, self.inner.start_unfollow(unfollow))
            .await
    }

    async fn end_unfollow(&self, unfollow: &Unfollow) -> StoreResult<()> {
        self.timed(Op::end_unfollow, self.inner.end_unfollow(unfollow))
            .await
    }

    async fn unfollows(&self, tenant: &str, reader: &str) -> StoreResult<Vec<Unfollow>> {
        self.timed(Op::unfollows, self.inner.unfollows(tenant, reader))
            .await
    }

    async fn backfill(
        &self,
        tenant: &str,
        owner: &str,
        items: &[Backfill],
    ) -> StoreResult<Vec<FeedItem>> {
        self.timed(Op::backfill, self.inner.backfill(tenant, owner, items))
            .await
    }

    async fn materialised(
        &self,
        tenant: &str,
        owner: &str,
        action_ids: &[ObjectId],
    ) -> StoreResult<Vec<ObjectId>> {
        self.timed(
            Op::materialised,
            self.inner.materialised(tenant, owner, action_ids),
        )
        .await
    }

    async fn feed_item(
        &self,
        tenant: &str,
        owner: &str,
        action_id: ObjectId,
    ) -> StoreResult<Option<FeedItem>> {
        self.timed(
            Op::feed_item,
            self.inner.feed_item(tenant, owner, action_id),
        )
        .await
    }

    async fn hide_feed_item(
        &self,
        tenant: &str,
        owner: &str,
        action_id: ObjectId,
    ) -> StoreResult<Option<FeedItem>> {
        self.timed(
            Op::hide_feed_item,
            self.inner.hide_feed_item(tenant, owner, action_id),
        )
        .await
    }
}

#[async_trait]
impl SourceStore for Metered {
    async fn edges_among(
        &self,
        tenant: &str,
        kind: EdgeKind,
        readers: &[String],
        actor: &str,
    ) -> StoreResult<Vec<String>> {
        self.timed(
            Op::edges_among,
            self.inner.edges_among(tenant, kind, readers, actor),
        )
        .await
    }

    async fn set_cut(&self, tenant: &str, reader: &str, cut: &Cut) -> StoreResult<()> {
        self.timed(Op::set_cut, self.inner.set_cut(tenant, reader, cut))
            .await
    }

    async fn clear_cut(
        &self,
        tenant: &str,
        reader: &str,
        kind: EdgeKind,
        actor: &str,
    ) -> StoreResult<()> {
        self.timed(
            Op::clear_cut,
            self.inner.clear_cut(tenant, reader, kind, actor),
        )
        .await
    }

    async fn cuts(&self, tenant: &str, reader: &str) -> StoreResult<Vec<Cut>> {
        self.timed(Op::cuts, self.inner.cuts(tenant, reader)).await
    }

    async fn mark_celebrity(&self, tenant: &str, user: &str) -> StoreResult<()> {
        self.timed(Op::mark_celebrity, self.inner.mark_celebrity(tenant, user))
            .await
    }

    async fn celebrities(&self, tenant: &str, users: &[String]) -> StoreResult<Vec<String>> {
        self.timed(Op::celebrities, self.inner.celebrities(tenant, users))
            .await
    }

    async fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        self.timed(Op::meta, self.inner.meta(key)).await
    }

    async fn set_meta(&self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.timed(Op::set_meta, self.inner.set_meta(key, value))
            .await
    }

    async fn members_among(
        &self,
        tenant: &str,
        group_id: &str,
        users: &[String],
    ) -> StoreResult<Vec<(String, Millis)>> {
        self.timed(
            Op::members_among,
            self.inner.members_among(tenant, group_id, users),
        )
        .await
    }

    async fn outboxes(
        &self,
        tenant: &str,
        reads: &[(Outbox, FeedRange)],
    ) -> StoreResult<Vec<Vec<Posted>>> {
        self.timed(Op::outboxes, self.inner.outboxes(tenant, reads))
            .await
    }
}

#[async_trait]
impl GroupFeedStore for Metered {
    async fn post_to_group(
        &self,
        tenant: &str,
        group: &str,
        at: Position,
        size: usize,
    ) -> StoreResult<bool> {
        self.timed(
            Op::post_to_group,
            self.inner.post_to_group(tenant, group, at, size),
        )
        .await
    }

    async fn group_feed(
        &self,
        tenant: &str,
        group: &str,
        size: usize,
        range: FeedRange,
    ) -> StoreResult<Vec<Position>> {
        self.timed(
            Op::group_feed,
            self.inner.group_feed(tenant, group, size, range),
        )
        .await
    }
}

#[async_trait]
impl RiverStore for Metered {
    async fn river(&self, tenant: &str, reader: &str) -> StoreResult<Option<River>> {
        self.timed(Op::river, self.inner.river(tenant, reader))
            .await
    }

    async fn put_river(&self, tenant: &str, reader: &str, river: &River) -> StoreResult<()> {
        self.timed(Op::put_river, self.inner.put_river(tenant, reader, river))
            .await
    }

    async fn rivers_among(&self, tenant: &str, readers: &[String]) -> StoreResult<Vec<String>> {
        self.timed(Op::rivers_among, self.inner.rivers_among(tenant, readers))
            .await
    }

    async fn idle_rivers(
        &self,
        before: Millis,
        limit: usize,
    ) -> StoreResult<Vec<(String, String)>> {
        self.timed(Op::idle_rivers, self.inner.idle_rivers(before, limit))
            .await
    }

    async fn drop_river(&self, tenant: &str, reader: &str) -> StoreResult<u64> {
        self.timed(Op::drop_river, self.inner.drop_river(tenant, reader))
            .await
    }

    async fn trim_river(&self, tenant: &str, reader: &str, keep: usize) -> StoreResult<u64> {
        self.timed(Op::trim_river, self.inner.trim_river(tenant, reader, keep))
            .await
    }
}

#[async_trait]
impl NoticeStore for Metered {
    async fn notice_group(
        &self,
        tenant: &str,
        owner: &str,
        key: &str,
    ) -> StoreResult<Option<NoticeGroup>> {
        self.timed(
            Op::notice_group,
            self.inner.notice_group(tenant, owner, key),
        )
        .await
    }

    async fn notice_groups(
        &self,
        tenant: &str,
        owner: &str,
        ids: &[ObjectId],
    ) -> StoreResult<Vec<NoticeGroup>> {
        self.timed(
            Op::notice_groups,
            self.inner.notice_groups(tenant, owner, ids),
        )
        .await
    }

    async fn put_notice_group(&self, group: &NoticeGroup) -> StoreResult<bool> {
        self.timed(Op::put_notice_group, self.inner.put_notice_group(group))
            .await
    }

    async fn notice_page(
        &self,
        tenant: &str,
        owner: &str,
        range: NoticeRange,
    ) -> StoreResult<Vec<NoticeGroup>> {
        self.timed(
            Op::notice_page,
            self.inner.notice_page(tenant, owner, range),
        )
        .await
    }

    async fn notice_counts(
        &self,
        tenant: &str,
        owner: &str,
        seen_until: Millis,
    ) -> StoreResult<NoticeCounts> {
        self.timed(
            Op::notice_counts,
            self.inner.notice_counts(tenant, owner, seen_until),
        )
        .await
    }

    async fn trim_notices(
        &self,
        tenant: &str,
        owner: &str,
        keep: usize,
    ) -> StoreResult<Vec<ObjectId>> {
        self.timed(
            Op::trim_notices,
            self.inner.trim_notices(tenant, owner, keep),
        )
        .await
    }

    async fn inbox(&self, tenant: &str, owner: &str) -> StoreResult<Inbox> {
        self.timed(Op::inbox, self.inner.inbox(tenant, owner)).await
    }

    async fn put_inbox(&self, inbox: &Inbox) -> StoreResult<bool> {
        self.timed(Op::put_inbox, self.inner.put_inbox(inbox)).await
    }
}

#[async_trait]
impl JobStore for Metered {
    async fn enqueue(&self, job: &Job) -> StoreResult<bool> {
        self.timed(Op::enqueue, self.inner.enqueue(job)).await
    }

    async fn claim(
        &self,
        kind: JobKind,
        worker: &str,
        now: Millis,
        lease_ms: Millis,
        limit: usize,
    ) -> StoreResult<Vec<Lease>> {
        self.timed(
            Op::claim,
            self.inner.claim(kind, worker, now, lease_ms, limit),
        )
        .await
    }

    async fn renew(&self, lease: &Lease, now: Millis) -> StoreResult<()> {
        self.timed(Op::renew, self.inner.renew(lease, now)).await
    }

    async fn finish(&self, lease: &Lease) -> StoreResult<()> {
        self.timed(Op::finish, self.inner.finish(lease)).await
    }

    async fn backlog(&self, kind: JobKind) -> StoreResult<JobBacklog> {
        self.timed(Op::backlog, self.inner.backlog(kind)).await
    }
}
