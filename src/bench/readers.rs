//! Who reads in the reads workload: readers whose feeds fill a page, known
//! from the graph and the load's actions before anyone reads, split into
//! warm readers (read once before they are measured) and, for each
//! concurrency, cold ones (dormant until their measured first page).

use super::graph::{self, Graph};
use super::stats::Rng;

/// Items a feed page asks for (`feed(first: 25)`).
pub const PAGE: usize = 25;

/// Warm readers, at most: few enough that a river build is queued for
/// each at once (below the builds queue's bound) when they first read.
const WARM: usize = 1_000;

/// Below this many readers with full feeds (a toy run), every reader
/// takes part, fullest first.
const FEWEST: usize = 64;

/// The readers of a run, as user ids.
#[derive(Clone, Debug, Default)]
pub struct Readers {
    /// Read before they are measured, then drawn at random.
    pub warm: Vec<String>,
    /// For each concurrency, in order: read once each, dormant until then.
    pub cold: Vec<Vec<String>>,
    /// How many readers' feeds fill a page, of all the users.
    pub full: usize,
}

impl Readers {
    /// The readers of `graph` after `actions` (the load's actors, in
    /// order; none if it did not run), for `concurrencies`: those whose
    /// feed holds more than a page (own actions and those of everyone they
    /// follow), in a seeded order, a quarter of them (at most [`WARM`])
    /// warm and the rest cold, split evenly between the concurrencies.
    pub fn choose(graph: &Graph, actors: &[usize], concurrencies: usize, seed: u64) -> Readers {
        let mut own = vec![0u64; graph.users];
        for &actor in actors {
            own[actor] += 1;
        }
        let mut items = own.clone();
        for &(follower, followed) in &graph.edges {
            items[follower as usize] += own[followed as usize];
        }
        let mut chosen: Vec<usize> = (0..graph.users)
            .filter(|&u| items[u] > PAGE as u64)
            .collect();
        let full = chosen.len();
        if full < FEWEST {
            chosen = (0..graph.users).collect();
            chosen.sort_by_key(|&u| std::cmp::Reverse(items[u]));
        }
        let mut rng = Rng::new(seed ^ 0x0ead_e125);
        for i in (1..chosen.len()).rev() {
            chosen.swap(i, rng.below(i + 1));
        }
        let mut ids = chosen.into_iter().map(graph::user_id);
        let warm = (full.max(FEWEST) / 4).min(WARM).min(ids.len() / 2).max(1);
        let warm: Vec<String> = ids.by_ref().take(warm).collect();
        let rest: Vec<String> = ids.collect();
        let each = rest.len() / concurrencies.max(1);
        let cold = (0..concurrencies)
            .map(|n| rest[n * each..(n + 1) * each].to_vec())
            .collect();
        Readers { warm, cold, full }
    }
}

/// Operations the server ran, by executor, from its `/metrics`
/// (`riverfeed_graphql_executions_total`); none where it does not count
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Executions {
    pub planned: u64,
    pub fallback: u64,
}

impl Executions {
    /// Read from a `/metrics` text.
    pub fn of(metrics: &str) -> Executions {
        let mut counted = Executions::default();
        for line in metrics.lines() {
            let Some(labels) = line.strip_prefix("riverfeed_graphql_executions_total{") else {
                continue;
            };
            let Some((labels, value)) = labels.rsplit_once("} ") else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            if labels.contains("executor=\"planned\"") {
                counted.planned += value as u64;
            } else if labels.contains("executor=\"fallback\"") {
                counted.fallback += value as u64;
            }
        }
        counted
    }

    /// What was counted since `before`.
    pub fn since(self, before: Executions) -> Executions {
        Executions {
            planned: self.planned.saturating_sub(before.planned),
            fallback: self.fallback.saturating_sub(before.fallback),
        }
    }

    /// The planned share of all of them (0 where none were counted).
    pub fn planned_share(&self) -> f64 {
        let all = self.planned + self.fallback;
        if all == 0 {
            0.0
        } else {
            self.planned as f64 / all as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_have_full_feeds_and_none_is_read_twice() {
        let graph = Graph::generate(2_000, 100, 7);
        let mut rng = Rng::new(1);
        let actors: Vec<usize> = (0..4_000).map(|_| rng.below(graph.users)).collect();
        let readers = Readers::choose(&graph, &actors, 2, 3);
        assert!(readers.full >= FEWEST, "{}", readers.full);
        assert_eq!(readers.warm.len(), readers.full / 4);
        assert_eq!(readers.cold.len(), 2);
        let mut all: Vec<&String> = readers
            .warm
            .iter()
            .chain(readers.cold.iter().flatten())
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a reader in two sets");
    }

    #[test]
    fn executions_are_read_by_executor() {
        let text = "# TYPE riverfeed_graphql_executions counter\n\
            riverfeed_graphql_executions_total{name=\"Feed\",executor=\"planned\"} 30\n\
            riverfeed_graphql_executions_total{name=\"\",executor=\"fallback\"} 10\n\
            riverfeed_graphql_executions_total{name=\"Me\",executor=\"planned\"} 20\n";
        let counted = Executions::of(text);
        assert_eq!(
            counted,
            Executions {
                planned: 50,
                fallback: 10
            }
        );
        assert!((counted.planned_share() - 50.0 / 60.0).abs() < 1e-9);
        assert_eq!(Executions::of("").planned_share(), 0.0);
    }
}
