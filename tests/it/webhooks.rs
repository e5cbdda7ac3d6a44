//! Webhooks: registered by the application's backend, told every event of
//! the jobs that carry them, signed as Standard Webhooks says, retried for
//! a day, kept dead after that and replayed; endpoints checked against
//! private ranges. A receiver in the test counts what reaches it.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use riverfeed::clock::ManualClock;
use riverfeed::server::ServeOptions;
use riverfeed::webhooks::sign::Secret;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::common::{first_error_code, Backend, Client, Stopped, TestServer, PATIENCE};
use crate::on_both_backends;

pub(crate) const T: &str = "acme";

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub id: String,
    pub timestamp: i64,
    pub signature: String,
    pub raw: String,
    pub body: Value,
    /// What it answered.
    pub status: u16,
    /// For `action.delivered`: the action's fan-out state when it arrived.
    pub fan_out: Option<String>,
}

/// An HTTP endpoint on loopback that keeps every delivery.
pub struct Receiver {
    pub url: String,
    got: Arc<Mutex<Vec<Received>>>,
    status: Arc<AtomicU16>,
    /// Milliseconds it takes to answer.
    delay: Arc<AtomicU64>,
}

impl Receiver {
    /// Starts one answering `200`; with `check`, it reads each delivered
    /// action's fan-out state as the delivery arrives.
    pub async fn start(check: Option<Client>) -> Receiver {
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let status = Arc::new(AtomicU16::new(200));
        let delay: Arc<AtomicU64> = Arc::default();
        let (keep, answer, slow) = (got.clone(), status.clone(), delay.clone());
        let check = Arc::new(check);
        let handler = move |headers: HeaderMap, raw: String| {
            let (keep, answer, check) = (keep.clone(), answer.clone(), check.clone());
            let wait = Duration::from_millis(slow.load(Ordering::SeqCst));
            async move {
                tokio::time::sleep(wait).await;
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned()
                };
                let body: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
                let fan_out = match (check.as_ref(), body["type"].as_str()) {
                    (Some(client), Some("action.delivered")) => {
                        let data = client
                            .data(
                                "query($id: ID!) { action(actionId: $id) { fanOut { state } } }",
                                json!({ "id": body["data"]["actionId"] }),
                            )
                            .await;
                        data["action"]["fanOut"]["state"]
                            .as_str()
                            .map(str::to_owned)
                    }
                    _ => None,
                };
                let status = answer.load(Ordering::SeqCst);
                keep.lock().unwrap().push(Received {
                    id: header("webhook-id"),
                    timestamp: header("webhook-timestamp").parse().unwrap_or(-1),
                    signature: header("webhook-signature"),
                    raw,
                    body,
                    status,
                    fan_out,
                });
                StatusCode::from_u16(status).expect("status")
            }
        };
        let router = axum::Router::new().route("/hook", axum::routing::post(handler));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        Receiver {
            url,
            got,
            status,
            delay,
        }
    }

    /// Takes `ms` to answer each request from now on.
    pub fn slow_down(&self, ms: u64) {
        self.delay.store(ms, Ordering::SeqCst);
    }

    /// Answers `status` from now on.
    pub fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    pub fn all(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until what it got satisfies `done`.
    pub async fn wait(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let got = self.all();
            if done(&got) {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "never {what}; got {:#?}",
                got.iter().map(|r| &r.body).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The deliveries of one event type.
fn of_type<'a>(got: &'a [Received], kind: &str) -> Vec<&'a Received> {
    got.iter().filter(|r| r.body["type"] == kind).collect()
}

const REGISTER: &str = "mutation($url: String!, $events: [WebhookEvent!]!, $secret: String) {
    registerWebhook(url: $url, events: $events, secret: $secret) {
        secret webhook { webhookId url events enabled createdAt previousSecretExpiresAt }
    }
}";

const DEAD: &str = "query($id: ID!) { webhook(webhookId: $id) {
    enabled deliveries(state: DEAD) { nodes {
        messageId eventType state payload queuedAt diedAt lastError
    } }
} }";

