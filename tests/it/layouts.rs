//! The MongoDB timeline layouts, looked at as documents: what a delivery
//! writes where, and rivers kept to their size by `$slice`. (What they
//! serve is the conformance suite's, run on each.)

use anyhow::{ensure, Context, Result};
use bson::{doc, Document};
use futures_util::TryStreamExt;
use riverfeed::model::{ObjectId, Position, Reason, ReasonKind};
use riverfeed::store::mongo::{MongoSettings, TimelineLayout};
use riverfeed::store::prelude::*;
use riverfeed::store::{Backfill, Delivery, River, RiverWrite, StoreSettings};

use crate::common::{Backend, HeldFanOut, TestStore};
use crate::store_suite::timelines::river_of;
use crate::store_suite::{action, range};

const T: &str = "layouts";
const DAY: i64 = 24 * 3600 * 1000;

async fn open(layout: TimelineLayout, test: &'static str) -> Option<TestStore> {
    let settings = StoreSettings {
        mongo: MongoSettings {
            layout: Some(layout),
            bucket_size: 3,
            embed_actions: false,
            river_size: 3,
            ..MongoSettings::default()
        },
        ..StoreSettings::default()
    };
    TestStore::open_as(Backend::Mongo(test), &settings).await
}

/// Records actions at `times` and delivers each to `owner`, all at once.
async fn deliver(store: &dyn Store, owner: &str, times: &[i64]) -> Result<()> {
    let mut ids = Vec::new();
    for &conducted in times {
        let a = action(T, "poster", conducted, &[]);
        store.insert_action(&a).await?;
        ids.push(a.id);
    }
    let now = times.iter().max().copied().unwrap_or(0) + 1;
    let claims: Vec<_> = HeldFanOut::claim(store, "w1", now, 60_000, 1_000)
        .await?
        .into_iter()
        .filter(|c| ids.contains(&c.action.id))
        .collect();
    ensure!(claims.len() == times.len(), "claimed {}", claims.len());
    let each = claims.iter().map(|claim| async move {
        let delivery = Delivery {
            owner: owner.into(),
            relevancy: claim.action.conducted,
            reason: Reason::new(ReasonKind::Follows, "poster"),
        };
        let written = claim
            .finish(store, now, std::slice::from_ref(&delivery))
            .await?;
        ensure!(written.len() == 1, "{written:?}");
        Ok(())
    });
    futures_util::future::try_join_all(each).await?;
    Ok(())
}

/// The entry counts of `owner`'s buckets in `collection`, smallest first.
async fn bucket_sizes(test: &TestStore, collection: &str, owner: &str) -> Result<Vec<usize>> {
    let db = test.database().context("a MongoDB store")?;
    let buckets: Vec<Document> = db
        .collection::<Document>(collection)
        .find(doc! { "tenant": T, "owner": owner })
        .await?
        .try_collect()
        .await?;
    let mut sizes: Vec<usize> = buckets
        .iter()
        .map(|b| b.get_array("e").map(Vec::len).unwrap_or(0))
        .collect();
    sizes.sort();
    Ok(sizes)
}

async fn sized(test: &TestStore) -> Result<()> {
    let store = test.store.as_ref();
    for i in 0..7 {
        deliver(store, "one-by-one", &[1_000 + i]).await?;
    }
    ensure!(
        bucket_sizes(test, "sized_buckets", "one-by-one").await? == [1, 3, 3],
        "a full bucket is left as it is and a new one opens"
    );
    // Delivered at once: every entry lands once, no bucket takes more than
    // its size, and the feed holds them all.
    let times: Vec<i64> = (0..24).map(|i| 10_000 + i).collect();
    deliver(store, "at-once", &times).await?;
    let sizes = bucket_sizes(test, "sized_buckets", "at-once").await?;
    ensure!(sizes.iter().sum::<usize>() == 24, "{sizes:?}");
    ensure!(sizes.iter().all(|s| *s <= 3), "{sizes:?}");
    let feed = store.feed_page(T, "at-once", range(100)).await?;
    ensure!(feed.len() == 24, "{}", feed.len());
    Ok(())
}

