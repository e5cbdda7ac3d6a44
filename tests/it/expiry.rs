//! Expiry: an action recorded with `expiresAt`, or older than
//! `--item-ttl`, leaves every feed, slice, actor feed and `action(id)` at
//! the moment it expires, for everyone, its actor too (read on a clock the
//! test moves); then the worker deletes it and tells live readers.

use std::sync::Arc;
use std::time::Duration;

use riverfeed::clock::ManualClock;
use riverfeed::model::{FanOutState, ObjectId};
use riverfeed::server::ServeOptions;
use riverfeed::store::prelude::*;
use serde_json::{json, Value};

use crate::common::{
    iso, store_url, Backend, Client, Stopped, TestServer, WsClient, CLOCK_START, FEED_EVENTS,
};

const START: i64 = CLOCK_START;

async fn start(
    backend: Backend,
    item_ttl: Option<Duration>,
) -> Option<(TestServer, Arc<ManualClock>)> {
    let (store, dir) = store_url(backend)?;
    let clock = Arc::new(ManualClock::new(START));
    let shared = clock.clone();
    let server = TestServer::start_with(Stopped { store, dir }, |url| ServeOptions {
        clock: shared,
        item_ttl,
        ..ServeOptions::new(url)
    })
    .await;
    Some((server, clock))
}

