//! What one process tells the others about live events, when several share
//! one store (API and worker processes on MongoDB).
//!
//! Most signals are events as the hub routes them: the receiving process
//! hands them to its own subscribers. Some say only what happened (an
//! action that readers pull, an edge that ended, a group left), because who
//! should hear of it depends on who is online, which only the process
//! holding the sockets knows: it works that out for its own readers. One
//! asks the workers to look for work now rather than at their next poll.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{ActionEvent, ActionEventKind, Event, FeedEventKind, Topic};
use crate::model::ReasonKind;
use crate::model::{Action, Comment, EdgeKind, FeedItem, Millis, ObjectId, Position, Reason};

/// Feed items per signal: a fan-out's batch is split so that one signal
/// stays well under a MongoDB document's 16 MiB.
pub const ITEMS_PER_SIGNAL: usize = 5_000;

/// One thing to tell the other processes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t")]
pub enum Signal {
    /// Items of readers' feeds were added, removed or bumped.
    Items {
        kind: WireKind,
        tenant: String,
        /// The items' action, when the publisher had it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<Action>,
        items: Vec<WireItem>,
    },
    /// An action joined the slice of `ref_id`.
    Slice { ref_id: String, action: Action },
    /// A reaction to an action.
    Reaction {
        kind: WireReaction,
        action: Action,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comment: Option<Comment>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
    },
    /// An action that readers pull (not fanned out to them) was added to,
    /// or removed from, their feeds: each process tells its online readers
    /// who pull it, except those already `told` (sorted).
    Pulled {
        kind: WireKind,
        action: Action,
        told: Vec<String>,
    },
    /// `reader` stopped following `actor` (a user or a group): the items
    /// they pulled by that edge since `since` are gone from their feed.
    Unfollowed {
        tenant: String,
        reader: String,
        actor: String,
        edge: WireEdge,
        since: WirePosition,
    },
    /// `reader` left `group` (a member since `since`): the group's items
    /// they may no longer read are gone from their feed.
    Left {
        tenant: String,
        reader: String,
        group: String,
        reason: ReasonKind,
        since: WirePosition,
    },
    /// Work was queued: workers look for it now.
    Work,
    /// `user`'s notifications changed.
    Notices {
        tenant: String,
        user: String,
        #[serde(flatten)]
        change: super::NoticeEvent,
    },
}

/// [`FeedEventKind`] on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireKind {
    Added,
    Removed,
    Bumped,
}

impl From<FeedEventKind> for WireKind {
    fn from(kind: FeedEventKind) -> Self {
        match kind {
            FeedEventKind::Added => WireKind::Added,
            FeedEventKind::Removed => WireKind::Removed,
            FeedEventKind::Bumped => WireKind::Bumped,
        }
    }
}

impl From<WireKind> for FeedEventKind {
    fn from(kind: WireKind) -> Self {
        match kind {
            WireKind::Added => FeedEventKind::Added,
            WireKind::Removed => FeedEventKind::Removed,
            WireKind::Bumped => FeedEventKind::Bumped,
        }
    }
}

/// [`ActionEventKind`] on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireReaction {
    Commented,
    Liked,
    Unliked,
}

impl From<ActionEventKind> for WireReaction {
    fn from(kind: ActionEventKind) -> Self {
        match kind {
            ActionEventKind::Commented => WireReaction::Commented,
            ActionEventKind::Liked => WireReaction::Liked,
            ActionEventKind::Unliked => WireReaction::Unliked,
        }
    }
}

impl From<WireReaction> for ActionEventKind {
    fn from(kind: WireReaction) -> Self {
        match kind {
            WireReaction::Commented => ActionEventKind::Commented,
            WireReaction::Liked => ActionEventKind::Liked,
            WireReaction::Unliked => ActionEventKind::Unliked,
        }
    }
}

/// [`EdgeKind`] on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireEdge {
    Follows,
    Friend,
    Group,
}

impl From<EdgeKind> for WireEdge {
    fn from(kind: EdgeKind) -> Self {
        match kind {
            EdgeKind::Follows => WireEdge::Follows,
            EdgeKind::Friend => WireEdge::Friend,
            EdgeKind::Group => WireEdge::Group,
        }
    }
}

impl From<WireEdge> for EdgeKind {
    fn from(kind: WireEdge) -> Self {
        match kind {
            WireEdge::Follows => EdgeKind::Follows,
            WireEdge::Friend => EdgeKind::Friend,
            WireEdge::Group => EdgeKind::Group,
        }
    }
}

/// A feed item on the wire (without the copy of its action).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireItem {
    #[serde(rename = "o")]
    pub owner: String,
    #[serde(rename = "a")]
    pub action_id: ObjectId,
    #[serde(rename = "r")]
    pub relevancy: Millis,
    #[serde(rename = "w")]
    pub reason: Reason,
    #[serde(rename = "c")]
    pub changed: Millis,
}

impl From<&FeedItem> for WireItem {
    fn from(item: &FeedItem) -> Self {
        Self {
            owner: item.owner.clone(),
            action_id: item.action_id,
            relevancy: item.relevancy,
            reason: item.reason.clone(),
            changed: item.changed,
        }
    }
}

impl From<WireItem> for FeedItem {
    fn from(item: WireItem) -> Self {
        FeedItem {
            owner: item.owner,
            action_id: item.action_id,
            relevancy: item.relevancy,
            reason: item.reason,
            changed: item.changed,
            copy: None,
        }
    }
}

/// A [`Position`] on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WirePosition {
    pub relevancy: Millis,
    pub action_id: ObjectId,
}

