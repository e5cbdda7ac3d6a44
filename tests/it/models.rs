//! One contract, four models: the same random history (actions of every
//! scope, some sent to a team, follows of users and of teams with and
//! without backfill, unfollows with and without their history,
//! friendships, moves from one team to the other, changes of scope,
//! comments that bump, hidden items and actions) played against a server
//! per feed model, and every reader's whole feed, paged to the end, must be
//! the same under all of them: the same actions, in the same order, at the
//! same relevancy, for the same reason. Paged backwards it is the same
//! feed, and another tenant's actions never show.

use std::sync::Arc;

use riverfeed::clock::{Clock, ManualClock};
use riverfeed::events::Hub;
use riverfeed::fanout::{Worker, WorkerConfig};
use riverfeed::rng::Rng;
use riverfeed::server::ServeOptions;
use riverfeed::store::Store;
use riverfeed::timeline::{FeedModel, FeedModelKind};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::common::{store_url, Backend, Client, Stopped, TestServer};

const TENANT: &str = "acme";
/// Another tenant, with the same user and group ids.
const OTHER_TENANT: &str = "globex";
const USERS: usize = 9;
/// Steps of the history: fewer on MongoDB, where each costs more.
fn steps(backend: Backend) -> usize {
    match backend {
        Backend::Embedded => 260,
        Backend::Mongo(_) => 50,
    }
}
const START: i64 = crate::common::CLOCK_START;

/// One model's server, driven by hand: its worker runs when the test says.
struct Deployment {
    model: FeedModelKind,
    server: TestServer,
    worker: Worker,
    clock: Arc<ManualClock>,
    /// The actions recorded, by their index in the history.
    actions: Vec<String>,
}

fn model(kind: FeedModelKind) -> FeedModel {
    FeedModel {
        // Small rivers, so reads cross from river to sources often.
        river_size: 4,
        // Anyone followed by more than two is a celebrity.
        celebrity_threshold: 2,
        ..FeedModel::of(kind)
    }
}

impl Deployment {
    async fn start(backend: Backend, kind: FeedModelKind) -> Option<Self> {
        let backend = match backend {
            Backend::Mongo(_) => Backend::Mongo(kind.name()),
            embedded => embedded,
        };
        let (store, dir) = store_url(backend)?;
        let clock = Arc::new(ManualClock::new(START));
        Some(Self::open(Stopped { store, dir }, kind, clock, Vec::new()).await)
    }

    async fn open(
        stopped: Stopped,
        kind: FeedModelKind,
        clock: Arc<ManualClock>,
        actions: Vec<String>,
    ) -> Self {
        let server = TestServer::start_with(stopped, |url| ServeOptions {
            worker: None,
            model: model(kind),
            clock: clock.clone(),
            ..ServeOptions::new(url)
        })
        .await;
        let store: Arc<dyn Store> = server.server.metered.clone();
        // The model as the server runs it (push after a pulling model still
        // pulls the history below the switch).
        let running =
            riverfeed::timeline::feed_model::start(store.as_ref(), model(kind), clock.now())
                .await
                .expect("the model as it runs");
        let worker = Worker::new(
            store,
            Hub::new(16),
            clock.clone(),
            WorkerConfig {
                id: format!("w-{kind}"),
                model: running,
                ..WorkerConfig::default()
            },
            Arc::new(Notify::new()),
        );
        Self {
            model: kind,
            server,
            worker,
            clock,
            actions,
        }
    }

    /// The same store, restarted under another model.
    async fn restart(self, kind: FeedModelKind) -> Self {
        let Deployment {
            server,
            worker,
            clock,
            actions,
            ..
        } = self;
        // The worker holds the store open too.
        drop(worker);
        let stopped = server.stop_keeping_data().await;
        Self::open(stopped, kind, clock, actions).await
    }

    fn user(&self, n: usize) -> Client {
        self.server.client(TENANT, &format!("u{n}"))
    }

    async fn settle(&self) {
        // The rivers reads asked for first, as they stand when a step
        // begins: each run plays the same.
        self.server.rivers_settled().await;
        while self.worker.run_once().await.expect("worker") > 0 {}
        self.clock.advance(1_000);
    }
}

