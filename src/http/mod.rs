//! HTTP: the router (`/graphql`, `/graphql/ws`, `/graphiql`, `/healthz`,
//! `/readyz`, `/metrics`, `/demo/`), dev-mode identity from headers, and
//! websocket connections that end with the server.

pub mod cors;
pub mod gate;
mod graphiql;
pub mod idempotency;
pub mod listen;
mod ops;
pub mod persisted;
mod respond;
mod stream;
mod ws;

use ops::{healthz, metrics_beside, readyz};
pub use ops::{metrics_router, ops_router, MetricsAccess, OpsState};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use std::net::SocketAddr;

use async_graphql::parser::types::OperationType;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::ExtensionRejection;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::minted::Minter;
use crate::api::rate_limit::Caller;
use crate::api::{self, AppState, Identity, RiverfeedSchema, Role, Session};
use crate::auth::Authenticator;

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
    /// Open live connections (authenticated websockets, event streams,
    /// multipart responses), against `limits.max_connections`.
    pub connections: Arc<AtomicUsize>,
    /// Websockets upgraded whose `connection_init` is not yet accepted.
    pub pending: Arc<gate::Gate>,
    /// Dev mode on loopback: answer only requests sent to a loopback host.
    pub loopback_only: bool,
    /// The web origins that may call besides the server's own.
    pub origins: Arc<cors::Origins>,
    /// The server seeded the demo tenant (`--demo`).
    pub demo: bool,
    /// Persisted operations: the APQ cache and the trusted documents.
    pub persisted: Arc<persisted::Persisted>,
    /// The schema charges operations to rate limits.
    pub rate_limited: bool,
    /// What `POST /bench/reference` answers, under `riverfeed bench` only.
    pub reference_page: Option<Arc<ReferencePage>>,
    /// This process, named on the keys its requests hold.
    pub liveness: Arc<crate::liveness::Liveness>,
}

/// A response body kept in memory and answered as it is: the bench's
/// measure of the HTTP stack alone (the same listener, router, layers and
/// client as a feed page), with a body of the page's size.
#[derive(Debug, Default)]
pub struct ReferencePage(std::sync::RwLock<axum::body::Bytes>);

