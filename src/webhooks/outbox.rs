//! The outbox: events queued as delivery jobs ([`JobKind::Webhook`]), one
//! per endpoint that hears them, by the job that carries the event, before
//! that job is finished (see the [module](super) doc for why none is lost).
//!
//! An event's message id is derived from what it is about (its tenant, type
//! and subject: an action's id, a comment's, a notice's owner and source),
//! so a carrying job run again queues the same message, under the same job
//! key, and a receiver that saw it drops it by its `webhook-id`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{stream, StreamExt, TryStreamExt};
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::registry;
use crate::clock::Clock;
use crate::model::EdgeKind;
use crate::model::{
    Action, Comment, Delivery, EventType, Hold, Millis, Notice, ObjectId, Tried, Webhook,
};
use crate::store::records::SEPARATOR;
use crate::store::{FollowJob, JobKind, Store, StoreError, StoreResult, WebhookJob};

/// How long a process trusts the webhooks it read of a tenant. A change
/// made in this process is seen at once; one made in another process
/// (MongoDB) within this.
const CACHE_FOR: Duration = Duration::from_secs(1);

/// Deliveries queued at once.
const QUEUED_AT_ONCE: usize = 16;

/// What happened, to tell the endpoints that hear it.
#[derive(Clone, Debug)]
pub struct Event {
    pub kind: EventType,
    /// What it is about, unique within its tenant and type: the message
    /// id is derived from it.
    pub subject: String,
    /// When it happened.
    pub at: Millis,
    /// The body's `data`.
    pub data: Value,
    /// A job that must be gone before it is sent.
    pub hold: Option<Hold>,
}

/// The message id of `subject`'s `kind` event in `tenant`: `msg_` and 32
/// hex digits of a SHA-256 of the three.
pub fn message_id(tenant: &str, kind: EventType, subject: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [tenant, kind.name(), subject] {
        ctx.update(part.as_bytes());
        ctx.update(&[0x1f]);
    }
    let digest = ctx.finish();
    let hex: String = digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("msg_{hex}")
}

