//! Running the service: open the store, start the fan-out worker and the HTTP
//! server, and stop all of it together.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::api::cursor::CursorKey;
use crate::api::{self, AppState};
use crate::auth::Authenticator;
use crate::clock::{Clock, SystemClock};
use crate::demo;
use crate::events::Hub;
use crate::fanout::{Worker, WorkerConfig};
use crate::http::{self, HttpState, OpsState, WsLimits};
use crate::metrics::Metrics;
use crate::relay::RelayContext;
use crate::store::metered::Metered;
use crate::store::mongo::redact;
use crate::store::{self, Store};
use crate::timeline::builds::RiverBuilds;
use crate::webhooks::send::{SendConfig, Sender};
use crate::webhooks::Outbox;

/// Why `--demo` is refused with tokens configured.
pub const DEMO_NEEDS_DEV_MODE: &str =
    "--demo needs dev mode: the demo page says who it is with the x-riverfeed-* headers, \
     which tokens switch off; drop --jwt-secret / --jwt-public-key to run the demo";

/// How long shutdown waits for requests in flight.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Everything `serve` needs.
#[derive(Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Store URL: `embedded:<dir>` or a MongoDB URI.
    pub store: String,
    /// The in-process fan-out worker; `None` runs the API alone.
    pub worker: Option<WorkerConfig>,
    /// Events one reader's subscriptions may fall behind before they lag.
    pub event_buffer: usize,
    /// Actions a new follow or friendship shows at once, unless the request
    /// says otherwise.
    pub follow_backfill: usize,
    /// What is materialised ahead of time and what is merged at read; the
    /// in-process worker runs the same.
    pub model: crate::timeline::FeedModel,
    /// `--item-ttl`: actions older than this are not shown; off if `None`.
    pub item_ttl: Option<std::time::Duration>,
    /// `--idempotency-ttl`: how long the answer to a request sent with an
    /// `Idempotency-Key` is kept for its retries.
    pub idempotency_ttl: std::time::Duration,
    /// `--group-feed-size`: the posts a group's feed keeps.
    pub group_feed_size: usize,
    /// Who is notified of what, and how notifications and aggregated feed
    /// items group; the in-process worker runs the same.
    pub notice_rules: crate::notify::NoticeRules,
    pub clock: Arc<dyn Clock>,
    /// Let dev mode listen beyond loopback.
    pub insecure_dev: bool,
    /// `--cors-origins`: the web origins that may call besides the server's
    /// own; in dev mode pages on this machine may call too.
    pub cors_origins: Option<crate::http::cors::Origins>,
    /// How callers prove who they are: dev-mode headers or JWTs.
    pub auth: Arc<Authenticator>,
    /// Schema introspection; `None` means on in dev mode, off with tokens.
    pub introspection: Option<bool>,
    pub ws_limits: WsLimits,
    /// Timeouts and caps of HTTP connections.
    pub listen_limits: http::listen::ListenLimits,
    /// `--cursor-key`: secret the cursor key is derived from; `None` means
    /// the key the deployment keeps in its store (drawn at its first start).
    pub cursor_secret: Option<Vec<u8>>,
    /// Seed the `demo` tenant before serving (dev mode only).
    pub demo: bool,
    /// A response answered from memory at `POST /bench/reference`: only
    /// `riverfeed bench` sets it, to measure what the HTTP stack alone
    /// serves beside what a feed page costs.
    pub reference_page: Option<Arc<http::ReferencePage>>,
    /// The backends' settings (the embedded store's cache, MongoDB's
    /// timeline layout).
    pub store_settings: crate::store::StoreSettings,
    /// `--rate-limit`: each role's budget of query cost; none by default.
    pub rate_limits: Vec<(crate::auth::Role, crate::api::rate_limit::Budget)>,
    /// The APQ cache and `--trusted-documents`.
    pub persisted: Arc<crate::http::persisted::Persisted>,
    /// `--metrics-listen` and `--metrics-token`.
    pub metrics_access: http::MetricsAccess,
    /// `--descriptors`: the action types served; the in-process worker
    /// notifies by their rules.
    pub descriptors: Arc<crate::descriptor::Catalog>,
    /// `--allow-descriptor-changes`: serve a descriptor file that stored
    /// actions no longer fit (they read as `UnknownDescriptor`).
    pub allow_descriptor_changes: bool,
    /// `--federation`: serve as a subgraph of a federated supergraph, with
    /// the product's entities (`--federation-entity`).
    pub federation: Option<Arc<api::federation::Federation>>,
    /// `--webhooks-allow-private`: webhooks may go to loopback and private
    /// addresses.
    pub webhooks_allow_private: bool,
    /// `--webhooks-proxy`: webhooks are sent through this proxy; without
    /// it, directly, whatever the environment's proxy variables say.
    pub webhooks_proxy: Option<String>,
    /// `--planned-reads`: queries a plan covers run planned (on by default).
    pub planned_reads: bool,
    /// `--document-cache-bytes`: bytes of documents kept with their plans.
    pub document_cache_bytes: usize,
}

