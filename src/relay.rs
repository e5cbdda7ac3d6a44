//! Live events across processes: when API and worker processes share one
//! store (MongoDB), each runs a relay. What its hub publishes is appended to
//! the store's event log; one tail per process (a change stream, not one
//! per subscriber) reads what the others appended and hands it to the local
//! hub, so a subscriber hears of an action whichever process recorded it
//! and whichever worker fanned it out.
//!
//! The tail is resumed from its position after a failure (a dropped
//! connection, a server restart), so nothing appended meanwhile is missed.
//! A signal that needs to know who is online (an action readers pull, an
//! edge ended, a group left) is worked out by each process for its own
//! readers. A process without a worker forwards its wake-ups as `Work`
//! signals, which wake the workers elsewhere at once instead of at their
//! next poll.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::clock::Clock;
use crate::events::{Hub, Signal};
use crate::metrics::Metrics;
use crate::model::{EdgeKind, Millis, ObjectId};
use crate::store::event_log::{EventLog, LogToken, Tail, TailEnd};
use crate::store::{ErrorKind, Store, StoreError, StoreResult};
use crate::timeline::sources::GroupSource;
use crate::timeline::{audience, follow, groups, Expiry};

/// Signals waiting to be appended; past this the hub drops them (and counts).
pub const QUEUE: usize = 65_536;

/// Signals appended in one write, at most.
const APPEND_BATCH: usize = 512;

/// What a relay works with.
#[derive(Clone)]
pub struct RelayContext {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    /// `--item-ttl` in milliseconds, for what a reader may still read.
    pub item_ttl: Option<Millis>,
    /// The local worker's wake-up (a `Work` signal notifies it), or, in a
    /// process without a worker, what the API notifies when it queues work
    /// (forwarded as `Work`).
    pub wake: Arc<Notify>,
    pub runs_worker: bool,
}

