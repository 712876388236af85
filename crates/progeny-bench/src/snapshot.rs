//! The snapshot pause benchmark behind `progeny bench snapshot`.
//!
//! For every (threads, touched memory) cell it starts the `snapshot_target` program in its
//! `bench` mode (the main thread is a 100 µs heartbeat that records the longest gap between
//! two of its wakeups; the other threads sleep), then alternates:
//! - [`Snapshot::take`]: the pause by progeny's own clock (first interrupt to last resume),
//!   by phase, and the heartbeat's longest gap around it (the pause as the target felt it);
//! - `gdb -p PID -batch -ex 'info threads'`: the heartbeat's longest gap around it (how long
//!   gdb kept the target stopped), and gdb's wall time.
//!
//! Cells are visited in a rotating order over several rounds, so drift on a shared machine
//! hits every cell alike; figures are medians over all rounds. Only one target is alive at a
//! time (a 4 GiB target is 4 GiB of RAM).

use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use progeny_snapshot::{Snapshot, SnapshotOptions};
use serde::{Deserialize, Serialize};

use crate::table::{Align, Table};
use crate::units::format_bytes;

/// What to measure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotBenchConfig {
    /// Thread counts of the targets.
    pub threads: Vec<usize>,
    /// Touched memory of the targets, in MiB.
    pub memory_mib: Vec<u64>,
    /// Back the touched memory with transparent huge pages (`MADV_HUGEPAGE`).
    #[serde(default)]
    pub huge_pages: bool,
    /// Snapshots per cell per round.
    pub snapshots: usize,
    /// gdb attaches per cell per round (0 to skip gdb).
    pub gdb_runs: usize,
    /// Rounds over all cells.
    pub rounds: usize,
    /// The gdb executable, if any.
    pub gdb: Option<PathBuf>,
}

/// The raw figures of one cell, in nanoseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SnapshotCell {
    /// Threads of the target.
    pub threads: usize,
    /// Touched memory of the target, MiB.
    pub memory_mib: u64,
    /// Threads progeny found and stopped, per snapshot.
    pub threads_seen: Vec<usize>,
    /// progeny's pause per snapshot.
    pub pause_ns: Vec<u64>,
    /// Per snapshot: stop, capture, inject, resume.
    pub phases_ns: Vec<[u64; 4]>,
    /// The target heartbeat's longest gap around each snapshot.
    pub snapshot_gap_ns: Vec<u64>,
    /// The target heartbeat's longest gap around each gdb run (gdb's stop).
    pub gdb_gap_ns: Vec<u64>,
    /// gdb's wall time per run.
    pub gdb_wall_ns: Vec<u64>,
}

/// All cells.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotBenchReport {
    /// The configuration measured.
    pub config: SnapshotBenchConfig,
    /// One entry per (threads, memory) cell.
    pub cells: Vec<SnapshotCell>,
}

impl SnapshotBenchReport {
    /// Writes the report as pretty JSON (through a temporary file renamed into place).
    ///
    /// Fails when the file cannot be written.
    pub fn write_json(&self, path: &Path) -> io::Result<()> {
        crate::report::write_json_atomically(self, path)
    }
}

/// A running bench target with its heartbeat (shared with the core benchmark).
pub(crate) struct Target {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Target {
    /// Starts the target with `threads` threads and `memory_mib` MiB touched (in huge pages if
    /// asked), and waits until it says it is ready.
    pub(crate) fn start(threads: usize, memory_mib: u64, huge_pages: bool) -> io::Result<Target> {
        let path = progeny_snapshot::targets::path()?;
        let mut child = Command::new(path)
            .args(["bench", &threads.to_string(), &memory_mib.to_string()])
            .args(huge_pages.then_some("huge"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        if !line.starts_with("ready") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!(
                "the bench target did not start ({threads} threads, {memory_mib} MiB): {line:?}"
            )));
        }
        Ok(Target {
            child,
            stdin,
            stdout,
        })
    }

