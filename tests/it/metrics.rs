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

/// The series of one metric family in a scrape.
fn series(text: &str, family: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.starts_with(family))
        .map(|line| line.rsplit_once(' ').expect("a sample").0.to_owned())
        .collect()
}

#[tokio::test]
async fn operation_names_cannot_add_series_without_bound() {
    use riverfeed::http::persisted::{Persisted, TrustMode, TrustedDocuments};
    use riverfeed::metrics::MAX_OPERATION_NAMES;

    let (store, dir) = crate::common::store_url(Backend::Embedded).expect("embedded");
    let server = TestServer::start_with(crate::common::Stopped { store, dir }, |store| {
        let mut options = riverfeed::server::ServeOptions::new(store);
        // `log`: the trusted document runs, and so does anything else.
        let manifest = r#"{ "kept": "query Trusted { __typename }" }"#;
        options.persisted = std::sync::Arc::new(Persisted::new(
            Some(TrustedDocuments::parse(manifest, TrustMode::Log).expect("manifest")),
            Default::default(),
        ));
        options
    })
    .await;
    let bob = server.client("acme", "bob");
    let sent = MAX_OPERATION_NAMES + 110;
    for n in 0..sent {
        bob.data(&format!("query Probe{n} {{ __typename }}"), json!({}))
            .await;
    }
    let trusted = reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .header("x-riverfeed-tenant", "acme")
        .header("x-riverfeed-user", "bob")
        .json(&json!({ "documentId": "kept" }))
        .send()
        .await
        .expect("sent");
    assert_eq!(trusted.status(), 200);

    let text = scrape(&server).await;
    let counted = series(&text, "riverfeed_graphql_requests_total{");
    assert!(
        counted.len() <= MAX_OPERATION_NAMES + 2,
        "{} series for {sent} names",
        counted.len()
    );
    let timed = series(&text, "riverfeed_graphql_request_duration_seconds_count{");
    assert!(timed.len() <= MAX_OPERATION_NAMES + 2, "{}", timed.len());
    let ok = |name: &str| {
        format!("riverfeed_graphql_requests_total{{type=\"query\",name=\"{name}\",outcome=\"ok\"}}")
    };
    // The first names keep their own series; the rest are `other`; a
    // trusted document's operation is named whatever came before.
    assert_eq!(sample(&text, &ok("Probe0")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &ok(&format!("Probe{}", sent - 1))), None);
    assert_eq!(sample(&text, &ok("other")), Some(110.0), "{text}");
    assert_eq!(sample(&text, &ok("Trusted")), Some(1.0), "{text}");
    server.stop().await;
}

