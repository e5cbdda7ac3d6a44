//! Garbage at every argument: each answer is an error with a code (the expected
//! one where the cause is known), nothing panics, and the server stays healthy.

use serde_json::{json, Value};

use crate::common::{Backend, TestServer};

struct Case<'a> {
    name: &'static str,
    query: &'a str,
    variables: Value,
    code: &'static str,
}

fn case<'a>(name: &'static str, query: &'a str, variables: Value, code: &'static str) -> Case<'a> {
    Case {
        name,
        query,
        variables,
        code,
    }
}

const FEED: &str = "query($first: Int, $after: String, $last: Int, $before: String) { feed(first: $first, after: $after, last: $last, before: $before) { edges { cursor } } }";
const SLICE: &str =
    "query($ref: String!, $first: Int, $after: String) { slice(refId: $ref, first: $first, after: $after) { edges { cursor } } }";
const ACTION: &str = "query($id: ID!) { action(actionId: $id) { actionId } }";
const ACTIONS: &str = "query($ids: [ID!]!) { actions(actionIds: $ids) { actionId } }";
const USER: &str = "query($id: ID!) { user(userId: $id) { id } }";
const FOLLOWERS: &str = "query($first: Int, $after: String) { viewer { followers(first: $first, after: $after) { edges { cursor } } } }";
const UPSERT: &str =
    "mutation($id: ID!, $name: String!) { upsertUser(input: {userId: $id, name: $name}) { id } }";
const RECORD: &str =
    "mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId } }";
const FOLLOW: &str = "mutation($u: ID!) { follow(userId: $u) }";
const UNFOLLOW: &str = "mutation($u: ID!) { unfollow(userId: $u) }";
const BEFRIEND: &str = "mutation($u: ID!) { befriend(userId: $u) }";
const UNFRIEND: &str = "mutation($u: ID!) { unfriend(userId: $u) }";
const JOIN: &str =
    "mutation($g: ID!, $k: GroupKind!) { joinGroup(groupId: $g, kind: $k) { groupId } }";
const LEAVE: &str = "mutation($g: ID!) { leaveGroup(groupId: $g) }";
const HIDE: &str = "mutation($id: ID!) { hideAction(actionId: $id) { id } }";
const DELETE: &str = "mutation($id: ID!) { deleteAction(actionId: $id) }";
const HIDE_ITEM: &str = "mutation($id: ID!) { hideFeedItem(actionId: $id) }";

fn status(text: Value) -> Value {
    json!({ "descriptor": { "statusPost": { "text": text } } })
}

fn rating(score: f64, rater: &str) -> Value {
    json!({ "descriptor": { "applicationRating": {
        "raterId": rater, "raterName": "R", "positionId": "p", "positionName": "P",
        "applicantId": "a", "applicantName": "A", "ratingScore": score
    }}})
}

