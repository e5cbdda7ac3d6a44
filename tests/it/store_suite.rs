//! The store conformance suite: every backend must pass `store_test_suite`.

use anyhow::{ensure, Context, Result};
use riverfeed::descriptor::{Descriptor, StatusPost};
use riverfeed::model::{
    Action, Comment, Counts, EdgeKind, FanOut, FanOutState, Group, GroupKind, MembershipRole,
    ObjectId, Position, Reason, ReasonKind, Scope, Stamp, User,
};
use riverfeed::store::embedded::EmbeddedStore;
use riverfeed::store::mongo::{MongoSettings, TimelineLayout};
use riverfeed::store::prelude::*;
use riverfeed::store::{
    Backfill, Delivery, Direction, Ended, ErrorKind, FeedRange, JoinOutcome, StoreSettings,
    Unfollow,
};

use crate::common::{Backend, TestStore};

const T: &str = "acme";
const OTHER: &str = "globex";

pub fn action(tenant: &str, actor: &str, conducted: i64, ref_ids: &[&str]) -> Action {
    Action {
        id: ObjectId::new(),
        tenant: tenant.into(),
        actor_id: actor.into(),
        conducted,
        hidden: false,
        scope: Scope::Public,
        readers: vec![],
        scope_groups: vec![],
        ref_ids: ref_ids.iter().map(|s| s.to_string()).collect(),
        tags: vec![],
        descriptor: Descriptor::StatusPost(StatusPost {
            text: format!("{actor} at {conducted}"),
        }),
        fan_out: FanOut::pending(),
        counts: Counts::default(),
        expires_at: None,
        to: Vec::new(),
    }
}

fn delivery(owner: &str, relevancy: i64) -> Delivery {
    Delivery {
        owner: owner.into(),
        relevancy,
        reason: Reason::new(ReasonKind::Follows, "bob"),
    }
}

pub fn range(limit: usize) -> FeedRange {
    FeedRange {
        older_than: None,
        newer_than: None,
        limit,
        from_oldest: false,
    }
}

/// Runs every case against one store. Each case uses its own users, so a store
/// that is shared across cases still gives independent results.
pub async fn store_test_suite(store: &dyn Store) -> Result<()> {
    users(store).await.context("users")?;
    edges(store).await.context("edges")?;
    groups(store).await.context("groups")?;
    actions_and_slices(store)
        .await
        .context("actions and slices")?;
    claims_and_leases(store)
        .await
        .context("claims and leases")?;
    delivery_is_idempotent(store)
        .await
        .context("delivery is idempotent")?;
    feed_ranges(store).await.context("feed ranges")?;
    outboxes(store).await.context("outboxes")?;
    backfills(store).await.context("backfills")?;
    unfollows(store).await.context("unfollows")?;
    large_batches(store).await.context("large batches")?;
    batches_and_groups(store)
        .await
        .context("batches and groups of fan-outs")?;
    hide_and_delete(store).await.context("hide and delete")?;
    many_ties(store)
        .await
        .context("many items in one millisecond")?;
    reactions(store).await.context("reactions")?;
    discussions(store).await.context("discussions")?;
    assignments_and_supervisors(store)
        .await
        .context("assignments and supervisors")?;
    rename_ref(store).await.context("renaming a ref")?;
    crate::store_models::model_cases(store).await?;
    crate::store_notices::notice_cases(store).await?;
    Ok(())
}

async fn users(store: &dyn Store) -> Result<()> {
    store
        .upsert_user(
            T,
            &User {
                id: "u-ann".into(),
                name: Some("Ann".into()),
            },
        )
        .await?;
    store.ensure_user(T, "u-ann").await?;
    store.ensure_user(T, "u-ben").await?;
    let mut found = store
        .get_users(T, &["u-ann".into(), "u-ben".into(), "u-nobody".into()])
        .await?;
    found.sort_by(|a, b| a.id.cmp(&b.id));
    ensure!(
        found
            == vec![
                User {
                    id: "u-ann".into(),
                    name: Some("Ann".into())
                },
                User {
                    id: "u-ben".into(),
                    name: None
                },
            ],
        "ensure_user keeps profiles and creates missing users: {found:?}"
    );
    ensure!(
        store.get_users(OTHER, &["u-ann".into()]).await?.is_empty(),
        "users are per tenant"
    );
    Ok(())
}

