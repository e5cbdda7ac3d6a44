//! HTTP: the router (`/graphql`, `/graphql/ws`, `/graphiql`, `/healthz`,
//! `/metrics`, `/demo/`), dev-mode identity from headers, and websocket
//! connections that end with the server.

mod graphiql;
mod respond;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_graphql::http::ALL_WEBSOCKET_PROTOCOLS;
use async_graphql::parser::types::OperationType;
use async_graphql::{BatchRequest, Data, ParseRequestError};
use async_graphql_axum::rejection::GraphQLRejection;
use async_graphql_axum::{GraphQLBatchRequest, GraphQLProtocol, GraphQLRequest, GraphQLWebSocket};
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::{self, AppState, Identity, RiverfeedSchema, Session};
use crate::auth::Authenticator;
use crate::store::metered::Metered;
use crate::store::Store;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What the handlers share.
#[derive(Clone)]
pub struct HttpState {
    pub schema: RiverfeedSchema,
    pub app: AppState,
    /// What `/healthz` and `/metrics` read.
    pub ops: OpsState,
    /// Cancelled when the server shuts down; websocket tasks end on it.
    pub shutdown: CancellationToken,
    /// Tracks websocket tasks so shutdown can wait for them.
    pub tracker: TaskTracker,
    pub auth: Arc<Authenticator>,
    pub limits: WsLimits,
    /// Open websocket connections, against `limits.max_connections`.
    pub connections: Arc<AtomicUsize>,
    /// Dev mode on loopback: answer only loopback hosts and origins.
    pub loopback_only: bool,
    /// The server seeded the demo tenant (`--demo`).
    pub demo: bool,
}

/// What `/healthz` and `/metrics` read: all a worker process serves.
#[derive(Clone)]
pub struct OpsState {
    pub store: Arc<dyn Store>,
    pub metered: Arc<Metered>,
    pub hub: Arc<crate::events::Hub>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Open websocket connections (none in a worker).
    pub connections: Arc<AtomicUsize>,
}

impl axum::extract::FromRef<HttpState> for OpsState {
    fn from_ref(state: &HttpState) -> Self {
        state.ops.clone()
    }
}

/// The router of a worker process: `/healthz` and `/metrics` only.
pub fn ops_router(state: OpsState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// Bounds on live connections.
#[derive(Clone, Copy, Debug)]
pub struct WsLimits {
    /// Websocket connections open at once, in total.
    pub max_connections: usize,
    /// Subscriptions at once on one connection.
    pub max_subscriptions: usize,
}

impl Default for WsLimits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_subscriptions: 16,
        }
    }
}

/// Holds a place among the open connections; frees it when dropped.
struct ConnectionSlot(Arc<AtomicUsize>);

impl ConnectionSlot {
    fn take(count: &Arc<AtomicUsize>, max: usize) -> Option<Self> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(count.clone()))
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The whole HTTP surface.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/graphql", get(graphql_get).post(graphql_post))
        .route("/graphql/ws", get(graphql_ws))
        .route("/graphiql", get(graphiql::page))
        .route("/graphiql/assets/{file}", get(graphiql::asset))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route(
            "/demo",
            get(|| async { axum::response::Redirect::permanent("/demo/") }),
        )
        .route("/demo/", get(demo_page))
        .route("/demo/roster.json", get(demo_roster))
        .route("/demo/{file}", get(demo_asset))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            loopback_guard,
        ))
        .with_state(state)
}

/// Whether `authority` (`host[:port]`) names this machine's loopback.
fn is_loopback(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// In dev mode anyone who reaches the server can claim any identity, so it
/// must only be reachable from this machine: a request naming another host
/// (DNS rebinding) or sent by a page of another origin (a cross-site
/// websocket) is refused. With tokens, the token is the credential and any
/// origin may call.
async fn loopback_guard(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    if state.loopback_only {
        let header = |name: header::HeaderName| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let host_ok = header(header::HOST).is_none_or(|host| is_loopback(&host));
        let origin_ok = header(header::ORIGIN).is_none_or(|origin| {
            origin == "null"
                || origin
                    .split_once("://")
                    .is_some_and(|(_, authority)| is_loopback(authority))
        });
        if !host_ok || !origin_ok {
            return http_error(
                StatusCode::FORBIDDEN,
                "FORBIDDEN",
                "dev mode answers requests from this machine only (loopback host and origin)",
            );
        }
    }
    next.run(request).await
}

/// A GraphQL-shaped error outside of GraphQL execution (bad body, bad method).
fn http_error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({ "errors": [{ "message": message.into(), "extensions": { "code": code } }] });
    (status, Json(body)).into_response()
}