async fn every_bad_argument_gets_a_coded_error(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    // Also a service: these cases are about arguments, not roles.
    let alice = server.client_with(Some(("acme", "alice", Some("user,service"))));
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    server
        .service("acme")
        .add_member("t1", "TEAM", "alice")
        .await;
    let mine = alice.post_status("mine", json!({})).await;
    alice.wait_delivered(&mine).await;
    let (_, info) = alice.feed_ids("(first: 1)").await;
    let alice_cursor = info["endCursor"].as_str().unwrap().to_owned();
    let long = "x".repeat(300);
    let huge = "y".repeat(11 * 1024);
    let unknown_id = "5f0000000000000000000000";
    let many_ids: Vec<String> = (0..101).map(|i| format!("{i:024x}")).collect();
    let many_refs: Vec<String> = (0..101).map(|i| format!("ref-{i}")).collect();

    // Followers of followers… nested past the depth limit.
    let mut deep = String::from("id");
    for _ in 0..8 {
        deep = format!("followers {{ edges {{ node {{ {deep} }} }} }}");
    }
    let too_deep = format!("{{ viewer {{ {deep} }} }}");
    // Fragments that each spread the next twice: 2^26 fields in 1 KB (under the
    // parser's recursion limit, which deeper bombs hit first).
    let mut bomb = String::from("{ ...F0 }\n");
    for i in 0..26 {
        bomb.push_str(&format!(
            "fragment F{i} on Query {{ ...F{} ...F{} }}\n",
            i + 1,
            i + 1
        ));
    }
    bomb.push_str("fragment F26 on Query { __typename }\n");
    let alias_flood: String = format!(
        "{{ {} }}",
        (0..300)
            .map(|i| format!("a{i}: __typename "))
            .collect::<String>()
    );
    let write_flood: String = format!(
        "mutation {{ {} }}",
        (0..17)
            .map(|i| format!("w{i}: unfollow(userId: \"bob\") "))
            .collect::<String>()
    );
    let bob_post = bob.post_status("bob's own", json!({})).await;
    bob.wait_delivered(&bob_post).await;
    let (_, bob_info) = bob.feed_ids("(first: 1)").await;
    let bob_cursor = bob_info["endCursor"].as_str().unwrap().to_owned();
    // Three nested pages of 100: a million users for one request.
    let too_costly = "{ feed(first: 100) { edges { node { action { actor { followers(first: 100) { edges { node { followers(first: 100) { edges { node { id } } } } } } } } } } } }";
    let cases = vec![
        case(
            "feed first < 0",
            FEED,
            json!({ "first": -1 }),
            "BAD_USER_INPUT",
        ),
        case(
            "feed first > 100",
            FEED,
            json!({ "first": 101 }),
            "BAD_USER_INPUT",
        ),
        case(
            "feed last > 100",
            FEED,
            json!({ "last": 1000 }),
            "BAD_USER_INPUT",
        ),
        case(
            "feed first and last",
            FEED,
            json!({ "first": 1, "last": 1 }),
            "BAD_USER_INPUT",
        ),
        case(
            "feed first not an int",
            FEED,
            json!({ "first": "ten" }),
            "BAD_USER_INPUT",
        ),
        case(
            "feed first overflows",
            FEED,
            json!({ "first": 1e12 }),
            "BAD_USER_INPUT",
        ),
        case(
            "feed garbage after",
            FEED,
            json!({ "after": "!!!" }),
            "BAD_USER_INPUT",
        ),
        case(
            "feed garbage before",
            FEED,
            json!({ "before": "AAAA" }),
            "BAD_USER_INPUT",
        ),
        case(
            "feed empty cursor",
            FEED,
            json!({ "after": "" }),
            "BAD_USER_INPUT",
        ),
        case(
            "slice empty ref",
            SLICE,
            json!({ "ref": "" }),
            "BAD_USER_INPUT",
        ),
        case(
            "slice long ref",
            SLICE,
            json!({ "ref": long }),
            "BAD_USER_INPUT",
        ),
        case(
            "slice control chars",
            SLICE,
            json!({ "ref": "a\nb" }),
            "BAD_USER_INPUT",
        ),
        case(
            "slice first > 100",
            SLICE,
            json!({ "ref": "r", "first": 500 }),
            "BAD_USER_INPUT",
        ),
        case(
            "slice home cursor",
            SLICE,
            json!({ "ref": "r", "after": alice_cursor }),
            "BAD_USER_INPUT",
        ),
        case("slice missing ref", SLICE, json!({}), "BAD_USER_INPUT"),
        case(
            "action empty id",
            ACTION,
            json!({ "id": "" }),
            "BAD_USER_INPUT",
        ),
        case(
            "action short id",
            ACTION,
            json!({ "id": "123" }),
            "BAD_USER_INPUT",
        ),
        case(
            "action non-hex id",
            ACTION,
            json!({ "id": "zzzzzzzzzzzzzzzzzzzzzzzz" }),
            "BAD_USER_INPUT",
        ),
        case(
            "action huge id",
            ACTION,
            json!({ "id": huge }),
            "BAD_USER_INPUT",
        ),
        case(
            "action id object",
            ACTION,
            json!({ "id": { "a": 1 } }),
            "BAD_USER_INPUT",
        ),
        case(
            "actions bad id",
            ACTIONS,
            json!({ "ids": [mine, "nope"] }),
            "BAD_USER_INPUT",
        ),
        case(
            "actions too many",
            ACTIONS,
            json!({ "ids": many_ids }),
            "BAD_USER_INPUT",
        ),
        case(
            "actions null entry",
            ACTIONS,
            json!({ "ids": [null] }),
            "BAD_USER_INPUT",
        ),
        case("user empty id", USER, json!({ "id": "" }), "BAD_USER_INPUT"),
        case(
            "user long id",
            USER,
            json!({ "id": long }),
            "BAD_USER_INPUT",
        ),
        case(
            "followers first < 0",
            FOLLOWERS,
            json!({ "first": -3 }),
            "BAD_USER_INPUT",
        ),
        case(
            "followers feed cursor",
            FOLLOWERS,
            json!({ "after": alice_cursor }),
            "BAD_USER_INPUT",
        ),
        case(
            "upsert empty id",
            UPSERT,
            json!({ "id": "", "name": "x" }),
            "BAD_USER_INPUT",
        ),
        case(
            "upsert huge name",
            UPSERT,
            json!({ "id": "u", "name": huge }),
            "BAD_USER_INPUT",
        ),
        case(
            "upsert missing name",
            UPSERT,
            json!({ "id": "u" }),
            "BAD_USER_INPUT",
        ),
        case(
            "record no descriptor",
            RECORD,
            json!({ "input": { "descriptor": {} } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record two descriptors",
            RECORD,
            json!({ "input": { "descriptor": { "statusPost": { "text": "a" }, "newApplicant": {
                "applicantId": "a", "applicantName": "A", "positionId": "p", "positionName": "P" } } } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record unknown descriptor",
            RECORD,
            json!({ "input": { "descriptor": { "tweet": { "text": "a" } } } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record empty text",
            RECORD,
            json!({ "input": status(json!("  ")) }),
            "BAD_USER_INPUT",
        ),
        case(
            "record huge text",
            RECORD,
            json!({ "input": status(json!(huge)) }),
            "BAD_USER_INPUT",
        ),
        case(
            "record text not a string",
            RECORD,
            json!({ "input": status(json!(42)) }),
            "BAD_USER_INPUT",
        ),
        case(
            "record score out of range",
            RECORD,
            json!({ "input": rating(7.5, "r") }),
            "BAD_USER_INPUT",
        ),
        case(
            "record empty rater",
            RECORD,
            json!({ "input": rating(4.0, "") }),
            "BAD_USER_INPUT",
        ),
        case(
            "record bad scope",
            RECORD,
            json!({ "input": { "descriptor": { "statusPost": { "text": "a" } }, "scope": "GLOBAL" } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record readers on public",
            RECORD,
            json!({ "input": { "descriptor": { "statusPost": { "text": "a" } }, "readers": ["bob"] } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record restricted without readers",
            RECORD,
            json!({ "input": { "descriptor": { "statusPost": { "text": "a" } }, "scope": "RESTRICTED" } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record unknown reader",
            RECORD,
            json!({ "input": { "descriptor": { "statusPost": { "text": "a" } }, "scope": "RESTRICTED", "readers": ["ghost"] } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record department without one",
            RECORD,
            json!({ "input": { "descriptor": { "statusPost": { "text": "a" } }, "scope": "DEPARTMENT" } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record too many refs",
            RECORD,
            json!({ "input": { "descriptor": { "statusPost": { "text": "a" } }, "refIds": many_refs } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record bad tag",
            RECORD,
            json!({ "input": { "descriptor": { "statusPost": { "text": "a" } }, "tags": ["ok", "\u{0007}"] } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record future",
            RECORD,
            json!({ "input": { "descriptor": { "statusPost": { "text": "a" } }, "conducted": "2999-01-01T00:00:00Z" } }),
            "BAD_USER_INPUT",
        ),
        case(
            "record bad date",
            RECORD,
            json!({ "input": { "descriptor": { "statusPost": { "text": "a" } }, "conducted": "yesterday" } }),
            "BAD_USER_INPUT",
        ),
        case("follow empty", FOLLOW, json!({ "u": "" }), "BAD_USER_INPUT"),
        case(
            "follow unknown",
            FOLLOW,
            json!({ "u": "ghost" }),
            "BAD_USER_INPUT",
        ),
        case(
            "follow self",
            FOLLOW,
            json!({ "u": "alice" }),
            "BAD_USER_INPUT",
        ),
        case(
            "follow long",
            FOLLOW,
            json!({ "u": long }),
            "BAD_USER_INPUT",
        ),
        case(
            "unfollow empty",
            UNFOLLOW,
            json!({ "u": "" }),
            "BAD_USER_INPUT",
        ),
        case(
            "befriend unknown",
            BEFRIEND,
            json!({ "u": "ghost" }),
            "BAD_USER_INPUT",
        ),
        case(
            "unfriend control",
            UNFRIEND,
            json!({ "u": "a\tb" }),
            "BAD_USER_INPUT",
        ),
        case(
            "join empty group",
            JOIN,
            json!({ "g": "", "k": "TEAM" }),
            "BAD_USER_INPUT",
        ),
        case(
            "join bad kind",
            JOIN,
            json!({ "g": "g", "k": "CLUB" }),
            "BAD_USER_INPUT",
        ),
        case(
            "join with other kind",
            JOIN,
            json!({ "g": "t1", "k": "DEPARTMENT" }),
            "BAD_USER_INPUT",
        ),
        case(
            "leave empty group",
            LEAVE,
            json!({ "g": "" }),
            "BAD_USER_INPUT",
        ),
        case("hide bad id", HIDE, json!({ "id": "x" }), "BAD_USER_INPUT"),
        case(
            "hide unknown",
            HIDE,
            json!({ "id": unknown_id }),
            "NOT_FOUND",
        ),
        case(
            "delete bad id",
            DELETE,
            json!({ "id": "x" }),
            "BAD_USER_INPUT",
        ),
        case(
            "delete unknown",
            DELETE,
            json!({ "id": unknown_id }),
            "NOT_FOUND",
        ),
        case(
            "hide item bad id",
            HIDE_ITEM,
            json!({ "id": "💥" }),
            "BAD_USER_INPUT",
        ),
        case(
            "syntax error",
            "{ feed { edges ",
            json!({}),
            "GRAPHQL_PARSE_FAILED",
        ),
        case(
            "unknown field",
            "{ feed { nope } }",
            json!({}),
            "GRAPHQL_VALIDATION_FAILED",
        ),
        case(
            "literal wrong type",
            "{ feed(first: \"x\") { edges { cursor } } }",
            json!({}),
            "BAD_USER_INPUT",
        ),
        case(
            "too deep",
            &too_deep,
            json!({}),
            "GRAPHQL_VALIDATION_FAILED",
        ),
        case(
            "nested pages too costly",
            too_costly,
            json!({}),
            "GRAPHQL_VALIDATION_FAILED",
        ),
        case(
            "fragment bomb",
            &bomb,
            json!({}),
            "GRAPHQL_VALIDATION_FAILED",
        ),
        case(
            "alias flood",
            &alias_flood,
            json!({}),
            "GRAPHQL_VALIDATION_FAILED",
        ),
        case(
            "seventeen writes in one mutation",
            &write_flood,
            json!({}),
            "BAD_USER_INPUT",
        ),
        case(
            "following first > 100",
            "{ viewer { following(first: 101) { edges { cursor } } } }",
            json!({}),
            "BAD_USER_INPUT",
        ),
        case(
            "friends bad cursor",
            "{ viewer { friends(after: \"zz\") { edges { cursor } } } }",
            json!({}),
            "BAD_USER_INPUT",
        ),
        case(
            "join bad role",
            "mutation { joinGroup(groupId: \"g\", kind: TEAM, role: KING) { groupId } }",
            json!({}),
            "BAD_USER_INPUT",
        ),
        case(
            "another reader's cursor",
            FEED,
            json!({ "after": bob_cursor }),
            "BAD_USER_INPUT",
        ),
        case(
            "subscription over HTTP",
            "subscription { feedEvents { kind } }",
            json!({}),
            "BAD_REQUEST",
        ),
    ];

    let mut failures = Vec::new();
    for case in &cases {
        let body = alice.post(case.query, case.variables.clone()).await;
        let errors = body["errors"].as_array().cloned().unwrap_or_default();
        if errors.is_empty() {
            failures.push(format!("{}: no error: {body}", case.name));
            continue;
        }
        if let Some(err) = errors.iter().find(|e| !e["extensions"]["code"].is_string()) {
            failures.push(format!("{}: error without a code: {err}", case.name));
            continue;
        }
        let code = errors[0]["extensions"]["code"].as_str().unwrap_or_default();
        if code != case.code {
            failures.push(format!(
                "{}: expected {}, got {code}: {body}",
                case.name, case.code
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );

    // Nothing was half done: the bad requests left no trace.
    let (ids, _) = alice.feed_ids("").await;
    assert_eq!(ids, vec![mine], "only the one good action exists");
    let health = reqwest::get(format!("{}/healthz", server.base))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    server.stop().await;
}

async fn bad_bodies_and_identities_get_coded_errors(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let http = reqwest::Client::new();
    let url = format!("{}/graphql", server.base);
    let post = |body: Vec<u8>, content_type: &'static str| {
        http.post(&url)
            .header("content-type", content_type)
            .header("x-riverfeed-tenant", "acme")
            .header("x-riverfeed-user", "alice")
            .body(body)
            .send()
    };
    for (body, content_type, status, code) in [
        (b"not json".to_vec(), "application/json", 400, "BAD_REQUEST"),
        (
            b"{\"query\": 5}".to_vec(),
            "application/json",
            400,
            "BAD_REQUEST",
        ),
        (
            vec![0xff, 0xfe, 0x00],
            "application/json",
            400,
            "BAD_REQUEST",
        ),
        (
            vec![b' '; 2 * 1024 * 1024],
            "application/json",
            413,
            "PAYLOAD_TOO_LARGE",
        ),
    ] {
        let response = post(body, content_type).await.unwrap();
        assert_eq!(response.status(), status);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["errors"][0]["extensions"]["code"], code, "{body}");
    }

    let batch: Vec<Value> = (0..17)
        .map(|_| json!({ "query": "{ viewer { userId } }" }))
        .collect();
    let response = http
        .post(&url)
        .header("x-riverfeed-tenant", "acme")
        .header("x-riverfeed-user", "alice")
        .json(&batch)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "BAD_REQUEST",
        "{body}"
    );

    for (method, path, status, code) in [
        ("GET", "/nowhere", 404, "NOT_FOUND"),
        ("PUT", "/graphql", 405, "METHOD_NOT_ALLOWED"),
        ("DELETE", "/healthz", 405, "METHOD_NOT_ALLOWED"),
        ("GET", "/graphql/ws", 400, "BAD_REQUEST"),
    ] {
        let response = http
            .request(method.parse().unwrap(), format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{method} {path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            body["errors"][0]["extensions"]["code"], code,
            "{method} {path}: {body}"
        );
    }

    for (tenant, user) in [("acme", ""), ("", "alice"), ("acme", &*"u".repeat(300))] {
        let response = http
            .post(&url)
            .header("x-riverfeed-tenant", tenant)
            .header("x-riverfeed-user", user)
            .json(&json!({ "query": "{ viewer { userId } }" }))
            .send()
            .await
            .unwrap();
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            body["errors"][0]["extensions"]["code"], "UNAUTHENTICATED",
            "{tenant:?}/{user:?}: {body}"
        );
    }
    server.stop().await;
}

/// Parsed and validated documents are kept by their text: asking again must
/// answer as the first time did, for good and bad requests alike, and a text
/// that passed without variables must still have its variables checked.
async fn repeated_texts_answer_as_the_first_time(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let alice = server.client("acme", "alice");
    let good = "{ viewer { userId } }";
    for _ in 0..3 {
        assert_eq!(
            alice.data(good, json!({})).await["viewer"]["userId"],
            "alice"
        );
    }
    let bad = "{ viewer { userId nosuchfield } }";
    for _ in 0..3 {
        assert_eq!(
            alice.error_code(bad, json!({})).await,
            "GRAPHQL_VALIDATION_FAILED"
        );
    }
    let with_variables = "query($first: Int) { feed(first: $first) { edges { cursor } } }";
    assert!(alice.data(with_variables, json!({})).await["feed"]["edges"].is_array());
    assert!(alice.data(with_variables, json!({ "first": 5 })).await["feed"]["edges"].is_array());
    for _ in 0..2 {
        assert_eq!(
            alice
                .error_code(with_variables, json!({ "first": "five" }))
                .await,
            "BAD_USER_INPUT"
        );
    }
    server.stop().await;
}

crate::on_both_backends!(
    every_bad_argument_gets_a_coded_error,
    bad_bodies_and_identities_get_coded_errors,
    repeated_texts_answer_as_the_first_time,
);
