//! Subscriptions over every transport: server-sent events (graphql-sse,
//! distinct connections), Apollo's multipart HTTP, and the websocket's
//! graphql-transport-ws conformance (its close codes and pings).

use std::time::Duration;

use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::common::{
    first_error_code, store_url, Backend, Stopped, TestServer, WsClient, FEED_EVENTS, PATIENCE,
};
use riverfeed::server::ServeOptions;

const MULTIPART_ACCEPT: &str =
    "multipart/mixed;boundary=\"graphql\";subscriptionSpec=1.0,application/json";

/// A streaming response read as it comes.
pub(crate) struct Streamed {
    response: reqwest::Response,
    buffer: String,
}

impl Streamed {
    pub(crate) async fn open(server: &TestServer, accept: &str, body: Value) -> Self {
        let response = open(server, accept, body).await;
        assert_eq!(response.status(), 200);
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// Reads until `done` finds what it waits for in the buffer, which it
    /// may consume; `None` when the stream ended first.
    async fn until<T>(&mut self, mut done: impl FnMut(&mut String) -> Option<T>) -> Option<T> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(found) = done(&mut self.buffer) {
                return Some(found);
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .expect("more of the stream in time")
                .expect("the stream reads");
            match chunk {
                Some(bytes) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                None => return done(&mut self.buffer),
            }
        }
    }

    /// The next server-sent event: its name and data (keep-alives skipped).
    async fn event(&mut self) -> Option<(String, Value)> {
        let (name, data) = self.raw_event().await?;
        Some((name, serde_json::from_str(&data).unwrap_or(Value::Null)))
    }

    /// The next server-sent event: its name and its data as written.
    pub(crate) async fn raw_event(&mut self) -> Option<(String, String)> {
        self.until(|buffer| loop {
            let end = buffer.find("\n\n")?;
            let block: String = buffer.drain(..end + 2).collect();
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event:") {
                    name = Some(value.trim().to_owned());
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push_str(value.trim());
                }
            }
            if let Some(name) = name {
                return Some((name, data));
            }
        })
        .await
    }

    /// The next multipart part's JSON (`{}` heartbeats included); `None`
    /// after the closing boundary.
    async fn part(&mut self) -> Option<Value> {
        const BOUNDARY: &str = "\r\n--graphql";
        self.until(|buffer| {
            let start = buffer.find(BOUNDARY)?;
            let rest = &buffer[start + BOUNDARY.len()..];
            if rest.starts_with("--") {
                buffer.clear();
                return Some(None);
            }
            let end = rest.find(BOUNDARY)?;
            let part = &rest[..end];
            let body = part
                .split_once("\r\n\r\n")
                .map(|(_, b)| b)
                .unwrap_or_default();
            let value = serde_json::from_str(body).expect("a JSON part");
            let consumed = start + BOUNDARY.len() + end;
            buffer.drain(..consumed);
            Some(Some(value))
        })
        .await
        .flatten()
    }
}

async fn open(server: &TestServer, accept: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .header("accept", accept)
        .header("content-type", "application/json")
        .header("x-riverfeed-tenant", "acme")
        .header("x-riverfeed-user", "alice")
        .body(body.to_string())
        .send()
        .await
        .expect("sent")
}

fn feed_events(after: Option<&str>) -> Value {
    match after {
        Some(cursor) => json!({
            "query": "subscription($after: String) { feedEvents(after: $after) { kind item { actionId } } }",
            "variables": { "after": cursor },
        }),
        None => json!({ "query": FEED_EVENTS }),
    }
}

async fn server() -> TestServer {
    TestServer::start(Backend::Embedded)
        .await
        .expect("the embedded store is always there")
}