/// Registers `url` for `events` as the application's backend; the
/// webhook's id and secret.
pub(crate) async fn register(backend: &Client, url: &str, events: Value) -> (String, String) {
    let data = backend
        .data(REGISTER, json!({ "url": url, "events": events }))
        .await;
    let made = &data["registerWebhook"];
    (
        made["webhook"]["webhookId"]
            .as_str()
            .expect("id")
            .to_owned(),
        made["secret"].as_str().expect("secret").to_owned(),
    )
}

/// A server that may send webhooks to loopback, on `backend`'s store, with
/// `clock` if given.
pub(crate) async fn start(backend: Backend, clock: Option<Arc<ManualClock>>) -> Option<TestServer> {
    let (store, dir) = crate::common::store_url(backend)?;
    Some(start_on(Stopped { store, dir }, clock).await)
}

/// As [`start`], on a stopped server's store.
async fn start_on(stopped: Stopped, clock: Option<Arc<ManualClock>>) -> TestServer {
    TestServer::start_with(stopped, move |store| {
        let mut options = ServeOptions::new(store);
        options.webhooks_allow_private = true;
        if let Some(clock) = clock {
            options.clock = clock;
        }
        options
    })
    .await
}

/// Every kind of event reaches an endpoint that hears it, from each job
/// that carries one (a fan-out, a comment's bump, a like's notice job),
/// each once by its `webhook-id`, signed with the endpoint's secret; the
/// delivered event only once the fan-out is done.
async fn events_reach_a_registered_endpoint_signed(backend: Backend) {
    let Some(server) = start(backend, None).await else {
        return;
    };
    let (mary, john) = (server.client(T, "mary"), server.client(T, "john"));
    let receiver = Receiver::start(Some(mary.clone_headers())).await;
    let app = server.service(T);
    let all = json!([
        "ACTION_RECORDED",
        "ACTION_DELIVERED",
        "NOTIFICATION_ADDED",
        "COMMENT_ADDED"
    ]);
    let (hook, secret) = register(&app, &receiver.url, all).await;
    assert!(
        hook.starts_with("wh_") && secret.starts_with("whsec_"),
        "{hook} {secret}"
    );
    let listed = app
        .data("{ webhooks { webhookId url events enabled } }", json!({}))
        .await;
    assert_eq!(
        listed["webhooks"],
        json!([{ "webhookId": hook, "url": receiver.url, "enabled": true,
                 "events": ["ACTION_RECORDED", "ACTION_DELIVERED", "NOTIFICATION_ADDED", "COMMENT_ADDED"] }])
    );

    mary.upsert_user("mary", "Mary Fanning").await;
    john.follow("mary").await;
    let action = mary.post_status("Mary Fanning applied", json!({})).await;
    let comment = john
        .data(
            "mutation($id: ID!) { comment(actionId: $id, text: \"Strong profile\") { id } }",
            json!({ "id": action }),
        )
        .await;
    assert!(comment["comment"]["id"].is_string(), "{comment}");
    john.data(
        "mutation($id: ID!) { like(actionId: $id) { actionId } }",
        json!({ "id": action }),
    )
    .await;

    let got = receiver
        .wait("every event", |got| {
            let notices = of_type(got, "notification.added");
            !of_type(got, "action.recorded").is_empty()
                && !of_type(got, "action.delivered").is_empty()
                && !of_type(got, "comment.added").is_empty()
                && notices
                    .iter()
                    .any(|n| n.body["data"]["reason"] == "COMMENT")
                && notices.iter().any(|n| n.body["data"]["reason"] == "LIKE")
        })
        .await;
    let secret = Secret::parse(&secret).expect("secret");
    for r in &got {
        assert!(r.id.starts_with("msg_"), "{}", r.id);
        assert!(
            secret.verify(&r.id, r.timestamp, r.raw.as_bytes(), &r.signature),
            "signed: {r:?}"
        );
        assert!(r.body["timestamp"].is_string() && r.body["data"]["tenant"] == T);
    }
    let recorded = of_type(&got, "action.recorded")[0];
    assert_eq!(recorded.body["data"]["actionId"], action);
    assert_eq!(recorded.body["data"]["actorId"], "mary");
    assert_eq!(
        recorded.body["data"]["descriptor"],
        json!({ "type": "StatusPost", "text": "Mary Fanning applied" })
    );
    let delivered = of_type(&got, "action.delivered")[0];
    assert_eq!(
        delivered.fan_out.as_deref(),
        Some("DONE"),
        "sent once the fan-out is done"
    );
    let commented = of_type(&got, "comment.added")[0];
    assert_eq!(commented.body["data"]["text"], "Strong profile");
    assert_eq!(commented.body["data"]["authorId"], "john");
    let notices = of_type(&got, "notification.added");
    assert!(notices.iter().all(|n| n.body["data"]["userId"] == "mary"
        && n.body["data"]["actorId"] == "john"
        && n.body["data"]["actionId"] == action));
    // Each event once: distinct ids, one per event.
    let mut ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), got.len(), "no event twice");
    let sent = "riverfeed_webhook_deliveries_total{outcome=\"sent\"}";
    wait_metric(&server, sent, got.len() as u64).await;
    server.stop().await;
}

