//! Webhooks in the API: registering, listing, rotating, disabling and
//! replaying, for `service` and `admin` callers of a tenant.

use async_graphql::{Context, Object, SimpleObject, ID};
use chrono::{DateTime, Utc};

use super::cost::{bounded_first, first_cost, list_cost, page_cost};
use super::deliveries::{self, DeliveryState, WebhookDeliveryConnection};
use super::error::{bad_input, not_found, ApiResultExt};
use super::minted::{minter, Minter};
use super::types::datetime;
use super::{require_service, state, viewer, AppState, Viewer};
use crate::model::limits::{check_id, MAX_LIST_LEN};
use crate::model::{DeadDelivery, Delivery, EventType, Tried, Webhook};
use crate::store::records::SEPARATOR;
use crate::store::{JobKind, StoreResult, WebhookJob};
use crate::webhooks::outbox::{message_id, rfc3339};
use crate::webhooks::registry::{self, MAX_WEBHOOKS, ROTATION_GRACE_MS};
use crate::webhooks::sign::Secret;
use crate::webhooks::target;

/// Longest endpoint URL accepted.
const MAX_URL_LEN: usize = 2048;
/// Most dead deliveries one page lists.
const MAX_DEAD_PAGE: usize = 100;

/// An endpoint that hears the tenant's events.
pub struct WebhookNode(pub(crate) Webhook);

/// The values of a webhook's fields, for both executors.
impl WebhookNode {
    pub(crate) fn created_time(&self) -> DateTime<Utc> {
        datetime(self.0.created)
    }

    pub(crate) fn is_paused(&self) -> bool {
        self.0.paused.is_some()
    }

    pub(crate) fn pause_reason(&self) -> Option<&str> {
        self.0.paused.as_ref().map(|p| p.reason.as_str())
    }

    pub(crate) fn paused_time(&self) -> Option<DateTime<Utc>> {
        self.0.paused.as_ref().map(|p| datetime(p.at))
    }

    /// Until when the secret the last rotation replaced still signs.
    pub(crate) fn previous_expires(&self, state: &AppState) -> Option<DateTime<Utc>> {
        let now = state.clock.now();
        let (_, until) = self.0.previous.as_ref()?;
        (*until > now).then(|| datetime(*until))
    }
}

/// The tenant's webhooks, for `service` and `admin`: for both executors.
pub(crate) async fn list(
    state: &AppState,
    viewer: &Viewer,
) -> async_graphql::Result<Vec<WebhookNode>> {
    require_service(viewer, "webhooks")?;
    let hooks = registry::list(state.store.as_ref(), &viewer.tenant)
        .await
        .api()?;
    Ok(hooks.into_iter().map(WebhookNode).collect())
}

/// One webhook of the tenant, or none, for `service` and `admin`: for both
/// executors.
pub(crate) async fn find(
    state: &AppState,
    viewer: &Viewer,
    webhook_id: &ID,
) -> async_graphql::Result<Option<WebhookNode>> {
    require_service(viewer, "webhook")?;
    let hook = registry::get(state.store.as_ref(), &viewer.tenant, webhook_id)
        .await
        .api()?;
    Ok(hook.map(WebhookNode))
}

#[Object(name = "Webhook")]
impl WebhookNode {
    /// `wh_` and 24 hex digits.
    async fn webhook_id(&self) -> ID {
        ID(self.0.id.clone())
    }

    async fn url(&self) -> &str {
        &self.0.url
    }

    /// The events it hears.
    async fn events(&self) -> &[EventType] {
        &self.0.events
    }

    /// False once disabled: nothing is sent to it, and what comes due
    /// meanwhile is kept as dead deliveries to replay.
    async fn enabled(&self) -> bool {
        self.0.enabled
    }

    async fn created_at(&self) -> DateTime<Utc> {
        self.created_time()
    }

    /// True once every attempt to reach it has failed for a day: its
    /// deliveries wait, untried and kept, until `resumeWebhook` (or
    /// `enableWebhook`) sends them.
    async fn paused(&self) -> bool {
        self.is_paused()
    }

    /// Why it was paused; null while it is not.
    async fn paused_reason(&self) -> Option<&str> {
        self.pause_reason()
    }

    /// When it was paused; null while it is not.
    async fn paused_at(&self) -> Option<DateTime<Utc>> {
        self.paused_time()
    }

