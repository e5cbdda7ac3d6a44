//! Shared helpers: a real server on 127.0.0.1:0 over a temporary data directory,
//! a GraphQL-over-HTTP client, and a websocket client speaking graphql-transport-ws.

use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use riverfeed::model::ObjectId;
use riverfeed::server::{self, ServeOptions, Server};
use riverfeed::store::mongo::{MongoSettings, MongoStore, TimelineLayout};
use riverfeed::store::StoreSettings;
use riverfeed::timeline::{FeedModel, FeedModelKind};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A feed-events subscription with the fields most tests check.
pub const FEED_EVENTS: &str =
    "subscription { feedEvents { kind item { actionId cursor reason { kind actorId } action { actionId actorId } } } }";

/// How long a test waits for something that should happen promptly (a fan-out,
/// an event) before it fails. Waits end as soon as the condition holds.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// How long a fan-out may take at the most: a fan-out that fails on a
/// transient store error (the test wire server's write conflicts under the
/// load of a whole run) is tried again a few times and, past those, taken
/// over when its lease (30 s by default) runs out. Waits end as soon as it
/// is done.
pub const DELIVERY_PATIENCE: Duration = Duration::from_secs(45);

/// Where the tests' manual clocks start: 2096-10-02, later than any real
/// now. MongoDB's TTL monitor deletes on the real clock (an expired action
/// a day after its expiry, a live event an hour after it was logged), so a
/// test whose clock lay in the real past would race it: its records could
/// vanish in the middle of the test, whenever the monitor's minute came.
pub const CLOCK_START: i64 = 4_000_000_000_000;

/// `millis` as the API writes a time (RFC 3339).
pub fn iso(millis: i64) -> String {
    chrono::DateTime::from_timestamp_millis(millis)
        .expect("a time")
        .to_rfc3339()
}

/// Which store a test runs on.
#[derive(Clone, Copy, Debug)]
pub enum Backend {
    Embedded,
    /// MongoDB, in a database named after the test.
    Mongo(&'static str),
}

/// Runs async test functions `name(backend)` once per backend, as
/// `embedded::name` and `mongodb::name`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        mod embedded {
            $(#[tokio::test]
            async fn $name() {
                super::$name($crate::common::Backend::Embedded).await
            })+
        }
        mod mongodb {
            $(#[tokio::test]
            async fn $name() {
                super::$name($crate::common::Backend::Mongo(stringify!($name))).await
            })+
        }
    };
}

tokio::task_local! {
    /// The feed model servers of this test run under, set by
    /// [`under_other_models!`]; ahead of `RIVERFEED_TEST_FEED_MODEL`.
    pub static FEED_MODEL: FeedModelKind;
}

/// Runs async test functions `name(backend)` under each feed model but the
/// default (rivers), on the embedded store, as `push::name`, `pull::name`,
/// `hybrid::name`: the tests whose proof depends on the model and that the
/// cross-model test (`models::`) cannot make, such as what a live reader is
/// told. A model is written once above the storage port, so one backend
/// proves it; MongoDB is held to the same port by the conformance suite
/// (`store_suite::`) and runs every model in `models::mongodb`. Settings as
/// [`test_feed_model`]'s.
#[macro_export]
macro_rules! under_other_models {
    ($($name:ident),+ $(,)?) => {
        $crate::under_other_models!(@model push, Push, $($name),+);
        $crate::under_other_models!(@model pull, Pull, $($name),+);
        $crate::under_other_models!(@model hybrid, Hybrid, $($name),+);
    };
    (@model $module:ident, $kind:ident, $($name:ident),+) => {
        mod $module {
            $(#[tokio::test]
            async fn $name() {
                $crate::common::FEED_MODEL
                    .scope(
                        riverfeed::timeline::FeedModelKind::$kind,
                        super::$name($crate::common::Backend::Embedded),
                    )
                    .await
            })+
        }
    };
}

/// The MongoDB server tests use: `MONGODB_URI`. Without it the MongoDB tests
/// are skipped, loudly, except where MongoDB is required (`CI`, or
/// `RIVERFEED_REQUIRE_MONGODB`, which the test command sets): there a missing
/// server fails the test.
pub fn mongodb_uri() -> Option<String> {
    match std::env::var("MONGODB_URI") {
        Ok(uri) if !uri.is_empty() => Some(uri),
        _ => {
            let required = std::env::var_os("CI").is_some()
                || std::env::var_os("RIVERFEED_REQUIRE_MONGODB").is_some();
            assert!(
                !required,
                "MongoDB is required here but MONGODB_URI is not set: run the tests with tests/run"
            );
            eprintln!("SKIPPED: MONGODB_URI is not set; run tests/run to test the MongoDB backend");
            None
        }
    }
}

