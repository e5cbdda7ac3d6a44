//! Export and import of whole stores (`Archive`), and the JSON Lines commands
//! built on them.

use std::collections::HashSet;

use futures_util::TryStreamExt;
use indicatif::ProgressBar;
use riverfeed::archive_cmd;
use riverfeed::descriptor::Descriptor;
use riverfeed::model::{
    Action, Bump, BumpRule, Comment, Counts, EdgeKind, FanOut, FanOutState, Group, GroupKind,
    Inbox, MembershipRole, NoticeGroup, ObjectId, Reason, ReasonKind, Scope, User,
};
use riverfeed::store::{
    BumpJob, Delivery, EdgeRecordKind, ErrorKind, Existing, FeedRange, JobKind, NoticeJob, Record,
    Store, StoreResult, Unfollow,
};
use riverfeed::store::{Graph, Jobs, Reactions, Timelines};

use riverfeed::model::{DeadDelivery, Delivery as WebhookDelivery, EventType, Webhook};
use riverfeed::store::WebhookJob;
use riverfeed::timeline::unfollow;
use riverfeed::webhooks::registry;
use riverfeed::webhooks::sign::Secret;

use crate::common::{Backend, HeldFanOut, TestStore};

mod live;
mod notices;
mod refusals;

use notices::{assert_notices_imported, populate_notices};

const T: &str = "arch";
const OTHER: &str = "arch-other";
const WORKER: &str = "archive-test";
const LEASE: i64 = 60_000;
const NOW: i64 = 1_700_000_100_000;

fn status(tenant: &str, actor: &str, conducted: i64, ref_ids: &[&str]) -> Action {
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
        tags: vec!["t".into()],
        descriptor: Descriptor::new(
            "StatusPost",
            serde_json::json!({ "text": format!("{actor} at {conducted}") }),
        ),
        fan_out: FanOut::pending(),
        counts: Counts::default(),
        expires_at: None,
        to: Vec::new(),
        foreign: None,
    }
}

fn deliver_to(owner: &str, relevancy: i64, kind: ReasonKind, actor: &str) -> Delivery {
    Delivery {
        owner: owner.into(),
        relevancy,
        reason: Reason::new(kind, actor),
    }
}

fn page(limit: usize) -> FeedRange {
    FeedRange {
        older_than: None,
        newer_than: None,
        limit,
        from_oldest: false,
    }
}

/// What [`populate`] wrote, to check stores and exports against.
struct Populated {
    /// Delivered, done, commented, liked, with a bump done and one queued.
    delivered: Action,
    /// Never claimed: its fan-out is still pending.
    pending: Action,
    /// Delivered; `bob` hid it.
    hidden_for_bob: Action,
    /// The comment whose bump is still queued.
    queued: Comment,
    /// Notice groups as stored: ann's two (one member read, one archived),
    /// bob's archived whole, olga's in the other tenant.
    groups: Vec<NoticeGroup>,
    /// Ann's inbox: seen up to a time, a reason turned off, mutes, a marker.
    inbox: Inbox,
    /// Queued notice jobs: one waiting, one leased to a worker.
    jobs: Vec<NoticeJob>,
    /// An unfollow whose cleanup has not run (olga stopped following dan).
    cleanup: Unfollow,
    /// A webhook delivery held by a worker as the records are taken.
    webhook_delivery: WebhookDelivery,
}

