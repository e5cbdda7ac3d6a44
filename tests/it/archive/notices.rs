//! Notifications through export and import: notice groups, inboxes and
//! notice jobs written as every backend writes them, carried whole, and
//! replacing what the target holds of the same keys.

use riverfeed::model::{
    Action, Inbox, Marker, MarkerFeed, Mute, Notice, NoticeGroup, NoticeRange, NoticeReason,
    ObjectId,
};
use riverfeed::store::{
    JobKind, Jobs, NoticeJob, NoticeSelect, NoticeSource, Notices, Record, Records, Store,
    StoreResult,
};

use super::{Populated, LEASE, NOW, OTHER, T, WORKER};
use crate::common::{Backend, TestStore};

fn notice(reason: NoticeReason, source: &str, actor: &str, action: ObjectId, at: i64) -> Notice {
    Notice {
        id: ObjectId::new(),
        source: source.into(),
        reason,
        actor: actor.into(),
        action_id: Some(action),
        comment_id: None,
        ref_id: None,
        at,
        read: false,
        archived: false,
    }
}

/// Stores `group` as a new one, then each change `changes` makes as the next
/// version, as the notifier and the API write them.
async fn store_group(
    store: &dyn Store,
    mut group: NoticeGroup,
    changes: &[&dyn Fn(&mut NoticeGroup)],
) -> StoreResult<NoticeGroup> {
    group.version = 1;
    assert!(store.put_notice_group(&group).await?, "a new group");
    for change in changes {
        change(&mut group);
        group.version += 1;
        assert!(store.put_notice_group(&group).await?, "the next version");
    }
    Ok(group)
}

/// Writes notifications through the `NoticeStore` trait, as the notifier,
/// the API and the notice worker would.
pub(super) async fn populate_notices(
    store: &dyn Store,
    delivered: &Action,
    pending: &Action,
) -> StoreResult<(Vec<NoticeGroup>, Inbox, Vec<NoticeJob>)> {
    let on = delivered.id;
    let mut likes = NoticeGroup::new(T, "ann", &format!("like:{on}:day"), NoticeReason::Like);
    likes.add(notice(
        NoticeReason::Like,
        &format!("l:{on}:bob"),
        "bob",
        on,
        NOW + 10,
    ));
    likes.add(notice(
        NoticeReason::Like,
        &format!("l:{on}:dan"),
        "dan",
        on,
        NOW + 20,
    ));
    let first = likes.members[0].id;
    let likes = store_group(
        store,
        likes,
        &[&|g: &mut NoticeGroup| {
            g.mark_read(Some(&[first]));
        }],
    )
    .await?;

    let mut comments = NoticeGroup::new(
        T,
        "ann",
        &format!("comment:{on}:day"),
        NoticeReason::Comment,
    );
    let mut by_cid = notice(NoticeReason::Comment, "c:1", "cid", on, NOW + 1_000);
    by_cid.comment_id = Some(ObjectId::new());
    comments.add(by_cid);
    comments.add(notice(NoticeReason::Comment, "c:2", "dan", on, NOW + 2_000));
    let archived = comments.members[0].id;
    let comments = store_group(
        store,
        comments,
        &[&|g: &mut NoticeGroup| {
            g.archive(Some(&[archived]));
        }],
    )
    .await?;

    let mut assigned = NoticeGroup::new(T, "bob", "assigned:applicant-1", NoticeReason::Assigned);
    let mut to_bob = notice(NoticeReason::Assigned, "a:applicant-1:bob", "ann", on, NOW);
    to_bob.action_id = None;
    to_bob.ref_id = Some("applicant-1".into());
    assigned.add(to_bob);
    let assigned = store_group(
        store,
        assigned,
        &[
            &|g: &mut NoticeGroup| {
                g.mark_read(None);
            },
            &|g: &mut NoticeGroup| {
                g.archive(None);
            },
        ],
    )
    .await?;

    let mut elsewhere = NoticeGroup::new(OTHER, "olga", "like:x:day", NoticeReason::Like);
    elsewhere.add(notice(NoticeReason::Like, "l:x:oleg", "oleg", on, NOW));
    let elsewhere = store_group(store, elsewhere, &[]).await?;

    let mut inbox = store.inbox(T, "ann").await?;
    inbox.seen_until = NOW + 15;
    inbox.disabled = vec![NoticeReason::Reply, NoticeReason::Hired];
    inbox.version += 1;
    assert!(store.put_inbox(&inbox).await?, "a new inbox");
    inbox.mutes = vec![
        Mute {
            action_id: pending.id,
            until: Some(NOW + 86_400_000),
        },
        Mute {
            action_id: delivered.id,
            until: None,
        },
    ];
    inbox.markers = vec![Marker {
        feed: MarkerFeed::Notifications,
        cursor: "opaque-cursor".into(),
        version: 3,
        updated: NOW + 16,
    }];
    inbox.version += 1;
    assert!(store.put_inbox(&inbox).await?, "the inbox changed");

    // A job a worker holds (its lease is not carried), and one that waits.
    let held = NoticeJob {
        tenant: T.into(),
        source: NoticeSource::Assigned {
            ref_id: "applicant-2".into(),
            user: "dan".into(),
            by: "ann".into(),
        },
        at: NOW + 3_000,
    };
    store.enqueue(&held.to_job()?).await?;
    let claimed = store.claim(JobKind::Notice, WORKER, NOW, LEASE, 10).await?;
    assert_eq!(claimed.len(), 1, "the held job");
    let waiting = NoticeJob {
        tenant: T.into(),
        source: NoticeSource::Like {
            action_id: on,
            user: "cid".into(),
        },
        at: NOW + 4_000,
    };
    store.enqueue(&waiting.to_job()?).await?;
    Ok((
        vec![likes, comments, assigned, elsewhere],
        inbox,
        vec![held, waiting],
    ))
}