/// `base` with its database replaced by a fresh one named after `test`.
///
/// The driver checks the server every so often and, when a check gets no
/// answer within `connectTimeoutMS` (10 s by default), drops every
/// connection to it, failing the commands under way. The test wire server
/// answers on one thread, and one large command (a fan-out to thousands of
/// readers on sized buckets, while other tests write) can hold it longer
/// than that: unless the URI says otherwise, the checks wait 60 s.
pub fn mongodb_database_uri(base: &str, test: &str) -> String {
    let (head, query) = match base.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (base, None),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let hosts_end = head[scheme_end..]
        .find('/')
        .map_or(head.len(), |i| scheme_end + i);
    let suffix = ObjectId::new().to_hex();
    let name: String = test.chars().take(40).collect();
    let database = format!("rf_{name}_{}", &suffix[16..]);
    let patience = "connectTimeoutMS=60000";
    match query {
        Some(query) if query.to_ascii_lowercase().contains("connecttimeoutms=") => {
            format!("{}/{database}?{query}", &head[..hosts_end])
        }
        Some(query) => format!("{}/{database}?{query}&{patience}", &head[..hosts_end]),
        None => format!("{}/{database}?{patience}", &head[..hosts_end]),
    }
}

/// A store URL for a test: a fresh temporary directory, or a fresh MongoDB
/// database. `None` when MongoDB is wanted but not available (and not required).
pub fn store_url(backend: Backend) -> Option<(String, Option<TempDir>)> {
    match backend {
        Backend::Embedded => {
            let dir = tempfile::tempdir().expect("tempdir");
            Some((format!("embedded:{}", dir.path().display()), Some(dir)))
        }
        Backend::Mongo(test) => mongodb_uri().map(|base| (mongodb_database_uri(&base, test), None)),
    }
}

/// The feed model servers run under: the one [`under_other_models!`] set,
/// else `RIVERFEED_TEST_FEED_MODEL` (`push`, `pull`, `rivers` or `hybrid`,
/// for a rerun of any tests by hand). `None` when neither says: servers run
/// the default model, `rivers`, at its default sizes. A model named here has
/// small rivers and common celebrities, so reads cross from rivers to
/// sources and actions are merged at read. A server started with a model of
/// its own keeps it.
pub fn test_feed_model() -> Option<FeedModel> {
    let kind = match FEED_MODEL.try_with(|kind| *kind) {
        Ok(kind) => kind,
        Err(_) => {
            let name = std::env::var("RIVERFEED_TEST_FEED_MODEL").ok()?;
            FeedModelKind::ALL
                .into_iter()
                .find(|k| k.name() == name)
                .unwrap_or_else(|| panic!("RIVERFEED_TEST_FEED_MODEL: no model {name:?}"))
        }
    };
    Some(FeedModel {
        river_size: 3,
        celebrity_threshold: 1,
        ..FeedModel::of(kind)
    })
}

/// How MongoDB keeps timelines in tests: `RIVERFEED_TEST_TIMELINE_LAYOUT`
/// (`items`, `time_buckets` or `sized_buckets`; items when unset), with
/// copies of actions if `RIVERFEED_TEST_EMBED_ACTIONS=1`. Sized buckets are
/// small, so a few deliveries fill one.
pub fn test_store_settings() -> StoreSettings {
    let mut settings = StoreSettings::default();
    if let Ok(name) = std::env::var("RIVERFEED_TEST_TIMELINE_LAYOUT") {
        settings.mongo.layout = Some(
            TimelineLayout::ALL
                .into_iter()
                .find(|l| l.name() == name)
                .unwrap_or_else(|| panic!("RIVERFEED_TEST_TIMELINE_LAYOUT: no layout {name:?}")),
        );
        settings.mongo.bucket_size = 3;
    }
    settings.mongo.embed_actions =
        std::env::var("RIVERFEED_TEST_EMBED_ACTIONS").is_ok_and(|v| v == "1");
    settings
}

pub struct TestServer {
    pub server: Server,
    pub store: String,
    dir: Option<TempDir>,
    pub base: String,
}