/// Writes one of everything through the `Store` trait, as the API and the
/// worker would.
async fn populate(store: &dyn Store) -> StoreResult<Populated> {
    store
        .put_user(
            T,
            &User {
                id: "ann".into(),
                name: Some("Ann Archer".into()),
            },
            Existing::Replace,
        )
        .await?;
    store
        .put_user(
            T,
            &User {
                id: "cid".into(),
                name: Some("Cid".into()),
            },
            Existing::Replace,
        )
        .await?;
    store
        .put_user(T, &User::unnamed("bob"), Existing::Keep)
        .await?;
    store
        .put_user(T, &User::unnamed("dan"), Existing::Keep)
        .await?;
    store
        .put_user(OTHER, &User::unnamed("olga"), Existing::Keep)
        .await?;

    store
        .set_edge(T, EdgeKind::Follows, "bob", "ann", true)
        .await?;
    store
        .set_edge(T, EdgeKind::Follows, "ann", "bob", true)
        .await?;
    store
        .set_edge(T, EdgeKind::Follows, "dan", "cid", true)
        .await?;
    store
        .set_edge(T, EdgeKind::Friend, "cid", "ann", true)
        .await?;
    let eng = Group {
        id: "eng".into(),
        kind: GroupKind::Team,
    };
    let sales = Group {
        id: "sales".into(),
        kind: GroupKind::Department,
    };
    store
        .join_group(T, &eng, "ann", MembershipRole::Lead, 0)
        .await?;
    store
        .join_group(T, &eng, "bob", MembershipRole::Member, 0)
        .await?;
    store
        .join_group(T, &sales, "dan", MembershipRole::Member, 0)
        .await?;
    store.set_assignment(T, "bob", "applicant-1", true).await?;
    store.set_assignment(T, "cid", "applicant-1", true).await?;
    store.set_supervisor(T, "bob", Some("ann")).await?;

    let delivered = status(T, "ann", NOW - 5_000, &["applicant-1"]);
    let hidden_for_bob = status(T, "cid", NOW - 4_000, &[]);
    let elsewhere = status(OTHER, "olga", NOW - 3_000, &[]);
    for action in [&delivered, &hidden_for_bob, &elsewhere] {
        store.insert_action(action).await?;
    }
    let claims = HeldFanOut::claim(store, WORKER, NOW, LEASE, 10).await?;
    assert_eq!(claims.len(), 3, "all three claimed");
    for claim in &claims {
        let a = &claim.action;
        let items = if a.id == delivered.id {
            vec![
                deliver_to("ann", a.conducted, ReasonKind::Own, "ann"),
                deliver_to("bob", a.conducted, ReasonKind::Follows, "ann"),
                deliver_to("cid", a.conducted, ReasonKind::Friend, "ann"),
            ]
        } else if a.id == hidden_for_bob.id {
            vec![
                deliver_to("cid", a.conducted, ReasonKind::Own, "cid"),
                deliver_to("bob", a.conducted, ReasonKind::Follows, "cid"),
            ]
        } else {
            vec![deliver_to("olga", a.conducted, ReasonKind::Own, "olga")]
        };
        claim.finish(store, NOW, &items).await?;
    }
    let hidden = store.hide_feed_item(T, "bob", hidden_for_bob.id).await?;
    assert!(hidden.is_some(), "bob hid the item");

    let pending = status(T, "bob", NOW - 2_000, &["applicant-2"]);
    store.insert_action(&pending).await?;

    // A comment whose bump is done: it raised bob's item.
    let bumped = Comment {
        id: ObjectId::new(),
        action_id: delivered.id,
        author_id: "cid".into(),
        text: "Strong candidate".into(),
        created: NOW + 1_000,
    };
    store.add_comment(T, &bumped).await?;
    let bump_jobs = store
        .claim(JobKind::Bump, WORKER, NOW + 1_000, LEASE, 10)
        .await?;
    assert_eq!(bump_jobs.len(), 1);
    let reason = Reason {
        kind: ReasonKind::Bumped,
        actor_id: "ann".into(),
        bump: Some(Bump {
            rule: BumpRule::Assigned,
            by: "cid".into(),
            at: NOW + 1_000,
        }),
    };
    let raised = store
        .raise(
            T,
            delivered.id,
            NOW + 1_000,
            &[Delivery {
                owner: "bob".into(),
                relevancy: NOW + 1_000,
                reason,
            }],
        )
        .await?;
    assert_eq!(raised.len(), 1, "bob's item raised");
    store.finish(&bump_jobs[0]).await?;
    // A comment whose bump is still queued.
    let queued = Comment {
        id: ObjectId::new(),
        action_id: delivered.id,
        author_id: "dan".into(),
        text: "Agreed".into(),
        created: NOW + 2_000,
    };
    store.add_comment(T, &queued).await?;
    store
        .set_like(T, delivered.id, "bob", true, NOW + 3_000)
        .await?;
    store
        .set_like(T, delivered.id, "dan", true, NOW + 3_000)
        .await?;
    // Their notice jobs ran: the notices populated below stand for theirs.
    for user in ["bob", "dan"] {
        let source = riverfeed::store::NoticeSource::Like {
            action_id: delivered.id,
            user: user.into(),
        };
        store.cancel(JobKind::Notice, T, &source.key()).await?;
    }
    let (groups, inbox, jobs) = populate_notices(store, &delivered, &pending).await?;
    let cleanup = Unfollow::edge(T, "olga", EdgeKind::Follows, "dan");
    unfollow::start(store, &cleanup, NOW).await?;
    let webhook_delivery = populate_webhooks(store).await?;
    Ok(Populated {
        delivered,
        pending,
        hidden_for_bob,
        queued,
        groups,
        inbox,
        jobs,
        cleanup,
        webhook_delivery,
    })
}

