//! A request sent with an `Idempotency-Key` whose process is killed
//! (SIGKILL) after the request's writes and before its answer is kept:
//! the retry under the key, to the next process as soon as it runs (not
//! once the minute a claim holds its key has passed), writes nothing
//! twice and answers what the first attempt wrote.

use serde_json::{json, Value};

use crate::common::free_port;
use crate::processes::{Mongo, Proc};

mod events;
mod webhooks;
mod writes;

const T: &str = "acme";

/// A status post and a comment, in one request, neither with an id of
/// the caller's own: only the key can make a retry find them.
fn keyed_body(on: &str) -> String {
    json!({
        "query": "mutation($on: ID!) {
            recordAction(input: {descriptor: {statusPost: {text: \"keyed\"}}}) { actionId created }
            comment(actionId: $on, text: \"keyed comment\") { commentId }
        }",
        "variables": { "on": on },
    })
    .to_string()
}

/// Posts `body` as bob under `key`: the status and body, or `None` when
/// the process answered nothing.
async fn post_keyed(base: &str, key: &str, body: &str) -> Option<(u16, Value)> {
    post_keyed_as(base, ("bob", None), key, body).await
}

/// As [`post_keyed`], as `who` (a user, and the roles the header gives).
async fn post_keyed_as(
    base: &str,
    who: (&str, Option<&str>),
    key: &str,
    body: &str,
) -> Option<(u16, Value)> {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/graphql"))
        .header("content-type", "application/json")
        .header("x-riverfeed-tenant", T)
        .header("x-riverfeed-user", who.0)
        .header("idempotency-key", key)
        .body(body.to_owned());
    if let Some(roles) = who.1 {
        request = request.header("x-riverfeed-roles", roles);
    }
    let response = request.send().await.ok()?;
    let status = response.status().as_u16();
    Some((status, response.json().await.ok()?))
}

/// The process `who` held `key` with, as its record names it.
async fn holder(store: &str, user: &str, key: &str) -> String {
    use riverfeed::store::{RecordKind, Records};
    let opened = riverfeed::store::open(store)
        .await
        .expect("the store opens");
    let stored = opened
        .record(RecordKind::IdempotencyKey, T, &format!("{user}\u{1f}{key}"))
        .await
        .expect("read")
        .expect("the cut-off request holds its key");
    let kept: Value = serde_json::from_slice(&stored.body).expect("a record");
    assert!(kept.get("answer").is_none(), "no answer was kept: {kept}");
    kept["holder"]
        .as_str()
        .unwrap_or_else(|| panic!("the key names the process that held it: {kept}"))
        .to_owned()
}

/// Starts the process that takes over from one killed while its request
/// held `user`'s `key`. On the embedded store, at once: a claim of an
/// earlier boot is dead. On MongoDB, once the killed process's liveness
/// record has lapsed (seconds), long before the minute a claim runs.
async fn next_after_kill(store: &str, user: &str, key: &str, extra: &[&str]) -> Proc {
    if !store.starts_with("embedded:") {
        let holder = holder(store, user, key).await;
        let opened = riverfeed::store::open(store)
            .await
            .expect("the store opens");
        let mut polls = 0;
        while riverfeed::liveness::beats(&*opened, &holder, chrono::Utc::now().timestamp_millis())
            .await
            .expect("read")
        {
            polls += 1;
            assert!(
                polls < 60,
                "the killed process's liveness record never lapsed"
            );
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }
    Proc::start_on(free_port(), "serve", store, extra).await
}

async fn a_keyed_request_cut_off_by_a_kill_is_written_once(store: &str, mongo: Option<&Mongo>) {
    let crash = [("RIVERFEED_CRASH_BEFORE_KEEPING", "1")];
    let mut first = Proc::start_with(free_port(), "serve", store, &[], &crash).await;
    let bob = first.client("bob");
    let on = bob.post_status("to comment on", json!({})).await;
    let body = keyed_body(&on);
    let cut_off = post_keyed(first.base(), "cut-1", &body).await;
    assert!(
        cut_off.is_none(),
        "the process died before it answered: {cut_off:?}"
    );
    first.exited().await;
    if let Some(mongo) = mongo {
        mongo.end_abandoned().await;
    }

    let mut next = next_after_kill(store, "bob", "cut-1", &[]).await;
    let (status, answer) = post_keyed(next.base(), "cut-1", &body)
        .await
        .expect("answered");
    assert_eq!(status, 200, "{answer}");
    let data = &answer["data"];
    assert!(answer.get("errors").is_none(), "{answer}");
    assert_eq!(
        data["recordAction"]["created"], true,
        "answered as the first attempt would have: {answer}"
    );
    let action = data["recordAction"]["actionId"].as_str().expect("an id");
    let comment = data["comment"]["commentId"].as_str().expect("an id");

    let bob = next.client("bob");
    let read = bob
        .data(
            "query($on: ID!) {
                actorFeed(userId: \"bob\", first: 10) { edges { node { actionId } } }
                action(actionId: $on) { commentCount comments(first: 10) { nodes { commentId } } }
            }",
            json!({ "on": on }),
        )
        .await;
    let actions: Vec<&str> = read["actorFeed"]["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| e["node"]["actionId"].as_str().expect("an id"))
        .collect();
    assert_eq!(actions, [action, on.as_str()], "one keyed action, once");
    assert_eq!(read["action"]["commentCount"], 1, "{read}");
    assert_eq!(
        read["action"]["comments"]["nodes"],
        json!([{ "commentId": comment }]),
        "one comment, the one answered"
    );
    next.kill().await;
}

#[tokio::test]
async fn a_keyed_request_cut_off_by_a_kill_is_written_once_embedded() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    a_keyed_request_cut_off_by_a_kill_is_written_once(&store, None).await;
}

#[tokio::test]
async fn a_keyed_request_cut_off_by_a_kill_is_written_once_on_mongodb() {
    let Some(mongo) = Mongo::start("keyed_cut_off").await else {
        return;
    };
    a_keyed_request_cut_off_by_a_kill_is_written_once(&mongo.uri, Some(&mongo)).await;
    mongo.stop().await;
}