impl ServeOptions {
    /// Defaults for a store URL, listening on an ephemeral loopback port.
    pub fn new(store: impl Into<String>) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            store: store.into(),
            worker: Some(WorkerConfig::default()),
            event_buffer: 128,
            follow_backfill: crate::timeline::follow::DEFAULT_BACKFILL,
            model: crate::timeline::FeedModel::default(),
            item_ttl: None,
            idempotency_ttl: http::idempotency::DEFAULT_TTL,
            group_feed_size: crate::store::group_feeds::DEFAULT_SIZE,
            notice_rules: crate::notify::NoticeRules::default(),
            clock: Arc::new(SystemClock),
            insecure_dev: false,
            cors_origins: None,
            auth: Arc::new(Authenticator::Dev),
            introspection: None,
            ws_limits: WsLimits::default(),
            listen_limits: http::listen::ListenLimits::default(),
            cursor_secret: None,
            demo: false,
            reference_page: None,
            store_settings: crate::store::StoreSettings::default(),
            rate_limits: Vec::new(),
            persisted: Arc::default(),
            metrics_access: http::MetricsAccess::default(),
            descriptors: crate::descriptor::Catalog::builtin(),
            allow_descriptor_changes: false,
            federation: None,
            webhooks_allow_private: false,
            webhooks_proxy: None,
            planned_reads: true,
            document_cache_bytes: api::plan::DEFAULT_DOCUMENT_CACHE_BYTES,
        }
    }
}

/// A running server.
pub struct Server {
    /// The address it listens on (the real port when asked for port 0).
    pub addr: SocketAddr,
    /// Where `/metrics` is served when it has a listener of its own
    /// (`--metrics-listen`).
    pub metrics_addr: Option<SocketAddr>,
    /// Store call counters.
    pub metered: Arc<Metered>,
    /// Whether planned reads run; an API server's own, a worker's idle.
    pub planner: Arc<api::plan::Planner>,
    /// The key its cursors are sealed with (an API server's).
    pub cursors: Option<Arc<api::cursor::CursorKey>>,
    /// The rivers it builds in the background for dormant readers (none
    /// for a worker).
    pub river_builds: Arc<RiverBuilds>,
    shutdown: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// Asks the server to stop and waits until the HTTP server, every websocket
    /// task and the worker have ended (and the store is closed).
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.task.await.context("server task panicked")?
    }

    /// A token that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

impl ServeOptions {
    /// The store settings, with what the feed model asks of the store: on
    /// MongoDB, rivers of its size looked for by deliveries and reads.
    pub fn settings_for_model(&self) -> crate::store::StoreSettings {
        let mut settings = self.store_settings.clone();
        settings.mongo.keeps_rivers = self.model.kind == crate::timeline::FeedModelKind::Rivers;
        settings.mongo.river_size = self.model.river_size;
        settings.mongo.ref_fields = crate::store::mongo::ref_fields(&self.descriptors);
        settings
    }
}

