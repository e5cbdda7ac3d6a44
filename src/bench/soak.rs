//! Soak: the server holds live subscribers (1,000 by default) while a
//! bounded stream of hostile requests, none of them with an identity, comes
//! in for `--soak` (a minute): persisted-query registrations of fresh
//! documents, documents that fail validation with thousands of errors,
//! distinct operation names, websocket upgrades that never send
//! `connection_init`, and connections that send half a request line. All
//! along, `/healthz` is timed and the server's resident memory sampled; at
//! the end an action must still reach every subscriber.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::graph::follow_bulk;
use super::live::{next_line, spawn_subscribers};
use super::stats::{resident_bytes, Latencies, Summary};
use super::{Bench, BenchArgs};

/// Connections each holding kind keeps open at once.
const HELD: usize = 200;
/// How often `/healthz` is timed and memory sampled.
const PROBE_EVERY: Duration = Duration::from_millis(100);
/// How long the server may take to deliver the closing action.
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SoakResult {
    pub subscribers: usize,
    pub secs: f64,
    /// What was sent, per kind of hostile request.
    pub hostile: Vec<HostileCount>,
    /// `/healthz` round trips during the soak.
    pub healthz: Summary,
    /// The server's resident memory once the subscribers were connected,
    /// half-way through (caches and buffers filled), at its highest, and at
    /// the end: bounded memory stops growing, so the second half is flat.
    pub rss_start_bytes: u64,
    #[serde(default)]
    pub rss_half_bytes: u64,
    pub rss_max_bytes: u64,
    pub rss_end_bytes: u64,
    /// Resident memory each second: `(seconds into the soak, bytes)`.
    #[serde(default)]
    pub rss_samples: Vec<(f64, u64)>,
    /// Subscribers the closing action reached, of `subscribers`.
    pub delivered: usize,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HostileCount {
    pub kind: String,
    /// Requests sent, or connections opened.
    pub sent: u64,
    /// Requests the server refused (4xx/5xx), or connections it closed.
    pub refused: u64,
}

pub async fn run(bench: &Bench, args: &BenchArgs) -> anyhow::Result<SoakResult> {
    let size = args.soak_subscribers;
    let actor = "soak-actor".to_owned();
    follow_bulk(
        bench,
        (0..size).map(|i| (format!("soak-{i}"), actor.clone())),
        size,
        &format!("soak: {size} followers"),
    )
    .await?;
    let base_topics = bench.client.live_topics().await?;
    let program = args.client_program()?;
    let mut child = spawn_subscribers(&program, &bench.client.ws_url(), "soak-", size)?;
    let mut lines = BufReader::new(child.stdout.take().context("subscriber output")?).lines();
    loop {
        match next_line(&mut lines, &mut child).await?.as_str() {
            "connected" => {}
            "ready" => break,
            other => anyhow::bail!("unexpected line from the subscriber process: {other}"),
        }
    }
    let registered = Instant::now() + PATIENCE;
    while bench.client.live_topics().await? < base_topics + size as u64 {
        anyhow::ensure!(
            Instant::now() < registered,
            "{size} subscriptions did not all register"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rss_start = resident_bytes();

    let stop = CancellationToken::new();
    let tracker = TaskTracker::new();
    let addr = bench.client.addr();
    let http = bench.client.http().clone();
    let base = format!("http://{addr}");
    let kinds: Vec<(&str, HostileKind)> = vec![
        ("persisted-query registrations", HostileKind::Apq),
        ("validation floods", HostileKind::Invalid),
        ("distinct operation names", HostileKind::Names),
        ("bare websocket upgrades", HostileKind::BareUpgrades),
        ("half request lines", HostileKind::HalfLines),
    ];
    let mut handles = Vec::new();
    for (name, kind) in kinds {
        let (stop, http, base) = (stop.clone(), http.clone(), base.clone());
        handles.push((
            name,
            tracker.spawn(async move { kind.run(&http, &base, addr, stop).await }),
        ));
    }
    tracker.close();

    let bar = bench.ui.spinner("soak: hostile requests");
    let started = Instant::now();
    let (mut healthz, mut rss_max) = (Latencies::default(), rss_start);
    let (mut rss_samples, mut next_sample) = (Vec::new(), Duration::ZERO);
    let mut rss_half = None;
    while started.elapsed() < args.soak {
        let asked = Instant::now();
        let answer = http.get(format!("{base}/healthz")).send().await;
        anyhow::ensure!(
            answer.is_ok_and(|a| a.status().is_success()),
            "/healthz failed during the soak"
        );
        healthz.record(asked.elapsed());
        let rss = resident_bytes();
        rss_max = rss_max.max(rss);
        let at = started.elapsed();
        if at >= next_sample {
            rss_samples.push((at.as_secs_f64(), rss));
            next_sample += Duration::from_secs(1);
        }
        if rss_half.is_none() && at >= args.soak / 2 {
            rss_half = Some(rss);
        }
        bar.inc(1);
        tokio::time::sleep(PROBE_EVERY.saturating_sub(asked.elapsed())).await;
    }
    stop.cancel();
    let mut hostile = Vec::new();
    for (name, handle) in handles {
        let mut count = handle.await.context("a hostile task panicked")?;
        count.kind = name.to_owned();
        hostile.push(count);
    }
    tracker.wait().await;
    bar.finish();
    let secs = started.elapsed().as_secs_f64();
    let rss_end = resident_bytes();

    // Everyone is still served: one action reaches every subscriber.
    let input = json!({ "descriptor": { "statusPost": { "text": "Still here after the soak." } } });
    bench.client.record(&actor, &input).await?;
    let mut delivered = 0;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while delivered < size {
        match tokio::time::timeout_at(deadline, next_line(&mut lines, &mut child)).await {
            Ok(line) => {
                if line?.starts_with("added ") {
                    delivered += 1;
                }
            }
            Err(_) => break,
        }
    }
    drop(child.stdin.take());
    if tokio::time::timeout(PATIENCE, child.wait()).await.is_err() {
        child.kill().await.ok();
    }
    Ok(SoakResult {
        subscribers: size,
        secs,
        hostile,
        healthz: healthz.summary(),
        rss_start_bytes: rss_start,
        rss_half_bytes: rss_half.unwrap_or(rss_end),
        rss_max_bytes: rss_max,
        rss_samples,
        rss_end_bytes: rss_end,
        delivered,
    })
}

#[derive(Clone, Copy)]
enum HostileKind {
    /// Fresh documents with an APQ hash, 16 KiB each, 50 a second.
    Apq,
    /// Documents of 2,000 unknown fields (about 40 KB), 20 a second.
    Invalid,
    /// `query Op<n> { __typename }` with a new name each, 100 a second.
    Names,
    /// Websocket upgrades that never send `connection_init`, [`HELD`] open.
    BareUpgrades,
    /// Connections that send half a request line, [`HELD`] open.
    HalfLines,
}

impl HostileKind {
    async fn run(
        self,
        http: &reqwest::Client,
        base: &str,
        addr: std::net::SocketAddr,
        stop: CancellationToken,
    ) -> HostileCount {
        match self {
            Self::Apq => {
                posts(http, base, &stop, Duration::from_millis(20), |n| {
                    let query = format!("query Apq{n} {{ __typename {} }}", "__typename ".repeat(1_600));
                    let hash = crate::http::persisted::sha256_hex(&query);
                    json!({ "query": query, "extensions": { "persistedQuery": { "version": 1, "sha256Hash": hash } } })
                })
                .await
            }
            Self::Invalid => {
                let fields: String = (0..2_000).map(|i| format!("unknownField{i:05} ")).collect();
                posts(http, base, &stop, Duration::from_millis(50), move |n| {
                    json!({ "query": format!("query Flood{n} {{ __typename }} fragment F on Query {{ {fields} }}") })
                })
                .await
            }
            Self::Names => {
                posts(http, base, &stop, Duration::from_millis(10), |n| {
                    json!({ "query": format!("query Named{n} {{ __typename }}"), "operationName": format!("Named{n}") })
                })
                .await
            }
            Self::BareUpgrades => {
                let request = format!(
                    "GET /graphql/ws HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
                     Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
                     Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n"
                );
                hold(addr, request.into_bytes(), &stop).await
            }
            Self::HalfLines => hold(addr, b"GET /graphql HTT".to_vec(), &stop).await,
        }
    }
}

/// Posts `body(n)` every `every` until stopped, without an identity.
async fn posts(
    http: &reqwest::Client,
    base: &str,
    stop: &CancellationToken,
    every: Duration,
    body: impl Fn(u64) -> serde_json::Value,
) -> HostileCount {
    let mut count = HostileCount::default();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.is_cancelled() {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let sent = http
            .post(format!("{base}/graphql"))
            .json(&body(count.sent))
            .send()
            .await;
        count.sent += 1;
        match sent {
            Ok(answer) if answer.status().is_success() => {
                let _ = answer.bytes().await;
            }
            _ => count.refused += 1,
        }
    }
    count
}

/// Keeps [`HELD`] connections open that each sent `opening` and nothing
/// more, opening another whenever the server closes one.
async fn hold(
    addr: std::net::SocketAddr,
    opening: Vec<u8>,
    stop: &CancellationToken,
) -> HostileCount {
    let (closed_tx, mut closed) = tokio::sync::mpsc::unbounded_channel();
    let tracker = TaskTracker::new();
    let mut count = HostileCount::default();
    let open = |count: &mut HostileCount| {
        count.sent += 1;
        let (opening, closed_tx, stop) = (opening.clone(), closed_tx.clone(), stop.clone());
        tracker.spawn(async move {
            let Ok(mut stream) = TcpStream::connect(addr).await else {
                let _ = closed_tx.send(());
                return;
            };
            if stream.write_all(&opening).await.is_err() {
                let _ = closed_tx.send(());
                return;
            }
            let mut sink = [0u8; 1024];
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    read = stream.read(&mut sink) => {
                        if matches!(read, Ok(0) | Err(_)) {
                            let _ = closed_tx.send(());
                            return;
                        }
                    }
                }
            }
        });
    };
    for _ in 0..HELD {
        open(&mut count);
    }
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            Some(()) = closed.recv() => {
                count.refused += 1;
                // Reopen at a bounded pace.
                tokio::time::sleep(Duration::from_millis(5)).await;
                open(&mut count);
            }
        }
    }
    tracker.close();
    tracker.wait().await;
    count
}
