//! GraphQL over HTTP as the specification has it: the media type the client
//! accepts, status codes with `application/graphql-response+json`, 405 with
//! `Allow`, 406 and 400.

use serde_json::{json, Value};

use crate::common::{Backend, TestServer};

const GRAPHQL_RESPONSE: &str = "application/graphql-response+json";

struct Answer {
    status: u16,
    content_type: String,
    allow: Option<String>,
    body: Value,
}

async fn post(server: &TestServer, accept: Option<&str>, body: &str) -> Answer {
    let mut request = reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .header("content-type", "application/json")
        .header("x-riverfeed-tenant", "acme")
        .header("x-riverfeed-user", "alice")
        .body(body.to_owned());
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    read_answer(request.send().await.expect("sent")).await
}

async fn read_answer(response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let content_type = header("content-type").unwrap_or_default();
    let allow = header("allow");
    let text = response.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        status,
        content_type,
        allow,
        body,
    }
}

async fn get(server: &TestServer, query: &str, accept: Option<&str>) -> Answer {
    let url =
        reqwest::Url::parse_with_params(&format!("{}/graphql", server.base), [("query", query)])
            .expect("a URL");
    let mut request = reqwest::Client::new()
        .get(url)
        .header("x-riverfeed-tenant", "acme")
        .header("x-riverfeed-user", "alice");
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    read_answer(request.send().await.expect("sent")).await
}

fn query(text: &str, variables: Value) -> String {
    json!({ "query": text, "variables": variables }).to_string()
}

#[tokio::test]
async fn responses_follow_graphql_over_http() {
    let server = TestServer::start(Backend::Embedded)
        .await
        .expect("embedded always runs");
    let ok = query("{ feed(first: 1) { edges { cursor } } }", json!({}));
    let unparsable = query("{ feed(", json!({}));
    let invalid = query("{ noSuchField }", json!({}));
    let uncoerced = query(
        "query($n: Int) { feed(first: $n) { edges { cursor } } }",
        json!({ "n": "many" }),
    );
    let not_found = query(
        "{ action(id: \"6b0000000000000000000000\") { actionId } }",
        json!({}),
    );

    // A client that asks for JSON only, or says nothing, or anything, gets
    // application/json; errors of a request ride on 200, as before.
    for accept in [Some("application/json"), None, Some("*/*")] {
        let answer = post(&server, accept, &ok).await;
        assert_eq!(answer.status, 200, "{accept:?}");
        assert!(
            answer.content_type.starts_with("application/json"),
            "{accept:?}: {}",
            answer.content_type
        );
        let failed = post(&server, accept, &unparsable).await;
        assert_eq!(failed.status, 200, "{accept:?}");
        assert!(failed.body["errors"].is_array());
    }

    // With the specification's own type: 4xx and no `data` for a request
    // that never ran; 200 with data for one that ran, errors and all.
    let accept = Some("application/graphql-response+json, application/json;q=0.9");
    let answer = post(&server, accept, &ok).await;
    assert_eq!(answer.status, 200);
    assert!(answer.content_type.starts_with(GRAPHQL_RESPONSE));
    assert!(answer.body["data"]["feed"].is_object());
    for (what, body) in [
        ("does not parse", &unparsable),
        ("does not validate", &invalid),
        ("variables do not coerce", &uncoerced),
    ] {
        let failed = post(&server, accept, body).await;
        assert_eq!(failed.status, 400, "{what}: {}", failed.body);
        assert!(failed.content_type.starts_with(GRAPHQL_RESPONSE), "{what}");
        assert!(failed.body.get("data").is_none(), "{what}: {}", failed.body);
        assert!(failed.body["errors"][0]["message"].is_string(), "{what}");
    }
    let ran = post(&server, accept, &not_found).await;
    assert_eq!(ran.status, 200, "{}", ran.body);
    assert!(ran.body.get("data").is_some());

    // Preference by weight: JSON weighed higher wins.
    let answer = post(
        &server,
        Some("application/graphql-response+json;q=0.5, application/json"),
        &unparsable,
    )
    .await;
    assert_eq!(answer.status, 200);
    assert!(answer.content_type.starts_with("application/json"));

    // A client that accepts neither type is told so.
    let refused = post(&server, Some("text/html"), &ok).await;
    assert_eq!(refused.status, 406);
    assert_eq!(
        refused.body["errors"][0]["extensions"]["code"],
        "NOT_ACCEPTABLE"
    );

    // A missing or malformed body is 400, and so is one without a query.
    for body in ["", "{not json"] {
        let failed = post(&server, accept, body).await;
        assert_eq!(failed.status, 400, "{body:?}: {}", failed.body);
        assert_eq!(
            failed.body["errors"][0]["extensions"]["code"],
            "BAD_REQUEST"
        );
    }
    let failed = post(&server, accept, "{\"variables\": {}}").await;
    assert_eq!(failed.status, 400, "{}", failed.body);
    assert!(failed.body.get("data").is_none());

    // A mutation over GET is 405, saying which method to use.
    let refused = get(&server, "mutation { follow(userId: \"bob\") }", None).await;
    assert_eq!(refused.status, 405);
    assert_eq!(refused.allow.as_deref(), Some("POST"));

    // A query over GET negotiates the same way.
    let failed = get(&server, "{ noSuchField }", Some(GRAPHQL_RESPONSE)).await;
    assert_eq!(failed.status, 400);
    assert!(failed.body.get("data").is_none());
    server.stop().await;
}