/// Starts the relay over `log`: the tail is open when this returns, so a
/// subscriber that connects after misses nothing appended after.
pub async fn start(
    ctx: RelayContext,
    log: Arc<dyn EventLog>,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> StoreResult<()> {
    let origin = format!("{}-{}", std::process::id(), bson::oid::ObjectId::new());
    let tail = log.tail(&origin, None).await?;
    let (outbox, queued) = mpsc::channel(QUEUE);
    if !ctx.hub.relay_to(outbox) {
        return Ok(());
    }
    info!(%origin, "relaying live events through the store's event log");
    tracker.spawn(append(
        log.clone(),
        origin.clone(),
        queued,
        ctx.clone(),
        shutdown.clone(),
    ));
    if !ctx.runs_worker {
        tracker.spawn(forward_work(ctx.clone(), shutdown.clone()));
    }
    tracker.spawn(receive(log, origin, tail, ctx, shutdown));
    Ok(())
}

/// Appends what the hub queues, a batch at a time, until shutdown (then
/// what is queued still goes out).
async fn append(
    log: Arc<dyn EventLog>,
    origin: String,
    mut queued: mpsc::Receiver<Signal>,
    ctx: RelayContext,
    shutdown: CancellationToken,
) {
    let mut taken = Vec::with_capacity(APPEND_BATCH);
    let mut batch: Vec<(ObjectId, Signal)> = Vec::with_capacity(APPEND_BATCH);
    let mut reported = 0;
    loop {
        let open = tokio::select! {
            got = queued.recv_many(&mut taken, APPEND_BATCH) => got > 0,
            _ = shutdown.cancelled() => {
                while taken.len() < QUEUE {
                    match queued.try_recv() {
                        Ok(signal) => taken.push(signal),
                        Err(_) => break,
                    }
                }
                false
            }
        };
        // Serials are given once, so a try again appends the same ones.
        batch.extend(taken.drain(..).map(|signal| (ObjectId::new(), signal)));
        let mut backoff = Duration::from_millis(50);
        while !batch.is_empty() {
            match log.append(&origin, ctx.clock.now(), &batch).await {
                Ok(()) => {
                    ctx.metrics.relayed("out", batch.len() as u64);
                    batch.clear();
                }
                Err(err) if shutdown.is_cancelled() => {
                    warn!(cause = %err.chain(), lost = batch.len(), "signals not relayed at shutdown");
                    batch.clear();
                }
                Err(err) => {
                    warn!(cause = %err.chain(), "cannot append to the event log; trying again");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
        let dropped = ctx.hub.dropped_signals();
        if dropped > reported {
            warn!(
                dropped = dropped - reported,
                "the relay fell behind and dropped signals"
            );
            ctx.metrics.relayed("dropped", dropped - reported);
            reported = dropped;
        }
        if !open {
            return;
        }
    }
}

/// Forwards the API's wake-ups to the workers of other processes.
async fn forward_work(ctx: RelayContext, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = ctx.wake.notified() => ctx.hub.forward(Signal::Work),
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Reads the other processes' signals and acts on them, reopening the tail
/// from where it stood when it fails.
async fn receive(
    log: Arc<dyn EventLog>,
    origin: String,
    mut tail: Tail,
    ctx: RelayContext,
    shutdown: CancellationToken,
) {
    // The last serial read from each process: a resumed tail may hand
    // back a few signals already acted on, which are passed over.
    let mut last: HashMap<String, ObjectId> = HashMap::new();
    loop {
        let next = tokio::select! {
            next = tail.next() => next,
            _ = shutdown.cancelled() => return,
        };
        // A tail ends with an error; one that just stopped says nothing
        // of where it stood.
        let next = next.unwrap_or_else(|| {
            Err(Box::new(TailEnd {
                error: StoreError::new(ErrorKind::Unavailable, "the event log's tail ended"),
                position: None,
            }))
        });
        match next {
            Ok(logged) => {
                match last.get_mut(&logged.origin) {
                    Some(seen) if logged.serial <= *seen => continue,
                    Some(seen) => *seen = logged.serial,
                    None => {
                        last.insert(logged.origin.clone(), logged.serial);
                    }
                }
                ctx.metrics.relayed("in", 1);
                let lag = (ctx.clock.now() - logged.at).max(0);
                ctx.metrics.relay_lag_seconds.observe(lag as f64 / 1000.0);
                if let Err(err) = apply(&ctx, logged.signal).await {
                    warn!(cause = %err.chain(), "a relayed event could not be told to its readers");
                }
            }
            Err(end) => {
                let TailEnd {
                    error: err,
                    position: from,
                } = *end;
                warn!(cause = %err.chain(), resumable = from.is_some(), "the event log's tail failed; reopening it");
                match reopen(&*log, &origin, from, &ctx, &shutdown).await {
                    Some(reopened) => tail = reopened,
                    None => return,
                }
            }
        }
    }
}

/// Opens the tail again from `from`, retrying while the store is away; if
/// the log no longer reaches back that far, from now (what fell between is
/// then only in the subscribers' resume cursors). `None` at shutdown.
async fn reopen(
    log: &dyn EventLog,
    origin: &str,
    mut from: Option<LogToken>,
    ctx: &RelayContext,
    shutdown: &CancellationToken,
) -> Option<Tail> {
    let mut backoff = Duration::from_millis(100);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.cancelled() => return None,
        }
        match log.tail(origin, from.clone()).await {
            Ok(tail) => {
                ctx.metrics.relay_reconnects.inc();
                info!(
                    resumed = from.is_some(),
                    "the event log's tail is open again"
                );
                return Some(tail);
            }
            Err(err) if err.kind == ErrorKind::Unavailable => {
                warn!(cause = %err.chain(), "the event log is unavailable; retrying");
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
            Err(err) => {
                warn!(cause = %err.chain(), "cannot resume the event log's tail; going on from now");
                from = None;
            }
        }
    }
}

/// Acts on another process's signal in this one.
async fn apply(ctx: &RelayContext, signal: Signal) -> StoreResult<()> {
    let store = ctx.store.as_ref();
    let hub = ctx.hub.as_ref();
    match signal {
        Signal::Items {
            kind,
            tenant,
            action,
            items,
        } => {
            let action = action.map(Arc::new);
            let items = items.into_iter().map(Into::into);
            hub.deliver_feed_items(kind.into(), &tenant, action.as_ref(), items);
        }
        Signal::Slice { .. } | Signal::Reaction { .. } | Signal::Notices { .. } => {
            if let Some((topic, event)) = signal.into_event() {
                hub.deliver(&topic, event);
            }
        }
        Signal::Pulled { kind, action, told } => {
            let action = Arc::new(action);
            audience::tell_online_here(store, hub, kind.into(), &action, &told).await?;
        }
        Signal::Unfollowed {
            tenant,
            reader,
            actor,
            edge,
            since,
        } => {
            let kind: EdgeKind = edge.into();
            follow::tell_unfollowed(store, hub, &tenant, &reader, &actor, kind, since.into())
                .await?;
        }
        Signal::Left {
            tenant,
            reader,
            group,
            reason,
            since,
        } => {
            let group = GroupSource {
                group,
                reason,
                since: since.into(),
            };
            let expiry = Expiry {
                now: ctx.clock.now(),
                item_ttl: ctx.item_ttl,
            };
            groups::tell_left(store, hub, &tenant, &reader, &group, expiry).await?;
        }
        Signal::Work => {
            if ctx.runs_worker {
                ctx.wake.notify_one();
            }
        }
    }
    Ok(())
}
