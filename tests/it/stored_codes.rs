//! Codes read back strictly: a record holding a code the store does not know
//! (planted with a raw write, as corruption or a newer release would leave
//! it) fails its read with an error naming the record and the code, never
//! reads as some default. (The embedded store's case plants raw RocksDB
//! values, from inside the crate: `store::embedded::users`'s tests.)

use futures_util::TryStreamExt;
use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{doc, oid::ObjectId, Binary, Document};
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
    // A membership of a group kind no release wrote (code 9).
    let attrs = Binary {
        subtype: BinarySubtype::Generic,
        bytes: vec![9, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    };
    db.collection::<Document>("relations")
        .insert_one(doc! {
            "_id": "member\u{1f}acme\u{1f}bob\u{1f}g2",
            "t": "acme", "r": "member", "f": "bob", "o": "g2", "a": attrs,
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
    for named in ["membership acme/bob/g2", "group kind code 9"] {
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
        err.message.contains("membership acme/bob/g2"),
        "{}",
        err.message
    );
    drop_database(&db).await;
}
