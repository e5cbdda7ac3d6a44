//! Cases of timelines: ranges and ties, hides and deletes, bumps,
//! unfollows and their cleanup, tombstones of pulled items, and rivers.

use anyhow::{ensure, Context, Result};
use riverfeed::model::{Action, Comment, EdgeKind, ObjectId, Position, Reason, ReasonKind};
use riverfeed::store::prelude::*;
use riverfeed::store::Removal;
use riverfeed::store::{
    Backfill, BumpJob, Delivery, Ended, ErrorKind, FeedRange, JobKind, River, RiverWrite, Unfollow,
};

use riverfeed::timeline::unfollow;

use super::{action, cleanup_of, delivery, names, range, OTHER, T};
use crate::common::HeldFanOut;

pub(super) async fn feed_ranges(store: &dyn Store) -> Result<()> {
    let tenant = "range-tenant";
    // Two actions share a relevancy: the action id breaks the tie.
    let mut ids = Vec::new();
    for (i, relevancy) in [100, 200, 200, 300, 400].into_iter().enumerate() {
        let a = action(tenant, "r-bob", relevancy, &[]);
        store.insert_action(&a).await?;
        let claim = HeldFanOut::claim(store, "w", 0, 30_000, 100)
            .await?
            .into_iter()
            .find(|c| c.action.id == a.id)
            .with_context(|| format!("claim {i}"))?;
        claim
            .finish(store, 0, &[delivery("r-alice", relevancy)])
            .await?;
        ids.push((relevancy, a.id));
    }
    let newest_first: Vec<Position> = ids
        .iter()
        .rev()
        .map(|&(relevancy, action_id)| Position {
            relevancy,
            action_id,
        })
        .collect();
    let page = |items: Vec<riverfeed::model::FeedItem>| {
        items.iter().map(|i| i.position()).collect::<Vec<_>>()
    };
    let all = page(store.feed_page(tenant, "r-alice", range(10)).await?);
    ensure!(
        all == newest_first,
        "newest relevancy first, ties by id: {all:?}"
    );
    let first_two = page(store.feed_page(tenant, "r-alice", range(2)).await?);
    ensure!(first_two == newest_first[..2]);
    let older = page(
        store
            .feed_page(
                tenant,
                "r-alice",
                FeedRange {
                    older_than: Some(newest_first[1]),
                    ..range(2)
                },
            )
            .await?,
    );
    ensure!(older == newest_first[2..4], "older than the 2nd: {older:?}");
    let newer = page(
        store
            .feed_page(
                tenant,
                "r-alice",
                FeedRange {
                    newer_than: Some(newest_first[4]),
                    from_oldest: true,
                    ..range(2)
                },
            )
            .await?,
    );
    ensure!(
        newer == newest_first[2..4],
        "the 2 just newer than the oldest: {newer:?}"
    );
    ensure!(store
        .feed_page(tenant, "r-nobody", range(10))
        .await?
        .is_empty());
    ensure!(store
        .feed_page(OTHER, "r-alice", range(10))
        .await?
        .is_empty());
    Ok(())
}

/// Forty items in the same millisecond page exactly, both ways: the action id
/// orders them.
pub(super) async fn many_ties(store: &dyn Store) -> Result<()> {
    let tenant = "tie-tenant";
    let mut ids = Vec::new();
    for _ in 0..40 {
        let a = action(tenant, "t-bob", 7_000, &[]);
        store.insert_action(&a).await?;
        ids.push(a.id);
    }
    let claims = HeldFanOut::claim(store, "w", 0, 30_000, 100).await?;
    for claim in claims.iter().filter(|c| c.lease.job.tenant == tenant) {
        claim
            .finish(store, 0, &[delivery("t-alice", 7_000)])
            .await?;
    }
    ids.sort_by_key(|id| id.bytes());
    let newest_first: Vec<ObjectId> = ids.iter().rev().copied().collect();

    let mut seen = Vec::new();
    let mut older_than = None;
    loop {
        let page = store
            .feed_page(
                tenant,
                "t-alice",
                FeedRange {
                    older_than,
                    ..range(5)
                },
            )
            .await?;
        if page.is_empty() {
            break;
        }
        older_than = page.last().map(|i| i.position());
        seen.extend(page.iter().map(|i| i.action_id));
        ensure!(seen.len() <= 40, "paging forwards never ends");
    }
    ensure!(
        seen == newest_first,
        "forwards: {} items, in order",
        seen.len()
    );

    let mut seen = Vec::new();
    let mut newer_than = None;
    loop {
        let page = store
            .feed_page(
                tenant,
                "t-alice",
                FeedRange {
                    newer_than,
                    from_oldest: true,
                    ..range(5)
                },
            )
            .await?;
        if page.is_empty() {
            break;
        }
        newer_than = page.first().map(|i| i.position());
        let mut ids: Vec<_> = page.iter().map(|i| i.action_id).collect();
        ids.extend(seen);
        seen = ids;
        ensure!(seen.len() <= 40, "paging backwards never ends");
    }
    ensure!(
        seen == newest_first,
        "backwards: {} items, in order",
        seen.len()
    );
    Ok(())
}