/// One step of the history.
#[derive(Clone, Debug)]
enum Step {
    Post {
        by: usize,
        scope: &'static str,
        readers: Vec<usize>,
        /// The team it is sent to (the poster's).
        to: Option<&'static str>,
    },
    Follow {
        by: usize,
        whom: usize,
        backfill: Option<i64>,
    },
    Unfollow {
        by: usize,
        whom: usize,
        keep_history: bool,
    },
    Befriend {
        by: usize,
        whom: usize,
    },
    Unfriend {
        by: usize,
        whom: usize,
    },
    Comment {
        by: usize,
        action: usize,
    },
    HideItem {
        by: usize,
        action: usize,
    },
    HideAction {
        action: usize,
    },
    /// `by` leaves team `from` and joins team `to`.
    Regroup {
        by: usize,
        from: &'static str,
        to: &'static str,
    },
    Rescope {
        action: usize,
        scope: &'static str,
        readers: Vec<usize>,
    },
    FollowGroup {
        by: usize,
        group: &'static str,
        backfill: Option<i64>,
    },
    UnfollowGroup {
        by: usize,
        group: &'static str,
        keep_history: bool,
    },
}

/// The teams users move between, send posts to and follow.
const TEAMS: [&str; 2] = ["even", "odd"];

/// The scopes a change of scope picks from.
const SCOPES: [&str; 3] = ["PUBLIC", "TEAM", "RESTRICTED"];

/// The team user `n` starts in.
fn team_of(n: usize) -> &'static str {
    if n.is_multiple_of(2) {
        "even"
    } else {
        "odd"
    }
}

fn history(seed: u64, length: usize) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut posts: Vec<usize> = Vec::new();
    let mut teams: Vec<&'static str> = (0..USERS).map(team_of).collect();
    let mut steps = Vec::new();
    for _ in 0..length {
        let by = rng.below(USERS);
        let other = (by + 1 + rng.below(USERS - 1)) % USERS;
        let roll = rng.below(120);
        let step = match roll {
            0..=34 => Step::Post {
                by,
                scope: "PUBLIC",
                readers: vec![],
                to: rng.chance(40).then_some(teams[by]),
            },
            35..=39 => Step::Post {
                by,
                scope: "RESTRICTED",
                readers: vec![other],
                to: None,
            },
            40..=44 => Step::Post {
                by,
                scope: "TEAM",
                readers: vec![],
                to: None,
            },
            110..=115 => Step::FollowGroup {
                by,
                group: TEAMS[rng.below(TEAMS.len())],
                backfill: *rng.pick(&[None, Some(0), Some(2)]),
            },
            116..=119 => Step::UnfollowGroup {
                by,
                group: TEAMS[rng.below(TEAMS.len())],
                keep_history: rng.chance(30),
            },
            45..=59 => Step::Follow {
                by,
                whom: other,
                backfill: *rng.pick(&[None, Some(0), Some(2)]),
            },
            60..=66 => Step::Unfollow {
                by,
                whom: other,
                keep_history: rng.chance(30),
            },
            67..=71 => Step::Befriend { by, whom: other },
            72..=74 => Step::Unfriend { by, whom: other },
            _ if posts.is_empty() => continue,
            75..=88 => Step::Comment {
                by,
                action: *rng.pick(&posts),
            },
            89..=96 => Step::HideItem {
                by,
                action: *rng.pick(&posts),
            },
            97..=99 => Step::HideAction {
                action: *rng.pick(&posts),
            },
            100..=104 => {
                let from = teams[by];
                let to = if from == "even" { "odd" } else { "even" };
                teams[by] = to;
                Step::Regroup { by, from, to }
            }
            _ => Step::Rescope {
                action: *rng.pick(&posts),
                scope: SCOPES[rng.below(SCOPES.len())],
                readers: vec![other],
            },
        };
        if let Step::Post { .. } = step {
            posts.push(posts.len());
        }
        steps.push(step);
    }
    steps
}