/// Opens the store, binds the listener and starts serving in the background.
/// A start that fails leaves no data directory behind that it created.
pub async fn start(options: ServeOptions) -> anyhow::Result<Server> {
    let created = (options.store.strip_prefix("embedded:"))
        .map(std::path::PathBuf::from)
        .filter(|dir| !dir.exists());
    let started = async { start_with_store(options.clone(), open_store(&options).await?).await };
    let started = started.await;
    if let (Err(_), Some(dir)) = (&started, created) {
        if let Err(err) = std::fs::remove_dir_all(&dir) {
            warn!(dir = %dir.display(), %err, "cannot remove the data directory of a failed start");
        }
    }
    started
}

/// Opens the store `options` name, with what its feed model asks of it.
async fn open_store(options: &ServeOptions) -> anyhow::Result<Arc<dyn Store>> {
    store::open_with(&options.store, &options.settings_for_model())
        .await
        .with_context(|| format!("cannot open store {}", redact(&options.store)))
}

/// The process's metrics and its store, metered into them; the feed model
/// recorded in the store (and the one it settles on kept in `options`).
async fn metered_store(
    options: &mut ServeOptions,
    inner: Arc<dyn Store>,
) -> anyhow::Result<(Arc<Metrics>, Arc<Metered>, Arc<dyn Store>)> {
    let metrics = Arc::new(Metrics::new());
    let metered = Arc::new(Metered::with_metrics(inner, metrics.clone()));
    let store: Arc<dyn Store> = metered.clone();
    options.model =
        crate::timeline::feed_model::start(store.as_ref(), options.model, options.clock.now())
            .await
            .context("cannot record the feed model")?;
    Ok((metrics, metered, store))
}