pub(super) async fn hide_and_delete(store: &dyn Store) -> Result<()> {
    let tenant = "hide-tenant";
    let a = action(tenant, "h-bob", 1_000, &["h-ref"]);
    let b = action(tenant, "h-bob", 2_000, &["h-ref"]);
    store.insert_action(&a).await?;
    store.insert_action(&b).await?;
    let claims: Vec<_> = HeldFanOut::claim(store, "w", 0, 30_000, 100)
        .await?
        .into_iter()
        .filter(|c| c.lease.job.tenant == tenant)
        .collect();
    ensure!(claims.len() == 2);
    let readers = [delivery("h-alice", 0), delivery("h-carol", 0)];
    for claim in &claims {
        let items: Vec<_> = readers
            .iter()
            .map(|d| Delivery {
                relevancy: claim.action.conducted,
                ..d.clone()
            })
            .collect();
        claim.deliver(store, 0, &items).await?;
    }

    // One reader's item, read alone.
    let item = store
        .feed_item(tenant, "h-alice", b.id)
        .await?
        .context("b")?;
    ensure!(
        (item.owner.as_str(), item.relevancy) == ("h-alice", 2_000),
        "{item:?}"
    );
    ensure!(store.feed_item(tenant, "h-nobody", b.id).await?.is_none());

    // One reader hides an item: gone from that feed only, and for good.
    let hidden = store.hide_feed_item(tenant, "h-alice", b.id).await?;
    ensure!(store.feed_item(tenant, "h-alice", b.id).await?.is_none());
    ensure!(store.feed_item(tenant, "h-carol", b.id).await?.is_some());
    ensure!(hidden.map(|i| i.action_id) == Some(b.id));
    ensure!(store
        .hide_feed_item(tenant, "h-alice", b.id)
        .await?
        .is_none());
    let claim_b = claims.iter().find(|c| c.action.id == b.id).context("b")?;
    let again = claim_b
        .deliver(store, 0, &[delivery("h-alice", 2_000)])
        .await?;
    ensure!(again.is_empty(), "a hidden item is not delivered again");
    let alice = store.feed_page(tenant, "h-alice", range(10)).await?;
    ensure!(alice.iter().map(|i| i.action_id).eq([a.id]), "{alice:?}");
    ensure!(store.feed_page(tenant, "h-carol", range(10)).await?.len() == 2);

    // Hiding an action takes it out of every feed and stops further delivery.
    let removed = store.remove_action(tenant, a.id, Removal::Hide).await?;
    let mut owners: Vec<_> = removed.iter().map(|i| i.owner.as_str()).collect();
    owners.sort();
    ensure!(owners == ["h-alice", "h-carol"], "{owners:?}");
    let claim_a = claims.iter().find(|c| c.action.id == a.id).context("a")?;
    ensure!(claim_a
        .deliver(store, 0, &[delivery("h-dave", 1_000)])
        .await?
        .is_empty());
    ensure!(store.get_actions(tenant, &[a.id]).await?[0].hidden);
    ensure!(store
        .feed_page(tenant, "h-alice", range(10))
        .await?
        .is_empty());

    // Deleting cascades to feed items and slices.
    let removed = store.remove_action(tenant, b.id, Removal::Delete).await?;
    ensure!(
        removed.iter().map(|i| i.owner.as_str()).eq(["h-carol"]),
        "only visible items are reported: {removed:?}"
    );
    ensure!(store.get_actions(tenant, &[b.id]).await?.is_empty());
    ensure!(store
        .feed_page(tenant, "h-carol", range(10))
        .await?
        .is_empty());
    ensure!(store.slice(tenant, "h-ref", None, 10).await? == [a.id]);
    let err = store
        .remove_action(tenant, b.id, Removal::Delete)
        .await
        .err()
        .context("second delete")?;
    ensure!(err.kind == ErrorKind::NotFound, "{err}");
    ensure!(
        claim_b
            .deliver(store, 0, &[delivery("h-erin", 2_000)])
            .await?
            .is_empty(),
        "a deleted action is not delivered"
    );
    let err = store
        .remove_action(OTHER, a.id, Removal::Hide)
        .await
        .err()
        .context("other tenant")?;
    ensure!(err.kind == ErrorKind::NotFound, "{err}");
    Ok(())
}

