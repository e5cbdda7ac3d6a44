//! Counts and times every GraphQL request by operation type and name, for
//! `/metrics`: queries and mutations with their outcome and duration,
//! subscriptions as they start (once their document parsed).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use std::sync::atomic::{AtomicBool, Ordering};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery, NextPrepareRequest,
    NextRequest,
};
use async_graphql::parser::types::{ExecutableDocument, OperationType};
use async_graphql::{Request, Response, ServerResult, Variables};

use crate::metrics::Metrics;

/// Longest operation name kept as a label; longer ones are cut.
const MAX_NAME: usize = 64;

/// The extension, installed on the schema.
pub struct RequestMetrics(pub Arc<Metrics>);

impl ExtensionFactory for RequestMetrics {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(Measured {
            metrics: self.0.clone(),
            operations: Mutex::default(),
            chosen: Mutex::default(),
            answered: AtomicBool::new(false),
        })
    }
}

/// One request's measurement.
struct Measured {
    metrics: Arc<Metrics>,
    /// The document's operations: name and type.
    operations: Mutex<Vec<(String, &'static str)>>,
    /// The operation the request asked for by name.
    chosen: Mutex<Option<String>>,
    /// A query or mutation answered as one response (counted when it is);
    /// otherwise a subscription's stream (counted once it parsed).
    answered: AtomicBool,
}

fn type_name(ty: OperationType) -> &'static str {
    match ty {
        OperationType::Query => "query",
        OperationType::Mutation => "mutation",
        OperationType::Subscription => "subscription",
    }
}

impl Measured {
    /// The type and name of the operation run: the one named, or the
    /// document's only one; `unknown` when the document did not parse.
    fn operation(&self) -> (&'static str, String) {
        let operations = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        let chosen = self.chosen.lock().unwrap_or_else(|e| e.into_inner());
        let found = match chosen.as_deref() {
            Some(name) => operations.iter().find(|(n, _)| n == name),
            None => operations.first(),
        };
        match found {
            Some((name, ty)) => (ty, name.clone()),
            None => ("unknown", String::new()),
        }
    }
}

#[async_trait::async_trait]
impl Extension for Measured {
    async fn request(&self, ctx: &ExtensionContext<'_>, next: NextRequest<'_>) -> Response {
        self.answered.store(true, Ordering::Relaxed);
        let started = Instant::now();
        let response = next.run(ctx).await;
        let (ty, name) = self.operation();
        let ok = response.errors.is_empty();
        self.metrics
            .graphql_request(ty, &name, ok, Some(started.elapsed()));
        response
    }

    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        *self.chosen.lock().unwrap_or_else(|e| e.into_inner()) = request
            .operation_name
            .as_deref()
            .map(|n| n.chars().take(MAX_NAME).collect());
        next.run(ctx, request).await
    }

    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let parsed = next.run(ctx, query, variables).await;
        let streamed = !self.answered.load(Ordering::Relaxed);
        let document = match parsed {
            Ok(document) => document,
            Err(err) => {
                if streamed {
                    self.metrics.graphql_request("unknown", "", false, None);
                }
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
        *self.operations.lock().unwrap_or_else(|e| e.into_inner()) = operations;
        if streamed {
            // A subscription: counted as it starts (it has no one duration).
            let (ty, name) = self.operation();
            self.metrics.graphql_request(ty, &name, true, None);
        }
        Ok(document)
    }

    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        *self.chosen.lock().unwrap_or_else(|e| e.into_inner()) =
            operation_name.map(|n| n.chars().take(MAX_NAME).collect());
        next.run(ctx, operation_name).await
    }
}
