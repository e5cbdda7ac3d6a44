//! Notifications end to end, on both backends: who hears of what, grouped;
//! read, seen and archived; preferences and mutes; live events on every
//! page of a user; markers; and the worker's writes, idempotent under
//! re-runs and races.

use std::sync::Arc;
use std::time::Duration;

use riverfeed::clock::{Clock, ManualClock};
use riverfeed::model::{Notice, NoticeRange, NoticeReason, ObjectId};
use riverfeed::notify::{self, NoticeRules};
use riverfeed::server::ServeOptions;
use riverfeed::store::prelude::*;
use riverfeed::store::NoticeSelect;
use serde_json::{json, Value};

use crate::common::{first_error_code, Backend, Client, TestServer, TestStore, WsClient, PATIENCE};

const T: &str = "acme";

const GROUPS: &str = "query($first: Int, $after: String, $unread: Boolean) {
  notifications(first: $first, after: $after, unreadOnly: $unread) {
    unseenCount unreadCount
    edges { cursor node { id key reason count unreadCount seen read actorCount
      actors { userId } refId action { actionId }
      notifications { id reason actorId read seen commentId refId } } }
    pageInfo { hasNextPage endCursor }
  }
}";

async fn groups(client: &Client) -> Value {
    client.data(GROUPS, json!({ "first": 50 })).await["notifications"].clone()
}

