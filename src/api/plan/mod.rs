//! Planned reads: a query over the read types runs from a plan made once per
//! document, its page written as JSON straight from the rows, instead of
//! through async-graphql's executor field by field.
//!
//! async-graphql stays the schema: it parses, validates and costs every
//! document, serves introspection, mutations and subscriptions, and answers
//! every operation a plan does not cover, its answer put in selection
//! order as a plan's is ([`order`]). Every subscription's events are
//! written from a plan of their selection too ([`events`]). [`Planner`]
//! holds whether plans run at all (`--planned-reads`), so the two executors
//! can be compared on the same store.

mod actions;
mod below;
mod bind;
mod by_id;
mod comments;
mod compile;
mod connection;
mod events;
mod groups;
mod markers;
mod notices;
mod order;
mod out;
mod root;
mod run;
mod users;
mod webhooks;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery, NextValidation,
};
use async_graphql::parser::types::ExecutableDocument;
use async_graphql::{Name, Response, ServerError, ServerResult, ValidationResult, Variables};
use async_graphql_value::ConstValue;

pub use self::events::{fill, EventPlan, Whole};
pub use self::order::field_in_selection_order;
use self::root::Plan;
use super::{AppState, Identity, Session};
use crate::descriptor::catalog::Catalog;

/// Which executor answered an operation, as `/metrics` counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Executor {
    /// A plan ran it.
    Planned,
    /// async-graphql's executor ran it (no plan covers it, or plans are off).
    Fallback,
}

impl Executor {
    pub fn label(self) -> &'static str {
        match self {
            Executor::Planned => "planned",
            Executor::Fallback => "fallback",
        }
    }
}

/// Bytes of documents and plans kept by default (`--document-cache-bytes`).
pub const DEFAULT_DOCUMENT_CACHE_BYTES: usize = 8 * 1024 * 1024;

/// Whether planned reads run, and the documents kept with their plans;
/// shared by every request of a server.
pub struct Planner {
    enabled: AtomicBool,
    documents: Mutex<Documents>,
    max_bytes: usize,
}

impl Planner {
    pub fn new(enabled: bool) -> Self {
        Self::bounded(enabled, DEFAULT_DOCUMENT_CACHE_BYTES)
    }

    /// Keeping at most `max_bytes` of documents and plans.
    pub fn bounded(enabled: bool, max_bytes: usize) -> Self {
        Self {
            enabled: AtomicBool::new(enabled),
            documents: Mutex::default(),
            max_bytes,
        }
    }

    /// Whether operations a plan covers run planned.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Turns planned reads on or off for the requests that start after.
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }
}

impl Default for Planner {
    fn default() -> Self {
        Self::new(true)
    }
}

/// Query texts with their parsed documents, validation results and plans:
/// the one cache of documents, bounded in bytes (`--document-cache-bytes`).
/// Only documents that validated and ran for a caller with an identity are
/// kept (whatever `--planned-reads` says); when full, the least recently
/// used make room, so a flood of distinct texts churns only itself out while
/// the documents clients keep sending stay.
struct Documents {
    entries: lru::LruCache<Arc<str>, Arc<Entry>>,
    bytes: usize,
}

impl Default for Documents {
    fn default() -> Self {
        Self {
            entries: lru::LruCache::unbounded(),
            bytes: 0,
        }
    }
}

/// One kept document, what validating it without variables gave, and the
/// plans made from it, by operation and by the values of the variables its
/// `@skip` / `@include` read.
pub struct Entry {
    document: ExecutableDocument,
    /// Validation results of requests without variables, by operation.
    validated: Mutex<Vec<(Option<String>, ValidationResult)>>,
    /// The variables `@skip` / `@include` read.
    directive_variables: Vec<Name>,
    plans: Mutex<Vec<PlanKey>>,
    bytes: usize,
}

/// A plan for one operation and one set of directive values; `None` when
/// no plan covers it.
struct PlanKey {
    operation: Option<String>,
    values: Vec<bool>,
    plan: Option<Arc<Plan>>,
}

/// Most plans kept per document (operations times directive values).
const PLANS_PER_DOCUMENT: usize = 16;

impl Entry {
    fn new(document: ExecutableDocument, text_len: usize) -> Self {
        Self {
            directive_variables: compile::directive_variables(&document),
            document,
            validated: Mutex::default(),
            plans: Mutex::default(),
            // The text, and the parsed document and its plans, a few
            // times the text.
            bytes: text_len.saturating_mul(8).saturating_add(512),
        }
    }

