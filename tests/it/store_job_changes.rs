//! The conformance cases of what a job's holder and an operator change in
//! a waiting job (`JobStore::defer` with a new payload, `JobStore::hasten`)
//! and of a worker renewing all it holds at once (`JobStore::renew_all`),
//! beside the lease semantics of `store_jobs.rs`; run by the store suite on
//! every backend.

use anyhow::{ensure, Result};
use riverfeed::store::prelude::*;
use riverfeed::store::QueuedRead;
use riverfeed::store::{ErrorKind, Job, JobKind, Lease};

const T: &str = "jobs";
const LEASE: i64 = 500;

fn job(kind: JobKind, tenant: &str, key: &str, queued: i64) -> Job {
    Job::new(kind, tenant, key, &format!("payload of {key}"), queued).expect("a payload")
}

fn keys(leases: &[Lease]) -> Vec<&str> {
    leases.iter().map(|l| l.job.key.as_str()).collect()
}

/// A deferral keeps the payload its lease carries: what the holder
/// recorded (a delivery's attempts) is what the next claim reads, and the
/// listing shows the time it waits for.
pub async fn deferral_keeps_the_payload_it_carries(store: &dyn Store) -> Result<()> {
    store.enqueue(&job(JobKind::Webhook, T, "a", 10)).await?;
    let held = store
        .claim(JobKind::Webhook, "w1", 1_000, LEASE, 10)
        .await?;
    ensure!(keys(&held) == ["a"], "{:?}", keys(&held));
    let listed = store
        .queued(JobKind::Webhook, T, QueuedRead::under("a"))
        .await?;
    ensure!(listed[0].waits_until.is_none(), "held: {listed:?}");
    let mut tried = held[0].clone();
    tried.job.payload = "\"tried once\"".into();
    store.defer(&tried, 5_000).await?;
    let listed = store
        .queued(JobKind::Webhook, T, QueuedRead::under("a"))
        .await?;
    ensure!(
        listed.len() == 1 && listed[0].job.payload == "\"tried once\"",
        "the new payload is listed: {listed:?}"
    );
    ensure!(
        listed[0].waits_until == Some(5_000) && listed[0].held.is_none(),
        "waits for its time: {listed:?}"
    );
    let due = store
        .claim(JobKind::Webhook, "w2", 5_000, LEASE, 10)
        .await?;
    ensure!(
        due.len() == 1 && due[0].job.payload::<String>()? == "tried once",
        "the next claim reads it: {due:?}"
    );
    ensure!(due[0].job.queued == 10, "queued when first queued: {due:?}");
    Ok(())
}

/// Hastening makes the deferred jobs under a key prefix due now, and only
/// those: a job under a running lease, one due already and one under
/// another prefix are left be. A hastened job is held by nobody, keeps its
/// payload, and is claimed at once without a takeover.
pub async fn hasten_makes_deferred_jobs_due_now(store: &dyn Store) -> Result<()> {
    for (key, queued) in [("h a", 10), ("h b", 20), ("h c", 30), ("x d", 40)] {
        store
            .enqueue(&job(JobKind::Webhook, T, key, queued))
            .await?;
    }
    let held = store
        .claim(JobKind::Webhook, "w1", 1_000, LEASE, 10)
        .await?;
    ensure!(
        keys(&held) == ["h a", "h b", "h c", "x d"],
        "{:?}",
        keys(&held)
    );
    store.defer(&held[0], 60_000).await?;
    store.defer(&held[1], 90_000).await?;
    store.defer(&held[3], 60_000).await?;
    store.enqueue(&job(JobKind::Webhook, T, "h e", 50)).await?;
    ensure!(
        store.hasten(JobKind::Webhook, T, "h ", 1_100).await? == 2,
        "a and b brought forward"
    );
    let listed = store
        .queued(JobKind::Webhook, T, QueuedRead::under("h "))
        .await?;
    let held_c = listed.iter().find(|q| q.job.key == "h c");
    ensure!(
        held_c.is_some_and(|q| q.held.as_ref().is_some_and(|h| h.worker == "w1")),
        "c still held: {listed:?}"
    );
    let due = store
        .claim(JobKind::Webhook, "w2", 1_100, LEASE, 10)
        .await?;
    let mut got = keys(&due);
    got.sort_unstable();
    ensure!(got == ["h a", "h b", "h e"], "due now: {got:?}");
    ensure!(due.iter().all(|l| !l.taken_over), "nobody held them");
    ensure!(
        due.iter()
            .all(|l| l.job.payload::<String>().ok() == Some(format!("payload of {}", l.job.key))),
        "payloads kept: {due:?}"
    );
    ensure!(
        store.hasten(JobKind::Webhook, T, "h ", 1_200).await? == 0,
        "nothing left to bring forward"
    );
    let other = store
        .queued(JobKind::Webhook, T, QueuedRead::under("x "))
        .await?;
    ensure!(
        other.len() == 1 && other[0].waits_until == Some(60_000),
        "another prefix keeps its time: {other:?}"
    );
    Ok(())
}

