//! The indexer benchmark's report: the machine, the configuration, and per
//! method the real, user and system seconds it took to convert the corpus
//! (with the raw figures of every round), as written by `--json` and read
//! back for tables and plots.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::machine::Machine;
use crate::table::{Align, Table};
use crate::units::{format_bytes, format_rate};

/// Identifies the layout of [`IndexerReport`]; bumped on incompatible change.
pub const INDEXER_SCHEMA: &str = "progeny-bench/indexer/1";

/// The method every ratio is taken against, as the seed table's baseline.
pub const BASELINE_METHOD: &str = "fork";

/// The raw figures of one method over one slice of the corpus (one round).
///
/// CPU times are differences of `getrusage` taken just before and just after
/// the slice, while no other method ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundFigures {
    /// Round number, from 0.
    pub round: u32,
    /// Documents converted and checked.
    pub files: u64,
    /// Wall time of the slice in seconds, from the first worker's start to
    /// the last worker's end.
    pub real_s: f64,
    /// User CPU seconds of the benchmark process (all threads).
    pub process_user_s: f64,
    /// System CPU seconds of the benchmark process (all threads).
    pub process_sys_s: f64,
    /// User CPU seconds of the converters (reaped children).
    pub children_user_s: f64,
    /// System CPU seconds of the converters, including what exec and exit
    /// cost them (for fork: tearing down the copied address space).
    pub children_sys_s: f64,
    /// User CPU seconds of a helper process that started the converters on
    /// the benchmark's behalf (the zygote), read from `/proc`; 0 otherwise.
    pub helper_user_s: f64,
    /// System CPU seconds of that helper.
    pub helper_sys_s: f64,
}

impl RoundFigures {
    /// User seconds of everything involved: process, converters, helper.
    pub fn user_s(&self) -> f64 {
        self.process_user_s + self.children_user_s + self.helper_user_s
    }

    /// System seconds of everything involved.
    pub fn sys_s(&self) -> f64 {
        self.process_sys_s + self.children_sys_s + self.helper_sys_s
    }
}

/// One method's result over the whole corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexerResult {
    /// Method name (`fork`, `progeny`, ...).
    pub method: String,
    /// Documents converted and checked in the measured rounds (for a failed
    /// method: before it failed).
    pub files: u64,
    /// True when every conversion of the method succeeded and was checked.
    pub ok: bool,
    /// Why the method failed; absent when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall seconds over all rounds; `null` when failed.
    pub real_s: Option<f64>,
    /// User CPU seconds (process, converters and helper); `null` when failed.
    pub user_s: Option<f64>,
    /// System CPU seconds (process, converters and helper); `null` when
    /// failed.
    pub sys_s: Option<f64>,
    /// Documents per wall second; `null` when failed.
    pub files_per_s: Option<f64>,
    /// `real_s` over fork's; `null` when either failed or fork did not run.
    pub ratio_to_fork: Option<f64>,
    /// Bytes the converters wrote in the measured rounds.
    pub output_bytes: u64,
    /// Unmeasured conversions made before the first round.
    pub warmup_files: u64,
    /// The figures of each round this method ran.
    pub rounds: Vec<RoundFigures>,
}

impl IndexerResult {
    /// A successful result, its totals summed over `rounds`.
    pub fn measured(
        method: &str,
        rounds: Vec<RoundFigures>,
        output_bytes: u64,
        warmup_files: u64,
    ) -> IndexerResult {
        let files = rounds.iter().map(|r| r.files).sum::<u64>();
        let real_s = rounds.iter().map(|r| r.real_s).sum::<f64>();
        IndexerResult {
            method: method.to_owned(),
            files,
            ok: true,
            error: None,
            real_s: Some(real_s),
            user_s: Some(rounds.iter().map(RoundFigures::user_s).sum()),
            sys_s: Some(rounds.iter().map(RoundFigures::sys_s).sum()),
            files_per_s: (real_s > 0.0).then(|| files as f64 / real_s),
            ratio_to_fork: None,
            output_bytes,
            warmup_files,
            rounds,
        }
    }

