//! Feed reads over HTTP: `feed(first: 25)` with actions, actors,
//! descriptors and counts, as a frontend's first screen asks for it, by
//! readers whose feeds fill the page ([`super::readers`]). Two pages, each
//! at every concurrency: *warm*, a reader who has read before (under
//! rivers, one with a river), drawn at random for `--duration`; and
//! *cold*, a dormant reader's first page, each reader read once (rivers
//! they got earlier in the run are dropped first). The run's model is read
//! beside `push` on a store of its own with the same graph and load, and
//! beside the in-memory reference (the same client and HTTP stack
//! answering a page's bytes from memory). A response with GraphQL `errors`
//! is a failure, not a page.
//!
//! The load comes from a process of its own (`riverfeed read-load`), so the
//! server's figures and CPU time are the server's; both share the machine's
//! cores, and the report says how many each kept busy.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::process::Command;

use super::client::Gql;
use super::readers::Readers;
use super::stats::{cpu_seconds, Rng, Summary, Tally};
use super::{Bench, BenchArgs, TENANT};
use crate::duration::parse_duration;
use crate::store::RiverWrite;

/// The descriptor fields a frontend shows, each kind's.
macro_rules! descriptor_fields {
    () => {
        "descriptor { __typename \
        ... on StatusPost { text } \
        ... on ApplicationRating { raterName applicantName positionName ratingScore ratingText } \
        ... on NewApplicant { applicantName positionName } \
        ... on ApplicantHired { applicantName positionName hiredByName } \
        ... on ApplicantRatingRequested { applicantName positionName raterName requestedByName } }"
    };
}
pub(super) use descriptor_fields;

/// A home-feed page as a frontend asks for it.
pub const FEED_QUERY: &str = concat!(
    "query { feed(first: 25) { edges { cursor node { actionId relevancy \
    reason { kind actorId } action { id actorId conducted commentCount likeCount \
    actor { id name } refIds ",
    descriptor_fields!(),
    " } } } pageInfo { hasNextPage endCursor } } }"
);

/// Which page a phase reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PageKind {
    /// A dormant reader's first page.
    Cold,
    /// A page of a reader who has read before.
    #[default]
    Warm,
}

