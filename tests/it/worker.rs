//! The fan-out worker against a real store, with an injected clock.

use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use riverfeed::clock::{Clock, ManualClock};
use riverfeed::events::{Event, Hub, Topic};
use riverfeed::fanout::{Worker, WorkerConfig};
use riverfeed::model::{
    EdgeKind, FanOutState, Group, GroupKind, MembershipRole, ReasonKind, Scope,
};
use riverfeed::store::embedded::EmbeddedStore;
use riverfeed::store::QueuedRead;
use riverfeed::store::{Graph, Timelines};
use riverfeed::timeline::{FeedModel, FeedModelKind};

use crate::common::{Backend, HeldFanOut, TestStore};
use riverfeed::store::{Delivery, FanOutJob, FeedRange, JobKind, Lease, Store};
use riverfeed::timeline::audience::Reach;
use tokio::sync::Notify;

use crate::store_suite::action;

const T: &str = "acme";

fn feed_topic(reader: &str) -> Topic {
    Topic::Feed {
        tenant: T.into(),
        reader: reader.into(),
    }
}

fn worker(store: Arc<dyn Store>, clock: Arc<ManualClock>, id: &str, batch: usize) -> Worker {
    Worker::new(
        store,
        Hub::new(16),
        clock,
        WorkerConfig {
            id: id.into(),
            lease_ms: 30_000,
            batch_size: batch,
            // The store-level mechanics of writing every follower's item.
            model: FeedModel::of(FeedModelKind::Push),
            ..WorkerConfig::default()
        },
        Arc::new(Notify::new()),
    )
}

/// Runs `case` on a fresh store of `backend`, removed afterwards; its
/// error names the backend.
pub(crate) async fn on_a_store<F, Fut>(backend: Backend, case: F)
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let Some(test) = TestStore::open(backend).await else {
        return;
    };
    let result = case(test.store.clone()).await;
    test.remove().await;
    result.unwrap_or_else(|err| panic!("{backend:?}: {err:#}"));
}

/// Every job of `kind` the tenant has queued.
async fn queued(store: &dyn Store, kind: JobKind) -> Result<Vec<riverfeed::store::Queued>> {
    Ok(store.queued(kind, T, QueuedRead::under("")).await?)
}

pub(crate) async fn feed_len(store: &dyn Store, owner: &str) -> Result<usize> {
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
        .await?
        .len())
}

async fn an_expired_lease_is_taken_over_and_nothing_is_delivered_twice(backend: Backend) {
    on_a_store(backend, lease_takeover).await
}

async fn two_workers_on_one_store_never_deliver_twice(backend: Backend) {
    on_a_store(backend, two_workers).await
}

async fn an_unfollow_during_a_fan_out_takes_out_what_it_writes_after(backend: Backend) {
    on_a_store(backend, unfollow_during_fan_out).await
}

async fn a_fan_out_that_keeps_failing_holds_no_cleanup_back(backend: Backend) {
    on_a_store(backend, failed_fan_out_and_cleanup).await
}

crate::on_both_backends!(
    an_expired_lease_is_taken_over_and_nothing_is_delivered_twice,
    two_workers_on_one_store_never_deliver_twice,
    an_unfollow_during_a_fan_out_takes_out_what_it_writes_after,
    a_fan_out_that_keeps_failing_holds_no_cleanup_back,
);

/// A fan-out of bob's that failed every try a worker gave it waits to be
/// tried again (an hour on); meanwhile ann unfollows bob. Her cleanup does
/// not wait for that fan-out: it runs nowhere, and when it is tried again
/// it reads its audience anew, without ann.
async fn failed_fan_out_and_cleanup(store: Arc<dyn Store>) -> Result<()> {
    let clock = Arc::new(ManualClock::new(1_000_000));
    for reader in ["ann", "cat"] {
        store
            .set_edge(T, EdgeKind::Follows, reader, "bob", true)
            .await?;
    }
    let a = action(T, "bob", 999_000, &[]);
    store.insert_action(&a).await?;
    // The worker that held it gave it back, its failure counted.
    let mut failed = store
        .claim(JobKind::FanOut, "broken", clock.now(), 30_000, 10)
        .await?
        .pop()
        .context("the broken worker claims the fan-out")?;
    failed.job.failures += 1;
    store.defer(&failed, clock.now() + 3_600_000).await?;
    let unfollow = riverfeed::store::Unfollow::edge(T, "ann", EdgeKind::Follows, "bob");
    riverfeed::timeline::unfollow::start(store.as_ref(), &unfollow, clock.now()).await?;
    store
        .set_edge(T, EdgeKind::Follows, "ann", "bob", false)
        .await?;
    let w = worker(store.clone(), clock.clone(), "w", 100);
    for _ in 0..3 {
        clock.advance(1_000);
        w.run_once().await?;
    }
    let left = queued(store.as_ref(), JobKind::Cleanup).await?;
    ensure!(
        left.is_empty(),
        "the cleanup does not wait for a failed fan-out: {left:?}"
    );
    // Tried again, it succeeds, and writes for the readers it has now.
    clock.advance(3_600_000);
    w.run_once().await?;
    let fan_outs = queued(store.as_ref(), JobKind::FanOut).await?;
    ensure!(fan_outs.is_empty(), "the fan-out is done: {fan_outs:?}");
    ensure!(
        feed_len(store.as_ref(), "cat").await? == 1,
        "cat has bob's action"
    );
    ensure!(
        feed_len(store.as_ref(), "ann").await? == 0,
        "ann no longer follows bob, and holds no item of his"
    );
    Ok(())
}

