//! The feed-model comparison as a table, its targets, and a grouped bar
//! chart of each model against push.

use std::fmt::Write as _;
use std::path::Path;

use super::figures::{check, grouped_bars, Bars, TargetCheck};
use super::models::ModelResult;

/// The comparison as a markdown table, one row per model.
pub fn markdown(models: &[ModelResult]) -> String {
    let mut out = String::from(
        "| model | deliveries / action | deliveries / s | items stored | bytes / user \
         | dormant first page p50 / p99 | active page c=1 p50 / p99 | active page c=16 p50 / p99 \
         | star action done p50 | star action seen p50 |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for m in models {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.0} | {} | {:.0} | {:.2} / {:.2} ms | {:.2} / {:.2} ms | {:.2} / {:.2} ms | {:.1} ms | {:.1} ms |",
            m.model,
            m.deliveries_per_action,
            m.deliveries_per_sec,
            m.feed_items,
            m.bytes_per_user,
            m.dormant_first_page.p50_ms,
            m.dormant_first_page.p99_ms,
            m.active_c1.p50_ms,
            m.active_c1.p99_ms,
            m.active_c16.p50_ms,
            m.active_c16.p99_ms,
            m.star_done.p50_ms,
            m.star_seen.p50_ms,
        );
    }
    if let Some(m) = models.first() {
        let _ = writeln!(
            out,
            "\n{} users ({} in the follow graph's Zipf, up to `--max-follows` each, and the star's \
             {} followers), {}% of the graph's readers dormant, {} actions by uniformly drawn \
             actors, then {} actions by the star.",
            m.users,
            m.users - m.star_followers - 1,
            m.star_followers,
            m.dormant_percent,
            m.actions,
            m.star_done.count
        );
    }
    out
}

/// The targets the comparison is judged by.
pub fn targets(models: &[ModelResult]) -> Vec<TargetCheck> {
    let of = |name: &str| models.iter().find(|m| m.model == name);
    let push = of("push");
    vec![
        check(
            "hybrid: star's action done (p50)",
            "<= 10 ms",
            of("hybrid").map(|m| {
                (
                    format!("{:.1} ms", m.star_done.p50_ms),
                    m.star_done.p50_ms <= 10.0,
                )
            }),
        ),
        check(
            "hybrid: star's action seen live (p99)",
            "<= 1 s",
            of("hybrid").map(|m| {
                (
                    format!("{:.1} ms", m.star_seen.p99_ms),
                    m.star_seen.p99_ms <= 1000.0,
                )
            }),
        ),
        check(
            "rivers: items stored against push",
            ">= 5x fewer",
            of("rivers").zip(push).map(|(r, p)| {
                let ratio = p.feed_items as f64 / r.feed_items.max(1) as f64;
                (format!("{ratio:.1}x fewer"), ratio >= 5.0)
            }),
        ),
        check(
            "rivers: active page c=1 p50 against push",
            "as fast (<= 1.1x)",
            of("rivers").zip(push).map(|(r, p)| {
                let ratio = r.active_c1.p50_ms / p.active_c1.p50_ms.max(1e-9);
                (format!("{ratio:.2}x"), ratio <= 1.1)
            }),
        ),
        check(
            "pull: first page (<= 100 follows) p50",
            "<= 5 ms",
            of("pull").map(|m| {
                (
                    format!("{:.2} ms", m.dormant_first_page.p50_ms),
                    m.dormant_first_page.p50_ms <= 5.0,
                )
            }),
        ),
    ]
}

/// Bars per figure, one per model, each as a multiple of push's figure
/// (log scale: lower is cheaper or faster).
pub fn plot(path: &Path, backend: &str, models: &[ModelResult]) -> anyhow::Result<()> {
    let Some(push) = models.iter().find(|m| m.model == "push") else {
        return Ok(());
    };
    type Pick = fn(&ModelResult) -> f64;
    let figures: [(&str, Pick); 7] = [
        ("deliveries/action", |m| m.deliveries_per_action),
        ("items stored", |m| m.feed_items as f64),
        ("bytes/user", |m| m.bytes_per_user),
        ("dormant 1st page", |m| m.dormant_first_page.p50_ms),
        ("active page c=1", |m| m.active_c1.p50_ms),
        ("star: done", |m| m.star_done.p50_ms),
        ("star: seen", |m| m.star_seen.p50_ms),
    ];
    let ratio = |m: &ModelResult, pick: Pick| (pick(m) / pick(push).max(1e-9)).clamp(1e-4, 1e4);
    let groups: Vec<&str> = figures.iter().map(|(name, _)| *name).collect();
    let series: Vec<Bars> = models
        .iter()
        .map(|m| Bars {
            label: m.model.clone(),
            faint: false,
            values: figures.iter().map(|(_, pick)| ratio(m, *pick)).collect(),
        })
        .collect();
    let caption = format!("Feed models against push, p50 ({backend}; lower is better)");
    grouped_bars(path, &caption, &groups, &series)
}
