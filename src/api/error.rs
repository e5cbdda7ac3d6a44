//! Error codes: every error the API answers carries `extensions.code`.
//!
//! Resolvers build their errors with [`bad_input`], [`not_found`] and friends, and
//! convert store errors with [`ApiResultExt::api`]. An extension tags what
//! async-graphql itself reports (parse and validation errors, input coercion) so
//! that no error leaves without a code.

use std::sync::Arc;

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextParseQuery, NextRequest, NextSubscribe,
    NextValidation,
};
use async_graphql::futures_util::stream::BoxStream;
use async_graphql::parser::types::ExecutableDocument;
use async_graphql::{
    ErrorExtensions, Response, ServerError, ServerResult, ValidationResult, Variables,
};
use futures_util::StreamExt;
use tracing::error;

use crate::model::limits::InputError;
use crate::store::{ErrorKind, StoreError};

pub const UNAUTHENTICATED: &str = "UNAUTHENTICATED";
pub const FORBIDDEN: &str = "FORBIDDEN";
pub const NOT_FOUND: &str = "NOT_FOUND";
pub const BAD_USER_INPUT: &str = "BAD_USER_INPUT";
/// The store cannot take the request now (a lost database, a full or
/// failing disk); answered with 503 and `Retry-After` where the whole
/// request failed for it.
pub const STORAGE_UNAVAILABLE: &str = "STORAGE_UNAVAILABLE";
/// How long a caller refused for [`STORAGE_UNAVAILABLE`] is told to wait,
/// in seconds: about what the store takes to notice it can go on.
pub const STORAGE_RETRY_AFTER: u64 = 5;
pub const INTERNAL: &str = "INTERNAL_SERVER_ERROR";
pub const LAGGED: &str = "LAGGED";
pub const BAD_REQUEST: &str = "BAD_REQUEST";
pub const TOO_MANY_SUBSCRIPTIONS: &str = "TOO_MANY_SUBSCRIPTIONS";
pub const INTROSPECTION_DISABLED: &str = "INTROSPECTION_DISABLED";
pub const PARSE_FAILED: &str = "GRAPHQL_PARSE_FAILED";
pub const VALIDATION_FAILED: &str = "GRAPHQL_VALIDATION_FAILED";
/// Most validation errors one response carries; one more says how many
/// were left out.
pub const MAX_VALIDATION_ERRORS: usize = 20;
pub const RATE_LIMITED: &str = "RATE_LIMITED";
/// A write over a version other than the one the client read, or under a
/// foreign id recorded before with other content.
pub const CONFLICT: &str = "CONFLICT";

/// A server error with a code, for extensions that refuse a request early.
pub fn coded_server_error(code: &'static str, message: impl Into<String>) -> ServerError {
    let mut err = ServerError::new(message, None);
    tag(&mut err, code);
    err
}

/// An error with a code.
pub fn coded(code: &'static str, message: impl Into<String>) -> async_graphql::Error {
    async_graphql::Error::new(message).extend_with(|_, e| e.set("code", code))
}

pub fn bad_input(message: impl Into<String>) -> async_graphql::Error {
    coded(BAD_USER_INPUT, message)
}

pub fn not_found(message: impl Into<String>) -> async_graphql::Error {
    coded(NOT_FOUND, message)
}

pub fn forbidden(message: impl Into<String>) -> async_graphql::Error {
    coded(FORBIDDEN, message)
}

/// Maps a store error to its code. Internal details are logged, not answered.
pub fn store_error(err: &StoreError) -> async_graphql::Error {
    match err.kind {
        ErrorKind::InvalidInput => bad_input(err.message.clone()),
        ErrorKind::NotFound => not_found(err.message.clone()),
        ErrorKind::Unavailable => {
            error!(cause = %err.chain(), "store unavailable");
            coded(
                STORAGE_UNAVAILABLE,
                "the store cannot take this request now; try again shortly",
            )
        }
        ErrorKind::LeaseLost | ErrorKind::Internal => {
            error!(cause = %err.chain(), "internal store error");
            coded(INTERNAL, "internal error")
        }
    }
}

/// `.api()` turns store and input errors into coded API errors.
pub trait ApiResultExt<T> {
    fn api(self) -> async_graphql::Result<T>;
}

