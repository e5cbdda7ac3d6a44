//! Reading feeds: a page of a home feed (read and decided by the timeline
//! layer, [`home`]), a slice or a ranked list, with its actions loaded in
//! one batch per store round and checked for access on read.
//!
//! Items the viewer may no longer read (scope narrowed, membership left, action
//! hidden) are dropped after the read. To still fill a page, a few more rounds
//! are read past them; the page's cursors are those of the items scanned, so
//! the next page starts after them even when none could be shown.

use std::collections::HashMap;

use async_graphql::{Context, ID};

use super::access::access_for as access;
use super::cursor::ListId;
use super::error::forbidden;
use super::error::{bad_input, ApiResultExt};
use super::global_id::opt_user_id_arg;
use super::page::PageInfo;
use super::types::{
    ActionConnection, ActionEdge, ActionNode, ActionSlot, FeedItemConnection, FeedItemEdge,
    FeedItemNode,
};
use super::{state, AppState, Role, Viewer};
use crate::descriptor::matching::Matching;
use crate::model::limits::{normalize_id, page_size};
use crate::model::{Action, Millis, ObjectId, Position, Stamp};
use crate::store::GroupFeeds;
use crate::store::{FeedRange, Outbox};
use crate::timeline::home;
use crate::timeline::read::MAX_ROUNDS;

/// How far before a page's read its `eventsCursor` reaches: a delivery stamps
/// its items when it starts and lands when it commits, so changes stamped just
/// before the read may not be in the page.
pub(crate) const EVENTS_GRACE_MS: Millis = 10_000;

/// Relay paging arguments.
pub struct Paging {
    pub first: Option<i32>,
    pub after: Option<String>,
    pub last: Option<i32>,
    pub before: Option<String>,
    /// A keyword filter over the actions' free text.
    pub matching: Option<String>,
}

/// `first`, `after` and `matching` of a list of actions.
pub type ListPaging<'a> = (Option<i32>, Option<String>, Option<&'a str>);

/// The keyword filter `matching` asks for, if any; `BAD_USER_INPUT` if it
/// is not one.
fn matching_arg(
    state: &AppState,
    matching: Option<&str>,
) -> async_graphql::Result<Option<Matching>> {
    let catalog = &state.descriptors;
    matching
        .map(|m| Matching::parse(m, catalog.clone()))
        .transpose()
        .api()
}

/// Loads a page's actions in one store call. (Not through the request's
/// DataLoader: a page has all its keys at once, and the loader would only add
/// a hand-off to a task of its own.)
async fn load_page(
    state: &AppState,
    viewer: &Viewer,
    ids: impl IntoIterator<Item = ObjectId>,
) -> async_graphql::Result<HashMap<ObjectId, Action>> {
    let mut ids: Vec<ObjectId> = ids.into_iter().collect();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    ids.sort_unstable();
    ids.dedup();
    let actions = state.store.get_actions(&viewer.tenant, &ids).await.api()?;
    Ok(actions.into_iter().map(|a| (a.id, a)).collect())
}

/// Where a feed page's actions are, from the page.
const FEED_ACTIONS: &[&[&str]] = &[&["edges", "node", "action"], &["nodes", "action"]];

/// Fields of an action its copies in a timeline do not keep up
/// (`--embed-actions`): a page that shows one loads its actions.
const NOT_COPIED: [&str; 3] = ["commentCount", "likeCount", "fanOut"];

/// What a page's actions need loaded along with them, from what the query
/// selects of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Their actors' profiles (`actor`).
    pub actor: bool,
    /// Whether the viewer likes them (`viewerHasLiked`).
    pub liked: bool,
    /// A field the copies of actions in a timeline do not keep up
    /// ([`NOT_COPIED`]): the page loads its actions.
    pub uncopied: bool,
}