#[tokio::test]
async fn an_event_stream_carries_a_subscription_and_resumes() {
    let server = server().await;
    let alice = server.client("acme", "alice");
    let mut live = Streamed::open(&server, "text/event-stream", feed_events(None)).await;
    assert_eq!(
        live.response.headers()["content-type"],
        "text/event-stream; charset=utf-8"
    );
    server.wait_live_topics(1).await;
    let id = alice
        .post_status("over server-sent events", json!({}))
        .await;
    let (name, data) = live.event().await.expect("an event");
    assert_eq!(name, "next");
    assert_eq!(data["data"]["feedEvents"]["item"]["actionId"], id.as_str());
    assert_eq!(data["data"]["feedEvents"]["kind"], "ADDED");

    // A page's eventsCursor resumes over a stream as over the websocket.
    let page = alice
        .data("{ feed(first: 1) { eventsCursor } }", json!({}))
        .await;
    let cursor = page["feed"]["eventsCursor"].as_str().expect("cursor");
    let missed = alice.post_status("while away", json!({})).await;
    alice.wait_delivered(&missed).await;
    let mut resumed = Streamed::open(&server, "text/event-stream", feed_events(Some(cursor))).await;
    loop {
        let (name, data) = resumed.event().await.expect("an event");
        assert_eq!(name, "next", "{data}");
        if data["data"]["feedEvents"]["item"]["actionId"] == missed.as_str() {
            break;
        }
    }

    // A query streams one result, then completes.
    let mut query = Streamed::open(
        &server,
        "text/event-stream",
        json!({ "query": "{ viewer { id } }" }),
    )
    .await;
    let (name, data) = query.event().await.expect("the result");
    assert_eq!(name, "next");
    assert!(data["data"]["viewer"]["id"].is_string(), "{data}");
    assert_eq!(query.event().await.expect("the end").0, "complete");

    // A request that does not validate says so in the stream.
    let mut invalid = Streamed::open(
        &server,
        "text/event-stream",
        json!({ "query": "subscription { noSuchField }" }),
    )
    .await;
    let (name, data) = invalid.event().await.expect("the errors");
    assert_eq!(name, "next");
    assert_eq!(
        first_error_code(&data).as_deref(),
        Some("GRAPHQL_VALIDATION_FAILED"),
        "{data}"
    );
    assert_eq!(invalid.event().await.expect("the end").0, "complete");

    // The server's shutdown ends the open streams.
    drop(resumed);
    let stopping = tokio::spawn(server.stop());
    let ended = live
        .until(|buffer| buffer.contains("event: complete").then_some(()))
        .await;
    assert!(ended.is_some(), "the stream completes at shutdown");
    stopping.await.expect("stopped");
}

#[tokio::test]
async fn multipart_carries_a_subscription() {
    let server = server().await;
    let alice = server.client("acme", "alice");
    let mut live = Streamed::open(&server, MULTIPART_ACCEPT, feed_events(None)).await;
    let content_type = live.response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("multipart/mixed;boundary=\"graphql\";subscriptionSpec="),
        "{content_type}"
    );
    server.wait_live_topics(1).await;
    let id = alice.post_status("over multipart", json!({})).await;
    let part = loop {
        let part = live.part().await.expect("a part");
        if part != json!({}) {
            break part;
        }
    };
    assert_eq!(
        part["payload"]["data"]["feedEvents"]["item"]["actionId"],
        id.as_str(),
        "{part}"
    );

    // A query with the same Accept is one plain JSON response.
    let plain = open(
        &server,
        MULTIPART_ACCEPT,
        json!({ "query": "{ viewer { id } }" }),
    )
    .await;
    assert_eq!(plain.status(), 200);
    assert!(plain.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let body: Value = plain.json().await.expect("JSON");
    assert!(body["data"]["viewer"]["id"].is_string(), "{body}");

    // Shutdown sends the closing boundary.
    let stopping = tokio::spawn(server.stop());
    while live.part().await.is_some() {}
    assert!(live.buffer.is_empty());
    stopping.await.expect("stopped");
}

/// A server with these websocket timers, so that tests see them act.
async fn with_timers(init_timeout: Duration, ping_interval: Duration) -> TestServer {
    let (store, dir) = store_url(Backend::Embedded).expect("embedded");
    TestServer::start_with(Stopped { store, dir }, |store| {
        let mut options = ServeOptions::new(store);
        options.ws_limits.init_timeout = init_timeout;
        options.ws_limits.ping_interval = ping_interval;
        options
    })
    .await
}

fn identity() -> Value {
    json!({ "x-riverfeed-tenant": "acme", "x-riverfeed-user": "alice" })
}

async fn closed(ws: &mut WsClient) -> Value {
    let close = ws.next().await.expect("an answer");
    assert_eq!(close["type"], "__closed", "{close}");
    close
}

