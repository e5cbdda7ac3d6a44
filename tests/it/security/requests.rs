//! What one request may cost the server: a caller without a token cannot
//! fill the persisted-query cache, a document is bounded in bytes and in
//! what it writes (its names' lengths too), a failing request answers a
//! bounded number of errors and is charged by its size, with or without a
//! token, and every list is priced.

use std::time::Duration;

use riverfeed::api::rate_limit::Budget;
use riverfeed::auth::Role;
use riverfeed::http::persisted::sha256_hex;
use serde_json::{json, Value};

use super::{as_user, hs256, start, token, VIEWER};
use crate::common::{first_error_code, Backend, TestServer};

async fn server(budget: Option<u64>) -> TestServer {
    start(Backend::Embedded, hs256(), |o| {
        if let Some(cost) = budget {
            // An hour's window: the bucket does not refill during the test.
            o.rate_limits = vec![(
                Role::User,
                Budget {
                    cost,
                    window: Duration::from_secs(3600),
                },
            )];
        }
    })
    .await
    .expect("the embedded store is always there")
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

async fn send(server: &TestServer, token: Option<&str>, body: Value) -> Answer {
    let mut request = reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("sent");
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.json().await.expect("JSON"),
    }
}

/// An APQ request: the hash, with the query when `register`.
fn apq(query: &str, register: bool) -> Value {
    let mut body = json!({ "extensions": { "persistedQuery": { "version": 1, "sha256Hash": sha256_hex(query) } } });
    if register {
        body["query"] = json!(query);
    }
    body
}

