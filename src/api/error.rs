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
pub const UNAVAILABLE: &str = "UNAVAILABLE";
pub const INTERNAL: &str = "INTERNAL_SERVER_ERROR";
pub const LAGGED: &str = "LAGGED";
pub const BAD_REQUEST: &str = "BAD_REQUEST";
pub const TOO_MANY_SUBSCRIPTIONS: &str = "TOO_MANY_SUBSCRIPTIONS";
pub const INTROSPECTION_DISABLED: &str = "INTROSPECTION_DISABLED";
pub const PARSE_FAILED: &str = "GRAPHQL_PARSE_FAILED";
pub const VALIDATION_FAILED: &str = "GRAPHQL_VALIDATION_FAILED";
pub const RATE_LIMITED: &str = "RATE_LIMITED";
/// A write over a version other than the one the client read.
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
            coded(UNAVAILABLE, "the store is unavailable; try again shortly")
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
        || (message.starts_with("Variable ") && message.ends_with("is not defined."))
        || message.starts_with("Unknown operation named")
        || message.starts_with("Operation name required")
        || message.contains("Oneof")
}

/// The request asks for something its transport cannot do.
fn is_transport_error(message: &str) -> bool {
    message.contains("not supported on this transport")
}

/// Tags errors that carry no code: what async-graphql reports about the
/// request itself is the client's; anything else is ours.
fn tag_response(mut response: Response) -> Response {
    for err in &mut response.errors {
        let code = if is_input_error(&err.message) {
            BAD_USER_INPUT
        } else if is_transport_error(&err.message) {
            BAD_REQUEST
        } else {
            INTERNAL
        };
        tag(err, code);
    }
    response
}

/// The extension that puts a code on every error.
pub struct ErrorCodes;

impl ExtensionFactory for ErrorCodes {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(ErrorCodesExtension)
    }
}

struct ErrorCodesExtension;

#[async_trait::async_trait]
impl Extension for ErrorCodesExtension {
    async fn request(&self, ctx: &ExtensionContext<'_>, next: NextRequest<'_>) -> Response {
        tag_response(next.run(ctx).await)
    }

    fn subscribe<'s>(
        &self,
        ctx: &ExtensionContext<'_>,
        stream: BoxStream<'s, Response>,
        next: NextSubscribe<'_>,
    ) -> BoxStream<'s, Response> {
        next.run(ctx, stream).map(tag_response).boxed()
    }

    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
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
            for err in &mut errs {
                let code = if is_input_error(&err.message) {
                    BAD_USER_INPUT
                } else {
                    VALIDATION_FAILED
                };
                tag(err, code);
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
