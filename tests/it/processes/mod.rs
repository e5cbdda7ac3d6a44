//! Many processes on one store, and processes killed: real `riverfeed serve
//! --no-worker` and `riverfeed worker` children sharing a MongoDB, killed
//! with SIGKILL in the middle of their work, and the embedded store's one
//! process killed and started again.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use riverfeed::model::ObjectId;
use riverfeed::store::{EdgeRecordKind, Record};
use serde_json::{json, Value};
use tokio::process::{Child, Command};

use crate::common::{
    drop_database, free_port, metric_at, mongodb_database_uri, mongodb_uri, Client, OwnMongo,
    WsClient, PATIENCE,
};

mod big_fan_out;
mod notices;

const T: &str = "acme";

/// One `riverfeed` child process.
pub(crate) struct Proc {
    child: Child,
    base: String,
    port: u16,
    log: PathBuf,
}

impl Proc {
    /// Starts `riverfeed <command> --store <store> <extra…>` and waits
    /// until it is ready (its `/readyz`).
    async fn start(command: &str, store: &str, extra: &[&str]) -> Proc {
        let port = free_port();
        Self::start_on(port, command, store, extra).await
    }

    pub(crate) async fn start_on(port: u16, command: &str, store: &str, extra: &[&str]) -> Proc {
        Self::start_with(port, command, store, extra, &[]).await
    }

    /// As [`Proc::start_on`], with `env` set in the child's environment.
    pub(crate) async fn start_with(
        port: u16,
        command: &str,
        store: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        let log = std::env::temp_dir().join(format!(
            "riverfeed-{command}-{port}-{}.log",
            ObjectId::new().to_hex()
        ));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_riverfeed"))
            .arg(command)
            .args(["--listen", &format!("127.0.0.1:{port}"), "--store", store])
            .args(extra)
            .env("RUST_LOG", "info")
            .env("RUST_BACKTRACE", "0")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .expect("riverfeed starts");
        let mut proc = Proc {
            child,
            base: format!("http://127.0.0.1:{port}"),
            port,
            log,
        };
        proc.wait_ready().await;
        proc
    }

