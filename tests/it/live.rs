//! The live feed over the API: bumps reaching open subscriptions, resuming
//! from a cursor, slice and action events, and lagging subscribers.

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::StreamExt;
use riverfeed::api::cursor::{CursorKey, ListId};
use riverfeed::api::live::Splice;
use riverfeed::api::{schema, AppState, Identity, RiverfeedSchema, Role, Session, Viewer};
use riverfeed::clock::SystemClock;
use riverfeed::events::{FeedEventKind, Hub};
use riverfeed::model::{FeedItem, ObjectId, Reason, ReasonKind};
use riverfeed::store::embedded::EmbeddedStore;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::common::{first_error_code, Backend, Client, TestServer, WsClient};

const EVENT_FIELDS: &str = "kind resumeCursor item { actionId cursor relevancy reason { kind actorId rule by at } action { actionId } }";

fn feed_events(after: Option<&str>) -> String {
    match after {
        Some(cursor) => {
            format!("subscription {{ feedEvents(after: \"{cursor}\") {{ {EVENT_FIELDS} }} }}")
        }
        None => format!("subscription {{ feedEvents {{ {EVENT_FIELDS} }} }}"),
    }
}

pub(crate) async fn comment(client: &Client, action: &str, text: &str) {
    let data = client
        .data(
            "mutation($a: ID!, $t: String!) { comment(actionId: $a, text: $t) { id } }",
            json!({ "a": action, "t": text }),
        )
        .await;
    assert!(data["comment"]["id"].is_string(), "{data}");
}

/// The next `feedEvents` payload of `ws`.
async fn next_event(ws: &mut WsClient) -> Value {
    let payload = ws.next_payload().await;
    assert!(payload.get("errors").is_none(), "{payload}");
    payload["data"]["feedEvents"].clone()
}

async fn a_comment_moves_the_item_up_on_live_pages_of_the_readers_it_matters_to(backend: Backend) {
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
    let data = service
        .data(
            "mutation { assign(userId: \"alice\", refId: \"applicant-7\") }",
            json!({}),
        )
        .await;
    assert_eq!(data["assign"], true, "{data}");
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    let dave = server.client("acme", "dave");
    alice.follow("bob").await;
    dave.follow("bob").await;
    let day_ago = chrono::Utc::now() - chrono::Duration::days(1);
    let old = bob
        .post_status(
            "an old post about applicant 7",
            json!({ "refIds": ["applicant-7"], "conducted": day_ago.to_rfc3339() }),
        )
        .await;
    let newer = bob.post_status("something newer", json!({})).await;
    bob.wait_delivered(&old).await;
    bob.wait_delivered(&newer).await;
    assert_eq!(alice.feed_ids("").await.0, vec![newer.clone(), old.clone()]);

    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe("1", &feed_events(None)).await;
    server.wait_live_topics(1).await;

    let carol = server.client("acme", "carol");
    comment(&carol, &old, "Strong candidate, let's move fast").await;
    let event = next_event(&mut ws).await;
    assert_eq!(event["kind"], "BUMPED", "{event}");
    assert_eq!(event["item"]["actionId"], old.as_str());
    assert_eq!(
        event["item"]["reason"],
        json!({
            "kind": "BUMPED",
            "actorId": "bob",
            "rule": "ASSIGNED",
            "by": "carol",
            "at": event["item"]["reason"]["at"].clone(),
        })
    );
    assert!(event["item"]["reason"]["at"].is_string());
    assert_eq!(event["item"]["action"]["actionId"], old.as_str());

    // The page agrees: alice has it on top, with the event's cursor; dave,
    // whom no rule matches, keeps his order.
    let data = alice
        .data(
            "{ feed(first: 2) { edges { cursor node { actionId relevancy reason { kind rule by } } } } }",
            json!({}),
        )
        .await;
    let top = &data["feed"]["edges"][0];
    assert_eq!(top["node"]["actionId"], old.as_str(), "{data}");
    // The event's cursor stands where the page's does: right after it, `newer`.
    let after_event = format!("(first: 1, after: {})", event["item"]["cursor"]);
    assert_eq!(alice.feed_ids(&after_event).await.0, vec![newer.clone()]);
    assert_eq!(top["node"]["relevancy"], event["item"]["relevancy"]);
    assert_eq!(
        top["node"]["reason"],
        json!({ "kind": "BUMPED", "rule": "ASSIGNED", "by": "carol" })
    );
    assert_eq!(dave.feed_ids("").await.0, vec![newer, old]);
    server.stop().await;
}

