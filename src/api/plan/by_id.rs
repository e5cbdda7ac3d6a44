//! The roots that find records by id, planned: `action(actionId:)`,
//! `actions(actionIds:)`, `user(userId:)`, and `node(id:)` / `nodes(ids:)`
//! of actions, users and comments, each read with the rule its resolver reads with.
//! They are nullable: an error of theirs (an id that does not parse, say)
//! leaves the request to async-graphql, which nulls what the specification
//! says it nulls; so does a global id of another kind of node.

use super::comments::CommentField;
use super::compile::{arg, ActionField, Arg, Compiler, Fields, Occurrences, RootField, UserField};
use super::run::{action_needs, Bind, Fallback, Out, Run};
use crate::api::feed::Needs;
use crate::api::global_id::{action_id_arg, user_id_arg, GlobalId};
use crate::api::node;
use crate::api::query::{readable_actions, user_by_id};
use crate::api::types::{ActionNode, CommentNode, UserNode};
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
    /// `node` (one id) or `nodes`: the fields an action, a user and a
    /// comment show.
    Nodes {
        ids: Arg,
        one: bool,
        action: Fields<ActionField>,
        user: Fields<UserField>,
        comment: Fields<CommentField>,
    },
}

/// What such a root found.
pub(super) enum Found {
    Action(Option<Box<ActionNode>>),
    Actions(Vec<Option<ActionNode>>),
    User(Option<UserNode>),
    Nodes(Vec<Option<Named>>),
}

/// A node found by its global id.
pub(super) enum Named {
    Action(Box<ActionNode>),
    User(UserNode),
    Comment(CommentNode),
}

impl<'a> Compiler<'a> {
    /// `action`, `actions` or `user`, named by their current argument
    /// (the deprecated `id` / `ids` are left to async-graphql).
    pub(super) fn by_id(&self, name: &str, occ: &Occurrences<'a>) -> Option<RootField> {
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
                action: self.action(&sets)?,
                user: self.user(&sets)?,
                comment: self.comment(&sets)?,
            },
            _ => return None,
        };
        Some(RootField::ById(by_id))
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
        ById::Nodes {
            ids, one, action, ..
        } => {
            let ids = match one {
                true => vec![bind.id(ids)?.ok_or(Fallback)?],
                false => bind.ids(ids)?,
            };
            let wanted = node::decode(&ids).map_err(|_| Fallback)?;
            if !wanted.iter().all(|id| {
                matches!(
                    id,
                    GlobalId::Action(_) | GlobalId::User(_) | GlobalId::Comment { .. }
                )
            }) {
                return Err(Fallback);
            }
            action_needs(action, &mut needs);
            let (found, comments) = tokio::join!(
                node::actions_and_users(state, viewer, &wanted, needs),
                node::comments(state, viewer, &wanted)
            );
            let (actions, users) = found.map_err(|_| Fallback)?;
            let comments = comments.map_err(|_| Fallback)?;
            let named = wanted.iter().map(|id| match id {
                GlobalId::Action(id) => {
                    actions.get(id).cloned().map(|a| Named::Action(Box::new(a)))
                }
                GlobalId::User(id) => users.get(id).cloned().map(Named::User),
                GlobalId::Comment { comment, .. } => {
                    comments.get(comment).cloned().map(Named::Comment)
                }
                _ => None,
            });
            Ok(Found::Nodes(named.collect()))
        }
    }
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
            (
                ById::Nodes {
                    one,
                    action,
                    user,
                    comment,
                    ..
                },
                Found::Nodes(nodes),
            ) => {
                let write = |out: &mut Out, named: &Named| match named {
                    Named::Action(node) => self.action(out, action, node),
                    Named::User(node) => self.user(out, user, node),
                    Named::Comment(node) => self.comment(out, comment, node),
                };
                match (one, nodes.first()) {
                    (true, Some(Some(named))) => write(out, named),
                    (true, _) => {
                        out.null();
                        return false;
                    }
                    (false, _) => out.list(nodes, |out, named| match named {
                        Some(named) => write(out, named),
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
