//! `riverfeed import` is all or nothing: an archive cut short, an id or a
//! text the API would refuse, a tenant that holds data already (without
//! `--merge`) and a line past the length bound are each refused with the
//! line and the reason, and leave the store as it was. Run as an operator
//! runs it: the command itself, its exit status and its stderr.

use std::process::Output;

use indicatif::ProgressBar;
use riverfeed::archive_cmd;
use riverfeed::model::limits::MAX_TEXT_BYTES;
use riverfeed::model::Foreign;
use riverfeed::store::Record;
use tokio::process::Command;

use super::T;
use crate::common::{store_url, Backend, PATIENCE};

/// Longer than any line an import reads: the name of one user.
const PAST_THE_BOUND: usize = archive_cmd::MAX_LINE_BYTES + 1024 * 1024;

/// A store the test reaches only through the command line, as an operator
/// does: each command is a process of its own, so the embedded store is
/// never held by the test while a command opens it.
struct CliStore {
    url: String,
    _dir: Option<tempfile::TempDir>,
    files: tempfile::TempDir,
}

impl CliStore {
    fn new(backend: Backend) -> Option<Self> {
        let (url, dir) = store_url(backend)?;
        Some(Self {
            url,
            _dir: dir,
            files: tempfile::tempdir().expect("temp dir"),
        })
    }

    async fn run(&self, args: &[&str]) -> Output {
        let run = Command::new(env!("CARGO_BIN_EXE_riverfeed"))
            .args(args)
            .args(["--store", &self.url])
            .env("RUST_BACKTRACE", "0")
            .stdin(std::process::Stdio::null())
            .output();
        tokio::time::timeout(4 * PATIENCE, run)
            .await
            .expect("the command ends")
            .expect("the command runs")
    }

    /// `riverfeed import` of `archive` (written to a file first) with `flags`:
    /// whether it succeeded, and its stderr.
    async fn import(&self, name: &str, archive: &[u8], flags: &[&str]) -> (bool, String) {
        let path = self.files.path().join(name);
        std::fs::write(&path, archive).expect("archive written");
        let path = path.display().to_string();
        let mut args = vec!["import", "--in", &path];
        args.extend(flags);
        let output = self.run(&args).await;
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.success(), stderr)
    }

    /// Every record the store holds of `tenant`, as `riverfeed export`
    /// writes them, sorted.
    async fn records_of(&self, tenant: &str) -> Vec<String> {
        let out = self.files.path().join("check.jsonl");
        let path = out.display().to_string();
        let output = self
            .run(&["export", "--tenant", tenant, "--out", &path])
            .await;
        assert!(
            output.status.success(),
            "export: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = std::fs::read_to_string(&out).expect("export file");
        let mut records: Vec<String> = text
            .lines()
            .filter(|line| serde_json::from_str::<Record>(line).is_ok())
            .map(str::to_owned)
            .collect();
        records.sort();
        records
    }

    async fn remove(self) {
        if self.url.starts_with("mongodb") {
            let settings = riverfeed::store::StoreSettings::default();
            let mongo = riverfeed::store::mongo::MongoStore::connect(&self.url, &settings.mongo)
                .await
                .expect("connect");
            crate::common::drop_database(mongo.database()).await;
        }
    }
}

fn user(tenant: &str, id: &str, name: Option<&str>) -> Record {
    Record::User {
        tenant: tenant.into(),
        id: id.into(),
        name: name.map(str::to_owned),
    }
}

/// Records as `riverfeed export` writes them.
async fn archive_of(records: Vec<Record>) -> Vec<u8> {
    let mut out = Vec::new();
    archive_cmd::write_records(
        None,
        Box::pin(futures_util::stream::iter(records.into_iter().map(Ok))),
        &mut out,
        &ProgressBar::hidden(),
    )
    .await
    .expect("archive written");
    out
}

/// The offset just past the `n`th line's newline.
fn after_line(archive: &[u8], n: usize) -> usize {
    archive
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(n - 1)
        .map(|(i, _)| i + 1)
        .expect("the archive has that many lines")
}

#[track_caller]
fn assert_refused((ok, stderr): &(bool, String), line: usize, reason: &str) {
    assert!(!ok, "refused: {stderr}");
    assert!(
        stderr.contains(&format!("line {line}")),
        "names line {line}: {stderr}"
    );
    assert!(stderr.contains(reason), "says {reason:?}: {stderr}");
    assert!(
        stderr.contains("nothing was imported"),
        "says nothing was written: {stderr}"
    );
}