/// A webhook, one delivery of it dead and one held by a worker.
async fn populate_webhooks(store: &dyn Store) -> StoreResult<WebhookDelivery> {
    let hook = Webhook {
        id: "wh_0123456789abcdef01234567".into(),
        url: "https://hooks.example.com/riverfeed".into(),
        events: vec![EventType::ActionRecorded, EventType::CommentAdded],
        secret: Secret::draw().to_text(),
        previous: Some((Secret::draw().to_text(), NOW + 1_000)),
        enabled: true,
        created: NOW,
        failing_since: None,
        paused: None,
        version: 0,
    };
    registry::put(store, T, &hook).await?;
    let delivery = WebhookDelivery {
        webhook: hook.id.clone(),
        message: "msg_0001".into(),
        event: EventType::ActionRecorded,
        body: r#"{"type":"action.recorded"}"#.into(),
        hold: None,
        tried: Default::default(),
    };
    store.enqueue(&WebhookJob::of(T, &delivery, NOW)?).await?;
    let held = store
        .claim(JobKind::Webhook, WORKER, NOW, LEASE, 10)
        .await?;
    assert_eq!(held.len(), 1);
    let dead = DeadDelivery {
        delivery: WebhookDelivery {
            message: "msg_0002".into(),
            ..delivery.clone()
        },
        queued: NOW - 1_000,
        died: NOW,
        error: "the endpoint answered 503 Service Unavailable".into(),
    };
    registry::bury(store, T, &dead).await?;
    Ok(delivery)
}

async fn export(store: &dyn Store, tenant: Option<&str>) -> Vec<Record> {
    store
        .export(tenant)
        .try_collect()
        .await
        .expect("export succeeds")
}

/// Records as a sorted multiset, comparable across backends: a tombstone's
/// relevancy is left out, because MongoDB parks tombstones at the epoch
/// (they are never shown) where the embedded store keeps where they stood;
/// so are the versions of notice groups and inboxes, which count one
/// store's writes (an import stores them anew). A marker's version, which
/// clients write over, is kept.
fn multiset(records: &[Record]) -> Vec<String> {
    let mut out: Vec<String> = records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            match &mut r {
                Record::FeedItem { item, .. } if item.hidden => item.relevancy = 0,
                Record::NoticeGroup { group } => group.version = 0,
                Record::Inbox { inbox } => inbox.version = 0,
                _ => {}
            }
            serde_json::to_string(&r).expect("record encodes")
        })
        .collect();
    out.sort();
    out
}

