//! Cases of actions and what is read from them: round trips and slices,
//! outboxes (an actor's, a group's, a named reader's, many at once),
//! reactions, discussions, renames and expiry.

use anyhow::{ensure, Context, Result};
use riverfeed::descriptor::Descriptor;
use riverfeed::model::{Action, Comment, Counts, ObjectId, Position, Scope};
use riverfeed::store::prelude::*;
use riverfeed::store::QueuedRead;
use riverfeed::store::Removal;
use riverfeed::store::{ErrorKind, FeedRange, JobKind, NoticeJob, NoticeSource, Outbox, Posted};

use super::{action, names, range, scoped, OTHER, T};

pub(super) async fn actions_and_slices(store: &dyn Store) -> Result<()> {
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

/// One actor's outbox range, as positions.
async fn outbox(
    store: &dyn Store,
    tenant: &str,
    actor: &str,
    range: FeedRange,
) -> Result<Vec<Position>> {
    let read = [(Outbox::Actor(actor.into()), range)];
    let mut found = store.outboxes(tenant, &read).await?;
    Ok(positions(&found.remove(0)))
}

/// An actor's outbox: their actions newest first by when they happened (not
/// by when they were recorded), paged both ways like a feed, kept per tenant,
/// hidden actions included, deleted ones gone.
pub(super) async fn outboxes(store: &dyn Store) -> Result<()> {
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

    let all = outbox(store, T, "o-olga", range(10)).await?;
    ensure!(all == newest_first, "newest first: {all:?}");
    ensure!(
        outbox(store, OTHER, "o-olga", range(10)).await? == vec![pos(&elsewhere)],
        "per tenant"
    );
    ensure!(outbox(store, T, "o-nobody", range(10)).await?.is_empty());

    // Forwards from a position, backwards from the oldest end.
    let older = outbox(
        store,
        T,
        "o-olga",
        FeedRange {
            older_than: Some(newest_first[1]),
            ..range(10)
        },
    )
    .await?;
    ensure!(older == newest_first[2..], "older than: {older:?}");
    let oldest_two = outbox(
        store,
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
    let between = outbox(
        store,
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
    store.remove_action(T, a2.id, Removal::Hide).await?;
    store.remove_action(T, a1.id, Removal::Delete).await?;
    let after = outbox(store, T, "o-olga", range(10)).await?;
    let expected: Vec<Position> = newest_first
        .iter()
        .copied()
        .filter(|p| p.action_id != a1.id)
        .collect();
    ensure!(after == expected, "after hide and delete: {after:?}");
    Ok(())
}

pub(super) async fn many_outboxes(store: &dyn Store) -> Result<()> {
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

/// A group's outbox lists what is shared with it; a reader's named outbox
/// what names them; both as the actions are scoped now.
pub(super) async fn scoped_outboxes(store: &dyn Store) -> Result<()> {
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
    store
        .remove_action(T, department.id, Removal::Delete)
        .await?;
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

pub(super) async fn reactions(store: &dyn Store) -> Result<()> {
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
        store.set_like(tenant, a.id, "x-alice", true, 5_000).await?
            == (
                true,
                Counts {
                    comments: 3,
                    likes: 1
                }
            )
    );
    ensure!(
        !store
            .set_like(tenant, a.id, "x-alice", true, 5_001)
            .await?
            .0,
        "one like per user"
    );
    // The like's notice job came with it, in the same step.
    let key = &NoticeSource::Like {
        action_id: a.id,
        user: "x-alice".into(),
    }
    .key();
    let owed = |at: i64| async move {
        let queued = store
            .queued(JobKind::Notice, tenant, QueuedRead::under(key))
            .await?;
        ensure!(
            queued.len() == 1 && queued[0].held.is_none(),
            "the like's notice job waits: {queued:?}"
        );
        ensure!(
            NoticeJob::of_job(&queued[0].job)?.at == at,
            "timed by the like"
        );
        anyhow::Ok(())
    };
    owed(5_000).await?;
    // Taken back and given again while a worker runs its job (which may
    // read it as taken back): the job is queued afresh, the worker's lost.
    let held = store
        .claim(JobKind::Notice, "w1", 5_010, 60_000, 10)
        .await?;
    ensure!(held.len() == 1, "{held:?}");
    store
        .set_like(tenant, a.id, "x-alice", false, 5_020)
        .await?;
    store.set_like(tenant, a.id, "x-alice", true, 5_030).await?;
    let ended = store.finish(&held[0]).await;
    ensure!(
        matches!(&ended, Err(e) if e.kind == ErrorKind::LeaseLost),
        "{ended:?}"
    );
    owed(5_030).await?;
    ensure!(
        store
            .set_like(tenant, a.id, "x-carol", true, 5_002)
            .await?
            .1
            .likes
            == 2
    );
    ensure!(
        store
            .set_like(tenant, a.id, "x-carol", false, 5_003)
            .await?
            == (
                true,
                Counts {
                    comments: 3,
                    likes: 1
                }
            )
    );
    ensure!(
        !store
            .set_like(tenant, a.id, "x-carol", false, 5_004)
            .await?
            .0
    );
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
        .set_like(tenant, missing, "x-alice", true, 5_005)
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
    store.remove_action(tenant, a.id, Removal::Delete).await?;
    ensure!(store.comments(tenant, a.id, None, 10).await?.is_empty());
    ensure!(store.liked(tenant, "x-alice", &[a.id]).await?.is_empty());
    Ok(())
}

/// A user's discussions: the actions they commented on, the one with the
/// latest comment (by anyone) first; paged like a feed; gone with the action.
pub(super) async fn discussions(store: &dyn Store) -> Result<()> {
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
    store.remove_action(tenant, b.id, Removal::Delete).await?;
    ensure!(
        store.discussions(tenant, "d-dana", range(10)).await? == [at(&a, 2_300)],
        "gone with the action"
    );
    ensure!(store.discussions(tenant, "d-eve", range(10)).await? == [at(&c, 2_200)]);
    Ok(())
}

/// Renames cross batch boundaries: 1,100 actions name the applicant.
pub(super) async fn rename_ref(store: &dyn Store) -> Result<()> {
    let pairs = riverfeed::descriptor::Catalog::builtin()
        .named_refs()
        .to_vec();
    let named = |a: &riverfeed::model::Action, name: &str| {
        a.descriptor.str_field("applicantName") == Some(name)
    };
    let tenant = "rename-tenant";
    let applied = |applicant: &str, name: &str| {
        let mut a = action(tenant, "n-rita", 1_000, &[applicant]);
        a.descriptor = Descriptor::new(
            "NewApplicant",
            serde_json::json!({
                "applicantId": applicant,
                "applicantName": name,
                "positionId": "pos-1",
                "positionName": "Engineer",
            }),
        );
        // Fanned out already: the case is the rename's, not the queue's.
        a.fan_out = riverfeed::model::FanOut::done();
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
        .rename_ref(tenant, "app-mary", "Mary Fanning-Smith", &pairs)
        .await?;
    ensure!(changed == 1_100, "{changed} names changed");
    ensure!(
        store
            .rename_ref(tenant, "app-mary", "Mary Fanning-Smith", &pairs)
            .await?
            == 0
    );
    let page = store.slice(tenant, "app-mary", None, 5).await?;
    for a in store.get_actions(tenant, &page).await? {
        ensure!(named(&a, "Mary Fanning-Smith"), "{:?}", a.descriptor);
    }
    let john = store.get_actions(tenant, &[other.id]).await?;
    ensure!(named(&john[0], "John Doe"));
    let theirs = store.get_actions(OTHER, &[elsewhere.id]).await?;
    ensure!(
        named(&theirs[0], "Mary Fanning"),
        "other tenants are untouched"
    );
    Ok(())
}

/// Actions due to expire, across tenants, soonest first: by their own
/// expiry, and with an item TTL by age; gone once deleted.
pub(super) async fn expiries(store: &dyn Store) -> Result<()> {
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
    store.remove_action(T, soon.id, Removal::Delete).await?;
    let left = ids(store.expired(BASE + 500, None, 1_000).await?);
    ensure!(left == [later.id], "deleted ones go: {left:?}");
    for (tenant, id) in [(OTHER, later.id), (T, lasting.id)] {
        store.remove_action(tenant, id, Removal::Delete).await?;
    }
    Ok(())
}
