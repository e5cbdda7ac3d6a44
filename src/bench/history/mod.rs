//! The history checker, in the spirit of Jepsen's: several clients run a
//! seeded random mix of operations through the API while the harness kills
//! the server (on MongoDB one of two API processes or one of two workers)
//! with SIGKILL at random moments and starts it again on the same store.
//! The history records what was acknowledged, what failed and what was cut
//! off; once the workers have drained, the final state is read through the
//! API and checked against a model of what that history allows.
//!
//! [`ops`]: the operations, the world and the history; [`client`]: the
//! clients; [`procs`]: the processes and the kills; [`receiver`]: the
//! webhook endpoint; [`observe`]: reading the final state; [`model`]: what
//! the history allows; [`check`] and [`notices`]: the checks; [`report`]:
//! what a failure prints (the seed and the history that shows it).
//!
//! Served by the integration test `tests/it/history.rs` (a short run per
//! backend) and by `riverfeed bench --workloads history` (a long one).

pub mod check;
pub mod client;
pub mod model;
pub mod notices;
pub mod observe;
pub mod ops;
pub mod probe;
pub mod procs;
pub mod receiver;
pub mod report;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use serde_json::json;

use self::check::Violation;
use self::client::{Http, Shared};
use self::ops::{Entry, Outcome, World};
use self::procs::{Proc, Role};
use crate::rng::Rng;

/// Where the history runs.
#[derive(Clone, Debug)]
pub enum Backend {
    /// One `serve` process on an embedded store in this directory.
    Embedded(PathBuf),
    /// Two API processes and two workers on this MongoDB database.
    Mongo(String),
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Embedded(_) => "embedded",
            Backend::Mongo(_) => "mongodb",
        }
    }
}

/// One run's settings.
#[derive(Clone, Debug)]
pub struct HistoryConfig {
    /// The `riverfeed` binary the processes run.
    pub program: PathBuf,
    pub backend: Backend,
    pub seed: u64,
    pub clients: usize,
    pub users_per_client: usize,
    /// How long the clients run while processes are killed.
    pub duration: Duration,
    /// Shortest and longest pause between two kills.
    pub kill_every: (Duration, Duration),
    /// The feed model the run writes under; the final feeds are also read
    /// under each of `also_read_under`, after a restart under it.
    pub model: String,
    pub also_read_under: Vec<String>,
    /// Where the processes' logs go.
    pub logs: PathBuf,
    /// How long the workers may go at the end without working the backlog
    /// down to a new low; they may take four times this in all.
    pub drain: Duration,
}

impl HistoryConfig {
    pub fn new(program: PathBuf, backend: Backend, seed: u64, logs: PathBuf) -> HistoryConfig {
        HistoryConfig {
            program,
            backend,
            seed,
            clients: 4,
            users_per_client: 3,
            duration: Duration::from_secs(30),
            kill_every: (Duration::from_millis(1_500), Duration::from_millis(4_000)),
            model: "rivers".into(),
            also_read_under: vec!["push".into()],
            logs,
            drain: Duration::from_secs(120),
        }
    }
}

/// What a run did and found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HistoryResult {
    pub backend: String,
    pub seed: u64,
    pub seconds: f64,
    pub operations: usize,
    pub acknowledged: usize,
    pub failed: usize,
    pub cut_off: usize,
    /// Requests refused at connect while a process was down (sent again).
    pub refused: usize,
    pub kills: usize,
    /// Kills per role (`server`, `api`, `worker`).
    pub kills_by_role: Vec<(String, usize)>,
    /// The models whose feeds were checked.
    pub models: Vec<String>,
    pub violations: usize,
    /// Notices about actions deleted since, which the model cannot name.
    pub unjudged_notices: usize,
    /// Each violation with the seed and the history that shows it.
    pub report: String,
}

/// Flags every process gets: webhooks to the loopback receiver, and a
/// short lease so a killed process's claims are taken up again soon (on
/// MongoDB a little longer: a slow server would otherwise see claims taken
/// over while they run, which is correct but wasted work).
fn flags(lease_secs: u32) -> Vec<String> {
    vec![
        "--webhooks-allow-private".into(),
        "--fanout-lease-secs".into(),
        lease_secs.to_string(),
    ]
}

