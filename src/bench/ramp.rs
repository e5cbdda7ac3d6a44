//! Fan-out ramp: one action from an actor with F followers, for each F asked;
//! the time from `recordAction` to the action fanned out (its last feed item
//! stored), and the deliveries per second that makes.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::graph::follow_bulk;
use super::Bench;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RampPoint {
    pub followers: usize,
    /// Feed items written: the followers and the actor.
    pub deliveries: u64,
    pub secs: f64,
    pub deliveries_per_sec: f64,
}

fn reader_id(i: usize) -> String {
    format!("r{i}")
}

pub async fn run(bench: &Bench, sizes: &[usize]) -> anyhow::Result<Vec<RampPoint>> {
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable();
    let mut points = Vec::new();
    for followers in sizes {
        let actor = format!("ramp-{followers}");
        let edges = (0..followers).map(|i| (reader_id(i), actor.clone()));
        follow_bulk(
            bench,
            edges,
            followers,
            &format!("ramp: {followers} followers"),
        )
        .await?;

        let spinner = bench.ui.spinner(&format!("ramp: fan-out to {followers}"));
        let input = json!({ "descriptor": { "statusPost": { "text": "Hiring: five new positions open in Lisbon." } } });
        let started = Instant::now();
        let id = bench.client.record(&actor, &input).await?;
        let done = bench
            .client
            .wait_done(&[id], Duration::from_secs(600), |_| {})
            .await?;
        let secs = (done - started).as_secs_f64();
        spinner.finish_with_message(format!("ramp: {followers} followers in {secs:.3} s"));
        let deliveries = followers as u64 + 1;
        points.push(RampPoint {
            followers,
            deliveries,
            secs,
            deliveries_per_sec: deliveries as f64 / secs,
        });
    }
    Ok(points)
}
