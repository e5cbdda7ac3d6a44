//! What a process reports at `/metrics` (Prometheus / OpenMetrics text):
//! GraphQL requests, the fan-out queue and its jobs, live connections and
//! subscriptions, the relay between processes and store call latencies.
//! One [`Metrics`] per process, shared by the API, the worker and the relay.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Operation names outside the trusted documents that get series of their
/// own: the first this many distinct names of operations that authenticated
/// and validated. Any caller names its operations, so each new name would
/// otherwise add series for good.
pub const MAX_OPERATION_NAMES: usize = 100;

/// The name label of operations beyond [`MAX_OPERATION_NAMES`], and of
/// authenticated ones that did not validate under a name without a series.
pub const OTHER_OPERATION: &str = "other";

/// The name label of every operation sent without a valid identity.
pub const UNAUTHENTICATED_OPERATION: &str = "unauthenticated";

/// How far a request got in proving itself, which decides its operation's
/// name label: nothing a caller sends is kept before it has proven who it
/// is, so only an authenticated, valid operation's name takes a series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// No valid identity: [`UNAUTHENTICATED_OPERATION`], whatever its name.
    Unauthenticated,
    /// Authenticated, but it did not validate (or did not parse): its name
    /// if that has a series already, else [`OTHER_OPERATION`].
    Authenticated,
    /// Authenticated and validated: its name may take a series.
    Validated,
    /// Authenticated, with one of the trusted documents: their names are a
    /// fixed set, each its own series.
    Trusted,
}

/// A GraphQL operation, as requests are counted and timed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// `query`, `mutation` or `subscription`.
    pub r#type: String,
    /// The operation's name (see [`Metrics::graphql_request`]), or
    /// `anonymous`.
    pub name: String,
}

/// A GraphQL request's outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub r#type: String,
    pub name: String,
    /// `ok` or `error`.
    pub outcome: String,
}

/// Which executor ran a query or mutation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExecutionLabels {
    pub name: String,
    /// `planned` or `fallback` (see [`crate::api::plan::Executor`]).
    pub executor: &'static str,
}

/// Which executor wrote a live feed or slice event.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LiveEventLabels {
    /// `planned` or `fallback` (see [`crate::api::plan::Executor`]).
    pub executor: &'static str,
}

/// A background job and how it went.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    /// `fanout`, `bump`, `cleanup`, `expiry`.
    pub job: String,
    pub outcome: String,
}

/// A kind of job in the store's queue.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// `fanout`, `bump`, `cleanup`, `notice`, `webhook`.
    pub job: String,
}

/// How one webhook delivery attempt ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// `sent`, `failed`, `retried`, `dead`.
    pub outcome: &'static str,
}

/// A store operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    pub op: String,
}

/// Signals relayed between processes, by direction (`out`, `in`, and
/// `dropped` when the queue to the log was full).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RelayLabels {
    pub direction: String,
}

/// The process's metrics.
pub struct Metrics {
    registry: Registry,
    graphql_requests: Family<RequestLabels, Counter>,
    graphql_seconds: Family<OperationLabels, Histogram>,
    graphql_executions: Family<ExecutionLabels, Counter>,
    live_events: Family<LiveEventLabels, Counter>,
    pub deliveries: Counter,
    pub lease_takeovers: Counter,
    pub notices_written: Counter,
    jobs: Family<JobLabels, Counter>,
    webhooks: Family<WebhookLabels, Counter>,
    pub live_connections: Gauge,
    pub live_subscriptions: Gauge,
    pub lagged_subscriptions: Counter,
    pub fanout_queue_depth: Gauge,
    pub webhook_queue_depth: Gauge,
    pub webhook_sender_rounds: Counter,
    /// Jobs not done yet, per kind, in the whole store: what a drain
    /// waits for.
    pub job_queue_depth: Family<QueueLabels, Gauge>,
    pub fanout_oldest_pending_seconds: Gauge<f64, AtomicU64>,
    relay_signals: Family<RelayLabels, Counter>,
    pub relay_lag_seconds: Histogram,
    pub relay_reconnects: Counter,
    store_seconds: Family<StoreLabels, Histogram>,
    /// The untrusted operation names that have series of their own, at most
    /// [`MAX_OPERATION_NAMES`]. A std mutex: held for a lookup or an insert.
    operation_names: Mutex<HashSet<String>>,
}