fn nodes(page: &Value) -> Vec<Value> {
    page["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| e["node"].clone())
        .collect()
}

async fn counts(client: &Client) -> (u64, u64) {
    let c = client
        .data(
            "{ notificationCounts { unseenCount unreadCount } }",
            json!({}),
        )
        .await["notificationCounts"]
        .clone();
    (
        c["unseenCount"].as_u64().expect("unseen"),
        c["unreadCount"].as_u64().expect("unread"),
    )
}

/// Waits until the worker has run `n` jobs of `kind` in all: what they
/// notify (or not) is written by then.
async fn jobs_done(server: &TestServer, kind: &str, n: u64) {
    let name = format!("riverfeed_jobs_total{{job=\"{kind}\",outcome=\"ok\"}}");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while server.counter(&name).await < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} {kind} jobs never ran"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `client`'s groups satisfy `done`; returns them.
async fn until(client: &Client, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let page = nodes(&groups(client).await);
        if done(&page) {
            return page;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {what}: {page:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn by_reason<'a>(page: &'a [Value], reason: &str) -> Option<&'a Value> {
    page.iter().find(|g| g["reason"] == reason)
}

async fn like(client: &Client, id: &str) {
    client
        .data(
            "mutation($id: ID!) { like(actionId: $id) { actionId } }",
            json!({ "id": id }),
        )
        .await;
}

async fn comment(client: &Client, id: &str, text: &str) {
    client
        .data(
            "mutation($id: ID!, $t: String!) { comment(actionId: $id, text: $t) { commentId } }",
            json!({ "id": id, "t": text }),
        )
        .await;
}

async fn who_hears_of_what(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let (mary, rita, john) = (
        server.client(T, "mary"),
        server.client(T, "rita"),
        server.client(T, "john"),
    );
    let action = mary.post_status("hello", json!({})).await;
    mary.wait_delivered(&action).await;
    like(&mary, &action).await; // her own: nobody hears of it
    like(&rita, &action).await;
    like(&john, &action).await;
    like(&john, &action).await; // again: one notice
    comment(&john, &action, "nice").await;
    comment(&rita, &action, "yes").await;

    let page = until(&mary, "two groups of two", |p| {
        p.len() == 2 && p.iter().all(|g| g["count"] == 2)
    })
    .await;
    let likes = by_reason(&page, "LIKE").expect("a LIKE group");
    let comments = by_reason(&page, "COMMENT").expect("a COMMENT group");
    assert_eq!(page[0]["reason"], "COMMENT", "the latest group first");
    assert_eq!(likes["actorCount"], 2);
    assert_eq!(
        likes["actors"],
        json!([{ "userId": "john" }, { "userId": "rita" }])
    );
    assert_eq!(likes["action"]["actionId"], action);
    assert_eq!(
        (likes["unreadCount"].as_u64(), likes["read"].as_bool()),
        (Some(2), Some(false))
    );
    assert!(comments["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["commentId"].is_string() && n["seen"] == false));
    assert_eq!(counts(&mary).await, (2, 2));

    // John commented first: Rita's comment is a reply to him. Rita hears of
    // nothing (no one commented before her but John, who is no reply to her).
    let johns = until(&john, "a reply", |p| p.len() == 1).await;
    assert_eq!(johns[0]["reason"], "REPLY");
    assert_eq!(johns[0]["actors"], json!([{ "userId": "rita" }]));
    jobs_done(&server, "bump", 2).await;
    assert!(nodes(&groups(&rita).await).is_empty());
    server.stop().await;
}

async fn rating_requests_assignments_and_hires(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let service = server.service(T);
    let (ann, rita, john) = (
        server.client(T, "ann"),
        server.client(T, "rita"),
        server.client(T, "john"),
    );
    for user in ["ann", "rita", "john"] {
        service.upsert_user(user, user).await;
    }
    service
        .data(
            "mutation { assign(userId: \"john\", refId: \"applicant-1\") }",
            json!({}),
        )
        .await;
    let requested = ann
        .data(
            "mutation { recordAction(input: {descriptor: {applicantRatingRequested: {applicantId: \"applicant-1\", applicantName: \"Mary Fanning\", positionId: \"p\", positionName: \"Engineer\", raterId: \"rita\", raterName: \"Rita\", requestedById: \"ann\", requestedByName: \"Ann\"}}}) { actionId } }",
            json!({}),
        )
        .await;
    let hired = ann
        .data(
            "mutation { recordAction(input: {descriptor: {applicantHired: {applicantId: \"applicant-1\", applicantName: \"Mary Fanning\", positionId: \"p\", positionName: \"Engineer\", hiredById: \"ann\", hiredByName: \"Ann\"}}}) { actionId } }",
            json!({}),
        )
        .await;
    let ritas = until(&rita, "a rating request", |p| p.len() == 1).await;
    assert_eq!(ritas[0]["reason"], "RATING_REQUESTED");
    assert_eq!(ritas[0]["refId"], "applicant-1");
    assert_eq!(
        ritas[0]["action"]["actionId"],
        requested["recordAction"]["actionId"]
    );
    let johns = until(&john, "assigned and hired", |p| p.len() == 2).await;
    assert_eq!(johns[0]["reason"], "HIRED", "{johns:?}");
    assert_eq!(
        johns[0]["action"]["actionId"],
        hired["recordAction"]["actionId"]
    );
    assert_eq!(johns[1]["reason"], "ASSIGNED");
    assert_eq!(johns[1]["actors"], json!([{ "userId": "app-backend" }]));
    assert_eq!(johns[1]["refId"], "applicant-1");
    // Ann did both and hears of neither.
    assert!(nodes(&groups(&ann).await).is_empty());
    server.stop().await;
}

async fn read_seen_archived_and_paged(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let mary = server.client(T, "mary");
    let mut actions = Vec::new();
    for n in 0..3 {
        let id = mary.post_status(&format!("post {n}"), json!({})).await;
        mary.wait_delivered(&id).await;
        actions.push(id);
    }
    for (n, id) in actions.iter().enumerate() {
        like(&server.client(T, "rita"), id).await;
        if n == 2 {
            like(&server.client(T, "john"), id).await;
        }
    }
    let page = until(&mary, "three like groups", |p| {
        p.len() == 3 && p.iter().map(|g| g["count"].as_u64().unwrap()).sum::<u64>() == 4
    })
    .await;
    // Pages of one, by cursor, newest first, nothing twice.
    let mut paged = Vec::new();
    let mut after = Value::Null;
    loop {
        let got = mary
            .data(GROUPS, json!({ "first": 1, "after": after }))
            .await["notifications"]
            .clone();
        paged.extend(nodes(&got).into_iter().map(|g| g["id"].clone()));
        if got["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = got["pageInfo"]["endCursor"].clone();
    }
    assert_eq!(
        paged,
        page.iter().map(|g| g["id"].clone()).collect::<Vec<_>>()
    );

    // One member of the group of two read: the group stays unread.
    let two = page
        .iter()
        .find(|g| g["count"] == 2)
        .expect("the group of two");
    let member = two["notifications"][0]["id"].clone();
    let changed = mary
        .data(
            "mutation($ids: [ID!]!) { markRead(ids: $ids) { groups { id unreadCount read } unreadCount } }",
            json!({ "ids": [member] }),
        )
        .await["markRead"]
        .clone();
    assert_eq!(changed["groups"][0]["unreadCount"], 1);
    assert_eq!(changed["groups"][0]["read"], false);
    assert_eq!(changed["unreadCount"], 3);
    let member = two["notifications"][1]["id"].clone();
    let changed = mary
        .data(
            "mutation($ids: [ID!]!) { markRead(ids: $ids) { groups { read } unreadCount } }",
            json!({ "ids": [member] }),
        )
        .await["markRead"]
        .clone();
    assert_eq!(changed["groups"][0]["read"], true);
    assert_eq!(changed["unreadCount"], 2);
    let unread = mary.data(GROUPS, json!({ "unread": true })).await["notifications"].clone();
    assert_eq!(
        nodes(&unread).len(),
        2,
        "unreadOnly leaves the read group out"
    );

    // Seen up to the second group: only the newest is unseen.
    let cursor = mary.data(GROUPS, json!({ "first": 2 })).await["notifications"]["edges"][1]
        ["cursor"]
        .clone();
    let seen = mary
        .data(
            "mutation($c: String) { markSeen(upTo: $c) { unseenCount unreadCount } }",
            json!({ "c": cursor }),
        )
        .await["markSeen"]
        .clone();
    assert_eq!(seen, json!({ "unseenCount": 1, "unreadCount": 2 }));
    mary.data("mutation { markSeen { unseenCount } }", json!({}))
        .await;
    assert_eq!(counts(&mary).await, (0, 2));
    let all = mary
        .data(
            "mutation { markAllRead { unreadCount groups { read } } }",
            json!({}),
        )
        .await["markAllRead"]
        .clone();
    assert_eq!(all["unreadCount"], 0);
    assert_eq!(all["groups"].as_array().map(Vec::len), Some(2));

    // Archived, a group is no longer listed; ids of nothing of hers change nothing.
    let gone = page[0]["id"].clone();
    let archived = mary
        .data(
            "mutation($ids: [ID!]!) { archive(ids: $ids) { groups { id } removed } }",
            json!({ "ids": [gone] }),
        )
        .await;
    assert_eq!(
        archived["archive"],
        json!({ "groups": [], "removed": [gone] })
    );
    let left = nodes(&groups(&mary).await);
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|g| g["id"] != page[0]["id"]));
    // Another user's group answers as a group that never was: not found,
    // and nothing changes for its owner.
    let mark = "mutation($ids: [ID!]!) { markRead(ids: $ids) { groups { id } } }";
    let rita = server.client(T, "rita");
    let unread = |g: &Value| g["unreadCount"].clone();
    let before = nodes(&groups(&mary).await)
        .iter()
        .map(unread)
        .collect::<Vec<_>>();
    let others = rita
        .error_code(mark, json!({ "ids": [page[1]["id"]] }))
        .await;
    assert_eq!(others, "NOT_FOUND");
    let never = {
        use base64::Engine;
        let key = format!("NotificationGroup:{}", ObjectId::new().to_hex());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
    };
    assert_eq!(
        mary.error_code(mark, json!({ "ids": [never] })).await,
        "NOT_FOUND"
    );
    let after = nodes(&groups(&mary).await)
        .iter()
        .map(unread)
        .collect::<Vec<_>>();
    assert_eq!(before, after, "nothing changed");
    let bad = mary
        .post(
            "mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }",
            json!({ "ids": [actions[0]] }),
        )
        .await;
    assert_eq!(
        first_error_code(&bad).as_deref(),
        Some("BAD_USER_INPUT"),
        "{bad}"
    );
    server.stop().await;
}

async fn preferences_and_expiring_mutes(backend: Backend) {
    let Some(stopped) = crate::common::store_url(backend) else {
        return;
    };
    let clock = Arc::new(ManualClock::new(crate::common::CLOCK_START));
    let manual = clock.clone();
    let server = TestServer::start_with(
        crate::common::Stopped {
            store: stopped.0,
            dir: stopped.1,
        },
        move |store| ServeOptions {
            clock: manual,
            ..ServeOptions::new(store)
        },
    )
    .await;
    let (mary, rita) = (server.client(T, "mary"), server.client(T, "rita"));
    let action = mary.post_status("hello", json!({})).await;
    mary.wait_delivered(&action).await;

    let prefs = mary
        .data(
            "mutation { setNotificationPreferences(disabled: [LIKE, LIKE]) { disabled } }",
            json!({}),
        )
        .await;
    assert_eq!(
        prefs["setNotificationPreferences"]["disabled"],
        json!(["LIKE"])
    );
    like(&rita, &action).await;
    jobs_done(&server, "notice", 1).await;
    assert!(nodes(&groups(&mary).await).is_empty(), "likes are off");

    let until_at = crate::common::iso(crate::common::CLOCK_START + 24 * 3_600_000);
    let muted = mary
        .data(
            "mutation($id: ID!, $u: DateTime) { muteThread(actionId: $id, until: $u) { mutes { actionId until } } }",
            json!({ "id": action, "u": until_at }),
        )
        .await;
    assert_eq!(muted["muteThread"]["mutes"][0]["actionId"], action);
    comment(&rita, &action, "muted").await;
    jobs_done(&server, "bump", 1).await;
    assert!(
        nodes(&groups(&mary).await).is_empty(),
        "the thread is muted"
    );

    // Past the mute's end, the thread notifies again.
    let end = chrono::DateTime::parse_from_rfc3339(&until_at)
        .unwrap()
        .timestamp_millis();
    clock.advance(end - clock.now());
    let prefs = mary
        .data(
            "{ notificationPreferences { mutes { actionId } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        prefs["notificationPreferences"]["mutes"],
        json!([]),
        "expired"
    );
    comment(&rita, &action, "heard").await;
    let page = until(&mary, "a comment", |p| p.len() == 1).await;
    assert_eq!(page[0]["reason"], "COMMENT");

    let bad = mary
        .post(
            "mutation($id: ID!, $u: DateTime) { muteThread(actionId: $id, until: $u) { disabled } }",
            json!({ "id": action, "u": "2020-01-01T00:00:00Z" }),
        )
        .await;
    assert_eq!(
        first_error_code(&bad).as_deref(),
        Some("BAD_USER_INPUT"),
        "{bad}"
    );
    let unmuted = mary
        .data(
            "mutation($id: ID!) { unmuteThread(actionId: $id) { mutes { actionId } } }",
            json!({ "id": action }),
        )
        .await;
    assert_eq!(unmuted["unmuteThread"]["mutes"], json!([]));
    server.stop().await;
}

const EVENTS: &str = "subscription { notificationEvents { kind groupId unseenCount unreadCount group { reason count } } }";

async fn live_on_every_page(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let mary = server.client(T, "mary");
    let action = mary.post_status("hello", json!({})).await;
    mary.wait_delivered(&action).await;
    let mut pages = Vec::new();
    for _ in 0..2 {
        let mut ws = WsClient::as_user(&server.ws_url(), T, "mary").await;
        ws.subscribe("n", EVENTS).await;
        let first = ws.next_payload().await;
        assert_eq!(
            first["data"]["notificationEvents"],
            json!({ "kind": "COUNTS", "groupId": null, "unseenCount": 0, "unreadCount": 0, "group": null })
        );
        pages.push(ws);
    }
    like(&server.client(T, "rita"), &action).await;
    let mut group = Value::Null;
    for ws in &mut pages {
        let event = ws.next_payload().await["data"]["notificationEvents"].clone();
        assert_eq!(event["kind"], "ADDED", "{event}");
        assert_eq!(event["group"], json!({ "reason": "LIKE", "count": 1 }));
        assert_eq!(
            (event["unseenCount"].as_u64(), event["unreadCount"].as_u64()),
            (Some(1), Some(1))
        );
        group = event["groupId"].clone();
    }
    // Read on one device: every page hears the count drop.
    mary.data(
        "mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }",
        json!({ "ids": [group] }),
    )
    .await;
    for ws in &mut pages {
        let event = ws.next_payload().await["data"]["notificationEvents"].clone();
        assert_eq!(event["kind"], "UPDATED", "{event}");
        assert_eq!(event["groupId"], group);
        assert_eq!(event["unreadCount"], 0);
    }
    mary.data("mutation { markSeen { unseenCount } }", json!({}))
        .await;
    for ws in &mut pages {
        let event = ws.next_payload().await["data"]["notificationEvents"].clone();
        assert_eq!(event["kind"], "COUNTS", "{event}");
        assert_eq!(event["unseenCount"], 0);
    }
    mary.data(
        "mutation($ids: [ID!]!) { archive(ids: $ids) { unreadCount } }",
        json!({ "ids": [group] }),
    )
    .await;
    for ws in &mut pages {
        let event = ws.next_payload().await["data"]["notificationEvents"].clone();
        assert_eq!(event["kind"], "REMOVED", "{event}");
        assert_eq!(event["groupId"], group);
    }
    server.stop().await;
}

async fn markers(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let mary = server.client(T, "mary");
    for n in 0..2 {
        let id = mary.post_status(&format!("post {n}"), json!({})).await;
        mary.wait_delivered(&id).await;
    }
    let (_, info) = mary.feed_ids("(first: 1)").await;
    let cursor = info["endCursor"].clone();
    const SET: &str = "mutation($f: MarkerFeed!, $c: String!, $v: Int) { setMarker(feed: $f, cursor: $c, version: $v) { feed cursor version } }";
    let set = mary
        .data(SET, json!({ "f": "HOME", "c": cursor, "v": 0 }))
        .await;
    assert_eq!(
        set["setMarker"],
        json!({ "feed": "HOME", "cursor": cursor, "version": 1 })
    );
    // A second device reads it and opens where the first stopped.
    let other = server.client(T, "mary");
    let read = other
        .data("{ markers(feeds: [HOME]) { cursor version } }", json!({}))
        .await;
    assert_eq!(read["markers"], json!([{ "cursor": cursor, "version": 1 }]));
    let (rest, _) = other.feed_ids(&format!("(after: {cursor})")).await;
    assert_eq!(rest.len(), 1);
    // A stale version conflicts; a notifications cursor is no home cursor;
    // nobody else sees her markers.
    let stale = mary
        .post(SET, json!({ "f": "HOME", "c": cursor, "v": 0 }))
        .await;
    assert_eq!(
        first_error_code(&stale).as_deref(),
        Some("CONFLICT"),
        "{stale}"
    );
    let wrong = mary
        .post(SET, json!({ "f": "NOTIFICATIONS", "c": cursor }))
        .await;
    assert_eq!(
        first_error_code(&wrong).as_deref(),
        Some("BAD_USER_INPUT"),
        "{wrong}"
    );
    let again = mary
        .data(SET, json!({ "f": "HOME", "c": cursor, "v": 1 }))
        .await;
    assert_eq!(again["setMarker"]["version"], 2);
    let rita = server
        .client(T, "rita")
        .data("{ markers { cursor } }", json!({}))
        .await;
    assert_eq!(rita["markers"], json!([]));
    server.stop().await;
}

/// Mary follows rita, john and ann, who post about applicants a1, a2 and
/// a3 (a1 three times, apart), each delivered: mary's client and the
/// posts, oldest first.
pub(crate) async fn mary_follows_three_who_post(
    server: &TestServer,
    tenant: &str,
) -> (Client, Vec<String>) {
    let mary = server.client(tenant, "mary");
    for user in ["rita", "john", "ann"] {
        server.service(tenant).upsert_user(user, user).await;
        mary.follow(user).await;
    }
    let mut posts = Vec::new();
    for (who, about) in [
        ("rita", "a1"),
        ("john", "a2"),
        ("ann", "a1"),
        ("rita", "a3"),
        ("john", "a1"),
    ] {
        let client = server.client(tenant, who);
        let id = client
            .post_status(&format!("{who} on {about}"), json!({ "refIds": [about] }))
            .await;
        client.wait_delivered(&id).await;
        posts.push(id);
    }
    (mary, posts)
}

/// The home feed in groups: items of one key (verb, object, day) come
/// together; pages end before the group one too many; every item comes
/// once.
async fn aggregated_home_feed(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let (mary, posts) = mary_follows_three_who_post(&server, T).await;
    const AGGREGATED: &str = "query($after: String) { aggregatedFeed(first: 2, after: $after) {
        edges { cursor node { key verb count actorCount actors { userId } actionIds } }
        pageInfo { hasNextPage hasPreviousPage endCursor } } }";
    let first = mary.data(AGGREGATED, json!({})).await["aggregatedFeed"].clone();
    let groups = nodes(&first);
    assert_eq!(groups.len(), 2, "{first}");
    assert_eq!(
        groups[0]["actionIds"],
        json!([posts[4], posts[2]]),
        "a1: John's, then Ann's"
    );
    assert_eq!(
        groups[0]["actors"],
        json!([{ "userId": "john" }, { "userId": "ann" }])
    );
    assert_eq!(groups[0]["verb"], "StatusPost");
    assert_eq!(groups[1]["actionIds"], json!([posts[3]]));
    assert_eq!(first["pageInfo"]["hasNextPage"], true);
    let second = mary
        .data(
            AGGREGATED,
            json!({ "after": first["pageInfo"]["endCursor"] }),
        )
        .await["aggregatedFeed"]
        .clone();
    let groups = nodes(&second);
    assert_eq!(groups.len(), 2, "{second}");
    assert_eq!(groups[0]["actionIds"], json!([posts[1]]));
    assert_eq!(
        groups[1]["actionIds"],
        json!([posts[0]]),
        "a1 again, further down"
    );
    assert_eq!(second["pageInfo"]["hasNextPage"], false);
    assert_eq!(second["pageInfo"]["hasPreviousPage"], true);
    // A group's cursor resumes after the items read before the next group.
    let resumed = mary
        .data(AGGREGATED, json!({ "after": first["edges"][0]["cursor"] }))
        .await["aggregatedFeed"]
        .clone();
    assert_eq!(nodes(&resumed)[0]["actionIds"], json!([posts[3]]));
    server.stop().await;
}

crate::on_both_backends!(
    aggregated_home_feed,
    who_hears_of_what,
    rating_requests_assignments_and_hires,
    read_seen_archived_and_paged,
    preferences_and_expiring_mutes,
    live_on_every_page,
    markers,
    writes_are_idempotent_race_safe_and_capped
);

fn like_notice(actor: &str, action: ObjectId, at: i64) -> Notice {
    Notice {
        id: ObjectId::new(),
        source: format!("l:{action}:{actor}"),
        reason: NoticeReason::Like,
        actor: actor.into(),
        action_id: Some(action),
        comment_id: None,
        ref_id: None,
        at,
        read: false,
        archived: false,
    }
}

/// Writes run again add nothing; writes racing on one group all land; an
/// owner keeps the newest `groups_kept` groups.
async fn writes_are_idempotent_race_safe_and_capped(backend: Backend) {
    let Some(test) = TestStore::open(backend).await else {
        return;
    };
    let store: Arc<dyn Store> = test.store.clone();
    let rules = NoticeRules {
        groups_kept: 3,
        ..NoticeRules::default()
    };
    let action = ObjectId::new();
    let day = 1_800_000_000_000;
    let notices: Vec<_> = (0..20)
        .map(|n| {
            (
                "mary".to_owned(),
                like_notice(&format!("u{n}"), action, day + n),
            )
        })
        .collect();
    // Twenty writers at once, each a notice, then all of them again.
    let mut tasks = Vec::new();
    for one in notices.clone() {
        let (store, rules) = (store.clone(), rules.clone());
        tasks.push(tokio::spawn(async move {
            notify::deliver(store.as_ref(), &rules, T, vec![one], day).await
        }));
    }
    for task in tasks {
        task.await.expect("joined").expect("written");
    }
    let again = notify::deliver(store.as_ref(), &rules, T, notices, day)
        .await
        .expect("written again");
    assert!(
        again.iter().all(|d| d.change == Default::default()),
        "nothing new: {again:?}"
    );
    assert_eq!(again[0].wanted.len(), 20, "every notice still wanted");
    let range = NoticeRange {
        before: None,
        limit: 10,
        unread_only: false,
    };
    let page = store
        .notice_groups(T, "mary", NoticeSelect::Page(range))
        .await
        .expect("page");
    assert_eq!(page.len(), 1);
    assert_eq!(
        (page[0].visible, page[0].unread, page[0].members.len()),
        (20, 20, 20)
    );

    // Four more days: the oldest group goes, three are kept.
    for d in 1..=4 {
        let at = day + d * 86_400_000;
        let n = vec![("mary".to_owned(), like_notice("rita", action, at))];
        let done = notify::deliver(store.as_ref(), &rules, T, n, at)
            .await
            .expect("written");
        if d >= 3 {
            assert_eq!(done[0].change.removed.len(), 1, "day {d} trims one");
        }
    }
    let page = store
        .notice_groups(T, "mary", NoticeSelect::Page(range))
        .await
        .expect("page");
    assert_eq!(page.len(), 3);
    assert!(page.iter().all(|g| g.last > day + 86_400_000));
    test.remove().await;
}
