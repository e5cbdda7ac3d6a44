//! Cursors across restarts and processes: the key a deployment keeps in its
//! store, `--cursor-key` over it, and why a refused cursor is refused.

use serde_json::{json, Value};

use crate::common::{store_url, Backend, Client, Stopped, TestServer, WsClient};

const FEED_EVENTS: &str =
    "subscription($after: String) { feedEvents(after: $after) { kind resumeCursor item { actionId } } }";

/// Alice follows bob, who posts `texts`, each delivered before the next:
/// their action ids, oldest first.
async fn alice_follows_bob_who_posts(alice: &Client, bob: &Client, texts: &[&str]) -> Vec<String> {
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;
    let mut posted = Vec::new();
    for text in texts {
        let id = bob.post_status(text, json!({})).await;
        bob.wait_delivered(&id).await;
        posted.push(id);
    }
    posted
}

/// The end cursor of `client`'s first feed page of one item.
async fn first_page_cursor(client: &Client) -> String {
    let (_, page) = client.feed_ids("(first: 1)").await;
    page["endCursor"].as_str().expect("end cursor").to_owned()
}

/// The next `feedEvents` event of `ws`, which must carry no error.
async fn next_event(ws: &mut WsClient) -> Value {
    let payload = ws.next_payload().await;
    assert!(payload["errors"].is_null(), "{payload}");
    payload["data"]["feedEvents"].clone()
}

/// `extensions.cursor` of the first error of a feed page after `cursor`,
/// with its message.
async fn refused(client: &Client, field: &str, cursor: &str) -> (String, String) {
    let body = client
        .post(
            &format!(
                "query($c: String) {{ {field}(first: 1, after: $c) {{ edges {{ cursor }} }} }}"
            ),
            json!({ "c": cursor }),
        )
        .await;
    let error = &body["errors"][0];
    assert_eq!(error["extensions"]["code"], "BAD_USER_INPUT", "{body}");
    (
        error["extensions"]["cursor"]
            .as_str()
            .expect("cause")
            .to_owned(),
        error["message"].as_str().expect("message").to_owned(),
    )
}

/// A page cursor and a `feedEvents(after:)` resume token taken before a
/// restart go on working after it: the key the deployment drew at its first
/// start is kept in the data directory.
#[tokio::test]
async fn cursors_and_resume_tokens_survive_a_restart() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let (alice, bob) = (server.client("acme", "alice"), server.client("acme", "bob"));
    let posted = alice_follows_bob_who_posts(&alice, &bob, &["one", "two"]).await;
    let page = first_page_cursor(&alice).await;
    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe_with("feed", FEED_EVENTS, json!({ "after": null }))
        .await;
    server.wait_live_topics(1).await;
    let three = bob.post_status("three", json!({})).await;
    let event = next_event(&mut ws).await;
    assert_eq!(event["item"]["actionId"], three.as_str(), "{event}");
    let resume = event["resumeCursor"].as_str().expect("resume").to_owned();
    drop(ws);
    let stopped = server.stop_keeping_data().await;

    let server = TestServer::start_on(stopped).await;
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");
    let four = bob.post_status("four", json!({})).await;
    bob.wait_delivered(&four).await;
    let (after_page, _) = alice
        .feed_ids(&format!("(first: 5, after: \"{page}\")"))
        .await;
    assert_eq!(after_page, vec![posted[0].clone()], "the page goes on");
    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "alice").await;
    ws.subscribe_with("feed", FEED_EVENTS, json!({ "after": resume }))
        .await;
    let event = next_event(&mut ws).await;
    assert_eq!(
        event["item"]["actionId"],
        four.as_str(),
        "the stream resumes right after three: {event}"
    );
    server.stop().await;
}

/// Two servers starting at once on one MongoDB database settle on one key:
/// a cursor of either pages on the other.
#[tokio::test]
async fn servers_starting_at_once_on_one_database_share_the_key() {
    let Some((store, _)) = store_url(Backend::Mongo("cursor_key_shared")) else {
        return;
    };
    let on = |store: &String| Stopped {
        store: store.clone(),
        dir: None,
    };
    let (a, b) = tokio::join!(
        TestServer::start_on(on(&store)),
        TestServer::start_on(on(&store))
    );
    let bob = a.client("acme", "bob");
    let posted =
        alice_follows_bob_who_posts(&a.client("acme", "alice"), &bob, &["one", "two", "three"])
            .await;
    let from_a = first_page_cursor(&a.client("acme", "alice")).await;
    let (page, info) = b
        .client("acme", "alice")
        .feed_ids(&format!("(first: 1, after: \"{from_a}\")"))
        .await;
    assert_eq!(page, vec![posted[1].clone()], "A's cursor pages on B");
    let from_b = info["endCursor"].as_str().expect("end cursor");
    let (page, _) = a
        .client("acme", "alice")
        .feed_ids(&format!("(first: 1, after: \"{from_b}\")"))
        .await;
    assert_eq!(page, vec![posted[0].clone()], "B's cursor pages on A");
    a.stop_keeping_data().await;
    b.stop().await;
}