/// The order the trait states: users and the graph, actions, then what
/// refers to actions.
#[track_caller]
fn assert_export_order(records: &[Record]) {
    const ORDER: [&str; 16] = [
        "user",
        "edge",
        "membership",
        "assignment",
        "supervisor",
        "action",
        "comment",
        "like",
        "feedItem",
        "noticeGroup",
        "inbox",
        "noticeJob",
        "cleanup",
        "webhook",
        "deadDelivery",
        "webhookDelivery",
    ];
    let ranks: Vec<usize> = records
        .iter()
        .map(|r| {
            ORDER
                .iter()
                .position(|k| *k == r.kind())
                .expect("known kind")
        })
        .collect();
    assert!(
        ranks.windows(2).all(|w| w[0] <= w[1]),
        "records out of order: {:?}",
        records.iter().map(Record::kind).collect::<Vec<_>>()
    );
}

/// What every export of a populated store holds, whatever the backend.
#[track_caller]
fn assert_populated(records: &[Record], p: &Populated) {
    assert_export_order(records);
    let count = |kind: &str| records.iter().filter(|r| r.kind() == kind).count();
    assert_eq!(count("user"), 5, "ann, bob, cid, dan, olga");
    assert_eq!(count("edge"), 4, "three follows, one friendship once");
    assert_eq!(count("membership"), 3);
    assert_eq!(count("assignment"), 2);
    assert_eq!(count("supervisor"), 1);
    assert_eq!(count("action"), 4);
    assert_eq!(count("comment"), 2);
    assert_eq!(count("like"), 2);
    assert_eq!(count("feedItem"), 6, "five visible, one tombstone");
    assert_eq!(count("noticeGroup"), 4, "ann's two, bob's archived, olga's");
    assert_eq!(count("inbox"), 1, "ann's");
    assert_eq!(count("noticeJob"), 2, "the held one and the waiting one");
    assert_eq!(count("webhook"), 1);
    assert_eq!(count("deadDelivery"), 1);
    assert!(records.contains(&Record::WebhookDelivery {
        tenant: T.into(),
        delivery: p.webhook_delivery.clone(),
        queued: NOW,
    }));
    assert!(records.contains(&Record::Cleanup {
        unfollow: p.cleanup.clone(),
    }));
    assert_eq!(count("cleanup"), 1, "olga's unfollow");
    assert!(records.contains(&Record::User {
        tenant: T.into(),
        id: "ann".into(),
        name: Some("Ann Archer".into()),
    }));
    assert!(records.contains(&Record::User {
        tenant: T.into(),
        id: "bob".into(),
        name: None,
    }));
    assert!(records.contains(&Record::Edge {
        tenant: T.into(),
        kind: EdgeRecordKind::Friend,
        from: "ann".into(),
        to: "cid".into(),
    }));
    assert!(records.contains(&Record::Supervisor {
        tenant: T.into(),
        user: "bob".into(),
        supervisor: "ann".into(),
    }));
    assert!(records.contains(&Record::Membership {
        tenant: T.into(),
        group: "eng".into(),
        group_kind: GroupKind::Team,
        user: "ann".into(),
        role: MembershipRole::Lead,
        since: 0,
    }));
    for r in records {
        match r {
            Record::Action { action } if action.id == p.pending.id => {
                assert_eq!(action.fan_out.state, FanOutState::Pending);
            }
            Record::Action { action } if action.id == p.delivered.id => {
                assert_eq!(action.fan_out.state, FanOutState::Done);
                assert_eq!(
                    action.counts,
                    Counts {
                        comments: 2,
                        likes: 2
                    }
                );
            }
            Record::Comment {
                comment,
                bump_queued,
                ..
            } => assert_eq!(*bump_queued, comment.id == p.queued.id, "{comment:?}"),
            Record::FeedItem { item, .. } if item.hidden => {
                assert_eq!(
                    (item.owner.as_str(), item.action_id),
                    ("bob", p.hidden_for_bob.id)
                );
            }
            Record::FeedItem { item, .. } if item.owner == "bob" => {
                assert_eq!(item.action_id, p.delivered.id);
                assert_eq!(item.relevancy, NOW + 1_000, "bumped");
                assert_eq!(item.reason.kind, ReasonKind::Bumped);
                assert_eq!(item.changed, NOW + 1_000);
            }
            Record::NoticeGroup { group } => {
                assert!(p.groups.contains(group), "a group as stored: {group:?}");
            }
            Record::Inbox { inbox } => assert_eq!(inbox, &p.inbox),
            Record::NoticeJob { job } => {
                assert!(p.jobs.contains(job), "a job as queued: {job:?}");
            }
            _ => {}
        }
    }
}