/// A fan-out reads its audience while ann still follows bob; ann unfollows,
/// and the cleanup comes round before the fan-out writes. The item it
/// writes afterwards must go too: the cleanup waits for bob's fan-outs
/// under way, then takes it out.
async fn unfollow_during_fan_out(store: Arc<dyn Store>) -> Result<()> {
    let clock = Arc::new(ManualClock::new(1_000_000));
    store
        .set_edge(T, EdgeKind::Follows, "ann", "bob", true)
        .await?;
    let a = action(T, "bob", 999_000, &[]);
    store.insert_action(&a).await?;
    // A slow worker holds the fan-out, its audience read: ann among it.
    let held = HeldFanOut::claim(&*store, "slow", clock.now(), 30_000, 10)
        .await?
        .pop()
        .context("the slow worker claims the fan-out")?;
    // ann unfollows bob: the cleanup is queued, then the edge ends.
    let unfollow = riverfeed::store::Unfollow::edge(T, "ann", EdgeKind::Follows, "bob");
    riverfeed::timeline::unfollow::start(store.as_ref(), &unfollow, clock.now()).await?;
    store
        .set_edge(T, EdgeKind::Follows, "ann", "bob", false)
        .await?;
    // Another worker comes to the cleanup while the fan-out is under way.
    let w = worker(store.clone(), clock.clone(), "w", 100);
    w.run_once().await?;
    // The slow fan-out writes what its audience said, and is done.
    let to_ann = Delivery {
        owner: "ann".into(),
        relevancy: a.conducted,
        reason: riverfeed::model::Reason::new(ReasonKind::Follows, "bob"),
    };
    held.finish(&*store, clock.now(), &[to_ann]).await?;
    for _ in 0..3 {
        clock.advance(1_000);
        w.run_once().await?;
    }
    let left = queued(store.as_ref(), JobKind::Cleanup).await?;
    ensure!(left.is_empty(), "the cleanup is done: {left:?}");
    ensure!(
        feed_len(store.as_ref(), "ann").await? == 0,
        "ann no longer follows bob, and holds no item of his"
    );
    Ok(())
}

async fn two_workers(store: Arc<dyn Store>) -> Result<()> {
    let readers = ["alice", "carol", "dave", "erin"];
    for r in readers {
        store.set_edge(T, EdgeKind::Follows, r, "bob", true).await?;
    }
    let actions = 12;
    for i in 0..actions {
        store
            .insert_action(&action(T, "bob", 1_000 + i, &[]))
            .await?;
    }
    let clock = Arc::new(ManualClock::new(1_000_000));
    let hubs = [Hub::new(1024), Hub::new(1024)];
    let mut alice: Vec<_> = hubs
        .iter()
        .map(|h| h.subscribe(feed_topic("alice")))
        .collect();
    let workers: Vec<Worker> = hubs
        .iter()
        .enumerate()
        .map(|(i, hub)| {
            Worker::new(
                store.clone(),
                hub.clone(),
                clock.clone(),
                WorkerConfig {
                    id: format!("w{i}"),
                    lease_ms: 30_000,
                    batch_size: 2,
                    claim_limit: 1,
                    model: FeedModel::of(FeedModelKind::Push),
                    ..WorkerConfig::default()
                },
                Arc::new(Notify::new()),
            )
        })
        .collect();
    // Both drain the queue at once, one action per claim.
    let drain = |w: Worker| async move {
        let mut claimed = 0;
        loop {
            match w.run_once().await? {
                0 => return anyhow::Ok(claimed),
                n => claimed += n,
            }
        }
    };
    let (a, b) = tokio::join!(drain(workers[0].clone()), drain(workers[1].clone()));
    let (a, b) = (a?, b?);
    ensure!(
        a + b == actions as usize,
        "every action claimed once: {a} + {b}"
    );
    for owner in readers.iter().chain(["bob"].iter()) {
        let n = feed_len(store.as_ref(), owner).await?;
        ensure!(n == actions as usize, "{owner} has {n} items");
    }
    let mut added = 0;
    for sub in &mut alice {
        while let Some(Ok(event)) = sub.try_recv() {
            let Event::Feed(event) = event.as_ref() else {
                bail!("a feed topic carries feed events only")
            };
            ensure!(event.item.owner == "alice");
            added += 1;
        }
    }
    ensure!(
        added == actions,
        "one ADDED per item for alice, got {added}"
    );
    Ok(())
}