impl ReferencePage {
    pub fn set(&self, body: axum::body::Bytes) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = body;
    }

    fn body(&self) -> axum::body::Bytes {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Bounds and timers of live connections.
#[derive(Clone, Copy, Debug)]
pub struct WsLimits {
    /// Live connections open at once, in total: websockets (once their
    /// `connection_init` is accepted), event streams and multipart responses.
    pub max_connections: usize,
    /// Websockets open at once whose `connection_init` is not yet accepted.
    pub max_pending: usize,
    /// Of those, from one client address.
    pub max_pending_per_address: usize,
    /// Subscriptions at once on one websocket connection.
    pub max_subscriptions: usize,
    /// How long a new websocket may take to send `connection_init`.
    pub init_timeout: std::time::Duration,
    /// How often the server pings a websocket.
    pub ping_interval: std::time::Duration,
}

impl Default for WsLimits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_pending: 1_000,
            max_pending_per_address: 32,
            max_subscriptions: 16,
            init_timeout: ws::DEFAULT_INIT_TIMEOUT,
            ping_interval: ws::DEFAULT_PING_INTERVAL,
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

impl ConnectionSlot {
    /// A place for a new live connection, or the 503 that says none is free.
    #[allow(clippy::result_large_err)]
    fn for_request(state: &HttpState) -> Result<Self, Response> {
        Self::take(&state.connections, state.limits.max_connections).ok_or_else(|| {
            http_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "TOO_MANY_CONNECTIONS",
                format!(
                    "this server holds at most {} live connections; try again later",
                    state.limits.max_connections
                ),
            )
        })
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The whole HTTP surface.
pub fn router(state: HttpState) -> Router {
    let mut router = Router::new();
    if let Some(page) = state.reference_page.clone() {
        router = router.route(
            "/bench/reference",
            axum::routing::post(move || async move {
                ([(header::CONTENT_TYPE, "application/json")], page.body())
            }),
        );
    }
    router
        .route("/", get(index))
        .route("/graphql", get(graphql_get).post(graphql_post))
        .route("/graphql/ws", get(graphql_ws))
        .route("/graphiql", get(graphiql::page))
        .route("/graphiql/assets/{file}", get(graphiql::asset))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(metrics_beside(&state.ops))
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
        .layer(middleware::from_fn_with_state(state.clone(), cors::guard))
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
/// (DNS rebinding) is refused. Which pages may call is [`cors::guard`]'s
/// rule, for dev mode as for tokens.
async fn loopback_guard(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    let host_ok = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .is_none_or(is_loopback);
    if state.loopback_only && !host_ok {
        return http_error(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            "dev mode answers requests from this machine only (a loopback host)",
        );
    }
    next.run(request).await
}

/// A GraphQL-shaped error outside of GraphQL execution (bad body, bad method).
fn http_error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({ "errors": [{ "message": message.into(), "extensions": { "code": code } }] });
    (status, Json(body)).into_response()
}

/// Who pays for a request's operations: the token's tenant and `sub`, or
/// without a valid token, and in dev mode (where anyone may claim any
/// identity), the client's address, an IPv6 /64 counting as one as it does
/// for connections (a host holds a whole /64); at the rate of their highest
/// role.
fn caller(state: &HttpState, identity: &Identity, peer: Option<&str>) -> Caller {
    let anonymous = || match peer.and_then(|peer| peer.parse().ok()) {
        Some(ip) => gate::ClientKey::of(ip).to_string(),
        None => peer.unwrap_or("unknown").to_owned(),
    };
    match identity {
        Identity::Viewer(viewer) => Caller {
            key: if state.auth.is_dev() {
                anonymous()
            } else {
                format!("{}\u{1f}{}", viewer.tenant, viewer.user)
            },
            role: viewer.roles.iter().max().copied().unwrap_or(Role::User),
        },
        _ => Caller {
            key: anonymous(),
            role: Role::User,
        },
    }
}

/// The client's address, when the server knows it.
fn peer_of(request: &Request) -> Option<String> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip().to_string())
}

/// The type of the operation a request runs, if its document parses and
/// names it.
fn operation_type(request: &async_graphql::Request) -> Option<OperationType> {
    let document = async_graphql::parser::parse_query(&request.query).ok()?;
    let wanted = request.operation_name.as_deref();
    document
        .operations
        .iter()
        .find(|(name, _)| wanted.is_none_or(|w| name.is_some_and(|n| n.as_str() == w)))
        .map(|(_, op)| op.node.ty)
}

/// How a request is answered: as a stream, or as one response of a media
/// type. `Err` is a 406.
#[allow(clippy::result_large_err)]
fn answer_as(headers: &HeaderMap) -> Result<(Option<stream::Streaming>, respond::Media), Response> {
    let streaming = stream::requested(headers);
    match respond::negotiate(headers) {
        Ok(media) => Ok((streaming, media)),
        // A stream's own errors go as JSON.
        Err(_) if streaming.is_some() => Ok((streaming, respond::Media::Json)),
        Err(refused) => Err(refused),
    }
}

/// Runs one request from a transport: as a stream when one was asked for
/// (an event stream for any operation; multipart for subscriptions), else
/// as one response.
async fn run(
    state: &HttpState,
    headers: &HeaderMap,
    peer: Option<&str>,
    (streaming, media): (Option<stream::Streaming>, respond::Media),
    request: async_graphql::Request,
) -> Response {
    let identity = state.auth.from_headers(headers);
    let caller = caller(state, &identity, peer);
    let request = request
        .data(Session::new(identity, &state.app))
        .data(caller);
    let streamed = match streaming {
        Some(stream::Streaming::EventStream) => streaming,
        Some(stream::Streaming::Multipart)
            if operation_type(&request) == Some(OperationType::Subscription) =>
        {
            streaming
        }
        _ => None,
    };
    match streamed {
        Some(streaming) => stream::respond(state, streaming, request).await,
        None => {
            // Only a single response is written from a plan's JSON: a
            // stream's events are async-graphql's.
            let slot = api::plan::Slot::default();
            let response = state.schema.execute(request.data(slot.clone())).await;
            respond::answer(media, response, slot.take())
        }
    }
}

