//! `progeny cow`: what a live snapshot child costs the original's writes.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use progeny_bench::plot::{draw_distributions, Distribution};
use progeny_bench::table::{Align, Table};
use progeny_snapshot::cow::{probe, CowOptions, CowRun};

use crate::CliResult;

/// Measure the copy-on-write bill of a snapshot: touch --pages pages, then write one byte to
/// each of --writes random pages, timing every write, once with no snapshot and once while a
/// snapshot child of this process (`snapshot_me`) shares the pages.
///
/// Reports the per-write latency (min, median, p99, max) of both runs, the extra time the
/// child cost in total, and how the cost decays over the first writes.
#[derive(Debug, Args)]
pub(crate) struct CowArgs {
    /// Pages (4 KiB) mapped and touched before measuring.
    #[arg(long, default_value_t = 100_000)]
    pages: usize,

    /// Random distinct pages written per run (at most --pages; default: all of them).
    #[arg(long)]
    writes: Option<usize>,

    /// Kill the snapshot child after this many microseconds, as a finished analysis would
    /// (default: it lives through the whole run).
    #[arg(long, value_name = "US")]
    child_lifetime_us: Option<u64>,

    /// Measure in a forked worker that progeny snapshots from outside (ptrace clone injection,
    /// as `progeny snapshot` does) instead of in this process with a self-snapshot.
    #[arg(long)]
    external: bool,

    /// Write the raw per-write latencies of both runs as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Draw the two latency histograms into this PNG file.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// Runs `progeny cow`.
pub(crate) fn run(args: CowArgs) -> CliResult {
    let options = CowOptions {
        pages: args.pages,
        writes: args.writes.unwrap_or(args.pages),
        child_lifetime: args.child_lifetime_us.map(Duration::from_micros),
        external: args.external,
        ..CowOptions::default()
    };
    let report = probe(&options)?;
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "{} pages touched, {} random pages written per run, snapshot {}",
        options.pages,
        options.writes,
        if options.external {
            "taken from outside (ptrace clone injection into a worker)"
        } else {
            "of itself (snapshot_me)"
        }
    )?;
    let mut table = Table::new(vec![
        ("run".into(), Align::Left),
        ("min µs".into(), Align::Right),
        ("median µs".into(), Align::Right),
        ("p99 µs".into(), Align::Right),
        ("max µs".into(), Align::Right),
        ("sum ms".into(), Align::Right),
        ("faults".into(), Align::Right),
    ]);
    for (label, run) in [
        ("no snapshot", &report.baseline),
        ("live snapshot child", &report.with_snapshot),
    ] {
        let s = run.summary();
        table.row(vec![
            label.into(),
            format!("{:.3}", s.min as f64 / 1e3),
            format!("{:.3}", s.median as f64 / 1e3),
            format!("{:.3}", s.p99 as f64 / 1e3),
            format!("{:.1}", s.max as f64 / 1e3),
            format!("{:.2}", s.sum as f64 / 1e6),
            run.minor_faults.to_string(),
        ]);
    }
    write!(out, "{}", table.render())?;
    writeln!(
        out,
        "extra time with the child: {:.2} ms ({} writes while it lived)",
        report.extra().as_secs_f64() * 1e3,
        report.writes_while_child_lived
    )?;
    writeln!(out, "decay (median µs of writes in each window):")?;
    let mut decay = Table::new(vec![
        ("writes".into(), Align::Left),
        ("no snapshot".into(), Align::Right),
        ("live child".into(), Align::Right),
    ]);
    for ((lo, hi, without), (_, _, with)) in report
        .baseline
        .decay()
        .into_iter()
        .zip(report.with_snapshot.decay())
    {
        decay.row(vec![
            format!("{lo}..{hi}"),
            format!("{:.3}", without as f64 / 1e3),
            format!("{:.3}", with as f64 / 1e3),
        ]);
    }
    write!(out, "{}", decay.render())?;
    if let Some(path) = &args.json {
        fs::write(
            path,
            raw_json(&options, &report.baseline, &report.with_snapshot),
        )?;
        writeln!(out, "raw figures: {}", path.display())?;
    }
    if let Some(path) = &args.plot {
        let to_us = |run: &CowRun| run.latencies_ns.iter().map(|&ns| ns as f64 / 1e3).collect();
        draw_distributions(
            path,
            "per-write latency: copy-on-write with a live snapshot child",
            &[
                Distribution {
                    label: "no snapshot".into(),
                    samples_us: to_us(&report.baseline),
                    color: 0,
                },
                Distribution {
                    label: "live snapshot child".into(),
                    samples_us: to_us(&report.with_snapshot),
                    color: 1,
                },
            ],
            (1000, 700),
        )?;
        writeln!(out, "plot: {}", path.display())?;
    }
    Ok(())
}

fn raw_json(options: &CowOptions, baseline: &CowRun, with: &CowRun) -> String {
    let mut text = String::new();
    let list = |run: &CowRun| {
        let mut items = String::new();
        for (i, ns) in run.latencies_ns.iter().enumerate() {
            if i > 0 {
                items.push(',');
            }
            let _ = write!(items, "{ns}");
        }
        items
    };
    let _ = writeln!(
        text,
        "{{\"pages\":{},\"writes\":{},\"baseline\":{{\"minor_faults\":{},\"total_ns\":{},\"latencies_ns\":[{}]}},\"with_snapshot\":{{\"minor_faults\":{},\"total_ns\":{},\"latencies_ns\":[{}]}}}}",
        options.pages,
        options.writes,
        baseline.minor_faults,
        baseline.total.as_nanos(),
        list(baseline),
        with.minor_faults,
        with.total.as_nanos(),
        list(with),
    );
    text
}
