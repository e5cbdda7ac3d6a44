//! Rivers built off the request path. Under `rivers`, a dormant reader's
//! page is served from their sources, as under `pull`, and asks here for
//! their river; a few builds run at once in the background, each reader's
//! once however many of their reads ask meanwhile. A build a crash cuts
//! short leaves the record a start builds again
//! ([`finish_builds`](super::rivers::finish_builds)); one that fails is
//! undone, so the reader's next read asks again.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use super::feed_model::{FeedModel, FeedModelKind};
use super::rivers;
use crate::clock::Clock;
use crate::events::Hub;
use crate::metrics::Metrics;
use crate::store::{ErrorKind, Store};

/// Builds waiting at most. A reader asked past it is not queued: their
/// reads go on from the sources and the next one asks again, so a flood of
/// dormant readers costs at most this much memory and work behind it.
pub const QUEUED: usize = 1_024;

/// A reader whose river is asked for: (tenant, reader).
type Reader = (String, String);

/// The river builds a process runs in the background; one that builds
/// nothing ([`RiverBuilds::default`]) where none run (another model, or
/// `--river-builds 0`).
#[derive(Default)]
pub struct RiverBuilds {
    queue: Option<mpsc::Sender<Reader>>,
    /// The readers asked for and not yet built (queued or building). A
    /// std mutex: it guards a set operation and is never held across an
    /// await.
    asked: Mutex<HashSet<Reader>>,
    /// Told whenever a build ends (built, failed or skipped).
    ended: Notify,
}

/// What a build needs of the process.
struct Runner {
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    model: FeedModel,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
}

impl RiverBuilds {
    /// Builds under `model`, `model.river_builds` at once, telling `hub`'s
    /// listeners what a build writes that they have not heard, on a task of
    /// `tracker` that ends at `shutdown`; builds nothing unless the model
    /// is `rivers` and builds some.
    pub fn start(
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        model: FeedModel,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
        shutdown: CancellationToken,
        tracker: &TaskTracker,
    ) -> Arc<RiverBuilds> {
        if model.kind != FeedModelKind::Rivers || model.river_builds == 0 {
            return Arc::default();
        }
        let (queue, asked) = mpsc::channel(QUEUED);
        let builds = Arc::new(RiverBuilds {
            queue: Some(queue),
            ..RiverBuilds::default()
        });
        let runner = Runner {
            store,
            hub,
            model,
            clock,
            metrics,
        };
        tracker.spawn(builds.clone().run(runner, asked, shutdown));
        builds
    }

    /// Asks for `reader`'s river to be built: queued unless it is already
    /// (or the queue is full, or nothing builds here). Never waits.
    pub fn ask(&self, tenant: &str, reader: &str) {
        let Some(queue) = &self.queue else {
            return;
        };
        let key = (tenant.to_owned(), reader.to_owned());
        let mut asked = self.asked();
        if asked.contains(&key) {
            return;
        }
        match queue.try_send(key.clone()) {
            Ok(()) => {
                asked.insert(key);
            }
            Err(_) => debug!(
                tenant,
                reader, "river builds queue full: asked at the next read"
            ),
        }
    }

    /// Waits until no build is queued or under way.
    pub async fn settled(&self) {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Registered before the look, so an end between them is heard.
            ended.as_mut().enable();
            if self.asked().is_empty() {
                return;
            }
            ended.await;
        }
    }

    fn asked(&self) -> MutexGuard<'_, HashSet<Reader>> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes asked readers `model.river_builds` at a time until `shutdown`;
    /// the builds under way then finish (a few store calls each), and the
    /// queued ones are left to their readers' next reads.
    async fn run(
        self: Arc<Self>,
        runner: Runner,
        mut asked: mpsc::Receiver<Reader>,
        shutdown: CancellationToken,
    ) {
        let at_once = runner.model.river_builds;
        let mut running = FuturesUnordered::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(()) = running.next(), if !running.is_empty() => {}
                Some(reader) = asked.recv(), if running.len() < at_once => {
                    running.push(self.build(&runner, reader));
                }
                else => break,
            }
        }
        while running.next().await.is_some() {}
    }

    /// Builds `reader`'s river if they still have none; a build that
    /// fails is undone.
    async fn build(&self, runner: &Runner, (tenant, reader): Reader) {
        let store = runner.store.as_ref();
        let now = runner.clock.now();
        let built =
            rivers::build_dormant(store, &runner.hub, &runner.model, &tenant, &reader, now).await;
        match &built {
            Ok(true) => debug!(%tenant, %reader, "river built in the background"),
            Ok(false) => {}
            Err(err) => {
                let quiet = err.kind == ErrorKind::Unavailable;
                if quiet {
                    debug!(%tenant, %reader, cause = %err, "river not built: read from the sources");
                } else {
                    warn!(%tenant, %reader, cause = %err.chain(), "a river build failed: undone, asked again at the reader's next read");
                }
                // Whatever record it left would read as pulling everything
                // until a restart built it: gone, the reader is dormant.
                let undone = store
                    .write_river(&tenant, &reader, crate::store::RiverWrite::Drop)
                    .await;
                if let Err(err) = undone {
                    debug!(%tenant, %reader, cause = %err, "a failed river build not undone: built again at start");
                }
            }
        }
        if !matches!(built, Ok(false)) {
            runner.metrics.job("river", built.is_ok());
        }
        self.asked().remove(&(tenant, reader));
        self.ended.notify_waiters();
    }
}
