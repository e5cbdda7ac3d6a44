//! The timeline-layout comparison as a table, its targets, and a grouped
//! bar chart of each variant against items without copies.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use super::layouts::LayoutResult;
use super::plot::{plot_err, COLOURS};
use super::report::{check, TargetCheck};

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
    let all = figures
        .iter()
        .flat_map(|(_, pick)| layouts.iter().map(move |l| ratio(l, *pick)));
    let lo = all.clone().fold(1.0f64, f64::min) / 2.0;
    let hi = all.fold(1.0f64, f64::max) * 2.0;
    let root = SVGBackend::new(path, (1100, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let groups = figures.len() as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Timeline layouts against {} ({backend}; lower is better)",
                variant(base)
            ),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(0.0..groups, (lo..hi).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(figures.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 && i < figures.len() {
                figures[i].0.to_owned()
            } else {
                String::new()
            }
        })
        .y_desc("multiple of the first")
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(plot_err)?;
    let width = 0.8 / layouts.len() as f64;
    for (k, l) in layouts.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let style = if l.embed_actions {
            colour.mix(0.5).filled()
        } else {
            colour.filled()
        };
        let bars = figures.iter().enumerate().map(|(g, (_, pick))| {
            let x0 = g as f64 + 0.1 + k as f64 * width;
            Rectangle::new([(x0, lo), (x0 + width * 0.9, ratio(l, *pick))], style)
        });
        chart
            .draw_series(bars)
            .map_err(plot_err)?
            .label(variant(l))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}
