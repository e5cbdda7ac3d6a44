//! The reads workload's part of the report: its targets, cold and warm
//! pages of the run's model, each beside `push` and the in-memory
//! reference; and its figures.

use super::figures::{check, TargetCheck};
use super::readers::Executions;
use super::reads::{PageKind, ReadsResult};

/// Stream-Framework's in-process rate on Redis at concurrency 1, the same
/// week as the targets were set on this machine: a feed service's page.
const STREAM_FRAMEWORK_PAGES_PER_SEC: f64 = 2_365.0;

/// The run's model: the one read first (push is read beside it).
fn run_model(reads: &[ReadsResult]) -> &str {
    reads.first().map_or("", |x| x.model.as_str())
}

/// The run's model's `page` at `concurrency`.
fn at(reads: &[ReadsResult], page: PageKind, concurrency: usize) -> Option<&ReadsResult> {
    let model = run_model(reads);
    reads
        .iter()
        .find(|x| x.model == model && x.page == page && x.concurrency == concurrency)
}

/// `x`'s figure as a multiple of the reference's.
fn times(x: f64, reference: f64) -> f64 {
    x / reference.max(f64::MIN_POSITIVE)
}

/// For cold and warm pages of the run's model: at concurrency 1, p50
/// within three times the reference's and at least Stream-Framework's rate;
/// at 64, a third of the reference's rate and p99 within 10 ms.
pub fn targets(reads: Option<&[ReadsResult]>) -> Vec<TargetCheck> {
    let reads = reads.unwrap_or_default();
    let mut checks = Vec::new();
    for page in [PageKind::Cold, PageKind::Warm] {
        let name = page.name();
        let c1 = at(reads, page, 1).filter(|x| x.pages > 0);
        let c64 = at(reads, page, 64).filter(|x| x.pages > 0);
        checks.push(check(
            &format!("{name} feed page, concurrency 1, p50, of the reference's"),
            "<= 3x",
            c1.map(|x| {
                let ratio = times(x.latency.p50_ms, x.reference_latency.p50_ms);
                (
                    format!(
                        "{:.3} ms, {ratio:.1}x of {:.3} ms",
                        x.latency.p50_ms, x.reference_latency.p50_ms
                    ),
                    ratio <= 3.0,
                )
            }),
        ));
        checks.push(check(
            &format!("{name} feed pages, concurrency 1"),
            ">= 2,365 pages/s",
            c1.map(|x| {
                (
                    format!("{:.0} pages/s", x.pages_per_sec),
                    x.pages_per_sec >= STREAM_FRAMEWORK_PAGES_PER_SEC,
                )
            }),
        ));
        checks.push(check(
            &format!("{name} feed pages, concurrency 64, of the reference's"),
            ">= 1/3",
            c64.map(|x| {
                let share = times(x.pages_per_sec, x.reference_per_sec);
                (format!("{:.0}%", 100.0 * share), share >= 1.0 / 3.0)
            }),
        ));
        checks.push(check(
            &format!("{name} feed page, concurrency 64, p99"),
            "<= 10 ms",
            c64.map(|x| {
                (
                    format!("{:.2} ms", x.latency.p99_ms),
                    x.latency.p99_ms <= 10.0,
                )
            }),
        ));
    }
    checks
}

/// The workload's rows of figures: one per model, page and concurrency;
/// how many readers' feeds fill a page; and the share of operations the
/// planned executor ran.
pub fn figures(
    reads: &[ReadsResult],
    full_readers: Option<usize>,
    executions: Option<&Executions>,
    row: &mut dyn FnMut(&str, String, String),
) {
    if let Some(full) = full_readers {
        row(
            "reads",
            "readers".into(),
            format!("{full} users' feeds hold more than a page; they read"),
        );
    }
    for x in reads {
        let model = if x.model.is_empty() {
            "run's"
        } else {
            &x.model
        };
        row(
            "reads",
            format!(
                "{model}, {} pages, feed(first: 25), concurrency {}",
                x.page.name(),
                x.concurrency
            ),
            format!(
                "{:.0} pages/s, p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, {} failures, {:.1} items/page; \
                 {:.0}% of the same-size response from memory ({:.0}/s, p50 {:.3} ms, {} bytes); \
                 cores busy: server {:.2}, load generator {:.2}",
                x.pages_per_sec,
                x.latency.p50_ms,
                x.latency.p99_ms,
                x.latency.p999_ms,
                x.failures,
                x.items_per_page,
                100.0 * times(x.pages_per_sec, x.reference_per_sec),
                x.reference_per_sec,
                x.reference_latency.p50_ms,
                x.reference_bytes,
                x.server_cores,
                x.load_cores
            ),
        );
    }
    if let Some(e) = executions {
        row(
            "reads",
            "operations run by the planned executor".into(),
            format!(
                "{:.0}% ({} planned, {} fallback, from /metrics)",
                100.0 * e.planned_share(),
                e.planned,
                e.fallback
            ),
        );
    }
}
