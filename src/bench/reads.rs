//! Feed reads over HTTP: `feed(first: 25)` with actions, actors and
//! descriptors, by random load users, at each concurrency for `--duration`.
//! A response with GraphQL `errors` is a failure, not a page.
//!
//! The load comes from a process of its own (`riverfeed read-load`), so the
//! server's figures and CPU time are the server's; both share the machine's
//! cores, and the report says how many each kept busy.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::process::Command;

use super::client::Gql;
use super::graph::{self, Graph};
use super::stats::{cpu_seconds, Rng, Summary, Tally};
use super::{Bench, BenchArgs, TENANT};
use crate::duration::parse_duration;

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

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReadsResult {
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

/// Pages of this many readers are read to pick the reference's body.
const REFERENCE_SAMPLE: usize = 64;

/// Keeps the median-size page of a sample of readers as the body the
/// reference route answers. Returns its size.
async fn keep_reference(bench: &Bench, graph: &Graph, seed: u64) -> anyhow::Result<usize> {
    let mut rng = Rng::new(seed ^ 0x005e_ed0f_7e7e);
    let mut bodies = Vec::with_capacity(REFERENCE_SAMPLE);
    for _ in 0..REFERENCE_SAMPLE {
        let user = graph::user_id(rng.below(graph.users));
        let page: Value = bench
            .client
            .send_as(&user, false, FEED_QUERY, &json!({}))
            .await?;
        bodies.push(serde_json::to_vec(&page)?);
    }
    bodies.sort_by_key(Vec::len);
    let median = bodies.swap_remove(bodies.len() / 2);
    let len = median.len();
    bench.reference.set(median.into());
    Ok(len)
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
    /// Readers are drawn from the load graph's first `users` users.
    #[arg(long)]
    pub users: usize,
    /// Requests in flight at once.
    #[arg(long)]
    pub concurrency: usize,
    /// How long to read: "10s", "500ms".
    #[arg(long, value_parser = parse_duration)]
    pub duration: Duration,
    #[arg(long)]
    pub seed: u64,
    /// Read the reference route (a page's body from memory) instead of
    /// feed pages.
    #[arg(long)]
    pub reference: bool,
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

/// The `read-load` process: reads for `--duration` at `--concurrency` and
/// prints a [`LoadOutcome`].
pub async fn read_load(args: &ReadLoadArgs) -> anyhow::Result<()> {
    let client = Gql::new(args.addr, &args.tenant)?;
    let cpu = cpu_seconds();
    let started = Instant::now();
    let until = started + args.duration;
    let tasks = (0..args.concurrency.max(1)).map(|task| {
        let client = &client;
        async move {
            let mut rng = Rng::new(args.seed ^ ((args.concurrency as u64) << 20) ^ task as u64);
            let mut tally = Tally::default();
            while Instant::now() < until {
                tally.record(if args.reference {
                    read_reference(client).await
                } else {
                    read_page_items(client, &graph::user_id(rng.below(args.users))).await
                });
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

/// Runs `read-load` against the bench's server and returns what it
/// measured, with the CPU time this process (the server) used meanwhile.
async fn in_own_process(
    bench: &Bench,
    graph: &Graph,
    args: &BenchArgs,
    concurrency: usize,
    duration: Duration,
    reference: bool,
) -> anyhow::Result<(LoadOutcome, f64)> {
    let program = args.client_program()?;
    let mut command = Command::new(&program);
    command
        .arg("read-load")
        .args(["--addr", &bench.server.addr.to_string(), "--tenant", TENANT])
        .args(["--users", &graph.users.to_string()])
        .args(["--concurrency", &concurrency.to_string()])
        .args(["--duration", &format!("{}ms", duration.as_millis().max(1))])
        .args(["--seed", &args.seed.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if reference {
        command.arg("--reference");
    }
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

pub async fn run(
    bench: &Bench,
    graph: &Graph,
    args: &BenchArgs,
) -> anyhow::Result<Vec<ReadsResult>> {
    let mut results = Vec::new();
    let reference_bytes = keep_reference(bench, graph, args.seed).await?;
    for &concurrency in &args.concurrency {
        let concurrency = concurrency.max(1);
        let spinner = bench
            .ui
            .spinner(&format!("reads: concurrency {concurrency}"));
        let (load, server_cpu) =
            in_own_process(bench, graph, args, concurrency, args.duration, false).await?;
        if let Some(why) = &load.first_failure {
            bench.ui.say(&format!("reads: a page failed: {why}"));
        }
        let (reference, _) =
            in_own_process(bench, graph, args, concurrency, args.duration / 2, true).await?;
        let pages_per_sec = load.pages as f64 / load.secs;
        spinner.finish_with_message(format!(
            "reads: concurrency {concurrency}: {pages_per_sec:.0} pages/s"
        ));
        results.push(ReadsResult {
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
            reference_per_sec: reference.pages as f64 / reference.secs,
            reference_bytes,
            server_cores: server_cpu / load.secs,
            load_cores: load.cpu_secs / load.secs,
        });
    }
    Ok(results)
}
