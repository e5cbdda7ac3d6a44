//! Webhooks as an operator runs them: the deliveries of an endpoint by
//! state with their attempts, sending the waiting ones now, and the
//! circuit that pauses an endpoint failing for a day until it is resumed.
//! Time is the server's manual clock.

use std::sync::Arc;

use riverfeed::clock::ManualClock;
use serde_json::{json, Value};

use crate::common::{Backend, Client, TestServer};
use crate::on_both_backends;
use crate::webhooks::{register, sender_passes, start, wait_metric, Receiver, T};

const DELIVERIES: &str = "query($id: ID!, $state: DeliveryState!, $first: Int, $after: String) {
    webhook(webhookId: $id) {
        deliveries(state: $state, first: $first, after: $after) {
            edges { cursor node {
                messageId eventType state attempts lastError lastStatus nextAttemptAt queuedAt
            } }
            pageInfo { hasNextPage endCursor }
        }
    }
}";

const RETRY: &str = "mutation($id: ID!) { retryWebhookDeliveries(webhookId: $id) }";

const PAUSED: &str = "query($id: ID!) { webhook(webhookId: $id) {
    enabled paused pausedReason pausedAt
} }";

fn metric(outcome: &str) -> String {
    format!("riverfeed_webhook_deliveries_total{{outcome=\"{outcome}\"}}")
}

