//! Plots with `plotters`, rendered to PNG with a font embedded in this crate
//! (DejaVu Sans, see `fonts/LICENSE-DejaVu.txt`), so no system font or
//! fontconfig is needed.
//!
//! The generic pieces ([`LinePanel`], [`draw_line_panels`],
//! [`Distribution`], [`draw_distributions`]) serve any benchmark; the
//! [`spawn_plots`] function draws the spawn benchmark's pictures from its
//! report (the same data `--json` writes).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::report::{Clock, SpawnReport};
use crate::stats::LatencyHistogram;
use crate::units::format_bytes;

static DEJAVU_SANS: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
pub(crate) const FONT: &str = "sans-serif";

/// Registers the embedded font with plotters, once per process.
pub(crate) fn register_font() -> io::Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font(FONT, FontStyle::Normal, DEJAVU_SANS)
            .map_err(|_| io::Error::other("the embedded DejaVu Sans font is not a valid font"));
    });
    result
}

fn plot_error(error: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("plotting failed: {error}"))
}

/// Axis tick labels: whole numbers without a decimal point, small values
/// with as few decimals as they need.
fn axis_label(value: &f64) -> String {
    let value = *value;
    if value.abs() >= 10.0 || value == value.trunc() {
        format!("{value:.0}")
    } else if value.abs() >= 1.0 {
        format!("{value:.1}")
    } else {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').to_owned()
    }
}

/// Labels for a logarithmic axis: only 1, 2 and 5 times a power of ten,
/// so a range within one or two decades does not crowd its ticks.
fn log_axis_label(value: &f64) -> String {
    let value = *value;
    if value <= 0.0 {
        return String::new();
    }
    let mantissa = value / 10f64.powf(value.log10().floor());
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|nice| (mantissa - nice).abs() < 0.01 * nice)
    {
        axis_label(&value)
    } else {
        String::new()
    }
}

/// Twelve colors that stay apart from each other on white (Tableau 10,
/// then two darker ones), so every method has its own.
const PALETTE: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(57, 59, 121),
    RGBColor(99, 121, 57),
];

/// The color of the `index`th series (cycling through twelve).
pub fn series_color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// One line on a [`LinePanel`].
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points `(x, y)`, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Color index (see [`series_color`]), so a method keeps its color
    /// across pictures.
    pub color: usize,
}

/// A chart of lines with markers.
#[derive(Debug, Clone, PartialEq)]
pub struct LinePanel {
    /// Title above the chart.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
    /// Logarithmic y axis (values must be positive; others are dropped).
    pub log_y: bool,
    /// Draw the legend (a picture of panels with the same colors needs it
    /// once).
    pub legend: bool,
}

fn draw_lines_on<DB, Y>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &LinePanel,
    x_range: std::ops::Range<f64>,
    y_range: Y,
) -> io::Result<()>
where
    DB: DrawingBackend,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 20))
        .margin(12)
        .margin_right(28)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range, y_range)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc(&panel.x_label)
        .y_desc(&panel.y_label)
        .x_label_formatter(&axis_label)
        .y_label_formatter(&axis_label)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(plot_error)?;
    for series in &panel.series {
        let color = series_color(series.color);
        let points: Vec<(f64, f64)> = series
            .points
            .iter()
            .copied()
            .filter(|&(_, y)| !panel.log_y || y > 0.0)
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(plot_error)?
            .label(series.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(plot_error)?;
    }
    if !panel.legend {
        return Ok(());
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .label_font((FONT, 13))
        .draw()
        .map_err(plot_error)?;
    Ok(())
}

fn draw_line_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &LinePanel,
) -> io::Result<()> {
    let points = || panel.series.iter().flat_map(|s| s.points.iter().copied());
    let x_max = points().map(|p| p.0).fold(0.0f64, f64::max);
    let x_min = points().map(|p| p.0).fold(f64::INFINITY, f64::min).min(0.0);
    let x_pad = ((x_max - x_min) * 0.04).max(0.05);
    let x_range = (x_min - x_pad)..(x_max + x_pad);
    if panel.log_y {
        let positive = || points().map(|p| p.1).filter(|&y| y > 0.0);
        let y_min = positive().fold(f64::INFINITY, f64::min);
        let y_max = positive().fold(0.0f64, f64::max);
        let (y_min, y_max) = if y_min.is_finite() {
            (y_min, y_max)
        } else {
            (1.0, 10.0)
        };
        let y_range = ((y_min / 1.6)..(y_max * 1.6)).log_scale();
        draw_lines_on(area, panel, x_range, y_range)
    } else {
        let y_max = points().map(|p| p.1).fold(0.0f64, f64::max).max(1e-9);
        let y_range: RangedCoordf64 = (0.0..y_max * 1.1).into();
        draw_lines_on(area, panel, x_range, y_range)
    }
}