/// Runs one history and checks it.
pub async fn run(config: &HistoryConfig) -> anyhow::Result<HistoryResult> {
    let started = Instant::now();
    std::fs::create_dir_all(&config.logs)
        .with_context(|| format!("cannot create {}", config.logs.display()))?;
    let world = Arc::new(World::new(config.clients, config.users_per_client));
    let receiver = receiver::Receiver::start().await?;
    let mut procs = processes(config)?;
    for p in &mut procs {
        p.start(&config.model).await?;
    }
    let apis: Vec<String> = procs
        .iter()
        .filter(|p| p.role != Role::Worker)
        .map(Proc::base)
        .collect();
    let reader = Http::new(&apis[0])?;
    for u in world.users() {
        reader
            .data(
                &u,
                false,
                "mutation($u: ID!) { upsertUser(input: {userId: $u, name: $u}) { userId } }",
                json!({ "u": u }),
            )
            .await?;
    }

    let shared = Arc::new(Shared::new(receiver.base.clone()));
    let mut tasks = Vec::new();
    for c in 0..config.clients {
        let client = client::Client::new(
            c,
            config.seed,
            world.clone(),
            &apis[c % apis.len()],
            shared.clone(),
        )?;
        tasks.push(tokio::spawn(client.run()));
    }
    let kills = kill_for(config, &mut procs, &shared).await;
    shared.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.context("a client panicked")?;
    }
    let mut history = shared
        .history
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    history.sort_by_key(|e| e.seq);

    let outcome = judge(config, &world, &history, &mut procs, &receiver).await;
    for p in &mut procs {
        p.kill().await;
    }
    end_abandoned_transactions(&config.backend).await;
    let (mut violations, unjudged, models) = outcome?;
    let lacking: Vec<(String, String)> = violations
        .iter()
        .filter_map(|v| v.lacking.clone())
        .collect();
    if !lacking.is_empty() {
        let url = match &config.backend {
            Backend::Embedded(dir) => format!("embedded:{}", dir.display()),
            Backend::Mongo(uri) => uri.clone(),
        };
        let mut looked = probe::probe(&url, &lacking).await.into_iter();
        for v in violations.iter_mut().filter(|v| v.lacking.is_some()) {
            match looked.next() {
                Some(line) => v.what = format!("{}\n  {line}", v.what),
                None => break,
            }
        }
    }
    if !violations.is_empty() {
        // The whole history beside the processes' logs, for a closer look.
        let whole: String = history.iter().map(|e| format!("{e}\n")).collect();
        let file = config.logs.join(format!(
            "history-{}-{}.txt",
            config.backend.name(),
            config.seed
        ));
        let _ = std::fs::write(file, whole);
    }
    let mut kills_by_role: Vec<(String, usize)> = Vec::new();
    for role in &kills {
        match kills_by_role.iter_mut().find(|(r, _)| r == role.name()) {
            Some((_, n)) => *n += 1,
            None => kills_by_role.push((role.name().to_owned(), 1)),
        }
    }
    let kill_times = shared
        .kills
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let count = |f: fn(&Entry) -> bool| history.iter().filter(|e| f(e)).count();
    Ok(HistoryResult {
        backend: config.backend.name().to_owned(),
        seed: config.seed,
        seconds: started.elapsed().as_secs_f64(),
        operations: history.len(),
        acknowledged: count(Entry::ok),
        failed: count(|e| matches!(e.outcome, Outcome::Failed(_))),
        cut_off: count(Entry::unknown),
        refused: shared.refused.load(Ordering::Relaxed),
        kills: kills.len(),
        kills_by_role,
        models,
        violations: violations.len(),
        unjudged_notices: unjudged,
        report: report::violations(
            config.seed,
            config.backend.name(),
            &violations,
            &history,
            &kill_times,
        ),
    })
}

fn processes(config: &HistoryConfig) -> anyhow::Result<Vec<Proc>> {
    let program = &config.program;
    Ok(match &config.backend {
        Backend::Embedded(dir) => {
            let store = format!("embedded:{}", dir.display());
            vec![Proc::new(
                Role::Whole,
                program,
                &store,
                flags(2),
                &config.logs,
            )?]
        }
        Backend::Mongo(uri) => {
            let mut procs = Vec::new();
            for role in [Role::Api, Role::Api, Role::Worker, Role::Worker] {
                procs.push(Proc::new(role, program, uri, flags(5), &config.logs)?);
            }
            procs
        }
    })
}

/// Kills a process at random moments until the run's time is up, starting
/// each again at once on its port; returns the roles killed, in order.
async fn kill_for(config: &HistoryConfig, procs: &mut [Proc], shared: &Shared) -> Vec<Role> {
    let mut rng = Rng::new(config.seed ^ 0x6b69_6c6c);
    let deadline = Instant::now() + config.duration;
    let mut killed = Vec::new();
    let (lo, hi) = (
        config.kill_every.0.as_millis() as i64,
        config.kill_every.1.as_millis() as i64,
    );
    loop {
        let pause = Duration::from_millis(rng.between(lo, hi.max(lo + 1)) as u64);
        if Instant::now() + pause >= deadline {
            tokio::time::sleep(deadline.saturating_duration_since(Instant::now())).await;
            return killed;
        }
        tokio::time::sleep(pause).await;
        let victim = rng.below(procs.len());
        let p = &mut procs[victim];
        p.kill().await;
        end_abandoned_transactions(&config.backend).await;
        killed.push(p.role);
        shared
            .kills
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((
                shared.now(),
                format!("{} on port {}", p.role.name(), p.port),
            ));
        // Started again at once; a start that fails is tried again, so the
        // run goes on with every process up.
        let mut tries = 0;
        while let Err(err) = p.start(&config.model).await {
            tries += 1;
            p.kill().await;
            end_abandoned_transactions(&config.backend).await;
            if tries >= 5 {
                tracing::error!(cause = %err, "a killed process does not start again");
                break;
            }
        }
    }
}