/// An archive cut in the middle of a line, or just after one (the end of
/// a record, not of the archive), writes nothing, in batches of three as in
/// one. The whole archive then imports.
async fn a_cut_archive_imports_nothing(backend: Backend) {
    let Some(store) = CliStore::new(backend) else {
        return;
    };
    let users = (0..10)
        .map(|n| user(T, &format!("u{n:02}"), None))
        .collect();
    let whole = archive_of(users).await;
    let mid_line = &whole[..after_line(&whole, 6) + 15];
    let at_a_line = &whole[..after_line(&whole, 7)];
    for (name, cut, line, reason) in [
        ("mid-line.jsonl", mid_line, 7, "not a record"),
        ("at-a-line.jsonl", at_a_line, 7, "cut short"),
    ] {
        let refused = store.import(name, cut, &["--batch", "3"]).await;
        assert_refused(&refused, line, reason);
        assert_eq!(store.records_of(T).await, Vec::<String>::new(), "{name}");
    }
    let (ok, stderr) = store.import("whole.jsonl", &whole, &["--batch", "3"]).await;
    assert!(ok, "{stderr}");
    assert_eq!(store.records_of(T).await.len(), 10);
    store.remove().await;
}

/// Ids as the API checks them (a hidden character, in a user id or a
/// tenant's; a form other than NFC) and texts past their bound are refused
/// by line, before anything is written.
async fn what_the_api_refuses_an_import_refuses(backend: Backend) {
    let Some(store) = CliStore::new(backend) else {
        return;
    };
    let hidden_tenant = "arch\u{200B}";
    let long_name = "n".repeat(MAX_TEXT_BYTES + 1);
    let cases = [
        (user(T, "bob\u{200B}", None), "U+200B"),
        (user(hidden_tenant, "bob", None), "U+200B"),
        (user(T, "e\u{301}", None), "NFC"),
        (user(T, "bob", Some(&long_name)), "bytes"),
    ];
    for (n, (bad, reason)) in cases.into_iter().enumerate() {
        let archive = archive_of(vec![user(T, "ann", None), bad]).await;
        let refused = store.import(&format!("bad-{n}.jsonl"), &archive, &[]).await;
        assert_refused(&refused, 2, reason);
        for tenant in [T, hidden_tenant] {
            assert_eq!(
                store.records_of(tenant).await,
                Vec::<String>::new(),
                "case {n}: {tenant:?}"
            );
        }
    }
    store.remove().await;
}

/// An archive whose tenant holds data in the store already (here: another
/// tenant's archive with its tenant renamed) is refused, naming the tenant
/// and `--merge`, and changes nothing; with `--merge` it is merged in.
async fn an_archive_into_a_tenant_in_use_needs_merge(backend: Backend) {
    let Some(store) = CliStore::new(backend) else {
        return;
    };
    let first = archive_of(vec![user(T, "ann", None), user(T, "bob", None)]).await;
    let (ok, stderr) = store.import("first.jsonl", &first, &[]).await;
    assert!(ok, "{stderr}");
    let before = store.records_of(T).await;
    assert_eq!(before.len(), 2);

    let renamed = archive_of(vec![
        user(T, "cid", Some("Cid")),
        user(T, "ann", Some("Ann")),
    ])
    .await;
    let refused = store.import("renamed.jsonl", &renamed, &[]).await;
    assert_refused(&refused, 1, "--merge");
    assert!(
        refused.1.contains(&format!("{T:?}")),
        "names the tenant: {}",
        refused.1
    );
    assert_eq!(store.records_of(T).await, before, "unchanged");

    let (ok, stderr) = store.import("renamed.jsonl", &renamed, &["--merge"]).await;
    assert!(ok, "{stderr}");
    let merged = store.records_of(T).await;
    assert_eq!(merged.len(), 3, "ann (renamed), bob, cid: {merged:?}");
    store.remove().await;
}

/// A line longer than the bound is refused by its number, before it is
/// read whole, and nothing before it is written.
async fn a_line_past_the_bound_is_refused(backend: Backend) {
    let Some(store) = CliStore::new(backend) else {
        return;
    };
    let long_name = "n".repeat(PAST_THE_BOUND);
    let archive = archive_of(vec![user(T, "ann", None), user(T, "bob", Some(&long_name))]).await;
    let refused = store
        .import("long.jsonl", &archive, &["--batch", "1"])
        .await;
    assert_refused(&refused, 2, "longer than");
    assert_eq!(store.records_of(T).await, Vec::<String>::new());
    store.remove().await;
}

