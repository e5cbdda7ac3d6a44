//! SVG plots of a run (plotters' SVG backend: text is written as SVG `<text>`,
//! so no fonts are needed to draw them).

use std::path::Path;

use plotters::prelude::*;

use super::figures::{plot_err, COLOURS};
use super::Results;

/// The plots a run has data for.
pub fn names(r: &Results) -> Option<Vec<&'static str>> {
    let mut names = Vec::new();
    if r.ramp.as_ref().is_some_and(|p| !p.is_empty()) {
        names.push("ramp.svg");
    }
    if r.reads.as_ref().is_some_and(|p| !p.is_empty()) {
        names.push("reads.svg");
    }
    if r.live.as_ref().is_some_and(|p| !p.is_empty()) {
        names.push("live.svg");
    }
    if r.models.as_ref().is_some_and(|p| !p.is_empty()) {
        names.push("models.svg");
    }
    if r.layouts.as_ref().is_some_and(|p| !p.is_empty()) {
        names.push("layouts.svg");
    }
    (!names.is_empty()).then_some(names)
}

pub fn write_all(dir: &Path, r: &Results) -> anyhow::Result<()> {
    if let Some(ramp) = r.ramp.as_ref().filter(|p| !p.is_empty()) {
        let points: Vec<(f64, f64)> = ramp
            .iter()
            .map(|p| (p.followers.max(1) as f64, p.secs.max(1e-4)))
            .collect();
        log_log(
            &dir.join("ramp.svg"),
            &format!("Fan-out of one action ({})", r.meta.backend),
            "followers",
            "seconds to last item stored",
            &[("time to deliver", points)],
        )?;
    }
    if let Some(reads) = r.reads.as_ref().filter(|p| !p.is_empty()) {
        // The run's model (read first; push is read beside it).
        use super::reads::PageKind;
        let series =
            |name: &'static str, page: PageKind, pick: fn(&super::reads::ReadsResult) -> f64| {
                (
                    name,
                    reads
                        .iter()
                        .filter(|x| x.model == reads[0].model && x.page == page)
                        .map(|x| (x.concurrency.max(1) as f64, pick(x).max(1e-3)))
                        .collect::<Vec<_>>(),
                )
            };
        log_log(
            &dir.join("reads.svg"),
            &format!("feed(first: 25) latency ({})", r.meta.backend),
            "concurrent clients",
            "milliseconds",
            &[
                series("warm p50", PageKind::Warm, |x| x.latency.p50_ms),
                series("warm p99", PageKind::Warm, |x| x.latency.p99_ms),
                series("cold p50", PageKind::Cold, |x| x.latency.p50_ms),
                series("cold p99", PageKind::Cold, |x| x.latency.p99_ms),
            ],
        )?;
    }
    if let Some(live) = r.live.as_ref().filter(|p| !p.is_empty()) {
        cdf(&dir.join("live.svg"), &r.meta.backend, live)?;
    }
    if let Some(models) = r.models.as_ref().filter(|p| !p.is_empty()) {
        super::models_report::plot(&dir.join("models.svg"), &r.meta.backend, models)?;
    }
    if let Some(layouts) = r.layouts.as_ref().filter(|p| !p.is_empty()) {
        super::layouts_report::plot(&dir.join("layouts.svg"), &r.meta.backend, layouts)?;
    }
    Ok(())
}

fn bounds(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let lo = values.clone().fold(f64::INFINITY, f64::min);
    let hi = values.fold(f64::NEG_INFINITY, f64::max);
    (lo / 2.0, hi * 2.0)
}

fn log_log(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    let all = series.iter().flat_map(|(_, s)| s.iter());
    let (x0, x1) = bounds(all.clone().map(|p| p.0));
    let (y0, y1) = bounds(all.map(|p| p.1));
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(plot_err)?;
    for (i, (name, points)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                colour.stroke_width(2),
            ))
            .map_err(plot_err)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))
            .map_err(plot_err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Share of subscribers reached against time since `recordAction`.
fn cdf(path: &Path, backend: &str, live: &[super::live::LiveResult]) -> anyhow::Result<()> {
    let x1 = live
        .iter()
        .flat_map(|l| l.cdf_ms.iter().copied())
        .fold(1.0f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Live ADDED events reaching subscribers ({backend})"),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(0f64..x1, 0f64..100f64)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("milliseconds since recordAction")
        .y_desc("% of subscribers reached")
        .draw()
        .map_err(plot_err)?;
    for (i, l) in live.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let n = l.cdf_ms.len().max(1) as f64;
        let points = l
            .cdf_ms
            .iter()
            .enumerate()
            .map(|(k, &ms)| (ms, 100.0 * (k + 1) as f64 / n));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(plot_err)?
            .label(format!("{} subscribers", l.subscribers))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}
