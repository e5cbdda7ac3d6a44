//! The size of a query, checked right after parsing, before async-graphql's own
//! depth and complexity checks walk it.
//!
//! Those checks expand every fragment spread in full, so a kilobyte of nested
//! fragments that each spread the next twice costs them 2^n steps. Here each
//! fragment is sized once (memoised), the operation's expanded size is bounded,
//! and a mutation's root fields are capped, so one request can neither stall the
//! server nor smuggle thousands of aliased writes past the batch limit.
//!
//! Clients send the same few query texts over and over: a document kept by
//! the planner ([`super::plan::Planner`], bounded in bytes, holding only what
//! an authenticated caller's request validated and ran) skips the parse, as
//! cloning a parsed document costs a fraction of parsing it again, and the
//! size check it passed when kept. So does validation, for requests without
//! variables: the schema's rules give the same answer for the same text and
//! operation every time. (With variables the rules also look at their
//! values, so those requests are validated anew.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextPrepareRequest, NextValidation,
};
use async_graphql::parser::types::{
    BaseType, Directive, ExecutableDocument, OperationType, Selection, SelectionSet,
};
use async_graphql::ValidationResult;
use async_graphql::{Name, Positioned, Request, ServerError, ServerResult};
use async_graphql_value::{ConstValue, Value};

use super::error::{coded_server_error, BAD_USER_INPUT, VALIDATION_FAILED};
use super::plan::Planner;
use super::{Identity, Session};
use crate::http::persisted::Registration;
use crate::model::limits::MAX_GRAPHQL_NAME_BYTES;

/// Most fields one operation may select, counted with fragments expanded and
/// every alias counted. GraphiQL's introspection query is about 150.
pub const MAX_FIELDS: usize = 3_000;
/// Most root fields (aliases included) one mutation may carry.
pub const MAX_MUTATION_FIELDS: usize = 16;
/// Most fields written in a document, each counted once where it is written
/// (in every operation and fragment, used or not).
pub const MAX_DOCUMENT_FIELDS: usize = MAX_FIELDS;
/// Most aliases in a document.
pub const MAX_ALIASES: usize = 256;
/// Most directives in a document (`@include`, `@skip`, `@defer`…).
pub const MAX_DIRECTIVES: usize = 64;
/// Most arguments in a document, variable definitions included.
pub const MAX_ARGUMENTS: usize = 1_000;

/// The extension that sizes queries, and answers repeated ones from the
/// documents the planner keeps.
pub struct QueryShape(pub Arc<Planner>);

impl ExtensionFactory for QueryShape {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(QueryShapeExtension {
            planner: self.0.clone(),
            validation_key: Mutex::new(None),
        })
    }
}

/// One per request.
struct QueryShapeExtension {
    planner: Arc<Planner>,
    /// The request's query text and operation name, when its validation
    /// may be answered from a kept one (it has no variables).
    validation_key: Mutex<Option<(String, Option<String>)>>,
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

/// What a document writes, each part counted once where it stands: the
/// work validation does (and the errors it can answer with) grows with it.
#[derive(Default)]
struct Tally {
    fields: usize,
    aliases: usize,
    directives: usize,
    arguments: usize,
    /// The first name longer than [`MAX_GRAPHQL_NAME_BYTES`]: what it names,
    /// its first characters and its length.
    long_name: Option<(&'static str, String, usize)>,
}

impl Tally {
    fn of(document: &ExecutableDocument) -> Self {
        let mut tally = Self::default();
        for (name, operation) in document.operations.iter() {
            if let Some(name) = name {
                tally.name("operation", name);
            }
            let operation = &operation.node;
            tally.directives(&operation.directives);
            tally.arguments += operation.variable_definitions.len();
            for variable in &operation.variable_definitions {
                let variable = &variable.node;
                tally.name("variable", &variable.name.node);
                let mut ty = &variable.var_type.node.base;
                while let BaseType::List(inner) = ty {
                    ty = &inner.base;
                }
                if let BaseType::Named(name) = ty {
                    tally.name("type", name);
                }
                if let Some(value) = &variable.default_value {
                    tally.const_value(&value.node);
                }
                tally.directives(&variable.directives);
            }
            tally.set(&operation.selection_set.node);
        }
        for (name, fragment) in &document.fragments {
            tally.name("fragment", name);
            tally.name("type", &fragment.node.type_condition.node.on.node);
            tally.directives(&fragment.node.directives);
            tally.set(&fragment.node.selection_set.node);
        }
        tally
    }

