//! The viewer's notifications, planned: `notifications` compiled into the
//! groups' fields and run with one read of the page, one load of the
//! actions it shows (access checked for all at once) and one of the users,
//! then written from the rows. The values come from the same functions the
//! async-graphql resolvers call.

use std::collections::HashMap;

use async_graphql::parser::types::SelectionSet;

use super::actions::{action_needs, ActionField};
use super::bind::{Bind, Fallback};
use super::compile::{arg, only, Arg, Compiler, Fields, Occurrences};
use super::connection::{node_fields, Connection, Names};
use super::out::Out;
use super::run::Run;
use super::users::UserField;
use crate::api::access::access_for;
use crate::api::feed::Needs;
use crate::api::notifications::{
    actors_first, members_first, page, NotificationGroupConnection, NotificationGroupNode,
    NotificationNode,
};
use crate::api::types::{ActionNode, UserNode};
use crate::api::{AppState, Session};
use crate::model::ObjectId;

#[derive(Debug)]
pub struct NoticesArgs {
    pub first: Arg,
    pub after: Arg,
    pub unread_only: Arg,
}

/// The connection of notification groups and its edges.
const NOTICES: Names = ("NotificationGroupConnection", "NotificationGroupEdge");

/// What a page of notifications has of its own.
#[derive(Debug)]
pub enum NoticesOwn {
    UnseenCount,
    UnreadCount,
}

#[derive(Debug)]
pub enum GroupField {
    Typename,
    Id,
    Key,
    Reason,
    Action(Fields<ActionField>),
    RefId,
    Actors {
        first: Arg,
        fields: Fields<UserField>,
    },
    ActorCount,
    Count,
    UnreadCount,
    FirstAt,
    LastAt,
    Seen,
    Read,
    Notifications {
        first: Arg,
        fields: Fields<NoticeField>,
    },
}

#[derive(Debug)]
pub enum NoticeField {
    Typename,
    Id,
    Reason,
    Actor(Fields<UserField>),
    ActorId,
    Action(Fields<ActionField>),
    CommentId,
    RefId,
    At,
    Seen,
    Read,
}

/// `notifications`, planned.
#[derive(Debug)]
pub struct Notices {
    pub args: NoticesArgs,
    pub fields: Fields<Connection<Fields<GroupField>, NoticesOwn>>,
}