impl PageKind {
    pub fn name(self) -> &'static str {
        match self {
            PageKind::Cold => "cold",
            PageKind::Warm => "warm",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReadsResult {
    /// The feed model the server ran (absent from older results: the
    /// run's own).
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub page: PageKind,
    pub concurrency: usize,
    pub secs: f64,
    pub pages: u64,
    pub failures: u64,
    /// Feed items in the pages read, on average.
    pub items_per_page: f64,
    pub pages_per_sec: f64,
    pub latency: Summary,
    /// The same client and HTTP stack answered from memory with a body of
    /// a typical page's size (`/bench/reference`), at this concurrency:
    /// what the server could serve if a page cost nothing to make.
    #[serde(default)]
    pub reference_per_sec: f64,
    /// Its round trips.
    #[serde(default)]
    pub reference_latency: Summary,
    /// The size of that body, in bytes.
    #[serde(default)]
    pub reference_bytes: usize,
    /// Cores the server's process kept busy meanwhile (CPU seconds per
    /// second), and the load generator's, which runs in a process of its
    /// own on the same machine.
    #[serde(default)]
    pub server_cores: f64,
    #[serde(default)]
    pub load_cores: f64,
}

/// Reads one feed page as `user`; the round trip, or why it failed.
pub async fn read_page(client: &Gql, user: &str) -> Result<Duration, String> {
    read_page_items(client, user).await.map(|(d, _)| d)
}

/// A feed page's response as the load generator checks it: every byte is
/// read and parsed as JSON, but only the edges are counted and any errors
/// kept, as a client that renders the page would not build a tree of it first.
#[derive(Deserialize)]
struct PageResponse {
    data: Option<PageData>,
    errors: Option<Value>,
}

#[derive(Deserialize)]
struct PageData {
    feed: Option<FeedPage>,
}

#[derive(Deserialize)]
struct FeedPage {
    edges: Vec<serde::de::IgnoredAny>,
}

async fn read_page_items(client: &Gql, user: &str) -> Result<(Duration, usize), String> {
    let sent = Instant::now();
    let body = client.send_as(user, false, FEED_QUERY, &json!({})).await;
    counted(sent, body)
}

/// A page's round trip since `sent` and its edges, or why its answer is
/// not a page.
fn counted(sent: Instant, body: anyhow::Result<PageResponse>) -> Result<(Duration, usize), String> {
    let body = body.map_err(|e| format!("{e:#}"))?;
    let latency = sent.elapsed();
    if let Some(errors) = body.errors {
        return Err(errors.to_string());
    }
    let edges = body
        .data
        .and_then(|d| d.feed)
        .ok_or_else(|| "no feed in the response".to_owned())?
        .edges;
    Ok((latency, edges.len()))
}

/// Pages of this many warm readers are read to pick the reference's body.
const REFERENCE_SAMPLE: usize = 64;

/// Keeps the median-size page of a sample of warm readers as the body the
/// reference route answers. Returns its size.
async fn keep_reference(bench: &Bench, warm: &[String], seed: u64) -> anyhow::Result<usize> {
    let mut rng = Rng::new(seed ^ 0x005e_ed0f_7e7e);
    let mut bodies = Vec::with_capacity(REFERENCE_SAMPLE);
    for _ in 0..REFERENCE_SAMPLE.min(warm.len().max(1)) {
        let user = &warm[rng.below(warm.len())];
        let page: Value = bench
            .client
            .send_as(user, false, FEED_QUERY, &json!({}))
            .await?;
        bodies.push(serde_json::to_vec(&page)?);
    }
    bodies.sort_by_key(Vec::len);
    let median = bodies.swap_remove(bodies.len() / 2);
    let len = median.len();
    bench.reference.set(median.into());
    Ok(len)
}

/// How the load generator picks its readers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Draw {
    /// At random, for the whole duration.
    Random,
    /// Each once, in order, until all are read (or the duration ends).
    Once,
    /// None: the reference route, for the whole duration.
    Reference,
}

/// Flags of the hidden `read-load` command: the reads workload's load
/// generator, in a process of its own.
#[derive(Clone, Debug, clap::Args)]
pub struct ReadLoadArgs {
    /// The server's address.
    #[arg(long)]
    pub addr: SocketAddr,
    #[arg(long)]
    pub tenant: String,
    /// A file of the readers' ids, one a line.
    #[arg(long)]
    pub readers: PathBuf,
    #[arg(long, value_enum)]
    pub draw: Draw,
    /// Requests in flight at once.
    #[arg(long)]
    pub concurrency: usize,
    /// How long to read at most: "10s", "500ms".
    #[arg(long, value_parser = parse_duration)]
    pub duration: Duration,
    #[arg(long)]
    pub seed: u64,
}

/// What the load generator measured, printed as one line of JSON.
#[derive(Debug, Serialize, Deserialize)]
pub struct LoadOutcome {
    pub secs: f64,
    pub pages: u64,
    pub failures: u64,
    /// Feed items in the pages read, all told.
    pub items: u64,
    pub latency: Summary,
    /// Why the first failed page failed.
    pub first_failure: Option<String>,
    /// The load generator's own CPU time meanwhile, in seconds.
    pub cpu_secs: f64,
}

/// The `read-load` process: reads as `--draw` says at `--concurrency` and
/// prints a [`LoadOutcome`].
pub async fn read_load(args: &ReadLoadArgs) -> anyhow::Result<()> {
    let client = Gql::new(args.addr, &args.tenant)?;
    let list = std::fs::read_to_string(&args.readers)
        .with_context(|| format!("cannot read {}", args.readers.display()))?;
    let readers: Vec<&str> = list.lines().filter(|l| !l.is_empty()).collect();
    anyhow::ensure!(
        !readers.is_empty(),
        "no readers in {}",
        args.readers.display()
    );
    let next = AtomicUsize::new(0);
    let cpu = cpu_seconds();
    let started = Instant::now();
    let until = started + args.duration;
    let tasks = (0..args.concurrency.max(1)).map(|task| {
        let (client, readers, next) = (&client, &readers, &next);
        async move {
            let mut rng = Rng::new(args.seed ^ ((args.concurrency as u64) << 20) ^ task as u64);
            let mut tally = Tally::default();
            while Instant::now() < until {
                let read = match args.draw {
                    Draw::Reference => read_reference(client).await,
                    Draw::Random => {
                        read_page_items(client, readers[rng.below(readers.len())]).await
                    }
                    Draw::Once => match readers.get(next.fetch_add(1, Ordering::Relaxed)) {
                        Some(reader) => read_page_items(client, reader).await,
                        None => break,
                    },
                };
                tally.record(read);
            }
            tally
        }
    });
    let outcomes = futures_util::future::join_all(tasks).await;
    let secs = started.elapsed().as_secs_f64();
    let mut tally = outcomes.into_iter().fold(Tally::default(), Tally::merge);
    let outcome = LoadOutcome {
        secs,
        pages: tally.latencies.len() as u64,
        failures: tally.failures,
        items: tally.items,
        latency: tally.latencies.summary(),
        first_failure: tally.first_failure,
        cpu_secs: cpu_seconds() - cpu,
    };
    println!("{}", serde_json::to_string(&outcome)?);
    Ok(())
}

/// One read of the reference route, checked as a feed page is.
async fn read_reference(client: &Gql) -> Result<(Duration, usize), String> {
    let sent = Instant::now();
    let body = client
        .reference_as("reference", FEED_QUERY, &json!({}))
        .await;
    counted(sent, body)
}

/// One phase of reads: `read-load` run against the bench's server over the
/// readers in `readers` (a file), as `draw` says.
struct Phase<'a> {
    readers: &'a Path,
    draw: Draw,
    concurrency: usize,
    duration: Duration,
}

