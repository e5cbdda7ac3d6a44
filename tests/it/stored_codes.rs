//! Codes read back strictly: a record holding a code the store does not know
//! (planted with a raw write, as corruption or a newer release would leave
//! it) fails its read with an error naming the record and the code, never
//! reads as some default. (The embedded store's case plants raw RocksDB
//! values, from inside the crate: `store::embedded::graph`'s tests.)

use futures_util::TryStreamExt;
use mongodb::bson::{doc, oid::ObjectId, Document};
use riverfeed::model::{Group, GroupKind, MembershipRole};
use riverfeed::store::mongo::MongoStore;
use riverfeed::store::prelude::*;
use riverfeed::store::{Archive, ErrorKind};

use crate::common::{drop_database, mongodb_database_uri, mongodb_uri, test_store_settings};

#[tokio::test]
async fn mongodb_unknown_codes_are_corrupt_records_named_with_their_code() {
    let Some(base) = mongodb_uri() else {
        return;
    };
    let url = mongodb_database_uri(&base, "stored_codes");
    let store = MongoStore::connect(&url, &test_store_settings().mongo)
        .await
        .expect("connects");
    let team = Group {
        id: "g1".into(),
        kind: GroupKind::Team,
    };
    store
        .join_group("acme", &team, "bob", MembershipRole::Member, 5)
        .await
        .expect("joins");
    let db = store.database().clone();
    let membership = ObjectId::new();
    db.collection::<Document>("memberships")
        .insert_one(doc! {
            "_id": membership, "tenant": "acme", "groupId": "g2", "userId": "bob",
            "kind": "SQUAD", "role": "MEMBER", "since": 0_i64,
        })
        .await
        .expect("planted");
    db.collection::<Document>("jobs")
        .insert_one(doc! {
            "_id": ObjectId::new(), "kind": "cleanup", "tenant": "acme",
            "key": "alice\u{1f}mutes\u{1f}bob", "payload": "null", "queued": 0_i64,
            "until": i64::MIN,
        })
        .await
        .expect("planted");

    let err = store.memberships("acme", "bob").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    for named in [
        "memberships",
        &membership.to_hex(),
        "group kind",
        "\"SQUAD\"",
    ] {
        assert!(err.message.contains(named), "{named} in: {}", err.message);
    }
    let err = riverfeed::timeline::unfollow::pending(&store, "acme", "alice")
        .await
        .unwrap_err();
    for named in ["cleanup job", "alice", "unfollow kind", "\"mutes\""] {
        assert!(err.message.contains(named), "{named} in: {}", err.message);
    }
    // An export meets the membership too, and stops there.
    let err = store
        .export(Some("acme"))
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert!(
        err.message.contains(&membership.to_hex()),
        "{}",
        err.message
    );
    drop_database(&db).await;
}
