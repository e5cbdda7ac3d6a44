//! What every part of a run's report is built from, whichever workload it
//! shows: a figure judged against its target ([`TargetCheck`]) and a grouped
//! bar chart ([`grouped_bars`]). The report, the plots and each comparison's
//! section use these; this module uses none of them.

use std::path::Path;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

/// One target and how the run did against it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetCheck {
    pub name: String,
    pub target: String,
    /// The figure, formatted; "not run" when its workload did not run.
    pub value: String,
    /// `None` when not run.
    pub pass: Option<bool>,
}

pub(super) fn check(name: &str, target: &str, figure: Option<(String, bool)>) -> TargetCheck {
    let (value, pass) = match figure {
        Some((value, pass)) => (value, Some(pass)),
        None => ("not run".into(), None),
    };
    TargetCheck {
        name: name.into(),
        target: target.into(),
        value,
        pass,
    }
}

/// The series colours of every chart, in order.
pub(super) const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// One bar series of a grouped chart: its label, whether it is drawn
/// faint, and a value per group.
pub(super) struct Bars {
    pub label: String,
    pub faint: bool,
    pub values: Vec<f64>,
}

/// A grouped bar chart on a log scale: one group per name in `groups`, one
/// bar in each per series, every value a multiple of a baseline (1).
pub(super) fn grouped_bars(
    path: &Path,
    caption: &str,
    groups: &[&str],
    series: &[Bars],
) -> anyhow::Result<()> {
    let all = series.iter().flat_map(|s| s.values.iter().copied());
    let lo = all.clone().fold(1.0f64, f64::min) / 2.0;
    let hi = all.fold(1.0f64, f64::max) * 2.0;
    let root = SVGBackend::new(path, (1100, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(0.0..groups.len() as f64, (lo..hi).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.01 && i < groups.len() {
                groups[i].to_owned()
            } else {
                String::new()
            }
        })
        .y_desc("multiple of the first")
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(plot_err)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (k, s) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let style = if s.faint {
            colour.mix(0.5).filled()
        } else {
            colour.filled()
        };
        let bars = s.values.iter().enumerate().map(|(g, &v)| {
            let x0 = g as f64 + 0.1 + k as f64 * width;
            Rectangle::new([(x0, lo), (x0 + width * 0.9, v.clamp(1e-4, 1e4))], style)
        });
        chart
            .draw_series(bars)
            .map_err(plot_err)?
            .label(s.label.clone())
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

pub(super) fn plot_err<E: std::fmt::Debug>(err: E) -> anyhow::Error {
    anyhow::anyhow!("cannot draw a plot: {err:?}")
}