async fn graphql_post(
    State(state): State<HttpState>,
    headers: HeaderMap,
    request: Request,
) -> Response {
    let media = match respond::negotiate(&headers) {
        Ok(media) => media,
        Err(refused) => return refused,
    };
    // async-graphql reads the body stream itself, past axum's body limit: buffer
    // it here under the limit first.
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return http_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
            format!("request body is larger than {MAX_BODY_BYTES} bytes"),
        );
    };
    let request = Request::from_parts(parts, axum::body::Body::from(bytes));
    let batch = match GraphQLBatchRequest::<GraphQLRejection>::from_request(request, &()).await {
        Ok(batch) => batch.into_inner(),
        Err(GraphQLRejection(ParseRequestError::PayloadTooLarge)) => {
            return http_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                format!("request body is larger than {MAX_BODY_BYTES} bytes"),
            );
        }
        Err(GraphQLRejection(err)) => {
            return http_error(
                StatusCode::BAD_REQUEST,
                "BAD_REQUEST",
                format!(
                    "the body is not a GraphQL request ({err}): send JSON with a `query` string"
                ),
            );
        }
    };
    let identity = state.auth.from_headers(&headers);
    // Each request of a batch gets its own session (and loaders).
    let batch = match batch {
        BatchRequest::Single(request) => {
            BatchRequest::Single(request.data(Session::new(identity, &state.app)))
        }
        BatchRequest::Batch(requests) if requests.len() > api::MAX_BATCH => {
            return http_error(
                StatusCode::BAD_REQUEST,
                "BAD_REQUEST",
                format!(
                    "a batch holds at most {} operations, this one {}",
                    api::MAX_BATCH,
                    requests.len()
                ),
            );
        }
        BatchRequest::Batch(requests) => BatchRequest::Batch(
            requests
                .into_iter()
                .map(|r| r.data(Session::new(identity.clone(), &state.app)))
                .collect(),
        ),
    };
    respond::batch(media, state.schema.execute_batch(batch).await)
}

async fn graphql_get(
    State(state): State<HttpState>,
    headers: HeaderMap,
    request: Request,
) -> Response {
    if request.uri().query().is_none() {
        return axum::response::Redirect::temporary("/graphiql").into_response();
    }
    let media = match respond::negotiate(&headers) {
        Ok(media) => media,
        Err(refused) => return refused,
    };
    let request = match GraphQLRequest::<GraphQLRejection>::from_request(request, &()).await {
        Ok(request) => request.into_inner(),
        Err(_) => {
            return http_error(
                StatusCode::BAD_REQUEST,
                "BAD_REQUEST",
                "GET /graphql takes `query` (and optional `variables`, `operationName`) in the query string",
            )
        }
    };
    // Mutations change state: they must not ride on GET, which links and
    // prefetchers send freely.
    if let Ok(document) = async_graphql::parser::parse_query(&request.query) {
        let mutation = document.operations.iter().any(|(name, op)| {
            op.node.ty == OperationType::Mutation
                && request
                    .operation_name
                    .as_deref()
                    .is_none_or(|wanted| name.is_some_and(|n| n.as_str() == wanted))
        });
        if mutation {
            let mut refused = http_error(
                StatusCode::METHOD_NOT_ALLOWED,
                "METHOD_NOT_ALLOWED",
                "mutations must be sent with POST",
            );
            refused
                .headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
            return refused;
        }
    }
    let session = Session::new(state.auth.from_headers(&headers), &state.app);
    respond::single(media, state.schema.execute(request.data(session)).await)
}

async fn not_found() -> Response {
    http_error(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        "no such path; the API is at /graphql, its guide at /",
    )
}

async fn method_not_allowed() -> Response {
    http_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
        "this path does not take that method",
    )
}

async fn graphql_ws(
    State(state): State<HttpState>,
    protocol: Result<GraphQLProtocol, StatusCode>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => {
            return http_error(
                rejection.status(),
                "BAD_REQUEST",
                format!(
                    "/graphql/ws takes websocket upgrades: {}",
                    rejection.body_text()
                ),
            )
        }
    };
    let Ok(protocol) = protocol else {
        return http_error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
            "unsupported websocket subprotocol: use graphql-transport-ws or graphql-ws",
        );
    };
    let Some(slot) = ConnectionSlot::take(&state.connections, state.limits.max_connections) else {
        return http_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "TOO_MANY_CONNECTIONS",
            format!(
                "this server holds at most {} websocket connections; try again later",
                state.limits.max_connections
            ),
        );
    };
    let tracker = state.tracker.clone();
    upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        // A websocket message is a request: the same bound as an HTTP body.
        .max_message_size(MAX_BODY_BYTES)
        .max_frame_size(MAX_BODY_BYTES)
        // A subscriber mostly idles and its messages are small: a 1 KiB read
        // buffer (it grows for a larger message) instead of the default
        // 128 KiB, which each idle connection would otherwise hold resident.
        .read_buffer_size(1024)
        .on_upgrade(move |socket| {
            tracker.track_future(async move {
                serve_ws(socket, protocol, state).await;
                drop(slot);
            })
        })
}