/// Records through JSON Lines, as `riverfeed export | riverfeed import` moves them.
async fn via_json_lines(records: Vec<Record>, target: &dyn Store, batch: usize) {
    let mut lines = Vec::new();
    let written = archive_cmd::write_records(
        None,
        Box::pin(futures_util::stream::iter(records.into_iter().map(Ok))),
        &mut lines,
        &ProgressBar::hidden(),
    )
    .await
    .expect("JSON Lines written");
    let options = archive_cmd::ImportOptions::new(batch, 1_000);
    let read = archive_cmd::import_lines(target, &lines[..], &options, &ProgressBar::hidden())
        .await
        .expect("JSON Lines imported");
    assert_eq!(written, read, "every record written is read");
}

async fn round_trip(backend: Backend) {
    let Some(source) = TestStore::open(backend).await else {
        return;
    };
    let p = populate(&*source.store).await.expect("populated");
    let all = export(&*source.store, None).await;
    assert_populated(&all, &p);

    let only = export(&*source.store, Some(T)).await;
    assert!(only.iter().all(|r| r.tenant() == T));
    assert_eq!(
        only.len(),
        all.iter().filter(|r| r.tenant() == T).count(),
        "a tenant's export is all of that tenant"
    );

    for target_backend in [
        Backend::Embedded,
        Backend::Mongo("archive_round_trip_target"),
    ] {
        let Some(target) = TestStore::open(target_backend).await else {
            continue;
        };
        // Small batches, so that records of one kind span several.
        via_json_lines(all.clone(), &*target.store, 3).await;
        let again = export(&*target.store, None).await;
        assert_export_order(&again);
        assert_eq!(multiset(&again), multiset(&all), "{target_backend:?}");
        // A second import replaces: one copy of each.
        target.store.import(&all).await.expect("second import");
        let twice = export(&*target.store, None).await;
        assert_eq!(
            multiset(&twice),
            multiset(&all),
            "{target_backend:?}: twice"
        );
        assert_imported_store_works(&*source.store, &*target.store, &p).await;
        target.remove().await;
    }
    source.remove().await;
}

