//! Notifications in the API: the viewer's notification groups and counts,
//! marking them seen, read or archived, preferences, markers, and the live
//! `notificationEvents` stream.
//!
//! Everything here is the viewer's own: no argument names another user,
//! and an id of a group that is not the viewer's finds nothing.

use async_graphql::{Context, Enum, Object, SimpleObject, Subscription, ID};
use chrono::{DateTime, Utc};
use futures_util::stream::Stream;
use std::collections::VecDeque;

use super::access::access;
use super::cursor::ListId;
use super::error::{bad_input, coded, ApiResultExt, CONFLICT};
use super::global_id::{action_id_arg, GlobalId};
use super::page::{NotificationGroupConnection, NotificationGroupEdge, PageInfo};
use super::page_cost;
use super::subscription::{until_error, Live};
use super::types::{datetime, user_node, ActionNode, UserNode};
use super::{loaders, state, viewer, AppState, Viewer};
use crate::events::{Event, NoticeEvent, Topic};
use crate::model::limits::{page_size, MAX_LIST_LEN};
use crate::model::{
    Inbox, Marker, MarkerFeed, Millis, Mute, Notice, NoticeGroup, NoticeRange, NoticeReason,
    ObjectId, Position,
};
use crate::notify::{self, inbox, inbox::Target};

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
}

/// Loads an action for the viewer: none if it is gone or not theirs to read.
async fn readable(
    ctx: &Context<'_>,
    id: Option<ObjectId>,
) -> async_graphql::Result<Option<ActionNode>> {
    let Some(id) = id else {
        return Ok(None);
    };
    let viewer = viewer(ctx)?;
    let Some(action) = loaders(ctx)?.actions.load_one(id).await.api()? else {
        return Ok(None);
    };
    let access = access(ctx, viewer, [&action]).await?;
    Ok((access.can_read(&action) && !action.hidden).then(|| ActionNode::new(action)))
}

#[Object(name = "NotificationGroup")]
impl NotificationGroupNode {
    /// Opaque global id (`Node`); pass it to `markRead` or `archive` for the
    /// whole group.
    pub(super) async fn id(&self) -> ID {
        GlobalId::NotificationGroup(self.group.id).encode()
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
        readable(ctx, self.group.shown().find_map(|m| m.action_id)).await
    }

    /// The ref its latest notification names (the applicant assigned,
    /// hired or to rate), if any.
    async fn ref_id(&self) -> Option<&str> {
        self.group.shown().find_map(|m| m.ref_id.as_deref())
    }

    /// Who did it, the most recent first: at most `first` (3 by default).
    async fn actors(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 3)] first: i32,
    ) -> async_graphql::Result<Vec<UserNode>> {
        let first = usize::try_from(first).map_err(|_| bad_input("first must not be negative"))?;
        let mut users = Vec::new();
        for actor in self
            .group
            .actors()
            .into_iter()
            .take(first.min(MAX_LIST_LEN))
        {
            users.push(user_node(ctx, actor).await?);
        }
        Ok(users)
    }

    /// How many different users did it (among the notifications kept).
    async fn actor_count(&self) -> usize {
        self.group.actors().len()
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
        self.group.first().map(datetime)
    }

    /// When its latest notification happened: where it stands in the list.
    async fn last_at(&self) -> DateTime<Utc> {
        datetime(self.group.last)
    }

    /// Nothing in it is newer than what the viewer saw (`markSeen`).
    async fn seen(&self) -> bool {
        self.group.last <= self.seen_until
    }

    /// Every notification in it was read.
    async fn read(&self) -> bool {
        self.group.unread == 0
    }

    /// Its notifications, newest first: at most `first` (all it keeps, up
    /// to 200, by default).
    async fn notifications(
        &self,
        first: Option<i32>,
    ) -> async_graphql::Result<Vec<NotificationNode>> {
        let first = match first {
            Some(n) => usize::try_from(n).map_err(|_| bad_input("first must not be negative"))?,
            None => usize::MAX,
        };
        Ok(self
            .group
            .shown()
            .take(first)
            .map(|m| self.node(m))
            .collect())
    }
}

