//! The conformance cases of the job queue (`JobStore`): the lease semantics
//! every kind of background work relies on, written once. The store suite
//! runs each alone on a fresh store of each backend
//! (`store_suite::embedded::enqueue_is_idempotent`, …).

use anyhow::{ensure, Context, Result};
use riverfeed::store::prelude::*;
use riverfeed::store::QueuedRead;
use riverfeed::store::{ErrorKind, Held, Job, JobKind, Lease, Queued};

use crate::common::{concluded, earlier_database};

const T: &str = "jobs";
const LEASE: i64 = 500;

fn job(kind: JobKind, tenant: &str, key: &str, queued: i64) -> Job {
    Job::new(kind, tenant, key, &format!("payload of {key}"), queued).expect("a payload")
}

fn keys(leases: &[Lease]) -> Vec<&str> {
    leases.iter().map(|l| l.job.key.as_str()).collect()
}

/// Queueing a job of a waiting or leased key changes nothing, its payload
/// and place included; a finished key may be queued again.
pub async fn enqueue_is_idempotent(store: &dyn Store) -> Result<()> {
    let first = job(JobKind::Notice, T, "a", 10);
    ensure!(store.enqueue(&first).await?, "queued");
    let mut again = job(JobKind::Notice, T, "a", 5);
    again.payload = "\"another\"".into();
    ensure!(!store.enqueue(&again).await?, "waiting: not queued twice");
    let leases = store.claim(JobKind::Notice, "w1", 1_000, LEASE, 10).await?;
    ensure!(leases.len() == 1, "one job: {leases:?}");
    ensure!(
        leases[0].job == first,
        "as first queued: {:?}",
        leases[0].job
    );
    ensure!(
        leases[0].job.payload::<String>()? == "payload of a",
        "the payload reads back"
    );
    ensure!(!store.enqueue(&again).await?, "leased: not queued twice");
    store.finish(&leases[0]).await?;
    ensure!(store.enqueue(&again).await?, "finished: queued again");
    let leases = store.claim(JobKind::Notice, "w1", 1_000, LEASE, 10).await?;
    ensure!(leases.len() == 1 && leases[0].job == again, "{leases:?}");
    Ok(())
}

/// Waiting jobs are claimed in the order queued, at most `limit` at a time,
/// each leased to the claiming worker; leased ones are not claimed again.
pub async fn claims_in_order_up_to_the_limit(store: &dyn Store) -> Result<()> {
    for (key, queued) in [("c", 30), ("a", 10), ("d", 40), ("b", 20)] {
        store.enqueue(&job(JobKind::Notice, T, key, queued)).await?;
    }
    let first = store.claim(JobKind::Notice, "w1", 1_000, LEASE, 3).await?;
    ensure!(keys(&first) == ["a", "b", "c"], "{:?}", keys(&first));
    ensure!(first
        .iter()
        .all(|l| l.worker == "w1" && l.lease_ms == LEASE && !l.taken_over));
    let rest = store.claim(JobKind::Notice, "w2", 1_000, LEASE, 3).await?;
    ensure!(
        keys(&rest) == ["d"],
        "the leased ones wait: {:?}",
        keys(&rest)
    );
    ensure!(store
        .claim(JobKind::Notice, "w2", 1_000, LEASE, 3)
        .await?
        .is_empty());
    ensure!(store
        .claim(JobKind::Notice, "w2", 1_000, LEASE, 0)
        .await?
        .is_empty());
    Ok(())
}

/// A job that falls due again while a claim runs is leased once by it. A
/// scope change does that to a fan-out between a claim's steps; a lease
/// that ends at once does it here. The worker cannot tell two leases of one
/// job apart: it read the action once, took the second for a job whose
/// action is gone and finished it, and the fan-out never ran.
pub async fn a_claim_leases_each_job_once(store: &dyn Store) -> Result<()> {
    for (key, queued) in [("a", 10), ("b", 20)] {
        store.enqueue(&job(JobKind::Notice, T, key, queued)).await?;
    }
    let leases = store.claim(JobKind::Notice, "w1", 1_000, 0, 10).await?;
    let mut claimed = keys(&leases);
    claimed.sort_unstable();
    ensure!(claimed == ["a", "b"], "each job once: {claimed:?}");
    Ok(())
}

