//! What a process tells about itself beyond `/metrics`: log lines on stdout
//! (filtered by `RUST_LOG`), among them one per GraphQL operation, and, with
//! `--otlp-endpoint`, a span per GraphQL operation exported over OTLP.
//!
//! The operation spans are `tracing` spans of their own target
//! ([`OPERATION_SPAN`]): without an endpoint no layer wants them, so they are
//! disabled where they are made and cost next to nothing; with one, only they
//! go to the exporter, and the log lines never show them (their fields hold
//! the whole document).

use std::io::IsTerminal as _;

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing::Metadata;
use tracing_subscriber::filter::{filter_fn, EnvFilter, FilterExt as _, LevelFilter};
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer as _;

/// Target of the span each GraphQL operation runs in.
pub const OPERATION_SPAN: &str = "riverfeed::graphql";
/// Target of the log line each GraphQL operation ends with.
pub const OPERATION_LOG: &str = "riverfeed::operation";

/// The OTLP/HTTP path traces are posted to, under a collector's base URL.
const TRACES_PATH: &str = "/v1/traces";

/// Where logs and traces go, as the command line says.
#[derive(Clone, Debug)]
pub struct Observe {
    /// The level when `RUST_LOG` says nothing (`info`, `warn`).
    pub default_level: &'static str,
    /// Log to stderr instead of stdout (commands that print their results).
    pub stderr: bool,
    /// The OTLP collector's base URL (`http://collector:4318`); no traces
    /// without one.
    pub otlp_endpoint: Option<String>,
}

/// Keeps the trace exporter of the process; [`Tracing::shutdown`] sends
/// what it still holds.
#[must_use = "shut it down to send the last spans"]
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
}

impl Observe {
    /// Installs the process's subscriber: the log lines and, with an
    /// endpoint, the exporter of operation spans.
    pub fn init(&self) -> anyhow::Result<Tracing> {
        let filter = EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(self.default_level));
        // With a hint, the pair's hint is the level filter's: without one,
        // the `log` records of the libraries (tungstenite traces every frame
        // it reads and writes) would all be built and filtered at run time,
        // several per websocket message.
        let not_operation_span =
            filter_fn(|meta| !is_operation_span(meta)).with_max_level_hint(LevelFilter::TRACE);
        // Colours for a terminal only, not for a file or a log collector.
        let (writer, ansi) = if self.stderr {
            (
                BoxMakeWriter::new(std::io::stderr),
                std::io::stderr().is_terminal(),
            )
        } else {
            (
                BoxMakeWriter::new(std::io::stdout),
                std::io::stdout().is_terminal(),
            )
        };
        let logs = tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(ansi)
            .with_filter(filter.and(not_operation_span));
        let Some(endpoint) = &self.otlp_endpoint else {
            tracing_subscriber::registry().with(logs).try_init()?;
            return Ok(Tracing { provider: None });
        };
        let provider = provider(endpoint)?;
        let spans = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("riverfeed"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            // No other OpenTelemetry code here needs the span's context. Left
            // unstarted until it closes, a span takes its name as late as the
            // document parses (a started one would keep its first).
            .with_context_activation(false)
            // Operation spans are `info` spans.
            .with_filter(filter_fn(is_operation_span).with_max_level_hint(LevelFilter::INFO));
        tracing_subscriber::registry()
            .with(logs)
            .with(spans)
            .try_init()?;
        tracing::info!(endpoint = %traces_url(endpoint), "exporting GraphQL operation spans over OTLP");
        Ok(Tracing {
            provider: Some(provider),
        })
    }
}

fn is_operation_span(meta: &Metadata<'_>) -> bool {
    meta.is_span() && meta.target() == OPERATION_SPAN
}

/// The URL spans are posted to: the collector's base URL with the traces
/// path (as `OTEL_EXPORTER_OTLP_ENDPOINT` is read), unless it ends in it.
pub fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    if base.ends_with(TRACES_PATH) {
        base.to_owned()
    } else {
        format!("{base}{TRACES_PATH}")
    }
}

/// Spans batched on the SDK's own thread and posted as protobuf. The blocking
/// HTTP client is the one that works there: that thread has no async runtime.
/// `OTEL_BSP_*` tune the batches (`OTEL_BSP_SCHEDULE_DELAY`, 5 s by default).
fn provider(endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    let url = traces_url(endpoint);
    anyhow::ensure!(
        url.starts_with("http://"),
        "--otlp-endpoint {endpoint}: give an http:// URL of an OTLP/HTTP collector \
         (this build speaks neither TLS nor gRPC to it)"
    );
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .build()
        .with_context(|| format!("cannot set up the OTLP exporter for {endpoint}"))?;
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, say better.
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("riverfeed");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

impl Tracing {
    /// Sends the spans still batched and stops the exporter. It blocks on
    /// the exporter's thread, so it runs on a blocking thread of its own.
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        match done {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::warn!(cause = %err, "cannot send the last spans"),
            Err(err) => tracing::warn!(cause = %err, "the span exporter's shutdown failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::traces_url;

    #[test]
    fn spans_go_to_the_traces_path_under_the_collector() {
        assert_eq!(
            traces_url("http://collector:4318"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/v1/traces"),
            "http://collector:4318/v1/traces"
        );
    }
}