    /// The target's pid.
    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The longest heartbeat gap since the previous call, in ns.
    pub(crate) fn gap_ns(&mut self) -> io::Result<u64> {
        self.stdin.write_all(b"gap\n")?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        line.trim()
            .strip_prefix("gap_us=")
            .and_then(|us| us.parse::<u64>().ok())
            .map(|us| us * 1000)
            .ok_or_else(|| io::Error::other(format!("unexpected heartbeat reply {line:?}")))
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A duration in whole nanoseconds.
pub(crate) fn nanos(duration: Duration) -> u64 {
    duration.as_nanos() as u64
}

/// Runs the benchmark; `progress` is told what is being measured.
///
/// Fails if a target cannot be started or a snapshot fails (the error names the cell).
pub fn run_snapshot_bench(
    config: &SnapshotBenchConfig,
    progress: &mut dyn FnMut(&str),
) -> io::Result<SnapshotBenchReport> {
    let mut cells: Vec<SnapshotCell> = config
        .memory_mib
        .iter()
        .flat_map(|&memory_mib| {
            config.threads.iter().map(move |&threads| SnapshotCell {
                threads,
                memory_mib,
                ..SnapshotCell::default()
            })
        })
        .collect();
    let count = cells.len();
    for round in 0..config.rounds {
        for step in 0..count {
            let cell = &mut cells[(step + round) % count];
            progress(&format!(
                "round {}/{}: {} threads, {}",
                round + 1,
                config.rounds,
                cell.threads,
                format_bytes(cell.memory_mib << 20)
            ));
            measure_cell(config, cell).map_err(|err| {
                io::Error::new(
                    err.kind(),
                    format!("{} threads, {} MiB: {err}", cell.threads, cell.memory_mib),
                )
            })?;
        }
    }
    Ok(SnapshotBenchReport {
        config: config.clone(),
        cells,
    })
}

fn measure_cell(config: &SnapshotBenchConfig, cell: &mut SnapshotCell) -> io::Result<()> {
    let mut target = Target::start(cell.threads, cell.memory_mib, config.huge_pages)?;
    // Let every thread reach its sleep before the first measurement.
    std::thread::sleep(Duration::from_millis(50 + cell.threads as u64));
    target.gap_ns()?;
    let options = SnapshotOptions::default();
    let mut runs_left = (config.snapshots, config.gdb_runs);
    // Interleave snapshots and gdb runs within the cell, too.
    while runs_left != (0, 0) {
        if runs_left.0 > 0 {
            runs_left.0 -= 1;
            target.gap_ns()?;
            let snapshot = Snapshot::take(target.pid(), &options).map_err(io::Error::from)?;
            let gap = target.gap_ns()?;
            let phases = snapshot.phases();
            cell.threads_seen.push(snapshot.threads().len());
            cell.pause_ns.push(nanos(snapshot.pause()));
            cell.phases_ns.push([
                nanos(phases.stop),
                nanos(phases.capture),
                nanos(phases.inject),
                nanos(phases.resume),
            ]);
            cell.snapshot_gap_ns.push(gap);
            drop(snapshot);
        }
        if runs_left.1 > 0 {
            runs_left.1 -= 1;
            if let Some(gdb) = &config.gdb {
                target.gap_ns()?;
                let start = Instant::now();
                let status = Command::new(gdb)
                    .args(["-nx", "-batch", "-p", &target.pid().to_string()])
                    .args(["-ex", "info threads"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()?;
                let wall = start.elapsed();
                let gap = target.gap_ns()?;
                if !status.success() {
                    return Err(io::Error::other(format!("gdb failed: {status}")));
                }
                cell.gdb_gap_ns.push(gap);
                cell.gdb_wall_ns.push(nanos(wall));
            }
        }
    }
    Ok(())
}

/// "1 GiB", or "1 GiB THP" when the memory is in transparent huge pages.
fn memory_label(memory_mib: u64, huge_pages: bool) -> String {
    let bytes = format_bytes(memory_mib << 20);
    if huge_pages && memory_mib > 0 {
        format!("{bytes} THP")
    } else {
        bytes
    }
}

fn median(values: &[u64]) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    Some(sorted[sorted.len() / 2])
}

fn us(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), |ns| format!("{:.0}", ns as f64 / 1e3))
}

fn ms(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), |ns| format!("{:.1}", ns as f64 / 1e6))
}

/// The table of medians: one row per cell.
pub fn snapshot_table(report: &SnapshotBenchReport) -> String {
    let mut table = Table::new(vec![
        ("threads".into(), Align::Right),
        ("memory".into(), Align::Right),
        ("n".into(), Align::Right),
        ("pause µs".into(), Align::Right),
        ("stop".into(), Align::Right),
        ("capture".into(), Align::Right),
        ("inject".into(), Align::Right),
        ("resume".into(), Align::Right),
        ("felt µs".into(), Align::Right),
        ("gdb stop ms".into(), Align::Right),
        ("gdb wall ms".into(), Align::Right),
        ("gdb/progeny".into(), Align::Right),
    ]);
    table.group("progeny pause, median (phases in µs)", 3, 6);
    table.group("gdb -p PID -batch -ex 'info threads'", 9, 3);
    let mut last_memory = None;
    for cell in &report.cells {
        if last_memory.is_some_and(|m| m != cell.memory_mib) {
            table.separator();
        }
        last_memory = Some(cell.memory_mib);
        let phase = |i: usize| median(&cell.phases_ns.iter().map(|p| p[i]).collect::<Vec<_>>());
        let pause = median(&cell.pause_ns);
        let gdb = median(&cell.gdb_gap_ns);
        let ratio = match (gdb, pause) {
            (Some(gdb), Some(pause)) if pause > 0 => format!("{:.0}x", gdb as f64 / pause as f64),
            _ => "-".into(),
        };
        table.row(vec![
            cell.threads.to_string(),
            memory_label(cell.memory_mib, report.config.huge_pages),
            cell.pause_ns.len().to_string(),
            us(pause),
            us(phase(0)),
            us(phase(1)),
            us(phase(2)),
            us(phase(3)),
            us(median(&cell.snapshot_gap_ns)),
            ms(gdb),
            ms(median(&cell.gdb_wall_ns)),
            ratio,
        ]);
    }
    table.render()
}