async fn feed_events_resume_from_a_cursor_with_no_gap_or_repeat(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;

    // A first session sees one item, keeps its resume cursor, and goes away.
    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe("1", &feed_events(None)).await;
    server.wait_live_topics(1).await;
    let first = bob.post_status("seen live", json!({})).await;
    let event = next_event(&mut ws).await;
    assert_eq!(event["item"]["actionId"], first.as_str());
    let cursor = event["resumeCursor"]
        .as_str()
        .expect("resume cursor")
        .to_owned();
    drop(ws);
    server.wait_live_topics(0).await;

    // Missed while away.
    let mut expected = Vec::new();
    for i in 0..3 {
        let id = bob.post_status(&format!("missed {i}"), json!({})).await;
        bob.wait_delivered(&id).await;
        expected.push(id);
    }
    // Resume, while more arrive during the replay.
    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe("2", &feed_events(Some(&cursor))).await;
    let during = {
        let bob = bob.clone_headers();
        tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..4 {
                ids.push(bob.post_status(&format!("during {i}"), json!({})).await);
            }
            ids
        })
    };
    let during = during.await.expect("poster");
    expected.extend(during.iter().cloned());
    for id in &during {
        bob.wait_delivered(id).await;
    }
    // A last one marks the end: every event before it is counted.
    let last = bob.post_status("the end", json!({})).await;
    expected.push(last.clone());

    let mut got = Vec::new();
    loop {
        let event = next_event(&mut ws).await;
        assert_eq!(event["kind"], "ADDED", "{event}");
        let id = event["item"]["actionId"].as_str().expect("id").to_owned();
        got.push(id.clone());
        if id == last {
            break;
        }
    }
    let unique: HashSet<_> = got.iter().collect();
    assert_eq!(unique.len(), got.len(), "no repeats: {got:?}");
    assert!(!got.contains(&first), "nothing from before the cursor");
    let missing: Vec<_> = expected.iter().filter(|id| !got.contains(id)).collect();
    assert!(missing.is_empty(), "no gap: missing {missing:?} of {got:?}");
    // The three missed while away come first, oldest change first.
    assert_eq!(got[..3], expected[..3]);

    // A feed page's eventsCursor resumes too: everything after the read comes.
    let data = alice
        .data("{ feed(first: 1) { eventsCursor } }", json!({}))
        .await;
    let page_cursor = data["feed"]["eventsCursor"]
        .as_str()
        .expect("cursor")
        .to_owned();
    let after_page = bob.post_status("after the page", json!({})).await;
    bob.wait_delivered(&after_page).await;
    let mut ws2 = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws2.subscribe("3", &feed_events(Some(&page_cursor))).await;
    loop {
        let event = next_event(&mut ws2).await;
        if event["item"]["actionId"] == after_page.as_str() {
            break;
        }
    }

    // A cursor from another reader's feed is refused.
    let carol = WsClient::as_user(&server.ws_url(), "acme", "carol").await;
    let mut carol = carol;
    carol.subscribe("4", &feed_events(Some(&cursor))).await;
    let refused = carol.next_payload().await;
    assert_eq!(
        first_error_code(&refused).as_deref(),
        Some("BAD_USER_INPUT"),
        "{refused}"
    );
    server.stop().await;
}

