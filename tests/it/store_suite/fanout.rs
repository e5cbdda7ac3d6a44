//! Cases of the fan-out: claims under a lease, deliveries written once,
//! in batches large and small, and several fan-outs finished together.

use anyhow::{ensure, Context, Result};
use riverfeed::model::{FanOutState, Reason, ReasonKind, Scope};
use riverfeed::store::prelude::*;
use riverfeed::store::QueuedRead;
use riverfeed::store::Removal;
use riverfeed::store::{Delivery, ErrorKind, Held, JobKind};

use super::{action, delivery, range};
use crate::common::HeldFanOut;

/// A recorded action is a fan-out job of its own, claimed under a lease;
/// a worker that lost the lease writes nothing; the first batch of the one
/// that holds it marks the action in progress, and the last marks it done
/// and ends the job. (The lease
/// rules themselves are the job queue's cases.)
pub(super) async fn an_action_is_a_fan_out_job(store: &dyn Store) -> Result<()> {
    // Work left by other cases may be claimable too; this case looks only at
    // its own tenant.
    let tenant = "lease-tenant";
    let a = action(tenant, "l-bob", 1_000, &[]);
    store.insert_action(&a).await?;
    let now = 1_000_000;
    let mine = |claims: Vec<HeldFanOut>| {
        claims
            .into_iter()
            .filter(|c| c.lease.job.tenant == tenant)
            .collect::<Vec<_>>()
    };
    let claimed = mine(HeldFanOut::claim(store, "w1", now, 30_000, 100).await?);
    ensure!(claimed.len() == 1, "pending action is claimed: {claimed:?}");
    let claim = claimed.into_iter().next().context("claim")?;
    ensure!(claim.action.id == a.id, "{claim:?}");
    let held = store
        .queued(JobKind::FanOut, tenant, QueuedRead::under(&a.id.to_hex()))
        .await?;
    ensure!(
        held.len() == 1
            && held[0].held
                == Some(Held {
                    worker: "w1".into(),
                    until: now + 30_000
                }),
        "the job says who holds it: {held:?}"
    );
    let taken = mine(HeldFanOut::claim(store, "w2", now + 30_000, 30_000, 100).await?);
    ensure!(taken.len() == 1, "an expired lease is taken over");
    let err = claim
        .deliver(store, now + 30_001, &[delivery("l-alice", 1_000)])
        .await
        .err()
        .context("the old worker must not deliver")?;
    ensure!(err.kind == ErrorKind::LeaseLost, "{err}");
    let err = claim.finish(store, now + 30_001, &[]).await.err();
    ensure!(err.map(|e| e.kind) == Some(ErrorKind::LeaseLost));
    ensure!(
        store
            .feed_page(tenant, "l-alice", range(5))
            .await?
            .is_empty(),
        "nothing written by the worker that lost it"
    );
    let stored = store.get_actions(tenant, &[a.id]).await?;
    ensure!(
        stored[0].fan_out.state == FanOutState::Pending,
        "{stored:?}"
    );
    // In progress from its first batch of several, done with its last.
    taken[0]
        .deliver(store, now + 30_002, &[delivery("l-alice", 1_000)])
        .await?;
    let stored = store.get_actions(tenant, &[a.id]).await?;
    ensure!(
        stored[0].fan_out.state == FanOutState::InProgress,
        "{stored:?}"
    );
    taken[0].finish(store, now + 30_003, &[]).await?;
    let stored = store.get_actions(tenant, &[a.id]).await?;
    ensure!(stored[0].fan_out.state == FanOutState::Done, "{stored:?}");
    ensure!(
        mine(HeldFanOut::claim(store, "w3", now + 1_000_000, 30_000, 100).await?).is_empty(),
        "done actions are never claimed again"
    );
    Ok(())
}