async fn timed(test: &TestStore) -> Result<()> {
    let store = test.store.as_ref();
    let start = 20_000 * DAY;
    let times = [start + 5, start + 10, start + DAY, start + 3 * DAY + 1];
    deliver(store, "reader", &times).await?;
    ensure!(
        bucket_sizes(test, "timed_buckets", "reader").await? == [1, 1, 2],
        "one bucket per day"
    );
    Ok(())
}

#[tokio::test]
async fn sized_buckets_fill_then_open_a_new_one() {
    let Some(test) = open(TimelineLayout::SizedBuckets, "sized_buckets_fill").await else {
        return;
    };
    let result = sized(&test).await;
    test.remove().await;
    result.expect("sized buckets");
}

#[tokio::test]
async fn time_buckets_hold_a_day_each() {
    let Some(test) = open(TimelineLayout::TimeBuckets, "time_buckets_day").await else {
        return;
    };
    let result = timed(&test).await;
    test.remove().await;
    result.expect("time buckets");
}

/// The action ids of `reader`'s first page.
async fn page(store: &dyn Store, reader: &str) -> Result<Vec<ObjectId>> {
    let page = store.feed_page(T, reader, range(10)).await?;
    Ok(page.iter().map(|i| i.action_id).collect())
}

/// A river of three: `$slice` keeps the newest three, and the river is
/// complete only from the last of them; a hidden item keeps its place until
/// a compaction; a new delivery goes to the reader with a river only.
async fn rivers_keep_their_size(test: &TestStore) -> Result<()> {
    let store = test.store.as_ref();
    let reader = "r-reader";
    let building = River {
        complete_from: Position::MAX,
        touched: 1_000,
    };
    store
        .write_river(T, reader, RiverWrite::Put(building))
        .await?;
    let mut ids: Vec<ObjectId> = Vec::new();
    let mut items = Vec::new();
    for k in 0..5 {
        let a = action(T, "r-actor", 1_000 + k * 100, &[]);
        store.insert_action(&a).await?;
        ids.push(a.id);
        items.push(Backfill {
            action_id: a.id,
            relevancy: a.conducted,
            reason: Reason::new(ReasonKind::Follows, "r-actor"),
            changed: 10,
        });
    }
    store.backfill(T, reader, &items).await?;
    let complete = River {
        complete_from: Position::MIN,
        ..building
    };
    store
        .write_river(T, reader, RiverWrite::Put(complete))
        .await?;
    ensure!(
        page(store, reader).await? == [ids[4], ids[3], ids[2]],
        "the newest three"
    );
    let at = |k: usize| Position {
        relevancy: 1_000 + k as i64 * 100,
        action_id: ids[k],
    };
    let river = river_of(store, T, reader).await?.context("a river")?;
    ensure!(
        river.complete_from == at(2),
        "complete from the last kept: {river:?}"
    );
    // Hidden: out of the page, and the river still complete from there.
    store.hide_feed_item(T, reader, ids[3]).await?;
    ensure!(page(store, reader).await? == [ids[4], ids[2]]);
    let river = river_of(store, T, reader).await?.context("a river")?;
    ensure!(river.complete_from == at(2), "{river:?}");
    // A compaction drops the hidden entry's place and keeps the floor.
    store.write_river(T, reader, RiverWrite::Keep(3)).await?;
    let river = river_of(store, T, reader).await?.context("a river")?;
    ensure!(river.complete_from == at(2), "{river:?}");
    ensure!(page(store, reader).await? == [ids[4], ids[2]]);
    // A newer delivery: into the river; one to a reader without a river
    // goes into the layout.
    deliver(store, reader, &[2_000]).await?;
    deliver(store, "r-no-river", &[2_001]).await?;
    ensure!(page(store, reader).await?.len() == 3);
    ensure!(store.feed_page(T, "r-no-river", range(10)).await?.len() == 1);
    // Dropped: its items go with it.
    ensure!(store.write_river(T, reader, RiverWrite::Drop).await? == 3);
    ensure!(page(store, reader).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn rivers_keep_their_size_on_each_layout() {
    for layout in TimelineLayout::ALL {
        let Some(test) = open(layout, "rivers_size").await else {
            return;
        };
        let result = rivers_keep_their_size(&test).await;
        test.remove().await;
        result.unwrap_or_else(|e| panic!("{layout}: {e:#}"));
    }
}