impl<T> ApiResultExt<T> for Result<T, StoreError> {
    fn api(self) -> async_graphql::Result<T> {
        self.map_err(|e| store_error(&e))
    }
}

impl<T> ApiResultExt<T> for Result<T, Arc<StoreError>> {
    fn api(self) -> async_graphql::Result<T> {
        self.map_err(|e| store_error(&e))
    }
}

impl<T> ApiResultExt<T> for Result<T, InputError> {
    fn api(self) -> async_graphql::Result<T> {
        self.map_err(|e| bad_input(e.0))
    }
}

fn has_code(err: &ServerError) -> bool {
    err.extensions
        .as_ref()
        .is_some_and(|ext| ext.get("code").is_some())
}

fn tag(err: &mut ServerError, code: &'static str) {
    if !has_code(err) {
        err.extensions
            .get_or_insert_with(Default::default)
            .set("code", code);
    }
}

/// True for async-graphql's messages about a bad argument value or variable:
/// the client sent a value of the wrong type, shape or enum member.
fn is_input_error(message: &str) -> bool {
    message.starts_with("Invalid value for argument")
        || message.starts_with("Failed to parse")
        || message.starts_with("Expected input type")
        || (message.starts_with("Variable ") && message.ends_with("is not defined."))
        || message.starts_with("Unknown operation named")
        || message.starts_with("Operation name required")
        || message.contains("Oneof")
}

/// The request asks for something its transport cannot do.
fn is_transport_error(message: &str) -> bool {
    message.contains("not supported on this transport")
}

/// What async-graphql says of a `@oneOf` input given more or fewer than one
/// field.
const ONE_OF: &str = "Oneof input objects requires have exactly one field";

/// Says in plain words how to mend what async-graphql reports tersely: a
/// `@oneOf` input given more or fewer than one field (naming the fields
/// given, when `request` has them). A `DateTime` that does not parse is
/// refused, with its format, before anything runs (see [`super::values`]).
fn explain(err: &mut ServerError, request: Option<&(String, Variables)>) {
    if err.message.contains(ONE_OF) {
        let path = err.message.split('"').nth(1).unwrap_or_default().to_owned();
        let given = request.and_then(|(query, variables)| one_of_given(query, variables, &path));
        err.message = match given {
            Some(given) if given.is_empty() => {
                format!("`{path}` takes exactly one of its fields (it is a @oneOf input); none was given")
            }
            Some(given) => format!(
                "`{path}` takes exactly one of its fields (it is a @oneOf input), but {} were given: {}",
                given.len(),
                given.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
            ),
            None => format!("`{path}` takes exactly one of its fields (it is a @oneOf input)"),
        };
    }
}

/// The fields given (not null) to the input at `path` (an argument, then
/// the input fields within it) of any field of `query`, variables resolved.
fn one_of_given(query: &str, variables: &Variables, path: &str) -> Option<Vec<String>> {
    use async_graphql::parser::types::{Selection, SelectionSet};
    use async_graphql::{Name, Value};
    let (argument, within) = path.split_once('.').map_or((path, ""), |(a, w)| (a, w));
    let document = async_graphql::parser::parse_query(query).ok()?;
    fn walk<'d>(set: &'d SelectionSet, out: &mut Vec<&'d async_graphql::parser::types::Field>) {
        for item in &set.items {
            match &item.node {
                Selection::Field(f) => {
                    out.push(&f.node);
                    walk(&f.node.selection_set.node, out);
                }
                Selection::InlineFragment(f) => walk(&f.node.selection_set.node, out),
                Selection::FragmentSpread(_) => {}
            }
        }
    }
    let mut fields = Vec::new();
    for (_, operation) in document.operations.iter() {
        walk(&operation.node.selection_set.node, &mut fields);
    }
    for fragment in document.fragments.values() {
        walk(&fragment.node.selection_set.node, &mut fields);
    }
    fields.into_iter().find_map(|field| {
        let value = field.get_argument(argument)?.node.clone();
        let mut value = value
            .into_const_with(|name: Name| variables.get(&name).cloned().ok_or(()))
            .ok()?;
        for step in within.split('.').filter(|s| !s.is_empty()) {
            let Value::Object(mut object) = value else {
                return None;
            };
            value = object.shift_remove(step)?;
        }
        let Value::Object(object) = value else {
            return None;
        };
        let given: Vec<String> = object
            .into_iter()
            .filter(|(_, v)| *v != Value::Null)
            .map(|(k, _)| k.to_string())
            .collect();
        (given.len() != 1).then_some(given)
    })
}