/// An action whose actor holds its `foreignId` in the store under another
/// action (an archive of another store, merged in) is refused by line,
/// naming the action, the actor and the id, before anything is written;
/// the same action again (its own id) merges.
async fn a_foreign_id_held_by_another_action_is_refused(backend: Backend) {
    let Some(store) = CliStore::new(backend) else {
        return;
    };
    let recorded = |conducted, foreign: &str| {
        let mut action = super::status(T, "ann", conducted, &[]);
        action.fan_out = riverfeed::model::FanOut::done();
        action.foreign = Some(Foreign::of(foreign.into(), &action, true));
        action
    };
    let held = recorded(1_000, "order-7");
    let first = archive_of(vec![
        user(T, "ann", None),
        Record::Action {
            action: held.clone(),
        },
    ])
    .await;
    let (ok, stderr) = store.import("first.jsonl", &first, &[]).await;
    assert!(ok, "{stderr}");
    let before = store.records_of(T).await;

    let other = recorded(2_000, "order-7");
    let clashing = archive_of(vec![
        user(T, "bob", None),
        Record::Action {
            action: other.clone(),
        },
    ])
    .await;
    for batch in ["1", "1000"] {
        let flags = ["--merge", "--batch", batch];
        let refused = store.import("clashing.jsonl", &clashing, &flags).await;
        assert_refused(&refused, 2, "order-7");
        for named in [other.id.to_hex(), held.id.to_hex(), "\"ann\"".to_owned()] {
            assert!(refused.1.contains(&named), "names {named}: {}", refused.1);
        }
        assert_eq!(store.records_of(T).await, before, "unchanged");
    }

    // Two actions of one actor under one foreign id within an archive are
    // refused too, at the second.
    let twice = archive_of(vec![
        Record::Action {
            action: recorded(3_000, "order-8"),
        },
        Record::Action {
            action: recorded(4_000, "order-8"),
        },
    ])
    .await;
    let refused = store.import("twice.jsonl", &twice, &["--merge"]).await;
    assert_refused(&refused, 2, "order-8");
    assert_eq!(store.records_of(T).await, before, "unchanged");

    let again = archive_of(vec![Record::Action { action: held }]).await;
    let (ok, stderr) = store.import("again.jsonl", &again, &["--merge"]).await;
    assert!(ok, "the same action merges: {stderr}");
    assert_eq!(store.records_of(T).await, before);
    store.remove().await;
}

/// An archive may move a `foreignId` from an action the store holds to
/// another, the new holder first: the archive as a whole holds the id
/// once, so it imports (in batches of one too, and with the moving action
/// given twice), and the id ends with its new holder.
async fn an_archive_moving_a_foreign_id_imports(backend: Backend) {
    let Some(store) = CliStore::new(backend) else {
        return;
    };
    let recorded = |conducted, foreign: Option<&str>| {
        let mut action = super::status(T, "ann", conducted, &[]);
        action.fan_out = riverfeed::model::FanOut::done();
        action.foreign = foreign.map(|f| Foreign::of(f.into(), &action, true));
        action
    };
    let held = recorded(1_000, Some("order-7"));
    let first = archive_of(vec![
        user(T, "ann", None),
        Record::Action {
            action: held.clone(),
        },
    ])
    .await;
    let (ok, stderr) = store.import("first.jsonl", &first, &[]).await;
    assert!(ok, "{stderr}");

    let taker = recorded(2_000, Some("order-7"));
    let mut gave = held.clone();
    gave.foreign = None;
    let moving = archive_of(vec![
        Record::Action {
            action: taker.clone(),
        },
        Record::Action {
            action: gave.clone(),
        },
        // Given twice: written once, counted twice.
        Record::Action {
            action: gave.clone(),
        },
    ])
    .await;
    let flags = ["--merge", "--batch", "1"];
    let (ok, stderr) = store.import("moving.jsonl", &moving, &flags).await;
    assert!(ok, "the archive as a whole holds the id once: {stderr}");
    let records = store.records_of(T).await;
    let line_of = |id: riverfeed::model::ObjectId| {
        records
            .iter()
            .find(|r| r.contains(&id.to_hex()) && r.contains("\"action\""))
            .unwrap_or_else(|| panic!("action {id} imported: {records:?}"))
            .clone()
    };
    assert!(line_of(taker.id).contains("order-7"), "{records:?}");
    assert!(!line_of(held.id).contains("order-7"), "{records:?}");
    store.remove().await;
}

crate::on_both_backends!(
    an_archive_moving_a_foreign_id_imports,
    a_foreign_id_held_by_another_action_is_refused,
    a_cut_archive_imports_nothing,
    what_the_api_refuses_an_import_refuses,
    an_archive_into_a_tenant_in_use_needs_merge,
    a_line_past_the_bound_is_refused,
);