/// A lease that ran out is claimed by the next worker, which is told it
/// took the job over; one still running is not; renewing extends it.
pub async fn expired_leases_are_taken_over(store: &dyn Store) -> Result<()> {
    store.enqueue(&job(JobKind::Notice, T, "a", 10)).await?;
    store.enqueue(&job(JobKind::Notice, T, "b", 20)).await?;
    let held = store.claim(JobKind::Notice, "w1", 1_000, LEASE, 10).await?;
    ensure!(held.len() == 2);
    // `a` renewed at 1_200 runs to 1_700; `b` runs out at 1_500.
    store.renew(&held[0], 1_200).await?;
    ensure!(store
        .claim(JobKind::Notice, "w2", 1_499, LEASE, 10)
        .await?
        .is_empty());
    let taken = store.claim(JobKind::Notice, "w2", 1_500, LEASE, 10).await?;
    ensure!(keys(&taken) == ["b"], "{:?}", keys(&taken));
    ensure!(taken[0].taken_over && taken[0].worker == "w2");
    let taken = store.claim(JobKind::Notice, "w3", 1_700, LEASE, 10).await?;
    ensure!(keys(&taken) == ["a"] && taken[0].taken_over);
    Ok(())
}

/// A deferred job is held by nobody and waits for its time: not claimed
/// before it, claimed at it without a takeover; its old holder can no
/// longer renew it. Deferring a job another worker holds is `LeaseLost`.
pub async fn deferred_jobs_wait_for_their_time(store: &dyn Store) -> Result<()> {
    store.enqueue(&job(JobKind::Webhook, T, "a", 10)).await?;
    store.enqueue(&job(JobKind::Webhook, T, "b", 20)).await?;
    let held = store
        .claim(JobKind::Webhook, "w1", 1_000, LEASE, 10)
        .await?;
    ensure!(keys(&held) == ["a", "b"], "{:?}", keys(&held));
    // `a` waits until 5_000, far past its lease; `b` keeps its lease.
    store.defer(&held[0], 5_000).await?;
    let queued = store
        .queued(JobKind::Webhook, T, QueuedRead::under("a"))
        .await?;
    ensure!(
        queued.len() == 1 && queued[0].held.is_none(),
        "deferred: held by nobody: {queued:?}"
    );
    let lost = store.renew(&held[0], 1_100).await.unwrap_err();
    ensure!(lost.kind == ErrorKind::LeaseLost, "{lost:?}");
    let taken = store
        .claim(JobKind::Webhook, "w2", 4_999, LEASE, 10)
        .await?;
    ensure!(
        keys(&taken) == ["b"],
        "only the lease run out: {:?}",
        keys(&taken)
    );
    let lost = store.defer(&held[1], 9_000).await.unwrap_err();
    ensure!(lost.kind == ErrorKind::LeaseLost, "w2 holds b: {lost:?}");
    let due = store
        .claim(JobKind::Webhook, "w3", 5_000, LEASE, 10)
        .await?;
    ensure!(keys(&due) == ["a"], "due at its time: {:?}", keys(&due));
    ensure!(!due[0].taken_over, "nobody held it");
    Ok(())
}

