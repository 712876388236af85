//! The JSON report of `progeny bench spawn`: the machine, the configuration,
//! and one [`SpawnResult`] per (method, target, parent memory, threads) with
//! every raw sample. Tables and plots are drawn from this data.

use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::machine::Machine;
use crate::stats::Summary;

/// Identifies the layout of [`SpawnReport`]; bumped on incompatible change.
pub const SPAWN_SCHEMA: &str = "progeny-bench/spawn/1";

/// Which clock timed a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// The harness's monotonic clock, in the benchmark process.
    Harness,
    /// The peer program's own monotonic clock, in its own process.
    External,
}

/// One measured cell: a method spawning a target from a parent holding
/// `memory_bytes` of touched memory, on `threads` threads at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnResult {
    /// Method name (`fork`, `posix_spawn`, ...).
    pub method: String,
    /// Target name (`true`, `noop`, or a path).
    pub target: String,
    /// Touched parent memory in bytes (for external peers: 0, their own).
    pub memory_bytes: u64,
    /// Threads spawning at once.
    pub threads: u32,
    /// True when every run succeeded (exit status 0).
    pub ok: bool,
    /// Why the method failed; absent when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Median µs per spawn (spawn, exec, exit, wait); `null` when failed.
    pub median_us: Option<f64>,
    /// 99th percentile µs per spawn; `null` when failed.
    pub p99_us: Option<f64>,
    /// Completed spawns per second of wall time over all threads; `null`
    /// when failed.
    pub spawns_per_s: Option<f64>,
    /// Full summary of the samples; `null` when failed or empty.
    pub summary: Option<Summary>,
    /// Measured spawns (warm-up excluded).
    pub iterations: u64,
    /// Unmeasured warm-up spawns made before the measured ones (on the
    /// first thread).
    #[serde(default)]
    pub warmup: u64,
    /// Wall time of the measured batches, in ns (the denominator of
    /// `spawns_per_s`).
    pub wall_ns: u64,
    /// Whether the child execs the target (false for the clone floor).
    pub execs_target: bool,
    /// Which clock timed it.
    pub clock: Clock,
    /// Every measured latency in ns, in the order measured (per thread).
    pub samples_ns: Vec<u64>,
}

/// What identifies a cell: method, target, parent memory and threads, plus
/// how it was measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellKey {
    /// Method name.
    pub method: String,
    /// Target name.
    pub target: String,
    /// Touched parent memory in bytes.
    pub memory_bytes: u64,
    /// Threads spawning at once.
    pub threads: u32,
    /// Whether the child execs the target.
    pub execs_target: bool,
    /// Which clock timed it.
    pub clock: Clock,
}

impl SpawnResult {
    /// A successful result with the figures derived from `samples_ns` and
    /// `wall_ns` (the wall time over which the samples were taken, all
    /// threads together). With no samples, the result is a failure.
    pub fn measured(key: CellKey, samples_ns: Vec<u64>, wall_ns: u64) -> SpawnResult {
        let Some(summary) = crate::stats::summarize(&samples_ns) else {
            return SpawnResult::failed(key, "no spawn was measured".to_owned(), samples_ns);
        };
        let iterations = samples_ns.len() as u64;
        let spawns_per_s = (wall_ns > 0).then(|| iterations as f64 * 1e9 / wall_ns as f64);
        SpawnResult {
            method: key.method,
            target: key.target,
            memory_bytes: key.memory_bytes,
            threads: key.threads,
            ok: true,
            error: None,
            median_us: Some(summary.median_us),
            p99_us: Some(summary.p99_us),
            spawns_per_s,
            summary: Some(summary),
            iterations,
            warmup: 0,
            wall_ns,
            execs_target: key.execs_target,
            clock: key.clock,
            samples_ns,
        }
    }

    /// The same result with its warm-up count set.
    pub fn with_warmup(mut self, warmup: u64) -> SpawnResult {
        self.warmup = warmup;
        self
    }