/// Starts serving on a store that is already open.
pub async fn start_with_store(
    mut options: ServeOptions,
    inner: Arc<dyn Store>,
) -> anyhow::Result<Server> {
    let (metrics, metered, store) = metered_store(&mut options, inner).await?;
    let judged = crate::descriptor::compat::judge(
        store.as_ref(),
        &options.descriptors,
        options.allow_descriptor_changes,
    )
    .await
    .context("cannot serve this descriptor file over the stored actions")?;
    match judged {
        crate::descriptor::compat::Judged::Same => {}
        crate::descriptor::compat::Judged::Changed(changes) => {
            tracing::info!(?changes, "the descriptor file changed; stored actions still read")
        }
        crate::descriptor::compat::Judged::Broken { changes, actions } => warn!(
            ?changes,
            actions, "the descriptor file changed; stored actions it no longer fits read as UnknownDescriptor"
        ),
    }
    if options.auth.is_dev() {
        // Without tokens every caller says who it is in headers: that is for a
        // developer's own machine.
        if !options.listen.ip().is_loopback() && !options.insecure_dev {
            anyhow::bail!(
                "dev mode takes identity from request headers, so it listens on loopback only; \
                 {} is not loopback (configure --jwt-secret or --jwt-public-key, or pass \
                 --insecure-dev to listen there anyway)",
                options.listen
            );
        }
        warn!(
            "DEV MODE: no token key configured; identity comes from the x-riverfeed-* headers \
             and anyone who can reach {} can act as any user",
            options.listen
        );
    }
    anyhow::ensure!(!options.demo || options.auth.is_dev(), DEMO_NEEDS_DEV_MODE);
    if options.demo {
        demo::check_descriptors(&options.descriptors)?;
    }
    if options.demo {
        // Before listening, so the first page load finds full feeds.
        let rules = options
            .worker
            .as_ref()
            .map(|worker| worker.bump_rules)
            .unwrap_or_default();
        demo::seed(&store, &options.clock, rules, options.model)
            .await
            .context("cannot seed the demo tenant")?;
    }
    let cursors = match &options.cursor_secret {
        Some(secret) => CursorKey::from_secret(secret),
        None => CursorKey::kept(store.as_ref())
            .await
            .context("cannot read or keep the cursor key in the store")?,
    };
    let (listener, addr) = bind(options.listen).await?;

    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    let connections: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
    let outbox = Outbox::new(store.clone(), options.clock.clone());
    let hub = Hub::new(options.event_buffer);
    let app = AppState {
        store: store.clone(),
        hub: hub.clone(),
        clock: options.clock.clone(),
        wake: Arc::new(Notify::new()),
        follow_backfill: options.follow_backfill,
        model: options.model,
        cursors: Arc::new(cursors),
        item_ttl: item_ttl_ms(options.item_ttl),
        group_feed_size: options.group_feed_size,
        notice_rules: Arc::new(options.notice_rules.clone()),
        metrics: metrics.clone(),
        descriptors: options.descriptors.clone(),
        outbox: outbox.clone(),
        webhooks_allow_private: options.webhooks_allow_private,
        planner: Arc::new(api::plan::Planner::bounded(
            options.planned_reads,
            options.document_cache_bytes,
        )),
        idempotency_ttl: options.idempotency_ttl,
        river_builds: RiverBuilds::start(
            store.clone(),
            hub,
            options.model,
            options.clock.clone(),
            metrics.clone(),
            shutdown.clone(),
            &tracker,
        ),
    };
    let relay = RelayContext {
        store: store.clone(),
        hub: app.hub.clone(),
        clock: options.clock.clone(),
        metrics: metrics.clone(),
        item_ttl: app.item_ttl,
        wake: app.wake.clone(),
        runs_worker: options.worker.is_some(),
    };
    start_relay(relay, &shutdown, &tracker).await?;
    match options.worker.clone() {
        Some(config) => {
            let worker = worker_for(&options, config, &store, &app.hub, &app.wake, &metrics);
            start_background(&options, worker, &outbox, &shutdown, &tracker)?;
        }
        None => warn!("no fan-out worker in this process: actions stay pending until one runs"),
    }
    let rate_limiter = (!options.rate_limits.is_empty()).then(|| {
        Arc::new(api::rate_limit::RateLimiter::new(
            options.rate_limits.iter().copied(),
        ))
    });
    let state = HttpState {
        rate_limited: rate_limiter.is_some(),
        schema: api::schema(
            app.clone(),
            options.introspection.unwrap_or(options.auth.is_dev()),
            rate_limiter,
            options.federation.clone(),
        ),
        persisted: options.persisted.clone(),
        ops: OpsState {
            store: store.clone(),
            metered: metered.clone(),
            hub: app.hub.clone(),
            metrics,
            connections: connections.clone(),
            metrics_access: options.metrics_access.clone(),
        },
        app,
        shutdown: shutdown.clone(),
        tracker: tracker.clone(),
        auth: options.auth.clone(),
        limits: options.ws_limits,
        connections,
        pending: http::gate::Gate::replacing(
            options.ws_limits.max_pending,
            options.ws_limits.max_pending_per_address,
        ),
        loopback_only: options.auth.is_dev() && !options.insecure_dev,
        origins: Arc::new({
            let origins = options
                .cors_origins
                .clone()
                .unwrap_or(http::cors::Origins::SameOnly);
            if options.auth.is_dev() {
                origins.in_dev_mode()
            } else {
                origins
            }
        }),
        demo: options.demo,
        reference_page: options.reference_page.clone(),
        liveness: crate::liveness::Liveness::start(
            store.clone(),
            options.clock.clone(),
            &shutdown,
            &tracker,
        )
        .await
        .context("cannot keep this process's liveness record in the store")?,
    };
    let metrics_addr =
        serve_metrics(&state.ops, options.listen_limits, &shutdown, &tracker).await?;
    let planner = state.app.planner.clone();
    let cursors = Some(state.app.cursors.clone());
    let river_builds = state.app.river_builds.clone();
    let router = http::router(state);
    info!(%addr, store = store.backend().name, "riverfeed listening");
    let task = serve_until_stopped(listener, router, &options, shutdown.clone(), tracker);
    Ok(Server {
        addr,
        metrics_addr,
        metered,
        planner,
        cursors,
        river_builds,
        shutdown,
        task,
    })
}