/// A read of the queue by page: past a key, of the jobs that failed (by
/// the failures a deferral gives back, or a job is queued with) or of those
/// that never did, at most `limit`, in key order, so that paging covers
/// each once; a claim keeps a job's failures, and a job finished leaves.
pub async fn queued_pages_by_failures(store: &dyn Store) -> Result<()> {
    for n in 0..8 {
        let key = format!("h {n}");
        store.enqueue(&job(JobKind::Webhook, T, &key, n)).await?;
    }
    store.enqueue(&job(JobKind::Webhook, T, "x 0", 9)).await?;
    let failed_twice = Job {
        failures: 2,
        ..job(JobKind::Webhook, T, "h 8", 10)
    };
    store.enqueue(&failed_twice).await?;
    let held = store
        .claim(JobKind::Webhook, "w1", 1_000, LEASE, 20)
        .await?;
    ensure!(held.len() == 10, "{:?}", keys(&held));
    let lease = |key: &str| held.iter().find(|l| l.job.key == key).expect("held");
    for key in ["h 1", "h 3", "h 5"] {
        let mut tried = lease(key).clone();
        tried.job.failures = 1;
        store.defer(&tried, 60_000).await?;
    }
    // Given back untried (a hold): it never failed.
    store.defer(lease("h 2"), 60_000).await?;

    let page = |after: Option<&'static str>, failed: Option<bool>, limit: usize| async move {
        let read = QueuedRead {
            under: "h ",
            after,
            failed,
            limit,
        };
        let listed = store.queued(JobKind::Webhook, T, read).await?;
        let got: Vec<(String, u32)> = listed
            .into_iter()
            .map(|q| (q.job.key, q.job.failures))
            .collect();
        anyhow::Ok(got)
    };
    let of = |pairs: &[(&str, u32)]| -> Vec<(String, u32)> {
        pairs.iter().map(|(k, f)| (k.to_string(), *f)).collect()
    };
    ensure!(page(None, Some(true), 2).await? == of(&[("h 1", 1), ("h 3", 1)]));
    ensure!(page(Some("h 3"), Some(true), 2).await? == of(&[("h 5", 1), ("h 8", 2)]));
    ensure!(page(Some("h 8"), Some(true), 2).await?.is_empty());
    let untried = of(&[("h 0", 0), ("h 2", 0), ("h 4", 0)]);
    ensure!(page(None, Some(false), 3).await? == untried, "never failed");
    let rest = page(Some("h 4"), Some(false), 3).await?;
    ensure!(rest == of(&[("h 6", 0), ("h 7", 0)]), "{rest:?}");
    let all = page(Some("h 6"), None, 2).await?;
    ensure!(all == of(&[("h 7", 0), ("h 8", 2)]), "either: {all:?}");
    ensure!(page(Some("a"), Some(true), 1).await? == of(&[("h 1", 1)]));
    ensure!(page(None, None, 0).await?.is_empty(), "a limit of none");

    let due = store
        .claim(JobKind::Webhook, "w2", 60_000, LEASE, 20)
        .await?;
    let again = due.iter().find(|l| l.job.key == "h 3").expect("due again");
    ensure!(again.job.failures == 1, "a claim keeps it: {again:?}");
    store.finish(again).await?;
    ensure!(page(None, Some(true), 9).await? == of(&[("h 1", 1), ("h 5", 1), ("h 8", 2)]));
    let mut reset = due
        .iter()
        .find(|l| l.job.key == "h 1")
        .expect("due")
        .clone();
    reset.job.failures = 0;
    store.defer(&reset, 90_000).await?;
    ensure!(page(None, Some(true), 9).await? == of(&[("h 5", 1), ("h 8", 2)]));
    ensure!(page(Some("h 0"), Some(false), 1).await? == of(&[("h 1", 0)]));
    Ok(())
}

/// Renewing many leases at once (of two tenants) renews those still held
/// and answers `LeaseLost` for each of the others, one another worker took
/// over and one finished meanwhile, in the order asked.
pub async fn renew_all_answers_each_lease(store: &dyn Store) -> Result<()> {
    for (tenant, key, queued) in [(T, "a", 10), (T, "b", 20), ("other", "c", 30), (T, "d", 40)] {
        store
            .enqueue(&job(JobKind::Bump, tenant, key, queued))
            .await?;
    }
    let held = store.claim(JobKind::Bump, "w1", 1_000, LEASE, 10).await?;
    ensure!(keys(&held) == ["a", "b", "c", "d"], "{:?}", keys(&held));
    let [a, b, c, d] = [0, 1, 2, 3].map(|n| held[n].clone());
    // `b` runs out and another worker takes it; `d` is finished.
    store
        .renew_all(&[a.clone(), c.clone(), d.clone()], 1_400)
        .await?;
    let taken = store.claim(JobKind::Bump, "w2", 1_500, LEASE, 10).await?;
    ensure!(keys(&taken) == ["b"], "{:?}", keys(&taken));
    store.finish(&d).await?;
    let renewed = store.renew_all(&[a, b, c, d], 1_800).await?;
    let lost: Vec<bool> = renewed
        .iter()
        .map(|r| matches!(r, Err(e) if e.kind == ErrorKind::LeaseLost))
        .collect();
    ensure!(
        renewed.len() == 4 && lost == [false, true, false, true],
        "a and c renewed, b and d lost: {renewed:?}"
    );
    // Renewed to 2_300: before, only `b` (w2's, run out at 2_000) is due.
    let early = store.claim(JobKind::Bump, "w3", 2_299, LEASE, 10).await?;
    ensure!(keys(&early) == ["b"], "{:?}", keys(&early));
    let mut late: Vec<String> = store
        .claim(JobKind::Bump, "w3", 2_300, LEASE, 10)
        .await?
        .into_iter()
        .map(|l| l.job.key)
        .collect();
    late.sort_unstable();
    ensure!(late == ["a", "c"], "{late:?}");
    Ok(())
}