/// A failing endpoint is retried on the schedule, by the same
/// `webhook-id`; after a day the delivery is dead, listed with why, and a
/// replay sends it again.
async fn failures_are_retried_for_a_day_then_kept_to_replay(backend: Backend) {
    let clock = Arc::new(ManualClock::new(crate::common::CLOCK_START));
    let Some(server) = start(backend, Some(clock.clone())).await else {
        return;
    };
    let receiver = Receiver::start(None).await;
    receiver.answer(503);
    let app = server.service(T);
    let (hook, _) = register(&app, &receiver.url, json!(["ACTION_RECORDED"])).await;
    let metric =
        |outcome: &str| format!("riverfeed_webhook_deliveries_total{{outcome=\"{outcome}\"}}");
    let mary = server.client(T, "mary");
    mary.post_status("First try fails", json!({})).await;
    let first = receiver.wait("a first attempt", |got| got.len() == 1).await;
    wait_metric(&server, &metric("retried"), 1).await;
    let depth = "riverfeed_webhook_queue_depth";
    assert_eq!(server.metric(depth).await, 1, "waiting for its retry");
    // Due again 5 s on.
    clock.advance(5_000);
    let second = receiver.wait("a retry", |got| got.len() == 2).await;
    assert_eq!(second[1].id, first[0].id, "a retry keeps its webhook-id");
    assert_eq!(second[1].raw, first[0].raw, "and its body");
    wait_metric(&server, &metric("retried"), 2).await;
    // Closely at first: 15 s after the event, a short outage is over.
    clock.advance(10_000);
    receiver.wait("a third attempt", |got| got.len() == 3).await;
    wait_metric(&server, &metric("retried"), 3).await;
    // A day on, the last attempt fails too: dead.
    clock.advance(25 * 3_600_000);
    receiver.wait("a last attempt", |got| got.len() == 4).await;
    wait_metric(&server, &metric("dead"), 1).await;
    assert_eq!(server.metric(depth).await, 0, "dead: no longer queued");
    assert_eq!(server.metric(&metric("failed")).await, 4);
    let dead = app.data(DEAD, json!({ "id": hook })).await;
    let dead = &dead["webhook"]["deliveries"]["nodes"];
    assert_eq!(dead.as_array().map(Vec::len), Some(1), "{dead}");
    assert_eq!(dead[0]["messageId"], first[0].id.as_str());
    assert_eq!(dead[0]["eventType"], "ACTION_RECORDED");
    assert_eq!(dead[0]["state"], "DEAD");
    assert_eq!(dead[0]["payload"], first[0].raw.as_str(), "the body sent");
    let at = |field: &str| {
        chrono::DateTime::parse_from_rfc3339(dead[0][field].as_str().expect(field))
            .expect("a time")
            .timestamp_millis()
    };
    assert!(at("diedAt") > at("queuedAt") + 24 * 3_600_000, "{dead}");
    assert!(
        dead[0]["lastError"]
            .as_str()
            .unwrap_or_default()
            .contains("503"),
        "{dead}"
    );

    receiver.answer(200);
    assert_eq!(replay(&app, &hook, None).await, 1);
    let got = receiver.wait("the replay", |got| got.len() == 5).await;
    assert_eq!(
        (got[4].id.as_str(), got[4].status),
        (first[0].id.as_str(), 200)
    );
    wait_metric(&server, &metric("sent"), 1).await;
    let dead = app.data(DEAD, json!({ "id": hook })).await;
    assert_eq!(dead["webhook"]["deliveries"]["nodes"], json!([]));
    server.stop().await;
}