    /// Until when deliveries are also signed with the secret the last
    /// rotation replaced; null when only the current one signs.
    async fn previous_secret_expires_at(&self, ctx: &Context<'_>) -> Option<DateTime<Utc>> {
        self.previous_expires(ctx.data_unchecked::<AppState>())
    }

    /// Its deliveries in `state`, in message-id order: those waiting for a
    /// first attempt, those failed and waiting for a retry (with their
    /// attempts, last error and status, and when they are tried next), or
    /// those given up on. `retryWebhookDeliveries` sends the waiting ones
    /// now; `replayDeadDeliveries` the dead ones.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn deliveries(
        &self,
        ctx: &Context<'_>,
        state: DeliveryState,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<WebhookDeliveryConnection> {
        let (app, viewer) = (super::state(ctx)?, viewer(ctx)?);
        deliveries::page(app, viewer, &self.0.id, state, first, after).await
    }

    /// Deliveries given up on after a day of retries, in message-id
    /// order: the first `first` of them, past the message `after` (the
    /// last `messageId` of the page before) if given. A page shorter than
    /// `first` is the last. Deprecated: `deliveries(state: DEAD)` lists the
    /// same as a connection, with their attempts and last status.
    #[graphql(
        complexity = "first_cost(Some(first), 20, MAX_DEAD_PAGE, child_complexity)",
        deprecation = "Use `deliveries(state: DEAD)`: the same deliveries, with `payload`, \
                       `diedAt`, `lastError` (for `error`) and `eventType` (for `event`)."
    )]
    async fn dead_deliveries(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 20)] first: i32,
        after: Option<ID>,
    ) -> async_graphql::Result<Vec<DeadDeliveryNode>> {
        let first = bounded_first(Some(first), 20, MAX_DEAD_PAGE)?;
        if let Some(after) = &after {
            check_id("after", after).api()?;
        }
        let state = state(ctx)?;
        let tenant = &viewer(ctx)?.tenant;
        let after = after.as_ref().map(|a| a.as_str());
        let dead = registry::dead(state.store.as_ref(), tenant, &self.0.id, after, first)
            .await
            .api()?;
        Ok(dead.into_iter().map(DeadDeliveryNode).collect())
    }
}

/// A delivery given up on.
pub struct DeadDeliveryNode(DeadDelivery);

#[Object(name = "DeadDelivery")]
impl DeadDeliveryNode {
    /// Its `webhook-id`, the same when replayed.
    async fn message_id(&self) -> ID {
        ID(self.0.delivery.message.clone())
    }

    async fn event(&self) -> EventType {
        self.0.delivery.event
    }

    /// The JSON body sent.
    async fn payload(&self) -> &str {
        &self.0.delivery.body
    }

    async fn queued_at(&self) -> DateTime<Utc> {
        datetime(self.0.queued)
    }

    async fn died_at(&self) -> DateTime<Utc> {
        datetime(self.0.died)
    }

    /// Why the last attempt failed.
    async fn error(&self) -> &str {
        &self.0.error
    }
}

/// A webhook with its signing secret, shown only when it is set.
#[derive(SimpleObject)]
pub struct WebhookSecret {
    pub webhook: WebhookNode,
    /// `whsec_` and the secret in base64: what a receiver verifies with.
    pub secret: String,
}

#[derive(Default)]
pub struct WebhookQuery;

