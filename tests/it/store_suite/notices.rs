//! Cases of notifications: notice groups written and removed under their
//! version, listed, counted and trimmed; inboxes; the notice job queue.

use anyhow::{ensure, Context, Result};
use riverfeed::model::{
    Inbox, Marker, MarkerFeed, Mute, Notice, NoticeCounts, NoticeGroup, NoticeRange, NoticeReason,
    ObjectId,
};
use riverfeed::store::prelude::*;
use riverfeed::store::{JobKind, NoticeJob, NoticeSelect, NoticeSource, NoticeWrite};

const T: &str = "notices";

fn notice(source: &str, actor: &str, at: i64) -> Notice {
    Notice {
        id: ObjectId::new(),
        source: source.into(),
        reason: NoticeReason::Like,
        actor: actor.into(),
        action_id: Some(ObjectId::new()),
        comment_id: None,
        ref_id: Some("mary".into()),
        at,
        read: false,
        archived: false,
    }
}

/// A stored group of `owner` with one member per `at`.
async fn group(store: &dyn Store, owner: &str, key: &str, ats: &[i64]) -> Result<NoticeGroup> {
    let mut g = NoticeGroup::new(T, owner, key, NoticeReason::Like);
    for (n, at) in ats.iter().enumerate() {
        g.add(notice(&format!("{key}:{n}"), &format!("u{n}"), *at));
    }
    g.version = 1;
    ensure!(store.put_notice_group(&g).await?, "a new group is stored");
    Ok(g)
}

fn range(limit: usize) -> NoticeRange {
    NoticeRange {
        before: None,
        limit,
        unread_only: false,
    }
}

pub(super) async fn notice_versions(store: &dyn Store) -> Result<()> {
    let owner = "v-mary";
    ensure!(store.notice_group(T, owner, "k").await?.is_none());
    let mut g = group(store, owner, "k", &[10, 20]).await?;
    let stored = store.notice_group(T, owner, "k").await?.context("stored")?;
    ensure!(stored == g, "read back as written: {stored:?}");

    // A second new group of the same key loses: one group per key.
    let mut rival = NoticeGroup::new(T, owner, "k", NoticeReason::Like);
    rival.add(notice("k:rival", "ann", 5));
    rival.version = 1;
    ensure!(
        !store.put_notice_group(&rival).await?,
        "a second group of one key"
    );
    ensure!(store
        .notice_groups(T, owner, NoticeSelect::Ids(&[rival.id]))
        .await?
        .is_empty());

    // A change over the version read is stored; one over a stale version is not.
    let mut stale = g.clone();
    g.add(notice("k:2", "ann", 30));
    g.version = 2;
    ensure!(
        store.put_notice_group(&g).await?,
        "version 2 over version 1"
    );
    stale.mark_read(None);
    stale.version = 2;
    ensure!(
        !store.put_notice_group(&stale).await?,
        "a stale write is refused"
    );
    let stored = store.notice_group(T, owner, "k").await?.context("stored")?;
    ensure!(stored == g, "the stale write changed nothing: {stored:?}");

    // By id, confined to the owner and the tenant.
    let other = group(store, owner, "k2", &[40]).await?;
    let mut got = store
        .notice_groups(
            T,
            owner,
            NoticeSelect::Ids(&[g.id, other.id, ObjectId::new()]),
        )
        .await?;
    got.sort_by_key(|g| g.key.clone());
    ensure!(got == vec![g.clone(), other.clone()], "{got:?}");
    ensure!(store
        .notice_groups(T, "v-john", NoticeSelect::Ids(&[g.id]))
        .await?
        .is_empty());
    ensure!(store
        .notice_groups("elsewhere", owner, NoticeSelect::Ids(&[g.id]))
        .await?
        .is_empty());
    ensure!(store.notice_group("elsewhere", owner, "k").await?.is_none());
    Ok(())
}

pub(super) async fn notice_pages(store: &dyn Store) -> Result<()> {
    let owner = "p-mary";
    let a = group(store, owner, "a", &[100]).await?;
    let b = group(store, owner, "b", &[50, 300]).await?;
    let c = group(store, owner, "c", &[200]).await?;
    // Same `last` as c: the larger id first.
    let d = group(store, owner, "d", &[200]).await?;
    let mut archived = group(store, owner, "e", &[400]).await?;
    archived.archive(None);
    archived.version = 2;
    ensure!(store.put_notice_group(&archived).await?);
    group(store, "p-john", "x", &[500]).await?;

    let keys = |gs: &[NoticeGroup]| gs.iter().map(|g| g.key.clone()).collect::<Vec<_>>();
    let page = store
        .notice_groups(T, owner, NoticeSelect::Page(range(10)))
        .await?;
    ensure!(keys(&page) == ["b", "d", "c", "a"], "{:?}", keys(&page));
    ensure!(page[0] == b, "groups come whole");
    let first = store
        .notice_groups(T, owner, NoticeSelect::Page(range(2)))
        .await?;
    ensure!(keys(&first) == ["b", "d"]);
    let none = store
        .notice_groups(T, "p-john", NoticeSelect::Page(range(0)))
        .await?;
    ensure!(none.is_empty(), "a page of 0: {:?}", keys(&none));
    let rest = store
        .notice_groups(
            T,
            owner,
            NoticeSelect::Page(NoticeRange {
                before: Some(first[1].position()),
                ..range(10)
            }),
        )
        .await?;
    ensure!(keys(&rest) == ["c", "a"], "{:?}", keys(&rest));

    // Unread only: read groups drop out, a group with one unread member stays.
    let mut read = c.clone();
    read.mark_read(None);
    read.version = 2;
    ensure!(store.put_notice_group(&read).await?);
    let mut half = b.clone();
    half.mark_read(Some(&[b.members[0].id]));
    half.version = 2;
    ensure!(store.put_notice_group(&half).await?);
    let unread = store
        .notice_groups(
            T,
            owner,
            NoticeSelect::Page(NoticeRange {
                unread_only: true,
                ..range(10)
            }),
        )
        .await?;
    ensure!(keys(&unread) == ["b", "d", "a"], "{:?}", keys(&unread));
    ensure!(unread[0].unread == 1);
    let _ = (a, d);
    Ok(())
}

