//! The sender: claims delivery jobs under a lease, signs each and posts it
//! to its endpoint, and retries what fails.
//!
//! An attempt succeeds when the endpoint answers 2xx within
//! [`ATTEMPT_TIMEOUT`]. A failure is tried again at the next point of
//! [`RETRY_AT`], counted from when the event was queued: the job is given
//! back to the queue deferred to that time ([`JobStore::defer`]), which
//! the store keeps, so a restart tries it then and not before. After the
//! last point, a day on, the delivery is kept as dead ([`registry::bury`])
//! until it is replayed. A job held by a worker that died is taken over
//! once its lease runs out.
//!
//! Redirects are not followed, and connections go only to addresses
//! [`target`] allows, checked as they are resolved for the connection
//! itself. Proxy variables of the environment (`HTTP_PROXY`, `HTTPS_PROXY`,
//! `ALL_PROXY`) are ignored: through a proxy, the connection's address
//! is the proxy's, and that check would see none of the endpoint's. Only
//! `--webhooks-proxy` sends through one, and then the proxy decides what
//! is reached (the URL's own check at registration, and of an address in
//! it at each attempt, still hold).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::circuit;
use super::outbox::{self, Outbox};
use super::registry;
use super::target;
use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::model::{DeadDelivery, Delivery, Millis, Tried, Webhook};
use crate::store::{JobKind, Jobs, Lease, QueuedRead, Store, StoreError, StoreResult};

const SECOND: Millis = 1000;
const MINUTE: Millis = 60 * SECOND;
const HOUR: Millis = 60 * MINUTE;

/// When a failed delivery is tried again, counted from when it was queued:
/// closely at first, so an endpoint down for a few seconds (a deploy, a
/// restart) has its events within a minute, then backing off to the day.
/// A failure after the last is dead.
pub const RETRY_AT: [Millis; 14] = [
    5 * SECOND,
    15 * SECOND,
    30 * SECOND,
    MINUTE,
    2 * MINUTE,
    5 * MINUTE,
    15 * MINUTE,
    30 * MINUTE,
    HOUR,
    2 * HOUR,
    4 * HOUR,
    8 * HOUR,
    16 * HOUR,
    24 * HOUR,
];

/// How long an endpoint has to answer.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// A claim's lease: longer than an attempt takes.
const LEASE_MS: Millis = 60 * SECOND;
/// Deliveries claimed, and sent, at once.
const AT_ONCE: usize = 32;
/// How soon a delivery held back by a job still running is looked at again.
const HOLD_MS: Millis = 100;
/// How long an update or deletion told before it is made waits for the
/// store to show it before it is taken for never made. The mutation makes
/// it at once; this is far longer than any store write takes.
const CHANGE_GRACE_MS: Millis = 10 * SECOND;

/// How a process's sender runs.
#[derive(Clone, Debug)]
pub struct SendConfig {
    /// Identifies the sender in leases.
    pub id: String,
    /// `--webhooks-allow-private`: endpoints on loopback and private
    /// networks are allowed.
    pub allow_private: bool,
    /// How often an idle sender looks for deliveries it was not woken for.
    pub poll_interval: Duration,
    /// `--webhooks-proxy`: sends through this proxy; none ignores the
    /// environment's proxy variables and connects directly.
    pub proxy: Option<String>,
}

impl Default for SendConfig {
    fn default() -> Self {
        SendConfig {
            id: format!(
                "webhooks-{}-{}",
                std::process::id(),
                bson::oid::ObjectId::new()
            ),
            allow_private: false,
            poll_interval: Duration::from_millis(500),
            proxy: None,
        }
    }
}

/// Sends the deliveries the outbox queued.
#[derive(Clone)]
pub struct Sender {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    outbox: Arc<Outbox>,
    metrics: Arc<Metrics>,
    client: reqwest::Client,
    config: SendConfig,
}

/// How one attempt went.
enum Outcome {
    Sent,
    /// Not sent yet: it waits for a job still running, or for the change
    /// it tells to be made.
    Held,
    /// The change it tells was never made (the process that was to make
    /// it died first): nothing to send.
    Unmade,
    /// The webhook is gone: nothing to send to.
    Gone,
    /// The webhook is disabled: kept dead at once, to replay.
    Disabled,
    /// The webhook is paused by its circuit: it waits, untried.
    Paused,
    /// Why, and the status the endpoint answered if it did.
    Failed(String, Option<u16>),
}

