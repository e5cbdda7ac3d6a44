//! A worker's rounds against a real store: the leases of jobs waiting
//! their turn in a round, bumps of an action whose fan-out keeps failing,
//! and jobs that do not read.

use std::sync::{Arc, Mutex};

use anyhow::{ensure, Context, Result};
use riverfeed::clock::{Clock, ManualClock};
use riverfeed::events::Hub;
use riverfeed::fanout::{Worker, WorkerConfig};
use riverfeed::model::{Comment, EdgeKind, Millis, ObjectId};
use riverfeed::store::{Graph, Job, JobKind, Jobs, QueuedRead, Reactions, Store};
use riverfeed::timeline::{FeedModel, FeedModelKind};
use tokio::sync::Notify;

use crate::common::Backend;
use crate::store_suite::action;
use crate::worker::{feed_len, on_a_store};

const T: &str = "acme";

fn worker(store: Arc<dyn Store>, clock: Arc<ManualClock>, id: &str, lease_ms: Millis) -> Worker {
    Worker::new(
        store,
        Hub::new(16),
        clock,
        WorkerConfig {
            id: id.into(),
            lease_ms,
            model: FeedModel::of(FeedModelKind::Push),
            ..WorkerConfig::default()
        },
        Arc::new(Notify::new()),
    )
}

fn comment(action_id: ObjectId, by: &str, at: Millis) -> Comment {
    Comment {
        id: ObjectId::new(),
        action_id,
        author_id: by.into(),
        text: "a comment".into(),
        created: at,
    }
}

