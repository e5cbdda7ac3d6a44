//! Which web pages may call (CORS): a listed origin's preflight is answered
//! with what the transports need, its requests carry the headers a browser
//! reads, and any other origin is refused, over HTTP and websockets alike.
//! The browser's side is in `tests/browser/cors.test.mjs`.

use reqwest::header::HeaderMap;
use reqwest::{Method, Response};
use riverfeed::http::cors::Origins;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::{hs256, start, token};
use crate::common::{first_error_code, Backend, TestServer};

const APP: &str = "https://app.example.com";
const OTHER: &str = "https://evil.example";

async fn tokens_server(origins: Option<Origins>) -> TestServer {
    start(Backend::Embedded, hs256(), |o| o.cors_origins = origins)
        .await
        .expect("the embedded store is always there")
}

/// A browser's preflight for a JSON POST with a token.
async fn preflight(server: &TestServer, origin: &str) -> Response {
    reqwest::Client::new()
        .request(Method::OPTIONS, format!("{}/graphql", server.base))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .send()
        .await
        .expect("sent")
}

/// The POST itself, as the page sends it.
async fn post(server: &TestServer, origin: Option<&str>) -> Response {
    let mut request = reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .bearer_auth(token("acme", "alice", &[]))
        .json(&json!({ "query": "{ viewer { userId } }" }));
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.expect("sent")
}

/// Whether a websocket from a page of `origin` opens.
async fn websocket_opens(server: &TestServer, origin: &str) -> bool {
    let mut request = server.ws_url().into_client_request().expect("ws request");
    let headers = request.headers_mut();
    headers.insert("origin", origin.parse().expect("header"));
    headers.insert(
        "sec-websocket-protocol",
        "graphql-transport-ws".parse().expect("header"),
    );
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => true,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 403);
            false
        }
        Err(other) => panic!("the upgrade neither opened nor was refused: {other}"),
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).map(|v| v.to_str().expect("ascii"))
}

/// A refusal: 403 `FORBIDDEN` naming the flag, and nothing that would let
/// a browser hand the page the answer.
async fn assert_refused(response: Response) {
    assert_eq!(response.status(), 403);
    assert_eq!(
        header(response.headers(), "access-control-allow-origin"),
        None
    );
    let body: Value = response.json().await.expect("json");
    assert_eq!(first_error_code(&body).as_deref(), Some("FORBIDDEN"));
    let message = body["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--cors-origins"), "{message}");
}

#[tokio::test]
async fn a_listed_origin_is_answered_and_any_other_refused() {
    let server = tokens_server(Some(Origins::parse(APP).unwrap())).await;

    let answer = preflight(&server, APP).await;
    assert_eq!(answer.status(), 204);
    let headers = answer.headers();
    assert_eq!(header(headers, "access-control-allow-origin"), Some(APP));
    assert_eq!(
        header(headers, "access-control-allow-credentials"),
        Some("true")
    );
    assert_eq!(header(headers, "access-control-max-age"), Some("7200"));
    assert_eq!(header(headers, "vary"), Some("origin"));
    let methods = header(headers, "access-control-allow-methods").unwrap();
    for method in ["GET", "POST"] {
        assert!(methods.contains(method), "{methods}");
    }
    // What each transport sends: JSON, what it accepts (an event stream,
    // multipart), the token, and dev mode's identity.
    let allowed = header(headers, "access-control-allow-headers").unwrap();
    for name in [
        "content-type",
        "accept",
        "authorization",
        "x-riverfeed-tenant",
        "x-riverfeed-user",
        "x-riverfeed-roles",
    ] {
        assert!(allowed.contains(name), "{name} in {allowed}");
    }

    let answer = post(&server, Some(APP)).await;
    assert_eq!(answer.status(), 200);
    let headers = answer.headers();
    assert_eq!(header(headers, "access-control-allow-origin"), Some(APP));
    assert_eq!(
        header(headers, "access-control-allow-credentials"),
        Some("true")
    );
    assert_eq!(
        header(headers, "access-control-expose-headers"),
        Some("retry-after")
    );
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["data"]["viewer"]["userId"], "alice", "{body}");

    assert_refused(preflight(&server, OTHER).await).await;
    assert_refused(post(&server, Some(OTHER)).await).await;
    // A port is part of the origin.
    assert_refused(post(&server, Some("https://app.example.com:8443")).await).await;
    assert!(websocket_opens(&server, APP).await);
    assert!(!websocket_opens(&server, OTHER).await);

    // Not a browser (no Origin): served, and told the answer varies.
    let answer = post(&server, None).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(
        header(answer.headers(), "access-control-allow-origin"),
        None
    );
    assert_eq!(header(answer.headers(), "vary"), Some("origin"));
    server.stop().await;
}

#[tokio::test]
async fn with_tokens_and_no_list_only_the_servers_own_pages_call() {
    let server = tokens_server(None).await;
    // GraphiQL and the demo, served by the server itself.
    let own = server.base.clone();
    let answer = post(&server, Some(&own)).await;
    assert_eq!(answer.status(), 200);
    assert_refused(post(&server, Some("http://localhost:5173")).await).await;
    assert_refused(preflight(&server, "http://localhost:5173").await).await;
    assert!(websocket_opens(&server, &own).await);
    assert!(!websocket_opens(&server, "http://localhost:5173").await);
    server.stop().await;
}

#[tokio::test]
async fn any_origin_is_answered_without_credentials() {
    let server = tokens_server(Some(Origins::parse("*").unwrap())).await;
    let answer = preflight(&server, OTHER).await;
    assert_eq!(answer.status(), 204);
    let headers = answer.headers();
    assert_eq!(header(headers, "access-control-allow-origin"), Some("*"));
    assert_eq!(header(headers, "access-control-allow-credentials"), None);
    assert_eq!(header(headers, "vary"), None);
    assert_eq!(post(&server, Some(OTHER)).await.status(), 200);
    assert!(websocket_opens(&server, OTHER).await);
    server.stop().await;
}

#[tokio::test]
async fn dev_mode_keeps_this_machines_pages_beside_the_listed_origins() {
    let (store, dir) = crate::common::store_url(Backend::Embedded).expect("embedded");
    let server = TestServer::start_with(crate::common::Stopped { store, dir }, |store| {
        let mut options = riverfeed::server::ServeOptions::new(store);
        options.cors_origins = Some(Origins::parse(APP).unwrap());
        options
    })
    .await;
    for origin in [APP, "http://localhost:5173", "http://127.0.0.1:3000"] {
        let answer = preflight(&server, origin).await;
        assert_eq!(answer.status(), 204, "{origin}");
        assert_eq!(
            header(answer.headers(), "access-control-allow-origin"),
            Some(origin)
        );
        assert!(websocket_opens(&server, origin).await, "{origin}");
    }
    assert_refused(preflight(&server, OTHER).await).await;
    assert!(!websocket_opens(&server, OTHER).await);
    server.stop().await;
}
