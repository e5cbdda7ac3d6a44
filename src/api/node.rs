//! Relay object identification: the `Node` interface, and what `node(id:)`
//! and `nodes(ids:)` find by a global id, under the rules the other reads
//! apply: an action as `action(actionId:)` shows it, a user as `user(userId:)`, a
//! comment to whoever may read its action, a feed item to its owner (or
//! `admin`) as `feed` shows it, a notification (group) to its owner.

use std::collections::BTreeSet;

use async_graphql::{Context, Interface, ID};

use super::access::access;
use super::cursor::ListId;
use super::error::{bad_input, ApiResultExt};
use super::global_id::{before, GlobalId};
use super::notifications::{self, NotificationGroupNode, NotificationNode};
use super::types::{ActionNode, ActionSlot, CommentNode, FeedItemNode, UserNode};
use super::{loaders, state, viewer, Role, Viewer};
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

/// The nodes of `ids`, in order, null where there is none the viewer may
/// see. Actions (those named, and those of comments and feed items) load
/// in one batch, users in another.
pub async fn resolve(ctx: &Context<'_>, ids: &[ID]) -> async_graphql::Result<Vec<Option<Node>>> {
    let viewer = viewer(ctx)?;
    if ids.len() > MAX_LIST_LEN {
        return Err(bad_input(format!(
            "ids has {} entries; at most {MAX_LIST_LEN} are allowed",
            ids.len()
        )));
    }
    let wanted = ids
        .iter()
        .map(|id| {
            GlobalId::decode(id)?.ok_or_else(|| {
                bad_input(format!(
                    "{:?} is not a global id (take it from an object's `id`)",
                    id.as_str()
                ))
            })
        })
        .collect::<async_graphql::Result<Vec<GlobalId>>>()?;

    let action_ids: BTreeSet<ObjectId> = wanted
        .iter()
        .filter_map(|id| match id {
            GlobalId::Action(action)
            | GlobalId::Comment { action, .. }
            | GlobalId::FeedItem { action, .. } => Some(*action),
            GlobalId::User(_) | GlobalId::NotificationGroup(_) | GlobalId::Notification { .. } => {
                None
            }
        })
        .collect();
    let user_ids: BTreeSet<String> = wanted
        .iter()
        .filter_map(|id| match id {
            GlobalId::User(user) => Some(user.clone()),
            _ => None,
        })
        .collect();
    let loaders = loaders(ctx)?;
    let (actions, users) = tokio::join!(
        loaders.actions.load_many(action_ids),
        loaders.users.load_many(user_ids)
    );
    let (actions, users) = (actions.api()?, users.api()?);
    let access = access(ctx, viewer, actions.values()).await?;
    let readable = |id: &ObjectId| actions.get(id).filter(|a| access.can_read(a));

    let mut nodes = Vec::with_capacity(wanted.len());
    for id in wanted {
        let node = match id {
            GlobalId::Action(action) => {
                readable(&action).map(|a| Node::Action(Box::new(ActionNode::new(a.clone()))))
            }
            GlobalId::User(user) => users.get(&user).cloned().map(|u| Node::User(u.into())),
            GlobalId::Comment { action, comment } => match readable(&action) {
                Some(_) => find_comment(ctx, viewer, action, comment)
                    .await?
                    .map(Node::Comment),
                None => None,
            },
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

/// One comment of an action (the caller checked that the viewer may read
/// the action). Comments are read by action, in id order: one read from
/// just before this one.
async fn find_comment(
    ctx: &Context<'_>,
    viewer: &Viewer,
    action: ObjectId,
    comment: ObjectId,
) -> async_graphql::Result<Option<CommentNode>> {
    let found = state(ctx)?
        .store
        .comments(&viewer.tenant, action, before(comment), 1)
        .await
        .api()?;
    Ok(found
        .into_iter()
        .next()
        .filter(|c| c.id == comment)
        .map(CommentNode))
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
