//! Layouts: the MongoDB timeline layouts, each with and without copies of
//! actions in its entries (`--embed-actions`), side by side in one run on
//! the same graph and load (push, so every delivery is written). Per
//! variant, on a fresh database: the load's fan-out (deliveries per
//! second), what it left stored per delivery (documents and bytes, from
//! `dbStats`) and the write commands it took, then feed pages read by
//! active readers at concurrency 16 for `--duration`: pages per second,
//! p50 / p99, and MongoDB commands per page.

use std::collections::BTreeMap;
use std::collections::HashSet;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::graph::{self, Graph};
use super::stats::{Latencies, Rng, Summary};
use super::{Bench, BenchArgs};
use crate::store::Measure;

/// Readers paging at once.
const READERS: usize = 16;

/// A page as a frontend that shows no counts asks for it: what copies in
/// the entries can serve alone.
pub const PAGE_QUERY: &str = concat!(
    "query { feed(first: 25) { edges { cursor node { actionId relevancy \
    reason { kind actorId } action { id actorId conducted actor { id name } refIds ",
    super::reads::descriptor_fields!(),
    " } } } pageInfo { hasNextPage endCursor } } }"
);

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LayoutResult {
    pub layout: String,
    pub embed_actions: bool,
    pub actions: usize,
    pub deliveries: u64,
    pub deliveries_per_sec: f64,
    /// Documents and bytes (data and indexes) the load left stored, per
    /// delivery (actions and the rest included: they are the same in every
    /// variant).
    pub documents_per_delivery: f64,
    pub bytes_per_delivery: f64,
    /// `insert` and `update` commands sent during the load, per 1,000
    /// deliveries.
    pub write_commands_per_1k: f64,
    pub pages: u64,
    pub pages_per_sec: f64,
    pub page: Summary,
    /// Read commands (`find`, `getMore`, `aggregate`) per page.
    pub reads_per_page: f64,
}

/// MongoDB commands sent so far, by name.
async fn commands(bench: &Bench) -> anyhow::Result<BTreeMap<String, u64>> {
    let stats = bench.store.stats(Measure::Counters).await?;
    Ok(stats.counters.into_iter().collect())
}

fn sent(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, names: &[&str]) -> u64 {
    names
        .iter()
        .map(|n| after.get(*n).unwrap_or(&0) - before.get(*n).unwrap_or(&0))
        .sum()
}

/// Runs one variant on a started bench.
pub async fn run(
    bench: &Bench,
    args: &BenchArgs,
    layout: &str,
    embed_actions: bool,
) -> anyhow::Result<LayoutResult> {
    let graph = Graph::generate(args.users, args.max_follows, args.seed);
    graph::load_follows(bench, &graph).await?;
    let (stored, before) = bench.stats().await?;
    let load = super::load::run(bench, &graph, args).await?;
    let (stored_after, after) = bench.stats().await?;
    let (sent_before, sent_after) = (
        before.counters.into_iter().collect(),
        after.counters.into_iter().collect(),
    );
    let deliveries = load.deliveries.max(1) as f64;

    let (pages, page, secs, reads) = read_pages(bench, args, &graph, layout).await?;
    Ok(LayoutResult {
        layout: layout.to_owned(),
        embed_actions,
        actions: load.actions,
        deliveries: load.deliveries,
        deliveries_per_sec: load.deliveries_per_sec,
        documents_per_delivery: stored_after.documents.saturating_sub(stored.documents) as f64
            / deliveries,
        bytes_per_delivery: stored_after.bytes.saturating_sub(stored.bytes) as f64 / deliveries,
        write_commands_per_1k: sent(&sent_before, &sent_after, &["insert", "update"]) as f64
            * 1000.0
            / deliveries,
        pages,
        pages_per_sec: pages as f64 / secs,
        page,
        reads_per_page: reads as f64 / pages.max(1) as f64,
    })
}

/// Pages of readers drawn among those who follow someone, `READERS` at a
/// time for `--duration`: how many, their latencies, the seconds taken and
/// the read commands sent.
async fn read_pages(
    bench: &Bench,
    args: &BenchArgs,
    graph: &Graph,
    name: &str,
) -> anyhow::Result<(u64, Summary, f64, u64)> {
    let following: HashSet<u32> = graph.edges.iter().map(|&(from, _)| from).collect();
    let mut readers: Vec<usize> = following.into_iter().map(|i| i as usize).collect();
    readers.sort_unstable();
    anyhow::ensure!(!readers.is_empty(), "no reader follows anyone");
    let spinner = bench.ui.spinner(&format!("{name}: pages"));
    let before = commands(bench).await?;
    let started = Instant::now();
    let until = started + args.duration;
    let client = &bench.client;
    let (readers, spinner_ref) = (&readers, &spinner);
    let lanes = (0..READERS).map(|lane| async move {
        let mut rng = Rng::new(0x1a7 ^ lane as u64);
        let mut latencies = Latencies::default();
        while Instant::now() < until {
            let user = graph::user_id(readers[rng.below(readers.len())]);
            let sent = Instant::now();
            let body: serde_json::Value =
                client.send_as(&user, false, PAGE_QUERY, &json!({})).await?;
            anyhow::ensure!(
                body.get("errors").is_none(),
                "{name}: a page failed: {body}"
            );
            latencies.record(sent.elapsed());
            spinner_ref.inc(1);
        }
        anyhow::Ok(latencies)
    });
    let mut all = Latencies::default();
    for lane in futures_util::future::join_all(lanes).await {
        all.extend(lane?);
    }
    let secs = started.elapsed().as_secs_f64();
    spinner.finish();
    let reads = sent(
        &before,
        &commands(bench).await?,
        &["find", "getMore", "aggregate"],
    );
    Ok((all.len() as u64, all.summary(), secs, reads))
}
