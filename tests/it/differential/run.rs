//! Posting each document twice by the same viewer on the same server,
//! planned reads off and then on, and holding the two HTTP answers to be
//! the same: status, and the JSON body key by key (see [`super::json`]),
//! data and errors alike. Documents go in batches: the switch is the
//! server's, so a batch runs whole under one setting, its requests side by
//! side, then whole under the other.
//!
//! `/metrics` is read around each half of a batch: with plans off no
//! operation may run planned, and each operation executed with plans on is
//! counted once, planned or fallback.

use futures_util::StreamExt;
use riverfeed::api::cursor::CursorKey;
use serde_json::{json, Value};

use super::fixture::VIEWERS;
use super::json::{error_paths, first_difference, spec_nulls, Json};
use super::schema::Schema;
use crate::common::TestServer;

/// One request to make twice.
pub struct Case {
    /// Where the document came from: a file, or the generator's seed and
    /// index.
    pub origin: String,
    pub document: String,
    pub operation: Option<String>,
    pub variables: Value,
    /// An index of [`VIEWERS`].
    pub viewer: usize,
    /// A generated document must validate: if it does not, the generator
    /// is wrong.
    pub generated: bool,
}

struct Answer {
    status: u16,
    raw: String,
    body: Json,
}

/// What a run saw.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub cases: usize,
    /// Answers with data, or an error at a path: the operation ran.
    pub executed: u64,
    /// Executed with plans off, and what `/metrics` counted then.
    pub off_planned: u64,
    pub off_fallback: u64,
    /// Counted with plans on.
    pub planned: u64,
    pub fallback: u64,
    /// Documents async-graphql answered in more than one way, the two
    /// settings agreeing on one of them (see [`Runner::either_answer`]);
    /// the first few, shown.
    pub unstable: usize,
    pub unstable_shown: Vec<String>,
    /// Answers with no error / with an error.
    pub clean: usize,
    pub with_errors: usize,
}

impl Tally {
    /// The counts `/metrics` must show, checked after the comparisons.
    #[track_caller]
    pub fn assert_counted(&self, what: &str) {
        assert_eq!(
            (self.off_planned, self.off_fallback),
            (0, self.executed),
            "{what}: with planned reads off, each executed operation must be counted once in \
             riverfeed_graphql_executions_total as fallback, none as planned ({self:?})"
        );
        assert_eq!(
            self.planned + self.fallback,
            self.executed,
            "{what}: with planned reads on, each executed operation must be counted once in \
             riverfeed_graphql_executions_total, planned or fallback ({self:?})"
        );
    }
}

/// The servers' `--cursor-key`, so that the harness opens their cursors.
pub const CURSOR_SECRET: &[u8] = b"differential harness";

/// Requests one batch sends at once: the server's two cores stay busy
/// while the client waits on answers.
const SIDE_BY_SIDE: usize = 8;
const BATCH: usize = 128;

pub struct Runner<'a> {
    pub server: &'a TestServer,
    schema: Schema,
    /// The server's cursor key (see [`CURSOR_SECRET`]).
    key: CursorKey,
    http: reqwest::Client,
    /// How to replay a failure, printed with it.
    pub replay: String,
}

impl<'a> Runner<'a> {
    pub fn new(server: &'a TestServer, replay: String) -> Self {
        Self {
            server,
            schema: Schema::served(),
            key: CursorKey::from_secret(CURSOR_SECRET),
            http: reqwest::Client::new(),
            replay,
        }
    }

    async fn post(&self, case: &Case) -> Answer {
        let mut body = json!({ "query": case.document, "variables": case.variables });
        if let Some(name) = &case.operation {
            body["operationName"] = json!(name);
        }
        let mut request = self
            .http
            .post(format!("{}/graphql", self.server.base))
            .json(&body);
        if let Some((tenant, user, roles)) = VIEWERS[case.viewer].identity {
            request = request
                .header("x-riverfeed-tenant", tenant)
                .header("x-riverfeed-user", user);
            if let Some(roles) = roles {
                request = request.header("x-riverfeed-roles", roles);
            }
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status().as_u16();
        let raw = response.text().await.expect("a body");
        let mut body = Json::parse(raw.as_bytes())
            .unwrap_or_else(|err| panic!("a body that is not JSON ({err}): {raw}"));
        body.unseal(&self.key);
        body.sort_errors();
        Answer { status, raw, body }
    }

    /// `(planned, fallback)` as `/metrics` counts them, over every name.
    async fn executions(&self) -> (u64, u64) {
        let text = reqwest::get(format!("{}/metrics", self.server.base))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics body");
        let mut counts = (0, 0);
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("riverfeed_graphql_executions_total{") else {
                continue;
            };
            let (labels, value) = rest.rsplit_once(' ').expect("a sample");
            let value = value.parse::<f64>().expect("a count") as u64;
            if labels.contains("executor=\"planned\"") {
                counts.0 += value;
            } else if labels.contains("executor=\"fallback\"") {
                counts.1 += value;
            }
        }
        counts
    }

