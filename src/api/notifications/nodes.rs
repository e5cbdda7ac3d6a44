//! The notification types: groups, notifications, counts, preferences,
//! markers.

use async_graphql::{ComplexObject, Context, Object, SimpleObject, ID};
use chrono::{DateTime, Utc};

use super::mutation::MAX_MUTES;
use super::readable;
use crate::api::cost::{bounded_first, first_cost, list_cost};
use crate::api::global_id::GlobalId;
use crate::api::page::connection;
use crate::api::types::{datetime, user_node, ActionNode, UserNode};
use crate::model::limits::{DEFAULT_PAGE, MAX_LIST_LEN};
use crate::model::MEMBERS_KEPT;
use crate::model::{
    Inbox, Marker, MarkerFeed, Millis, Notice, NoticeGroup, NoticeReason, ObjectId,
};

connection!(
    NotificationGroupConnection,
    NotificationGroupEdge,
    NotificationGroupNode,
    "notification group",
    /// Groups with something newer than what the viewer saw.
    unseen_count: u64,
    /// Groups with an unread notification.
    unread_count: u64,
);

/// Notifications grouped by key ("Rita and 3 others liked your rating of
/// Mary Fanning"): the unit that is listed, counted and marked.
#[derive(Clone)]
pub struct NotificationGroupNode {
    pub group: NoticeGroup,
    /// The owner's seen watermark when it was read.
    pub seen_until: Millis,
}

impl NotificationGroupNode {
    /// One of its members, as a node.
    pub fn member(&self, id: ObjectId) -> Option<NotificationNode> {
        self.group
            .shown()
            .find(|m| m.id == id)
            .map(|m| self.node(m))
    }

    fn node(&self, notice: &Notice) -> NotificationNode {
        NotificationNode {
            notice: notice.clone(),
            group: self.group.id,
            seen_until: self.seen_until,
        }
    }

    // Each field's value, written once for both executors.

    pub(crate) fn global_id(&self) -> ID {
        GlobalId::NotificationGroup(self.group.id).encode()
    }

    /// The action its latest notification is about, if any.
    pub(crate) fn action_id(&self) -> Option<ObjectId> {
        self.group.shown().find_map(|m| m.action_id)
    }

    pub(crate) fn latest_ref(&self) -> Option<&str> {
        self.group.shown().find_map(|m| m.ref_id.as_deref())
    }

    /// Its first `first` actors, the most recent first.
    pub(crate) fn actor_ids(&self, first: usize) -> Vec<&str> {
        let mut actors = self.group.actors();
        actors.truncate(first);
        actors
    }

    pub(crate) fn actors_counted(&self) -> usize {
        self.group.actors().len()
    }

    pub(crate) fn first_time(&self) -> Option<DateTime<Utc>> {
        self.group.first().map(datetime)
    }

    pub(crate) fn last_time(&self) -> DateTime<Utc> {
        datetime(self.group.last)
    }

    pub(crate) fn is_seen(&self) -> bool {
        self.group.last <= self.seen_until
    }

    pub(crate) fn is_read(&self) -> bool {
        self.group.unread == 0
    }

    /// Its first `first` notifications, newest first.
    pub(crate) fn members(&self, first: usize) -> Vec<NotificationNode> {
        self.group
            .shown()
            .take(first)
            .map(|m| self.node(m))
            .collect()
    }
}

/// How many of a group's actors `actors(first:)` lists.
pub(crate) fn actors_first(first: i32) -> async_graphql::Result<usize> {
    bounded_first(Some(first), 3, MAX_LIST_LEN)
}

/// How many of a group's notifications `notifications(first:)` lists.
pub(crate) fn members_first(first: Option<i32>) -> async_graphql::Result<usize> {
    bounded_first(first, DEFAULT_PAGE, MEMBERS_KEPT)
}

#[Object(name = "NotificationGroup")]
impl NotificationGroupNode {
    /// Opaque global id (`Node`); pass it to `markRead` or `archive` for the
    /// whole group.
    pub(crate) async fn id(&self) -> ID {
        self.global_id()
    }

    /// What its notifications share (by default reason, object and day).
    async fn key(&self) -> &str {
        &self.group.key
    }

    async fn reason(&self) -> NoticeReason {
        self.group.reason
    }

    /// The action its latest notification is about (the one commented on,
    /// liked, the rating request…): null if there is none, or the viewer
    /// may no longer read it.
    async fn action(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<ActionNode>> {
        readable(ctx, self.action_id()).await
    }

    /// The ref its latest notification names (the applicant assigned,
    /// hired or to rate), if any.
    async fn ref_id(&self) -> Option<&str> {
        self.latest_ref()
    }

    /// Who did it, the most recent first: at most `first` (3 by default,
    /// at most 100).
    #[graphql(complexity = "first_cost(Some(first), 3, MAX_LIST_LEN, child_complexity)")]
    async fn actors(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 3)] first: i32,
    ) -> async_graphql::Result<Vec<UserNode>> {
        let mut users = Vec::new();
        for actor in self.actor_ids(actors_first(first)?) {
            users.push(user_node(ctx, actor).await?);
        }
        Ok(users)
    }

    /// How many different users did it (among the notifications kept).
    async fn actor_count(&self) -> usize {
        self.actors_counted()
    }

    /// Its notifications, archived ones aside.
    async fn count(&self) -> u32 {
        self.group.visible
    }

    /// Its unread notifications.
    async fn unread_count(&self) -> u32 {
        self.group.unread
    }

    async fn first_at(&self) -> Option<DateTime<Utc>> {
        self.first_time()
    }

    /// When its latest notification happened: where it stands in the list.
    async fn last_at(&self) -> DateTime<Utc> {
        self.last_time()
    }

    /// Nothing in it is newer than what the viewer saw (`markSeen`).
    async fn seen(&self) -> bool {
        self.is_seen()
    }

    /// Every notification in it was read.
    async fn read(&self) -> bool {
        self.is_read()
    }

    /// Its notifications, newest first: at most `first` (25 by default; a
    /// group keeps up to 200, which `first: 200` lists whole).
    #[graphql(complexity = "first_cost(first, DEFAULT_PAGE, MEMBERS_KEPT, child_complexity)")]
    async fn notifications(
        &self,
        first: Option<i32>,
    ) -> async_graphql::Result<Vec<NotificationNode>> {
        Ok(self.members(members_first(first)?))
    }
}

