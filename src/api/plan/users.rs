//! A user, planned: the profile, and the rows below it that a profile page
//! asks for (followers, following, friends, supervisor, assignments and
//! groups), read as rows below the page (see [`Below`](super::below::Below)).
//! The values come from the same functions the async-graphql resolvers
//! call.

use async_graphql::parser::types::SelectionSet;

use super::below::UsersOf;
use super::compile::{arg, only, Arg, Compiler, Fields, Occurrences};
use super::connection::{Connection, Names};
use super::out::Out;
use super::run::Run;
use crate::api::user_node::{UserList, UserNode};
use crate::model::Membership;

const USERS: Names = ("UserConnection", "UserEdge");

#[derive(Debug)]
pub enum UserField {
    Typename,
    Id,
    UserId,
    Name,
    List {
        list: UserList,
        first: Arg,
        after: Arg,
        fields: Fields<Connection<Fields<UserField>>>,
    },
    Supervisor(Fields<UserField>),
    Assignments,
    Groups(Fields<MembershipField>),
}

#[derive(Debug)]
pub enum MembershipField {
    Typename,
    GroupId,
    Kind,
    Role,
}

impl<'a> Compiler<'a> {
    pub(super) fn user(&self, sets: &[&'a SelectionSet]) -> Option<Fields<UserField>> {
        self.object(sets, "User", |this, name, occ| match name {
            "__typename" => Some(UserField::Typename),
            "id" => Self::leaf(occ, UserField::Id),
            "userId" => Self::leaf(occ, UserField::UserId),
            "name" => Self::leaf(occ, UserField::Name),
            "followers" => this.user_list(UserList::Followers, occ),
            "following" => this.user_list(UserList::Following, occ),
            "friends" => this.user_list(UserList::Friends, occ),
            "supervisor" => {
                let fields = Self::leaf(occ, ()).and_then(|()| this.user(&Self::subsets(occ)))?;
                this.reads_below();
                Some(UserField::Supervisor(fields))
            }
            "assignments" => {
                let field = Self::leaf(occ, UserField::Assignments)?;
                this.reads_below();
                Some(field)
            }
            "groups" => {
                let fields =
                    Self::leaf(occ, ()).and_then(|()| this.membership(&Self::subsets(occ)))?;
                this.reads_below();
                Some(UserField::Groups(fields))
            }
            _ => None,
        })
    }

    fn user_list(&self, list: UserList, occ: &Occurrences<'a>) -> Option<UserField> {
        if !only(occ, &["first", "after"]) {
            return None;
        }
        let fields =
            self.plain_connection(&Self::subsets(occ), USERS, |this, sets| this.user(sets))?;
        self.reads_below();
        Some(UserField::List {
            list,
            first: arg(occ[0], "first"),
            after: arg(occ[0], "after"),
            fields,
        })
    }

    fn membership(&self, sets: &[&'a SelectionSet]) -> Option<Fields<MembershipField>> {
        self.object(sets, "Membership", |_, name, occ| match name {
            "__typename" => Some(MembershipField::Typename),
            "groupId" => Self::leaf(occ, MembershipField::GroupId),
            "kind" => Self::leaf(occ, MembershipField::Kind),
            "role" => Self::leaf(occ, MembershipField::Role),
            _ => None,
        })
    }
}

/// Whether writing `fields` of a user needs their profile read (more than
/// their ids).
fn needs_profile(fields: &Fields<UserField>) -> bool {
    fields.iter().any(|f| {
        !matches!(
            f.kind,
            UserField::Typename | UserField::Id | UserField::UserId
        )
    })
}

impl Run<'_> {
    /// The user `id`, with their profile read below the page when `fields`
    /// show more than their ids.
    pub(super) fn user_by_id(&self, out: &mut Out, fields: &Fields<UserField>, id: &str) {
        if !needs_profile(fields) {
            return self.user(out, fields, &UserNode::found(id, None));
        }
        match self.below.user(id) {
            Some(node) => self.user(out, fields, node),
            None => out.null(),
        }
    }

    pub(super) fn user(&self, out: &mut Out, fields: &Fields<UserField>, user: &UserNode) {
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                UserField::Typename => out.string("User"),
                UserField::Id => out.id(&user.global_id()),
                UserField::UserId => out.string(&user.id),
                UserField::Name => out.opt_string(user.name.as_deref()),
                UserField::List {
                    list,
                    first,
                    after,
                    fields,
                } => self.user_list(out, (*list, first, after), fields, user),
                UserField::Supervisor(fields) => match self.below.supervisor(&user.id) {
                    Some(Some(id)) => self.user_by_id(out, fields, id),
                    Some(None) | None => out.null(),
                },
                UserField::Assignments => match self.below.assignments(&user.id) {
                    Some(refs) => out.list(refs, |out, r| out.string(r)),
                    None => out.null(),
                },
                UserField::Groups(fields) => match self.below.groups(&user.id) {
                    Some(groups) => out.list(groups, |out, m| membership(out, fields, m)),
                    None => out.null(),
                },
            }
        }
        out.close();
    }

    fn user_list(
        &self,
        out: &mut Out,
        (list, first, after): (UserList, &Arg, &Arg),
        fields: &Fields<Connection<Fields<UserField>>>,
        of: &UserNode,
    ) {
        let (Ok(first), Ok(after)) = (self.bind.int(first), self.bind.string(after)) else {
            self.below.cannot_bind();
            return out.null();
        };
        let page = UsersOf {
            user: of.id.clone(),
            list,
            first,
            after,
        };
        let Some(c) = self.below.list(page) else {
            return out.null();
        };
        self.plain_connection(
            out,
            fields,
            USERS,
            (&c.edges, &c.page_info),
            |out, user, edge| self.user_by_id(out, user, &edge.node.id),
        );
    }
}

fn membership(out: &mut Out, fields: &Fields<MembershipField>, m: &Membership) {
    out.open();
    for f in fields {
        out.key(&f.key);
        match f.kind {
            MembershipField::Typename => out.string("Membership"),
            MembershipField::GroupId => out.string(&m.group_id),
            MembershipField::Kind => out.enumerated(m.kind),
            MembershipField::Role => out.enumerated(m.role),
        }
    }
    out.close();
}