    async fn answers(&self, cases: &[Case], planned: bool) -> Vec<Answer> {
        self.server.server.planner.set_enabled(planned);
        futures_util::stream::iter(cases.iter().map(|case| self.post(case)))
            .buffered(SIDE_BY_SIDE)
            .collect()
            .await
    }

    /// Runs every case off and on, and fails on the first batch with a
    /// difference, showing up to three of them.
    pub async fn compare(&self, cases: &[Case]) -> Tally {
        let mut tally = Tally::default();
        for batch in cases.chunks(BATCH) {
            let before = self.executions().await;
            let off = self.answers(batch, false).await;
            // A dormant reader's first read asks for their river, built
            // beside it: built before the same documents run again, or the
            // second answer would read a store the first did not.
            self.server.rivers_settled().await;
            let between = self.executions().await;
            let on = self.answers(batch, true).await;
            let after = self.executions().await;
            let mut failures = Vec::new();
            let mut unsettled = Vec::new();
            for ((case, off), on) in batch.iter().zip(&off).zip(&on) {
                tally.cases += 1;
                if case.generated {
                    if let Some(code) = request_error(&off.body) {
                        failures.push(format!(
                            "the generator wrote a document the server refuses ({code}): a generator bug\n{}",
                            self.show(case, off, on)
                        ));
                        continue;
                    }
                }
                let difference = if off.status != on.status {
                    Some(format!("HTTP status {} against {}", off.status, on.status))
                } else {
                    first_difference(&spec_nulls(&off.body), &spec_nulls(&on.body))
                };
                if let Some(difference) = difference {
                    unsettled.push((case, off, on, difference));
                }
                if executed(&on.body) {
                    tally.executed += 1;
                }
                match on.body.get("errors") {
                    Some(_) => tally.with_errors += 1,
                    None => tally.clean += 1,
                }
            }
            // The switch is the server's: the batch is done, so a document
            // can be asked again alone under each setting.
            for (case, off, on, difference) in unsettled {
                let (off_body, on_body) = (&off.body, &on.body);
                // A document that never runs planned was answered by
                // async-graphql both times: a difference is its own.
                let planned = self.runs_planned(case).await;
                if !planned
                    || merge_race(case, off_body, on_body, &difference)
                    || self.either_answer(case, &on.body).await
                    || self.store_moved_between(case, &on.body).await
                {
                    tally.unstable += 1;
                    if tally.unstable_shown.len() < 3 {
                        tally.unstable_shown.push(format!(
                            "one executor answered this document in two ways, or the store changed between the two answers (first difference {difference})\n{}",
                            self.show(case, off, on)
                        ));
                    }
                } else {
                    failures.push(format!(
                        "the two executors answered differently\nfirst difference {difference}\n{}",
                        self.show(case, off, on)
                    ));
                }
            }
            if !failures.is_empty() {
                let shown: Vec<&String> = failures.iter().take(3).collect();
                panic!(
                    "differential: {} of {} documents in a batch failed; replay with {}\n\n{}",
                    failures.len(),
                    batch.len(),
                    self.replay,
                    shown
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("\n\n----\n\n")
                );
            }
            // Every answer, whichever executor wrote it, keeps the order
            // the selection asks for (async-graphql's dropped root fields
            // read as the spec has them, see `spec_nulls`).
            for ((case, off), on) in batch.iter().zip(&off).zip(&on) {
                for (setting, answer) in [("off", off), ("on", on)] {
                    if let Some(wrong) = self.misordered(case, &spec_nulls(&answer.body)) {
                        failures.push(format!(
                            "an answer with planned reads {setting} leaves the selection order {wrong}\n{}",
                            self.show(case, off, on)
                        ));
                    }
                }
            }
            if !failures.is_empty() {
                panic!(
                    "differential: {} answers of {} documents are out of order; replay with {}\n\n{}",
                    failures.len(),
                    batch.len(),
                    self.replay,
                    failures
                        .iter()
                        .take(3)
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join("\n\n----\n\n")
                );
            }
            tally.off_planned += between.0 - before.0;
            tally.off_fallback += between.1 - before.1;
            tally.planned += after.0 - between.0;
            tally.fallback += after.1 - between.1;
        }
        tally
    }

