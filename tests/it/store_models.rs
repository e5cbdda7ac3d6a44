//! Conformance cases for what the feed models keep beside the timelines:
//! edges among many readers, cuts, celebrities, many outboxes at once,
//! materialised lookups with tombstones for pulled items, and rivers.

use anyhow::{ensure, Context, Result};
use riverfeed::model::{EdgeKind, ObjectId, Position, Reason, ReasonKind};
use riverfeed::store::prelude::*;
use riverfeed::store::{Backfill, Cut, FeedRange, River};

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
    // An edge ends keeping its history: the same cut, now with an end.
    let kept = Cut {
        until: Some(began),
        ..later
    };
    store.set_cut(T, "m-ann", &kept).await?;
    let cuts = store.cuts(T, "m-ann").await?;
    ensure!(cuts == vec![kept], "kept: {cuts:?}");
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
    let reads: Vec<(String, FeedRange)> = by_actor
        .iter()
        .map(|(actor, _)| (actor.clone(), range(3)))
        .chain([("mo-none".to_string(), range(3))])
        .collect();
    let got = store.outboxes(T, &reads).await?;
    ensure!(got.len() == reads.len(), "one answer per read");
    for ((actor, all), answer) in by_actor.iter().zip(&got) {
        let want: Vec<Position> = all.iter().copied().take(3).collect();
        ensure!(*answer == want, "{actor}: {answer:?}");
    }
    ensure!(got.last().is_some_and(|a| a.is_empty()));
    // Each read keeps its own range.
    let bounded = store
        .outboxes(
            T,
            &[(
                "mo-6".to_string(),
                FeedRange {
                    newer_than: Some(by_actor[5].1[2]),
                    ..range(10)
                },
            )],
        )
        .await?;
    ensure!(bounded[0] == by_actor[5].1[..2], "newer than: {bounded:?}");
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
