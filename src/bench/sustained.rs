//! Sustained fan-out: many actors post at once (drawn by popularity, so the
//! big audiences post as often as they do in life) while readers keep reading
//! their feeds; deliveries per second from the first post until the worker has
//! delivered the last one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::graph::{self, Graph};
use super::reads::read_page;
use super::stats::{Latencies, Rng, Summary};
use super::{Bench, BenchArgs};
use crate::store::embedded::EmbeddedStore;

/// Posting tasks: application backends recording actions.
const POSTERS: usize = 8;
/// Reading tasks: people scrolling their feeds meanwhile.
const READERS: usize = 4;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SustainedResult {
    pub posters: usize,
    pub readers: usize,
    pub actions: usize,
    pub deliveries: u64,
    /// Time spent posting (until `--duration` or the delivery budget).
    pub posting_secs: f64,
    /// From the first post to the last action fanned out.
    pub delivered_secs: f64,
    pub deliveries_per_sec: f64,
    /// Feed pages read meanwhile, and their latency.
    pub reader_pages: u64,
    pub reader_failures: u64,
    pub reader_latency: Summary,
    /// The engine alone writing a delivery's keys in the worker's batches,
    /// deliveries per second (embedded store only): the limit the worker's
    /// rate is set beside.
    #[serde(default)]
    pub engine_per_sec: Option<f64>,
}

pub async fn run(
    bench: &Bench,
    graph: &Graph,
    args: &BenchArgs,
) -> anyhow::Result<SustainedResult> {
    let queued = AtomicU64::new(0);
    let drained = AtomicBool::new(false);
    let ids = Mutex::new(Vec::new());
    let read_latency = Mutex::new(Latencies::default());
    let failures = AtomicU64::new(0);
    let spinner = bench.ui.spinner("sustained: posting");
    let started = Instant::now();
    let posting_until = started + args.duration;

    let post = |poster: usize| {
        let (queued, ids, spinner) = (&queued, &ids, &spinner);
        async move {
            let mut rng = Rng::new(args.seed ^ (0x5057 + poster as u64));
            let mut serial = 0;
            while Instant::now() < posting_until {
                let actor = graph.popularity.sample(&mut rng);
                let audience = graph.audience(actor);
                if queued.fetch_add(audience, Ordering::Relaxed) >= args.sustained_deliveries {
                    queued.fetch_sub(audience, Ordering::Relaxed);
                    break;
                }
                let id = graph::action_input(&mut rng, &graph::user_id(actor), serial);
                let id = bench.client.record(&graph::user_id(actor), &id).await?;
                serial += 1;
                spinner.inc(1);
                ids.lock().unwrap_or_else(|e| e.into_inner()).push(id);
            }
            anyhow::Ok(())
        }
    };
    let read = |reader: usize| {
        let (drained, read_latency, failures) = (&drained, &read_latency, &failures);
        async move {
            let mut rng = Rng::new(args.seed ^ (0x8EAD + reader as u64));
            let mut mine = Latencies::default();
            while !drained.load(Ordering::Relaxed) {
                let user = graph::user_id(rng.below(graph.users));
                match read_page(&bench.client, &user).await {
                    Ok(latency) => mine.record(latency),
                    Err(_) => {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            read_latency
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(mine);
        }
    };
    let drain = async {
        let posted = futures_util::future::try_join_all((0..POSTERS).map(post)).await;
        let posting_secs = started.elapsed().as_secs_f64();
        spinner.finish_with_message("sustained: posted");
        let ids = std::mem::take(&mut *ids.lock().unwrap_or_else(|e| e.into_inner()));
        let outcome = async {
            posted?;
            let bar = bench.ui.bar(ids.len() as u64, "sustained: fan-out");
            let done = bench
                .client
                .wait_done(&ids, Duration::from_secs(3600), |_| bar.inc(1))
                .await?;
            bar.finish();
            anyhow::Ok((ids.len(), posting_secs, done))
        }
        .await;
        drained.store(true, Ordering::Relaxed);
        outcome
    };
    let (outcome, _) = tokio::join!(
        drain,
        futures_util::future::join_all((0..READERS).map(read))
    );
    let (actions, posting_secs, done) = outcome?;
    let deliveries = queued.load(Ordering::Relaxed);
    let delivered_secs = (done - started).as_secs_f64();
    let mut read_latency = read_latency.into_inner().unwrap_or_else(|e| e.into_inner());
    let engine_per_sec = match &bench.embedded {
        Some(store) => Some(engine_rate(store.clone(), deliveries, bench.fanout_batch).await?),
        None => None,
    };
    Ok(SustainedResult {
        posters: POSTERS,
        readers: READERS,
        actions,
        deliveries,
        posting_secs,
        delivered_secs,
        deliveries_per_sec: deliveries as f64 / delivered_secs,
        reader_pages: read_latency.len() as u64,
        reader_failures: failures.load(Ordering::Relaxed),
        reader_latency: read_latency.summary(),
        engine_per_sec,
    })
}

/// The engine's own rate for as many deliveries as the run made (at least
/// 100,000, at most 1,000,000), written in batches of `batch`.
async fn engine_rate(
    store: Arc<EmbeddedStore>,
    deliveries: u64,
    batch: usize,
) -> anyhow::Result<f64> {
    let deliveries = (deliveries as usize).clamp(100_000, 1_000_000);
    let rate = tokio::task::spawn_blocking(move || store.engine_delivery_rate(deliveries, batch))
        .await??;
    Ok(rate)
}
