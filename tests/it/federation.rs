//! `--federation`: the subgraph fields a gateway needs, only when asked
//! for. The gateway itself is run by `tests/clients/federation.test.mjs`.

use riverfeed::api::federation::Federation;
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
        options.federation = Some(Default::default());
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

/// A product's own type named with `--federation-entity` is an entity
/// keyed by the product's field, whose `activity` is the slice of the
/// actions that refer to it, as the caller may read them.
#[tokio::test]
async fn a_product_entity_carries_its_activity() {
    let (store, dir) = store_url(Backend::Embedded).expect("embedded");
    let server = TestServer::start_with(Stopped { store, dir }, |store| {
        let mut options = ServeOptions::new(store);
        let entity = "Applicant=id".parse().expect("entity");
        options.federation = Some(std::sync::Arc::new(Federation {
            entities: vec![entity],
        }));
        options
    })
    .await;
    let bob = server.client("acme", "bob");
    let sdl = bob.data("{ _service { sdl } }", json!({})).await["_service"]["sdl"]
        .as_str()
        .expect("sdl")
        .to_owned();
    assert!(sdl.contains("type Applicant @key(fields: \"id\")"), "{sdl}");
    assert!(
        sdl.contains("activity(first: Int, after: String): ActionConnection!"),
        "{sdl}"
    );
    let carol = server.client("acme", "carol");
    carol.upsert_user("carol", "Carol").await;
    let public = bob
        .post_status("about app-1", json!({ "refIds": ["app-1"] }))
        .await;
    let private = bob
        .post_status(
            "about app-1, for carol",
            json!({ "refIds": ["app-1"], "scope": "RESTRICTED", "readers": ["carol"] }),
        )
        .await;
    bob.post_status("about app-2", json!({ "refIds": ["app-2"] }))
        .await;
    let lookup = "query($first: Int) { _entities(representations: [{__typename: \"Applicant\", id: \"app-1\"}]) {
        __typename
        ... on Applicant { id activity(first: $first) { edges { node { actionId } } pageInfo { hasNextPage } } }
    } }";
    let ids = |data: &serde_json::Value| -> Vec<String> {
        data["_entities"][0]["activity"]["edges"]
            .as_array()
            .expect("edges")
            .iter()
            .map(|e| e["node"]["actionId"].as_str().expect("id").to_owned())
            .collect()
    };
    let seen = carol.data(lookup, json!({ "first": 10 })).await;
    assert_eq!(seen["_entities"][0]["__typename"], "Applicant");
    assert_eq!(seen["_entities"][0]["id"], "app-1");
    assert_eq!(ids(&seen), [private.clone(), public.clone()]);
    let eve = server.client("acme", "eve");
    assert_eq!(
        ids(&eve.data(lookup, json!({ "first": 10 })).await),
        [public]
    );
    let one = carol.data(lookup, json!({ "first": 1 })).await;
    assert_eq!(ids(&one), [private]);
    assert_eq!(
        one["_entities"][0]["activity"]["pageInfo"]["hasNextPage"],
        true
    );
    let too_many = carol.post(lookup, json!({ "first": 100_000 })).await;
    assert_eq!(
        first_error_code(&too_many).as_deref(),
        Some("BAD_USER_INPUT"),
        "{too_many}"
    );
    server.stop().await;
}
