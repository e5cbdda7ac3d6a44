//! The roots that find records by id, planned: `action(actionId:)`,
//! `actions(actionIds:)`, `user(userId:)`, and `node(id:)` / `nodes(ids:)`
//! of every kind of node (actions, users, comments, feed items,
//! notification groups and notifications), each read by the function its
//! resolver reads with. They are nullable: an error of theirs (an id that
//! does not parse, say) leaves the request to async-graphql, which nulls
//! what the specification says it nulls.

use super::actions::{action_needs, ActionField, ItemField};
use super::bind::{Bind, Fallback};
use super::comments::CommentField;
use super::compile::{arg, Arg, Compiler, Fields, Occurrences};
use super::notices::{self, GroupField, Loaded, NoticeField, Wants};
use super::out::Out;
use super::run::Run;
use super::users::UserField;
use crate::api::feed::Needs;
use crate::api::global_id::{action_id_arg, user_id_arg};
use crate::api::node::{self, Node, NodeNeeds};
use crate::api::query::{readable_actions, user_by_id};
use crate::api::types::{ActionNode, UserNode};
use crate::api::{AppState, Session};
use crate::model::limits::MAX_LIST_LEN;

/// Which records a root finds, by the argument that names them.
#[derive(Debug)]
pub enum ById {
    Action {
        id: Arg,
        fields: Fields<ActionField>,
    },
    Actions {
        ids: Arg,
        fields: Fields<ActionField>,
    },
    User {
        id: Arg,
        fields: Fields<UserField>,
    },
    /// `node` (one id) or `nodes`: the fields each kind of node shows.
    Nodes {
        ids: Arg,
        one: bool,
        of: NodeFields,
    },
}

/// The fields asked of each kind of node.
#[derive(Debug)]
pub struct NodeFields {
    action: Fields<ActionField>,
    user: Fields<UserField>,
    comment: Fields<CommentField>,
    item: Fields<ItemField>,
    group: Fields<GroupField>,
    notice: Fields<NoticeField>,
}

/// What such a root found.
pub(super) enum Found {
    Action(Option<Box<ActionNode>>),
    Actions(Vec<Option<ActionNode>>),
    User(Option<UserNode>),
    /// The nodes, and what the notification groups and notifications
    /// among them show.
    Nodes(Vec<Option<Node>>, Option<Loaded>),
}

impl<'a> Compiler<'a> {
    /// `action`, `actions` or `user`, named by their current argument
    /// (the deprecated `id` / `ids` are left to async-graphql).
    pub(super) fn by_id(&self, name: &str, occ: &Occurrences<'a>) -> Option<ById> {
        let only = |arg_name: &str| {
            let args = &occ[0].node.arguments;
            args.len() == 1 && args[0].0.node == arg_name
        };
        let sets = Self::subsets(occ);
        let by_id = match name {
            "action" if only("actionId") => ById::Action {
                id: arg(occ[0], "actionId"),
                fields: self.action(&sets)?,
            },
            "actions" if only("actionIds") => ById::Actions {
                ids: arg(occ[0], "actionIds"),
                fields: self.action(&sets)?,
            },
            "user" if only("userId") => ById::User {
                id: arg(occ[0], "userId"),
                fields: self.user(&sets)?,
            },
            "node" | "nodes" if only(if name == "node" { "id" } else { "ids" }) => ById::Nodes {
                ids: arg(occ[0], if name == "node" { "id" } else { "ids" }),
                one: name == "node",
                of: NodeFields {
                    action: self.action(&sets)?,
                    user: self.user(&sets)?,
                    comment: self.comment(&sets)?,
                    item: self.item(&sets)?,
                    group: self.group(&sets)?,
                    notice: self.notice(&sets)?,
                },
            },
            _ => return None,
        };
        Some(by_id)
    }
}