    /// Waits for `/readyz`: `/healthz` answers as soon as the process
    /// listens, `/readyz` only once its store is usable.
    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + PATIENCE * 2;
        loop {
            if let Ok(response) = reqwest::get(format!("{}/readyz", self.base)).await {
                if response.status() == 200 {
                    return;
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited with {status}: {}", self.base, self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "{} never answered /readyz: {}",
                self.base,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// SIGKILL: the process gets no chance to finish anything.
    pub(crate) async fn kill(&mut self) {
        self.child.start_kill().expect("kill");
        let _ = self.child.wait().await;
    }

    /// Waits until the process has ended by itself.
    pub(crate) async fn exited(&mut self) {
        let waited = tokio::time::timeout(PATIENCE, self.child.wait()).await;
        assert!(waited.is_ok(), "{} never ended", self.base);
    }

    /// `http://127.0.0.1:<port>`.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    pub(crate) fn client(&self, user: &str) -> Client {
        Client::at(&self.base, Some((T, user, None)))
    }

    async fn ws(&self, user: &str) -> WsClient {
        let url = format!("ws://127.0.0.1:{}/graphql/ws", self.port);
        WsClient::as_user(&url, T, user).await
    }

    /// One sample of `/metrics`.
    async fn metric(&self, name: &str) -> f64 {
        metric_at(&self.base, name).await
    }

    /// Waits until this process holds `n` live topics.
    async fn wait_live_topics(&self, n: f64) {
        let deadline = Instant::now() + PATIENCE;
        while self.metric("riverfeed_live_topics").await < n {
            assert!(Instant::now() < deadline, "never {n} live topics");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Sends `signal` (`-STOP`, `-CONT`) to a child process.
async fn signal(proc: &Proc, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &proc.pid().to_string()])
        .status()
        .await
        .expect("kill runs");
    assert!(status.success());
}

/// A fresh MongoDB database for a test, dropped by [`drop_db`].
pub(crate) fn database(test: &str) -> Option<String> {
    Some(mongodb_database_uri(&mongodb_uri()?, test))
}

/// A database for a test that kills processes or loads the server: on a
/// MongoDB wire server of the test's own (SecantusDB, started for it), or
/// on the shared one where no binary is at hand (a real mongod's
/// `MONGODB_URI`). A process killed inside a transaction leaves it open,
/// and the wire server ends it only when its registry is next used, which
/// the clients waiting on the transaction's locks never do: on a server of
/// its own a test can end every session after a kill (`killAllSessions`),
/// as mongod would a minute later, and no other test's sessions end with
/// them.
pub(crate) struct Mongo {
    own: Option<OwnMongo>,
    pub uri: String,
}

impl Mongo {
    /// `None` where there is no MongoDB to test against.
    pub(crate) async fn start(name: &str) -> Option<Self> {
        let mut own = OwnMongo::new();
        let uri = match own.as_mut() {
            Some(own) => {
                own.start().await;
                own.uri_for(name)
            }
            None => {
                let uri = database(name)?;
                drop_db(&uri).await;
                uri
            }
        };
        Some(Self { own, uri })
    }

    /// Ends the transactions a killed process left open, on a server of
    /// the test's own (mongod ends them itself).
    pub(crate) async fn end_abandoned(&self) {
        if self.own.is_some() {
            let backend = riverfeed::bench::history::Backend::Mongo(self.uri.clone());
            riverfeed::bench::history::end_abandoned_transactions(&backend).await;
        }
    }

    /// Stops a server of the test's own; drops the database of a shared one.
    pub(crate) async fn stop(mut self) {
        match self.own.as_mut() {
            Some(own) => own.stop().await,
            None => drop_db(&self.uri).await,
        }
    }
}

pub(crate) async fn drop_db(uri: &str) {
    let client = mongodb::Client::with_uri_str(uri).await.expect("client");
    let name = uri
        .rsplit_once('/')
        .map(|(_, rest)| rest.split('?').next().unwrap_or(rest))
        .expect("a database in the URI");
    drop_database(&client.database(name)).await;
}

/// The feed events a subscription delivered, until `want` action ids were
/// added (or bumped); every event kept, in order.
async fn events_until(ws: &mut WsClient, want: &[&str]) -> Vec<Value> {
    let mut events = Vec::new();
    let mut missing: HashSet<&str> = want.iter().copied().collect();
    while !missing.is_empty() {
        let payload = ws.next_payload().await;
        assert!(payload["errors"].is_null(), "{payload}");
        if let Some(event) = payload["data"]["feedEvents"].as_object() {
            if let Some(id) = event["item"]["actionId"].as_str() {
                missing.remove(id);
            }
        }
        events.push(payload);
    }
    events
}

fn feed_event_ids(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["data"]["feedEvents"]["item"]["actionId"].as_str())
        .map(str::to_owned)
        .collect()
}

const FEED_EVENTS_WITH_CURSOR: &str =
    "subscription($after: String) { feedEvents(after: $after) { kind resumeCursor item { actionId } } }";

async fn subscribe_feed(ws: &mut WsClient, id: &str, after: Option<&str>) {
    ws.subscribe_with(id, FEED_EVENTS_WITH_CURSOR, json!({ "after": after }))
        .await;
}

async fn two_apis_and_two_workers(model: &str) {
    let Some(uri) = database(&format!("procs_2x2_{model}")) else {
        return;
    };
    let private = "--webhooks-allow-private";
    let flags = ["--feed-model", model, private];
    let api = ["--no-worker", "--feed-model", model, private];
    let a = Proc::start("serve", &uri, &api).await;
    let b = Proc::start("serve", &uri, &api).await;
    let _w1 = Proc::start("worker", &uri, &flags).await;
    let _w2 = Proc::start("worker", &uri, &flags).await;

    // A webhook registered through A: the workers tell and send its events.
    let receiver = crate::webhooks::Receiver::start(None).await;
    Client::at(&a.base, Some((T, "app-backend", Some("service"))))
        .data(
            "mutation($url: String!) { registerWebhook(url: $url, events: [ACTION_RECORDED, COMMENT_ADDED]) { secret } }",
            json!({ "url": receiver.url }),
        )
        .await;

    let bob = a.client("bob");
    bob.upsert_user("bob", "Bob").await;
    a.client("alice").follow("bob").await;

    // alice listens on B; bob writes through A.
    let mut alice = b.ws("alice").await;
    subscribe_feed(&mut alice, "feed", None).await;
    alice
        .subscribe_with(
            "slice",
            "subscription { sliceEvents(refId: \"pos-1\") { action { actionId } } }",
            json!({}),
        )
        .await;
    b.wait_live_topics(2.0).await;

    let one = bob.post_status("one", json!({ "refIds": ["pos-1"] })).await;
    // Both the feed event (fanned out by a worker) and the slice event
    // (published by A) cross to B.
    let mut feed = Vec::new();
    let mut sliced = Vec::new();
    while feed.is_empty() || sliced.is_empty() {
        let message = alice.next().await.expect("an event");
        assert_eq!(message["type"], "next", "{message}");
        let payload = &message["payload"];
        match message["id"].as_str() {
            Some("feed") => feed.push(payload["data"]["feedEvents"].clone()),
            Some("slice") => sliced.push(payload["data"]["sliceEvents"].clone()),
            other => panic!("unexpected subscription {other:?}: {message}"),
        }
    }
    assert_eq!(feed[0]["kind"], "ADDED");
    assert_eq!(feed[0]["item"]["actionId"], one);
    assert_eq!(sliced[0]["action"]["actionId"], one);

    // A comment through A reaches an actionEvents subscriber on B.
    let mut carol = b.ws("carol").await;
    carol
        .subscribe_with(
            "reactions",
            "subscription($id: ID!) { actionEvents(actionId: $id) { kind comment { text } } }",
            json!({ "id": one }),
        )
        .await;
    b.wait_live_topics(3.0).await;
    a.client("carol")
        .data(
            "mutation($id: ID!) { comment(actionId: $id, text: \"nice\") { id } }",
            json!({ "id": one }),
        )
        .await;
    let reaction = carol.next_payload().await;
    assert_eq!(
        reaction["data"]["actionEvents"],
        json!({ "kind": "COMMENTED", "comment": { "text": "nice" } }),
        "{reaction}"
    );

    // The next feed event is the next action: `one` was not heard twice
    // (two workers, two API processes, and a bump that raises nothing for
    // alice, who neither commented nor was assigned).
    let two = bob.post_status("two", json!({})).await;
    let events = events_until(&mut alice, &[&two]).await;
    let ids = feed_event_ids(&events);
    assert_eq!(
        ids,
        std::slice::from_ref(&two),
        "no duplicate of one: {events:?}"
    );

    // Hidden through A: alice, on B, is told it left her feed.
    bob.data(
        "mutation($id: ID!) { hideAction(actionId: $id) { id } }",
        json!({ "id": two }),
    )
    .await;
    let removed = alice.next_payload().await;
    let event = &removed["data"]["feedEvents"];
    assert_eq!(event["kind"], "REMOVED", "{removed}");
    assert_eq!(event["item"]["actionId"], two.as_str());

    // Two workers, each event sent once: both actions recorded, the comment.
    let told = |got: &[crate::webhooks::Received]| {
        let mut told: Vec<(String, String)> = got
            .iter()
            .map(|r| {
                (
                    r.body["type"].as_str().unwrap_or_default().to_owned(),
                    r.id.clone(),
                )
            })
            .collect();
        told.sort();
        told
    };
    let got = receiver.wait("three events", |got| got.len() >= 3).await;
    let told = told(&got);
    let kinds: Vec<&str> = told.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["action.recorded", "action.recorded", "comment.added"],
        "{told:?}"
    );
    drop_db(&uri).await;
}

#[tokio::test]
async fn a_subscriber_on_one_api_hears_what_another_recorded_under_push() {
    two_apis_and_two_workers("push").await;
}

#[tokio::test]
async fn a_subscriber_on_one_api_hears_what_another_recorded_under_rivers() {
    two_apis_and_two_workers("rivers").await;
}

/// Notifications across processes: a like through one API process is
/// written by a worker process, and both of the owner's pages, one on each
/// API process, hear of it; a read through one lowers the count on the other.
#[tokio::test]
async fn notifications_reach_every_page_of_their_owner_across_processes() {
    let Some(uri) = database("procs_notices") else {
        return;
    };
    let a = Proc::start("serve", &uri, &["--no-worker"]).await;
    let b = Proc::start("serve", &uri, &["--no-worker"]).await;
    let _worker = Proc::start("worker", &uri, &[]).await;
    let mary = a.client("mary");
    let action = mary.post_status("hello", json!({})).await;
    mary.wait_delivered(&action).await;

    const EVENTS: &str =
        "subscription { notificationEvents { kind groupId unreadCount group { reason } } }";
    let mut pages = vec![a.ws("mary").await, b.ws("mary").await];
    for page in &mut pages {
        page.subscribe("n", EVENTS).await;
        let counts = page.next_payload().await;
        assert_eq!(
            counts["data"]["notificationEvents"]["kind"], "COUNTS",
            "{counts}"
        );
    }
    a.wait_live_topics(1.0).await;
    b.wait_live_topics(1.0).await;

    b.client("rita")
        .data(
            "mutation($id: ID!) { like(actionId: $id) { actionId } }",
            json!({ "id": action }),
        )
        .await;
    let mut group = Value::Null;
    for page in &mut pages {
        let added = page.next_payload().await["data"]["notificationEvents"].clone();
        assert_eq!(added["kind"], "ADDED", "{added}");
        assert_eq!(added["group"]["reason"], "LIKE");
        assert_eq!(added["unreadCount"], 1);
        group = added["groupId"].clone();
    }
    mary.data(
        "mutation($ids: [ID!]!) { markRead(ids: $ids) { unreadCount } }",
        json!({ "ids": [group] }),
    )
    .await;
    let read = pages[1].next_payload().await["data"]["notificationEvents"].clone();
    assert_eq!(read["kind"], "UPDATED", "{read}");
    assert_eq!(
        read["unreadCount"], 0,
        "the other process's page hears the read"
    );
    drop_db(&uri).await;
}

/// No process is given `--cursor-key`: B opens A's resume cursors with the
/// key the deployment keeps in its database.
#[tokio::test]
async fn clients_of_a_killed_api_resume_on_the_other_with_no_gap_and_no_repeat() {
    let Some(uri) = database("procs_api_killed") else {
        return;
    };
    let api = ["--no-worker"];
    let mut a = Proc::start("serve", &uri, &api).await;
    let b = Proc::start("serve", &uri, &api).await;
    let _w = Proc::start("worker", &uri, &[]).await;
    let bob = b.client("bob");
    bob.upsert_user("bob", "Bob").await;
    let readers = ["alice", "dave"];
    for reader in readers {
        b.client(reader).follow("bob").await;
    }
    let mut sockets = Vec::new();
    for reader in readers {
        let mut ws = a.ws(reader).await;
        subscribe_feed(&mut ws, "feed", None).await;
        sockets.push(ws);
    }
    a.wait_live_topics(2.0).await;
    let mut posted = Vec::new();
    for text in ["one", "two"] {
        posted.push(bob.post_status(text, json!({})).await);
    }
    // Each client keeps the cursor of the last event it saw.
    let mut cursors = Vec::new();
    for ws in &mut sockets {
        let events = events_until(ws, &[&posted[0], &posted[1]]).await;
        assert_eq!(feed_event_ids(&events), posted);
        let last = events.last().unwrap()["data"]["feedEvents"]["resumeCursor"]
            .as_str()
            .expect("resume cursor")
            .to_owned();
        cursors.push(last);
    }
    a.kill().await;
    // While the clients are away, more happens (through B).
    let mut missed = Vec::new();
    for text in ["three", "four"] {
        missed.push(bob.post_status(text, json!({})).await);
    }
    for id in &missed {
        bob.wait_delivered(id).await;
    }
    // They reconnect to B and resume from their cursors.
    let mut resumed = Vec::new();
    for (reader, cursor) in readers.iter().zip(&cursors) {
        let mut ws = b.ws(reader).await;
        subscribe_feed(&mut ws, "feed", Some(cursor)).await;
        resumed.push(ws);
    }
    b.wait_live_topics(2.0).await;
    let five = bob.post_status("five", json!({})).await;
    let mut want = missed.clone();
    want.push(five.clone());
    for ws in &mut resumed {
        let wanted: Vec<&str> = want.iter().map(String::as_str).collect();
        let events = events_until(ws, &wanted).await;
        assert_eq!(
            feed_event_ids(&events),
            want,
            "what was missed, then live: no gap, no repeat"
        );
    }
    drop_db(&uri).await;
}

#[tokio::test]
async fn the_embedded_process_killed_mid_fan_out_loses_no_acknowledged_action() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    let followers = 2_000;
    {
        let opened = riverfeed::store::open(&store).await.expect("store");
        let edges: Vec<Record> = (0..followers)
            .map(|i| Record::Edge {
                tenant: T.into(),
                kind: EdgeRecordKind::Follows,
                from: format!("reader-{i:04}"),
                to: "bob".into(),
            })
            .collect();
        opened.import(&edges).await.expect("import");
    }
    let flags = ["--feed-model", "push", "--fanout-batch", "500"];
    let port = free_port();
    let mut server = Proc::start_on(port, "serve", &store, &flags).await;
    // A second process on the same directory is refused, saying why.
    let second = Command::new(env!("CARGO_BIN_EXE_riverfeed"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", &store])
        .env("RUST_BACKTRACE", "0")
        .output()
        .await
        .expect("runs");
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(
        said.contains("another riverfeed process is using this data directory"),
        "{said}"
    );
    // Nor is a worker of its own: the embedded store's worker is serve's.
    let worker = Command::new(env!("CARGO_BIN_EXE_riverfeed"))
        .args(["worker", "--listen", "127.0.0.1:0", "--store", &store])
        .env("RUST_BACKTRACE", "0")
        .output()
        .await
        .expect("runs");
    let said = String::from_utf8_lossy(&worker.stderr);
    assert!(!worker.status.success());
    assert!(
        said.contains("separate worker processes need a MongoDB store"),
        "{said}"
    );

    // A burst of recordActions from several clients; the process is killed
    // in the middle of it, with fan-outs under way.
    let (acknowledged, burst) = burst_of_actions(&server, 1_000);
    let deadline = Instant::now() + PATIENCE;
    while acknowledged.lock().unwrap().len() < 40 {
        assert!(Instant::now() < deadline, "the burst never got going");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Fan-outs are waiting or under way as it dies.
    let backlog = server.metric("riverfeed_fanout_queue_depth").await;
    server.kill().await;
    assert!(backlog >= 1.0, "killed with fan-outs to do");
    for task in burst {
        task.await.expect("burst task");
    }
    let acknowledged = acknowledged.lock().unwrap().clone();

    let server = Proc::start_on(free_port(), "serve", &store, &flags).await;
    let bob = server.client("bob");
    for id in &acknowledged {
        bob.wait_delivered(id).await;
    }
    // Every action that exists reached every follower exactly once: each
    // follower's feed holds bob's actions, each once.
    let all = acknowledged.clone();
    for i in (0..followers).step_by(211) {
        let reader = server.client(&format!("reader-{i:04}"));
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let args = match &after {
                Some(c) => format!("(first: 100, after: \"{c}\")"),
                None => "(first: 100)".to_owned(),
            };
            let (ids, page) = reader.feed_ids(&args).await;
            seen.extend(ids);
            if page["hasNextPage"] != true {
                break;
            }
            after = page["endCursor"].as_str().map(str::to_owned);
        }
        let unique: HashSet<&String> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "no item twice for reader-{i:04}");
        for id in &all {
            assert!(unique.contains(id), "reader-{i:04} has {id}");
        }
    }
    eprintln!(
        "killed after {} acknowledged actions; all there and delivered once after restart",
        acknowledged.len()
    );
    drop(server);
}

/// The actions acknowledged so far, by id.
type Acknowledged = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// Four clients of bob's, each recording up to `each` status posts one
/// after another until the process stops answering: the ids acknowledged,
/// and the tasks.
fn burst_of_actions(
    server: &Proc,
    each: usize,
) -> (Acknowledged, Vec<tokio::task::JoinHandle<()>>) {
    let acknowledged = Acknowledged::default();
    let mut burst = Vec::new();
    for task in 0..4 {
        let bob = server.client("bob");
        let acknowledged = acknowledged.clone();
        burst.push(tokio::spawn(async move {
            for n in 0..each {
                let body = bob
                    .try_post(
                        "mutation($t: String!) { recordAction(input: {descriptor: {statusPost: {text: $t}}}) { actionId } }",
                        json!({ "t": format!("burst {task}-{n}") }),
                    )
                    .await;
                match body.and_then(|b| b["data"]["recordAction"]["actionId"].as_str().map(str::to_owned)) {
                    Some(id) => acknowledged.lock().unwrap().push(id),
                    None => return,
                }
            }
        }));
    }
    (acknowledged, burst)
}

#[tokio::test]
async fn the_relay_resumes_from_its_token_after_the_database_restarts() {
    let Some(mut mongo) = OwnMongo::new() else {
        return;
    };
    mongo.start().await;
    let uri = mongo.uri_for("relay_restart");
    let api = ["--no-worker"];
    let a = Proc::start("serve", &uri, &api).await;
    let b = Proc::start("serve", &uri, &api).await;
    let _w = Proc::start("worker", &uri, &[]).await;
    let bob = a.client("bob");
    bob.upsert_user("bob", "Bob").await;
    a.client("alice").follow("bob").await;
    let mut alice = b.ws("alice").await;
    subscribe_feed(&mut alice, "feed", None).await;
    b.wait_live_topics(1.0).await;
    let before = bob.post_status("before", json!({})).await;
    assert_eq!(
        feed_event_ids(&events_until(&mut alice, &[&before]).await),
        std::slice::from_ref(&before)
    );

    // B is frozen while the database restarts and an action is recorded
    // through A: when B wakes, its change stream's cursor died with the
    // server, and only resuming from its token (the driver resumes once by
    // itself; past that the relay reopens from the token) finds what was
    // appended meanwhile. Opened from now, it would miss it.
    signal(&b, "-STOP").await;
    mongo.stop().await;
    mongo.start().await;
    let deadline = Instant::now() + PATIENCE * 2;
    let after = loop {
        if let Some(body) = bob
            .try_post(
                "mutation { recordAction(input: {descriptor: {statusPost: {text: \"after\"}}}) { actionId } }",
                json!({}),
            )
            .await
        {
            if let Some(id) = body["data"]["recordAction"]["actionId"].as_str() {
                break id.to_owned();
            }
        }
        assert!(Instant::now() < deadline, "never recovered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    bob.wait_delivered(&after).await;
    signal(&b, "-CONT").await;
    assert_eq!(
        feed_event_ids(&events_until(&mut alice, &[&after]).await),
        std::slice::from_ref(&after)
    );
    mongo.stop().await;
}

/// The embedded process killed in the middle of a burst of actions whose
/// webhooks are being sent: started again, it sends every acknowledged
/// action's `action.recorded`, and a receiver counting by `webhook-id`
/// sees each event once (a delivery cut off by the kill comes again under
/// its id).
#[tokio::test]
async fn the_embedded_process_killed_mid_burst_loses_no_webhook() {
    let dir = tempfile::tempdir().expect("dir");
    let store = format!("embedded:{}", dir.path().display());
    let flags = ["--webhooks-allow-private"];
    let receiver = crate::webhooks::Receiver::start(None).await;
    // Slower than the burst: deliveries wait, and some are in flight, as
    // the process dies.
    receiver.slow_down(100);
    let mut server = Proc::start_on(free_port(), "serve", &store, &flags).await;
    let app = Client::at(&server.base, Some((T, "app-backend", Some("service"))));
    app.data(
        "mutation($url: String!) { registerWebhook(url: $url, events: [ACTION_RECORDED]) { secret } }",
        json!({ "url": receiver.url }),
    )
    .await;
    let (acknowledged, burst) = burst_of_actions(&server, 2_000);
    // Killed once deliveries are under way.
    receiver
        .wait("deliveries under way", |got| got.len() >= 40)
        .await;
    server.kill().await;
    for task in burst {
        task.await.expect("burst task");
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let sent_before = receiver.all().len();
    assert!(
        sent_before < acknowledged.len(),
        "killed mid-burst: {sent_before} sent of {} acknowledged",
        acknowledged.len()
    );

    let _server = Proc::start_on(free_port(), "serve", &store, &flags).await;
    let want: HashSet<&str> = acknowledged.iter().map(String::as_str).collect();
    let got = receiver
        .wait("every acknowledged action's event", |got| {
            let told: HashSet<&str> = got
                .iter()
                .filter_map(|r| r.body["data"]["actionId"].as_str())
                .collect();
            want.is_subset(&told)
        })
        .await;
    // One id per event, one event per action.
    let mut by_id: HashMap<&str, HashSet<&str>> = HashMap::new();
    for r in &got {
        let action = r.body["data"]["actionId"].as_str().expect("action id");
        by_id.entry(r.id.as_str()).or_default().insert(action);
    }
    assert!(by_id.values().all(|actions| actions.len() == 1));
    let events: HashSet<&str> = by_id.keys().copied().collect();
    let told: HashSet<&str> = by_id.values().flatten().copied().collect();
    assert_eq!(events.len(), told.len(), "each event under one webhook-id");
    eprintln!(
        "killed after {} acknowledged actions and {sent_before} deliveries; after restart \
         {} deliveries carried {} events ({} sent twice, dropped by id)",
        acknowledged.len(),
        got.len(),
        events.len(),
        got.len() - events.len()
    );
}
