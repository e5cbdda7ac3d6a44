//! Webhooks as data: the endpoints a tenant registered, the deliveries
//! queued for them and the ones given up on. What they do is in
//! [`crate::webhooks`].

use serde::{Deserialize, Serialize};

use super::Millis;

/// What a webhook hears.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, async_graphql::Enum)]
#[graphql(name = "WebhookEvent")]
pub enum EventType {
    /// An action was recorded (told once its fan-out starts).
    #[serde(rename = "action.recorded")]
    ActionRecorded,
    /// An action's fan-out finished: every reader it reaches has it.
    #[serde(rename = "action.delivered")]
    ActionDelivered,
    /// A user got a notification (a comment on their action, a like, an
    /// assignment…), as their preferences allow.
    #[serde(rename = "notification.added")]
    NotificationAdded,
    /// A comment was added to an action.
    #[serde(rename = "comment.added")]
    CommentAdded,
    /// An action was changed: its scope set, or hidden.
    #[serde(rename = "action.updated")]
    ActionUpdated,
    /// An action was deleted.
    #[serde(rename = "action.deleted")]
    ActionDeleted,
    /// A user liked an action.
    #[serde(rename = "reaction.added")]
    ReactionAdded,
    /// A user followed another user or a group.
    #[serde(rename = "followed")]
    Followed,
    /// Sent by `sendTestEvent` to one endpoint, whatever events it hears
    /// (not one to register).
    #[serde(rename = "webhook.test")]
    WebhookTest,
}

impl EventType {
    /// The event's `type` in a delivery's body (`action.recorded`…).
    pub fn name(self) -> &'static str {
        match self {
            EventType::ActionRecorded => "action.recorded",
            EventType::ActionDelivered => "action.delivered",
            EventType::NotificationAdded => "notification.added",
            EventType::CommentAdded => "comment.added",
            EventType::ActionUpdated => "action.updated",
            EventType::ActionDeleted => "action.deleted",
            EventType::ReactionAdded => "reaction.added",
            EventType::Followed => "followed",
            EventType::WebhookTest => "webhook.test",
        }
    }
}

/// An endpoint registered to hear a tenant's events.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhook {
    /// `wh_` and 24 hex digits.
    pub id: String,
    pub url: String,
    pub events: Vec<EventType>,
    /// The signing secret (`whsec_…`).
    pub secret: String,
    /// The secret the last rotation replaced, and until when it still
    /// signs beside [`Webhook::secret`].
    #[serde(default)]
    pub previous: Option<(String, Millis)>,
    pub enabled: bool,
    pub created: Millis,
    /// Since when every attempt to reach it failed; none once one
    /// succeeds. A day of it pauses the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<Millis>,
    /// Paused by the circuit: its deliveries wait, untried, until it is
    /// resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Paused>,
    /// The record's version (not stored in the body).
    #[serde(skip)]
    pub version: u64,
}

/// Why and since when an endpoint is paused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paused {
    pub at: Millis,
    pub reason: String,
}

impl Webhook {
    /// Whether it hears `event`. A disabled webhook hears it too: its
    /// deliveries are kept dead when they come due, to replay once it is
    /// enabled again.
    pub fn hears(&self, event: EventType) -> bool {
        self.events.contains(&event)
    }

    /// Checks an endpoint's URL as written: `http` or `https`, with a
    /// host. (Where it leads is checked when it is registered and each
    /// time it is sent to.)
    pub fn check_url(url: &str) -> Result<reqwest::Url, String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "a webhook URL is http or https, not {}",
                parsed.scheme()
            ));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(format!("{url:?} names no host"));
        }
        Ok(parsed)
    }
}

/// A job a delivery waits for: an action's `delivered` event is queued
/// before its fan-out's last step, and sent once the fan-out job is gone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The job's kind, by its code.
    pub kind: String,
    pub key: String,
}

/// One event for one endpoint, as its job carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub webhook: String,
    /// The `webhook-id`: the same for every attempt, and for the same
    /// event queued again.
    pub message: String,
    pub event: EventType,
    /// The JSON body, fixed when queued.
    pub body: String,
    #[serde(default)]
    pub hold: Option<Hold>,
    /// How its attempts went so far; none before the first.
    #[serde(default, skip_serializing_if = "Tried::is_none")]
    pub tried: Tried,
}

/// How a delivery's attempts went: the sender writes it into the job it
/// gives back to wait for a retry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tried {
    /// Attempts made, all failed.
    pub attempts: u32,
    /// Why the last failed (no secret, no URL).
    pub error: Option<String>,
    /// The HTTP status the endpoint answered last, if it answered.
    pub status: Option<u16>,
}

impl Tried {
    /// No attempt yet.
    pub fn is_none(&self) -> bool {
        self.attempts == 0
    }
}

/// A delivery given up on: what was sent, and how it last failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadDelivery {
    pub delivery: Delivery,
    /// When its event was first queued.
    pub queued: Millis,
    /// When it was given up on.
    pub died: Millis,
    /// Why the last attempt failed.
    pub error: String,
}