/// One notification: something that happened to the viewer.
#[derive(Clone)]
pub struct NotificationNode {
    pub notice: Notice,
    pub group: ObjectId,
    pub seen_until: Millis,
}

impl NotificationNode {
    // Each field's value, written once for both executors.

    pub(crate) fn global_id(&self) -> ID {
        GlobalId::Notification {
            group: self.group,
            member: self.notice.id,
        }
        .encode()
    }

    pub(crate) fn comment_hex(&self) -> Option<String> {
        self.notice.comment_id.map(|c| c.to_hex())
    }

    pub(crate) fn happened(&self) -> DateTime<Utc> {
        datetime(self.notice.at)
    }

    pub(crate) fn is_seen(&self) -> bool {
        self.notice.at <= self.seen_until
    }
}

#[Object(name = "Notification")]
impl NotificationNode {
    /// Opaque global id (`Node`); pass it to `markRead` or `archive` for
    /// this notification alone.
    pub(crate) async fn id(&self) -> ID {
        self.global_id()
    }

    async fn reason(&self) -> NoticeReason {
        self.notice.reason
    }

    /// Who did it.
    async fn actor(&self, ctx: &Context<'_>) -> async_graphql::Result<UserNode> {
        user_node(ctx, &self.notice.actor).await
    }

    async fn actor_id(&self) -> &str {
        &self.notice.actor
    }

    /// The action it is about; null if none, or no longer readable.
    async fn action(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<ActionNode>> {
        readable(ctx, self.notice.action_id).await
    }

    /// The comment that caused it (`COMMENT`, `REPLY`).
    async fn comment_id(&self) -> Option<String> {
        self.comment_hex()
    }

    /// The ref it names (`ASSIGNED`, `RATING_REQUESTED`, `HIRED`).
    async fn ref_id(&self) -> Option<&str> {
        self.notice.ref_id.as_deref()
    }

    async fn at(&self) -> DateTime<Utc> {
        self.happened()
    }

    async fn seen(&self) -> bool {
        self.is_seen()
    }

    async fn read(&self) -> bool {
        self.notice.read
    }
}

/// The viewer's badge counts, in groups.
#[derive(Clone, Copy, SimpleObject)]
pub struct NotificationCounts {
    /// Groups with something newer than what was seen.
    pub unseen_count: u64,
    /// Groups with an unread notification.
    pub unread_count: u64,
}

/// What a mark or an archive changed.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct NotificationsChanged {
    #[graphql(skip)]
    pub groups: Vec<NotificationGroupNode>,
    /// Ids of the groups archived through: no longer listed.
    pub removed: Vec<ID>,
    pub unseen_count: u64,
    pub unread_count: u64,
}

/// A thread muted: no notifications about its action until `until`.
#[derive(SimpleObject)]
#[graphql(name = "ThreadMute")]
pub struct MuteNode {
    pub action_id: String,
    /// When the mute ends; never if null.
    pub until: Option<DateTime<Utc>>,
}

#[ComplexObject]
impl NotificationsChanged {
    /// The groups changed and still listed, as they are now: at most one
    /// per id marked.
    #[graphql(complexity = "list_cost(MAX_LIST_LEN, child_complexity)")]
    async fn groups(&self) -> &[NotificationGroupNode] {
        &self.groups
    }
}

/// What the viewer chose to hear of.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct NotificationPreferences {
    /// Reasons the viewer is not notified for.
    pub disabled: Vec<NoticeReason>,
    #[graphql(skip)]
    pub mutes: Vec<MuteNode>,
}

#[ComplexObject]
impl NotificationPreferences {
    /// Threads muted now (expired mutes are left out); at most 500.
    #[graphql(complexity = "list_cost(MAX_MUTES, child_complexity)")]
    async fn mutes(&self) -> &[MuteNode] {
        &self.mutes
    }
}

impl NotificationPreferences {
    pub(super) fn of(inbox: &Inbox, now: Millis) -> Self {
        Self {
            disabled: inbox.disabled.clone(),
            mutes: inbox
                .live_mutes(now)
                .map(|m| MuteNode {
                    action_id: m.action_id.to_hex(),
                    until: m.until.map(datetime),
                })
                .collect(),
        }
    }
}

/// Where the viewer stopped reading one feed, on whichever device.
#[derive(SimpleObject)]
#[graphql(name = "Marker")]
pub struct MarkerNode {
    pub feed: MarkerFeed,
    /// A cursor of that feed: pass it as `after` (or `before`) to open
    /// where reading stopped.
    pub cursor: String,
    /// Counts the marker's writes; pass it to `setMarker` to set it only
    /// over what was read.
    pub version: u64,
    pub updated_at: DateTime<Utc>,
}

impl From<&Marker> for MarkerNode {
    fn from(m: &Marker) -> Self {
        Self {
            feed: m.feed,
            cursor: m.cursor.clone(),
            version: m.version,
            updated_at: datetime(m.updated),
        }
    }
}
