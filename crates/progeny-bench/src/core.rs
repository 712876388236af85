//! The live core dump benchmark behind `progeny bench core`.
//!
//! For each touched-memory size it starts the `snapshot_target` program in its `bench` mode
//! (a 100 µs heartbeat on the main thread that records the longest gap between two wakeups)
//! and alternates two ways of writing a core of it:
//! - `gcore -o FILE PID`, which keeps the target stopped for the whole dump;
//! - progeny: [`Snapshot::take`] then [`Snapshot::write_core`] from the child while the target
//!   runs.
//!
//! For each it records the pause the target felt (its heartbeat's longest gap), progeny's own
//! pause clock, and the time to the finished file. Medians over the rounds.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use progeny_snapshot::{CoreOptions, Snapshot, SnapshotOptions};
use serde::{Deserialize, Serialize};

use crate::snapshot::{nanos, Target};
use crate::table::{Align, Table};
use crate::units::format_bytes;

/// What to measure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoreBenchConfig {
    /// Touched memory of the targets, MiB.
    pub memory_mib: Vec<u64>,
    /// Back the touched memory with transparent huge pages (`MADV_HUGEPAGE`).
    #[serde(default)]
    pub huge_pages: bool,
    /// Threads of the targets.
    pub threads: usize,
    /// Rounds (each: one gcore, one progeny core, per size).
    pub rounds: usize,
    /// The gcore executable, if any.
    pub gcore: Option<PathBuf>,
    /// Where the cores are written (and deleted).
    pub dir: PathBuf,
}

/// Raw figures of one memory size, nanoseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CoreCell {
    /// Touched memory, MiB.
    pub memory_mib: u64,
    /// Heartbeat gap during each gcore run.
    pub gcore_gap_ns: Vec<u64>,
    /// gcore's wall time to the finished file.
    pub gcore_wall_ns: Vec<u64>,
    /// gcore's core size.
    pub gcore_bytes: Vec<u64>,
    /// Heartbeat gap during each progeny core (snapshot plus write).
    pub progeny_gap_ns: Vec<u64>,
    /// progeny's own pause clock.
    pub progeny_pause_ns: Vec<u64>,
    /// progeny's time to the finished file (snapshot, write, release).
    pub progeny_wall_ns: Vec<u64>,
    /// progeny's core size.
    pub progeny_bytes: Vec<u64>,
}

/// All sizes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoreBenchReport {
    /// The configuration measured.
    pub config: CoreBenchConfig,
    /// One entry per memory size.
    pub cells: Vec<CoreCell>,
}

impl CoreBenchReport {
    /// Writes the report as pretty JSON (through a temporary file renamed into place).
    ///
    /// Fails when the file cannot be written.
    pub fn write_json(&self, path: &Path) -> io::Result<()> {
        crate::report::write_json_atomically(self, path)
    }
}

/// Runs the benchmark; `progress` is told what is being measured.
///
/// Fails if a target cannot be started, gcore fails, or a core cannot be written.
pub fn run_core_bench(
    config: &CoreBenchConfig,
    progress: &mut dyn FnMut(&str),
) -> io::Result<CoreBenchReport> {
    std::fs::create_dir_all(&config.dir)?;
    let mut cells = Vec::new();
    for &memory_mib in &config.memory_mib {
        let mut cell = CoreCell {
            memory_mib,
            ..CoreCell::default()
        };
        let mut target = Target::start(config.threads, memory_mib, config.huge_pages)?;
        let pid = target.pid();
        std::thread::sleep(Duration::from_millis(100));
        for round in 0..config.rounds {
            progress(&format!(
                "{}: round {}/{}",
                format_bytes(memory_mib << 20),
                round + 1,
                config.rounds
            ));
            // Alternate which goes first, so page-cache and drift effects hit both.
            let order = if round % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for gcore_turn in order {
                if gcore_turn {
                    let Some(gcore) = &config.gcore else { continue };
                    let prefix = config.dir.join("gcore");
                    target.gap_ns()?;
                    let start = Instant::now();
                    let status = Command::new(gcore)
                        .arg("-o")
                        .arg(&prefix)
                        .arg(pid.to_string())
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()?;
                    let wall = start.elapsed();
                    let gap = target.gap_ns()?;
                    let file = PathBuf::from(format!("{}.{pid}", prefix.display()));
                    if !status.success() {
                        return Err(io::Error::other(format!("gcore failed: {status}")));
                    }
                    cell.gcore_bytes.push(std::fs::metadata(&file)?.len());
                    std::fs::remove_file(&file)?;
                    cell.gcore_gap_ns.push(gap);
                    cell.gcore_wall_ns.push(nanos(wall));
                } else {
                    let file = config.dir.join("progeny.core");
                    target.gap_ns()?;
                    let start = Instant::now();
                    let snapshot = Snapshot::take(pid, &SnapshotOptions::default())
                        .map_err(io::Error::from)?;
                    let report =
                        snapshot.write_core(&file, &CoreOptions::default(), &mut |_, _| {})?;
                    let pause = snapshot.pause();
                    drop(snapshot);
                    let wall = start.elapsed();
                    let gap = target.gap_ns()?;
                    std::fs::remove_file(&file)?;
                    cell.progeny_bytes.push(report.bytes);
                    cell.progeny_gap_ns.push(gap);
                    cell.progeny_pause_ns.push(nanos(pause));
                    cell.progeny_wall_ns.push(nanos(wall));
                }
            }
        }
        cells.push(cell);
    }
    Ok(CoreBenchReport {
        config: config.clone(),
        cells,
    })
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

fn ms(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), |ns| format!("{:.2}", ns as f64 / 1e6))
}

/// The table of medians: one row per memory size.
pub fn core_table(report: &CoreBenchReport) -> String {
    let mut table = Table::new(vec![
        ("memory".into(), Align::Right),
        ("n".into(), Align::Right),
        ("pause ms".into(), Align::Right),
        ("to file ms".into(), Align::Right),
        ("core".into(), Align::Right),
        ("pause ms".into(), Align::Right),
        ("felt ms".into(), Align::Right),
        ("to file ms".into(), Align::Right),
        ("core".into(), Align::Right),
        ("pause %".into(), Align::Right),
    ]);
    table.group("gcore", 2, 3);
    table.group("progeny core", 5, 4);
    for cell in &report.cells {
        let gcore = median(&cell.gcore_gap_ns);
        let felt = median(&cell.progeny_gap_ns);
        let ratio = match (gcore, felt) {
            (Some(g), Some(p)) if g > 0 => format!("{:.2}%", p as f64 * 100.0 / g as f64),
            _ => "-".into(),
        };
        table.row(vec![
            memory_label(cell.memory_mib, report.config.huge_pages),
            cell.progeny_pause_ns.len().to_string(),
            ms(gcore),
            ms(median(&cell.gcore_wall_ns)),
            median(&cell.gcore_bytes).map_or("-".into(), format_bytes),
            ms(median(&cell.progeny_pause_ns)),
            ms(felt),
            ms(median(&cell.progeny_wall_ns)),
            median(&cell.progeny_bytes).map_or("-".into(), format_bytes),
            ratio,
        ]);
    }
    table.render()
}
