//! `--federation`: the subgraph fields a gateway needs, only when asked
//! for. The gateway itself is run by `tests/clients/federation.test.mjs`.

use riverfeed::api::federation::{Federation, FederationNode};
use riverfeed::server::ServeOptions;
use serde_json::json;

use crate::cli::riverfeed;
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
            ..Default::default()
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

/// `--federation-node none` leaves `Node`, `node`, `nodes` and `User.id`
/// to a Relay-style product subgraph that has its own; either way the page
/// types are shareable, so the product may declare its `PageInfo` too.
#[test]
fn the_subgraph_leaves_node_to_the_product_when_asked() {
    let sdl = |extra: &[&str]| {
        let output = riverfeed(&[&["schema", "--federation"][..], extra].concat());
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let type_block = |sdl: &str, head: &str| -> String {
        let start = sdl.find(head).unwrap_or_else(|| panic!("{head} in {sdl}"));
        let end = sdl[start..].find("\n}").expect("closed") + start;
        sdl[start..end].to_owned()
    };
    let own = sdl(&[]);
    let none = sdl(&["--federation-node", "none"]);
    for sdl in [&own, &none] {
        for shared in [
            "PageInfo",
            "ActionConnection",
            "ActionEdge",
            "UserConnection",
            "UserEdge",
        ] {
            assert!(
                sdl.contains(&format!("type {shared} @shareable {{")),
                "{shared} is not shareable: {sdl}"
            );
        }
    }
    assert!(own.contains("\tnode(id: ID!): Node\n"), "{own}");
    assert!(own.contains("interface Node {"), "{own}");
    let user = type_block(&own, "type User implements Node @key(fields: \"userId\") {");
    assert!(user.contains("\tid: ID!\n"), "{user}");

    for gone in [
        "\tnode(id: ID!)",
        "\tnodes(ids:",
        "interface Node",
        "implements Node",
        ": Node",
        "`node(id:)` finds",
    ] {
        assert!(!none.contains(gone), "{gone} in {none}");
    }
    let user = type_block(&none, "type User @key(fields: \"userId\") {");
    assert!(!user.contains("\tid: ID!\n"), "{user}");
    assert!(user.contains("\tuserId: String!\n"), "{user}");
    let action = type_block(&none, "type Action @key(fields: \"actionId\") {");
    assert!(action.contains("\tid: ID!\n"), "{action}");

    // The flag shapes a subgraph only.
    let alone = riverfeed(&["schema", "--federation-node", "none"]);
    assert!(!alone.status.success(), "{alone:?}");
    let said = String::from_utf8_lossy(&alone.stderr);
    assert!(said.contains("--federation"), "{said}");
}

/// A subgraph served with `--federation-node none` answers as it declares:
/// `node` is no field of it, and `User` still resolves by `userId`.
#[tokio::test]
async fn a_subgraph_without_node_serves_users_by_their_user_id() {
    let (store, dir) = store_url(Backend::Embedded).expect("embedded");
    let server = TestServer::start_with(Stopped { store, dir }, |store| {
        let mut options = ServeOptions::new(store);
        options.federation = Some(std::sync::Arc::new(Federation {
            node: FederationNode::None,
            ..Default::default()
        }));
        options
    })
    .await;
    let bob = server.client("acme", "bob");
    // `User.id` is the product's: asked for by `userId` only.
    bob.data(
        "mutation { upsertUser(input: {userId: \"bob\", name: \"Bob\"}) { userId } }",
        json!({}),
    )
    .await;
    let asked = bob
        .post("{ node(id: \"x\") { __typename } }", json!({}))
        .await;
    assert_eq!(
        first_error_code(&asked).as_deref(),
        Some("GRAPHQL_VALIDATION_FAILED"),
        "{asked}"
    );
    let lookup = "{ _entities(representations: [{__typename: \"User\", userId: \"bob\"}]) \
                  { ... on User { userId name } } }";
    assert_eq!(
        bob.data(lookup, json!({})).await["_entities"],
        json!([{ "userId": "bob", "name": "Bob" }])
    );
    server.stop().await;
}