/// A refused cursor says why: another list's, damaged, or sealed under a key
/// that has changed since (here: `--cursor-key` set over the kept key).
#[tokio::test]
async fn a_refused_cursor_says_why() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let (alice, bob) = (server.client("acme", "alice"), server.client("acme", "bob"));
    alice_follows_bob_who_posts(&alice, &bob, &["one", "two"]).await;
    let cursor = first_page_cursor(&alice).await;

    let (cause, message) = refused(&bob, "feed", &cursor).await;
    assert_eq!(cause, "OTHER_LIST", "{message}");
    assert!(message.contains("belongs to another list"), "{message}");

    // One character changed in the middle, where the sealed position lies.
    let mut edited: Vec<char> = cursor.chars().collect();
    let mid = edited.len() / 2;
    edited[mid] = if edited[mid] == 'A' { 'B' } else { 'A' };
    let edited: String = edited.into_iter().collect();
    let (cause, message) = refused(&alice, "feed", &edited).await;
    assert_eq!(cause, "DAMAGED", "{message}");
    assert!(message.contains("is damaged"), "{message}");

    let stopped = server.stop_keeping_data().await;
    let server = TestServer::start_with(stopped, |store| {
        let mut options = riverfeed::server::ServeOptions::new(store);
        options.cursor_secret = Some(b"a-cursor-key-set-after-the-fact-0123".to_vec());
        options
    })
    .await;
    let alice = server.client("acme", "alice");
    let (cause, message) = refused(&alice, "feed", &cursor).await;
    assert_eq!(cause, "OTHER_KEY", "{message}");
    assert!(message.contains("another cursor key"), "{message}");
    // Under the configured key, cursors work as ever.
    let fresh = first_page_cursor(&alice).await;
    let (page, _) = alice
        .feed_ids(&format!("(first: 1, after: \"{fresh}\")"))
        .await;
    assert_eq!(page.len(), 1);
    server.stop().await;
}

/// `riverfeed` run with `args` on the store at `store`: its stderr, after
/// checking it succeeded.
async fn cli(store: &str, args: &[&str]) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_riverfeed"))
        .args(args)
        .args(["--store", store])
        .stdin(std::process::Stdio::null())
        .output();
    let output = tokio::time::timeout(4 * crate::common::PATIENCE, output)
        .await
        .expect("the command ends")
        .expect("the command runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "riverfeed {args:?}: {stderr}");
    stderr
}

/// A cursor taken before an export pages on a store the archive was
/// imported into: the deployment's cursor key travels in the archive, and a
/// store without a key of its own takes it. A store with one keeps its own
/// (the cursor is refused, `OTHER_KEY`) unless told to take the archive's.
#[tokio::test]
async fn cursors_open_where_an_export_is_imported() {
    let Some(server) = TestServer::start(Backend::Embedded).await else {
        return;
    };
    let (alice, bob) = (server.client("acme", "alice"), server.client("acme", "bob"));
    let posted = alice_follows_bob_who_posts(&alice, &bob, &["one", "two"]).await;
    let page = first_page_cursor(&alice).await;
    let source = server.stop_keeping_data().await;
    let files = tempfile::tempdir().expect("dir");
    let archive = files.path().join("acme.jsonl").display().to_string();
    cli(&source.store, &["export", "--out", &archive]).await;

    // A new store: the archive's key comes with it.
    let (store, dir) = store_url(Backend::Embedded).expect("embedded");
    let said = cli(&store, &["import", "--in", &archive]).await;
    assert!(said.contains("cursor key taken"), "{said}");
    let server = TestServer::start_on(Stopped { store, dir }).await;
    let alice = server.client("acme", "alice");
    let (after, _) = alice
        .feed_ids(&format!("(first: 5, after: \"{page}\")"))
        .await;
    assert_eq!(after, [posted[0].clone()], "the page goes on");
    server.stop().await;

    // A store that drew a key of its own keeps it unless told otherwise.
    let (store, dir) = store_url(Backend::Embedded).expect("embedded");
    let own = TestServer::start_on(Stopped { store, dir })
        .await
        .stop_keeping_data()
        .await;
    let said = cli(&own.store, &["import", "--in", &archive]).await;
    assert!(said.contains("own cursor key kept"), "{said}");
    let server = TestServer::start_on(own).await;
    let alice = server.client("acme", "alice");
    assert_eq!(refused(&alice, "feed", &page).await.0, "OTHER_KEY");
    let own = server.stop_keeping_data().await;
    let flags = [
        "import",
        "--in",
        &archive,
        "--merge",
        "--replace-cursor-key",
    ];
    let said = cli(&own.store, &flags).await;
    assert!(said.contains("cursor key taken"), "{said}");
    let server = TestServer::start_on(own).await;
    let alice = server.client("acme", "alice");
    let (after, _) = alice
        .feed_ids(&format!("(first: 5, after: \"{page}\")"))
        .await;
    assert_eq!(after, [posted[0].clone()], "the page goes on");
    server.stop().await;
    drop(source);
}