#[tokio::test]
async fn the_websocket_closes_with_the_protocol_codes() {
    let server = with_timers(Duration::from_millis(300), Duration::from_secs(600)).await;
    let url = server.ws_url();

    // No connection_init in time: 4408.
    let mut silent = WsClient::open(&url).await;
    assert_eq!(closed(&mut silent).await["code"], 4408);

    // A second connection_init: 4429.
    let mut twice = WsClient::connect(&url, identity()).await;
    twice
        .send(json!({ "type": "connection_init", "payload": identity() }))
        .await;
    assert_eq!(closed(&mut twice).await["code"], 4429);

    // A subscribe before the acknowledgement: 4401.
    let mut early = WsClient::open(&url).await;
    early.subscribe("1", FEED_EVENTS).await;
    assert_eq!(closed(&mut early).await["code"], 4401);

    // An identity refused: 4403.
    let refused = WsClient::refused(&url, json!({})).await;
    assert_eq!(refused["code"], 4403);

    // A second subscriber with a running id: 4409.
    let mut duplicate = WsClient::connect(&url, identity()).await;
    duplicate.subscribe("same", FEED_EVENTS).await;
    duplicate.subscribe("same", FEED_EVENTS).await;
    let close = closed(&mut duplicate).await;
    assert_eq!(close["code"], 4409, "{close}");

    // Anything that is not a protocol message: 4400.
    for message in [
        json!({ "type": "start", "id": "1" }),
        json!({ "id": "1" }),
        json!("text"),
    ] {
        let mut confused = WsClient::connect(&url, identity()).await;
        confused.send(message.clone()).await;
        let close = closed(&mut confused).await;
        assert_eq!(close["code"], 4400, "{message}: {close}");
    }

    // The legacy subprotocol is not spoken.
    let mut legacy = url.as_str().into_client_request().expect("request");
    legacy
        .headers_mut()
        .insert("sec-websocket-protocol", "graphql-ws".parse().unwrap());
    assert!(tokio_tungstenite::connect_async(legacy).await.is_err());
    server.stop().await;
}

#[tokio::test]
async fn the_websocket_pings_answers_pings_and_reports_bad_operations() {
    let server = with_timers(Duration::from_secs(10), Duration::from_millis(500)).await;
    let url = server.ws_url();
    let mut ws = WsClient::connect(&url, identity()).await;

    // The client's ping gets a pong, with its payload.
    ws.send(json!({ "type": "ping", "payload": { "n": 1 } }))
        .await;
    let pong = loop {
        let message = ws.next_any().await.expect("a message");
        if message["type"] != "ping" {
            break message;
        }
    };
    assert_eq!(pong, json!({ "type": "pong", "payload": { "n": 1 } }));

    // An operation that does not validate is an `error` for its id; the
    // connection stays.
    ws.subscribe("bad", "subscription { noSuchField }").await;
    let error = ws.next().await.expect("an error");
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["id"], "bad");
    assert_eq!(
        error["payload"][0]["extensions"]["code"],
        "GRAPHQL_VALIDATION_FAILED"
    );
    // A query runs over the socket too: `next`, then `complete`.
    ws.subscribe("q", "{ viewer { id } }").await;
    let next = ws.next().await.expect("the result");
    assert_eq!(
        (next["type"].as_str(), next["id"].as_str()),
        (Some("next"), Some("q"))
    );
    assert_eq!(
        ws.next().await.expect("the end"),
        json!({ "id": "q", "type": "complete" })
    );

    // The server pings; a client that never answers is let go after two
    // (a ping may have come, skipped, while the query ran).
    let mut pings = 0;
    let close = loop {
        let message = ws.next_any().await.expect("a message");
        match message["type"].as_str() {
            Some("ping") => pings += 1,
            Some("__closed") => break message,
            _ => panic!("unexpected {message}"),
        }
    };
    assert!((1..=2).contains(&pings), "{pings} pings");
    assert_eq!(close["code"], 1011, "{close}");

    // A client that answers stays.
    let mut polite = WsClient::connect(&url, identity()).await;
    for _ in 0..4 {
        let ping = polite.next_any().await.expect("a ping");
        assert_eq!(ping["type"], "ping", "{ping}");
        polite.send(json!({ "type": "pong" })).await;
    }
    server.stop().await;
}

