//! Who may connect: a server without tokens (dev mode) answers this machine
//! only, and websocket connections and subscriptions are capped.

use std::sync::Arc;

use riverfeed::http::WsLimits;
use riverfeed::server::ServeOptions;
use serde_json::{json, Value};

use super::{as_user, hs256, start, token};
use crate::common::{first_error_code, Backend, TestServer, WsClient};

async fn connections_and_subscriptions_are_capped(backend: Backend) {
    let limits = WsLimits {
        max_connections: 2,
        max_subscriptions: 2,
        ..WsLimits::default()
    };
    let Some(server) = start(backend, hs256(), |o| o.ws_limits = limits).await else {
        return;
    };
    let payload = json!({ "token": token("acme", "alice", &[]) });
    let mut first = WsClient::connect(&server.ws_url(), payload.clone()).await;
    let _second = WsClient::connect(&server.ws_url(), payload.clone()).await;
    // A third is upgraded, but its `connection_init` finds the pool full:
    // "try again later", which graphql-ws clients retry.
    let closed = WsClient::refused(&server.ws_url(), payload.clone()).await;
    assert_eq!(closed["code"], 1013, "{closed}");
    assert!(
        closed["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("TOO_MANY_CONNECTIONS")),
        "{closed}"
    );

    // A connection's subscriptions start concurrently: which of the three is
    // refused is not fixed, only that one is.
    let query = "subscription { feedEvents { kind } }";
    for id in ["a", "b", "c"] {
        first.subscribe(id, query).await;
    }
    let message = first.next().await.expect("an answer");
    assert_eq!(
        message["payload"]["errors"][0]["extensions"]["code"], "TOO_MANY_SUBSCRIPTIONS",
        "{message}"
    );
    let refused = message["id"].as_str().unwrap().to_owned();
    let done = first.next().await.expect("its end");
    assert_eq!(
        (done["type"].as_str(), done["id"].as_str()),
        (Some("complete"), Some(&*refused))
    );
    // The two others live: an event reaches both.
    server.wait_live_topics(1).await;
    let alice = as_user(&server, "acme", "alice");
    alice.post_status("ping", json!({})).await;
    let mut ids = vec![first.next_payload_id().await, first.next_payload_id().await];
    ids.sort();
    let mut expected: Vec<String> = ["a", "b", "c"]
        .iter()
        .filter(|i| **i != refused)
        .map(|i| i.to_string())
        .collect();
    expected.sort();
    assert_eq!(ids, expected);
    server.stop().await;
}

crate::on_both_backends!(connections_and_subscriptions_are_capped);

/// A websocket upgrade that will send nothing: the upgrade request alone.
async fn bare_upgrade(server: &TestServer) -> reqwest::Response {
    upgrade_from(server, None).await
}

/// A websocket upgrade request, from a page of `origin` if given.
async fn upgrade_from(server: &TestServer, origin: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(format!("{}/graphql/ws", server.base));
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .header("sec-websocket-protocol", "graphql-transport-ws")
        .send()
        .await
        .unwrap()
}

/// Websockets that never send `connection_init` wait among the pending
/// upgrades, bounded per address: twice the live pool of them leaves it
/// free for a user with a token, over a websocket and an event stream
/// (which holds no pending place: its request carries its identity).
#[tokio::test]
async fn bare_upgrades_cannot_fill_the_live_connections() {
    let limits = WsLimits {
        max_connections: 4,
        max_pending: 64,
        max_pending_per_address: 8,
        // The bare upgrades stay for the whole test.
        init_timeout: std::time::Duration::from_secs(60),
        ..WsLimits::default()
    };
    let server = start(Backend::Embedded, hs256(), |o| o.ws_limits = limits)
        .await
        .expect("embedded");
    let mut bare = Vec::new();
    for _ in 0..8 {
        bare.push(WsClient::open(&server.ws_url()).await);
    }
    // One more from the same address is refused at the upgrade.
    let refused = bare_upgrade(&server).await;
    assert_eq!(refused.status(), 503);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(
        first_error_code(&body).as_deref(),
        Some("TOO_MANY_CONNECTIONS"),
        "{body}"
    );

    let token = token("acme", "alice", &[]);
    // Another client's websocket is served (the same address holds its
    // share of pending upgrades already).
    let other = "127.0.0.2".parse().unwrap();
    let mut socket =
        WsClient::connect_from(&server.ws_url(), other, json!({ "token": token })).await;
    socket
        .send(json!({ "type": "ping", "payload": { "still": "here" } }))
        .await;
    let pong = socket.next_any().await.expect("a pong");
    assert_eq!(pong["type"], "pong", "{pong}");
    let stream = reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "text/event-stream")
        .json(&json!({ "query": "subscription { feedEvents { kind } }" }))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(stream.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    drop((bare, stream));
    server.stop().await;
}

/// Bare upgrades from many addresses, each within its per-address share,
/// take every pending place; a client that upgrades then and sends
/// `connection_init` at once is still served: it takes the place of the
/// oldest bare upgrade, which is closed as if its time had run out.
#[tokio::test]
async fn a_flood_of_bare_upgrades_from_many_addresses_cannot_keep_a_client_out() {
    const PLACES: usize = 20;
    const PER_ADDRESS: usize = 4;
    let limits = WsLimits {
        max_pending: PLACES,
        max_pending_per_address: PER_ADDRESS,
        // The flood would stay for the whole test.
        init_timeout: std::time::Duration::from_secs(60),
        ..WsLimits::default()
    };
    let server = start(Backend::Embedded, hs256(), |o| o.ws_limits = limits)
        .await
        .expect("embedded");
    let url = server.ws_url();
    // Eight addresses, each at its share: 32 upgrades for 20 places.
    let mut flood = Vec::new();
    for host in 10..18u8 {
        for _ in 0..PER_ADDRESS {
            let from = std::net::IpAddr::from([127, 0, 0, host]);
            if let Ok(socket) = WsClient::try_open_from(&url, Some(from)).await {
                flood.push(socket);
            }
        }
    }
    assert!(flood.len() >= PLACES, "{} upgraded", flood.len());

    // The flood is held open; a client from another address upgrades and
    // initialises at once, and is served.
    let from = std::net::IpAddr::from([127, 0, 0, 100]);
    let client = WsClient::try_open_from(&url, Some(from))
        .await
        .expect("upgraded while bare upgrades held every pending place");
    let mut client = client
        .init(json!({ "token": token("acme", "alice", &[]) }))
        .await;
    client.subscribe("1", "{ viewer { userId } }").await;
    let answer = client.next().await.expect("an answer");
    assert_eq!(
        answer["payload"]["data"]["viewer"]["userId"], "alice",
        "{answer}"
    );
    // Each upgrade past the places took the oldest one's, the client's
    // too: the oldest of those still pending then was closed as if its
    // time had run out; the next one still waits.
    let oldest = flood.len() - PLACES;
    let closed = flood[oldest].next().await.expect("a close");
    assert_eq!(closed["type"], "__closed", "{closed}");
    assert_eq!(closed["code"], 4408, "{closed}");
    let waiting = &mut flood[oldest + 1];
    waiting.send(json!({ "type": "ping" })).await;
    let pong = waiting.next_any().await.expect("a pong");
    assert_eq!(pong["type"], "pong", "{pong}");
    drop(flood);
    server.stop().await;
}

#[tokio::test]
async fn dev_mode_stays_on_loopback_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = ServeOptions::new(format!("embedded:{}", dir.path().display()));
    options.listen = "0.0.0.0:0".parse().unwrap();
    let err = riverfeed::server::start(options.clone())
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("loopback"), "{err}");
    drop(dir);

    // With a token key the same address is fine.
    let dir = tempfile::tempdir().unwrap();
    options.store = format!("embedded:{}", dir.path().display());
    options.auth = Arc::new(hs256());
    let server = riverfeed::server::start(options)
        .await
        .expect("starts with tokens");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn dev_mode_answers_only_this_machine() {
    let server = TestServer::start(Backend::Embedded)
        .await
        .expect("embedded");
    let http = reqwest::Client::new();
    let url = format!("{}/graphql", server.base);
    let ask = |host: Option<&'static str>, origin: Option<&'static str>| {
        let mut request = http
            .post(&url)
            .header("x-riverfeed-tenant", "acme")
            .header("x-riverfeed-user", "alice")
            .json(&json!({ "query": "{ viewer { userId } }" }));
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    for (host, origin, status) in [
        (None, None, 200),
        (Some("localhost:8080"), Some("http://localhost:3000"), 200),
        (Some("127.0.0.1"), Some("http://[::1]:5173"), 200),
        // DNS rebinding: a page of attacker.example whose name now points here.
        (
            Some("attacker.example:8080"),
            Some("http://attacker.example:8080"),
            403,
        ),
        // A page of another site calling the local server.
        (None, Some("https://evil.example"), 403),
        // A sandboxed frame or a `data:` page, which any site can open.
        (None, Some("null"), 403),
    ] {
        let response = ask(host, origin).await.unwrap();
        assert_eq!(
            response.status(),
            status,
            "host {host:?}, origin {origin:?}"
        );
        if status == 403 {
            let body: Value = response.json().await.unwrap();
            assert_eq!(first_error_code(&body).as_deref(), Some("FORBIDDEN"));
        }
    }
    // A page on another port of this machine, such as a frontend's dev
    // server, is let in without a flag.
    let answer = http
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", "http://localhost:5173")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type,x-riverfeed-tenant,x-riverfeed-user",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 204);
    assert_eq!(
        answer.headers()["access-control-allow-origin"],
        "http://localhost:5173"
    );
    // The same for a cross-site websocket.
    let upgrade = upgrade_from(&server, Some("https://evil.example")).await;
    assert_eq!(upgrade.status(), 403);
    server.stop().await;
}