#[tokio::test]
async fn only_an_authenticated_caller_s_valid_query_is_kept_for_its_hash() {
    let server = server(None).await;
    let alice = token("acme", "alice", &[]);
    // Sent without a token, a query runs (as far as an anonymous caller
    // may) but is not kept: no one without an identity fills the cache.
    let anonymous: Vec<String> = (0..50)
        .map(|i| {
            format!(
                "query Anonymous{i} {{ __typename {} }}",
                "__typename ".repeat(90)
            )
        })
        .collect();
    for query in &anonymous {
        let answer = send(&server, None, apq(query, true)).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    for query in &anonymous {
        let answer = send(&server, Some(&alice), apq(query, false)).await;
        assert_eq!(
            first_error_code(&answer.body).as_deref(),
            Some("PERSISTED_QUERY_NOT_FOUND"),
            "{}",
            answer.body
        );
    }
    // With a token, a document that does not validate is not kept either.
    let invalid = "{ viewer { noSuchField } }";
    let answer = send(&server, Some(&alice), apq(invalid, true)).await;
    assert_eq!(
        first_error_code(&answer.body).as_deref(),
        Some("GRAPHQL_VALIDATION_FAILED")
    );
    let answer = send(&server, Some(&alice), apq(invalid, false)).await;
    assert_eq!(
        first_error_code(&answer.body).as_deref(),
        Some("PERSISTED_QUERY_NOT_FOUND")
    );
    // A client with a token and a valid query is served by hash after.
    let feed = "query Feed { viewer { userId } }";
    send(&server, Some(&alice), apq(feed, true)).await;
    let answer = send(&server, Some(&alice), apq(feed, false)).await;
    assert_eq!(
        answer.body["data"]["viewer"]["userId"], "alice",
        "{}",
        answer.body
    );

    // A document far past any real one is refused before it is read.
    let huge = format!("{{ {} }}", "__typename ".repeat(10_000));
    let answer = send(&server, Some(&alice), json!({ "query": huge })).await;
    assert_eq!(answer.status, 413);
    assert_eq!(
        first_error_code(&answer.body).as_deref(),
        Some("PAYLOAD_TOO_LARGE")
    );
    server.stop().await;
}

#[tokio::test]
async fn a_failing_request_answers_few_errors_and_pays_by_its_size() {
    /// A small budget, so that a few failures empty it.
    const BUDGET: u64 = 3_000;
    let server = server(Some(BUDGET)).await;
    let (alice, bob) = (token("acme", "alice", &[]), token("acme", "bob", &[]));
    // Two thousand unknown fields in a fragment no operation uses: an error
    // each, and nothing to run, so no complexity to charge.
    let fields: String = (0..2_000).map(|i| format!("unknownField{i:05} ")).collect();
    let flood = format!("{{ viewer {{ userId }} }} fragment Unused on Query {{ {fields} }}");
    let answer = send(&server, Some(&alice), json!({ "query": flood })).await;
    let errors = answer.body["errors"].as_array().expect("errors");
    assert!(errors.len() <= 21, "{} errors answered", errors.len());
    let last = errors.last().unwrap()["message"].as_str().unwrap();
    assert!(last.contains("more validation errors left out"), "{last}");
    let charged = BUDGET - left(&answer);
    assert!(
        charged >= (flood.len() / 64) as u64,
        "a failure of {} bytes was charged {charged}",
        flood.len()
    );
    // Failing over and over empties the bucket; then the server refuses
    // before it reads the document at all.
    let mut refused = None;
    for _ in 0..BUDGET / charged + 2 {
        let answer = send(&server, Some(&alice), json!({ "query": flood })).await;
        if answer.status == 429 {
            refused = Some(answer);
            break;
        }
    }
    let refused = refused.expect("the failures were charged until the bucket was empty");
    let errors = refused.body["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{}", refused.body);
    assert_eq!(
        first_error_code(&refused.body).as_deref(),
        Some("RATE_LIMITED")
    );
    assert!(refused.headers.contains_key("retry-after"));
    // Another caller is served meanwhile.
    let answer = send(
        &server,
        Some(&bob),
        json!({ "query": "{ viewer { userId } }" }),
    )
    .await;
    assert_eq!(
        answer.body["data"]["viewer"]["userId"], "bob",
        "{}",
        answer.body
    );
    server.stop().await;
}

#[tokio::test]
async fn every_list_is_priced_and_bounded() {
    let server = server(None).await;
    let alice = token("acme", "alice", &[]);
    // Bob likes alice's post: she has a notification group.
    let post = as_user(&server, "acme", "alice")
        .post_status("hello", json!({}))
        .await;
    as_user(&server, "acme", "bob")
        .data(
            "mutation($id: ID!) { like(actionId: $id) { likeCount } }",
            json!({ "id": post }),
        )
        .await;
    let groups = "{ notifications { nodes { notifications { id } } } }";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let answer = send(&server, Some(&alice), json!({ "query": groups })).await;
        if answer.body["data"]["notifications"]["nodes"][0]["notifications"][0]["id"].is_string() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no notification came: {}",
            answer.body
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A group keeps 200 notifications: asking for more is refused, like any
    // `first` past its list's bound.
    let answer = send(
        &server,
        Some(&alice),
        json!({ "query": "{ notifications { nodes { notifications(first: 100000) { id } } } }" }),
    )
    .await;
    assert_eq!(
        first_error_code(&answer.body).as_deref(),
        Some("BAD_USER_INPUT"),
        "{}",
        answer.body
    );
    // A hundred groups of up to 200 notifications each cost that much, and
    // pass the most a query may cost.
    let answer = send(
        &server,
        Some(&alice),
        json!({ "query": "{ notifications(first: 100) { nodes { notifications(first: 200) { id reason actorId } } } }" }),
    )
    .await;
    assert_eq!(
        first_error_code(&answer.body).as_deref(),
        Some("GRAPHQL_VALIDATION_FAILED"),
        "{}",
        answer.body
    );
    assert!(
        answer.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("complex"),
        "{}",
        answer.body
    );
    // The same at the default page size is an ordinary query.
    let answer = send(
        &server,
        Some(&alice),
        json!({ "query": "{ notifications { nodes { notifications { id } } } }" }),
    )
    .await;
    assert!(answer.body.get("errors").is_none(), "{}", answer.body);
    server.stop().await;
}

/// The `RateLimit` header's `r=`: what is left in the caller's bucket.
fn left(answer: &Answer) -> u64 {
    let value = answer.headers["ratelimit"].to_str().unwrap().to_owned();
    value
        .split(';')
        .find_map(|p| p.strip_prefix("r="))
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no r= in {value}"))
}

#[tokio::test]
async fn a_long_name_is_refused_before_validation_and_charged_without_a_token() {
    use riverfeed::model::limits::MAX_GRAPHQL_NAME_BYTES;
    /// The least budget a role may have.
    const BUDGET: u64 = 50_000;
    let server = server(Some(BUDGET)).await;
    // Each operation of a full batch names one unknown field of 60,000
    // characters: validation would compare it with every field of the type
    // to suggest one.
    let long = "f".repeat(60_000);
    let batch: Vec<Value> = (0..16)
        .map(|_| json!({ "query": format!("{{ {long} }}") }))
        .collect();
    let answer = send(&server, None, json!(batch)).await;
    assert_eq!(answer.status, 200);
    let items = answer.body.as_array().expect("a batch answer");
    assert_eq!(items.len(), 16);
    for item in items {
        assert_eq!(
            first_error_code(item).as_deref(),
            Some("GRAPHQL_VALIDATION_FAILED"),
            "{item:.300}"
        );
        let message = item["errors"][0]["message"].as_str().unwrap();
        // Refused by the document check, before validation: no "Unknown
        // field" and no suggestion, and the name is not echoed in full.
        assert!(
            message.contains("is 60000 bytes long")
                && message.contains(&format!("at most {MAX_GRAPHQL_NAME_BYTES} bytes")),
            "{message:.300}"
        );
        assert!(!message.contains("Did you mean"), "{message:.300}");
        assert!(message.len() < 200, "{message:.300}");
    }
    // Every operation was charged by its size (937 each), to the caller's
    // address; the bucket refills by about 14 a second meanwhile.
    let charged = BUDGET - left(&answer);
    assert!(
        charged >= 16 * 900,
        "a batch of 16 failures of 60 KB was charged {charged}"
    );
    // The same for a mutation, and for an argument's name.
    let answer = send(
        &server,
        None,
        json!({ "query": format!("mutation {{ {long} }}") }),
    )
    .await;
    let message = answer.body["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("is 60000 bytes long"), "{message:.300}");
    let answer = send(
        &server,
        None,
        json!({ "query": format!("{{ viewer({}: 1) {{ userId }} }}", &long[..200]) }),
    )
    .await;
    let message = answer.body["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("argument name") && message.contains("is 200 bytes long"),
        "{message:.300}"
    );
    // A name at the bound is validation's to judge, as any unknown name.
    let answer = send(
        &server,
        None,
        json!({ "query": format!("{{ {} }}", &long[..MAX_GRAPHQL_NAME_BYTES]) }),
    )
    .await;
    let message = answer.body["errors"][0]["message"].as_str().unwrap();
    assert!(message.starts_with("Unknown field"), "{message:.300}");
    // Failing again empties the address's bucket: then it is refused before
    // its document is read, while a caller with a token is served.
    let mut refused = None;
    for _ in 0..4 {
        let answer = send(&server, None, json!(batch)).await;
        if answer.status == 429 {
            refused = Some(answer);
            break;
        }
    }
    let refused = refused.expect("the failures emptied the bucket");
    assert!(refused.headers.contains_key("retry-after"));
    let alice = token("acme", "alice", &[]);
    let answer = send(&server, Some(&alice), json!({ "query": VIEWER })).await;
    assert_eq!(
        answer.body["data"]["viewer"]["userId"], "alice",
        "{}",
        answer.body
    );
    server.stop().await;
}