    /// Notes `name` if it is the first one over the bound.
    fn name(&mut self, what: &'static str, name: &str) {
        if name.len() > MAX_GRAPHQL_NAME_BYTES && self.long_name.is_none() {
            let start: String = name.chars().take(16).collect();
            self.long_name = Some((what, start, name.len()));
        }
    }

    fn directives(&mut self, directives: &[Positioned<Directive>]) {
        self.directives += directives.len();
        for directive in directives {
            self.name("directive", &directive.node.name.node);
            self.arguments(&directive.node.arguments);
        }
    }

    fn arguments(&mut self, arguments: &[(Positioned<Name>, Positioned<Value>)]) {
        for (name, value) in arguments {
            self.name("argument", &name.node);
            self.value(&value.node);
        }
    }

    /// The names a value writes: variables, enum values, object fields.
    /// Walked with a stack of its own: values nest as deep as the text does.
    fn value(&mut self, value: &Value) {
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            match value {
                Value::Variable(name) => self.name("variable", name),
                Value::Enum(name) => self.name("enum value", name),
                Value::List(items) => stack.extend(items),
                Value::Object(fields) => {
                    for (name, value) in fields {
                        self.name("input field", name);
                        stack.push(value);
                    }
                }
                _ => {}
            }
        }
    }

    /// As [`Tally::value`], for a variable's default.
    fn const_value(&mut self, value: &ConstValue) {
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            match value {
                ConstValue::Enum(name) => self.name("enum value", name),
                ConstValue::List(items) => stack.extend(items),
                ConstValue::Object(fields) => {
                    for (name, value) in fields {
                        self.name("input field", name);
                        stack.push(value);
                    }
                }
                _ => {}
            }
        }
    }

    fn set(&mut self, set: &SelectionSet) {
        for item in &set.items {
            match &item.node {
                Selection::Field(field) => {
                    let field = &field.node;
                    self.fields += 1;
                    self.aliases += usize::from(field.alias.is_some());
                    if let Some(alias) = &field.alias {
                        self.name("alias", &alias.node);
                    }
                    self.name("field", &field.name.node);
                    self.directives(&field.directives);
                    self.arguments += field.arguments.len();
                    self.arguments(&field.arguments);
                    self.set(&field.selection_set.node);
                }
                Selection::InlineFragment(fragment) => {
                    if let Some(condition) = &fragment.node.type_condition {
                        self.name("type", &condition.node.on.node);
                    }
                    self.directives(&fragment.node.directives);
                    self.set(&fragment.node.selection_set.node);
                }
                Selection::FragmentSpread(spread) => {
                    self.name("fragment", &spread.node.fragment_name.node);
                    self.directives(&spread.node.directives);
                }
            }
        }
    }

    /// The first bound the document passes, as the error that says so.
    fn check(&self) -> Result<(), ServerError> {
        if let Some((what, start, len)) = &self.long_name {
            return Err(coded_server_error(
                VALIDATION_FAILED,
                format!(
                    "the {what} name \"{start}…\" is {len} bytes long; \
                     a name is at most {MAX_GRAPHQL_NAME_BYTES} bytes"
                ),
            ));
        }
        for (count, most, what) in [
            (self.fields, MAX_DOCUMENT_FIELDS, "fields"),
            (self.aliases, MAX_ALIASES, "aliases"),
            (self.directives, MAX_DIRECTIVES, "directives"),
            (self.arguments, MAX_ARGUMENTS, "arguments and variables"),
        ] {
            if count > most {
                return Err(coded_server_error(
                    VALIDATION_FAILED,
                    format!("the document writes {count} {what}; at most {most} are allowed"),
                ));
            }
        }
        Ok(())
    }
}

