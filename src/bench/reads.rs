//! Feed reads over HTTP: `feed(first: 25)` with actions, actors and
//! descriptors, by random load users, at each concurrency for `--duration`.
//! A response with GraphQL `errors` is a failure, not a page.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::client::Gql;
use super::graph::{self, Graph};
use super::stats::{Latencies, Rng, Summary};
use super::{Bench, BenchArgs};

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
    let body: PageResponse = client
        .send_as(user, false, FEED_QUERY, &json!({}))
        .await
        .map_err(|e| format!("{e:#}"))?;
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

/// The reference route's rate at `concurrency`, read as a feed page is.
async fn reference_rate(bench: &Bench, concurrency: usize, duration: Duration) -> f64 {
    let started = Instant::now();
    let until = started + duration;
    let tasks = (0..concurrency).map(|_| async move {
        let mut served = 0u64;
        while Instant::now() < until {
            let page: anyhow::Result<PageResponse> = bench
                .client
                .reference_as("reference", FEED_QUERY, &json!({}))
                .await;
            if page.is_ok_and(|p| p.data.and_then(|d| d.feed).is_some()) {
                served += 1;
            }
        }
        served
    });
    let served: u64 = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .sum();
    served as f64 / started.elapsed().as_secs_f64()
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
        let started = Instant::now();
        let until = started + args.duration;
        let tasks = (0..concurrency).map(|task| {
            let spinner = &spinner;
            async move {
                let mut rng = Rng::new(args.seed ^ ((concurrency as u64) << 20) ^ task as u64);
                let (mut latencies, mut failures, mut items) = (Latencies::default(), 0u64, 0u64);
                let mut first_failure = None;
                while Instant::now() < until {
                    let user = graph::user_id(rng.below(graph.users));
                    match read_page_items(&bench.client, &user).await {
                        Ok((latency, n)) => {
                            latencies.record(latency);
                            items += n as u64;
                            spinner.inc(1);
                        }
                        Err(why) => {
                            failures += 1;
                            first_failure.get_or_insert(why);
                        }
                    }
                }
                (latencies, failures, items, first_failure)
            }
        });
        let outcomes = futures_util::future::join_all(tasks).await;
        let secs = started.elapsed().as_secs_f64();
        let mut latencies = Latencies::default();
        let (mut failures, mut items) = (0, 0);
        for (l, f, i, why) in outcomes {
            latencies.extend(l);
            failures += f;
            items += i;
            if let Some(why) = why {
                bench.ui.say(&format!("reads: a page failed: {why}"));
            }
        }
        let pages = latencies.len() as u64;
        let latency = latencies.summary();
        let reference_per_sec = reference_rate(bench, concurrency, args.duration / 2).await;
        spinner.finish_with_message(format!(
            "reads: concurrency {concurrency}: {:.0} pages/s",
            pages as f64 / secs
        ));
        results.push(ReadsResult {
            concurrency,
            secs,
            pages,
            failures,
            items_per_page: if pages == 0 {
                0.0
            } else {
                items as f64 / pages as f64
            },
            pages_per_sec: pages as f64 / secs,
            latency,
            reference_per_sec,
            reference_bytes,
        });
    }
    Ok(results)
}
