//! Keyed webhook mutations cut off by a kill: the retry registers one
//! webhook, rotates its secret once, and queues one test event.

use serde_json::{json, Value};

use super::{next_after_kill, post_keyed_as, T};
use crate::common::{free_port, Client};
use crate::processes::Proc;

const CRASH: [(&str, &str); 1] = [("RIVERFEED_CRASH_BEFORE_KEEPING", "1")];
/// Webhooks here go to a loopback port nothing listens on; the serving
/// processes run no sender, so a queued delivery stays queued.
pub(super) const FLAGS: [&str; 2] = ["--webhooks-allow-private", "--no-worker"];
const SERVICE: (&str, Option<&str>) = ("app-backend", Some("service"));

pub(super) fn service(proc: &Proc) -> Client {
    Client::at(proc.base(), Some((T, SERVICE.0, SERVICE.1)))
}

fn hook_url() -> String {
    format!("http://127.0.0.1:{}/hook", free_port())
}

/// Registers a webhook unkeyed, hearing `event`: its id.
pub(super) async fn register(proc: &Proc, secret: &str, event: &str) -> String {
    let answer = service(proc)
        .data(
            "mutation($url: String!, $secret: String, $event: WebhookEvent!) {
                registerWebhook(url: $url, events: [$event], secret: $secret) {
                    webhook { webhookId }
                }
            }",
            json!({ "url": hook_url(), "secret": secret, "event": event }),
        )
        .await;
    answer["registerWebhook"]["webhook"]["webhookId"]
        .as_str()
        .expect("an id")
        .to_owned()
}

/// Sends `body` under `key` to a process that dies before it answers,
/// and starts the next one.
async fn cut_off(mut first: Proc, store: &str, key: &str, body: &str) -> Proc {
    let answer = post_keyed_as(first.base(), SERVICE, key, body).await;
    assert!(answer.is_none(), "the process died: {answer:?}");
    first.exited().await;
    next_after_kill(store, SERVICE.0, key, &FLAGS).await
}

/// Sends `body` under `key` again: the answer's data.
async fn retried(next: &Proc, key: &str, body: &str) -> Value {
    let (status, answer) = post_keyed_as(next.base(), SERVICE, key, body)
        .await
        .expect("answered");
    assert_eq!(status, 200, "{answer}");
    assert!(answer.get("errors").is_none(), "{answer}");
    answer["data"].clone()
}

#[tokio::test]
async fn a_keyed_registration_cut_off_by_a_kill_registers_one_webhook() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    let first = Proc::start_with(free_port(), "serve", &store, &FLAGS, &CRASH).await;
    let body = json!({
        "query": "mutation($url: String!) {
            registerWebhook(url: $url, events: [ACTION_RECORDED]) { secret webhook { webhookId } }
        }",
        "variables": { "url": hook_url() },
    })
    .to_string();
    let mut next = cut_off(first, &store, "reg-1", &body).await;
    let data = retried(&next, "reg-1", &body).await;
    let id = data["registerWebhook"]["webhook"]["webhookId"].clone();
    let listed = service(&next)
        .data("{ webhooks { webhookId } }", json!({}))
        .await;
    assert_eq!(
        listed["webhooks"],
        json!([{ "webhookId": id }]),
        "one webhook, the one answered"
    );
    next.kill().await;

    let opened = riverfeed::store::open(&store).await.expect("opens");
    let hook = riverfeed::webhooks::registry::get(&*opened, T, id.as_str().expect("an id"))
        .await
        .expect("read")
        .expect("registered");
    assert_eq!(
        data["registerWebhook"]["secret"].as_str(),
        Some(hook.secret.as_str()),
        "the secret answered is the one that signs"
    );
}

#[tokio::test]
async fn a_keyed_rotation_cut_off_by_a_kill_rotates_once() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    let first = Proc::start_with(free_port(), "serve", &store, &FLAGS, &CRASH).await;
    let original = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let id = register(&first, original, "ACTION_RECORDED").await;
    let body = json!({
        "query": "mutation($id: ID!) { rotateWebhookSecret(webhookId: $id) { secret } }",
        "variables": { "id": id },
    })
    .to_string();
    let answer = post_keyed_as(first.base(), SERVICE, "rot-1", &body).await;
    assert!(answer.is_none(), "the process died: {answer:?}");
    let mut first = first;
    first.exited().await;
    let stored = {
        let opened = riverfeed::store::open(&store).await.expect("opens");
        riverfeed::webhooks::registry::get(&*opened, T, &id)
            .await
            .expect("read")
            .expect("registered")
    };
    assert_ne!(stored.secret, original, "the first attempt rotated");

    let mut next = next_after_kill(&store, SERVICE.0, "rot-1", &FLAGS).await;
    let data = retried(&next, "rot-1", &body).await;
    assert_eq!(
        data["rotateWebhookSecret"]["secret"].as_str(),
        Some(stored.secret.as_str()),
        "the retry answers the secret the first attempt stored"
    );
    next.kill().await;
    let opened = riverfeed::store::open(&store).await.expect("opens");
    let after = riverfeed::webhooks::registry::get(&*opened, T, &id)
        .await
        .expect("read")
        .expect("registered");
    assert_eq!(after.secret, stored.secret, "rotated once");
    assert_eq!(
        after.previous.map(|(old, _)| old).as_deref(),
        Some(original),
        "the secret before the rotation still signs beside it"
    );
}

#[tokio::test]
async fn a_keyed_test_event_cut_off_by_a_kill_is_queued_once() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    let first = Proc::start_with(free_port(), "serve", &store, &FLAGS, &CRASH).await;
    let id = register(
        &first,
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "ACTION_RECORDED",
    )
    .await;
    let body = json!({
        "query": "mutation($id: ID!) { sendTestEvent(webhookId: $id) }",
        "variables": { "id": id },
    })
    .to_string();
    let mut next = cut_off(first, &store, "test-1", &body).await;
    let data = retried(&next, "test-1", &body).await;
    let message = data["sendTestEvent"].clone();
    let read = service(&next)
        .data(
            "query($id: ID!) { webhook(webhookId: $id) {
                pending: deliveries(state: PENDING, first: 10) { nodes { messageId eventType } }
                failed: deliveries(state: FAILED, first: 10) { nodes { messageId eventType } }
            } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        read["webhook"]["pending"]["nodes"],
        json!([{ "messageId": message, "eventType": "WEBHOOK_TEST" }]),
        "one test event, the one answered: {read}"
    );
    assert_eq!(read["webhook"]["failed"]["nodes"], json!([]), "{read}");
    next.kill().await;
}
