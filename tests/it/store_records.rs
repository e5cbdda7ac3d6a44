//! Records and relations written by an earlier release in collections of
//! their own (MongoDB; the embedded store's cases are in
//! `store::embedded::records` and `store::embedded::relations`).

use anyhow::{ensure, Context};
use bson::{doc, oid::ObjectId, Binary, Document};
use riverfeed::model::{EdgeKind, Group, GroupKind, Inbox, Membership, MembershipRole, Position};
use riverfeed::store::{Cut, Direction, FeedRange, Graph, GroupFeeds, JoinOutcome, Records};

use crate::common::{concluded, earlier_database};

const T: &str = "acme";

/// A database written before records (cuts with a kept range, a celebrity,
/// an inbox, a deployment value, each where that release kept it) opens with
/// each read as it was, once moved: the earlier collections are gone and
/// the move is noted.
#[tokio::test]
async fn earlier_mongodb_records_are_moved_once() {
    let Some((url, db)) = earlier_database("records_earlier").await else {
        return;
    };
    let at = |r: i64| Position {
        relevancy: r,
        action_id: ObjectId::from_bytes([r as u8; 12]),
    };
    let position = |p: Position| doc! { "r": p.relevancy, "id": p.action_id };
    db.collection::<Document>("cuts")
        .insert_many([
            doc! {
                "tenant": T, "reader": "ann", "kind": "follows", "actor": "bob",
                "since": position(at(5)), "began": position(at(4)),
                "kept": [{
                    "since": position(at(1)), "began": position(at(2)),
                    "until": position(at(3)),
                }],
            },
            doc! {
                "tenant": T, "reader": "ann", "kind": "friend", "actor": "cy",
                "since": position(at(6)), "began": position(at(6)),
            },
        ])
        .await
        .expect("earlier cuts");
    db.collection::<Document>("celebrities")
        .insert_one(doc! { "tenant": T, "userId": "bob" })
        .await
        .expect("an earlier celebrity");
    let mut inbox = Inbox::new(T, "ann");
    inbox.seen_until = 42;
    inbox.version = 3;
    db.collection::<Inbox>("inboxes")
        .insert_one(&inbox)
        .await
        .expect("an earlier inbox");
    let value = Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: b"push".to_vec(),
    };
    db.collection::<Document>("meta")
        .insert_one(doc! { "_id": "last-model", "value": value })
        .await
        .expect("an earlier deployment value");

    let result = async {
        let store = riverfeed::store::open(&url).await?;
        let mut cuts = store.cuts(T, "ann").await?;
        cuts.sort_by_key(|c| (c.actor.clone(), c.until.is_none()));
        let cut = |kind, actor: &str, since, began, until: Option<i64>| Cut {
            kind,
            actor: actor.into(),
            since: at(since),
            began: at(began),
            until: until.map(at),
        };
        let expected = [
            cut(EdgeKind::Follows, "bob", 1, 2, Some(3)),
            cut(EdgeKind::Follows, "bob", 5, 4, None),
            cut(EdgeKind::Friend, "cy", 6, 6, None),
        ];
        ensure!(cuts == expected, "cuts: {cuts:?}");
        let users = ["bob".to_owned(), "cy".to_owned()];
        ensure!(store.celebrities(T, &users).await? == ["bob"]);
        let read = store.inbox(T, "ann").await?;
        ensure!((read.seen_until, read.version) == (42, 3), "{read:?}");
        ensure!(store.meta("last-model").await?.as_deref() == Some(&b"push"[..]));
        let collections = db.list_collection_names().await?;
        for earlier in ["cuts", "celebrities", "inboxes"] {
            ensure!(
                !collections.iter().any(|c| c == earlier),
                "{earlier} is gone: {collections:?}"
            );
        }
        let noted = db
            .collection::<Document>("meta")
            .find_one(doc! { "_id": "records" })
            .await?
            .context("the move is noted")?;
        ensure!(noted.get_i32("version")? == 1, "{noted}");
        drop(store);
        // Opened again, nothing moves twice: the inbox written since stays.
        let store = riverfeed::store::open(&url).await?;
        let mut changed = store.inbox(T, "ann").await?;
        changed.version += 1;
        ensure!(store.put_inbox(&changed).await?);
        drop(store);
        let store = riverfeed::store::open(&url).await?;
        ensure!(store.inbox(T, "ann").await?.version == 4);
        Ok(())
    }
    .await;
    concluded(&db, result).await;
}