async fn play(d: &mut Deployment, step: &Step) {
    let name = |n: usize| format!("u{n}");
    match step {
        Step::Post {
            by,
            scope,
            readers,
            to,
        } => {
            let readers: Vec<String> = readers.iter().map(|r| name(*r)).collect();
            let extra = match *scope {
                "PUBLIC" => json!({ "to": to.iter().collect::<Vec<_>>() }),
                "RESTRICTED" => json!({ "scope": "RESTRICTED", "readers": readers }),
                _ => json!({ "scope": scope }),
            };
            let id = d.user(*by).post_status("news", extra).await;
            d.actions.push(id);
        }
        Step::Follow { by, whom, backfill } => {
            d.user(*by)
                .post(
                    "mutation($u: ID!, $b: Int) { follow(userId: $u, backfill: $b) }",
                    json!({ "u": name(*whom), "b": backfill }),
                )
                .await;
        }
        Step::Unfollow {
            by,
            whom,
            keep_history,
        } => {
            let mutation = format!("unfollow(keepHistory: {keep_history}, userId: $u)");
            let query = format!("mutation($u: ID!) {{ {mutation} }}");
            let answer = d
                .user(*by)
                .post(&query, json!({ "u": format!("u{whom}") }))
                .await;
            assert!(answer.get("errors").is_none(), "unfollow: {answer}");
        }
        Step::Befriend { by, whom } => {
            edge(d, *by, "befriend", *whom).await;
        }
        Step::Unfriend { by, whom } => {
            edge(d, *by, "unfriend", *whom).await;
        }
        Step::Comment { by, action } => {
            // Refused (NOT_FOUND) where the commenter may not read it: the
            // same under every model.
            d.user(*by)
                .post(
                    "mutation($id: ID!) { comment(actionId: $id, text: \"yes\") { id } }",
                    json!({ "id": d.actions[*action] }),
                )
                .await;
        }
        Step::HideItem { by, action } => {
            d.user(*by)
                .post(
                    "mutation($id: ID!) { hideFeedItem(actionId: $id) }",
                    json!({ "id": d.actions[*action] }),
                )
                .await;
        }
        Step::HideAction { action } => {
            d.server
                .service(TENANT)
                .post(
                    "mutation($id: ID!) { hideAction(actionId: $id) { id } }",
                    json!({ "id": d.actions[*action] }),
                )
                .await;
        }
        Step::Regroup { by, from, to } => {
            let service = d.server.service(TENANT);
            service
                .data(
                    "mutation($g: ID!, $u: ID) { leaveGroup(groupId: $g, userId: $u) }",
                    json!({ "g": from, "u": name(*by) }),
                )
                .await;
            service.add_member(to, "TEAM", &name(*by)).await;
        }
        Step::FollowGroup {
            by,
            group,
            backfill,
        } => {
            d.user(*by)
                .post(
                    "mutation($g: ID!, $b: Int) { followGroup(groupId: $g, backfill: $b) }",
                    json!({ "g": group, "b": backfill }),
                )
                .await;
        }
        Step::UnfollowGroup {
            by,
            group,
            keep_history,
        } => {
            let answer = d
                .user(*by)
                .post(
                    "mutation($g: ID!, $k: Boolean!) { unfollowGroup(groupId: $g, keepHistory: $k) }",
                    json!({ "g": group, "k": keep_history }),
                )
                .await;
            assert!(answer.get("errors").is_none(), "unfollowGroup: {answer}");
        }
        Step::Rescope {
            action,
            scope,
            readers,
        } => {
            let readers: Vec<String> = readers.iter().map(|r| name(*r)).collect();
            d.server
                .service(TENANT)
                .post(
                    "mutation($id: ID!, $s: Scope!, $r: [ID!]!) {
                        setActionScope(actionId: $id, scope: $s, readers: $r) { id } }",
                    json!({ "id": d.actions[*action], "s": scope, "r": readers }),
                )
                .await;
        }
    }
    d.settle().await;
}

async fn edge(d: &Deployment, by: usize, mutation: &str, whom: usize) {
    let query = format!("mutation($u: ID!) {{ {mutation}(userId: $u) }}");
    let answer = d
        .user(by)
        .post(&query, json!({ "u": format!("u{whom}") }))
        .await;
    assert!(answer.get("errors").is_none(), "{mutation}: {answer}");
}

