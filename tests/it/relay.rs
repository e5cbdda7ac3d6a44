//! Relay object identification: global ids, `node` / `nodes`, and ids
//! passed back as arguments, raw or global.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use riverfeed::model::ObjectId;
use riverfeed::server::ServeOptions;
use riverfeed::timeline::{FeedModel, FeedModelKind};
use serde_json::{json, Value};

use crate::common::{first_error_code, store_url, Backend, Client, Stopped, TestServer};

/// What a global id says, decoded.
fn decoded(id: &Value) -> String {
    let id = id.as_str().expect("a global id");
    String::from_utf8(URL_SAFE_NO_PAD.decode(id).expect("base64url")).expect("utf-8")
}

/// Everything a node query shows of each type.
const NODE_FIELDS: &str = "__typename id
    ... on Action { actionId actorId }
    ... on User { userId name }
    ... on Comment { commentId actionId text }
    ... on FeedItem { ownerId actionId reason { kind } action { actionId } }";

async fn node(client: &Client, id: &Value) -> Value {
    let data = client
        .data(
            &format!("query($id: ID!) {{ node(id: $id) {{ {NODE_FIELDS} }} }}"),
            json!({ "id": id }),
        )
        .await;
    data["node"].clone()
}

/// Bob posts to Alice, who follows him, and Carol comments (a comment by
/// Alice would bump the item in her feed, at a time of the worker's
/// choosing): the ids of the four kinds of node, as Alice reads them, and
/// the action's own id.
struct Scene {
    action: Value,
    user: Value,
    comment: Value,
    item: Value,
    action_id: String,
}

async fn scene(server: &TestServer) -> Scene {
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob Builder").await;
    alice.upsert_user("alice", "Alice").await;
    alice.follow("bob").await;
    let action_id = bob.post_status("shipped it", json!({})).await;
    bob.wait_delivered(&action_id).await;
    let data = server
        .client("acme", "carol")
        .data(
            "mutation($a: ID!) { comment(actionId: $a, text: \"congrats\") { id commentId } }",
            json!({ "a": action_id }),
        )
        .await;
    let comment = data["comment"]["id"].clone();
    let data = alice
        .data(
            "{ feed { edges { node { id actionId action { id actor { id } } } } } }",
            json!({}),
        )
        .await;
    let edge = &data["feed"]["edges"][0]["node"];
    assert_eq!(edge["actionId"], action_id.as_str(), "{data:#}");
    Scene {
        action: edge["action"]["id"].clone(),
        user: edge["action"]["actor"]["id"].clone(),
        comment,
        item: edge["id"].clone(),
        action_id,
    }
}

async fn every_kind_of_node_is_found_by_its_global_id(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let s = scene(&server).await;
    let alice = server.client("acme", "alice");

    assert_eq!(decoded(&s.action), format!("Action:{}", s.action_id));
    assert_eq!(decoded(&s.user), "User:bob");
    assert!(
        decoded(&s.comment).starts_with(&format!("Comment:{}:", s.action_id)),
        "{}",
        decoded(&s.comment)
    );
    assert_eq!(decoded(&s.item), format!("FeedItem:{}:alice", s.action_id));

    let action = node(&alice, &s.action).await;
    assert_eq!(action["__typename"], "Action");
    assert_eq!(action["id"], s.action);
    assert_eq!(action["actionId"], s.action_id.as_str());
    assert_eq!(action["actorId"], "bob");

    let user = node(&alice, &s.user).await;
    assert_eq!(
        user,
        json!({ "__typename": "User", "id": s.user, "userId": "bob", "name": "Bob Builder" })
    );

    let comment = node(&alice, &s.comment).await;
    assert_eq!(comment["__typename"], "Comment");
    assert_eq!(comment["id"], s.comment);
    assert_eq!(comment["actionId"], s.action_id.as_str());
    assert_eq!(comment["text"], "congrats");

    let item = node(&alice, &s.item).await;
    assert_eq!(item["__typename"], "FeedItem");
    assert_eq!(item["id"], s.item);
    assert_eq!(item["ownerId"], "alice");
    assert_eq!(item["actionId"], s.action_id.as_str());
    assert_eq!(item["reason"]["kind"], "FOLLOWS");
    assert_eq!(item["action"]["actionId"], s.action_id.as_str());

    // `nodes` answers in the order asked, the same as one `node` each.
    let ids = json!([s.item, s.comment, s.user, s.action]);
    let data = alice
        .data(
            &format!("query($ids: [ID!]!) {{ nodes(ids: $ids) {{ {NODE_FIELDS} }} }}"),
            json!({ "ids": ids }),
        )
        .await;
    assert_eq!(data["nodes"], json!([item, comment, user, action]));

    // Ids that name nothing answer null, as `action(id)` and `user(id)` do.
    let missing = json!([
        URL_SAFE_NO_PAD.encode(format!("Action:{}", ObjectId::new().to_hex())),
        URL_SAFE_NO_PAD.encode("User:nobody"),
        URL_SAFE_NO_PAD.encode(format!(
            "Comment:{}:{}",
            s.action_id,
            ObjectId::new().to_hex()
        )),
        URL_SAFE_NO_PAD.encode(format!("FeedItem:{}:alice", ObjectId::new().to_hex())),
    ]);
    let data = alice
        .data(
            "query($ids: [ID!]!) { nodes(ids: $ids) { id } }",
            json!({ "ids": missing }),
        )
        .await;
    assert_eq!(data["nodes"], json!([null, null, null, null]));
    server.stop().await;
}

