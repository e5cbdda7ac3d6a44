//! Work owed durably, whatever a crash or a race cuts short: a river whose
//! build was cut short is built when a process starts.

use riverfeed::model::Position;
use riverfeed::server::ServeOptions;
use riverfeed::store::prelude::*;
use riverfeed::store::{River, RiverWrite};
use riverfeed::timeline::{FeedModel, FeedModelKind};
use serde_json::json;

use crate::common::{store_url, Backend, Stopped, TestServer};

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
    // A first read builds the river.
    assert_eq!(server.client("acme", "ann").feed_ids("").await.0, posted);
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

crate::on_both_backends!(
    a_river_left_being_built_is_built_at_start,
);
