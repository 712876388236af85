//! `progeny bench indexer`: the Recoll-style indexer workload.

use std::io;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::ProgressBar;
use progeny_bench::indexer::plot::indexer_plots;
use progeny_bench::indexer::report::IndexerReport;
use progeny_bench::indexer::{
    default_threads, parse_method, run_indexer_bench, IndexerConfig, IndexerEvent, IndexerObserver,
    METHODS,
};
use progeny_bench::method::Method;
use progeny_bench::units::{parse_list, parse_size};

use super::{check_outputs, option_error, progress_bar, publish, Publish};
use crate::CliResult;

/// Index thousands of small documents through a converter, one process per
/// document, from a big multithreaded parent: Recoll's 12,500-file table.
///
/// The indexer writes a corpus of small documents (2 to 9 KiB) into a
/// temporary directory (removed afterwards), maps and writes every page of
/// --memory, and starts --threads workers. For each document a worker starts
/// the converter (a small C program built with this benchmark, in the role antiword
/// plays for Recoll) with stdin and stdout on pipes, writes the document to
/// it while reading all of its output, waits for it, and checks the output's
/// checksum against the text the benchmark extracts itself: a method whose
/// converter fails or writes a wrong text is reported as FAILED, never as
/// fast. progeny uses Child::communicate; the other methods one hand-written
/// poll loop.
///
/// The corpus is cut into --rounds slices; each round runs every method on
/// one slice, in a rotated order, so drift hits all methods alike, and each
/// method converts every document once. The table gives per method real,
/// user and sys seconds (getrusage of the indexer and of its children, taken
/// around each slice), documents per second and real time as a multiple of
/// fork's; below it, progeny's real time against fork's and vfork's, over the
/// whole corpus and as the median of the rounds' ratios.
///
/// With the defaults, on 2 cores where fork from a 512 MiB parent costs
/// about 17 ms, the run takes 3 to 4 minutes, almost all of it fork's; the
/// other methods take about 5 seconds each. `--memory 0` or fewer --files
/// shorten it.
#[derive(Debug, Args)]
pub(crate) struct IndexerArgs {
    /// Methods to compare, comma-separated, or `all`: fork, vfork,
    /// vfork-pidfd (vfork plus a pidfd for the child, as progeny holds one),
    /// posix_spawn, std, progeny, progeny-zygote.
    #[arg(long, value_name = "LIST", default_value = "all")]
    methods: String,

    /// Documents in the corpus; each method converts every one once.
    #[arg(long, value_name = "N", default_value_t = 12_500)]
    files: usize,

    /// Memory the indexer maps and touches before it starts (a size with a
    /// K, M or G suffix, powers of 1024).
    #[arg(long, value_name = "SIZE", default_value = "512M")]
    memory: String,

    /// Worker threads [default: one per core].
    #[arg(long, value_name = "N")]
    threads: Option<u32>,

    /// Rounds: slices of the corpus, each run by every method in turn (many
    /// short rounds spread a burst of load from elsewhere over all methods).
    #[arg(long, value_name = "N", default_value_t = 20)]
    rounds: u32,

    /// Unmeasured conversions per method before the first round.
    #[arg(long, value_name = "N", default_value_t = 16)]
    warmup: usize,

    /// Write the figures, the configuration and the machine to FILE (JSON).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Draw a bar chart of real, user and sys seconds per method into DIR.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,

    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

impl IndexerArgs {
    fn config(&self) -> Result<IndexerConfig, Box<dyn std::error::Error + Send + Sync>> {
        let methods: Vec<Method> = if self.methods.trim() == "all" {
            METHODS.to_vec()
        } else {
            parse_list(&self.methods, "method", parse_method)
                .map_err(|e| option_error("--methods", e))?
        };
        let memory_bytes = parse_size(&self.memory).map_err(|e| option_error("--memory", e))?;
        let threads = self.threads.unwrap_or_else(default_threads);
        if !(1..=1024).contains(&threads) {
            return Err(option_error(
                "--threads",
                format!("{threads} is not between 1 and 1024"),
            ));
        }
        if self.files == 0 || self.files > 10_000_000 {
            return Err(option_error(
                "--files",
                format!("{} is not between 1 and 10000000", self.files),
            ));
        }
        if self.rounds == 0 || self.rounds as usize > self.files {
            return Err(option_error(
                "--rounds",
                format!("{} is not between 1 and --files", self.rounds),
            ));
        }
        Ok(IndexerConfig {
            methods,
            files: self.files,
            memory_bytes,
            threads,
            rounds: self.rounds,
            warmup_files: self.warmup,
            converter: None,
        })
    }
}

/// Shows the run's progress on stderr (hidden when stderr is not a terminal,
/// or with --quiet).
struct ProgressDisplay {
    bar: ProgressBar,
}

impl IndexerObserver for ProgressDisplay {
    fn event(&mut self, event: IndexerEvent<'_>) {
        match event {
            IndexerEvent::Start { conversions } => self.bar.set_length(conversions),
            IndexerEvent::Preparing { what } => self.bar.set_message(what.to_owned()),
            IndexerEvent::Slice { label } => self.bar.set_message(label.to_owned()),
            IndexerEvent::Converted { done } => self.bar.set_position(done),
            IndexerEvent::Failed { method, error } => {
                self.bar.println(format!("FAILED: {method}: {error}"))
            }
        }
    }
}

/// Runs `progeny bench indexer`.
pub(crate) fn run(args: IndexerArgs) -> CliResult {
    let config = args.config()?;
    // The zygote must be forked while this process is single-threaded: now,
    // before anything starts a thread (and before the memory is touched).
    if config.methods.contains(&Method::ProgenyZygote) {
        progeny_bench::method::start_zygote()
            .map_err(|e| option_error("--methods progeny-zygote", e))?;
    }
    config.validate()?;
    // Where the results go is checked before minutes are spent measuring.
    check_outputs(args.json.as_deref(), args.plot.as_deref())?;
    let bar = progress_bar(
        args.quiet,
        "{bar:32.cyan/blue} {pos:>6}/{len:6} {elapsed:>4} {wide_msg}",
    )?;
    let mut display = ProgressDisplay { bar };
    let report = run_indexer_bench(&config, &mut display);
    display.bar.finish_and_clear();
    publish(report?, args.json.as_deref(), args.plot.as_deref())
}

impl Publish for IndexerReport {
    fn table(&self) -> String {
        IndexerReport::table(self)
    }
    fn write_json(&self, path: &Path) -> io::Result<()> {
        IndexerReport::write_json(self, path)
    }
    fn read_json(path: &Path) -> io::Result<Self> {
        IndexerReport::read_json(path)
    }
    fn plots(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        indexer_plots(self, dir)
    }
}

/// Prints the table of a saved indexer report and redraws its plot into
/// `plot`, for `progeny bench show`.
///
/// Fails when the file is not an indexer report or the plot cannot be
/// written.
pub(crate) fn show(path: &Path, plot: Option<&Path>) -> CliResult {
    publish(IndexerReport::read_json(path)?, None, plot)
}