async fn arguments_take_raw_and_global_ids_alike(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let s = scene(&server).await;
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");

    let query = "query($id: ID!) { action(actionId: $id) { id actionId } }";
    for id in [json!(s.action_id), s.action.clone()] {
        let data = alice.data(query, json!({ "id": id })).await;
        assert_eq!(
            data["action"],
            json!({ "id": s.action, "actionId": s.action_id }),
            "{id}"
        );
    }
    let data = alice
        .data(
            "query($ids: [ID!]!) { actions(actionIds: $ids) { actionId } }",
            json!({ "ids": [s.action_id, s.action] }),
        )
        .await;
    assert_eq!(data["actions"][0], data["actions"][1]);

    // A mutation takes `action.id` straight back, and the raw id too.
    let like = "mutation($id: ID!) { like(actionId: $id) { likeCount } }";
    let data = alice.data(like, json!({ "id": s.action })).await;
    assert_eq!(data["like"]["likeCount"], 1);
    let data = alice
        .data(
            "mutation($id: ID!) { unlike(actionId: $id) { likeCount } }",
            json!({ "id": s.action_id }),
        )
        .await;
    assert_eq!(data["unlike"]["likeCount"], 0);

    // User arguments alike: a user's global id where its raw id goes.
    let data = alice
        .data(
            "query($u: ID!) { user(userId: $u) { userId } actorFeed(userId: $u) { nodes { actionId } } }",
            json!({ "u": s.user }),
        )
        .await;
    assert_eq!(data["user"]["userId"], "bob");
    assert_eq!(
        data["actorFeed"]["nodes"][0]["actionId"],
        s.action_id.as_str()
    );
    let data = alice
        .data(
            "mutation($u: ID!) { unfollow(userId: $u) }",
            json!({ "u": s.user }),
        )
        .await;
    assert_eq!(data["unfollow"], true);
    let data = bob
        .data(
            "mutation($u: ID!) { upsertUser(input: {userId: $u, name: \"Robert\"}) { id userId name } }",
            json!({ "u": s.user }),
        )
        .await;
    assert_eq!(
        data["upsertUser"],
        json!({ "id": s.user, "userId": "bob", "name": "Robert" })
    );
    let data = alice
        .data(
            "query($a: ID!) { user(userId: $a) { id } }",
            json!({ "a": "alice" }),
        )
        .await;
    let alice_id = data["user"]["id"].clone();
    let data = bob
        .data(
            "mutation($r: [ID!]!) { recordAction(input: {descriptor: {statusPost: {text: \"psst\"}}, scope: RESTRICTED, readers: $r}) { readers } }",
            json!({ "r": [alice_id] }),
        )
        .await;
    assert_eq!(data["recordAction"]["readers"], json!(["alice"]));
    server.stop().await;
}

