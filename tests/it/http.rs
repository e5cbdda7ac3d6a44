//! GraphQL over HTTP as the specification has it: the media type the client
//! accepts, status codes with `application/graphql-response+json`, 405 with
//! `Allow`, 406 and 400; and GraphiQL, served with everything it loads.

use reqwest::header::HeaderMap;
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
        "{ action(actionId: \"6b0000000000000000000000\") { actionId } }",
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

/// What a browser gets for one path: status and the headers that matter.
async fn fetch(server: &TestServer, path: &str) -> (u16, HeaderMap, Vec<u8>) {
    let response = reqwest::get(format!("{}{path}", server.base))
        .await
        .expect("sent");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await.expect("body").to_vec();
    (status, headers, body)
}

fn header_of<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
    headers
        .get(name)
        .map(|v| v.to_str().expect("ASCII"))
        .unwrap_or_default()
}

#[tokio::test]
async fn graphiql_comes_whole_from_the_binary() {
    let server = TestServer::start(Backend::Embedded)
        .await
        .expect("embedded always runs");
    let (status, headers, body) = fetch(&server, "/graphiql").await;
    assert_eq!(status, 200);
    assert!(header_of(&headers, "content-type").starts_with("text/html"));
    let policy = header_of(&headers, "content-security-policy");
    assert!(policy.contains("default-src 'none'"), "{policy}");
    assert!(policy.contains("script-src 'self';"), "{policy}");
    assert!(!policy.contains("http"), "{policy}");
    let page = String::from_utf8(body).expect("UTF-8");
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "the page names another host:\n{page}"
    );
    // Styles GraphiQL adds carry the nonce the page hands out, new each time.
    let nonce = policy
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a style nonce");
    assert!(page.contains(&format!("content=\"{nonce}\"")), "{page}");
    let (_, again, _) = fetch(&server, "/graphiql").await;
    assert!(!header_of(&again, "content-security-policy").contains(nonce));

    // Every file the page loads is the server's own and answers with its type.
    let assets: Vec<&str> = page
        .split(['"', '\''])
        .filter(|part| part.starts_with("/graphiql/assets/"))
        .collect();
    assert!(assets.len() >= 6, "scripts and styles: {assets:?}");
    for asset in &assets {
        let (status, headers, body) = fetch(&server, asset).await;
        assert_eq!(status, 200, "{asset}");
        let content_type = header_of(&headers, "content-type");
        let wanted = if asset.ends_with(".js") {
            "text/javascript"
        } else if asset.ends_with(".css") {
            "text/css"
        } else {
            panic!("an asset of no known type: {asset}")
        };
        assert!(content_type.starts_with(wanted), "{asset}: {content_type}");
        assert_eq!(header_of(&headers, "x-content-type-options"), "nosniff");
        assert!(body.len() > 100, "{asset} is empty");
        // The pinned bundles carry their version in their name, so they are
        // kept; the page's own files are checked every time.
        let cache = header_of(&headers, "cache-control");
        let versioned = asset.chars().any(|c| c.is_ascii_digit());
        assert_eq!(cache.contains("immutable"), versioned, "{asset}: {cache}");
    }
    for name in ["graphiql", "react-dom", "react", "page"] {
        assert!(
            assets
                .iter()
                .any(|a| a.starts_with(&format!("/graphiql/assets/{name}"))),
            "no {name} among {assets:?}"
        );
    }
    let (status, _, _) = fetch(&server, "/graphiql/assets/graphiql-0.0.0.min.js").await;
    assert_eq!(status, 404);
    server.stop().await;
}
