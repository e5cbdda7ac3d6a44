//! Records: values kept by key under a version, on which cuts, celebrities,
//! inboxes and the deployment's values are written.

use anyhow::{ensure, Result};
use riverfeed::store::{RecordKind, Store, Stored};

use super::T;

fn keys(of: &[(String, Stored)]) -> Vec<&str> {
    of.iter().map(|(k, _)| k.as_str()).collect()
}

/// A record is written over the version it was read at and no other: the
/// first over none (version 1), each next one higher. Reads by key answer
/// in the keys' order, with `None` for a key not stored; reads by prefix
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

    let read = store
        .records(cut, T, &[b.clone(), "nobody".into(), a.clone()])
        .await?;
    let expected = [
        Some(Stored {
            version: 2,
            body: b"b2".to_vec(),
        }),
        None,
        Some(Stored {
            version: 2,
            body: b"a2".to_vec(),
        }),
    ];
    ensure!(read == expected, "by key, in order: {read:?}");
    let under = store.records_under(cut, T, &format!("ann{sep}")).await?;
    ensure!(
        keys(&under) == [a.as_str(), b.as_str()],
        "by prefix: {under:?}"
    );
    let all = store.records_under(cut, T, "").await?;
    ensure!(keys(&all).len() == 3, "the kind's, this tenant's: {all:?}");

    ensure!(
        !store.put_record(cut, T, &b, None, Some(1)).await?,
        "a removal over a version gone"
    );
    ensure!(store.put_record(cut, T, &b, None, Some(2)).await?);
    ensure!(store.put_record(cut, T, &a, None, None).await?);
    let left = store.records_under(cut, T, "").await?;
    ensure!(keys(&left) == [c.as_str()], "removed: {left:?}");
    ensure!(
        store
            .put_record(cut, T, &b, Some(b"b".to_vec()), Some(0))
            .await?,
        "written again from none"
    );
    let again = store.records(cut, T, std::slice::from_ref(&b)).await?;
    ensure!(again[0].as_ref().map(|s| s.version) == Some(1), "{again:?}");
    Ok(())
}