async fn slice_and_action_events_reach_those_watching(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client("acme", "bob");
    let alice = server.client("acme", "alice");
    bob.upsert_user("bob", "Bob").await;
    alice.upsert_user("alice", "Alice").await;
    server.service("acme").upsert_user("dave", "Dave").await;

    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe(
        "slice",
        "subscription { sliceEvents(refId: \"position-3\") { action { actionId refIds } } }",
    )
    .await;
    server.wait_live_topics(1).await;
    bob.post_status("elsewhere", json!({ "refIds": ["position-9"] }))
        .await;
    bob.post_status(
        "only for dave",
        json!({ "refIds": ["position-3"], "scope": "RESTRICTED", "readers": ["dave"] }),
    )
    .await;
    let id = bob
        .post_status("on position 3", json!({ "refIds": ["position-3"] }))
        .await;
    let payload = ws.next_payload().await;
    assert_eq!(
        payload["data"]["sliceEvents"]["action"]["actionId"],
        id.as_str(),
        "only the readable action of that slice: {payload}"
    );

    ws.subscribe(
        "action",
        &format!(
            "subscription {{ actionEvents(actionId: \"{id}\") {{ kind actionId commentCount likeCount comment {{ text author {{ userId }} }} user {{ userId }} }} }}"
        ),
    )
    .await;
    server.wait_live_topics(2).await;
    comment(&alice, &id, "Looks good").await;
    let payload = ws.next_payload().await;
    let event = &payload["data"]["actionEvents"];
    assert_eq!(event["kind"], "COMMENTED", "{payload}");
    assert_eq!(event["actionId"], id.as_str());
    assert_eq!(event["commentCount"], 1);
    assert_eq!(event["comment"]["text"], "Looks good");
    assert_eq!(event["comment"]["author"]["userId"], "alice");
    bob.data(
        "mutation($a: ID!) { like(actionId: $a) { id } }",
        json!({ "a": id }),
    )
    .await;
    let payload = ws.next_payload().await;
    let event = &payload["data"]["actionEvents"];
    assert_eq!(event["kind"], "LIKED", "{payload}");
    assert_eq!(event["likeCount"], 1);
    assert_eq!(event["user"]["userId"], "bob");

    // Watching an action one may not read is refused as if it did not exist.
    let hidden = bob
        .post_status(
            "private",
            json!({ "scope": "RESTRICTED", "readers": ["dave"] }),
        )
        .await;
    let mut carol = WsClient::as_user(&server.ws_url(), "acme", "carol").await;
    carol
        .subscribe(
            "x",
            &format!("subscription {{ actionEvents(actionId: \"{hidden}\") {{ kind }} }}"),
        )
        .await;
    let refused = carol.next_payload().await;
    assert_eq!(
        first_error_code(&refused).as_deref(),
        Some("NOT_FOUND"),
        "{refused}"
    );
    server.stop().await;
}

/// A feed-events stream driven in-process on a hub of `capacity`, as
/// `alice`: events are published straight into the hub.
fn in_process_stream(
    capacity: usize,
) -> (
    Arc<Hub>,
    futures_util::stream::BoxStream<'static, async_graphql::Response>,
    tempfile::TempDir,
) {
    let (hub, state, schema, dir) = in_process(capacity);
    let request = async_graphql::Request::new(feed_events(None))
        .data(Session::new(Identity::Viewer(viewer("alice")), &state));
    (hub, schema.execute_stream(request), dir)
}

fn viewer(user: &str) -> Viewer {
    Viewer {
        tenant: "acme".into(),
        user: user.into(),
        roles: [Role::User].into(),
        expires_at: None,
    }
}

/// A server's API in-process, on a hub of `capacity`.
fn in_process(capacity: usize) -> (Arc<Hub>, AppState, RiverfeedSchema, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(EmbeddedStore::open(dir.path()).expect("store"));
    let hub = Hub::new(capacity);
    let clock: Arc<SystemClock> = Arc::new(SystemClock);
    let state = AppState {
        outbox: riverfeed::webhooks::Outbox::new(store.clone(), clock.clone()),
        webhooks_allow_private: false,
        planner: Default::default(),
        river_builds: Default::default(),
        idempotency_ttl: riverfeed::http::idempotency::DEFAULT_TTL,
        store,
        hub: hub.clone(),
        clock,
        wake: Arc::new(Notify::new()),
        follow_backfill: 0,
        model: riverfeed::timeline::FeedModel::default(),
        cursors: Arc::new(CursorKey::from_secret(b"in-process stream")),
        item_ttl: None,
        group_feed_size: 1_000,
        notice_rules: Arc::default(),
        metrics: Arc::default(),
        descriptors: riverfeed::descriptor::Catalog::builtin(),
    };
    let schema = schema(state.clone(), false, None, None);
    (hub, state, schema, dir)
}