async fn lease_takeover(store: Arc<dyn Store>) -> Result<()> {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let followers = ["alice", "carol", "dave", "erin", "frank"];
    for f in followers {
        store.set_edge(T, EdgeKind::Follows, f, "bob", true).await?;
    }
    let a = action(T, "bob", 999_000, &[]);
    store.insert_action(&a).await?;

    // Worker 1 claims, delivers to two readers, and dies without finishing.
    let claims = HeldFanOut::claim(&*store, "w1", clock.now(), 30_000, 10).await?;
    let claim = claims.first().context("w1 claims")?;
    // Worker 1's items carry another relevancy than worker 2's would, so a
    // second delivery to the same reader would show as a second item.
    let partial: Vec<Delivery> = ["alice", "carol"]
        .iter()
        .map(|o| Delivery {
            owner: o.to_string(),
            relevancy: a.conducted - 1,
            reason: riverfeed::model::Reason::new(ReasonKind::Follows, "bob"),
        })
        .collect();
    claim.deliver(&*store, clock.now(), &partial).await?;

    // Worker 2 finds nothing while the lease lives…
    let w2 = worker(store.clone(), clock.clone(), "w2", 2);
    ensure!(w2.run_once().await? == 0, "a live lease is respected");
    clock.advance(29_999);
    ensure!(w2.run_once().await? == 0, "still live one ms before expiry");
    // …and takes it over once it runs out, finishing the delivery.
    clock.advance(1);
    ensure!(w2.run_once().await? == 1, "the expired lease is taken over");

    for owner in followers.iter().chain(["bob"].iter()) {
        ensure!(
            feed_len(store.as_ref(), owner).await? == 1,
            "{owner} has exactly one item"
        );
    }
    let stored = store.get_actions(T, &[a.id]).await?;
    ensure!(stored[0].fan_out.state == FanOutState::Done);

    // Running the whole fan-out again leaves one item per reader.
    let rerun = riverfeed::fanout::Claim {
        lease: Lease {
            job: FanOutJob::of(T, a.id)?,
            worker: "w3".into(),
            lease_ms: 30_000,
            taken_over: false,
        },
        action: stored[0].clone(),
    };
    let err = w2.fan_out(&rerun).await.err().context("done is done")?;
    ensure!(err.kind == riverfeed::store::ErrorKind::LeaseLost, "{err}");
    for owner in followers {
        ensure!(feed_len(store.as_ref(), owner).await? == 1);
    }
    Ok(())
}

#[tokio::test]
async fn audience_follows_scope() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path())?);
    store
        .set_edge(T, EdgeKind::Follows, "follower", "bob", true)
        .await?;
    store
        .set_edge(T, EdgeKind::Friend, "friend", "bob", true)
        .await?;
    let team = Group {
        id: "t1".into(),
        kind: GroupKind::Team,
    };
    for member in ["bob", "mate", "follower"] {
        store
            .join_group(T, &team, member, MembershipRole::Member, 0)
            .await?;
    }

    let public = action(T, "bob", 1, &[]);
    let audience =
        riverfeed::timeline::audience::audience(store.as_ref(), &public, Reach::All).await?;
    ensure!(
        audience
            == vec![
                ("bob".to_string(), ReasonKind::Own),
                ("follower".to_string(), ReasonKind::Follows),
                ("friend".to_string(), ReasonKind::Friend),
            ],
        "public: {audience:?}"
    );

    let mut team_action = action(T, "bob", 1, &[]);
    team_action.scope = Scope::Team;
    team_action.scope_groups = vec!["t1".into()];
    let audience =
        riverfeed::timeline::audience::audience(store.as_ref(), &team_action, Reach::All).await?;
    ensure!(
        audience
            == vec![
                ("bob".to_string(), ReasonKind::Own),
                ("follower".to_string(), ReasonKind::Team),
                ("mate".to_string(), ReasonKind::Team),
            ],
        "team: members only, the friend is left out: {audience:?}"
    );

    let mut restricted = action(T, "bob", 1, &[]);
    restricted.scope = Scope::Restricted;
    restricted.readers = vec!["zed".into()];
    let audience =
        riverfeed::timeline::audience::audience(store.as_ref(), &restricted, Reach::All).await?;
    ensure!(
        audience
            == vec![
                ("bob".to_string(), ReasonKind::Own),
                ("zed".to_string(), ReasonKind::Restricted),
            ],
        "restricted: {audience:?}"
    );
    Ok(())
}