    /// Whether `case`, asked again with plans on, runs planned (`/metrics`
    /// counts it so): a document no plan covers compares async-graphql
    /// with itself.
    async fn runs_planned(&self, case: &Case) -> bool {
        self.server.server.planner.set_enabled(true);
        let before = self.executions().await;
        self.post(case).await;
        self.executions().await.0 > before.0
    }

    /// Whether a document that answered differently under the two
    /// settings has an answer both give: asked again a few times under
    /// each, some answer with plans off is the same as some with plans on.
    /// async-graphql answers some documents in more than one way (a
    /// response key selected twice is resolved twice and merged in the
    /// order the two complete, an error's `null` included), and an
    /// executor that gives one of its answers is not told apart from it.
    async fn either_answer(&self, case: &Case, first_on: &Json) -> bool {
        const TRIES: usize = 4;
        let mut offs = Vec::new();
        self.server.server.planner.set_enabled(false);
        for _ in 0..TRIES {
            offs.push(self.post(case).await.body);
        }
        let mut ons = vec![first_on.clone()];
        self.server.server.planner.set_enabled(true);
        for _ in 0..TRIES {
            ons.push(self.post(case).await.body);
        }
        let off_varies = offs.iter().any(|o| first_difference(&offs[0], o).is_some());
        off_varies
            && ons
                .iter()
                .any(|on| offs.iter().any(|off| first_difference(off, on).is_none()))
    }

    /// Whether async-graphql, asked `case` again now, answers what the plan
    /// answered: then the first answer read a store the second did not. A
    /// dormant reader's first page is a merge of their sources and their
    /// river is built after it; a filtered page's end cursor is where its
    /// scan stopped, and a merge scans entries the river leaves out
    /// (shown to no one), so the cursor can stop one entry apart.
    async fn store_moved_between(&self, case: &Case, first_on: &Json) -> bool {
        self.server.server.planner.set_enabled(false);
        let off_now = self.post(case).await.body;
        self.server.server.planner.set_enabled(true);
        first_difference(&off_now, first_on).is_none()
    }

    /// Where an answer's members leave the order `case` selects them in.
    fn misordered(&self, case: &Case, body: &Json) -> Option<String> {
        let data = body.get("data")?;
        let doc = async_graphql::parser::parse_query(&case.document).ok()?;
        let op = match (&doc.operations, &case.operation) {
            (async_graphql::parser::types::DocumentOperations::Single(op), _) => op.node.clone(),
            (async_graphql::parser::types::DocumentOperations::Multiple(ops), Some(name)) => {
                ops.iter().find(|(n, _)| n.as_str() == name)?.1.node.clone()
            }
            _ => return None,
        };
        super::order::misordered(&self.schema, &doc, &op, &case.variables, data)
    }

    fn show(&self, case: &Case, off: &Answer, on: &Answer) -> String {
        format!(
            "origin: {}\nviewer: {}\noperation: {}\nvariables: {}\ndocument:\n{}\n\nplanned off (HTTP {}):\n{}\n\nplanned on (HTTP {}):\n{}",
            case.origin,
            VIEWERS[case.viewer].label,
            case.operation.as_deref().unwrap_or("(the only one)"),
            case.variables,
            case.document,
            off.status,
            clip(&off.raw),
            on.status,
            clip(&on.raw),
        )
    }
}