impl<'a> Compiler<'a> {
    /// `notifications(first:, after:, unreadOnly:)`.
    pub(super) fn notifications(&self, occ: &Occurrences<'a>) -> Option<Notices> {
        if !only(occ, &["first", "after", "unreadOnly"]) {
            return None;
        }
        let args = NoticesArgs {
            first: arg(occ[0], "first"),
            after: arg(occ[0], "after"),
            unread_only: arg(occ[0], "unreadOnly"),
        };
        let own = |name: &str, occ: &Occurrences<'a>| match name {
            "unseenCount" => Self::leaf(occ, NoticesOwn::UnseenCount),
            "unreadCount" => Self::leaf(occ, NoticesOwn::UnreadCount),
            _ => None,
        };
        let fields = self.connection_of(
            &Self::subsets(occ),
            NOTICES,
            |this, sets| this.group(sets),
            own,
        )?;
        Some(Notices { args, fields })
    }

    pub(super) fn group(&self, sets: &[&'a SelectionSet]) -> Option<Fields<GroupField>> {
        self.object(sets, "NotificationGroup", |this, name, occ| match name {
            "__typename" => Some(GroupField::Typename),
            "id" => Self::leaf(occ, GroupField::Id),
            "key" => Self::leaf(occ, GroupField::Key),
            "reason" => Self::leaf(occ, GroupField::Reason),
            "action" => Self::leaf(occ, ())
                .and_then(|()| this.action(&Self::subsets(occ)))
                .map(GroupField::Action),
            "refId" => Self::leaf(occ, GroupField::RefId),
            "actors" if only(occ, &["first"]) => Some(GroupField::Actors {
                first: arg(occ[0], "first"),
                fields: this.user(&Self::subsets(occ))?,
            }),
            "actorCount" => Self::leaf(occ, GroupField::ActorCount),
            "count" => Self::leaf(occ, GroupField::Count),
            "unreadCount" => Self::leaf(occ, GroupField::UnreadCount),
            "firstAt" => Self::leaf(occ, GroupField::FirstAt),
            "lastAt" => Self::leaf(occ, GroupField::LastAt),
            "seen" => Self::leaf(occ, GroupField::Seen),
            "read" => Self::leaf(occ, GroupField::Read),
            "notifications" if only(occ, &["first"]) => Some(GroupField::Notifications {
                first: arg(occ[0], "first"),
                fields: this.notice(&Self::subsets(occ))?,
            }),
            _ => None,
        })
    }

    pub(super) fn notice(&self, sets: &[&'a SelectionSet]) -> Option<Fields<NoticeField>> {
        self.object(sets, "Notification", |this, name, occ| match name {
            "__typename" => Some(NoticeField::Typename),
            "id" => Self::leaf(occ, NoticeField::Id),
            "reason" => Self::leaf(occ, NoticeField::Reason),
            "actor" => Self::leaf(occ, ())
                .and_then(|()| this.user(&Self::subsets(occ)))
                .map(NoticeField::Actor),
            "actorId" => Self::leaf(occ, NoticeField::ActorId),
            "action" => Self::leaf(occ, ())
                .and_then(|()| this.action(&Self::subsets(occ)))
                .map(NoticeField::Action),
            "commentId" => Self::leaf(occ, NoticeField::CommentId),
            "refId" => Self::leaf(occ, NoticeField::RefId),
            "at" => Self::leaf(occ, NoticeField::At),
            "seen" => Self::leaf(occ, NoticeField::Seen),
            "read" => Self::leaf(occ, NoticeField::Read),
            _ => None,
        })
    }
}

/// What groups and notifications ask for beyond themselves: how many actors and
/// notifications of each, whether their actions and what those need.
#[derive(Default)]
pub(super) struct Wants {
    /// The most actors any `actors(first:)` lists.
    actors: usize,
    /// The most notifications any `notifications(first:)` lists, and whether
    /// their actors or actions are shown (those of notifications found by
    /// id too).
    members: usize,
    member_actors: bool,
    member_actions: bool,
    /// Whether a group's action is shown.
    group_actions: bool,
    /// What the actions shown need loaded with them.
    needs: Needs,
}

impl Wants {
    /// What `fields` ask of each group; an argument that would be an error
    /// leaves the request to async-graphql, which says where.
    pub(super) fn of(
        bind: &Bind<'_>,
        fields: &Fields<GroupField>,
        wants: &mut Wants,
    ) -> Result<(), Fallback> {
        for f in fields {
            match &f.kind {
                GroupField::Action(action) => {
                    wants.group_actions = true;
                    action_needs(action, &mut wants.needs);
                }
                GroupField::Actors { first, .. } => {
                    let first =
                        actors_first(bind.int(first)?.unwrap_or(3)).map_err(|_| Fallback)?;
                    wants.actors = wants.actors.max(first);
                }
                GroupField::Notifications { first, fields } => {
                    let first = members_first(bind.int(first)?).map_err(|_| Fallback)?;
                    wants.members = wants.members.max(first);
                    Wants::of_notices(fields, wants);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// What `fields` ask of each notification, a group's member or one
    /// found by id.
    pub(super) fn of_notices(fields: &Fields<NoticeField>, wants: &mut Wants) {
        for n in fields {
            match &n.kind {
                NoticeField::Actor(_) => wants.member_actors = true,
                NoticeField::Action(action) => {
                    wants.member_actions = true;
                    action_needs(action, &mut wants.needs);
                }
                _ => {}
            }
        }
    }
}

/// What the groups of a page show of other records, loaded for the page.
pub(super) struct Loaded {
    /// The actions the viewer may read, by id.
    actions: HashMap<ObjectId, ActionNode>,
    users: HashMap<String, UserNode>,
}

impl Run<'_> {
    fn loaded_user(&self, out: &mut Out, fields: &Fields<UserField>, id: &str, loaded: &Loaded) {
        match loaded.users.get(id) {
            Some(node) => self.user(out, fields, node),
            None => self.user(out, fields, &UserNode::found(id, None)),
        }
    }
}

/// Reads the page `notifications` asks for and what it shows; `Ok(Err)` is
/// the field's own error.
pub(super) async fn read(
    state: &AppState,
    session: &Session,
    bind: &Bind<'_>,
    args: &NoticesArgs,
    fields: &Fields<Connection<Fields<GroupField>, NoticesOwn>>,
) -> Result<async_graphql::Result<(NotificationGroupConnection, Loaded)>, Fallback> {
    let (first, after, unread_only) = (
        bind.int(&args.first)?,
        bind.string(&args.after)?,
        bind.bool(&args.unread_only)?,
    );
    let mut wants = Wants::default();
    for group in node_fields(fields) {
        Wants::of(bind, group, &mut wants)?;
    }
    let viewer = match session.viewer() {
        Ok(viewer) => viewer,
        Err(err) => return Ok(Err(err)),
    };
    let connection = match page(state, viewer, first, after, unread_only).await {
        Ok(connection) => connection,
        Err(err) => return Ok(Err(err)),
    };
    // A failed load below is a nested field's error, which async-graphql
    // places: it answers the request instead.
    let groups: Vec<&NotificationGroupNode> = connection.edges.iter().map(|e| &e.node).collect();
    let loaded = load(state, session, &groups, &[], &wants)
        .await
        .map_err(|_| Fallback)?;
    Ok(Ok((connection, loaded)))
}

/// Loads the actions and users `groups` and `notices` show, each kind in
/// one read.
pub(super) async fn load(
    state: &AppState,
    session: &Session,
    groups: &[&NotificationGroupNode],
    notices: &[&NotificationNode],
    wants: &Wants,
) -> async_graphql::Result<Loaded> {
    let viewer = session.viewer()?;
    let mut action_ids: Vec<ObjectId> = Vec::new();
    let mut user_ids: Vec<String> = Vec::new();
    for notice in notices {
        if wants.member_actions {
            action_ids.extend(notice.notice.action_id);
        }
        if wants.member_actors {
            user_ids.push(notice.notice.actor.clone());
        }
    }
    for group in groups {
        if wants.group_actions {
            action_ids.extend(group.action_id());
        }
        user_ids.extend(group.actor_ids(wants.actors).into_iter().map(str::to_owned));
        if wants.member_actors || wants.member_actions {
            for member in group.members(wants.members) {
                if wants.member_actions {
                    action_ids.extend(member.notice.action_id);
                }
                if wants.member_actors {
                    user_ids.push(member.notice.actor);
                }
            }
        }
    }
    action_ids.sort_unstable();
    action_ids.dedup();
    user_ids.sort_unstable();
    user_ids.dedup();
    let store = state.store.as_ref();
    let (found_actions, found_users) = tokio::join!(
        async {
            if action_ids.is_empty() {
                return Ok(Vec::new());
            }
            store.get_actions(&viewer.tenant, &action_ids).await
        },
        async {
            if user_ids.is_empty() {
                return Ok(Vec::new());
            }
            store.get_users(&viewer.tenant, &user_ids).await
        }
    );
    let found_actions = crate::api::error::ApiResultExt::api(found_actions)?;
    let mut found_users: HashMap<String, _> = crate::api::error::ApiResultExt::api(found_users)?
        .into_iter()
        .map(|u| (u.id.clone(), u))
        .collect();
    let access = access_for(state, viewer, &found_actions).await?;
    let readable: Vec<_> = found_actions
        .into_iter()
        .filter(|a| access.can_read(a) && !a.hidden)
        .collect();
    let nodes =
        ActionNode::load_along(state, viewer, readable, wants.needs, &HashMap::new()).await?;
    Ok(Loaded {
        actions: nodes.into_iter().map(|n| (n.action.id, n)).collect(),
        users: user_ids
            .into_iter()
            .map(|id| {
                let node = UserNode::found(&id, found_users.remove(&id));
                (id, node)
            })
            .collect(),
    })
}

impl Run<'_> {
    pub(super) fn notifications(
        &self,
        out: &mut Out,
        fields: &Fields<Connection<Fields<GroupField>, NoticesOwn>>,
        (c, loaded): &(NotificationGroupConnection, Loaded),
    ) {
        self.connection_of(
            out,
            fields,
            NOTICES,
            (&c.edges, &c.page_info),
            |out, group, edge| self.group(out, group, &edge.node, loaded),
            |out, own| match own {
                NoticesOwn::UnseenCount => out.number(c.unseen_count),
                NoticesOwn::UnreadCount => out.number(c.unread_count),
            },
        );
    }

    pub(super) fn group(
        &self,
        out: &mut Out,
        fields: &Fields<GroupField>,
        node: &NotificationGroupNode,
        loaded: &Loaded,
    ) {
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                GroupField::Typename => out.string("NotificationGroup"),
                GroupField::Id => out.id(&node.global_id()),
                GroupField::Key => out.string(&node.group.key),
                GroupField::Reason => out.enumerated(node.group.reason),
                GroupField::Action(action) => self.readable(out, action, node.action_id(), loaded),
                GroupField::RefId => out.opt_string(node.latest_ref()),
                GroupField::Actors { first, fields } => {
                    // Bound when the page was read: the same values again.
                    let first = self
                        .bind
                        .int(first)
                        .ok()
                        .flatten()
                        .and_then(|n| actors_first(n).ok())
                        .unwrap_or(3);
                    out.list(&node.actor_ids(first), |out, id| {
                        self.loaded_user(out, fields, id, loaded)
                    });
                }
                GroupField::ActorCount => out.number(node.actors_counted() as u64),
                GroupField::Count => out.number(u64::from(node.group.visible)),
                GroupField::UnreadCount => out.number(u64::from(node.group.unread)),
                GroupField::FirstAt => match node.first_time() {
                    Some(at) => out.time(&at),
                    None => out.null(),
                },
                GroupField::LastAt => out.time(&node.last_time()),
                GroupField::Seen => out.bool(node.is_seen()),
                GroupField::Read => out.bool(node.is_read()),
                GroupField::Notifications { first, fields } => {
                    let first = self
                        .bind
                        .int(first)
                        .ok()
                        .and_then(|n| members_first(n).ok())
                        .unwrap_or(0);
                    out.list(&node.members(first), |out, member| {
                        self.notice(out, fields, member, loaded)
                    });
                }
            }
        }
        out.close();
    }

    pub(super) fn notice(
        &self,
        out: &mut Out,
        fields: &Fields<NoticeField>,
        node: &NotificationNode,
        loaded: &Loaded,
    ) {
        let notice = &node.notice;
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                NoticeField::Typename => out.string("Notification"),
                NoticeField::Id => out.id(&node.global_id()),
                NoticeField::Reason => out.enumerated(notice.reason),
                NoticeField::Actor(fields) => self.loaded_user(out, fields, &notice.actor, loaded),
                NoticeField::ActorId => out.string(&notice.actor),
                NoticeField::Action(action) => self.readable(out, action, notice.action_id, loaded),
                NoticeField::CommentId => out.opt_string(node.comment_hex().as_deref()),
                NoticeField::RefId => out.opt_string(notice.ref_id.as_deref()),
                NoticeField::At => out.time(&node.happened()),
                NoticeField::Seen => out.bool(node.is_seen()),
                NoticeField::Read => out.bool(notice.read),
            }
        }
        out.close();
    }

    /// An action the viewer may read, else `null`.
    fn readable(
        &self,
        out: &mut Out,
        fields: &Fields<ActionField>,
        id: Option<ObjectId>,
        loaded: &Loaded,
    ) {
        match id.and_then(|id| loaded.actions.get(&id)) {
            Some(node) => self.action(out, fields, node),
            None => out.null(),
        }
    }
}
