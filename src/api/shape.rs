//! The size of a query, checked right after parsing, before async-graphql's own
//! depth and complexity checks walk it.
//!
//! Those checks expand every fragment spread in full, so a kilobyte of nested
//! fragments that each spread the next twice costs them 2^n steps. Here each
//! fragment is sized once (memoised), the operation's expanded size is bounded,
//! and a mutation's root fields are capped, so one request can neither stall the
//! server nor smuggle thousands of aliased writes past the batch limit.
//!
//! Clients send the same few query texts over and over, so documents that pass
//! are kept, by their text, and the next request with that text skips the
//! parse: cloning a parsed document costs a fraction of parsing it again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextPrepareRequest,
};
use async_graphql::parser::types::{ExecutableDocument, OperationType, Selection, SelectionSet};
use async_graphql::{Name, Request, ServerError, ServerResult};

use super::error::{coded_server_error, BAD_USER_INPUT, VALIDATION_FAILED};

/// Most fields one operation may select, counted with fragments expanded and
/// every alias counted. GraphiQL's introspection query is about 150.
pub const MAX_FIELDS: usize = 3_000;
/// Most root fields (aliases included) one mutation may carry.
pub const MAX_MUTATION_FIELDS: usize = 16;

/// Query texts whose parsed documents are kept.
pub const PARSE_CACHE_ENTRIES: usize = 256;
/// Longest query text kept; longer ones are parsed every time.
pub const PARSE_CACHE_MAX_QUERY: usize = 16 * 1024;

/// The extension that sizes queries (and keeps the documents that pass).
#[derive(Default)]
pub struct QueryShape {
    parsed: Arc<ParseCache>,
}

impl ExtensionFactory for QueryShape {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(QueryShapeExtension {
            parsed: self.parsed.clone(),
        })
    }
}

struct QueryShapeExtension {
    parsed: Arc<ParseCache>,
}

/// Parsed documents by query text, at most [`PARSE_CACHE_ENTRIES`]. When it is
/// full an arbitrary entry makes room: a flood of distinct texts only churns
/// it, and memory stays bounded.
#[derive(Default)]
struct ParseCache {
    documents: Mutex<HashMap<String, ExecutableDocument>>,
}

impl ParseCache {
    fn get(&self, query: &str) -> Option<ExecutableDocument> {
        let documents = self.documents.lock().unwrap_or_else(|e| e.into_inner());
        documents.get(query).cloned()
    }

    fn keep(&self, query: &str, document: &ExecutableDocument) {
        if query.len() > PARSE_CACHE_MAX_QUERY {
            return;
        }
        let mut documents = self.documents.lock().unwrap_or_else(|e| e.into_inner());
        if documents.len() >= PARSE_CACHE_ENTRIES && !documents.contains_key(query) {
            if let Some(evicted) = documents.keys().next().cloned() {
                documents.remove(&evicted);
            }
        }
        documents.insert(query.to_owned(), document.clone());
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.documents
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

/// Sizes selection sets, each named fragment once.
struct Sizer<'a> {
    document: &'a ExecutableDocument,
    sizes: HashMap<&'a Name, usize>,
    /// Fragments being sized: a spread of one of them is a cycle, which
    /// validation reports; here it costs nothing more.
    open: Vec<&'a Name>,
}

impl<'a> Sizer<'a> {
    fn set(&mut self, set: &'a SelectionSet) -> usize {
        set.items.iter().fold(0usize, |total, item| {
            let size = match &item.node {
                Selection::Field(field) => {
                    1usize.saturating_add(self.set(&field.node.selection_set.node))
                }
                Selection::InlineFragment(fragment) => self.set(&fragment.node.selection_set.node),
                Selection::FragmentSpread(spread) => self.fragment(&spread.node.fragment_name.node),
            };
            total.saturating_add(size)
        })
    }