/// Whether a difference is async-graphql's race between two selections of
/// one response key: it resolves each on its own and merges them in the
/// order they complete, so when one of them fails (its `null` given to the
/// key) the key holds `null` or the other's object, whichever came last.
/// Such a difference is `null` against a value at a key the document
/// selects more than once (written twice, or in a fragment spread twice),
/// with an error at or below it, or below an alias of the same field beside
/// it. The same merge keeps `null` when the first
/// selection of the key had every field skipped (an object with no field is
/// `null` there, and a later object is not merged into it), where the spec
/// merges the selections first: async-graphql's `null` against the planned
/// object, in a document with `@skip` / `@include`.
fn merge_race(case: &Case, off: &Json, on: &Json, difference: &str) -> bool {
    let Some((path, what)) = difference
        .strip_prefix("at ")
        .and_then(|d| d.split_once(": "))
    else {
        return false;
    };
    // async-graphql merging a key selected again in another occurrence of
    // a list (`edges` twice) can keep the first occurrence's members only:
    // its answer then lacks members the plan, which merges the selections
    // first as the specification does, gives.
    if let Some(lists) = what.strip_prefix("members ") {
        let Some((general, planned)) = lists.split_once(" against ") else {
            return false;
        };
        let parse = |list: &str| serde_json::from_str::<Vec<String>>(list).unwrap_or_default();
        let (general, planned) = (parse(general), parse(planned));
        let key = path
            .rsplit('.')
            .next()
            .and_then(|last| last.split('[').next())
            .unwrap_or_default();
        let selected_again = case.document.matches(&format!(" {key} ")).count() >= 2;
        return !general.is_empty()
            && general.len() < planned.len()
            && general.iter().all(|m| planned.contains(m))
            && selected_again;
    }
    if !what.starts_with("null against") && !what.contains("against null") {
        return false;
    }
    let key = path
        .rsplit('.')
        .next()
        .and_then(|last| last.split('[').next())
        .unwrap_or_default();
    let doc = &case.document;
    let word = |i: usize, len: usize| {
        let before = doc[..i].chars().next_back();
        let after = doc[i + len..].chars().next();
        let inner = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !inner(before) && before != Some('$') && !inner(after)
    };
    let written = |name: &str| {
        doc.match_indices(name)
            .filter(|(i, _)| word(*i, name.len()))
            .count()
    };
    let fragment_spread_twice = doc
        .lines()
        .filter_map(|l| l.strip_prefix("fragment "))
        .filter_map(|l| l.split_whitespace().next())
        .any(|name| written(&format!("...{name}")) >= 2);
    // The failing selection may be an alias of the same field beside the
    // key (`k: node { … }` beside `node { … }`): async-graphql resolves the
    // field's selections together and its `null` can land on either key.
    let parent = path.strip_suffix(key).unwrap_or(path);
    let aliased_beside = |e: &str| {
        e.strip_prefix(parent)
            .and_then(|rest| rest.split(['.', '[']).next())
            .is_some_and(|alias| {
                !alias.is_empty()
                    && doc
                        .match_indices(&format!("{alias}: {key}"))
                        .any(|(i, _)| word(i, alias.len() + 2 + key.len()))
            })
    };
    let failed_below = error_paths(off)
        .iter()
        .chain(&error_paths(on))
        .any(|e| e.starts_with(path) || aliased_beside(e));
    let skipped_first =
        what.starts_with("null against") && (doc.contains("@skip") || doc.contains("@include"));
    !key.is_empty()
        && (written(key) >= 2 || fragment_spread_twice)
        && (failed_below || skipped_first)
}

fn clip(raw: &str) -> &str {
    const MOST: usize = 6_000;
    if raw.len() <= MOST {
        return raw;
    }
    let mut end = MOST;
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    &raw[..end]
}

/// An answer's errors without a path: the request was refused before it
/// ran (it did not parse or validate, or went over a limit).
fn request_error(body: &Json) -> Option<String> {
    let Some(Json::Array(errors)) = body.get("errors") else {
        return None;
    };
    errors.iter().find(|e| e.get("path").is_none()).map(|e| {
        e.get("extensions")
            .and_then(|x| x.get("code"))
            .map_or_else(|| e.text(), Json::text)
    })
}

/// Whether the operation ran: it has data, or an error at a path.
fn executed(body: &Json) -> bool {
    if !matches!(body.get("data"), None | Some(Json::Null)) {
        return true;
    }
    match body.get("errors") {
        Some(Json::Array(errors)) => errors.iter().any(|e| e.get("path").is_some()),
        // A null `data` without errors: every root field was skipped.
        _ => body.get("data").is_some(),
    }
}

/// async-graphql's `null` for a failed selection lands on the key of
/// another selection of the same field (an alias beside it) now and then:
/// a race, not a difference between the executors. A `null` with no error
/// near it is one.
#[test]
fn a_null_from_an_aliased_selection_beside_the_key_is_a_merge_race() {
    let case = Case {
        origin: "a test".into(),
        document: "{ e { k16: node { friends(after: \"x\") { n } } node { a } node { b } } }"
            .into(),
        operation: None,
        variables: Value::Null,
        viewer: 0,
        generated: true,
    };
    let errors = r#"[{"message":"m","path":["e","k16","friends"]}]"#;
    let off =
        format!(r#"{{"data":{{"e":{{"k16":null,"node":{{"a":1,"b":2}}}}}},"errors":{errors}}}"#);
    let on = format!(r#"{{"data":{{"e":{{"k16":{{}},"node":null}}}},"errors":{errors}}}"#);
    let (off, on) = (
        Json::parse(off.as_bytes()).unwrap(),
        Json::parse(on.as_bytes()).unwrap(),
    );
    let difference = "at .data.e.node: an object against null";
    assert!(merge_race(&case, &off, &on, difference));
    let clean = Json::parse(br#"{"data":{"e":{"k16":null,"node":null}}}"#).unwrap();
    assert!(!merge_race(&case, &clean, &clean, difference));
}