/// Checks a document against the limits: what it writes, then every
/// operation with its fragments expanded.
pub fn check(document: &ExecutableDocument) -> Result<(), ServerError> {
    Tally::of(document).check()?;
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
        if request.variables.is_empty() {
            *self
                .validation_key
                .lock()
                .unwrap_or_else(|e| e.into_inner()) =
                Some((request.query.clone(), request.operation_name.clone()));
        }
        if let Some(document) = self.planner.document(&request.query) {
            // It passed the check when it was kept.
            request.set_parsed_query(document);
            return next.run(ctx, request).await;
        }
        // A syntax error is left to the regular parse, which reports it with
        // its position and code.
        if let Ok(document) = request.parsed_query() {
            check(document)?;
        }
        next.run(ctx, request).await
    }

    /// Answers from an earlier validation of the same text and operation when
    /// the request has no variables; keeps only successes. A query sent with
    /// its APQ hash is kept for the hash here, once it is known valid and its
    /// caller authenticated: no one without an identity can fill the cache.
    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        let key = self
            .validation_key
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let result = match key {
            None => next.run(ctx).await?,
            Some((query, operation)) => {
                match self.planner.validated(&query, operation.as_deref()) {
                    Some(result) => result,
                    None => {
                        let result = next.run(ctx).await?;
                        self.planner
                            .keep_validation(&query, operation.as_deref(), result);
                        result
                    }
                }
            }
        };
        if let Some(registration) = ctx.data_opt::<Registration>() {
            let authenticated = ctx
                .data_opt::<Session>()
                .is_some_and(|session| matches!(session.identity, Identity::Viewer(_)));
            if authenticated {
                registration.keep();
            }
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &str) -> ExecutableDocument {
        async_graphql::parser::parse_query(query).expect("parses")
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
    fn what_a_document_writes_is_bounded_before_validation() {
        // Unknown fields in a fragment no operation uses: each would be an
        // error of its own, and none is expanded into an operation.
        let unused: String = (0..=MAX_DOCUMENT_FIELDS)
            .map(|i| format!("f{i} "))
            .collect();
        let err = check(&parse(&format!(
            "{{ viewer {{ id }} }} fragment U on Query {{ {unused} }}"
        )))
        .expect_err("too many fields");
        assert!(err.message.contains("fields"), "{}", err.message);
        let aliases: String = (0..=MAX_ALIASES)
            .map(|i| format!("a{i}: __typename "))
            .collect();
        let err = check(&parse(&format!("{{ {aliases} }}"))).expect_err("too many aliases");
        assert!(err.message.contains("aliases"), "{}", err.message);
        let directives = "@skip(if: false) ".repeat(MAX_DIRECTIVES + 1);
        let err = check(&parse(&format!("{{ __typename {directives} }}")))
            .expect_err("too many directives");
        assert!(err.message.contains("directives"), "{}", err.message);
        let arguments: String = (0..=MAX_ARGUMENTS).map(|i| format!("a{i}: 1 ")).collect();
        let err = check(&parse(&format!("{{ viewer({arguments}) {{ id }} }}")))
            .expect_err("too many arguments");
        assert!(err.message.contains("arguments"), "{}", err.message);
        assert_eq!(
            err.extensions.as_ref().and_then(|e| e.get("code")),
            Some(&async_graphql::Value::from(VALIDATION_FAILED))
        );
    }

    #[test]
    fn every_kind_of_name_is_bounded_before_validation() {
        let long = "n".repeat(MAX_GRAPHQL_NAME_BYTES + 1);
        for (what, query) in [
            ("field", format!("{{ {long} }}")),
            ("alias", format!("{{ {long}: __typename }}")),
            ("argument", format!("{{ viewer({long}: 1) {{ id }} }}")),
            ("operation", format!("query {long} {{ __typename }}")),
            ("variable", format!("query(${long}: ID) {{ __typename }}")),
            ("type", format!("query($v: {long}) {{ __typename }}")),
            ("type", format!("{{ ... on {long} {{ __typename }} }}")),
            ("fragment", format!("{{ ...{long} }}")),
            ("directive", format!("{{ __typename @{long} }}")),
            (
                "enum value",
                format!("{{ feed(model: {long}) {{ edges {{ cursor }} }} }}"),
            ),
            (
                "input field",
                format!("{{ viewer(a: {{ b: [{{ {long}: 1 }}] }}) {{ id }} }}"),
            ),
        ] {
            let err = check(&parse(&query)).expect_err(what);
            assert!(
                err.message.starts_with(&format!("the {what} name"))
                    && err.message.contains(&format!("{} bytes long", long.len())),
                "{what}: {}",
                err.message
            );
        }
        let fine = "n".repeat(MAX_GRAPHQL_NAME_BYTES);
        assert!(check(&parse(&format!("query {fine} {{ {fine}: __typename }}"))).is_ok());
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