/// A request with nothing to run: a malformed one is a 400 whatever the
/// media type (the body is not a GraphQL request), an overlong document a
/// 413; the others (a persisted
/// operation not found or not trusted) are GraphQL responses with their code.
fn refusal(media: respond::Media, refused: &persisted::Refused) -> Response {
    let status = match refused.code {
        "BAD_REQUEST" => StatusCode::BAD_REQUEST,
        "PAYLOAD_TOO_LARGE" => StatusCode::PAYLOAD_TOO_LARGE,
        _ => return respond::single(media, refused.response()),
    };
    http_error(status, refused.code, refused.message.clone())
}

fn not_a_request(detail: impl std::fmt::Display) -> Response {
    http_error(
        StatusCode::BAD_REQUEST,
        "BAD_REQUEST",
        format!("the body is not a GraphQL request ({detail}): send JSON with a `query` string"),
    )
}

async fn graphql_post(
    State(state): State<HttpState>,
    headers: HeaderMap,
    request: Request,
) -> Response {
    let answer = match answer_as(&headers) {
        Ok(answer) => answer,
        Err(refused) => return refused,
    };
    let peer = peer_of(&request);
    let bytes = match axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(err) if listen::timed_out(&err) => {
            return http_error(
                StatusCode::REQUEST_TIMEOUT,
                "REQUEST_TIMEOUT",
                "the request body did not arrive within the server's body timeout",
            )
        }
        Err(_) => {
            return http_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                format!("request body is larger than {MAX_BODY_BYTES} bytes"),
            )
        }
    };
    let key = match idempotency::key_of(&headers) {
        Ok(key) => key,
        Err(refused) => return refused,
    };
    // A request named by a key runs once per caller and key; a stream is
    // not kept, nor is a request without a caller.
    let viewer = match state.auth.from_headers(&headers) {
        Identity::Viewer(viewer) if answer.0.is_none() => Some(viewer),
        _ => None,
    };
    if let (Some(key), Some(viewer)) = (key, viewer) {
        let keyed = idempotency::Keyed {
            store: state.app.store.clone(),
            clock: state.app.clock.clone(),
            tenant: viewer.tenant,
            user: viewer.user,
            key,
            body: bytes.clone(),
            ttl: state.app.idempotency_ttl,
            liveness: state.liveness.clone(),
        };
        let peer = peer.as_deref();
        let run = |minter| answer_body(&state, &headers, peer, answer, bytes, minter);
        return keyed.once(run).await;
    }
    let minter = Minter::default();
    answer_body(&state, &headers, peer.as_deref(), answer, bytes, minter).await
}

/// Answers the body of a `POST /graphql`: one request or a batch.
async fn answer_body(
    state: &HttpState,
    headers: &HeaderMap,
    peer: Option<&str>,
    answer: (Option<stream::Streaming>, respond::Media),
    bytes: axum::body::Bytes,
    minter: Minter,
) -> Response {
    if bytes.is_empty() {
        return not_a_request("it is empty");
    }
    let raw: Value = match serde_json::from_slice(&bytes) {
        Ok(raw) => raw,
        Err(err) => return not_a_request(format!("not JSON: {err}")),
    };
    let items = match raw {
        Value::Array(items) => items,
        single => {
            return match state.persisted.request(single) {
                Ok(request) => run(state, headers, peer, answer, request.data(minter)).await,
                Err(refused) => refusal(answer.1, &refused),
            }
        }
    };
    // A batch: several operations in one body, each with its own session
    // (and loaders), answered together.
    if answer.0.is_some() {
        return not_a_request("a batch cannot be streamed");
    }
    if items.is_empty() || items.len() > api::MAX_BATCH {
        return http_error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
            format!(
                "a batch holds 1 to {} operations, this one {}",
                api::MAX_BATCH,
                items.len()
            ),
        );
    }
    let identity = state.auth.from_headers(headers);
    let caller = caller(state, &identity, peer);
    let mut responses = Vec::with_capacity(items.len());
    for raw in items {
        let response = match state.persisted.request(raw) {
            Ok(request) => {
                let slot = api::plan::Slot::default();
                let request = request
                    .data(Session::new(identity.clone(), &state.app))
                    .data(minter.clone())
                    .data(caller.clone())
                    .data(slot.clone());
                (state.schema.execute(request).await, slot.take())
            }
            Err(refused) => (refused.response(), None),
        };
        responses.push(response);
    }
    respond::batch(answer.1, responses)
}

