//! Cases of the graph: users, edges (follows and friendships), edges
//! among many readers, cuts and celebrities, assignments and supervisors.

use anyhow::{ensure, Result};
use riverfeed::model::{EdgeKind, ObjectId, Position, User};
use riverfeed::store::prelude::*;
use riverfeed::store::{Cut, Direction, Existing};

use super::{names, sorted, OTHER, T};

pub(super) async fn users(store: &dyn Store) -> Result<()> {
    store
        .put_user(
            T,
            &User {
                id: "u-ann".into(),
                name: Some("Ann".into()),
            },
            Existing::Replace,
        )
        .await?;
    store
        .put_user(T, &User::unnamed("u-ann"), Existing::Keep)
        .await?;
    store
        .put_user(T, &User::unnamed("u-ben"), Existing::Keep)
        .await?;
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
        "a kept user keeps its profile, a missing one is created: {found:?}"
    );
    // Kept with a name: named where it is new, as it was where it is not.
    let named = |id: &str, name: &str| User {
        id: id.into(),
        name: Some(name.into()),
    };
    store
        .put_user(T, &named("u-cy", "Cy"), Existing::Keep)
        .await?;
    store
        .put_user(T, &named("u-ann", "Someone"), Existing::Keep)
        .await?;
    let mut found = store.get_users(T, &["u-ann".into(), "u-cy".into()]).await?;
    found.sort_by(|a, b| a.id.cmp(&b.id));
    ensure!(
        found == [named("u-ann", "Ann"), named("u-cy", "Cy")],
        "kept with a name: {found:?}"
    );
    ensure!(
        store.get_users(OTHER, &["u-ann".into()]).await?.is_empty(),
        "users are per tenant"
    );
    Ok(())
}

