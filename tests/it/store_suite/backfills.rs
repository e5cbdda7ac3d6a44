//! Cases of backfills: actions put into one reader's feed outside a
//! fan-out (a new follow's, a river built), and what they do to items the
//! reader holds already.

use anyhow::{ensure, Result};
use riverfeed::model::{Action, ObjectId, Reason, ReasonKind, Stamp};
use riverfeed::store::prelude::*;
use riverfeed::store::{Backfill, Removal};

use super::{action, range, T};

/// A backfill puts actions into one reader's feed: in place by relevancy,
/// once, never over an item the reader has or hid, never for an action
/// hidden or deleted.
pub(super) async fn backfills(store: &dyn Store) -> Result<()> {
    let reader = "k-kim";
    let fill = |a: &Action, changed: i64| Backfill {
        action_id: a.id,
        relevancy: a.conducted,
        reason: Reason::new(ReasonKind::Follows, &a.actor_id),
        changed,
    };
    let [old, mid, new, hidden, deleted, had, hid] =
        [1_000, 2_000, 3_000, 2_500, 2_600, 2_700, 2_800].map(|t| action(T, "k-karl", t, &[]));
    for a in [&old, &mid, &new, &hidden, &deleted, &had, &hid] {
        store.insert_action(a).await?;
    }
    // The reader already has one (from an earlier backfill) and hid another.
    let earlier = store
        .backfill(T, reader, &[fill(&had, 10), fill(&hid, 10)])
        .await?;
    ensure!(earlier.len() == 2, "earlier: {earlier:?}");
    store.hide_feed_item(T, reader, hid.id).await?;
    store.remove_action(T, hidden.id, Removal::Hide).await?;
    store.remove_action(T, deleted.id, Removal::Delete).await?;

    let asked = [&new, &hidden, &deleted, &had, &hid, &mid, &old].map(|a| fill(a, 50));
    let written = store.backfill(T, reader, &asked).await?;
    let ids: Vec<ObjectId> = written.iter().map(|i| i.action_id).collect();
    ensure!(ids == [new.id, mid.id, old.id], "written: {ids:?}");
    ensure!(
        written.iter().all(|i| i.owner == reader && i.changed == 50),
        "owner and stamp: {written:?}"
    );
    let feed: Vec<ObjectId> = store
        .feed_page(T, reader, range(10))
        .await?
        .iter()
        .map(|i| i.action_id)
        .collect();
    ensure!(
        feed == [new.id, had.id, mid.id, old.id],
        "in place by relevancy: {feed:?}"
    );
    let changes = store
        .feed_changes(
            T,
            reader,
            Stamp {
                changed: 49,
                action_id: ObjectId::from_bytes([0; 12]),
            },
            10,
        )
        .await?;
    ensure!(
        changes.len() == 3,
        "the backfill shows as changes: {changes:?}"
    );
    ensure!(
        store
            .backfill(T, reader, &asked.map(|b| Backfill { changed: 60, ..b }))
            .await?
            .is_empty(),
        "a second backfill writes nothing"
    );
    ensure!(
        store.feed_page(T, "k-other", range(10)).await?.is_empty(),
        "only the reader's feed"
    );
    Ok(())
}

/// A backfill over an item the reader holds keeps it in its place; a
/// reason a scope gave it (a team action since widened to `PUBLIC`)
/// becomes the backfill's, since that scope no longer applies; another
/// edge's reason stays, and so does a bump's.
pub(super) async fn backfills_give_stale_scope_reasons(store: &dyn Store) -> Result<()> {
    let reader = "s-sue";
    let [widened, befriended, bumped] = [1_000, 2_000, 3_000].map(|t| action(T, "s-sam", t, &[]));
    for a in [&widened, &befriended, &bumped] {
        store.insert_action(a).await?;
    }
    let held = |a: &Action, reason: Reason| Backfill {
        action_id: a.id,
        relevancy: a.conducted,
        reason,
        changed: 10,
    };
    let mut raised = Reason::new(ReasonKind::Bumped, "s-sam");
    raised.bump = Some(riverfeed::model::Bump {
        rule: riverfeed::model::BumpRule::Participated,
        by: "s-sid".into(),
        at: 5,
    });
    let earlier = [
        held(&widened, Reason::new(ReasonKind::Team, "s-sam")),
        held(&befriended, Reason::new(ReasonKind::Friend, "s-sam")),
        held(&bumped, raised.clone()),
    ];
    ensure!(store.backfill(T, reader, &earlier).await?.len() == 3);
    let follows = Reason::new(ReasonKind::Follows, "s-sam");
    let asked = [&widened, &befriended, &bumped].map(|a| Backfill {
        changed: 20,
        ..held(a, follows.clone())
    });
    let written = store.backfill(T, reader, &asked).await?;
    ensure!(written.is_empty(), "nothing new is written: {written:?}");
    let feed: Vec<(ObjectId, i64, Reason)> = store
        .feed_page(T, reader, range(10))
        .await?
        .into_iter()
        .map(|i| (i.action_id, i.relevancy, i.reason))
        .collect();
    let expected = vec![
        (bumped.id, bumped.conducted, raised),
        (
            befriended.id,
            befriended.conducted,
            Reason::new(ReasonKind::Friend, "s-sam"),
        ),
        (widened.id, widened.conducted, follows),
    ];
    ensure!(feed == expected, "reasons: {feed:?}");
    Ok(())
}
