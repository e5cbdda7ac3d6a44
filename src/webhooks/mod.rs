//! Webhooks: what Riverfeed tells an application's backend, at least once,
//! signed as the Standard Webhooks specification says, and only to
//! endpoints it may reach.
//!
//! - **Registrations** ([`registry`]) are records of their tenant: the
//!   endpoint's URL, the events it hears, its signing secret (and the one a
//!   rotation replaced, still signed with for a day), enabled or not.
//! - **The outbox** ([`outbox`]): an event is told by the job that carries
//!   it, which the store wrote in the same step as what happened (an
//!   action's fan-out, a comment's bump, a like's notice job). Before that
//!   job is finished, it queues one delivery job per endpoint that hears
//!   the event. A crash before the finish runs the carrying job again,
//!   which queues the same deliveries under the same keys: none is lost,
//!   and one sent twice carries the same `webhook-id`.
//! - **The sender** ([`send`]) claims delivery jobs under a lease, signs
//!   and posts each, retries failures on a schedule for a day, then keeps
//!   what still fails as a dead delivery to replay.
//! - [`sign`] is the signature; [`target`] the endpoint check (SSRF).

pub mod outbox;
pub mod registry;
pub mod send;
pub mod sign;
pub mod target;

use serde::{Deserialize, Serialize};

pub use outbox::{Event, Outbox};
pub use registry::{DeadDelivery, Webhook};

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
}

impl EventType {
    /// The event's `type` in a delivery's body (`action.recorded`…).
    pub fn name(self) -> &'static str {
        match self {
            EventType::ActionRecorded => "action.recorded",
            EventType::ActionDelivered => "action.delivered",
            EventType::NotificationAdded => "notification.added",
            EventType::CommentAdded => "comment.added",
        }
    }
}
