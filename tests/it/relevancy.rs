//! The relevancy policy end to end in the worker: which readers a comment
//! bumps, how far, only upwards, and under concurrent comments and workers.

use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use riverfeed::clock::{Clock, ManualClock};
use riverfeed::events::{Event, FeedEventKind, Hub, Topic};
use riverfeed::fanout::{Worker, WorkerConfig};
use riverfeed::model::{
    BumpRule, Comment, EdgeKind, FeedItem, Group, GroupKind, MembershipRole, Millis, ObjectId,
    ReasonKind, Stamp,
};
use riverfeed::relevancy::BumpRules;
use riverfeed::store::Removal;
use riverfeed::store::{FeedRange, JobKind, Store};
use riverfeed::store::{Graph, Reactions, Timelines};
use riverfeed::timeline::{FeedModel, FeedModelKind};
use tokio::sync::Notify;

use crate::common::{Backend, TestStore};
use crate::store_suite::action;

const T: &str = "acme";
const HOUR: Millis = 3_600_000;
const START: Millis = crate::common::CLOCK_START;

fn rules() -> BumpRules {
    BumpRules {
        assigned: Some(4 * HOUR),
        supervisor: Some(2 * HOUR),
        participated: Some(HOUR),
        department: Some(0),
    }
}

fn worker(store: Arc<dyn Store>, hub: Arc<Hub>, clock: Arc<ManualClock>, id: &str) -> Worker {
    Worker::new(
        store,
        hub,
        clock,
        WorkerConfig {
            id: id.into(),
            lease_ms: 30_000,
            batch_size: 2,
            claim_limit: 2,
            bump_rules: rules(),
            // Raising written items, as push writes them for every follower.
            model: FeedModel::of(FeedModelKind::Push),
            ..WorkerConfig::default()
        },
        Arc::new(Notify::new()),
    )
}

async fn feed(store: &dyn Store, owner: &str) -> Result<Vec<FeedItem>> {
    Ok(store
        .feed_page(
            T,
            owner,
            FeedRange {
                older_than: None,
                newer_than: None,
                limit: 100,
                from_oldest: false,
            },
        )
        .await?)
}

async fn item(store: &dyn Store, owner: &str, id: ObjectId) -> Result<Option<FeedItem>> {
    Ok(feed(store, owner)
        .await?
        .into_iter()
        .find(|i| i.action_id == id))
}

fn comment(action: ObjectId, by: &str, at: Millis) -> Comment {
    Comment {
        id: ObjectId::new(),
        action_id: action,
        author_id: by.into(),
        text: format!("{by} says hi"),
        created: at,
    }
}

/// bob acts; alice (assigned to the applicant), frank (erin's report), dave
/// (erin's department) and carol (no rule) follow him. erin comments.
async fn org(store: &dyn Store) -> Result<()> {
    for reader in ["alice", "carol", "dave", "frank"] {
        store
            .set_edge(T, EdgeKind::Follows, reader, "bob", true)
            .await?;
    }
    store
        .set_assignment(T, "alice", "applicant-1", true)
        .await?;
    store.set_supervisor(T, "frank", Some("erin")).await?;
    let eng = Group {
        id: "eng".into(),
        kind: GroupKind::Department,
    };
    for member in ["dave", "erin"] {
        store
            .join_group(T, &eng, member, MembershipRole::Member, 0)
            .await?;
    }
    Ok(())
}

async fn drain(worker: &Worker) -> Result<usize> {
    let mut claimed = 0;
    loop {
        match worker.run_once().await? {
            0 => return Ok(claimed),
            n => claimed += n,
        }
    }
}

