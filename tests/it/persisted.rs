//! Persisted operations: automatic persisted queries (Apollo's protocol)
//! over POST and GET, and trusted documents in `enforce` and `log` mode on
//! every transport.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::common::{store_url, Backend, Stopped, TestServer, WsClient};
use riverfeed::http::persisted::{sha256_hex, Persisted, TrustMode, TrustedDocuments};
use riverfeed::server::ServeOptions;

const VIEWER: &str = "query Viewer { viewer { id name } }";
const FEED_EVENTS: &str = "subscription Live { feedEvents { kind item { actionId } } }";

async fn post(server: &TestServer, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .header("content-type", "application/json")
        .header("x-riverfeed-tenant", "acme")
        .header("x-riverfeed-user", "alice")
        .body(body.to_string())
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

async fn get(server: &TestServer, params: &[(&str, String)]) -> (u16, Value) {
    let url = reqwest::Url::parse_with_params(&format!("{}/graphql", server.base), params)
        .expect("a URL");
    let response = reqwest::Client::new()
        .get(url)
        .header("x-riverfeed-tenant", "acme")
        .header("x-riverfeed-user", "alice")
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

fn apq(hash: &str) -> Value {
    json!({ "persistedQuery": { "version": 1, "sha256Hash": hash } })
}

fn code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn automatic_persisted_queries_register_then_run_by_hash() {
    let server = TestServer::start(Backend::Embedded)
        .await
        .expect("embedded");
    let hash = sha256_hex(VIEWER);

    // The hash alone, first: not found, as Apollo's clients expect it.
    let (status, body) = post(&server, json!({ "extensions": apq(&hash) })).await;
    assert_eq!(status, 200);
    assert_eq!(code(&body), "PERSISTED_QUERY_NOT_FOUND", "{body}");
    assert_eq!(body["errors"][0]["message"], "PersistedQueryNotFound");

    // With the query it runs and is kept; the hash alone then runs it, over
    // POST and over GET.
    let (_, body) = post(
        &server,
        json!({ "query": VIEWER, "extensions": apq(&hash) }),
    )
    .await;
    assert_eq!(body["data"]["viewer"]["name"], Value::Null, "{body}");
    let (_, body) = post(&server, json!({ "extensions": apq(&hash) })).await;
    assert!(body["data"]["viewer"].is_object(), "{body}");
    let (status, body) = get(&server, &[("extensions", apq(&hash).to_string())]).await;
    assert_eq!(status, 200);
    assert!(body["data"]["viewer"].is_object(), "{body}");

    // A hash that is not the query's is refused, and not kept.
    let other = "{ viewer { id } }";
    let (_, body) = post(
        &server,
        json!({ "query": other, "extensions": apq(&hash_of_nothing()) }),
    )
    .await;
    assert_eq!(code(&body), "PERSISTED_QUERY_HASH_MISMATCH", "{body}");
    let (_, body) = post(&server, json!({ "extensions": apq(&hash_of_nothing()) })).await;
    assert_eq!(code(&body), "PERSISTED_QUERY_NOT_FOUND", "{body}");
    server.stop().await;
}

fn hash_of_nothing() -> String {
    sha256_hex("")
}

/// A server running the documents of a manifest in `mode`.
async fn with_manifest(mode: TrustMode) -> TestServer {
    let manifest = json!({ "viewer-1": VIEWER, "sha256:live-1": FEED_EVENTS });
    let trusted = TrustedDocuments::parse(&manifest.to_string(), mode).expect("manifest");
    let (store, dir) = store_url(Backend::Embedded).expect("embedded");
    TestServer::start_with(Stopped { store, dir }, |store| {
        let mut options = ServeOptions::new(store);
        options.persisted = Arc::new(Persisted::new(Some(trusted), Default::default()));
        options
    })
    .await
}

#[tokio::test]
async fn enforced_trusted_documents_close_the_api_to_anything_else() {
    let server = with_manifest(TrustMode::Enforce).await;

    // By `documentId` (GraphQL over HTTP) or `doc_id` (Relay), POST or GET.
    for body in [
        json!({ "documentId": "viewer-1" }),
        json!({ "doc_id": "viewer-1", "variables": {} }),
        json!({ "query": VIEWER }),
    ] {
        let (status, answer) = post(&server, body.clone()).await;
        assert_eq!(status, 200, "{body}");
        assert!(answer["data"]["viewer"].is_object(), "{body}: {answer}");
    }
    let (_, answer) = get(&server, &[("documentId", "viewer-1".to_owned())]).await;
    assert!(answer["data"]["viewer"].is_object(), "{answer}");

    // Anything else is refused, with its code.
    let (_, answer) = post(&server, json!({ "query": "{ viewer { id } }" })).await;
    assert_eq!(code(&answer), "TRUSTED_DOCUMENT_REQUIRED", "{answer}");
    let (_, answer) = post(&server, json!({ "documentId": "nope" })).await;
    assert_eq!(code(&answer), "TRUSTED_DOCUMENT_NOT_FOUND", "{answer}");
    let (_, answer) = get(&server, &[("query", "{ viewer { id } }".to_owned())]).await;
    assert_eq!(code(&answer), "TRUSTED_DOCUMENT_REQUIRED", "{answer}");

    // On the websocket too: a subscription by id runs, other text is an
    // `error` for its operation.
    let identity = json!({ "x-riverfeed-tenant": "acme", "x-riverfeed-user": "alice" });
    let mut ws = WsClient::connect(&server.ws_url(), identity).await;
    ws.send(json!({ "id": "free", "type": "subscribe", "payload": { "query": "subscription { feedEvents { kind } }" } }))
        .await;
    let error = ws.next().await.expect("an error");
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(
        error["payload"][0]["extensions"]["code"],
        "TRUSTED_DOCUMENT_REQUIRED"
    );
    ws.send(json!({ "id": "live", "type": "subscribe", "payload": { "documentId": "live-1" } }))
        .await;
    server.wait_live_topics(1).await;
    let alice = server.client("acme", "alice");
    // The service's own mutations are not in the manifest either.
    assert_eq!(
        alice
            .error_code("mutation { follow(userId: \"bob\") }", json!({}))
            .await,
        "TRUSTED_DOCUMENT_REQUIRED"
    );
    server.stop().await;
}

#[tokio::test]
async fn logged_trusted_documents_run_anything() {
    let server = with_manifest(TrustMode::Log).await;
    let (_, answer) = post(&server, json!({ "query": "{ viewer { id } }" })).await;
    assert!(answer["data"]["viewer"]["id"].is_string(), "{answer}");
    let (_, answer) = post(&server, json!({ "documentId": "viewer-1" })).await;
    assert!(answer["data"]["viewer"].is_object(), "{answer}");
    server.stop().await;
}