/// What a stopped server leaves: its store, to start again on.
pub struct Stopped {
    pub store: String,
    pub dir: Option<TempDir>,
}

impl TestServer {
    /// A server on a fresh store of `backend`; `None` if that backend is not
    /// available here (the test then returns early, having said why).
    pub async fn start(backend: Backend) -> Option<Self> {
        let (store, dir) = store_url(backend)?;
        Some(Self::start_on(Stopped { store, dir }).await)
    }

    pub async fn start_on(stopped: Stopped) -> Self {
        Self::start_with(stopped, ServeOptions::new).await
    }

    /// As `start_on`, with options adjusted by `options` (given the store URL).
    pub async fn start_with(
        stopped: Stopped,
        options: impl FnOnce(String) -> ServeOptions,
    ) -> Self {
        show_server_logs();
        let mut options = options(stopped.store.clone());
        if options.store_settings.mongo == MongoSettings::default() {
            options.store_settings.mongo = test_store_settings().mongo;
        }
        if let Some(model) = test_feed_model() {
            if options.model == FeedModel::default() {
                options.model = model;
            }
        }
        let server = server::start(options).await.expect("server starts");
        Self::from_parts(server, stopped)
    }

    /// A server started by hand on `stopped`'s store.
    pub fn from_parts(server: Server, stopped: Stopped) -> Self {
        let base = format!("http://{}", server.addr);
        Self {
            server,
            store: stopped.store,
            dir: stopped.dir,
            base,
        }
    }

    /// Stops the server, keeping its data to start again on.
    pub async fn stop_keeping_data(self) -> Stopped {
        self.server.stop().await.expect("server stops cleanly");
        Stopped {
            store: self.store,
            dir: self.dir,
        }
    }

    /// Stops the server and drops its data.
    pub async fn stop(self) {
        let stopped = self.stop_keeping_data().await;
        if stopped.store.starts_with("mongodb") {
            let store = MongoStore::connect(&stopped.store, &test_store_settings().mongo)
                .await
                .expect("reconnect to drop the test database");
            drop_database(store.database()).await;
        }
    }

    pub fn client(&self, tenant: &str, user: &str) -> Client {
        self.client_with(Some((tenant, user, None)))
    }

    /// The application's backend (dev mode: the `service` role by header).
    pub fn service(&self, tenant: &str) -> Client {
        self.client_with(Some((tenant, "app-backend", Some("service"))))
    }

    pub fn anonymous(&self) -> Client {
        self.client_with(None)
    }

    /// A client with dev-mode identity: tenant, user and optional roles.
    pub fn client_with(&self, identity: Option<(&str, &str, Option<&str>)>) -> Client {
        Client::at(&self.base, identity)
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/graphql/ws", self.server.addr)
    }

    /// One counter of `/metrics`.
    pub async fn metric(&self, name: &str) -> u64 {
        metric_at(&self.base, name).await as u64
    }

    /// A counter of `/metrics`, 0 while it was never counted.
    pub async fn counter(&self, name: &str) -> u64 {
        sample_at(&self.base, name).await.1.unwrap_or(0.0) as u64
    }

    pub async fn store_calls(&self, op: &str) -> u64 {
        self.metric(&format!("riverfeed_store_calls_total{{op=\"{op}\"}}"))
            .await
    }

    /// Waits until the rivers this server's reads asked for are built (none
    /// queued or under way): a first read under rivers builds its reader's
    /// river off the read's path.
    pub async fn rivers_settled(&self) {
        tokio::time::timeout(PATIENCE, self.server.river_builds.settled())
            .await
            .expect("the rivers asked for are built in time");
    }

    /// Waits until `n` topics (feeds, slices, actions) have a live subscription.
    pub async fn wait_live_topics(&self, n: u64) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while self.metric("riverfeed_live_topics").await < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{n} live topics never showed up"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

pub struct Client {
    http: reqwest::Client,
    url: String,
    /// Identity headers sent with every request.
    pub headers: reqwest::header::HeaderMap,
}

impl Client {
    /// A client of the server at `base` (`http://host:port`), with dev-mode
    /// identity: tenant, user and optional roles.
    pub fn at(base: &str, identity: Option<(&str, &str, Option<&str>)>) -> Client {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some((tenant, user, roles)) = identity {
            headers.insert("x-riverfeed-tenant", tenant.parse().expect("header"));
            headers.insert("x-riverfeed-user", user.parse().expect("header"));
            if let Some(roles) = roles {
                headers.insert("x-riverfeed-roles", roles.parse().expect("header"));
            }
        }
        Client {
            http: reqwest::Client::new(),
            url: format!("{base}/graphql"),
            headers,
        }
    }

