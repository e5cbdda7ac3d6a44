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
    /// The application's own id of it, if it gave one (see [`Foreign`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign: Option<Foreign>,
}

/// The id an application gives an action it records (`foreignId`), unique
/// per actor in a tenant, with a digest of what was recorded under it. The
/// store keeps one action per id; a second record under it is a retry when
/// its digest is the same, and a conflict when it is not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Foreign {
    pub id: String,
    /// SHA-256 of [`Foreign::digest_of`]'s content, in hex.
    pub digest: String,
}

impl Foreign {
    /// The foreign id `id` of `action` as it is recorded: its digest is
    /// taken of what the recorder said, not of what is derived or changed
    /// later (the scope's groups, the fan-out, counts, renamed names).
    /// `conducted_given`: the recorder gave `conducted` (otherwise it is
    /// the time of recording, which a retry does not repeat).
    pub fn of(id: String, action: &Action, conducted_given: bool) -> Foreign {
        Foreign {
            id,
            digest: Self::digest_of(action, conducted_given),
        }
    }

    fn digest_of(action: &Action, conducted_given: bool) -> String {
        let content = serde_json::json!({
            "descriptor": action.descriptor,
            "scope": action.scope,
            "readers": action.readers,
            "refIds": action.ref_ids,
            "tags": action.tags,
            "to": action.to,
            "conducted": conducted_given.then_some(action.conducted),
            "expiresAt": action.expires_at,
        });
        let mut text = String::new();
        canonical(&content, &mut text);
        let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// `value` as JSON with every object's keys in order, so that equal content
/// given in another order is written the same.
fn canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn status(fields: serde_json::Value, conducted: Millis) -> Action {
        Action {
            id: ObjectId::new(),
            tenant: "acme".into(),
            actor_id: "bob".into(),
            conducted,
            hidden: false,
            scope: Scope::Public,
            readers: vec![],
            scope_groups: vec![],
            ref_ids: vec!["app-7".into()],
            tags: vec![],
            descriptor: Descriptor::new("ApplicationRating", fields),
            fan_out: FanOut::pending(),
            counts: Counts::default(),
            expires_at: None,
            to: vec![],
            foreign: None,
        }
    }

    fn digest(action: &Action, conducted_given: bool) -> String {
        Foreign::of("f".into(), action, conducted_given).digest
    }

    #[test]
    fn a_digest_is_of_what_was_said_in_any_order() {
        let a = status(json!({ "score": 4.5, "note": { "x": 1, "y": [2] } }), 1_000);
        let b = status(json!({ "note": { "y": [2], "x": 1 }, "score": 4.5 }), 2_000);
        assert_eq!(
            digest(&a, false),
            digest(&b, false),
            "keys in another order"
        );
        assert_ne!(
            digest(&a, true),
            digest(&b, true),
            "a given time is content"
        );
        let other = status(json!({ "score": 4.0, "note": { "x": 1, "y": [2] } }), 1_000);
        assert_ne!(digest(&a, false), digest(&other, false));
        let mut tagged = a.clone();
        tagged.tags = vec!["news".into()];
        assert_ne!(digest(&a, false), digest(&tagged, false));
    }

    #[test]
    fn what_changes_after_recording_is_not_in_the_digest() {
        let a = status(json!({ "score": 4.5 }), 1_000);
        let mut later = a.clone();
        later.id = ObjectId::new();
        later.scope_groups = vec!["team-7".into()];
        later.hidden = true;
        later.fan_out = FanOut::done();
        later.counts.likes = 3;
        assert_eq!(digest(&a, true), digest(&later, true));
    }
}
