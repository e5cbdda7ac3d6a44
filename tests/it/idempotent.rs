//! Idempotent writes: `recordAction` under a `foreignId` records one action
//! however often, and however many at once, it is sent, and whether or not
//! the process that took it lived to answer; a request under an
//! `Idempotency-Key` runs once and its answer is given again.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use riverfeed::store::RecordStore;
use serde_json::{json, Value};

use crate::common::{first_error_code, free_port, Backend, Client, Stopped, TestServer, PATIENCE};
use crate::processes::Proc;

const T: &str = "acme";

const RECORD: &str = "mutation($input: RecordActionInput!) {
    recordAction(input: $input) { actionId created fanOut { state } }
}";

/// A status post by the client's user under `foreign`.
fn status(text: &str, foreign: &str) -> Value {
    json!({ "input": { "descriptor": { "statusPost": { "text": text } }, "foreignId": foreign } })
}

/// Records and answers `recordAction`'s `(actionId, created)`.
async fn record(client: &Client, variables: Value) -> (String, bool) {
    let data = client.data(RECORD, variables).await;
    let answer = &data["recordAction"];
    let id = answer["actionId"]
        .as_str()
        .expect("an action id")
        .to_owned();
    let created = answer["created"].as_bool().expect("created is answered");
    (id, created)
}

/// The ids of `actor`'s actions the client may see.
async fn actor_feed(client: &Client, actor: &str) -> Vec<String> {
    let data = client
        .data(
            "query($u: ID!) { actorFeed(userId: $u, first: 100) { edges { node { actionId } } } }",
            json!({ "u": actor }),
        )
        .await;
    ids(&data["actorFeed"])
}