pub(super) async fn notice_counts(store: &dyn Store) -> Result<()> {
    let owner = "c-mary";
    ensure!(store.notice_counts(T, owner, 0).await? == NoticeCounts::default());
    group(store, owner, "a", &[100]).await?;
    let mut b = group(store, owner, "b", &[200, 250]).await?;
    group(store, owner, "c", &[300]).await?;
    let mut gone = group(store, owner, "d", &[400]).await?;
    gone.archive(None);
    gone.version = 2;
    ensure!(store.put_notice_group(&gone).await?);
    group(store, "c-john", "a", &[100]).await?;

    let got = store.notice_counts(T, owner, 0).await?;
    ensure!(
        got == NoticeCounts {
            unseen: 3,
            unread: 3
        },
        "{got:?}"
    );
    // Seen up to 250: only c is newer (b's last is 250).
    let got = store.notice_counts(T, owner, 250).await?;
    ensure!(
        got == NoticeCounts {
            unseen: 1,
            unread: 3
        },
        "{got:?}"
    );
    b.mark_read(None);
    b.version = 2;
    ensure!(store.put_notice_group(&b).await?);
    let got = store.notice_counts(T, owner, 250).await?;
    ensure!(
        got == NoticeCounts {
            unseen: 1,
            unread: 2
        },
        "{got:?}"
    );
    // Read again (a new member), then removed: counted, then not.
    b.add(notice("b:late", "u9", 260));
    b.version = 3;
    ensure!(store.put_notice_group(&b).await?);
    let got = store.notice_counts(T, owner, 250).await?;
    ensure!(
        got == NoticeCounts {
            unseen: 2,
            unread: 3
        },
        "{got:?}"
    );
    ensure!(store.write_notice_group(NoticeWrite::Remove(&b)).await?);
    // A stale write changes nothing, the count included.
    ensure!(!store.put_notice_group(&b).await?);
    let got = store.notice_counts(T, owner, 250).await?;
    ensure!(
        got == NoticeCounts {
            unseen: 1,
            unread: 2
        },
        "{got:?}"
    );
    Ok(())
}

pub(super) async fn notice_trimming(store: &dyn Store) -> Result<()> {
    let owner = "t-mary";
    let mut made = Vec::new();
    for n in 0..5 {
        made.push(group(store, owner, &format!("g{n}"), &[1_000 + n]).await?);
    }
    // An archived group counts toward what is kept, and goes like the rest.
    let mut archived = made[4].clone();
    archived.archive(None);
    archived.version = 2;
    ensure!(store.put_notice_group(&archived).await?);
    group(store, "t-john", "g0", &[1]).await?;

    let mut gone = store.trim_notices(T, owner, 3).await?;
    gone.sort();
    let mut expected = vec![made[0].id, made[1].id];
    expected.sort();
    ensure!(gone == expected, "the two oldest go: {gone:?}");
    ensure!(store.notice_group(T, owner, "g0").await?.is_none());
    ensure!(store.notice_group(T, owner, "g2").await?.is_some());
    ensure!(store.notice_group(T, "t-john", "g0").await?.is_some());
    ensure!(store.trim_notices(T, owner, 3).await?.is_empty());
    let got = store.notice_counts(T, owner, 0).await?;
    ensure!(
        got == NoticeCounts {
            unseen: 2,
            unread: 2
        },
        "trimmed: {got:?}"
    );
    let page = store
        .notice_groups(T, owner, NoticeSelect::Page(range(10)))
        .await?;
    ensure!(page.len() == 2, "g2 and g3 listed, g4 archived");

    // A removal is of the version read: one over a stale version is refused.
    let g2 = &made[2];
    let mut newer = g2.clone();
    newer.mark_read(None);
    newer.version = 2;
    ensure!(store.put_notice_group(&newer).await?);
    ensure!(
        !store.write_notice_group(NoticeWrite::Remove(g2)).await?,
        "a removal of a stale version"
    );
    ensure!(
        store
            .write_notice_group(NoticeWrite::Remove(&newer))
            .await?
    );
    ensure!(store.notice_group(T, owner, "g2").await?.is_none());
    let by_id = NoticeSelect::Ids(std::slice::from_ref(&g2.id));
    ensure!(store.notice_groups(T, owner, by_id).await?.is_empty());
    ensure!(
        store
            .notice_groups(T, owner, NoticeSelect::Page(range(10)))
            .await?
            .len()
            == 1
    );
    // Its key is free again: a new group of it may be stored.
    group(store, owner, "g0", &[5]).await?;
    Ok(())
}

