//! Copies of actions in timeline entries (MongoDB, `--embed-actions`): a
//! page that shows no more than the copies hold is read in one round trip,
//! and the copies stay true through renames, hides, deletes, scope changes
//! and expiry, on every layout.

use std::sync::Arc;

use riverfeed::clock::ManualClock;
use riverfeed::server::ServeOptions;
use riverfeed::store::mongo::{MongoSettings, TimelineLayout};
use riverfeed::store::StoreSettings;
use riverfeed::timeline::{FeedModel, FeedModelKind};
use serde_json::{json, Value};

use crate::common::{iso, store_url, Backend, Client, Stopped, TestServer, CLOCK_START};

const START: i64 = CLOCK_START;

const PAGE: &str = "{ feed(first: 20) { edges { node { action { actionId
    descriptor { ... on StatusPost { text } ... on NewApplicant { applicantName } }
    actor { name } } } } } }";

async fn start(
    test: &'static str,
    layout: TimelineLayout,
    embed_actions: bool,
) -> Option<(TestServer, Arc<ManualClock>)> {
    start_under(test, layout, embed_actions, FeedModelKind::Push).await
}

async fn start_under(
    test: &'static str,
    layout: TimelineLayout,
    embed_actions: bool,
    model: FeedModelKind,
) -> Option<(TestServer, Arc<ManualClock>)> {
    let (store, dir) = store_url(Backend::Mongo(test))?;
    let clock = Arc::new(ManualClock::new(START));
    let shared = clock.clone();
    let server = TestServer::start_with(Stopped { store, dir }, |url| ServeOptions {
        clock: shared,
        model: FeedModel::of(model),
        store_settings: StoreSettings {
            mongo: MongoSettings {
                layout: Some(layout),
                bucket_size: 3,
                embed_actions,
                ..MongoSettings::default()
            },
            ..StoreSettings::default()
        },
        ..ServeOptions::new(url)
    })
    .await;
    Some((server, clock))
}

/// Store calls and MongoDB `find`s one request makes.
struct Cost {
    loads: u64,
    users: u64,
    finds: u64,
}

async fn counters(server: &TestServer) -> [u64; 3] {
    [
        server.store_calls("get_actions").await,
        server.store_calls("get_users").await,
        server
            .metric("riverfeed_mongodb_commands_total{command=\"find\"}")
            .await,
    ]
}

/// The `find`s counted are the process's: a worker that polls meanwhile
/// (for jobs, expired actions or idle rivers) adds its own, so the read is
/// measured again until none of its polls fell inside it.
async fn read(server: &TestServer, reader: &Client, query: &str) -> (Value, Cost) {
    async fn polls(server: &TestServer) -> u64 {
        let mut n = 0;
        for op in ["claim", "expired", "idle_rivers"] {
            n += server.store_calls(op).await;
        }
        n
    }
    for _ in 0..20 {
        let polled = polls(server).await;
        let before = counters(server).await;
        let data = reader.data(query, json!({})).await;
        let after = counters(server).await;
        if polls(server).await != polled {
            continue;
        }
        let cost = Cost {
            loads: after[0] - before[0],
            users: after[1] - before[1],
            finds: after[2] - before[2],
        };
        return (data, cost);
    }
    panic!("a worker's poll fell inside each of 20 reads");
}