/// `group` as it reads whatever version it is stored under.
fn unversioned(mut group: NoticeGroup) -> NoticeGroup {
    group.version = 0;
    group
}

/// Notifications come back as they were (versions aside: they count one
/// store's writes): groups with their read and archived members, pages and
/// counts, the inbox, and every job claimable, the held one too.
pub(super) async fn assert_notices_imported(target: &dyn Store, p: &Populated) {
    for want in &p.groups {
        let got = target
            .notice_group(&want.tenant, &want.owner, &want.key)
            .await
            .expect("group")
            .unwrap_or_else(|| panic!("{}'s group {} imported", want.owner, want.key));
        assert!(got.version >= 1, "stored under a version: {got:?}");
        assert_eq!(unversioned(got), unversioned(want.clone()));
        let by_id = target
            .notice_groups(&want.tenant, &want.owner, NoticeSelect::Ids(&[want.id]))
            .await
            .expect("groups by id");
        assert_eq!(by_id.len(), 1, "found by its id");
    }
    let range = NoticeRange {
        before: None,
        limit: 10,
        unread_only: false,
    };
    let page: Vec<NoticeGroup> = target
        .notice_groups(T, "ann", NoticeSelect::Page(range))
        .await
        .expect("page")
        .into_iter()
        .map(unversioned)
        .collect();
    assert_eq!(
        page,
        [&p.groups[1], &p.groups[0]].map(|g| unversioned(g.clone())),
        "ann's page, newest first"
    );
    let bob = target
        .notice_groups(T, "bob", NoticeSelect::Page(range))
        .await
        .expect("page");
    assert!(bob.is_empty(), "bob's group stays archived");
    let counts = target
        .notice_counts(T, "ann", p.inbox.seen_until)
        .await
        .expect("counts");
    assert_eq!((counts.unseen, counts.unread), (2, 2));

    let mut inbox = target.inbox(T, "ann").await.expect("inbox");
    assert!(inbox.version >= 1, "stored: {inbox:?}");
    inbox.version = p.inbox.version;
    assert_eq!(inbox, p.inbox);
    assert!(!inbox.wants(NoticeReason::Like, Some(p.delivered.id), NOW));

    let claims = target
        .claim(JobKind::Notice, "importer", NOW, LEASE, 10)
        .await
        .expect("claim notice jobs");
    let jobs: Vec<NoticeJob> = claims
        .iter()
        .map(|c| NoticeJob::of_job(&c.job).expect("a notice job"))
        .collect();
    let mut got: Vec<String> = jobs.iter().map(|j| j.source.key()).collect();
    got.sort();
    let mut want: Vec<String> = p.jobs.iter().map(|j| j.source.key()).collect();
    want.sort();
    assert_eq!(got, want, "every job waits, the held one too");
    for job in &jobs {
        assert!(p.jobs.contains(job), "{job:?} as queued");
    }
}

