//! Work owed durably, whatever a crash or a race cuts short: a river whose
//! build was cut short is built when a process starts; a like's notice is
//! owed in the same step as the like, even over a notice job of the same
//! like that a worker runs meanwhile (an assignment's likewise); and what the cap on a user's
//! notification groups drops.

use riverfeed::model::{Comment, NoticeRange, NoticeReason, ObjectId, Position};
use riverfeed::notify::{self, NoticeRules};
use riverfeed::server::ServeOptions;
use riverfeed::store::prelude::*;
use riverfeed::store::QueuedRead;
use riverfeed::store::{JobKind, NoticeJob, NoticeSelect, NoticeSource, River, RiverWrite};
use riverfeed::timeline::{FeedModel, FeedModelKind};
use serde_json::{json, Value};

use crate::common::{store_url, Backend, Stopped, TestServer, TestStore};
use crate::store_suite::action;

/// Rivers, at a size of their own (so the tests' model is not put in).
fn options(store: String) -> ServeOptions {
    ServeOptions {
        model: FeedModel {
            river_size: 10,
            ..FeedModel::of(FeedModelKind::Rivers)
        },
        ..ServeOptions::new(store)
    }
}

/// `ann`'s river, read from the server's own store.
async fn river(server: &TestServer) -> Option<River> {
    let readers = ["ann".to_owned()];
    let store = server.server.metered.as_ref();
    store.rivers("acme", &readers).await.expect("rivers")[0]
}

async fn a_river_left_being_built_is_built_at_start(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    let server = TestServer::start_with(Stopped { store, dir }, options).await;
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    server.client("acme", "ann").follow("bob").await;
    let mut posted = Vec::new();
    for n in 0..3 {
        let id = bob.post_status(&format!("post {n}"), json!({})).await;
        bob.wait_delivered(&id).await;
        posted.insert(0, id);
    }
    // A first read asks for the river, built after it.
    assert_eq!(server.client("acme", "ann").feed_ids("").await.0, posted);
    server.rivers_settled().await;
    let built = river(&server).await.expect("a first read built a river");
    assert_ne!(built.complete_from, Position::MAX, "built");

    // A crash in the middle of a build leaves its first record: the river
    // is being built, complete from nowhere.
    let building = River {
        complete_from: Position::MAX,
        ..built
    };
    server
        .server
        .metered
        .write_river("acme", "ann", RiverWrite::Put(building))
        .await
        .expect("the record a cut build leaves");
    let stopped = server.stop_keeping_data().await;

    let server = TestServer::start_with(stopped, options).await;
    let after = river(&server).await;
    assert!(
        after.is_some_and(|r| r.complete_from != Position::MAX),
        "the build is taken up at start, not left until the reader goes idle: {after:?}"
    );
    assert_eq!(server.client("acme", "ann").feed_ids("").await.0, posted);
    server.stop().await;
}

/// A like taken back and given again while a worker runs the first like's
/// notice job (having read it as taken back): that job's end does not end
/// the notice the second like owes.
async fn a_like_given_again_while_its_notice_job_runs_is_owed(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    // No worker: the test is the worker.
    let options = |store: String| ServeOptions {
        worker: None,
        ..ServeOptions::new(store)
    };
    let server = TestServer::start_with(Stopped { store, dir }, options).await;
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    let id = bob.post_status("liked twice", json!({})).await;
    let ann = server.client("acme", "ann");
    let like = |on: bool| {
        let query = if on {
            "mutation($id: ID!) { like(actionId: $id) { actionId } }"
        } else {
            "mutation($id: ID!) { unlike(actionId: $id) { actionId } }"
        };
        ann.data(query, json!({ "id": id }))
    };
    owed_again_while_its_job_runs(&server, like, "like").await;
    server.stop().await;
}

/// An assignment ended and made again while a worker runs the first
/// assignment's notice job: that job's end does not end the notice the
/// second assignment owes.
async fn an_assignment_made_again_while_its_notice_job_runs_is_owed(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    // No worker: the test is the worker.
    let options = |store: String| ServeOptions {
        worker: None,
        ..ServeOptions::new(store)
    };
    let server = TestServer::start_with(Stopped { store, dir }, options).await;
    let service = server.service("acme");
    service.upsert_user("john", "John").await;
    let assign = |on: bool| {
        let query = if on {
            "mutation { assign(userId: \"john\", refId: \"applicant-1\") }"
        } else {
            "mutation { unassign(userId: \"john\", refId: \"applicant-1\") }"
        };
        service.data(query, json!({}))
    };
    owed_again_while_its_job_runs(&server, assign, "assignment").await;
    server.stop().await;
}

