//! An action: something that happened, stored once.

use async_graphql::Enum;
use serde::{Deserialize, Serialize};

use super::{Counts, Millis, ObjectId};
use crate::descriptor::Descriptor;

/// Who may see an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Scope {
    /// The actor's followers and friends.
    Public,
    /// Members of the actor's teams.
    Team,
    /// Members of the actor's departments.
    Department,
    /// Only the listed `readers` (and the actor).
    Restricted,
}

/// Where an action is in its fan-out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Enum)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FanOutState {
    /// Waiting for a worker.
    Pending,
    /// Part of it written: a worker delivers it batch by batch, under a
    /// lease (`lockedUntil`).
    InProgress,
    /// Delivered to every reader.
    Done,
}

/// The fan-out state of an action, which doubles as the worker's lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FanOut {
    pub state: FanOutState,
    /// End of the current lease (only while `InProgress`).
    pub locked_until: Option<Millis>,
    /// The worker holding the lease (only while `InProgress`).
    pub worker: Option<String>,
}

impl FanOut {
    pub fn pending() -> Self {
        Self {
            state: FanOutState::Pending,
            locked_until: None,
            worker: None,
        }
    }

    pub fn done() -> Self {
        Self {
            state: FanOutState::Done,
            locked_until: None,
            worker: None,
        }
    }
}

/// Something that happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    pub id: ObjectId,
    pub tenant: String,
    pub actor_id: String,
    /// When it happened; the initial relevancy of its feed items.
    pub conducted: Millis,
    pub hidden: bool,
    pub scope: Scope,
    /// Explicit readers of a `Restricted` action.
    pub readers: Vec<String>,
    /// The groups a `Team` or `Department` action was shared with: the actor's
    /// groups of that kind when it was recorded.
    pub scope_groups: Vec<String>,
    /// Ids of the objects the action refers to (an applicant, a position…).
    pub ref_ids: Vec<String>,
    pub tags: Vec<String>,
    pub descriptor: Descriptor,
    pub fan_out: FanOut,
    /// Comments and likes so far.
    #[serde(default)]
    pub counts: Counts,
    /// When it stops being shown anywhere (a story, a job post that
    /// closes); never if unset, unless `--item-ttl` says sooner.
    #[serde(default)]
    pub expires_at: Option<Millis>,
    /// The groups it was posted to (beside a TEAM / DEPARTMENT action's
    /// own groups): it stands in their group feeds.
    #[serde(default)]
    pub to: Vec<String>,
}

impl Action {
    /// When the action stops being readable: its own `expires_at`, or
    /// `item_ttl` after it happened, whichever comes first.
    pub fn expiry(&self, item_ttl: Option<Millis>) -> Option<Millis> {
        let by_ttl = item_ttl.map(|ttl| self.conducted.saturating_add(ttl));
        match (self.expires_at, by_ttl) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The group feeds it stands in: the groups it was posted to, and a
    /// TEAM / DEPARTMENT action's groups.
    pub fn group_feeds(&self) -> Vec<&str> {
        let mut groups: Vec<&str> = self.to.iter().map(String::as_str).collect();
        if matches!(self.scope, Scope::Team | Scope::Department) {
            groups.extend(self.scope_groups.iter().map(String::as_str));
        }
        groups.sort_unstable();
        groups.dedup();
        groups
    }

    /// Whether the action has expired at `now`.
    pub fn expired(&self, now: Millis, item_ttl: Option<Millis>) -> bool {
        self.expiry(item_ttl).is_some_and(|at| at <= now)
    }
}