fn latency_buckets() -> impl Iterator<Item = f64> {
    // 0.5 ms to about 16 s.
    exponential_buckets(0.0005, 2.0, 16)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("riverfeed");
        let graphql_requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "graphql_requests",
            "GraphQL requests, by operation type, name and outcome",
            graphql_requests.clone(),
        );
        let graphql_seconds = Family::<OperationLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(latency_buckets())
        });
        registry.register(
            "graphql_request_duration_seconds",
            "Time to answer a GraphQL query or mutation, by operation type and name",
            graphql_seconds.clone(),
        );
        let graphql_executions = Family::<ExecutionLabels, Counter>::default();
        registry.register(
            "graphql_executions",
            "Queries and mutations executed, by operation name and executor (`planned` or `fallback`)",
            graphql_executions.clone(),
        );
        let live_events = Family::<LiveEventLabels, Counter>::default();
        registry.register(
            "live_events",
            "Live feed and slice events sent to subscribers, by executor (`planned`: written from the selection's plan; `fallback`: by async-graphql)",
            live_events.clone(),
        );
        let deliveries = Counter::default();
        registry.register(
            "fanout_deliveries",
            "Feed items written by fan-outs in this process",
            deliveries.clone(),
        );
        let lease_takeovers = Counter::default();
        registry.register(
            "fanout_lease_takeovers",
            "Fan-outs this process claimed after another worker's lease ran out",
            lease_takeovers.clone(),
        );
        let notices_written = Counter::default();
        registry.register(
            "notices_written",
            "Notification groups added or changed by this process's worker (a group changed by several notices at once counts once)",
            notices_written.clone(),
        );
        let jobs = Family::<JobLabels, Counter>::default();
        registry.register(
            "jobs",
            "Background jobs run by this process (fan-outs, bumps, notices, cleanups, expiries), by outcome (ok, error, or set_aside: a job that does not read, kept aside)",
            jobs.clone(),
        );
        let webhooks = Family::<WebhookLabels, Counter>::default();
        registry.register(
            "webhook_deliveries",
            "Webhook delivery attempts by this process: sent (answered 2xx), failed, \
             retried (a failure with a retry planned) and dead (given up on after a day)",
            webhooks.clone(),
        );
        // Each outcome shown from the start, at 0.
        for outcome in ["sent", "failed", "retried", "dead"] {
            drop(webhooks.get_or_create(&WebhookLabels { outcome }));
        }
        let live_connections = Gauge::default();
        registry.register(
            "live_connections",
            "Live connections open: websockets, event streams and multipart responses",
            live_connections.clone(),
        );
        let live_subscriptions = Gauge::default();
        registry.register(
            "live_subscriptions",
            "Live GraphQL subscriptions",
            live_subscriptions.clone(),
        );
        let lagged_subscriptions = Counter::default();
        registry.register(
            "lagged_subscriptions",
            "Subscriptions ended with LAGGED: they fell behind the event buffer",
            lagged_subscriptions.clone(),
        );
        let fanout_queue_depth = Gauge::default();
        registry.register(
            "fanout_queue_depth",
            "Actions waiting for their fan-out or in one, in the whole store",
            fanout_queue_depth.clone(),
        );
        let webhook_queue_depth = Gauge::default();
        registry.register(
            "webhook_queue_depth",
            "Webhook deliveries waiting, being sent or waiting for a retry, in the whole store",
            webhook_queue_depth.clone(),
        );
        let webhook_sender_rounds = Counter::default();
        registry.register(
            "webhook_sender_rounds",
            "Passes of this process's webhook sender over the deliveries due, each counted \
             once what it claimed is settled",
            webhook_sender_rounds.clone(),
        );
        let job_queue_depth = Family::<QueueLabels, Gauge>::default();
        registry.register(
            "job_queue_depth",
            "Jobs waiting, under way or waiting for a retry, in the whole store, by kind",
            job_queue_depth.clone(),
        );
        let fanout_oldest_pending_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "fanout_oldest_pending_age_seconds",
            "Age of the oldest action whose fan-out is not done (0 when none)",
            fanout_oldest_pending_seconds.clone(),
        );
        let relay_signals = Family::<RelayLabels, Counter>::default();
        registry.register(
            "relay_signals",
            "Live-event signals relayed between processes, by direction",
            relay_signals.clone(),
        );
        for direction in ["out", "in", "dropped"] {
            // Present at 0 from the start, so a dashboard finds them.
            let _ = relay_signals.get_or_create(&RelayLabels {
                direction: direction.to_owned(),
            });
        }
        let relay_lag_seconds = Histogram::new(latency_buckets());
        registry.register(
            "relay_lag_seconds",
            "From a signal appended by another process to its arrival here (change-stream lag)",
            relay_lag_seconds.clone(),
        );
        let relay_reconnects = Counter::default();
        registry.register(
            "relay_reconnects",
            "Times the change stream was opened again after it failed",
            relay_reconnects.clone(),
        );
        let store_seconds = Family::<StoreLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(latency_buckets())
        });
        registry.register(
            "store_call_duration_seconds",
            "Store call latencies, by operation",
            store_seconds.clone(),
        );
        Self {
            registry,
            graphql_requests,
            graphql_seconds,
            graphql_executions,
            live_events,
            deliveries,
            lease_takeovers,
            notices_written,
            jobs,
            webhooks,
            live_connections,
            live_subscriptions,
            lagged_subscriptions,
            fanout_queue_depth,
            webhook_queue_depth,
            webhook_sender_rounds,
            job_queue_depth,
            fanout_oldest_pending_seconds,
            relay_signals,
            relay_lag_seconds,
            relay_reconnects,
            store_seconds,
            operation_names: Mutex::default(),
        }
    }

    /// The name label of an operation (see [`Naming`]): `unauthenticated`
    /// without an identity, `anonymous` without a name; its name when it
    /// comes from the trusted documents (a fixed set) or is among the first
    /// [`MAX_OPERATION_NAMES`] names of valid operations, `other` beyond them.
    fn operation_label(&self, name: &str, naming: Naming) -> String {
        if naming == Naming::Unauthenticated {
            return UNAUTHENTICATED_OPERATION.to_owned();
        }
        if name.is_empty() {
            return "anonymous".to_owned();
        }
        if naming == Naming::Trusted {
            return name.to_owned();
        }
        let mut names = self
            .operation_names
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if names.contains(name) {
            return name.to_owned();
        }
        if naming == Naming::Validated && names.len() < MAX_OPERATION_NAMES {
            names.insert(name.to_owned());
            return name.to_owned();
        }
        OTHER_OPERATION.to_owned()
    }

    /// One GraphQL request answered, labelled as `naming` allows.
    pub fn graphql_request(
        &self,
        r#type: &str,
        name: &str,
        naming: Naming,
        ok: bool,
        took: Option<Duration>,
    ) {
        let name = self.operation_label(name, naming);
        if let Some(took) = took {
            self.graphql_seconds
                .get_or_create(&OperationLabels {
                    r#type: r#type.to_owned(),
                    name: name.clone(),
                })
                .observe(took.as_secs_f64());
        }
        self.graphql_requests
            .get_or_create(&RequestLabels {
                r#type: r#type.to_owned(),
                name,
                outcome: if ok { "ok" } else { "error" }.to_owned(),
            })
            .inc();
    }

    /// One query or mutation executed by `executor`, its name labelled as
    /// `naming` allows.
    pub fn graphql_executed(
        &self,
        name: &str,
        naming: Naming,
        executor: crate::api::plan::Executor,
    ) {
        let name = self.operation_label(name, naming);
        self.graphql_executions
            .get_or_create(&ExecutionLabels {
                name,
                executor: executor.label(),
            })
            .inc();
    }

    /// One feed or slice event written for its subscriber by `executor`.
    pub fn live_event(&self, executor: crate::api::plan::Executor) {
        self.live_events
            .get_or_create(&LiveEventLabels {
                executor: executor.label(),
            })
            .inc();
    }

    /// One background job done (`ok`) or failed.
    pub fn job(&self, job: &str, ok: bool) {
        self.jobs
            .get_or_create(&JobLabels {
                job: job.to_owned(),
                outcome: if ok { "ok" } else { "error" }.to_owned(),
            })
            .inc();
    }

    /// One background job that does not read, set aside (never claimed
    /// again until it is mended).
    pub fn job_set_aside(&self, job: &str) {
        self.jobs
            .get_or_create(&JobLabels {
                job: job.to_owned(),
                outcome: "set_aside".to_owned(),
            })
            .inc();
    }

    /// One webhook delivery attempt's outcome (see [`WebhookLabels`]).
    pub fn webhook(&self, outcome: &'static str) {
        self.webhooks
            .get_or_create(&WebhookLabels { outcome })
            .inc();
    }

    /// Signals relayed in one direction.
    pub fn relayed(&self, direction: &str, count: u64) {
        self.relay_signals
            .get_or_create(&RelayLabels {
                direction: direction.to_owned(),
            })
            .inc_by(count);
    }

    /// The latency histogram of one store operation (a handle on the
    /// registered one: keep it rather than look it up per call).
    pub fn store_histogram(&self, op: &str) -> Histogram {
        self.store_seconds
            .get_or_create(&StoreLabels { op: op.to_owned() })
            .clone()
    }

    /// The registered metrics in the text format, without its closing
    /// `# EOF` line (the caller adds its own lines, then that).
    pub fn encode(&self, out: &mut String) {
        if let Err(err) = prometheus_client::encoding::text::encode_registry(out, &self.registry) {
            tracing::error!(cause = %err, "cannot encode the metrics");
        }
    }
}

/// Shared by the parts of one process.
pub type SharedMetrics = Arc<Metrics>;
