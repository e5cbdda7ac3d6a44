//! Conformance cases for what the feed models keep beside the timelines:
//! edges among many readers, cuts, celebrities, many outboxes at once (an
//! actor's, a group's, a named reader's, a group's sent actions),
//! membership starts, a group leave's cleanup, group follows and their
//! cleanup, materialised lookups with tombstones for pulled items,
//! and rivers.

use anyhow::{ensure, Context, Result};
use riverfeed::model::{
    Action, EdgeKind, Group, GroupKind, MembershipRole, ObjectId, Position, Reason, ReasonKind,
    Scope,
};
use riverfeed::store::prelude::*;
use riverfeed::store::{
    Backfill, Cut, Direction, ErrorKind, FeedRange, JoinOutcome, Outbox, Posted, River, Unfollow,
};

use crate::store_suite::{action, range};

const T: &str = "acme";
const OTHER: &str = "globex";

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

pub async fn model_cases(store: &dyn Store) -> Result<()> {
    sources(store).await.context("sources and cuts")?;
    many_outboxes(store).await.context("many outboxes")?;
    scoped_outboxes(store)
        .await
        .context("group and named outboxes")?;
    membership_starts(store)
        .await
        .context("membership starts")?;
    group_cleanup(store).await.context("group cleanup")?;
    group_follows(store).await.context("group follows")?;
    expiries(store).await.context("expiries")?;
    group_rings(store).await.context("group rings")?;
    tombstones(store)
        .await
        .context("materialised and tombstones")?;
    rivers(store).await.context("rivers")?;
    Ok(())
}

