//! Planned reads proven the same as async-graphql's executor: each document
//! is posted twice by the same viewer to the same server over the same
//! store, `--planned-reads` off and then on (`Planner::set_enabled`), and
//! the two HTTP answers must be the same to the byte's meaning: status,
//! data and errors (messages, paths, locations, codes), keys in the same
//! order. The documents are every query the project writes down
//! (`corpus`) and thousands generated from the schema (`generated::*`,
//! one run per feed model on the embedded store, a sample on MongoDB).
//!
//! A generated run is seeded: `RIVERFEED_DIFF_SEED` replays one (each
//! failure prints its seed, and the document with its variables).
//! `RIVERFEED_DIFF_DOCUMENTS` changes how many documents a model's run
//! generates (5,000 by default) for a run by hand.

mod fixture;
mod generate;
mod harvest;
mod json;
mod order;
mod run;
mod schema;
mod values;

use std::sync::Arc;
use std::time::Instant;

use async_graphql::parser::types::{DocumentOperations, OperationDefinition, Selection};
use riverfeed::clock::ManualClock;
use riverfeed::server::ServeOptions;
use serde_json::{Map, Value};

use self::fixture::{Fixture, VIEWERS};
use self::generate::READ_ROOTS;
use self::run::{Case, Runner};
use self::schema::Schema;
use crate::common::{store_url, Backend, Stopped, TestServer, CLOCK_START};

/// Generated documents per feed model on the embedded store.
const GENERATED: usize = 5_000;
/// Generated documents on MongoDB, where each read costs more.
const GENERATED_ON_MONGODB: usize = 300;
/// Fewest harvested documents: fewer means the harvest broke.
const HARVEST_FLOOR: usize = 180;

async fn start(backend: Backend) -> Option<(TestServer, Fixture)> {
    let (store, dir) = store_url(backend)?;
    let clock = Arc::new(ManualClock::new(CLOCK_START));
    let shared = clock.clone();
    let server = TestServer::start_with(Stopped { store, dir }, |url| ServeOptions {
        clock: shared,
        cursor_secret: Some(run::CURSOR_SECRET.to_vec()),
        // The fixture's webhook names a loopback address; it is disabled,
        // so nothing is sent to it.
        webhooks_allow_private: true,
        ..ServeOptions::new(url)
    })
    .await;
    let started = Instant::now();
    let fixture = fixture::fill(&server, &clock).await;
    eprintln!(
        "differential: fixture written in {:.1} s: {:?}, {} cursors, {} global ids",
        started.elapsed().as_secs_f64(),
        fixture.written,
        fixture.cursors.len(),
        fixture.global_ids.len()
    );
    Some((server, fixture))
}

fn model_name() -> String {
    crate::common::test_feed_model().map_or_else(
        || "rivers (default)".to_owned(),
        |m| m.kind.name().to_owned(),
    )
}

