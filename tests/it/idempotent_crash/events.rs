//! The webhook event of a change an action mutation makes, cut off by a
//! kill right after the change (and with no key to retry under): the
//! event is queued all the same, once.

use serde_json::json;

use super::webhooks::{register, service, FLAGS};
use crate::common::free_port;
use crate::processes::{Mongo, Proc};

async fn a_deletion_cut_off_after_its_change_is_told(store: &str, mongo: Option<&Mongo>) {
    let crash = [("RIVERFEED_CRASH_AFTER_CHANGE", "1")];
    let first = Proc::start_with(free_port(), "serve", store, &FLAGS, &crash).await;
    let id = register(
        &first,
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "ACTION_DELETED",
    )
    .await;
    let on = first
        .client("bob")
        .post_status("to delete", json!({}))
        .await;
    let cut_off = first
        .client("bob")
        .try_post(
            "mutation($on: ID!) { deleteAction(actionId: $on) }",
            json!({ "on": on }),
        )
        .await;
    assert!(cut_off.is_none(), "the process died: {cut_off:?}");
    let mut first = first;
    first.exited().await;
    if let Some(mongo) = mongo {
        mongo.end_abandoned().await;
    }

    let mut next = Proc::start_on(free_port(), "serve", store, &FLAGS).await;
    let read = next
        .client("bob")
        .data(
            "query($on: ID!) { action(actionId: $on) { actionId } }",
            json!({ "on": on }),
        )
        .await;
    assert_eq!(read["action"], serde_json::Value::Null, "deleted: {read}");
    let read = service(&next)
        .data(
            "query($id: ID!) { webhook(webhookId: $id) {
                deliveries(state: PENDING, first: 10) { nodes { eventType payload } }
            } }",
            json!({ "id": id }),
        )
        .await;
    let nodes = read["webhook"]["deliveries"]["nodes"]
        .as_array()
        .expect("nodes")
        .clone();
    assert_eq!(nodes.len(), 1, "one event told: {read}");
    assert_eq!(nodes[0]["eventType"], "ACTION_DELETED", "{read}");
    let payload: serde_json::Value =
        serde_json::from_str(nodes[0]["payload"].as_str().expect("a payload")).expect("JSON");
    assert_eq!(payload["data"]["actionId"], json!(on), "{payload}");
    next.kill().await;
}

#[tokio::test]
async fn a_deletion_cut_off_after_its_change_is_told_embedded() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    a_deletion_cut_off_after_its_change_is_told(&store, None).await;
}

#[tokio::test]
async fn a_deletion_cut_off_after_its_change_is_told_on_mongodb() {
    let Some(mongo) = Mongo::start("deletion_told").await else {
        return;
    };
    a_deletion_cut_off_after_its_change_is_told(&mongo.uri, Some(&mongo)).await;
    mongo.stop().await;
}
