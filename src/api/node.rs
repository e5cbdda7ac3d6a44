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
use super::{state, viewer, AppState, Role, Viewer};
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
/// `user(userId:)` find them: one read of each kind.
/// The other kinds of node are left out.
async fn actions_and_users(
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
async fn comments(
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

/// What the nodes found by id need loaded with the actions they show: an
/// action's own (at the node), and a feed item's (at its `action`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NodeNeeds {
    pub actions: Needs,
    pub items: Needs,
}

/// The nodes `wanted` names, in order, null where there is none the viewer
/// may see, for either executor: each kind read once for all its ids, under
/// its rule (see the module's).
pub(crate) async fn find(
    state: &AppState,
    viewer: &Viewer,
    wanted: &[GlobalId],
    needs: NodeNeeds,
) -> async_graphql::Result<Vec<Option<Node>>> {
    let (found, comments, items, groups) = tokio::join!(
        actions_and_users(state, viewer, wanted, needs.actions),
        comments(state, viewer, wanted),
        feed_items(state, viewer, wanted, needs.items),
        notification_groups(state, viewer, wanted)
    );
    let ((actions, users), comments) = (found?, comments?);
    let groups = groups?;
    let nodes = wanted.iter().zip(items?).map(|(id, item)| match id {
        GlobalId::Action(action) => actions
            .get(action)
            .map(|node| Node::Action(Box::new(node.clone()))),
        GlobalId::User(user) => users.get(user).cloned().map(Node::User),
        GlobalId::Comment { comment, .. } => comments.get(comment).cloned().map(Node::Comment),
        GlobalId::FeedItem { .. } => item.map(Node::FeedItem),
        GlobalId::NotificationGroup(group) => {
            groups.get(group).cloned().map(Node::NotificationGroup)
        }
        GlobalId::Notification { group, member } => groups
            .get(group)
            .and_then(|g| g.member(*member))
            .map(Node::Notification),
    });
    Ok(nodes.collect())
}

/// The nodes of `ids`, in order, null where there is none the viewer may
/// see: `node(id:)` and `nodes(ids:)`.
pub async fn resolve(ctx: &Context<'_>, ids: &[ID]) -> async_graphql::Result<Vec<Option<Node>>> {
    let viewer = viewer(ctx)?;
    let wanted = decode(ids)?;
    let needs = NodeNeeds {
        actions: Needs::of(ctx, &[&[]]),
        items: Needs::of(ctx, &[&["action"]]),
    };
    find(state(ctx)?, viewer, &wanted, needs).await
}

/// The feed items `wanted` names, one entry per id (`None` for another
/// kind of node), each as its owner's feed shows it: for the owner, or an
/// `admin` (as `feed(ownerId:)` allows). Their actions are read together,
/// whether or not the viewer may read them (a feed item's rule is its
/// owner's), and loaded with what `needs` says; the timeline layer finds
/// and decides each item ([`Feeds::item`](crate::timeline::home::Feeds::item)):
/// null where the feed would not show it.
async fn feed_items(
    state: &AppState,
    viewer: &Viewer,
    wanted: &[GlobalId],
    needs: Needs,
) -> async_graphql::Result<Vec<Option<FeedItemNode>>> {
    let shown = |owner: &str| owner == viewer.user || viewer.has(Role::Admin);
    let mut ids: Vec<ObjectId> = wanted
        .iter()
        .filter_map(|id| match id {
            GlobalId::FeedItem { action, owner } if shown(owner) => Some(*action),
            _ => None,
        })
        .collect();
    if ids.is_empty() {
        return Ok(wanted.iter().map(|_| None).collect());
    }
    ids.sort_unstable();
    ids.dedup();
    let tenant = viewer.tenant.as_str();
    let actions: HashMap<ObjectId, Action> = state
        .store
        .get_actions(tenant, &ids)
        .await
        .api()?
        .into_iter()
        .map(|action| (action.id, action))
        .collect();
    let feeds = state.feeds();
    let found = futures_util::future::join_all(wanted.iter().map(|id| async {
        let GlobalId::FeedItem { action, owner } = id else {
            return Ok(None);
        };
        let Some(action) = actions.get(action).filter(|_| shown(owner)) else {
            return Ok(None);
        };
        let item = feeds.item(tenant, owner, action).await.api()?;
        Ok::<_, async_graphql::Error>(item.map(|item| (item, action.clone())))
    }))
    .await;
    let (mut items, mut shown_actions) = (Vec::with_capacity(found.len()), Vec::new());
    for found in found {
        match found? {
            Some((item, action)) => {
                items.push(Some(item));
                shown_actions.push(action);
            }
            None => items.push(None),
        }
    }
    let mut nodes = ActionNode::load_along(state, viewer, shown_actions, needs, &HashMap::new())
        .await?
        .into_iter();
    Ok(items
        .into_iter()
        .map(|item| {
            let item = item?;
            let action = nodes.next()?;
            let list = ListId::home(&state.cursors, tenant, &item.owner);
            Some(FeedItemNode {
                cursor: list.lazy_position(item.position()),
                item,
                action: ActionSlot::Loaded(Box::new(action)),
            })
        })
        .collect())
}

/// The viewer's notification groups `wanted` names (as groups or by one of
/// their members), by id, read together.
async fn notification_groups(
    state: &AppState,
    viewer: &Viewer,
    wanted: &[GlobalId],
) -> async_graphql::Result<HashMap<ObjectId, NotificationGroupNode>> {
    let mut ids: Vec<ObjectId> = wanted
        .iter()
        .filter_map(|id| match id {
            GlobalId::NotificationGroup(group) | GlobalId::Notification { group, .. } => {
                Some(*group)
            }
            _ => None,
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    notifications::groups(state, viewer, &ids).await
}