/// A claim reads on from where earlier claims found nothing live, and
/// what comes behind that point is still seen: a job queued as of before
/// the jobs claimed and finished ahead of it, and a lease renewed to end
/// sooner than it did.
pub async fn claims_see_what_comes_behind_them(store: &dyn Store) -> Result<()> {
    for (n, key) in ["a", "b", "c"].into_iter().enumerate() {
        store
            .enqueue(&job(JobKind::Notice, T, key, 100 + n as i64))
            .await?;
        let done = store.claim(JobKind::Notice, "w1", 1_000, LEASE, 10).await?;
        ensure!(keys(&done) == [key], "{:?}", keys(&done));
        store.finish(&done[0]).await?;
    }
    ensure!(store
        .claim(JobKind::Notice, "w1", 1_000, LEASE, 10)
        .await?
        .is_empty());
    store.enqueue(&job(JobKind::Notice, T, "early", 5)).await?;
    let held = store.claim(JobKind::Notice, "w1", 1_000, LEASE, 10).await?;
    ensure!(keys(&held) == ["early"], "{:?}", keys(&held));
    // Renewed at 900, the lease runs to 1_400 rather than 1_500.
    store.renew(&held[0], 900).await?;
    ensure!(store
        .claim(JobKind::Notice, "w2", 1_399, LEASE, 10)
        .await?
        .is_empty());
    let taken = store.claim(JobKind::Notice, "w2", 1_400, LEASE, 10).await?;
    ensure!(
        keys(&taken) == ["early"] && taken[0].taken_over,
        "{:?}",
        keys(&taken)
    );
    Ok(())
}

/// Jobs queued while a worker claims are all claimed, once each: a claim
/// never passes over a job it could not see yet.
pub async fn queued_while_claiming_all_claimed(store: &dyn Store) -> Result<()> {
    const QUEUES: usize = 4;
    const EACH: usize = 50;
    let queued = std::sync::atomic::AtomicBool::new(false);
    let queue = |q: usize| async move {
        for n in 0..EACH {
            let key = format!("{q}-{n}");
            let at = (n * QUEUES + q) as i64;
            store.enqueue(&job(JobKind::Notice, T, &key, at)).await?;
        }
        anyhow::Ok(())
    };
    let queueing = async {
        let done = futures_util::future::try_join_all((0..QUEUES).map(queue)).await;
        queued.store(true, std::sync::atomic::Ordering::SeqCst);
        done
    };
    let claiming = async {
        let mut claimed = std::collections::HashSet::new();
        loop {
            // Read before the claim: once every job is queued, a claim that
            // finds nothing ends the run.
            let all_queued = queued.load(std::sync::atomic::Ordering::SeqCst);
            let leases = store.claim(JobKind::Notice, "w1", 1_000, LEASE, 16).await?;
            for lease in &leases {
                ensure!(
                    claimed.insert(lease.job.key.clone()),
                    "{} twice",
                    lease.job.key
                );
                store.finish(lease).await?;
            }
            if leases.is_empty() {
                if all_queued {
                    return anyhow::Ok(claimed.len());
                }
                tokio::task::yield_now().await;
            }
        }
    };
    let (queueing, claimed) = tokio::join!(queueing, claiming);
    queueing?;
    let claimed = claimed?;
    ensure!(
        claimed == QUEUES * EACH,
        "claimed {claimed} of {}",
        QUEUES * EACH
    );
    Ok(())
}

/// Once another worker holds a job, the one that lost it can neither renew
/// nor finish it (`LeaseLost`), nor renew it once the new holder finished
/// it; finishing a job that is gone changes nothing. A lease that ran out
/// but was not taken over is still its holder's.
pub async fn lost_leases_cannot_renew_or_finish(store: &dyn Store) -> Result<()> {
    store.enqueue(&job(JobKind::Notice, T, "a", 10)).await?;
    let old = store.claim(JobKind::Notice, "w1", 1_000, LEASE, 1).await?;
    let old = old.first().context("claimed")?;
    store
        .renew(old, 2_000)
        .await
        .context("ran out, not taken over: still w1's")?;
    let new = store.claim(JobKind::Notice, "w2", 2_500, LEASE, 1).await?;
    let new = new.first().context("taken over")?;
    for (what, err) in [
        ("renew", store.renew(old, 2_600).await.err()),
        ("finish", store.finish(old).await.err()),
    ] {
        let err = err.with_context(|| format!("{what} with a lost lease"))?;
        ensure!(err.kind == ErrorKind::LeaseLost, "{what}: {err:?}");
    }
    store.renew(new, 2_600).await?;
    store.finish(new).await?;
    let err = store
        .renew(old, 2_700)
        .await
        .err()
        .context("renew a gone job")?;
    ensure!(err.kind == ErrorKind::LeaseLost, "{err:?}");
    store.finish(old).await.context("finish a gone job")?;
    Ok(())
}