/// Subscribers of one fan-out, on the websocket and on server-sent events,
/// with different selections (aliases, the reader's own values or none),
/// each get their selection's JSON: the same as an execution of it for them
/// alone (a directive keeps a subscription off the shared templates).
/// Cursors are sealed afresh each time: they are compared as present.
#[tokio::test]
async fn subscribers_of_one_event_each_get_the_json_of_their_own_selection() {
    let server = server().await;
    let service = server.service("acme");
    for (id, name) in [("alice", "Alice"), ("bob", "Bob"), ("carol", "Carol")] {
        service.upsert_user(id, name).await;
    }
    for reader in ["alice", "carol"] {
        server.client("acme", reader).follow("bob").await;
    }
    let selections = [
        "kind resumeCursor item { id ownerId cursor actionId }",
        "k: kind item { a: actionId why: reason { kind actorId } }",
    ];
    // Each selection as sent, and with a directive: executed per subscriber.
    let query = |alias: &str, selection: &str, executed: bool| {
        let directive = if executed { " @include(if: true)" } else { "" };
        format!("subscription {{ {alias}feedEvents{directive} {{ {selection} }} }}")
    };
    let mut sockets = Vec::new();
    for reader in ["alice", "carol"] {
        let mut ws = WsClient::as_user(&server.ws_url(), "acme", reader).await;
        for (s, selection) in selections.iter().enumerate() {
            for executed in [false, true] {
                let id = format!("{s}-{executed}");
                let alias = if s == 1 { "e: " } else { "" };
                ws.subscribe(&id, &query(alias, selection, executed)).await;
            }
        }
        sockets.push((reader, ws));
    }
    let mut streams = Vec::new();
    for executed in [false, true] {
        let body = json!({ "query": query("", selections[0], executed) });
        streams.push(Streamed::open(&server, "text/event-stream", body).await);
    }
    let subscriptions = 2 * 2 * selections.len() as u64 + 2;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while server.metric("riverfeed_live_subscriptions").await < subscriptions {
        assert!(tokio::time::Instant::now() < deadline, "subscriptions open");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let action = server
        .client("acme", "bob")
        .post_status("for everyone", json!({}))
        .await;

    // The payloads of a socket by operation id, cursors marked as present.
    let mut got: Vec<(String, Value)> = Vec::new();
    for (reader, ws) in &mut sockets {
        for _ in 0..2 * selections.len() {
            let message = ws.next().await.expect("an event");
            assert_eq!(message["type"], "next", "{message}");
            let id = message["id"].as_str().unwrap().to_owned();
            got.push((
                format!("ws {reader} {id}"),
                blank_cursors(message["payload"].clone()),
            ));
        }
    }
    for (executed, stream) in streams.iter_mut().enumerate() {
        let (name, data) = stream.event().await.expect("an event");
        assert_eq!(name, "next");
        got.push((
            format!("sse alice 0-{}", executed == 1),
            blank_cursors(data),
        ));
    }
    got.sort_by(|a, b| a.0.cmp(&b.0));
    for pair in got.chunks(2) {
        let [(shared_name, shared), (executed_name, executed)] = pair else {
            unreachable!("in pairs")
        };
        assert!(executed_name.ends_with("true") && shared_name.ends_with("false"));
        assert!(shared.get("errors").is_none(), "{shared_name}: {shared}");
        assert_eq!(shared, executed, "{shared_name}");
    }
    let event = |name: &str| got.iter().find(|(n, _)| n == name).unwrap().1.clone();
    let alice = &event("ws alice 0-false")["data"]["feedEvents"];
    let carol = &event("ws carol 0-false")["data"]["feedEvents"];
    assert_eq!(alice["item"]["ownerId"], "alice");
    assert_eq!(carol["item"]["ownerId"], "carol");
    assert_ne!(alice["item"]["id"], carol["item"]["id"]);
    assert_eq!(alice["item"]["actionId"], action.as_str());
    assert_eq!(
        event("ws carol 1-false")["data"]["e"],
        json!({ "k": "ADDED", "item": { "a": action, "why": { "kind": "FOLLOWS", "actorId": "bob" } } })
    );
    server.stop().await;
}

/// `value` with every `cursor` and `resumeCursor` string replaced by a mark.
fn blank_cursors(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(object) => {
                for (key, value) in object.iter_mut() {
                    if key == "cursor" || key == "resumeCursor" {
                        assert!(value.as_str().is_some_and(|c| !c.is_empty()), "{value}");
                        *value = json!("a cursor");
                    } else {
                        walk(value);
                    }
                }
            }
            Value::Array(values) => values.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}