/// A subscriber's events are the same JSON whether its selection is
/// executed for it or filled into a template another subscriber's
/// execution made: for selections with aliases, fragments, every value of
/// the reader's own and none, and one the templates do not take (`action`,
/// which is the viewer's), for two readers of one fan-out. Cursors are
/// sealed with a fresh nonce each time, so they are compared by what they
/// open to. With planned reads on, every one of these selections is
/// planned, and each reader's template is written from the plan.
#[tokio::test]
async fn a_templated_event_is_the_json_of_its_own_execution() {
    templated_events_as_executed(false).await;
    templated_events_as_executed(true).await;
}

async fn templated_events_as_executed(planned: bool) {
    let (hub, state, schema, _dir) = in_process(16);
    state.planner.set_enabled(planned);
    let selections = [
        "subscription { feedEvents { kind resumeCursor item { __typename id ownerId cursor actionId relevancy reason { kind actorId rule by at } } } }",
        "subscription { e: feedEvents { k: kind ...F item { o: ownerId a: actionId } } } fragment F on FeedEvent { item { why: reason { actorId } ... on FeedItem { c: cursor } } r: resumeCursor }",
        "subscription { feedEvents { kind } }",
        "subscription { feedEvents { kind item { actionId action { actionId } } } }",
    ];
    let readers = ["alice", "carol"];
    // Per selection and reader: one stream that may use templates (it has
    // a splice, as the transports give), one executed as before.
    let mut streams = Vec::new();
    for (s, selection) in selections.iter().enumerate() {
        for reader in readers {
            for templated in [true, false] {
                let session = Session::new(Identity::Viewer(viewer(reader)), &state);
                let mut request = async_graphql::Request::new(*selection).data(session);
                let splice = templated.then(Splice::default);
                if let Some(splice) = &splice {
                    request = request.data(splice.clone());
                }
                let mut stream = schema.execute_stream(request);
                assert!(futures_util::poll!(stream.next()).is_pending());
                streams.push((s, reader, splice, stream));
            }
        }
    }
    assert_eq!(hub.live_subscriptions(), streams.len());
    let action = ObjectId::new();
    // Changed later than the streams' start, which resume cursors start
    // from before the first change: every stream's cursor moves to it.
    let changed = 4_000_000_000_000;
    let items = readers.map(|reader| FeedItem {
        owner: reader.into(),
        ..item_for_alice(action, changed)
    });
    hub.publish_feed_items(FeedEventKind::Added, "acme", None, items);
    let cursors = &state.cursors;
    let mut filled = vec![0; selections.len()];
    let mut results: Vec<(usize, &str, Value)> = Vec::new();
    for (s, reader, splice, stream) in &mut streams {
        let response = stream.next().await.expect("an event");
        let json = match splice.as_ref().and_then(Splice::take) {
            Some(json) => {
                filled[*s] += 1;
                json
            }
            None => serde_json::to_string(&response).expect("json"),
        };
        let mut value: Value = serde_json::from_str(&json).expect("the event is JSON");
        assert!(value.get("errors").is_none(), "{value}");
        open_cursors(&mut value, cursors, reader);
        results.push((*s, reader, value));
    }
    for pair in results.chunks(2) {
        let [(s, reader, templated), (_, _, executed)] = pair else {
            unreachable!("streams come in pairs")
        };
        assert_eq!(templated, executed, "selection {s}, {reader}");
    }
    if planned {
        // A plan writes every reader's event, the action's too.
        assert_eq!(filled, [2, 2, 2, 2]);
    } else {
        // The first reader's execution made each template, which the
        // second filled.
        assert_eq!(
            filled,
            [1, 1, 1, 0],
            "the action is the viewer's: no template"
        );
    }
    let ids: HashSet<String> = results
        .iter()
        .filter(|(s, _, _)| *s == 0)
        .map(|(_, _, v)| v["data"]["feedEvents"]["item"]["id"].to_string())
        .collect();
    assert_eq!(ids.len(), 2, "each reader's item has its own id: {ids:?}");
}