/// Waits for the workers to drain, then reads and checks the final state,
/// reading again (bounded) while it does not match: jobs with no gauge of
/// their own (bumps, notices, cleanups) may still be finishing.
async fn judge(
    config: &HistoryConfig,
    world: &World,
    history: &[Entry],
    procs: &mut [Proc],
    receiver: &receiver::Receiver,
) -> anyhow::Result<(Vec<Violation>, usize, Vec<String>)> {
    drain(config, procs).await?;
    let api = procs
        .iter()
        .find(|p| p.role != Role::Worker)
        .map(Proc::base)
        .context("no API process")?;
    let http = Http::new(&api)?;
    let model = model::Model::build(world, history);
    let cap = 1_000;
    let mut models = vec![config.model.clone()];
    let mut tries = 0;
    let (violations, unjudged) = loop {
        let seen = observe::observe(&http, world, history).await?;
        let (mut violations, found) = check::state(world, &model, &seen);
        violations.extend(check::feeds(
            world,
            &model,
            &seen,
            &found,
            &seen.feeds,
            &config.model,
        ));
        let (notices, unjudged) = notices::notices(&model, &seen, &found, history, cap);
        violations.extend(notices);
        violations.extend(notices::webhooks(
            &model,
            &seen,
            &found,
            history,
            &receiver.all(),
            &receiver.base,
        ));
        tries += 1;
        if violations.is_empty() || tries >= 10 {
            if violations.is_empty() {
                for other in &config.also_read_under {
                    for p in procs.iter_mut() {
                        p.kill().await;
                    }
                    end_abandoned_transactions(&config.backend).await;
                    for p in procs.iter_mut() {
                        p.start(other).await?;
                    }
                    let again = observe::feeds(&http, world).await?;
                    violations.extend(check::feeds(world, &model, &seen, &found, &again, other));
                    models.push(other.clone());
                }
            }
            break (violations, unjudged);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    Ok((violations, unjudged, models))
}

/// Polls until every job queue (fan-outs, bumps, follows, cleanups,
/// notices, webhook deliveries) is empty. Each poll is one scrape of
/// `/metrics`, a second apart: a scrape reads every queue's backlog, which
/// on a slow server is work taken from the workers being waited for.
///
/// The check needs the queues empty, not emptied fast: it waits as long as
/// the backlog keeps reaching new lows, and gives up once it has not for
/// `config.drain` (the workers are stuck) or after four times that in all.
async fn drain(config: &HistoryConfig, procs: &[Proc]) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut lowest = (f64::INFINITY, started);
    let watcher = procs.last().context("no process")?;
    loop {
        let series = watcher.metrics().await.unwrap_or_default();
        let mut left = Vec::new();
        let mut backlog = 0.0;
        for kind in crate::store::JobKind::ALL.map(|k| k.code()) {
            let name = format!("riverfeed_job_queue_depth{{job=\"{kind}\"}}");
            match series.iter().find(|(key, _)| *key == name) {
                Some((_, depth)) if *depth == 0.0 => {}
                found => {
                    // An unread depth counts as one job left.
                    backlog += found.map_or(1.0, |(_, depth)| *depth);
                    left.push(format!("{kind} {:?}", found.map(|(_, depth)| depth)));
                }
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        if backlog < lowest.0 {
            lowest = (backlog, now);
        }
        anyhow::ensure!(
            now.duration_since(lowest.1) < config.drain,
            "the workers worked off nothing for {:?}: left {}",
            config.drain,
            left.join(", ")
        );
        anyhow::ensure!(
            now.duration_since(started) < config.drain * 4,
            "the workers did not drain within {:?}: left {}",
            config.drain * 4,
            left.join(", ")
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// On MongoDB, ends every transaction left open. A process killed inside a
/// transaction leaves it open, and every write of a document it wrote
/// waits until the server aborts it: mongod does so after
/// `transactionLifetimeLimitSeconds` (60 s); the wire server the tests run
/// (SecantusDB) never does, and the workers' writes, then the database's
/// drop, would wait for ever. So after each kill the harness asks the
/// server to end them all (`killAllSessions`), as mongod would a minute
/// later; a live process's transaction ended with them fails with a
/// transient error and is tried again, as after any conflict.
pub async fn end_abandoned_transactions(backend: &Backend) {
    let Backend::Mongo(uri) = backend else {
        return;
    };
    let ended = async {
        let client = mongodb::Client::with_uri_str(uri).await?;
        let kill = bson::doc! { "killAllSessions": [] };
        client.database("admin").run_command(kill).await?;
        anyhow::Ok(())
    };
    match tokio::time::timeout(Duration::from_secs(10), ended).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::warn!(cause = %err, "open transactions not ended"),
        Err(_) => tracing::warn!("open transactions not ended within 10 s"),
    }
}
