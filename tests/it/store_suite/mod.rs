//! The store conformance suite: every backend must pass every case, and
//! every MongoDB timeline layout every case that writes or reads timelines.
//!
//! A case is `async fn case(store: &dyn Store) -> anyhow::Result<()>` on a
//! store of its own, fresh and removed afterwards; each is a test of its own,
//! so one runs alone:
//!
//! ```text
//! cargo test --test it store_suite::embedded::rivers
//! cargo test --test it store_suite::mongodb::rivers
//! cargo test --test it store_suite::sized_buckets::rivers
//! ```
//!
//! Registering a case is one line in [`store_cases!`] below: under
//! `every_backend` (it runs as `embedded::case` and `mongodb::case`) or, if it
//! writes or reads timeline entries (deliveries, feed pages, hides,
//! backfills, cleanups, rivers, tombstones), under `every_layout` (it also
//! runs as `time_buckets::case`, `sized_buckets::case` and
//! `items_with_copies::case`). The case's name names the test and its
//! MongoDB database, so it is unique across the suite and at most 37
//! characters long (checked when it compiles). Cases live in the files
//! below, by concern; a new file of cases is a `mod` line here (or a `use`
//! line for one elsewhere, such as `use crate::store_jobs;`), then
//! `store_jobs::case_name,` in a list.
//!
//! - [`graph`]: users, edges, cuts, celebrities, assignments, supervisors
//! - [`groups`]: memberships, group cleanups, group follows, group rings
//! - [`actions`]: actions, slices, outboxes, reactions, discussions,
//!   renames, expiry
//! - [`fanout`]: fan-out claims and leases, deliveries in batches
//! - [`foreign`]: one action per actor and foreign id
//! - [`timelines`]: feed ranges, hides and deletes, bumps, unfollows,
//!   tombstones, rivers
//! - [`backfills`]: backfills, and the items a reader holds already
//! - [`notices`]: notice groups, inboxes, notice jobs
//! - [`records`]: records under their versions
//! - [`rivers`]: rivers a crash left being built

mod actions;
mod backfills;
mod fanout;
mod foreign;
mod graph;
mod groups;
mod notices;
mod records;
mod rivers;
pub(crate) mod timelines;

use anyhow::{ensure, Context, Result};
use riverfeed::descriptor::Descriptor;
use riverfeed::model::{Action, Counts, EdgeKind, FanOut, ObjectId, Reason, ReasonKind, Scope};
use riverfeed::store::embedded::EmbeddedStore;
use riverfeed::store::mongo::{MongoSettings, TimelineLayout};
use riverfeed::store::prelude::*;
use riverfeed::store::{Delivery, Direction, FeedRange, StoreSettings};

use crate::common::{Backend, HeldFanOut, TestStore};
use crate::store_job_changes;
use crate::store_jobs;

/// One test per case per backend, and per MongoDB layout for the cases that
/// touch timelines: `store_suite::{embedded, mongodb, time_buckets,
/// sized_buckets, items_with_copies}::case`.
macro_rules! store_cases {
    (
        every_backend: [$($bm:ident :: $bc:ident),* $(,)?],
        every_layout: [$($lm:ident :: $lc:ident),* $(,)?] $(,)?
    ) => {
        mod embedded {
            $(store_cases!(@test $bm::$bc, Embedded, None);)*
            $(store_cases!(@test $lm::$lc, Embedded, None);)*
        }
        mod mongodb {
            $(store_cases!(@test $bm::$bc, Mongo("mg_"), None);)*
            $(store_cases!(@test $lm::$lc, Mongo("mg_"), None);)*
        }
        mod time_buckets {
            $(store_cases!(@test $lm::$lc, Mongo("tb_"), Some(super::TIME_BUCKETS));)*
        }
        mod sized_buckets {
            $(store_cases!(@test $lm::$lc, Mongo("sb_"), Some(super::SIZED_BUCKETS));)*
        }
        mod items_with_copies {
            $(store_cases!(@test $lm::$lc, Mongo("ic_"), Some(super::ITEMS_WITH_COPIES));)*
        }
    };
    (@test $m:ident :: $c:ident, Embedded, None) => {
        #[tokio::test]
        async fn $c() {
            let place = super::Place::Embedded;
            let Some(test) = place.open().await else {
                return;
            };
            let result = super::$m::$c(test.store.as_ref()).await;
            place.finish(test, stringify!($c), result).await;
        }
    };
    (@test $m:ident :: $c:ident, Mongo($prefix:literal), $layout:expr) => {
        #[tokio::test]
        async fn $c() {
            // The database is named after the layout and the case: "rf_",
            // these, "_" and 8 hex digits stay within MongoDB's 63 bytes,
            // and within the 40 characters of the name that are kept.
            const DATABASE: &str = concat!($prefix, stringify!($c));
            const _: () = assert!(DATABASE.len() <= 40, "a case name of at most 37 characters");
            let place = super::Place::Mongo(DATABASE, $layout);
            let Some(test) = place.open().await else {
                return;
            };
            let result = super::$m::$c(test.store.as_ref()).await;
            place.finish(test, stringify!($c), result).await;
        }
    };
}