/// A retry waiting for its time waits across a restart: the restarted
/// sender passes over it until its time, then tries it.
async fn retry_times_survive_a_restart(backend: Backend) {
    let clock = Arc::new(ManualClock::new(crate::common::CLOCK_START));
    let Some(server) = start(backend, Some(clock.clone())).await else {
        return;
    };
    let receiver = Receiver::start(None).await;
    receiver.answer(503);
    let app = server.service(T);
    register(&app, &receiver.url, json!(["ACTION_RECORDED"])).await;
    server
        .client(T, "mary")
        .post_status("Fails, then waits", json!({}))
        .await;
    receiver.wait("a first attempt", |got| got.len() == 1).await;
    let retried = "riverfeed_webhook_deliveries_total{outcome=\"retried\"}";
    wait_metric(&server, retried, 1).await;

    let server = start_on(server.stop_keeping_data().await, Some(clock.clone())).await;
    // Due 5 s after it was queued: a millisecond before, nothing is sent.
    clock.advance(4_999);
    sender_passes(&server, 2).await;
    assert_eq!(receiver.all().len(), 1, "tried again before its time");
    assert_eq!(server.metric("riverfeed_webhook_queue_depth").await, 1);
    clock.advance(1);
    let got = receiver
        .wait("the retry at its time", |got| got.len() == 2)
        .await;
    assert_eq!(got[1].id, got[0].id);
    server.stop().await;
}

/// Waits for `n` passes of the sender that begin from now on: the last of
/// them began after every earlier one had settled, so it saw the clock as
/// it is now.
pub(crate) async fn sender_passes(server: &TestServer, n: u64) {
    let name = "riverfeed_webhook_sender_rounds_total";
    let from = server.metric(name).await;
    wait_metric(server, name, from + n).await;
}

