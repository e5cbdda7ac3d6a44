//! Live: S websocket subscribers (graphql-transport-ws, one connection each,
//! subscribed to `feedEvents`) who all follow one actor; that actor records
//! an action, and we time `recordAction` to the `ADDED` event reaching the
//! last subscriber, over several repeats. Also the resident memory each idle
//! subscriber costs the server.
//!
//! The subscribers live in a child process (`riverfeed live-subscribers`), so
//! that this process holds only the server: its resident set before and after
//! they connect is the server's cost alone, and each process needs open files
//! for one end of every connection, not both. The child reports each event's
//! arrival as wall-clock time, which both processes read from the same clock.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use futures_util::{stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::client::{pong, subscribe_feed, Socket};
use super::graph::follow_bulk;
use super::stats::{raise_fd_limit, resident_bytes, Latencies, Summary};
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
    /// The server's resident memory per idle subscriber.
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

/// Flags of the hidden `live-subscribers` command.
#[derive(Clone, Debug, clap::Args)]
pub struct SubscribersArgs {
    /// The server's websocket endpoint.
    #[arg(long)]
    pub url: String,
    #[arg(long)]
    pub tenant: String,
    /// Subscribers are users `<prefix>0` to `<prefix><count - 1>`.
    #[arg(long)]
    pub user_prefix: String,
    #[arg(long)]
    pub count: usize,
}

pub async fn run(bench: &Bench, args: &BenchArgs) -> anyhow::Result<Vec<LiveResult>> {
    let mut results = Vec::new();
    for &subscribers in &args.live {
        results.push(one_size(bench, args, subscribers, args.live_repeats.max(1)).await?);
    }
    Ok(results)
}

async fn one_size(
    bench: &Bench,
    args: &BenchArgs,
    size: usize,
    repeats: usize,
) -> anyhow::Result<LiveResult> {
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
    let started = std::time::Instant::now();
    let program = args.client_program()?;
    let mut child = spawn_subscribers(
        &program,
        &bench.client.ws_url(),
        &format!("live{size}-"),
        size,
    )?;
    let mut lines = BufReader::new(child.stdout.take().context("subscriber output")?).lines();
    loop {
        match next_line(&mut lines, &mut child).await?.as_str() {
            "connected" => bar.inc(1),
            "ready" => break,
            other => anyhow::bail!("unexpected line from the subscriber process: {other}"),
        }
    }
    bar.finish();
    let registered = std::time::Instant::now() + PATIENCE;
    while bench.client.live_topics().await? < base_topics + size as u64 {
        anyhow::ensure!(
            std::time::Instant::now() < registered,
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
        let sent = micros_now();
        let id = bench.client.record(&actor, &input).await?;
        let mut latest = sent;
        let mut got = 0;
        while got < size {
            let line = match tokio::time::timeout(PATIENCE, next_line(&mut lines, &mut child)).await
            {
                Ok(line) => line?,
                Err(_) => break,
            };
            let at: u64 = line
                .strip_prefix("added ")
                .and_then(|at| at.parse().ok())
                .with_context(|| format!("unexpected line from the subscriber process: {line}"))?;
            got += 1;
            each.record(Duration::from_micros(at.saturating_sub(sent)));
            latest = latest.max(at);
        }
        missed += (size - got) as u64;
        last.record(Duration::from_micros(latest - sent));
        bench
            .client
            .wait_done(&[id], Duration::from_secs(600), |_| {})
            .await?;
        bar.inc(1);
    }
    bar.finish();

    // Closing its input tells the subscriber process to hang up and exit.
    drop(child.stdin.take());
    if tokio::time::timeout(PATIENCE, child.wait()).await.is_err() {
        child.kill().await.ok();
    }
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

/// Starts `program live-subscribers` for `count` users.
pub(super) fn spawn_subscribers(
    program: &Path,
    url: &str,
    prefix: &str,
    count: usize,
) -> anyhow::Result<Child> {
    Command::new(program)
        .arg("live-subscribers")
        .args(["--url", url, "--tenant", TENANT, "--user-prefix", prefix])
        .args(["--count", &count.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start the subscriber process {}", program.display()))
}

/// The subscriber process's next line; its exit, before it was asked to, is
/// an error.
pub(super) async fn next_line(
    lines: &mut tokio::io::Lines<BufReader<ChildStdout>>,
    child: &mut Child,
) -> anyhow::Result<String> {
    match lines.next_line().await? {
        Some(line) => Ok(line),
        None => {
            let status = child.wait().await?;
            anyhow::bail!("the subscriber process ended early ({status})")
        }
    }
}

/// Wall-clock microseconds: comparable between the two processes.
fn micros_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The subscriber process: opens `count` subscriptions, printing `connected`
/// for each and `ready` once all are open, then `added <µs>` for every `ADDED`
/// event as it arrives. It hangs up and exits when its input closes.
pub async fn subscribers(args: &SubscribersArgs) -> anyhow::Result<()> {
    let wanted = args.count as u64 + 256;
    let fds = raise_fd_limit(wanted);
    anyhow::ensure!(
        fds >= wanted,
        "{} subscribers need {wanted} open files but the limit is {fds}",
        args.count
    );
    let mut out = BufWriter::new(tokio::io::stdout());
    let (connected, mut connecting) = mpsc::unbounded_channel();
    let open = stream::iter(0..args.count)
        .map(move |i| {
            let (user, connected) = (format!("{}{i}", args.user_prefix), connected.clone());
            async move {
                let socket = subscribe_feed(&args.url, &args.tenant, &user).await;
                let _ = connected.send(());
                socket
            }
        })
        .buffer_unordered(CONNECTING)
        .collect::<Vec<_>>();
    // Every attempt reports once, whether it connected or failed.
    let report = async {
        for _ in 0..args.count {
            if connecting.recv().await.is_none() {
                break;
            }
            out.write_all(b"connected\n").await?;
            out.flush().await?;
        }
        anyhow::Ok(())
    };
    let (sockets, reported) = tokio::join!(open, report);
    reported?;

    let stop = CancellationToken::new();
    let tracker = TaskTracker::new();
    let (arrivals, mut arrived) = mpsc::unbounded_channel();
    for socket in sockets {
        tracker.spawn(listen(socket?, arrivals.clone(), stop.clone()));
    }
    drop(arrivals);
    out.write_all(b"ready\n").await?;
    out.flush().await?;

    let mut input = tokio::io::stdin();
    let mut sink = [0u8; 64];
    loop {
        tokio::select! {
            read = input.read(&mut sink) => {
                if matches!(read, Ok(0) | Err(_)) {
                    break;
                }
            }
            at = arrived.recv() => {
                let Some(at) = at else { break };
                out.write_all(format!("added {at}\n").as_bytes()).await?;
                while let Ok(at) = arrived.try_recv() {
                    out.write_all(format!("added {at}\n").as_bytes()).await?;
                }
                out.flush().await?;
            }
        }
    }
    stop.cancel();
    tracker.close();
    tracker.wait().await;
    Ok(())
}

/// Reads one subscriber's socket: reports the arrival time of every `ADDED`
/// event, answers pings, and closes when told to stop.
async fn listen(mut socket: Socket, arrivals: mpsc::UnboundedSender<u64>, stop: CancellationToken) {
    loop {
        let message = tokio::select! {
            _ = stop.cancelled() => break,
            message = socket.next() => message,
        };
        match message {
            Some(Ok(Message::Text(text))) => {
                if text.contains("\"ADDED\"") {
                    let _ = arrivals.send(micros_now());
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