async fn edges(store: &dyn Store) -> Result<()> {
    for follower in ["e-c", "e-a", "e-b"] {
        ensure!(
            store
                .set_edge(T, EdgeKind::Follows, follower, "e-star", true)
                .await?
        );
    }
    ensure!(
        !store
            .set_edge(T, EdgeKind::Follows, "e-a", "e-star", true)
            .await?,
        "a second follow changes nothing"
    );
    let all = store
        .edges(T, EdgeKind::Follows, Direction::In, "e-star", None, 10)
        .await?;
    ensure!(
        all == ["e-a", "e-b", "e-c"],
        "followers in id order: {all:?}"
    );
    let page = store
        .edges(
            T,
            EdgeKind::Follows,
            Direction::In,
            "e-star",
            Some("e-a"),
            1,
        )
        .await?;
    ensure!(page == ["e-b"], "paged after e-a: {page:?}");
    let following = store
        .edges(T, EdgeKind::Follows, Direction::Out, "e-a", None, 10)
        .await?;
    ensure!(following == ["e-star"], "{following:?}");
    ensure!(
        store
            .set_edge(T, EdgeKind::Follows, "e-b", "e-star", false)
            .await?
    );
    ensure!(
        !store
            .set_edge(T, EdgeKind::Follows, "e-b", "e-star", false)
            .await?
    );
    let all = store
        .edges(T, EdgeKind::Follows, Direction::In, "e-star", None, 10)
        .await?;
    ensure!(all == ["e-a", "e-c"], "after unfollow: {all:?}");

    ensure!(
        store
            .set_edge(T, EdgeKind::Friend, "e-x", "e-y", true)
            .await?
    );
    let of_y = store
        .edges(T, EdgeKind::Friend, Direction::Out, "e-y", None, 10)
        .await?;
    ensure!(of_y == ["e-x"], "friendship is symmetric: {of_y:?}");
    ensure!(
        store
            .edges(OTHER, EdgeKind::Follows, Direction::In, "e-star", None, 10)
            .await?
            .is_empty(),
        "edges are per tenant"
    );
    Ok(())
}

async fn groups(store: &dyn Store) -> Result<()> {
    let team = Group {
        id: "g-team".into(),
        kind: GroupKind::Team,
    };
    for user in ["g-b", "g-a"] {
        let outcome = store
            .join_group(T, &team, user, MembershipRole::Member, 0)
            .await?;
        ensure!(matches!(outcome, JoinOutcome::Joined(_)), "{outcome:?}");
    }
    let as_department = Group {
        id: "g-team".into(),
        kind: GroupKind::Department,
    };
    let outcome = store
        .join_group(T, &as_department, "g-c", MembershipRole::Lead, 0)
        .await?;
    ensure!(
        matches!(outcome, JoinOutcome::KindMismatch(ref g) if g.kind == GroupKind::Team),
        "kind mismatch is reported: {outcome:?}"
    );
    let members = store.group_members(T, "g-team", None, 10).await?;
    ensure!(members == ["g-a", "g-b"], "{members:?}");
    let members = store.group_members(T, "g-team", Some("g-a"), 10).await?;
    ensure!(members == ["g-b"], "{members:?}");
    let of_a = store.memberships(T, "g-a").await?;
    ensure!(
        of_a.len() == 1 && of_a[0].kind == GroupKind::Team,
        "{of_a:?}"
    );
    ensure!(store.leave_group(T, "g-team", "g-a").await?);
    ensure!(!store.leave_group(T, "g-team", "g-a").await?);
    ensure!(store.memberships(T, "g-a").await?.is_empty());
    ensure!(store
        .group_members(OTHER, "g-team", None, 10)
        .await?
        .is_empty());
    Ok(())
}

async fn actions_and_slices(store: &dyn Store) -> Result<()> {
    let first = action(T, "s-bob", 1_000, &["s-applicant", "s-position"]);
    let second = action(T, "s-bob", 2_000, &["s-applicant"]);
    store.insert_action(&first).await?;
    store.insert_action(&second).await?;
    let mut got = store
        .get_actions(T, &[second.id, first.id, ObjectId::new()])
        .await?;
    got.sort_by_key(|a| a.conducted);
    ensure!(
        got == vec![first.clone(), second.clone()],
        "round trip: {got:?}"
    );
    ensure!(
        store.get_actions(OTHER, &[first.id]).await?.is_empty(),
        "actions are per tenant"
    );
    ensure!(
        !store.get_users(T, &["s-bob".into()]).await?.is_empty(),
        "the actor becomes a known user"
    );
    let slice = store.slice(T, "s-applicant", None, 10).await?;
    ensure!(slice == [second.id, first.id], "newest first: {slice:?}");
    let slice = store.slice(T, "s-applicant", Some(second.id), 10).await?;
    ensure!(slice == [first.id], "paged: {slice:?}");
    let slice = store.slice(T, "s-position", None, 10).await?;
    ensure!(slice == [first.id], "{slice:?}");
    ensure!(store
        .slice(OTHER, "s-applicant", None, 10)
        .await?
        .is_empty());
    Ok(())
}

