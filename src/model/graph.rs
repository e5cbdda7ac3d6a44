//! The social graph: users, follows, friendships, groups and memberships.

use async_graphql::{Enum, SimpleObject};
use serde::{Deserialize, Serialize};

/// A person, known by the application's own id. Riverfeed keeps only a display profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    pub name: Option<String>,
}

impl User {
    /// A user known by id alone, with no display name.
    pub fn unnamed(id: &str) -> User {
        User {
            id: id.to_owned(),
            name: None,
        }
    }
}

/// Kinds of edge from a user: to another user, or to a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EdgeKind {
    /// `from` follows `to` (directed).
    Follows,
    /// `from` and `to` are friends (undirected: stored both ways).
    Friend,
    /// `from` follows the group `to`: the `PUBLIC` actions sent to it.
    Group,
}

impl EdgeKind {
    /// Why a reader has an item that came to them by this edge.
    pub fn reason(self) -> super::ReasonKind {
        match self {
            EdgeKind::Follows => super::ReasonKind::Follows,
            EdgeKind::Friend => super::ReasonKind::Friend,
            EdgeKind::Group => super::ReasonKind::Group,
        }
    }

    /// The kinds of edge between users (a group follow's `to` is a group).
    pub const TO_USERS: [EdgeKind; 2] = [EdgeKind::Follows, EdgeKind::Friend];
}

/// Kinds of group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GroupKind {
    Team,
    Department,
}

/// A user's role in a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MembershipRole {
    Member,
    Lead,
}

/// A team or department.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub id: String,
    pub kind: GroupKind,
}

/// A user's membership of a group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, SimpleObject)]
#[serde(rename_all = "camelCase")]
pub struct Membership {
    pub group_id: String,
    pub kind: GroupKind,
    pub role: MembershipRole,
    /// When the membership began: the member sees the group's TEAM /
    /// DEPARTMENT actions from then on (0: all of them). A role change
    /// keeps it; leaving and joining again starts anew.
    #[graphql(skip)]
    #[serde(default)]
    pub since: super::Millis,
}