    /// The plan for `operation` with `variables`, made on first use.
    fn plan(
        &self,
        operation: Option<&str>,
        variables: &Variables,
        catalog: &Catalog,
    ) -> Option<Arc<Plan>> {
        let values = compile::directive_values(&self.directive_variables, variables);
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = plans
            .iter()
            .find(|p| p.operation.as_deref() == operation && p.values == values)
        {
            return found.plan.clone();
        }
        let plan = root::compile(
            &self.document,
            operation,
            &self.directive_variables,
            &values,
            catalog,
        )
        .map(Arc::new);
        if plans.len() < PLANS_PER_DOCUMENT {
            plans.push(PlanKey {
                operation: operation.map(str::to_owned),
                values,
                plan: plan.clone(),
            });
        }
        plan
    }
}

impl Planner {
    /// The kept parsed document of `query`, if it is kept.
    pub fn document(&self, query: &str) -> Option<ExecutableDocument> {
        self.entry(query).map(|entry| entry.document.clone())
    }

    /// What validating `query`'s `operation` without variables gave, if a
    /// request validated it while the document was kept.
    pub fn validated(&self, query: &str, operation: Option<&str>) -> Option<ValidationResult> {
        let entry = self.entry(query)?;
        let validated = entry.validated.lock().unwrap_or_else(|e| e.into_inner());
        validated
            .iter()
            .find(|(op, _)| op.as_deref() == operation)
            .map(|(_, result)| *result)
    }

    /// Keeps what validating `query`'s `operation` without variables gave,
    /// once its document is kept.
    pub fn keep_validation(&self, query: &str, operation: Option<&str>, result: ValidationResult) {
        let Some(entry) = self.entry(query) else {
            return;
        };
        let mut validated = entry.validated.lock().unwrap_or_else(|e| e.into_inner());
        if validated.len() < PLANS_PER_DOCUMENT
            && !validated.iter().any(|(op, _)| op.as_deref() == operation)
        {
            validated.push((operation.map(str::to_owned), result));
        }
    }

    /// The entry kept for `query`, now the most recently used.
    fn entry(&self, query: &str) -> Option<Arc<Entry>> {
        let mut documents = self.documents.lock().unwrap_or_else(|e| e.into_inner());
        documents.entries.get(query).cloned()
    }

    /// Keeps `document`, and answers the entry kept for `query`: a fresh
    /// one, not kept, when it alone is over the bound.
    fn keep(&self, query: Arc<str>, document: ExecutableDocument) -> Arc<Entry> {
        let entry = Arc::new(Entry::new(document, query.len()));
        if entry.bytes > self.max_bytes {
            return entry;
        }
        let mut documents = self.documents.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = documents.entries.get(&*query) {
            return kept.clone();
        }
        while documents.bytes + entry.bytes > self.max_bytes {
            let Some((_, gone)) = documents.entries.pop_lru() else {
                break;
            };
            documents.bytes -= gone.bytes;
        }
        documents.bytes += entry.bytes;
        documents.entries.put(query, entry.clone());
        entry
    }

    /// Bytes of kept documents, as counted against the bound.
    pub fn kept_bytes(&self) -> usize {
        let documents = self.documents.lock().unwrap_or_else(|e| e.into_inner());
        documents.bytes
    }
}

/// Where a planned response's `data` goes: the transport puts one in the
/// request, and writes the JSON found in it instead of `data`.
#[derive(Clone, Default)]
pub struct Slot(Arc<Mutex<Option<Filled>>>);

/// A planned response's `data`, as JSON.
pub struct Filled {
    pub data: Vec<u8>,
    /// Whether any root field has a value.
    pub answered: bool,
}

impl Slot {
    fn fill(&self, filled: Filled) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(filled);
    }

    /// The planned `data`, when a plan answered the request.
    pub fn take(&self) -> Option<Filled> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Which executor answered the request.
    pub fn executor(&self) -> Executor {
        if self.0.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
            Executor::Planned
        } else {
            Executor::Fallback
        }
    }
}

/// The extension that runs plans: innermost, so the rate limit, the error
/// codes and the metrics see planned responses as any other.
pub struct Planned(pub Arc<Planner>);

impl ExtensionFactory for Planned {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(PlannedRequest {
            planner: self.0.clone(),
            seen: Mutex::default(),
        })
    }
}

