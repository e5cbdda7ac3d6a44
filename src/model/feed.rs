//! Feed items: one reader's reference to an action, ranked by relevancy.

use std::cmp::Ordering;
use std::sync::Arc;

use async_graphql::Enum;
use serde::{Deserialize, Serialize};

use super::{Action, Millis, ObjectId};

/// Why an item is in a reader's feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReasonKind {
    /// The reader is the actor.
    Own,
    /// The reader was named in the readers of a restricted action.
    Restricted,
    /// The reader shares a team with the actor.
    Team,
    /// The reader shares a department with the actor.
    Department,
    /// The reader is the actor's friend.
    Friend,
    /// The reader follows the actor.
    Follows,
    /// The reader follows a group the action was sent to.
    Group,
    /// A comment brought the item back up for this reader; `rule` says why.
    Bumped,
}

impl ReasonKind {
    /// The reasons of items that come from a source the models can pull
    /// (the rest are the actor's own and bumps).
    pub const PULLED: [ReasonKind; 6] = [
        ReasonKind::Restricted,
        ReasonKind::Team,
        ReasonKind::Department,
        ReasonKind::Friend,
        ReasonKind::Follows,
        ReasonKind::Group,
    ];

    /// The reasons a scope gives (a restricted action's readers, its
    /// actor's team or department): each holds only while the action has
    /// that scope.
    pub const SCOPED: [ReasonKind; 3] = [
        ReasonKind::Restricted,
        ReasonKind::Team,
        ReasonKind::Department,
    ];

    /// Whether items of this reason come from a source the models can
    /// pull: a river holds them.
    pub fn pulled(self) -> bool {
        Self::PULLED.contains(&self)
    }

    /// When several reasons apply, the most specific one is kept.
    pub fn priority(self) -> u8 {
        match self {
            ReasonKind::Own => 7,
            ReasonKind::Restricted => 6,
            ReasonKind::Team => 5,
            ReasonKind::Department => 4,
            ReasonKind::Friend => 3,
            ReasonKind::Follows => 2,
            ReasonKind::Group => 1,
            ReasonKind::Bumped => 0,
        }
    }
}

/// The relevancy rules: which readers a comment bumps, and how far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BumpRule {
    /// The reader is assigned to one of the action's `refIds`.
    Assigned,
    /// The commenter is the reader's supervisor.
    Supervisor,
    /// The reader is in one of the commenter's departments.
    Department,
    /// The reader took part: did the action, or commented on it.
    Participated,
}

impl BumpRule {
    pub const ALL: [BumpRule; 4] = [
        BumpRule::Assigned,
        BumpRule::Supervisor,
        BumpRule::Department,
        BumpRule::Participated,
    ];
}

/// What bumped an item: the rule that matched its reader, and the comment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bump {
    pub rule: BumpRule,
    /// The commenter.
    pub by: String,
    /// When the comment was made.
    pub at: Millis,
}

/// Why an item stands where it does in a feed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reason {
    pub kind: ReasonKind,
    /// The actor whose action brought the item.
    pub actor_id: String,
    /// Set when `kind` is `Bumped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bump: Option<Bump>,
}

impl Reason {
    /// A delivery reason.
    pub fn new(kind: ReasonKind, actor_id: impl Into<String>) -> Self {
        Self {
            kind,
            actor_id: actor_id.into(),
            bump: None,
        }
    }

    /// Whether this reason, held by an item that `now` would bring (a
    /// follow's backfill, which reads the action as it is), no longer
    /// applies: it is a scope's, and `now` differs, so the action's scope
    /// has changed since. Not a bump's (a comment gave it), nor the
    /// actor's own.
    pub fn stale_beside(&self, now: &Reason) -> bool {
        self.bump.is_none() && ReasonKind::SCOPED.contains(&self.kind) && self != now
    }
}

