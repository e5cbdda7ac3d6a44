//! MongoDB failing: unreachable at start, lost while serving and back again.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::process::Command;

use crate::common::{first_error_code, free_port, OwnMongo, Stopped, TestServer, PATIENCE};

#[tokio::test]
async fn unreachable_mongodb_at_start_exits_naming_the_host_never_the_password() {
    let port = free_port(); // bound and released: nothing listens there
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_riverfeed"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            &format!(
                "mongodb://app:t0p-s3cret@127.0.0.1:{port}/feeds?serverSelectionTimeoutMS=1000"
            ),
        ])
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .output();
    let output = tokio::time::timeout(PATIENCE, output)
        .await
        .expect("exits instead of waiting forever")
        .expect("runs");
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "must fail: {stderr}");
    assert!(
        stderr.contains(&format!("127.0.0.1:{port}")),
        "names the host: {stderr}"
    );
    assert!(
        !stderr.contains("t0p-s3cret") && !stdout.contains("t0p-s3cret"),
        "never shows the password: {stderr}"
    );
    eprintln!("unreachable MongoDB: exit after {elapsed:?} (server selection timeout 1 s)");
}

#[tokio::test]
async fn losing_mongodb_while_serving_answers_storage_unavailable_and_recovers_without_a_restart() {
    let Some(mut mongo) = OwnMongo::new() else {
        return;
    };
    mongo.start().await;
    let server = TestServer::start_on(Stopped {
        store: mongo.uri(),
        dir: None,
    })
    .await;
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;
    let before = bob.post_status("before the outage", json!({})).await;
    bob.wait_delivered(&before).await;

    mongo.stop().await;
    let started = Instant::now();
    let refused = reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .headers(bob.headers.clone())
        .json(&json!({
            "query": "mutation { recordAction(input: {descriptor: {statusPost: {text: \"lost?\"}}}) { actionId } }"
        }))
        .send()
        .await
        .expect("answered");
    let failed_after = started.elapsed();
    assert_eq!(refused.status(), 503, "the request failed as a whole");
    let retry_after = refused
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    assert!(retry_after.is_some_and(|s| s >= 1), "{retry_after:?}");
    let body: serde_json::Value = refused.json().await.expect("JSON");
    assert_eq!(
        first_error_code(&body).as_deref(),
        Some("STORAGE_UNAVAILABLE"),
        "{body}"
    );
    assert!(
        !body.to_string().contains("127.0.0.1:"),
        "internal details stay in the log: {body}"
    );
    let (status, health) = get_json(&server.base, "/healthz").await;
    assert_eq!(status, 200, "the process lives on: {health}");
    assert_eq!(health["status"], "degraded", "{health}");
    assert!(
        !health.to_string().contains("127.0.0.1:"),
        "no address in the health report: {health}"
    );
    let (status, ready) = get_json(&server.base, "/readyz").await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["status"], "not ready", "{ready}");
    eprintln!("request during the outage answered STORAGE_UNAVAILABLE after {failed_after:?}");

    // The worker keeps polling through the outage (and backing off): wait
    // until it has tried at least twice while the database was down.
    let polls = server.store_calls("claim").await;
    let deadline = Instant::now() + PATIENCE;
    while server.store_calls("claim").await < polls + 2 {
        assert!(Instant::now() < deadline, "the worker stopped polling");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    mongo.start().await;
    // Without a restart of Riverfeed, requests work again…
    let deadline = Instant::now() + PATIENCE;
    let after = loop {
        let body = bob
            .post(
                "mutation { recordAction(input: {descriptor: {statusPost: {text: \"after\"}}}) { actionId } }",
                json!({}),
            )
            .await;
        if let Some(id) = body["data"]["recordAction"]["actionId"].as_str() {
            break id.to_owned();
        }
        assert!(Instant::now() < deadline, "never recovered: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let recovered_after = started.elapsed();
    let (status, ready) = get_json(&server.base, "/readyz").await;
    assert_eq!((status, ready["status"].as_str()), (200, Some("ready")));
    let (status, health) = get_json(&server.base, "/healthz").await;
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
    // …and the worker delivers again.
    bob.wait_delivered(&after).await;
    let (ids, _) = alice.feed_ids("").await;
    assert_eq!(
        ids,
        vec![after.clone(), before.clone()],
        "every stored action delivered exactly once, the refused one never"
    );
    eprintln!("recovered {recovered_after:?} after the outage began");
    server.stop_keeping_data().await;
    mongo.stop().await;
}

async fn get_json(base: &str, path: &str) -> (u16, serde_json::Value) {
    let response = reqwest::get(format!("{base}{path}"))
        .await
        .expect("answered");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}
