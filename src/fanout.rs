//! The fan-out worker: turns pending actions into feed items.
//!
//! It claims actions with a lease (`IN_PROGRESS`, `lockedUntil`, worker id),
//! computes each one's audience, writes one feed item per reader in large
//! batches (each batch one store transaction, extending the lease), publishes
//! `ADDED` events, and marks the action `DONE`. A worker that dies leaves its
//! lease to run out; the next claim takes the action over, and because delivery
//! skips readers that already have the item, the re-run duplicates nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, instrument, warn};

use crate::clock::Clock;
use crate::events::{FeedEvent, FeedEventKind, Hub};
use crate::model::{Action, EdgeKind, Millis, Reason, ReasonKind, Scope};
use crate::store::{Claim, Delivery, Direction, ErrorKind, Store, StoreResult};

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Identifies this worker in leases.
    pub id: String,
    /// How long a claim stays ours without progress.
    pub lease_ms: Millis,
    /// Feed items written per store call (one transaction each).
    pub batch_size: usize,
    /// Actions claimed at once.
    pub claim_limit: usize,
    /// How often an idle worker looks for work it was not woken for (other
    /// processes' actions, leases that ran out).
    pub poll_interval: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            id: format!(
                "worker-{}-{}",
                std::process::id(),
                bson::oid::ObjectId::new()
            ),
            lease_ms: 30_000,
            batch_size: 10_000,
            claim_limit: 16,
            poll_interval: Duration::from_millis(500),
        }
    }
}

/// The fan-out worker.
#[derive(Clone)]
pub struct Worker {
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    clock: Arc<dyn Clock>,
    config: WorkerConfig,
    wake: Arc<Notify>,
}

/// Page size when reading followers and group members for an audience.
const AUDIENCE_PAGE: usize = 10_000;

impl Worker {
    pub fn new(
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        clock: Arc<dyn Clock>,
        config: WorkerConfig,
        wake: Arc<Notify>,
    ) -> Self {
        Self {
            store,
            hub,
            clock,
            config,
            wake,
        }
    }