pub(super) async fn inboxes(store: &dyn Store) -> Result<()> {
    let fresh = store.inbox(T, "i-mary").await?;
    ensure!(fresh == Inbox::new(T, "i-mary"), "{fresh:?}");
    let mut inbox = fresh.clone();
    inbox.seen_until = 1_234;
    inbox.disabled = vec![NoticeReason::Like, NoticeReason::Reply];
    inbox.mutes = vec![Mute {
        action_id: ObjectId::new(),
        until: Some(99),
    }];
    inbox.markers = vec![Marker {
        feed: MarkerFeed::Home,
        cursor: "abc".into(),
        version: 1,
        updated: 77,
    }];
    inbox.version = 1;
    ensure!(store.put_inbox(&inbox).await?);
    ensure!(store.inbox(T, "i-mary").await? == inbox);
    let mut stale = fresh;
    stale.version = 1;
    stale.seen_until = 5;
    ensure!(!store.put_inbox(&stale).await?, "version 1 is taken");
    inbox.seen_until = 2_000;
    inbox.version = 2;
    ensure!(store.put_inbox(&inbox).await?);
    ensure!(store.inbox(T, "i-mary").await?.seen_until == 2_000);
    ensure!(store.inbox(T, "i-john").await?.version == 0);
    ensure!(store.inbox("elsewhere", "i-mary").await?.version == 0);
    Ok(())
}

/// Notice jobs on the job queue: one per source key while it waits or is
/// leased, the job read back as queued. (The lease rules themselves are
/// `store_jobs`' cases.)
pub(super) async fn notice_jobs(store: &dyn Store) -> Result<()> {
    // A fresh store holds none; claiming any first keeps the case true on a
    // shared one.
    for lease in store
        .claim(JobKind::Notice, "sweeper", 0, 1_000, 1_000)
        .await?
    {
        store.finish(&lease).await?;
    }
    let action_id = ObjectId::new();
    let like = NoticeJob {
        tenant: T.into(),
        source: NoticeSource::Like {
            action_id,
            user: "rita".into(),
        },
        at: 10,
    };
    let assigned = NoticeJob {
        tenant: T.into(),
        source: NoticeSource::Assigned {
            ref_id: "mary".into(),
            user: "john".into(),
            by: "ann".into(),
        },
        at: 20,
    };
    ensure!(store.enqueue(&like.to_job()?).await?);
    ensure!(!store.enqueue(&like.to_job()?).await?, "one job per key");
    ensure!(store.enqueue(&assigned.to_job()?).await?);

    let leases = store.claim(JobKind::Notice, "w1", 1_000, 500, 10).await?;
    let got: Vec<NoticeJob> = leases
        .iter()
        .map(|l| NoticeJob::of_job(&l.job))
        .collect::<Result<_, _>>()?;
    ensure!(
        got == vec![like.clone(), assigned.clone()],
        "one job per key, in the order they happened: {got:?}"
    );
    for (lease, job) in leases.iter().zip(&got) {
        ensure!(lease.job.key == job.source.key(), "keyed by its source");
    }
    for lease in &leases {
        store.finish(lease).await?;
    }
    // A finished job's key may be queued again.
    ensure!(store.enqueue(&like.to_job()?).await?);
    let again = store.claim(JobKind::Notice, "w3", 10_000, 500, 10).await?;
    ensure!(again.len() == 1 && NoticeJob::of_job(&again[0].job)? == like);
    store.finish(&again[0]).await?;
    Ok(())
}

/// More groups than a backend may read in one go: pages, counts and trims
/// see all of them.
pub(super) async fn many_notice_groups(store: &dyn Store) -> Result<()> {
    let owner = "m-mary";
    for n in 0..150 {
        group(store, owner, &format!("g{n:03}"), &[10_000 + n]).await?;
    }
    let got = store.notice_counts(T, owner, 10_000 + 49).await?;
    ensure!(
        got == NoticeCounts {
            unseen: 100,
            unread: 150
        },
        "{got:?}"
    );
    let page = store
        .notice_groups(
            T,
            owner,
            NoticeSelect::Page(NoticeRange {
                before: Some((10_000 + 20, ObjectId::from_bytes([0; 12]))),
                ..range(100)
            }),
        )
        .await?;
    ensure!(page.len() == 20, "the 20 oldest: {}", page.len());
    ensure!(page[0].key == "g019" && page[19].key == "g000");
    ensure!(store.trim_notices(T, owner, 70).await?.len() == 80);
    ensure!(
        store
            .notice_groups(T, owner, NoticeSelect::Page(range(200)))
            .await?
            .len()
            == 70
    );
    Ok(())
}
