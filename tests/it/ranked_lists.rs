//! Lists of actions ranked by a time of their own, as the viewer may see
//! them: `actorFeed` (one user's actions, by when they happened) and
//! `discussions` (what the viewer commented on, by the latest comment).

use serde_json::{json, Value};

use crate::common::{Backend, TestServer};

const QUERY: &str = "query($user: ID!, $first: Int, $after: String) { actorFeed(userId: $user, first: $first, after: $after) { edges { cursor node { actionId actorId hidden } } pageInfo { hasNextPage endCursor } } }";

fn ids(data: &Value) -> Vec<String> {
    data["actorFeed"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["actionId"].as_str().unwrap().to_owned())
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
        "mutation($id: ID!) { hideAction(actionId: $id) { id } }",
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

const DISCUSSIONS: &str = "query($first: Int, $after: String) { discussions(first: $first, after: $after) { edges { node { actionId commentCount } } pageInfo { hasNextPage endCursor } } }";

fn discussion_ids(data: &Value) -> Vec<String> {
    data["discussions"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["actionId"].as_str().unwrap().to_owned())
        .collect()
}

async fn discussions_list_what_the_viewer_commented_on_latest_first(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    let carol = server.client("acme", "carol");
    let [first, second, third] = [
        bob.post_status("first", json!({})).await,
        bob.post_status("second", json!({})).await,
        bob.post_status("third", json!({})).await,
    ];
    // Each comment in a later millisecond than the one before, so the order
    // is the order they were made (the server and this test share a clock).
    let mut last = 0;
    for (who, on) in [
        (&alice, &first),
        (&alice, &second),
        (&alice, &third),
        // Carol's comment moves `first` up in alice's discussions too.
        (&carol, &first),
    ] {
        while chrono::Utc::now().timestamp_millis() <= last {
            tokio::task::yield_now().await;
        }
        let data = who
            .data(
                "mutation($id: ID!) { comment(actionId: $id, text: \"…\") { created } }",
                json!({ "id": on }),
            )
            .await;
        let created = data["comment"]["created"].as_str().unwrap();
        last = chrono::DateTime::parse_from_rfc3339(created)
            .unwrap()
            .timestamp_millis();
    }

    let data = alice
        .data(DISCUSSIONS, json!({ "first": 2, "after": null }))
        .await;
    assert_eq!(discussion_ids(&data), [first.as_str(), third.as_str()]);
    assert_eq!(data["discussions"]["edges"][0]["node"]["commentCount"], 2);
    let after = data["discussions"]["pageInfo"]["endCursor"].clone();
    let data = alice
        .data(DISCUSSIONS, json!({ "first": 2, "after": after }))
        .await;
    assert_eq!(discussion_ids(&data), [second.as_str()]);
    assert_eq!(data["discussions"]["pageInfo"]["hasNextPage"], false);
    let data = carol
        .data(DISCUSSIONS, json!({ "first": 10, "after": null }))
        .await;
    assert_eq!(discussion_ids(&data), [first.as_str()]);
    let data = bob
        .data(DISCUSSIONS, json!({ "first": 10, "after": null }))
        .await;
    assert!(discussion_ids(&data).is_empty());

    // One alice may no longer see leaves her list; carol's cursor is not hers.
    server.service("acme").upsert_user("carol", "Carol").await;
    bob.data(
        "mutation($id: ID!) { setActionScope(actionId: $id, scope: RESTRICTED, readers: [\"carol\"]) { id } }",
        json!({ "id": third }),
    )
    .await;
    let data = alice
        .data(DISCUSSIONS, json!({ "first": 10, "after": null }))
        .await;
    assert_eq!(discussion_ids(&data), [first.as_str(), second.as_str()]);
    let code = carol
        .error_code(DISCUSSIONS, json!({ "first": 2, "after": after }))
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    server.stop().await;
}

crate::on_both_backends!(
    an_actor_feed_shows_what_the_viewer_may_see_newest_first,
    discussions_list_what_the_viewer_commented_on_latest_first,
);
