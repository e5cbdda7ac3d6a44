//! Errors that say how to fix them: each names what was expected or given,
//! with the code a client branches on. The wording comes from the API
//! layer, the same on every backend, so each is proven once, on the
//! embedded store.

use serde_json::{json, Value};

use crate::common::{Backend, Client, TestServer};

const RECORD: &str =
    "mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId } }";

/// The first error's message and code.
async fn first_error(client: &Client, query: &str, variables: Value) -> (String, String) {
    let body = client.post(query, variables).await;
    let error = &body["errors"][0];
    let text = |v: &Value| {
        v.as_str()
            .unwrap_or_else(|| panic!("an error: {body:#}"))
            .to_owned()
    };
    (text(&error["message"]), text(&error["extensions"]["code"]))
}

#[tokio::test]
async fn errors_say_how_to_mend_the_request() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let ann = server.client("acme", "ann");
    let status = json!({ "statusPost": { "text": "hi" } });

    // A DateTime names its format, with an example.
    let (message, code) = first_error(
        &ann,
        RECORD,
        json!({ "input": { "descriptor": status, "conducted": "yesterday" } }),
    )
    .await;
    assert_eq!(code, "BAD_USER_INPUT");
    assert!(
        message.contains("RFC 3339") && message.contains("2026-11-28T09:30:00Z"),
        "{message}"
    );

    // A @oneOf input given two fields says so, naming both, in a literal
    // and in a variable alike.
    let two = json!({ "statusPost": { "text": "hi" }, "applicantHired": { "applicantId": "a1",
        "applicantName": "Mary", "positionId": "p1", "positionName": "Engineer" } });
    let literal = "mutation { recordAction(input: { descriptor: { statusPost: { text: \"hi\" }, \
        applicantHired: { applicantId: \"a1\", applicantName: \"Mary\", positionId: \"p1\", \
        positionName: \"Engineer\" } } }) { actionId } }";
    for (query, variables) in [
        (literal, json!({})),
        (RECORD, json!({ "input": { "descriptor": two } })),
    ] {
        let (message, code) = first_error(&ann, query, variables).await;
        assert_eq!(code, "BAD_USER_INPUT");
        assert_eq!(
            message,
            "`input.descriptor` takes exactly one of its fields (it is a @oneOf input), \
             but 2 were given: `statusPost`, `applicantHired`"
        );
    }

    // An expiry already past, with no time of its own, must be in the future.
    let (message, code) = first_error(
        &ann,
        RECORD,
        json!({ "input": { "descriptor": status, "expiresAt": "2020-01-01T00:00:00Z" } }),
    )
    .await;
    assert_eq!(
        (message.as_str(), code.as_str()),
        ("input.expiresAt must be in the future", "BAD_USER_INPUT")
    );

    // An unknown argument or field suggests the nearest name, a swapped
    // pair of letters included.
    let (message, code) =
        first_error(&ann, "{ feed(frist: 3) { edges { curosr } } }", json!({})).await;
    assert_eq!(code, "GRAPHQL_VALIDATION_FAILED");
    assert!(message.ends_with("Did you mean \"first\"?"), "{message}");
    let body = ann
        .post("{ feed(frist: 3) { edges { curosr } } }", json!({}))
        .await;
    let second = body["errors"][1]["message"].as_str().unwrap_or_default();
    assert!(second.ends_with("Did you mean \"cursor\"?"), "{body:#}");

    // A group no one joined is not found, for its feed as for a follow.
    let group_feed = "{ groupFeed(groupId: \"nowhere\") { edges { cursor } } }";
    let follow = "mutation { followGroup(groupId: \"nowhere\") }";
    for query in [group_feed, follow] {
        let (message, code) = first_error(&ann, query, json!({})).await;
        assert_eq!(code, "NOT_FOUND", "{query}");
        assert!(message.contains("no group nowhere"), "{message}");
    }
    server.stop().await;
}
