//! Under rivers, a dormant reader's first page is the merge of their
//! sources, as under `pull`: their river is built after it, off the
//! read's path, and the pages and cursors they read meanwhile are the ones
//! the river then serves.

use riverfeed::model::{ObjectId, Position, Reason, ReasonKind};
use riverfeed::server::ServeOptions;
use riverfeed::store::prelude::*;
use riverfeed::store::{Backfill, FeedRange, JobKind, QueuedRead, River, RiverWrite};
use riverfeed::timeline::{FeedModel, FeedModelKind};
use serde_json::{json, Value};

use crate::common::{store_url, Backend, Client, Stopped, TestServer, WsClient};

/// Rivers of a size of their own (so the tests' model is not put in),
/// building `builds` at once.
fn rivers(builds: usize) -> impl FnOnce(String) -> ServeOptions {
    move |store| ServeOptions {
        model: FeedModel {
            river_size: 10,
            river_builds: builds,
            ..FeedModel::of(FeedModelKind::Rivers)
        },
        ..ServeOptions::new(store)
    }
}

/// `reader`'s river, read from the server's own store.
async fn river(server: &TestServer, reader: &str) -> Option<River> {
    let readers = [reader.to_owned()];
    let store = server.server.metered.as_ref();
    store.rivers("acme", &readers).await.expect("rivers")[0]
}

/// The store calls that build a river: its record, and its items (a
/// timeline write).
async fn river_writes(server: &TestServer) -> (u64, u64) {
    let calls = |op: &str| format!("riverfeed_store_calls_total{{op=\"{op}\"}}");
    (
        server.counter(&calls("write_river")).await,
        server.counter(&calls("write_timeline")).await,
    )
}

/// Rivers the background builds built.
async fn builds_done(server: &TestServer) -> u64 {
    server
        .counter("riverfeed_jobs_total{job=\"river\",outcome=\"ok\"}")
        .await
}

/// Ann follows bob, who then posts `n` times, each delivered: ann's client
/// and the posts, newest first.
async fn ann_follows_bob_who_posts(server: &TestServer, n: usize) -> (Client, Vec<String>) {
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    let ann = server.client("acme", "ann");
    ann.follow("bob").await;
    let mut posted = Vec::new();
    for n in 0..n {
        let id = bob.post_status(&format!("post {n}"), json!({})).await;
        bob.wait_delivered(&id).await;
        posted.insert(0, id);
    }
    (ann, posted)
}

/// The cursor after the page `info` ends.
fn end(info: &Value) -> String {
    info["endCursor"]
        .as_str()
        .expect("an end cursor")
        .to_owned()
}

/// A dormant reader's first page writes nothing (with no builds running,
/// every store call is the read's own), and shows what the river later
/// shows; its cursor leads to the next page with no river and with one.
/// The river is built in the background once builds run, and its reader's
/// pages stay the same.
async fn a_dormant_readers_first_page_builds_no_river(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    let server = TestServer::start_with(Stopped { store, dir }, rivers(0)).await;
    let (ann, posted) = ann_follows_bob_who_posts(&server, 5).await;

    let before = river_writes(&server).await;
    let (first, info) = ann.feed_ids("(first: 3)").await;
    assert_eq!(first, posted[..3], "the first page, merged");
    assert_eq!(
        river_writes(&server).await,
        before,
        "no river is written on a first page's path"
    );
    assert_eq!(river(&server, "ann").await, None, "ann is still dormant");
    let after = end(&info);
    let (rest, _) = ann
        .feed_ids(&format!("(first: 3, after: \"{after}\")"))
        .await;
    assert_eq!(rest, posted[3..], "the next page, with no river");
    let stopped = server.stop_keeping_data().await;

    // Builds run: the next read asks for ann's river and is answered
    // before it is built.
    let server = TestServer::start_with(stopped, rivers(2)).await;
    assert_eq!(builds_done(&server).await, 0);
    let ann = server.client("acme", "ann");
    let (again, _) = ann.feed_ids("(first: 3)").await;
    assert_eq!(again, posted[..3]);
    server.rivers_settled().await;
    let built = river(&server, "ann")
        .await
        .expect("ann's river, built after her read");
    assert_ne!(built.complete_from, Position::MAX, "built to the end");
    assert_eq!(
        builds_done(&server).await,
        1,
        "built once, in the background"
    );
    let (rest, _) = ann
        .feed_ids(&format!("(first: 3, after: \"{after}\")"))
        .await;
    assert_eq!(rest, posted[3..], "the merged page's cursor, on the river");
    assert_eq!(ann.feed_ids("(first: 10)").await.0, posted);
    server.rivers_settled().await;
    assert_eq!(
        builds_done(&server).await,
        1,
        "a reader with a river asks none"
    );
    server.stop().await;
}

