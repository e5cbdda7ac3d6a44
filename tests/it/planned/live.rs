//! Live events from plans: each kind of subscription, opened with planned
//! reads off and then on, answers the same bytes either way (cursors by
//! what they seal), and `/metrics` counts the events each way.

use serde_json::{json, Value};

use super::canonical;
use crate::common::{TestServer, WsClient};

/// A socket of `reader`, and whether its stream is planned.
type Socket = (&'static str, bool, WsClient);

/// Each of `readers` subscribed to `query` twice: with planned reads off,
/// then on (a stream is planned or not as it opens), in that order.
async fn both_ways(
    server: &TestServer,
    readers: &[(&'static str, Value)],
    query: &str,
) -> Vec<Socket> {
    let mut sockets = Vec::new();
    for planned in [false, true] {
        server.server.planner.set_enabled(planned);
        for (reader, variables) in readers {
            let mut ws = WsClient::as_user(&server.ws_url(), "acme", reader).await;
            ws.subscribe_with("1", query, variables.clone()).await;
            sockets.push((*reader, planned, ws));
        }
        let open = (sockets.len()) as u64;
        let deadline = tokio::time::Instant::now() + crate::common::PATIENCE;
        while server.metric("riverfeed_live_subscriptions").await < open {
            assert!(tokio::time::Instant::now() < deadline, "subscriptions open");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
    sockets
}

/// The next payload of every socket, in their order, canonical.
async fn next_of_each(server: &TestServer, sockets: &mut [Socket]) -> Vec<String> {
    let mut got = Vec::new();
    for (_, _, ws) in sockets.iter_mut() {
        got.push(canonical(server, ws.next_payload().await));
    }
    got
}

/// The live events written each way so far: planned, then by async-graphql.
async fn live_events(server: &TestServer) -> (u64, u64) {
    let executed = "riverfeed_live_events_total{executor=";
    let planned = server.counter(&format!("{executed}\"planned\"}}")).await;
    let fallback = server.counter(&format!("{executed}\"fallback\"}}")).await;
    (planned, fallback)
}

/// A frontend's live feed: fragments, aliases, a directive by variable, the
/// action with its actor, descriptor, counts and comments.
const RICH_EVENTS: &str = "subscription Live($n: Int, $withActor: Boolean!) { \
    events: feedEvents { __typename kind ...Item resumeCursor } } \
    fragment Item on FeedEvent { item { __typename id ownerId cursor actionId relevancy \
    reason { kind actorId rule by at } \
    action { id actionId actorId conducted to expiresAt hidden scope refIds tags \
    commentCount likeCount created who: actor @include(if: $withActor) { __typename id userId name } \
    descriptor { __typename ... on StatusPost { text } } \
    comments(first: $n) { edges { cursor node { commentId text authorId author { name } created } } \
    pageInfo { hasNextPage endCursor } } } again: action { actionId } } }";

#[tokio::test]
async fn feed_events_run_planned_and_answer_as_the_general_executor_does() {
    let Some(server) = TestServer::start(crate::common::Backend::Embedded).await else {
        return;
    };
    let service = server.service("acme");
    for (id, name) in [
        ("ann", "Ann"),
        ("bob", "Bob \"✓\""),
        ("cat", "Cat"),
        ("dan", "Dan"),
    ] {
        service.upsert_user(id, name).await;
    }
    for reader in ["ann", "cat"] {
        let assign = format!("mutation {{ assign(userId: \"{reader}\", refId: \"applicant-9\") }}");
        assert_eq!(service.data(&assign, json!({})).await["assign"], true);
        server.client("acme", reader).follow("bob").await;
    }
    // One document, but not one page of comments: the readers share no
    // template.
    let readers = [
        ("ann", json!({ "n": 2, "withActor": true })),
        ("cat", json!({ "n": 0, "withActor": true })),
    ];
    let mut sockets = both_ways(&server, &readers, RICH_EVENTS).await;

    // Added, bumped by a comment (both are assigned), removed.
    let bob = server.client("acme", "bob");
    let action = bob
        .post_status("hired <b>&\u{2028}", json!({ "refIds": ["applicant-9"] }))
        .await;
    bob.wait_delivered(&action).await;
    let mut events = vec![next_of_each(&server, &mut sockets).await];
    crate::live::comment(
        &server.client("acme", "dan"),
        &action,
        "a \"strong\" candidate",
    )
    .await;
    events.push(next_of_each(&server, &mut sockets).await);
    let deleted = bob
        .data(
            "mutation($a: ID!) { deleteAction(actionId: $a) }",
            json!({ "a": action }),
        )
        .await;
    assert!(deleted["deleteAction"].is_string(), "{deleted}");
    events.push(next_of_each(&server, &mut sockets).await);

    // Sockets: ann and cat unplanned, then ann and cat planned.
    for (i, round) in events.iter().enumerate() {
        assert_eq!(round[0], round[2], "ann's event {i}, planned and not");
        assert_eq!(round[1], round[3], "cat's event {i}, planned and not");
    }
    let event = |round: usize, socket: usize| -> Value {
        serde_json::from_str(&events[round][socket]).expect("json")
    };
    let kinds: Vec<Value> = (0..3)
        .map(|r| event(r, 2)["data"]["events"]["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("ADDED"), json!("BUMPED"), json!("REMOVED")]);
    // Ann's and cat's, planned, bumped.
    let written = event(1, 2)["data"]["events"]["item"]["action"].clone();
    assert_eq!(written["who"]["name"], "Bob \"✓\"", "{written}");
    assert_eq!(
        written["descriptor"]["text"], "hired <b>&\u{2028}",
        "{written}"
    );
    let comments = &written["comments"]["edges"];
    assert_eq!(
        comments[0]["node"]["text"], "a \"strong\" candidate",
        "{written}"
    );
    let none = &event(1, 3)["data"]["events"]["item"]["action"]["comments"];
    assert_eq!(none["edges"], json!([]), "{none}");
    assert_eq!(none["pageInfo"]["hasNextPage"], true, "{none}");
    assert_eq!(events[2][3].matches("\"action\":null").count(), 1);

    assert_eq!(
        live_events(&server).await,
        (6, 6),
        "two readers' three events, planned and as before"
    );
    server.stop().await;
}

/// A slice's live events, planned and not: one template for the readers
/// who share a selection, and one each for a selection that asks what is
/// each reader's own (`viewerHasLiked`, `readers`).
#[tokio::test]
async fn slice_events_run_planned_and_answer_as_the_general_executor_does() {
    let Some(server) = TestServer::start(crate::common::Backend::Embedded).await else {
        return;
    };
    server.service("acme").upsert_user("bob", "Bob").await;
    let query = "subscription S($withActor: Boolean!) { \
        s: sliceEvents(refId: \"applicant-3\") { __typename ...A } } \
        fragment A on SliceEvent { action { id actionId actorId conducted scope refIds tags \
        commentCount likeCount who: actor @include(if: $withActor) { __typename name } \
        descriptor { __typename ... on StatusPost { text } } \
        comments(first: 1) { edges { node { text } } pageInfo { hasNextPage } } } }";
    let own = query.replace("commentCount", "viewerHasLiked readers commentCount");
    let variables = json!({ "withActor": true });
    let readers = [("ann", variables.clone()), ("cat", variables.clone())];
    let mut sockets = both_ways(&server, &readers, query).await;
    sockets.extend(both_ways(&server, &[("dan", variables)], &own).await);
    let bob = server.client("acme", "bob");
    bob.post_status("on <3>", json!({ "refIds": ["applicant-3"] }))
        .await;
    let got = next_of_each(&server, &mut sockets).await;
    assert_eq!(got[0], got[2], "ann's event, planned and not");
    assert_eq!(got[1], got[3], "cat's event, planned and not");
    assert_eq!(got[4], got[5], "dan's own, planned and not");
    let event: Value = serde_json::from_str(&got[3]).expect("json");
    assert_eq!(
        event["data"]["s"]["action"]["who"]["name"], "Bob",
        "{event}"
    );
    let event: Value = serde_json::from_str(&got[5]).expect("json");
    assert_eq!(event["data"]["s"]["action"]["viewerHasLiked"], false);
    assert_eq!(
        live_events(&server).await,
        (3, 3),
        "three readers' events, planned and as before"
    );
    server.stop().await;
}

/// An action's reactions: a comment with its author, a like and an unlike
/// with who did them (and their groups, as the reader may see them), the
/// counts after each; aliases, a fragment and a directive by variable.
const REACTIONS: &str = "subscription R($a: ID!, $withUser: Boolean!) { \
    r: actionEvents(actionId: $a) { __typename kind ...Reaction counts: commentCount likeCount } } \
    fragment Reaction on ActionEvent { actionId \
    comment { __typename id commentId actionId authorId author { __typename id userId name } text created } \
    who: user @include(if: $withUser) { userId name groups { groupId } } user { __typename id } }";

#[tokio::test]
async fn action_events_run_planned_and_answer_as_the_general_executor_does() {
    let Some(server) = TestServer::start(crate::common::Backend::Embedded).await else {
        return;
    };
    let service = server.service("acme");
    for (id, name) in [("bob", "Bob"), ("dan", "Dan \"✓\" <i>")] {
        service.upsert_user(id, name).await;
    }
    let bob = server.client("acme", "bob");
    let action = bob.post_status("hello", json!({})).await;
    bob.wait_delivered(&action).await;
    let variables = json!({ "a": action, "withUser": true });
    let readers = [("ann", variables.clone()), ("cat", variables)];
    let mut sockets = both_ways(&server, &readers, REACTIONS).await;

    // Dan comments, likes, unlikes; "eve" (no profile) likes.
    let dan = server.client("acme", "dan");
    crate::live::comment(&dan, &action, "a \"fine\"\u{2028} post").await;
    let mut events = vec![next_of_each(&server, &mut sockets).await];
    for (who, like) in [("dan", "like"), ("dan", "unlike"), ("eve", "like")] {
        let client = server.client("acme", who);
        let mutation = format!("mutation($a: ID!) {{ {like}(actionId: $a) {{ actionId }} }}");
        client.data(&mutation, json!({ "a": action })).await;
        events.push(next_of_each(&server, &mut sockets).await);
    }
    // Sockets: ann and cat unplanned, then ann and cat planned.
    for (i, round) in events.iter().enumerate() {
        assert_eq!(round[0], round[2], "ann's event {i}, planned and not");
        assert_eq!(round[1], round[3], "cat's event {i}, planned and not");
        assert_eq!(round[2], round[3], "one event for all who may read it");
    }
    let event = |round: usize| -> Value {
        let event: Value = serde_json::from_str(&events[round][2]).expect("json");
        event["data"]["r"].clone()
    };
    let commented = event(0);
    assert_eq!(commented["kind"], "COMMENTED", "{commented}");
    assert_eq!(commented["comment"]["text"], "a \"fine\"\u{2028} post");
    assert_eq!(commented["comment"]["author"]["name"], "Dan \"✓\" <i>");
    assert_eq!(
        (commented["counts"].as_u64(), commented["who"].clone()),
        (Some(1), Value::Null)
    );
    let kinds: Vec<Value> = (1..4).map(|r| event(r)["kind"].clone()).collect();
    assert_eq!(kinds, [json!("LIKED"), json!("UNLIKED"), json!("LIKED")]);
    let dan = json!({ "userId": "dan", "name": "Dan \"✓\" <i>", "groups": [] });
    assert_eq!(event(1)["who"], dan);
    let eve = json!({ "userId": "eve", "name": null, "groups": [] });
    assert_eq!(event(3)["who"], eve);
    assert_eq!(event(3)["likeCount"], 1);

    assert_eq!(
        live_events(&server).await,
        (8, 8),
        "two readers' four events, planned and as before"
    );
    server.stop().await;
}

/// A notifications page's live events: every field of a group, its action
/// with what is the reader's own (`viewerHasLiked`), its actors and
/// notifications, and the counts.
const NOTICES: &str = "subscription N($actors: Int!) { \
    n: notificationEvents { __typename kind groupId unseenCount unreadCount group { ...G } } } \
    fragment G on NotificationGroup { __typename id key reason refId actorCount count unreadCount \
    firstAt lastAt seen read actors(first: $actors) { userId name } \
    action { actionId actorId commentCount likeCount viewerHasLiked \
    descriptor { __typename ... on StatusPost { text } } } \
    notifications(first: 2) { __typename id reason actorId actor { name } action { actionId } \
    commentId refId at seen read } }";

#[tokio::test]
async fn notification_events_run_planned_and_answer_as_the_general_executor_does() {
    let Some(server) = TestServer::start(crate::common::Backend::Embedded).await else {
        return;
    };
    let service = server.service("acme");
    for (id, name) in [("mary", "Mary"), ("rita", "Rita \"R\"")] {
        service.upsert_user(id, name).await;
    }
    let mary = server.client("acme", "mary");
    let action = mary.post_status("hello <world>", json!({})).await;
    mary.wait_delivered(&action).await;
    mary.data(
        "mutation($a: ID!) { like(actionId: $a) { actionId } }",
        json!({ "a": action }),
    )
    .await;
    let readers = [("mary", json!({ "actors": 2 }))];
    let mut sockets = both_ways(&server, &readers, NOTICES).await;
    // Each stream begins with the counts.
    let mut events = vec![next_of_each(&server, &mut sockets).await];
    let rita = server.client("acme", "rita");
    rita.data(
        "mutation($a: ID!) { like(actionId: $a) { actionId } }",
        json!({ "a": action }),
    )
    .await;
    events.push(next_of_each(&server, &mut sockets).await);
    crate::live::comment(&rita, &action, "nice").await;
    events.push(next_of_each(&server, &mut sockets).await);
    let added: Value = serde_json::from_str(&events[1][1]).expect("json");
    let group = added["data"]["n"]["groupId"].clone();
    let ids = json!({ "ids": [group] });
    for (mutation, variables) in [
        (
            "mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }",
            &ids,
        ),
        ("mutation { markSeen { unseenCount } }", &json!({})),
        (
            "mutation($ids: [ID!]!) { archive(ids: $ids) { unreadCount } }",
            &ids,
        ),
    ] {
        mary.data(mutation, variables.clone()).await;
        events.push(next_of_each(&server, &mut sockets).await);
    }
    for (i, round) in events.iter().enumerate() {
        assert_eq!(round[0], round[1], "event {i}, planned and not");
    }
    let event = |round: usize| -> Value {
        let event: Value = serde_json::from_str(&events[round][1]).expect("json");
        event["data"]["n"].clone()
    };
    let kinds: Vec<Value> = (0..6).map(|r| event(r)["kind"].clone()).collect();
    let expected = ["COUNTS", "ADDED", "ADDED", "UPDATED", "COUNTS", "REMOVED"];
    assert_eq!(kinds, expected.map(|k| json!(k)));
    let liked = &event(1)["group"];
    assert_eq!(liked["reason"], "LIKE", "{liked}");
    assert_eq!(
        liked["actors"],
        json!([{ "userId": "rita", "name": "Rita \"R\"" }])
    );
    assert_eq!(liked["action"]["viewerHasLiked"], true, "{liked}");
    assert_eq!(liked["action"]["descriptor"]["text"], "hello <world>");
    assert_eq!(liked["notifications"][0]["actor"]["name"], "Rita \"R\"");
    assert_eq!(event(5)["group"], Value::Null);

    assert_eq!(
        live_events(&server).await,
        (6, 6),
        "six events, planned and as before"
    );
    server.stop().await;
}