store_cases! {
    every_backend: [
        graph::users,
        graph::edges,
        graph::sources_and_cuts,
        graph::assignments_and_supervisors,
        graph::one_supervisor_at_once,
        groups::groups,
        groups::membership_starts,
        groups::group_rings,
        actions::actions_and_slices,
        actions::outboxes,
        actions::many_outboxes,
        actions::scoped_outboxes,
        actions::reactions,
        actions::discussions,
        actions::rename_ref,
        actions::expiries,
        foreign::foreign_ids,
        foreign::racing_foreign_ids,
        foreign::ids_stored_again,
        foreign::imports_replace_an_action_whole,
        foreign::imports_racing_records,
        foreign::imports_move_a_foreign_id,
        notices::notice_versions,
        notices::notice_pages,
        notices::notice_counts,
        notices::notice_trimming,
        notices::inboxes,
        notices::notice_jobs,
        notices::many_notice_groups,
        store_jobs::enqueue_is_idempotent,
        store_jobs::claims_in_order_up_to_the_limit,
        store_jobs::a_claim_leases_each_job_once,
        store_jobs::expired_leases_are_taken_over,
        store_jobs::deferred_jobs_wait_for_their_time,
        store_job_changes::deferral_keeps_the_payload_it_carries,
        store_job_changes::hasten_makes_deferred_jobs_due_now,
        store_job_changes::queued_pages_by_failures,
        store_job_changes::renew_all_answers_each_lease,
        store_jobs::claims_see_what_comes_behind_them,
        store_jobs::queued_while_claiming_all_claimed,
        store_jobs::lost_leases_cannot_renew_or_finish,
        store_jobs::finish_removes,
        store_jobs::backlog_counts_and_oldest,
        store_jobs::kinds_are_independent,
        store_jobs::tenants_are_independent,
        store_jobs::cancel_removes_waiting_or_leased,
        store_jobs::queued_lists_a_key_prefix,
        fanout::an_action_is_a_fan_out_job,
        records::records_under_versions,
        records::relations_from_both_ends,
    ],
    every_layout: [
        foreign::imports_drop_what_the_archive_lacks,
        fanout::delivery_is_idempotent,
        fanout::large_batches,
        fanout::batches_and_groups,
        fanout::a_rescope_fences_stale_batches,
        timelines::feed_ranges,
        timelines::many_ties,
        timelines::hide_and_delete,
        timelines::bumps,
        backfills::backfills,
        backfills::backfills_give_stale_scope_reasons,
        timelines::unfollows,
        timelines::tombstones,
        timelines::rivers,
        rivers::building_rivers,
        groups::group_cleanup,
        groups::group_follows,
    ],
}

/// A MongoDB timeline layout the cases run on, besides the default (items
/// without copies): sized buckets small, so that they fill often.
#[derive(Clone, Copy, Debug)]
struct Layout {
    layout: TimelineLayout,
    embed_actions: bool,
}

const TIME_BUCKETS: Layout = Layout {
    layout: TimelineLayout::TimeBuckets,
    embed_actions: false,
};
const SIZED_BUCKETS: Layout = Layout {
    layout: TimelineLayout::SizedBuckets,
    embed_actions: true,
};
const ITEMS_WITH_COPIES: Layout = Layout {
    layout: TimelineLayout::Items,
    embed_actions: true,
};

