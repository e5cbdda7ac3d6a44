//! The history checker's short run: clients run a seeded mix of operations
//! through the API while the harness kills the server (on MongoDB, one of
//! two API processes or one of two workers) with SIGKILL, then the final
//! state is checked against the model of what was acknowledged
//! (`riverfeed::bench::history`). A failure prints the seed and, for each
//! violation, the history that shows it.

use std::time::Duration;

use riverfeed::bench::history::{self, Backend, HistoryConfig, HistoryResult};

use crate::processes::Mongo;

/// The seed, from `RIVERFEED_HISTORY_SEED` to replay a failure, else drawn.
fn seed() -> u64 {
    std::env::var("RIVERFEED_HISTORY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// Where the processes' logs (and, after a violation, the whole history)
/// go: kept in the temporary directory when a run fails.
fn logs() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("riverfeed-history-")
        .tempdir()
        .expect("dir")
}

fn config(backend: Backend, logs: &std::path::Path) -> HistoryConfig {
    let mut config = HistoryConfig::new(
        env!("CARGO_BIN_EXE_riverfeed").into(),
        backend,
        seed(),
        logs.to_owned(),
    );
    config.duration = Duration::from_secs(15);
    config.kill_every = (Duration::from_millis(1_000), Duration::from_millis(3_000));
    config
}

#[track_caller]
fn assert_clean(result: &HistoryResult, logs: tempfile::TempDir) {
    let logs = if result.violations > 0 {
        logs.keep().display().to_string()
    } else {
        String::new()
    };
    eprintln!(
        "{}: seed {}, {} operations ({} acknowledged, {} failed, {} cut off), {} kills {:?}, feeds checked under {:?}, {} notices of deleted actions not judged, {:.1} s",
        result.backend,
        result.seed,
        result.operations,
        result.acknowledged,
        result.failed,
        result.cut_off,
        result.kills,
        result.kills_by_role,
        result.models,
        result.unjudged_notices,
        result.seconds
    );
    assert!(result.kills >= 3, "killed only {} times", result.kills);
    assert_eq!(
        result.violations, 0,
        "seed {} (RIVERFEED_HISTORY_SEED={} replays it; logs and the whole history in {logs}):\n{}",
        result.seed, result.seed, result.report
    );
}

#[tokio::test]
async fn a_killed_embedded_server_keeps_every_acknowledged_history() {
    let data = tempfile::tempdir().expect("dir");
    let logs = logs();
    let mut config = config(Backend::Embedded(data.path().to_owned()), logs.path());
    config.model = "rivers".into();
    config.also_read_under = vec!["push".into()];
    let result = history::run(&config).await.expect("the run");
    assert_clean(&result, logs);
}

#[tokio::test]
async fn killed_api_processes_and_workers_on_mongodb_keep_every_acknowledged_history() {
    // After each kill the harness ends every session on the server
    // (`end_abandoned_transactions`): on a server of the test's own, so the
    // other tests' sessions on the shared one are left alone.
    let Some(server) = Mongo::start("history").await else {
        return;
    };
    let uri = server.uri.clone();
    let logs = logs();
    let mut config = config(Backend::Mongo(uri.clone()), logs.path());
    config.model = "push".into();
    config.also_read_under = vec!["rivers".into()];
    let result = history::run(&config).await;
    server.stop().await;
    assert_clean(&result.expect("the run"), logs);
}
