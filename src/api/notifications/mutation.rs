//! Marking notifications seen, read or archived; preferences; markers.

use async_graphql::{Context, Object, ID};
use chrono::{DateTime, Utc};

use super::nodes::{
    MarkerNode, NotificationCounts, NotificationGroupNode, NotificationPreferences,
    NotificationsChanged,
};
use super::{counts, notices_list, readable};
use crate::api::cursor::ListId;
use crate::api::error::{bad_input, coded, not_found, ApiResultExt, CONFLICT};
use crate::api::global_id::{action_id_arg, GlobalId};
use crate::api::{state, viewer, AppState, Viewer};
use crate::events::NoticeEvent;
use crate::model::limits::MAX_LIST_LEN;
use crate::model::{Marker, MarkerFeed, Mute, NoticeReason};
use crate::notify::{self, inbox, inbox::Target};
use crate::store::NoticeSelect;

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

/// Reads `ids` as targets among the viewer's notifications: an id of
/// nothing of theirs (another user's, or none at all) is `NOT_FOUND`, and
/// the mark or archive changes nothing.
async fn owned(
    state: &AppState,
    viewer: &Viewer,
    ids: &[ID],
) -> async_graphql::Result<Vec<Target>> {
    let targets = targets(ids)?;
    let mut groups: Vec<_> = targets.iter().map(|t| t.group()).collect();
    groups.sort_unstable();
    groups.dedup();
    let found = (state.store)
        .notice_groups(&viewer.tenant, &viewer.user, NoticeSelect::Ids(&groups))
        .await
        .api()?;
    for (id, target) in ids.iter().zip(&targets) {
        if !found.iter().any(|g| g.id == target.group()) {
            return Err(not_found(format!(
                "no notification {:?} of yours",
                id.as_str()
            )));
        }
    }
    Ok(targets)
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
        Change::Read(ids) => {
            inbox::mark_read(store, tenant, owner, &owned(state, viewer, ids).await?).await
        }
        Change::AllRead => inbox::mark_all_read(store, tenant, owner).await,
        Change::Archive(ids) => {
            inbox::archive(store, tenant, owner, &owned(state, viewer, ids).await?).await
        }
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
        .notice_groups(
            &viewer.tenant,
            &viewer.user,
            NoticeSelect::Ids(&change.updated),
        )
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
    /// their ids (at most 100). An id of nothing of the viewer's is
    /// `NOT_FOUND`, and then nothing changes.
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
    /// group again, with only what is new. An id of nothing of the viewer's
    /// is `NOT_FOUND`, and then nothing changes.
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
            return Err(not_found(format!("no action {id}")));
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
pub(super) const MAX_MUTES: usize = 500;