    /// Works until `shutdown` is cancelled: fans out whatever is due, then waits
    /// to be woken (a new action) or for the poll interval.
    #[instrument(skip_all, fields(worker = %self.config.id))]
    pub async fn run(self, shutdown: CancellationToken) {
        info!("fan-out worker started");
        let mut backoff = Duration::from_millis(100);
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            let wait = match self.run_until(&shutdown).await {
                Ok(0) => self.config.poll_interval,
                Ok(_) => {
                    backoff = Duration::from_millis(100);
                    continue;
                }
                Err(err) => {
                    warn!(cause = %err.chain(), "backing off after a failed fan-out");
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    backoff
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
        info!("fan-out worker stopped");
    }

    /// Claims what is due and fans it out. Returns how many actions it claimed.
    pub async fn run_once(&self) -> StoreResult<usize> {
        self.run_until(&CancellationToken::new()).await
    }

    /// As `run_once`, but stops between actions once `shutdown` is cancelled;
    /// actions claimed and not started wait for their lease to run out.
    async fn run_until(&self, shutdown: &CancellationToken) -> StoreResult<usize> {
        let claims = self
            .store
            .claim_fan_out(
                &self.config.id,
                self.clock.now(),
                self.config.lease_ms,
                self.config.claim_limit,
            )
            .await?;
        let claimed = claims.len();
        // One action failing must not hold up the others claimed with it: each
        // is tried, and the first failure is reported once all were.
        let mut failure = None;
        for claim in claims {
            if shutdown.is_cancelled() {
                break;
            }
            match self.fan_out(&claim).await {
                Ok(()) => {}
                Err(err) if err.kind == ErrorKind::LeaseLost => {
                    warn!(action = %claim.action.id, cause = %err.chain(), "lease lost; leaving the action to its new owner");
                }
                Err(err) => {
                    error!(action = %claim.action.id, cause = %err.chain(), "fan-out of one action failed; it is retried when its lease runs out");
                    failure.get_or_insert(err);
                }
            }
        }
        match failure {
            Some(err) => Err(err),
            None => Ok(claimed),
        }
    }

    /// Delivers one claimed action to its whole audience and marks it done.
    pub async fn fan_out(&self, claim: &Claim) -> StoreResult<()> {
        let action = &claim.action;
        let audience = if action.hidden {
            Vec::new()
        } else {
            audience(self.store.as_ref(), action).await?
        };
        let mut delivered = 0usize;
        for chunk in audience.chunks(self.config.batch_size.max(1)) {
            let deliveries: Vec<Delivery> = chunk
                .iter()
                .map(|(owner, kind)| Delivery {
                    owner: owner.clone(),
                    relevancy: action.conducted,
                    reason: Reason {
                        kind: *kind,
                        actor_id: action.actor_id.clone(),
                    },
                })
                .collect();
            let written = self
                .store
                .deliver(claim, self.clock.now(), &deliveries)
                .await?;
            delivered += written.len();
            for item in written {
                self.hub.publish(FeedEvent {
                    kind: FeedEventKind::Added,
                    tenant: action.tenant.clone(),
                    item,
                });
            }
        }
        self.store.finish_fan_out(claim).await?;
        debug!(action = %action.id, audience = audience.len(), delivered, "fan-out done");
        Ok(())
    }
}

/// Who should see an action, each with the most specific reason that applies:
/// the actor always; followers and friends for `PUBLIC`; members of the action's
/// groups for `TEAM` / `DEPARTMENT`; the named readers for `RESTRICTED`.
pub async fn audience(
    store: &dyn Store,
    action: &Action,
) -> StoreResult<Vec<(String, ReasonKind)>> {
    let tenant = action.tenant.as_str();
    let mut readers: HashMap<String, ReasonKind> = HashMap::new();
    let mut add = |user: String, kind: ReasonKind| {
        readers
            .entry(user)
            .and_modify(|k| {
                if kind.priority() > k.priority() {
                    *k = kind;
                }
            })
            .or_insert(kind);
    };
    match action.scope {
        Scope::Public => {
            for (kind, reason) in [
                (EdgeKind::Follows, ReasonKind::Follows),
                (EdgeKind::Friend, ReasonKind::Friend),
            ] {
                let page = |after: Option<String>| async move {
                    store
                        .edges(
                            tenant,
                            kind,
                            Direction::In,
                            &action.actor_id,
                            after.as_deref(),
                            AUDIENCE_PAGE,
                        )
                        .await
                };
                for_each_page(page, |user| add(user, reason)).await?;
            }
        }
        Scope::Team | Scope::Department => {
            let reason = if action.scope == Scope::Team {
                ReasonKind::Team
            } else {
                ReasonKind::Department
            };
            for group in &action.scope_groups {
                let page = |after: Option<String>| async move {
                    store
                        .group_members(tenant, group, after.as_deref(), AUDIENCE_PAGE)
                        .await
                };
                for_each_page(page, |user| add(user, reason)).await?;
            }
        }
        Scope::Restricted => {
            for reader in &action.readers {
                add(reader.clone(), ReasonKind::Restricted);
            }
        }
    }
    add(action.actor_id.clone(), ReasonKind::Own);
    let mut readers: Vec<_> = readers.into_iter().collect();
    // A stable order keeps each batch's writes local in the store's key space.
    readers.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(readers)
}

/// Walks a user list page by page (each page starts after the last id of the
/// previous one) and hands every id to `each`.
async fn for_each_page<F, Fut>(mut page: F, mut each: impl FnMut(String)) -> StoreResult<()>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = StoreResult<Vec<String>>>,
{
    let mut after = None;
    loop {
        let ids = page(after.take()).await?;
        let last_page = ids.len() < AUDIENCE_PAGE;
        after = ids.last().cloned();
        ids.into_iter().for_each(&mut each);
        if last_page {
            return Ok(());
        }
    }
}
