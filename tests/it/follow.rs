//! A new follow or friendship shows the other user's recent actions at once
//! (as many as `backfill` says), only those the reader may see, each once.

use riverfeed::model::EdgeKind;
use riverfeed::store::{FollowJob, Graph, Records, Unfollow};
use riverfeed::timeline::{follow, unfollow};
use serde_json::{json, Value};

use crate::common::{Backend, Client, TestServer, WsClient};

const FEED: &str = "{ feed(first: 50) { edges { node { actionId reason { kind actorId } } } } }";

async fn feed(client: &Client) -> Vec<(String, String)> {
    let data: Value = client.data(FEED, json!({})).await;
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
        .collect()
}

async fn follow_with(client: &Client, user: &str, backfill: Option<i64>) -> Value {
    client
        .post(
            "mutation($u: ID!, $b: Int) { follow(userId: $u, backfill: $b) }",
            json!({ "u": user, "b": backfill }),
        )
        .await
}

async fn a_new_follow_shows_recent_actions_the_reader_may_see(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let service = server.service("acme");
    for (id, name) in [("bob", "Bob"), ("carol", "Carol"), ("frank", "Frank")] {
        service.upsert_user(id, name).await;
    }
    let bob = server.client("acme", "bob");
    let old = bob
        .post_status("old", json!({ "conducted": "2026-01-01T00:00:00Z" }))
        .await;
    let for_carol = bob
        .post_status(
            "for carol",
            json!({ "conducted": "2026-01-02T00:00:00Z", "scope": "RESTRICTED", "readers": ["carol"] }),
        )
        .await;
    let new = bob
        .post_status("new", json!({ "conducted": "2026-01-03T00:00:00Z" }))
        .await;
    let hidden = bob
        .post_status("hidden", json!({ "conducted": "2026-01-04T00:00:00Z" }))
        .await;
    bob.data(
        "mutation($id: ID!) { hideAction(actionId: $id) { id } }",
        json!({ "id": hidden }),
    )
    .await;
    for id in [&old, &for_carol, &new] {
        bob.wait_delivered(id).await;
    }

    // By default: what alice may see, newest first, because she follows.
    let alice = server.client("acme", "alice");
    alice.follow("bob").await;
    let follows = |id: &str| (id.to_owned(), "FOLLOWS".to_owned());
    assert_eq!(feed(&alice).await, [follows(&new), follows(&old)]);
    // Following again changes nothing and copies nothing twice.
    let again = follow_with(&alice, "bob", None).await;
    assert_eq!(again["data"]["follow"], false, "{again}");
    assert_eq!(feed(&alice).await.len(), 2);

    // Carol is named by the restricted one: she gets it, with that reason.
    let carol = server.client("acme", "carol");
    carol.follow("bob").await;
    assert_eq!(
        feed(&carol).await,
        [
            follows(&new),
            (for_carol.clone(), "RESTRICTED".to_owned()),
            follows(&old)
        ]
    );

    // A smaller backfill; none at all; out of range.
    let dave = server.client("acme", "dave");
    let data = follow_with(&dave, "bob", Some(1)).await;
    assert_eq!(data["data"]["follow"], true, "{data}");
    assert_eq!(feed(&dave).await, [follows(&new)]);
    let erin = server.client("acme", "erin");
    follow_with(&erin, "bob", Some(0)).await;
    assert!(feed(&erin).await.is_empty());
    for bad in [-1, 1_001] {
        let body = follow_with(&server.client("acme", "gina"), "bob", Some(bad)).await;
        assert_eq!(
            body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
            "{body}"
        );
    }

    // A friendship goes both ways.
    let frank = server.client("acme", "frank");
    let franks = frank.post_status("frank's", json!({})).await;
    frank.wait_delivered(&franks).await;
    let data = bob
        .data(
            "mutation { befriend(userId: \"frank\", backfill: 5) }",
            json!({}),
        )
        .await;
    assert_eq!(data["befriend"], true);
    let friend = |id: &str| (id.to_owned(), "FRIEND".to_owned());
    assert!(feed(&bob).await.contains(&friend(&franks)));
    let franks_feed = feed(&frank).await;
    for id in [&new, &old] {
        assert!(franks_feed.contains(&friend(id)), "{franks_feed:?}");
    }
    assert!(!franks_feed
        .iter()
        .any(|(id, _)| id == &for_carol || id == &hidden));
    server.stop().await;
}

