//! The API end to end: a real server on 127.0.0.1:0, spoken to over HTTP and
//! websocket as a frontend would.

use std::collections::HashSet;

use riverfeed::descriptor::Descriptor;
use riverfeed::model::{FanOut, ObjectId, Scope};
use riverfeed::store::JobKind;
use riverfeed::timeline::FeedModelKind;
use serde_json::{json, Value};

use crate::common::{first_error_code, Backend, TestServer, WsClient, FEED_EVENTS};

async fn a_follower_sees_the_followed_users_action(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob Builder").await;
    alice.follow("bob").await;
    let id = bob
        .post_status("shipped the new careers page", json!({}))
        .await;
    bob.wait_delivered(&id).await;

    let data = alice
        .data(
            "{ feed { edges { node { actionId reason { kind actorId } action { actionId actor { userId name } descriptor { ... on StatusPost { text } } } } } } }",
            json!({}),
        )
        .await;
    let edges = data["feed"]["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 1, "{data:#}");
    let node = &edges[0]["node"];
    assert_eq!(node["actionId"], id.as_str());
    assert_eq!(
        node["reason"],
        json!({ "kind": "FOLLOWS", "actorId": "bob" })
    );
    assert_eq!(
        node["action"]["actor"],
        json!({ "userId": "bob", "name": "Bob Builder" })
    );
    assert_eq!(
        node["action"]["descriptor"]["text"],
        "shipped the new careers page"
    );

    // The same user in another tenant sees nothing.
    let other_alice = server.client("globex", "alice");
    let (ids, _) = other_alice.feed_ids("").await;
    assert!(ids.is_empty(), "tenants are separate: {ids:?}");
    let data = other_alice
        .data(
            "query($id: ID!) { action(actionId: $id) { actionId } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data["action"], Value::Null);
    server.stop().await;
}

async fn pages_have_no_gaps_or_duplicates_while_new_items_arrive(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;

    let mut original = Vec::new();
    for i in 0..60 {
        original.push(bob.post_status(&format!("post {i}"), json!({})).await);
    }
    bob.wait_delivered(original.last().unwrap()).await;
    for id in &original {
        bob.wait_delivered(id).await;
    }

    let mut seen = Vec::new();
    let (page, info) = alice.feed_ids("(first: 25)").await;
    assert_eq!(page.len(), 25);
    assert_eq!(info["hasNextPage"], true);
    seen.extend(page);
    let mut cursor = info["endCursor"].as_str().unwrap().to_owned();

    for round in 0..2 {
        // New items arrive between pages: they are newer, so they belong above
        // the pages already read and must not shift the next page.
        let mut fresh = Vec::new();
        for i in 0..7 {
            fresh.push(
                bob.post_status(&format!("late {round}-{i}"), json!({}))
                    .await,
            );
        }
        for id in &fresh {
            bob.wait_delivered(id).await;
        }
        let (page, info) = alice
            .feed_ids(&format!("(first: 25, after: \"{cursor}\")"))
            .await;
        seen.extend(page);
        if round == 0 {
            assert_eq!(info["hasNextPage"], true);
            cursor = info["endCursor"].as_str().unwrap().to_owned();
        } else {
            assert_eq!(info["hasNextPage"], false, "{info}");
        }
    }

    let newest_first: Vec<String> = original.iter().rev().cloned().collect();
    assert_eq!(
        seen, newest_first,
        "three pages = the 60 items, in order, once each"
    );
    let (top, _) = alice.feed_ids("(first: 14)").await;
    assert_eq!(
        top.len(),
        14,
        "the 14 late items sit above the pages read before"
    );
    assert!(top.iter().all(|id| !original.contains(id)));
    server.stop().await;
}

async fn paging_backwards_with_last_and_before(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let alice = server.client("acme", "alice");
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(alice.post_status(&format!("mine {i}"), json!({})).await);
    }
    for id in &ids {
        alice.wait_delivered(id).await;
    }
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    let (all, _) = alice.feed_ids("").await;
    assert_eq!(all, newest_first);

    let (tail, info) = alice.feed_ids("(last: 3)").await;
    assert_eq!(tail, newest_first[7..], "the 3 oldest, newest first");
    assert_eq!(info["hasPreviousPage"], true);
    let before = info["startCursor"].as_str().unwrap();
    let (prev, info) = alice
        .feed_ids(&format!("(last: 3, before: \"{before}\")"))
        .await;
    assert_eq!(prev, newest_first[4..7]);
    assert_eq!(info["hasNextPage"], true);
    server.stop().await;
}

async fn slices_list_actions_by_referenced_object(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let recruiter = server.client("acme", "rita");
    let mut mary = Vec::new();
    for i in 0..4 {
        let input = json!({
            "descriptor": { "applicationRating": {
                "raterId": "rita", "raterName": "Rita", "positionId": "pos-sse",
                "positionName": "Senior Software Engineer", "applicantId": "app-mary",
                "applicantName": "Mary Fanning", "ratingScore": 4.5,
                "ratingText": format!("round {i}")
            }},
            "refIds": ["app-mary", "pos-sse"]
        });
        let data = recruiter
            .data(
                "mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId } }",
                json!({ "input": input }),
            )
            .await;
        mary.push(
            data["recordAction"]["actionId"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    recruiter
        .post_status("unrelated", json!({ "refIds": ["app-john"] }))
        .await;

    let query = "query($ref: String!, $after: String) { slice(refId: $ref, first: 3, after: $after) { edges { cursor node { actionId descriptor { ... on ApplicationRating { applicantName ratingScore } } } } pageInfo { hasNextPage endCursor } } }";
    let data = recruiter
        .data(query, json!({ "ref": "app-mary", "after": null }))
        .await;
    let page: Vec<&str> = data["slice"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["actionId"].as_str().unwrap())
        .collect();
    assert_eq!(page, [&mary[3], &mary[2], &mary[1]]);
    assert_eq!(
        data["slice"]["edges"][0]["node"]["descriptor"],
        json!({ "applicantName": "Mary Fanning", "ratingScore": 4.5 })
    );
    assert_eq!(data["slice"]["pageInfo"]["hasNextPage"], true);
    let after = data["slice"]["pageInfo"]["endCursor"].clone();
    let data = recruiter
        .data(query, json!({ "ref": "app-mary", "after": after }))
        .await;
    assert_eq!(
        data["slice"]["edges"][0]["node"]["actionId"],
        mary[0].as_str()
    );
    assert_eq!(data["slice"]["pageInfo"]["hasNextPage"], false);

    // The applicant changes her name: every copy of it follows.
    let renamed = server
        .service("acme")
        .data(
            "mutation { renameRef(refId: \"app-mary\", name: \"Mary Fanning-Smith\") }",
            json!({}),
        )
        .await;
    assert_eq!(renamed["renameRef"], 4);
    let data = recruiter
        .data(query, json!({ "ref": "app-mary", "after": null }))
        .await;
    assert_eq!(
        data["slice"]["edges"][0]["node"]["descriptor"]["applicantName"],
        "Mary Fanning-Smith"
    );

    // A slice cursor pages only its own slice.
    let code = recruiter
        .error_code(query, json!({ "ref": "pos-sse", "after": after }))
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    server.stop().await;
}

async fn feed_events_stream_added_and_removed(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;

    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe("1", FEED_EVENTS).await;
    server.wait_live_topics(1).await;

    let id = bob.post_status("live!", json!({})).await;
    let added = ws.next_payload().await;
    let event = &added["data"]["feedEvents"];
    assert_eq!(event["kind"], "ADDED", "{added}");
    assert_eq!(event["item"]["actionId"], id.as_str());
    assert_eq!(event["item"]["action"]["actorId"], "bob");
    assert_eq!(event["item"]["reason"]["kind"], "FOLLOWS");

    // The event's cursor pages the feed like any other.
    let cursor = event["item"]["cursor"].as_str().unwrap();
    let (page, _) = alice
        .feed_ids(&format!("(last: 5, before: \"{cursor}\")"))
        .await;
    assert!(page.is_empty(), "nothing is newer than the newest item");

    let data = bob
        .data(
            "mutation($id: ID!) { deleteAction(actionId: $id) }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data["deleteAction"], id.as_str());
    let removed = ws.next_payload().await;
    let event = &removed["data"]["feedEvents"];
    assert_eq!(event["kind"], "REMOVED", "{removed}");
    assert_eq!(event["item"]["actionId"], id.as_str());
    assert_eq!(event["item"]["action"], Value::Null, "the action is gone");
    assert!(alice.feed_ids("").await.0.is_empty());
    server.stop().await;
}

async fn restart_keeps_feeds_and_delivers_what_a_crash_left_pending(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;
    let before = bob.post_status("before the crash", json!({})).await;
    bob.wait_delivered(&before).await;
    let stopped = server.stop_keeping_data().await;

    // What a crash leaves: one action never claimed, one claimed by a worker
    // that died (its lease ran out).
    let now = chrono::Utc::now().timestamp_millis();
    let mut left = Vec::new();
    {
        let store = riverfeed::store::open(&stopped.store)
            .await
            .expect("store opens");
        // The dead worker's first, claimed with a lease that ran out.
        for text in ["claimed by a dead worker", "never claimed"] {
            let action = riverfeed::model::Action {
                id: ObjectId::new(),
                tenant: "acme".into(),
                actor_id: "bob".into(),
                conducted: now,
                hidden: false,
                scope: Scope::Public,
                readers: vec![],
                scope_groups: vec![],
                ref_ids: vec![],
                tags: vec![],
                descriptor: Descriptor::new("StatusPost", serde_json::json!({ "text": text })),
                fan_out: FanOut::pending(),
                counts: Default::default(),
                expires_at: None,
                to: Vec::new(),
                foreign: None,
            };
            store.insert_action(&action).await.expect("insert");
            left.push(action.id.to_hex());
            if left.len() == 1 {
                let claimed = store
                    .claim(JobKind::FanOut, "dead-worker", now - 60_000, 30_000, 1)
                    .await
                    .expect("claim");
                assert_eq!(claimed.len(), 1, "the dead worker's claim");
            }
        }
    }

    let server = TestServer::start_on(stopped).await;
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");
    for id in &left {
        bob.wait_delivered(id).await;
    }
    let (ids, _) = alice.feed_ids("").await;
    let ids: HashSet<_> = ids.into_iter().collect();
    assert!(ids.contains(&before), "the old feed survived");
    for id in &left {
        assert!(ids.contains(id), "pending action {id} was delivered");
    }
    assert_eq!(ids.len(), 3);
    server.stop().await;
}

async fn a_feed_page_loads_its_actions_in_one_batch(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;
    let mut ids = Vec::new();
    for i in 0..30 {
        ids.push(bob.post_status(&format!("n{i}"), json!({})).await);
    }
    for id in &ids {
        bob.wait_delivered(id).await;
    }
    // A first read: under a model that keeps a timeline for readers who
    // read, it is built after it.
    alice
        .data("{ feed(first: 1) { edges { cursor } } }", json!({}))
        .await;
    server.rivers_settled().await;
    // The exact MongoDB queries are push's; the other models read the
    // reader's sources (and river) beside the page.
    let model = crate::common::test_feed_model().unwrap_or_default();
    let pushes = model.kind == FeedModelKind::Push;
    let mongo = matches!(backend, Backend::Mongo(_)) && pushes;
    // With copies of actions in the entries, the page reads them there.
    let copies = matches!(backend, Backend::Mongo(_))
        && crate::common::test_store_settings().mongo.embed_actions;
    let finds = || async {
        if mongo {
            server
                .metric("riverfeed_mongodb_commands_total{command=\"find\"}")
                .await
        } else {
            0
        }
    };

    // Without actor names: the item range (with the reader's pending
    // unfollows, read alongside), then the page's actions.
    let pages_before = server.store_calls("timeline").await;
    let loads_before = server.store_calls("get_actions").await;
    let users_before = server.store_calls("get_users").await;
    let finds_before = finds().await;
    let data = alice
        .data(
            "{ feed(first: 25) { edges { node { relevancy action { actionId conducted descriptor { ... on StatusPost { text } } } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(data["feed"]["edges"].as_array().unwrap().len(), 25);
    assert_eq!(server.store_calls("timeline").await - pages_before, 1);
    assert_eq!(
        server.store_calls("get_actions").await - loads_before,
        u64::from(!copies),
        "25 actions, one batch (none with copies)"
    );
    assert_eq!(server.store_calls("get_users").await - users_before, 0);
    if mongo {
        assert_eq!(
            finds().await - finds_before,
            if copies { 2 } else { 3 },
            "two round trips to MongoDB, three queries (one, two with copies)"
        );
    }

    // With actor names: one more batch for the page's actors.
    let users_before = server.store_calls("get_users").await;
    let finds_before = finds().await;
    let data = alice
        .data(
            "{ feed(first: 25) { edges { node { action { actor { name } } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        data["feed"]["edges"][24]["node"]["action"]["actor"]["name"],
        "Bob"
    );
    assert_eq!(
        server.store_calls("get_users").await - users_before,
        u64::from(!copies),
        "their actors, one batch (none with copies)"
    );
    if mongo {
        assert_eq!(
            finds().await - finds_before,
            if copies { 2 } else { 4 },
            "one more, for the actors (none with copies)"
        );
    }
    server.stop().await;
}

async fn followers_and_following(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    for user in ["zoe", "amy", "kim"] {
        server.client("acme", user).follow("bob").await;
    }
    let query = "query($after: String) { user(userId: \"bob\") { name followers(first: 2, after: $after) { edges { node { userId } } pageInfo { hasNextPage endCursor } } } }";
    let data = bob.data(query, json!({ "after": null })).await;
    let ids = |d: &Value| -> Vec<String> {
        d["user"]["followers"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["userId"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(data["user"]["name"], "Bob");
    assert_eq!(ids(&data), ["amy", "kim"]);
    let after = data["user"]["followers"]["pageInfo"]["endCursor"].clone();
    let data = bob.data(query, json!({ "after": after })).await;
    assert_eq!(ids(&data), ["zoe"]);
    let data = bob
        .data(
            "{ user(userId: \"amy\") { following { edges { node { userId name } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        data["user"]["following"]["edges"][0]["node"],
        json!({ "userId": "bob", "name": "Bob" })
    );
    let data = bob
        .data("{ user(userId: \"nobody\") { userId } }", json!({}))
        .await;
    assert_eq!(data["user"], Value::Null);
    let amy = server.client("acme", "amy");
    let data = amy
        .data("mutation { unfollow(userId: \"bob\") }", json!({}))
        .await;
    assert_eq!(data["unfollow"], true);
    let data = amy
        .data("mutation { unfollow(userId: \"bob\") }", json!({}))
        .await;
    assert_eq!(data["unfollow"], false, "a second unfollow changes nothing");
    server.stop().await;
}

async fn requests_without_identity_are_unauthenticated(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let anonymous = server.anonymous();
    for query in [
        "{ feed { edges { cursor } } }",
        "{ viewer { userId } }",
        "mutation { follow(userId: \"bob\") }",
    ] {
        assert_eq!(
            anonymous.error_code(query, json!({})).await,
            "UNAUTHENTICATED"
        );
    }
    // Introspection needs no identity (GraphiQL loads the schema before login).
    let data = anonymous
        .data("{ __schema { queryType { name } } }", json!({}))
        .await;
    assert_eq!(data["__schema"]["queryType"]["name"], "Query");

    // A websocket must say who it is in connection_init, or it is closed.
    for payload in [json!({}), json!({ "x-riverfeed-tenant": "acme" })] {
        let close = WsClient::refused(&server.ws_url(), payload).await;
        let reason = close["reason"].as_str().unwrap_or_default();
        assert_eq!(close["code"], 4403, "{close}");
        assert!(reason.starts_with("UNAUTHENTICATED"), "{close}");
    }
    server.stop().await;
}

async fn get_serves_queries_but_not_mutations(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let http = reqwest::Client::new();
    let get = |query: &str| {
        http.get(format!("{}/graphql", server.base))
            .query(&[("query", query)])
            .header("x-riverfeed-tenant", "acme")
            .header("x-riverfeed-user", "alice")
            .send()
    };
    let response = get("{ viewer { userId } }").await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["data"]["viewer"]["userId"], "alice");
    let response = get("mutation { follow(userId: \"bob\") }").await.unwrap();
    assert_eq!(response.status(), 405);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        first_error_code(&body).as_deref(),
        Some("METHOD_NOT_ALLOWED")
    );

    for path in ["/", "/graphiql", "/demo/", "/healthz"] {
        let response = reqwest::get(format!("{}{path}", server.base))
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    server.stop().await;
}

async fn shutdown_closes_live_websockets(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe("1", FEED_EVENTS).await;
    server.wait_live_topics(1).await;
    // `stop` returns only once every websocket task has ended.
    tokio::time::timeout(crate::common::PATIENCE, server.stop())
        .await
        .expect("shutdown finishes");
    let message = ws
        .next()
        .await
        .expect("a close frame, not a dropped connection");
    assert_eq!(message["type"], "__closed", "{message}");
    assert_eq!(message["code"], 1001, "{message}");
}

#[test]
fn schema_graphql_is_the_exported_sdl() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql");
    let on_disk = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        on_disk == riverfeed::api::sdl(&riverfeed::descriptor::Catalog::builtin()),
        "schema.graphql is out of date: run `riverfeed schema > schema.graphql` (cargo run -- schema > schema.graphql)"
    );
}

async fn readers_comment_and_like(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    let carol = server.client("acme", "carol");
    bob.upsert_user("bob", "Bob").await;
    alice.upsert_user("alice", "Alice").await;
    alice.follow("bob").await;
    let id = bob.post_status("shipped it", json!({})).await;
    bob.wait_delivered(&id).await;

    for text in ["congrats!", "well done", "🎉"] {
        let data = alice
            .data(
                "mutation($id: ID!, $t: String!) { comment(actionId: $id, text: $t) { id author { name } text } }",
                json!({ "id": id, "t": text }),
            )
            .await;
        assert_eq!(data["comment"]["author"]["name"], "Alice");
        assert_eq!(data["comment"]["text"], text);
    }
    let like = "mutation($id: ID!) { like(actionId: $id) { likeCount viewerHasLiked } }";
    let data = alice.data(like, json!({ "id": id })).await;
    assert_eq!(
        data["like"],
        json!({ "likeCount": 1, "viewerHasLiked": true })
    );
    let data = alice.data(like, json!({ "id": id })).await;
    assert_eq!(data["like"]["likeCount"], 1, "liking twice counts once");

    let page = "{ feed { edges { node { action { commentCount likeCount viewerHasLiked } } } } }";
    let seen = alice.data(page, json!({})).await;
    assert_eq!(
        seen["feed"]["edges"][0]["node"]["action"],
        json!({ "commentCount": 3, "likeCount": 1, "viewerHasLiked": true })
    );
    let seen = bob.data(page, json!({})).await;
    assert_eq!(
        seen["feed"]["edges"][0]["node"]["action"]["viewerHasLiked"],
        false
    );

    let thread = "query($id: ID!, $after: String) { action(actionId: $id) { comments(first: 2, after: $after) { edges { node { text } } pageInfo { hasNextPage endCursor } } } }";
    let first = bob.data(thread, json!({ "id": id, "after": null })).await;
    let texts = |d: &Value| -> Vec<String> {
        d["action"]["comments"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["text"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(texts(&first), ["congrats!", "well done"], "oldest first");
    let after = first["action"]["comments"]["pageInfo"]["endCursor"].clone();
    let rest = bob.data(thread, json!({ "id": id, "after": after })).await;
    assert_eq!(texts(&rest), ["🎉"]);
    assert_eq!(rest["action"]["comments"]["pageInfo"]["hasNextPage"], false);

    let data = alice
        .data(
            "mutation($id: ID!) { unlike(actionId: $id) { likeCount viewerHasLiked } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        data["unlike"],
        json!({ "likeCount": 0, "viewerHasLiked": false })
    );

    // A reader who may not see an action cannot react to it: it answers as
    // for an action that does not exist.
    let secret = bob
        .post_status(
            "for alice",
            json!({ "scope": "RESTRICTED", "readers": ["alice"] }),
        )
        .await;
    for mutation in [
        "mutation($id: ID!) { comment(actionId: $id, text: \"hi\") { id } }",
        "mutation($id: ID!) { like(actionId: $id) { id } }",
    ] {
        let body = carol.post(mutation, json!({ "id": secret })).await;
        assert_eq!(
            first_error_code(&body).as_deref(),
            Some("NOT_FOUND"),
            "{body}"
        );
    }
    let body = alice
        .post(
            "mutation($id: ID!) { comment(actionId: $id, text: \"  \") { id } }",
            json!({ "id": secret }),
        )
        .await;
    assert_eq!(first_error_code(&body).as_deref(), Some("BAD_USER_INPUT"));
    server.stop().await;
}

crate::on_both_backends!(
    readers_comment_and_like,
    a_follower_sees_the_followed_users_action,
    pages_have_no_gaps_or_duplicates_while_new_items_arrive,
    paging_backwards_with_last_and_before,
    slices_list_actions_by_referenced_object,
    feed_events_stream_added_and_removed,
    restart_keeps_feeds_and_delivers_what_a_crash_left_pending,
    a_feed_page_loads_its_actions_in_one_batch,
    followers_and_following,
    requests_without_identity_are_unauthenticated,
    get_serves_queries_but_not_mutations,
    shutdown_closes_live_websockets,
);

// Paging on while items arrive, what a live follower is told and a page's
// store calls depend on the feed model, and the cross-model test
// (`models::`) does not see them: proved under every other model too.
crate::under_other_models!(
    pages_have_no_gaps_or_duplicates_while_new_items_arrive,
    feed_events_stream_added_and_removed,
    a_feed_page_loads_its_actions_in_one_batch,
);

/// A fan-out's lease shows on its action while a worker holds its job
/// (`lockedUntil`, `worker`, read from the job), beside how far it got
/// (`state`, the action's own): here a worker of another process. Both
/// executors show it alike.
#[tokio::test]
async fn a_held_fan_out_shows_its_lease() {
    let Some((url, dir)) = crate::common::store_url(Backend::Mongo("api_fan_out_lease")) else {
        return;
    };
    let server = TestServer::start_with(
        crate::common::Stopped {
            store: url.clone(),
            dir,
        },
        |listen| riverfeed::server::ServeOptions {
            worker: None,
            ..riverfeed::server::ServeOptions::new(listen)
        },
    )
    .await;
    let bob = server.client("acme", "bob");
    let id = bob.post_status("held", json!({})).await;
    let query =
        "query Lease($id: ID!) { action(actionId: $id) { fanOut { state lockedUntil worker } } }";
    let data = bob.data(query, json!({ "id": id })).await;
    assert_eq!(
        data["action"]["fanOut"],
        json!({ "state": "PENDING", "lockedUntil": null, "worker": null }),
        "queued, not held"
    );
    let other = riverfeed::store::open(&url).await.expect("the store");
    let now = chrono::Utc::now().timestamp_millis();
    let held = other
        .claim(JobKind::FanOut, "w-elsewhere", now, 60_000, 10)
        .await
        .expect("claim");
    assert_eq!(held.len(), 1, "its job");
    let data = bob.data(query, json!({ "id": id })).await;
    let fan_out = &data["action"]["fanOut"];
    assert_eq!(
        fan_out["state"], "PENDING",
        "nothing written yet: {fan_out}"
    );
    assert_eq!(fan_out["worker"], "w-elsewhere", "{fan_out}");
    let until = fan_out["lockedUntil"].as_str().expect("a lease's end");
    let until = chrono::DateTime::parse_from_rfc3339(until).expect("a time");
    assert_eq!(until.timestamp_millis(), now + 60_000, "{fan_out}");
    let planned = "riverfeed_graphql_executions_total{name=\"Lease\",executor=\"planned\"}";
    assert!(server.metric(planned).await >= 1, "the lease read planned");
    server.server.planner.set_enabled(false);
    let general = bob.data(query, json!({ "id": id })).await;
    assert_eq!(general, data, "as async-graphql answers it");
    server.stop().await;
}

/// Arguments that name an action or a user are `actionId` / `userId`; the old
/// `id` (and `ids`) still works for one release, deprecated, and exactly one
/// of the two must be given. Argument names live above the storage port, so
/// one backend proves them; the rest of the suite uses the new names.
#[tokio::test]
async fn renamed_arguments_keep_their_old_names_deprecated() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let data = bob
        .data(
            "mutation { upsertUser(input: {id: \"bob\", name: \"Bob\"}) { userId } }",
            json!({}),
        )
        .await;
    assert_eq!(data["upsertUser"]["userId"], "bob", "the old input field");
    let id = bob.post_status("shipped it", json!({})).await;
    let data = bob
        .data(
            "query($id: ID!) { action(id: $id) { actionId } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data["action"]["actionId"], json!(id), "the old argument");

    let both = "query($id: ID!) { action(actionId: $id, id: $id) { actionId } }";
    let body = bob.post(both, json!({ "id": id })).await;
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    assert_eq!(
        body["errors"][0]["message"],
        "give `actionId` or its deprecated old name `id`, not both"
    );
    let body = bob.post("{ action { actionId } }", json!({})).await;
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    assert_eq!(body["errors"][0]["message"], "`actionId` is required");

    let data = bob
        .data(
            "{ query: __type(name: \"Query\") { ...Args } mutation: __type(name: \"Mutation\") { ...Args }
               input: __type(name: \"UpsertUserInput\") { name inputFields(includeDeprecated: true) { name isDeprecated deprecationReason } } }
             fragment Args on __Type { name fields { name args(includeDeprecated: true) { name isDeprecated deprecationReason } } }",
            json!({}),
        )
        .await;
    let mut deprecated = Vec::new();
    for root in ["query", "mutation"] {
        for field in data[root]["fields"].as_array().expect("fields") {
            for arg in field["args"].as_array().expect("args") {
                if arg["isDeprecated"] == true {
                    deprecated.push(format!(
                        "{}.{}({}): {}",
                        data[root]["name"].as_str().unwrap_or_default(),
                        field["name"].as_str().unwrap_or_default(),
                        arg["name"].as_str().unwrap_or_default(),
                        arg["deprecationReason"].as_str().unwrap_or_default()
                    ));
                }
            }
        }
    }
    for field in data["input"]["inputFields"]
        .as_array()
        .expect("input fields")
    {
        if field["isDeprecated"] == true {
            deprecated.push(format!(
                "UpsertUserInput.{}: {}",
                field["name"].as_str().unwrap_or_default(),
                field["deprecationReason"].as_str().unwrap_or_default()
            ));
        }
    }
    deprecated.sort();
    assert_eq!(
        deprecated,
        [
            "Mutation.deleteAction(id): Use `actionId`.",
            "Mutation.hideAction(id): Use `actionId`.",
            "Mutation.setActionScope(id): Use `actionId`.",
            "Query.action(id): Use `actionId`.",
            "Query.actions(ids): Use `actionIds`.",
            "Query.user(id): Use `userId`.",
            "UpsertUserInput.id: Use `userId`.",
        ]
    );
    server.stop().await;
}