async fn per_reader_bumps(store: Arc<dyn Store>) -> Result<()> {
    org(store.as_ref()).await?;
    let clock = Arc::new(ManualClock::new(START));
    let hub = Hub::new(64);
    let w = worker(store.clone(), hub.clone(), clock.clone(), "w1");
    let old = action(T, "bob", START - 48 * HOUR, &["applicant-1"]);
    let newer = action(T, "bob", START - HOUR, &[]);
    store.insert_action(&old).await?;
    store.insert_action(&newer).await?;
    drain(&w).await?;
    let mut alice_events = hub.subscribe(Topic::Feed {
        tenant: T.into(),
        reader: "alice".into(),
    });

    clock.advance(60_000);
    let said = comment(old.id, "erin", clock.now());
    store.add_comment(T, &said).await?;
    ensure!(drain(&w).await? == 1, "one bump job claimed");

    let expect = [
        ("alice", Some((BumpRule::Assigned, 4 * HOUR))),
        ("frank", Some((BumpRule::Supervisor, 2 * HOUR))),
        ("bob", Some((BumpRule::Participated, HOUR))),
        ("dave", Some((BumpRule::Department, 0))),
        ("carol", None),
    ];
    for (reader, bump) in expect {
        let got = item(store.as_ref(), reader, old.id)
            .await?
            .with_context(|| format!("{reader} lost the item"))?;
        match bump {
            Some((rule, boost)) => {
                ensure!(
                    got.relevancy == said.created + boost,
                    "{reader}: relevancy {} != comment + {boost}",
                    got.relevancy
                );
                ensure!(got.reason.kind == ReasonKind::Bumped, "{reader}: {got:?}");
                let b = got.reason.bump.as_ref().context("bump details")?;
                ensure!(b.rule == rule && b.by == "erin" && b.at == said.created);
                ensure!(got.reason.actor_id == "bob");
                ensure!(got.changed == clock.now(), "stamped when bumped");
                let top = &feed(store.as_ref(), reader).await?[0];
                ensure!(
                    top.action_id == old.id,
                    "{reader}: the old action is on top"
                );
            }
            None => {
                ensure!(got.relevancy == old.conducted, "{reader} moved: {got:?}");
                ensure!(got.reason.kind == ReasonKind::Follows);
                let top = &feed(store.as_ref(), reader).await?[0];
                ensure!(top.action_id == newer.id, "{reader}: order unchanged");
            }
        }
    }
    // erin matches PARTICIPATED but has no item: nothing is created for her.
    ensure!(item(store.as_ref(), "erin", old.id).await?.is_none());

    let event = alice_events
        .try_recv()
        .context("a BUMPED event")?
        .map_err(|lag| anyhow::anyhow!("lagged: {lag:?}"))?;
    let Event::Feed(event) = event.as_ref() else {
        bail!("feed topic, feed event")
    };
    ensure!(event.kind == FeedEventKind::Bumped);
    ensure!(event.item.relevancy == said.created + 4 * HOUR);
    ensure!(
        event.action.as_ref().is_some_and(|a| a.id == old.id),
        "the event carries its action"
    );
    ensure!(alice_events.try_recv().is_none(), "one event only");

    // The change stamps replay the bump after the deliveries.
    let changes = store
        .feed_changes(
            T,
            "alice",
            Stamp {
                changed: 0,
                action_id: ObjectId::from_bytes([0; 12]),
            },
            10,
        )
        .await?;
    let order: Vec<_> = changes.iter().map(|i| i.action_id).collect();
    ensure!(order == vec![newer.id, old.id], "{changes:?}");
    ensure!(changes[1].reason.kind == ReasonKind::Bumped);
    Ok(())
}

async fn never_down(store: Arc<dyn Store>) -> Result<()> {
    org(store.as_ref()).await?;
    let clock = Arc::new(ManualClock::new(START));
    let hub = Hub::new(64);
    let w = worker(store.clone(), hub, clock.clone(), "w1");
    let old = action(T, "bob", START - 48 * HOUR, &["applicant-1"]);
    store.insert_action(&old).await?;
    drain(&w).await?;

    // erin bumps frank by 2h (SUPERVISOR). An hour later frank comments
    // himself: PARTICIPATED gives him now + 1h, below where he stands.
    store
        .add_comment(T, &comment(old.id, "erin", clock.now()))
        .await?;
    drain(&w).await?;
    let first = item(store.as_ref(), "frank", old.id)
        .await?
        .context("item")?;
    clock.advance(HOUR / 2);
    store
        .add_comment(T, &comment(old.id, "frank", clock.now()))
        .await?;
    drain(&w).await?;
    let after = item(store.as_ref(), "frank", old.id)
        .await?
        .context("item")?;
    ensure!(
        after.relevancy == first.relevancy && after.reason == first.reason,
        "a lower bump changed nothing: {first:?} then {after:?}"
    );

    // Deleting an action leaves its fan-out and a bump still queued with
    // its comment to a worker, which finds nothing to do and finishes them.
    let gone = action(T, "bob", START, &[]);
    store.insert_action(&gone).await?;
    store
        .add_comment(T, &comment(gone.id, "erin", clock.now()))
        .await?;
    store.remove_action(T, gone.id, Removal::Delete).await?;
    ensure!(
        drain(&w).await? == 2,
        "the fan-out and bump jobs, claimed once each"
    );
    for kind in [JobKind::Bump, JobKind::FanOut] {
        let left = store
            .claim(kind, "late", clock.now() + HOUR, 30_000, 10)
            .await?;
        ensure!(left.is_empty(), "no job outlives its action: {left:?}");
    }
    Ok(())
}

