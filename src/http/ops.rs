//! The operator's endpoints: `/healthz` (liveness), `/readyz` (readiness)
//! and `/metrics`, served beside the API or, in a worker, alone.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::{http_error, method_not_allowed, not_found, HttpState};
use crate::api;
use crate::store::metered::Metered;
use crate::store::{JobKind, Measure, Records, Store};

/// What `/healthz` and `/metrics` read: all a worker process serves.
#[derive(Clone)]
pub struct OpsState {
    pub store: Arc<dyn Store>,
    pub metered: Arc<Metered>,
    pub hub: Arc<crate::events::Hub>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Open websocket connections (none in a worker).
    pub connections: Arc<AtomicUsize>,
    /// Where `/metrics` is served, and who may read it.
    pub metrics_access: MetricsAccess,
}

/// Where `/metrics` is served and who may read it: operators, not callers
/// of the API.
#[derive(Clone, Debug, Default)]
pub struct MetricsAccess {
    /// `--metrics-listen`: served on this address alone, not beside the API
    /// (or a worker's `/healthz`).
    pub listen: Option<SocketAddr>,
    /// `--metrics-token`: a scrape must send `Authorization: Bearer <token>`.
    pub token: Option<Arc<str>>,
}

impl axum::extract::FromRef<HttpState> for OpsState {
    fn from_ref(state: &HttpState) -> Self {
        state.ops.clone()
    }
}

/// The router of a worker process: `/healthz`, `/readyz` and `/metrics` only.
pub fn ops_router(state: OpsState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(metrics_beside(&state))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// The router of `--metrics-listen`: `/metrics` only.
pub fn metrics_router(state: OpsState) -> Router {
    metrics_routes(&state)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

/// `/metrics`, behind the token when there is one.
fn metrics_routes<S: Clone + Send + Sync + 'static>(state: &OpsState) -> Router<S> {
    let routes = Router::new().route("/metrics", get(metrics));
    let routes = match state.metrics_access.token.clone() {
        Some(token) => routes.route_layer(middleware::from_fn_with_state(token, metrics_guard)),
        None => routes,
    };
    routes.with_state(state.clone())
}

/// `/metrics` to serve beside other routes: none when it has a listener of
/// its own.
pub(super) fn metrics_beside<S: Clone + Send + Sync + 'static>(state: &OpsState) -> Router<S> {
    match state.metrics_access.listen {
        Some(_) => Router::new(),
        None => metrics_routes(state),
    }
}

/// Lets a scrape through with the metrics token only. The comparison takes
/// the same time wherever the tokens differ.
async fn metrics_guard(State(token): State<Arc<str>>, request: Request, next: Next) -> Response {
    let sent = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::auth::bearer)
        .unwrap_or_default();
    let same = sent.len() == token.len()
        && sent
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0;
    if same {
        return next.run(request).await;
    }
    let mut refused = http_error(
        StatusCode::UNAUTHORIZED,
        "UNAUTHENTICATED",
        "/metrics needs the metrics token (--metrics-token): send Authorization: Bearer <token>",
    );
    refused.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    refused
}

/// The deployment value `/healthz` reads (none is stored under it).
const HEALTH_KEY: &str = "health";

/// Why the store cannot take requests now, if it cannot: it does not
/// answer a read (one round trip to MongoDB), or it refuses writes.
async fn store_fault(store: &dyn Store) -> Option<String> {
    match store.meta(HEALTH_KEY).await {
        Ok(_) => store.write_fault(),
        Err(err) => Some(format!("the store does not answer ({})", err.message)),
    }
}

/// Liveness: 200 while the process serves, `ok`, or `degraded` with the
/// reason while the store cannot take requests (a restart would not mend
/// that; the store recovers by itself once it can).
pub(super) async fn healthz(State(state): State<OpsState>) -> Response {
    let store = state.store.backend().name;
    match store_fault(state.store.as_ref()).await {
        None => Json(json!({ "status": "ok", "store": store })).into_response(),
        Some(reason) => {
            Json(json!({ "status": "degraded", "store": store, "reason": reason })).into_response()
        }
    }
}