/// A reader who is online sees the backfill arrive as `ADDED` events.
async fn a_live_reader_sees_the_backfill_arrive(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let old = bob
        .post_status("old", json!({ "conducted": "2026-01-01T00:00:00Z" }))
        .await;
    let new = bob
        .post_status("new", json!({ "conducted": "2026-01-02T00:00:00Z" }))
        .await;
    for id in [&old, &new] {
        bob.wait_delivered(id).await;
    }
    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "gina").await;
    ws.subscribe(
        "1",
        "subscription { feedEvents { kind item { actionId reason { kind actorId } } } }",
    )
    .await;
    server.wait_live_topics(1).await;
    let gina = server.client("acme", "gina");
    gina.follow("bob").await;
    let mut got = Vec::new();
    for _ in 0..2 {
        let payload = ws.next_payload().await;
        assert!(payload.get("errors").is_none(), "{payload}");
        let event = &payload["data"]["feedEvents"];
        assert_eq!(event["kind"], "ADDED", "{event}");
        assert_eq!(
            event["item"]["reason"],
            json!({ "kind": "FOLLOWS", "actorId": "bob" })
        );
        got.push(event["item"]["actionId"].as_str().unwrap().to_owned());
    }
    assert_eq!(got, [new, old], "newest first");
    server.stop().await;
}

/// An unfollow takes what came by the follow out of the feed at once; the
/// worker then removes it from storage and tells a live reader. With
/// `keepHistory` the items stay; a friendship ends the same way.
async fn an_unfollow_takes_what_came_by_the_follow_out(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let service = server.service("acme");
    for (id, name) in [("alice", "Alice"), ("bob", "Bob")] {
        service.upsert_user(id, name).await;
    }
    let bob = server.client("acme", "bob");
    let p1 = bob
        .post_status("one", json!({ "conducted": "2026-01-01T00:00:00Z" }))
        .await;
    let p2 = bob
        .post_status("two", json!({ "conducted": "2026-01-02T00:00:00Z" }))
        .await;
    let p3 = bob
        .post_status(
            "for alice",
            json!({ "conducted": "2026-01-03T00:00:00Z", "scope": "RESTRICTED", "readers": ["alice"] }),
        )
        .await;
    for id in [&p1, &p2, &p3] {
        bob.wait_delivered(id).await;
    }
    let alice = server.client("acme", "alice");
    alice.follow("bob").await;
    let ids = |feed: Vec<(String, String)>| -> Vec<String> {
        feed.into_iter().map(|(id, _)| id).collect()
    };
    assert_eq!(
        ids(feed(&alice).await),
        [p3.clone(), p2.clone(), p1.clone()]
    );

    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe(
        "1",
        "subscription { feedEvents { kind item { actionId } } }",
    )
    .await;
    server.wait_live_topics(1).await;
    let data = alice
        .data("mutation { unfollow(userId: \"bob\") }", json!({}))
        .await;
    assert_eq!(data["unfollow"], true);
    // At once: the restricted one stays, it did not come by the follow.
    assert_eq!(ids(feed(&alice).await), [p3.as_str()]);
    // Then the worker removes them, and says so.
    let mut removed = Vec::new();
    for _ in 0..2 {
        let payload = ws.next_payload().await;
        let event = &payload["data"]["feedEvents"];
        assert_eq!(event["kind"], "REMOVED", "{payload}");
        removed.push(event["item"]["actionId"].as_str().unwrap().to_owned());
    }
    removed.sort();
    let mut expected = vec![p1.clone(), p2.clone()];
    expected.sort();
    assert_eq!(removed, expected);
    assert_eq!(ids(feed(&alice).await), [p3.as_str()]);
    // Following again shows them again.
    alice.follow("bob").await;
    assert_eq!(
        ids(feed(&alice).await),
        [p3.clone(), p2.clone(), p1.clone()]
    );

    // keepHistory keeps them.
    let carol = server.client("acme", "carol");
    carol.follow("bob").await;
    let data = carol
        .data(
            "mutation { unfollow(userId: \"bob\", keepHistory: true) }",
            json!({}),
        )
        .await;
    assert_eq!(data["unfollow"], true);
    assert_eq!(ids(feed(&carol).await), [p2.clone(), p1.clone()]);

    // A friendship ends the same way, for both.
    let dave = server.client("acme", "dave");
    dave.data("mutation { befriend(userId: \"bob\") }", json!({}))
        .await;
    assert_eq!(ids(feed(&dave).await), [p2.clone(), p1.clone()]);
    dave.data("mutation { unfriend(userId: \"bob\") }", json!({}))
        .await;
    assert!(feed(&dave).await.is_empty());
    server.stop().await;
}