/// A finished job is gone: never claimed again, however late.
pub async fn finish_removes(store: &dyn Store) -> Result<()> {
    store.enqueue(&job(JobKind::Notice, T, "a", 10)).await?;
    store.enqueue(&job(JobKind::Notice, T, "b", 20)).await?;
    let held = store.claim(JobKind::Notice, "w1", 1_000, LEASE, 10).await?;
    store.finish(&held[0]).await?;
    let later = store
        .claim(JobKind::Notice, "w2", 1_000_000, LEASE, 10)
        .await?;
    ensure!(keys(&later) == ["b"], "{:?}", keys(&later));
    store.finish(&later[0]).await?;
    ensure!(store
        .claim(JobKind::Notice, "w2", 2_000_000, LEASE, 10)
        .await?
        .is_empty());
    ensure!(store.backlog(JobKind::Notice).await?.jobs == 0);
    Ok(())
}

/// The backlog counts a kind's waiting and leased jobs and says when the
/// oldest was queued.
pub async fn backlog_counts_and_oldest(store: &dyn Store) -> Result<()> {
    let empty = store.backlog(JobKind::Cleanup).await?;
    ensure!(empty.jobs == 0 && empty.oldest.is_none(), "{empty:?}");
    for (key, queued) in [("b", 20), ("a", 10), ("c", 30)] {
        store
            .enqueue(&job(JobKind::Cleanup, T, key, queued))
            .await?;
    }
    let held = store.claim(JobKind::Cleanup, "w1", 1_000, LEASE, 1).await?;
    let backlog = store.backlog(JobKind::Cleanup).await?;
    ensure!(
        backlog.jobs == 3 && backlog.oldest == Some(10),
        "leased ones count: {backlog:?}"
    );
    store.finish(&held[0]).await?;
    let backlog = store.backlog(JobKind::Cleanup).await?;
    ensure!(
        backlog.jobs == 2 && backlog.oldest == Some(20),
        "{backlog:?}"
    );
    Ok(())
}

/// Each kind is its own queue: the same tenant and key in two kinds are two
/// jobs, and a claim of one kind never returns another's.
pub async fn kinds_are_independent(store: &dyn Store) -> Result<()> {
    for kind in JobKind::ALL {
        ensure!(store.enqueue(&job(kind, T, "same", 10)).await?, "{kind:?}");
    }
    for kind in JobKind::ALL {
        let leases = store.claim(kind, "w1", 1_000, LEASE, 10).await?;
        ensure!(
            leases.len() == 1 && leases[0].job.kind == kind,
            "{kind:?}: {leases:?}"
        );
        ensure!(store.backlog(kind).await?.jobs == 1, "{kind:?}");
        store.finish(&leases[0]).await?;
        ensure!(store.backlog(kind).await?.jobs == 0, "{kind:?}");
    }
    for kind in JobKind::ALL {
        ensure!(
            store.claim(kind, "w1", 9_000, LEASE, 10).await?.is_empty(),
            "{kind:?} finished"
        );
    }
    Ok(())
}

/// The same key in two tenants is two jobs, each finished on its own.
pub async fn tenants_are_independent(store: &dyn Store) -> Result<()> {
    ensure!(store.enqueue(&job(JobKind::Bump, T, "k", 10)).await?);
    ensure!(store.enqueue(&job(JobKind::Bump, "other", "k", 20)).await?);
    let leases = store.claim(JobKind::Bump, "w1", 1_000, LEASE, 10).await?;
    let tenants: Vec<&str> = leases.iter().map(|l| l.job.tenant.as_str()).collect();
    ensure!(tenants == [T, "other"], "{tenants:?}");
    store.finish(&leases[0]).await?;
    let left = store.claim(JobKind::Bump, "w2", 5_000, LEASE, 10).await?;
    ensure!(
        left.len() == 1 && left[0].job.tenant == "other" && left[0].taken_over,
        "{left:?}"
    );
    Ok(())
}