/// Readiness: 200 `ready` while the store takes reads and writes, 503 `not
/// ready` with the reason while it does not, so that a balancer sends
/// requests elsewhere meanwhile.
pub(super) async fn readyz(State(state): State<OpsState>) -> Response {
    let store = state.store.backend().name;
    match store_fault(state.store.as_ref()).await {
        None => Json(json!({ "status": "ready", "store": store })).into_response(),
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(
                header::RETRY_AFTER,
                api::error::STORAGE_RETRY_AFTER.to_string(),
            )],
            Json(json!({ "status": "not ready", "store": store, "reason": reason })),
        )
            .into_response(),
    }
}

/// Prometheus / OpenMetrics text: the process's metrics (see
/// [`crate::metrics`]), the fan-out queue as the store holds it, store
/// calls per operation and the backend's own counters.
async fn metrics(State(state): State<OpsState>) -> impl IntoResponse {
    let metrics = &state.metrics;
    metrics
        .live_connections
        .set(state.connections.load(Ordering::Relaxed) as i64);
    metrics
        .live_subscriptions
        .set(state.hub.live_subscriptions() as i64);
    let now = chrono::Utc::now().timestamp_millis();
    // One read of each queue's backlog: the per-kind gauge, and the fan-out
    // and webhook queues' own series, which dashboards read by those names.
    for kind in JobKind::ALL {
        let backlog = match state.store.backlog(kind).await {
            Ok(backlog) => backlog,
            Err(err) => {
                tracing::warn!(cause = %err.chain(), job = kind.code(), "cannot read a job backlog");
                continue;
            }
        };
        let labels = crate::metrics::QueueLabels {
            job: kind.code().to_owned(),
        };
        let depth = backlog.jobs as i64;
        metrics.job_queue_depth.get_or_create(&labels).set(depth);
        match kind {
            JobKind::FanOut => {
                metrics.fanout_queue_depth.set(depth);
                let age = backlog.oldest.map_or(0, |at| (now - at).max(0));
                metrics
                    .fanout_oldest_pending_seconds
                    .set(age as f64 / 1000.0);
            }
            JobKind::Webhook => drop(metrics.webhook_queue_depth.set(depth)),
            _ => {}
        }
    }
    let mut out = String::new();
    metrics.encode(&mut out);
    out.push_str(
        "# HELP riverfeed_store_calls Calls to the store, per operation.\n\
         # TYPE riverfeed_store_calls counter\n",
    );
    for (op, calls) in state.metered.snapshot() {
        out.push_str(&format!(
            "riverfeed_store_calls_total{{op=\"{}\"}} {calls}\n",
            op.name()
        ));
    }
    let backend = match state.metered.stats(Measure::Counters).await {
        Ok(stats) => stats.counters,
        Err(err) => {
            tracing::warn!(cause = %err.chain(), "cannot read the store's counters");
            Vec::new()
        }
    };
    if !backend.is_empty() {
        out.push_str(
            "# HELP riverfeed_mongodb_commands Commands sent to MongoDB, per command.\n\
             # TYPE riverfeed_mongodb_commands counter\n",
        );
        for (command, count) in backend {
            out.push_str(&format!(
                "riverfeed_mongodb_commands_total{{command=\"{command}\"}} {count}\n"
            ));
        }
    }
    out.push_str(
        "# HELP riverfeed_live_topics Feeds, slices and actions with at least one live subscription.\n\
         # TYPE riverfeed_live_topics gauge\n",
    );
    out.push_str(&format!(
        "riverfeed_live_topics {}\n",
        state.hub.live_topics()
    ));
    out.push_str("# EOF\n");
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        out,
    )
}