impl From<Position> for WirePosition {
    fn from(at: Position) -> Self {
        Self {
            relevancy: at.relevancy,
            action_id: at.action_id,
        }
    }
}

impl From<WirePosition> for Position {
    fn from(at: WirePosition) -> Self {
        Position {
            relevancy: at.relevancy,
            action_id: at.action_id,
        }
    }
}

impl Signal {
    /// The signal an event on a slice or action topic travels as (feed
    /// events travel as [`Signal::Items`]).
    pub fn of_event(topic: &Topic, event: &Event) -> Option<Signal> {
        match (topic, event) {
            (Topic::Slice { ref_id, .. }, Event::Slice(action, _)) => Some(Signal::Slice {
                ref_id: ref_id.clone(),
                action: (**action).clone(),
            }),
            (Topic::Action { .. }, Event::Action(reaction)) => Some(Signal::Reaction {
                kind: reaction.kind.into(),
                action: (*reaction.action).clone(),
                comment: reaction.comment.clone(),
                user: reaction.user.clone(),
            }),
            (Topic::Notices { tenant, user }, Event::Notices(change)) => Some(Signal::Notices {
                tenant: tenant.clone(),
                user: user.clone(),
                change: change.clone(),
            }),
            _ => None,
        }
    }

    /// A slice, reaction or notices signal as the hub routes it.
    pub fn into_event(self) -> Option<(Topic, Event)> {
        match self {
            Signal::Slice { ref_id, action } => Some((
                Topic::Slice {
                    tenant: action.tenant.clone(),
                    ref_id,
                },
                Event::Slice(Arc::new(action), Arc::default()),
            )),
            Signal::Reaction {
                kind,
                action,
                comment,
                user,
            } => Some((
                Topic::Action {
                    tenant: action.tenant.clone(),
                    action_id: action.id,
                },
                Event::Action(Arc::new(ActionEvent {
                    kind: kind.into(),
                    action: Arc::new(action),
                    comment,
                    user,
                    shared: Arc::default(),
                })),
            )),
            Signal::Notices {
                tenant,
                user,
                change,
            } => Some((Topic::Notices { tenant, user }, Event::Notices(change))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::Descriptor;
    use crate::model::{Counts, FanOut, ReasonKind, Scope};

    fn action() -> Action {
        Action {
            id: ObjectId::new(),
            tenant: "acme".into(),
            actor_id: "bob".into(),
            conducted: 1_700_000_000_000,
            hidden: false,
            scope: Scope::Public,
            readers: vec![],
            scope_groups: vec!["team-1".into()],
            ref_ids: vec!["pos-1".into()],
            tags: vec![],
            descriptor: Descriptor::new("StatusPost", serde_json::json!({ "text": "hi" })),
            fan_out: FanOut::pending(),
            counts: Counts::default(),
            expires_at: Some(1_800_000_000_000),
            to: Vec::new(),
            foreign: None,
        }
    }

    /// Every signal reads back from its stored form as it was written.
    #[test]
    fn signals_survive_the_log() {
        let action = action();
        let at = WirePosition {
            relevancy: 5,
            action_id: action.id,
        };
        let signals = [
            Signal::Items {
                kind: WireKind::Bumped,
                tenant: "acme".into(),
                action: Some(action.clone()),
                items: vec![WireItem {
                    owner: "alice".into(),
                    action_id: action.id,
                    relevancy: 7,
                    reason: Reason::new(ReasonKind::Follows, "bob"),
                    changed: 8,
                }],
            },
            Signal::Slice {
                ref_id: "pos-1".into(),
                action: action.clone(),
            },
            Signal::Reaction {
                kind: WireReaction::Liked,
                action: action.clone(),
                comment: None,
                user: Some("carol".into()),
            },
            Signal::Pulled {
                kind: WireKind::Added,
                action: action.clone(),
                told: vec!["alice".into(), "dave".into()],
            },
            Signal::Unfollowed {
                tenant: "acme".into(),
                reader: "alice".into(),
                actor: "bob".into(),
                edge: WireEdge::Friend,
                since: at,
            },
            Signal::Left {
                tenant: "acme".into(),
                reader: "alice".into(),
                group: "team-1".into(),
                reason: ReasonKind::Team,
                since: at,
            },
            Signal::Notices {
                tenant: "acme".into(),
                user: "mary".into(),
                change: crate::events::NoticeEvent {
                    added: vec![ObjectId::new()],
                    updated: vec![],
                    removed: vec![ObjectId::new(), ObjectId::new()],
                },
            },
            Signal::Work,
        ];
        for signal in signals {
            let stored = bson::to_document(&signal).expect("encodes");
            let read: Signal = bson::from_document(stored).expect("decodes");
            assert_eq!(read, signal);
        }
    }

    /// A slice or reaction signal routes to the topic it was published on.
    #[test]
    fn events_travel_as_signals_and_back() {
        let action = Arc::new(action());
        let topic = Topic::Slice {
            tenant: "acme".into(),
            ref_id: "pos-1".into(),
        };
        let event = Event::Slice(action.clone(), Arc::default());
        let signal = Signal::of_event(&topic, &event).expect("a signal");
        let (back, event) = signal.into_event().expect("an event");
        assert_eq!(back, topic);
        assert!(matches!(event, Event::Slice(a, _) if *a == *action));
        let feed = Topic::Feed {
            tenant: "acme".into(),
            reader: "alice".into(),
        };
        assert!(
            Signal::of_event(&feed, &Event::Slice(action, Arc::default())).is_none(),
            "feed events travel as items"
        );
    }
}