#[Object]
impl WebhookQuery {
    /// The tenant's webhooks. `service` and `admin` only.
    #[graphql(complexity = "list_cost(MAX_WEBHOOKS, child_complexity)")]
    async fn webhooks(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<WebhookNode>> {
        list(state(ctx)?, viewer(ctx)?).await
    }

    /// One webhook, or null. `service` and `admin` only.
    async fn webhook(
        &self,
        ctx: &Context<'_>,
        webhook_id: ID,
    ) -> async_graphql::Result<Option<WebhookNode>> {
        find(state(ctx)?, viewer(ctx)?, &webhook_id).await
    }
}

#[derive(Default)]
pub struct WebhookMutation;

#[Object]
impl WebhookMutation {
    /// Registers an endpoint to hear `events`, signed with `secret`
    /// (`whsec_` and 24 to 64 bytes in base64; drawn when absent). The URL
    /// must be http or https and reach public addresses only (unless the
    /// server runs with `--webhooks-allow-private`). At most 16 per
    /// tenant. `service` and `admin` only.
    async fn register_webhook(
        &self,
        ctx: &Context<'_>,
        url: String,
        events: Vec<EventType>,
        secret: Option<String>,
    ) -> async_graphql::Result<WebhookSecret> {
        let (state, viewer) = (state(ctx)?, viewer(ctx)?);
        require_service(viewer, "registerWebhook")?;
        check_url(state, &url).await?;
        let events = check_events(events)?;
        let minted = minter(ctx);
        let secret = secret_arg(secret, &minted)?;
        let store = state.store.as_ref();
        let tenant = &viewer.tenant;
        let id = format!("wh_{}", minted.id().to_hex());
        // Registered under its id already: by the first attempt of this
        // request, which did not live to answer. Answered as it would have.
        if let Some(first) = registry::get(store, tenant, &id).await.api()? {
            return Ok(WebhookSecret {
                secret: first.secret.clone(),
                webhook: WebhookNode(first),
            });
        }
        if registry::list(store, tenant).await.api()?.len() >= MAX_WEBHOOKS {
            return Err(bad_input(format!(
                "a tenant has at most {MAX_WEBHOOKS} webhooks; disable and reuse one"
            )));
        }
        let hook = Webhook {
            id,
            url,
            events,
            secret: secret.to_text(),
            previous: None,
            enabled: true,
            created: minted.now(&*state.clock),
            failing_since: None,
            paused: None,
            version: 0,
        };
        registry::put(store, tenant, &hook).await.api()?;
        state.outbox.forget(tenant);
        Ok(WebhookSecret {
            secret: hook.secret.clone(),
            webhook: WebhookNode(Webhook { version: 1, ..hook }),
        })
    }

    /// Replaces a webhook's secret (with `secret`, or one drawn). The old
    /// one signs beside it for a day, so a receiver can switch without
    /// refusing a delivery. `service` and `admin` only.
    async fn rotate_webhook_secret(
        &self,
        ctx: &Context<'_>,
        webhook_id: ID,
        secret: Option<String>,
    ) -> async_graphql::Result<WebhookSecret> {
        // Drawn from the request's key, if it has one, and stamped with
        // its first attempt's time: a retry of a rotation that did not
        // live to answer finds its secret in place and rotates nothing.
        let minted = minter(ctx);
        let secret = secret_arg(secret, &minted)?.to_text();
        let now = minted.now(&*state(ctx)?.clock);
        let hook = change(ctx, "rotateWebhookSecret", &webhook_id, |hook| {
            if hook.secret == secret {
                return;
            }
            let old = std::mem::replace(&mut hook.secret, secret.clone());
            hook.previous = Some((old, now.saturating_add(ROTATION_GRACE_MS)));
        })
        .await?;
        Ok(WebhookSecret {
            secret: hook.secret.clone(),
            webhook: WebhookNode(hook),
        })
    }

    /// Stops sending to a webhook; what comes due meanwhile is kept as
    /// dead deliveries. `service` and `admin` only.
    async fn disable_webhook(
        &self,
        ctx: &Context<'_>,
        webhook_id: ID,
    ) -> async_graphql::Result<WebhookNode> {
        let hook = change(ctx, "disableWebhook", &webhook_id, |h| h.enabled = false).await?;
        Ok(WebhookNode(hook))
    }

    /// Sends to a disabled webhook again, and resumes a paused one. Its
    /// waiting deliveries are sent now. `service` and `admin` only.
    async fn enable_webhook(
        &self,
        ctx: &Context<'_>,
        webhook_id: ID,
    ) -> async_graphql::Result<WebhookNode> {
        let hook = change(ctx, "enableWebhook", &webhook_id, |h| {
            h.enabled = true;
            resume(h);
        })
        .await?;
        resumed(ctx, hook).await
    }

    /// Resumes a webhook its circuit paused: its waiting deliveries are
    /// sent now, and a day of failures pauses it again. `service` and
    /// `admin` only.
    async fn resume_webhook(
        &self,
        ctx: &Context<'_>,
        webhook_id: ID,
    ) -> async_graphql::Result<WebhookNode> {
        let hook = change(ctx, "resumeWebhook", &webhook_id, resume).await?;
        resumed(ctx, hook).await
    }

