//! Ids that look the same are the same: an id is kept in Unicode's NFC,
//! and one holding an invisible or bidi control character is refused,
//! wherever it comes in (a token's claims, an argument, an input field).

use serde_json::{json, Value};

use super::{as_user, hs256, start, VIEWER};
use crate::common::{first_error_code, Backend};

/// The first error's code and message.
#[track_caller]
fn refusal(body: &Value) -> (String, String) {
    let code = first_error_code(body).unwrap_or_else(|| panic!("no error: {body}"));
    let message = body["errors"][0]["message"].as_str().expect("a message");
    (code, message.to_owned())
}

#[tokio::test]
async fn ids_differing_only_in_normalisation_or_hidden_characters_are_not_two_users() {
    let server = start(Backend::Embedded, hs256(), |_| {})
        .await
        .expect("embedded");
    let (decomposed, composed) = ("e\u{301}", "\u{e9}");

    // A token whose `sub` is `e` + U+0301 is the user `é`, and what it
    // records is found under `é`.
    let eve = as_user(&server, "acme", decomposed);
    let viewer = eve.data(VIEWER, json!({})).await;
    assert_eq!(viewer["viewer"]["userId"], composed, "{viewer}");
    let upserted = eve
        .data(
            "mutation($id: ID!) { upsertUser(input: { userId: $id, name: \"Eve\" }) { userId } }",
            json!({ "id": decomposed }),
        )
        .await;
    assert_eq!(upserted["upsertUser"]["userId"], composed);
    let other = as_user(&server, "acme", composed);
    let found = other
        .data(
            "query($id: ID!) { user(userId: $id) { userId name } }",
            json!({ "id": composed }),
        )
        .await;
    assert_eq!(found["user"]["name"], "Eve", "{found}");

    // A hidden character is refused, and named: in a token's claims
    // (UNAUTHENTICATED: the token names no valid user) ...
    let hidden = as_user(&server, "acme", "bob\u{200B}");
    let (code, message) = refusal(&hidden.post(VIEWER, json!({})).await);
    assert_eq!(code, "UNAUTHENTICATED");
    assert!(message.contains("U+200B"), "{message}");
    // ... and in arguments (BAD_USER_INPUT).
    for (query, id, named) in [
        (
            "query($id: ID!) { user(userId: $id) { name } }",
            "bob\u{200B}",
            "U+200B",
        ),
        (
            "query($id: String!) { slice(refId: $id) { edges { cursor } } }",
            "\u{202E}gnp.exe",
            "U+202E",
        ),
    ] {
        let (code, message) = refusal(&other.post(query, json!({ "id": id })).await);
        assert_eq!(code, "BAD_USER_INPUT", "{query}");
        assert!(message.contains(named), "{message}");
    }
    server.stop().await;
}
