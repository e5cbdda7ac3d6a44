//! The timeline-layout comparison as a table, its targets, and a grouped
//! bar chart of each variant against items without copies.

use std::fmt::Write as _;
use std::path::Path;

use super::figures::{check, grouped_bars, Bars, TargetCheck};
use super::layouts::LayoutResult;

fn variant(l: &LayoutResult) -> String {
    if l.embed_actions {
        format!("{} + copies", l.layout)
    } else {
        l.layout.clone()
    }
}

/// The comparison as a markdown table, one row per layout and embedding.
pub fn markdown(layouts: &[LayoutResult]) -> String {
    let mut out = String::from(
        "| layout | deliveries / s | documents / delivery | bytes / delivery \
         | write commands / 1,000 deliveries | read commands / page | pages / s (c=16) \
         | page p50 / p99 |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for l in layouts {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.3} | {:.0} | {:.1} | {:.2} | {:.0} | {:.2} / {:.2} ms |",
            variant(l),
            l.deliveries_per_sec,
            l.documents_per_delivery,
            l.bytes_per_delivery,
            l.write_commands_per_1k,
            l.reads_per_page,
            l.pages_per_sec,
            l.page.p50_ms,
            l.page.p99_ms,
        );
    }
    if let Some(l) = layouts.first() {
        let _ = writeln!(
            out,
            "\n{} actions, {} deliveries each run (push); pages of `feed(first: 25)` with \
             actors and descriptors, no counts, {} per run.",
            l.actions, l.deliveries, l.page.count
        );
    }
    out
}

/// What the comparison is judged by: copies make a page one read of the
/// timeline (beside the reader's pending unfollows, read alongside).
pub fn targets(layouts: &[LayoutResult]) -> Vec<TargetCheck> {
    layouts
        .iter()
        .filter(|l| l.embed_actions)
        .map(|l| {
            check(
                &format!("{}: read commands per page", variant(l)),
                "<= 2",
                Some((format!("{:.2}", l.reads_per_page), l.reads_per_page <= 2.05)),
            )
        })
        .collect()
}

/// Bars per figure, one per variant, each as a multiple of items without
/// copies (log scale: lower is cheaper or faster, but for pages/s and
/// deliveries/s, shown as their inverse: time per page, per delivery).
pub fn plot(path: &Path, backend: &str, layouts: &[LayoutResult]) -> anyhow::Result<()> {
    let Some(base) = layouts
        .iter()
        .find(|l| l.layout == "items" && !l.embed_actions)
        .or(layouts.first())
    else {
        return Ok(());
    };
    type Pick = fn(&LayoutResult) -> f64;
    let figures: [(&str, Pick); 6] = [
        ("time/delivery", |l| 1.0 / l.deliveries_per_sec.max(1e-9)),
        ("docs/delivery", |l| l.documents_per_delivery),
        ("bytes/delivery", |l| l.bytes_per_delivery),
        ("reads/page", |l| l.reads_per_page),
        ("time/page c=16", |l| 1.0 / l.pages_per_sec.max(1e-9)),
        ("page p99", |l| l.page.p99_ms),
    ];
    let ratio = |l: &LayoutResult, pick: Pick| (pick(l) / pick(base).max(1e-12)).clamp(1e-4, 1e4);
    let groups: Vec<&str> = figures.iter().map(|(name, _)| *name).collect();
    let series: Vec<Bars> = layouts
        .iter()
        .map(|l| Bars {
            label: variant(l),
            faint: l.embed_actions,
            values: figures.iter().map(|(_, pick)| ratio(l, *pick)).collect(),
        })
        .collect();
    let caption = format!(
        "Timeline layouts against {} ({backend}; lower is better)",
        variant(base)
    );
    grouped_bars(path, &caption, &groups, &series)
}