/// A cancelled job is gone whether it waited or was leased: its holder
/// cannot renew it, finishing it is nothing, and its key may be queued
/// again; cancelling what is not there answers `false`.
pub async fn cancel_removes_waiting_or_leased(store: &dyn Store) -> Result<()> {
    for (key, queued) in [("held", 10), ("waits", 20)] {
        ensure!(
            store
                .enqueue(&job(JobKind::Cleanup, T, key, queued))
                .await?
        );
    }
    let held = store.claim(JobKind::Cleanup, "w1", 1_000, LEASE, 1).await?;
    let held = held
        .into_iter()
        .find(|l| l.job.key == "held")
        .context("claimed")?;
    ensure!(store.cancel(JobKind::Cleanup, T, "waits").await?, "waiting");
    ensure!(store.cancel(JobKind::Cleanup, T, "held").await?, "leased");
    ensure!(!store.cancel(JobKind::Cleanup, T, "held").await?, "gone");
    let err = store
        .renew(&held, 1_100)
        .await
        .err()
        .context("renewing a cancelled job")?;
    ensure!(err.kind == ErrorKind::LeaseLost, "{err}");
    store.finish(&held).await?;
    ensure!(store.backlog(JobKind::Cleanup).await?.jobs == 0);
    ensure!(
        store
            .claim(JobKind::Cleanup, "w2", 9_000, LEASE, 10)
            .await?
            .is_empty(),
        "nothing left to claim"
    );
    ensure!(store.enqueue(&job(JobKind::Cleanup, T, "held", 20)).await?);
    Ok(())
}

/// `queued` lists the waiting and leased jobs of one kind and tenant whose
/// key begins with the prefix, in key order, and nothing else.
pub async fn queued_lists_a_key_prefix(store: &dyn Store) -> Result<()> {
    ensure!(
        store
            .queued(JobKind::Cleanup, T, QueuedRead::under("ann/"))
            .await?
            .is_empty(),
        "none yet"
    );
    for key in ["ann/b", "ann/a", "anna/x", "bob/a"] {
        store.enqueue(&job(JobKind::Cleanup, T, key, 10)).await?;
    }
    store.enqueue(&job(JobKind::Bump, T, "ann/c", 10)).await?;
    store
        .enqueue(&job(JobKind::Cleanup, "other", "ann/d", 10))
        .await?;
    store.claim(JobKind::Cleanup, "w1", 1_000, LEASE, 1).await?;
    let keys = |jobs: Vec<Queued>| jobs.into_iter().map(|q| q.job.key).collect::<Vec<_>>();
    let queued = store
        .queued(JobKind::Cleanup, T, QueuedRead::under("ann/"))
        .await?;
    // One of the two was claimed (which one, of two queued at once, is the
    // backend's to pick).
    let mut held: Vec<_> = queued.iter().map(|q| q.held.clone()).collect();
    held.sort();
    let leased = Held {
        worker: "w1".into(),
        until: 1_000 + LEASE,
    };
    ensure!(
        held == [None, Some(leased)],
        "the lease, where one is held: {held:?}"
    );
    let anns = keys(queued);
    ensure!(
        anns == ["ann/a", "ann/b"],
        "leased or not, in order: {anns:?}"
    );
    let all = keys(
        store
            .queued(JobKind::Cleanup, T, QueuedRead::under(""))
            .await?,
    );
    ensure!(
        all == ["ann/a", "ann/b", "anna/x", "bob/a"],
        "the empty prefix: {all:?}"
    );
    Ok(())
}