async fn a_global_id_of_another_type_is_refused(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let s = scene(&server).await;
    let alice = server.client("acme", "alice");

    let cases = [
        (
            "query($id: ID!) { action(actionId: $id) { id } }",
            s.user.clone(),
        ),
        (
            "query($id: ID!) { action(actionId: $id) { id } }",
            s.comment.clone(),
        ),
        (
            "query($id: ID!) { user(userId: $id) { id } }",
            s.action.clone(),
        ),
        ("mutation($id: ID!) { follow(userId: $id) }", s.item.clone()),
        (
            "mutation($id: ID!) { comment(actionId: $id, text: \"x\") { id } }",
            s.user.clone(),
        ),
        ("query($id: ID!) { node(id: $id) { id } }", json!("bob")),
        (
            "query($id: ID!) { node(id: $id) { id } }",
            json!(s.action_id),
        ),
        (
            "query($id: ID!) { node(id: $id) { id } }",
            json!(URL_SAFE_NO_PAD.encode("Action:not-hex")),
        ),
    ];
    for (query, id) in cases {
        let body = alice.post(query, json!({ "id": id })).await;
        assert_eq!(
            first_error_code(&body).as_deref(),
            Some("BAD_USER_INPUT"),
            "{query} with {id}: {body}"
        );
    }
    let body = alice
        .post(
            "mutation($id: ID!) { comment(actionId: $id, text: \"x\") { id } }",
            json!({ "id": s.user }),
        )
        .await;
    let message = body["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("global id of a User"), "{body}");

    let too_many: Vec<Value> = (0..101).map(|_| s.action.clone()).collect();
    let body = alice
        .post(
            "query($ids: [ID!]!) { nodes(ids: $ids) { id } }",
            json!({ "ids": too_many }),
        )
        .await;
    assert_eq!(first_error_code(&body).as_deref(), Some("BAD_USER_INPUT"));
    server.stop().await;
}

async fn nodes_the_viewer_may_not_see_are_null(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");
    let carol = server.client("acme", "carol");
    for (client, id) in [(&alice, "alice"), (&bob, "bob"), (&carol, "carol")] {
        client.upsert_user(id, id).await;
    }
    let data = bob
        .data(
            "mutation { recordAction(input: {descriptor: {statusPost: {text: \"for alice\"}}, scope: RESTRICTED, readers: [\"alice\"]}) { id actionId } }",
            json!({}),
        )
        .await;
    let action = data["recordAction"]["id"].clone();
    let action_id = data["recordAction"]["actionId"]
        .as_str()
        .unwrap()
        .to_owned();
    bob.wait_delivered(&action_id).await;
    let data = alice
        .data(
            "mutation($a: ID!) { comment(actionId: $a, text: \"thanks\") { id } }",
            json!({ "a": action }),
        )
        .await;
    let comment = data["comment"]["id"].clone();

    let query = "query($ids: [ID!]!) { nodes(ids: $ids) { id } }";
    let ids = json!({ "ids": [action, comment] });
    let seen = alice.data(query, ids.clone()).await;
    assert_eq!(seen["nodes"], json!([{ "id": action }, { "id": comment }]));
    let seen = carol.data(query, ids).await;
    assert_eq!(
        seen["nodes"],
        json!([null, null]),
        "a RESTRICTED action of other readers, and its comments"
    );
    let data = carol
        .data(
            "query($id: ID!) { node(id: $id) { id } }",
            json!({ "id": action }),
        )
        .await;
    assert_eq!(data["node"], Value::Null);
    server.stop().await;
}

async fn a_feed_item_is_a_node_for_its_owner_and_admin_only(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let s = scene(&server).await;
    let alice = server.client("acme", "alice");
    let carol = server.client("acme", "carol");
    let admin = server.client_with(Some(("acme", "support", Some("admin"))));

    assert_eq!(
        node(&carol, &s.item).await,
        Value::Null,
        "another user's feed"
    );
    let seen = node(&admin, &s.item).await;
    assert_eq!(seen["ownerId"], "alice");
    assert_eq!(seen["actionId"], s.action_id.as_str());

    // The item's cursor is one of its feed's: the page after it is the rest.
    let data = alice
        .data(
            "query($id: ID!) { node(id: $id) { ... on FeedItem { cursor } } }",
            json!({ "id": s.item }),
        )
        .await;
    let cursor = data["node"]["cursor"]
        .as_str()
        .expect("a cursor")
        .to_owned();
    let (after, _) = alice.feed_ids(&format!("(after: \"{cursor}\")")).await;
    assert!(!after.contains(&s.action_id), "{after:?}");

    // An item hidden from the feed is no node any more.
    let data = alice
        .data(
            "mutation($id: ID!) { hideFeedItem(actionId: $id) }",
            json!({ "id": s.action }),
        )
        .await;
    assert_eq!(data["hideFeedItem"], true);
    assert_eq!(node(&alice, &s.item).await, Value::Null);
    assert_eq!(node(&admin, &s.item).await, Value::Null);
    server.stop().await;
}

/// Under the pull model, nothing is written to a follower's feed: the item
/// `node` finds is the one a page merges in from the followed actor.
async fn a_pulled_feed_item_is_a_node_too(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    let server = TestServer::start_with(Stopped { store, dir }, |url| ServeOptions {
        model: FeedModel::of(FeedModelKind::Pull),
        ..ServeOptions::new(url)
    })
    .await;
    let s = scene(&server).await;
    let alice = server.client("acme", "alice");
    let item = node(&alice, &s.item).await;
    assert_eq!(item["ownerId"], "alice");
    assert_eq!(item["actionId"], s.action_id.as_str());
    assert_eq!(item["reason"]["kind"], "FOLLOWS");

    // Gone from the feed with the follow (the sources no longer give it).
    alice
        .data("mutation { unfollow(userId: \"bob\") }", json!({}))
        .await;
    assert_eq!(node(&alice, &s.item).await, Value::Null);
    server.stop().await;
}

crate::on_both_backends!(
    every_kind_of_node_is_found_by_its_global_id,
    arguments_take_raw_and_global_ids_alike,
    a_global_id_of_another_type_is_refused,
    nodes_the_viewer_may_not_see_are_null,
    a_feed_item_is_a_node_for_its_owner_and_admin_only,
    a_pulled_feed_item_is_a_node_too,
);