/// Longest unknown name a suggestion is looked for. Every name a document
/// writes is bounded already (see [`super::shape`]); this keeps the bound
/// where the comparing is done, each costing the two lengths multiplied.
const MAX_SUGGESTED_NAME: usize = crate::model::limits::MAX_GRAPHQL_NAME_BYTES;

/// Adds the nearest name to an unknown argument or field (async-graphql's
/// own suggestions are switched off: see [`super::schema`]).
fn suggest(err: &mut ServerError, registry: &async_graphql::registry::Registry) {
    let message = &err.message;
    if message.contains("Did you mean") {
        return;
    }
    let quoted: Vec<&str> = message.split('"').skip(1).step_by(2).collect();
    let fields = |ty: &str| registry.types.get(ty).and_then(|t| t.fields());
    let (wrong, options): (&str, Vec<&str>) = match quoted.as_slice() {
        [arg, field, ty] if message.starts_with("Unknown argument") => {
            let Some(field) = fields(ty).and_then(|f| f.get(*field)) else {
                return;
            };
            (arg, field.args.keys().map(String::as_str).collect())
        }
        [field, ty] if message.starts_with("Unknown field") => {
            let Some(fields) = fields(ty) else { return };
            (field, fields.keys().map(String::as_str).collect())
        }
        _ => return,
    };
    if let Some(name) = nearest(wrong, options) {
        err.message = format!("{} Did you mean \"{name}\"?", err.message);
    }
}

/// The option nearest `wrong`, if one is near enough: a third of its
/// characters at most may differ. Names longer than [`MAX_SUGGESTED_NAME`]
/// are not compared, nor options whose length alone differs by more.
fn nearest<'o>(wrong: &str, options: impl IntoIterator<Item = &'o str>) -> Option<&'o str> {
    if wrong.len() > MAX_SUGGESTED_NAME {
        return None;
    }
    let length = wrong.chars().count();
    let most = (length / 3).max(1);
    // Optimal string alignment: a swap of neighbours is one edit, so
    // `frist` is one from `first`.
    options
        .into_iter()
        .filter(|option| option.chars().count().abs_diff(length) <= most)
        .map(|option| (strsim::osa_distance(wrong, option), option))
        .filter(|(d, _)| *d <= most)
        .min()
        .map(|(_, option)| option)
}

/// Tags errors that carry no code: what async-graphql reports about the
/// request itself is the client's; anything else is ours.
fn tag_response(mut response: Response, request: Option<&(String, Variables)>) -> Response {
    for err in &mut response.errors {
        let code = if is_input_error(&err.message) {
            BAD_USER_INPUT
        } else if is_transport_error(&err.message) {
            BAD_REQUEST
        } else {
            INTERNAL
        };
        tag(err, code);
        explain(err, request);
    }
    response
}

/// The extension that puts a code on every error.
pub struct ErrorCodes;

impl ExtensionFactory for ErrorCodes {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(ErrorCodesExtension::default())
    }
}

#[derive(Default)]
struct ErrorCodesExtension {
    /// The request's document and variables, kept to say what was given
    /// where an input is refused.
    request: std::sync::Mutex<Option<(String, Variables)>>,
}

impl ErrorCodesExtension {
    fn request(&self) -> Option<(String, Variables)> {
        self.request.lock().ok()?.clone()
    }
}

#[async_trait::async_trait]
impl Extension for ErrorCodesExtension {
    async fn request(&self, ctx: &ExtensionContext<'_>, next: NextRequest<'_>) -> Response {
        let response = next.run(ctx).await;
        let request = (!response.errors.is_empty())
            .then(|| self.request())
            .flatten();
        tag_response(response, request.as_ref())
    }