fn ids(connection: &Value) -> Vec<String> {
    connection["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| e["node"]["actionId"].as_str().expect("an id").to_owned())
        .collect()
}

/// A retry after a timeout answers the action the first request recorded:
/// the same id, `created: false`, and nothing stored or delivered twice.
async fn a_retry_answers_the_first_action(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let (alice, bob) = (server.client(T, "alice"), server.client(T, "bob"));
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;

    let (first, created) = record(&bob, status("shipped it", "post-1")).await;
    assert!(created, "the first record creates");
    bob.wait_delivered(&first).await;

    let (again, created) = record(&bob, status("shipped it", "post-1")).await;
    assert_eq!(again, first, "a retry answers the first action");
    assert!(!created, "a retry creates nothing");
    // An action after the retry, delivered: the worker claims in the order
    // jobs were queued, so a fan-out the retry queued would have been
    // claimed before it. The outbox (`actorFeed`) reads stored actions
    // whatever the worker did.
    let after = bob.post_status("later", json!({})).await;
    bob.wait_delivered(&after).await;

    let (feed, _) = alice.feed_ids("(first: 10)").await;
    assert_eq!(feed, [after.clone(), first.clone()], "one item per action");
    assert_eq!(actor_feed(&alice, "bob").await, [after, first]);

    // One actor's foreign ids are its own: another actor's same id is a
    // new action.
    let (carols, created) = record(&server.client(T, "carol"), status("mine", "post-1")).await;
    assert!(created);
    assert_ne!(carols, again);
    server.stop().await;
}

/// Records racing under one foreign id make one action: one answer says
/// `created`, the others answer the same action.
async fn concurrent_records_make_one_action(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client(T, "bob");
    let answers = join_all((0..8).map(|_| record(&bob, status("launched", "launch-7")))).await;
    let created: Vec<&(String, bool)> = answers.iter().filter(|(_, c)| *c).collect();
    assert_eq!(created.len(), 1, "exactly one record creates: {answers:?}");
    let id = &created[0].0;
    assert!(answers.iter().all(|(a, _)| a == id), "{answers:?}");
    assert_eq!(actor_feed(&bob, "bob").await, std::slice::from_ref(id));
    server.stop().await;
}

/// Other content under a foreign id recorded before is `CONFLICT`, with a
/// message that names the id, and changes nothing.
async fn other_content_is_a_conflict(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let bob = server.client(T, "bob");
    let (first, _) = record(&bob, status("one text", "post-9")).await;

    let body = bob.post(RECORD, status("another text", "post-9")).await;
    assert_eq!(
        first_error_code(&body).as_deref(),
        Some("CONFLICT"),
        "{body:#}"
    );
    let message = body["errors"][0]["message"].as_str().expect("a message");
    assert!(
        message.contains("post-9") && message.contains(&first),
        "the message names the foreign id and its action: {message}"
    );
    // Other options are content too.
    let tagged = json!({ "input": {
        "descriptor": { "statusPost": { "text": "one text" } },
        "foreignId": "post-9",
        "tags": ["news"],
    } });
    assert_eq!(bob.error_code(RECORD, tagged).await, "CONFLICT");
    assert_eq!(actor_feed(&bob, "bob").await, [first]);
    server.stop().await;
}

crate::on_both_backends!(
    a_retry_answers_the_first_action,
    concurrent_records_make_one_action,
    other_content_is_a_conflict,
);

/// Two servers on one MongoDB, each with its own connections, as two
/// processes are: records racing through both make one action.
#[tokio::test]
async fn two_servers_on_one_database_make_one_action() {
    let Some(one) = TestServer::start(Backend::Mongo("two_servers_one_foreign_id")).await else {
        return;
    };
    let other = TestServer::start_on(Stopped {
        store: one.store.clone(),
        dir: None,
    })
    .await;
    let clients = [one.client(T, "bob"), other.client(T, "bob")];
    let answers =
        join_all((0..8).map(|i| record(&clients[i % 2], status("launched", "launch-8")))).await;
    let created: Vec<&(String, bool)> = answers.iter().filter(|(_, c)| *c).collect();
    assert_eq!(created.len(), 1, "exactly one record creates: {answers:?}");
    assert!(
        answers.iter().all(|(a, _)| *a == created[0].0),
        "{answers:?}"
    );
    other.stop_keeping_data().await;
    one.stop().await;
}

/// What one client of a burst got: the foreign ids answered, with their
/// actions, and the one whose answer the kill cut off, if any.
#[derive(Debug, Default)]
struct Burst {
    answered: Vec<(String, String)>,
    cut_off: Option<String>,
}

/// The process killed with records in flight: every record whose answer was
/// lost is sent again after the restart, and every foreign id sent names
/// exactly one action, answered or not.
#[tokio::test]
async fn records_cut_off_by_a_kill_are_one_action_each_when_retried() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    let mut server = Proc::start_on(free_port(), "serve", &store, &[]).await;
    let answered = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..4)
        .map(|task| {
            let bob = server.client("bob");
            let answered = answered.clone();
            tokio::spawn(async move {
                let mut burst = Burst::default();
                for n in 0..2_000 {
                    let foreign = format!("burst-{task}-{n}");
                    let sent = status(&foreign, &foreign);
                    let body = bob.try_post(RECORD, sent).await;
                    match body.and_then(|b| {
                        b["data"]["recordAction"]["actionId"]
                            .as_str()
                            .map(str::to_owned)
                    }) {
                        Some(id) => burst.answered.push((foreign, id)),
                        None => {
                            burst.cut_off = Some(foreign);
                            break;
                        }
                    }
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                burst
            })
        })
        .collect();
    let deadline = Instant::now() + PATIENCE;
    while answered.load(Ordering::Relaxed) < 40 {
        assert!(Instant::now() < deadline, "the burst never got going");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.kill().await;
    let mut bursts = Vec::new();
    for client in clients {
        bursts.push(client.await.expect("burst task"));
    }

    let server = Proc::start_on(free_port(), "serve", &store, &[]).await;
    let bob = server.client("bob");
    let mut expected = HashSet::new();
    for burst in &bursts {
        for (foreign, id) in &burst.answered {
            let again = record(&bob, status(foreign, foreign)).await;
            assert_eq!(again, (id.clone(), false), "{foreign} answers its action");
            expected.insert(id.clone());
        }
        if let Some(foreign) = &burst.cut_off {
            let (id, created) = record(&bob, status(foreign, foreign)).await;
            eprintln!("{foreign}, cut off: stored before the kill: {}", !created);
            expected.insert(id);
        }
    }
    let mut stored = Vec::new();
    let mut after = Value::Null;
    loop {
        let data = bob
            .data(
                "query($a: String) { actorFeed(userId: \"bob\", first: 100, after: $a) { edges { node { actionId } } pageInfo { hasNextPage endCursor } } }",
                json!({ "a": after }),
            )
            .await;
        stored.extend(ids(&data["actorFeed"]));
        if data["actorFeed"]["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = data["actorFeed"]["pageInfo"]["endCursor"].clone();
    }
    let unique: HashSet<String> = stored.iter().cloned().collect();
    assert_eq!(unique.len(), stored.len(), "no action twice");
    assert_eq!(unique, expected, "one action per foreign id sent");
}

/// A keyed `POST /graphql` as `user`, with `body` as it is sent: the
/// status, whether the answer is one given again, and the body.
async fn post_keyed(server: &TestServer, user: &str, key: &str, body: &str) -> (u16, bool, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/graphql", server.base))
        .header("content-type", "application/json")
        .header("x-riverfeed-tenant", T)
        .header("x-riverfeed-user", user)
        .header("idempotency-key", key)
        .body(body.to_owned())
        .send()
        .await
        .expect("answered");
    let status = response.status().as_u16();
    let replayed = response.headers().get("idempotent-replayed").is_some();
    let body = response.json().await.expect("JSON");
    (status, replayed, body)
}

/// A status post without a foreign id, as a request body.
fn keyed_status(text: &str) -> String {
    json!({
        "query": "mutation($t: String!) { recordAction(input: {descriptor: {statusPost: {text: $t}}}) { actionId } }",
        "variables": { "t": text },
    })
    .to_string()
}

/// A retry under the same `Idempotency-Key` gets the first answer again
/// and records nothing; the key is the caller's own.
async fn a_keyed_retry_gets_the_first_answer(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let body = keyed_status("once");
    let (status, replayed, first) = post_keyed(&server, "bob", "k-1", &body).await;
    assert_eq!((status, replayed), (200, false), "{first}");
    let id = first["data"]["recordAction"]["actionId"].clone();
    assert!(id.is_string(), "{first}");
    let (status, replayed, again) = post_keyed(&server, "bob", "k-1", &body).await;
    assert_eq!((status, replayed), (200, true));
    assert_eq!(again, first, "the same answer");
    let bob = server.client(T, "bob");
    assert_eq!(actor_feed(&bob, "bob").await.len(), 1, "one action");

    let (_, replayed, carols) = post_keyed(&server, "carol", "k-1", &body).await;
    assert!(!replayed, "another caller's key is its own");
    assert_ne!(carols["data"]["recordAction"]["actionId"], id);
    server.stop().await;
}

/// A key sent again with another body is 422, and runs nothing.
async fn a_key_with_another_body_is_refused(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let (status, _, _) = post_keyed(&server, "bob", "k-2", &keyed_status("one")).await;
    assert_eq!(status, 200);
    let (status, _, body) = post_keyed(&server, "bob", "k-2", &keyed_status("two")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        first_error_code(&body).as_deref(),
        Some("IDEMPOTENCY_KEY_REUSED")
    );
    let bob = server.client(T, "bob");
    assert_eq!(actor_feed(&bob, "bob").await.len(), 1);
    server.stop().await;
}

/// A retry while the request runs (here, in another process that holds
/// the key) is 409; requests racing under one key record one action.
async fn a_retry_while_the_request_runs_is_refused(backend: Backend) {
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let body = keyed_status("running elsewhere");
    let digest = ring::digest::digest(&ring::digest::SHA256, body.as_bytes());
    let digest: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let far = 8_000_000_000_000_i64;
    let running = json!({ "body": digest, "expires": far, "running_until": far });
    let held = server
        .server
        .metered
        .put_record(
            riverfeed::store::RecordKind::IdempotencyKey,
            T,
            "bob\u{1f}k-3",
            Some(running.to_string().into_bytes()),
            Some(0),
        )
        .await
        .expect("written");
    assert!(held);
    let (status, _, refused) = post_keyed(&server, "bob", "k-3", &body).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(
        first_error_code(&refused).as_deref(),
        Some("IDEMPOTENCY_KEY_IN_USE")
    );

    let body = keyed_status("racing");
    let answers = join_all((0..8).map(|_| post_keyed(&server, "bob", "k-4", &body))).await;
    let ok: Vec<&Value> = answers
        .iter()
        .filter(|a| a.0 == 200)
        .map(|a| &a.2)
        .collect();
    assert!(!ok.is_empty(), "{answers:?}");
    assert!(ok.iter().all(|a| *a == ok[0]), "one answer: {answers:?}");
    for (status, _, answer) in &answers {
        if *status != 200 {
            assert_eq!(*status, 409, "{answer}");
        }
    }
    let bob = server.client(T, "bob");
    assert_eq!(
        actor_feed(&bob, "bob").await.len(),
        1,
        "one action recorded"
    );
    server.stop().await;
}

/// A key held by a process that no longer runs is taken over at once, not
/// after the minute a claim runs: on the embedded store any process other
/// than this one is an earlier boot of it, dead; on MongoDB a process is
/// dead once its liveness record has lapsed, and running while it holds.
async fn a_key_held_by_a_dead_process_is_taken_over_at_once(backend: Backend) {
    use riverfeed::store::RecordKind;
    let mongo = matches!(backend, Backend::Mongo(_));
    let Some(server) = TestServer::start(backend).await else {
        return;
    };
    let store = &server.server.metered;
    let body = keyed_status("taken over");
    let digest = ring::digest::digest(&ring::digest::SHA256, body.as_bytes());
    let digest: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let far = 8_000_000_000_000_i64;
    let holder = "6b0c0000feedfacefeedface";
    let running = json!({
        "body": digest, "expires": far, "running_until": far, "holder": holder,
    });
    let held = store
        .put_record(
            RecordKind::IdempotencyKey,
            T,
            "bob\u{1f}k-dead",
            Some(running.to_string().into_bytes()),
            Some(0),
        )
        .await
        .expect("written");
    assert!(held);
    let process = format!("process\u{1f}{holder}");
    let beat = |until: i64| Some(json!({ "until": until }).to_string().into_bytes());
    if mongo {
        store
            .put_record(RecordKind::Meta, "", &process, beat(far), None)
            .await
            .expect("written");
        let (status, _, refused) = post_keyed(&server, "bob", "k-dead", &body).await;
        assert_eq!(status, 409, "its process runs: {refused}");
        store
            .put_record(RecordKind::Meta, "", &process, beat(0), None)
            .await
            .expect("written");
    }
    let (status, _, answer) = post_keyed(&server, "bob", "k-dead", &body).await;
    assert_eq!(status, 200, "its process is dead: {answer}");
    assert!(
        answer["data"]["recordAction"]["actionId"].is_string(),
        "{answer}"
    );
    server.stop().await;
}

mod keyed {
    use super::*;

    crate::on_both_backends!(
        a_key_held_by_a_dead_process_is_taken_over_at_once,
        a_keyed_retry_gets_the_first_answer,
        a_key_with_another_body_is_refused,
        a_retry_while_the_request_runs_is_refused,
    );
}