/// A page of `hook`'s deliveries in `state`: its nodes and page info.
async fn deliveries(
    app: &Client,
    hook: &str,
    state: &str,
    first: Option<u64>,
    after: Option<&str>,
) -> (Vec<Value>, Value) {
    let vars = json!({ "id": hook, "state": state, "first": first, "after": after });
    let data = app.data(DELIVERIES, vars).await;
    let page = &data["webhook"]["deliveries"];
    let nodes = page["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| e["node"].clone())
        .collect();
    (nodes, page["pageInfo"].clone())
}

fn ids(nodes: &[Value]) -> Vec<&str> {
    nodes
        .iter()
        .map(|n| n["messageId"].as_str().expect("an id"))
        .collect()
}

/// Failed deliveries are listed with their attempts, last status and
/// error and the time of their retry, in pages; once given up on they are
/// listed as dead; none is pending meanwhile.
async fn deliveries_show_their_attempts(backend: Backend) {
    let Some((clock, server, receiver, app, hook)) = failing_endpoint(backend).await else {
        return;
    };
    let mary = server.client(T, "mary");
    for n in 0..3 {
        mary.post_status(&format!("Fails {n}"), json!({})).await;
    }
    let got = receiver
        .wait("three first attempts", |got| got.len() == 3)
        .await;
    wait_metric(&server, &metric("retried"), 3).await;

    let (all, info) = deliveries(&app, &hook, "FAILED", None, None).await;
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(info["hasNextPage"], false);
    let mut sent: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    sent.sort_unstable();
    assert_eq!(ids(&all), sent, "every one, in message-id order");
    for node in &all {
        assert_eq!(node["eventType"], "ACTION_RECORDED");
        assert_eq!(node["state"], "FAILED");
        assert_eq!(node["attempts"], 1, "{node}");
        assert_eq!(node["lastStatus"], 503, "{node}");
        let error = node["lastError"].as_str().unwrap_or_default();
        assert!(error.contains("503"), "{node}");
        assert!(
            !error.contains(&receiver.url),
            "no URL in the error: {node}"
        );
        let at = |field: &str| {
            chrono::DateTime::parse_from_rfc3339(node[field].as_str().expect(field))
                .expect("a time")
                .timestamp_millis()
        };
        assert_eq!(at("nextAttemptAt") - at("queuedAt"), 5_000, "{node}");
    }
    let (pending, _) = deliveries(&app, &hook, "PENDING", None, None).await;
    assert_eq!(pending, Vec::<Value>::new(), "every one was tried");

    let (first, info) = deliveries(&app, &hook, "FAILED", Some(2), None).await;
    assert_eq!(ids(&first), ids(&all)[..2]);
    assert_eq!(info["hasNextPage"], true);
    let end = info["endCursor"].as_str().expect("a cursor").to_owned();
    let (rest, info) = deliveries(&app, &hook, "FAILED", Some(2), Some(&end)).await;
    assert_eq!(ids(&rest), ids(&all)[2..]);
    assert_eq!(info["hasNextPage"], false);
    let vars = json!({ "id": hook, "state": "DEAD", "after": end });
    assert_eq!(
        app.error_code(DELIVERIES, vars).await,
        "BAD_USER_INPUT",
        "a cursor of the failed list is not one of the dead"
    );

    // A second failure is counted; a day on they are given up on.
    clock.advance(5_000);
    receiver.wait("the retries", |got| got.len() == 6).await;
    wait_metric(&server, &metric("retried"), 6).await;
    let (again, _) = deliveries(&app, &hook, "FAILED", None, None).await;
    assert!(again.iter().all(|n| n["attempts"] == 2), "{again:?}");
    clock.advance(25 * 3_600_000);
    wait_metric(&server, &metric("dead"), 3).await;
    let (failed, _) = deliveries(&app, &hook, "FAILED", None, None).await;
    assert_eq!(failed, Vec::<Value>::new());
    let (dead, _) = deliveries(&app, &hook, "DEAD", None, None).await;
    assert_eq!(ids(&dead), ids(&all));
    for node in &dead {
        assert_eq!(node["state"], "DEAD");
        assert_eq!(node["attempts"], 3, "{node}");
        assert_eq!(node["lastStatus"], 503, "{node}");
        assert_eq!(node["nextAttemptAt"], Value::Null, "{node}");
    }
    let (first, info) = deliveries(&app, &hook, "DEAD", Some(1), None).await;
    assert_eq!(ids(&first), ids(&all)[..1]);
    let end = info["endCursor"].as_str().expect("a cursor").to_owned();
    let (rest, _) = deliveries(&app, &hook, "DEAD", Some(5), Some(&end)).await;
    assert_eq!(ids(&rest), ids(&all)[1..], "dead ones come in pages too");
    server.stop().await;
}

/// A server on a manual clock with one webhook for `ACTION_RECORDED`, whose
/// endpoint answers 503 until told otherwise: the clock, the server, the
/// receiver, the service client and the webhook's id.
async fn failing_endpoint(
    backend: Backend,
) -> Option<(Arc<ManualClock>, TestServer, Receiver, Client, String)> {
    let clock = Arc::new(ManualClock::new(crate::common::CLOCK_START));
    let server = start(backend, Some(clock.clone())).await?;
    let receiver = Receiver::start(None).await;
    receiver.answer(503);
    let app = server.service(T);
    let (hook, _) = register(&app, &receiver.url, json!(["ACTION_RECORDED"])).await;
    Some((clock, server, receiver, app, hook))
}

/// `retryWebhookDeliveries` sends what waits for a retry now, without
/// waiting out the schedule, each once, by its `webhook-id`.
async fn waiting_deliveries_are_retried_now(backend: Backend) {
    let Some((clock, server, receiver, app, hook)) = failing_endpoint(backend).await else {
        return;
    };
    let mary = server.client(T, "mary");
    mary.post_status("Fails first", json!({})).await;
    mary.post_status("Fails too", json!({})).await;
    let first = receiver.wait("first attempts", |got| got.len() == 2).await;
    wait_metric(&server, &metric("retried"), 2).await;

    receiver.answer(200);
    let retried = app.data(RETRY, json!({ "id": hook })).await;
    assert_eq!(retried["retryWebhookDeliveries"], 2, "both brought forward");
    let got = receiver.wait("the retries now", |got| got.len() == 4).await;
    let mut again: Vec<&str> = got[2..].iter().map(|r| r.id.as_str()).collect();
    let mut before: Vec<&str> = first.iter().map(|r| r.id.as_str()).collect();
    again.sort_unstable();
    before.sort_unstable();
    assert_eq!(again, before, "the same messages");
    wait_metric(&server, &metric("sent"), 2).await;
    let retried = app.data(RETRY, json!({ "id": hook })).await;
    assert_eq!(retried["retryWebhookDeliveries"], 0, "nothing waits");
    clock.advance(3_600_000);
    sender_passes(&server, 2).await;
    assert_eq!(receiver.all().len(), 4, "none sent twice");

    let user = server.client(T, "mary");
    assert_eq!(
        user.error_code(RETRY, json!({ "id": hook })).await,
        "FORBIDDEN"
    );
    let none = json!({ "id": "wh_000000000000000000000000" });
    assert_eq!(app.error_code(RETRY, none).await, "NOT_FOUND");
    server.stop().await;
}

/// An endpoint whose attempts all fail for a day is paused, and says so;
/// what comes due meanwhile waits untried; resuming it sends that at once.
async fn a_failing_endpoint_is_paused_until_resumed(backend: Backend) {
    let Some((clock, server, receiver, app, hook)) = failing_endpoint(backend).await else {
        return;
    };
    let mary = server.client(T, "mary");
    mary.post_status("Fails for a day", json!({})).await;
    receiver.wait("a first attempt", |got| got.len() == 1).await;
    wait_metric(&server, &metric("retried"), 1).await;
    let state = app.data(PAUSED, json!({ "id": hook })).await;
    assert_eq!(state["webhook"]["paused"], false, "a failure is no pause");

    // A day of failures: the last attempt pauses it.
    clock.advance(25 * 3_600_000);
    receiver.wait("a last attempt", |got| got.len() == 2).await;
    wait_metric(&server, &metric("dead"), 1).await;
    let state = app.data(PAUSED, json!({ "id": hook })).await;
    let webhook = &state["webhook"];
    assert_eq!(webhook["paused"], true, "{state}");
    assert_eq!(webhook["enabled"], true, "paused, not disabled");
    let reason = webhook["pausedReason"].as_str().unwrap_or_default();
    assert!(reason.contains("503"), "{state}");
    assert!(webhook["pausedAt"].is_string(), "{state}");

    // Paused: a new event waits, untried, an hour at a time.
    mary.post_status("Waits", json!({})).await;
    let mut pending = Vec::new();
    for _ in 0..200 {
        pending = deliveries(&app, &hook, "PENDING", None, None).await.0;
        if pending
            .first()
            .is_some_and(|n| n["nextAttemptAt"] != n["queuedAt"])
        {
            break;
        }
        sender_passes(&server, 1).await;
    }
    assert!(
        pending
            .first()
            .is_some_and(|n| n["nextAttemptAt"] != n["queuedAt"]),
        "never put off: {pending:?}"
    );
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["attempts"], 0);
    clock.advance(4 * 3_600_000);
    sender_passes(&server, 2).await;
    assert_eq!(receiver.all().len(), 2, "nothing tried while paused");

    receiver.answer(200);
    let resume = "mutation($id: ID!) { resumeWebhook(webhookId: $id) { paused pausedReason } }";
    let resumed = app.data(resume, json!({ "id": hook })).await;
    assert_eq!(
        resumed["resumeWebhook"],
        json!({ "paused": false, "pausedReason": null })
    );
    let got = receiver.wait("the waiting one", |got| got.len() == 3).await;
    assert_eq!(
        got[2].id,
        pending[0]["messageId"].as_str().unwrap_or_default()
    );
    wait_metric(&server, &metric("sent"), 1).await;
    server.stop().await;
}