/// An imported group, inbox or job whose key the target holds already: the
/// archive's group and inbox replace what is stored (as other records do),
/// written over its version, the group keeping its id in the target; a job
/// queued already stays as it is.
async fn imported_notices_replace_what_is_stored(backend: Backend) {
    let Some(target) = TestStore::open(backend).await else {
        return;
    };
    let store = &*target.store;
    let on = ObjectId::new();
    let key = format!("like:{on}:day");

    // The archive's: two likes, one of them read; ann's inbox; a job.
    let mut archived = NoticeGroup::new(T, "ann", &key, NoticeReason::Like);
    archived.add(notice(NoticeReason::Like, "l:bob", "bob", on, NOW + 10));
    archived.add(notice(NoticeReason::Like, "l:dan", "dan", on, NOW + 20));
    archived.mark_read(Some(&[archived.members[0].id]));
    archived.version = 7;
    let mut inbox = Inbox::new(T, "ann");
    inbox.seen_until = NOW + 15;
    inbox.disabled = vec![NoticeReason::Comment];
    inbox.version = 4;
    let job = NoticeJob {
        tenant: T.into(),
        source: NoticeSource::Like {
            action_id: on,
            user: "cid".into(),
        },
        at: NOW + 30,
    };
    // Earlier records of the same keys (two archives run together): the
    // last group and inbox win, as writing them in order would leave them.
    let mut earlier_group = archived.clone();
    earlier_group.mark_read(None);
    let mut earlier_inbox = inbox.clone();
    earlier_inbox.seen_until = NOW + 1;
    let records = vec![
        Record::NoticeGroup {
            group: earlier_group,
        },
        Record::Inbox {
            inbox: earlier_inbox,
        },
        Record::NoticeGroup {
            group: archived.clone(),
        },
        Record::Inbox {
            inbox: inbox.clone(),
        },
        Record::NoticeJob { job: job.clone() },
    ];

    // The target's: another group of the same key, written twice; an inbox;
    // the same job, held by a worker.
    let mut stored = NoticeGroup::new(T, "ann", &key, NoticeReason::Like);
    stored.add(notice(NoticeReason::Like, "l:eve", "eve", on, NOW + 5));
    let stored = store_group(
        store,
        stored,
        &[&|g: &mut NoticeGroup| {
            g.archive(None);
        }],
    )
    .await
    .expect("stored");
    let mut theirs = Inbox::new(T, "ann");
    theirs.seen_until = NOW + 99;
    theirs.version = 1;
    assert!(store.put_inbox(&theirs).await.expect("inbox"));
    store
        .enqueue(&job.to_job().expect("a job"))
        .await
        .expect("queued");
    let held = store
        .claim(JobKind::Notice, WORKER, NOW, LEASE, 10)
        .await
        .expect("claimed");
    assert_eq!(held.len(), 1);

    for round in 1..=2 {
        store.import(&records).await.expect("imported");
        let group = store
            .notice_group(T, "ann", &key)
            .await
            .expect("group")
            .expect("stored");
        assert_eq!(group.id, stored.id, "round {round}: the target's id");
        assert_eq!(
            group.version,
            stored.version + round,
            "round {round}: over the stored version"
        );
        assert_eq!(
            unversioned(NoticeGroup {
                id: archived.id,
                ..group.clone()
            }),
            unversioned(archived.clone()),
            "round {round}: the archive's members and counts"
        );
        let page = store
            .notice_groups(
                T,
                "ann",
                NoticeSelect::Page(NoticeRange {
                    before: None,
                    limit: 10,
                    unread_only: false,
                }),
            )
            .await
            .expect("page");
        assert_eq!(page, [group], "round {round}: listed once, where it stands");
        let got = store.inbox(T, "ann").await.expect("inbox");
        assert_eq!(got.version, 1 + round, "round {round}");
        assert_eq!(
            Inbox {
                version: inbox.version,
                ..got
            },
            inbox,
            "round {round}: the archive's inbox"
        );
    }
    // The job queued already is still the worker's: not queued twice.
    assert!(store
        .claim(JobKind::Notice, "importer", NOW, LEASE, 10)
        .await
        .expect("claim")
        .is_empty());
    store.finish(&held[0]).await.expect("finished");
    assert!(store
        .claim(JobKind::Notice, "importer", NOW, LEASE, 10)
        .await
        .expect("claim")
        .is_empty());
    target.remove().await;
}

crate::on_both_backends!(imported_notices_replace_what_is_stored);
