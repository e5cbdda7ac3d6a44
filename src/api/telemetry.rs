//! The one place that sees every GraphQL operation: it counts and times them
//! for `/metrics`, ends each with a log line (type, name, cost, duration,
//! outcome) and runs each in a span named as OpenTelemetry's GraphQL
//! conventions say, exported when `--otlp-endpoint` is set (see
//! [`crate::observe`]). Queries and mutations are measured as one response;
//! subscriptions from their start (logged then) to their end.
//!
//! Neither the log line nor the span carries the request's variables: the
//! span has the document as sent, which holds none of their values.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery, NextPrepareRequest,
    NextRequest, NextSubscribe, NextValidation,
};
use async_graphql::parser::types::{ExecutableDocument, OperationType};
use async_graphql::{Request, Response, ServerError, ServerResult, ValidationResult, Variables};
use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt as _};
use tracing::field::Empty;
use tracing::{info, Instrument as _, Span};

use super::{Identity, Session};
use crate::http::persisted::TrustedDocument;
use crate::metrics::{Metrics, Naming};
use crate::observe::{OPERATION_LOG, OPERATION_SPAN};

/// Longest operation name kept as a label; longer ones are cut.
const MAX_NAME: usize = 64;

/// The extension, installed on the schema.
pub struct RequestMetrics(pub Arc<Metrics>);

impl ExtensionFactory for RequestMetrics {
    fn create(&self) -> Arc<dyn Extension> {
        // Made here, as the request starts, so that it covers all of it. It
        // is disabled (and costs nothing) unless spans are exported.
        let span = tracing::info_span!(
            target: OPERATION_SPAN,
            "graphql operation",
            otel.name = "GraphQL Operation",
            otel.kind = "server",
            otel.status_code = Empty,
            otel.status_description = Empty,
            graphql.operation.type = Empty,
            graphql.operation.name = Empty,
            graphql.document = Empty,
        );
        Arc::new(Measured(Arc::new(Operation {
            metrics: self.0.clone(),
            span,
            started: Instant::now(),
            seen: Mutex::default(),
        })))
    }
}

/// One request's extension; its stream (for a subscription) shares the
/// operation.
struct Measured(Arc<Operation>);

/// One operation, as it is measured.
struct Operation {
    metrics: Arc<Metrics>,
    span: Span,
    started: Instant,
    /// What the steps found out. A std mutex: held for a few assignments,
    /// never across an await.
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// The document's operations: name and type.
    operations: Vec<(String, &'static str)>,
    /// The operation the request asked for by name.
    chosen: Option<String>,
    /// The document is one of the trusted documents: its operation names
    /// are a fixed set, labelled as they are in `/metrics`.
    trusted: bool,
    /// Answered as one response (a query or mutation over HTTP); otherwise
    /// a stream (a subscription, or anything sent over a websocket).
    answered: bool,
    /// The validated operation's complexity and depth.
    cost: Option<(usize, usize)>,
    /// The caller has a valid identity.
    proven: bool,
}

fn type_name(ty: OperationType) -> &'static str {
    match ty {
        OperationType::Query => "query",
        OperationType::Mutation => "mutation",
        OperationType::Subscription => "subscription",
    }
}

impl Seen {
    /// The type and name of the operation run: the one named, or the
    /// document's only one; `unknown` when the document did not parse.
    fn operation(&self) -> (&'static str, &str) {
        let found = match self.chosen.as_deref() {
            Some(name) => self.operations.iter().find(|(n, _)| n == name),
            None => self.operations.first(),
        };
        match found {
            Some((name, ty)) => (*ty, name.as_str()),
            None => ("unknown", ""),
        }
    }
}

impl Operation {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How far the request proved itself, for its name label: a name takes
    /// a series of its own only once its caller authenticated and its
    /// document validated.
    fn naming(&self) -> Naming {
        let seen = self.seen();
        if !seen.proven {
            Naming::Unauthenticated
        } else if seen.trusted {
            Naming::Trusted
        } else if seen.cost.is_some() {
            Naming::Validated
        } else {
            Naming::Authenticated
        }
    }

    /// Counts the operation in `/metrics`, once.
    fn count(&self, ok: bool, took: Option<std::time::Duration>) {
        let naming = self.naming();
        let seen = self.seen();
        let (ty, name) = seen.operation();
        self.metrics.graphql_request(ty, name, naming, ok, took);
    }

    /// A stream's request that failed before it ran: counted now, as
    /// nothing else will count it.
    fn count_failed_stream(&self) {
        if !self.seen().answered {
            self.count(false, None);
        }
    }

    /// Names the span once the document parsed: `{type} {name}`, or the
    /// type alone for an anonymous operation.
    fn describe_span(&self, query: &str) {
        if self.span.is_disabled() {
            return;
        }
        let seen = self.seen();
        let (ty, name) = seen.operation();
        if ty == "unknown" {
            return;
        }
        let span_name = if name.is_empty() {
            ty.to_owned()
        } else {
            format!("{ty} {name}")
        };
        self.span.record("otel.name", span_name.as_str());
        self.span.record("graphql.operation.type", ty);
        if !name.is_empty() {
            self.span.record("graphql.operation.name", name);
        }
        self.span.record("graphql.document", query);
    }

