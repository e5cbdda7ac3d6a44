//! Models: the same load on each feed model, side by side, as Socialite
//! compared its models. Per model, on a fresh store: the follow graph plus
//! one star followed by `--star-followers`; the active readers (all but
//! `--dormant` of them) read their feed once, so the models that keep
//! timelines for active readers have them; then the load. Measured:
//! deliveries written per action and per second, feed items stored and
//! store bytes per user, the first page of a dormant reader (a river built
//! in `rivers`), active readers' pages at concurrency 1 and 16, and the
//! star's action: until its fan-out is done, and until a live follower
//! sees it.

use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::{stream, SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::client::{pong, subscribe_feed, Socket};
use super::graph::{self, follow_bulk, Graph};
use super::reads::read_page;
use super::stats::{Latencies, Summary};
use super::{Bench, BenchArgs, TENANT};
use crate::rng::Rng;
use crate::timeline::FeedModel;

/// Concurrent `recordAction` calls of the load.
const CONCURRENCY: usize = 32;
/// Dormant readers whose first page is timed.
const DORMANT_SAMPLE: usize = 200;
/// Concurrency of the warm-up reads by active readers.
const WARM_UP: usize = 16;
/// Actions by the star, each timed.
const STAR_REPEATS: usize = 5;
/// How long to wait for the star's event.
const PATIENCE: Duration = Duration::from_secs(120);

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelResult {
    pub model: String,
    /// Users in the graph, the star's followers included.
    pub users: usize,
    pub dormant_percent: u32,
    pub actions: usize,
    /// Feed items written by the load's fan-outs.
    pub deliveries: u64,
    pub deliveries_per_action: f64,
    pub deliveries_per_sec: f64,
    /// Feed items stored at the end, and the store's bytes.
    pub feed_items: u64,
    pub store_bytes: u64,
    pub bytes_per_user: f64,
    /// A dormant reader's first page (a river built, in `rivers`).
    pub dormant_first_page: Summary,
    /// Active readers' pages at concurrency 1 and 16.
    pub active_c1: Summary,
    pub active_c16: Summary,
    pub active_c16_pages_per_sec: f64,
    pub star_followers: usize,
    /// `recordAction` by the star until its fan-out is done.
    pub star_done: Summary,
    /// `recordAction` by the star until a live follower has the event.
    pub star_seen: Summary,
}

/// Whether graph user `i` is dormant: never reads (a fixed draw per user,
/// splitmix64's finaliser of the index).
fn dormant(i: usize, percent: u32) -> bool {
    let mut z = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z % 100 < u64::from(percent)
}

/// Runs the comparison on a started bench under `model`.
pub async fn run(
    bench: &Bench,
    args: &BenchArgs,
    model: &FeedModel,
) -> anyhow::Result<ModelResult> {
    let name = model.kind.name();
    let ui = bench.ui;
    let graph = Graph::generate(args.users, args.max_follows, args.seed);
    graph::load_follows(bench, &graph).await?;
    let star = "star".to_owned();
    let watcher = "star-watcher".to_owned();
    let fans = args.star_followers;
    follow_bulk(
        bench,
        (0..fans)
            .map(|i| (format!("fan{i}"), star.clone()))
            .chain([(watcher.clone(), star.clone())]),
        fans + 1,
        &format!("{name}: star followers"),
    )
    .await?;

    let active: Vec<usize> = (0..graph.users)
        .filter(|&i| !dormant(i, args.dormant))
        .collect();
    let sleepers: Vec<usize> = (0..graph.users)
        .filter(|&i| dormant(i, args.dormant))
        .collect();
    // Active readers have read lately.
    let bar = ui.bar(active.len() as u64, &format!("{name}: active readers"));
    let client = &bench.client;
    let warmed: Vec<Result<Duration, String>> = stream::iter(&active)
        .map(|&i| {
            let bar = &bar;
            async move {
                let done = read_page(client, &graph::user_id(i)).await;
                bar.inc(1);
                done
            }
        })
        .buffer_unordered(WARM_UP)
        .collect()
        .await;
    bar.finish();
    if let Some(Err(err)) = warmed.into_iter().find(Result::is_err) {
        anyhow::bail!("{name}: an active reader's page failed: {err}");
    }

    // The load.
    let before = bench.footprint().await?;
    let plan = super::load::plan(&graph, args.actions, args.seed ^ 0x0de1);
    let bar = ui.bar(plan.len() as u64, &format!("{name}: recordAction"));
    let started = Instant::now();
    let ids: Vec<anyhow::Result<String>> = stream::iter(plan)
        .map(|(actor, input)| {
            let bar = &bar;
            async move {
                let id = client.record(&graph::user_id(actor), &input).await;
                bar.inc(1);
                id
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    bar.finish();
    let ids: Vec<String> = ids.into_iter().collect::<anyhow::Result<_>>()?;
    let bar = ui.bar(ids.len() as u64, &format!("{name}: fan-out"));
    let finished = client
        .wait_done(&ids, Duration::from_secs(3600), |_| bar.inc(1))
        .await?;
    bar.finish();
    let delivered_secs = (finished - started).as_secs_f64();
    let after = bench.footprint().await?;
    let deliveries = after.feed_items.saturating_sub(before.feed_items);

    // Dormant readers come back: each reads once.
    let mut dormant_pages = Latencies::default();
    let spinner = ui.spinner(&format!("{name}: dormant first pages"));
    for &i in sleepers
        .iter()
        .step_by((sleepers.len() / DORMANT_SAMPLE).max(1))
    {
        let took = read_page(client, &graph::user_id(i))
            .await
            .map_err(|e| anyhow::anyhow!("{name}: a dormant reader's page failed: {e}"))?;
        dormant_pages.record(took);
        spinner.inc(1);
    }
    spinner.finish();

    let (active_c1, _) = active_reads(bench, args, &active, 1, name).await?;
    let (active_c16, c16_rate) = active_reads(bench, args, &active, 16, name).await?;
    let (star_done, star_seen) = star_actions(bench, &star, &watcher, name).await?;
    let end = bench.footprint().await?;
    let users = graph.users + fans + 1;
    Ok(ModelResult {
        model: name.to_owned(),
        users,
        dormant_percent: args.dormant,
        actions: ids.len(),
        deliveries,
        deliveries_per_action: deliveries as f64 / ids.len().max(1) as f64,
        deliveries_per_sec: deliveries as f64 / delivered_secs.max(1e-9),
        feed_items: end.feed_items,
        store_bytes: end.bytes,
        bytes_per_user: end.bytes as f64 / users as f64,
        dormant_first_page: dormant_pages.summary(),
        active_c1,
        active_c16,
        active_c16_pages_per_sec: c16_rate,
        star_followers: fans,
        star_done,
        star_seen,
    })
}

/// Active readers' pages for `--duration` at `concurrency`: latencies and
/// pages per second.
async fn active_reads(
    bench: &Bench,
    args: &BenchArgs,
    active: &[usize],
    concurrency: usize,
    name: &str,
) -> anyhow::Result<(Summary, f64)> {
    anyhow::ensure!(!active.is_empty(), "no active readers: lower --dormant");
    let spinner = bench
        .ui
        .spinner(&format!("{name}: active pages c={concurrency}"));
    let started = Instant::now();
    let until = started + args.duration;
    let client = &bench.client;
    let spinner_ref = &spinner;
    let runs = (0..concurrency).map(|lane| async move {
        let mut rng = Rng::new(0xace ^ lane as u64);
        let mut latencies = Latencies::default();
        while Instant::now() < until {
            let user = graph::user_id(active[rng.below(active.len())]);
            let took = read_page(client, &user)
                .await
                .map_err(|e| anyhow::anyhow!("{name}: an active page failed: {e}"))?;
            latencies.record(took);
            spinner_ref.inc(1);
        }
        anyhow::Ok(latencies)
    });
    let mut all = Latencies::default();
    for lane in futures_util::future::join_all(runs).await {
        all.extend(lane?);
    }
    spinner.finish();
    let rate = all.len() as f64 / started.elapsed().as_secs_f64();
    Ok((all.summary(), rate))
}

/// The star records actions while a follower listens: per action, the time
/// until its fan-out is done and until the follower has the event.
async fn star_actions(
    bench: &Bench,
    star: &str,
    watcher: &str,
    name: &str,
) -> anyhow::Result<(Summary, Summary)> {
    let client = &bench.client;
    let topics = client.live_topics().await?;
    let mut socket = subscribe_feed(&client.ws_url(), TENANT, watcher).await?;
    let registered = Instant::now() + PATIENCE;
    while client.live_topics().await? <= topics {
        anyhow::ensure!(
            Instant::now() < registered,
            "the star's follower did not subscribe"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let bar = bench
        .ui
        .bar(STAR_REPEATS as u64, &format!("{name}: the star acts"));
    let (mut done, mut seen) = (Latencies::default(), Latencies::default());
    for n in 0..STAR_REPEATS {
        let input = json!({ "descriptor": { "statusPost": { "text": format!("Town hall at noon ({n}).") } } });
        let sent = Instant::now();
        let id = client.record(star, &input).await?;
        let (finished, arrived) = tokio::join!(
            client.wait_done(std::slice::from_ref(&id), PATIENCE, |_| {}),
            added(&mut socket, &id),
        );
        done.record(finished?.duration_since(sent));
        seen.record(arrived?.duration_since(sent));
        bar.inc(1);
    }
    bar.finish();
    socket.send(Message::Close(None)).await.ok();
    Ok((done.summary(), seen.summary()))
}

/// Waits for the `ADDED` event of `id` on the socket; when it came.
async fn added(socket: &mut Socket, id: &str) -> anyhow::Result<Instant> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let message = tokio::time::timeout_at(deadline, socket.next())
            .await
            .context("the star's action never reached its live follower")?;
        match message {
            Some(Ok(Message::Text(text))) if text.contains("\"ping\"") => pong(socket).await?,
            Some(Ok(Message::Text(text))) if text.contains(id) && text.contains("ADDED") => {
                return Ok(Instant::now())
            }
            Some(Ok(_)) => {}
            Some(Err(err)) => return Err(err.into()),
            None => anyhow::bail!("the server closed the star follower's socket"),
        }
    }
}

/// The models asked for, with the flags' settings.
pub fn models(args: &BenchArgs, base: FeedModel) -> Vec<FeedModel> {
    args.models
        .iter()
        .map(|&kind| FeedModel { kind, ..base })
        .collect()
}
