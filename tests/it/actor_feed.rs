//! `actorFeed`: one user's actions, newest first by when they happened, as
//! the viewer may see them.

use serde_json::{json, Value};

use crate::common::{Backend, TestServer};

const QUERY: &str = "query($user: ID!, $first: Int, $after: String) { actorFeed(userId: $user, first: $first, after: $after) { edges { cursor node { id actorId hidden } } pageInfo { hasNextPage endCursor } } }";

fn ids(data: &Value) -> Vec<String> {
    data["actorFeed"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn an_actor_feed_shows_what_the_viewer_may_see_newest_first(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    let carol = server.client("acme", "carol");
    server.service("acme").upsert_user("carol", "Carol").await;
    // Recorded out of order: `first` happened before `second`.
    let second = bob
        .post_status("second", json!({ "conducted": "2026-01-02T00:00:00Z" }))
        .await;
    let first = bob
        .post_status("first", json!({ "conducted": "2026-01-01T00:00:00Z" }))
        .await;
    let third = bob
        .post_status("third", json!({ "conducted": "2026-01-03T00:00:00Z" }))
        .await;
    let for_carol = bob
        .post_status(
            "for carol",
            json!({ "conducted": "2026-01-04T00:00:00Z", "scope": "RESTRICTED", "readers": ["carol"] }),
        )
        .await;
    let hidden = bob
        .post_status("hidden", json!({ "conducted": "2026-01-05T00:00:00Z" }))
        .await;
    bob.data(
        "mutation($id: ID!) { hideAction(id: $id) { id } }",
        json!({ "id": hidden }),
    )
    .await;
    alice.post_status("not bob's", json!({})).await;

    // Alice neither follows bob nor is named: she sees his public actions.
    let data = alice
        .data(QUERY, json!({ "user": "bob", "first": 2, "after": null }))
        .await;
    assert_eq!(ids(&data), [third.clone(), second.clone()]);
    assert_eq!(data["actorFeed"]["pageInfo"]["hasNextPage"], true);
    let after = data["actorFeed"]["pageInfo"]["endCursor"].clone();
    let data = alice
        .data(QUERY, json!({ "user": "bob", "first": 2, "after": after }))
        .await;
    assert_eq!(ids(&data), [first.as_str()]);
    assert_eq!(data["actorFeed"]["pageInfo"]["hasNextPage"], false);

    // Carol is named by the restricted one; bob sees his hidden one too.
    let data = carol
        .data(QUERY, json!({ "user": "bob", "first": 10, "after": null }))
        .await;
    assert_eq!(
        ids(&data),
        [
            for_carol.clone(),
            third.clone(),
            second.clone(),
            first.clone()
        ]
    );
    let data = bob
        .data(QUERY, json!({ "user": "bob", "first": 10, "after": null }))
        .await;
    assert_eq!(ids(&data), [hidden, for_carol, third, second, first]);
    assert_eq!(data["actorFeed"]["edges"][0]["node"]["hidden"], true);

    // Another tenant's bob is someone else.
    let elsewhere = server.client("globex", "zoe");
    let data = elsewhere
        .data(QUERY, json!({ "user": "bob", "first": 10, "after": null }))
        .await;
    assert_eq!(ids(&data), Vec::<String>::new());

    // A cursor pages only its own list; bad ids and sizes are refused.
    let code = alice
        .error_code(
            QUERY,
            json!({ "user": "alice", "first": 2, "after": after }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    let code = alice
        .error_code(QUERY, json!({ "user": "", "first": 2, "after": null }))
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    let code = alice
        .error_code(
            QUERY,
            json!({ "user": "bob", "first": 1000, "after": null }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    server.stop().await;
}

crate::on_both_backends!(an_actor_feed_shows_what_the_viewer_may_see_newest_first);