impl Needs {
    /// What the query asks of the actions at `paths` (each a path of fields
    /// from the current one to an action).
    pub fn of(ctx: &Context<'_>, paths: &[&[&str]]) -> Self {
        Self {
            actor: ActionNode::selected(ctx, paths, "actor"),
            liked: ActionNode::selected(ctx, paths, "viewerHasLiked"),
            uncopied: NOT_COPIED
                .iter()
                .any(|field| ActionNode::selected(ctx, paths, field)),
        }
    }
}

/// The reader whose feed `feed(ownerId:)` reads: the viewer's own, or, for
/// `admin`, another user's as they see it.
pub fn feed_owner(viewer: &Viewer, owner_id: Option<&ID>) -> async_graphql::Result<Viewer> {
    Ok(match opt_user_id_arg("ownerId", owner_id)? {
        Some(owner) if owner != viewer.user => {
            if !viewer.has(Role::Admin) {
                return Err(forbidden(
                    "reading another user's feed needs the admin role",
                ));
            }
            Viewer {
                tenant: viewer.tenant.clone(),
                user: owner,
                roles: [Role::User].into(),
                expires_at: viewer.expires_at,
            }
        }
        _ => viewer.clone(),
    })
}

/// A page of `viewer`'s home feed, as [`home_page`] reads it for what the
/// query selects.
pub async fn home(
    ctx: &Context<'_>,
    viewer: &Viewer,
    paging: Paging,
) -> async_graphql::Result<FeedItemConnection> {
    home_page(state(ctx)?, viewer, paging, Needs::of(ctx, FEED_ACTIONS)).await
}

/// A page of `viewer`'s home feed, newest relevancy first: the timeline
/// layer reads and decides it ([`home`]); here it is shaped, its actions
/// loaded with what `needs` says.
pub async fn home_page(
    state: &AppState,
    viewer: &Viewer,
    paging: Paging,
    needs: Needs,
) -> async_graphql::Result<FeedItemConnection> {
    let list = ListId::home(&state.cursors, &viewer.tenant, &viewer.user);
    if paging.first.is_some() && paging.last.is_some() {
        return Err(bad_input("pass `first` or `last`, not both"));
    }
    let backwards = paging.last.is_some();
    let limit = if backwards {
        page_size("last", paging.last).api()?
    } else {
        page_size("first", paging.first).api()?
    };
    let after = paging
        .after
        .as_deref()
        .map(|c| list.decode_position(c))
        .transpose()?;
    let before = paging
        .before
        .as_deref()
        .map(|c| list.decode_position(c))
        .transpose()?;
    let matching = matching_arg(state, paging.matching.as_deref())?;
    // A filter reads the actions' text: copies carry it as well.
    let copies_serve = !needs.uncopied;
    let request = home::PageRequest {
        matching: matching.as_ref(),
        older_than: after,
        newer_than: before,
        limit,
        backwards,
        copies_serve,
    };
    let page = state
        .feeds()
        .page(&viewer.tenant, &viewer.user, request)
        .await
        .api()?;

    let (items, visible): (Vec<_>, Vec<_>) = page.items.into_iter().unzip();
    let nodes = ActionNode::load_along(state, viewer, visible, needs, &page.names).await?;
    let edges = items
        .into_iter()
        .zip(nodes)
        .map(|(item, node)| {
            let cursor = list.lazy_position(item.position());
            FeedItemEdge {
                cursor: cursor.clone(),
                node: FeedItemNode {
                    item,
                    cursor,
                    action: ActionSlot::Loaded(Box::new(node)),
                },
            }
        })
        .collect();
    // Paging from a cursor implies the cursor's own item lies on the other side.
    let (has_previous_page, has_next_page) = if backwards {
        (page.more, before.is_some())
    } else {
        (after.is_some(), page.more)
    };
    let events = ListId::feed_changes(&state.cursors, &viewer.tenant, &viewer.user);
    let events_cursor = events.stamp_cursor(Stamp {
        changed: page.read_at - EVENTS_GRACE_MS,
        action_id: ObjectId::from_bytes([0; 12]),
    });
    Ok(FeedItemConnection {
        events_cursor,
        edges,
        page_info: PageInfo {
            has_previous_page,
            has_next_page,
            start_cursor: page.newest.map(|p| list.position_cursor(p)),
            end_cursor: page.oldest.map(|p| list.position_cursor(p)),
        },
    })
}