async fn claims_and_leases(store: &dyn Store) -> Result<()> {
    // Work left by other cases may be claimable too; this case looks only at
    // its own tenant.
    let tenant = "lease-tenant";
    let a = action(tenant, "l-bob", 1_000, &[]);
    store.insert_action(&a).await?;
    let now = 1_000_000;
    let mine = |claims: Vec<riverfeed::store::Claim>| {
        claims
            .into_iter()
            .filter(|c| c.action.tenant == tenant)
            .collect::<Vec<_>>()
    };
    let claimed = mine(store.claim_fan_out("w1", now, 30_000, 100).await?);
    ensure!(claimed.len() == 1, "pending action is claimed: {claimed:?}");
    let claim = claimed.into_iter().next().context("claim")?;
    ensure!(claim.action.fan_out.state == FanOutState::InProgress);
    ensure!(claim.action.fan_out.worker.as_deref() == Some("w1"));
    ensure!(claim.action.fan_out.locked_until == Some(now + 30_000));
    ensure!(
        mine(store.claim_fan_out("w2", now + 29_999, 30_000, 100).await?).is_empty(),
        "a live lease is not taken over"
    );
    let taken = mine(store.claim_fan_out("w2", now + 30_000, 30_000, 100).await?);
    ensure!(taken.len() == 1, "an expired lease is taken over");
    let err = store
        .deliver(&claim, now + 30_001, &[delivery("l-alice", 1_000)])
        .await
        .err()
        .context("the old worker must not deliver")?;
    ensure!(err.kind == ErrorKind::LeaseLost, "{err}");
    ensure!(store.finish_fan_out(&claim).await.err().map(|e| e.kind) == Some(ErrorKind::LeaseLost));
    let new_claim = &taken[0];
    store.finish_fan_out(new_claim).await?;
    let stored = store.get_actions(tenant, &[a.id]).await?;
    ensure!(stored[0].fan_out.state == FanOutState::Done, "{stored:?}");
    ensure!(
        mine(
            store
                .claim_fan_out("w3", now + 1_000_000, 30_000, 100)
                .await?
        )
        .is_empty(),
        "done actions are never claimed again"
    );
    Ok(())
}

async fn delivery_is_idempotent(store: &dyn Store) -> Result<()> {
    let tenant = "idem-tenant";
    let a = action(tenant, "i-bob", 5_000, &[]);
    store.insert_action(&a).await?;
    let claim = store
        .claim_fan_out("w1", 10, 30_000, 100)
        .await?
        .into_iter()
        .find(|c| c.action.id == a.id)
        .context("claimed")?;
    let items = [delivery("i-alice", 5_000), delivery("i-carol", 5_000)];
    let first = store.deliver(&claim, 20, &items).await?;
    ensure!(first.len() == 2, "{first:?}");
    let again = store.deliver(&claim, 30, &items).await?;
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
    store
        .deliver(&claim, 40, std::slice::from_ref(&own))
        .await?;
    let named = |owner: &str| Delivery {
        owner: owner.into(),
        relevancy: 5_000,
        reason: Reason::new(ReasonKind::Restricted, "i-bob"),
    };
    let rescoped = store
        .deliver(&claim, 50, &[named("i-alice"), named("i-bob")])
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
    store.finish_fan_out(&claim).await?;
    Ok(())
}

/// Large batches (the size a backend may split to write in parallel) are
/// delivered whole, and a re-run of a large batch that overlaps the first
/// writes exactly the readers that were missing.
async fn large_batches(store: &dyn Store) -> Result<()> {
    let tenant = "large-tenant";
    let a = action(tenant, "lg-bob", 9_000, &[]);
    store.insert_action(&a).await?;
    let claim = store
        .claim_fan_out("w1", 10, 30_000, 100)
        .await?
        .into_iter()
        .find(|c| c.action.id == a.id)
        .context("claimed")?;
    let owner = |n: usize| format!("lg-{n:05}");
    let items: Vec<Delivery> = (0..9_500).map(|n| delivery(&owner(n), 9_000)).collect();
    let first = store.deliver(&claim, 20, &items[..5_000]).await?;
    ensure!(first.len() == 5_000, "first batch: {}", first.len());
    // Overlaps the first by 500 readers.
    let finished = store
        .deliver_all_and_finish(30, &[(claim.clone(), items[4_500..].to_vec())])
        .await?;
    let second = finished.into_iter().next().context("one result")??;
    ensure!(second.len() == 4_500, "second batch: {}", second.len());
    let mut owners: Vec<&str> = first
        .iter()
        .chain(&second)
        .map(|i| i.owner.as_str())
        .collect();
    owners.sort_unstable();
    owners.dedup();
    ensure!(owners.len() == 9_500, "every reader once: {}", owners.len());
    for n in [0, 4_499, 4_500, 4_999, 5_000, 9_499] {
        let feed = store.feed_page(tenant, &owner(n), range(5)).await?;
        ensure!(
            feed.len() == 1 && feed[0].action_id == a.id,
            "{}: {feed:?}",
            owner(n)
        );
    }
    let removed = store.delete_action(tenant, a.id).await?;
    ensure!(removed.len() == 9_500, "removed {}", removed.len());
    Ok(())
}