    /// Another client with the same identity.
    pub fn clone_headers(&self) -> Client {
        Client {
            http: self.http.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
        }
    }

    /// Posts a GraphQL request and returns the whole response body.
    pub async fn post(&self, query: &str, variables: Value) -> Value {
        self.try_post(query, variables)
            .await
            .expect("request sent and answered with JSON")
    }

    /// As [`Client::post`], for a server that may be down: `None` when the
    /// request could not be sent or answered.
    pub async fn try_post(&self, query: &str, variables: Value) -> Option<Value> {
        let response = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .json(&json!({ "query": query, "variables": variables }))
            .send()
            .await
            .ok()?;
        response.json().await.ok()
    }

    /// The `data` of a request that must succeed.
    pub async fn data(&self, query: &str, variables: Value) -> Value {
        let body = self.post(query, variables).await;
        assert!(
            body.get("errors").is_none(),
            "unexpected errors for {query}: {body:#}"
        );
        body["data"].clone()
    }

    /// The `extensions.code` of the first error of a request that must fail.
    pub async fn error_code(&self, query: &str, variables: Value) -> String {
        let body = self.post(query, variables).await;
        first_error_code(&body).unwrap_or_else(|| panic!("expected an error for {query}: {body:#}"))
    }

    pub async fn upsert_user(&self, id: &str, name: &str) {
        self.data(
            "mutation($id: ID!, $name: String!) { upsertUser(input: {userId: $id, name: $name}) { id } }",
            json!({ "id": id, "name": name }),
        )
        .await;
    }

    pub async fn follow(&self, user: &str) {
        let data = self
            .data(
                "mutation($u: ID!) { follow(userId: $u) }",
                json!({ "u": user }),
            )
            .await;
        assert_eq!(data["follow"], true);
    }

    /// Puts `user` in a group (a `service` client's call).
    pub async fn add_member(&self, group: &str, kind: &str, user: &str) {
        self.data(
            "mutation($g: ID!, $k: GroupKind!, $u: ID) { joinGroup(groupId: $g, kind: $k, userId: $u) { groupId } }",
            json!({ "g": group, "k": kind, "u": user }),
        )
        .await;
    }

    /// Records a status post and returns the action id.
    pub async fn post_status(&self, text: &str, extra: Value) -> String {
        let mut input = json!({ "descriptor": { "statusPost": { "text": text } } });
        if let (Some(input), Some(extra)) = (input.as_object_mut(), extra.as_object()) {
            input.extend(extra.clone());
        }
        let data = self
            .data(
                "mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId } }",
                json!({ "input": input }),
            )
            .await;
        data["recordAction"]["actionId"]
            .as_str()
            .expect("action id")
            .to_owned()
    }