pub(super) async fn delivery_is_idempotent(store: &dyn Store) -> Result<()> {
    let tenant = "idem-tenant";
    let a = action(tenant, "i-bob", 5_000, &[]);
    store.insert_action(&a).await?;
    let claim = HeldFanOut::claim(store, "w1", 10, 30_000, 100)
        .await?
        .into_iter()
        .find(|c| c.action.id == a.id)
        .context("claimed")?;
    let items = [delivery("i-alice", 5_000), delivery("i-carol", 5_000)];
    let first = claim.deliver(store, 20, &items).await?;
    ensure!(first.len() == 2, "{first:?}");
    let again = claim.deliver(store, 30, &items).await?;
    ensure!(again.is_empty(), "a re-run writes nothing: {again:?}");
    let feed = store.feed_page(tenant, "i-alice", range(10)).await?;
    ensure!(feed.len() == 1 && feed[0].action_id == a.id, "{feed:?}");
    // A re-run under a new scope: who keeps the item takes the reason that
    // applies now, where it stands, unless it is their own.
    let own = Delivery {
        owner: "i-bob".into(),
        relevancy: 5_000,
        reason: Reason::new(ReasonKind::Own, "i-bob"),
    };
    claim.deliver(store, 40, std::slice::from_ref(&own)).await?;
    let named = |owner: &str| Delivery {
        owner: owner.into(),
        relevancy: 5_000,
        reason: Reason::new(ReasonKind::Restricted, "i-bob"),
    };
    let rescoped = claim
        .deliver(store, 50, &[named("i-alice"), named("i-bob")])
        .await?;
    ensure!(rescoped.is_empty(), "still nothing new: {rescoped:?}");
    let feed = store.feed_page(tenant, "i-alice", range(10)).await?;
    ensure!(
        feed.len() == 1
            && feed[0].reason.kind == ReasonKind::Restricted
            && feed[0].relevancy == 5_000
            && feed[0].changed == 20,
        "the reason that applies now: {feed:?}"
    );
    let carol = store.feed_page(tenant, "i-carol", range(10)).await?;
    ensure!(carol[0].reason.kind == ReasonKind::Follows, "{carol:?}");
    let bob = store.feed_page(tenant, "i-bob", range(10)).await?;
    ensure!(bob[0].reason.kind == ReasonKind::Own, "own stays: {bob:?}");
    claim.finish(store, 60, &[]).await?;
    Ok(())
}

/// Batches of thousands of readers are delivered whole, and a re-run of a
/// batch that overlaps the first writes exactly the readers that were
/// missing.
pub(super) async fn large_batches(store: &dyn Store) -> Result<()> {
    let tenant = "large-tenant";
    let a = action(tenant, "lg-bob", 9_000, &[]);
    store.insert_action(&a).await?;
    let claim = HeldFanOut::claim(store, "w1", 10, 30_000, 100)
        .await?
        .into_iter()
        .find(|c| c.action.id == a.id)
        .context("claimed")?;
    let owner = |n: usize| format!("lg-{n:05}");
    let items: Vec<Delivery> = (0..3_000).map(|n| delivery(&owner(n), 9_000)).collect();
    let first = claim.deliver(store, 20, &items[..1_600]).await?;
    ensure!(first.len() == 1_600, "first batch: {}", first.len());
    // Overlaps the first by 200 readers.
    let second = claim.finish(store, 30, &items[1_400..]).await?;
    ensure!(second.len() == 1_400, "second batch: {}", second.len());
    let mut owners: Vec<&str> = first
        .iter()
        .chain(&second)
        .map(|i| i.owner.as_str())
        .collect();
    owners.sort_unstable();
    owners.dedup();
    ensure!(owners.len() == 3_000, "every reader once: {}", owners.len());
    for n in [0, 1_399, 1_400, 1_599, 1_600, 2_999] {
        let feed = store.feed_page(tenant, &owner(n), range(5)).await?;
        ensure!(
            feed.len() == 1 && feed[0].action_id == a.id,
            "{}: {feed:?}",
            owner(n)
        );
    }
    let removed = store.remove_action(tenant, a.id, Removal::Delete).await?;
    ensure!(removed.len() == 3_000, "removed {}", removed.len());
    Ok(())
}