/// What a page shows: each action's text (or applicant) and actor's name.
fn shown(data: &Value) -> Vec<(String, String)> {
    data["feed"]["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            let action = &e["node"]["action"];
            let d = &action["descriptor"];
            let what = d["text"].as_str().or(d["applicantName"].as_str());
            (
                what.unwrap_or_default().to_owned(),
                action["actor"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

async fn post(ann: &Client, text: &str, extra: Value) -> String {
    let id = ann.post_status(text, extra).await;
    ann.wait_delivered(&id).await;
    id
}

async fn one_round_trip(layout: TimelineLayout) {
    let test = match layout {
        TimelineLayout::Items => "embed_trip_items",
        TimelineLayout::TimeBuckets => "embed_trip_time",
        TimelineLayout::SizedBuckets => "embed_trip_sized",
    };
    for embed in [true, false] {
        let Some((server, _)) = start(test, layout, embed).await else {
            return;
        };
        let ann = server.client("acme", "ann");
        let bob = server.client("acme", "bob");
        ann.upsert_user("ann", "Ann").await;
        bob.follow("ann").await;
        for i in 0..5 {
            post(&ann, &format!("post {i}"), json!({})).await;
        }
        let (data, cost) = read(&server, &bob, PAGE).await;
        assert_eq!(shown(&data).len(), 5, "{layout}");
        assert_eq!(shown(&data)[0], ("post 4".into(), "Ann".into()));
        if embed {
            assert_eq!(
                (cost.loads, cost.users, cost.finds),
                (0, 0, 2),
                "{layout}: the page's entries and the reader's pending unfollows, side by side"
            );
            // Counts are not copied: a page that shows them loads them.
            let (_, cost) = read(
                &server,
                &bob,
                "{ feed(first: 20) { edges { node { action { likeCount } } } } }",
            )
            .await;
            assert_eq!(cost.loads, 1, "{layout}");
        } else {
            assert_eq!(
                (cost.loads, cost.users, cost.finds),
                (1, 1, 4),
                "{layout}: entries and unfollows, then actions, then actors"
            );
        }
        server.stop().await;
    }
}

#[tokio::test]
async fn a_page_from_copies_is_one_round_trip_on_items() {
    one_round_trip(TimelineLayout::Items).await;
}

#[tokio::test]
async fn a_page_from_copies_is_one_round_trip_on_time_buckets() {
    one_round_trip(TimelineLayout::TimeBuckets).await;
}

#[tokio::test]
async fn a_page_from_copies_is_one_round_trip_on_sized_buckets() {
    one_round_trip(TimelineLayout::SizedBuckets).await;
}

/// Under rivers, a reader's river is built from their sources after their
/// first read, with copies in its entries as a fan-out writes them: the
/// next page loads no actions and no actors.
#[tokio::test]
async fn a_river_built_at_a_read_holds_copies() {
    let Some((server, _)) = start_under(
        "embed_river_sized",
        TimelineLayout::SizedBuckets,
        true,
        FeedModelKind::Rivers,
    )
    .await
    else {
        return;
    };
    let ann = server.client("acme", "ann");
    let bob = server.client("acme", "bob");
    ann.upsert_user("ann", "Ann").await;
    bob.follow("ann").await;
    for i in 0..5 {
        post(&ann, &format!("post {i}"), json!({})).await;
    }
    // The first read asks for bob's river, built after it.
    let (data, _) = read(&server, &bob, PAGE).await;
    assert_eq!(shown(&data).len(), 5);
    server.rivers_settled().await;
    let (data, cost) = read(&server, &bob, PAGE).await;
    assert_eq!(shown(&data).len(), 5);
    assert_eq!(shown(&data)[0], ("post 4".into(), "Ann".into()));
    assert_eq!(
        (cost.loads, cost.users),
        (0, 0),
        "a page of the river, from its copies"
    );
    server.stop().await;
}

async fn copies_stay_true(layout: TimelineLayout) {
    let test = match layout {
        TimelineLayout::Items => "embed_true_items",
        TimelineLayout::TimeBuckets => "embed_true_time",
        TimelineLayout::SizedBuckets => "embed_true_sized",
    };
    let Some((server, clock)) = start(test, layout, true).await else {
        return;
    };
    let ann = server.client("acme", "ann");
    let bob = server.client("acme", "bob");
    ann.upsert_user("ann", "Ann").await;
    server
        .client("acme", "carol")
        .upsert_user("carol", "Carol")
        .await;
    bob.follow("ann").await;
    let story = post(&ann, "story", json!({ "expiresAt": iso(START + 60_000) })).await;
    let hidden = post(&ann, "to hide", json!({})).await;
    let narrowed = post(&ann, "to narrow", json!({})).await;
    let deleted = post(&ann, "to delete", json!({})).await;
    let applied = ann
        .data(
            "mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId } }",
            json!({ "input": {
                "descriptor": { "newApplicant": {
                    "applicantId": "app-mary", "applicantName": "Mary Fanning",
                    "positionId": "pos-1", "positionName": "Engineer" } },
                "refIds": ["app-mary"] } }),
        )
        .await["recordAction"]["actionId"]
        .as_str()
        .expect("an id")
        .to_owned();
    ann.wait_delivered(&applied).await;
    let (data, _) = read(&server, &bob, PAGE).await;
    assert_eq!(shown(&data).len(), 5, "{layout}: {data}");

    // Renames: the actor's name, and a name a descriptor copies.
    ann.upsert_user("ann", "Ann Lee").await;
    server
        .service("acme")
        .data(
            "mutation { renameRef(refId: \"app-mary\", name: \"Mary Fanning-Smith\") }",
            json!({}),
        )
        .await;
    // Hidden, narrowed to another reader, deleted.
    ann.data(
        "mutation($id: ID!) { hideAction(actionId: $id) { id } }",
        json!({ "id": hidden }),
    )
    .await;
    ann.data(
        "mutation($id: ID!) { setActionScope(actionId: $id, scope: RESTRICTED, readers: [\"carol\"]) { id } }",
        json!({ "id": narrowed }),
    )
    .await;
    // Its fan-out under the new scope done: the worker's reads are not the
    // page's.
    ann.wait_delivered(&narrowed).await;
    ann.data(
        "mutation($id: ID!) { deleteAction(actionId: $id) }",
        json!({ "id": deleted }),
    )
    .await;
    let expected = |with_story: bool| {
        let mut page = vec![("Mary Fanning-Smith".to_owned(), "Ann Lee".to_owned())];
        if with_story {
            page.push(("story".into(), "Ann Lee".into()));
        }
        page
    };
    let (data, cost) = read(&server, &bob, PAGE).await;
    assert_eq!(shown(&data), expected(true), "{layout}");
    assert_eq!(
        (cost.loads, cost.users),
        (0, 0),
        "{layout}: still from copies"
    );
    // The story expires: gone at that moment (its copy says when; the
    // worker deleting it meanwhile takes the copy out first, and then the
    // page loads the action, which says the same).
    clock.advance(60_000);
    let (data, _) = read(&server, &bob, PAGE).await;
    assert_eq!(shown(&data), expected(false), "{layout}: {story} expired");
    server.stop().await;
}

#[tokio::test]
async fn copies_stay_true_on_items() {
    copies_stay_true(TimelineLayout::Items).await;
}

#[tokio::test]
async fn copies_stay_true_on_time_buckets() {
    copies_stay_true(TimelineLayout::TimeBuckets).await;
}

#[tokio::test]
async fn copies_stay_true_on_sized_buckets() {
    copies_stay_true(TimelineLayout::SizedBuckets).await;
}
