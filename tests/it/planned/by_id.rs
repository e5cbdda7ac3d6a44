//! The roots that find records by id, planned: `action(s)`, `user`, and
//! `node(s)` of every kind of node, each answering as async-graphql's
//! executor does, with what the viewer may not see among them.

use serde_json::{json, Value};

use super::{bob_posts_for_all_and_for_cat, both_ways, executions};
use crate::common::{Backend, Client, TestServer};

/// Records found by id, with what the viewer may not see among them.
const BY_ID: &str = "query ById($a: ID!, $all: [ID!]!, $u: ID!) { \
    one: action(actionId: $a) { actionId actorId likeCount viewerHasLiked actor { name } \
    descriptor { ... on StatusPost { text } } } \
    all: actions(actionIds: $all) { __typename ... on Node { id } actionId } \
    who: user(userId: $u) { __typename id userId name } }";

#[tokio::test]
async fn records_found_by_id_run_planned_and_answer_as_the_general_executor_does() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let (ann, _, open, own) = bob_posts_for_all_and_for_cat(&server).await;
    let vars = |a: &str, u: &str| json!({ "a": a, "all": [own, open, "000000000000000000000000", open], "u": u });
    let body = both_ways(&server, &ann, BY_ID, vars(&open, "bob")).await;
    let body: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(body["data"]["one"]["actor"]["name"], json!("Bob"), "{body}");
    let all = body["data"]["all"].as_array().expect("a list");
    assert_eq!(all.len(), 4, "{body}");
    assert!(all[0].is_null() && all[2].is_null(), "{body}");
    assert_eq!(all[1], all[3], "{body}");
    assert_eq!(body["data"]["who"]["name"], json!("Bob"), "{body}");
    assert!(executions(&server, "ById", "planned").await >= 1);

    // Nothing to see: nulls, planned.
    let body = both_ways(&server, &ann, BY_ID, vars(&own, "nobody")).await;
    assert!(
        body.contains("\"one\":null") && body.contains("\"who\":null"),
        "{body}"
    );
    assert!(executions(&server, "ById", "planned").await >= 2);
    // An id that does not parse is an error of a nullable root: left to
    // async-graphql, which answers it.
    let fallbacks = executions(&server, "ById", "fallback").await;
    let body = both_ways(&server, &ann, BY_ID, vars("not an id", "bob")).await;
    assert!(body.contains("BAD_USER_INPUT"), "{body}");
    assert_eq!(executions(&server, "ById", "fallback").await, fallbacks + 3);
    server.stop().await;
}

/// Actions, users and comments found by their global ids, with a hidden
/// action and a repeat among them.
const NODES: &str = "query Nodes($id: ID!, $ids: [ID!]!) { \
    one: node(id: $id) { __typename id ... on Action { actionId likeCount viewerHasLiked \
    actor { name } } ... on User { userId name } ... on Comment { text } } \
    many: nodes(ids: $ids) { __typename ... on Node { id } ... on Action { actionId } \
    ... on User { name } ... on Comment { commentId author { name } } } }";