pub(super) async fn edges(store: &dyn Store) -> Result<()> {
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

pub(super) async fn sources_and_cuts(store: &dyn Store) -> Result<()> {
    store
        .set_edge(T, EdgeKind::Follows, "m-ann", "m-star", true)
        .await?;
    store
        .set_edge(T, EdgeKind::Follows, "m-cat", "m-star", true)
        .await?;
    store
        .set_edge(T, EdgeKind::Friend, "m-bob", "m-star", true)
        .await?;
    store
        .set_edge(OTHER, EdgeKind::Follows, "m-dan", "m-star", true)
        .await?;
    let readers = names(&["m-ann", "m-bob", "m-cat", "m-dan", "m-nobody"]);
    let follows = store
        .edges_among(T, EdgeKind::Follows, &readers, "m-star")
        .await?;
    ensure!(
        sorted(follows) == names(&["m-ann", "m-cat"]),
        "followers among"
    );
    let friends = store
        .edges_among(T, EdgeKind::Friend, &readers, "m-star")
        .await?;
    ensure!(friends == names(&["m-bob"]), "friends among, both ways");
    ensure!(store
        .edges_among(T, EdgeKind::Follows, &[], "m-star")
        .await?
        .is_empty());

    let since = Position {
        relevancy: 5_000,
        action_id: ObjectId::new(),
    };
    let began = Position {
        relevancy: 6_000,
        action_id: ObjectId::new(),
    };
    let star = Cut {
        kind: EdgeKind::Follows,
        actor: "m-star".into(),
        since,
        began,
        until: None,
    };
    let zed = Cut {
        kind: EdgeKind::Friend,
        actor: "m-zed".into(),
        since: Position::MIN,
        began: Position::MAX,
        until: Some(began),
    };
    store.set_cut(T, "m-ann", &star).await?;
    store.set_cut(T, "m-ann", &zed).await?;
    store.set_cut(OTHER, "m-ann", &star).await?;
    let mut cuts = store.cuts(T, "m-ann").await?;
    cuts.sort_by(|a, b| a.actor.cmp(&b.actor));
    ensure!(cuts == vec![star.clone(), zed], "cuts: {cuts:?}");
    // Replaced, then cleared.
    let later = Cut {
        since: Position::MAX,
        ..star
    };
    store.set_cut(T, "m-ann", &later).await?;
    store
        .clear_cut(T, "m-ann", EdgeKind::Friend, "m-zed")
        .await?;
    let cuts = store.cuts(T, "m-ann").await?;
    ensure!(cuts == vec![later.clone()], "replaced: {cuts:?}");
    // An edge ends keeping its history: its range, with an end, is kept
    // beside the standing cut (which the next edge replaces).
    let kept = Cut {
        until: Some(began),
        ..later.clone()
    };
    store.set_cut(T, "m-ann", &kept).await?;
    let by_end = |mut cuts: Vec<Cut>| {
        cuts.sort_by_key(|c| c.until.unwrap_or(Position::MAX));
        cuts
    };
    let cuts = by_end(store.cuts(T, "m-ann").await?);
    ensure!(cuts == vec![kept.clone(), later.clone()], "kept: {cuts:?}");
    // A later edge, ended keeping its history too: both ranges stay; the
    // same end again replaces its range.
    let again = Cut {
        since: began,
        began,
        until: Some(Position::MAX.just_below()),
        ..later.clone()
    };
    store.set_cut(T, "m-ann", &again).await?;
    store.set_cut(T, "m-ann", &again).await?;
    let standing = Cut {
        since: Position::MIN,
        ..later.clone()
    };
    store.set_cut(T, "m-ann", &standing).await?;
    let cuts = by_end(store.cuts(T, "m-ann").await?);
    ensure!(
        cuts == vec![kept, again, standing],
        "two ranges and the standing cut: {cuts:?}"
    );
    store
        .clear_cut(T, "m-ann", EdgeKind::Follows, "m-star")
        .await?;
    ensure!(store.cuts(T, "m-ann").await?.is_empty(), "all cleared");
    ensure!(store.cuts(T, "m-nobody").await?.is_empty());

    store.mark_celebrity(T, "m-star").await?;
    store.mark_celebrity(T, "m-star").await?;
    let among = store.celebrities(T, &names(&["m-star", "m-ann"])).await?;
    ensure!(among == names(&["m-star"]), "celebrities: {among:?}");
    ensure!(
        store
            .celebrities(OTHER, &names(&["m-star"]))
            .await?
            .is_empty(),
        "per tenant"
    );
    Ok(())
}

pub(super) async fn assignments_and_supervisors(store: &dyn Store) -> Result<()> {
    let t = "assign-tenant";
    ensure!(store.set_assignment(t, "rita", "app-1", true).await?);
    ensure!(
        !store.set_assignment(t, "rita", "app-1", true).await?,
        "once"
    );
    ensure!(store.set_assignment(t, "rita", "app-2", true).await?);
    ensure!(store.set_assignment(t, "sam", "app-2", true).await?);
    let pairs = |list: &[(&str, &str)]| {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    };
    let refs_of = store
        .assignment(t, Direction::Out, &names(&["sam", "rita"]))
        .await?;
    ensure!(
        refs_of == pairs(&[("rita", "app-1"), ("rita", "app-2"), ("sam", "app-2")]),
        "by user, then ref: {refs_of:?}"
    );
    let on = store
        .assignment(t, Direction::In, &names(&["app-9", "app-2"]))
        .await?;
    ensure!(
        on == pairs(&[("app-2", "rita"), ("app-2", "sam")]),
        "by ref, then user: {on:?}"
    );
    ensure!(store.set_assignment(t, "rita", "app-2", false).await?);
    ensure!(!store.set_assignment(t, "rita", "app-2", false).await?);
    let rita = store
        .assignment(t, Direction::Out, &names(&["rita"]))
        .await?;
    ensure!(rita == pairs(&[("rita", "app-1")]), "{rita:?}");
    let on = store
        .assignment(t, Direction::In, &names(&["app-2"]))
        .await?;
    ensure!(on == pairs(&[("app-2", "sam")]), "both sides: {on:?}");
    ensure!(store
        .assignment(OTHER, Direction::In, &names(&["app-1"]))
        .await?
        .is_empty());

    let supervisor = |t: &'static str, user: &'static str| async move {
        store.supervision(t, Direction::Out, user).await
    };
    ensure!(supervisor(t, "rita").await?.is_empty());
    store.set_supervisor(t, "rita", Some("boss")).await?;
    store.set_supervisor(t, "ann", Some("boss")).await?;
    ensure!(supervisor(t, "rita").await? == ["boss"]);
    ensure!(supervisor(OTHER, "rita").await?.is_empty());
    let supervised = store.supervision(t, Direction::In, "boss").await?;
    ensure!(supervised == ["ann", "rita"], "in order: {supervised:?}");
    // A new supervisor replaces the one before, in both directions.
    store.set_supervisor(t, "ann", Some("chief")).await?;
    ensure!(supervisor(t, "ann").await? == ["chief"]);
    ensure!(store.supervision(t, Direction::In, "boss").await? == ["rita"]);
    store.set_supervisor(t, "rita", None).await?;
    ensure!(supervisor(t, "rita").await?.is_empty());
    ensure!(store
        .supervision(t, Direction::In, "boss")
        .await?
        .is_empty());
    Ok(())
}

/// Supervisors set at once for one user leave exactly one, on both sides:
/// each call ends whatever else the user reports to in the same step.
pub(super) async fn one_supervisor_at_once(store: &dyn Store) -> Result<()> {
    let t = "supervise-tenant";
    // Rounds enough for an unguarded read-then-write to interleave; each
    // round's calls run at once.
    const ROUNDS: usize = 20;
    const CALLS: usize = 8;
    let candidates: Vec<String> = (0..CALLS).map(|i| format!("boss-{i}")).collect();
    let mut broken = Vec::new();
    for round in 0..ROUNDS {
        let user = format!("worker-{round}");
        let calls = candidates
            .iter()
            .map(|boss| store.set_supervisor(t, &user, Some(boss.as_str())));
        for done in futures_util::future::join_all(calls).await {
            done?;
        }
        let had = store.supervision(t, Direction::Out, &user).await?;
        let mut reported_to = Vec::new();
        for boss in &candidates {
            let reports = store.supervision(t, Direction::In, boss).await?;
            if reports.contains(&user) {
                reported_to.push(boss.clone());
            }
        }
        if had.len() != 1 || reported_to != had {
            broken.push((round, had, reported_to));
        }
    }
    ensure!(
        broken.is_empty(),
        "{} of {ROUNDS} rounds left other than one supervisor (round, supervisors, \
         reports lists holding the user): {broken:?}",
        broken.len()
    );
    // Cleared at once with a new one set: none or the one set, never both.
    let user = "worker-last";
    store.set_supervisor(t, user, Some("boss-0")).await?;
    let (cleared, set) = futures_util::join!(
        store.set_supervisor(t, user, None),
        store.set_supervisor(t, user, Some("boss-1")),
    );
    cleared?;
    set?;
    let had = store.supervision(t, Direction::Out, user).await?;
    ensure!(
        had.is_empty() || had == ["boss-1"],
        "the clear or the new one: {had:?}"
    );
    ensure!(
        !store
            .supervision(t, Direction::In, "boss-0")
            .await?
            .contains(&user.to_owned()),
        "the first one's reports no longer list them"
    );
    Ok(())
}
