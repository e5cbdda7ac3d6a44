//! Rate limits on query cost: a token bucket per caller (tenant and `sub`),
//! per role, answered with 429, `Retry-After` and `RateLimit` headers on
//! HTTP, and refused the same way on streams and the websocket.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{store_url, Backend, Stopped, TestServer, WsClient};
use riverfeed::api::rate_limit::Budget;
use riverfeed::auth::{mint_hs256, Authenticator, Claims, JwtVerifier, Role};
use riverfeed::server::ServeOptions;

const SECRET: &[u8] = b"a-rate-limit-secret-of-32-bytes-or-more";

/// A page of 100 actions with 100 comments each: a costly query.
const COSTLY: &str =
    "{ feed(first: 100) { edges { node { action { comments(first: 100) { nodes { text } } } } } } }";

fn token(user: &str, roles: &[&str]) -> String {
    let now = chrono::Utc::now().timestamp() as u64;
    let claims = Claims {
        sub: user.into(),
        tenant: "acme".into(),
        roles: (!roles.is_empty()).then(|| roles.iter().map(|r| r.to_string()).collect()),
        exp: now + 600,
        iat: Some(now),
        iss: None,
        aud: None,
        nbf: None,
    };
    mint_hs256(&claims, SECRET).expect("mint")
}

async fn start() -> TestServer {
    let (store, dir) = store_url(Backend::Embedded).expect("embedded");
    TestServer::start_with(Stopped { store, dir }, |store| {
        let mut options = ServeOptions::new(store);
        options.auth = Arc::new(Authenticator::Jwt(Box::new(JwtVerifier::hs256(
            SECRET, None, None,
        ))));
        // An hour's window: the bucket does not refill during the test.
        options.rate_limits = vec![(
            Role::User,
            Budget {
                cost: 50_000,
                window: Duration::from_secs(3600),
            },
        )];
        options
    })
    .await
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

async fn send(server: &TestServer, token: &str, accept: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("authorization", format!("Bearer {token}"))
        .body(body.to_string())
        .send()
        .await
        .expect("sent")
}

async fn query(server: &TestServer, token: &str, query: &str) -> Answer {
    let response = send(server, token, "application/json", json!({ "query": query })).await;
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.json().await.expect("JSON"),
    }
}

fn header<'a>(answer: &'a Answer, name: &str) -> &'a str {
    answer
        .headers
        .get(name)
        .map(|v| v.to_str().expect("text"))
        .unwrap_or_else(|| panic!("no {name} header: {:?}", answer.headers))
}

/// `r` of a `RateLimit` header.
fn remaining(answer: &Answer) -> u64 {
    let value = header(answer, "ratelimit");
    value
        .split(';')
        .find_map(|p| p.strip_prefix("r="))
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no r= in {value}"))
}

/// Spends alice's budget; the first refusal.
async fn exhaust(server: &TestServer, alice: &str) -> Answer {
    let mut left = u64::MAX;
    for _ in 0..20 {
        let answer = query(server, alice, COSTLY).await;
        if answer.status == 429 {
            return answer;
        }
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(
            header(&answer, "ratelimit-policy"),
            "\"cost\";q=50000;w=3600"
        );
        let now = remaining(&answer);
        assert!(now < left, "each query costs: {now} after {left}");
        left = now;
    }
    panic!("the budget never ran out");
}

#[tokio::test]
async fn a_caller_over_budget_gets_429_with_when_to_retry() {
    let server = start().await;
    let (alice, bob) = (token("alice", &[]), token("bob", &[]));
    let refused = exhaust(&server, &alice).await;
    assert_eq!(
        refused.body["errors"][0]["extensions"]["code"], "RATE_LIMITED",
        "{}",
        refused.body
    );
    let retry: u64 = header(&refused, "retry-after").parse().expect("seconds");
    assert!(retry >= 1);
    assert_eq!(refused.body["errors"][0]["extensions"]["retryAfter"], retry);
    assert!(refused.body.get("data").is_none(), "{}", refused.body);

    // Another caller has a bucket of their own; a role without a budget is
    // not limited.
    let other = query(&server, &bob, COSTLY).await;
    assert_eq!(other.status, 200, "{}", other.body);
    let backend = token("app-backend", &["service"]);
    for _ in 0..4 {
        let answer = query(&server, &backend, COSTLY).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(answer.headers.get("ratelimit").is_none());
    }

    // A cheap query that still fits runs; the bucket is per caller, not
    // per query.
    let cheap = query(&server, &alice, "{ viewer { id } }").await;
    assert_eq!(cheap.status, 200, "{}", cheap.body);

    // Streams are refused before they start, with the same answer.
    let stream = send(
        &server,
        &alice,
        "text/event-stream",
        json!({ "query": format!("subscription {{ feedEvents {{ kind }} }}") }),
    )
    .await;
    assert_eq!(stream.status(), 200, "a subscription this cheap still fits");
    drop(stream);
    let costly_stream = send(
        &server,
        &alice,
        "text/event-stream",
        json!({ "query": COSTLY }),
    )
    .await;
    assert_eq!(costly_stream.status(), 429);
    assert!(costly_stream.headers().get("retry-after").is_some());

    // The websocket answers an `error` for the operation.
    let mut ws = WsClient::connect(&server.ws_url(), json!({ "token": alice })).await;
    ws.send(json!({ "id": "1", "type": "subscribe", "payload": { "query": COSTLY } }))
        .await;
    let error = ws.next().await.expect("an error");
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["payload"][0]["extensions"]["code"], "RATE_LIMITED");
    server.stop().await;
}

#[tokio::test]
async fn a_batch_refused_by_the_rate_limit_says_so_in_its_status_and_headers() {
    let server = start().await;
    let alice = token("alice", &[]);
    exhaust(&server, &alice).await;
    let batch = |queries: &[&str]| {
        let items: Vec<Value> = queries.iter().map(|q| json!({ "query": q })).collect();
        let server = &server;
        let alice = &alice;
        async move {
            let response = send(server, alice, "application/json", Value::Array(items)).await;
            Answer {
                status: response.status().as_u16(),
                headers: response.headers().clone(),
                body: response.json().await.expect("JSON"),
            }
        }
    };

    // Every item refused: the batch is refused, with when to retry.
    let refused = batch(&[COSTLY, COSTLY]).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(
        header(&refused, "retry-after")
            .parse::<u64>()
            .expect("seconds")
            >= 1
    );
    assert_eq!(
        header(&refused, "ratelimit-policy"),
        "\"cost\";q=50000;w=3600"
    );
    for item in refused.body.as_array().expect("a batch answer") {
        assert_eq!(item["errors"][0]["extensions"]["code"], "RATE_LIMITED");
    }

    // One item runs, one is refused: 200, and the headers still tell.
    let partly = batch(&["{ viewer { id } }", COSTLY]).await;
    assert_eq!(partly.status, 200, "{}", partly.body);
    assert!(
        partly.body[0]["data"]["viewer"]["id"].is_string(),
        "{}",
        partly.body
    );
    assert_eq!(
        partly.body[1]["errors"][0]["extensions"]["code"],
        "RATE_LIMITED"
    );
    assert!(
        header(&partly, "retry-after")
            .parse::<u64>()
            .expect("seconds")
            >= 1
    );
    remaining(&partly);
    server.stop().await;
}
