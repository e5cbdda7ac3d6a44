//! A worker killed in the middle of a fan-out to 50,000 readers: the
//! other worker takes its job over and every reader gets the item once.

use super::*;

/// Readers of the big fan-out.
const READERS: usize = 50_000;

#[tokio::test]
async fn a_worker_killed_in_a_big_fan_out_is_taken_over_and_every_reader_gets_one_item() {
    // A wire server of its own where there is one to start (tests/run):
    // this test's 50,000 writes then run beside the other tests', on the
    // other core.
    let Some(server) = Mongo::start("procs_takeover").await else {
        return;
    };
    let uri = server.uri.clone();
    // The followers go straight into a fresh database's `edges`, as plain
    // inserts before the store indexes them (an import's upserts take
    // minutes for this many on the test server).
    let started = Instant::now();
    let mongo = mongodb::Client::with_uri_str(&uri).await.expect("client");
    let db = mongo.database(uri.rsplit_once('/').unwrap().1.split('?').next().unwrap());
    let edges = db.collection::<mongodb::bson::Document>("edges");
    for chunk in (0..READERS).collect::<Vec<_>>().chunks(10_000) {
        let docs = chunk.iter().map(|i| {
            mongodb::bson::doc! {
                "tenant": T, "kind": "follows", "from": format!("reader-{i:05}"), "to": "bob",
            }
        });
        edges.insert_many(docs).await.expect("insert");
    }
    drop(riverfeed::store::open(&uri).await.expect("store"));
    eprintln!("{READERS} followers imported after {:?}", started.elapsed());
    // Small batches and a short lease, so the kill lands mid-way and the
    // takeover comes soon.
    let flags = [
        "--feed-model",
        "push",
        "--fanout-batch",
        "1000",
        "--fanout-lease-secs",
        "15",
    ];
    let api = Proc::start("serve", &uri, &["--no-worker", "--feed-model", "push"]).await;
    let mut workers = vec![
        Proc::start("worker", &uri, &flags).await,
        Proc::start("worker", &uri, &flags).await,
    ];
    let id = api
        .client("bob")
        .post_status("to everyone", json!({}))
        .await;
    let action_id = ObjectId::parse_str(&id).expect("id");

    let items = db.collection::<mongodb::bson::Document>("feed_items");
    let actions = db.collection::<mongodb::bson::Document>("actions");
    let jobs = db.collection::<mongodb::bson::Document>("jobs");
    // Wait for the fan-out to be part-way, then kill the worker holding it.
    let deadline = Instant::now() + PATIENCE * 8;
    let (holder, delivered) = loop {
        let delivered = items
            .count_documents(mongodb::bson::doc! { "actionId": action_id })
            .await
            .expect("count");
        let action = actions
            .find_one(mongodb::bson::doc! { "_id": action_id })
            .await
            .expect("action")
            .expect("stored");
        let fan_out = action.get_document("fanOut").expect("fanOut");
        if delivered > 0 {
            let job = jobs
                .find_one(mongodb::bson::doc! { "kind": "fanout", "key": action_id.to_hex() })
                .await
                .expect("job")
                .expect("the fan-out's job");
            let worker = job.get_str("worker").expect("held by a worker");
            let holder = workers
                .iter()
                .position(|w| worker.starts_with(&format!("worker-{}-", w.pid())))
                .expect("held by one of ours");
            break (holder, delivered);
        }
        assert_ne!(
            fan_out.get_str("state"),
            Ok("DONE"),
            "too fast to interrupt"
        );
        assert!(Instant::now() < deadline, "the fan-out never began");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    workers[holder].kill().await;
    assert!(
        delivered < READERS as u64,
        "killed part-way: {delivered} of {READERS} written"
    );
    let survivor = &workers[1 - holder];

    let bob = api.client("bob");
    let deadline = Instant::now() + PATIENCE * 20;
    loop {
        let data = bob
            .data(
                "query($id: ID!) { action(actionId: $id) { fanOut { state } } }",
                json!({ "id": id }),
            )
            .await;
        if data["action"]["fanOut"]["state"] == "DONE" {
            break;
        }
        assert!(Instant::now() < deadline, "never finished: {data}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        survivor
            .metric("riverfeed_fanout_lease_takeovers_total")
            .await
            >= 1.0,
        "the survivor says it took over"
    );
    // Every reader has exactly one item of it.
    let mut per_owner = items
        .aggregate([
            mongodb::bson::doc! { "$match": { "actionId": action_id } },
            mongodb::bson::doc! { "$group": { "_id": "$owner", "n": { "$sum": 1 } } },
        ])
        .await
        .expect("aggregate");
    let mut owners: HashMap<String, i64> = HashMap::new();
    use futures_util::StreamExt;
    while let Some(doc) = per_owner.next().await {
        let doc = doc.expect("group");
        let n = doc
            .get_i32("n")
            .map(i64::from)
            .or_else(|_| doc.get_i64("n"));
        owners.insert(doc.get_str("_id").expect("owner").to_owned(), n.expect("n"));
    }
    let twice: Vec<_> = owners.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        twice.is_empty(),
        "readers with other than one item: {twice:?}"
    );
    for i in (0..READERS).step_by(997) {
        assert!(
            owners.contains_key(&format!("reader-{i:05}")),
            "reader-{i:05}"
        );
    }
    assert!(owners.len() >= READERS, "{} readers reached", owners.len());
    eprintln!(
        "worker killed after {delivered} of {READERS} items; the other finished with {} readers",
        owners.len()
    );
    drop(workers);
    server.stop().await;
}
