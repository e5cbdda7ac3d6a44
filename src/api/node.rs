//! Relay object identification: the `Node` interface, and what `node(id:)`
//! and `nodes(ids:)` find by a global id, under the rules the other reads
//! apply: an action as `action(actionId:)` shows it, a user as `user(userId:)`, a
//! comment to whoever may read its action, a feed item to its owner (or
//! `admin`) as `feed` shows it, a notification (group) to its owner.

use std::collections::{BTreeSet, HashMap};

use async_graphql::{Context, Interface, ID};

use super::cursor::ListId;
use super::error::{bad_input, ApiResultExt};
use super::feed::Needs;
use super::global_id::{before, GlobalId};
use super::notifications::{self, NotificationGroupNode, NotificationNode};
use super::query::{readable_actions, users_by_id};
use super::types::{ActionNode, ActionSlot, CommentNode, FeedItemNode, UserNode};
use super::{loaders, state, viewer, AppState, Role, Viewer};
use crate::model::limits::MAX_LIST_LEN;
use crate::model::{Action, ObjectId};

/// An object with a global id, found again by `node(id:)`.
#[derive(Interface)]
#[graphql(field(
    name = "id",
    ty = "ID",
    desc = "Opaque global id: pass it to `node(id:)`, or to any argument that takes an id of this type."
))]
pub enum Node {
    // Boxed: an action is far larger than the other nodes.
    Action(Box<ActionNode>),
    User(UserNode),
    Comment(CommentNode),
    FeedItem(FeedItemNode),
    NotificationGroup(NotificationGroupNode),
    Notification(NotificationNode),
}

/// The global ids `ids` name, at most [`MAX_LIST_LEN`]: the argument
/// rule of `node` and `nodes`, for either executor.
pub(crate) fn decode(ids: &[ID]) -> async_graphql::Result<Vec<GlobalId>> {
    if ids.len() > MAX_LIST_LEN {
        return Err(bad_input(format!(
            "ids has {} entries; at most {MAX_LIST_LEN} are allowed",
            ids.len()
        )));
    }
    ids.iter()
        .map(|id| {
            GlobalId::decode(id)?.ok_or_else(|| {
                bad_input(format!(
                    "{:?} is not a global id (take it from an object's `id`)",
                    id.as_str()
                ))
            })
        })
        .collect()
}

/// The actions and users `wanted` names, as `action(actionId:)` and
/// `user(userId:)` find them: one read of each kind, for either executor.
/// The other kinds of node are left out.
pub(crate) async fn actions_and_users(
    state: &AppState,
    viewer: &Viewer,
    wanted: &[GlobalId],
    needs: Needs,
) -> async_graphql::Result<(HashMap<ObjectId, ActionNode>, HashMap<String, UserNode>)> {
    let mut actions = Vec::new();
    let mut users = Vec::new();
    for id in wanted {
        match id {
            GlobalId::Action(action) => actions.push(*action),
            GlobalId::User(user) => users.push(user.clone()),
            _ => {}
        }
    }
    let (actions, users) = tokio::join!(
        readable_actions(state, viewer, &actions, needs),
        users_by_id(state, viewer, &users)
    );
    let actions = actions?
        .into_iter()
        .flatten()
        .map(|node| (node.action.id, node))
        .collect();
    Ok((actions, users?))
}