#[tokio::test]
async fn nodes_of_actions_users_and_comments_run_planned_and_answer_as_the_general_executor_does() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let (ann, bob, open, own) = bob_posts_for_all_and_for_cat(&server).await;
    let said = bob
        .data(
            "mutation($a: ID!) { comment(actionId: $a, text: \"hi\") { id } }",
            json!({ "a": open }),
        )
        .await;
    let hidden = bob
        .data(
            "mutation($a: ID!) { comment(actionId: $a, text: \"for cat\") { id } }",
            json!({ "a": own }),
        )
        .await;
    let ids = bob
        .data(
            "query($a: ID!, $b: ID!) { a: action(actionId: $a) { id } b: action(actionId: $b) { id } \
             u: user(userId: \"bob\") { id } f: feed(first: 1) { nodes { id } } }",
            json!({ "a": open, "b": own }),
        )
        .await;
    let gid = |v: &Value| v["id"].as_str().expect("a global id").to_owned();
    let (open_id, own_id, bob_id) = (gid(&ids["a"]), gid(&ids["b"]), gid(&ids["u"]));
    let comment_id = gid(&said["comment"]);
    let hidden_id = gid(&hidden["comment"]);
    let item_id = gid(&ids["f"]["nodes"][0]);

    let vars = |id: &str, ids: &[&str]| json!({ "id": id, "ids": ids });
    let body = both_ways(
        &server,
        &ann,
        NODES,
        vars(&open_id, &[&own_id, &bob_id, &open_id, &open_id]),
    )
    .await;
    let body: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(body["data"]["one"]["__typename"], "Action", "{body}");
    assert_eq!(body["data"]["one"]["actor"]["name"], "Bob", "{body}");
    let many = body["data"]["many"].as_array().expect("a list");
    assert!(many[0].is_null(), "not for ann: {body}");
    assert_eq!(many[1]["name"], "Bob", "{body}");
    assert_eq!(many[2], many[3], "{body}");
    assert_eq!(many[2]["actionId"], open.as_str(), "{body}");
    assert!(executions(&server, "Nodes", "planned").await >= 1);

    // A user alone, and nothing the viewer may see: planned.
    let body = both_ways(&server, &ann, NODES, vars(&bob_id, &[&own_id])).await;
    assert!(body.contains("\"userId\":\"bob\""), "{body}");
    assert!(body.contains("\"many\":[null]"), "{body}");
    assert!(executions(&server, "Nodes", "planned").await >= 2);

    // Comments, one on an action the viewer may not read: planned.
    let body = both_ways(
        &server,
        &ann,
        NODES,
        vars(&comment_id, &[&open_id, &hidden_id, &comment_id]),
    )
    .await;
    let body: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(body["data"]["one"]["text"], "hi", "{body}");
    let many = body["data"]["many"].as_array().expect("a list");
    assert!(many[1].is_null(), "not for ann: {body}");
    assert_eq!(many[2]["author"]["name"], "Bob", "{body}");
    assert!(executions(&server, "Nodes", "planned").await >= 3);

    // A feed item of another reader's feed: null, planned.
    let planned = executions(&server, "Nodes", "planned").await;
    let body = both_ways(&server, &ann, NODES, vars(&item_id, &[&open_id])).await;
    assert!(body.contains("\"one\":null"), "{body}");
    assert_eq!(executions(&server, "Nodes", "planned").await, planned + 2);
    // An id that is not one: async-graphql's.
    let fallbacks = executions(&server, "Nodes", "fallback").await;
    let body = both_ways(&server, &ann, NODES, vars("no such id", &[&open_id])).await;
    assert!(body.contains("BAD_USER_INPUT"), "{body}");
    assert_eq!(
        executions(&server, "Nodes", "fallback").await,
        fallbacks + 3
    );
    server.stop().await;
}

/// Feed items, notification groups and notifications found by their
/// global ids, each kind with what it shows of other records.
const KINDS: &str = "query Kinds($id: ID!, $ids: [ID!]!) { \
    one: node(id: $id) { __typename id \
    ... on FeedItem { ownerId actionId cursor relevancy reason { kind actorId } \
    action { actionId likeCount viewerHasLiked actor { name } descriptor { ... on StatusPost { text } } } } \
    ... on NotificationGroup { key reason count unreadCount actorCount lastAt seen read refId \
    actors(first: 2) { userId name } action { actionId viewerHasLiked actor { name } } \
    notifications(first: 2) { id reason actorId actor { name } } } \
    ... on Notification { reason actorId actor { name } action { actionId likeCount } commentId at seen read } } \
    many: nodes(ids: $ids) { __typename ... on Node { id } ... on FeedItem { actionId action { actionId } } \
    ... on NotificationGroup { key actors { name } } ... on Notification { actorId action { actionId } } } }";

/// The global ids of `client`'s feed items (with their actions' ids),
/// notification groups and notifications.
async fn own_ids(client: &Client) -> (Vec<(String, String)>, Vec<String>, Vec<String>) {
    let data = client
        .data(
            "{ feed(first: 5) { nodes { id actionId } } \
             notifications { nodes { id notifications(first: 5) { id } } } }",
            json!({}),
        )
        .await;
    let text = |v: &Value| v.as_str().expect("an id").to_owned();
    let items = data["feed"]["nodes"].as_array().expect("items");
    let items = items
        .iter()
        .map(|n| (text(&n["id"]), text(&n["actionId"])))
        .collect();
    let groups = data["notifications"]["nodes"].as_array().expect("groups");
    let notices = groups
        .iter()
        .flat_map(|g| g["notifications"].as_array().expect("notifications"))
        .map(|n| text(&n["id"]))
        .collect();
    (
        items,
        groups.iter().map(|g| text(&g["id"])).collect(),
        notices,
    )
}

