//! Load: record `--actions` actions over HTTP from actors drawn uniformly among
//! the load users (a descriptor mix like a recruiting tenant's), and time how
//! fast they are recorded and how soon the worker has delivered all of them.

use std::time::{Duration, Instant};

use futures_util::{stream, StreamExt};
use serde::{Deserialize, Serialize};

use super::graph::{self, Graph};
use super::stats::{Latencies, Rng, Summary};
use super::{Bench, BenchArgs};

/// Requests in flight while loading, like a busy application backend.
const CONCURRENCY: usize = 16;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadResult {
    pub users: usize,
    pub edges: usize,
    /// Followers of the most followed user.
    pub max_followers: u32,
    pub actions: usize,
    pub record_secs: f64,
    pub actions_per_sec: f64,
    /// `recordAction` round trips.
    pub record_latency: Summary,
    /// Feed items the actions make (each actor's followers and the actor).
    pub deliveries: u64,
    /// From the first `recordAction` to the last action fanned out.
    pub delivered_secs: f64,
    pub deliveries_per_sec: f64,
}

/// `count` actions by actors drawn uniformly from the graph, each with
/// its input: what the load records.
pub fn plan(graph: &Graph, count: usize, seed: u64) -> Vec<(usize, serde_json::Value)> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| {
            let actor = rng.below(graph.users);
            (
                actor,
                graph::action_input(&mut rng, &graph::user_id(actor), i),
            )
        })
        .collect()
}

/// The actions the load records in a run of `args` (the same in every
/// run with its seed).
pub fn planned(graph: &Graph, args: &BenchArgs) -> Vec<(usize, serde_json::Value)> {
    plan(graph, args.actions, args.seed ^ 0x10AD)
}

pub async fn run(bench: &Bench, graph: &Graph, args: &BenchArgs) -> anyhow::Result<LoadResult> {
    let plan = planned(graph, args);
    let deliveries: u64 = plan.iter().map(|(actor, _)| graph.audience(*actor)).sum();

    let bar = bench.ui.bar(plan.len() as u64, "load: recordAction");
    let started = Instant::now();
    let client = &bench.client;
    let outcomes: Vec<anyhow::Result<(String, Duration)>> = stream::iter(plan)
        .map(|(actor, input)| {
            let bar = &bar;
            async move {
                let sent = Instant::now();
                let id = client.record(&graph::user_id(actor), &input).await?;
                bar.inc(1);
                Ok((id, sent.elapsed()))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let record_secs = started.elapsed().as_secs_f64();
    bar.finish();
    let mut ids = Vec::with_capacity(outcomes.len());
    let mut latencies = Latencies::default();
    for outcome in outcomes {
        let (id, latency) = outcome?;
        ids.push(id);
        latencies.record(latency);
    }

    let bar = bench.ui.bar(ids.len() as u64, "load: fan-out");
    let finished = client
        .wait_done(&ids, Duration::from_secs(3600), |_| bar.inc(1))
        .await?;
    bar.finish();
    let delivered_secs = (finished - started).as_secs_f64();
    Ok(LoadResult {
        users: graph.users,
        edges: graph.edges.len(),
        max_followers: graph.followers.iter().copied().max().unwrap_or(0),
        actions: ids.len(),
        record_secs,
        actions_per_sec: ids.len() as f64 / record_secs,
        record_latency: latencies.summary(),
        deliveries,
        delivered_secs,
        deliveries_per_sec: deliveries as f64 / delivered_secs,
    })
}