/// An unfollow is recorded at once and listed for reads; its cleanup, under
/// a lease, takes out exactly the items that came by the ended edge.
pub(super) async fn unfollows(store: &dyn Store) -> Result<()> {
    let tenant = "unfollow-tenant";
    let reader = "u-una";
    let [a, b, c, d] = [1_000, 2_000, 3_000, 4_000].map(|t| action(tenant, "u-ned", t, &[]));
    let other = action(tenant, "u-olga", 5_000, &[]);
    for x in [&a, &b, &c, &d, &other] {
        store.insert_action(x).await?;
    }
    let fill = |x: &Action, kind: ReasonKind| Backfill {
        action_id: x.id,
        relevancy: x.conducted,
        reason: Reason::new(kind, &x.actor_id),
        changed: 10,
    };
    store
        .backfill(
            tenant,
            reader,
            &[
                fill(&a, ReasonKind::Follows),
                fill(&b, ReasonKind::Follows),
                fill(&c, ReasonKind::Friend),
                fill(&d, ReasonKind::Restricted),
                fill(&other, ReasonKind::Follows),
            ],
        )
        .await?;
    let follows = Unfollow::edge(tenant, reader, EdgeKind::Follows, "u-ned");
    unfollow::start(store, &follows, 0).await?;
    ensure!(unfollow::pending(store, tenant, reader).await? == std::slice::from_ref(&follows));
    ensure!(unfollow::pending(store, tenant, "u-other")
        .await?
        .is_empty());
    ensure!(unfollow::pending(store, OTHER, reader).await?.is_empty());

    let claim = cleanup_of(store, "w1", 100, &follows)
        .await?
        .context("claimed")?;
    ensure!(
        cleanup_of(store, "w2", 200, &follows).await?.is_none(),
        "leased"
    );
    // The lease runs out: w2 takes it over, w1 lost it.
    let claim2 = cleanup_of(store, "w2", 1_200, &follows)
        .await?
        .context("taken over")?;
    // The caller names what came by the edge and may still stand for it;
    // the store takes those that do (not `c`, a friend's, or `d`).
    let named = [a.id, b.id, c.id, d.id];
    let err = store
        .clean(&claim, &named)
        .await
        .err()
        .context("lease lost")?;
    ensure!(err.kind == ErrorKind::LeaseLost, "{err}");
    let removed: Vec<ObjectId> = store
        .clean(&claim2, &named)
        .await?
        .iter()
        .map(|i| i.action_id)
        .collect();
    ensure!(
        removed.len() == 2 && removed.contains(&a.id) && removed.contains(&b.id),
        "removed: {removed:?}"
    );
    let left: Vec<ObjectId> = store
        .feed_page(tenant, reader, range(10))
        .await?
        .iter()
        .map(|i| i.action_id)
        .collect();
    ensure!(left == [other.id, d.id, c.id], "left: {left:?}");
    ensure!(
        unfollow::pending(store, tenant, reader).await?.is_empty(),
        "ended"
    );

    // Ended before its cleanup (a re-follow): nothing is claimed, nothing
    // removed; ended while a worker holds it: the worker takes nothing.
    let friends = Unfollow {
        kind: Ended::Edge(EdgeKind::Friend),
        ..follows
    };
    unfollow::start(store, &friends, 0).await?;
    unfollow::end(store, &friends).await?;
    ensure!(unfollow::pending(store, tenant, reader).await?.is_empty());
    ensure!(
        cleanup_of(store, "w1", 5_000, &friends).await?.is_none(),
        "nothing to claim"
    );
    unfollow::start(store, &friends, 0).await?;
    let held = cleanup_of(store, "w1", 6_000, &friends)
        .await?
        .context("claimed")?;
    unfollow::end(store, &friends).await?;
    ensure!(store.clean(&held, &named).await?.is_empty(), "cancelled");
    ensure!(store.feed_page(tenant, reader, range(10)).await?.len() == 3);
    Ok(())
}