/// One notification: something that happened to the viewer.
#[derive(Clone)]
pub struct NotificationNode {
    pub notice: Notice,
    pub group: ObjectId,
    pub seen_until: Millis,
}

#[Object(name = "Notification")]
impl NotificationNode {
    /// Opaque global id (`Node`); pass it to `markRead` or `archive` for
    /// this notification alone.
    pub(super) async fn id(&self) -> ID {
        GlobalId::Notification {
            group: self.group,
            member: self.notice.id,
        }
        .encode()
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
        self.notice.comment_id.map(|c| c.to_hex())
    }

    /// The ref it names (`ASSIGNED`, `RATING_REQUESTED`, `HIRED`).
    async fn ref_id(&self) -> Option<&str> {
        self.notice.ref_id.as_deref()
    }

    async fn at(&self) -> DateTime<Utc> {
        datetime(self.notice.at)
    }

    async fn seen(&self) -> bool {
        self.notice.at <= self.seen_until
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
pub struct NotificationsChanged {
    /// The groups changed and still listed, as they are now.
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

/// What the viewer chose to hear of.
#[derive(SimpleObject)]
pub struct NotificationPreferences {
    /// Reasons the viewer is not notified for.
    pub disabled: Vec<NoticeReason>,
    /// Threads muted now (expired mutes are left out).
    pub mutes: Vec<MuteNode>,
}

impl NotificationPreferences {
    fn of(inbox: &Inbox, now: Millis) -> Self {
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

fn notices_list<'k>(state: &'k AppState, viewer: &Viewer) -> ListId<'k> {
    ListId::notifications(&state.cursors, &viewer.tenant, &viewer.user)
}

async fn counts(
    state: &AppState,
    viewer: &Viewer,
) -> async_graphql::Result<(Inbox, NotificationCounts)> {
    let store = state.store.as_ref();
    let inbox = store.inbox(&viewer.tenant, &viewer.user).await.api()?;
    let c = store
        .notice_counts(&viewer.tenant, &viewer.user, inbox.seen_until)
        .await
        .api()?;
    Ok((
        inbox,
        NotificationCounts {
            unseen_count: c.unseen,
            unread_count: c.unread,
        },
    ))
}

/// The viewer's group `id` as a node, if it is theirs and listed.
pub async fn group_node(
    ctx: &Context<'_>,
    viewer: &Viewer,
    id: ObjectId,
) -> async_graphql::Result<Option<NotificationGroupNode>> {
    let store = state(ctx)?.store.as_ref();
    let ids = [id];
    let (groups, inbox) = tokio::join!(
        store.notice_groups(&viewer.tenant, &viewer.user, &ids),
        store.inbox(&viewer.tenant, &viewer.user)
    );
    let seen_until = inbox.api()?.seen_until;
    Ok(groups
        .api()?
        .pop()
        .filter(|g| g.visible > 0)
        .map(|group| NotificationGroupNode { group, seen_until }))
}

#[derive(Default)]
pub struct NotificationQuery;

#[Object]
impl NotificationQuery {
    /// The viewer's notifications, in groups, the latest first; 25 groups
    /// by default, at most 100. `unreadOnly` leaves out groups read
    /// through. With the badge counts.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn notifications(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        unread_only: Option<bool>,
    ) -> async_graphql::Result<NotificationGroupConnection> {
        let unread_only = unread_only.unwrap_or(false);
        let viewer = viewer(ctx)?;
        let state = state(ctx)?;
        let list = notices_list(state, viewer);
        let limit = page_size("first", first).api()?;
        let before = after
            .as_deref()
            .map(|c| list.decode_position(c))
            .transpose()?
            .map(|p| (p.relevancy, p.action_id));
        let range = NoticeRange {
            before,
            limit: limit + 1,
            unread_only,
        };
        let store = state.store.as_ref();
        let (page, counted) = tokio::join!(
            store.notice_page(&viewer.tenant, &viewer.user, range),
            counts(state, viewer)
        );
        let (mut page, (inbox, counted)) = (page.api()?, counted?);
        let more = page.len() > limit;
        page.truncate(limit);
        let position = |g: &NoticeGroup| Position {
            relevancy: g.last,
            action_id: g.id,
        };
        let page_info = PageInfo {
            has_previous_page: before.is_some(),
            has_next_page: more,
            start_cursor: page.first().map(|g| list.position_cursor(position(g))),
            end_cursor: page.last().map(|g| list.position_cursor(position(g))),
        };
        let edges = page
            .into_iter()
            .map(|group| NotificationGroupEdge {
                cursor: list.lazy_position(position(&group)),
                node: NotificationGroupNode {
                    group,
                    seen_until: inbox.seen_until,
                },
            })
            .collect();
        Ok(NotificationGroupConnection {
            edges,
            page_info,
            unseen_count: counted.unseen_count,
            unread_count: counted.unread_count,
        })
    }

    /// The viewer's badge counts alone.
    async fn notification_counts(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<NotificationCounts> {
        Ok(counts(state(ctx)?, viewer(ctx)?).await?.1)
    }

    /// What the viewer chose to hear of.
    async fn notification_preferences(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<NotificationPreferences> {
        let (viewer, state) = (viewer(ctx)?, state(ctx)?);
        let inbox = state
            .store
            .inbox(&viewer.tenant, &viewer.user)
            .await
            .api()?;
        Ok(NotificationPreferences::of(&inbox, state.clock.now()))
    }

    /// Where the viewer stopped reading: the markers of `feeds` (all, by
    /// default) that were ever set.
    async fn markers(
        &self,
        ctx: &Context<'_>,
        feeds: Option<Vec<MarkerFeed>>,
    ) -> async_graphql::Result<Vec<MarkerNode>> {
        let (viewer, state) = (viewer(ctx)?, state(ctx)?);
        let inbox = state
            .store
            .inbox(&viewer.tenant, &viewer.user)
            .await
            .api()?;
        Ok(inbox
            .markers
            .iter()
            .filter(|m| feeds.as_ref().is_none_or(|f| f.contains(&m.feed)))
            .map(MarkerNode::from)
            .collect())
    }
}

/// Reads `ids` (group or notification global ids) as targets.
fn targets(ids: &[ID]) -> async_graphql::Result<Vec<Target>> {
    if ids.len() > MAX_LIST_LEN {
        return Err(bad_input(format!(
            "ids has {} entries; at most {MAX_LIST_LEN} are allowed",
            ids.len()
        )));
    }
    ids.iter()
        .map(|id| match GlobalId::decode(id)? {
            Some(GlobalId::NotificationGroup(group)) => Ok(Target::Group(group)),
            Some(GlobalId::Notification { group, member }) => Ok(Target::Member { group, member }),
            _ => Err(bad_input(format!(
                "{:?} is not the id of a notification or a notification group",
                id.as_str()
            ))),
        })
        .collect()
}

/// What a mark or an archive does.
enum Change<'a> {
    Read(&'a [ID]),
    AllRead,
    Archive(&'a [ID]),
}

/// Marks or archives the viewer's notifications, answers what changed and
/// tells the viewer's other pages.
async fn change(
    ctx: &Context<'_>,
    what: Change<'_>,
) -> async_graphql::Result<NotificationsChanged> {
    let (viewer, state) = (viewer(ctx)?, state(ctx)?);
    let (store, tenant, owner) = (state.store.as_ref(), &viewer.tenant, &viewer.user);
    let change = match what {
        Change::Read(ids) => inbox::mark_read(store, tenant, owner, &targets(ids)?).await,
        Change::AllRead => inbox::mark_all_read(store, tenant, owner).await,
        Change::Archive(ids) => inbox::archive(store, tenant, owner, &targets(ids)?).await,
    }
    .api()?;
    changed(state, viewer, change).await
}

/// Answers a mark or an archive, and tells the viewer's other pages.
async fn changed(
    state: &AppState,
    viewer: &Viewer,
    change: NoticeEvent,
) -> async_graphql::Result<NotificationsChanged> {
    let store = state.store.as_ref();
    let groups = store
        .notice_groups(&viewer.tenant, &viewer.user, &change.updated)
        .await
        .api()?;
    let (inbox, c) = counts(state, viewer).await?;
    let removed = change.removed.clone();
    if change != NoticeEvent::default() {
        notify::publish(&state.hub, &viewer.tenant, &viewer.user, change);
    }
    Ok(NotificationsChanged {
        groups: groups
            .into_iter()
            .map(|group| NotificationGroupNode {
                group,
                seen_until: inbox.seen_until,
            })
            .collect(),
        removed: removed
            .into_iter()
            .map(|id| GlobalId::NotificationGroup(id).encode())
            .collect(),
        unseen_count: c.unseen_count,
        unread_count: c.unread_count,
    })
}

#[derive(Default)]
pub struct NotificationMutation;

#[Object]
impl NotificationMutation {
    /// Marks the viewer's notifications seen (the bell was opened): all of
    /// them, or those up to `upTo`, a cursor of `notifications`. Never
    /// moves back. Returns the counts after.
    async fn mark_seen(
        &self,
        ctx: &Context<'_>,
        up_to: Option<String>,
    ) -> async_graphql::Result<NotificationCounts> {
        let (viewer, state) = (viewer(ctx)?, state(ctx)?);
        let until = match up_to {
            Some(cursor) => {
                notices_list(state, viewer)
                    .decode_position(&cursor)?
                    .relevancy
            }
            None => state.clock.now(),
        };
        inbox::mark_seen(state.store.as_ref(), &viewer.tenant, &viewer.user, until)
            .await
            .api()?;
        notify::publish(
            &state.hub,
            &viewer.tenant,
            &viewer.user,
            NoticeEvent::default(),
        );
        Ok(counts(state, viewer).await?.1)
    }

    /// Marks notifications read: whole groups, or single notifications, by
    /// their ids (at most 100). Ids of nothing of the viewer's change nothing.
    async fn mark_read(
        &self,
        ctx: &Context<'_>,
        ids: Vec<ID>,
    ) -> async_graphql::Result<NotificationsChanged> {
        change(ctx, Change::Read(&ids)).await
    }

    /// Marks every notification of the viewer read.
    async fn mark_all_read(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<NotificationsChanged> {
        change(ctx, Change::AllRead).await
    }

    /// Archives notifications (groups or single ones): they are no longer
    /// listed or counted. A later notification of the same key shows the
    /// group again, with only what is new.
    async fn archive(
        &self,
        ctx: &Context<'_>,
        ids: Vec<ID>,
    ) -> async_graphql::Result<NotificationsChanged> {
        change(ctx, Change::Archive(&ids)).await
    }

    /// Sets the reasons the viewer is not notified for (the others are on).
    async fn set_notification_preferences(
        &self,
        ctx: &Context<'_>,
        disabled: Vec<NoticeReason>,
    ) -> async_graphql::Result<NotificationPreferences> {
        let (viewer, state) = (viewer(ctx)?, state(ctx)?);
        let mut disabled = disabled;
        disabled.sort();
        disabled.dedup();
        let inbox = inbox::update(
            state.store.as_ref(),
            &viewer.tenant,
            &viewer.user,
            |inbox| {
                let changed = inbox.disabled != disabled;
                inbox.disabled = disabled.clone();
                Ok::<_, async_graphql::Error>(changed)
            },
        )
        .await?;
        Ok(NotificationPreferences::of(&inbox, state.clock.now()))
    }

    /// Mutes the thread of an action (one the viewer may read): no more
    /// notifications about it, until `until` if given, else for good.
    async fn mute_thread(
        &self,
        ctx: &Context<'_>,
        action_id: ID,
        until: Option<DateTime<Utc>>,
    ) -> async_graphql::Result<NotificationPreferences> {
        let (viewer, state) = (viewer(ctx)?, state(ctx)?);
        let id = action_id_arg("actionId", &action_id)?;
        if readable(ctx, Some(id)).await?.is_none() {
            return Err(super::error::not_found(format!("no action {id}")));
        }
        let now = state.clock.now();
        let until = until.map(|t| t.timestamp_millis());
        if until.is_some_and(|u| u <= now) {
            return Err(bad_input("until must lie in the future"));
        }
        let inbox = inbox::update(
            state.store.as_ref(),
            &viewer.tenant,
            &viewer.user,
            |inbox| {
                // Expired mutes go as a new one comes.
                inbox
                    .mutes
                    .retain(|m| m.action_id != id && m.until.is_none_or(|u| u > now));
                if inbox.mutes.len() >= MAX_MUTES {
                    return Err(bad_input(format!(
                        "at most {MAX_MUTES} threads may be muted at once"
                    )));
                }
                inbox.mutes.push(Mute {
                    action_id: id,
                    until,
                });
                Ok(true)
            },
        )
        .await?;
        Ok(NotificationPreferences::of(&inbox, now))
    }

    /// Ends a thread's mute.
    async fn unmute_thread(
        &self,
        ctx: &Context<'_>,
        action_id: ID,
    ) -> async_graphql::Result<NotificationPreferences> {
        let (viewer, state) = (viewer(ctx)?, state(ctx)?);
        let id = action_id_arg("actionId", &action_id)?;
        let inbox = inbox::update(
            state.store.as_ref(),
            &viewer.tenant,
            &viewer.user,
            |inbox| {
                let before = inbox.mutes.len();
                inbox.mutes.retain(|m| m.action_id != id);
                Ok::<_, async_graphql::Error>(inbox.mutes.len() != before)
            },
        )
        .await?;
        Ok(NotificationPreferences::of(&inbox, state.clock.now()))
    }

    /// Sets where the viewer stopped reading `feed`: a cursor of that feed
    /// (`feed` for HOME, `notifications` for NOTIFICATIONS). With `version`,
    /// only over that version of the marker (0: never set), else `CONFLICT`.
    async fn set_marker(
        &self,
        ctx: &Context<'_>,
        feed: MarkerFeed,
        cursor: String,
        version: Option<u64>,
    ) -> async_graphql::Result<MarkerNode> {
        let (viewer, state) = (viewer(ctx)?, state(ctx)?);
        let list = match feed {
            MarkerFeed::Home => ListId::home(&state.cursors, &viewer.tenant, &viewer.user),
            MarkerFeed::Notifications => notices_list(state, viewer),
        };
        list.decode_position(&cursor)?;
        let now = state.clock.now();
        let inbox = inbox::update(
            state.store.as_ref(),
            &viewer.tenant,
            &viewer.user,
            |inbox| {
                let held = inbox.marker(feed).map_or(0, |m| m.version);
                if version.is_some_and(|v| v != held) {
                    return Err(coded(
                        CONFLICT,
                        format!("the {feed:?} marker is at version {held}; read it again"),
                    ));
                }
                inbox.markers.retain(|m| m.feed != feed);
                inbox.markers.push(Marker {
                    feed,
                    cursor: cursor.clone(),
                    version: held + 1,
                    updated: now,
                });
                Ok(true)
            },
        )
        .await?;
        let marker = inbox
            .marker(feed)
            .ok_or_else(|| bad_input("marker not stored"))?;
        Ok(MarkerNode::from(marker))
    }
}

/// Threads one user may have muted at once.
const MAX_MUTES: usize = 500;

/// What happened to the viewer's notifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Enum)]
pub enum NotificationEventKind {
    /// A new group.
    Added,
    /// A group changed: a new notification in it, read, archived.
    Updated,
    /// A group went (the oldest, beyond what a user keeps).
    Removed,
    /// Only the counts changed (seen on some device), or the stream began.
    Counts,
}

/// One change to the viewer's notifications, with the counts after it.
#[derive(SimpleObject)]
pub struct NotificationEvent {
    pub kind: NotificationEventKind,
    /// The group as it is now (`ADDED`, `UPDATED`).
    pub group: Option<NotificationGroupNode>,
    /// The group's id (every kind but `COUNTS`).
    pub group_id: Option<ID>,
    pub unseen_count: u64,
    pub unread_count: u64,
}

#[derive(Default)]
pub struct NotificationSubscription;

/// A `notificationEvents` stream: the counts first, then each change.
struct NoticeStream {
    live: Live,
    pending: VecDeque<NotificationEvent>,
    started: bool,
}

impl NoticeStream {
    async fn next(mut self) -> Option<(async_graphql::Result<NotificationEvent>, Self)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            let change = if self.started {
                match self.live.next().await? {
                    Ok(event) => match event.as_ref() {
                        Event::Notices(change) => change.clone(),
                        _ => continue,
                    },
                    Err(err) => return Some((Err(err), self)),
                }
            } else {
                self.started = true;
                NoticeEvent::default()
            };
            if let Err(err) = self.expand(change).await {
                return Some((Err(err), self));
            }
        }
    }

    /// Reads what `change` names and queues its events.
    async fn expand(&mut self, change: NoticeEvent) -> async_graphql::Result<()> {
        let (state, viewer) = (&self.live.state, &self.live.viewer);
        let store = state.store.as_ref();
        let mut ids = change.added.clone();
        ids.extend(&change.updated);
        let groups = if ids.is_empty() {
            Vec::new()
        } else {
            store
                .notice_groups(&viewer.tenant, &viewer.user, &ids)
                .await
                .api()?
        };
        let (inbox, c) = counts(state, viewer).await?;
        let event = |kind, group: Option<NoticeGroup>, id: Option<ObjectId>| NotificationEvent {
            kind,
            group_id: id.map(|id| GlobalId::NotificationGroup(id).encode()),
            group: group.map(|group| NotificationGroupNode {
                group,
                seen_until: inbox.seen_until,
            }),
            unseen_count: c.unseen_count,
            unread_count: c.unread_count,
        };
        for id in ids {
            let Some(group) = groups.iter().find(|g| g.id == id) else {
                continue;
            };
            let kind = if change.added.contains(&id) {
                NotificationEventKind::Added
            } else {
                NotificationEventKind::Updated
            };
            self.pending
                .push_back(event(kind, Some(group.clone()), Some(id)));
        }
        for id in change.removed {
            self.pending
                .push_back(event(NotificationEventKind::Removed, None, Some(id)));
        }
        if self.pending.is_empty() {
            self.pending
                .push_back(event(NotificationEventKind::Counts, None, None));
        }
        Ok(())
    }
}

#[Subscription]
impl NotificationSubscription {
    /// Changes to the viewer's notifications, from any source: new and
    /// updated groups, and the counts, also when another device of the
    /// viewer marks something seen or read. Begins with the counts.
    async fn notification_events(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<NotificationEvent>>> {
        let viewer = viewer(ctx)?;
        let topic = Topic::Notices {
            tenant: viewer.tenant.clone(),
            user: viewer.user.clone(),
        };
        let stream = NoticeStream {
            live: Live::open(ctx, topic)?,
            pending: VecDeque::new(),
            started: false,
        };
        Ok(until_error(stream, NoticeStream::next))
    }
}