/// Waits until every one of `ids` shows `BUMPED` in `client`'s feed.
async fn wait_bumped(client: &Client, ids: &[&str]) {
    let deadline = tokio::time::Instant::now() + crate::common::DELIVERY_PATIENCE;
    loop {
        let shown = feed(client).await;
        let bumped = |id: &&str| shown.iter().any(|(i, k)| i == id && k == "BUMPED");
        if ids.iter().all(bumped) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never bumped: {shown:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// An item that came by a follow leaves with the follow even once a
/// comment bumped it (its reason now the bump's): the reader's own comment
/// is no reason to see the action. What came another way (a restricted
/// action naming the reader) stays, bumped as well.
async fn an_unfollow_takes_bumped_items_of_the_follow_out(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let service = server.service("acme");
    for (id, name) in [("alice", "Alice"), ("bob", "Bob")] {
        service.upsert_user(id, name).await;
    }
    let alice = server.client("acme", "alice");
    alice.follow("bob").await;
    let bob = server.client("acme", "bob");
    let public = bob.post_status("public", json!({})).await;
    let named = bob
        .post_status(
            "for alice",
            json!({ "scope": "RESTRICTED", "readers": ["alice"] }),
        )
        .await;
    for id in [&public, &named] {
        bob.wait_delivered(id).await;
    }
    for id in [&public, &named] {
        let data = alice
            .data(
                "mutation($a: ID!) { comment(actionId: $a, text: \"mine\") { id } }",
                json!({ "a": id }),
            )
            .await;
        assert!(data["comment"]["id"].is_string(), "{data}");
    }
    wait_bumped(&alice, &[&public, &named]).await;

    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe(
        "1",
        "subscription { feedEvents { kind item { actionId } } }",
    )
    .await;
    server.wait_live_topics(1).await;
    let data = alice
        .data(
            "mutation { unfollow(userId: \"bob\", keepHistory: false) }",
            json!({}),
        )
        .await;
    assert_eq!(data["unfollow"], true);
    let kept = vec![(named.clone(), "BUMPED".to_owned())];
    // At once, on every read.
    assert_eq!(feed(&alice).await, kept);
    // Then the worker removes it from storage, and says so.
    let payload = ws.next_payload().await;
    let event = &payload["data"]["feedEvents"];
    assert_eq!(event["kind"], "REMOVED", "{payload}");
    assert_eq!(event["item"]["actionId"], public.as_str(), "{payload}");
    assert_eq!(feed(&alice).await, kept);
    server.stop().await;
}

/// Alice follows Bob (Carol is there too), Bob posts, and Alice's comment
/// bumps the post in her feed. Returns Alice, Bob and the post.
async fn bumped_follow(server: &TestServer) -> (Client, Client, String) {
    let service = server.service("acme");
    for (id, name) in [("alice", "Alice"), ("bob", "Bob"), ("carol", "Carol")] {
        service.upsert_user(id, name).await;
    }
    let alice = server.client("acme", "alice");
    alice.follow("bob").await;
    let bob = server.client("acme", "bob");
    let post = bob.post_status("one", json!({})).await;
    bob.wait_delivered(&post).await;
    let data = alice
        .data(
            "mutation($a: ID!) { comment(actionId: $a, text: \"mine\") { id } }",
            json!({ "a": post }),
        )
        .await;
    assert!(data["comment"]["id"].is_string(), "{data}");
    wait_bumped(&alice, &[&post]).await;
    (alice, bob, post)
}

/// The jobs of a kind the worker finished.
async fn jobs_done(server: &TestServer, job: &str) -> u64 {
    let name = format!("riverfeed_jobs_total{{job=\"{job}\",outcome=\"ok\"}}");
    server.counter(&name).await
}

/// Waits until the worker finished a `job` past the `before` it had.
async fn jobs_done_past(server: &TestServer, job: &str, before: u64) {
    let deadline = tokio::time::Instant::now() + crate::common::PATIENCE;
    while jobs_done(server, job).await == before {
        assert!(tokio::time::Instant::now() < deadline, "the {job} job ran");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// An unfollow cut off between its writes (its cleanup queued, the edge
/// still standing) ends in a follow that keeps what it brought, as it
/// stood: the cleanup finds the edge standing and takes nothing out.
async fn a_cleanup_finding_its_edge_standing_takes_nothing(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    // Bumped by her comment: an item taken out and put back would come
    // back as it came by the follow.
    let (alice, _, post) = bumped_follow(&server).await;
    let shown = vec![(post.clone(), "BUMPED".to_owned())];
    assert_eq!(feed(&alice).await, shown);
    // What the cut-off unfollow wrote before the edge went.
    let cleanup = Unfollow::edge("acme", "alice", EdgeKind::Follows, "bob");
    let store = server.server.metered.as_ref();
    let before = jobs_done(&server, "cleanup").await;
    unfollow::start(store, &cleanup, 0).await.expect("queued");
    jobs_done_past(&server, "cleanup", before).await;
    assert_eq!(feed(&alice).await, shown, "the follow keeps its items");
    server.stop().await;
}

/// An unfollow while the followee's action was narrowed away from the
/// reader takes its bumped item out too: widened again, it would show by
/// no edge.
async fn an_unfollow_takes_a_narrowed_bumped_item_for_good(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let (alice, bob, post) = bumped_follow(&server).await;
    let scope = |scope: &'static str, readers: Value| {
        let bob = &bob;
        let post = post.clone();
        async move {
            let data = bob
                .data(
                    "mutation($a: ID!, $s: Scope!, $r: [ID!]!) { setActionScope(actionId: $a, scope: $s, readers: $r) { scope } }",
                    json!({ "a": post, "s": scope, "r": readers }),
                )
                .await;
            assert_eq!(data["setActionScope"]["scope"], scope, "{data}");
            bob.wait_delivered(&post).await;
        }
    };
    scope("RESTRICTED", json!(["carol"])).await;
    let before = jobs_done(&server, "cleanup").await;
    let data = alice
        .data("mutation { unfollow(userId: \"bob\") }", json!({}))
        .await;
    assert_eq!(data["unfollow"], true);
    jobs_done_past(&server, "cleanup", before).await;
    scope("PUBLIC", json!([])).await;
    assert_eq!(feed(&alice).await, [], "nothing brings it now");
    server.stop().await;
}

/// A follow cut off by a kill between its writes (its backfill queued, the
/// edge written, the backfill not run) gets its backfill from the worker,
/// as of the follow's time: under `push` the followee's earlier action
/// shows, and under every model the edge begins where its backfill ended.
async fn a_follow_cut_off_before_its_backfill_gets_it_from_the_worker(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let service = server.service("acme");
    for (id, name) in [("alice", "Alice"), ("bob", "Bob")] {
        service.upsert_user(id, name).await;
    }
    let bob = server.client("acme", "bob");
    let post = bob.post_status("before the follow", json!({})).await;
    bob.wait_delivered(&post).await;
    let alice = server.client("acme", "alice");
    // What the cut-off follow wrote: its job and the edge. It was asked
    // for a minute ago, so the worker takes it up at once (the edge goes
    // first here, or the worker could find the job before the edge).
    let store = server.server.metered.as_ref();
    let at = chrono::Utc::now().timestamp_millis() - 60_000;
    let job = FollowJob {
        tenant: "acme".into(),
        reader: "alice".into(),
        actor: "bob".into(),
        kind: EdgeKind::Follows,
        backfill: 10,
        at,
    };
    let before = jobs_done(&server, "follow").await;
    let written = store.set_edge("acme", EdgeKind::Follows, "alice", "bob", true);
    assert!(written.await.expect("the edge"));
    assert!(follow::start(store, &job).await.expect("queued"));
    jobs_done_past(&server, "follow", before).await;
    assert_eq!(feed(&alice).await, [(post, "FOLLOWS".to_owned())]);
    let cuts = store.cuts("acme", "alice").await.expect("cuts");
    assert!(
        cuts.iter()
            .any(|c| c.actor == "bob" && c.began.relevancy == at - 1),
        "the edge begins at the follow's time: {cuts:?}"
    );
    server.stop().await;
}

/// A team action widened to `PUBLIC` stays with a team member who does
/// not follow its actor, with the reason it came by (none applies then).
/// Once they follow the actor, the follow's reason applies: the item keeps
/// its place and takes it, as a fan-out again would give it.
async fn a_follow_gives_a_widened_item_the_reason_that_applies_now(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let service = server.service("acme");
    for (id, name) in [("alice", "Alice"), ("bob", "Bob")] {
        service.upsert_user(id, name).await;
        service.add_member("recruiting", "TEAM", id).await;
    }
    let (alice, bob) = (server.client("acme", "alice"), server.client("acme", "bob"));
    let post = bob
        .post_status("team only", json!({ "scope": "TEAM" }))
        .await;
    bob.wait_delivered(&post).await;
    let data = bob
        .data(
            "mutation($a: ID!) { setActionScope(actionId: $a, scope: PUBLIC) { scope } }",
            json!({ "a": post }),
        )
        .await;
    assert_eq!(data["setActionScope"]["scope"], "PUBLIC", "{data}");
    bob.wait_delivered(&post).await;
    alice.follow("bob").await;
    assert_eq!(feed(&alice).await, [(post, "FOLLOWS".to_owned())]);
    server.stop().await;
}

/// As above, but bob is a celebrity (two followers) whose actions a model
/// that pulls (`hybrid`) merges at read: alice's follow writes nothing for
/// his post, and still gives the item she holds the follow's reason. Her
/// unfollow then takes it out, as under `push`; kept by its old reason, it
/// stayed after the unfollow under `hybrid` alone.
async fn an_unfollow_takes_out_a_widened_item_its_follow_gave_a_reason(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let service = server.service("acme");
    for (id, name) in [
        ("alice", "Alice"),
        ("bob", "Bob"),
        ("carol", "Carol"),
        ("dave", "Dave"),
    ] {
        service.upsert_user(id, name).await;
    }
    for id in ["alice", "bob"] {
        service.add_member("recruiting", "TEAM", id).await;
    }
    for fan in ["carol", "dave"] {
        server.client("acme", fan).follow("bob").await;
    }
    let (alice, bob) = (server.client("acme", "alice"), server.client("acme", "bob"));
    let post = bob
        .post_status("team only", json!({ "scope": "TEAM" }))
        .await;
    bob.wait_delivered(&post).await;
    let data = bob
        .data(
            "mutation($a: ID!) { setActionScope(actionId: $a, scope: PUBLIC) { scope } }",
            json!({ "a": post }),
        )
        .await;
    assert_eq!(data["setActionScope"]["scope"], "PUBLIC", "{data}");
    bob.wait_delivered(&post).await;
    alice.follow("bob").await;
    assert_eq!(feed(&alice).await, [(post, "FOLLOWS".to_owned())]);
    let before = jobs_done(&server, "cleanup").await;
    let data = alice
        .data("mutation { unfollow(userId: \"bob\") }", json!({}))
        .await;
    assert_eq!(data["unfollow"], true);
    jobs_done_past(&server, "cleanup", before).await;
    assert_eq!(feed(&alice).await, [], "it came by the follow, and went");
    server.stop().await;
}

crate::on_both_backends!(
    a_follow_gives_a_widened_item_the_reason_that_applies_now,
    an_unfollow_takes_out_a_widened_item_its_follow_gave_a_reason,
    a_follow_cut_off_before_its_backfill_gets_it_from_the_worker,
    an_unfollow_takes_a_narrowed_bumped_item_for_good,
    a_new_follow_shows_recent_actions_the_reader_may_see,
    a_live_reader_sees_the_backfill_arrive,
    an_unfollow_takes_what_came_by_the_follow_out,
    an_unfollow_takes_bumped_items_of_the_follow_out,
    a_cleanup_finding_its_edge_standing_takes_nothing,
);

// A backfill told to a live reader, and an unfollow's items out at once and
// told REMOVED by its cleanup, depend on the feed model, and the
// cross-model test (`models::`) sees feeds only once the worker is done:
// proved under every other model too.
crate::under_other_models!(
    a_follow_gives_a_widened_item_the_reason_that_applies_now,
    an_unfollow_takes_out_a_widened_item_its_follow_gave_a_reason,
    a_follow_cut_off_before_its_backfill_gets_it_from_the_worker,
    a_live_reader_sees_the_backfill_arrive,
    an_unfollow_takes_what_came_by_the_follow_out,
    an_unfollow_takes_bumped_items_of_the_follow_out,
);
