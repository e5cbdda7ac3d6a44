//! A full disk under the embedded store: writes are refused with a code of
//! their own (503 and `Retry-After`), reads go on, `/healthz` and `/readyz`
//! say so, and once space is back the store takes writes again by itself,
//! with everything it acknowledged.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{Client, Stopped, TestServer, PATIENCE};

/// The size of the filesystem the store fills.
const FILESYSTEM_MB: usize = 40;
/// Space held by a file of the test's own, freed to end the fault.
const BALLAST_MB: usize = 12;
/// Status posts recorded per request while filling.
const PER_REQUEST: usize = 10;

/// A tmpfs of `FILESYSTEM_MB`, unmounted when dropped.
struct SmallFilesystem {
    dir: tempfile::TempDir,
}

impl SmallFilesystem {
    /// `None`, having said why, where this process cannot mount (not root).
    fn mount() -> Option<Self> {
        let dir = tempfile::tempdir().expect("tempdir");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={FILESYSTEM_MB}m")])
            .arg("tmpfs")
            .arg(dir.path())
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(Self { dir }),
            Ok(out) => {
                eprintln!(
                    "SKIPPED: cannot mount a {FILESYSTEM_MB} MB tmpfs (needs root): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(err) => {
                eprintln!("SKIPPED: cannot run mount: {err}");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        // Lazily: a server a failed assertion left running still holds files.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// One answer as HTTP has it.
struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: Value,
}

async fn post(base: &str, query: &str, variables: Value) -> Answer {
    let response = reqwest::Client::new()
        .post(format!("{base}/graphql"))
        .header("x-riverfeed-tenant", "acme")
        .header("x-riverfeed-user", "bob")
        .json(&json!({ "query": query, "variables": variables }))
        .send()
        .await
        .expect("answered");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("ascii").to_owned());
    let body = response.json().await.expect("JSON");
    Answer {
        status,
        retry_after,
        body,
    }
}

/// `PER_REQUEST` status posts in one request, aliased, each with the text
/// given as `$t`.
fn many_posts() -> String {
    let fields: String = (0..PER_REQUEST)
        .map(|i| {
            format!("p{i}: recordAction(input: {{descriptor: {{statusPost: {{text: $t}}}}}}) {{ actionId }} ")
        })
        .collect();
    format!("mutation($t: String!) {{ {fields}}}")
}

const ONE_POST: &str =
    "mutation { recordAction(input: {descriptor: {statusPost: {text: \"one more\"}}}) { actionId } }";

fn codes(body: &Value) -> Vec<String> {
    body["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["extensions"]["code"].as_str().map(str::to_owned))
        .collect()
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{base}{path}"))
        .await
        .expect("answered");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

/// Every one of `ids` can be read back.
async fn assert_all_there(bob: &Client, ids: &[String]) {
    for chunk in ids.chunks(50) {
        let fields: String = chunk
            .iter()
            .enumerate()
            .map(|(i, id)| format!("a{i}: action(actionId: \"{id}\") {{ actionId }} "))
            .collect();
        let data = bob.data(&format!("{{ {fields}}}"), json!({})).await;
        for (i, id) in chunk.iter().enumerate() {
            assert_eq!(
                data[format!("a{i}")]["actionId"].as_str(),
                Some(id.as_str()),
                "acknowledged action {id} is lost"
            );
        }
    }
}

#[tokio::test]
async fn a_full_disk_refuses_writes_with_their_own_code_serves_reads_and_recovers_by_itself() {
    let Some(fs) = SmallFilesystem::mount() else {
        return;
    };
    let ballast: PathBuf = fs.path().join("ballast");
    std::fs::write(&ballast, vec![1u8; BALLAST_MB << 20]).expect("ballast written");
    let server = TestServer::start_on(Stopped {
        store: format!("embedded:{}", fs.path().join("data").display()),
        dir: None,
    })
    .await;
    let base = server.base.clone();
    let alice = server.client("acme", "alice");
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    alice.follow("bob").await;

    // Fill the filesystem until a write is refused.
    let mut acknowledged: Vec<String> = Vec::new();
    let most = FILESYSTEM_MB * 1024 / 10 / PER_REQUEST * 2;
    let mut full = false;
    for round in 0..most {
        let text = format!("{round} {}", "x".repeat(10_000));
        let answer = post(&base, &many_posts(), json!({ "t": text })).await;
        for i in 0..PER_REQUEST {
            if let Some(id) = answer.body["data"][format!("p{i}")]["actionId"].as_str() {
                acknowledged.push(id.to_owned());
            }
        }
        let codes = codes(&answer.body);
        if !codes.is_empty() {
            assert!(
                codes.iter().all(|c| c == "STORAGE_UNAVAILABLE"),
                "a full disk answers STORAGE_UNAVAILABLE: {}",
                answer.body
            );
            assert!(
                answer.retry_after.is_some(),
                "a refused write says when to retry"
            );
            full = true;
            break;
        }
    }
    assert!(full, "the filesystem never filled");
    eprintln!(
        "the disk filled after {} acknowledged status posts",
        acknowledged.len()
    );

    // A request that fails as a whole for it: 503 with `Retry-After`.
    let refused = post(&base, ONE_POST, json!({})).await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(codes(&refused.body), ["STORAGE_UNAVAILABLE"]);
    let after: u64 = refused
        .retry_after
        .as_deref()
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!(after >= 1, "Retry-After: {after}");
    let message = refused.body["errors"][0]["message"].as_str().unwrap_or("");
    assert!(
        !message.contains("rocksdb") && !message.contains('/'),
        "no internal detail in the answer: {message}"
    );

    // Reads go on, a first feed read too (under rivers it would build one).
    let (ids, _) = alice.feed_ids("(first: 5)").await;
    assert_eq!(
        ids,
        acknowledged
            .iter()
            .rev()
            .take(5)
            .cloned()
            .collect::<Vec<_>>(),
        "the feed is read from what is stored"
    );

    let (status, health) = get(&base, "/healthz").await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["store"], "embedded", "{health}");
    assert!(health["reason"].as_str().is_some_and(|r| !r.is_empty()));
    let (status, ready) = get(&base, "/readyz").await;
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["status"], "not ready", "{ready}");

    // Space comes back: writes are taken again, without a restart.
    std::fs::remove_file(&ballast).expect("ballast removed");
    let deadline = Instant::now() + PATIENCE * 2;
    let freed = Instant::now();
    let last = loop {
        let answer = post(&base, ONE_POST, json!({})).await;
        if let Some(id) = answer.body["data"]["recordAction"]["actionId"].as_str() {
            assert_eq!(answer.status, 200);
            break id.to_owned();
        }
        assert_eq!(
            codes(&answer.body),
            ["STORAGE_UNAVAILABLE"],
            "{}",
            answer.body
        );
        assert!(Instant::now() < deadline, "writes never came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "writes taken again {:?} after space came back",
        freed.elapsed()
    );
    acknowledged.push(last);

    let (status, ready) = get(&base, "/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["status"], "ready", "{ready}");
    let (status, health) = get(&base, "/healthz").await;
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));

    assert_all_there(&bob, &acknowledged).await;
    // And on disk: a restart finds them all.
    let stopped = server.stop_keeping_data().await;
    let server = TestServer::start_on(stopped).await;
    let bob = server.client("acme", "bob");
    assert_all_there(&bob, &acknowledged).await;
    server.stop_keeping_data().await;
    drop(fs);
}