/// How many jobs of `kind` `worker` counted with `outcome` in `/metrics`.
fn jobs_counted(worker: &Worker, kind: &str, outcome: &str) -> u64 {
    let mut text = String::new();
    worker.metrics().encode(&mut text);
    let line = format!("riverfeed_jobs_total{{job=\"{kind}\",outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

async fn jobs_waiting_their_turn_in_a_round_keep_their_lease(backend: Backend) {
    #[cfg(debug_assertions)]
    on_a_store(backend, round_outlasting_its_leases).await;
    #[cfg(not(debug_assertions))]
    eprintln!("{backend:?}: skipped, jobs are slowed in debug builds only");
}

async fn a_fan_out_that_keeps_failing_holds_no_bump_back(backend: Backend) {
    on_a_store(backend, failed_fan_out_and_bump).await
}

async fn a_job_that_does_not_read_is_set_aside_and_the_round_goes_on(backend: Backend) {
    on_a_store(backend, damaged_jobs).await
}

crate::on_both_backends!(
    jobs_waiting_their_turn_in_a_round_keep_their_lease,
    a_fan_out_that_keeps_failing_holds_no_bump_back,
    a_job_that_does_not_read_is_set_aside_and_the_round_goes_on,
);

/// The lease of the round-leases test, in milliseconds of its clock (and,
/// a third of it, the real time between renewals).
#[cfg(debug_assertions)]
const LEASE: Millis = 300;

/// Waits (a few seconds at most) until every job of `kind`s that `holder`
/// holds is leased at least half a lease past the clock: renewed since the
/// clock last moved.
#[cfg(debug_assertions)]
async fn renewed(store: &dyn Store, clock: &ManualClock, holder: &str) {
    for _ in 0..200 {
        let mut behind = false;
        for kind in [JobKind::FanOut, JobKind::Bump] {
            let queued = store.queued(kind, T, QueuedRead::under("")).await;
            for q in queued.unwrap_or_default() {
                if let Some(held) = q.held.filter(|h| h.worker == holder) {
                    behind |= held.until - clock.now() <= LEASE / 2;
                }
            }
        }
        if !behind {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A worker claims three fan-outs in one round, then three bumps, and each
/// job takes a lease and a third of the clock's time; another worker polls
/// twice while each runs. None of the six is taken over: the round renews
/// the leases of the jobs waiting their turn, not only the one it works.
#[cfg(debug_assertions)]
async fn round_outlasting_its_leases(store: Arc<dyn Store>) -> Result<()> {
    let clock = Arc::new(ManualClock::new(1_000_000));
    store
        .set_edge(T, EdgeKind::Follows, "ann", "bob", true)
        .await?;
    let actions: Vec<_> = (0..3).map(|i| action(T, "bob", 999_000 + i, &[])).collect();
    for a in &actions {
        store.insert_action(a).await?;
    }
    let other = worker(store.clone(), clock.clone(), "other", LEASE);
    // What the other worker claimed at each poll.
    let polls = Arc::new(Mutex::new(Vec::<usize>::new()));
    // One slow job at a time (bumps start together), so the clock moves
    // only as the job holding this does.
    let one = Arc::new(tokio::sync::Mutex::new(()));
    let pause: riverfeed::fanout::JobPause = {
        let (clock, store, polls) = (clock.clone(), store.clone(), polls.clone());
        Arc::new(move |_: &Job| {
            let (clock, store, other) = (clock.clone(), store.clone(), other.clone());
            let (polls, one) = (polls.clone(), one.clone());
            Box::pin(async move {
                let _one = one.lock().await;
                for _ in 0..2 {
                    clock.advance(LEASE * 2 / 3);
                    renewed(store.as_ref(), &clock, "slow").await;
                    let claimed = other.run_once().await.unwrap_or(usize::MAX);
                    polls.lock().unwrap().push(claimed);
                }
            })
        })
    };
    let slow = worker(store.clone(), clock.clone(), "slow", LEASE).with_job_pause(pause);
    ensure!(slow.run_once().await? == 3, "the fan-outs, in one round");
    for a in &actions {
        store
            .add_comment(T, &comment(a.id, "ann", clock.now()))
            .await?;
    }
    ensure!(slow.run_once().await? == 3, "the bumps, in one round");
    let polls = polls.lock().unwrap().clone();
    ensure!(polls.len() == 12, "two polls a job: {polls:?}");
    ensure!(
        polls.iter().all(|&n| n == 0),
        "the other worker claimed nothing the slow one held: {polls:?}"
    );
    for kind in ["fanout", "bump"] {
        let (ok, failed) = (
            jobs_counted(&slow, kind, "ok"),
            jobs_counted(&slow, kind, "error"),
        );
        ensure!(ok == 3 && failed == 0, "{kind}: {ok} done, {failed} failed");
    }
    ensure!(
        feed_len(store.as_ref(), "ann").await? == 3,
        "ann has bob's three"
    );
    Ok(())
}

/// A fan-out of bob's that failed every try a worker gave it waits to be
/// tried again (an hour on); meanwhile ann comments on the action. Her
/// comment's bump does not wait for that fan-out: it runs nowhere.
async fn failed_fan_out_and_bump(store: Arc<dyn Store>) -> Result<()> {
    let clock = Arc::new(ManualClock::new(1_000_000));
    store
        .set_edge(T, EdgeKind::Follows, "ann", "bob", true)
        .await?;
    let a = action(T, "bob", 999_000, &[]);
    store.insert_action(&a).await?;
    let mut failed = store
        .claim(JobKind::FanOut, "broken", clock.now(), 30_000, 10)
        .await?
        .pop()
        .context("the broken worker claims the fan-out")?;
    failed.job.failures += 1;
    store.defer(&failed, clock.now() + 3_600_000).await?;
    store
        .add_comment(T, &comment(a.id, "ann", clock.now()))
        .await?;
    let w = worker(store.clone(), clock.clone(), "w", 30_000);
    for _ in 0..3 {
        clock.advance(1_000);
        w.run_once().await?;
    }
    let bumps = store
        .queued(JobKind::Bump, T, QueuedRead::under(""))
        .await?;
    ensure!(
        bumps.is_empty(),
        "the bump does not wait for a failed fan-out: {bumps:?}"
    );
    // Tried again, the fan-out succeeds.
    clock.advance(3_600_000);
    w.run_once().await?;
    let fan_outs = store
        .queued(JobKind::FanOut, T, QueuedRead::under(""))
        .await?;
    ensure!(fan_outs.is_empty(), "the fan-out is done: {fan_outs:?}");
    ensure!(feed_len(store.as_ref(), "ann").await? == 1, "ann has it");
    Ok(())
}

/// A fan-out job whose key is no action id and a bump job whose payload is
/// no comment, queued ahead of a sound fan-out: the round sets both aside
/// (counted, held by nobody, never due again) and does the sound one, and
/// no later round claims them.
async fn damaged_jobs(store: Arc<dyn Store>) -> Result<()> {
    let clock = Arc::new(ManualClock::new(1_000_000));
    store
        .set_edge(T, EdgeKind::Follows, "ann", "bob", true)
        .await?;
    let damaged = |kind, key: &str, payload: &str| Job {
        kind,
        tenant: T.into(),
        key: key.into(),
        payload: payload.into(),
        queued: 1,
        failures: 0,
    };
    let fan_out = damaged(JobKind::FanOut, "not-an-action-id", "null");
    let bump = damaged(JobKind::Bump, "not-a-comment", "{\"text\":");
    for job in [&fan_out, &bump] {
        ensure!(store.enqueue(job).await?, "queued {}", job.key);
    }
    store.insert_action(&action(T, "bob", 999_000, &[])).await?;
    let w = worker(store.clone(), clock.clone(), "w", 30_000);
    let claimed = w.run_once().await.context("the round goes on")?;
    ensure!(claimed == 3, "all three claimed: {claimed}");
    ensure!(feed_len(store.as_ref(), "ann").await? == 1, "ann has bob's");
    for (kind, job) in [("fanout", &fan_out), ("bump", &bump)] {
        let set_aside = jobs_counted(&w, kind, "set_aside");
        ensure!(set_aside == 1, "{kind}: {set_aside} set aside");
        let queued = store.queued(job.kind, T, QueuedRead::under("")).await?;
        let [kept] = queued.as_slice() else {
            anyhow::bail!("{kind}: the damaged job is kept: {queued:?}");
        };
        ensure!(
            kept.job.key == job.key && kept.held.is_none() && kept.job.failures == 1,
            "{kind}: set aside, its failure counted: {kept:?}"
        );
    }
    // A day on, no round claims them again.
    clock.advance(86_400_000);
    let again = w.run_once().await?;
    ensure!(again == 0, "nothing claimed again: {again}");
    Ok(())
}

/// A transaction that wrote job documents and has not ended (a like
/// queueing a held bump again, or one a killed process left open) holds up
/// none of a worker's writes of them: a renewal of a round's leases answers
/// while it is open, renews the other job and says the one it wrote was
/// not renewed (not lost); the end of that job and a claim (of many, and
/// of one) of a waiting job it wrote answer with a conflict, changing
/// nothing; once it ends, all
/// three go through. Outside a transaction each would wait for it to end;
/// the wire server the tests run never ends an abandoned one.
#[tokio::test]
async fn a_workers_writes_do_not_wait_for_an_open_transaction() {
    on_mongodb(
        "writes_beside_an_open_transaction",
        writes_beside_an_open_transaction,
    )
    .await
}

/// Runs `case` on a fresh MongoDB store and its database, dropped
/// afterwards.
async fn on_mongodb<F, Fut>(name: &'static str, case: F)
where
    F: FnOnce(Arc<dyn Store>, ::mongodb::Database) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let Some(test) = crate::common::TestStore::open(Backend::Mongo(name)).await else {
        return;
    };
    let db = test.database().expect("a MongoDB store");
    let result = case(test.store.clone(), db).await;
    test.remove().await;
    result.unwrap_or_else(|err| panic!("{err:#}"));
}

async fn writes_beside_an_open_transaction(
    store: Arc<dyn Store>,
    db: ::mongodb::Database,
) -> Result<()> {
    use bson::doc;
    let store = &store;
    let job = |key: &str| Job {
        kind: JobKind::Bump,
        tenant: T.into(),
        key: key.into(),
        payload: "{}".into(),
        queued: 1,
        failures: 0,
    };
    for key in ["one", "two"] {
        ensure!(store.enqueue(&job(key)).await?, "queued {key}");
    }
    let now = 1_000_000;
    let mut leases = store.claim(JobKind::Bump, "w", now, 5_000, 10).await?;
    leases.sort_by(|a, b| a.job.key.cmp(&b.job.key));
    ensure!(leases.len() == 2, "both claimed: {leases:?}");
    ensure!(store.enqueue(&job("three")).await?, "queued three");
    let mut session = db.client().start_session().await?;
    session.start_transaction().await?;
    db.collection::<bson::Document>("jobs")
        .update_many(
            doc! { "tenant": T, "key": { "$in": ["one", "three"] } },
            doc! { "$set": { "queued": 2_i64 } },
        )
        .session(&mut session)
        .await?;
    let renewed = promptly("a renewal", store.renew_all(&leases, now + 1_000)).await??;
    let [one, two] = renewed.as_slice() else {
        anyhow::bail!("one outcome per lease: {renewed:?}");
    };
    let not_lost = |r: &riverfeed::store::StoreResult<()>| matches!(r, Err(e) if e.kind != riverfeed::store::ErrorKind::LeaseLost);
    ensure!(not_lost(one), "the job the transaction wrote: {one:?}");
    ensure!(two.is_ok(), "the other is renewed: {two:?}");
    let until = |key: &'static str| async move {
        let queued = store
            .queued(JobKind::Bump, T, QueuedRead::under(""))
            .await?;
        let held = queued.into_iter().find(|q| q.job.key == key);
        anyhow::Ok(held.and_then(|q| q.held).map(|h| h.until))
    };
    ensure!(until("two").await? == Some(now + 6_000), "two renewed");
    let finished = promptly("the end of a job", store.finish(&leases[0])).await?;
    ensure!(
        not_lost(&finished),
        "its end meets the transaction: {finished:?}"
    );
    for limit in [10, 1] {
        let claim = store.claim(JobKind::Bump, "v", now, 5_000, limit);
        let claimed = promptly("a claim", claim).await?;
        ensure!(
            claimed.is_err(),
            "a claim of {limit} meets the transaction: {claimed:?}"
        );
    }
    session.abort_transaction().await?;
    let again = store.renew_all(&leases, now + 2_000).await?;
    ensure!(again.iter().all(|r| r.is_ok()), "both renewed: {again:?}");
    ensure!(until("one").await? == Some(now + 7_000), "one renewed");
    store.finish(&leases[0]).await?;
    let claimed = store.claim(JobKind::Bump, "v", now, 5_000, 10).await?;
    let keys: Vec<_> = claimed.iter().map(|l| l.job.key.as_str()).collect();
    ensure!(
        keys == ["three"],
        "three claimed once the transaction ended: {keys:?}"
    );
    Ok(())
}

/// What `write` answers, if it answers while a transaction it meets is
/// still open (within the tests' patience).
async fn promptly<T>(what: &str, write: impl std::future::Future<Output = T>) -> Result<T> {
    tokio::time::timeout(crate::common::PATIENCE, write)
        .await
        .with_context(|| format!("{what} answers while the transaction is open"))
}

/// A job document that does not read at all (a field of the wrong type,
/// as a hand-written or damaged one has) fails no claim: a claim of many
/// and a claim of one both take the sound job due after it, and the
/// damaged one is set aside (held by nobody, never due again, kept).
#[tokio::test]
async fn a_job_document_that_does_not_read_fails_no_claim() {
    on_mongodb(
        "unreadable_job_document",
        claims_beside_unreadable_documents,
    )
    .await
}

async fn claims_beside_unreadable_documents(
    store: Arc<dyn Store>,
    db: ::mongodb::Database,
) -> Result<()> {
    use bson::doc;
    let jobs = db.collection::<bson::Document>("jobs");
    for (n, limit) in [(1, 10), (2, 1)] {
        let damaged = format!("damaged-{n}");
        jobs.insert_one(doc! {
            "kind": JobKind::Bump.code(), "tenant": T, "key": &damaged,
            "payload": 42, "queued": 0_i64, "until": i64::MIN,
        })
        .await?;
        let sound = Job {
            kind: JobKind::Bump,
            tenant: T.into(),
            key: format!("sound-{n}"),
            payload: "{}".into(),
            queued: 1,
            failures: 0,
        };
        ensure!(store.enqueue(&sound).await?, "queued {}", sound.key);
        let claimed = store
            .claim(JobKind::Bump, "w", 1_000_000, 5_000, limit)
            .await
            .with_context(|| format!("a claim of {limit} beside {damaged}"))?;
        let keys: Vec<_> = claimed.iter().map(|l| l.job.key.as_str()).collect();
        ensure!(keys == [sound.key.as_str()], "claimed {keys:?}");
        let kept = jobs
            .find_one(doc! { "key": &damaged })
            .await?
            .context("the damaged job is kept")?;
        ensure!(
            kept.get_i64("until") == Ok(i64::MAX) && !kept.contains_key("worker"),
            "set aside: {kept:?}"
        );
    }
    Ok(())
}