/// A fan-out written in several batches (one of them a re-run) is removed
/// whole; several fan-outs finished in one call stand or fall one by one.
pub(super) async fn batches_and_groups(store: &dyn Store) -> Result<()> {
    let tenant = "batch-tenant";
    let big = action(tenant, "b-bob", 1_000, &[]);
    store.insert_action(&big).await?;
    let mine = |claims: Vec<HeldFanOut>| {
        claims
            .into_iter()
            .filter(|c| c.lease.job.tenant == tenant)
            .collect::<Vec<_>>()
    };
    let claim = mine(HeldFanOut::claim(store, "w1", 0, 30_000, 100).await?)
        .pop()
        .context("claimed")?;
    let readers: Vec<String> = (0..7).map(|n| format!("b-reader-{n}")).collect();
    let items: Vec<Delivery> = readers.iter().map(|r| delivery(r, 1_000)).collect();
    ensure!(claim.deliver(store, 1, &items[0..3]).await?.len() == 3);
    // A re-run overlapping what is there writes only the new readers.
    let rerun = claim.deliver(store, 2, &items[2..5]).await?;
    ensure!(rerun.len() == 2, "{rerun:?}");
    let finished = claim.finish(store, 3, &items[5..]).await?;
    ensure!(finished.len() == 2, "{finished:?}");
    let removed = store.remove_action(tenant, big.id, Removal::Delete).await?;
    let mut owners: Vec<_> = removed.into_iter().map(|i| i.owner).collect();
    owners.sort();
    ensure!(
        owners == readers,
        "every batch's readers lose it: {owners:?}"
    );
    for reader in &readers {
        ensure!(store.feed_page(tenant, reader, range(5)).await?.is_empty());
    }

    // Three small fan-outs finished together; the middle one is not ours.
    let small: Vec<_> = (0..3)
        .map(|n| action(tenant, "b-carol", 2_000 + n, &[]))
        .collect();
    for a in &small {
        store.insert_action(a).await?;
    }
    let mut claims = mine(HeldFanOut::claim(store, "w1", 100, 30_000, 100).await?);
    ensure!(claims.len() == 3, "{claims:?}");
    let lost = claims[1].action.id;
    claims[1].lease.worker = "w2".into();
    let jobs: Vec<_> = claims
        .iter()
        .zip(&small)
        .map(|(c, a)| {
            let d = Delivery {
                relevancy: a.conducted,
                ..delivery("b-dave", 0)
            };
            c.batch(&[d], true)
        })
        .collect();
    let results = store.deliver(200, &jobs).await?;
    ensure!(results.len() == 3);
    ensure!(
        results[0].as_ref().is_ok_and(|w| w.len() == 1),
        "{:?}",
        results[0]
    );
    ensure!(
        results[1].as_ref().err().map(|e| e.kind) == Some(ErrorKind::LeaseLost),
        "{:?}",
        results[1]
    );
    ensure!(
        results[2].as_ref().is_ok_and(|w| w.len() == 1),
        "{:?}",
        results[2]
    );
    let dave: Vec<_> = store
        .feed_page(tenant, "b-dave", range(10))
        .await?
        .into_iter()
        .map(|i| i.action_id)
        .collect();
    ensure!(dave == [small[2].id, small[0].id], "{dave:?}");
    let states: Vec<_> = store
        .get_actions(tenant, &small.iter().map(|a| a.id).collect::<Vec<_>>())
        .await?
        .into_iter()
        .map(|a| (a.id, a.fan_out.state))
        .collect();
    for (id, state) in states {
        let want = if id == lost {
            FanOutState::Pending
        } else {
            FanOutState::Done
        };
        ensure!(state == want, "{id}: {state:?}");
    }
    claims[1].lease.worker = "w1".into();
    claims[1].finish(store, 300, &[]).await?;
    Ok(())
}

/// A batch under a lease that a scope change takes back lands wholly before
/// the change (and the fan-out it queues writes over it) or not at all:
/// never after the new fan-out. Each round races an old-scope batch (a large
/// one, its reader last) against a scope change whose new fan-out writes
/// that reader under the new scope; whatever the order, the reader ends with
/// the reason the new scope gives.
pub(super) async fn a_rescope_fences_stale_batches(store: &dyn Store) -> Result<()> {
    let tenant = "fence-tenant";
    let reader = "fn-zed";
    let restricted = Delivery {
        owner: reader.into(),
        relevancy: 7_000,
        reason: Reason::new(ReasonKind::Restricted, "fn-bob"),
    };
    let mut stale: Vec<Delivery> = (0..1_500)
        .map(|n| delivery(&format!("fn-{n:05}"), 7_000))
        .collect();
    stale.push(delivery(reader, 7_000));
    for round in 0..3_i64 {
        let a = action(tenant, "fn-bob", 7_000 + round, &[]);
        store.insert_action(&a).await?;
        let mine = |claims: Vec<HeldFanOut>| claims.into_iter().find(|c| c.action.id == a.id);
        let old = mine(HeldFanOut::claim(store, "w1", 10, 30_000, 100).await?)
            .context("the first fan-out claimed")?;
        let stale_batch = old.deliver(store, 20, &stale);
        let rescope = async {
            store
                .set_action_scope(tenant, a.id, Scope::Restricted, &[reader.into()], &[])
                .await?;
            // As a worker would: a run whose lease is lost (the fan-out
            // queued once more, should the old batch's fence have been
            // ended by the server) is claimed and run again.
            for _ in 0..3 {
                let new = mine(HeldFanOut::claim(store, "w2", 30, 30_000, 100).await?)
                    .context("the fan-out queued again is claimed")?;
                match new
                    .finish(store, 40, std::slice::from_ref(&restricted))
                    .await
                {
                    Err(err) if err.kind == ErrorKind::LeaseLost => continue,
                    done => return done.map(|_| ()).map_err(anyhow::Error::from),
                }
            }
            anyhow::bail!("the new fan-out lost its lease three times")
        };
        let (stale_done, rescoped) = tokio::join!(stale_batch, rescope);
        rescoped.with_context(|| format!("round {round}"))?;
        if let Err(err) = &stale_done {
            ensure!(err.kind == ErrorKind::LeaseLost, "round {round}: {err:?}");
        }
        let feed = store.feed_page(tenant, reader, range(10)).await?;
        let item = feed
            .iter()
            .find(|i| i.action_id == a.id)
            .with_context(|| format!("round {round}: {feed:?}"))?;
        ensure!(
            item.reason.kind == ReasonKind::Restricted,
            "round {round}: the old scope's batch landed after the new fan-out ({} first): {item:?}",
            if stale_done.is_ok() { "written" } else { "refused" }
        );
        store.remove_action(tenant, a.id, Removal::Delete).await?;
    }
    Ok(())
}