    /// Waits until the fan-out of one of this user's actions is done.
    pub async fn wait_delivered(&self, action_id: &str) {
        let deadline = tokio::time::Instant::now() + DELIVERY_PATIENCE;
        loop {
            let data = self
                .data(
                    "query($id: ID!) { action(actionId: $id) { fanOut { state } } }",
                    json!({ "id": action_id }),
                )
                .await;
            if data["action"]["fanOut"]["state"] == "DONE" {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "action {action_id} was never delivered: {data}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Action ids of a feed page, newest first, and the page's end cursor.
    pub async fn feed_ids(&self, args: &str) -> (Vec<String>, Value) {
        let data = self
            .data(
                &format!(
                    "{{ feed{args} {{ edges {{ cursor node {{ actionId action {{ actionId }} }} }} pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }} }} }}"
                ),
                json!({}),
            )
            .await;
        let ids = data["feed"]["edges"]
            .as_array()
            .expect("edges")
            .iter()
            .map(|e| e["node"]["actionId"].as_str().expect("id").to_owned())
            .collect();
        (ids, data["feed"]["pageInfo"].clone())
    }
}

pub fn first_error_code(body: &Value) -> Option<String> {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .map(str::to_owned)
}

/// A websocket GraphQL client (graphql-transport-ws).
pub struct WsClient {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl WsClient {
    /// Connects, sends `connection_init` with `payload` and waits for the
    /// server's `connection_ack`.
    pub async fn connect(url: &str, payload: Value) -> Self {
        Self::open(url).await.init(payload).await
    }

    /// Opens a connection and sends nothing.
    pub async fn open(url: &str) -> Self {
        Self::open_from(url, None).await
    }

    /// As [`WsClient::connect`], from the local address `from` (another
    /// client to the server, as `127.0.0.2` is on loopback).
    pub async fn connect_from(url: &str, from: std::net::IpAddr, payload: Value) -> Self {
        Self::open_from(url, Some(from)).await.init(payload).await
    }

    /// Sends `connection_init` with `payload` and waits for the ack.
    pub async fn init(mut self, payload: Value) -> Self {
        self.send(json!({ "type": "connection_init", "payload": payload }))
            .await;
        let ack = self.next().await.expect("connection_ack");
        assert_eq!(ack["type"], "connection_ack", "{ack}");
        self
    }

    async fn open_from(url: &str, from: Option<std::net::IpAddr>) -> Self {
        Self::try_open_from(url, from)
            .await
            .expect("websocket connects")
    }

    /// Opens a connection (from the local address `from`, if given) and
    /// sends nothing; the error when the server refused the upgrade.
    pub async fn try_open_from(
        url: &str,
        from: Option<std::net::IpAddr>,
    ) -> Result<Self, tokio_tungstenite::tungstenite::Error> {
        let mut request = url.into_client_request().expect("ws request");
        let protocol = "graphql-transport-ws";
        request
            .headers_mut()
            .insert("sec-websocket-protocol", protocol.parse().expect("header"));
        let uri = request.uri();
        let server: std::net::SocketAddr = format!(
            "{}:{}",
            uri.host().expect("host"),
            uri.port_u16().expect("port")
        )
        .parse()
        .expect("an IP server address");
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        if let Some(from) = from {
            socket
                .bind((from, 0).into())
                .expect("bind the local address");
        }
        let stream = socket.connect(server).await.expect("connects");
        let (socket, response) =
            tokio_tungstenite::client_async(request, MaybeTlsStream::Plain(stream)).await?;
        assert_eq!(
            response.headers()["sec-websocket-protocol"],
            protocol,
            "server picked the asked subprotocol"
        );
        Ok(Self { socket })
    }

    /// Connects and sends `connection_init` with `payload`, expecting the
    /// server to refuse it: returns the close it answered with.
    pub async fn refused(url: &str, payload: Value) -> Value {
        let mut request = url.into_client_request().expect("ws request");
        request.headers_mut().insert(
            "sec-websocket-protocol",
            "graphql-transport-ws".parse().expect("header"),
        );
        let (socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .expect("websocket connects");
        let mut client = Self { socket };
        client
            .send(json!({ "type": "connection_init", "payload": payload }))
            .await;
        let answer = client.next().await.expect("an answer");
        assert_eq!(answer["type"], "__closed", "refused with a close: {answer}");
        answer
    }

    pub async fn as_user(url: &str, tenant: &str, user: &str) -> Self {
        Self::connect(
            url,
            json!({ "x-riverfeed-tenant": tenant, "x-riverfeed-user": user }),
        )
        .await
    }

    pub async fn send(&mut self, message: Value) {
        self.socket
            .send(Message::Text(message.to_string().into()))
            .await
            .expect("ws send");
    }

    pub async fn subscribe_with(&mut self, id: &str, query: &str, variables: Value) {
        let payload = json!({ "query": query, "variables": variables });
        self.send(json!({ "id": id, "type": "subscribe", "payload": payload }))
            .await;
    }

    pub async fn subscribe(&mut self, id: &str, query: &str) {
        self.send(json!({ "id": id, "type": "subscribe", "payload": { "query": query } }))
            .await;
    }

    /// The next protocol message (pings and pongs skipped); `None` when the
    /// server closed the connection.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            let value = self.next_any().await?;
            if matches!(value["type"].as_str(), Some("ping" | "pong")) {
                continue;
            }
            return Some(value);
        }
    }

    /// The next protocol message, pings and pongs included; a close comes as
    /// `{"type": "__closed", "code", "reason"}`.
    pub async fn next_any(&mut self) -> Option<Value> {
        loop {
            let message = tokio::time::timeout(PATIENCE, self.socket.next())
                .await
                .expect("a websocket message in time")?;
            match message.ok()? {
                Message::Text(text) => {
                    return Some(serde_json::from_str(&text).expect("JSON message"));
                }
                Message::Close(frame) => {
                    return Some(json!({
                        "type": "__closed",
                        "code": frame.as_ref().map(|f| u16::from(f.code)),
                        "reason": frame.as_ref().map(|f| f.reason.to_string()),
                    }))
                }
                _ => continue,
            }
        }
    }

    /// The subscription id of the next `next` message.
    pub async fn next_payload_id(&mut self) -> String {
        let message = self.next().await.expect("a message");
        assert_eq!(message["type"], "next", "{message}");
        message["id"].as_str().expect("id").to_owned()
    }

    /// The payload of the next `next` / `data` message.
    pub async fn next_payload(&mut self) -> Value {
        let message = self.next().await.expect("a message");
        assert_eq!(message["type"], "next", "{message}");
        message["payload"].clone()
    }
}

/// A store opened directly (no server), on a fresh directory or database.
pub struct TestStore {
    pub store: std::sync::Arc<dyn riverfeed::store::Store>,
    mongo: Option<MongoStore>,
    _dir: Option<TempDir>,
}

impl TestStore {
    pub async fn open(backend: Backend) -> Option<Self> {
        Self::open_as(backend, &test_store_settings()).await
    }

    /// As [`TestStore::open`], with the backends' settings.
    pub async fn open_as(backend: Backend, settings: &StoreSettings) -> Option<Self> {
        let (url, dir) = store_url(backend)?;
        let store = riverfeed::store::open_with(&url, settings)
            .await
            .expect("store opens");
        let mongo = if url.starts_with("mongodb") {
            Some(
                MongoStore::connect(&url, &settings.mongo)
                    .await
                    .expect("second handle"),
            )
        } else {
            None
        };
        Some(Self {
            store,
            mongo,
            _dir: dir,
        })
    }

    /// The MongoDB database, to look at documents as a layout lays them.
    pub fn database(&self) -> Option<mongodb::Database> {
        self.mongo.as_ref().map(|m| m.database().clone())
    }

    /// Drops the MongoDB database (a directory goes by itself).
    pub async fn remove(self) {
        if let Some(mongo) = self.mongo {
            drop_database(mongo.database()).await;
        }
    }
}

/// Drops a test database. The wire server under test now and then closes
/// the connection of a drop while other tests write (a storage-engine
/// conflict it reports in its log); the drop is tried again on a new
/// connection a few times before the test fails.
pub async fn drop_database(db: &mongodb::Database) {
    let mut tries = 0;
    loop {
        match db.drop().await {
            Ok(()) => return,
            Err(err) if tries < 4 && matches!(*err.kind, mongodb::error::ErrorKind::Io(_)) => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(250 * tries)).await;
            }
            Err(err) => panic!("drop test database: {err}"),
        }
    }
}

/// One sample of the `/metrics` of the server at `base`.
pub async fn metric_at(base: &str, name: &str) -> f64 {
    let (text, sample) = sample_at(base, name).await;
    sample.unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
}

/// The `/metrics` text of the server at `base`, and its sample `name` if
/// it has one.
async fn sample_at(base: &str, name: &str) -> (String, Option<f64>) {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body");
    let sample = text.lines().find_map(|line| {
        let (key, value) = line.rsplit_once(' ')?;
        (key == name).then(|| value.parse().expect("numeric metric"))
    });
    (text, sample)
}

/// With `RUST_LOG` set, the servers' logs go with each test's output (shown
/// for a test that fails): how to see why a server under test misbehaved.
fn show_server_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var("RUST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
    });
}

