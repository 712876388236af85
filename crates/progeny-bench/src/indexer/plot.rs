//! The indexer benchmark's picture: per method, bars of real, user and
//! system seconds, as the seed table lists them, drawn from the report.

use std::io;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::report::{IndexerReport, IndexerResult, BASELINE_METHOD};
use crate::plot::{register_font, series_color, FONT};
use crate::units::format_bytes;

fn plot_error(error: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("plotting failed: {error}"))
}

/// The three bars of a method, with their colors (from the shared palette).
const BARS: [(&str, usize); 3] = [("real", 0), ("user", 1), ("sys", 3)];

/// Tick labels without needless decimals.
fn seconds_label(value: &f64) -> String {
    if *value == value.trunc() {
        format!("{value:.0}")
    } else if value.abs() >= 1.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// Draws the bars of the methods `shown` (indices into the report's
/// results) on `area`, with `title` above.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    report: &IndexerReport,
    shown: &[usize],
    title: &str,
) -> io::Result<()> {
    let methods: Vec<&IndexerResult> = shown.iter().map(|&i| &report.results[i]).collect();
    let highest = methods
        .iter()
        .filter(|r| r.ok)
        .flat_map(|r| [r.real_s, r.user_s, r.sys_s])
        .flatten()
        .fold(0.0f64, f64::max);
    let y_max = if highest > 0.0 { highest * 1.18 } else { 1.0 };
    let x_max = methods.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 19))
        .margin(12)
        .margin_right(20)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(plot_error)?;
    let names: Vec<String> = methods.iter().map(|r| r.method.clone()).collect();
    let label_of = move |x: &f64| {
        // Method i is centred on i + 0.5; only those positions get a label.
        let shifted = x - 0.5;
        if (shifted - shifted.round()).abs() < 1e-6 && shifted >= 0.0 {
            names
                .get(shifted.round() as usize)
                .cloned()
                .unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(methods.len() * 2 + 1)
        .x_label_formatter(&label_of)
        .y_labels(8)
        .y_label_formatter(&seconds_label)
        .light_line_style(WHITE)
        .y_desc("seconds")
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(plot_error)?;

    for (bar, (name, color)) in BARS.iter().enumerate() {
        let style = series_color(*color).filled();
        let rectangles: Vec<Rectangle<(f64, f64)>> = methods
            .iter()
            .enumerate()
            .filter(|(_, r)| r.ok)
            .filter_map(|(i, r)| {
                let value = match bar {
                    0 => r.real_s,
                    1 => r.user_s,
                    _ => r.sys_s,
                }?;
                let left = i as f64 + 0.14 + 0.24 * bar as f64;
                Some(Rectangle::new([(left, 0.0), (left + 0.22, value)], style))
            })
            .collect();
        chart
            .draw_series(rectangles)
            .map_err(plot_error)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], style));
    }

    let text = |size: u32| (FONT, size).into_font().color(&BLACK);
    let mut captions = Vec::new();
    for (i, result) in methods.iter().enumerate() {
        let centre = i as f64 + 0.5;
        if !result.ok {
            captions.push(Text::new(
                "FAILED".to_owned(),
                (centre - 0.2, y_max * 0.08),
                text(18).color(&RED),
            ));
            continue;
        }
        let Some(real) = result.real_s else {
            continue;
        };
        let caption = match report.ratio(&result.method, BASELINE_METHOD) {
            Some(ratio) => format!("{real:.2} s, {ratio:.2}× fork"),
            None => format!("{real:.2} s"),
        };
        captions.push(Text::new(
            caption,
            (i as f64 + 0.08, real + y_max * 0.04),
            text(12),
        ));
    }
    chart.draw_series(captions).map_err(plot_error)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .draw()
        .map_err(plot_error)?;
    Ok(())
}

/// Draws `indexer.png` into `dir` (created if missing): for each method,
/// bars of real, user and system seconds, labelled with the real time and
/// its ratio to fork's; a failed method gets no bars but the word FAILED.
/// When some methods are more than three times slower than the fastest
/// (fork from a big parent), a second panel shows the others on their own
/// scale. Returns the paths written.
///
/// Fails when `dir` cannot be created or the file cannot be written.
pub fn indexer_plots(report: &IndexerReport, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    register_font()?;
    let path = dir.join("indexer.png");
    let all: Vec<usize> = (0..report.results.len()).collect();
    let fastest = report
        .results
        .iter()
        .filter(|r| r.ok)
        .filter_map(|r| r.real_s)
        .fold(f64::INFINITY, f64::min);
    let close: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| {
            let result = &report.results[i];
            !result.ok || result.real_s.is_some_and(|real| real <= 3.0 * fastest)
        })
        .collect();
    let zoom = close.len() < all.len() && close.iter().any(|&i| report.results[i].ok);

    // The drawing borrows the path until it is presented.
    {
        let height = if zoom { 1000 } else { 600 };
        let root = BitMapBackend::new(&path, (1100, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let config = &report.config;
        let title = format!(
            "indexing {} documents through a converter: {} touched, {} worker thread{}",
            config.files,
            format_bytes(config.memory_bytes),
            config.threads,
            if config.threads == 1 { "" } else { "s" }
        );
        // A little room above the title, which is drawn from the very top.
        let root = root.margin(10, 0, 0, 0);
        let root = root.titled(&title, (FONT, 22)).map_err(plot_error)?;
        if zoom {
            let (top, bottom) = root.split_vertically((height as i32 - 40) / 2);
            draw_panel(&top, report, &all, "every method")?;
            draw_panel(
                &bottom,
                report,
                &close,
                "the methods within 3× of the fastest, on their own scale",
            )?;
        } else {
            draw_panel(&root, report, &all, "real, user and sys seconds per method")?;
        }
        root.present()
            .map_err(|e| io::Error::other(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(vec![path])
}