    /// A failed result: no figures, the error, and the raw rounds that were
    /// measured before the failure (data only).
    pub fn failed(
        method: &str,
        error: String,
        files: u64,
        rounds: Vec<RoundFigures>,
        output_bytes: u64,
        warmup_files: u64,
    ) -> IndexerResult {
        IndexerResult {
            method: method.to_owned(),
            files,
            ok: false,
            error: Some(error),
            real_s: None,
            user_s: None,
            sys_s: None,
            files_per_s: None,
            ratio_to_fork: None,
            output_bytes,
            warmup_files,
            rounds,
        }
    }
}

/// The configuration a report was measured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexerConfigRecord {
    /// Methods, in table order.
    pub methods: Vec<String>,
    /// Documents in the corpus (each method converts every one once).
    pub files: u64,
    /// Total size of the documents in bytes.
    pub corpus_bytes: u64,
    /// Total size of their expected texts in bytes.
    pub text_bytes: u64,
    /// Memory mapped and touched by the indexer before it started.
    pub memory_bytes: u64,
    /// Worker threads.
    pub threads: u32,
    /// Rounds: the corpus is cut into this many slices, and each round runs
    /// every method over one slice, in a rotated order.
    pub rounds: u32,
    /// Unmeasured conversions per method before the first round.
    pub warmup_files: u64,
    /// `built-in` (`csrc/converter.c`) or the path of another converter.
    pub converter: String,
}

/// The whole report, as written by `--json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexerReport {
    /// Always [`INDEXER_SCHEMA`].
    pub schema: String,
    /// The machine measured on.
    pub machine: Machine,
    /// The configuration measured with.
    pub config: IndexerConfigRecord,
    /// Notes for the reader.
    pub notes: Vec<String>,
    /// One entry per method, in table order.
    pub results: Vec<IndexerResult>,
}

impl IndexerReport {
    /// The result of `method`, if it ran.
    pub fn find(&self, method: &str) -> Option<&IndexerResult> {
        self.results.iter().find(|r| r.method == method)
    }

    /// Real time of `method` over real time of `other`, when both succeeded.
    pub fn ratio(&self, method: &str, other: &str) -> Option<f64> {
        let a = self.find(method).filter(|r| r.ok)?.real_s?;
        let b = self.find(other).filter(|r| r.ok)?.real_s?;
        (b > 0.0).then(|| a / b)
    }

    /// The median over rounds of `method`'s real time in a round over
    /// `other`'s in the same round, when both succeeded in every round: less
    /// sensitive than [`ratio`](IndexerReport::ratio) to a burst of load
    /// from elsewhere that hits one method's slice.
    pub fn round_ratio(&self, method: &str, other: &str) -> Option<f64> {
        let a = self.find(method).filter(|r| r.ok)?;
        let b = self.find(other).filter(|r| r.ok)?;
        if a.rounds.is_empty() || a.rounds.len() != b.rounds.len() {
            return None;
        }
        let mut ratios: Vec<f64> = a
            .rounds
            .iter()
            .zip(&b.rounds)
            .filter(|(x, y)| x.round == y.round && y.real_s > 0.0)
            .map(|(x, y)| x.real_s / y.real_s)
            .collect();
        if ratios.len() != a.rounds.len() {
            return None;
        }
        ratios.sort_by(f64::total_cmp);
        let middle = ratios.len() / 2;
        Some(if ratios.len() % 2 == 1 {
            ratios[middle]
        } else {
            (ratios[middle - 1] + ratios[middle]) / 2.0
        })
    }

    /// Writes the report as pretty JSON to `path` (through a temporary file
    /// renamed into place, so a reader never sees half a report).
    ///
    /// Fails when the file cannot be written.
    pub fn write_json(&self, path: &Path) -> io::Result<()> {
        crate::report::write_json_atomically(self, path)
    }

