//! Notifications in the API: the viewer's notification groups and counts,
//! marking them seen, read or archived, preferences, markers, and the live
//! `notificationEvents` stream.
//!
//! Everything here is the viewer's own: no argument names another user,
//! and an id of a group that is not the viewer's finds nothing.

mod live;
mod mutation;
mod nodes;

use std::collections::HashMap;

use async_graphql::{Context, Object};

use super::access::access;
use super::cost::{list_cost, page_cost};
use super::cursor::ListId;
use super::error::ApiResultExt;
use super::page::PageInfo;

/// The feeds a marker is kept for: one marker each at most.
const MARKER_FEEDS: usize = 2;
use super::types::ActionNode;
use super::{loaders, state, viewer, AppState, Viewer};
use crate::model::limits::page_size;
use crate::model::{Inbox, MarkerFeed, NoticeGroup, NoticeRange, ObjectId, Position};
use crate::store::{NoticeSelect, Records};

pub use live::{NotificationEvent, NotificationSubscription};
pub use mutation::NotificationMutation;
use nodes::NotificationGroupEdge;
pub(crate) use nodes::{actors_first, members_first, NotificationGroupConnection};
pub use nodes::{
    MarkerNode, NotificationCounts, NotificationGroupNode, NotificationNode,
    NotificationPreferences,
};

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

fn notices_list<'k>(state: &'k AppState, viewer: &Viewer) -> ListId<'k> {
    ListId::notifications(&state.cursors, &viewer.tenant, &viewer.user)
}

pub(crate) async fn counts(
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

/// The viewer's groups of `ids` as nodes, by id: those that are theirs and
/// listed, read together, for either executor.
pub(crate) async fn groups(
    state: &AppState,
    viewer: &Viewer,
    ids: &[ObjectId],
) -> async_graphql::Result<HashMap<ObjectId, NotificationGroupNode>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let store = state.store.as_ref();
    let (groups, inbox) = tokio::join!(
        store.notice_groups(&viewer.tenant, &viewer.user, NoticeSelect::Ids(ids)),
        store.inbox(&viewer.tenant, &viewer.user)
    );
    let seen_until = inbox.api()?.seen_until;
    Ok(groups
        .api()?
        .into_iter()
        .filter(|g| g.visible > 0 && ids.contains(&g.id))
        .map(|group| (group.id, NotificationGroupNode { group, seen_until }))
        .collect())
}

/// The viewer's markers of `feeds` (all, when `None`) that were ever set,
/// as `markers` lists them for either executor.
pub(crate) async fn markers(
    state: &AppState,
    viewer: &Viewer,
    feeds: Option<&[MarkerFeed]>,
) -> async_graphql::Result<Vec<MarkerNode>> {
    let inbox = state
        .store
        .inbox(&viewer.tenant, &viewer.user)
        .await
        .api()?;
    Ok(inbox
        .markers
        .iter()
        .filter(|m| feeds.is_none_or(|f| f.contains(&m.feed)))
        .map(MarkerNode::from)
        .collect())
}

/// A page of the viewer's notification groups, with the badge counts, as
/// `notifications` reads it for either executor.
pub(crate) async fn page(
    state: &AppState,
    viewer: &Viewer,
    first: Option<i32>,
    after: Option<String>,
    unread_only: Option<bool>,
) -> async_graphql::Result<NotificationGroupConnection> {
    let unread_only = unread_only.unwrap_or(false);
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
        store.notice_groups(&viewer.tenant, &viewer.user, NoticeSelect::Page(range)),
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
        page(state(ctx)?, viewer(ctx)?, first, after, unread_only).await
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
    #[graphql(complexity = "list_cost(MARKER_FEEDS, child_complexity)")]
    async fn markers(
        &self,
        ctx: &Context<'_>,
        feeds: Option<Vec<MarkerFeed>>,
    ) -> async_graphql::Result<Vec<MarkerNode>> {
        markers(state(ctx)?, viewer(ctx)?, feeds.as_deref()).await
    }
}