/// The comments `wanted` names that the viewer may see (whoever may read
/// their action), by comment id: one read of their actions, as
/// `action(actionId:)` reads them, then the comments together. Comments are
/// read by action, in id order: each from just before it.
pub(crate) async fn comments(
    state: &AppState,
    viewer: &Viewer,
    wanted: &[GlobalId],
) -> async_graphql::Result<HashMap<ObjectId, CommentNode>> {
    let of: Vec<(ObjectId, ObjectId)> = wanted
        .iter()
        .filter_map(|id| match id {
            GlobalId::Comment { action, comment } => Some((*action, *comment)),
            _ => None,
        })
        .collect();
    if of.is_empty() {
        return Ok(HashMap::new());
    }
    let actions: Vec<ObjectId> = of.iter().map(|(action, _)| *action).collect();
    let readable: BTreeSet<ObjectId> = readable_actions(state, viewer, &actions, Needs::default())
        .await?
        .into_iter()
        .flatten()
        .map(|node| node.action.id)
        .collect();
    let shown: Vec<(ObjectId, ObjectId)> = of
        .into_iter()
        .filter(|(a, _)| readable.contains(a))
        .collect();
    let found = futures_util::future::join_all(shown.iter().map(|(action, comment)| {
        state
            .store
            .comments(&viewer.tenant, *action, before(*comment), 1)
    }))
    .await;
    let mut out = HashMap::new();
    for ((_, comment), read) in shown.iter().zip(found) {
        if let Some(found) = read.api()?.into_iter().next().filter(|c| c.id == *comment) {
            out.insert(*comment, CommentNode(found));
        }
    }
    Ok(out)
}

/// The nodes of `ids`, in order, null where there is none the viewer may
/// see. Actions and users load as [`actions_and_users`] finds them; the
/// actions of comments and feed items in one batch.
pub async fn resolve(ctx: &Context<'_>, ids: &[ID]) -> async_graphql::Result<Vec<Option<Node>>> {
    let viewer = viewer(ctx)?;
    let wanted = decode(ids)?;
    let needs = Needs::of(ctx, &[&[]]);
    let (found, users) = actions_and_users(state(ctx)?, viewer, &wanted, needs).await?;
    let comments = comments(state(ctx)?, viewer, &wanted).await?;

    // Feed items: their actions, whether or not the viewer may read them
    // (a feed item's rule is its owner's).
    let along: BTreeSet<ObjectId> = wanted
        .iter()
        .filter_map(|id| match id {
            GlobalId::FeedItem { action, .. } => Some(*action),
            _ => None,
        })
        .collect();
    let actions = loaders(ctx)?.actions.load_many(along).await.api()?;

    let mut nodes = Vec::with_capacity(wanted.len());
    for id in wanted {
        let node = match id {
            GlobalId::Action(action) => found
                .get(&action)
                .map(|node| Node::Action(Box::new(node.clone()))),
            GlobalId::User(user) => users.get(&user).cloned().map(Node::User),
            GlobalId::Comment { comment, .. } => comments.get(&comment).cloned().map(Node::Comment),
            GlobalId::FeedItem { action, owner } => {
                find_feed_item(ctx, viewer, actions.get(&action), &owner)
                    .await?
                    .map(Node::FeedItem)
            }
            GlobalId::NotificationGroup(group) => notifications::group_node(ctx, viewer, group)
                .await?
                .map(Node::NotificationGroup),
            GlobalId::Notification { group, member } => {
                notifications::group_node(ctx, viewer, group)
                    .await?
                    .and_then(|g| g.member(member))
                    .map(Node::Notification)
            }
        };
        nodes.push(node);
    }
    Ok(nodes)
}

/// `owner`'s item of `action`, as their feed shows it: for the owner, or an
/// `admin` (as `feed(ownerId:)` allows). The timeline layer finds and
/// decides it ([`Feeds::item`](crate::timeline::home::Feeds::item)): null
/// where the feed would not show it.
async fn find_feed_item(
    ctx: &Context<'_>,
    viewer: &Viewer,
    action: Option<&Action>,
    owner: &str,
) -> async_graphql::Result<Option<FeedItemNode>> {
    if owner != viewer.user && !viewer.has(Role::Admin) {
        return Ok(None);
    }
    let Some(action) = action else {
        return Ok(None);
    };
    let state = state(ctx)?;
    let tenant = viewer.tenant.as_str();
    let Some(item) = state.feeds().item(tenant, owner, action).await.api()? else {
        return Ok(None);
    };
    let list = ListId::home(&state.cursors, tenant, owner);
    Ok(Some(FeedItemNode {
        cursor: list.lazy_position(item.position()),
        item,
        action: ActionSlot::Loaded(Box::new(ActionNode::new(action.clone()))),
    }))
}