/// A database written before relations (follows, a friendship stored both
/// ways, a group follow, a membership with its role and start, an
/// assignment, a supervisor on the user's document, a group's kind in
/// `groups`, a like in `likes`) opens with the graph read as it was: both ends of each
/// relation, memberships whole, the group's kind kept (a join of the other
/// kind is refused). The earlier collections are gone and the move noted.
#[tokio::test]
async fn earlier_mongodb_relations_are_moved_once() {
    let Some((url, db)) = earlier_database("relations_earlier").await else {
        return;
    };
    let edge = |kind: &str, from: &str, to: &str| {
        doc! { "tenant": T, "kind": kind, "from": from, "to": to }
    };
    db.collection::<Document>("edges")
        .insert_many([
            edge("follows", "ann", "bob"),
            edge("friend", "ann", "cy"),
            edge("friend", "cy", "ann"),
            edge("followsGroup", "ann", "news"),
        ])
        .await
        .expect("earlier edges");
    db.collection::<Document>("groups")
        .insert_one(doc! { "tenant": T, "groupId": "eng", "kind": "TEAM" })
        .await
        .expect("an earlier group");
    db.collection::<Document>("memberships")
        .insert_one(doc! {
            "tenant": T, "groupId": "eng", "userId": "ann",
            "kind": "TEAM", "role": "LEAD", "since": 7_i64,
        })
        .await
        .expect("an earlier membership");
    let liked = ObjectId::from_bytes([7; 12]);
    db.collection::<Document>("likes")
        .insert_one(doc! { "tenant": T, "actionId": liked, "userId": "cy" })
        .await
        .expect("a like");
    db.collection::<Document>("assignments")
        .insert_one(doc! { "tenant": T, "userId": "bob", "refId": "applicant-1" })
        .await
        .expect("an earlier assignment");
    db.collection::<Document>("users")
        .insert_many([
            doc! { "tenant": T, "userId": "ann", "name": "Ann" },
            doc! { "tenant": T, "userId": "bob", "name": null, "supervisorId": "ann" },
        ])
        .await
        .expect("earlier users");

    let result = async {
        for _ in 0..2 {
            let store = riverfeed::store::open(&url).await?;
            let (out, into) = (Direction::Out, Direction::In);
            let edges = |kind, direction, user: &'static str| {
                let store = store.clone();
                async move { store.edges(T, kind, direction, user, None, 10).await }
            };
            ensure!(edges(EdgeKind::Follows, into, "bob").await? == ["ann"]);
            ensure!(edges(EdgeKind::Friend, out, "cy").await? == ["ann"]);
            ensure!(edges(EdgeKind::Friend, out, "ann").await? == ["cy"]);
            ensure!(edges(EdgeKind::Group, into, "news").await? == ["ann"]);
            let memberships = store.memberships(T, "ann").await?;
            let expected = Membership {
                group_id: "eng".into(),
                kind: GroupKind::Team,
                role: MembershipRole::Lead,
                since: 7,
            };
            ensure!(memberships == [expected], "{memberships:?}");
            let department = Group {
                id: "eng".into(),
                kind: GroupKind::Department,
            };
            let joined = store
                .join_group(T, &department, "bob", MembershipRole::Member, 9)
                .await?;
            ensure!(
                matches!(
                    joined,
                    JoinOutcome::KindMismatch(Group {
                        kind: GroupKind::Team,
                        ..
                    })
                ),
                "{joined:?}"
            );
            let assigned = store
                .assignment(T, into, &["applicant-1".to_owned()])
                .await?;
            ensure!(assigned == [("applicant-1".into(), "bob".into())]);
            ensure!(store.supervision(T, out, "bob").await? == ["ann"]);
            ensure!(store.supervision(T, into, "ann").await? == ["bob"]);
            let users = store.get_users(T, &["ann".to_owned()]).await?;
            ensure!(users[0].name.as_deref() == Some("Ann"), "{users:?}");
            let collections = db.list_collection_names().await?;
            ensure!(store.liked(T, "cy", &[liked]).await? == [liked], "liked");
            ensure!(store.liked(T, "ann", &[liked]).await?.is_empty());
            for earlier in ["edges", "memberships", "assignments", "groups", "likes"] {
                ensure!(
                    !collections.iter().any(|c| c == earlier),
                    "{earlier} is gone: {collections:?}"
                );
            }
        }
        let noted = db
            .collection::<Document>("meta")
            .find_one(doc! { "_id": "relations" })
            .await?
            .context("the move is noted")?;
        ensure!(noted.get_i32("version")? == 2, "{noted}");
        Ok(())
    }
    .await;
    concluded(&db, result).await;
}

/// A database written before group feeds were records (a group's ring of
/// size 3 in `group_feeds`, one document per slot, its counter in
/// `group_counters`) opens with the ring read as it was, a post going on
/// from its counter; the earlier collections are gone and the move noted.
#[tokio::test]
async fn earlier_mongodb_group_feeds_are_moved_once() {
    let Some((url, db)) = earlier_database("group_feeds_earlier").await else {
        return;
    };
    let at = |r: i64| Position {
        relevancy: r,
        action_id: ObjectId::from_bytes([r as u8; 12]),
    };
    let slot = |slot: i64, n: i64, r: i64| {
        doc! { "tenant": T, "group": "g", "slot": slot, "n": n, "r": r, "id": at(r).action_id }
    };
    db.collection::<Document>("group_feeds")
        .insert_many([slot(1, 4, 4), slot(2, 2, 2), slot(0, 3, 3)])
        .await
        .expect("an earlier ring");
    db.collection::<Document>("group_counters")
        .insert_one(doc! { "tenant": T, "group": "g", "n": 4_i64 })
        .await
        .expect("an earlier counter");
    let all = FeedRange {
        older_than: None,
        newer_than: None,
        limit: 10,
        from_oldest: false,
    };
    let result = async {
        let store = riverfeed::store::open(&url).await?;
        let feed = store.group_feed(T, "g", 3, all).await?;
        ensure!(feed == [at(4), at(3), at(2)], "{feed:?}");
        ensure!(!store.post_to_group(T, "g", at(3), 3).await?, "held");
        // Post 5 takes slot 2, replacing post 2.
        ensure!(store.post_to_group(T, "g", at(5), 3).await?);
        drop(store);
        let store = riverfeed::store::open(&url).await?;
        let feed = store.group_feed(T, "g", 3, all).await?;
        ensure!(feed == [at(5), at(4), at(3)], "{feed:?}");
        let collections = db.list_collection_names().await?;
        for earlier in ["group_feeds", "group_counters"] {
            ensure!(
                !collections.iter().any(|c| c == earlier),
                "{earlier} is gone: {collections:?}"
            );
        }
        let noted = db
            .collection::<Document>("meta")
            .find_one(doc! { "_id": "groupFeeds" })
            .await?
            .context("the move is noted")?;
        ensure!(noted.get_i32("version")? == 1, "{noted}");
        Ok(())
    }
    .await;
    concluded(&db, result).await;
}