async fn sources(store: &dyn Store) -> Result<()> {
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

async fn many_outboxes(store: &dyn Store) -> Result<()> {
    let mut by_actor: Vec<(String, Vec<Position>)> = Vec::new();
    for (n, actor) in ["mo-1", "mo-2", "mo-3", "mo-4", "mo-5", "mo-6"]
        .iter()
        .enumerate()
    {
        let mut positions = Vec::new();
        for k in 0..=n {
            let a = action(T, actor, 1_000 + (k as i64) * 10, &[]);
            store.insert_action(&a).await?;
            positions.push(Position {
                relevancy: a.conducted,
                action_id: a.id,
            });
        }
        positions.reverse();
        by_actor.push((actor.to_string(), positions));
    }
    let reads: Vec<(Outbox, FeedRange)> = by_actor
        .iter()
        .map(|(actor, _)| (Outbox::Actor(actor.clone()), range(3)))
        .chain([(Outbox::Actor("mo-none".into()), range(3))])
        .collect();
    let got = store.outboxes(T, &reads).await?;
    ensure!(got.len() == reads.len(), "one answer per read");
    for ((actor, all), answer) in by_actor.iter().zip(&got) {
        let want: Vec<Position> = all.iter().copied().take(3).collect();
        ensure!(positions(answer) == want, "{actor}: {answer:?}");
        ensure!(answer.iter().all(|p| p.actor == *actor), "{actor}'s own");
    }
    ensure!(got.last().is_some_and(|a| a.is_empty()));
    // Each read keeps its own range.
    let bounded = store
        .outboxes(
            T,
            &[(
                Outbox::Actor("mo-6".into()),
                FeedRange {
                    newer_than: Some(by_actor[5].1[2]),
                    ..range(10)
                },
            )],
        )
        .await?;
    ensure!(
        positions(&bounded[0]) == by_actor[5].1[..2],
        "newer than: {bounded:?}"
    );
    Ok(())
}

fn positions(posted: &[Posted]) -> Vec<Position> {
    posted.iter().map(|p| p.position).collect()
}

fn scoped(actor: &str, conducted: i64, scope: Scope, to: &[&str]) -> Action {
    let mut a = action(T, actor, conducted, &[]);
    a.scope = scope;
    match scope {
        Scope::Restricted => a.readers = names(to),
        _ => a.scope_groups = names(to),
    }
    a
}

/// A group's outbox lists what is shared with it; a reader's named outbox
/// what names them; both as the actions are scoped now.
async fn scoped_outboxes(store: &dyn Store) -> Result<()> {
    let team = scoped("ms-ann", 1_000, Scope::Team, &["ms-x", "ms-y"]);
    let department = scoped("ms-bob", 2_000, Scope::Department, &["ms-x"]);
    let public = scoped("ms-ann", 3_000, Scope::Public, &[]);
    let named = scoped("ms-bob", 4_000, Scope::Restricted, &["ms-cat", "ms-dan"]);
    let later = scoped("ms-ann", 5_000, Scope::Team, &["ms-y"]);
    for a in [&team, &department, &public, &named, &later] {
        store.insert_action(a).await?;
    }
    let at = |a: &Action| (a.id, a.actor_id.clone());
    let read = |outboxes: Vec<Outbox>| async move {
        let reads: Vec<(Outbox, FeedRange)> =
            outboxes.into_iter().map(|o| (o, range(10))).collect();
        let got = store.outboxes(T, &reads).await?;
        anyhow::Ok(
            got.into_iter()
                .map(|posted| {
                    posted
                        .into_iter()
                        .map(|p| (p.position.action_id, p.actor))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>(),
        )
    };
    let all = || {
        vec![
            Outbox::Group("ms-x".into()),
            Outbox::Group("ms-y".into()),
            Outbox::Named("ms-cat".into()),
            Outbox::Named("ms-eve".into()),
        ]
    };
    let got = read(all()).await?;
    ensure!(
        got[0] == [at(&department), at(&team)],
        "group x: {:?}",
        got[0]
    );
    ensure!(got[1] == [at(&later), at(&team)], "group y: {:?}", got[1]);
    ensure!(got[2] == [at(&named)], "named cat: {:?}", got[2]);
    ensure!(got[3].is_empty(), "nobody names eve");
    // A group's id and a user's never meet.
    let actor = read(vec![Outbox::Actor("ms-x".into())]).await?;
    ensure!(actor[0].is_empty(), "no actor ms-x");

    // A change of scope moves the action between outboxes.
    store
        .set_action_scope(T, team.id, Scope::Public, &[], &[])
        .await?;
    store
        .set_action_scope(T, public.id, Scope::Restricted, &names(&["ms-eve"]), &[])
        .await?;
    store.delete_action(T, department.id).await?;
    let got = read(all()).await?;
    ensure!(got[0].is_empty(), "group x after: {:?}", got[0]);
    ensure!(got[1] == [at(&later)], "group y after: {:?}", got[1]);
    ensure!(got[2] == [at(&named)], "named cat after");
    ensure!(got[3] == [at(&public)], "eve named now: {:?}", got[3]);
    let ann = read(vec![Outbox::Actor("ms-ann".into())]).await?;
    ensure!(
        ann[0] == [at(&later), at(&public), at(&team)],
        "the actor's outbox keeps all: {:?}",
        ann[0]
    );
    let other = store
        .outboxes(OTHER, &[(Outbox::Group("ms-y".into()), range(10))])
        .await?;
    ensure!(other[0].is_empty(), "per tenant");
    Ok(())
}

/// A membership's start: set on the first join, kept by a join that only
/// changes the role, begun anew after leaving; looked up for many users.
async fn membership_starts(store: &dyn Store) -> Result<()> {
    let team = Group {
        id: "mm-team".into(),
        kind: GroupKind::Team,
    };
    let joined = |outcome: JoinOutcome| match outcome {
        JoinOutcome::Joined(m) => Ok(m),
        other => Err(anyhow::anyhow!("not joined: {other:?}")),
    };
    let first = joined(
        store
            .join_group(T, &team, "mm-ann", MembershipRole::Member, 500)
            .await?,
    )?;
    ensure!(first.since == 500, "{first:?}");
    let again = joined(
        store
            .join_group(T, &team, "mm-ann", MembershipRole::Lead, 900)
            .await?,
    )?;
    ensure!(
        again.since == 500 && again.role == MembershipRole::Lead,
        "{again:?}"
    );
    store
        .join_group(T, &team, "mm-bob", MembershipRole::Member, 700)
        .await?;
    let listed = store.memberships(T, "mm-ann").await?;
    ensure!(
        listed.len() == 1 && listed[0].since == 500,
        "listed: {listed:?}"
    );
    let mut among = store
        .members_among(T, "mm-team", &names(&["mm-bob", "mm-cat", "mm-ann"]))
        .await?;
    among.sort();
    ensure!(
        among == [("mm-ann".to_string(), 500), ("mm-bob".to_string(), 700)],
        "among: {among:?}"
    );
    ensure!(store.members_among(T, "mm-team", &[]).await?.is_empty());
    ensure!(store
        .members_among(OTHER, "mm-team", &names(&["mm-ann"]))
        .await?
        .is_empty());
    store.leave_group(T, "mm-team", "mm-ann").await?;
    let back = joined(
        store
            .join_group(T, &team, "mm-ann", MembershipRole::Member, 1_200)
            .await?,
    )?;
    ensure!(back.since == 1_200, "begun anew: {back:?}");
    Ok(())
}

/// A group left: its job is listed and claimed as an unfollow's, and its
/// cleanup takes out only the group items it names.
async fn group_cleanup(store: &dyn Store) -> Result<()> {
    let reader = "mc-rae";
    let team = scoped("mc-ann", 1_000, Scope::Team, &["mc-team"]);
    let department = scoped("mc-ann", 2_000, Scope::Department, &["mc-dep"]);
    let followed = scoped("mc-ann", 3_000, Scope::Public, &[]);
    let kept = scoped("mc-ann", 4_000, Scope::Team, &["mc-team"]);
    let fill = |a: &Action, kind: ReasonKind| Backfill {
        action_id: a.id,
        relevancy: a.conducted,
        reason: Reason::new(kind, "mc-ann"),
        changed: 10,
    };
    for a in [&team, &department, &followed, &kept] {
        store.insert_action(a).await?;
    }
    store
        .backfill(
            T,
            reader,
            &[
                fill(&team, ReasonKind::Team),
                fill(&department, ReasonKind::Department),
                fill(&followed, ReasonKind::Follows),
                fill(&kept, ReasonKind::Team),
            ],
        )
        .await?;
    let left = Unfollow::group(T, reader, "mc-team");
    store.start_unfollow(&left).await?;
    ensure!(store.unfollows(T, reader).await? == std::slice::from_ref(&left));
    let claims = store.claim_unfollows("w1", 100, 1_000, 10).await?;
    let claim = claims
        .iter()
        .find(|c| c.unfollow == left)
        .context("claimed")?
        .clone();
    let taken = store.claim_unfollows("w2", 1_200, 1_000, 10).await?;
    let claim2 = taken
        .iter()
        .find(|c| c.unfollow == left)
        .context("taken over")?
        .clone();
    let named = [team.id, department.id, followed.id, ObjectId::new()];
    let err = store
        .clean_named(&claim, &named)
        .await
        .err()
        .context("lease lost")?;
    ensure!(err.kind == ErrorKind::LeaseLost, "{err}");
    let removed: Vec<ObjectId> = store
        .clean_named(&claim2, &named)
        .await?
        .iter()
        .map(|i| i.action_id)
        .collect();
    let mut want = vec![team.id, department.id];
    want.sort();
    let mut got = removed.clone();
    got.sort();
    ensure!(got == want, "group items named: {removed:?}");
    let rest: Vec<ObjectId> = store
        .feed_page(T, reader, range(10))
        .await?
        .iter()
        .map(|i| i.action_id)
        .collect();
    ensure!(rest == [kept.id, followed.id], "rest: {rest:?}");
    ensure!(store.unfollows(T, reader).await?.is_empty(), "ended");
    // The job is gone: cleaning it again takes nothing.
    ensure!(store.clean_named(&claim2, &[kept.id]).await?.is_empty());
    ensure!(store.feed_page(T, reader, range(10)).await?.len() == 2);
    Ok(())
}

/// A group follow: an edge from a user to a group (listed both ways, never
/// meeting a user of the same id), its cuts, the outbox of the public
/// actions sent to the group, and the cleanup of what it brought.
async fn group_follows(store: &dyn Store) -> Result<()> {
    let (reader, group) = ("gf-rae", "gf-news");
    ensure!(
        store
            .set_edge(T, EdgeKind::Group, reader, group, true)
            .await?
    );
    ensure!(
        !store
            .set_edge(T, EdgeKind::Group, reader, group, true)
            .await?,
        "once"
    );
    store
        .set_edge(T, EdgeKind::Group, "gf-sam", group, true)
        .await?;
    let out = store
        .edges(T, EdgeKind::Group, Direction::Out, reader, None, 10)
        .await?;
    ensure!(out == [group], "followed groups: {out:?}");
    let followers = store
        .edges(T, EdgeKind::Group, Direction::In, group, None, 10)
        .await?;
    ensure!(followers == names(&["gf-rae", "gf-sam"]), "{followers:?}");
    let after = store
        .edges(T, EdgeKind::Group, Direction::In, group, Some("gf-rae"), 10)
        .await?;
    ensure!(after == ["gf-sam"], "paged: {after:?}");
    // A user of the group's id is someone else.
    let as_user = store
        .edges(T, EdgeKind::Follows, Direction::In, group, None, 10)
        .await?;
    ensure!(as_user.is_empty(), "no follower of a user {group}");
    let among = store
        .edges_among(T, EdgeKind::Group, &names(&["gf-rae", "gf-tom"]), group)
        .await?;
    ensure!(among == [reader], "among: {among:?}");
    ensure!(store
        .edges(OTHER, EdgeKind::Group, Direction::In, group, None, 10)
        .await?
        .is_empty());

    // Its cut, beside a follow's of the same id.
    let cut = |kind, until: Option<Position>| Cut {
        kind,
        actor: group.to_owned(),
        since: Position {
            relevancy: 5,
            action_id: ObjectId::from_bytes([1; 12]),
        },
        began: Position {
            relevancy: 6,
            action_id: ObjectId::from_bytes([1; 12]),
        },
        until,
    };
    store
        .set_cut(T, reader, &cut(EdgeKind::Group, None))
        .await?;
    store
        .set_cut(T, reader, &cut(EdgeKind::Follows, None))
        .await?;
    let kept = cut(
        EdgeKind::Group,
        Some(Position {
            relevancy: 9,
            action_id: ObjectId::from_bytes([0; 12]),
        }),
    );
    store.set_cut(T, reader, &kept).await?;
    let mut cuts = store.cuts(T, reader).await?;
    cuts.sort_by_key(|c| (c.kind == EdgeKind::Follows, c.until.is_some()));
    ensure!(
        cuts == [
            cut(EdgeKind::Group, None),
            kept.clone(),
            cut(EdgeKind::Follows, None)
        ],
        "cuts: {cuts:?}"
    );
    store.clear_cut(T, reader, EdgeKind::Group, group).await?;
    let cuts = store.cuts(T, reader).await?;
    ensure!(cuts == [cut(EdgeKind::Follows, None)], "cleared: {cuts:?}");

    // The outbox of what was sent: public actions, as scoped now.
    let sent = |actor: &str, conducted: i64, scope: Scope, to: &[&str]| {
        let mut a = scoped(actor, conducted, scope, &[]);
        a.to = names(to);
        if scope == Scope::Team {
            a.scope_groups = names(to);
        }
        a
    };
    let public = sent("gf-ann", 1_000, Scope::Public, &[group, "gf-other"]);
    let team = sent("gf-ann", 2_000, Scope::Team, &[group]);
    let later = sent("gf-bob", 3_000, Scope::Public, &[group]);
    let not_sent = sent("gf-ann", 4_000, Scope::Public, &[]);
    for a in [&public, &team, &later, &not_sent] {
        store.insert_action(a).await?;
    }
    let read = |outbox: &str| {
        let reads = [(Outbox::Sent(outbox.to_owned()), range(10))];
        async move {
            let got = store.outboxes(T, &reads).await?;
            anyhow::Ok(
                got[0]
                    .iter()
                    .map(|p| (p.position.action_id, p.actor.clone()))
                    .collect::<Vec<_>>(),
            )
        }
    };
    let at = |a: &Action| (a.id, a.actor_id.clone());
    ensure!(read(group).await? == [at(&later), at(&public)], "sent");
    ensure!(read("gf-other").await? == [at(&public)], "sent to two");
    // A scope change moves it out (and back); a delete takes it.
    store
        .set_action_scope(T, later.id, Scope::Restricted, &names(&["gf-rae"]), &[])
        .await?;
    ensure!(read(group).await? == [at(&public)], "restricted now");
    store
        .set_action_scope(T, team.id, Scope::Public, &[], &[])
        .await?;
    ensure!(read(group).await? == [at(&team), at(&public)], "public now");
    store.delete_action(T, team.id).await?;
    ensure!(read(group).await? == [at(&public)], "deleted");
    let elsewhere = store
        .outboxes(OTHER, &[(Outbox::Sent(group.to_owned()), range(10))])
        .await?;
    ensure!(elsewhere[0].is_empty(), "per tenant");

    // The cleanup of an ended group follow takes the GROUP items named.
    let fill = |a: &Action, kind: ReasonKind| Backfill {
        action_id: a.id,
        relevancy: a.conducted,
        reason: Reason::new(kind, &a.actor_id),
        changed: 10,
    };
    store
        .backfill(
            T,
            reader,
            &[
                fill(&public, ReasonKind::Group),
                fill(&not_sent, ReasonKind::Follows),
            ],
        )
        .await?;
    let ended = Unfollow::group_follow(T, reader, group);
    store.start_unfollow(&ended).await?;
    ensure!(store.unfollows(T, reader).await? == std::slice::from_ref(&ended));
    let claims = store.claim_unfollows("w1", 100, 1_000, 10).await?;
    let claim = claims
        .iter()
        .find(|c| c.unfollow == ended)
        .context("claimed")?
        .clone();
    let removed = store.clean_named(&claim, &[public.id, not_sent.id]).await?;
    ensure!(
        removed.len() == 1 && removed[0].action_id == public.id,
        "only the group's: {removed:?}"
    );
    let rest = store.feed_page(T, reader, range(10)).await?;
    ensure!(rest.len() == 1 && rest[0].action_id == not_sent.id);
    ensure!(store.unfollows(T, reader).await?.is_empty(), "ended");
    Ok(())
}

async fn tombstones(store: &dyn Store) -> Result<()> {
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

async fn rivers(store: &dyn Store) -> Result<()> {
    let reader = "mr-rita";
    ensure!(store.river(T, reader).await?.is_none());
    let river = River {
        complete_from: Position::MAX,
        touched: 1_000,
    };
    store.put_river(T, reader, &river).await?;
    ensure!(store.river(T, reader).await? == Some(river));
    store
        .put_river(
            T,
            "mr-ron",
            &River {
                touched: 9_000,
                ..river
            },
        )
        .await?;
    let among = store
        .rivers_among(T, &names(&[reader, "mr-ron", "mr-none"]))
        .await?;
    ensure!(sorted(among) == names(&[reader, "mr-ron"]), "rivers among");
    ensure!(
        store
            .rivers_among(OTHER, &names(&[reader]))
            .await?
            .is_empty(),
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
    store.put_river(T, reader, &complete).await?;

    // Trim to the newest three river items: two go, the rest stays, and
    // the river is complete from the oldest kept.
    ensure!(store.trim_river(T, reader, 3).await? == 2, "trimmed two");
    let left: Vec<ObjectId> = store
        .feed_page(T, reader, range(20))
        .await?
        .iter()
        .map(|i| i.action_id)
        .collect();
    ensure!(left.len() == 5, "three river items, own, bumped: {left:?}");
    ensure!(!left.contains(&river_items[0].action_id) && !left.contains(&river_items[1].action_id));
    let after = store.river(T, reader).await?.context("still a river")?;
    ensure!(
        after.complete_from
            == Position {
                relevancy: river_items[2].relevancy,
                action_id: river_items[2].action_id
            },
        "complete from the oldest kept: {after:?}"
    );
    // Trimming within the cap changes nothing.
    ensure!(store.trim_river(T, reader, 3).await? == 0);

    // Dropping takes the rest of the river and the record; own and bumped
    // items and the tombstone stay.
    ensure!(store.drop_river(T, reader).await? == 3, "dropped three");
    ensure!(store.river(T, reader).await?.is_none());
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

/// Actions due to expire, across tenants, soonest first: by their own
/// expiry, and with an item TTL by age; gone once deleted.
async fn expiries(store: &dyn Store) -> Result<()> {
    // Far in the future, so the other cases' actions (all older, none
    // with an expiry) are listed by age only, and first.
    const BASE: i64 = 4_000_000_000_000;
    let mut soon = action(T, "mx-ann", BASE, &[]);
    soon.expires_at = Some(BASE + 100);
    let mut later = action(OTHER, "mx-bob", BASE + 10, &[]);
    later.expires_at = Some(BASE + 200);
    let lasting = action(T, "mx-ann", BASE + 20, &[]);
    for a in [&soon, &later, &lasting] {
        store.insert_action(a).await?;
    }
    let ids = |found: Vec<(i64, String, ObjectId)>| -> Vec<ObjectId> {
        found
            .into_iter()
            .filter(|(_, _, id)| [soon.id, later.id, lasting.id].contains(id))
            .map(|(_, _, id)| id)
            .collect()
    };
    ensure!(ids(store.expired(BASE + 99, None, 1_000).await?).is_empty());
    let due = store.expired(BASE + 100, None, 1_000).await?;
    ensure!(
        due == vec![(BASE + 100, T.to_string(), soon.id)],
        "its own expiry, when: {due:?}"
    );
    let both = ids(store.expired(BASE + 500, None, 1_000).await?);
    ensure!(
        both == [soon.id, later.id],
        "soonest first, across tenants: {both:?}"
    );
    // An item TTL of 150: the lasting one is due at BASE + 170; the one
    // expiring at BASE + 200 is due by age at BASE + 160.
    let aged = ids(store.expired(BASE + 170, Some(150), 100_000).await?);
    ensure!(
        aged == [soon.id, later.id, lasting.id],
        "by age too: {aged:?}"
    );
    store.delete_action(T, soon.id).await?;
    let left = ids(store.expired(BASE + 500, None, 1_000).await?);
    ensure!(left == [later.id], "deleted ones go: {left:?}");
    for (tenant, id) in [(OTHER, later.id), (T, lasting.id)] {
        store.delete_action(tenant, id).await?;
    }
    Ok(())
}

/// A group's feed is a ring of its last `size` posts, newest first by when
/// the actions happened; a post already in it is not posted again; a
/// smaller size later shows fewer, a larger one grows into new slots.
async fn group_rings(store: &dyn Store) -> Result<()> {
    let at = |n: i64| Position {
        relevancy: 10_000 + n,
        action_id: ObjectId::new(),
    };
    let posts: Vec<Position> = (0..7).map(at).collect();
    for p in &posts[..5] {
        ensure!(store.post_to_group(T, "mr-g", *p, 3).await?, "posted");
    }
    ensure!(
        !store.post_to_group(T, "mr-g", posts[4], 3).await?,
        "held already: not again"
    );
    let newest = |n: usize| -> Vec<Position> { posts[..n].iter().rev().copied().collect() };
    let feed = store.group_feed(T, "mr-g", 3, range(10)).await?;
    ensure!(feed == newest(5)[..3], "the last three: {feed:?}");
    // A post that fell out of the ring may be posted again.
    ensure!(
        store.post_to_group(T, "mr-g", posts[0], 3).await?,
        "fell out"
    );
    let feed = store.group_feed(T, "mr-g", 3, range(10)).await?;
    ensure!(
        feed == [posts[4], posts[3], posts[0]],
        "ranked by when they happened: {feed:?}"
    );
    // Ranges page through it.
    let older = store
        .group_feed(
            T,
            "mr-g",
            3,
            FeedRange {
                older_than: Some(posts[4]),
                ..range(1)
            },
        )
        .await?;
    ensure!(older == [posts[3]], "a page: {older:?}");
    // A smaller size shows the newest posts only.
    let two = store.group_feed(T, "mr-g", 2, range(10)).await?;
    ensure!(two == [posts[4], posts[0]], "smaller: {two:?}");
    // A larger size grows into new slots as posts come: posts 7 and 8
    // take slots 2 and 3 (post 7 replacing post 5 early), and one more
    // fills the ring.
    for p in &posts[5..7] {
        store.post_to_group(T, "mr-g", *p, 5).await?;
    }
    let growing = store.group_feed(T, "mr-g", 5, range(10)).await?;
    ensure!(
        growing == [posts[6], posts[5], posts[3], posts[0]],
        "growing: {growing:?}"
    );
    let next: Vec<Position> = (10..15).map(at).collect();
    for p in &next {
        store.post_to_group(T, "mr-g", *p, 5).await?;
    }
    let five = store.group_feed(T, "mr-g", 5, range(10)).await?;
    let want: Vec<Position> = next.iter().rev().copied().collect();
    ensure!(five == want, "grown: {five:?}");
    ensure!(store
        .group_feed(OTHER, "mr-g", 3, range(10))
        .await?
        .is_empty());
    ensure!(store
        .group_feed(T, "mr-none", 3, range(10))
        .await?
        .is_empty());
    Ok(())
}
