//! Cases of foreign ids: one action per actor and foreign id, held by the
//! backend however many inserts race.

use anyhow::{ensure, Context, Result};
use futures_util::future::join_all;
use futures_util::StreamExt;
use riverfeed::model::{Action, Foreign};
use riverfeed::store::prelude::*;
use riverfeed::store::QueuedRead;
use riverfeed::store::{Inserted, JobKind, Record, Removal};

use super::{action, range, OTHER, T};

/// `actor`'s action under foreign id `id`, with a digest of its own.
fn under(tenant: &str, actor: &str, id: &str, conducted: i64) -> Action {
    let mut a = action(tenant, actor, conducted, &["f-ref"]);
    a.foreign = Some(Foreign::of(id.into(), &a, true));
    a
}

/// The ids of `actor`'s stored actions, newest first.
async fn outbox(store: &dyn Store, tenant: &str, actor: &str) -> Result<Vec<String>> {
    let read = [(riverfeed::store::Outbox::Actor(actor.into()), range(100))];
    let found = store.outboxes(tenant, &read).await?;
    Ok(found
        .into_iter()
        .flatten()
        .map(|p| p.position.action_id.to_hex())
        .collect())
}

pub(super) async fn foreign_ids(store: &dyn Store) -> Result<()> {
    let first = under(T, "f-bob", "order-1", 1_000);
    ensure!(store.insert_action(&first).await? == Inserted::New);

    // A second action under the id: the first answers, nothing is written.
    let second = under(T, "f-bob", "order-1", 2_000);
    let answer = store.insert_action(&second).await?;
    ensure!(
        answer == Inserted::Existing(Box::new(first.clone())),
        "the first action answers: {answer:?}"
    );
    ensure!(store.get_actions(T, &[second.id]).await?.is_empty());
    ensure!(
        store
            .queued(JobKind::FanOut, T, QueuedRead::under(&second.id.to_hex()))
            .await?
            .is_empty(),
        "no fan-out is queued for the second"
    );
    ensure!(store.slice(T, "f-ref", None, 10).await? == [first.id]);

    // The id is the actor's, in its tenant; actions without one are many.
    for other in [
        under(T, "f-carol", "order-1", 3_000),
        under(OTHER, "f-bob", "order-1", 3_000),
        action(T, "f-bob", 4_000, &[]),
        action(T, "f-bob", 5_000, &[]),
    ] {
        let answer = store.insert_action(&other).await?;
        ensure!(answer == Inserted::New, "{other:?}: {answer:?}");
    }

    // Deleted, its id is free again.
    store.remove_action(T, first.id, Removal::Delete).await?;
    let third = under(T, "f-bob", "order-1", 6_000);
    ensure!(store.insert_action(&third).await? == Inserted::New);
    let again = store
        .insert_action(&under(T, "f-bob", "order-1", 7_000))
        .await?;
    ensure!(
        again == Inserted::Existing(Box::new(third.clone())),
        "{again:?}"
    );
    // An export carries it.
    let exported: Vec<_> = store.export(Some(T)).collect().await;
    let carried = exported.iter().any(|record| {
        matches!(record, Ok(Record::Action { action }) if action.id == third.id
            && action.foreign == third.foreign)
    });
    ensure!(carried, "the export carries the foreign id");
    // Hidden, it still holds it.
    store.remove_action(T, third.id, Removal::Hide).await?;
    let hidden = store
        .insert_action(&under(T, "f-bob", "order-1", 8_000))
        .await?;
    ensure!(
        matches!(&hidden, Inserted::Existing(a) if a.id == third.id && a.hidden),
        "{hidden:?}"
    );
    Ok(())
}

pub(super) async fn racing_foreign_ids(store: &dyn Store) -> Result<()> {
    let racers: Vec<Action> = (0..16)
        .map(|i| under(T, "r-bob", "launch", 1_000 + i))
        .collect();
    let answers = join_all(racers.iter().map(|a| store.insert_action(a))).await;
    let answers = answers.into_iter().collect::<Result<Vec<_>, _>>()?;
    let stored: Vec<_> = racers
        .iter()
        .zip(&answers)
        .filter(|(_, answer)| **answer == Inserted::New)
        .map(|(racer, _)| racer.id)
        .collect();
    ensure!(
        stored.len() == 1,
        "one insert of {} stores: {stored:?}",
        racers.len()
    );
    let answered_others = answers.iter().all(|answer| match answer {
        Inserted::New => true,
        Inserted::Existing(a) => a.id == stored[0],
    });
    ensure!(
        answered_others,
        "the others answer the one stored: {answers:?}"
    );
    ensure!(outbox(store, T, "r-bob").await? == [stored[0].to_hex()]);
    Ok(())
}