    /// Sends the webhook a signed `webhook.test` event now, whatever events
    /// it hears, as any other delivery (retried on failure, kept dead
    /// after a day). Returns its message id (the `webhook-id` header).
    /// `BAD_USER_INPUT` while the webhook is disabled. `service` and
    /// `admin` only.
    async fn send_test_event(
        &self,
        ctx: &Context<'_>,
        webhook_id: ID,
    ) -> async_graphql::Result<ID> {
        let (state, viewer) = (state(ctx)?, viewer(ctx)?);
        require_service(viewer, "sendTestEvent")?;
        let hook = found(state, viewer, &webhook_id).await?;
        if !hook.enabled {
            return Err(bad_input(format!(
                "webhook {} is disabled: enable it to send it anything",
                hook.id
            )));
        }
        let now = state.clock.now();
        // Drawn from the request's key, if it has one: a retry queues the
        // same message, which is queued once.
        let subject = minter(ctx).id().to_hex();
        let message = message_id(&viewer.tenant, EventType::WebhookTest, &subject);
        let delivery = Delivery {
            webhook: hook.id.clone(),
            message: message.clone(),
            event: EventType::WebhookTest,
            body: serde_json::json!({
                "type": EventType::WebhookTest.name(),
                "timestamp": rfc3339(now),
                "data": { "webhookId": hook.id },
            })
            .to_string(),
            hold: None,
            tried: Tried::default(),
        };
        let job = WebhookJob::of(&viewer.tenant, &delivery, now).api()?;
        state.store.enqueue(&job).await.api()?;
        state.outbox.wake.notify_one();
        Ok(ID(message))
    }

    /// Makes every delivery of the webhook that waits for a retry due now
    /// (those a sender is trying at this moment are left to it), so an
    /// endpoint back from an outage gets its events without waiting out the
    /// schedule. Returns how many were brought forward. `service` and
    /// `admin` only.
    async fn retry_webhook_deliveries(
        &self,
        ctx: &Context<'_>,
        webhook_id: ID,
    ) -> async_graphql::Result<u64> {
        let (state, viewer) = (state(ctx)?, viewer(ctx)?);
        require_service(viewer, "retryWebhookDeliveries")?;
        let hook = found(state, viewer, &webhook_id).await?;
        let retried = retry_now(state, &viewer.tenant, &hook.id).await.api()?;
        Ok(retried)
    }

