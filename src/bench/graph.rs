//! The data the workloads share: a Zipf follow graph over the load users, a
//! realistic mix of descriptors, and bulk loading of follow edges.

use futures_util::{stream, StreamExt, TryStreamExt};
use serde_json::{json, Value};

use super::stats::{Rng, Zipf};
use super::{Bench, TENANT};
use crate::model::EdgeKind;
use crate::store::Graph as _;

/// Edges written per bulk call (one store transaction when embedded).
const EDGE_CHUNK: usize = 50_000;

/// Users `u0..uN`; who follows whom. Popularity is Zipf over user rank (user
/// 0 the most followed), and so is how many users each one follows.
pub struct Graph {
    pub users: usize,
    /// `(follower, followed)` pairs, no duplicates, no self-follows.
    pub edges: Vec<(u32, u32)>,
    /// Followers of each user.
    pub followers: Vec<u32>,
    /// Draws users by popularity (for actors of the sustained workload).
    pub popularity: Zipf,
}

pub fn user_id(i: usize) -> String {
    format!("u{i}")
}

impl Graph {
    pub fn generate(users: usize, max_follows: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let popularity = Zipf::new(users, 1.0);
        let follow_count = Zipf::new(max_follows.clamp(1, users - 1), 1.0);
        let mut edges = Vec::new();
        let mut followers = vec![0u32; users];
        let mut chosen = std::collections::HashSet::new();
        for follower in 0..users {
            let want = follow_count.sample(&mut rng) + 1;
            chosen.clear();
            // Popular users are drawn again and again: give up on a user
            // after a bounded number of tries rather than loop forever.
            let mut tries = 0;
            while chosen.len() < want && tries < want * 20 {
                tries += 1;
                let followed = popularity.sample(&mut rng);
                if followed != follower && chosen.insert(followed) {
                    edges.push((follower as u32, followed as u32));
                    followers[followed] += 1;
                }
            }
        }
        Self {
            users,
            edges,
            followers,
            popularity,
        }
    }

    /// Readers of an action by `actor` (its followers and the actor itself).
    pub fn audience(&self, actor: usize) -> u64 {
        self.followers[actor] as u64 + 1
    }
}

/// Writes the load graph's follow edges, with a progress bar.
pub async fn load_follows(bench: &Bench, graph: &Graph) -> anyhow::Result<()> {
    let edges = graph
        .edges
        .iter()
        .map(|&(from, to)| (user_id(from as usize), user_id(to as usize)));
    follow_bulk(bench, edges, graph.edges.len(), "setup: follow graph").await
}

/// Adds follow edges `(follower, followed)` in bulk: straight into the
/// embedded store in large transactions, or many calls at once on MongoDB.
pub async fn follow_bulk(
    bench: &Bench,
    edges: impl Iterator<Item = (String, String)>,
    len: usize,
    message: &str,
) -> anyhow::Result<()> {
    let bar = bench.ui.bar(len as u64, message);
    let mut edges = edges.peekable();
    while edges.peek().is_some() {
        let chunk: Vec<(String, String)> = edges.by_ref().take(EDGE_CHUNK).collect();
        let n = chunk.len() as u64;
        match &bench.embedded {
            Some(store) => store.follow_many(TENANT, chunk).await?,
            None => {
                let store = bench.store.as_ref();
                stream::iter(chunk)
                    .map(|(from, to)| async move {
                        store
                            .set_edge(TENANT, EdgeKind::Follows, &from, &to, true)
                            .await
                    })
                    .buffer_unordered(32)
                    .try_collect::<Vec<_>>()
                    .await?;
            }
        }
        bar.inc(n);
    }
    bar.finish();
    Ok(())
}

/// Applicants and positions the recruiting descriptors refer to.
const APPLICANTS: usize = 5_000;
const POSITIONS: usize = 200;
const NAMES: [&str; 8] = [
    "Mary Fanning",
    "John Okafor",
    "Rita Sousa",
    "Ada Lindqvist",
    "Kenji Mori",
    "Lena Novak",
    "Omar Haddad",
    "Priya Raman",
];
const ROLES: [&str; 5] = [
    "Senior Software Engineer",
    "Product Designer",
    "Data Analyst",
    "Site Reliability Engineer",
    "Recruiter",
];

/// A `RecordActionInput` for `actor`, drawn from a mix like a recruiting
/// tenant's: status posts 40%, ratings 25%, new applicants 15%, rating
/// requests 12%, hires 8%.
pub fn action_input(rng: &mut Rng, actor: &str, serial: usize) -> Value {
    let applicant = format!("applicant-{}", rng.below(APPLICANTS));
    let position = format!("position-{}", rng.below(POSITIONS));
    let applicant_name = NAMES[rng.below(NAMES.len())];
    let position_name = ROLES[rng.below(ROLES.len())];
    let actor_name = format!("User {actor}");
    let roll = rng.below(100);
    let descriptor = if roll < 40 {
        json!({ "statusPost": { "text": format!("Update #{serial}: interviews went well today, more candidates next week.") } })
    } else if roll < 65 {
        json!({ "applicationRating": {
            "raterId": actor, "raterName": actor_name,
            "positionId": position, "positionName": position_name,
            "applicantId": applicant, "applicantName": applicant_name,
            "ratingScore": (rng.below(11) as f64) / 2.0,
            "ratingText": "Clear communicator; strong system design.",
        } })
    } else if roll < 80 {
        json!({ "newApplicant": {
            "applicantId": applicant, "applicantName": applicant_name,
            "positionId": position, "positionName": position_name,
        } })
    } else if roll < 92 {
        json!({ "applicantRatingRequested": {
            "applicantId": applicant, "applicantName": applicant_name,
            "positionId": position, "positionName": position_name,
            "raterId": format!("u{}", rng.below(1000)), "raterName": "A Colleague",
            "requestedById": actor, "requestedByName": actor_name,
        } })
    } else {
        json!({ "applicantHired": {
            "applicantId": applicant, "applicantName": applicant_name,
            "positionId": position, "positionName": position_name,
            "hiredById": actor, "hiredByName": actor_name,
        } })
    };
    let ref_ids = if roll < 40 {
        json!([])
    } else {
        json!([applicant, position])
    };
    json!({ "descriptor": descriptor, "refIds": ref_ids })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_graph_has_no_self_or_repeated_follows_and_counts_followers() {
        let graph = Graph::generate(500, 50, 1);
        let mut seen = std::collections::HashSet::new();
        for &(from, to) in &graph.edges {
            assert_ne!(from, to);
            assert!(seen.insert((from, to)), "repeated edge {from}->{to}");
        }
        let total: u64 = graph.followers.iter().map(|&f| f as u64).sum();
        assert_eq!(total, graph.edges.len() as u64);
        // Zipf popularity: the first user is the most followed.
        assert_eq!(graph.followers.iter().max(), Some(&graph.followers[0]));
    }

    #[test]
    fn every_descriptor_of_the_mix_appears() {
        let mut rng = Rng::new(3);
        let kinds: std::collections::HashSet<String> = (0..1000)
            .map(|i| {
                let input = action_input(&mut rng, "u1", i);
                let descriptor = input["descriptor"].as_object().expect("object").clone();
                descriptor.keys().next().expect("one key").clone()
            })
            .collect();
        assert_eq!(kinds.len(), 5, "{kinds:?}");
    }
}