pub(super) async fn tombstones(store: &dyn Store) -> Result<()> {
    let reader = "mt-tia";
    let held = action(T, "mt-actor", 1_000, &[]);
    let pulled = action(T, "mt-actor", 2_000, &[]);
    let neither = action(T, "mt-actor", 3_000, &[]);
    for a in [&held, &pulled, &neither] {
        store.insert_action(a).await?;
    }
    let item = Backfill {
        action_id: held.id,
        relevancy: held.conducted,
        reason: Reason::new(ReasonKind::Follows, "mt-actor"),
        changed: 5,
    };
    store.backfill(T, reader, &[item]).await?;
    let ids = [held.id, pulled.id, neither.id];
    ensure!(
        store.materialised(T, reader, &ids).await? == vec![held.id],
        "held only"
    );
    // Hiding what is not materialised leaves a tombstone: reported as not
    // there, but materialised (placed, so never pulled) from now on.
    ensure!(store.hide_feed_item(T, reader, pulled.id).await?.is_none());
    let mut found = store.materialised(T, reader, &ids).await?;
    found.sort();
    let mut want = vec![held.id, pulled.id];
    want.sort();
    ensure!(found == want, "tombstone counts: {found:?}");
    ensure!(
        store.feed_page(T, reader, range(10)).await?.len() == 1,
        "not in the feed"
    );
    // Nor can a backfill bring it back.
    let again = Backfill {
        action_id: pulled.id,
        relevancy: pulled.conducted,
        reason: Reason::new(ReasonKind::Follows, "mt-actor"),
        changed: 5,
    };
    ensure!(store.backfill(T, reader, &[again]).await?.is_empty());
    ensure!(
        store.materialised(T, "mt-other", &ids).await?.is_empty(),
        "per owner"
    );
    Ok(())
}

/// `reader`'s river, if they have one.
pub(crate) async fn river_of(
    store: &dyn Store,
    tenant: &str,
    reader: &str,
) -> Result<Option<River>> {
    Ok(store
        .rivers(tenant, &[reader.to_owned()])
        .await?
        .pop()
        .flatten())
}

