//! `/metrics`: GraphQL requests by operation, jobs, the fan-out queue, live
//! connections, and every metric the Grafana dashboard in `docs/` reads.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{Backend, TestServer, WsClient, FEED_EVENTS, PATIENCE};

crate::on_both_backends!(metrics_count_requests_jobs_and_live_connections);

async fn scrape(server: &TestServer) -> String {
    let response = reqwest::get(format!("{}/metrics", server.base))
        .await
        .expect("metrics");
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    response.text().await.expect("body")
}

/// The value of the sample named exactly `series` (with its labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (key, value) = line.rsplit_once(' ')?;
        (key == series).then(|| value.parse().expect("a number"))
    })
}

async fn metrics_count_requests_jobs_and_live_connections(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;
    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe("1", FEED_EVENTS).await;
    server.wait_live_topics(1).await;
    let id = bob.post_status("hello", json!({})).await;
    bob.wait_delivered(&id).await;
    ws.next_payload().await;
    alice
        .data(
            "query FeedPage { feed(first: 5) { edges { cursor } } }",
            json!({}),
        )
        .await;
    alice
        .data(
            "mutation Remark($id: ID!) { comment(actionId: $id, text: \"hi\") { id } }",
            json!({ "id": id }),
        )
        .await;
    let broken = alice.post("query Broken { feed(", json!({})).await;
    assert!(broken["errors"].is_array());

    // The bump the comment queued runs; then the figures are read.
    let deadline = Instant::now() + PATIENCE;
    let text = loop {
        let text = scrape(&server).await;
        if sample(&text, "riverfeed_jobs_total{job=\"bump\",outcome=\"ok\"}").is_some() {
            break text;
        }
        assert!(Instant::now() < deadline, "the bump never ran:\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let ok = |ty: &str, name: &str| {
        format!("riverfeed_graphql_requests_total{{type=\"{ty}\",name=\"{name}\",outcome=\"ok\"}}")
    };
    assert_eq!(sample(&text, &ok("query", "FeedPage")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &ok("mutation", "Remark")), Some(1.0));
    assert_eq!(
        sample(&text, &ok("subscription", "anonymous")),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "riverfeed_graphql_requests_total{type=\"unknown\",name=\"anonymous\",outcome=\"error\"}"
        ),
        Some(1.0),
        "a request that does not parse is counted as an error"
    );
    assert_eq!(
        sample(
            &text,
            "riverfeed_graphql_request_duration_seconds_count{type=\"query\",name=\"FeedPage\"}"
        ),
        Some(1.0)
    );
    assert!(text.contains(
        "riverfeed_graphql_request_duration_seconds_bucket{le=\"+Inf\",type=\"query\",name=\"FeedPage\"} 1"
    ) || text.contains(
        "riverfeed_graphql_request_duration_seconds_bucket{type=\"query\",name=\"FeedPage\",le=\"+Inf\"} 1"
    ), "a histogram with buckets:\n{text}");
    // One fan-out job, its delivery to alice (bob's own item too), no backlog.
    assert_eq!(
        sample(&text, "riverfeed_jobs_total{job=\"fanout\",outcome=\"ok\"}"),
        Some(1.0)
    );
    assert!(sample(&text, "riverfeed_fanout_deliveries_total").unwrap() >= 1.0);
    assert_eq!(sample(&text, "riverfeed_fanout_queue_depth"), Some(0.0));
    assert_eq!(
        sample(&text, "riverfeed_fanout_oldest_pending_age_seconds"),
        Some(0.0)
    );
    assert_eq!(sample(&text, "riverfeed_live_connections"), Some(1.0));
    assert_eq!(sample(&text, "riverfeed_live_subscriptions"), Some(1.0));
    assert!(text.ends_with("# EOF\n"));

    // Every metric the dashboard reads is one this server reports.
    let dashboard = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/grafana/riverfeed.json"
    ))
    .expect("the dashboard");
    let read: BTreeSet<String> = metric_names(&dashboard);
    assert!(read.len() >= 10, "{read:?}");
    let reported = metric_names(&text);
    let missing: Vec<&String> = read.difference(&reported).collect();
    assert!(
        missing.is_empty(),
        "the dashboard reads metrics /metrics lacks: {missing:?}"
    );
    drop(ws);
    server.stop().await;
}

/// The `riverfeed_*` names in a text, histogram suffixes cut.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("riverfeed_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let name = ["_bucket", "_count", "_sum", "_created"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        names.insert(name.to_owned());
        rest = &tail[end..];
    }
    names
}
