//! An export of an embedded data directory that a server is writing: read
//! beside it, as of one moment.

use std::sync::Arc;

use riverfeed::archive_cmd::{self, ExportArgs, Line};
use riverfeed::model::{EdgeKind, FanOutState, ReasonKind};
use riverfeed::store::embedded::EmbeddedStore;
use riverfeed::store::{Archive, Graph, Record, Store, StoreSettings, Timelines};
use tokio::sync::watch;

use super::{deliver_to, page, status, LEASE, NOW, T, WORKER};
use crate::common::HeldFanOut;

/// While one task records ann's actions one after another (each inserted,
/// then fanned out to her and her follower bob in a second step), `export`
/// reads the data directory the store holds. The file holds the first
/// actions written and none after a gap, each whole: an action's feed
/// items are there exactly when its fan-out is done. Imported into a fresh
/// store, bob's feed is the delivered ones, newest first, and the pending
/// fan-out is still to do. The writer goes on after the export.
#[tokio::test]
async fn a_live_store_exports_as_of_one_moment() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path()).expect("store"));
    store
        .set_edge(T, EdgeKind::Follows, "bob", "ann", true)
        .await
        .expect("bob follows ann");
    let (written, mut seen) = watch::channel(0usize);
    let (stop, stopped) = watch::channel(false);
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut n = 0;
            while !*stopped.borrow() {
                let action = status(T, "ann", NOW + n as i64, &[]);
                store.insert_action(&action).await?;
                for claim in HeldFanOut::claim(&*store, WORKER, NOW, LEASE, 10).await? {
                    let at = claim.action.conducted;
                    let items = [
                        deliver_to("ann", at, ReasonKind::Own, "ann"),
                        deliver_to("bob", at, ReasonKind::Follows, "ann"),
                    ];
                    claim.finish(&*store, NOW, &items).await?;
                }
                n += 1;
                written.send_replace(n);
            }
            riverfeed::store::StoreResult::Ok(n)
        })
    };
    seen.wait_for(|n| *n >= 20).await.expect("writing");

    let out = dir.path().join("live.jsonl");
    let args = ExportArgs {
        tenant: None,
        out: out.clone(),
    };
    let url = format!("embedded:{}", dir.path().display());
    let tally = archive_cmd::run_export(&args, &url, &StoreSettings::default())
        .await
        .expect("a store in use exports");
    let after = *seen.borrow_and_update();
    seen.wait_for(|n| *n > after).await.expect("still writing");
    stop.send_replace(true);
    let total = writer.await.expect("writer").expect("writes");

    let text = std::fs::read_to_string(&out).expect("export file");
    let lines: Vec<_> = text
        .lines()
        .enumerate()
        .map(|(i, line)| archive_cmd::parse_line(line, i as u64 + 1).expect("a line"))
        .collect();
    let (end, records) = lines.split_last().expect("an end line");
    let records: Vec<Record> = records
        .iter()
        .map(|line| match line {
            Line::Record(record) => record.clone(),
            other => panic!("{other:?} among the records (this store drew no cursor key)"),
        })
        .collect();
    assert_eq!(
        end,
        &Line::End {
            records: tally.total()
        }
    );
    assert_eq!(records.len() as u64, tally.total());
    let mut actions: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Action { action } => Some(action.clone()),
            _ => None,
        })
        .collect();
    actions.sort_by_key(|a| a.conducted);
    let k = actions.len();
    assert!(
        k >= 20 && k < total,
        "{k} of {total} actions, taken mid-burst"
    );
    for (n, action) in actions.iter().enumerate() {
        assert_eq!(action.conducted, NOW + n as i64, "no gap before the moment");
    }
    let items = |action: &riverfeed::model::Action| {
        records
            .iter()
            .filter(|r| matches!(r, Record::FeedItem { item, .. } if item.action_id == action.id))
            .count()
    };
    let done: Vec<_> = actions
        .iter()
        .filter(|a| a.fan_out.state == FanOutState::Done)
        .collect();
    assert!(done.len() + 1 >= k, "at most the last one is still pending");
    for action in &actions {
        let expected = if action.fan_out.state == FanOutState::Done {
            2
        } else {
            0
        };
        assert_eq!(items(action), expected, "each action whole");
    }

    let target = EmbeddedStore::open(&dir.path().join("target")).expect("target store");
    target.import(&records).await.expect("imported");
    let feed = target
        .feed_page(T, "bob", page(1_000))
        .await
        .expect("bob's feed");
    let ids: Vec<_> = feed.iter().map(|i| i.action_id).collect();
    let mut newest_first: Vec<_> = done.iter().map(|a| a.id).collect();
    newest_first.reverse();
    assert_eq!(ids, newest_first, "bob's feed is the snapshot's");
    let pending = HeldFanOut::claim(&target, WORKER, NOW, LEASE, 10)
        .await
        .expect("claim");
    assert_eq!(
        pending.len(),
        k - done.len(),
        "the pending fan-out is still to do"
    );
}
