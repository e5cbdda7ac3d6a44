//! `--federation`: the subgraph fields a gateway needs, only when asked
//! for. The gateway itself is run by `tests/clients/federation.test.mjs`.

use riverfeed::server::ServeOptions;
use serde_json::json;

use crate::common::{first_error_code, store_url, Backend, Stopped, TestServer};

#[tokio::test]
async fn entities_are_served_only_as_a_subgraph() {
    let (store, dir) = store_url(Backend::Embedded).expect("embedded");
    let plain = TestServer::start_on(Stopped { store, dir }).await;
    let body = plain
        .client("acme", "alice")
        .post("{ _service { sdl } }", json!({}))
        .await;
    assert!(
        body["data"].is_null() && body["errors"].is_array(),
        "{body}"
    );
    let stopped = plain.stop_keeping_data().await;

    let server = TestServer::start_with(stopped, |store| {
        let mut options = ServeOptions::new(store);
        options.federation = true;
        options
    })
    .await;
    let bob = server.client("acme", "bob");
    server
        .client("acme", "carol")
        .upsert_user("carol", "Carol")
        .await;
    let sdl = bob.data("{ _service { sdl } }", json!({})).await["_service"]["sdl"]
        .as_str()
        .expect("sdl")
        .to_owned();
    assert!(
        sdl.contains("type User implements Node @key(fields: \"userId\")"),
        "{sdl}"
    );
    assert!(
        sdl.contains("type Action implements Node @key(fields: \"actionId\")"),
        "{sdl}"
    );

    // A restricted action resolves for its reader, and is null for others,
    // as `action(actionId:)` is.
    let id = bob
        .post_status(
            "for carol",
            json!({ "scope": "RESTRICTED", "readers": ["carol"] }),
        )
        .await;
    bob.wait_delivered(&id).await;
    let lookup = format!(
        "{{ _entities(representations: [{{__typename: \"Action\", actionId: \"{id}\"}}, \
         {{__typename: \"User\", userId: \"dave\"}}]) {{ ... on Action {{ actorId }} ... on User {{ userId }} }} }}"
    );
    let carol = server
        .client("acme", "carol")
        .data(&lookup, json!({}))
        .await;
    assert_eq!(
        carol["_entities"],
        json!([{ "actorId": "bob" }, { "userId": "dave" }])
    );
    let eve = server.client("acme", "eve").data(&lookup, json!({})).await;
    assert_eq!(eve["_entities"], json!([null, { "userId": "dave" }]));
    let anonymous = server.anonymous().post(&lookup, json!({})).await;
    assert_eq!(
        first_error_code(&anonymous).as_deref(),
        Some("UNAUTHENTICATED"),
        "{anonymous}"
    );
    server.stop().await;
}