/// Names sent without a token take none of the series operation names may
/// have: a client's operation, sent with its token, is named after it.
#[tokio::test]
async fn only_an_authenticated_valid_operation_s_name_takes_a_series() {
    use riverfeed::metrics::{MAX_OPERATION_NAMES, UNAUTHENTICATED_OPERATION};

    use crate::security::{hs256, start, token};

    let server = start(Backend::Embedded, hs256(), |_| {})
        .await
        .expect("embedded");
    let http = reqwest::Client::new();
    let graphql = format!("{}/graphql", server.base);
    let post = |token: Option<String>, query: String| {
        let mut request = http.post(&graphql).json(&json!({ "query": query }));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await.expect("sent");
            assert_eq!(response.status(), 200);
            response.json::<serde_json::Value>().await.expect("JSON")
        }
    };
    let sent = MAX_OPERATION_NAMES + 50;
    for n in 0..sent {
        post(None, format!("query Probe{n} {{ __typename }}")).await;
    }
    let alice = token("acme", "alice", &[]);
    // With a token, a document that does not validate takes no series.
    let broken = post(Some(alice.clone()), "query Broken { nope }".into()).await;
    assert!(broken["errors"].is_array(), "{broken}");
    let mine = post(Some(alice), "query Mine { viewer { userId } }".into()).await;
    assert_eq!(mine["data"]["viewer"]["userId"], "alice", "{mine}");

    let text = scrape(&server).await;
    let count = |name: &str, outcome: &str| {
        sample(
            &text,
            &format!(
                "riverfeed_graphql_requests_total{{type=\"query\",name=\"{name}\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!(count("Mine", "ok"), Some(1.0), "{text}");
    assert_eq!(
        count(UNAUTHENTICATED_OPERATION, "ok"),
        Some(sent as f64),
        "{text}"
    );
    assert_eq!(count("other", "error"), Some(1.0), "{text}");
    assert!(
        !text.contains("Probe") && !text.contains("Broken"),
        "{text}"
    );
    server.stop().await;
}

/// A server whose `/metrics` is guarded as `access` says.
async fn guarded(access: riverfeed::http::MetricsAccess) -> TestServer {
    let (store, dir) = crate::common::store_url(Backend::Embedded).expect("embedded");
    TestServer::start_with(crate::common::Stopped { store, dir }, |store| {
        let mut options = riverfeed::server::ServeOptions::new(store);
        options.metrics_access = access;
        options
    })
    .await
}

#[tokio::test]
async fn metrics_need_their_token_when_one_is_set() {
    let token = "a-scrape-token-of-some-length";
    let server = guarded(riverfeed::http::MetricsAccess {
        listen: None,
        token: Some(token.into()),
    })
    .await;
    let url = format!("{}/metrics", server.base);
    let client = reqwest::Client::new();
    for sent in [None, Some("Bearer wrong-token"), Some(token)] {
        let mut request = client.get(&url);
        if let Some(sent) = sent {
            request = request.header("authorization", sent);
        }
        let refused = request.send().await.expect("sent");
        assert_eq!(refused.status(), 401, "{sent:?}");
        assert_eq!(refused.headers()["www-authenticate"], "Bearer");
        let body: serde_json::Value = refused.json().await.expect("JSON");
        assert_eq!(body["errors"][0]["extensions"]["code"], "UNAUTHENTICATED");
    }
    let scraped = client
        .get(&url)
        .bearer_auth(token)
        .send()
        .await
        .expect("sent");
    assert_eq!(scraped.status(), 200);
    assert!(scraped.text().await.expect("body").ends_with("# EOF\n"));
    server.stop().await;
}

#[tokio::test]
async fn metrics_can_have_a_listener_of_their_own() {
    let server = guarded(riverfeed::http::MetricsAccess {
        listen: Some(([127, 0, 0, 1], 0).into()),
        token: None,
    })
    .await;
    let own = server.server.metrics_addr.expect("a metrics listener");
    assert_ne!(own, server.server.addr);
    let beside_api = reqwest::get(format!("{}/metrics", server.base))
        .await
        .expect("sent");
    assert_eq!(beside_api.status(), 404);
    let scraped = reqwest::get(format!("http://{own}/metrics"))
        .await
        .expect("sent");
    assert_eq!(scraped.status(), 200);
    assert!(scraped
        .text()
        .await
        .expect("body")
        .contains("riverfeed_live_connections"));
    // Nothing of the API is served there.
    let api = reqwest::get(format!("http://{own}/graphql?query=%7B__typename%7D"))
        .await
        .expect("sent");
    assert_eq!(api.status(), 404);
    server.stop().await;
}

/// A worker process (MongoDB: the embedded store has no separate workers)
/// serves its metrics on their own listener, behind the token, as `serve`.
#[tokio::test]
async fn a_worker_serves_its_metrics_as_told() {
    let Some((store, _)) =
        crate::common::store_url(Backend::Mongo("a_worker_serves_its_metrics_as_told"))
    else {
        return;
    };
    let token = "a-worker-scrape-token";
    let mut options = riverfeed::server::ServeOptions::new(store.clone());
    options.metrics_access = riverfeed::http::MetricsAccess {
        listen: Some(([127, 0, 0, 1], 0).into()),
        token: Some(token.into()),
    };
    let worker = riverfeed::server::start_worker(options)
        .await
        .expect("worker starts");
    let own = worker.metrics_addr.expect("a metrics listener");
    let healthz = reqwest::get(format!("http://{}/healthz", worker.addr))
        .await
        .expect("sent");
    assert_eq!(healthz.status(), 200);
    let beside = reqwest::get(format!("http://{}/metrics", worker.addr))
        .await
        .expect("sent");
    assert_eq!(beside.status(), 404);
    let client = reqwest::Client::new();
    let url = format!("http://{own}/metrics");
    let refused = client.get(&url).send().await.expect("sent");
    assert_eq!(refused.status(), 401);
    let scraped = client
        .get(&url)
        .bearer_auth(token)
        .send()
        .await
        .expect("sent");
    assert_eq!(scraped.status(), 200);
    worker.stop().await.expect("worker stops");
    let db = riverfeed::store::mongo::MongoStore::connect(
        &store,
        &crate::common::test_store_settings().mongo,
    )
    .await
    .expect("reconnect to drop the test database");
    crate::common::drop_database(db.database()).await;
}