/// Many reads of one dormant reader at once ask for one build.
async fn a_readers_river_is_built_once(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    let server = TestServer::start_with(Stopped { store, dir }, rivers(2)).await;
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    let ann = server.client("acme", "ann");
    ann.follow("bob").await;
    let id = bob.post_status("one", json!({})).await;
    bob.wait_delivered(&id).await;
    let reads = (0..8).map(|_| ann.feed_ids("(first: 5)"));
    for (ids, _) in futures_util::future::join_all(reads).await {
        assert_eq!(ids, std::slice::from_ref(&id));
    }
    server.rivers_settled().await;
    assert!(river(&server, "ann").await.is_some());
    assert_eq!(builds_done(&server).await, 1);
    server.stop().await;
}

/// A build that writes an action whose fan-out has not run yet tells the
/// reader's live streams: that fan-out will find the item written and tell
/// nothing. No worker runs here, so the fan-out stays pending throughout.
async fn a_build_tells_live_streams_what_a_pending_fan_out_has_not(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    let server = TestServer::start_with(Stopped { store, dir }, |url| ServeOptions {
        worker: None,
        ..rivers(1)(url)
    })
    .await;
    let bob = server.client("acme", "bob");
    bob.upsert_user("bob", "Bob").await;
    let ann = server.client("acme", "ann");
    ann.follow("bob").await;
    let mut ws = WsClient::as_user(&server.ws_url(), "acme", "ann").await;
    ws.subscribe(
        "1",
        "subscription { feedEvents { kind item { actionId } } }",
    )
    .await;
    server.wait_live_topics(1).await;
    let id = bob.post_status("pending", json!({})).await;
    let (page, _) = ann.feed_ids("(first: 5)").await;
    assert_eq!(page, std::slice::from_ref(&id), "pulled before its fan-out");
    server.rivers_settled().await;
    assert!(river(&server, "ann").await.is_some(), "ann's river, built");
    let event = ws.next_payload().await;
    assert_eq!(event["data"]["feedEvents"]["kind"], "ADDED", "{event}");
    assert_eq!(event["data"]["feedEvents"]["item"]["actionId"], id.as_str());
    server.stop().await;
}