async fn graphql_get(
    State(state): State<HttpState>,
    headers: HeaderMap,
    request: Request,
) -> Response {
    let Some(query) = request.uri().query() else {
        return axum::response::Redirect::temporary("/graphiql").into_response();
    };
    let answer = match answer_as(&headers) {
        Ok(answer) => answer,
        Err(refused) => return refused,
    };
    let raw = match persisted::from_query_string(query) {
        Ok(raw) => raw,
        Err(refused) => return refusal(answer.1, &refused),
    };
    let graphql = match state.persisted.request(raw) {
        Ok(graphql) => graphql,
        Err(refused) => return refusal(answer.1, &refused),
    };
    // Mutations change state: they must not ride on GET, which links and
    // prefetchers send freely.
    if operation_type(&graphql) == Some(OperationType::Mutation) {
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
    let peer = peer_of(&request);
    run(&state, &headers, peer.as_deref(), answer, graphql).await
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
    headers: HeaderMap,
    peer: Result<ConnectInfo<SocketAddr>, ExtensionRejection>,
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
    let offered = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim().eq_ignore_ascii_case(ws::PROTOCOL));
    if !offered {
        return http_error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
            format!("websocket subscriptions speak the {} subprotocol: offer it in Sec-WebSocket-Protocol", ws::PROTOCOL),
        );
    }
    // Not a live connection yet: until its `connection_init` is accepted it
    // holds a place among the pending upgrades, bounded per address.
    let ip = peer
        .as_ref()
        .map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |info| info.0.ip());
    let pending = match state.pending.admit(ip) {
        Ok(ticket) => ticket,
        Err(full) => {
            let message = match full {
                gate::Full::Total => format!(
                    "this server holds at most {} websockets awaiting connection_init; \
                     try again later",
                    state.pending.total()
                ),
                gate::Full::Address => format!(
                    "one address may hold at most {} websockets awaiting connection_init; \
                     send connection_init on those open, or try again later",
                    state.pending.per_address()
                ),
            };
            return http_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "TOO_MANY_CONNECTIONS",
                message,
            );
        }
    };
    let peer = peer.ok().map(|info| info.0.ip().to_string());
    let tracker = state.tracker.clone();
    upgrade
        .protocols([ws::PROTOCOL])
        // A websocket message is a request: the same bound as an HTTP body.
        .max_message_size(MAX_BODY_BYTES)
        .max_frame_size(MAX_BODY_BYTES)
        // A subscriber mostly idles and its messages are small: a 1 KiB read
        // buffer (it grows for a larger message) instead of the default
        // 128 KiB, which each idle connection would otherwise hold resident.
        .read_buffer_size(1024)
        .on_upgrade(move |socket| {
            tracker.track_future(async move {
                ws::serve(socket, state, peer, pending).await;
            })
        })
}

async fn index() -> Html<&'static str> {
    Html(include_str!("index.html"))
}

/// The web demo's page. Its policy lets it load its own files and talk to
/// this server only (the websocket included), and nothing else.
/// The demo's page, carrying the descriptor selection for the types the
/// server serves (its fragments are built from it, not from a fixed list).
async fn demo_page(State(state): State<HttpState>) -> Response {
    (
        [
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                 connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            ),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Html(include_str!("../../web-demo/index.html").replace(
            "{{descriptor_selection}}",
            &graphiql::attribute(&state.app.descriptors.selection()),
        )),
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
