//! A request sent with an `Idempotency-Key` whose process is killed
//! (SIGKILL) after the request's writes and before its answer is kept:
//! the retry under the key, to the next process, writes nothing twice and
//! answers what the first attempt wrote.

use serde_json::{json, Value};

use crate::common::free_port;
use crate::processes::{database, drop_db, Proc};

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
    let response = reqwest::Client::new()
        .post(format!("{base}/graphql"))
        .header("content-type", "application/json")
        .header("x-riverfeed-tenant", T)
        .header("x-riverfeed-user", "bob")
        .header("idempotency-key", key)
        .body(body.to_owned())
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    Some((status, response.json().await.ok()?))
}

/// The minute a request cut off by a kill holds its key, passed: the key's
/// record is let go as its time running out would (the test cannot move
/// a child process's clock).
async fn let_go(store: &str, key: &str) {
    use riverfeed::store::{RecordKind, Records};
    let opened = riverfeed::store::open(store)
        .await
        .expect("the store opens");
    let record_key = format!("bob\u{1f}{key}");
    let kind = RecordKind::IdempotencyKey;
    let stored = opened
        .record(kind, T, &record_key)
        .await
        .expect("read")
        .expect("the cut-off request holds its key");
    let mut kept: Value = serde_json::from_slice(&stored.body).expect("a record");
    assert!(kept.get("answer").is_none(), "no answer was kept: {kept}");
    kept["running_until"] = json!(0);
    let body = Some(kept.to_string().into_bytes());
    let written = opened
        .put_record(kind, T, &record_key, body, Some(stored.version))
        .await
        .expect("written");
    assert!(written);
}

async fn a_keyed_request_cut_off_by_a_kill_is_written_once(store: &str) {
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
    let_go(store, "cut-1").await;

    let mut next = Proc::start_on(free_port(), "serve", store, &[]).await;
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
    a_keyed_request_cut_off_by_a_kill_is_written_once(&store).await;
}

#[tokio::test]
async fn a_keyed_request_cut_off_by_a_kill_is_written_once_on_mongodb() {
    let Some(uri) = database("keyed_cut_off") else {
        return;
    };
    drop_db(&uri).await;
    a_keyed_request_cut_off_by_a_kill_is_written_once(&uri).await;
    drop_db(&uri).await;
}