    fn fragment(&mut self, name: &'a Name) -> usize {
        if let Some(size) = self.sizes.get(name) {
            return *size;
        }
        if self.open.contains(&name) {
            return 0;
        }
        let Some(fragment) = self.document.fragments.get(name) else {
            return 0;
        };
        self.open.push(name);
        let size = self.set(&fragment.node.selection_set.node);
        self.open.pop();
        self.sizes.insert(name, size);
        size
    }
}

/// Checks every operation of a document against the limits.
pub fn check(document: &ExecutableDocument) -> Result<(), ServerError> {
    let mut sizer = Sizer {
        document,
        sizes: HashMap::new(),
        open: Vec::new(),
    };
    for (_, operation) in document.operations.iter() {
        let root = &operation.node.selection_set.node;
        if operation.node.ty == OperationType::Mutation {
            let mut roots = Sizer {
                document,
                sizes: HashMap::new(),
                open: Vec::new(),
            };
            // Root fields only: count the top level with fragments expanded.
            let count = root_fields(&mut roots, root);
            if count > MAX_MUTATION_FIELDS {
                return Err(coded_server_error(
                    BAD_USER_INPUT,
                    format!(
                        "a mutation carries at most {MAX_MUTATION_FIELDS} fields, this one {count}"
                    ),
                ));
            }
        }
        let size = sizer.set(root);
        if size > MAX_FIELDS {
            return Err(coded_server_error(
                VALIDATION_FAILED,
                format!("the query selects {size} fields with its fragments expanded; at most {MAX_FIELDS} are allowed"),
            ));
        }
    }
    Ok(())
}

/// Root fields of a selection set, through fragments (each sized once).
fn root_fields<'a>(sizer: &mut Sizer<'a>, set: &'a SelectionSet) -> usize {
    set.items.iter().fold(0usize, |total, item| {
        let count = match &item.node {
            Selection::Field(_) => 1,
            Selection::InlineFragment(fragment) => {
                root_fields(sizer, &fragment.node.selection_set.node)
            }
            Selection::FragmentSpread(spread) => {
                let name = &spread.node.fragment_name.node;
                match sizer.sizes.get(name) {
                    Some(count) => *count,
                    None if sizer.open.contains(&name) => 0,
                    None => match sizer.document.fragments.get(name) {
                        Some(fragment) => {
                            sizer.open.push(name);
                            let count = root_fields(sizer, &fragment.node.selection_set.node);
                            sizer.open.pop();
                            sizer.sizes.insert(name, count);
                            count
                        }
                        None => 0,
                    },
                }
            }
        };
        total.saturating_add(count)
    })
}

#[async_trait::async_trait]
impl Extension for QueryShapeExtension {
    /// Runs before async-graphql parses the request itself, because its own
    /// recursion-depth check walks every spread too: the document is parsed
    /// here (once; the request keeps it) and sized before anything expands it.
    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        mut request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        if let Some(document) = self.parsed.get(&request.query) {
            // It passed the check when it was kept.
            request.set_parsed_query(document);
            return next.run(ctx, request).await;
        }
        // A syntax error is left to the regular parse, which reports it with
        // its position and code.
        let query = request.query.clone();
        if let Ok(document) = request.parsed_query() {
            check(document)?;
            self.parsed.keep(&query, document);
        }
        next.run(ctx, request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &str) -> ExecutableDocument {
        async_graphql::parser::parse_query(query).expect("parses")
    }

    #[test]
    fn the_parse_cache_is_bounded_and_returns_what_it_kept() {
        let cache = ParseCache::default();
        let query = "{ feed { edges { node { actionId } } } }";
        cache.keep(query, &parse(query));
        let kept = cache.get(query).expect("kept");
        assert_eq!(kept.operations.iter().count(), 1);
        assert!(cache.get("{ viewer { id } }").is_none());
        for i in 0..PARSE_CACHE_ENTRIES * 2 {
            let q = format!("{{ a{i}: __typename }}");
            cache.keep(&q, &parse(&q));
        }
        assert_eq!(cache.len(), PARSE_CACHE_ENTRIES);
        let long = format!("{{ {} }}", "__typename ".repeat(PARSE_CACHE_MAX_QUERY / 10));
        let before = cache.len();
        cache.keep(&long, &parse(&long));
        assert!(cache.get(&long).is_none() && cache.len() == before);
    }

    #[test]
    fn doubling_fragments_are_sized_without_expanding_them() {
        let mut query = String::from("{ ...F0 }\n");
        for i in 0..60 {
            query.push_str(&format!(
                "fragment F{i} on Query {{ ...F{} ...F{} }}\n",
                i + 1,
                i + 1
            ));
        }
        query.push_str("fragment F60 on Query { __typename }\n");
        let started = std::time::Instant::now();
        let err = check(&parse(&query)).expect_err("2^60 fields is too many");
        assert!(err.message.contains("at most"), "{}", err.message);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "sized once each"
        );
    }

    #[test]
    fn ordinary_queries_pass_and_alias_floods_do_not() {
        assert!(check(&parse("{ feed { edges { node { actionId } } } }")).is_ok());
        let aliases: String = (0..MAX_FIELDS)
            .map(|i| format!("a{i}: __typename "))
            .collect();
        assert!(check(&parse(&format!("{{ {aliases} viewer {{ id }} }}"))).is_err());
        let writes: String = (0..=MAX_MUTATION_FIELDS)
            .map(|i| format!("m{i}: follow(userId: \"bob\") "))
            .collect();
        let err = check(&parse(&format!("mutation {{ {writes} }}"))).expect_err("too many writes");
        assert!(err.message.contains("mutation"), "{}", err.message);
        let cycle = "{ ...A } fragment A on Query { ...B } fragment B on Query { ...A __typename }";
        assert!(
            check(&parse(cycle)).is_ok(),
            "cycles are validation's to report"
        );
    }
}