/// Where a list's actions are, from the list.
const LIST_ACTIONS: &[&[&str]] = &[&["edges", "node"], &["nodes"]];

/// A page of the actions whose `refIds` contain `ref_id`, newest first.
async fn slice_page(
    state: &AppState,
    viewer: &Viewer,
    ref_id: &str,
    (first, after, matching): ListPaging<'_>,
    needs: Needs,
) -> async_graphql::Result<ActionConnection> {
    let ref_id = &normalize_id("refId", ref_id).api()?;
    let matching = matching_arg(state, matching)?;
    let limit = page_size("first", first).api()?;
    let list = ListId::slice(&state.cursors, &viewer.tenant, ref_id);
    let after = after.as_deref().map(|c| list.decode_id(c)).transpose()?;
    let store = &state.store;

    let mut kept: Vec<Action> = Vec::new();
    let mut before = after;
    let (mut newest, mut oldest) = (None, None);
    let mut more = false;
    for _ in 0..MAX_ROUNDS {
        let want = limit - kept.len();
        let mut ids = store
            .slice(&viewer.tenant, ref_id, before, want + 1)
            .await
            .api()?;
        more = ids.len() > want;
        ids.truncate(want);
        if let (Some(first), Some(last)) = (ids.first(), ids.last()) {
            newest = newest.or(Some(*first));
            oldest = Some(*last);
            before = oldest;
        }
        let mut actions = load_page(state, viewer, ids.iter().copied()).await?;
        let access = access(state, viewer, actions.values()).await?;
        kept.extend(
            ids.iter()
                .filter_map(|id| actions.remove(id))
                .filter(|action| access.can_read(action))
                .filter(|action| matching.as_ref().is_none_or(|m| m.matches(action))),
        );
        if kept.len() >= limit || !more {
            break;
        }
    }

    let edges = ActionNode::load_along(state, viewer, kept, needs, &HashMap::new())
        .await?
        .into_iter()
        .map(|node| ActionEdge {
            cursor: list.lazy_id(node.action.id),
            node,
        })
        .collect();
    Ok(ActionConnection {
        edges,
        page_info: PageInfo {
            has_previous_page: after.is_some(),
            has_next_page: more,
            start_cursor: newest.map(|id| list.id_cursor(id)),
            end_cursor: oldest.map(|id| list.id_cursor(id)),
        },
    })
}

/// A list of actions a query field reads, named by its arguments as sent.
pub enum ListOf {
    /// `slice(refId:)`.
    Slice(String),
    /// `actorFeed(userId:)`.
    Actor(ID),
    /// `groupFeed(groupId:)`.
    Group(ID),
    /// `discussions`.
    Discussions,
}

/// A page of a list of actions, as [`list_page`] reads it for what the
/// query selects.
pub async fn list(
    ctx: &Context<'_>,
    viewer: &Viewer,
    of: ListOf,
    paging: ListPaging<'_>,
) -> async_graphql::Result<ActionConnection> {
    let needs = Needs::of(ctx, LIST_ACTIONS);
    list_page(state(ctx)?, viewer, of, paging, needs).await
}

/// A page of a list of actions, its arguments checked.
pub async fn list_page(
    state: &AppState,
    viewer: &Viewer,
    of: ListOf,
    paging: ListPaging<'_>,
    needs: Needs,
) -> async_graphql::Result<ActionConnection> {
    match of {
        ListOf::Slice(ref_id) => slice_page(state, viewer, &ref_id, paging, needs).await,
        ListOf::Actor(user_id) => {
            let user_id = super::global_id::user_id_arg("userId", &user_id)?;
            ranked_page(state, viewer, Ranked::Actor(&user_id), paging, needs).await
        }
        ListOf::Group(group_id) => {
            let group_id = normalize_id("groupId", &group_id).api()?;
            ranked_page(state, viewer, Ranked::Group(&group_id), paging, needs).await
        }
        ListOf::Discussions => ranked_page(state, viewer, Ranked::Discussions, paging, needs).await,
    }
}