    /// Reads a report written by [`IndexerReport::write_json`].
    ///
    /// Fails when the file cannot be read, is not JSON of this layout, or
    /// names another schema.
    pub fn read_json(path: &Path) -> io::Result<IndexerReport> {
        let report: IndexerReport =
            crate::report::read_json_file(path, "an indexer benchmark report")?;
        if report.schema != INDEXER_SCHEMA {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} has schema {:?}, expected {INDEXER_SCHEMA:?}",
                    path.display(),
                    report.schema
                ),
            ));
        }
        Ok(report)
    }

    /// Renders the report as text: the machine, the workload, then one row
    /// per method with real, user and system seconds, documents per second
    /// and the ratio of real time to fork's (as the seed table has it), then
    /// progeny's ratios, failures and notes.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let machine = &self.machine;
        let _ = writeln!(out, "{}", machine.summary());
        let config = &self.config;
        let average = config.corpus_bytes / config.files.max(1);
        let _ = writeln!(
            out,
            "\nindexing {} documents ({}, {} on average) with the {} converter: {} of memory \
             touched, {} worker thread{}, {} round{}",
            format_rate(config.files as f64),
            format_bytes(config.corpus_bytes),
            format_bytes(average),
            config.converter,
            format_bytes(config.memory_bytes),
            config.threads,
            if config.threads == 1 { "" } else { "s" },
            config.rounds,
            if config.rounds == 1 { "" } else { "s" },
        );
        let mut table = Table::new(vec![
            ("method".to_owned(), Align::Left),
            ("real s".to_owned(), Align::Right),
            ("user s".to_owned(), Align::Right),
            ("sys s".to_owned(), Align::Right),
            ("files/s".to_owned(), Align::Right),
            ("×fork".to_owned(), Align::Right),
        ]);
        let mut failures = Vec::new();
        for result in &self.results {
            let mut row = vec![result.method.clone()];
            match (result.ok, result.real_s, result.user_s, result.sys_s) {
                (true, Some(real), Some(user), Some(sys)) => {
                    row.push(format!("{real:.2}"));
                    row.push(format!("{user:.2}"));
                    row.push(format!("{sys:.2}"));
                    row.push(result.files_per_s.map(format_rate).unwrap_or_default());
                    row.push(
                        self.ratio(&result.method, BASELINE_METHOD)
                            .map(|r| format!("{r:.2}"))
                            .unwrap_or_else(|| "-".to_owned()),
                    );
                }
                _ => {
                    failures.push(format!(
                        "{} failed after {} documents: {}",
                        result.method,
                        result.files,
                        result.error.as_deref().unwrap_or("no figures")
                    ));
                    row.push("FAILED".to_owned());
                    row.extend(std::iter::repeat_n("-".to_owned(), 4));
                }
            }
            table.row(row);
        }
        out.push_str(&table.render());
        let mut ratios = Vec::new();
        let mut medians = Vec::new();
        for other in ["fork", "vfork"] {
            if let Some(ratio) = self.ratio("progeny", other) {
                ratios.push(format!("{ratio:.2} × {other}'s"));
            }
            if let Some(ratio) = self.round_ratio("progeny", other) {
                medians.push(format!("{ratio:.2} × {other}'s"));
            }
        }
        if !ratios.is_empty() {
            let _ = writeln!(
                out,
                "\nprogeny's real time: {} (median of the rounds' ratios: {})",
                ratios.join(", "),
                medians.join(", ")
            );
        }
        if !failures.is_empty() {
            let _ = writeln!(out);
            for failure in failures {
                let _ = writeln!(out, "FAILED: {failure}");
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out);
            for note in &self.notes {
                let _ = writeln!(out, "note: {note}");
            }
        }
        out
    }
}
