//! The per-endpoint circuit: an endpoint every attempt to reach has failed
//! for [`OPEN_AFTER_MS`] is paused. Its deliveries then wait untried (each
//! looked at again every [`LOOK_AGAIN_MS`], nothing lost) until an operator
//! resumes it (`resumeWebhook`, or enabling it), which sends them at once.
//!
//! What the circuit knows lives on the webhook's record: since when its
//! attempts have all failed (written at the first failure after a success,
//! cleared by the next success, so a healthy endpoint costs no write), and
//! the pause. The record is written under its version, so of the senders
//! that see the day pass at once, one pauses it and logs it.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::warn;

use super::outbox::rfc3339;
use super::registry;
use crate::model::{Millis, Paused, Webhook};
use crate::store::{Store, StoreResult};

/// How long every attempt must have failed before the endpoint is paused.
pub const OPEN_AFTER_MS: Millis = 24 * 60 * 60 * 1000;

/// How often a paused endpoint's due delivery is looked at again: a resume
/// brings them forward itself, so this only bounds a missed one.
pub const LOOK_AGAIN_MS: Millis = 60 * 60 * 1000;

/// An attempt to reach `hook` failed at `now` with `why`: notes since when
/// it fails, and pauses it once that is a day ago.
pub async fn failed(
    store: &dyn Store,
    tenant: &str,
    hook: &Webhook,
    now: Millis,
    why: &str,
) -> StoreResult<()> {
    let since = match hook.failing_since {
        None => {
            registry::change(store, tenant, &hook.id, |h| {
                h.failing_since.get_or_insert(now);
            })
            .await?;
            return Ok(());
        }
        Some(since) => since,
    };
    if hook.paused.is_some() || now.saturating_sub(since) < OPEN_AFTER_MS {
        return Ok(());
    }
    let reason = format!(
        "every attempt to reach it failed since {}; the last: {why}",
        rfc3339(since)
    );
    // Whether this writer paused it (a lost race re-runs the closure).
    let paused_here = AtomicBool::new(false);
    registry::change(store, tenant, &hook.id, |h| {
        paused_here.store(h.paused.is_none(), Ordering::Relaxed);
        if h.paused.is_none() {
            h.paused = Some(Paused {
                at: now,
                reason: reason.clone(),
            });
        }
    })
    .await?;
    if paused_here.load(Ordering::Relaxed) {
        warn!(webhook = %hook.id, tenant, failing_since = %rfc3339(since), cause = %why, "webhook endpoint paused: every attempt failed for a day; its deliveries wait until it is resumed");
    }
    Ok(())
}

/// An attempt reached `hook`, which was failing: it is healthy again.
pub async fn reached(store: &dyn Store, tenant: &str, hook: &Webhook) -> StoreResult<()> {
    registry::change(store, tenant, &hook.id, |h| h.failing_since = None).await?;
    Ok(())
}
