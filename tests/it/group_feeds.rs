//! Group feeds: what is posted to a group (`to`) and its TEAM actions, its
//! last `--group-feed-size`, read by members and by anyone in the tenant as
//! access allows, and rebuilt by an import.

use futures_util::TryStreamExt;
use indicatif::ProgressBar;
use riverfeed::archive_cmd;
use riverfeed::server::ServeOptions;
use riverfeed::store::prelude::*;
use riverfeed::store::FeedRange;
use serde_json::{json, Value};

use crate::common::{store_url, Backend, Client, Stopped, TestServer, TestStore};

async fn start(backend: Backend, size: usize) -> Option<TestServer> {
    let (store, dir) = store_url(backend)?;
    Some(
        TestServer::start_with(Stopped { store, dir }, |url| ServeOptions {
            group_feed_size: size,
            ..ServeOptions::new(url)
        })
        .await,
    )
}

/// The ids of `group`'s feed as `reader` reads it, paged `page` at a time.
async fn group_feed(reader: &Client, group: &str, page: usize) -> Vec<String> {
    let query = "query($g: ID!, $n: Int, $after: String) {
        groupFeed(groupId: $g, first: $n, after: $after) {
            edges { node { actionId to } } pageInfo { hasNextPage endCursor } } }";
    let mut ids = Vec::new();
    let mut after = Value::Null;
    loop {
        let data = reader
            .data(query, json!({ "g": group, "n": page, "after": after }))
            .await;
        let feed = &data["groupFeed"];
        for edge in feed["edges"].as_array().expect("edges") {
            ids.push(edge["node"]["actionId"].as_str().expect("an id").to_owned());
        }
        if feed["pageInfo"]["hasNextPage"] != true {
            return ids;
        }
        after = feed["pageInfo"]["endCursor"].clone();
    }
}

async fn post(client: &Client, text: &str, extra: Value) -> String {
    let id = client.post_status(text, extra).await;
    client.wait_delivered(&id).await;
    id
}

async fn members_and_others_read_a_group_feed(backend: Backend) {
    let Some(server) = start(backend, 1_000).await else {
        return;
    };
    let service = server.service("acme");
    for (id, name) in [("ann", "Ann"), ("bob", "Bob"), ("cat", "Cat")] {
        service.upsert_user(id, name).await;
    }
    for member in ["ann", "bob"] {
        service.add_member("t1", "TEAM", member).await;
    }
    let (ann, bob, cat) = (
        server.client("acme", "ann"),
        server.client("acme", "bob"),
        server.client("acme", "cat"),
    );
    let public = post(&ann, "to the team, for all", json!({ "to": ["t1"] })).await;
    let team = post(&ann, "team only", json!({ "scope": "TEAM" })).await;
    let named = post(
        &bob,
        "for ann",
        json!({ "to": ["t1"], "scope": "RESTRICTED", "readers": ["ann"] }),
    )
    .await;
    let elsewhere = post(&ann, "not to the team", json!({})).await;
    let all = vec![named.clone(), team.clone(), public.clone()];
    // Members read what they may see, in pages of one as of ten; others in
    // the tenant its public posts.
    assert_eq!(group_feed(&ann, "t1", 10).await, all);
    assert_eq!(
        group_feed(&bob, "t1", 1).await,
        all,
        "the actor sees their own"
    );
    assert_eq!(group_feed(&cat, "t1", 10).await, vec![public.clone()]);
    assert!(!group_feed(&ann, "t1", 10).await.contains(&elsewhere));
    let data = cat
        .data(
            "query($id: ID!) { action(actionId: $id) { to } }",
            json!({ "id": public }),
        )
        .await;
    assert_eq!(data["action"]["to"], json!(["t1"]));

    // Posting to a group needs its membership (or the service role).
    let refused = cat
        .error_code(
            "mutation { recordAction(input: { descriptor: { statusPost: { text: \"x\" } }, to: [\"t1\"] }) { actionId } }",
            json!({}),
        )
        .await;
    assert_eq!(refused, "FORBIDDEN");
    let by_service = service
        .data(
            "mutation { recordAction(input: { actorId: \"cat\", descriptor: { statusPost: { text: \"x\" } }, to: [\"t1\"] }) { actionId } }",
            json!({}),
        )
        .await;
    let id = by_service["recordAction"]["actionId"]
        .as_str()
        .expect("an id")
        .to_owned();
    cat.wait_delivered(&id).await;
    assert_eq!(group_feed(&cat, "t1", 10).await, vec![id, public]);
    server.stop().await;
}

async fn a_group_feed_keeps_its_last_posts(backend: Backend) {
    let Some(server) = start(backend, 3).await else {
        return;
    };
    let service = server.service("acme");
    service.upsert_user("ann", "Ann").await;
    service.add_member("t1", "TEAM", "ann").await;
    let ann = server.client("acme", "ann");
    let mut posted = Vec::new();
    for i in 0..5 {
        posted.push(post(&ann, &format!("post {i}"), json!({ "to": ["t1"] })).await);
    }
    let newest: Vec<String> = posted.iter().rev().take(3).cloned().collect();
    assert_eq!(group_feed(&ann, "t1", 2).await, newest);
    server.stop().await;
}

/// An export carries no rings: an import rebuilds each group's feed from
/// the actions whose fan-out was done.
async fn an_import_rebuilds_group_feeds(backend: Backend) {
    let Some(server) = start(backend, 1_000).await else {
        return;
    };
    let service = server.service("acme");
    service.upsert_user("ann", "Ann").await;
    service.add_member("t1", "TEAM", "ann").await;
    let ann = server.client("acme", "ann");
    post(&ann, "to the team", json!({ "to": ["t1"] })).await;
    post(&ann, "team only", json!({ "scope": "TEAM" })).await;
    post(&ann, "elsewhere", json!({})).await;
    let source = server.server.metered.clone();
    let everything = FeedRange {
        older_than: None,
        newer_than: None,
        limit: 100,
        from_oldest: false,
    };
    let before = source
        .group_feed("acme", "t1", 1_000, everything)
        .await
        .unwrap();
    assert_eq!(before.len(), 2);
    let store: &dyn riverfeed::store::Store = source.as_ref();
    let records: Vec<riverfeed::store::Record> = store.export(None).try_collect().await.unwrap();
    let mut lines = Vec::new();
    archive_cmd::write_records(
        None,
        Box::pin(futures_util::stream::iter(records.into_iter().map(Ok))),
        &mut lines,
        &ProgressBar::hidden(),
    )
    .await
    .expect("written");
    let Some(target) = TestStore::open(Backend::Embedded).await else {
        return;
    };
    let options = archive_cmd::ImportOptions::new(2, 1_000);
    archive_cmd::import_lines(&*target.store, &lines[..], &options, &ProgressBar::hidden())
        .await
        .expect("imported");
    let after = target
        .store
        .group_feed("acme", "t1", 1_000, everything)
        .await
        .unwrap();
    assert_eq!(after, before);
    target.remove().await;
    server.stop().await;
}

crate::on_both_backends!(
    members_and_others_read_a_group_feed,
    a_group_feed_keeps_its_last_posts,
    an_import_rebuilds_group_feeds
);