/// Runs the fan-out worker and the background jobs alone (`riverfeed
/// worker`), answering only `/healthz`, `/readyz` and `/metrics` on
/// `options.listen`: one of any number of workers sharing a MongoDB with the
/// API processes.
pub async fn start_worker(mut options: ServeOptions) -> anyhow::Result<Server> {
    anyhow::ensure!(
        !options.store.starts_with("embedded:"),
        EMBEDDED_IS_ONE_PROCESS
    );
    let config = options.worker.clone().unwrap_or_default();
    let inner = open_store(&options).await?;
    let (metrics, metered, store) = metered_store(&mut options, inner).await?;
    let (listener, addr) = bind(options.listen).await?;
    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    // Nobody subscribes here: the hub only relays what the worker publishes.
    let hub = Hub::new(1);
    let wake = Arc::new(Notify::new());
    let relay = RelayContext {
        store: store.clone(),
        hub: hub.clone(),
        clock: options.clock.clone(),
        metrics: metrics.clone(),
        item_ttl: item_ttl_ms(options.item_ttl),
        wake: wake.clone(),
        runs_worker: true,
    };
    start_relay(relay, &shutdown, &tracker).await?;
    let worker = worker_for(&options, config, &store, &hub, &wake, &metrics);
    let outbox = Outbox::new(store.clone(), options.clock.clone());
    start_background(&options, worker, &outbox, &shutdown, &tracker)?;
    let ops = OpsState {
        store: store.clone(),
        metered: metered.clone(),
        hub,
        metrics,
        connections: Arc::default(),
        metrics_access: options.metrics_access.clone(),
    };
    let metrics_addr = serve_metrics(&ops, options.listen_limits, &shutdown, &tracker).await?;
    let router = http::ops_router(ops);
    info!(%addr, store = store.backend().name, "riverfeed worker running");
    let task = serve_until_stopped(listener, router, &options, shutdown.clone(), tracker);
    Ok(Server {
        addr,
        metrics_addr,
        metered,
        planner: Arc::new(api::plan::Planner::new(false)),
        cursors: None,
        river_builds: Arc::default(),
        shutdown,
        task,
    })
}

/// The listener on `listen`, and the address it got (the real port when
/// asked for port 0).
async fn bind(
    listen: std::net::SocketAddr,
) -> anyhow::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// Serves `/metrics` on its own listener when `--metrics-listen` asks for
/// one, until `shutdown`, with the API's timeouts and per-address cap (and
/// room for [`http::listen::REQUEST_ROOM`] scrapes at once); the address it
/// got.
async fn serve_metrics(
    ops: &OpsState,
    limits: http::listen::ListenLimits,
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
) -> anyhow::Result<Option<SocketAddr>> {
    let Some(listen) = ops.metrics_access.listen else {
        return Ok(None);
    };
    let (listener, addr) = bind(listen).await.context("--metrics-listen")?;
    let router = http::metrics_router(ops.clone());
    let shutdown = shutdown.clone();
    tracker.spawn(async move {
        let serve = http::listen::serve(
            listener,
            router,
            limits,
            http::listen::REQUEST_ROOM,
            shutdown.clone(),
        );
        // As the API's listener: a scrape that never ends does not hold
        // shutdown up.
        let deadline = async {
            shutdown.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            _ = serve => {}
            _ = deadline => {}
        }
    });
    info!(%addr, "metrics served on their own listener");
    Ok(Some(addr))
}