/// A dormant reader's merged pages hold every item once and in order
/// whichever way they are read, past items a bump raised: read from the
/// oldest end, the followee's bumped actions drop out of the pulled read
/// (the timeline holds them, raised), and the merge reads on past them.
async fn a_dormant_readers_merged_pages_read_past_bumped_items(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    let server = TestServer::start_with(Stopped { store, dir }, rivers(0)).await;
    let (ann, posted) = ann_follows_bob_who_posts(&server, 8).await;
    // Ann comments on the three oldest, the oldest last: they rise to
    // the top of her feed, the last comment's first.
    let mut bumped = Vec::new();
    for id in posted[5..].iter().rev() {
        let data = ann
            .data(
                "mutation($a: ID!) { comment(actionId: $a, text: \"mine\") { id } }",
                json!({ "a": id }),
            )
            .await;
        assert!(data["comment"]["id"].is_string(), "{data}");
        bumped.insert(0, id.clone());
    }
    let whole: Vec<String> = bumped.iter().chain(&posted[..5]).cloned().collect();
    let deadline = tokio::time::Instant::now() + crate::common::DELIVERY_PATIENCE;
    while ann.feed_ids("(first: 10)").await.0 != whole {
        assert!(tokio::time::Instant::now() < deadline, "the bumps arrive");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let (last, info) = ann.feed_ids("(last: 5)").await;
    assert_eq!(last, whole[3..], "the oldest five: every unbumped post");
    assert_eq!(info["hasPreviousPage"], true, "{info}");
    let (before, _) = ann
        .feed_ids(&format!(
            "(last: 5, before: \"{}\")",
            info["startCursor"].as_str().unwrap()
        ))
        .await;
    assert_eq!(before, whole[..3], "then the bumped ones");
    assert_eq!(river(&server, "ann").await, None, "ann stayed dormant");
    server.stop().await;
}

/// A reader with a river reads only the river while a page lies within
/// it: no source's outbox is read until a page reaches below the river,
/// and the pages are the same either way.
async fn pages_within_a_river_read_no_sources(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    let server = TestServer::start_with(Stopped { store, dir }, rivers(1)).await;
    let (ann, posted) = ann_follows_bob_who_posts(&server, 14).await;
    let (first, _) = ann.feed_ids("(first: 3)").await;
    assert_eq!(first, posted[..3], "the dormant first page, merged");
    server.rivers_settled().await;
    let built = river(&server, "ann").await.expect("ann's river");
    assert_ne!(built.complete_from, Position::MAX, "built");

    let outboxes = "riverfeed_store_calls_total{op=\"outboxes\"}";
    let before = server.counter(outboxes).await;
    let (again, info) = ann.feed_ids("(first: 3)").await;
    assert_eq!(again, posted[..3], "the same page, from the river");
    let (next, _) = ann
        .feed_ids(&format!("(first: 3, after: \"{}\")", end(&info)))
        .await;
    assert_eq!(next, posted[3..6]);
    assert_eq!(
        server.counter(outboxes).await,
        before,
        "pages within the river read no outbox"
    );
    // The river holds ten (its size): a page of thirteen reaches below.
    let (most, _) = ann.feed_ids("(first: 13)").await;
    assert_eq!(most, posted[..13], "merged below the river");
    assert!(
        server.counter(outboxes).await > before,
        "the sources, read below it"
    );
    server.stop().await;
}

/// A group left while the reader's river is being built: the build read
/// the reader's sources while the membership stood and writes the group's
/// items after the leave. The leave's cleanup waits for the build, then
/// takes them out: none stays in storage, where a later join would show
/// them again. The build is played by hand (no builds run), its record
/// first and its items once the worker has looked at the cleanup.
async fn a_group_left_while_a_river_is_built_leaves_none_of_its_items(backend: Backend) {
    let Some((store, dir)) = store_url(backend) else {
        return;
    };
    let server = TestServer::start_with(Stopped { store, dir }, rivers(0)).await;
    let dan = server.client("acme", "dan");
    dan.upsert_user("dan", "Dan").await;
    let service = server.service("acme");
    for member in ["dan", "carol"] {
        service.add_member("t1", "TEAM", member).await;
    }
    let mut team = Vec::new();
    for i in 0..2 {
        let id = dan
            .post_status(&format!("team {i}"), json!({ "scope": "TEAM" }))
            .await;
        dan.wait_delivered(&id).await;
        team.push(id);
    }
    let store = server.server.metered.clone();
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as i64
    };
    let building = River {
        complete_from: Position::MAX,
        touched: now(),
    };
    store
        .write_river("acme", "carol", RiverWrite::Put(building))
        .await
        .expect("the build's first record");

    let carol = server.client("acme", "carol");
    let data = carol
        .data("mutation { leaveGroup(groupId: \"t1\") }", json!({}))
        .await;
    assert_eq!(data["leaveGroup"], true);
    // The worker looks at the cleanup: it either ends (nothing to take
    // yet) or waits for the build.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let queued = store
            .queued(JobKind::Cleanup, "acme", QueuedRead::under(""))
            .await
            .expect("queued cleanups");
        if queued.iter().all(|q| q.waits_until.is_some()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never looked: {queued:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let ids: Vec<ObjectId> = team.iter().map(|id| id.parse().expect("an id")).collect();
    let actions = store.get_actions("acme", &ids).await.expect("the actions");
    let items: Vec<Backfill> = actions
        .iter()
        .map(|a| Backfill {
            action_id: a.id,
            relevancy: a.conducted,
            reason: Reason::new(ReasonKind::Team, "dan"),
            changed: a.conducted,
        })
        .collect();
    store
        .fill_river("acme", "carol", &items)
        .await
        .expect("the build's items");
    let built = River {
        complete_from: Position::MIN,
        touched: now(),
    };
    store
        .write_river("acme", "carol", RiverWrite::Put(built))
        .await
        .expect("the build's last record");

    let everything = FeedRange {
        older_than: None,
        newer_than: None,
        limit: 100,
        from_oldest: false,
    };
    loop {
        let held = store.feed_page("acme", "carol", everything).await.unwrap();
        let pending = riverfeed::timeline::unfollow::pending(store.as_ref(), "acme", "carol")
            .await
            .unwrap();
        if pending.is_empty() {
            let kept: Vec<_> = held.iter().filter(|i| ids.contains(&i.action_id)).collect();
            assert!(kept.is_empty(), "the group's items stayed: {kept:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cleanup never ran"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(carol.feed_ids("").await.0, Vec::<String>::new());
    server.stop().await;
}

crate::on_both_backends!(
    a_group_left_while_a_river_is_built_leaves_none_of_its_items,
    pages_within_a_river_read_no_sources,
    a_dormant_readers_merged_pages_read_past_bumped_items,
    a_dormant_readers_first_page_builds_no_river,
    a_readers_river_is_built_once,
    a_build_tells_live_streams_what_a_pending_fan_out_has_not,
    a_merge_of_many_sources_is_every_source_read_whole,
);

/// A dormant reader's pages merged from many sources, read only as deep as
/// each page needs, are the pages of every source read whole: one prolific
/// actor among eleven sparse ones, another interleaved with it, paged to
/// the end at two page sizes.
async fn a_merge_of_many_sources_is_every_source_read_whole(backend: Backend) {
    crate::worker::on_a_store(backend, merged_pages).await
}

async fn merged_pages(store: std::sync::Arc<dyn riverfeed::store::Store>) -> anyhow::Result<()> {
    use riverfeed::model::EdgeKind;
    use riverfeed::timeline::sources;
    let mut posted = Vec::new();
    for n in 0..12 {
        let actor = format!("actor-{n:02}");
        store
            .set_edge("acme", EdgeKind::Follows, "ann", &actor, true)
            .await?;
        // actor-00 posts the newest forty, actor-01 thirty between them,
        // the others one or two older ones.
        let times: Vec<i64> = match n {
            0 => (0..40).map(|i| 10_000 + 10 * i).collect(),
            1 => (0..30).map(|i| 10_005 + 13 * i).collect(),
            n => (0..1 + n % 2).map(|i| 9_000 + 50 * n + i).collect(),
        };
        for at in times {
            let action = crate::store_suite::action("acme", &actor, at, &[]);
            store.insert_action(&action).await?;
            posted.push(Position {
                relevancy: at,
                action_id: action.id,
            });
        }
    }
    posted.sort_by(|a, b| b.cmp(a));
    let all = sources::load(store.as_ref(), "acme", "ann").await?;
    for limit in [5, 25] {
        let mut paged = Vec::new();
        let mut older_than = None;
        loop {
            let range = FeedRange {
                older_than,
                newer_than: None,
                limit,
                from_oldest: false,
            };
            let page = sources::pull(store.as_ref(), "acme", "ann", &all, range).await?;
            anyhow::ensure!(page.len() <= limit, "a page of {limit}: {}", page.len());
            let Some(last) = page.last() else { break };
            older_than = Some(last.position());
            paged.extend(page.iter().map(|item| item.position()));
        }
        anyhow::ensure!(
            paged == posted,
            "pages of {limit}: {} items, {} posted; first difference at {:?}",
            paged.len(),
            posted.len(),
            paged.iter().zip(&posted).position(|(a, b)| a != b)
        );
    }
    Ok(())
}