    /// A failed result: `ok` false, `error` set, no figures. The samples
    /// measured before the failure are kept as raw data only.
    pub fn failed(key: CellKey, error: String, samples_ns: Vec<u64>) -> SpawnResult {
        SpawnResult {
            method: key.method,
            target: key.target,
            memory_bytes: key.memory_bytes,
            threads: key.threads,
            ok: false,
            error: Some(error),
            median_us: None,
            p99_us: None,
            spawns_per_s: None,
            summary: None,
            iterations: samples_ns.len() as u64,
            warmup: 0,
            wall_ns: 0,
            execs_target: key.execs_target,
            clock: key.clock,
            samples_ns,
        }
    }
}

/// A target as recorded in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRecord {
    /// Name used in results.
    pub name: String,
    /// Executable path at run time.
    pub program: String,
    /// Arguments after `argv[0]`.
    pub args: Vec<String>,
    /// What it is, for tables and plot titles.
    #[serde(default)]
    pub about: String,
}

/// The configuration a report was measured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnConfigRecord {
    /// Methods, in table order.
    pub methods: Vec<String>,
    /// Targets.
    pub targets: Vec<TargetRecord>,
    /// Parent memory points in bytes.
    pub memory_bytes: Vec<u64>,
    /// Thread counts.
    pub threads: Vec<u32>,
    /// Most measured spawns per method and cell.
    pub iterations: u64,
    /// Fewest measured spawns per method and cell, budget or not.
    pub min_iterations: u64,
    /// Warm-up spawns per method and cell.
    pub warmup: u64,
    /// Time budget per cell in seconds.
    pub budget_s: f64,
}

/// The whole report, as written by `--json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnReport {
    /// Always [`SPAWN_SCHEMA`].
    pub schema: String,
    /// The machine measured on.
    pub machine: Machine,
    /// The configuration measured with.
    pub config: SpawnConfigRecord,
    /// Notes for the reader: skipped peers, clocks, caveats.
    pub notes: Vec<String>,
    /// One entry per (method, target, memory, threads).
    pub results: Vec<SpawnResult>,
}

impl SpawnReport {
    /// The result for one cell, if measured.
    pub fn find(
        &self,
        method: &str,
        target: &str,
        memory_bytes: u64,
        threads: u32,
    ) -> Option<&SpawnResult> {
        self.results.iter().find(|r| {
            r.method == method
                && r.target == target
                && r.memory_bytes == memory_bytes
                && r.threads == threads
        })
    }

    /// Writes the report as pretty JSON to `path` (through a temporary file
    /// renamed into place, so a reader never sees half a report).
    ///
    /// Fails when the file cannot be written.
    pub fn write_json(&self, path: &Path) -> io::Result<()> {
        write_json_atomically(self, path)
    }

    /// Reads a report written by [`SpawnReport::write_json`].
    ///
    /// Fails when the file cannot be read, is not JSON of this layout, or
    /// names another schema.
    pub fn read_json(path: &Path) -> io::Result<SpawnReport> {
        let report: SpawnReport = read_json_file(path, "a spawn benchmark report")?;
        if report.schema != SPAWN_SCHEMA {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} has schema {:?}, expected {SPAWN_SCHEMA:?}",
                    path.display(),
                    report.schema
                ),
            ));
        }
        Ok(report)
    }
}

/// Writes `value` as pretty JSON to `path` through a temporary file renamed into place, so a
/// reader never sees half a report.
///
/// Fails when the file cannot be written; the message names the path.
pub(crate) fn write_json_atomically<T: Serialize>(value: &T, path: &Path) -> io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    fs::write(&temporary, text + "\n")
        .map_err(|e| io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())))?;
    fs::rename(&temporary, path).map_err(|e| {
        let _ = fs::remove_file(&temporary);
        io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
    })
}

/// Reads JSON of type `T` from `path`; `what` names the expected content in the error.
///
/// Fails when the file cannot be read or is not JSON of that layout.
pub(crate) fn read_json_file<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &str,
) -> io::Result<T> {
    let text = fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not {what}: {e}", path.display()),
        )
    })
}