/// `value` with every cursor of `reader`'s feed replaced by what it opens to.
fn open_cursors(value: &mut Value, cursors: &CursorKey, reader: &str) {
    match value {
        Value::String(text) => {
            let home = ListId::home(cursors, "acme", reader);
            let changes = ListId::feed_changes(cursors, "acme", reader);
            if let Ok(position) = home.decode_position(text) {
                *text = format!("position {position:?}");
            } else if let Ok(stamp) = changes.decode_stamp(text) {
                *text = format!("stamp {stamp:?}");
            }
        }
        Value::Object(object) => object
            .values_mut()
            .for_each(|v| open_cursors(v, cursors, reader)),
        Value::Array(values) => values
            .iter_mut()
            .for_each(|v| open_cursors(v, cursors, reader)),
        _ => {}
    }
}

fn item_for_alice(action_id: ObjectId, changed: i64) -> FeedItem {
    FeedItem {
        owner: "alice".into(),
        action_id,
        relevancy: 1,
        reason: Reason::new(ReasonKind::Follows, "bob"),
        changed,
        copy: None,
    }
}

/// A subscriber that falls behind the hub's buffer is told `LAGGED` and its
/// stream ends; driven in-process so the lag is exact, not a race with a socket.
#[tokio::test]
async fn a_lagging_subscriber_is_told_and_its_stream_ends() {
    let (hub, mut stream, _dir) = in_process_stream(2);
    // One poll runs the resolver, which subscribes, then waits for events.
    assert!(futures_util::poll!(stream.next()).is_pending());
    assert_eq!(hub.live_topics(), 1);
    for _ in 0..5 {
        let item = item_for_alice(ObjectId::new(), 1);
        hub.publish_feed_items(FeedEventKind::Added, "acme", None, [item]);
    }
    let response = stream.next().await.expect("a response");
    let body = serde_json::to_value(&response).expect("json");
    assert_eq!(first_error_code(&body).as_deref(), Some("LAGGED"), "{body}");
    assert!(stream.next().await.is_none(), "the stream ends");
    assert_eq!(hub.live_topics(), 0, "and leaves the hub");
}

/// An item announced twice (a relayed announcement tried again, two
/// sources telling of one pulled item) reaches the subscriber once; added
/// again after it was removed, it is news again.
#[tokio::test]
async fn an_item_added_twice_is_told_once() {
    let (hub, mut stream, _dir) = in_process_stream(16);
    assert!(futures_util::poll!(stream.next()).is_pending());
    let (one, two) = (ObjectId::new(), ObjectId::new());
    let publish = |kind, id, changed| {
        hub.publish_feed_items(kind, "acme", None, [item_for_alice(id, changed)]);
    };
    publish(FeedEventKind::Added, one, 10);
    publish(FeedEventKind::Added, one, 10);
    publish(FeedEventKind::Added, one, 12);
    publish(FeedEventKind::Added, two, 11);
    publish(FeedEventKind::Removed, one, 13);
    publish(FeedEventKind::Added, one, 14);
    let mut told = Vec::new();
    for _ in 0..4 {
        let response = stream.next().await.expect("an event");
        let body = serde_json::to_value(&response).expect("json");
        let event = &body["data"]["feedEvents"];
        told.push((
            event["kind"].as_str().unwrap().to_owned(),
            event["item"]["actionId"].as_str().unwrap().to_owned(),
        ));
    }
    let (one, two) = (one.to_hex(), two.to_hex());
    assert_eq!(
        told,
        [
            ("ADDED".to_owned(), one.clone()),
            ("ADDED".to_owned(), two),
            ("REMOVED".to_owned(), one.clone()),
            ("ADDED".to_owned(), one),
        ]
    );
    assert!(
        futures_util::poll!(stream.next()).is_pending(),
        "nothing more"
    );
}

crate::on_both_backends!(
    a_comment_moves_the_item_up_on_live_pages_of_the_readers_it_matters_to,
    feed_events_resume_from_a_cursor_with_no_gap_or_repeat,
    slice_and_action_events_reach_those_watching,
);

// Bumps told live (by the ASSIGNED rule, which the cross-model history does
// not use) and streams resumed from a cursor depend on the feed model:
// proved under every other model too.
crate::under_other_models!(
    a_comment_moves_the_item_up_on_live_pages_of_the_readers_it_matters_to,
    feed_events_resume_from_a_cursor_with_no_gap_or_repeat,
);