/// Turns a notice's cause on (`toggle(true)`), claims its notice job as a
/// worker would, then turns the cause off (so the job reads it as gone)
/// and on again before the job ends: the second cause's job still waits.
async fn owed_again_while_its_job_runs<F, Fut>(server: &TestServer, toggle: F, what: &str)
where
    F: Fn(bool) -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    toggle(true).await;
    let store = server.server.metered.clone();
    let now = chrono::Utc::now().timestamp_millis();
    let leases = store
        .claim(JobKind::Notice, "w1", now, 60_000, 10)
        .await
        .expect("claim");
    assert_eq!(leases.len(), 1, "the {what}'s notice job");
    toggle(false).await;
    toggle(true).await;
    let ended = store.finish(&leases[0]).await;
    let owed = store
        .queued(
            JobKind::Notice,
            "acme",
            QueuedRead::under(&leases[0].job.key),
        )
        .await
        .expect("queued");
    assert!(
        owed.iter().any(|q| q.held.is_none()),
        "the second {what}'s notice job waits (the first's end: {ended:?}); queued: {owed:?}"
    );
}

/// The cap keeps a user's groups with the newest notices. A like's notice
/// is timed when the like was given, not when the liked action was: a like
/// on an old action, to a user at the cap, opens a group at the top and
/// the oldest group goes. Only a notice older than every group kept (its
/// job run long after its cause) goes at once.
async fn a_like_on_an_old_action_at_the_cap_is_kept(backend: Backend) {
    let Some(test) = TestStore::open(backend).await else {
        return;
    };
    let store = test.store.as_ref();
    let rules = NoticeRules {
        groups_kept: 3,
        ..NoticeRules::default()
    };
    const DAY: i64 = 86_400_000;
    let now = 1_800_000_000_000;
    let old = action("acme", "bob", now - 400 * DAY, &[]);
    store.insert_action(&old).await.expect("old action");
    // Bob at the cap: three comments on three recent actions of his, an
    // hour apart.
    let mut comments = Vec::new();
    for n in 1..=3 {
        let recent = action("acme", "bob", now - DAY, &[]);
        store.insert_action(&recent).await.expect("recent action");
        let comment = Comment {
            id: ObjectId::new(),
            action_id: recent.id,
            author_id: "ann".into(),
            text: "hi".into(),
            created: now - (4 - n) * 3_600_000,
        };
        comments.extend(
            notify::for_comment(store, &rules, &recent, &comment)
                .await
                .expect("owed"),
        );
    }
    notify::deliver(store, &rules, "acme", comments, now)
        .await
        .expect("written");
    let groups = |limit| async move {
        let range = NoticeRange {
            before: None,
            limit,
            unread_only: false,
        };
        store
            .notice_groups("acme", "bob", NoticeSelect::Page(range))
            .await
            .expect("groups")
    };
    let before = groups(10).await;
    assert_eq!(before.len(), 3, "at the cap");

    // Carol likes the old action now.
    let like = |user: &str, at| NoticeJob {
        tenant: "acme".into(),
        source: NoticeSource::Like {
            action_id: old.id,
            user: user.into(),
        },
        at,
    };
    store
        .set_like("acme", old.id, "carol", true, now)
        .await
        .expect("liked");
    let owed = notify::for_job(store, &rules, &like("carol", now))
        .await
        .expect("owed");
    assert_eq!(owed.len(), 1, "bob is owed the like");
    let done = notify::deliver(store, &rules, "acme", owed, now)
        .await
        .expect("written");
    let after = groups(10).await;
    assert_eq!(after.len(), 3, "still at the cap");
    assert_eq!(after[0].reason, NoticeReason::Like, "the like on top");
    assert_eq!(
        done[0].change.removed,
        [before[2].id],
        "the group with the oldest notice went"
    );

    // A like whose notice is older than every group kept (a job run long
    // after the like) goes at once: added and removed in one write.
    store
        .set_like("acme", old.id, "dan", true, now - 10 * 3_600_000)
        .await
        .expect("liked");
    let late = like("dan", now - 10 * 3_600_000);
    let owed = notify::for_job(store, &rules, &late).await.expect("owed");
    let done = notify::deliver(store, &rules, "acme", owed, now)
        .await
        .expect("written");
    assert_eq!(done[0].change.added, done[0].change.removed, "{done:?}");
    assert_eq!(groups(10).await.len(), 3);
    test.remove().await;
}

crate::on_both_backends!(
    a_river_left_being_built_is_built_at_start,
    a_like_given_again_while_its_notice_job_runs_is_owed,
    an_assignment_made_again_while_its_notice_job_runs_is_owed,
    a_like_on_an_old_action_at_the_cap_is_kept,
);
