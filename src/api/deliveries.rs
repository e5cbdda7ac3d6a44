//! A webhook's deliveries as an operator sees them: those waiting for a
//! first attempt, those failed and waiting for a retry (read from the
//! delivery jobs, which carry their attempts), and those given up on.

use async_graphql::{Enum, Object, ID};
use chrono::{DateTime, Utc};

use super::cursor::ListId;
use super::error::ApiResultExt;
use super::page::{connection, PageInfo};
use super::types::datetime;
use super::{AppState, Viewer};
use crate::model::limits::page_size;
use crate::model::{DeadDelivery, Delivery, EventType, Millis};
use crate::store::records::SEPARATOR;
use crate::store::{JobKind, Queued, QueuedRead, StoreResult};
use crate::webhooks::registry;

/// Where a delivery stands.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeliveryState {
    /// Queued, not attempted yet.
    Pending,
    /// Failed at least once, waiting for its retry.
    Failed,
    /// Given up on after a day of retries (or found its webhook
    /// disabled): `replayDeadDeliveries` sends it again.
    Dead,
}

impl DeliveryState {
    fn code(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Failed => "failed",
            DeliveryState::Dead => "dead",
        }
    }
}

/// One event for one endpoint, and how its attempts went.
pub struct WebhookDelivery {
    delivery: Delivery,
    state: DeliveryState,
    queued: Millis,
    next: Option<Millis>,
    /// A dead one's last error, which it keeps beside its delivery.
    error: Option<String>,
    /// When a dead one was given up on.
    died: Option<Millis>,
}

/// The values of a delivery's fields, for both executors.
impl WebhookDelivery {
    pub(crate) fn message(&self) -> &str {
        &self.delivery.message
    }

    pub(crate) fn event(&self) -> EventType {
        self.delivery.event
    }

    pub(crate) fn body(&self) -> &str {
        &self.delivery.body
    }

    pub(crate) fn standing(&self) -> DeliveryState {
        self.state
    }

    pub(crate) fn attempts_made(&self) -> u32 {
        self.delivery.tried.attempts
    }

    pub(crate) fn error_last(&self) -> Option<&str> {
        self.error
            .as_deref()
            .or(self.delivery.tried.error.as_deref())
    }

    pub(crate) fn status_last(&self) -> Option<u16> {
        self.delivery.tried.status
    }

    pub(crate) fn next_at(&self) -> Option<DateTime<Utc>> {
        self.next.map(datetime)
    }

    pub(crate) fn queued_time(&self) -> DateTime<Utc> {
        datetime(self.queued)
    }

    pub(crate) fn died_time(&self) -> Option<DateTime<Utc>> {
        self.died.map(datetime)
    }
}

/// One event for one endpoint, and how its attempts went.
#[Object]
impl WebhookDelivery {
    /// Its `webhook-id`, the same on every attempt.
    async fn message_id(&self) -> ID {
        ID(self.message().to_owned())
    }

    async fn event_type(&self) -> EventType {
        self.event()
    }

    /// The JSON body it sends, the same on every attempt (and when
    /// replayed): what the signature signs.
    async fn payload(&self) -> &str {
        self.body()
    }

    async fn state(&self) -> DeliveryState {
        self.standing()
    }

    /// Attempts made so far, all failed.
    async fn attempts(&self) -> u32 {
        self.attempts_made()
    }

    /// Why the last attempt failed; null before the first.
    async fn last_error(&self) -> Option<&str> {
        self.error_last()
    }

    /// The HTTP status the endpoint last answered; null before the first
    /// attempt and when it did not answer (refused, timed out).
    async fn last_status(&self) -> Option<u16> {
        self.status_last()
    }

    /// When it is tried next: for one not tried yet, when it was queued (it
    /// goes as soon as a sender is free); null while a sender is trying it
    /// and for a dead one.
    async fn next_attempt_at(&self) -> Option<DateTime<Utc>> {
        self.next_at()
    }

    /// When its event was queued (a replay queues it anew).
    async fn queued_at(&self) -> DateTime<Utc> {
        self.queued_time()
    }

    /// When it was given up on; null unless it is dead.
    async fn died_at(&self) -> Option<DateTime<Utc>> {
        self.died_time()
    }
}

connection!(
    WebhookDeliveryConnection,
    WebhookDeliveryEdge,
    WebhookDelivery,
    "webhook delivery"
);

/// A page of `webhook`'s deliveries in `state`, in message-id order, for
/// both executors.
pub async fn page(
    state: &AppState,
    viewer: &Viewer,
    webhook: &str,
    wanted: DeliveryState,
    first: Option<i32>,
    after: Option<String>,
) -> async_graphql::Result<WebhookDeliveryConnection> {
    let limit = page_size("first", first).api()?;
    let cursors = &state.cursors;
    let list = ListId::deliveries(cursors, &viewer.tenant, webhook, wanted.code());
    let after = after.map(|c| list.decode_string(&c)).transpose()?;
    let store = state.store.as_ref();
    let tenant = &viewer.tenant;
    let mut found = match wanted {
        DeliveryState::Dead => registry::dead(store, tenant, webhook, after.as_deref(), limit + 1)
            .await
            .api()?
            .into_iter()
            .map(dead)
            .collect(),
        _ => waiting(store, tenant, webhook, wanted, after.as_deref(), limit + 1)
            .await
            .api()?,
    };
    let has_next = found.len() > limit;
    found.truncate(limit);
    let edges: Vec<WebhookDeliveryEdge> = found
        .into_iter()
        .map(|node| WebhookDeliveryEdge {
            cursor: list.lazy_string(&node.delivery.message),
            node,
        })
        .collect();
    Ok(WebhookDeliveryConnection {
        page_info: PageInfo::forward(&edges, after.is_some(), has_next, cursors),
        edges,
    })
}

/// Up to `limit` of the webhook's queued deliveries in `wanted`, past the
/// message `after`: one read of the queue under the webhook's keys
/// (`<webhook> <message>`, in message order), of the jobs that failed or
/// of those that never did, as far as the page goes.
async fn waiting(
    store: &dyn crate::store::Store,
    tenant: &str,
    webhook: &str,
    wanted: DeliveryState,
    after: Option<&str>,
    limit: usize,
) -> StoreResult<Vec<WebhookDelivery>> {
    let prefix = format!("{webhook}{SEPARATOR}");
    let after = after.map(|message| format!("{prefix}{message}"));
    let read = QueuedRead {
        under: &prefix,
        after: after.as_deref(),
        failed: Some(wanted == DeliveryState::Failed),
        limit,
    };
    let queued = store.queued(JobKind::Webhook, tenant, read).await?;
    queued.into_iter().map(of_job).collect()
}

fn of_job(queued: Queued) -> StoreResult<WebhookDelivery> {
    let delivery: Delivery = queued.job.payload()?;
    let state = if queued.job.failures == 0 {
        DeliveryState::Pending
    } else {
        DeliveryState::Failed
    };
    let next = match (&queued.held, queued.waits_until) {
        (_, Some(until)) => Some(until),
        (Some(_), None) => None,
        (None, None) => Some(queued.job.queued),
    };
    Ok(WebhookDelivery {
        delivery,
        state,
        queued: queued.job.queued,
        next,
        error: None,
        died: None,
    })
}

fn dead(dead: DeadDelivery) -> WebhookDelivery {
    WebhookDelivery {
        delivery: dead.delivery,
        state: DeliveryState::Dead,
        queued: dead.queued,
        next: None,
        error: Some(dead.error),
        died: Some(dead.died),
    }
}