/// Where an action shows: the reader's feed, the slice of its ref, its
/// actor's feed, and `action(id)`.
async fn shown(reader: &Client, id: &str) -> [bool; 4] {
    let data = reader
        .data(
            "query($id: ID!) {
                feed(first: 50) { edges { node { actionId } } }
                slice(refId: \"job-1\", first: 50) { edges { node { actionId } } }
                actorFeed(userId: \"ann\", first: 50) { edges { node { actionId } } }
                action(actionId: $id) { actionId }
            }",
            json!({ "id": id }),
        )
        .await;
    let has = |list: &Value, field: &str| {
        list["edges"]
            .as_array()
            .expect("edges")
            .iter()
            .any(|e| e["node"][field] == id)
    };
    [
        has(&data["feed"], "actionId"),
        has(&data["slice"], "actionId"),
        has(&data["actorFeed"], "actionId"),
        data["action"]["actionId"] == id,
    ]
}

/// Records a status post by `ann` referring to `job-1` and waits until its
/// fan-out is done, or it is gone (read from the store: an expired action
/// reads null, and one expired already may be deleted before its fan-out).
async fn post(server: &TestServer, text: &str, extra: Value) -> String {
    let mut input = json!({ "refIds": ["job-1"] });
    if let (Some(input), Some(extra)) = (input.as_object_mut(), extra.as_object()) {
        input.extend(extra.clone());
    }
    let id = server.client("acme", "ann").post_status(text, input).await;
    let oid = ObjectId::parse_str(&id).expect("an action id");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let found = server
            .server
            .metered
            .get_actions("acme", &[oid])
            .await
            .unwrap();
        if found.iter().all(|a| a.fan_out.state == FanOutState::Done) {
            return id;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{id} was never delivered"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn an_action_leaves_everything_when_it_expires(backend: Backend) {
    let Some((server, clock)) = start(backend, None).await else {
        return;
    };
    let ann = server.client("acme", "ann");
    let bob = server.client("acme", "bob");
    ann.upsert_user("ann", "Ann").await;
    bob.follow("ann").await;
    let story = post(
        &server,
        "a story",
        json!({ "expiresAt": iso(START + 60_000) }),
    )
    .await;
    let lasting = post(&server, "lasting", json!({})).await;
    let data = bob
        .data(
            "query($id: ID!) { action(actionId: $id) { expiresAt } }",
            json!({ "id": story }),
        )
        .await;
    assert_eq!(
        data["action"]["expiresAt"]
            .as_str()
            .map(|t| t.replace("+00:00", "Z")),
        Some(iso(START + 60_000).replace("+00:00", "Z"))
    );
    for reader in [&bob, &ann] {
        assert_eq!(shown(reader, &story).await, [true; 4]);
    }
    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "bob").await;
    ws.subscribe("1", FEED_EVENTS).await;
    server.wait_live_topics(1).await;

    clock.advance(59_999);
    assert_eq!(shown(&bob, &story).await, [true; 4], "a millisecond before");
    clock.advance(1);
    for reader in [&bob, &ann] {
        assert_eq!(
            shown(reader, &story).await,
            [false; 4],
            "expired, for the actor too"
        );
        assert_eq!(shown(reader, &lasting).await, [true; 4], "the rest stays");
    }
    // The worker deletes it, and a live reader is told.
    let payload = ws.next_payload().await;
    let event = &payload["data"]["feedEvents"];
    assert_eq!(event["kind"], "REMOVED", "{payload}");
    assert_eq!(event["item"]["actionId"], story.as_str());
    let oid = ObjectId::parse_str(&story).expect("an id");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !server
        .server
        .metered
        .get_actions("acme", &[oid])
        .await
        .unwrap()
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "never reclaimed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let lasting_id = ObjectId::parse_str(&lasting).expect("an id");
    let kept = server
        .server
        .metered
        .get_actions("acme", &[lasting_id])
        .await
        .unwrap();
    assert_eq!(kept.len(), 1, "the rest is kept");
    // Commenting on it is refused as on an action one may not read.
    let code = bob
        .error_code(
            "mutation($id: ID!) { comment(actionId: $id, text: \"late\") { id } }",
            json!({ "id": story }),
        )
        .await;
    assert_eq!(code, "NOT_FOUND");
    server.stop().await;
}

async fn item_ttl_ages_actions_out(backend: Backend) {
    let Some((server, clock)) = start(backend, Some(Duration::from_secs(3_600))).await else {
        return;
    };
    let ann = server.client("acme", "ann");
    let bob = server.client("acme", "bob");
    ann.upsert_user("ann", "Ann").await;
    bob.follow("ann").await;
    let old = post(
        &server,
        "old news",
        json!({ "conducted": iso(START - 3_600_000) }),
    )
    .await;
    let recent = post(
        &server,
        "recent",
        json!({ "conducted": iso(START - 600_000) }),
    )
    .await;
    let short = post(
        &server,
        "short",
        json!({ "expiresAt": iso(START + 60_000) }),
    )
    .await;
    assert_eq!(shown(&bob, &old).await, [false; 4], "an hour old: gone");
    assert_eq!(shown(&bob, &recent).await, [true; 4]);
    assert_eq!(shown(&bob, &short).await, [true; 4]);
    // Its own expiry comes first.
    clock.advance(60_000);
    assert_eq!(shown(&bob, &short).await, [false; 4]);
    assert_eq!(shown(&bob, &recent).await, [true; 4]);
    // The ten-minute-old one reaches an hour.
    clock.advance(3_000_000);
    assert_eq!(shown(&bob, &recent).await, [false; 4]);
    // All three are deleted in the background.
    let ids: Vec<ObjectId> = [&old, &recent, &short]
        .iter()
        .map(|id| ObjectId::parse_str(id).expect("an id"))
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !server
        .server
        .metered
        .get_actions("acme", &ids)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "never reclaimed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.stop().await;
}

async fn expiry_times_are_checked(backend: Backend) {
    let Some((server, _clock)) = start(backend, None).await else {
        return;
    };
    let ann = server.client("acme", "ann");
    let record =
        "mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId } }";
    for (expires, conducted) in [
        (START - 1, None),
        (START, None),
        (START - 120_000, Some(START - 60_000)),
    ] {
        let mut input = json!({
            "descriptor": { "statusPost": { "text": "x" } },
            "expiresAt": iso(expires),
        });
        if let Some(at) = conducted {
            input["conducted"] = json!(iso(at));
        }
        let code = ann.error_code(record, json!({ "input": input })).await;
        assert_eq!(
            code, "BAD_USER_INPUT",
            "expiresAt {expires}, conducted {conducted:?}"
        );
    }
    let code = ann
        .error_code(
            record,
            json!({ "input": { "descriptor": { "statusPost": { "text": "x" } }, "expiresAt": "tomorrow" } }),
        )
        .await;
    assert_eq!(code, "BAD_USER_INPUT");
    server.stop().await;
}

crate::on_both_backends!(
    an_action_leaves_everything_when_it_expires,
    item_ttl_ages_actions_out,
    expiry_times_are_checked
);
