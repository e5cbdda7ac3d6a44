//! Keyed writes other than a record, cut off by a kill: their retries
//! answer as the first attempt would have, and a deletion made between
//! the kill and the retry stands.

use serde_json::{json, Value};

use super::{next_after_kill, post_keyed};
use crate::common::free_port;
use crate::processes::Proc;

const CRASH: [(&str, &str); 1] = [("RIVERFEED_CRASH_BEFORE_KEEPING", "1")];

fn first_code(answer: &Value) -> Option<&str> {
    answer["errors"][0]["extensions"]["code"].as_str()
}

#[tokio::test]
async fn a_keyed_delete_cut_off_by_a_kill_answers_as_the_first_attempt() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    let mut first = Proc::start_with(free_port(), "serve", &store, &[], &CRASH).await;
    let on = first
        .client("bob")
        .post_status("to delete", json!({}))
        .await;
    let body = json!({
        "query": "mutation($on: ID!) { deleteAction(actionId: $on) }",
        "variables": { "on": on },
    })
    .to_string();
    let cut_off = post_keyed(first.base(), "del-1", &body).await;
    assert!(cut_off.is_none(), "the process died: {cut_off:?}");
    first.exited().await;

    let mut next = next_after_kill(&store, "bob", "del-1", &[]).await;
    let (status, answer) = post_keyed(next.base(), "del-1", &body)
        .await
        .expect("answered");
    assert_eq!(status, 200, "{answer}");
    assert!(answer.get("errors").is_none(), "{answer}");
    assert_eq!(answer["data"]["deleteAction"], json!(on), "{answer}");
    let read = next
        .client("bob")
        .data(
            "query($on: ID!) { action(actionId: $on) { actionId } }",
            json!({ "on": on }),
        )
        .await;
    assert_eq!(read["action"], Value::Null, "still deleted: {read}");

    // Another request deleting the deleted action is told it is not there.
    let (_, other) = post_keyed(next.base(), "del-2", &body)
        .await
        .expect("answered");
    assert_eq!(first_code(&other), Some("NOT_FOUND"), "{other}");
    next.kill().await;
}

#[tokio::test]
async fn a_keyed_record_whose_action_was_deleted_before_the_retry_stays_deleted() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    let mut first = Proc::start_with(free_port(), "serve", &store, &[], &CRASH).await;
    let body = json!({
        "query": "mutation { recordAction(input: {descriptor: {statusPost: {text: \"cut off\"}}}) { actionId created } }",
    })
    .to_string();
    let cut_off = post_keyed(first.base(), "rec-1", &body).await;
    assert!(cut_off.is_none(), "the process died: {cut_off:?}");
    first.exited().await;

    let mut next = next_after_kill(&store, "bob", "rec-1", &[]).await;
    let bob = next.client("bob");
    let feed = "{ actorFeed(userId: \"bob\", first: 10) { edges { node { actionId } } } }";
    let read = bob.data(feed, json!({})).await;
    let stored = read["actorFeed"]["edges"][0]["node"]["actionId"]
        .as_str()
        .expect("the first attempt stored its action")
        .to_owned();
    bob.data(
        "mutation($on: ID!) { deleteAction(actionId: $on) }",
        json!({ "on": stored }),
    )
    .await;

    let (_, answer) = post_keyed(next.base(), "rec-1", &body)
        .await
        .expect("answered");
    assert_eq!(first_code(&answer), Some("NOT_FOUND"), "{answer}");
    let read = bob.data(feed, json!({})).await;
    assert_eq!(
        read["actorFeed"]["edges"],
        json!([]),
        "the deletion stands: {read}"
    );
    let read = bob
        .data(
            "query($on: ID!) { action(actionId: $on) { actionId } }",
            json!({ "on": stored }),
        )
        .await;
    assert_eq!(read["action"], Value::Null, "{read}");
    next.kill().await;
}