/// A time as the bodies write it: RFC 3339 in UTC, to the millisecond.
pub fn rfc3339(at: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(at)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Event {
    /// `action.recorded`: the action as recorded.
    pub fn action_recorded(action: &Action) -> Event {
        Event {
            kind: EventType::ActionRecorded,
            subject: action.id.to_hex(),
            at: action.conducted,
            data: json!({
                "tenant": action.tenant,
                "actionId": action.id.to_hex(),
                "actorId": action.actor_id,
                "conductedAt": rfc3339(action.conducted),
                "scope": action.scope,
                "refIds": action.ref_ids,
                "tags": action.tags,
                "descriptor": action.descriptor,
            }),
            hold: None,
        }
    }

    /// `action.delivered`: sent once the action's fan-out job is gone.
    pub fn action_delivered(action: &Action, now: Millis) -> Event {
        Event {
            kind: EventType::ActionDelivered,
            subject: action.id.to_hex(),
            at: now,
            data: json!({
                "tenant": action.tenant,
                "actionId": action.id.to_hex(),
                "actorId": action.actor_id,
            }),
            hold: Some(Hold {
                kind: JobKind::FanOut.code().to_owned(),
                key: action.id.to_hex(),
            }),
        }
    }

    /// `comment.added`.
    pub fn comment_added(tenant: &str, action: &Action, comment: &Comment) -> Event {
        Event {
            kind: EventType::CommentAdded,
            subject: comment.id.to_hex(),
            at: comment.created,
            data: json!({
                "tenant": tenant,
                "commentId": comment.id.to_hex(),
                "actionId": comment.action_id.to_hex(),
                "actionActorId": action.actor_id,
                "authorId": comment.author_id,
                "text": comment.text,
                "createdAt": rfc3339(comment.created),
            }),
            hold: None,
        }
    }

    /// `action.updated`: `action` as `change` (`scope`, `hidden`) left it
    /// at `now`. Each change is its own message.
    pub fn action_updated(action: &Action, change: &str, now: Millis) -> Event {
        Event {
            kind: EventType::ActionUpdated,
            subject: format!("{}{SEPARATOR}{change}{SEPARATOR}{now}", action.id.to_hex()),
            at: now,
            data: json!({
                "tenant": action.tenant,
                "actionId": action.id.to_hex(),
                "actorId": action.actor_id,
                "change": change,
                "scope": action.scope,
                "hidden": action.hidden,
            }),
            hold: None,
        }
    }

    /// `action.deleted`: an action is gone, at `now`.
    pub fn action_deleted(action: &Action, now: Millis) -> Event {
        Event {
            kind: EventType::ActionDeleted,
            subject: action.id.to_hex(),
            at: now,
            data: json!({
                "tenant": action.tenant,
                "actionId": action.id.to_hex(),
                "actorId": action.actor_id,
            }),
            hold: None,
        }
    }

    /// `reaction.added`: `user` liked `action_id` at `at`, as the like's
    /// notice job carries it. Each like is its own message.
    pub fn reaction_added(tenant: &str, action_id: &str, user: &str, at: Millis) -> Event {
        Event {
            kind: EventType::ReactionAdded,
            subject: format!("{action_id}{SEPARATOR}{user}{SEPARATOR}{at}"),
            at,
            data: json!({
                "tenant": tenant,
                "actionId": action_id,
                "userId": user,
                "kind": "like",
                "at": rfc3339(at),
            }),
            hold: None,
        }
    }

    /// `followed`: the follow `job` carries (of a user or a group; a
    /// friendship is not a follow), told before the job ends. None for
    /// another edge.
    pub fn followed(job: &FollowJob) -> Option<Event> {
        let target = match job.kind {
            EdgeKind::Follows => "user",
            EdgeKind::Group => "group",
            EdgeKind::Friend => return None,
        };
        let subject = format!(
            "{}{SEPARATOR}{}{SEPARATOR}{target}{SEPARATOR}{}",
            job.reader, job.actor, job.at
        );
        Some(Event {
            kind: EventType::Followed,
            subject,
            at: job.at,
            data: json!({
                "tenant": job.tenant,
                "userId": job.reader,
                "followedId": job.actor,
                "target": target,
                "at": rfc3339(job.at),
            }),
            hold: None,
        })
    }

    /// `notification.added`: one notice for `owner`, subject to their
    /// preferences (only notices they want are told).
    pub fn notification_added(tenant: &str, owner: &str, notice: &Notice) -> Event {
        Event {
            kind: EventType::NotificationAdded,
            subject: format!("{owner}{SEPARATOR}{}", notice.source),
            at: notice.at,
            data: json!({
                "tenant": tenant,
                "userId": owner,
                "reason": notice.reason,
                "actorId": notice.actor,
                "actionId": notice.action_id.map(|id| id.to_hex()),
                "commentId": notice.comment_id.map(|id| id.to_hex()),
                "refId": notice.ref_id,
                "at": rfc3339(notice.at),
            }),
            hold: None,
        }
    }
}

/// What an action's fan-out tells: `action.recorded`, and
/// `action.delivered` held until the fan-out job is gone.
pub fn action_events(listening: &Listening, action: &Action, now: Millis) -> Vec<Event> {
    let mut events = Vec::new();
    if listening.wants(EventType::ActionRecorded) {
        events.push(Event::action_recorded(action));
    }
    if listening.wants(EventType::ActionDelivered) {
        events.push(Event::action_delivered(action, now));
    }
    events
}

/// The one event of `kind` an action's change tells, if any endpoint
/// hears it.
pub fn one(listening: &Listening, kind: EventType, event: impl FnOnce() -> Event) -> Vec<Event> {
    listening.wants(kind).then(event).into_iter().collect()
}

/// Tells the follow `job` carries, if it is one and an endpoint hears it.
pub async fn tell_followed(outbox: &Outbox, job: &FollowJob) -> StoreResult<()> {
    if job.kind == EdgeKind::Friend {
        return Ok(());
    }
    outbox
        .tell(&job.tenant, |l| {
            if l.wants(EventType::Followed) {
                Event::followed(job).into_iter().collect()
            } else {
                Vec::new()
            }
        })
        .await
        .map(drop)
}

/// What notices written (or found written) for their owners tell.
pub fn notice_events(
    listening: &Listening,
    tenant: &str,
    delivered: &[crate::notify::Delivered],
) -> Vec<Event> {
    if !listening.wants(EventType::NotificationAdded) {
        return Vec::new();
    }
    delivered
        .iter()
        .flat_map(|d| {
            d.wanted
                .iter()
                .map(|n| Event::notification_added(tenant, &d.owner, n))
        })
        .collect()
}

/// The webhooks of one tenant, as an event about to be told finds them.
#[derive(Clone, Debug)]
pub struct Listening(Arc<[Webhook]>);

impl Listening {
    /// Whether any endpoint hears `kind`.
    pub fn wants(&self, kind: EventType) -> bool {
        self.0.iter().any(|h| h.hears(kind))
    }
}

/// Queues events' deliveries. One per process, shared by its worker (which
/// tells events) and its API (whose registrations it must see at once).
pub struct Outbox {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// Per tenant: when read, and its webhooks.
    cache: Mutex<HashMap<String, (Instant, Listening)>>,
    /// Wakes this process's sender when a delivery is queued.
    pub wake: Arc<Notify>,
    /// A delivery held by a running job was queued since the last
    /// [`Outbox::released`].
    holding: AtomicBool,
}

impl Outbox {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Arc<Outbox> {
        Arc::new(Outbox {
            store,
            clock,
            cache: Mutex::default(),
            wake: Arc::default(),
            holding: AtomicBool::new(false),
        })
    }

    /// A job that deliveries may wait for ended: wakes the sender if one
    /// was queued to wait.
    pub fn released(&self) {
        if self.holding.swap(false, Ordering::Relaxed) {
            self.wake.notify_one();
        }
    }

    /// The tenant's webhooks, read at most [`CACHE_FOR`] ago.
    pub async fn listening(&self, tenant: &str) -> StoreResult<Listening> {
        if let Some((read, hooks)) = self.lock().get(tenant) {
            if read.elapsed() < CACHE_FOR {
                return Ok(hooks.clone());
            }
        }
        let hooks = Listening(registry::list(self.store.as_ref(), tenant).await?.into());
        self.lock()
            .insert(tenant.to_owned(), (Instant::now(), hooks.clone()));
        Ok(hooks)
    }

    /// Forgets what was read of `tenant`: one of its webhooks changed.
    pub fn forget(&self, tenant: &str) {
        self.lock().remove(tenant);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Listening)>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues the events `build` gives, if any endpoint of `tenant`
    /// listens (`build` is not called otherwise), one delivery per
    /// endpoint that hears each. Returns how many were queued.
    pub async fn tell(
        &self,
        tenant: &str,
        build: impl FnOnce(&Listening) -> Vec<Event>,
    ) -> StoreResult<usize> {
        let queued = self.queue(tenant, build).await?;
        if queued > 0 {
            self.wake.notify_one();
        }
        Ok(queued)
    }

    /// As [`Outbox::tell`], for the events of a change not made yet (an
    /// action's update or deletion): the sender is not woken, and sends
    /// each once the store shows its change ([`change_made`]).
    pub async fn tell_before(
        &self,
        tenant: &str,
        build: impl FnOnce(&Listening) -> Vec<Event>,
    ) -> StoreResult<usize> {
        self.queue(tenant, build).await
    }

    async fn queue(
        &self,
        tenant: &str,
        build: impl FnOnce(&Listening) -> Vec<Event>,
    ) -> StoreResult<usize> {
        let listening = self.listening(tenant).await?;
        if listening.0.is_empty() {
            return Ok(0);
        }
        let now = self.clock.now();
        let mut jobs = Vec::new();
        for event in build(&listening) {
            if event.hold.is_some() {
                self.holding.store(true, Ordering::Relaxed);
            }
            let message = message_id(tenant, event.kind, &event.subject);
            let body = json!({
                "type": event.kind.name(),
                "timestamp": rfc3339(event.at),
                "data": event.data,
            })
            .to_string();
            for hook in listening.0.iter().filter(|h| h.hears(event.kind)) {
                let delivery = Delivery {
                    webhook: hook.id.clone(),
                    message: message.clone(),
                    event: event.kind,
                    body: body.clone(),
                    hold: event.hold.clone(),
                    tried: Tried::default(),
                };
                jobs.push(WebhookJob::of(tenant, &delivery, now)?);
            }
        }
        let queued = jobs.len();
        let store = self.store.as_ref();
        stream::iter(jobs)
            .map(|job| async move { store.enqueue(&job).await })
            .buffer_unordered(QUEUED_AT_ONCE)
            .try_collect::<Vec<bool>>()
            .await?;
        Ok(queued)
    }
}

/// Whether the store shows the change an action's update or deletion
/// event tells (queued before the change was made, by
/// [`Outbox::tell_before`]): the action gone, hidden (or gone), or in
/// the scope told (or gone). `None` for an event of another type.
pub async fn change_made(
    store: &dyn Store,
    tenant: &str,
    delivery: &Delivery,
) -> StoreResult<Option<bool>> {
    if !matches!(
        delivery.event,
        EventType::ActionDeleted | EventType::ActionUpdated
    ) {
        return Ok(None);
    }
    let body: Value = serde_json::from_str(&delivery.body)
        .map_err(|e| StoreError::internal("a webhook delivery's body is not JSON", e))?;
    let data = &body["data"];
    let Some(id) = data["actionId"]
        .as_str()
        .and_then(|id| ObjectId::parse_str(id).ok())
    else {
        return Ok(Some(true));
    };
    let Some(action) = store.get_actions(tenant, &[id]).await?.pop() else {
        return Ok(Some(true));
    };
    Ok(Some(match (delivery.event, data["change"].as_str()) {
        (EventType::ActionUpdated, Some("hidden")) => action.hidden,
        (EventType::ActionUpdated, Some("scope")) => {
            serde_json::to_value(action.scope).ok().as_ref() == Some(&data["scope"])
        }
        (EventType::ActionUpdated, _) => true,
        _ => false,
    }))
}