/// A loopback port free when asked (bound and released).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// A wire server of the test's own, on disk so that a restart keeps its data.
pub struct OwnMongo {
    program: String,
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl OwnMongo {
    /// `None` where no SecantusDB binary is available (only outside tests/run).
    pub fn new() -> Option<Self> {
        let program = match std::env::var("RIVERFEED_TEST_SECANTUSD") {
            Ok(program) => program,
            Err(_) => {
                assert!(
                    std::env::var_os("CI").is_none()
                        && std::env::var_os("RIVERFEED_REQUIRE_MONGODB").is_none()
                        || std::env::var_os("MONGODB_URI").is_some(),
                    "RIVERFEED_TEST_SECANTUSD is not set: run the tests with tests/run"
                );
                eprintln!("SKIPPED: no SecantusDB binary to stop and restart (run tests/run)");
                return None;
            }
        };
        Some(Self {
            program,
            port: free_port(),
            dir: tempfile::tempdir().expect("tempdir"),
            child: None,
        })
    }

    pub async fn start(&mut self) {
        let child = Command::new(&self.program)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &self.port.to_string(),
                "--storage-path",
            ])
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("SecantusDB starts");
        self.child = Some(child);
        let deadline = Instant::now() + PATIENCE;
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "SecantusDB never listened");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the server the way an operator or a crash would: the process ends.
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                let _ = Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status()
                    .await;
            }
            let _ = tokio::time::timeout(PATIENCE, child.wait()).await;
            let _ = child.kill().await;
        }
    }

    pub fn uri(&self) -> String {
        self.uri_for("riverfeed_loss")
    }

    /// The URI of one database on this server.
    pub fn uri_for(&self, database: &str) -> String {
        format!(
            "mongodb://127.0.0.1:{}/{database}?serverSelectionTimeoutMS=1000",
            self.port
        )
    }
}