/// A fan-out written in several batches (one of them a re-run) is removed
/// whole; several fan-outs finished in one call stand or fall one by one.
async fn batches_and_groups(store: &dyn Store) -> Result<()> {
    let tenant = "batch-tenant";
    let big = action(tenant, "b-bob", 1_000, &[]);
    store.insert_action(&big).await?;
    let mine = |claims: Vec<riverfeed::store::Claim>| {
        claims
            .into_iter()
            .filter(|c| c.action.tenant == tenant)
            .collect::<Vec<_>>()
    };
    let claim = mine(store.claim_fan_out("w1", 0, 30_000, 100).await?)
        .pop()
        .context("claimed")?;
    let readers: Vec<String> = (0..7).map(|n| format!("b-reader-{n}")).collect();
    let items: Vec<Delivery> = readers.iter().map(|r| delivery(r, 1_000)).collect();
    ensure!(store.deliver(&claim, 1, &items[0..3]).await?.len() == 3);
    // A re-run overlapping what is there writes only the new readers.
    let rerun = store.deliver(&claim, 2, &items[2..5]).await?;
    ensure!(rerun.len() == 2, "{rerun:?}");
    let last = [(claim.clone(), items[5..].to_vec())];
    let finished = store.deliver_all_and_finish(3, &last).await?;
    ensure!(
        matches!(finished.as_slice(), [Ok(written)] if written.len() == 2),
        "{finished:?}"
    );
    let removed = store.delete_action(tenant, big.id).await?;
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
    let mut claims = mine(store.claim_fan_out("w1", 100, 30_000, 100).await?);
    claims.sort_by_key(|c| c.action.conducted);
    ensure!(claims.len() == 3, "{claims:?}");
    let lost = claims[1].action.id;
    claims[1].worker = "w2".into();
    let jobs: Vec<_> = claims
        .iter()
        .map(|c| {
            let d = Delivery {
                relevancy: c.action.conducted,
                ..delivery("b-dave", 0)
            };
            (c.clone(), vec![d])
        })
        .collect();
    let results = store.deliver_all_and_finish(200, &jobs).await?;
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
            FanOutState::InProgress
        } else {
            FanOutState::Done
        };
        ensure!(state == want, "{id}: {state:?}");
    }
    claims[1].worker = "w1".into();
    store.finish_fan_out(&claims[1]).await?;
    Ok(())
}