/// The backlog of `kind` once the store is opened again: a migration
/// recorded as done moves nothing twice.
async fn reopened_backlog(url: &str, kind: JobKind) -> Result<u64> {
    let store = riverfeed::store::open(url).await?;
    Ok(store.backlog(kind).await?.jobs)
}

/// A MongoDB database written before the job queue, with a notice job
/// waiting and one leased (documents of that release's shape, inserted
/// raw), opens with both pending: the waiting one due now, the leased one
/// when its lease runs out, taken over. The move is noted and made once.
#[tokio::test]
async fn earlier_mongodb_notice_jobs_are_moved_once() {
    use bson::{doc, oid::ObjectId};
    use riverfeed::store::NoticeJob;

    let Some((url, db)) = earlier_database("jobs_earlier_notice_jobs").await else {
        return;
    };
    let liked = ObjectId::new();
    db.collection("notice_jobs")
        .insert_many([
            doc! {
                "_id": ObjectId::new(),
                "tenant": T,
                "key": format!("l:{liked}:rita"),
                "job": {
                    "tenant": T,
                    "source": { "kind": "like", "actionId": liked, "user": "rita" },
                    "at": 10_i64,
                },
                "until": i64::MIN,
            },
            doc! {
                "_id": ObjectId::new(),
                "tenant": T,
                "key": "a:mary:john",
                "job": {
                    "tenant": T,
                    "source": { "kind": "assigned", "refId": "mary", "user": "john", "by": "ann" },
                    "at": 20_i64,
                },
                "until": 5_000_i64,
                "worker": "w1",
            },
        ])
        .await
        .expect("earlier jobs inserted");
    let result = async {
        let store = riverfeed::store::open(&url).await?;
        let now = store.claim(JobKind::Notice, "w2", 1_000, LEASE, 10).await?;
        ensure!(
            keys(&now) == [format!("l:{liked}:rita")],
            "the waiting one: {now:?}"
        );
        let job = NoticeJob::of_job(&now[0].job)?;
        ensure!(job.at == 10 && !now[0].taken_over, "{job:?}");
        store.finish(&now[0]).await?;
        let later = store.claim(JobKind::Notice, "w2", 5_000, LEASE, 10).await?;
        ensure!(
            keys(&later) == ["a:mary:john"] && later[0].taken_over,
            "the leased one, once its lease ran out: {later:?}"
        );
        ensure!(store.backlog(JobKind::Notice).await?.jobs == 1);
        let left = db
            .list_collection_names()
            .await?
            .into_iter()
            .any(|name| name == "notice_jobs");
        ensure!(!left, "the earlier collection is gone");
        drop(store);
        ensure!(
            reopened_backlog(&url, JobKind::Notice).await? == 1,
            "moved once"
        );
        Ok(())
    }
    .await;
    concluded(&db, result).await;
}