    /// Queues a webhook's dead deliveries again (those of `messageIds`, or
    /// all), with a new day of retries; each keeps its `webhook-id`.
    /// Returns how many were queued. A paused webhook is resumed: a replay
    /// says the endpoint is back. `service` and `admin` only.
    async fn replay_dead_deliveries(
        &self,
        ctx: &Context<'_>,
        webhook_id: ID,
        message_ids: Option<Vec<ID>>,
    ) -> async_graphql::Result<u64> {
        let (state, viewer) = (state(ctx)?, viewer(ctx)?);
        require_service(viewer, "replayDeadDeliveries")?;
        let ids: Option<Vec<String>> =
            message_ids.map(|ids| ids.into_iter().map(|i| i.0).collect());
        if ids.as_ref().is_some_and(|ids| ids.len() > MAX_LIST_LEN) {
            return Err(bad_input(format!(
                "messageIds has more than {MAX_LIST_LEN} entries"
            )));
        }
        let hook = found(state, viewer, &webhook_id).await?;
        if hook.paused.is_some() {
            registry::change(state.store.as_ref(), &viewer.tenant, &hook.id, resume)
                .await
                .api()?;
            retry_now(state, &viewer.tenant, &hook.id).await.api()?;
        }
        let replayed = replay(state, &viewer.tenant, &webhook_id, ids.as_deref())
            .await
            .api()?;
        Ok(replayed)
    }
}

/// Queues dead deliveries again (those of `messages`, or all, read a page
/// at a time), each before it is forgotten (a crash in between keeps it
/// both queued and dead; a replay again queues nothing twice while it
/// waits).
async fn replay(
    state: &AppState,
    tenant: &str,
    webhook: &str,
    messages: Option<&[String]>,
) -> StoreResult<u64> {
    let store = state.store.as_ref();
    let mut replayed = 0;
    if let Some(messages) = messages {
        let dead = registry::dead_of(store, tenant, webhook, messages).await?;
        replayed += requeue(state, tenant, &dead).await?;
    } else {
        let mut after: Option<String> = None;
        loop {
            let page =
                registry::dead(store, tenant, webhook, after.as_deref(), MAX_DEAD_PAGE).await?;
            replayed += requeue(state, tenant, &page).await?;
            match page.last() {
                Some(last) if page.len() == MAX_DEAD_PAGE => {
                    after = Some(last.delivery.message.clone());
                }
                _ => break,
            }
        }
    }
    if replayed > 0 {
        state.outbox.wake.notify_one();
    }
    Ok(replayed)
}

/// Lifts a webhook's pause, and starts its count of failures anew.
fn resume(hook: &mut Webhook) {
    hook.paused = None;
    hook.failing_since = None;
}

/// `hook`, just resumed: what waited while it was paused goes now.
async fn resumed(ctx: &Context<'_>, hook: Webhook) -> async_graphql::Result<WebhookNode> {
    let (state, viewer) = (state(ctx)?, viewer(ctx)?);
    retry_now(state, &viewer.tenant, &hook.id).await.api()?;
    Ok(WebhookNode(hook))
}

/// Makes the webhook's deliveries waiting for a retry due now, and wakes
/// this process's sender. Returns how many.
async fn retry_now(state: &AppState, tenant: &str, webhook: &str) -> StoreResult<u64> {
    let prefix = format!("{webhook}{SEPARATOR}");
    let now = state.clock.now();
    let retried = state
        .store
        .hasten(JobKind::Webhook, tenant, &prefix, now)
        .await?;
    if retried > 0 {
        state.outbox.wake.notify_one();
    }
    Ok(retried)
}

/// Queues `dead` again, each before it is forgotten. Returns how many.
async fn requeue(state: &AppState, tenant: &str, dead: &[DeadDelivery]) -> StoreResult<u64> {
    let store = state.store.as_ref();
    let now = state.clock.now();
    for dead in dead {
        let delivery = Delivery {
            tried: Tried::default(),
            ..dead.delivery.clone()
        };
        store
            .enqueue(&WebhookJob::of(tenant, &delivery, now)?)
            .await?;
        registry::unbury(store, tenant, dead).await?;
    }
    Ok(dead.len() as u64)
}

/// The webhook `id` of the viewer's tenant; `NOT_FOUND` if there is none.
async fn found(state: &AppState, viewer: &Viewer, id: &str) -> async_graphql::Result<Webhook> {
    registry::get(state.store.as_ref(), &viewer.tenant, id)
        .await
        .api()?
        .ok_or_else(|| not_found(format!("no webhook {id}")))
}

/// Changes webhook `id` for a `service` or `admin` caller.
async fn change(
    ctx: &Context<'_>,
    what: &str,
    id: &str,
    f: impl Fn(&mut Webhook),
) -> async_graphql::Result<Webhook> {
    let (state, viewer) = (state(ctx)?, viewer(ctx)?);
    require_service(viewer, what)?;
    let changed = registry::change(state.store.as_ref(), &viewer.tenant, id, f)
        .await
        .api()?
        .ok_or_else(|| not_found(format!("no webhook {id}")))?;
    state.outbox.forget(&viewer.tenant);
    Ok(changed)
}

/// `BAD_USER_INPUT` unless `url` is an endpoint webhooks may go to now.
async fn check_url(state: &AppState, url: &str) -> async_graphql::Result<()> {
    if url.len() > MAX_URL_LEN {
        return Err(bad_input(format!(
            "url is {} bytes; at most {MAX_URL_LEN} are allowed",
            url.len()
        )));
    }
    let parsed = Webhook::check_url(url).map_err(bad_input)?;
    target::resolve(&parsed, state.webhooks_allow_private)
        .await
        .map_err(bad_input)?;
    Ok(())
}

/// The events, each once; `BAD_USER_INPUT` if none.
fn check_events(mut events: Vec<EventType>) -> async_graphql::Result<Vec<EventType>> {
    let mut seen = Vec::new();
    events.retain(|e| {
        let new = !seen.contains(e);
        seen.push(*e);
        new
    });
    if events.is_empty() {
        return Err(bad_input("events must name at least one event"));
    }
    if events.contains(&EventType::WebhookTest) {
        return Err(bad_input(
            "WEBHOOK_TEST is not heard: sendTestEvent sends it to one webhook on demand",
        ));
    }
    Ok(events)
}

/// A secret given, checked, or one drawn.
fn secret_arg(secret: Option<String>, minted: &Minter) -> async_graphql::Result<Secret> {
    match secret {
        Some(text) => Secret::parse(&text).map_err(|e| bad_input(format!("secret: {e}"))),
        None => Ok(Secret::draw_from(|len| minted.bytes(len))),
    }
}