/// One per request.
struct PlannedRequest {
    planner: Arc<Planner>,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// The kept document, when the text was known.
    entry: Option<Arc<Entry>>,
    /// A document to keep once it validates.
    pending: Option<(Arc<str>, ExecutableDocument)>,
    /// The document of a caller without an identity, whose documents are
    /// not kept: what async-graphql answers is ordered by it.
    own: Option<ExecutableDocument>,
    variables: Variables,
}

impl PlannedRequest {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether the request's caller has an identity.
fn authenticated(ctx: &ExtensionContext<'_>) -> bool {
    ctx.data_opt::<Session>()
        .is_some_and(|session| matches!(session.identity, Identity::Viewer(_)))
}

#[async_trait::async_trait]
impl Extension for PlannedRequest {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let document = next.run(ctx, query, variables).await?;
        let mut seen = self.seen();
        seen.variables = variables.clone();
        if !authenticated(ctx) {
            seen.own = Some(document.clone());
            return Ok(document);
        }
        match self.planner.entry(query) {
            Some(entry) => seen.entry = Some(entry),
            None => seen.pending = Some((Arc::from(query), document.clone())),
        }
        Ok(document)
    }

    /// A document is kept once it validated (a subscription's too). When
    /// the shape check answers validation from a kept result, the document
    /// was kept already.
    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        let result = next.run(ctx).await?;
        let pending = self.seen().pending.take();
        if let Some((query, document)) = pending {
            let entry = self.planner.keep(query, document);
            self.seen().entry = Some(entry);
        }
        Ok(result)
    }

    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        let (entry, own, variables) = {
            let mut seen = self.seen();
            let variables = std::mem::take(&mut seen.variables);
            // A document still pending was not kept here: the same text,
            // kept by a request beside this one, had its validation
            // answered from there. It orders this answer all the same.
            let pending = seen.pending.take().map(|(_, document)| document);
            (seen.entry.take(), seen.own.take().or(pending), variables)
        };
        let planned = match (
            entry.as_ref().filter(|_| self.planner.enabled()),
            ctx.data_opt::<Slot>(),
            ctx.data_opt::<Session>(),
            ctx.data_opt::<AppState>(),
        ) {
            (Some(entry), Some(slot), Some(session), Some(state)) => {
                match entry.plan(operation_name, &variables, &state.descriptors) {
                    Some(plan) => match root::run(&plan, state, session, &variables).await {
                        Ok(written) => Some((slot, written)),
                        Err(bind::Fallback) => {
                            tracing::debug!("a variable does not coerce as the plan reads it");
                            None
                        }
                    },
                    None => None,
                }
            }
            (entry, ..) => {
                tracing::debug!(kept = entry.is_some(), "no kept document for the request");
                None
            }
        };
        match planned {
            Some((slot, written)) => {
                slot.fill(Filled {
                    data: written.data,
                    answered: written.answered,
                });
                let mut response = Response::new(ConstValue::Null);
                response.errors = written.errors;
                response
            }
            None => {
                let mut response = next.run(ctx, operation_name).await;
                let document = entry.as_ref().map(|entry| &entry.document).or(own.as_ref());
                if let Some(document) = document {
                    order::in_selection_order(
                        &ctx.schema_env.registry,
                        document,
                        operation_name,
                        &variables,
                        &mut response.data,
                    );
                }
                response
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> ExecutableDocument {
        async_graphql::parser::parse_query(text).expect("a document")
    }

    #[test]
    fn a_full_cache_lets_the_least_recently_used_go() {
        let texts = ["{ a }", "{ b }", "{ c }"];
        let each = Entry::new(parsed(texts[0]), texts[0].len()).bytes;
        let planner = Planner::bounded(true, 2 * each);
        for text in &texts[..2] {
            planner.keep(Arc::from(*text), parsed(text));
        }
        // `{ a }` asked for again: `{ b }` is now the least recently used.
        assert!(planner.document(texts[0]).is_some());
        planner.keep(Arc::from(texts[2]), parsed(texts[2]));
        assert!(planner.document(texts[0]).is_some(), "used last, kept");
        assert!(planner.document(texts[1]).is_none(), "used least, gone");
        assert!(planner.document(texts[2]).is_some(), "the newest, kept");
        assert_eq!(planner.kept_bytes(), 2 * each);
    }
}