/// More dead deliveries than a page holds: the first page holds `first`
/// of them, in message-id order, and the rest follow past its last. The
/// list is deprecated for `deliveries(state: DEAD)`, and says so.
async fn dead_deliveries_come_in_pages(backend: Backend) {
    let Some(server) = start(backend, None).await else {
        return;
    };
    let receiver = Receiver::start(None).await;
    let app = server.service(T);
    let (hook, _) = register(&app, &receiver.url, json!(["ACTION_RECORDED"])).await;
    let disable = "mutation($id: ID!) { disableWebhook(webhookId: $id) { enabled } }";
    app.data(disable, json!({ "id": hook })).await;
    let mary = server.client(T, "mary");
    for n in 0..5 {
        mary.post_status(&format!("Kept dead {n}"), json!({})).await;
    }
    let page = |first: u64, after: Option<&str>| {
        let app = app.clone_headers();
        let vars = json!({ "id": hook, "first": first, "after": after });
        async move {
            let data = app
                .data(
                    "query($id: ID!, $first: Int!, $after: ID) { webhook(webhookId: $id) {
                        deadDeliveries(first: $first, after: $after) { messageId } } }",
                    vars,
                )
                .await;
            data["webhook"]["deadDeliveries"]
                .as_array()
                .expect("a list")
                .iter()
                .map(|d| d["messageId"].as_str().expect("an id").to_owned())
                .collect::<Vec<String>>()
        }
    };
    let deadline = Instant::now() + PATIENCE;
    let all = loop {
        let all = page(100, None).await;
        if all.len() == 5 {
            break all;
        }
        assert!(Instant::now() < deadline, "never five dead: {all:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted, "in message-id order");
    let first = page(2, None).await;
    assert_eq!(first, all[..2]);
    let second = page(2, Some(&first[1])).await;
    assert_eq!(second, all[2..4]);
    let last = page(2, Some(&second[1])).await;
    assert_eq!(last, all[4..], "the last page is short");
    assert_eq!(page(2, Some(&last[0])).await, Vec::<String>::new());
    let vars = json!({ "id": hook, "after": "" });
    let empty = "query($id: ID!, $after: ID) { webhook(webhookId: $id) {
        deadDeliveries(after: $after) { messageId } } }";
    assert_eq!(app.error_code(empty, vars).await, "BAD_USER_INPUT");
    let fields = app
        .data(
            "{ __type(name: \"Webhook\") { fields(includeDeprecated: true) {
                name isDeprecated deprecationReason } } }",
            json!({}),
        )
        .await;
    let fields = fields["__type"]["fields"].as_array().expect("fields");
    let field = |name: &str| fields.iter().find(|f| f["name"] == name).expect(name);
    assert_eq!(field("deliveries")["isDeprecated"], false);
    let dead = field("deadDeliveries");
    assert_eq!(dead["isDeprecated"], true, "{dead}");
    let reason = dead["deprecationReason"].as_str().unwrap_or_default();
    assert!(reason.contains("deliveries(state: DEAD)"), "{reason}");
    server.stop().await;
}

/// Replays `hook`'s dead deliveries (those of `messages`, or all) as the
/// application's backend; how many were queued.
async fn replay(app: &Client, hook: &str, messages: Option<Value>) -> u64 {
    let mutation =
        "mutation($id: ID!, $m: [ID!]) { replayDeadDeliveries(webhookId: $id, messageIds: $m) }";
    let data = app
        .data(mutation, json!({ "id": hook, "m": messages }))
        .await;
    data["replayDeadDeliveries"].as_u64().expect("a count")
}

