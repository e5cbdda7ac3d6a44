//! Who sees what, end to end: scopes (team, department, restricted),
//! friends, hidden actions, and pages that move past what the viewer can no
//! longer read.

use serde_json::{json, Value};

use riverfeed::server::ServeOptions;
use riverfeed::store::prelude::*;
use riverfeed::store::FeedRange;
use riverfeed::timeline::{FeedModel, FeedModelKind};

use crate::common::{store_url, Backend, Stopped, TestServer, WsClient, FEED_EVENTS};

async fn team_scope_reaches_team_members_and_not_other_followers(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    let carol = server.client("acme", "carol");
    let dave = server.client("acme", "dave");
    bob.upsert_user("bob", "Bob").await;
    let service = server.service("acme");
    for member in ["bob", "alice", "carol"] {
        service.add_member("recruiting", "TEAM", member).await;
    }
    dave.follow("bob").await;
    alice.follow("bob").await;

    let id = bob
        .post_status("team only", json!({ "scope": "TEAM" }))
        .await;
    bob.wait_delivered(&id).await;

    for (reader, expect) in [(&alice, true), (&carol, true), (&bob, true), (&dave, false)] {
        let (ids, _) = reader.feed_ids("").await;
        assert_eq!(ids.contains(&id), expect, "feed: {ids:?}");
        let data = reader
            .data(
                "query($id: ID!) { action(actionId: $id) { actionId } }",
                json!({ "id": id }),
            )
            .await;
        assert_eq!(!data["action"].is_null(), expect, "action(id): {data}");
    }
    let data = alice
        .data("{ feed { edges { node { reason { kind } } } } }", json!({}))
        .await;
    assert_eq!(data["feed"]["edges"][0]["node"]["reason"]["kind"], "TEAM");

    // A TEAM action from someone in no team is refused, not silently private.
    let code = dave
        .error_code(
            "mutation { recordAction(input: {descriptor: {statusPost: {text: \"x\"}}, scope: TEAM}) { actionId } }",
            json!({}),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    server.stop().await;
}

async fn restricted_actions_reach_only_their_readers(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    let carol = server.client("acme", "carol");
    server.service("acme").upsert_user("alice", "Alice").await;
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;
    carol.follow("bob").await;
    let id = bob
        .post_status(
            "for alice",
            json!({ "scope": "RESTRICTED", "readers": ["alice"] }),
        )
        .await;
    bob.wait_delivered(&id).await;
    assert!(alice.feed_ids("").await.0.contains(&id));
    assert!(!carol.feed_ids("").await.0.contains(&id));
    let data = carol
        .data(
            "query($id: ID!) { actions(actionIds: [$id]) { actionId } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data["actions"], json!([null]));
    let data = bob
        .data(
            "query($id: ID!) { action(actionId: $id) { readers } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(data["action"]["readers"], json!(["alice"]));
    server.stop().await;
}

async fn hiding_removes_from_feeds_and_only_the_actor_may(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;
    let first = bob.post_status("one", json!({})).await;
    let second = bob.post_status("two", json!({})).await;
    bob.wait_delivered(&first).await;
    bob.wait_delivered(&second).await;

    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe("1", FEED_EVENTS).await;
    server.wait_live_topics(1).await;

    let code = alice
        .error_code(
            "mutation($id: ID!) { hideAction(actionId: $id) { id } }",
            json!({ "id": first }),
        )
        .await;
    assert_eq!(code, "FORBIDDEN");
    let code = alice
        .error_code(
            "mutation($id: ID!) { deleteAction(actionId: $id) }",
            json!({ "id": first }),
        )
        .await;
    assert_eq!(code, "FORBIDDEN");

    let data = bob
        .data(
            "mutation($id: ID!) { hideAction(actionId: $id) { hidden } }",
            json!({ "id": first }),
        )
        .await;
    assert_eq!(data["hideAction"]["hidden"], true);
    // The two deliveries' ADDED may still be on their way (an action reads
    // as delivered once committed; its events follow): the removal is next.
    let mut event = ws.next_payload().await;
    while event["data"]["feedEvents"]["kind"] == "ADDED" {
        let id = &event["data"]["feedEvents"]["item"]["actionId"];
        assert!(*id == first.as_str() || *id == second.as_str(), "{event}");
        event = ws.next_payload().await;
    }
    assert_eq!(event["data"]["feedEvents"]["kind"], "REMOVED");
    assert_eq!(
        event["data"]["feedEvents"]["item"]["actionId"],
        first.as_str()
    );
    assert_eq!(alice.feed_ids("").await.0, vec![second.clone()]);
    assert!(
        !bob.feed_ids("").await.0.contains(&first),
        "out of the actor's feed too"
    );
    let data = alice
        .data(
            "query($id: ID!) { action(actionId: $id) { actionId } }",
            json!({ "id": first }),
        )
        .await;
    assert_eq!(data["action"], Value::Null, "hidden from readers");

    // A reader hides an item from their own feed only.
    let data = alice
        .data(
            "mutation($id: ID!) { hideFeedItem(actionId: $id) }",
            json!({ "id": second }),
        )
        .await;
    assert_eq!(data["hideFeedItem"], true);
    let event = ws.next_payload().await;
    assert_eq!(event["data"]["feedEvents"]["kind"], "REMOVED");
    assert!(alice.feed_ids("").await.0.is_empty());
    assert_eq!(bob.feed_ids("").await.0, vec![second.clone()]);
    let data = alice
        .data(
            "mutation($id: ID!) { hideFeedItem(actionId: $id) }",
            json!({ "id": second }),
        )
        .await;
    assert_eq!(data["hideFeedItem"], false);
    server.stop().await;
}

/// Items a reader holds but may no longer read (their actions were
/// scoped away from them) are skipped, however many a page meets. Under
/// push, where the items stay in the timeline until then.
async fn pages_move_past_items_the_viewer_can_no_longer_read(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    let server = TestServer::start_with(Stopped { store, dir }, |url| ServeOptions {
        model: FeedModel::of(FeedModelKind::Push),
        ..ServeOptions::new(url)
    })
    .await;
    let dan = server.client("acme", "dan");
    let carol = server.client("acme", "carol");
    dan.upsert_user("dan", "Dan").await;
    carol.follow("dan").await;
    for member in ["dan", "carol"] {
        server
            .service("acme")
            .add_member("t1", "TEAM", member)
            .await;
    }
    let public = dan.post_status("for everyone", json!({})).await;
    let mut team = Vec::new();
    for i in 0..7 {
        team.push(
            dan.post_status(&format!("team {i}"), json!({ "scope": "TEAM" }))
                .await,
        );
    }
    for id in team.iter().chain([&public]) {
        dan.wait_delivered(id).await;
    }
    assert_eq!(carol.feed_ids("").await.0.len(), 8);
    for id in &team {
        dan.data(
            "mutation($id: ID!) { setActionScope(actionId: $id, scope: RESTRICTED, readers: [\"dan\"]) { id } }",
            json!({ "id": id }),
        )
        .await;
    }

    // A full page: the unreadable items are skipped to fill it.
    let (ids, info) = carol.feed_ids("(first: 5)").await;
    assert_eq!(ids, vec![public.clone()]);
    assert_eq!(info["hasNextPage"], false);

    // A page that scans only unreadable items still moves the cursor on.
    let (ids, info) = carol.feed_ids("(first: 1)").await;
    assert!(ids.is_empty(), "{ids:?}");
    assert_eq!(info["hasNextPage"], true);
    let mut cursor = info["endCursor"]
        .as_str()
        .expect("an end cursor")
        .to_owned();
    let mut seen = Vec::new();
    for _ in 0..8 {
        let (ids, info) = carol
            .feed_ids(&format!("(first: 1, after: \"{cursor}\")"))
            .await;
        seen.extend(ids);
        if info["hasNextPage"] == false {
            break;
        }
        cursor = info["endCursor"]
            .as_str()
            .expect("an end cursor")
            .to_owned();
    }
    assert_eq!(seen, vec![public.clone()]);

    // Slices are read the same way.
    let data = carol
        .data(
            "{ slice(refId: \"nothing\") { edges { cursor } pageInfo { hasNextPage endCursor } } }",
            json!({}),
        )
        .await;
    assert_eq!(data["slice"]["pageInfo"]["hasNextPage"], false);
    assert_eq!(data["slice"]["pageInfo"]["endCursor"], Value::Null);
    server.stop().await;
}

/// Leaving a group takes its TEAM items out of the reader's feed at once
/// (the request writes nothing per item) and tells a live reader, the
/// worker then takes them out of storage, and joining again shows the
/// group's actions from the new join on, not the ones from before.
async fn leaving_a_group_takes_its_items_out(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let dan = server.client("acme", "dan");
    let carol = server.client("acme", "carol");
    dan.upsert_user("dan", "Dan").await;
    carol.follow("dan").await;
    let service = server.service("acme");
    for member in ["dan", "carol"] {
        service.add_member("t1", "TEAM", member).await;
    }
    let public = dan.post_status("for everyone", json!({})).await;
    let mut team = Vec::new();
    for i in 0..3 {
        team.push(
            dan.post_status(&format!("team {i}"), json!({ "scope": "TEAM" }))
                .await,
        );
    }
    for id in team.iter().chain([&public]) {
        dan.wait_delivered(id).await;
    }
    let mut all: Vec<String> = team.iter().rev().cloned().collect();
    all.push(public.clone());
    assert_eq!(carol.feed_ids("").await.0, all);

    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "carol").await;
    ws.subscribe("1", FEED_EVENTS).await;
    server.wait_live_topics(1).await;
    let data = carol
        .data("mutation { leaveGroup(groupId: \"t1\") }", json!({}))
        .await;
    assert_eq!(data["leaveGroup"], true);
    assert_eq!(carol.feed_ids("").await.0, vec![public.clone()]);
    // Whether they were written or pulled, each is announced REMOVED.
    let mut removed: Vec<String> = Vec::new();
    while !team.iter().all(|id| removed.contains(id)) {
        let payload = ws.next_payload().await;
        let event = &payload["data"]["feedEvents"];
        assert_eq!(event["kind"], "REMOVED", "{payload}");
        let id = event["item"]["actionId"]
            .as_str()
            .expect("an id")
            .to_owned();
        assert!(team.contains(&id), "only the team's: {payload}");
        removed.push(id);
    }
    // The worker takes them out of storage (whatever was materialised) and
    // ends the cleanup.
    let store = server.server.metered.clone();
    let everything = FeedRange {
        older_than: None,
        newer_than: None,
        limit: 100,
        from_oldest: false,
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let held = store.feed_page("acme", "carol", everything).await.unwrap();
        let pending = riverfeed::timeline::unfollow::pending(store.as_ref(), "acme", "carol")
            .await
            .unwrap();
        if pending.is_empty() && held.iter().all(|i| !team.contains(&i.action_id.to_hex())) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cleanup never ran: {held:?}"
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // Joining again: what the group got before stays out; what it gets
    // from now on comes in.
    service.add_member("t1", "TEAM", "carol").await;
    assert_eq!(carol.feed_ids("").await.0, vec![public.clone()]);
    let after = dan
        .post_status("team again", json!({ "scope": "TEAM" }))
        .await;
    dan.wait_delivered(&after).await;
    assert_eq!(carol.feed_ids("").await.0, vec![after, public]);
    server.stop().await;
}

async fn friends_and_departments_see_what_they_should(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let service = server.service("acme");
    let dora = server.client("acme", "dora");
    for (id, name) in [
        ("dora", "Dora"),
        ("finn", "Finn"),
        ("hana", "Hana"),
        ("ivan", "Ivan"),
    ] {
        service.upsert_user(id, name).await;
    }
    for member in ["dora", "hana"] {
        service.add_member("sales", "DEPARTMENT", member).await;
    }
    // Friendship is mutual: either side's befriend makes both friends.
    let data = dora
        .data("mutation { befriend(userId: \"finn\") }", json!({}))
        .await;
    assert_eq!(data["befriend"], true);
    let finn = server.client("acme", "finn");
    let data = finn
        .data(
            "{ viewer { friends { edges { node { userId } } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        data["viewer"]["friends"]["edges"][0]["node"]["userId"],
        "dora"
    );

    let public = dora.post_status("hello friends", json!({})).await;
    let department = dora
        .post_status("sales only", json!({ "scope": "DEPARTMENT" }))
        .await;
    dora.wait_delivered(&public).await;
    dora.wait_delivered(&department).await;

    let reasons = |client: &crate::common::Client| {
        let client = client.clone_headers();
        async move {
            let data = client
                .data(
                    "{ feed { edges { node { actionId reason { kind } } } } }",
                    json!({}),
                )
                .await;
            data["feed"]["edges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["node"]["actionId"].as_str().unwrap().to_owned(),
                        e["node"]["reason"]["kind"].as_str().unwrap().to_owned(),
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        reasons(&finn).await,
        vec![(public.clone(), "FRIEND".to_owned())]
    );
    let hana = server.client("acme", "hana");
    assert_eq!(
        reasons(&hana).await,
        vec![(department.clone(), "DEPARTMENT".to_owned())]
    );
    assert!(reasons(&server.client("acme", "ivan")).await.is_empty());
    assert_eq!(reasons(&dora).await.len(), 2, "the actor gets both");
    server.stop().await;
}

crate::on_both_backends!(
    team_scope_reaches_team_members_and_not_other_followers,
    restricted_actions_reach_only_their_readers,
    hiding_removes_from_feeds_and_only_the_actor_may,
    pages_move_past_items_the_viewer_can_no_longer_read,
    leaving_a_group_takes_its_items_out,
    friends_and_departments_see_what_they_should,
);

// Hides and a group left, out at once and told REMOVED live, and the
// DEPARTMENT scope (which the cross-model history does not use) depend on
// the feed model: proved under every other model too.
crate::under_other_models!(
    hiding_removes_from_feeds_and_only_the_actor_may,
    leaving_a_group_takes_its_items_out,
    friends_and_departments_see_what_they_should,
);
