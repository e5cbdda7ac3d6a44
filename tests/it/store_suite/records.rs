//! Records (values kept by key under a version, on which cuts, celebrities,
//! inboxes, groups' kinds and the deployment's values are written) and
//! relations (kept from both ends, on which the graph is written).

use anyhow::{ensure, Result};
use riverfeed::model::EdgeKind;
use riverfeed::store::{
    Change, Direction, Keys, Others, RecordKind, Records, Related, Relation, Store, Stored,
};

use super::T;

fn keys(of: &[(String, Stored)]) -> Vec<&str> {
    of.iter().map(|(k, _)| k.as_str()).collect()
}

/// A record is written over the version it was read at and no other: the
/// first over none (version 1), each next one higher. Reads by key answer
/// in the keys' order, leaving out a key not stored; reads by prefix
/// list the keys under it in order, and no more (not `ann2`'s under
/// `ann`'s prefix, nor another kind's or tenant's). A removal under a lost
/// version removes nothing.
pub(super) async fn records_under_versions(store: &dyn Store) -> Result<()> {
    let sep = '\u{1f}';
    let (cut, inbox) = (RecordKind::Cut, RecordKind::Inbox);
    let (a, b, c) = (
        format!("ann{sep}x"),
        format!("ann{sep}y"),
        format!("ann2{sep}x"),
    );
    ensure!(
        store
            .put_record(cut, T, &b, Some(b"b1".to_vec()), Some(0))
            .await?
    );
    ensure!(
        !store
            .put_record(cut, T, &b, Some(b"b?".to_vec()), Some(0))
            .await?,
        "a second first write loses"
    );
    ensure!(
        store
            .put_record(cut, T, &b, Some(b"b2".to_vec()), Some(1))
            .await?
    );
    ensure!(
        !store
            .put_record(cut, T, &b, Some(b"b?".to_vec()), Some(1))
            .await?,
        "a write over a version gone loses"
    );
    ensure!(
        store
            .put_record(cut, T, &a, Some(b"a1".to_vec()), None)
            .await?
    );
    ensure!(
        store
            .put_record(cut, T, &a, Some(b"a2".to_vec()), None)
            .await?
    );
    ensure!(
        store
            .put_record(cut, T, &c, Some(b"c1".to_vec()), None)
            .await?
    );
    ensure!(
        store
            .put_record(inbox, T, &a, Some(b"i".to_vec()), None)
            .await?
    );
    ensure!(
        store
            .put_record(cut, "other", &a, Some(b"o".to_vec()), None)
            .await?
    );

    let asked = [b.clone(), "nobody".into(), a.clone()];
    let read = store.records(cut, T, Keys::These(&asked)).await?;
    let expected = [
        (
            b.clone(),
            Stored {
                version: 2,
                body: b"b2".to_vec(),
            },
        ),
        (
            a.clone(),
            Stored {
                version: 2,
                body: b"a2".to_vec(),
            },
        ),
    ];
    ensure!(read == expected, "by key, in order: {read:?}");
    let under = store
        .records(cut, T, Keys::Under(&format!("ann{sep}")))
        .await?;
    ensure!(
        keys(&under) == [a.as_str(), b.as_str()],
        "by prefix: {under:?}"
    );
    let all = store.records(cut, T, Keys::Under("")).await?;
    ensure!(keys(&all).len() == 3, "the kind's, this tenant's: {all:?}");
    let page = |after: Option<&'static str>, limit| Keys::Page {
        under: "",
        after,
        limit,
    };
    let first = store.records(cut, T, page(None, 2)).await?;
    ensure!(keys(&first) == keys(&all)[..2], "a first page: {first:?}");
    let after = first[1].0.clone();
    let rest = store
        .records(
            cut,
            T,
            Keys::Page {
                under: "",
                after: Some(&after),
                limit: 2,
            },
        )
        .await?;
    ensure!(
        keys(&rest) == keys(&all)[2..],
        "the rest, past it: {rest:?}"
    );
    ensure!(store.records(cut, T, page(None, 0)).await?.is_empty());
    let under_ann = format!("ann{sep}");
    let past_all = store
        .records(
            cut,
            T,
            Keys::Page {
                under: &under_ann,
                after: Some("zzz"),
                limit: 5,
            },
        )
        .await?;
    ensure!(past_all.is_empty(), "past the prefix: {past_all:?}");
    let before_all = store
        .records(
            cut,
            T,
            Keys::Page {
                under: &under_ann,
                after: Some("a"),
                limit: 5,
            },
        )
        .await?;
    ensure!(
        keys(&before_all) == [a.as_str(), b.as_str()],
        "an `after` before the prefix reads from its start: {before_all:?}"
    );

    ensure!(
        !store.put_record(cut, T, &b, None, Some(1)).await?,
        "a removal over a version gone"
    );
    ensure!(store.put_record(cut, T, &b, None, Some(2)).await?);
    ensure!(store.put_record(cut, T, &a, None, None).await?);
    let left = store.records(cut, T, Keys::Under("")).await?;
    ensure!(keys(&left) == [c.as_str()], "removed: {left:?}");
    ensure!(
        store
            .put_record(cut, T, &b, Some(b"b".to_vec()), Some(0))
            .await?,
        "written again from none"
    );
    let again = store.record(cut, T, &b).await?;
    ensure!(again.map(|s| s.version) == Some(1), "written again at 1");
    Ok(())
}