fn seed() -> u64 {
    match std::env::var("RIVERFEED_DIFF_SEED") {
        Ok(seed) => seed.parse().expect("RIVERFEED_DIFF_SEED: a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos() as u64,
    }
}

async fn generated(backend: Backend, count: usize) {
    let count = std::env::var("RIVERFEED_DIFF_DOCUMENTS")
        .map(|n| n.parse().expect("RIVERFEED_DIFF_DOCUMENTS: a number"))
        .unwrap_or(count);
    let seed = seed();
    let model = model_name();
    eprintln!("differential: seed {seed} (RIVERFEED_DIFF_SEED={seed} replays it), model {model}, {backend:?}");
    let Some((server, fixture)) = start(backend).await else {
        return;
    };
    let schema = Schema::served();
    // One document of the seed's, to replay a failure alone.
    let only: Option<u64> = std::env::var("RIVERFEED_DIFF_DOCUMENT")
        .ok()
        .map(|n| n.parse().expect("RIVERFEED_DIFF_DOCUMENT: a number"));
    let count = if only.is_some() { 1 } else { count };
    let cases: Vec<Case> = (0..count as u64)
        .map(|index| only.unwrap_or(index))
        .map(|index| {
            let doc = generate::generate(&schema, &fixture, seed, index);
            Case {
                origin: format!("generated: seed {seed}, document {index}, model {model}"),
                document: doc.document,
                operation: None,
                variables: doc.variables,
                viewer: doc.viewer,
                generated: true,
            }
        })
        .collect();
    let started = Instant::now();
    let runner = Runner::new(
        &server,
        format!("RIVERFEED_DIFF_SEED={seed} (and RIVERFEED_DIFF_DOCUMENT=N for document N alone)"),
    );
    let tally = runner.compare(&cases).await;
    eprintln!(
        "differential: {} generated documents the same under both settings in {:.1} s ({} with errors, \
         {} answered in more than one way); counted planned {}, fallback {}",
        tally.cases,
        started.elapsed().as_secs_f64(),
        tally.with_errors,
        tally.unstable,
        tally.planned,
        tally.fallback
    );
    report_unstable(&tally);
    assert_eq!(tally.cases, count);
    // Many documents carry a bad value somewhere (a cursor of another list,
    // an id of nothing, a size past the limit) on purpose; a quarter at
    // least must answer whole, or the comparison sees mostly nulls.
    assert!(
        only.is_some() || tally.clean * 4 >= count,
        "too few generated documents answer without an error: {tally:?}"
    );
    server.stop().await;
    tally.assert_counted("generated documents");
}

/// Shows the documents async-graphql answered in more than one way.
fn report_unstable(tally: &run::Tally) {
    for shown in &tally.unstable_shown {
        eprintln!("differential: {shown}\n");
    }
}

mod generated {
    use riverfeed::timeline::FeedModelKind;

    use super::{generated, GENERATED, GENERATED_ON_MONGODB};
    use crate::common::{Backend, FEED_MODEL};

    async fn under(kind: FeedModelKind) {
        FEED_MODEL
            .scope(kind, generated(Backend::Embedded, GENERATED))
            .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rivers() {
        under(FeedModelKind::Rivers).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn push() {
        under(FeedModelKind::Push).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pull() {
        under(FeedModelKind::Pull).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hybrid() {
        under(FeedModelKind::Hybrid).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mongodb() {
        generated(Backend::Mongo("differential"), GENERATED_ON_MONGODB).await
    }
}

/// The names of an operation's root fields, if it selects fields only.
fn root_fields(op: &OperationDefinition) -> Option<Vec<String>> {
    op.selection_set
        .node
        .items
        .iter()
        .map(|item| match &item.node {
            Selection::Field(f) => Some(f.node.name.node.to_string()),
            _ => None,
        })
        .collect()
}

/// Every harvested query operation, as every viewer, with variables a
/// client would send; and the same as the reader for the feed pages alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus() {
    let harvested = harvest::harvest();
    let operations: usize = harvested.iter().map(|h| h.operations.len()).sum();
    eprintln!(
        "differential: harvested {} documents ({operations} query operations) from {} files",
        harvested.len(),
        harvested
            .iter()
            .map(|h| h.origin.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
    for area in [
        "tests/it/",
        "src/bench/",
        "web-demo/",
        "tests/clients/",
        "docs/",
        "README.md",
    ] {
        let found = harvested
            .iter()
            .filter(|h| h.origin.starts_with(area))
            .count();
        eprintln!("differential:   {found} from {area}");
        assert!(
            found > 0,
            "no document harvested from {area}: the harvest is broken"
        );
    }
    assert!(
        harvested.len() >= HARVEST_FLOOR,
        "only {} documents harvested: the harvest is broken",
        harvested.len()
    );
    let (server, fixture) = start(Backend::Embedded)
        .await
        .expect("the embedded store is always there");
    let schema = Schema::served();
    let mut cases = Vec::new();
    let mut pages = Vec::new();
    for doc in &harvested {
        let parsed =
            async_graphql::parser::parse_query(&doc.document).expect("harvested, so it parses");
        for name in &doc.operations {
            let op = match (&parsed.operations, name) {
                (DocumentOperations::Single(op), _) => &op.node,
                (DocumentOperations::Multiple(ops), Some(name)) => {
                    &ops.iter()
                        .find(|(n, _)| n.as_str() == name)
                        .expect("the operation")
                        .1
                        .node
                }
                (DocumentOperations::Multiple(_), None) => unreachable!("named when several"),
            };
            let mut variables = Map::new();
            for definition in &op.variable_definitions {
                let d = &definition.node;
                let value = values::plain(
                    &schema,
                    &fixture,
                    d.name.node.as_str(),
                    &d.var_type.node,
                    d.default_value.is_some(),
                );
                if let Some(value) = value {
                    variables.insert(d.name.node.to_string(), value);
                }
            }
            let roots = root_fields(op).unwrap_or_default();
            let is_page = roots.iter().any(|r| r == "feed")
                && roots
                    .iter()
                    .all(|r| READ_ROOTS.contains(&r.as_str()) || r == "__typename");
            for viewer in 0..VIEWERS.len() {
                let case = Case {
                    origin: doc.origin.clone(),
                    document: doc.document.clone(),
                    operation: name.clone(),
                    variables: Value::Object(variables.clone()),
                    viewer,
                    generated: false,
                };
                if is_page && viewer == 0 {
                    pages.push(case);
                } else {
                    cases.push(case);
                }
            }
        }
    }
    let runner = Runner::new(
        &server,
        "the same test (no seed: the corpus is the files')".to_owned(),
    );
    let started = Instant::now();
    let all = runner.compare(&cases).await;
    let feed_pages = runner.compare(&pages).await;
    eprintln!(
        "differential: {} harvested runs (documents × operations × viewers) the same under both settings \
         in {:.1} s ({} with errors); {} feed pages read by the reader: counted planned {}, \
         fallback {}",
        all.cases + feed_pages.cases,
        started.elapsed().as_secs_f64(),
        all.with_errors + feed_pages.with_errors,
        feed_pages.cases,
        feed_pages.planned,
        feed_pages.fallback
    );
    report_unstable(&all);
    report_unstable(&feed_pages);
    assert!(
        feed_pages.cases >= 10,
        "only {} feed pages harvested",
        feed_pages.cases
    );
    server.stop().await;
    all.assert_counted("harvested documents");
    feed_pages.assert_counted("harvested feed pages");
    // Plans must answer feed pages: a harness that compared async-graphql
    // with itself would prove nothing.
    assert!(
        feed_pages.planned * 2 >= feed_pages.executed,
        "of {} harvested feed pages the reader read with planned reads on, only {} ran planned",
        feed_pages.executed,
        feed_pages.planned
    );
}