/// A MongoDB database of the release before bumps were jobs (notice jobs
/// moved already): a bump waiting and one leased, kept as fields of their
/// comments with an index of their own, open as jobs carrying their
/// comments, the leased one due when its lease runs out; the fields and the
/// index go, and the move is recorded.
#[tokio::test]
async fn earlier_mongodb_bumps_are_moved_once() {
    use bson::{doc, oid::ObjectId, DateTime};
    use riverfeed::store::BumpJob;

    let Some((url, db)) = earlier_database("jobs_earlier_bumps").await else {
        return;
    };
    let (action, waiting, held) = (ObjectId::new(), ObjectId::new(), ObjectId::new());
    let comments = db.collection::<bson::Document>("comments");
    comments
        .insert_many([
            doc! {
                "_id": waiting, "tenant": T, "actionId": action, "authorId": "rita",
                "text": "one", "created": DateTime::from_millis(10),
                "bumpDue": DateTime::from_millis(0),
            },
            doc! {
                "_id": held, "tenant": T, "actionId": action, "authorId": "john",
                "text": "two", "created": DateTime::from_millis(20),
                "bumpDue": DateTime::from_millis(5_000), "bumpWorker": "w1",
            },
        ])
        .await
        .expect("earlier comments inserted");
    comments
        .create_index(
            ::mongodb::IndexModel::builder()
                .keys(doc! { "bumpDue": 1, "_id": 1 })
                .options(
                    ::mongodb::options::IndexOptions::builder()
                        .name("bumpable".to_owned())
                        .partial_filter_expression(doc! { "bumpDue": { "$exists": true } })
                        .build(),
                )
                .build(),
        )
        .await
        .expect("the earlier index");
    db.collection::<bson::Document>("meta")
        .insert_one(doc! { "_id": "jobs", "version": 1 })
        .await
        .expect("the earlier version");
    let result = async {
        let store = riverfeed::store::open(&url).await?;
        let now = store.claim(JobKind::Bump, "w2", 1_000, LEASE, 10).await?;
        ensure!(keys(&now) == [waiting.to_hex()], "the waiting one: {now:?}");
        let bump = BumpJob::of_job(&now[0].job)?;
        ensure!(
            bump.tenant == T
                && bump.comment.text == "one"
                && bump.comment.created == 10
                && !now[0].taken_over,
            "{bump:?}"
        );
        store.finish(&now[0]).await?;
        let later = store.claim(JobKind::Bump, "w2", 5_000, LEASE, 10).await?;
        ensure!(
            keys(&later) == [held.to_hex()] && later[0].taken_over,
            "the leased one, once its lease ran out: {later:?}"
        );
        let left = comments
            .count_documents(doc! { "bumpDue": { "$exists": true } })
            .await?;
        ensure!(left == 0, "the earlier fields are gone");
        let indexes = comments.list_index_names().await?;
        ensure!(
            !indexes.iter().any(|n| n == "bumpable"),
            "the earlier index is gone: {indexes:?}"
        );
        drop(store);
        ensure!(
            reopened_backlog(&url, JobKind::Bump).await? == 1,
            "moved once"
        );
        Ok(())
    }
    .await;
    concluded(&db, result).await;
}

/// A MongoDB database of the release before cleanups were jobs: an
/// unfollow waiting for its cleanup and a group left whose cleanup was
/// leased, in `unfollows`, open as cleanup jobs that reads apply, the
/// leased one due when its lease runs out; the collection goes and the
/// move is recorded.
#[tokio::test]
async fn earlier_mongodb_cleanups_are_moved_once() {
    use bson::{doc, oid::ObjectId, DateTime};
    use riverfeed::model::EdgeKind;
    use riverfeed::store::Unfollow;
    use riverfeed::timeline::unfollow;

    let Some((url, db)) = earlier_database("jobs_earlier_cleanups").await else {
        return;
    };
    db.collection::<bson::Document>("unfollows")
        .insert_many([
            doc! {
                "_id": ObjectId::new(), "tenant": T, "reader": "ann", "kind": "follows",
                "actor": "bob", "lockedUntil": DateTime::from_millis(0), "worker": "",
            },
            doc! {
                "_id": ObjectId::new(), "tenant": T, "reader": "ann", "kind": "group",
                "actor": "team-1", "lockedUntil": DateTime::from_millis(5_000), "worker": "w1",
            },
        ])
        .await
        .expect("earlier unfollows inserted");
    db.collection::<bson::Document>("meta")
        .insert_one(doc! { "_id": "jobs", "version": 2 })
        .await
        .expect("the earlier version");
    let unfollowed = Unfollow::edge(T, "ann", EdgeKind::Follows, "bob");
    let left = Unfollow::group(T, "ann", "team-1");
    let result = async {
        let store = riverfeed::store::open(&url).await?;
        let mut pending = unfollow::pending(store.as_ref(), T, "ann").await?;
        pending.sort_by(|a, b| a.actor.cmp(&b.actor));
        ensure!(
            pending == [unfollowed.clone(), left.clone()],
            "reads apply both: {pending:?}"
        );
        let now = store
            .claim(JobKind::Cleanup, "w2", 1_000, LEASE, 10)
            .await?;
        ensure!(
            keys(&now) == [unfollowed.key()] && !now[0].taken_over,
            "the waiting one: {now:?}"
        );
        store.finish(&now[0]).await?;
        let later = store
            .claim(JobKind::Cleanup, "w2", 5_000, LEASE, 10)
            .await?;
        ensure!(
            keys(&later) == [left.key()] && later[0].taken_over,
            "the leased one, once its lease ran out: {later:?}"
        );
        let gone = !db
            .list_collection_names()
            .await?
            .iter()
            .any(|name| name == "unfollows");
        ensure!(gone, "the earlier collection is gone");
        drop(store);
        ensure!(
            reopened_backlog(&url, JobKind::Cleanup).await? == 1,
            "moved once"
        );
        Ok(())
    }
    .await;
    concluded(&db, result).await;
}