pub(super) async fn rivers(store: &dyn Store) -> Result<()> {
    let reader = "mr-rita";
    ensure!(river_of(store, T, reader).await?.is_none());
    let river = River {
        complete_from: Position::MAX,
        touched: 1_000,
    };
    store.write_river(T, reader, RiverWrite::Put(river)).await?;
    ensure!(river_of(store, T, reader).await? == Some(river));
    let ron = River {
        touched: 9_000,
        ..river
    };
    store.write_river(T, "mr-ron", RiverWrite::Put(ron)).await?;
    let among = store
        .rivers(T, &names(&[reader, "mr-ron", "mr-none"]))
        .await?;
    ensure!(among == [Some(river), Some(ron), None], "rivers: {among:?}");
    ensure!(
        store.rivers(OTHER, &names(&[reader])).await? == [None],
        "per tenant"
    );
    let idle = store.idle_rivers(5_000, 10).await?;
    ensure!(
        idle.contains(&(T.to_string(), reader.to_string())),
        "idle: {idle:?}"
    );
    ensure!(
        !idle.iter().any(|(_, r)| r == "mr-ron"),
        "recent is not idle"
    );

    // Five river items, one own, one bumped river item, one tombstone.
    let mut river_items = Vec::new();
    for k in 0..5 {
        let a = action(T, "mr-actor", 1_000 + k * 100, &[]);
        store.insert_action(&a).await?;
        river_items.push(Backfill {
            action_id: a.id,
            relevancy: a.conducted,
            reason: Reason::new(ReasonKind::Follows, "mr-actor"),
            changed: 10,
        });
    }
    let own = action(T, reader, 1_050, &[]);
    let bumped = action(T, "mr-actor", 900, &[]);
    let hidden = action(T, "mr-actor", 950, &[]);
    for a in [&own, &bumped, &hidden] {
        store.insert_action(a).await?;
    }
    let mut items = river_items.clone();
    items.push(Backfill {
        action_id: own.id,
        relevancy: own.conducted,
        reason: Reason::new(ReasonKind::Own, reader),
        changed: 10,
    });
    items.push(Backfill {
        action_id: bumped.id,
        relevancy: 990,
        reason: Reason::new(ReasonKind::Bumped, "mr-actor"),
        changed: 10,
    });
    store.backfill(T, reader, &items).await?;
    store.hide_feed_item(T, reader, hidden.id).await?;
    let complete = River {
        complete_from: Position::MIN,
        ..river
    };
    store
        .write_river(T, reader, RiverWrite::Put(complete))
        .await?;

    // Trim to the newest three river items: two go, the rest stays, and
    // the river is complete from the oldest kept.
    ensure!(
        store.write_river(T, reader, RiverWrite::Keep(3)).await? == 2,
        "trimmed two"
    );
    let left: Vec<ObjectId> = store
        .feed_page(T, reader, range(20))
        .await?
        .iter()
        .map(|i| i.action_id)
        .collect();
    ensure!(left.len() == 5, "three river items, own, bumped: {left:?}");
    ensure!(!left.contains(&river_items[0].action_id) && !left.contains(&river_items[1].action_id));
    let after = river_of(store, T, reader).await?.context("still a river")?;
    ensure!(
        after.complete_from
            == Position {
                relevancy: river_items[2].relevancy,
                action_id: river_items[2].action_id
            },
        "complete from the oldest kept: {after:?}"
    );
    // Trimming within the cap changes nothing.
    ensure!(store.write_river(T, reader, RiverWrite::Keep(3)).await? == 0);

    // Dropping takes the rest of the river and the record; own and bumped
    // items and the tombstone stay.
    ensure!(
        store.write_river(T, reader, RiverWrite::Drop).await? == 3,
        "dropped three"
    );
    ensure!(river_of(store, T, reader).await?.is_none());
    let left = store.feed_page(T, reader, range(20)).await?;
    let kinds: Vec<ReasonKind> = left.iter().map(|i| i.reason.kind).collect();
    ensure!(
        kinds == vec![ReasonKind::Own, ReasonKind::Bumped],
        "{kinds:?}"
    );
    ensure!(
        store.materialised(T, reader, &[hidden.id]).await? == vec![hidden.id],
        "the tombstone stays"
    );
    Ok(())
}