/// A scope change, a hide and a delete each tell their event once, with
/// what changed, to an endpoint that hears it.
async fn action_changes_are_told(backend: Backend) {
    let Some(server) = start(backend, None).await else {
        return;
    };
    let receiver = Receiver::start(None).await;
    let app = server.service(T);
    let events = json!(["ACTION_UPDATED", "ACTION_DELETED"]);
    register(&app, &receiver.url, events).await;
    let mary = server.client(T, "mary");
    server.client(T, "john").upsert_user("john", "John").await;
    let kept = mary.post_status("Changed", json!({})).await;
    let gone = mary.post_status("Deleted", json!({})).await;
    mary.wait_delivered(&kept).await;
    mary.wait_delivered(&gone).await;
    let scope = "mutation($id: ID!) { setActionScope(actionId: $id, scope: RESTRICTED, readers: [\"john\"]) { scope } }";
    mary.data(scope, json!({ "id": kept })).await;
    let hide = "mutation($id: ID!) { hideAction(actionId: $id) { actionId } }";
    mary.data(hide, json!({ "id": kept })).await;
    let delete = "mutation($id: ID!) { deleteAction(actionId: $id) }";
    mary.data(delete, json!({ "id": gone })).await;
    receiver.wait("three changes", |got| got.len() == 3).await;
    sender_passes(&server, 2).await;
    let got = receiver.all();
    assert_eq!(got.len(), 3, "each once: {got:#?}");
    let told: Vec<(&str, &str, &str)> = got
        .iter()
        .map(|r| {
            (
                r.body["type"].as_str().unwrap_or_default(),
                r.body["data"]["actionId"].as_str().unwrap_or_default(),
                r.body["data"]["change"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    for want in [
        ("action.updated", kept.as_str(), "scope"),
        ("action.updated", kept.as_str(), "hidden"),
        ("action.deleted", gone.as_str(), ""),
    ] {
        assert!(told.contains(&want), "{want:?} in {told:?}");
    }
    let scoped = got.iter().find(|r| r.body["data"]["change"] == "scope");
    assert_eq!(
        scoped.map(|r| &r.body["data"]["scope"]),
        Some(&json!("RESTRICTED"))
    );
    // No action.recorded: the endpoint does not hear it.
    server.stop().await;
}

/// An update or deletion is told before it is made: its delivery waits
/// while the store does not show the change, goes once it does, and is
/// dropped once ten seconds pass without it (the process that was to make
/// it died first). The events are queued here as the mutation queues
/// them, and one of the two changes is then made behind the API's back.
async fn a_change_told_before_it_is_made_waits_for_it(backend: Backend) {
    use riverfeed::model::{EventType, ObjectId};
    use riverfeed::store::prelude::*;
    use riverfeed::store::Removal;
    use riverfeed::webhooks::{outbox, Event, Outbox};

    let clock = Arc::new(ManualClock::new(crate::common::CLOCK_START));
    let Some(server) = start(backend, Some(clock.clone())).await else {
        return;
    };
    let receiver = Receiver::start(None).await;
    let app = server.service(T);
    let (hook, _) = register(&app, &receiver.url, json!(["ACTION_DELETED"])).await;
    let mary = server.client(T, "mary");
    let made = mary.post_status("Deleted late", json!({})).await;
    let never = mary.post_status("Never deleted", json!({})).await;
    let store: Arc<dyn Store> = server.server.metered.clone();
    let told = Outbox::new(store.clone(), clock.clone());
    let oid = |id: &str| ObjectId::parse_str(id).expect("an id");
    for id in [&made, &never] {
        let action = store.get_actions(T, &[oid(id)]).await.expect("read");
        let action = action.first().expect("stored").clone();
        let now = riverfeed::clock::Clock::now(&*clock);
        told.tell_before(T, |l| {
            outbox::one(l, EventType::ActionDeleted, || {
                Event::action_deleted(&action, now)
            })
        })
        .await
        .expect("queued");
    }
    sender_passes(&server, 2).await;
    assert!(receiver.all().is_empty(), "neither change is made yet");
    let (pending, _) = deliveries(&app, &hook, "PENDING", None, None).await;
    assert_eq!(pending.len(), 2, "both wait: {pending:?}");

    store
        .remove_action(T, oid(&made), Removal::Delete)
        .await
        .expect("deleted");
    clock.advance(1_000);
    let got = receiver
        .wait("the deletion made", |got| !got.is_empty())
        .await;
    assert_eq!(got[0].body["data"]["actionId"], json!(made), "{got:#?}");

    clock.advance(10_000);
    sender_passes(&server, 2).await;
    assert_eq!(receiver.all().len(), 1, "the change never made is not told");
    let (pending, _) = deliveries(&app, &hook, "PENDING", None, None).await;
    assert!(pending.is_empty(), "dropped: {pending:?}");
    server.stop().await;
}

/// A like tells `reaction.added` once, by the like's job; liking again
/// changes nothing and tells nothing.
async fn a_like_is_told_once(backend: Backend) {
    let Some(server) = start(backend, None).await else {
        return;
    };
    let receiver = Receiver::start(None).await;
    let app = server.service(T);
    register(&app, &receiver.url, json!(["REACTION_ADDED"])).await;
    let mary = server.client(T, "mary");
    let liked = mary.post_status("Liked", json!({})).await;
    mary.wait_delivered(&liked).await;
    let like = "mutation($id: ID!) { like(actionId: $id) { actionId } }";
    mary.data(like, json!({ "id": liked })).await;
    let got = receiver.wait("the like", |got| !got.is_empty()).await;
    assert_eq!(got[0].body["type"], "reaction.added");
    assert_eq!(got[0].body["data"]["actionId"], liked.as_str());
    assert_eq!(got[0].body["data"]["userId"], "mary");
    assert_eq!(got[0].body["data"]["kind"], "like");
    mary.data(like, json!({ "id": liked })).await;
    sender_passes(&server, 2).await;
    assert_eq!(receiver.all().len(), 1, "liking again tells nothing");
    server.stop().await;
}

/// A follow tells `followed` once; following again changes nothing and
/// tells nothing.
async fn a_follow_is_told_once(backend: Backend) {
    let Some(server) = start(backend, None).await else {
        return;
    };
    let receiver = Receiver::start(None).await;
    let app = server.service(T);
    register(&app, &receiver.url, json!(["FOLLOWED"])).await;
    server.client(T, "john").upsert_user("john", "John").await;
    let mary = server.client(T, "mary");
    let follow = "mutation { follow(userId: \"john\") }";
    assert_eq!(mary.data(follow, json!({})).await["follow"], true);
    let got = receiver.wait("the follow", |got| !got.is_empty()).await;
    assert_eq!(got[0].body["type"], "followed");
    let data = &got[0].body["data"];
    assert_eq!(
        (&data["userId"], &data["followedId"], &data["target"]),
        (&json!("mary"), &json!("john"), &json!("user"))
    );
    assert_eq!(mary.data(follow, json!({})).await["follow"], false);
    sender_passes(&server, 2).await;
    assert_eq!(receiver.all().len(), 1, "following again tells nothing");
    server.stop().await;
}

/// Every page of a state in message-id order, `first` at a time, each
/// followed past its end cursor: the ids, once each.
async fn all_pages(app: &Client, hook: &str, state: &str, first: u64) -> Vec<String> {
    let (mut ids_seen, mut after) = (Vec::new(), None::<String>);
    for _ in 0..10 {
        let (nodes, info) = deliveries(app, hook, state, Some(first), after.as_deref()).await;
        assert!(nodes.len() as u64 <= first, "{nodes:?}");
        assert!(nodes.iter().all(|n| n["state"] == state), "{nodes:?}");
        ids_seen.extend(ids(&nodes).into_iter().map(str::to_owned));
        if info["hasNextPage"] != true {
            return ids_seen;
        }
        after = info["endCursor"].as_str().map(str::to_owned);
    }
    panic!("more pages than deliveries: {ids_seen:?}");
}

/// Failed and untried deliveries of one endpoint, their message ids mixed,
/// come in pages of their own state: each once, in message-id order.
async fn pages_of_a_state_hold_each_once(backend: Backend) {
    let Some((clock, server, receiver, app, hook)) = failing_endpoint(backend).await else {
        return;
    };
    let mary = server.client(T, "mary");
    mary.post_status("Fails for a day", json!({})).await;
    receiver.wait("a first attempt", |got| got.len() == 1).await;
    wait_metric(&server, &metric("retried"), 1).await;
    clock.advance(20 * 3_600_000);
    wait_metric(&server, &metric("retried"), 2).await;
    for n in 0..3 {
        mary.post_status(&format!("Fails {n}"), json!({})).await;
    }
    wait_metric(&server, &metric("retried"), 5).await;
    // The first one's day is over: dead, and the endpoint paused.
    clock.advance(5 * 3_600_000);
    wait_metric(&server, &metric("dead"), 1).await;
    for n in 0..3 {
        mary.post_status(&format!("Waits {n}"), json!({})).await;
    }
    let mut pending = Vec::new();
    for _ in 0..200 {
        pending = deliveries(&app, &hook, "PENDING", None, None).await.0;
        if pending.len() == 3 {
            break;
        }
        sender_passes(&server, 1).await;
    }
    assert_eq!(pending.len(), 3, "{pending:?}");
    let (failed, _) = deliveries(&app, &hook, "FAILED", None, None).await;
    assert_eq!(failed.len(), 3, "{failed:?}");
    for (state, whole) in [("PENDING", &pending), ("FAILED", &failed)] {
        let whole: Vec<String> = ids(whole).into_iter().map(str::to_owned).collect();
        let mut sorted = whole.clone();
        sorted.sort_unstable();
        assert_eq!(whole, sorted, "{state} in message-id order");
        assert_eq!(all_pages(&app, &hook, state, 2).await, whole, "{state}");
        assert_eq!(all_pages(&app, &hook, state, 1).await, whole, "{state}");
    }
    let (pending_ids, failed_ids) = (ids(&pending), ids(&failed));
    assert!(
        pending_ids.iter().all(|id| !failed_ids.contains(id)),
        "each in one state"
    );
    server.stop().await;
}

on_both_backends!(
    a_change_told_before_it_is_made_waits_for_it,
    pages_of_a_state_hold_each_once,
    a_follow_is_told_once,
    a_like_is_told_once,
    action_changes_are_told,
    deliveries_show_their_attempts,
    waiting_deliveries_are_retried_now,
    a_failing_endpoint_is_paused_until_resumed,
);

/// A MongoDB database of the release that kept a webhook delivery's
/// attempts in its delivery alone: a delivery that failed twice and waits
/// for its retry, and one never tried, both without the job's failures
/// (documents of that release's shape, inserted raw), open with the first
/// listed among the failed and the second among the never failed.
#[tokio::test]
async fn earlier_mongodb_failed_webhook_deliveries_are_counted_as_failed() {
    use anyhow::ensure;
    use bson::{doc, oid::ObjectId};
    use riverfeed::store::{JobKind, QueuedRead};

    use crate::common::{concluded, earlier_database};

    let Some((url, db)) = earlier_database("jobs_earlier_webhook_failures").await else {
        return;
    };
    let delivery = |message: &str, tried: Option<bson::Document>| {
        let mut body = json!({
            "webhook": "wh_1", "message": message, "event": "action.recorded", "body": "{}",
        });
        if let Some(tried) = tried {
            body["tried"] = serde_json::to_value(tried).expect("json");
        }
        doc! {
            "_id": ObjectId::new(), "kind": "webhook", "tenant": T,
            "key": format!("wh_1\u{1f}{message}"), "payload": body.to_string(),
            "queued": 10_i64, "until": 5_000_i64,
        }
    };
    let tried = doc! { "attempts": 2, "error": "the endpoint answered 503", "status": 503 };
    db.collection::<bson::Document>("jobs")
        .insert_many([delivery("msg_a", Some(tried)), delivery("msg_b", None)])
        .await
        .expect("earlier jobs inserted");
    db.collection::<bson::Document>("meta")
        .insert_one(doc! { "_id": "jobs", "version": 4 })
        .await
        .expect("the earlier version");
    let result = async {
        let store = riverfeed::store::open(&url).await?;
        let listed = |failed| QueuedRead {
            failed: Some(failed),
            ..QueuedRead::under("wh_1")
        };
        let failing = store.queued(JobKind::Webhook, T, listed(true)).await?;
        let failing: Vec<(&str, u32)> = failing
            .iter()
            .map(|q| (q.job.key.as_str(), q.job.failures))
            .collect();
        ensure!(failing == [("wh_1\u{1f}msg_a", 2)], "{failing:?}");
        let never = store.queued(JobKind::Webhook, T, listed(false)).await?;
        let never: Vec<&str> = never.iter().map(|q| q.job.key.as_str()).collect();
        ensure!(never == ["wh_1\u{1f}msg_b"], "{never:?}");
        Ok(())
    }
    .await;
    concluded(&db, result).await;
}