/// An action or a comment stored again under its own id (a request's
/// retry, drawing the ids its first attempt drew) is written once: the
/// action stored answers, the comment is counted and bumped once.
pub(super) async fn ids_stored_again(store: &dyn Store) -> Result<()> {
    let first = action(T, "i-bob", 1_000, &["i-ref"]);
    ensure!(store.insert_action(&first).await? == Inserted::New);
    let mut again = first.clone();
    again.conducted = 2_000;
    let answer = store.insert_action(&again).await?;
    ensure!(
        answer == Inserted::Existing(Box::new(first.clone())),
        "the stored action answers: {answer:?}"
    );
    ensure!(
        store
            .queued(JobKind::FanOut, T, QueuedRead::under(&first.id.to_hex()))
            .await?
            .len()
            == 1,
        "one fan-out is queued"
    );

    let comment = riverfeed::model::Comment {
        id: riverfeed::model::ObjectId::new(),
        action_id: first.id,
        author_id: "i-carol".into(),
        text: "once".into(),
        created: 3_000,
    };
    ensure!(store.add_comment(T, &comment).await?.comments == 1);
    ensure!(store.add_comment(T, &comment).await?.comments == 1);
    let stored = store.comments(T, first.id, None, 10).await?;
    ensure!(stored == [comment.clone()], "{stored:?}");
    let counted = store.get_actions(T, &[first.id]).await?;
    ensure!(counted.first().map(|a| a.counts.comments) == Some(1));
    Ok(())
}

/// An import of an action the store holds replaces it whole: it is found
/// where the archive's says (its slices, its outbox place) and nowhere
/// the replaced one was.
pub(super) async fn imports_replace_an_action_whole(store: &dyn Store) -> Result<()> {
    let held = action(T, "m-bob", 1_000, &["m-old"]);
    ensure!(store.insert_action(&held).await? == Inserted::New);
    let mut archived = held.clone();
    archived.ref_ids = vec!["m-new".into()];
    archived.conducted = 2_000;
    store
        .import(&[Record::Action {
            action: archived.clone(),
        }])
        .await?;
    let old_slice = store.slice(T, "m-old", None, 10).await?;
    ensure!(old_slice.is_empty(), "left in its old slice: {old_slice:?}");
    ensure!(store.slice(T, "m-new", None, 10).await? == [held.id]);
    let places = outbox(store, T, "m-bob").await?;
    ensure!(places == [held.id.to_hex()], "one outbox place: {places:?}");
    let stored = store.get_actions(T, &[held.id]).await?;
    ensure!(
        stored.first().map(|a| a.conducted) == Some(2_000),
        "{stored:?}"
    );
    Ok(())
}

/// An import that meets a foreign id its actor recorded under another
/// action since the archive was checked (a record racing it) is refused,
/// `INVALID_INPUT`, and leaves one action under the id: the recorded one.
pub(super) async fn imports_racing_records(store: &dyn Store) -> Result<()> {
    let recorded = under(T, "k-bob", "race-1", 1_000);
    ensure!(store.insert_action(&recorded).await? == Inserted::New);
    let archived = under(T, "k-bob", "race-1", 2_000);
    let refused = store
        .import(&[Record::Action {
            action: archived.clone(),
        }])
        .await;
    ensure!(
        matches!(&refused, Err(err) if err.kind == riverfeed::store::ErrorKind::InvalidInput),
        "refused: {refused:?}"
    );
    ensure!(store.get_actions(T, &[archived.id]).await?.is_empty());
    let under_it = store
        .foreign_actions(T, &[("k-bob".into(), "race-1".into())])
        .await?;
    ensure!(
        under_it.iter().map(|a| a.id).collect::<Vec<_>>() == [recorded.id],
        "{under_it:?}"
    );
    ensure!(outbox(store, T, "k-bob").await? == [recorded.id.to_hex()]);
    Ok(())
}

