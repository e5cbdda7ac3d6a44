//! `--otlp-endpoint`: the real binary sends a span per GraphQL operation to
//! an OTLP/HTTP collector (one of the test's own, decoding the protobuf the
//! exporter posts), named and tagged as OpenTelemetry's GraphQL conventions
//! say, with no variable's value anywhere; and every operation ends with a
//! log line.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;
use tokio::process::{Child, Command};

use crate::common::{free_port, Client, WsClient, PATIENCE};

/// What the exporter posted to `/v1/traces`, body by body.
type Posted = Arc<Mutex<Vec<Bytes>>>;

/// An OTLP/HTTP collector on a loopback port that keeps what it is sent.
async fn collector() -> (String, Posted) {
    let posted = Posted::default();
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            post(|State(posted): State<Posted>, body: Bytes| async move {
                posted.lock().unwrap().push(body);
                // An empty ExportTraceServiceResponse: everything accepted.
                ([("content-type", "application/x-protobuf")], Vec::new())
            }),
        )
        .with_state(posted.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, posted)
}

/// `riverfeed serve` as a child process, its output in a file.
struct Served {
    child: Child,
    base: String,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Served {
    async fn start(otlp: &str) -> Served {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let log = dir.path().join("riverfeed.log");
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_riverfeed"))
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--otlp-endpoint", otlp])
            .env("RUST_LOG", "info")
            // Batches wait a minute: what the collector gets, it gets from
            // the flush at shutdown.
            .env("OTEL_BSP_SCHEDULE_DELAY", "60000")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .expect("riverfeed starts");
        let mut served = Served {
            child,
            base: format!("http://127.0.0.1:{port}"),
            port,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + PATIENCE * 2;
        loop {
            if let Ok(response) = reqwest::get(format!("{}/healthz", served.base)).await {
                if response.status() == 200 {
                    return served;
                }
            }
            if let Ok(Some(status)) = served.child.try_wait() {
                panic!("riverfeed exited with {status}: {}", served.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "never healthy: {}",
                served.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log has a line with every one of `parts`.
    async fn wait_log_line(&self, parts: &[&str]) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(line) = find_line(&self.log_text(), parts) {
                return line;
            }
            assert!(
                Instant::now() < deadline,
                "no line with {parts:?} in:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, as an operator stops it, and its exit.
    async fn stop(mut self) -> String {
        let pid = self.child.id().expect("running").to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .expect("kill runs");
        assert!(status.success());
        let exited = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("stops in time")
            .expect("exit status");
        let log = self.log_text();
        assert!(exited.success(), "exited with {exited}:\n{log}");
        log
    }
}

fn find_line(log: &str, parts: &[&str]) -> Option<String> {
    log.lines()
        .find(|line| parts.iter().all(|part| line.contains(part)))
        .map(str::to_owned)
}

/// The string attributes of a span.
fn attributes(span: &Span) -> HashMap<String, String> {
    span.attributes
        .iter()
        .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(text) => Some((kv.key.clone(), text.clone())),
            _ => None,
        })
        .collect()
}

/// A field of a log line, `key=value` (quotes taken off).
fn field<'l>(line: &'l str, key: &str) -> Option<&'l str> {
    line.split(' ').find_map(|part| {
        part.strip_prefix(key)?
            .strip_prefix('=')
            .map(|value| value.trim_matches('"'))
    })
}

#[tokio::test]
async fn operations_become_spans_without_their_variables_and_log_lines() {
    let (collector, posted) = collector().await;
    let server = Served::start(&collector).await;
    let marker = format!("marker-{}", riverfeed::model::ObjectId::new().to_hex());
    let alice = Client::at(&server.base, Some(("acme", "alice", None)));

    let feed = "query FeedPage { viewer { userId } feed(first: 5) { edges { cursor } } }";
    let data = alice.data(feed, json!({})).await;
    assert_eq!(data["viewer"]["userId"], "alice");
    let post = "mutation PostStatus($text: String!) { \
        recordAction(input: {descriptor: {statusPost: {text: $text}}}) { id } }";
    let data = alice.data(post, json!({ "text": marker })).await;
    assert!(data["recordAction"]["id"].is_string(), "{data}");
    let missing = "query Missing($id: ID!) { action(actionId: $id) { id } }";
    let body = alice.post(missing, json!({ "id": marker })).await;
    assert!(body["errors"].is_array(), "{body}");
    alice.data("{ viewer { id } }", json!({})).await;
    let watch = "subscription Watch($ref: ID!) { sliceEvents(refId: $ref) { action { id } } }";
    let mut ws = WsClient::as_user(
        &format!("ws://127.0.0.1:{}/graphql/ws", server.port),
        "acme",
        "alice",
    )
    .await;
    ws.subscribe_with("1", watch, json!({ "ref": marker }))
        .await;

    // One line per operation: name, type, cost, duration and outcome.
    let line = server
        .wait_log_line(&["riverfeed::operation", "graphql operation", "FeedPage"])
        .await;
    assert_eq!(field(&line, "type"), Some("query"), "{line}");
    assert_eq!(field(&line, "outcome"), Some("ok"), "{line}");
    let cost: u64 = field(&line, "cost")
        .expect("a cost")
        .parse()
        .expect("a number");
    assert!(cost >= 3, "viewer.id, feed and its edges: {line}");
    let ms: f64 = field(&line, "duration_ms")
        .expect("a duration")
        .parse()
        .expect("a number");
    assert!(ms > 0.0 && ms < 60_000.0, "{line}");
    let line = server
        .wait_log_line(&["graphql operation", "name=\"PostStatus\""])
        .await;
    assert_eq!(field(&line, "type"), Some("mutation"), "{line}");
    assert_eq!(field(&line, "outcome"), Some("ok"), "{line}");
    let line = server
        .wait_log_line(&["graphql operation", "name=\"Missing\""])
        .await;
    assert_eq!(field(&line, "outcome"), Some("error"), "{line}");
    assert_eq!(field(&line, "codes"), Some("BAD_USER_INPUT"), "{line}");
    let line = server
        .wait_log_line(&["graphql operation", "name=\"anonymous\""])
        .await;
    assert_eq!(field(&line, "type"), Some("query"), "{line}");
    // A subscription is logged as it starts, and again as it ends.
    let line = server
        .wait_log_line(&["graphql subscription started", "name=\"Watch\""])
        .await;
    assert!(field(&line, "cost").is_some(), "{line}");

    let log = server.stop().await;
    let line = find_line(&log, &["graphql operation", "name=\"Watch\""])
        .unwrap_or_else(|| panic!("the subscription's end is not logged:\n{log}"));
    assert_eq!(field(&line, "type"), Some("subscription"), "{line}");
    assert_eq!(field(&line, "events"), Some("0"), "{line}");
    assert!(
        !log.contains(&marker),
        "a variable's value is in the log:\n{log}"
    );
    drop(ws);
    // The worker logs within its span: each line names the worker.
    let line = find_line(&log, &["fan-out worker started"])
        .unwrap_or_else(|| panic!("the worker's start is not logged:\n{log}"));
    assert!(line.contains("worker="), "no worker field: {line}");

    // The spans were flushed at shutdown; batches would have waited a minute.
    let bodies = posted.lock().unwrap().clone();
    assert!(!bodies.is_empty(), "nothing exported:\n{log}");
    let mut spans = Vec::new();
    for body in &bodies {
        let marker_bytes = marker.as_bytes();
        assert!(
            !body.windows(marker_bytes.len()).any(|w| w == marker_bytes),
            "a variable's value was exported"
        );
        let request = ExportTraceServiceRequest::decode(body.clone()).expect("OTLP protobuf");
        for resource in request.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref()?.value.clone());
            assert_eq!(
                service,
                Some(any_value::Value::StringValue("riverfeed".into()))
            );
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
    }
    let named = |name: &str| {
        spans
            .iter()
            .find(|span| span.name == name)
            .unwrap_or_else(|| {
                let names: Vec<_> = spans.iter().map(|s| &s.name).collect();
                panic!("no span {name:?} among {names:?}")
            })
    };
    let span = named("query FeedPage");
    let attrs = attributes(span);
    assert_eq!(attrs["graphql.operation.type"], "query");
    assert_eq!(attrs["graphql.operation.name"], "FeedPage");
    assert_eq!(attrs["graphql.document"], feed);
    assert_eq!(span.kind, SpanKind::Server as i32);
    assert!(span.end_time_unix_nano > span.start_time_unix_nano);
    let span = named("mutation PostStatus");
    let attrs = attributes(span);
    assert_eq!(attrs["graphql.operation.type"], "mutation");
    assert_eq!(attrs["graphql.operation.name"], "PostStatus");
    assert_eq!(attrs["graphql.document"], post);
    let status = span.status.clone().unwrap_or_default();
    assert_ne!(status.code, StatusCode::Error as i32);
    let span = named("query Missing");
    let status = span.status.clone().expect("a status");
    assert_eq!(status.code, StatusCode::Error as i32);
    assert_eq!(status.message, "BAD_USER_INPUT");
    // Anonymous: the type alone, and no name.
    let span = named("query");
    assert!(!attributes(span).contains_key("graphql.operation.name"));
    let span = named("subscription Watch");
    assert_eq!(attributes(span)["graphql.document"], watch);
    // Nothing else is exported: no variables attribute, no other spans.
    for span in &spans {
        assert!(
            attributes(span)
                .keys()
                .all(|key| key.starts_with("graphql.") || key == "otel.kind"),
            "{:?}: {:?}",
            span.name,
            attributes(span)
        );
    }
}