/// One reader's reference to an action.
#[derive(Clone, Debug)]
pub struct FeedItem {
    pub owner: String,
    pub action_id: ObjectId,
    pub relevancy: Millis,
    pub reason: Reason,
    /// When the item last changed (delivered or bumped): resumable
    /// subscriptions replay items by this stamp.
    pub changed: Millis,
    /// The action as the item's store keeps a copy of it beside the item
    /// (MongoDB with `--embed-actions`), so a read that needs no more than
    /// the copy holds need not load the action. A copy of another record,
    /// not part of the item: equality leaves it out.
    pub copy: Option<Arc<ActionCopy>>,
}

impl PartialEq for FeedItem {
    fn eq(&self, other: &Self) -> bool {
        self.owner == other.owner
            && self.action_id == other.action_id
            && self.relevancy == other.relevancy
            && self.reason == other.reason
            && self.changed == other.changed
    }
}

impl Eq for FeedItem {}

/// An action as a feed item carries a copy of it: what a page shows of it
/// and what its access check reads, and its actor's name. The copy's
/// counts and fan-out are not kept up: a read that shows them loads the
/// action.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionCopy {
    pub action: Action,
    pub actor_name: Option<String>,
}

impl FeedItem {
    /// Where the item stands among its feed's changes.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            changed: self.changed,
            action_id: self.action_id,
        }
    }

    pub fn position(&self) -> Position {
        Position {
            relevancy: self.relevancy,
            action_id: self.action_id,
        }
    }
}

/// A place in a feed: items are ordered by relevancy, then by action id, newest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    pub relevancy: Millis,
    pub action_id: ObjectId,
}

impl Ord for Position {
    fn cmp(&self, other: &Self) -> Ordering {
        self.relevancy
            .cmp(&other.relevancy)
            .then_with(|| self.action_id.bytes().cmp(&other.action_id.bytes()))
    }
}

impl Position {
    /// Below every position.
    pub const MIN: Position = Position {
        relevancy: Millis::MIN,
        action_id: ObjectId::from_bytes([0; 12]),
    };
    /// Above every position.
    pub const MAX: Position = Position {
        relevancy: Millis::MAX,
        action_id: ObjectId::from_bytes([0xff; 12]),
    };

    /// The position as 20 bytes, relevancy then action id, as stores keep
    /// it beside a record.
    pub fn to_bytes(self) -> [u8; 20] {
        let mut out = [0u8; 20];
        out[..8].copy_from_slice(&self.relevancy.to_be_bytes());
        out[8..].copy_from_slice(&self.action_id.bytes());
        out
    }

    /// A position from the first 20 bytes of `bytes`; `None` if they are
    /// fewer.
    pub fn from_bytes(bytes: &[u8]) -> Option<Position> {
        let relevancy: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
        let id: [u8; 12] = bytes.get(8..20)?.try_into().ok()?;
        Some(Position {
            relevancy: i64::from_be_bytes(relevancy),
            action_id: ObjectId::from_bytes(id),
        })
    }

    /// The position right below this one: "from `p` on" as a bound that
    /// excludes what it names.
    pub fn just_below(self) -> Position {
        let mut id = u128::from_be_bytes({
            let mut wide = [0u8; 16];
            wide[4..].copy_from_slice(&self.action_id.bytes());
            wide
        });
        let relevancy = if id == 0 {
            id = (1u128 << 96) - 1;
            self.relevancy.saturating_sub(1)
        } else {
            id -= 1;
            self.relevancy
        };
        let bytes = id.to_be_bytes();
        let mut oid = [0u8; 12];
        oid.copy_from_slice(&bytes[4..]);
        Position {
            relevancy,
            action_id: ObjectId::from_bytes(oid),
        }
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A place in the order a feed changed in: by change time, then action id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stamp {
    pub changed: Millis,
    pub action_id: ObjectId,
}

impl Ord for Stamp {
    fn cmp(&self, other: &Self) -> Ordering {
        self.changed
            .cmp(&other.changed)
            .then_with(|| self.action_id.bytes().cmp(&other.action_id.bytes()))
    }
}

impl PartialOrd for Stamp {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