/// A comment queues its bump job (carrying the comment) in the step that
/// stores it. A raise lifts the commented action in each reader's feed
/// where that is higher than where it stands (never lower), skips readers
/// without the item or who hid it, and stamps what it changed; raising
/// again to the same place changes nothing.
pub(super) async fn bumps(store: &dyn Store) -> Result<()> {
    let tenant = "bump-tenant";
    let old = action(tenant, "bu-bob", 1_000, &[]);
    let newer = action(tenant, "bu-bob", 3_000, &[]);
    for a in [&old, &newer] {
        store.insert_action(a).await?;
    }
    let claims: Vec<_> = HeldFanOut::claim(store, "w", 0, 30_000, 100)
        .await?
        .into_iter()
        .filter(|c| c.lease.job.tenant == tenant)
        .collect();
    ensure!(claims.len() == 2, "{claims:?}");
    for claim in &claims {
        let at = claim.action.conducted;
        let readers = ["bu-ann", "bu-cat", "bu-dan"].map(|r| delivery(r, at));
        claim.finish(store, 10, &readers).await?;
    }
    store.hide_feed_item(tenant, "bu-dan", old.id).await?;

    let comment = Comment {
        id: ObjectId::new(),
        action_id: old.id,
        author_id: "bu-eve".into(),
        text: "…".into(),
        created: 5_000,
    };
    store.add_comment(tenant, &comment).await?;
    // Its bump job carries the comment, under the comment's id.
    let leases = store.claim(JobKind::Bump, "w1", 100, 1_000, 1_000).await?;
    let ours: Vec<_> = leases.iter().filter(|l| l.job.tenant == tenant).collect();
    ensure!(ours.len() == 1, "one bump job: {ours:?}");
    let job = BumpJob::of_job(&ours[0].job)?;
    ensure!(
        job.comment == comment && ours[0].job.key == comment.id.to_hex(),
        "{job:?}"
    );
    // A comment on no action is refused, and queues nothing.
    let stray = Comment {
        id: ObjectId::new(),
        action_id: ObjectId::new(),
        ..comment.clone()
    };
    let err = store
        .add_comment(tenant, &stray)
        .await
        .err()
        .context("refused")?;
    ensure!(err.kind == ErrorKind::NotFound, "{err}");
    ensure!(
        !store
            .claim(JobKind::Bump, "w1", 100, 1_000, 1_000)
            .await?
            .iter()
            .any(|l| l.job.tenant == tenant),
        "nothing queued"
    );
    let bumped = |owner: &str, relevancy: i64| Delivery {
        owner: owner.into(),
        relevancy,
        reason: Reason::new(ReasonKind::Bumped, "bu-bob"),
    };

    // Ann's item goes up; cat's would go down, so stays; dan hid it; fay
    // never had it.
    let raised = store
        .raise(
            tenant,
            old.id,
            1_400,
            &[
                bumped("bu-ann", 5_000),
                bumped("bu-cat", 900),
                bumped("bu-dan", 5_000),
                bumped("bu-fay", 5_000),
            ],
        )
        .await?;
    ensure!(
        raised.len() == 1
            && raised[0].owner == "bu-ann"
            && raised[0].action_id == old.id
            && raised[0].relevancy == 5_000
            && raised[0].reason.kind == ReasonKind::Bumped
            && raised[0].changed == 1_400,
        "raised: {raised:?}"
    );
    let feed = |owner: &'static str| async move {
        anyhow::Ok(
            store
                .feed_page(tenant, owner, range(10))
                .await?
                .into_iter()
                .map(|i| (i.action_id, i.relevancy, i.reason.kind))
                .collect::<Vec<_>>(),
        )
    };
    ensure!(
        feed("bu-ann").await?
            == [
                (old.id, 5_000, ReasonKind::Bumped),
                (newer.id, 3_000, ReasonKind::Follows)
            ],
        "ann: {:?}",
        feed("bu-ann").await?
    );
    ensure!(
        feed("bu-cat").await?
            == [
                (newer.id, 3_000, ReasonKind::Follows),
                (old.id, 1_000, ReasonKind::Follows)
            ],
        "cat: {:?}",
        feed("bu-cat").await?
    );
    ensure!(
        feed("bu-dan").await? == [(newer.id, 3_000, ReasonKind::Follows)],
        "dan: {:?}",
        feed("bu-dan").await?
    );
    ensure!(feed("bu-fay").await?.is_empty(), "fay");

    // Again, as a worker that took the job over would: nothing moves.
    let again = store
        .raise(tenant, old.id, 1_500, &[bumped("bu-ann", 5_000)])
        .await?;
    ensure!(again.is_empty(), "again: {again:?}");
    // Cat's now goes up too.
    let last = store
        .raise(tenant, old.id, 1_600, &[bumped("bu-cat", 6_000)])
        .await?;
    ensure!(
        last.len() == 1 && last[0].owner == "bu-cat" && last[0].relevancy == 6_000,
        "last: {last:?}"
    );
    Ok(())
}