/// A reader's whole feed, paged to the end in small pages, each item as
/// (history index, relevancy, reason kind, reason actor).
async fn whole_feed(d: &Deployment, reader: usize) -> Vec<(usize, String, String, String)> {
    const PAGE: &str = "query($after: String) { feed(first: 3, after: $after) {
        edges { node { actionId relevancy reason { kind actorId } } }
        pageInfo { hasNextPage endCursor } } }";
    let client = d.user(reader);
    let mut out = Vec::new();
    let mut after = Value::Null;
    loop {
        let data = client.data(PAGE, json!({ "after": after })).await;
        let feed = &data["feed"];
        for edge in feed["edges"].as_array().expect("edges") {
            let node = &edge["node"];
            let id = node["actionId"].as_str().expect("id");
            let index = d.actions.iter().position(|a| a == id).unwrap_or_else(|| {
                panic!(
                    "u{reader}'s feed under {} holds {id}, which the history did not record \
                     (another tenant's?)",
                    d.model
                )
            });
            out.push((
                index,
                node["relevancy"].as_str().unwrap_or_default().to_owned(),
                node["reason"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                node["reason"]["actorId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            ));
        }
        if feed["pageInfo"]["hasNextPage"] != true {
            return out;
        }
        after = feed["pageInfo"]["endCursor"].clone();
    }
}

/// A reader's whole feed paged backwards from its oldest end (`last`,
/// `before`) in small pages, put newest first: it must be the feed paged
/// forwards.
async fn whole_feed_backwards(d: &Deployment, reader: usize) -> Vec<String> {
    const PAGE: &str = "query($before: String) { feed(last: 3, before: $before) {
        edges { node { actionId } }
        pageInfo { hasPreviousPage startCursor } } }";
    let client = d.user(reader);
    let mut pages = Vec::new();
    let mut before = Value::Null;
    loop {
        let data = client.data(PAGE, json!({ "before": before })).await;
        let feed = &data["feed"];
        let page: Vec<String> = feed["edges"]
            .as_array()
            .expect("edges")
            .iter()
            .map(|e| e["node"]["actionId"].as_str().expect("id").to_owned())
            .collect();
        pages.push(page);
        if feed["pageInfo"]["hasPreviousPage"] != true {
            break;
        }
        before = feed["pageInfo"]["startCursor"].clone();
        assert!(
            pages.len() <= d.actions.len() + 1,
            "u{reader}'s feed under {} never ends backwards",
            d.model
        );
    }
    pages.into_iter().rev().flatten().collect()
}

async fn every_model_serves_the_same_feeds(backend: Backend) {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let mut deployments = Vec::new();
    for kind in FeedModelKind::ALL {
        let Some(d) = Deployment::start(backend, kind).await else {
            return;
        };
        deployments.push(d);
    }
    for d in &deployments {
        people(d).await;
    }
    let steps = history(seed(), steps(backend));
    for (n, step) in steps.iter().enumerate() {
        // `RIVERFEED_MODELS_TRACE=1` prints the history as it is played.
        if std::env::var_os("RIVERFEED_MODELS_TRACE").is_some() {
            let posts = deployments[0].actions.len();
            eprintln!("step {n} (actions so far {posts}): {step:?}");
        }
        for d in deployments.iter_mut() {
            play(d, step).await;
        }
        // Compare along the way too: rivers are built after a first read, so
        // reads in the middle shape what the rivers hold later.
        if n % 65 == 40 {
            compare(&deployments, &format!("after step {n}")).await;
        }
    }
    compare(&deployments, "at the end").await;
    for d in &deployments {
        for reader in 0..USERS {
            let forwards: Vec<String> = whole_feed(d, reader)
                .await
                .into_iter()
                .map(|(index, ..)| d.actions[index].clone())
                .collect();
            let backwards = whole_feed_backwards(d, reader).await;
            assert_eq!(
                backwards, forwards,
                "u{reader}'s feed under {} paged backwards",
                d.model
            );
        }
    }
    let total: usize = {
        let mut total = 0;
        for reader in 0..USERS {
            total += whole_feed(&deployments[0], reader).await.len();
        }
        total
    };
    assert!(
        total * 2 > steps.len(),
        "the history fills feeds: {total} items from {} steps",
        steps.len()
    );
    for d in deployments {
        d.server.stop().await;
    }
}

/// The users, in two teams; and in another tenant the same ids, where
/// everyone follows u0 and everyone posts, to PUBLIC and to their team:
/// none of it may show in this tenant.
async fn people(d: &Deployment) {
    let service = d.server.service(TENANT);
    for n in 0..USERS {
        service
            .upsert_user(&format!("u{n}"), &format!("User {n}"))
            .await;
    }
    for n in 0..USERS {
        service
            .add_member(team_of(n), "TEAM", &format!("u{n}"))
            .await;
    }
    let elsewhere = d.server.service(OTHER_TENANT);
    for n in 0..USERS {
        elsewhere
            .upsert_user(&format!("u{n}"), &format!("Someone else {n}"))
            .await;
        elsewhere
            .add_member(team_of(n), "TEAM", &format!("u{n}"))
            .await;
    }
    for n in 1..USERS {
        let other = d.server.client(OTHER_TENANT, &format!("u{n}"));
        other.follow("u0").await;
    }
    for n in 0..USERS {
        let other = d.server.client(OTHER_TENANT, &format!("u{n}"));
        other.post_status("elsewhere", json!({})).await;
        other
            .post_status("elsewhere, team", json!({ "scope": "TEAM" }))
            .await;
    }
    d.settle().await;
}

/// The history's seed; another with RIVERFEED_MODELS_SEED=<n>.
fn seed() -> u64 {
    std::env::var("RIVERFEED_MODELS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_f00d)
}

/// Deployments that ran the models `from` restart halfway through a random
/// history under the models `to`; the first runs push throughout, and
/// every feed stays what it serves.
async fn switch(backend: Backend, from: [FeedModelKind; 4], to: [FeedModelKind; 4]) {
    let mut deployments = Vec::new();
    for kind in from {
        let Some(d) = Deployment::start(backend, kind).await else {
            return;
        };
        people(&d).await;
        deployments.push(d);
    }
    let steps = history(seed() ^ 0x5317c4, steps(backend));
    let (first, second) = steps.split_at(steps.len() / 2);
    for step in first {
        for d in deployments.iter_mut() {
            play(d, step).await;
        }
    }
    // Every reader has read before the switch (rivers exist, and are left).
    compare(&deployments, "before the switch").await;
    let mut switched = Vec::new();
    for (d, kind) in deployments.into_iter().zip(to) {
        switched.push(d.restart(kind).await);
    }
    compare(&switched, "right after the switch").await;
    for step in second {
        for d in switched.iter_mut() {
            play(d, step).await;
        }
    }
    compare(&switched, "at the end").await;
    for d in switched {
        d.server.stop().await;
    }
}

/// Push, then each other model.
async fn switching_from_push_keeps_every_feed(backend: Backend) {
    switch(backend, [FeedModelKind::Push; 4], FeedModelKind::ALL).await;
}

/// Each model, then push: what the pulling models left unwritten is still
/// pulled, below where they stopped.
async fn switching_to_push_keeps_every_feed(backend: Backend) {
    switch(backend, FeedModelKind::ALL, [FeedModelKind::Push; 4]).await;
}

async fn compare(deployments: &[Deployment], when: &str) {
    for reader in 0..USERS {
        let push = whole_feed(&deployments[0], reader).await;
        for d in &deployments[1..] {
            let other = whole_feed(d, reader).await;
            assert_eq!(
                other, push,
                "u{reader}'s feed under {} differs from push {when}",
                d.model
            );
        }
    }
}

crate::on_both_backends!(every_model_serves_the_same_feeds);

// A switch of model is the models' own (written once above the storage
// port, the model's name in `meta` included): the embedded store proves
// it. MongoDB holds the same port (`store_suite::mongodb::`) and serves
// every model's history above.
mod switching {
    #[tokio::test]
    async fn from_push_keeps_every_feed() {
        super::switching_from_push_keeps_every_feed(crate::common::Backend::Embedded).await
    }

    #[tokio::test]
    async fn to_push_keeps_every_feed() {
        super::switching_to_push_keeps_every_feed(crate::common::Backend::Embedded).await
    }
}
