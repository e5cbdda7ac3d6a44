//! `bench --relay`: what live delivery across processes costs. Two servers
//! share one MongoDB database, each with its own hub and relay, as two
//! processes would: A runs the API and the fan-out worker, B the API alone.
//! S subscribers on each follow one actor, who records through A; each
//! repeat times `recordAction` to the `ADDED` event at every subscriber.
//! On A the event is published where the worker ran; on B it arrives
//! through the events collection's change stream. The difference is what
//! crossing processes adds.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::client::{pong, subscribe_feed, Gql, Socket};
use super::stats::{Latencies, Summary};
use super::{fresh_database, TENANT};
use crate::config::ServeArgs;
use crate::server;

/// How long to wait for one event.
const PATIENCE: Duration = Duration::from_secs(30);
/// The actor everyone follows.
const ACTOR: &str = "relay-actor";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelayResult {
    /// Subscribers on each server.
    pub subscribers: usize,
    pub repeats: usize,
    /// `recordAction` to the event on the server that ran the fan-out.
    pub local: Summary,
    /// `recordAction` to the event on the other server (relayed).
    pub relayed: Summary,
    /// Median of what relaying added, per repeat (relayed − local, at the
    /// last subscriber of each).
    pub added_p50_ms: f64,
}

/// Runs the comparison on `serve.store` (a MongoDB URI), in a fresh database
/// dropped afterwards.
pub async fn run(
    serve: &ServeArgs,
    subscribers: usize,
    repeats: usize,
) -> anyhow::Result<RelayResult> {
    let url = match serve.store.as_deref() {
        Some(url) if url.starts_with("mongodb") => fresh_database(url),
        _ => anyhow::bail!(
            "--relay measures delivery between processes on MongoDB: give --store mongodb://…"
        ),
    };
    let mut options = serve.options()?;
    options.store = url.clone();
    options.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let a = server::start(options.clone()).await.context("server A")?;
    options.worker = None;
    let b = server::start(options).await.context("server B")?;
    let outcome = measure(a.addr, b.addr, subscribers, repeats).await;
    let stopped_a = a.stop().await;
    let stopped_b = b.stop().await;
    if let Ok(store) = crate::store::mongo::MongoStore::connect(&url, &Default::default()).await {
        let _ = store.database().drop().await;
    }
    stopped_a?;
    stopped_b?;
    outcome
}

async fn measure(
    a: std::net::SocketAddr,
    b: std::net::SocketAddr,
    subscribers: usize,
    repeats: usize,
) -> anyhow::Result<RelayResult> {
    let (gql_a, gql_b) = (Gql::new(a, TENANT)?, Gql::new(b, TENANT)?);
    gql_a
        .data(
            ACTOR,
            false,
            "mutation($u: ID!) { upsertUser(input: {userId: $u, name: \"Relay actor\"}) { id } }",
            &json!({ "u": ACTOR }),
        )
        .await?;
    let mut sockets = Vec::new();
    for (side, gql) in [(0, &gql_a), (1, &gql_b)] {
        for i in 0..subscribers {
            let user = format!("relay-{side}-{i}");
            gql.data(
                &user,
                false,
                "mutation($u: ID!) { follow(userId: $u) }",
                &json!({ "u": ACTOR }),
            )
            .await?;
            sockets.push((side, subscribe_feed(&gql.ws_url(), TENANT, &user).await?));
        }
    }
    for gql in [&gql_a, &gql_b] {
        let deadline = Instant::now() + PATIENCE;
        while gql.live_topics().await? < subscribers as u64 {
            anyhow::ensure!(Instant::now() < deadline, "subscriptions never registered");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let (mut local, mut relayed) = (Latencies::default(), Latencies::default());
    let mut added = Vec::new();
    for n in 0..repeats {
        let started = Instant::now();
        let input = json!({ "descriptor": { "statusPost": { "text": format!("relay {n}") } } });
        let id = gql_a.record(ACTOR, &input).await?;
        let mut last = [Duration::ZERO; 2];
        for (side, socket) in &mut sockets {
            next_added(socket, &id).await?;
            let took = started.elapsed();
            last[*side] = last[*side].max(took);
            if *side == 0 {
                local.record(took);
            } else {
                relayed.record(took);
            }
        }
        added.push(last[1].as_secs_f64() * 1000.0 - last[0].as_secs_f64() * 1000.0);
    }
    added.sort_by(f64::total_cmp);
    Ok(RelayResult {
        subscribers,
        repeats,
        local: local.summary(),
        relayed: relayed.summary(),
        added_p50_ms: added.get(added.len() / 2).copied().unwrap_or(0.0),
    })
}

/// Reads until the `ADDED` event of action `id`.
async fn next_added(socket: &mut Socket, id: &str) -> anyhow::Result<()> {
    loop {
        let message = tokio::time::timeout(PATIENCE, socket.next())
            .await
            .context("no event in time")?
            .context("the server closed the socket")??;
        let Message::Text(text) = message else {
            continue;
        };
        if text.contains("\"ping\"") {
            pong(socket).await?;
            continue;
        }
        anyhow::ensure!(!text.contains("\"errors\""), "subscription error: {text}");
        if text.contains(id) && text.contains("ADDED") {
            return Ok(());
        }
    }
}

/// The result as a Markdown table.
pub fn markdown(result: &RelayResult) -> String {
    let row = |name: &str, s: &Summary| {
        format!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} |\n",
            s.count, s.p50_ms, s.p99_ms, s.max_ms
        )
    };
    format!(
        "| subscriber on | events | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n{}{}\n\
         {} subscribers on each of two servers, {} actions; relaying added {:.1} ms at the median.\n",
        row("the process that fanned out", &result.local),
        row("another process (relayed)", &result.relayed),
        result.subscribers,
        result.repeats,
        result.added_p50_ms,
    )
}