/// Draws `panels` in a grid of `columns` columns into a PNG at `path`, with
/// `title` above, `width` × `height` pixels.
///
/// Fails when the file cannot be written.
pub fn draw_line_panels(
    path: &Path,
    title: &str,
    panels: &[LinePanel],
    columns: usize,
    (width, height): (u32, u32),
) -> io::Result<()> {
    register_font()?;
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let root = root.titled(title, (FONT, 24)).map_err(plot_error)?;
    let columns = columns.max(1);
    let rows = panels.len().div_ceil(columns).max(1);
    let areas = root.split_evenly((rows, columns));
    for (panel, area) in panels.iter().zip(areas.iter()) {
        draw_line_panel(area, panel)?;
    }
    root.present()
        .map_err(|e| io::Error::other(format!("cannot write {}: {e}", path.display())))
}

/// The latencies of one method, for [`draw_distributions`].
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// Panel title (the method).
    pub label: String,
    /// Latencies in µs.
    pub samples_us: Vec<f64>,
    /// Color index (see [`series_color`]).
    pub color: usize,
}

/// Draws one histogram panel per distribution into a PNG at `path`. The
/// panels share one logarithmic x axis (latencies span decades: a clone
/// without exec against a Python `Popen`), from the smallest 0.1th
/// percentile to twice the largest 99th, with logarithmic bins, so they compare at a
/// glance. Each panel's title gives n, the median (black line) and p99 (red
/// line) and the share of samples outside the axis, which are not dropped
/// silently.
///
/// Fails when the file cannot be written.
pub fn draw_distributions(
    path: &Path,
    title: &str,
    distributions: &[Distribution],
    (width, height): (u32, u32),
) -> io::Result<()> {
    register_font()?;
    const BINS: usize = 70;
    let histograms: Vec<LatencyHistogram> = distributions
        .iter()
        .map(|d| {
            let nanos: Vec<u64> = d
                .samples_us
                .iter()
                .map(|&us| (us * 1000.0) as u64)
                .collect();
            LatencyHistogram::from_samples(&nanos)
        })
        .collect();
    let low = histograms
        .iter()
        .filter_map(|h| h.quantile_us(0.001))
        .fold(f64::INFINITY, f64::min);
    // Up to twice the largest p99: one stray sample among a few hundred
    // (the 99.9th percentile of a small set is its maximum) must not squeeze
    // every panel into a corner; the samples beyond are counted instead.
    let high = histograms
        .iter()
        .filter_map(|h| h.quantile_us(0.99))
        .fold(0.0f64, f64::max);
    let (low, high) = if low.is_finite() && high > low {
        (low / 1.3, high * 2.0)
    } else {
        (1.0, 1000.0)
    };
    let ratio = (high / low).ln();
    let edge = |i: usize| low * (ratio * i as f64 / BINS as f64).exp();

    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let root = root.titled(title, (FONT, 24)).map_err(plot_error)?;
    let columns = if distributions.len() <= 4 { 2 } else { 3 };
    let rows = distributions.len().div_ceil(columns).max(1);
    let areas = root.split_evenly((rows, columns));
    for ((distribution, histogram), area) in distributions.iter().zip(&histograms).zip(areas.iter())
    {
        let mut counts = [0u64; BINS];
        let mut outside = 0u64;
        for &us in &distribution.samples_us {
            if us < low || us >= high {
                outside += 1;
                continue;
            }
            let bin = ((us / low).ln() / ratio * BINS as f64) as usize;
            counts[bin.min(BINS - 1)] += 1;
        }
        let total = distribution.samples_us.len().max(1) as f64;
        let shares: Vec<f64> = counts.iter().map(|&c| 100.0 * c as f64 / total).collect();
        let y_max = shares.iter().copied().fold(0.0f64, f64::max).max(1.0) * 1.15;
        let summary = histogram.summary();
        let mut caption = match summary {
            Some(s) => format!(
                "{}: median {} µs, p99 {} µs, n={}",
                distribution.label,
                crate::units::format_us(s.median_us),
                crate::units::format_us(s.p99_us),
                s.count
            ),
            None => format!("{}: no samples", distribution.label),
        };
        if outside > 0 {
            caption.push_str(&format!(
                ", {:.1}% off axis",
                100.0 * outside as f64 / total
            ));
        }
        let mut chart = ChartBuilder::on(area)
            .caption(caption, (FONT, 15))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(50)
            .build_cartesian_2d((low..high).log_scale(), 0.0..y_max)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("µs per spawn (log)")
            .y_desc("% of spawns")
            .x_label_formatter(&log_axis_label)
            .y_label_formatter(&axis_label)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(plot_error)?;
        let color = series_color(distribution.color);
        chart
            .draw_series(
                shares
                    .iter()
                    .enumerate()
                    .filter(|(_, &s)| s > 0.0)
                    .map(|(i, &share)| {
                        Rectangle::new(
                            [(edge(i), 0.0), (edge(i + 1), share)],
                            color.mix(0.8).filled(),
                        )
                    }),
            )
            .map_err(plot_error)?;
        if let Some(s) = summary {
            for (value, style) in [
                (s.median_us, BLACK.stroke_width(2)),
                (s.p99_us, RED.stroke_width(2)),
            ] {
                if (low..high).contains(&value) {
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            vec![(value, 0.0), (value, y_max)],
                            style,
                        )))
                        .map_err(plot_error)?;
                }
            }
        }
    }
    root.present()
        .map_err(|e| io::Error::other(format!("cannot write {}: {e}", path.display())))
}