/// The imported store behaves as the source: same feeds and counts, the
/// pending fan-out and the queued bump claimable, the hidden item gone.
async fn assert_imported_store_works(source: &dyn Store, target: &dyn Store, p: &Populated) {
    for owner in ["ann", "bob", "cid"] {
        assert_eq!(
            target.feed_page(T, owner, page(10)).await.expect("page"),
            source.feed_page(T, owner, page(10)).await.expect("page"),
            "{owner}'s feed"
        );
    }
    let bob = target.feed_page(T, "bob", page(10)).await.expect("page");
    assert!(bob.iter().all(|i| i.action_id != p.hidden_for_bob.id));
    let ids = [p.delivered.id, p.pending.id];
    let mut got = target.get_actions(T, &ids).await.expect("actions");
    let mut want = source.get_actions(T, &ids).await.expect("actions");
    got.sort_by_key(|a| a.id);
    want.sort_by_key(|a| a.id);
    assert_eq!(got, want);
    assert_eq!(
        target.liked(T, "dan", &ids).await.expect("liked"),
        [p.delivered.id]
    );
    assert_eq!(
        target
            .supervision(T, riverfeed::store::Direction::Out, "bob")
            .await
            .expect("supervisor"),
        ["ann"]
    );
    assert_eq!(
        target
            .memberships(T, "bob")
            .await
            .expect("memberships")
            .len(),
        1
    );
    let claims = HeldFanOut::claim(target, "importer", NOW, LEASE, 10)
        .await
        .expect("claim");
    let claimed: HashSet<ObjectId> = claims.iter().map(|c| c.action.id).collect();
    assert_eq!(
        claimed,
        HashSet::from([p.pending.id]),
        "the pending fan-out"
    );
    let bumps = target
        .claim(JobKind::Bump, "importer", NOW + 10_000, LEASE, 10)
        .await
        .expect("claim bumps");
    let bumped: Vec<Comment> = bumps
        .iter()
        .map(|b| BumpJob::of_job(&b.job).expect("a bump job").comment)
        .collect();
    assert_eq!(bumped, std::slice::from_ref(&p.queued), "the queued bump");
    assert_eq!(
        unfollow::pending(target, T, "olga")
            .await
            .expect("pending cleanups"),
        std::slice::from_ref(&p.cleanup),
        "the pending cleanup, which reads apply"
    );
    assert_notices_imported(target, p).await;
    let sends = target
        .claim(JobKind::Webhook, "importer", NOW, LEASE, 10)
        .await
        .expect("claim webhook deliveries");
    assert_eq!(sends.len(), 1, "the held delivery waits again");
    let sent: WebhookDelivery = sends[0].job.payload().expect("a delivery");
    assert_eq!(sent, p.webhook_delivery);
    let hook = registry::get(target, T, &p.webhook_delivery.webhook)
        .await
        .expect("read")
        .expect("the webhook");
    let dead = registry::dead(target, T, &hook.id, None, 100)
        .await
        .expect("dead");
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (
            registry::secrets(&hook, NOW).expect("secrets").len(),
            dead[0].delivery.message.as_str()
        ),
        (2, "msg_0002"),
        "its rotated secret and its dead delivery came along"
    );
}

/// A bad line stops the import with its line number, before anything is
/// written: the batches before it included.
async fn a_bad_line_names_itself(backend: Backend) {
    let Some(target) = TestStore::open(backend).await else {
        return;
    };
    let user = |id: &str| {
        serde_json::to_string(&Record::User {
            tenant: T.into(),
            id: id.into(),
            name: None,
        })
        .expect("encodes")
    };
    let options = archive_cmd::ImportOptions::new(2, 1_000);
    let input = format!(
        "{}\n{}\n\n{}\n{{\"record\": \"user\", \"tenant\": \"{T}\"}}\n{}\n",
        user("u1"),
        user("u2"),
        user("u3"),
        user("u4")
    );
    let err = archive_cmd::import_lines(
        &*target.store,
        input.as_bytes(),
        &options,
        &ProgressBar::hidden(),
    )
    .await
    .expect_err("line 5 is not a record");
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    assert!(err.message.contains("line 5"), "{err}");
    assert!(err.message.contains("nothing was imported"), "{err}");
    let ids: Vec<String> = ["u1", "u2", "u3", "u4"].map(String::from).to_vec();
    let users = target.store.get_users(T, &ids).await.expect("users");
    assert!(
        users.is_empty(),
        "nothing, not even the first batch: {users:?}"
    );

    // An id the API would refuse is refused here too, by line.
    let bad_id = "{\"record\":\"user\",\"tenant\":\"arch\",\"id\":\" padded\",\"name\":null}";
    let err = archive_cmd::import_lines(
        &*target.store,
        format!("{}\n{bad_id}\n", user("u9")).as_bytes(),
        &options,
        &ProgressBar::hidden(),
    )
    .await
    .expect_err("surrounding whitespace");
    assert!(err.message.contains("line 2"), "{err}");
    assert!(
        target
            .store
            .get_users(T, &["u9".into()])
            .await
            .expect("users")
            .is_empty(),
        "nothing of the failed import"
    );
    target.remove().await;
}

crate::on_both_backends!(round_trip, a_bad_line_names_itself);