/// Waits until the counter `name` reaches `n`.
pub(crate) async fn wait_metric(server: &TestServer, name: &str, n: u64) {
    let deadline = Instant::now() + PATIENCE;
    while server.metric(name).await < n {
        assert!(Instant::now() < deadline, "{name} never reached {n}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

on_both_backends!(
    events_reach_a_registered_endpoint_signed,
    failures_are_retried_for_a_day_then_kept_to_replay,
    retry_times_survive_a_restart,
    dead_deliveries_come_in_pages,
);

// Every model fans out through the same job, which tells the events.
crate::under_other_models!(events_reach_a_registered_endpoint_signed);

/// `sendTestEvent` sends one endpoint a signed `webhook.test` now, under
/// the message id it returns, whatever events it hears; `WEBHOOK_TEST`
/// cannot be registered, and a disabled webhook is sent no test.
#[tokio::test]
async fn a_test_event_reaches_its_endpoint_signed() {
    let Some(server) = start(Backend::Embedded, None).await else {
        return;
    };
    let receiver = Receiver::start(None).await;
    let app = server.service(T);
    let (hook, secret) = register(&app, &receiver.url, json!(["COMMENT_ADDED"])).await;
    let send = |hook: String| {
        let app = &app;
        async move {
            app.post(
                "mutation($id: ID!) { sendTestEvent(webhookId: $id) }",
                json!({ "id": hook }),
            )
            .await
        }
    };
    let sent = send(hook.clone()).await;
    let message = sent["data"]["sendTestEvent"]
        .as_str()
        .expect("a message id");
    let got = receiver.wait("the test event", |got| got.len() == 1).await;
    let r = &got[0];
    assert_eq!(r.id, message);
    assert_eq!(r.body["type"], "webhook.test", "{:?}", r.body);
    assert_eq!(r.body["data"]["webhookId"], hook.as_str());
    let secret = Secret::parse(&secret).expect("secret");
    assert!(secret.verify(&r.id, r.timestamp, r.raw.as_bytes(), &r.signature));

    let refused = app
        .post(
            REGISTER,
            json!({ "url": receiver.url, "events": ["WEBHOOK_TEST"] }),
        )
        .await;
    assert_eq!(
        first_error_code(&refused).as_deref(),
        Some("BAD_USER_INPUT"),
        "{refused}"
    );
    app.data(
        "mutation($id: ID!) { disableWebhook(webhookId: $id) { enabled } }",
        json!({ "id": hook }),
    )
    .await;
    let refused = send(hook.clone()).await;
    assert_eq!(
        first_error_code(&refused).as_deref(),
        Some("BAD_USER_INPUT"),
        "{refused}"
    );
    let unknown = send("wh_000000000000000000000000".to_owned()).await;
    assert_eq!(
        first_error_code(&unknown).as_deref(),
        Some("NOT_FOUND"),
        "{unknown}"
    );
    server.stop().await;
}

/// A rotated secret signs beside the new one for a day; a disabled webhook
/// is sent nothing, and what came due meanwhile is kept dead to replay.
#[tokio::test]
async fn rotation_signs_with_both_secrets_and_disabling_keeps_deliveries() {
    let Some(server) = start(Backend::Embedded, None).await else {
        return;
    };
    let receiver = Receiver::start(None).await;
    let app = server.service(T);
    let old = Secret::draw().to_text();
    let data = app
        .data(
            REGISTER,
            json!({ "url": receiver.url, "events": ["ACTION_RECORDED"], "secret": old }),
        )
        .await;
    assert_eq!(data["registerWebhook"]["secret"], old.as_str());
    let hook = data["registerWebhook"]["webhook"]["webhookId"]
        .as_str()
        .expect("id")
        .to_owned();
    let rotated = app
        .data(
            "mutation($id: ID!) { rotateWebhookSecret(webhookId: $id) {
                secret webhook { previousSecretExpiresAt } } }",
            json!({ "id": hook }),
        )
        .await;
    let new = rotated["rotateWebhookSecret"]["secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    assert_ne!(new, old);
    assert!(rotated["rotateWebhookSecret"]["webhook"]["previousSecretExpiresAt"].is_string());
    let mary = server.client(T, "mary");
    mary.post_status("Signed twice", json!({})).await;
    let got = receiver.wait("a delivery", |got| got.len() == 1).await;
    let r = &got[0];
    assert_eq!(r.signature.split(' ').count(), 2, "{}", r.signature);
    for secret in [&old, &new] {
        let secret = Secret::parse(secret).expect("secret");
        assert!(secret.verify(&r.id, r.timestamp, r.raw.as_bytes(), &r.signature));
    }

    let disabled = app
        .data(
            "mutation($id: ID!) { disableWebhook(webhookId: $id) { enabled } }",
            json!({ "id": hook }),
        )
        .await;
    assert_eq!(disabled["disableWebhook"]["enabled"], false);
    mary.post_status("While disabled", json!({})).await;
    let deadline = Instant::now() + PATIENCE;
    let dead = loop {
        let dead = app.data(DEAD, json!({ "id": hook })).await;
        if dead["webhook"]["deliveries"]["nodes"]
            .as_array()
            .is_some_and(|d| d.len() == 1)
        {
            break dead;
        }
        assert!(Instant::now() < deadline, "never kept: {dead}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(dead["webhook"]["deliveries"]["nodes"][0]["lastError"]
        .as_str()
        .unwrap_or_default()
        .contains("disabled"));
    assert_eq!(receiver.all().len(), 1, "nothing sent while disabled");
    app.data(
        "mutation($id: ID!) { enableWebhook(webhookId: $id) { enabled } }",
        json!({ "id": hook }),
    )
    .await;
    assert_eq!(replay(&app, &hook, Some(json!([]))).await, 0, "none named");
    assert_eq!(replay(&app, &hook, None).await, 1);
    let got = receiver.wait("the replay", |got| got.len() == 2).await;
    assert_eq!(got[1].body["data"]["descriptor"]["text"], "While disabled");
    server.stop().await;
}

/// Only the application's backend registers; endpoints must be http(s)
/// on public addresses unless the server allows private ones; a tenant
/// has at most 16; unknown webhooks are `NOT_FOUND`.
#[tokio::test]
async fn webhook_calls_are_checked() {
    let Some((store, dir)) = crate::common::store_url(Backend::Embedded) else {
        return;
    };
    let server = TestServer::start_on(Stopped { store, dir }).await;
    let app = server.service(T);
    let register = |url: &str, events: Value, secret: Option<&str>| {
        let vars = json!({ "url": url, "events": events, "secret": secret });
        let app = app.clone_headers();
        async move { app.error_code(REGISTER, vars).await }
    };
    let user = server.client(T, "mary");
    let vars = json!({ "url": "https://example.com/hook", "events": ["ACTION_RECORDED"] });
    assert_eq!(user.error_code(REGISTER, vars).await, "FORBIDDEN");
    assert_eq!(
        user.error_code("{ webhooks { url } }", json!({})).await,
        "FORBIDDEN"
    );
    let recorded = json!(["ACTION_RECORDED"]);
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://[::1]:9/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::127.0.0.1]/hook",
        "http://[64:ff9b::7f00:1]/hook",
        "http://[2002:7f00:1::1]/hook",
        "http://[::ffff:0:7f00:1]/hook",
        "http://[fec0::1]/hook",
        "http://[100::1]/hook",
        "http://192.0.2.1/hook",
        "http://198.18.0.1/hook",
        "http://192.0.0.1/hook",
        "ftp://example.com/hook",
        "not a url",
    ] {
        assert_eq!(
            register(url, recorded.clone(), None).await,
            "BAD_USER_INPUT",
            "{url}"
        );
    }
    let said = app
        .post(
            REGISTER,
            json!({ "url": "http://127.0.0.1:9/hook", "events": recorded }),
        )
        .await;
    assert!(
        said["errors"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("--webhooks-allow-private"),
        "{said}"
    );
    for id in ["wh_000000000000000000000000", "nope"] {
        let vars = json!({ "id": id });
        let rotate = "mutation($id: ID!) { rotateWebhookSecret(webhookId: $id) { secret } }";
        assert_eq!(app.error_code(rotate, vars.clone()).await, "NOT_FOUND");
        let replay = "mutation($id: ID!) { replayDeadDeliveries(webhookId: $id) }";
        assert_eq!(app.error_code(replay, vars).await, "NOT_FOUND");
    }
    server.stop().await;

    let Some(server) = start(Backend::Embedded, None).await else {
        return;
    };
    let app = server.service(T);
    let url = "http://127.0.0.1:9/hook";
    let vars =
        |events: Value, secret: &str| json!({ "url": url, "events": events, "secret": secret });
    assert_eq!(
        app.error_code(REGISTER, vars(json!([]), "whsec_AAAA"))
            .await,
        "BAD_USER_INPUT"
    );
    let short = "whsec_c2hvcnQ=";
    assert_eq!(
        app.error_code(REGISTER, vars(recorded.clone(), short))
            .await,
        "BAD_USER_INPUT"
    );
    for _ in 0..16 {
        register_ok(&app, url).await;
    }
    let vars = json!({ "url": url, "events": recorded });
    assert_eq!(app.error_code(REGISTER, vars).await, "BAD_USER_INPUT");
    server.stop().await;
}

async fn register_ok(app: &Client, url: &str) {
    let data = app
        .data(
            REGISTER,
            json!({ "url": url, "events": ["ACTION_RECORDED", "ACTION_RECORDED"] }),
        )
        .await;
    let events = &data["registerWebhook"]["webhook"]["events"];
    assert_eq!(events, &json!(["ACTION_RECORDED"]), "each event once");
}