/// Where a case runs.
#[derive(Clone, Copy, Debug)]
enum Place {
    Embedded,
    /// MongoDB, in a database named after this, on the layout the test
    /// settings say (items unless told otherwise), or on this one.
    Mongo(&'static str, Option<Layout>),
}

impl Place {
    /// A fresh store; `None` where MongoDB is not available (and not required).
    async fn open(self) -> Option<TestStore> {
        match self {
            Place::Embedded => TestStore::open(Backend::Embedded).await,
            Place::Mongo(database, None) => TestStore::open(Backend::Mongo(database)).await,
            Place::Mongo(database, Some(layout)) => {
                let settings = StoreSettings {
                    mongo: MongoSettings {
                        layout: Some(layout.layout),
                        bucket_size: 3,
                        embed_actions: layout.embed_actions,
                        ..MongoSettings::default()
                    },
                    ..StoreSettings::default()
                };
                TestStore::open_as(Backend::Mongo(database), &settings).await
            }
        }
    }

    /// Removes the store, then fails with the case's name if it failed.
    async fn finish(self, test: TestStore, case: &str, result: Result<()>) {
        test.remove().await;
        if let Err(err) = result.with_context(|| format!("case {case}")) {
            match self {
                Place::Embedded => panic!("embedded: {err:#}"),
                Place::Mongo(_, None) => panic!("MongoDB: {err:#}"),
                Place::Mongo(_, Some(l)) => panic!(
                    "MongoDB, {} layout (copies: {}): {err:#}",
                    l.layout, l.embed_actions
                ),
            }
        }
    }
}

const T: &str = "acme";
const OTHER: &str = "globex";

pub fn action(tenant: &str, actor: &str, conducted: i64, ref_ids: &[&str]) -> Action {
    Action {
        id: ObjectId::new(),
        tenant: tenant.into(),
        actor_id: actor.into(),
        conducted,
        hidden: false,
        scope: Scope::Public,
        readers: vec![],
        scope_groups: vec![],
        ref_ids: ref_ids.iter().map(|s| s.to_string()).collect(),
        tags: vec![],
        descriptor: Descriptor::new(
            "StatusPost",
            serde_json::json!({ "text": format!("{actor} at {conducted}") }),
        ),
        fan_out: FanOut::pending(),
        counts: Counts::default(),
        expires_at: None,
        to: Vec::new(),
        foreign: None,
    }
}

fn delivery(owner: &str, relevancy: i64) -> Delivery {
    Delivery {
        owner: owner.into(),
        relevancy,
        reason: Reason::new(ReasonKind::Follows, "bob"),
    }
}

pub fn range(limit: usize) -> FeedRange {
    FeedRange {
        older_than: None,
        newer_than: None,
        limit,
        from_oldest: false,
    }
}

/// The lease on `unfollow`'s cleanup job, if `worker` claims it at `now`
/// (leased for a second).
async fn cleanup_of(
    store: &dyn Store,
    worker: &str,
    now: i64,
    unfollow: &riverfeed::store::Unfollow,
) -> Result<Option<riverfeed::store::Lease>> {
    let leases = store
        .claim(riverfeed::store::JobKind::Cleanup, worker, now, 1_000, 100)
        .await?;
    Ok(leases
        .into_iter()
        .find(|l| l.job.tenant == unfollow.tenant && l.job.key == unfollow.key()))
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn scoped(actor: &str, conducted: i64, scope: Scope, to: &[&str]) -> Action {
    let mut a = action(T, actor, conducted, &[]);
    a.scope = scope;
    match scope {
        Scope::Restricted => a.readers = names(to),
        _ => a.scope_groups = names(to),
    }
    a
}

#[tokio::test]
async fn embedded_store_keeps_everything_across_reopen() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = action(T, "p-bob", 1_000, &["p-ref"]);
    {
        let store = EmbeddedStore::open(dir.path())?;
        store.insert_action(&a).await?;
        store
            .set_edge(T, EdgeKind::Follows, "p-alice", "p-bob", true)
            .await?;
    }
    let store = EmbeddedStore::open(dir.path())?;
    ensure!(store.get_actions(T, &[a.id]).await? == vec![a.clone()]);
    ensure!(store.slice(T, "p-ref", None, 10).await? == [a.id]);
    ensure!(
        store
            .edges(T, EdgeKind::Follows, Direction::In, "p-bob", None, 10)
            .await?
            == ["p-alice"]
    );
    let claims = HeldFanOut::claim(&store, "w", 0, 1_000, 10).await?;
    ensure!(claims.len() == 1, "the pending action survived the reopen");
    Ok(())
}