async fn concurrent(store: Arc<dyn Store>) -> Result<()> {
    org(store.as_ref()).await?;
    let clock = Arc::new(ManualClock::new(START));
    let hubs = [Hub::new(1024), Hub::new(1024)];
    let workers = [
        worker(store.clone(), hubs[0].clone(), clock.clone(), "w1"),
        worker(store.clone(), hubs[1].clone(), clock.clone(), "w2"),
    ];
    let old = action(T, "bob", START - 48 * HOUR, &["applicant-1"]);
    store.insert_action(&old).await?;
    drain(&workers[0]).await?;

    // Eight comments land at once, at different times, from different people.
    let mut comments = Vec::new();
    for (i, by) in [
        "erin", "carol", "zed", "erin", "yann", "carol", "zed", "erin",
    ]
    .iter()
    .enumerate()
    {
        comments.push(comment(old.id, by, START + i as Millis * 1_000));
    }
    let adds = comments.iter().map(|c| store.add_comment(T, c));
    for added in futures_util::future::join_all(adds).await {
        added?;
    }
    let (a, b) = tokio::join!(drain(&workers[0]), drain(&workers[1]));
    ensure!(a? + b? == comments.len(), "each job claimed once");
    ensure!(store
        .claim(JobKind::Bump, "late", clock.now() + HOUR, 30_000, 100)
        .await?
        .is_empty());

    // Each reader ends at the highest target any comment gave them.
    let last = comments.iter().map(|c| c.created).max().unwrap_or(START);
    let last_erin = comments
        .iter()
        .filter(|c| c.author_id == "erin")
        .map(|c| c.created)
        .max()
        .unwrap_or(START);
    let expect = [
        ("alice", last + 4 * HOUR),
        ("frank", last_erin + 2 * HOUR),
        ("bob", last + HOUR),
        ("dave", last_erin),
        ("carol", last + HOUR), // carol took part
    ];
    for (reader, relevancy) in expect {
        let items = feed(store.as_ref(), reader).await?;
        ensure!(items.len() == 1, "{reader}: one item, got {items:?}");
        ensure!(
            items[0].relevancy == relevancy,
            "{reader}: {} != {relevancy}",
            items[0].relevancy
        );
    }
    Ok(())
}

/// A comment whose bump job runs while its action's fan-out is still held
/// (here by another worker) bumps the items that fan-out writes later, the
/// actor's own included.
async fn bump_before_fan_out(store: Arc<dyn Store>) -> Result<()> {
    org(store.as_ref()).await?;
    let clock = Arc::new(ManualClock::new(START));
    let w = worker(store.clone(), Hub::new(64), clock.clone(), "w1");
    let act = action(T, "bob", START - HOUR, &["applicant-1"]);
    store.insert_action(&act).await?;
    let slow = store
        .claim(JobKind::FanOut, "slow", clock.now(), 30_000, 10)
        .await?;
    ensure!(slow.len() == 1, "another worker holds the fan-out");
    let said = comment(act.id, "erin", clock.now());
    store.add_comment(T, &said).await?;
    drain(&w).await?;
    // The other worker's lease runs out; w takes the fan-out over.
    clock.advance(30_001);
    drain(&w).await?;
    let expect = [
        ("alice", Some(4 * HOUR)),
        ("frank", Some(2 * HOUR)),
        ("bob", Some(HOUR)),
        ("dave", Some(0)),
        ("carol", None),
    ];
    for (reader, boost) in expect {
        let got = item(store.as_ref(), reader, act.id)
            .await?
            .with_context(|| format!("{reader} has no item"))?;
        let want = boost.map_or(act.conducted, |b| said.created + b);
        ensure!(got.relevancy == want, "{reader}: {got:?}, not at {want}");
    }
    let queued = store.backlog(JobKind::Bump).await?;
    ensure!(queued.jobs == 0, "the bump is done: {queued:?}");
    Ok(())
}

async fn on(
    backend: Backend,
    test: fn(Arc<dyn Store>) -> futures_util::future::BoxFuture<'static, Result<()>>,
) {
    let Some(store) = TestStore::open(backend).await else {
        return;
    };
    let result = test(store.store.clone()).await;
    store.remove().await;
    result.unwrap_or_else(|err| panic!("{backend:?}: {err:#}"));
}

async fn a_comment_bumps_each_reader_by_the_rule_that_matches(backend: Backend) {
    on(backend, |s| Box::pin(per_reader_bumps(s))).await
}

async fn relevancy_never_goes_down(backend: Backend) {
    on(backend, |s| Box::pin(never_down(s))).await
}

async fn concurrent_comments_and_workers_bump_to_the_highest_target(backend: Backend) {
    on(backend, |s| Box::pin(concurrent(s))).await
}

async fn a_bump_before_the_fan_out_raises_what_it_delivers(backend: Backend) {
    on(backend, |s| Box::pin(bump_before_fan_out(s))).await
}

/// Bad rules stop `serve` before it listens, naming the rule and the fix.
#[tokio::test]
async fn bad_bump_rules_are_refused_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, "[boost]\nasigned = \"1h\"\n").expect("write rules");
    let cases: [(&[&str], &str); 3] = [
        (&["--bump-assigned", "soon"], "--bump-assigned"),
        (&["--bump-department", "9000d"], "more than 365 days"),
        (
            &["--bump-rules", rules.to_str().expect("utf-8 path")],
            "asigned",
        ),
    ];
    for (args, expect) in cases {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_riverfeed"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(args)
            .stdin(std::process::Stdio::null())
            .output();
        let output = tokio::time::timeout(std::time::Duration::from_secs(30), output)
            .await
            .expect("exits")
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} must fail");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
}

crate::on_both_backends!(
    a_comment_bumps_each_reader_by_the_rule_that_matches,
    relevancy_never_goes_down,
    concurrent_comments_and_workers_bump_to_the_highest_target,
    a_bump_before_the_fan_out_raises_what_it_delivers,
);