/// Runs `read-load` for `phase` and returns what it measured, with the CPU
/// time this process (the server) used meanwhile.
async fn in_own_process(
    bench: &Bench,
    args: &BenchArgs,
    phase: Phase<'_>,
) -> anyhow::Result<(LoadOutcome, f64)> {
    let program = args.client_program()?;
    let mut command = Command::new(&program);
    command
        .arg("read-load")
        .args(["--addr", &bench.server.addr.to_string(), "--tenant", TENANT])
        .arg("--readers")
        .arg(phase.readers)
        .args(["--draw", phase.draw.name()])
        .args(["--concurrency", &phase.concurrency.to_string()])
        .args([
            "--duration",
            &format!("{}ms", phase.duration.as_millis().max(1)),
        ])
        .args(["--seed", &args.seed.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let cpu = cpu_seconds();
    let output = command
        .output()
        .await
        .with_context(|| format!("cannot run the load generator {}", program.display()))?;
    let server_cpu = cpu_seconds() - cpu;
    anyhow::ensure!(
        output.status.success(),
        "the load generator failed ({})",
        output.status
    );
    let outcome = serde_json::from_slice(&output.stdout)
        .context("the load generator's report is not what it should print")?;
    Ok((outcome, server_cpu))
}

impl Draw {
    fn name(self) -> &'static str {
        match self {
            Draw::Random => "random",
            Draw::Once => "once",
            Draw::Reference => "reference",
        }
    }
}

/// Drops the rivers `readers` have (got earlier in the run), so that each
/// next reads as dormant. Rivers only: a store without them has nothing
/// to drop. Waits first for the builds under way.
async fn make_dormant(bench: &Bench, readers: &[String]) -> anyhow::Result<()> {
    bench.server.river_builds.settled().await;
    for chunk in readers.chunks(1_000) {
        let rivers = bench.store.rivers(TENANT, chunk).await?;
        for (reader, river) in chunk.iter().zip(rivers) {
            if river.is_some() {
                bench
                    .store
                    .write_river(TENANT, reader, RiverWrite::Drop)
                    .await?;
            }
        }
    }
    Ok(())
}

/// The readers' files a run reads from.
struct Files {
    _dir: tempfile::TempDir,
    warm: PathBuf,
    cold: Vec<PathBuf>,
}

impl Files {
    fn write(readers: &Readers) -> anyhow::Result<Files> {
        let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
        let put = |name: String, ids: &[String]| -> anyhow::Result<PathBuf> {
            let path = dir.path().join(name);
            std::fs::write(&path, ids.join("\n"))
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(path)
        };
        let warm = put("warm".into(), &readers.warm)?;
        let cold = readers
            .cold
            .iter()
            .enumerate()
            .map(|(n, ids)| put(format!("cold-{n}"), ids))
            .collect::<anyhow::Result<_>>()?;
        Ok(Files {
            _dir: dir,
            warm,
            cold,
        })
    }
}

/// Reads `bench`'s server (running `model`) as the workload does: warm and
/// cold pages at each concurrency, and, with `reference`, the in-memory
/// reference beside them. Phases last `duration` (the reference's half of
/// it).
pub async fn run(
    bench: &Bench,
    readers: &Readers,
    args: &BenchArgs,
    model: &str,
    duration: Duration,
    reference: bool,
) -> anyhow::Result<Vec<ReadsResult>> {
    anyhow::ensure!(
        !readers.warm.is_empty(),
        "no readers for the reads workload"
    );
    let files = Files::write(readers)?;
    // Every warm reader reads once, unmeasured; under rivers, their rivers
    // are built before they are measured.
    let spinner = bench.ui.spinner(&format!("reads ({model}): warming"));
    let warming = Phase {
        readers: &files.warm,
        draw: Draw::Once,
        concurrency: 8,
        duration: Duration::from_secs(600),
    };
    in_own_process(bench, args, warming).await?;
    bench.server.river_builds.settled().await;
    spinner.finish();
    let reference_bytes = match reference {
        true => keep_reference(bench, &readers.warm, args.seed).await?,
        false => 0,
    };
    let mut results = Vec::new();
    for (n, &concurrency) in args.concurrency.iter().enumerate() {
        let concurrency = concurrency.max(1);
        let mut measured = Vec::new();
        for page in [PageKind::Warm, PageKind::Cold] {
            let spinner = bench.ui.spinner(&format!(
                "reads ({model}): {} pages, concurrency {concurrency}",
                page.name()
            ));
            let phase = match page {
                PageKind::Warm => Phase {
                    readers: &files.warm,
                    draw: Draw::Random,
                    concurrency,
                    duration,
                },
                PageKind::Cold if readers.cold[n].is_empty() => continue,
                PageKind::Cold => {
                    make_dormant(bench, &readers.cold[n]).await?;
                    Phase {
                        readers: &files.cold[n],
                        draw: Draw::Once,
                        concurrency,
                        duration,
                    }
                }
            };
            let (load, server_cpu) = in_own_process(bench, args, phase).await?;
            if let Some(why) = &load.first_failure {
                bench.ui.say(&format!("reads: a page failed: {why}"));
            }
            let pages_per_sec = load.pages as f64 / load.secs;
            spinner.finish_with_message(format!(
                "reads ({model}): {} pages, concurrency {concurrency}: {pages_per_sec:.0} pages/s",
                page.name()
            ));
            measured.push(ReadsResult {
                model: model.to_owned(),
                page,
                concurrency,
                secs: load.secs,
                pages: load.pages,
                failures: load.failures,
                items_per_page: if load.pages == 0 {
                    0.0
                } else {
                    load.items as f64 / load.pages as f64
                },
                pages_per_sec,
                latency: load.latency,
                reference_per_sec: 0.0,
                reference_latency: Summary::default(),
                reference_bytes,
                server_cores: server_cpu / load.secs,
                load_cores: load.cpu_secs / load.secs,
            });
            // The cold pages' builds end before the next phase.
            bench.server.river_builds.settled().await;
        }
        if reference {
            let phase = Phase {
                readers: &files.warm,
                draw: Draw::Reference,
                concurrency,
                duration: duration / 2,
            };
            let (from_memory, _) = in_own_process(bench, args, phase).await?;
            for x in &mut measured {
                x.reference_per_sec = from_memory.pages as f64 / from_memory.secs;
                x.reference_latency = from_memory.latency;
            }
        }
        results.extend(measured);
    }
    Ok(results)
}

/// Puts the reference measured beside `with` (same concurrency) into
/// `results`: another model's server, read in the same run.
pub fn beside(results: &mut [ReadsResult], with: &[ReadsResult]) {
    for x in results {
        if let Some(r) = with.iter().find(|r| r.concurrency == x.concurrency) {
            x.reference_per_sec = r.reference_per_sec;
            x.reference_latency = r.reference_latency;
            x.reference_bytes = r.reference_bytes;
        }
    }
}

/// What the server's `/metrics` counts of its executions now.
pub async fn executions(bench: &Bench) -> anyhow::Result<super::readers::Executions> {
    let at = bench.server.metrics_addr.unwrap_or(bench.server.addr);
    let text = bench
        .client
        .http()
        .get(format!("http://{at}/metrics"))
        .send()
        .await
        .context("cannot read /metrics")?
        .text()
        .await?;
    Ok(super::readers::Executions::of(&text))
}