/// Relations are kept from both ends. A change answers with what stood
/// before (the attributes, or none); a batch of changes is made whole. Reads
/// from many ids come ordered by id then other end, each tagged with the
/// index of its id, after `after` and up to `limit` in all; reads among
/// given others answer those that stand, in the order given. Relations,
/// tenants and directions do not mix.
pub(super) async fn relations_from_both_ends(store: &dyn Store) -> Result<()> {
    let follows = Relation::Edge(EdgeKind::Follows);
    let change = |relation, from: &str, to: &str, attrs: Option<&[u8]>| Change {
        relation,
        from: from.into(),
        to: to.into(),
        attrs: attrs.map(<[u8]>::to_vec),
    };
    let before = store
        .relate(
            T,
            &[
                change(follows, "ann", "cy", Some(b"")),
                change(follows, "ann", "bob", Some(b"")),
                change(follows, "dan", "bob", Some(b"")),
                change(Relation::Member, "ann", "g1", Some(b"m1")),
            ],
        )
        .await?;
    ensure!(before == [None, None, None, None], "{before:?}");
    let before = store
        .relate(T, &[change(Relation::Member, "ann", "g1", Some(b"m2"))])
        .await?;
    ensure!(before == [Some(b"m1".to_vec())], "{before:?}");
    store
        .relate("other", &[change(follows, "ann", "eve", Some(b""))])
        .await?;

    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let after = |after, limit| Others::After { after, limit };
    let pairs = |found: Vec<Related>| {
        found
            .into_iter()
            .map(|r| (r.of, r.other))
            .collect::<Vec<_>>()
    };
    let out = store
        .related(
            T,
            follows,
            Direction::Out,
            &ids(&["dan", "ann"]),
            after(None, 10),
        )
        .await?;
    ensure!(
        pairs(out) == [(1, "bob".into()), (1, "cy".into()), (0, "bob".into())],
        "ordered by id, then the other end"
    );
    let out = store
        .related(
            T,
            follows,
            Direction::Out,
            &ids(&["ann"]),
            after(Some("bob"), 10),
        )
        .await?;
    ensure!(pairs(out) == [(0, "cy".into())], "after");
    let into = store
        .related(T, follows, Direction::In, &ids(&["bob"]), after(None, 1))
        .await?;
    ensure!(pairs(into) == [(0, "ann".into())], "limit");
    let members = store
        .related(
            T,
            Relation::Member,
            Direction::In,
            &ids(&["g1"]),
            after(None, 10),
        )
        .await?;
    ensure!(
        members
            == [Related {
                of: 0,
                other: "ann".into(),
                attrs: b"m2".to_vec(),
            }],
        "{members:?}"
    );

    let others = ids(&["eve", "dan", "ann"]);
    let among = store
        .related(
            T,
            follows,
            Direction::In,
            &ids(&["bob", "cy"]),
            Others::Among(&others),
        )
        .await?;
    ensure!(
        pairs(among) == [(0, "dan".into()), (0, "ann".into()), (1, "ann".into())],
        "among, in the order asked"
    );
    let others = ids(&["eve"]);
    let among = store
        .related(
            T,
            follows,
            Direction::Out,
            &ids(&["ann"]),
            Others::Among(&others),
        )
        .await?;
    ensure!(among.is_empty(), "another tenant's relation: {among:?}");

    let before = store
        .relate(
            T,
            &[
                change(follows, "ann", "bob", None),
                change(follows, "ann", "nobody", None),
            ],
        )
        .await?;
    ensure!(before == [Some(Vec::new()), None], "{before:?}");
    let into = store
        .related(T, follows, Direction::In, &ids(&["bob"]), after(None, 10))
        .await?;
    ensure!(pairs(into) == [(0, "dan".into())], "both ends go");
    Ok(())
}