/// Why `riverfeed worker` is refused on the embedded store.
pub const EMBEDDED_IS_ONE_PROCESS: &str =
    "the embedded store belongs to one process, and `riverfeed serve` runs its worker; \
     separate worker processes need a MongoDB store (--store mongodb://…)";

/// The fan-out worker of a process, with the feed model it started with.
fn worker_for(
    options: &ServeOptions,
    mut config: WorkerConfig,
    store: &Arc<dyn Store>,
    hub: &Arc<Hub>,
    wake: &Arc<Notify>,
    metrics: &Arc<Metrics>,
) -> Worker {
    config.model = options.model;
    config.item_ttl = item_ttl_ms(options.item_ttl);
    config.group_feed_size = options.group_feed_size;
    config.notice_rules = options.notice_rules.clone();
    config.descriptors = options.descriptors.clone();
    Worker::new(
        store.clone(),
        hub.clone(),
        options.clock.clone(),
        config,
        wake.clone(),
    )
    .with_metrics(metrics.clone())
}

/// Runs a process's background work: `worker` (telling its events to
/// `outbox`) and the webhook sender.
fn start_background(
    options: &ServeOptions,
    worker: Worker,
    outbox: &Arc<Outbox>,
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
) -> anyhow::Result<()> {
    let config = SendConfig {
        allow_private: options.webhooks_allow_private,
        proxy: options.webhooks_proxy.clone(),
        ..SendConfig::default()
    };
    let sender = Sender::new(
        worker.store(),
        options.clock.clone(),
        outbox.clone(),
        worker.metrics(),
        config,
    )
    .context("cannot build the webhook sender's HTTP client")?;
    tracker.spawn(worker.with_outbox(outbox.clone()).run(shutdown.clone()));
    tracker.spawn(sender.run(shutdown.clone()));
    Ok(())
}

/// Starts relaying live events between processes, where the store has an
/// event log (MongoDB).
async fn start_relay(
    relay: RelayContext,
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
) -> anyhow::Result<()> {
    if let Some(log) = relay.store.backend().event_log {
        crate::relay::start(relay, log, shutdown.clone(), tracker)
            .await
            .context("cannot open the event log's change stream")?;
    }
    Ok(())
}

/// Serves `router` until `shutdown`, then ends every task of `tracker`.
fn serve_until_stopped(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    options: &ServeOptions,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) -> JoinHandle<anyhow::Result<()>> {
    let limits = options.listen_limits;
    let total = limits.total(&options.ws_limits);
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            let serve = http::listen::serve(listener, router, limits, total, shutdown.clone());
            // Graceful shutdown waits for requests in flight; a client that
            // never finishes its request must not keep the process alive.
            let deadline = async {
                shutdown.cancelled().await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            };
            tokio::select! {
                _ = serve => {}
                _ = deadline => {
                    warn!(grace = ?SHUTDOWN_GRACE, "requests still open at shutdown were cut off");
                }
            }
            // The HTTP server returns when asked to stop (or failed): end the
            // worker and every websocket task, and wait for them.
            shutdown.cancel();
            tracker.close();
            tracker.wait().await;
            info!("riverfeed stopped");
            Ok(())
        }
    })
}

/// Serves until `signal` resolves, then shuts down gracefully.
pub async fn run(options: ServeOptions, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
    until(start(options).await?, signal).await
}

/// Runs a worker process until `signal` resolves, then stops it gracefully.
pub async fn run_worker(
    options: ServeOptions,
    signal: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    until(start_worker(options).await?, signal).await
}

async fn until(server: Server, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
    let token = server.shutdown_token();
    tokio::select! {
        _ = signal => info!("shutting down"),
        _ = token.cancelled() => {}
    }
    server.stop().await
}

/// `--item-ttl` in milliseconds.
fn item_ttl_ms(ttl: Option<std::time::Duration>) -> Option<crate::model::Millis> {
    ttl.map(|t| crate::model::Millis::try_from(t.as_millis()).unwrap_or(crate::model::Millis::MAX))
}