#[tokio::test]
async fn nodes_of_feed_items_and_notifications_run_planned_and_answer_as_the_general_executor_does()
{
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let (ann, bob, cat) = (
        server.client("acme", "ann"),
        server.client("acme", "bob"),
        server.client("acme", "cat"),
    );
    for (client, id, name) in [
        (&ann, "ann", "Ann"),
        (&bob, "bob", "Bob"),
        (&cat, "cat", "Cat"),
    ] {
        client.upsert_user(id, name).await;
    }
    ann.follow("bob").await;
    let liked = bob.post_status("liked", json!({ "refIds": ["r1"] })).await;
    let hidden = bob.post_status("hidden later", json!({})).await;
    let ann_own = ann.post_status("ann's", json!({})).await;
    bob.wait_delivered(&hidden).await;
    let like = "mutation($id: ID!) { like(actionId: $id) { likeCount } }";
    ann.data(like, json!({ "id": liked })).await;
    cat.data(like, json!({ "id": liked })).await;
    ann.data(
        "mutation($id: ID!) { comment(actionId: $id, text: \"yes\") { commentId } }",
        json!({ "id": liked }),
    )
    .await;
    bob.data(like, json!({ "id": ann_own })).await;
    // Notifications are written after the writes answer: wait for them.
    let counts = "{ notificationCounts { unreadCount } }";
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    for (client, groups) in [(&bob, 2), (&ann, 1)] {
        while client.data(counts, json!({})).await["notificationCounts"]["unreadCount"]
            != json!(groups)
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the groups never came"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
    let (bob_items, bob_groups, bob_notices) = own_ids(&bob).await;
    let (ann_items, ann_groups, ann_notices) = own_ids(&ann).await;
    let item_of = |action: &str| {
        let found = bob_items.iter().find(|(_, a)| a == action);
        found.expect("bob's item of his action").0.clone()
    };
    let (bob_item, hidden_item) = (item_of(&liked), item_of(&hidden));
    let vars = |id: &str, ids: &[&str]| json!({ "id": id, "ids": ids });
    let planned = || executions(&server, "Kinds", "planned");

    // Bob's own, among ann's: his are shown, hers are null. Planned.
    let before = planned().await;
    let ids: [&str; 6] = [
        &bob_groups[0],
        &bob_notices[0],
        &ann_items[0].0,
        &ann_groups[0],
        &bob_item,
        &ann_notices[0],
    ];
    let body = both_ways(&server, &bob, KINDS, vars(&bob_item, &ids)).await;
    let body: Value = serde_json::from_str(&body).expect("json");
    let one = &body["data"]["one"];
    assert_eq!(one["__typename"], "FeedItem", "{body}");
    assert_eq!(one["action"]["actor"]["name"], "Bob", "{body}");
    assert_eq!(one["action"]["likeCount"], 2, "{body}");
    let many = body["data"]["many"].as_array().expect("a list");
    let kinds: Vec<&Value> = many.iter().map(|n| &n["__typename"]).collect();
    let null = &Value::Null;
    assert_eq!(
        kinds,
        [
            &json!("NotificationGroup"),
            &json!("Notification"),
            null,
            null,
            &json!("FeedItem"),
            null
        ],
        "{body}"
    );
    assert_eq!(planned().await, before + 2);

    // Each of bob's groups and notifications, with their actors and
    // actions: planned.
    for (i, group) in bob_groups.iter().enumerate() {
        let body = both_ways(&server, &bob, KINDS, vars(group, &[&bob_notices[i]])).await;
        let body: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(
            body["data"]["one"]["__typename"], "NotificationGroup",
            "{body}"
        );
        assert_eq!(
            body["data"]["one"]["action"]["actor"]["name"], "Bob",
            "{body}"
        );
    }
    for notice in &bob_notices {
        let body = both_ways(&server, &bob, KINDS, vars(notice, &[])).await;
        assert!(body.contains("\"__typename\":\"Notification\""), "{body}");
        assert!(body.contains("\"actor\":{\"name\":"), "{body}");
    }
    let asked = (bob_groups.len() + bob_notices.len()) as u64;
    assert_eq!(planned().await, before + 2 + 2 * asked);

    // Another's feed item is null, an admin's look at it is not; a group
    // is its owner's alone. An item of a hidden action is null. Planned.
    let before = planned().await;
    let body = both_ways(&server, &ann, KINDS, vars(&bob_item, &[&bob_groups[0]])).await;
    assert!(
        body.contains("\"one\":null") && body.contains("\"many\":[null]"),
        "{body}"
    );
    let admin = server.client_with(Some(("acme", "root", Some("admin"))));
    let body = both_ways(&server, &admin, KINDS, vars(&bob_item, &[&bob_groups[0]])).await;
    assert!(body.contains("\"ownerId\":\"bob\""), "{body}");
    assert!(body.contains("\"many\":[null]"), "{body}");
    bob.data(
        "mutation($id: ID!) { hideAction(actionId: $id) { hidden } }",
        json!({ "id": hidden }),
    )
    .await;
    let body = both_ways(&server, &bob, KINDS, vars(&hidden_item, &[&hidden_item])).await;
    assert!(
        body.contains("\"one\":null") && body.contains("\"many\":[null]"),
        "{body}"
    );
    assert_eq!(planned().await, before + 6);

    // An id that is not one: async-graphql's error.
    let fallbacks = executions(&server, "Kinds", "fallback").await;
    let body = both_ways(&server, &bob, KINDS, vars(&bob_item, &["not an id"])).await;
    assert!(body.contains("BAD_USER_INPUT"), "{body}");
    assert_eq!(
        executions(&server, "Kinds", "fallback").await,
        fallbacks + 3
    );
    assert_eq!(planned().await, before + 6);
    server.stop().await;
}