    /// The operation is over: its span's status, and its log line.
    fn finish(&self, codes: &[String], events: Option<u64>) {
        let codes = codes.join(",");
        if !codes.is_empty() {
            self.span.record("otel.status_code", "error");
            self.span.record("otel.status_description", codes.as_str());
        }
        let seen = self.seen();
        let (ty, name) = seen.operation();
        info!(
            target: OPERATION_LOG,
            r#type = ty,
            name = if name.is_empty() { "anonymous" } else { name },
            cost = seen.cost.map(|(complexity, _)| complexity),
            depth = seen.cost.map(|(_, depth)| depth),
            duration_ms = self.started.elapsed().as_micros() as f64 / 1000.0,
            outcome = if codes.is_empty() { "ok" } else { "error" },
            codes = (!codes.is_empty()).then_some(codes.as_str()),
            events,
            "graphql operation"
        );
    }
}

/// Adds the `extensions.code`s of `errors` that `codes` does not hold yet.
/// The error codes extension has put one on every error by the time they
/// come here (it runs inside this one).
fn add_codes(codes: &mut Vec<String>, errors: &[ServerError]) {
    for error in errors {
        let code = error
            .extensions
            .as_ref()
            .and_then(|values| values.get("code"))
            .and_then(|code| match code {
                async_graphql::Value::String(code) => Some(code.as_str()),
                _ => None,
            })
            .unwrap_or(super::error::INTERNAL);
        if !codes.iter().any(|known| known == code) {
            codes.push(code.to_owned());
        }
    }
}

#[async_trait::async_trait]
impl Extension for Measured {
    async fn request(&self, ctx: &ExtensionContext<'_>, next: NextRequest<'_>) -> Response {
        let op = &self.0;
        op.seen().answered = true;
        let response = next.run(ctx).instrument(op.span.clone()).await;
        op.count(response.errors.is_empty(), Some(op.started.elapsed()));
        let mut codes = Vec::new();
        add_codes(&mut codes, &response.errors);
        op.finish(&codes, None);
        response
    }

    /// A stream of responses: a subscription's events, or the one answer to
    /// an operation sent over a websocket. Measured until it is dropped.
    fn subscribe<'s>(
        &self,
        ctx: &ExtensionContext<'_>,
        stream: BoxStream<'s, Response>,
        next: NextSubscribe<'_>,
    ) -> BoxStream<'s, Response> {
        Streamed {
            inner: next.run(ctx, stream),
            op: self.0.clone(),
            events: 0,
            codes: Vec::new(),
        }
        .boxed()
    }

    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        {
            let mut seen = self.0.seen();
            seen.chosen = request
                .operation_name
                .as_deref()
                .map(|n| n.chars().take(MAX_NAME).collect());
            seen.trusted = request
                .data
                .contains_key(&std::any::TypeId::of::<TrustedDocument>());
            // The request's own session (HTTP), or its connection's (a
            // websocket's, in the session data).
            let session = request
                .data
                .get(&std::any::TypeId::of::<Session>())
                .and_then(|data| data.downcast_ref::<Session>())
                .or_else(|| ctx.data_opt::<Session>());
            seen.proven =
                session.is_some_and(|session| matches!(session.identity, Identity::Viewer(_)));
        }
        let prepared = next.run(ctx, request).await;
        if prepared.is_err() {
            self.0.count_failed_stream();
        }
        prepared
    }

    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let op = &self.0;
        let document = match next.run(ctx, query, variables).await {
            Ok(document) => document,
            Err(err) => {
                op.count_failed_stream();
                return Err(err);
            }
        };
        let operations = document
            .operations
            .iter()
            .map(|(name, op)| {
                let name: String = name
                    .map(|n| n.as_str())
                    .unwrap_or_default()
                    .chars()
                    .take(MAX_NAME)
                    .collect();
                (name, type_name(op.node.ty))
            })
            .collect();
        op.seen().operations = operations;
        op.describe_span(query);
        Ok(document)
    }

    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        let op = &self.0;
        let result = match next.run(ctx).await {
            Ok(result) => result,
            Err(errors) => {
                op.count_failed_stream();
                return Err(errors);
            }
        };
        op.seen().cost = Some((result.complexity, result.depth));
        if !op.seen().answered {
            // A stream is counted as it starts (a subscription has no one
            // duration).
            op.count(true, None);
        }
        let seen = op.seen();
        let (ty, name) = seen.operation();
        if ty == "subscription" {
            info!(
                target: OPERATION_LOG,
                r#type = ty,
                name = if name.is_empty() { "anonymous" } else { name },
                cost = result.complexity,
                depth = result.depth,
                "graphql subscription started"
            );
        }
        Ok(result)
    }

    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        self.0.seen().chosen = operation_name.map(|n| n.chars().take(MAX_NAME).collect());
        let response = next.run(ctx, operation_name).await;
        let executor = ctx
            .data_opt::<crate::api::plan::Slot>()
            .map_or(crate::api::plan::Executor::Fallback, |slot| slot.executor());
        let naming = self.0.naming();
        let seen = self.0.seen();
        let (_, name) = seen.operation();
        self.0.metrics.graphql_executed(name, naming, executor);
        drop(seen);
        response
    }
}

/// A stream of responses, run in the operation's span and logged when it
/// ends (it is dropped when it finishes or its client goes).
struct Streamed<'s> {
    inner: BoxStream<'s, Response>,
    op: Arc<Operation>,
    /// Responses sent.
    events: u64,
    /// The codes of the errors among them (a lagged subscription ends
    /// with one).
    codes: Vec<String>,
}

impl Stream for Streamed<'_> {
    type Item = Response;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Response>> {
        let this = &mut *self;
        let polled = {
            let _entered = this.op.span.enter();
            this.inner.poll_next_unpin(cx)
        };
        if let Poll::Ready(Some(response)) = &polled {
            this.events += 1;
            add_codes(&mut this.codes, &response.errors);
        }
        polled
    }
}

impl Drop for Streamed<'_> {
    fn drop(&mut self) {
        self.op.finish(&self.codes, Some(self.events));
    }
}