/// A file-name-safe version of a target name (`/usr/bin/env` → `usr-bin-env`).
fn file_stem(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let stem = stem.trim_matches('-').to_owned();
    if stem.is_empty() {
        "target".to_owned()
    } else {
        stem
    }
}

/// Draws the spawn benchmark's pictures into `dir` (created if missing) and
/// returns their paths:
///
/// - `latency-vs-memory.png`: median µs per spawn against parent memory,
///   one line per in-process method, a column per target, with a linear y
///   axis (fork's climb, as in a fork graph; with the legend) above a
///   logarithmic one (the flat methods apart from each other). First thread
///   count.
/// - `distribution-<target>.png`: the latency distribution of each method
///   (parent memory 0, or the smallest measured; first thread count).
///
/// Fails when `dir` cannot be created or a file cannot be written.
pub fn spawn_plots(report: &SpawnReport, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    let threads = report.config.threads.first().copied().unwrap_or(1);
    let color_of = |method: &str| {
        report
            .config
            .methods
            .iter()
            .position(|m| m == method)
            .unwrap_or(0)
    };
    let mut written = Vec::new();

    let mut linear = Vec::new();
    let mut logarithmic = Vec::new();
    for target in &report.config.targets {
        let mut series = Vec::new();
        for method in &report.config.methods {
            let mut points: Vec<(f64, f64)> = report
                .results
                .iter()
                .filter(|r| {
                    &r.method == method
                        && r.target == target.name
                        && r.threads == threads
                        && r.clock == Clock::Harness
                        && r.ok
                })
                .filter_map(|r| Some((r.memory_bytes as f64 / (1u64 << 30) as f64, r.median_us?)))
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            // The legend carries the least-squares slope, the figure the
            // picture is about: fork climbs, the others stay flat.
            let label = match crate::table::least_squares_slope(&points) {
                Some(slope) => format!("{method}  {slope:+.0} µs/GiB"),
                None => method.clone(),
            };
            series.push(Series {
                label,
                points,
                color: color_of(method),
            });
        }
        let title = format!("{} ({})", target.name, target.about);
        linear.push(LinePanel {
            title: title.clone(),
            x_label: "parent memory touched (GiB)".to_owned(),
            y_label: "median µs per spawn".to_owned(),
            series: series.clone(),
            log_y: false,
            legend: true,
        });
        logarithmic.push(LinePanel {
            title: format!("{title}, log scale"),
            x_label: "parent memory touched (GiB)".to_owned(),
            y_label: "median µs per spawn (log)".to_owned(),
            series,
            log_y: true,
            legend: false,
        });
    }
    let columns = report.config.targets.len().max(1);
    let panels: Vec<LinePanel> = linear.into_iter().chain(logarithmic).collect();
    let path = dir.join("latency-vs-memory.png");
    draw_line_panels(
        &path,
        &format!(
            "spawn + exec + exit + wait against parent memory ({threads} thread{})",
            if threads == 1 { "" } else { "s" }
        ),
        &panels,
        columns,
        (700 * columns as u32 + 100, 1100),
    )?;
    written.push(path);

    let smallest_memory = report
        .config
        .memory_bytes
        .iter()
        .copied()
        .min()
        .unwrap_or(0);
    for target in &report.config.targets {
        let mut distributions = Vec::new();
        for method in &report.config.methods {
            let result = report
                .results
                .iter()
                .filter(|r| {
                    &r.method == method && r.target == target.name && r.threads == threads && r.ok
                })
                .find(|r| r.memory_bytes == smallest_memory || r.clock == Clock::External);
            let Some(result) = result else { continue };
            let mut label = method.clone();
            if result.clock == Clock::External {
                label.push_str(" (own clock)");
            }
            distributions.push(Distribution {
                label,
                samples_us: result
                    .samples_ns
                    .iter()
                    .map(|&ns| ns as f64 / 1000.0)
                    .collect(),
                color: color_of(method),
            });
        }
        if distributions.is_empty() {
            continue;
        }
        let path = dir.join(format!("distribution-{}.png", file_stem(&target.name)));
        let rows = distributions
            .len()
            .div_ceil(if distributions.len() <= 4 { 2 } else { 3 });
        draw_distributions(
            &path,
            &format!(
                "{} ({}): µs per spawn, parent memory {}, {threads} thread{} (black: median, red: p99)",
                target.name,
                target.about,
                format_bytes(smallest_memory),
                if threads == 1 { "" } else { "s" }
            ),
            &distributions,
            (1500, 60 + 330 * rows as u32),
        )?;
        written.push(path);
    }
    Ok(written)
}