/// A fan-out job a test holds, as the worker holds one: its lease and its
/// action.
#[derive(Clone, Debug)]
pub struct HeldFanOut {
    pub lease: riverfeed::store::Lease,
    pub action: riverfeed::model::Action,
}

impl HeldFanOut {
    /// Claims up to `limit` fan-out jobs for `worker`, oldest action first,
    /// with their actions (a job whose action is gone is left out).
    pub async fn claim(
        store: &dyn riverfeed::store::Store,
        worker: &str,
        now: i64,
        lease_ms: i64,
        limit: usize,
    ) -> riverfeed::store::StoreResult<Vec<HeldFanOut>> {
        let leases = store
            .claim(
                riverfeed::store::JobKind::FanOut,
                worker,
                now,
                lease_ms,
                limit,
            )
            .await?;
        let mut held = Vec::new();
        for lease in leases {
            let id = riverfeed::store::FanOutJob::action_id(&lease.job)?;
            if let Some(action) = store.get_actions(&lease.job.tenant, &[id]).await?.pop() {
                held.push(HeldFanOut { lease, action });
            }
        }
        held.sort_by_key(|h| h.action.id);
        Ok(held)
    }

    /// A batch of this fan-out's deliveries.
    pub fn batch(
        &self,
        items: &[riverfeed::store::Delivery],
        last: bool,
    ) -> riverfeed::store::DeliveryBatch {
        riverfeed::store::DeliveryBatch {
            lease: self.lease.clone(),
            items: items.to_vec(),
            last,
        }
    }

    /// Writes one batch that is not the last (the lease renewed).
    pub async fn deliver(
        &self,
        store: &dyn riverfeed::store::Store,
        now: i64,
        items: &[riverfeed::store::Delivery],
    ) -> riverfeed::store::StoreResult<Vec<riverfeed::model::FeedItem>> {
        self.write(store, now, items, false).await
    }

    /// Writes the last batch (it may be empty): the fan-out is done.
    pub async fn finish(
        &self,
        store: &dyn riverfeed::store::Store,
        now: i64,
        items: &[riverfeed::store::Delivery],
    ) -> riverfeed::store::StoreResult<Vec<riverfeed::model::FeedItem>> {
        self.write(store, now, items, true).await
    }

    async fn write(
        &self,
        store: &dyn riverfeed::store::Store,
        now: i64,
        items: &[riverfeed::store::Delivery],
        last: bool,
    ) -> riverfeed::store::StoreResult<Vec<riverfeed::model::FeedItem>> {
        let mut results = store.deliver(now, &[self.batch(items, last)]).await?;
        results.pop().expect("one result per batch")
    }
}

/// A database of its own for a case that plants what an earlier release
/// wrote, with its URL; `None` without MongoDB.
pub async fn earlier_database(name: &str) -> Option<(String, ::mongodb::Database)> {
    let base = mongodb_uri()?;
    let url = mongodb_database_uri(&base, name);
    let client = ::mongodb::Client::with_uri_str(&url).await.expect("client");
    let db = client.default_database().expect("a database in the URI");
    Some((url, db))
}

/// Drops the case's database, then fails with what went wrong, if anything.
pub async fn concluded(db: &::mongodb::Database, result: anyhow::Result<()>) {
    drop_database(db).await;
    if let Err(err) = result {
        panic!("{err:#}");
    }
}
