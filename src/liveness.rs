//! Which serving processes still run: each draws an id when it starts, and
//! what it holds on others' behalf (a request's `Idempotency-Key`) names
//! it, so a process that finds a hold can tell a running holder from a
//! dead one and take a dead one's over at once.
//!
//! - **Embedded store**: the store is one process's, so a holder other
//!   than this process is an earlier boot of it, dead.
//! - **MongoDB**: each process keeps a record of its own fresh (a `meta`
//!   record `process <id>`, rewritten every [`BEAT`] to hold for
//!   [`LAPSE`]); a holder whose record lapsed, or is gone, is dead. A
//!   process stopped in order removes its record; the lapsed records of
//!   killed ones are removed by the processes that start after.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

use crate::clock::Clock;
use crate::model::Millis;
use crate::store::records::SEPARATOR;
use crate::store::{Keys, RecordKind, Records, Store, StoreError, StoreResult};

/// How often a process sharing its store rewrites its record.
pub const BEAT: Duration = Duration::from_secs(2);
/// How long a record holds after it is written: five beats, so a slow
/// write or two does not make a running process look dead.
pub const LAPSE: Millis = 10_000;
/// Lapsed records of earlier processes a starting process removes, at most.
const SWEEP: usize = 64;

/// This process, as those sharing its store see it.
pub struct Liveness {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    id: String,
    /// Other processes may use the store (MongoDB): their records tell.
    shared: bool,
}

/// A process's record: until when it counts as running.
#[derive(Serialize, Deserialize)]
struct Beat {
    until: Millis,
}

impl Liveness {
    /// Draws this process's id and, on a store other processes share,
    /// writes its record and keeps it fresh until `shutdown`, then
    /// removes it.
    pub async fn start(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        shutdown: &CancellationToken,
        tracker: &TaskTracker,
    ) -> StoreResult<Arc<Liveness>> {
        let shared = store.backend().event_log.is_some();
        let id = bson::oid::ObjectId::new().to_hex();
        let liveness = Arc::new(Liveness {
            store,
            clock,
            id,
            shared,
        });
        if shared {
            liveness.beat().await?;
            liveness.sweep().await?;
            let beating = liveness.clone();
            let shutdown = shutdown.clone();
            tracker.spawn(async move {
                let mut ticks = tokio::time::interval(BEAT);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = ticks.tick() => {}
                    }
                    if let Err(err) = beating.beat().await {
                        warn!(cause = %err.chain(), "this process's liveness record was not renewed");
                    }
                }
                let key = key(&beating.id);
                let removed = beating
                    .store
                    .put_record(RecordKind::Meta, "", &key, None, None)
                    .await;
                if let Err(err) = removed {
                    warn!(cause = %err.chain(), "this process's liveness record was not removed");
                }
            });
        }
        Ok(liveness)
    }

    /// This process's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the process `holder` still runs.
    pub async fn alive(&self, holder: &str) -> StoreResult<bool> {
        if holder == self.id {
            return Ok(true);
        }
        if !self.shared {
            return Ok(false);
        }
        beats(&*self.store, holder, self.clock.now()).await
    }

    async fn beat(&self) -> StoreResult<()> {
        let until = self.clock.now().saturating_add(LAPSE);
        let body = serde_json::to_vec(&Beat { until })
            .map_err(|e| StoreError::internal("cannot encode a liveness record", e))?;
        self.store
            .put_record(RecordKind::Meta, "", &key(&self.id), Some(body), None)
            .await
            .map(drop)
    }

    /// Removes the records of processes that lapsed.
    async fn sweep(&self) -> StoreResult<()> {
        let under = key("");
        let page = Keys::Page {
            under: &under,
            after: None,
            limit: SWEEP,
        };
        let now = self.clock.now();
        for (key, stored) in self.store.records(RecordKind::Meta, "", page).await? {
            if !lives(&stored.body, now) {
                let expect = Some(stored.version);
                self.store
                    .put_record(RecordKind::Meta, "", &key, None, expect)
                    .await?;
            }
        }
        Ok(())
    }
}

/// Whether the process `id` keeps its record fresh in `store` at `now`
/// (a store other processes share).
pub async fn beats(store: &dyn Store, id: &str, now: Millis) -> StoreResult<bool> {
    let found = store.record(RecordKind::Meta, "", &key(id)).await?;
    Ok(found.is_some_and(|stored| lives(&stored.body, now)))
}

fn lives(body: &[u8], now: Millis) -> bool {
    serde_json::from_slice::<Beat>(body).is_ok_and(|beat| beat.until > now)
}

fn key(id: &str) -> String {
    format!("process{SEPARATOR}{id}")
}