/// An import of an action the store holds replaces what hangs off it too:
/// the feed items and comments the archive does not carry go, in the same
/// import, and those it carries stay.
pub(super) async fn imports_drop_what_the_archive_lacks(store: &dyn Store) -> Result<()> {
    use riverfeed::model::{Comment, FeedItem, ObjectId, Reason, ReasonKind};
    use riverfeed::store::ItemRecord;

    let held = action(T, "l-bob", 1_000, &["l-ref"]);
    let comment = |text: &str, created| Comment {
        id: ObjectId::new(),
        action_id: held.id,
        author_id: "l-dana".into(),
        text: text.into(),
        created,
    };
    let (kept, dropped) = (comment("kept", 1_100), comment("dropped", 1_200));
    let item = |owner: &str| Record::FeedItem {
        tenant: T.into(),
        item: ItemRecord::visible(FeedItem {
            owner: owner.into(),
            action_id: held.id,
            relevancy: 1_000,
            reason: Reason::new(ReasonKind::Follows, "l-bob"),
            changed: 1_000,
            copy: None,
        }),
    };
    let commented = |c: &Comment| Record::Comment {
        tenant: T.into(),
        comment: c.clone(),
        bump_queued: false,
    };
    let mut before = held.clone();
    before.counts.comments = 2;
    store
        .import(&[
            Record::Action { action: before },
            commented(&kept),
            commented(&dropped),
            item("l-ann"),
            item("l-carl"),
        ])
        .await?;
    ensure!(store.comments(T, held.id, None, 10).await?.len() == 2);

    let mut archived = held.clone();
    archived.counts.comments = 1;
    store
        .import(&[
            Record::Action { action: archived },
            commented(&kept),
            item("l-ann"),
        ])
        .await?;
    let comments = store.comments(T, held.id, None, 10).await?;
    ensure!(
        comments.iter().map(|c| c.id).collect::<Vec<_>>() == [kept.id],
        "only the archive's comment: {comments:?}"
    );
    let ann = store.feed_page(T, "l-ann", range(10)).await?;
    ensure!(ann.iter().map(|i| i.action_id).collect::<Vec<_>>() == [held.id]);
    let carl = store.feed_page(T, "l-carl", range(10)).await?;
    ensure!(carl.is_empty(), "an item the archive lacks: {carl:?}");
    let placed = store.materialised(T, "l-carl", &[held.id]).await?;
    ensure!(placed.is_empty(), "held still: {placed:?}");
    Ok(())
}

/// An archive may move a foreign id from an action the store holds to
/// another, the new holder first: the archive as a whole holds it once.
pub(super) async fn imports_move_a_foreign_id(store: &dyn Store) -> Result<()> {
    let first = under(T, "v-bob", "moved-1", 1_000);
    ensure!(store.insert_action(&first).await? == Inserted::New);
    let taker = under(T, "v-bob", "moved-1", 2_000);
    let mut gave = first.clone();
    gave.foreign = None;
    store
        .import(&[
            Record::Action {
                action: taker.clone(),
            },
            Record::Action {
                action: gave.clone(),
            },
        ])
        .await
        .context("the archive as a whole holds the id once")?;
    let under_it = store
        .foreign_actions(T, &[("v-bob".into(), "moved-1".into())])
        .await?;
    ensure!(
        under_it.iter().map(|a| a.id).collect::<Vec<_>>() == [taker.id],
        "{under_it:?}"
    );
    let stored = store.get_actions(T, &[first.id]).await?;
    ensure!(
        stored.first().is_some_and(|a| a.foreign.is_none()),
        "{stored:?}"
    );
    // A record under the id finds the action that holds it now.
    let again = under(T, "v-bob", "moved-1", 3_000);
    ensure!(store.insert_action(&again).await? == Inserted::Existing(Box::new(taker)));

    // An archive that leaves two actions under one id is refused whole.
    let one = under(T, "v-bob", "twice-1", 4_000);
    let two = under(T, "v-bob", "twice-1", 5_000);
    let refused = store
        .import(&[
            Record::Action {
                action: one.clone(),
            },
            Record::Action { action: two },
        ])
        .await;
    ensure!(
        matches!(&refused, Err(err) if err.kind == riverfeed::store::ErrorKind::InvalidInput),
        "refused: {refused:?}"
    );
    Ok(())
}