/// A MongoDB database of the release before fan-outs were jobs: an action
/// whose fan-out waits and one whose fan-out was leased (`fanOut.lockedUntil`
/// and `fanOut.worker` on the action, under the partial `claimable` index)
/// open as fan-out jobs of their actions, the leased one due when its lease
/// runs out; the fields and the index go, the actions say their fan-out is
/// pending, and the move is recorded.
#[tokio::test]
async fn earlier_mongodb_fan_outs_are_moved_once() {
    use bson::{doc, oid::ObjectId, DateTime};

    let Some((url, db)) = earlier_database("jobs_earlier_fan_outs").await else {
        return;
    };
    let (waiting, held) = (ObjectId::new(), ObjectId::new());
    let actions = db.collection::<bson::Document>("actions");
    actions
        .insert_many([
            doc! {
                "_id": waiting, "tenant": T,
                "fanOut": { "state": "PENDING", "lockedUntil": DateTime::from_millis(0) },
            },
            doc! {
                "_id": held, "tenant": T,
                "fanOut": {
                    "state": "IN_PROGRESS", "lockedUntil": DateTime::from_millis(5_000),
                    "worker": "w1",
                },
            },
        ])
        .await
        .expect("earlier actions inserted");
    actions
        .create_index(
            ::mongodb::IndexModel::builder()
                .keys(doc! { "fanOut.lockedUntil": 1, "_id": 1 })
                .options(
                    ::mongodb::options::IndexOptions::builder()
                        .name("claimable".to_owned())
                        .partial_filter_expression(
                            doc! { "fanOut.lockedUntil": { "$exists": true } },
                        )
                        .build(),
                )
                .build(),
        )
        .await
        .expect("the earlier index");
    db.collection::<bson::Document>("meta")
        .insert_one(doc! { "_id": "jobs", "version": 3 })
        .await
        .expect("the earlier version");
    let result = async {
        let store = riverfeed::store::open(&url).await?;
        let now = store.claim(JobKind::FanOut, "w2", 1_000, LEASE, 10).await?;
        ensure!(
            keys(&now) == [waiting.to_hex()] && !now[0].taken_over,
            "the waiting one: {now:?}"
        );
        store.finish(&now[0]).await?;
        let later = store.claim(JobKind::FanOut, "w2", 5_000, LEASE, 10).await?;
        ensure!(
            keys(&later) == [held.to_hex()] && later[0].taken_over,
            "the leased one, once its lease ran out: {later:?}"
        );
        for id in [waiting, held] {
            let stored = actions
                .find_one(doc! { "_id": id })
                .await?
                .context("the action")?;
            let fan_out = stored.get_document("fanOut")?;
            ensure!(
                *fan_out == doc! { "state": "PENDING" },
                "the earlier fields are gone: {fan_out}"
            );
        }
        let indexes = actions.list_index_names().await?;
        ensure!(
            !indexes.iter().any(|n| n == "claimable"),
            "the earlier index is gone: {indexes:?}"
        );
        drop(store);
        ensure!(
            reopened_backlog(&url, JobKind::FanOut).await? == 1,
            "moved once"
        );
        Ok(())
    }
    .await;
    concluded(&db, result).await;
}