/// Finds what `by_id` names; any error is async-graphql's to answer.
pub(super) async fn find(
    state: &AppState,
    session: &Session,
    bind: &Bind<'_>,
    by_id: &ById,
) -> Result<Found, Fallback> {
    let viewer = session.viewer().map_err(|_| Fallback)?;
    let mut needs = Needs::default();
    match by_id {
        ById::Action { id, fields } => {
            let id = bind.id(id)?.ok_or(Fallback)?;
            let id = action_id_arg("actionId", &id).map_err(|_| Fallback)?;
            action_needs(fields, &mut needs);
            let mut found = readable_actions(state, viewer, &[id], needs)
                .await
                .map_err(|_| Fallback)?;
            Ok(Found::Action(found.pop().flatten().map(Box::new)))
        }
        ById::Actions { ids, fields } => {
            let ids = bind.ids(ids)?;
            if ids.len() > MAX_LIST_LEN {
                return Err(Fallback);
            }
            let ids = ids
                .iter()
                .map(|id| action_id_arg("actionIds", id))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| Fallback)?;
            action_needs(fields, &mut needs);
            let found = readable_actions(state, viewer, &ids, needs)
                .await
                .map_err(|_| Fallback)?;
            Ok(Found::Actions(found))
        }
        ById::User { id, .. } => {
            let id = bind.id(id)?.ok_or(Fallback)?;
            let id = user_id_arg("userId", &id).map_err(|_| Fallback)?;
            let found = user_by_id(state, viewer, &id).await.map_err(|_| Fallback)?;
            Ok(Found::User(found))
        }
        ById::Nodes { ids, one, of } => {
            let ids = match one {
                true => vec![bind.id(ids)?.ok_or(Fallback)?],
                false => bind.ids(ids)?,
            };
            let wanted = node::decode(&ids).map_err(|_| Fallback)?;
            let mut needs = NodeNeeds::default();
            action_needs(&of.action, &mut needs.actions);
            for f in &of.item {
                if let ItemField::Action(action) = &f.kind {
                    action_needs(action, &mut needs.items);
                }
            }
            let found = node::find(state, viewer, &wanted, needs)
                .await
                .map_err(|_| Fallback)?;
            let loaded = notices_of(state, session, bind, of, &found).await?;
            Ok(Found::Nodes(found, loaded))
        }
    }
}

/// Loads what the notification groups and notifications among `found`
/// show, as a page of them loads it; `None` when there are none.
async fn notices_of(
    state: &AppState,
    session: &Session,
    bind: &Bind<'_>,
    of: &NodeFields,
    found: &[Option<Node>],
) -> Result<Option<Loaded>, Fallback> {
    let (mut groups, mut notices) = (Vec::new(), Vec::new());
    for node in found.iter().flatten() {
        match node {
            Node::NotificationGroup(group) => groups.push(group),
            Node::Notification(notice) => notices.push(notice),
            _ => {}
        }
    }
    if groups.is_empty() && notices.is_empty() {
        return Ok(None);
    }
    let mut wants = Wants::default();
    Wants::of(bind, &of.group, &mut wants)?;
    Wants::of_notices(&of.notice, &mut wants);
    // A failed load is a nested field's error, which async-graphql places.
    let loaded = notices::load(state, session, &groups, &notices, &wants)
        .await
        .map_err(|_| Fallback)?;
    Ok(Some(loaded))
}

impl Run<'_> {
    /// Writes what was found; whether it is not null.
    pub(super) fn found(&self, out: &mut Out, by_id: &ById, found: &Found) -> bool {
        match (by_id, found) {
            (ById::Action { fields, .. }, Found::Action(Some(node))) => {
                self.action(out, fields, node);
                true
            }
            (ById::Actions { fields, .. }, Found::Actions(nodes)) => {
                out.list(nodes, |out, node| match node {
                    Some(node) => self.action(out, fields, node),
                    None => out.null(),
                });
                true
            }
            (ById::User { fields, .. }, Found::User(Some(node))) => {
                self.user(out, fields, node);
                true
            }
            (ById::Nodes { one, of, .. }, Found::Nodes(nodes, loaded)) => {
                let write = |out: &mut Out, node: &Node| self.node(out, of, node, loaded.as_ref());
                match (one, nodes.first()) {
                    (true, Some(Some(node))) => write(out, node),
                    (true, _) => {
                        out.null();
                        return false;
                    }
                    (false, _) => out.list(nodes, |out, node| match node {
                        Some(node) => write(out, node),
                        None => out.null(),
                    }),
                }
                true
            }
            _ => {
                out.null();
                false
            }
        }
    }
}

impl Run<'_> {
    /// Writes a node with the fields asked of its kind.
    fn node(&self, out: &mut Out, of: &NodeFields, node: &Node, loaded: Option<&Loaded>) {
        match (node, loaded) {
            (Node::Action(node), _) => self.action(out, &of.action, node),
            (Node::User(node), _) => self.user(out, &of.user, node),
            (Node::Comment(node), _) => self.comment(out, &of.comment, node),
            (Node::FeedItem(node), _) => self.item(out, &of.item, node),
            (Node::NotificationGroup(node), Some(loaded)) => {
                self.group(out, &of.group, node, loaded)
            }
            (Node::Notification(node), Some(loaded)) => self.notice(out, &of.notice, node, loaded),
            // Loaded whenever there is one of them.
            (Node::NotificationGroup(_) | Node::Notification(_), None) => out.null(),
        }
    }
}