/// Lists of actions ranked by a time of their own, read from the store as
/// positions.
#[derive(Clone, Copy)]
pub enum Ranked<'a> {
    /// One actor's actions, newest first by when they happened.
    Actor(&'a str),
    /// The viewer's discussions, the latest commented first.
    Discussions,
    /// One group's feed: its last posts, newest first by when they happened.
    Group(&'a str),
}

/// A page of a [`Ranked`] list, holding only actions `viewer` may see.
async fn ranked_page(
    state: &AppState,
    viewer: &Viewer,
    source: Ranked<'_>,
    (first, after, matching): ListPaging<'_>,
    needs: Needs,
) -> async_graphql::Result<ActionConnection> {
    let matching = matching_arg(state, matching)?;
    let cursors = &state.cursors;
    let list = match source {
        Ranked::Actor(actor) => ListId::actor(cursors, &viewer.tenant, actor),
        Ranked::Discussions => ListId::discussions(cursors, &viewer.tenant, &viewer.user),
        Ranked::Group(group) => {
            super::edges::require_group(state, &viewer.tenant, group).await?;
            ListId::group(cursors, &viewer.tenant, group)
        }
    };
    let limit = page_size("first", first).api()?;
    let after = after
        .as_deref()
        .map(|c| list.decode_position(c))
        .transpose()?;
    let store = &state.store;

    let mut kept: Vec<(Position, Action)> = Vec::new();
    let mut older_than = after;
    let (mut newest, mut oldest) = (None, None);
    let mut more = false;
    for _ in 0..MAX_ROUNDS {
        let want = limit - kept.len();
        let range = FeedRange {
            older_than,
            newer_than: None,
            limit: want + 1,
            from_oldest: false,
        };
        let mut positions = match source {
            Ranked::Actor(actor) => {
                let read = [(Outbox::Actor(actor.to_string()), range)];
                let found = store.outboxes(&viewer.tenant, &read).await;
                found.map(|mut found| found.remove(0).into_iter().map(|p| p.position).collect())
            }
            Ranked::Discussions => store.discussions(&viewer.tenant, &viewer.user, range).await,
            Ranked::Group(group) => {
                let size = state.group_feed_size;
                store.group_feed(&viewer.tenant, group, size, range).await
            }
        }
        .api()?;
        more = positions.len() > want;
        positions.truncate(want);
        if let (Some(first), Some(last)) = (positions.first(), positions.last()) {
            newest = newest.or(Some(*first));
            oldest = Some(*last);
            older_than = oldest;
        }
        let mut actions = load_page(state, viewer, positions.iter().map(|p| p.action_id)).await?;
        let access = access(state, viewer, actions.values()).await?;
        kept.extend(positions.iter().filter_map(|p| {
            let action = actions.remove(&p.action_id)?;
            let matches = matching.as_ref().is_none_or(|m| m.matches(&action));
            (matches && access.can_read(&action)).then_some((*p, action))
        }));
        if kept.len() >= limit || !more {
            break;
        }
    }

    let (positions, actions): (Vec<Position>, Vec<Action>) = kept.into_iter().unzip();
    let edges = ActionNode::load_along(state, viewer, actions, needs, &HashMap::new())
        .await?
        .into_iter()
        .zip(positions)
        .map(|(node, position)| ActionEdge {
            cursor: list.lazy_position(position),
            node,
        })
        .collect();
    Ok(ActionConnection {
        edges,
        page_info: PageInfo {
            has_previous_page: after.is_some(),
            has_next_page: more,
            start_cursor: newest.map(|p| list.position_cursor(p)),
            end_cursor: oldest.map(|p| list.position_cursor(p)),
        },
    })
}