    fn subscribe<'s>(
        &self,
        ctx: &ExtensionContext<'_>,
        stream: BoxStream<'s, Response>,
        next: NextSubscribe<'_>,
    ) -> BoxStream<'s, Response> {
        next.run(ctx, stream)
            .map(|response| tag_response(response, None))
            .boxed()
    }

    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        if let Ok(mut kept) = self.request.lock() {
            *kept = Some((query.to_owned(), variables.clone()));
        }
        next.run(ctx, query, variables).await.map_err(|mut err| {
            tag(&mut err, PARSE_FAILED);
            err
        })
    }

    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        next.run(ctx).await.map_err(|mut errs| {
            let request = self.request();
            let left_out = errs.len().saturating_sub(MAX_VALIDATION_ERRORS);
            errs.truncate(MAX_VALIDATION_ERRORS);
            for err in &mut errs {
                let code = if is_input_error(&err.message) {
                    BAD_USER_INPUT
                } else {
                    VALIDATION_FAILED
                };
                tag(err, code);
                explain(err, request.as_ref());
                suggest(err, &ctx.schema_env.registry);
            }
            if left_out > 0 {
                errs.push(coded_server_error(
                    VALIDATION_FAILED,
                    format!("{left_out} more validation errors left out; mend these first"),
                ));
            }
            errs
        })
    }
}

/// Refuses introspection with a clear error where it is switched off (the
/// library's own switch answers `__schema` with a silent null).
pub struct NoIntrospection;

impl ExtensionFactory for NoIntrospection {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(NoIntrospectionExtension)
    }
}

struct NoIntrospectionExtension;

/// Whether a selection set asks for `__schema` or `__type`, directly or
/// through inline fragments (named fragments are checked where defined).
fn asks_introspection(set: &async_graphql::parser::types::SelectionSet) -> bool {
    use async_graphql::parser::types::Selection;
    set.items.iter().any(|item| match &item.node {
        Selection::Field(field) => matches!(field.node.name.node.as_str(), "__schema" | "__type"),
        Selection::InlineFragment(fragment) => {
            asks_introspection(&fragment.node.selection_set.node)
        }
        Selection::FragmentSpread(_) => false,
    })
}

#[async_trait::async_trait]
impl Extension for NoIntrospectionExtension {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let document = next.run(ctx, query, variables).await?;
        let operations = document
            .operations
            .iter()
            .map(|(_, op)| &op.node.selection_set.node);
        let fragments = document
            .fragments
            .values()
            .map(|f| &f.node.selection_set.node);
        if operations.chain(fragments).any(asks_introspection) {
            return Err(coded_server_error(
                INTROSPECTION_DISABLED,
                "introspection is disabled on this server",
            ));
        }
        Ok(document)
    }
}

#[cfg(test)]
mod tests {
    use async_graphql::{EmptyMutation, EmptySubscription, Schema, SimpleObject};

    use super::*;

    #[derive(SimpleObject)]
    struct Root {
        first: i32,
        viewer: i32,
    }

    async fn first_error(query: &str) -> ServerError {
        let schema = Schema::build(
            Root {
                first: 1,
                viewer: 2,
            },
            EmptyMutation,
            EmptySubscription,
        )
        .extension(ErrorCodes)
        .finish();
        let mut response = schema.execute(query).await;
        assert!(!response.errors.is_empty(), "{query} failed");
        response.errors.remove(0)
    }

    #[tokio::test]
    async fn a_swapped_pair_of_letters_is_suggested() {
        // Two edits for async-graphql's own distance, which suggests nothing;
        // one swap here.
        let err = first_error("{ frist }").await;
        assert!(
            err.message.ends_with("Did you mean \"first\"?"),
            "{}",
            err.message
        );
        let err = first_error("{ veiwer }").await;
        assert!(err.message.contains("\"viewer\""), "{}", err.message);
        // Nothing near: no suggestion.
        let err = first_error("{ somethingElse }").await;
        assert!(!err.message.contains("Did you mean"), "{}", err.message);
    }

    #[test]
    fn no_name_past_the_bound_is_compared() {
        let near = |len: usize| {
            let wrong = format!("{}ab", "n".repeat(len - 2));
            let option = format!("{}ba", "n".repeat(len - 2));
            nearest(&wrong, [option.as_str()]).is_some()
        };
        assert!(near(MAX_SUGGESTED_NAME), "one swap apart");
        assert!(!near(MAX_SUGGESTED_NAME + 1), "as near, but too long");
    }
}