async fn feed_ranges(store: &dyn Store) -> Result<()> {
    let tenant = "range-tenant";
    // Two actions share a relevancy: the action id breaks the tie.
    let mut ids = Vec::new();
    for (i, relevancy) in [100, 200, 200, 300, 400].into_iter().enumerate() {
        let a = action(tenant, "r-bob", relevancy, &[]);
        store.insert_action(&a).await?;
        let claim = store
            .claim_fan_out("w", 0, 30_000, 100)
            .await?
            .into_iter()
            .find(|c| c.action.id == a.id)
            .with_context(|| format!("claim {i}"))?;
        store
            .deliver(&claim, 0, &[delivery("r-alice", relevancy)])
            .await?;
        store.finish_fan_out(&claim).await?;
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

async fn hide_and_delete(store: &dyn Store) -> Result<()> {
    let tenant = "hide-tenant";
    let a = action(tenant, "h-bob", 1_000, &["h-ref"]);
    let b = action(tenant, "h-bob", 2_000, &["h-ref"]);
    store.insert_action(&a).await?;
    store.insert_action(&b).await?;
    let claims: Vec<_> = store
        .claim_fan_out("w", 0, 30_000, 100)
        .await?
        .into_iter()
        .filter(|c| c.action.tenant == tenant)
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
        store.deliver(claim, 0, &items).await?;
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
    let again = store
        .deliver(claim_b, 0, &[delivery("h-alice", 2_000)])
        .await?;
    ensure!(again.is_empty(), "a hidden item is not delivered again");
    let alice = store.feed_page(tenant, "h-alice", range(10)).await?;
    ensure!(alice.iter().map(|i| i.action_id).eq([a.id]), "{alice:?}");
    ensure!(store.feed_page(tenant, "h-carol", range(10)).await?.len() == 2);

    // Hiding an action takes it out of every feed and stops further delivery.
    let removed = store.hide_action(tenant, a.id).await?;
    let mut owners: Vec<_> = removed.iter().map(|i| i.owner.as_str()).collect();
    owners.sort();
    ensure!(owners == ["h-alice", "h-carol"], "{owners:?}");
    let claim_a = claims.iter().find(|c| c.action.id == a.id).context("a")?;
    ensure!(store
        .deliver(claim_a, 0, &[delivery("h-dave", 1_000)])
        .await?
        .is_empty());
    ensure!(store.get_actions(tenant, &[a.id]).await?[0].hidden);
    ensure!(store
        .feed_page(tenant, "h-alice", range(10))
        .await?
        .is_empty());

    // Deleting cascades to feed items and slices.
    let removed = store.delete_action(tenant, b.id).await?;
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
        .delete_action(tenant, b.id)
        .await
        .err()
        .context("second delete")?;
    ensure!(err.kind == ErrorKind::NotFound, "{err}");
    ensure!(
        store
            .deliver(claim_b, 0, &[delivery("h-erin", 2_000)])
            .await?
            .is_empty(),
        "a deleted action is not delivered"
    );
    let err = store
        .hide_action(OTHER, a.id)
        .await
        .err()
        .context("other tenant")?;
    ensure!(err.kind == ErrorKind::NotFound, "{err}");
    Ok(())
}

/// An actor's outbox: their actions newest first by when they happened (not
/// by when they were recorded), paged both ways like a feed, kept per tenant,
/// hidden actions included, deleted ones gone.
async fn outboxes(store: &dyn Store) -> Result<()> {
    let pos = |a: &Action| Position {
        relevancy: a.conducted,
        action_id: a.id,
    };
    // Recorded out of order: the third happened first.
    let a1 = action(T, "o-olga", 2_000, &[]);
    let a2 = action(T, "o-olga", 3_000, &[]);
    let a3 = action(T, "o-olga", 1_000, &[]);
    let tie = action(T, "o-olga", 3_000, &[]);
    let other_actor = action(T, "o-oscar", 2_500, &[]);
    let elsewhere = action(OTHER, "o-olga", 2_200, &[]);
    for a in [&a1, &a2, &a3, &tie, &other_actor, &elsewhere] {
        store.insert_action(a).await?;
    }
    let mut newest_first = vec![pos(&a1), pos(&a2), pos(&a3), pos(&tie)];
    newest_first.sort_by(|a, b| b.cmp(a));

    let all = store.outbox(T, "o-olga", range(10)).await?;
    ensure!(all == newest_first, "newest first: {all:?}");
    ensure!(
        store.outbox(OTHER, "o-olga", range(10)).await? == vec![pos(&elsewhere)],
        "per tenant"
    );
    ensure!(store.outbox(T, "o-nobody", range(10)).await?.is_empty());

    // Forwards from a position, backwards from the oldest end.
    let older = store
        .outbox(
            T,
            "o-olga",
            FeedRange {
                older_than: Some(newest_first[1]),
                ..range(10)
            },
        )
        .await?;
    ensure!(older == newest_first[2..], "older than: {older:?}");
    let oldest_two = store
        .outbox(
            T,
            "o-olga",
            FeedRange {
                from_oldest: true,
                ..range(2)
            },
        )
        .await?;
    ensure!(
        oldest_two == newest_first[2..],
        "from the oldest: {oldest_two:?}"
    );
    let between = store
        .outbox(
            T,
            "o-olga",
            FeedRange {
                older_than: Some(newest_first[0]),
                newer_than: Some(newest_first[3]),
                ..range(10)
            },
        )
        .await?;
    ensure!(between == newest_first[1..3], "between: {between:?}");

    // Hidden stays (its actor still sees it); deleted goes.
    store.hide_action(T, a2.id).await?;
    store.delete_action(T, a1.id).await?;
    let after = store.outbox(T, "o-olga", range(10)).await?;
    let expected: Vec<Position> = newest_first
        .iter()
        .copied()
        .filter(|p| p.action_id != a1.id)
        .collect();
    ensure!(after == expected, "after hide and delete: {after:?}");
    Ok(())
}

/// A backfill puts actions into one reader's feed: in place by relevancy,
/// once, never over an item the reader has or hid, never for an action
/// hidden or deleted.
async fn backfills(store: &dyn Store) -> Result<()> {
    let reader = "k-kim";
    let fill = |a: &Action, changed: i64| Backfill {
        action_id: a.id,
        relevancy: a.conducted,
        reason: Reason::new(ReasonKind::Follows, &a.actor_id),
        changed,
    };
    let [old, mid, new, hidden, deleted, had, hid] =
        [1_000, 2_000, 3_000, 2_500, 2_600, 2_700, 2_800].map(|t| action(T, "k-karl", t, &[]));
    for a in [&old, &mid, &new, &hidden, &deleted, &had, &hid] {
        store.insert_action(a).await?;
    }
    // The reader already has one (from an earlier backfill) and hid another.
    let earlier = store
        .backfill(T, reader, &[fill(&had, 10), fill(&hid, 10)])
        .await?;
    ensure!(earlier.len() == 2, "earlier: {earlier:?}");
    store.hide_feed_item(T, reader, hid.id).await?;
    store.hide_action(T, hidden.id).await?;
    store.delete_action(T, deleted.id).await?;

    let asked = [&new, &hidden, &deleted, &had, &hid, &mid, &old].map(|a| fill(a, 50));
    let written = store.backfill(T, reader, &asked).await?;
    let ids: Vec<ObjectId> = written.iter().map(|i| i.action_id).collect();
    ensure!(ids == [new.id, mid.id, old.id], "written: {ids:?}");
    ensure!(
        written.iter().all(|i| i.owner == reader && i.changed == 50),
        "owner and stamp: {written:?}"
    );
    let feed: Vec<ObjectId> = store
        .feed_page(T, reader, range(10))
        .await?
        .iter()
        .map(|i| i.action_id)
        .collect();
    ensure!(
        feed == [new.id, had.id, mid.id, old.id],
        "in place by relevancy: {feed:?}"
    );
    let changes = store
        .feed_changes(
            T,
            reader,
            Stamp {
                changed: 49,
                action_id: ObjectId::from_bytes([0; 12]),
            },
            10,
        )
        .await?;
    ensure!(
        changes.len() == 3,
        "the backfill shows as changes: {changes:?}"
    );
    ensure!(
        store
            .backfill(T, reader, &asked.map(|b| Backfill { changed: 60, ..b }))
            .await?
            .is_empty(),
        "a second backfill writes nothing"
    );
    ensure!(
        store.feed_page(T, "k-other", range(10)).await?.is_empty(),
        "only the reader's feed"
    );
    Ok(())
}

/// A user's discussions: the actions they commented on, the one with the
/// latest comment (by anyone) first; paged like a feed; gone with the action.
async fn discussions(store: &dyn Store) -> Result<()> {
    let tenant = "talk-tenant";
    let [a, b, c] = [1_000, 1_100, 1_200].map(|t| action(tenant, "d-bob", t, &[]));
    for x in [&a, &b, &c] {
        store.insert_action(x).await?;
    }
    let comment = |on: &Action, author: &str, created: i64| Comment {
        id: ObjectId::new(),
        action_id: on.id,
        author_id: author.into(),
        text: "…".into(),
        created,
    };
    let at = |on: &Action, time: i64| Position {
        relevancy: time,
        action_id: on.id,
    };
    store
        .add_comment(tenant, &comment(&a, "d-dana", 2_000))
        .await?;
    store
        .add_comment(tenant, &comment(&b, "d-dana", 2_100))
        .await?;
    store
        .add_comment(tenant, &comment(&c, "d-eve", 2_200))
        .await?;
    store
        .add_comment(tenant, &comment(&a, "d-dana", 2_300))
        .await?;
    ensure!(
        store.discussions(tenant, "d-dana", range(10)).await? == [at(&a, 2_300), at(&b, 2_100)],
        "her own latest comment moves a up"
    );
    // Someone else's comment moves the discussion up for every participant.
    store
        .add_comment(tenant, &comment(&b, "d-eve", 2_400))
        .await?;
    let dana = store.discussions(tenant, "d-dana", range(10)).await?;
    ensure!(dana == [at(&b, 2_400), at(&a, 2_300)], "dana: {dana:?}");
    let eve = store.discussions(tenant, "d-eve", range(10)).await?;
    ensure!(eve == [at(&b, 2_400), at(&c, 2_200)], "eve: {eve:?}");
    let older = store
        .discussions(
            tenant,
            "d-dana",
            FeedRange {
                older_than: Some(dana[0]),
                ..range(10)
            },
        )
        .await?;
    ensure!(older == dana[1..], "paged: {older:?}");
    ensure!(store
        .discussions(tenant, "d-bob", range(10))
        .await?
        .is_empty());
    ensure!(store
        .discussions(OTHER, "d-dana", range(10))
        .await?
        .is_empty());
    store.delete_action(tenant, b.id).await?;
    ensure!(
        store.discussions(tenant, "d-dana", range(10)).await? == [at(&a, 2_300)],
        "gone with the action"
    );
    ensure!(store.discussions(tenant, "d-eve", range(10)).await? == [at(&c, 2_200)]);
    Ok(())
}

/// An unfollow is recorded at once and listed for reads; its cleanup, under
/// a lease, takes out exactly the items that came by the ended edge.
async fn unfollows(store: &dyn Store) -> Result<()> {
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
    store.start_unfollow(&follows).await?;
    ensure!(store.unfollows(tenant, reader).await? == std::slice::from_ref(&follows));
    ensure!(store.unfollows(tenant, "u-other").await?.is_empty());
    ensure!(store.unfollows(OTHER, reader).await?.is_empty());

    let claims = store.claim_unfollows("w1", 100, 1_000, 10).await?;
    let claim = claims
        .iter()
        .find(|c| c.unfollow == follows)
        .context("claimed")?
        .clone();
    ensure!(
        store
            .claim_unfollows("w2", 200, 1_000, 10)
            .await?
            .iter()
            .all(|c| c.unfollow != follows),
        "leased"
    );
    // The lease runs out: w2 takes it over, w1 lost it.
    let taken = store.claim_unfollows("w2", 1_200, 1_000, 10).await?;
    let claim2 = taken
        .iter()
        .find(|c| c.unfollow == follows)
        .context("taken over")?
        .clone();
    let err = store
        .clean_unfollow(&claim)
        .await
        .err()
        .context("lease lost")?;
    ensure!(err.kind == ErrorKind::LeaseLost, "{err}");
    let removed: Vec<ObjectId> = store
        .clean_unfollow(&claim2)
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
    ensure!(store.unfollows(tenant, reader).await?.is_empty(), "ended");

    // Ended before its cleanup: nothing is claimed, nothing removed.
    let friends = Unfollow {
        kind: Ended::Edge(EdgeKind::Friend),
        ..follows
    };
    store.start_unfollow(&friends).await?;
    store.end_unfollow(&friends).await?;
    ensure!(store.unfollows(tenant, reader).await?.is_empty());
    ensure!(
        store
            .claim_unfollows("w1", 5_000, 1_000, 10)
            .await?
            .iter()
            .all(|c| c.unfollow != friends),
        "nothing to claim"
    );
    ensure!(store.feed_page(tenant, reader, range(10)).await?.len() == 3);
    Ok(())
}

async fn passes_the_suite(backend: Backend) {
    let Some(test) = TestStore::open(backend).await else {
        return;
    };
    let result = store_test_suite(test.store.as_ref()).await;
    test.remove().await;
    if let Err(err) = result {
        panic!("{backend:?}: {err:#}");
    }
}

crate::on_both_backends!(passes_the_suite);

/// The suite on each MongoDB timeline layout but the default (which
/// `passes_the_suite` covers), sized buckets small so they fill often; with
/// copies of actions in the entries, or not.
async fn every_timeline_layout_passes_the_suite(layout: TimelineLayout, embed_actions: bool) {
    let settings = StoreSettings {
        mongo: MongoSettings {
            layout: Some(layout),
            bucket_size: 3,
            embed_actions,
            ..MongoSettings::default()
        },
        ..StoreSettings::default()
    };
    let Some(test) = TestStore::open_as(Backend::Mongo(layout.name()), &settings).await else {
        return;
    };
    let result = store_test_suite(test.store.as_ref()).await;
    test.remove().await;
    if let Err(err) = result {
        panic!("MongoDB, {layout} layout (copies: {embed_actions}): {err:#}");
    }
}

#[tokio::test]
async fn time_buckets_pass_the_suite() {
    every_timeline_layout_passes_the_suite(TimelineLayout::TimeBuckets, false).await;
}

#[tokio::test]
async fn sized_buckets_pass_the_suite() {
    every_timeline_layout_passes_the_suite(TimelineLayout::SizedBuckets, true).await;
}

#[tokio::test]
async fn items_with_copies_pass_the_suite() {
    every_timeline_layout_passes_the_suite(TimelineLayout::Items, true).await;
}

/// Renames cross batch boundaries: 1,100 actions name the applicant.
async fn rename_ref(store: &dyn Store) -> Result<()> {
    use riverfeed::descriptor::NewApplicant;
    let tenant = "rename-tenant";
    let applied = |applicant: &str, name: &str| {
        let mut a = action(tenant, "n-rita", 1_000, &[applicant]);
        a.descriptor = Descriptor::NewApplicant(NewApplicant {
            applicant_id: applicant.into(),
            applicant_name: name.into(),
            position_id: "pos-1".into(),
            position_name: "Engineer".into(),
        });
        a
    };
    for _ in 0..1_100 {
        store
            .insert_action(&applied("app-mary", "Mary Fanning"))
            .await?;
    }
    let other = applied("app-john", "John Doe");
    store.insert_action(&other).await?;
    let elsewhere = {
        let mut a = applied("app-mary", "Mary Fanning");
        a.tenant = OTHER.into();
        a
    };
    store.insert_action(&elsewhere).await?;

    let changed = store
        .rename_ref(tenant, "app-mary", "Mary Fanning-Smith")
        .await?;
    ensure!(changed == 1_100, "{changed} names changed");
    ensure!(
        store
            .rename_ref(tenant, "app-mary", "Mary Fanning-Smith")
            .await?
            == 0
    );
    let page = store.slice(tenant, "app-mary", None, 5).await?;
    for a in store.get_actions(tenant, &page).await? {
        ensure!(
            matches!(&a.descriptor, Descriptor::NewApplicant(d) if d.applicant_name == "Mary Fanning-Smith"),
            "{:?}",
            a.descriptor
        );
    }
    let john = store.get_actions(tenant, &[other.id]).await?;
    ensure!(
        matches!(&john[0].descriptor, Descriptor::NewApplicant(d) if d.applicant_name == "John Doe")
    );
    let theirs = store.get_actions(OTHER, &[elsewhere.id]).await?;
    ensure!(
        matches!(&theirs[0].descriptor, Descriptor::NewApplicant(d) if d.applicant_name == "Mary Fanning"),
        "other tenants are untouched"
    );
    Ok(())
}

async fn assignments_and_supervisors(store: &dyn Store) -> Result<()> {
    let t = "assign-tenant";
    ensure!(store.set_assignment(t, "rita", "app-1", true).await?);
    ensure!(
        !store.set_assignment(t, "rita", "app-1", true).await?,
        "once"
    );
    ensure!(store.set_assignment(t, "rita", "app-2", true).await?);
    ensure!(store.set_assignment(t, "sam", "app-2", true).await?);
    ensure!(store.assignments(t, "rita").await? == ["app-1", "app-2"]);
    let mut on = store
        .assignees(t, &["app-2".into(), "app-9".into()])
        .await?;
    on.sort();
    ensure!(
        on == [
            ("app-2".to_string(), "rita".to_string()),
            ("app-2".to_string(), "sam".to_string())
        ],
        "{on:?}"
    );
    ensure!(store.set_assignment(t, "rita", "app-2", false).await?);
    ensure!(!store.set_assignment(t, "rita", "app-2", false).await?);
    ensure!(store.assignments(t, "rita").await? == ["app-1"]);
    ensure!(store.assignees(OTHER, &["app-1".into()]).await?.is_empty());

    ensure!(store.supervisor(t, "rita").await?.is_none());
    store.set_supervisor(t, "rita", Some("boss")).await?;
    ensure!(store.supervisor(t, "rita").await?.as_deref() == Some("boss"));
    ensure!(store.supervisor(OTHER, "rita").await?.is_none());
    store.set_supervisor(t, "rita", None).await?;
    ensure!(store.supervisor(t, "rita").await?.is_none());
    Ok(())
}

async fn reactions(store: &dyn Store) -> Result<()> {
    let tenant = "react-tenant";
    let a = action(tenant, "x-bob", 1_000, &[]);
    store.insert_action(&a).await?;
    let mut ids = Vec::new();
    for (i, author) in ["x-alice", "x-carol", "x-alice"].iter().enumerate() {
        let comment = Comment {
            id: ObjectId::new(),
            action_id: a.id,
            author_id: author.to_string(),
            text: format!("comment {i}"),
            created: 2_000 + i as i64,
        };
        let counts = store.add_comment(tenant, &comment).await?;
        ensure!(counts.comments == i as u64 + 1, "{counts:?}");
        ids.push(comment.id);
    }
    let all = store.comments(tenant, a.id, None, 10).await?;
    ensure!(
        all.iter().map(|c| c.id).eq(ids.iter().copied()),
        "oldest first"
    );
    let rest = store.comments(tenant, a.id, Some(ids[0]), 10).await?;
    ensure!(
        rest.len() == 2 && rest[0].id == ids[1],
        "paged after the first"
    );
    ensure!(store.comments(OTHER, a.id, None, 10).await?.is_empty());

    ensure!(
        store.set_like(tenant, a.id, "x-alice", true).await?
            == (
                true,
                Counts {
                    comments: 3,
                    likes: 1
                }
            )
    );
    ensure!(
        !store.set_like(tenant, a.id, "x-alice", true).await?.0,
        "one like per user"
    );
    ensure!(store.set_like(tenant, a.id, "x-carol", true).await?.1.likes == 2);
    ensure!(
        store.set_like(tenant, a.id, "x-carol", false).await?
            == (
                true,
                Counts {
                    comments: 3,
                    likes: 1
                }
            )
    );
    ensure!(!store.set_like(tenant, a.id, "x-carol", false).await?.0);
    ensure!(
        store
            .liked(tenant, "x-alice", &[a.id, ObjectId::new()])
            .await?
            == [a.id]
    );
    ensure!(store.liked(tenant, "x-carol", &[a.id]).await?.is_empty());
    ensure!(
        store.get_actions(tenant, &[a.id]).await?[0].counts
            == Counts {
                comments: 3,
                likes: 1
            }
    );

    let missing = ObjectId::new();
    let err = store
        .set_like(tenant, missing, "x-alice", true)
        .await
        .err()
        .context("missing")?;
    ensure!(err.kind == ErrorKind::NotFound, "{err}");
    let orphan = Comment {
        id: ObjectId::new(),
        action_id: missing,
        author_id: "x".into(),
        text: "x".into(),
        created: 1,
    };
    ensure!(
        store
            .add_comment(tenant, &orphan)
            .await
            .err()
            .map(|e| e.kind)
            == Some(ErrorKind::NotFound)
    );

    // Deleting the action takes its reactions with it.
    store.delete_action(tenant, a.id).await?;
    ensure!(store.comments(tenant, a.id, None, 10).await?.is_empty());
    ensure!(store.liked(tenant, "x-alice", &[a.id]).await?.is_empty());
    Ok(())
}

/// Forty items in the same millisecond page exactly, both ways: the action id
/// orders them.
async fn many_ties(store: &dyn Store) -> Result<()> {
    let tenant = "tie-tenant";
    let mut ids = Vec::new();
    for _ in 0..40 {
        let a = action(tenant, "t-bob", 7_000, &[]);
        store.insert_action(&a).await?;
        ids.push(a.id);
    }
    let claims = store.claim_fan_out("w", 0, 30_000, 100).await?;
    for claim in claims.iter().filter(|c| c.action.tenant == tenant) {
        store
            .deliver(claim, 0, &[delivery("t-alice", 7_000)])
            .await?;
        store.finish_fan_out(claim).await?;
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

#[tokio::test]
async fn embedded_store_keeps_everything_across_reopen() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = action(T, "p-bob", 1_000, &["p-ref"]);
    {
        let store = EmbeddedStore::open(dir.path())?;
        store.insert_action(&a).await?;
        store
            .set_edge(T, EdgeKind::Follows, "p-alice", "p-bob", true)
            .await?;
    }
    let store = EmbeddedStore::open(dir.path())?;
    ensure!(store.get_actions(T, &[a.id]).await? == vec![a.clone()]);
    ensure!(store.slice(T, "p-ref", None, 10).await? == [a.id]);
    ensure!(
        store
            .edges(T, EdgeKind::Follows, Direction::In, "p-bob", None, 10)
            .await?
            == ["p-alice"]
    );
    let claims = store.claim_fan_out("w", 0, 1_000, 10).await?;
    ensure!(claims.len() == 1, "the pending action survived the reopen");
    Ok(())
}