/// How long a new websocket may take to send `connection_init`.
pub const INIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// One websocket connection: graphql-transport-ws or graphql-ws, ended with a
/// 1001 close when the server shuts down.
///
/// A connection holds one of the server's connection slots, so it must earn
/// it: `connection_init` within `INIT_TIMEOUT`, with a valid identity.
async fn serve_ws(socket: WebSocket, protocol: GraphQLProtocol, state: HttpState) {
    let (mut sink, mut stream) = socket.split();
    let close = |code: u16, reason: &str| {
        Message::Close(Some(CloseFrame {
            code,
            reason: reason.to_owned().into(),
        }))
    };
    let first = tokio::select! {
        first = stream.next() => first,
        _ = tokio::time::sleep(INIT_TIMEOUT) => {
            let _ = sink.send(close(4408, "connection initialisation timeout")).await;
            return;
        }
        _ = state.shutdown.cancelled() => return,
    };
    let Some(first) = first else { return };
    // Ending the input ends the connection's subscriptions and its task.
    let stream = futures_util::stream::once(async move { first })
        .chain(stream)
        .take_until(state.shutdown.clone().cancelled_owned());
    let (app, auth) = (state.app.clone(), state.auth.clone());
    let max_subscriptions = state.limits.max_subscriptions;
    GraphQLWebSocket::new_with_pair(&mut sink, stream, state.schema.clone(), protocol)
        .on_connection_init(move |payload| async move {
            let session = Session::new(auth.from_payload(&payload), &app)
                .with_subscription_limit(max_subscriptions);
            match &session.identity {
                Identity::Viewer(_) => {}
                Identity::Invalid(reason) => {
                    return Err(async_graphql::Error::new(format!(
                        "UNAUTHENTICATED: {reason}"
                    )))
                }
                Identity::Anonymous => {
                    return Err(async_graphql::Error::new(
                        "UNAUTHENTICATED: connection_init carries no identity",
                    ))
                }
            }
            let mut data = Data::default();
            data.insert(session);
            Ok(data)
        })
        .serve()
        .await;
    if state.shutdown.is_cancelled() {
        let _ = sink.send(close(1001, "server shutting down")).await;
    }
}

async fn index() -> Html<&'static str> {
    Html(include_str!("index.html"))
}

/// The web demo's page. Its policy lets it load its own files and talk to
/// this server only (the websocket included), and nothing else.
async fn demo_page() -> Response {
    (
        [
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                 connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            ),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Html(include_str!("../../web-demo/index.html")),
    )
        .into_response()
}

/// The web demo's files, built into the binary: no build step, nothing to
/// deploy beside it.
const DEMO_ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web-demo/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../web-demo/style.css"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("../../web-demo/favicon.svg"),
    ),
];

async fn demo_asset(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    match DEMO_ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            *body,
        )
            .into_response(),
        None => not_found().await,
    }
}

/// The demo organisation for the page: the same data the seeder writes, and
/// whether this server seeded it.
async fn demo_roster(State(state): State<HttpState>) -> Response {
    let mut roster = serde_json::to_value(crate::demo::roster()).unwrap_or_default();
    roster["seeded"] = json!(state.demo);
    Json(roster).into_response()
}

/// 200 when the store answers, 503 when it does not.
async fn healthz(State(state): State<OpsState>) -> Response {
    let store = state.store.backend();
    match state.store.ping().await {
        Ok(()) => Json(json!({ "status": "ok", "store": store })).into_response(),
        Err(err) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "unavailable", "store": store, "error": err.message })),
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
        .websocket_connections
        .set(state.connections.load(Ordering::Relaxed) as i64);
    metrics
        .live_subscriptions
        .set(state.hub.live_subscriptions() as i64);
    let now = chrono::Utc::now().timestamp_millis();
    match state.store.fan_out_backlog().await {
        Ok(backlog) => {
            metrics.fanout_queue_depth.set(backlog.actions as i64);
            let age = backlog.oldest.map_or(0, |at| (now - at).max(0));
            metrics
                .fanout_oldest_pending_seconds
                .set(age as f64 / 1000.0);
        }
        Err(err) => tracing::warn!(cause = %err.chain(), "cannot read the fan-out backlog"),
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
    let backend = state.metered.backend_metrics();
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
