//! Live: S websocket subscribers (graphql-transport-ws, one connection each,
//! subscribed to `feedEvents`) who all follow one actor; that actor records
//! an action, and we time `recordAction` to the `ADDED` event reaching the
//! last subscriber, over several repeats. Also the resident memory each idle
//! subscriber costs.
//!
//! Memory is this process's resident set before and after connecting, so it
//! counts both ends of every connection — the server's and the client's
//! (tokio-tungstenite with a 4 KiB read buffer): an upper bound on the server's
//! share.

use std::time::{Duration, Instant};

use futures_util::{stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::client::{pong, subscribe_feed, Socket};
use super::graph::follow_bulk;
use super::stats::{resident_bytes, Latencies, Summary};
use super::{Bench, BenchArgs, TENANT};

/// Connections being opened at once.
const CONNECTING: usize = 64;
/// How long to wait for an event or for subscriptions to register.
const PATIENCE: Duration = Duration::from_secs(60);
/// Points kept of the latency distribution, for the plot.
const CDF_POINTS: usize = 200;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LiveResult {
    pub subscribers: usize,
    pub connect_secs: f64,
    pub rss_before_bytes: u64,
    pub rss_after_bytes: u64,
    /// Resident memory per idle subscriber, both ends of its connection.
    pub bytes_per_subscriber: f64,
    pub repeats: usize,
    /// `recordAction` to the `ADDED` event at the last subscriber, per repeat.
    pub last_latency: Summary,
    /// `recordAction` to each subscriber's event, all repeats.
    pub each_latency: Summary,
    /// Events that did not arrive within the patience.
    pub missed: u64,
    /// Sorted per-subscriber latencies (ms), thinned to a few hundred points.
    pub cdf_ms: Vec<f64>,
}

pub async fn run(bench: &Bench, args: &BenchArgs) -> anyhow::Result<Vec<LiveResult>> {
    let mut results = Vec::new();
    for &subscribers in &args.live {
        results.push(one_size(bench, subscribers, args.live_repeats.max(1)).await?);
    }
    Ok(results)
}

async fn one_size(bench: &Bench, size: usize, repeats: usize) -> anyhow::Result<LiveResult> {
    let actor = format!("live-{size}");
    let user = |i: usize| format!("live{size}-{i}");
    follow_bulk(
        bench,
        (0..size).map(|i| (user(i), actor.clone())),
        size,
        &format!("live: {size} followers"),
    )
    .await?;
    let base_topics = bench.client.live_topics().await?;
    let rss_before = resident_bytes();

    let bar = bench.ui.bar(size as u64, &format!("live: connect {size}"));
    let url = bench.client.ws_url();
    let started = Instant::now();
    let sockets: Vec<anyhow::Result<Socket>> = stream::iter(0..size)
        .map(|i| {
            let (url, user, bar) = (&url, user(i), &bar);
            async move {
                let socket = subscribe_feed(url, TENANT, &user).await;
                bar.inc(1);
                socket
            }
        })
        .buffer_unordered(CONNECTING)
        .collect()
        .await;
    bar.finish();
    let stop = CancellationToken::new();
    let tracker = TaskTracker::new();
    let (arrivals, mut arrived) = mpsc::unbounded_channel();
    for socket in sockets {
        tracker.spawn(listen(socket?, arrivals.clone(), stop.clone()));
    }
    drop(arrivals);
    let registered = Instant::now() + PATIENCE;
    while bench.client.live_topics().await? < base_topics + size as u64 {
        anyhow::ensure!(
            Instant::now() < registered,
            "{size} subscriptions did not all register"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let connect_secs = started.elapsed().as_secs_f64();
    let rss_after = resident_bytes();

    let bar = bench
        .ui
        .bar(repeats as u64, &format!("live: deliver to {size}"));
    let (mut last, mut each, mut missed) = (Latencies::default(), Latencies::default(), 0u64);
    for repeat in 0..repeats {
        let input = json!({ "descriptor": { "statusPost": { "text": format!("All-hands in ten minutes ({repeat}).") } } });
        let sent = Instant::now();
        let id = bench.client.record(&actor, &input).await?;
        let mut latest = sent;
        let mut got = 0;
        while got < size {
            match tokio::time::timeout(PATIENCE, arrived.recv()).await {
                Ok(Some(at)) => {
                    got += 1;
                    each.record(at - sent);
                    latest = latest.max(at);
                }
                _ => break,
            }
        }
        missed += (size - got) as u64;
        last.record(latest - sent);
        bench
            .client
            .wait_done(&[id], Duration::from_secs(600), |_| {})
            .await?;
        bar.inc(1);
    }
    bar.finish();

    stop.cancel();
    tracker.close();
    tracker.wait().await;
    let each_latency = each.summary();
    let sorted = each.sorted_ms();
    let step = (sorted.len() / CDF_POINTS).max(1);
    let mut cdf_ms: Vec<f64> = sorted.iter().step_by(step).copied().collect();
    if let Some(&max) = sorted.last() {
        cdf_ms.push(max);
    }
    Ok(LiveResult {
        subscribers: size,
        connect_secs,
        rss_before_bytes: rss_before,
        rss_after_bytes: rss_after,
        bytes_per_subscriber: rss_after.saturating_sub(rss_before) as f64 / size as f64,
        repeats,
        last_latency: last.summary(),
        each_latency,
        missed,
        cdf_ms,
    })
}

/// Reads one subscriber's socket: reports the arrival time of every `ADDED`
/// event, answers pings, and closes when told to stop.
async fn listen(
    mut socket: Socket,
    arrivals: mpsc::UnboundedSender<Instant>,
    stop: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            _ = stop.cancelled() => break,
            message = socket.next() => message,
        };
        match message {
            Some(Ok(Message::Text(text))) => {
                if text.contains("\"ADDED\"") {
                    let _ = arrivals.send(Instant::now());
                } else if text.contains("\"ping\"") && pong(&mut socket).await.is_err() {
                    break;
                }
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => break,
        }
    }
    let _ = socket.close(None).await;
}
