//! Cases of groups: memberships and their starts, a group leave's cleanup,
//! group follows (edges, cuts, the outbox of what was sent, the cleanup),
//! and group feeds kept as rings.

use anyhow::{ensure, Context, Result};
use riverfeed::model::{
    Action, EdgeKind, Group, GroupKind, MembershipRole, ObjectId, Position, Reason, ReasonKind,
    Scope,
};
use riverfeed::store::prelude::*;
use riverfeed::store::Removal;
use riverfeed::store::{
    Backfill, Cut, Direction, ErrorKind, FeedRange, JoinOutcome, Outbox, Unfollow,
};

use riverfeed::timeline::unfollow;

use super::{cleanup_of, names, range, scoped, OTHER, T};

pub(super) async fn groups(store: &dyn Store) -> Result<()> {
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

/// A membership's start: set on the first join, kept by a join that only
/// changes the role, begun anew after leaving; looked up for many users.
pub(super) async fn membership_starts(store: &dyn Store) -> Result<()> {
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
pub(super) async fn group_cleanup(store: &dyn Store) -> Result<()> {
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
    unfollow::start(store, &left, 0).await?;
    ensure!(unfollow::pending(store, T, reader).await? == std::slice::from_ref(&left));
    let claim = cleanup_of(store, "w1", 100, &left)
        .await?
        .context("claimed")?;
    let claim2 = cleanup_of(store, "w2", 1_200, &left)
        .await?
        .context("taken over")?;
    let named = [team.id, department.id, followed.id, ObjectId::new()];
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
    ensure!(
        unfollow::pending(store, T, reader).await?.is_empty(),
        "ended"
    );
    // The job is gone: cleaning it again takes nothing.
    ensure!(store.clean(&claim2, &[kept.id]).await?.is_empty());
    ensure!(store.feed_page(T, reader, range(10)).await?.len() == 2);
    Ok(())
}

/// A group follow: an edge from a user to a group (listed both ways, never
/// meeting a user of the same id), its cuts, the outbox of the public
/// actions sent to the group, and the cleanup of what it brought.
pub(super) async fn group_follows(store: &dyn Store) -> Result<()> {
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
    store.remove_action(T, team.id, Removal::Delete).await?;
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
    unfollow::start(store, &ended, 0).await?;
    ensure!(unfollow::pending(store, T, reader).await? == std::slice::from_ref(&ended));
    let claim = cleanup_of(store, "w1", 100, &ended)
        .await?
        .context("claimed")?;
    let removed = store.clean(&claim, &[public.id, not_sent.id]).await?;
    ensure!(
        removed.len() == 1 && removed[0].action_id == public.id,
        "only the group's: {removed:?}"
    );
    let rest = store.feed_page(T, reader, range(10)).await?;
    ensure!(rest.len() == 1 && rest[0].action_id == not_sent.id);
    ensure!(
        unfollow::pending(store, T, reader).await?.is_empty(),
        "ended"
    );
    Ok(())
}

/// A group's feed is a ring of its last `size` posts, newest first by when
/// the actions happened; a post already in it is not posted again; a
/// smaller size later shows fewer, a larger one grows into new slots.
pub(super) async fn group_rings(store: &dyn Store) -> Result<()> {
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
