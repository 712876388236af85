//! Plain-text tables with right-aligned numbers and optional column groups,
//! and the tables of the spawn benchmark.

use std::fmt::Write as _;

use crate::report::{Clock, SpawnReport, SpawnResult};
use crate::units::{format_bytes, format_rate, format_us};

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text columns.
    Left,
    /// Number columns.
    Right,
}

#[derive(Debug, Clone)]
enum Row {
    Cells(Vec<String>),
    Separator,
}

/// A text table: a header row, optional group labels spanning columns above
/// it, and rows of cells.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<(String, Align)>,
    groups: Vec<(String, usize, usize)>,
    rows: Vec<Row>,
}

impl Table {
    /// A table with these column headers and alignments.
    pub fn new(headers: Vec<(String, Align)>) -> Self {
        Table {
            headers,
            groups: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Puts `label` above columns `first..first + count`.
    pub fn group(&mut self, label: impl Into<String>, first: usize, count: usize) {
        self.groups.push((label.into(), first, count));
    }

    /// Appends a row; missing cells are blank, extra cells are dropped.
    pub fn row(&mut self, mut cells: Vec<String>) {
        cells.resize(self.headers.len(), String::new());
        self.rows.push(Row::Cells(cells));
    }

    /// Appends a blank line between rows.
    pub fn separator(&mut self) {
        self.rows.push(Row::Separator);
    }

    /// Renders the table; lines end with `\n` and carry no trailing spaces.
    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self
            .headers
            .iter()
            .map(|(h, _)| h.chars().count())
            .collect();
        for row in &self.rows {
            if let Row::Cells(cells) = row {
                for (width, cell) in widths.iter_mut().zip(cells) {
                    *width = (*width).max(cell.chars().count());
                }
            }
        }
        // Widen the last column of a group whose label is wider than it.
        for (label, first, count) in &self.groups {
            let end = (*first + *count).min(columns);
            if *first >= end {
                continue;
            }
            let span: usize = widths[*first..end].iter().sum::<usize>() + 2 * (end - first - 1);
            let needed = label.chars().count() + 2;
            if needed > span {
                widths[end - 1] += needed - span;
            }
        }
        let gap = "  ";
        let mut out = String::new();
        if !self.groups.is_empty() {
            let mut line = String::new();
            let mut column = 0;
            let mut groups = self.groups.clone();
            groups.sort_by_key(|g| g.1);
            for (label, first, count) in groups {
                let end = (first + count).min(columns);
                while column < first {
                    line.push_str(&" ".repeat(widths[column]));
                    line.push_str(gap);
                    column += 1;
                }
                if first >= end {
                    continue;
                }
                let span: usize = widths[first..end].iter().sum::<usize>() + 2 * (end - first - 1);
                let text = format!("{label} ");
                let fill = span.saturating_sub(text.chars().count());
                line.push_str(&text);
                line.push_str(&"─".repeat(fill));
                line.push_str(gap);
                column = end;
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let render_cells = |out: &mut String, cells: &[String]| {
            let mut line = String::new();
            for (index, cell) in cells.iter().enumerate() {
                let width = widths[index];
                let pad = width.saturating_sub(cell.chars().count());
                match self.headers[index].1 {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&" ".repeat(pad));
                    }
                    Align::Right => {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(cell);
                    }
                }
                if index + 1 < cells.len() {
                    line.push_str(gap);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        };
        let headers: Vec<String> = self.headers.iter().map(|(h, _)| h.clone()).collect();
        render_cells(&mut out, &headers);
        for row in &self.rows {
            match row {
                Row::Cells(cells) => render_cells(&mut out, cells),
                Row::Separator => out.push('\n'),
            }
        }
        out
    }
}

/// The least-squares slope of median µs against parent memory in GiB for one
/// method, target and thread count, over its successful results; `None`
/// with fewer than two distinct memory points.
pub fn memory_slope_us_per_gib(
    report: &SpawnReport,
    method: &str,
    target: &str,
    threads: u32,
) -> Option<f64> {
    let points: Vec<(f64, f64)> = report
        .results
        .iter()
        .filter(|r| r.method == method && r.target == target && r.threads == threads && r.ok)
        .filter_map(|r| Some((r.memory_bytes as f64 / (1u64 << 30) as f64, r.median_us?)))
        .collect();
    least_squares_slope(&points)
}

/// The slope of the least-squares line through `points`; `None` when there
/// are fewer than two distinct x values.
pub fn least_squares_slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    Some(sxy / sxx)
}

/// The name the tables and plots use for the reference method.
pub const REFERENCE_METHOD: &str = "progeny";

fn method_label(result: &SpawnResult) -> String {
    let mut label = result.method.clone();
    if result.clock == Clock::External {
        label.push('*');
    }
    if !result.execs_target {
        label.push('†');
    }
    label
}

/// Renders the spawn benchmark's tables: one per target, rows grouped by
/// parent memory, a column group per thread count (median and p99 µs per
/// spawn, spawns/s over all threads), the ratio of the median to progeny's
/// (first thread count), and the number of measured spawns; then failures,
/// notes and the slope of each method's median against parent memory.
pub fn spawn_tables(report: &SpawnReport) -> String {
    let mut out = String::new();
    let threads = &report.config.threads;
    let first_threads = threads.first().copied().unwrap_or(1);
    let mut failures = Vec::new();
    let machine = &report.machine;
    let _ = writeln!(out, "{}", machine.summary());
    let _ = writeln!(out);
    for target in &report.config.targets {
        let _ = writeln!(
            out,
            "target {} ({}): µs per spawn (spawn + exec + exit + wait), spawns/s over all threads",
            target.name, target.about
        );
        let mut headers = vec![
            ("memory".to_owned(), Align::Left),
            ("method".to_owned(), Align::Left),
        ];
        for _ in threads {
            headers.push(("median".to_owned(), Align::Right));
            headers.push(("p99".to_owned(), Align::Right));
            headers.push(("spawns/s".to_owned(), Align::Right));
        }
        headers.push(("×progeny".to_owned(), Align::Right));
        headers.push(("n".to_owned(), Align::Right));
        let mut table = Table::new(headers);
        for (index, &count) in threads.iter().enumerate() {
            let label = format!("{count} thread{}", if count == 1 { "" } else { "s" });
            table.group(label, 2 + 3 * index, 3);
        }
        let mut memory_points: Vec<u64> = report.config.memory_bytes.clone();
        if !memory_points.contains(&0)
            && report
                .results
                .iter()
                .any(|r| r.clock == Clock::External && r.target == target.name)
        {
            memory_points.insert(0, 0);
        }
        let mut any_group = false;
        for &memory in &memory_points {
            let mut first_row = true;
            let reference = report
                .find(REFERENCE_METHOD, &target.name, memory, first_threads)
                .and_then(|r| r.median_us);
            for method in &report.config.methods {
                let cells: Vec<&SpawnResult> = threads
                    .iter()
                    .filter_map(|&t| report.find(method, &target.name, memory, t))
                    .collect();
                let Some(any) = cells.first() else {
                    continue;
                };
                if first_row && any_group {
                    table.separator();
                }
                any_group = true;
                let mut row = vec![
                    if first_row {
                        format_bytes(memory)
                    } else {
                        String::new()
                    },
                    method_label(any),
                ];
                first_row = false;
                for &count in threads {
                    match report.find(method, &target.name, memory, count) {
                        Some(result) if result.ok => {
                            row.push(result.median_us.map(format_us).unwrap_or_default());
                            row.push(result.p99_us.map(format_us).unwrap_or_default());
                            row.push(result.spawns_per_s.map(format_rate).unwrap_or_default());
                        }
                        Some(result) => {
                            failures.push(format!(
                                "{} on {} at {} with {} thread(s): {}",
                                result.method,
                                result.target,
                                format_bytes(result.memory_bytes),
                                result.threads,
                                result.error.as_deref().unwrap_or("failed")
                            ));
                            row.push("FAILED".to_owned());
                            row.push("-".to_owned());
                            row.push("-".to_owned());
                        }
                        None => {
                            row.push("-".to_owned());
                            row.push("-".to_owned());
                            row.push("-".to_owned());
                        }
                    }
                }
                let first = report.find(method, &target.name, memory, first_threads);
                let ratio = match (first.and_then(|r| r.median_us), reference) {
                    (Some(median), Some(reference)) if reference > 0.0 => {
                        format!("{:.2}", median / reference)
                    }
                    _ => "-".to_owned(),
                };
                row.push(ratio);
                row.push(first.map(|r| r.iterations.to_string()).unwrap_or_default());
                table.row(row);
            }
        }
        out.push_str(&table.render());
        out.push('\n');
    }

    let has_memory_dimension = report.config.memory_bytes.len() >= 2;
    let has_slopes = report.config.methods.iter().any(|method| {
        report
            .config
            .targets
            .iter()
            .any(|t| memory_slope_us_per_gib(report, method, &t.name, first_threads).is_some())
    });
    if has_memory_dimension && has_slopes {
        let _ = writeln!(
            out,
            "slope of the median against parent memory, µs per GiB ({first_threads} thread{}):",
            if first_threads == 1 { "" } else { "s" }
        );
        let mut table = Table::new(
            std::iter::once(("method".to_owned(), Align::Left))
                .chain(
                    report
                        .config
                        .targets
                        .iter()
                        .map(|t| (t.name.clone(), Align::Right)),
                )
                .collect(),
        );
        for method in &report.config.methods {
            let slopes: Vec<Option<f64>> = report
                .config
                .targets
                .iter()
                .map(|t| memory_slope_us_per_gib(report, method, &t.name, first_threads))
                .collect();
            if slopes.iter().all(Option::is_none) {
                continue;
            }
            let mut row = vec![method.clone()];
            row.extend(
                slopes
                    .into_iter()
                    .map(|s| s.map_or_else(|| "-".to_owned(), |s| format!("{s:.1}"))),
            );
            table.row(row);
        }
        out.push_str(&table.render());
        out.push('\n');
    }

    for failure in &failures {
        let _ = writeln!(out, "FAILED: {failure}");
    }
    if report.results.iter().any(|r| r.clock == Clock::External) {
        let _ = writeln!(
            out,
            "* external peer: its own process and clock, its own (small) parent memory, one thread"
        );
    }
    if report.results.iter().any(|r| !r.execs_target) {
        let _ = writeln!(
            out,
            "† no exec: clone(CLONE_VM|CLONE_VFORK) and an immediate exit, the floor of process creation"
        );
    }
    for note in &report.notes {
        if note.contains("skipped") {
            let _ = writeln!(out, "note: {note}");
        }
    }
    out
}