impl Sender {
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        outbox: Arc<Outbox>,
        metrics: Arc<Metrics>,
        config: SendConfig,
    ) -> anyhow::Result<Sender> {
        let builder = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .connect_timeout(ATTEMPT_TIMEOUT / 2)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("Riverfeed-Webhooks/", env!("CARGO_PKG_VERSION")));
        let client = match &config.proxy {
            // The resolver would see only the proxy's name, which the
            // operator chose: the proxy reaches the endpoints.
            Some(proxy) => builder.proxy(reqwest::Proxy::all(proxy.as_str())?),
            None => builder.no_proxy().dns_resolver(Arc::new(Checked {
                allow_private: config.allow_private,
            })),
        }
        .build()?;
        Ok(Sender {
            store,
            clock,
            outbox,
            metrics,
            client,
            config,
        })
    }

    /// Sends until `shutdown`: whatever is due, then waits to be woken (a
    /// delivery queued here) or for the poll interval.
    pub async fn run(self, shutdown: CancellationToken) {
        info!(sender = %self.config.id, "webhook sender started");
        let wake = self.outbox.wake.clone();
        loop {
            let claimed = match self.round().await {
                Ok(n) => n,
                Err(err) => {
                    warn!(cause = %err.chain(), "webhook deliveries could not be claimed");
                    0
                }
            };
            if claimed >= AT_ONCE {
                continue;
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = wake.notified() => {}
                _ = tokio::time::sleep(self.config.poll_interval) => {}
            }
        }
        info!("webhook sender stopped");
    }

    /// Claims the deliveries due and attempts each, many at once, and
    /// counts the round once they are settled. Returns how many were
    /// claimed.
    pub async fn round(&self) -> StoreResult<usize> {
        let now = self.clock.now();
        let leases = self
            .store
            .claim(JobKind::Webhook, &self.config.id, now, LEASE_MS, AT_ONCE)
            .await?;
        let claimed = leases.len();
        stream::iter(leases)
            .for_each_concurrent(AT_ONCE, |lease| async move {
                if let Err(err) = self.attempt(&lease).await {
                    warn!(key = %lease.job.key, cause = %err.chain(), "a webhook delivery could not be settled; it is tried again when its lease runs out");
                }
            })
            .await;
        self.metrics.webhook_sender_rounds.inc();
        Ok(claimed)
    }

    /// One attempt of the delivery `lease` holds, and what follows from it.
    async fn attempt(&self, lease: &Lease) -> StoreResult<()> {
        let delivery: Delivery = lease.job.payload()?;
        let store = self.store.as_ref();
        let tenant = &lease.job.tenant;
        let hook = registry::get(store, tenant, &delivery.webhook).await?;
        let outcome = match &hook {
            None => Outcome::Gone,
            Some(hook) if !hook.enabled => Outcome::Disabled,
            Some(hook) if hook.paused.is_some() => Outcome::Paused,
            Some(hook) => self.send(lease, hook, &delivery).await?,
        };
        let now = self.clock.now();
        match outcome {
            Outcome::Sent => {
                self.metrics.webhook("sent");
                if let Some(hook) = hook.filter(|h| h.failing_since.is_some()) {
                    circuit::reached(store, tenant, &hook).await?;
                }
                store.finish(lease).await
            }
            Outcome::Gone => store.finish(lease).await,
            Outcome::Unmade => {
                info!(webhook = %delivery.webhook, message = %delivery.message, "webhook delivery dropped: the change it tells was not made");
                store.finish(lease).await
            }
            Outcome::Held => store.defer(lease, now.saturating_add(HOLD_MS)).await,
            Outcome::Paused => {
                store
                    .defer(lease, now.saturating_add(circuit::LOOK_AGAIN_MS))
                    .await
            }
            Outcome::Disabled => {
                let why = "the webhook was disabled when it came due".to_owned();
                self.bury(lease, delivery, now, why).await
            }
            Outcome::Failed(why, status) => {
                self.metrics.webhook("failed");
                if let Some(hook) = &hook {
                    circuit::failed(store, tenant, hook, now, &why).await?;
                }
                let mut delivery = delivery;
                delivery.tried = Tried {
                    attempts: delivery.tried.attempts.saturating_add(1),
                    error: Some(why.clone()),
                    status,
                };
                let elapsed = now.saturating_sub(lease.job.queued);
                match RETRY_AT.iter().find(|&&at| at > elapsed) {
                    Some(at) => {
                        warn!(webhook = %delivery.webhook, message = %delivery.message, status, cause = %why, retry_in_ms = lease.job.queued.saturating_add(*at) - now, "webhook delivery failed; retrying");
                        self.metrics.webhook("retried");
                        let due = lease.job.queued.saturating_add(*at);
                        // The attempt is recorded in the job given back, in
                        // the same step: the deliveries view reads it there,
                        // and pages the failed ones by the job's count.
                        let mut tried = lease.clone();
                        tried.job.payload = serde_json::to_string(&delivery).map_err(|e| {
                            StoreError::internal("cannot encode a webhook delivery", e)
                        })?;
                        tried.job.failures = delivery.tried.attempts;
                        store.defer(&tried, due).await
                    }
                    None => {
                        warn!(webhook = %delivery.webhook, message = %delivery.message, status, cause = %why, "webhook delivery failed for a day; kept as dead");
                        self.bury(lease, delivery, now, why).await
                    }
                }
            }
        }
    }

    /// Keeps a delivery given up on, then finishes its job (a crash in
    /// between keeps it twice over the same key: once).
    async fn bury(
        &self,
        lease: &Lease,
        delivery: Delivery,
        now: Millis,
        error: String,
    ) -> StoreResult<()> {
        let dead = DeadDelivery {
            delivery,
            queued: lease.job.queued,
            died: now,
            error,
        };
        registry::bury(self.store.as_ref(), &lease.job.tenant, &dead).await?;
        self.store.finish(lease).await?;
        // Counted once it has left the queue, so the count and the queue's
        // depth never disagree.
        self.metrics.webhook("dead");
        Ok(())
    }

    /// Signs and posts one delivery to `hook`.
    async fn send(
        &self,
        lease: &Lease,
        hook: &Webhook,
        delivery: &Delivery,
    ) -> StoreResult<Outcome> {
        let store = self.store.as_ref();
        let tenant = &lease.job.tenant;
        // An update or deletion is told before it is made: sent once the
        // store shows it. Looked at before the first attempt only: once
        // shown, a later change (the scope set again) does not unmake it.
        if delivery.tried.attempts == 0 {
            if let Some(false) = outbox::change_made(store, tenant, delivery).await? {
                let waited = self.clock.now().saturating_sub(lease.job.queued);
                return Ok(if waited < CHANGE_GRACE_MS {
                    Outcome::Held
                } else {
                    Outcome::Unmade
                });
            }
        }
        if let Some(hold) = &delivery.hold {
            let kind = JobKind::of_code(&hold.kind)?;
            let running = store
                .queued(kind, tenant, QueuedRead::under(&hold.key))
                .await?;
            if running.iter().any(|q| q.job.key == hold.key) {
                return Ok(Outcome::Held);
            }
        }
        let url = match Webhook::check_url(&hook.url) {
            Ok(url) => url,
            Err(why) => return Ok(Outcome::Failed(why, None)),
        };
        if let Some(ip) = target::literal_ip(&url) {
            let host = url.host_str().unwrap_or_default();
            let at = [SocketAddr::new(ip, 0)];
            if let Err(why) = target::check(host, &at, self.config.allow_private) {
                return Ok(Outcome::Failed(why, None));
            }
        }
        let now = self.clock.now();
        let timestamp = now.div_euclid(1000);
        let body = delivery.body.as_bytes();
        let signature: Vec<String> = registry::secrets(hook, now)?
            .iter()
            .map(|s| s.sign(&delivery.message, timestamp, body))
            .collect();
        let sent = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", &delivery.message)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature.join(" "))
            .body(delivery.body.clone())
            .send()
            .await;
        Ok(match sent {
            Ok(answer) if answer.status().is_success() => Outcome::Sent,
            Ok(answer) => Outcome::Failed(
                format!("the endpoint answered {}", answer.status()),
                Some(answer.status().as_u16()),
            ),
            Err(err) => Outcome::Failed(describe(&err), None),
        })
    }
}

/// A send's error with its causes, as the dead delivery keeps it.
/// `err` and its causes, without the endpoint's URL (which may carry a
/// token of the receiver's): it goes to the log and the dead delivery.
fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    if let Some(url) = err.url() {
        text = text.replace(&format!(" for url ({url})"), "");
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Resolves an endpoint's name for the connection, and refuses it if any
/// address it gives is one webhooks may not reach: the addresses checked
/// are the ones connected to.
struct Checked {
    allow_private: bool,
}

impl reqwest::dns::Resolve for Checked {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            target::check(&host, &addrs, allow_private)?;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}