#[tokio::test]
async fn large_audiences_are_delivered_in_batches() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path())?);
    let metered = Arc::new(riverfeed::store::metered::Metered::new(store));
    let store: Arc<dyn Store> = metered.clone();
    for i in 0..250 {
        store
            .set_edge(T, EdgeKind::Follows, &format!("f{i:03}"), "bob", true)
            .await?;
    }
    store.insert_action(&action(T, "bob", 1, &[])).await?;
    let clock = Arc::new(ManualClock::new(10));
    let w = worker(store.clone(), clock, "w", 100);
    ensure!(w.run_once().await? == 1);
    use riverfeed::store::metered::Op;
    let calls = (metered.calls(Op::deliver), metered.calls(Op::end));
    ensure!(
        calls == (3, 0),
        "251 readers in batches of 100: two batches, then the last with the finish in one call; got {calls:?}"
    );
    ensure!(feed_len(store.as_ref(), "f249").await? == 1);
    ensure!(feed_len(store.as_ref(), "bob").await? == 1);
    Ok(())
}

/// A clock that moves a step each time it is read: a worker that reads it
/// more has worked longer.
struct Ticking {
    now: std::sync::atomic::AtomicI64,
    step: i64,
}

impl Clock for Ticking {
    fn now(&self) -> riverfeed::model::Millis {
        self.now
            .fetch_add(self.step, std::sync::atomic::Ordering::SeqCst)
    }
}

impl Ticking {
    /// The time, without moving it.
    fn peek(&self) -> riverfeed::model::Millis {
        self.now.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Cleanups that take longer all told than a lease: a second worker that
/// claims meanwhile takes over none that the first holds (it may take the
/// ones nobody holds yet), and every cleanup is done.
#[tokio::test]
async fn long_cleanups_keep_their_leases() -> Result<()> {
    let Some(test) = TestStore::open(Backend::Embedded).await else {
        return Ok(());
    };
    let store = test.store.clone();
    const LEASE_MS: i64 = 10_000;
    const CLEANUPS: usize = 40;
    // Each read of the clock is a tenth of the lease.
    let clock = Arc::new(Ticking {
        now: std::sync::atomic::AtomicI64::new(1_000_000),
        step: LEASE_MS / 10,
    });
    for n in 0..CLEANUPS {
        let unfollow = riverfeed::store::Unfollow {
            tenant: T.into(),
            reader: "ann".into(),
            actor: format!("actor-{n:02}"),
            kind: riverfeed::store::Ended::Edge(EdgeKind::Follows),
        };
        riverfeed::timeline::unfollow::start(store.as_ref(), &unfollow, 1_000_000).await?;
    }
    let first = Worker::new(
        store.clone(),
        Hub::new(16),
        clock.clone(),
        WorkerConfig {
            id: "w1".into(),
            lease_ms: LEASE_MS,
            claim_limit: 64,
            ..WorkerConfig::default()
        },
        Arc::new(Notify::new()),
    );
    let done = std::sync::atomic::AtomicBool::new(false);
    let ran = async {
        let ran = first.run_once().await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        ran
    };
    // Once the first worker has worked longer than a lease, the second
    // claims whenever it gets a turn, and does at once what it claims; it
    // notes what it took over.
    let start = clock.peek();
    let second = async {
        let mut taken_over = Vec::new();
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            if clock.peek() <= start + LEASE_MS {
                tokio::task::yield_now().await;
                continue;
            }
            let leases = store
                .claim(JobKind::Cleanup, "w2", clock.peek(), LEASE_MS, 64)
                .await?;
            for lease in leases {
                if lease.taken_over {
                    taken_over.push(lease.job.key.clone());
                }
                store.clean(&lease, &[]).await?;
            }
            tokio::task::yield_now().await;
        }
        anyhow::Ok(taken_over)
    };
    let (ran, taken_over) = tokio::join!(ran, second);
    let result = async {
        ran?;
        let taken_over = taken_over?;
        ensure!(
            taken_over.is_empty(),
            "{} of {CLEANUPS} cleanups taken over from the worker running them: {taken_over:?}",
            taken_over.len()
        );
        let left = queued(store.as_ref(), JobKind::Cleanup).await?;
        ensure!(left.is_empty(), "every cleanup done: {} left", left.len());
        Ok(())
    }
    .await;
    test.remove().await;
    result
}
