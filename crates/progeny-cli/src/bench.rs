//! `progeny bench ...`: the benchmark subcommands.
//!
//! Each subcommand is a variant of [`BenchCommand`] with its own arguments
//! struct and a `run` function; adding one is a variant plus a match arm.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use progeny_bench::harness::{Event, Observer, SpawnBenchConfig};
use progeny_bench::method::Method;
use progeny_bench::report::SpawnReport;
use progeny_bench::target::TargetSpec;
use progeny_bench::units::{format_bytes, parse_list, parse_size};
use progeny_bench::{plot, table};

use crate::CliResult;

mod indexer;

/// Arguments of `progeny bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    Spawn(SpawnArgs),
    Indexer(indexer::IndexerArgs),
    Show(ShowArgs),
    Snapshot(crate::snapshot::BenchSnapshotArgs),
    Core(crate::core_dump::BenchCoreArgs),
}

/// Runs a `progeny bench` subcommand.
pub(crate) fn run(args: BenchArgs) -> CliResult {
    match args.command {
        BenchCommand::Spawn(args) => run_spawn(args),
        BenchCommand::Indexer(args) => indexer::run(args),
        BenchCommand::Show(args) => run_show(args),
        BenchCommand::Snapshot(args) => crate::snapshot::run_bench(args),
        BenchCommand::Core(args) => crate::core_dump::run_bench(args),
    }
}

/// Compare the ways to start a process: spawn, exec, exit and wait, per method.
///
/// Every method spawns the same target with the same housekeeping (stdout to
/// /dev/null, stdin and stderr inherited, the same argv and environment), is
/// timed per spawn by the same clock in this process, and must see exit
/// status 0: a method that fails is reported as FAILED, never as fast.
///
/// For each parent-memory point the benchmark first maps and writes every
/// page of that much memory (ordinary 4 KiB pages), then runs one cell per
/// target and thread count. In a cell the methods take turns in short slices
/// (A B C, B C A, ...), so drift hits them all alike. A method's cell ends
/// after --iterations spawns, or once the cell's --budget is spent and it has
/// --min-iterations spawns: fast methods get thousands of samples, fork from
/// a 4 GiB parent (tens of ms per spawn) gets a handful. Run time is thus
/// about budget × targets × memory points × thread counts, plus touching the
/// memory and the external peers: with the defaults (2 targets × 4 memory
/// points × 2 thread counts = 16 cells of 2 s) about a minute on 2 cores.
/// The first run also builds the Go peer, which can add several seconds.
///
/// External peers (python-popen, python-posix_spawn, go-exec) run their own
/// timed loop in their own process, by necessity with their own clock, at
/// their own memory and on one thread, for about the share of a cell's
/// budget that one in-process method gets; a peer whose runtime is missing
/// is skipped with a note.
#[derive(Debug, Args)]
struct SpawnArgs {
    /// Methods to compare, comma-separated, or `all`. Known: progeny,
    /// progeny-clone, progeny-zygote, std, fork, vfork, vfork-pidfd (vfork plus
    /// a pidfd for the child: what progeny's race-free handle costs alone),
    /// posix_spawn, clone-floor (no exec: the floor of process creation),
    /// python-popen, python-posix_spawn, go-exec.
    #[arg(long, value_name = "LIST", default_value = "all")]
    methods: String,

    /// Targets, comma-separated: `true` (/bin/true), `noop` (a static
    /// executable without libc whose whole life is one exit system call:
    /// the exec floor), or absolute paths.
    #[arg(long, value_name = "LIST", default_value = "true,noop")]
    targets: String,

    /// Parent memory to touch before spawning, comma-separated sizes with
    /// K, M, G suffixes (powers of 1024).
    #[arg(long, value_name = "LIST", default_value = "0,256M,1G,4G")]
    memory: String,

    /// Numbers of threads spawning at once, comma-separated; spawns/s counts
    /// all threads together.
    #[arg(long, value_name = "LIST", default_value = "1,2")]
    threads: String,

    /// Most measured spawns per method in each cell.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    iterations: u64,

    /// Fewest measured spawns per method in each cell, even past the budget.
    #[arg(long, value_name = "N", default_value_t = 5)]
    min_iterations: u64,

    /// Unmeasured spawns per method at the start of each cell (cut short
    /// after 50 ms).
    #[arg(long, value_name = "N", default_value_t = 10)]
    warmup: u64,

    /// Time budget of one cell (target × memory × threads) in seconds,
    /// shared by its methods.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    budget: f64,

    /// Write every raw figure and the machine's description to FILE (JSON).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Draw latency-vs-memory and latency-distribution PNGs into DIR.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,

    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

/// Print the tables of a saved benchmark report (spawn or indexer), and redraw its plots.
#[derive(Debug, Args)]
struct ShowArgs {
    /// A report written by `progeny bench spawn --json FILE` or
    /// `progeny bench indexer --json FILE`.
    #[arg(value_name = "FILE")]
    json: PathBuf,

    /// Draw the plots into DIR.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

fn option_error(
    flag: &str,
    error: impl std::fmt::Display,
) -> Box<dyn std::error::Error + Send + Sync> {
    format!("{flag}: {error}").into()
}

impl SpawnArgs {
    fn config(&self) -> Result<SpawnBenchConfig, Box<dyn std::error::Error + Send + Sync>> {
        let methods = if self.methods.trim() == "all" {
            Method::ALL.to_vec()
        } else {
            parse_list(&self.methods, "method", Method::parse)
                .map_err(|e| option_error("--methods", e))?
        };
        let targets = parse_list(&self.targets, "target", TargetSpec::parse)
            .map_err(|e| option_error("--targets", e))?;
        let memory_bytes = parse_list(&self.memory, "memory", parse_size)
            .map_err(|e| option_error("--memory", e))?;
        let threads = parse_list(&self.threads, "threads", |text| {
            text.parse::<u32>()
                .ok()
                .filter(|&n| (1..=1024).contains(&n))
                .ok_or_else(|| format!("invalid thread count {text:?}: expected 1 to 1024"))
        })
        .map_err(|e| option_error("--threads", e))?;
        if !(self.budget.is_finite() && self.budget > 0.0 && self.budget <= 3600.0) {
            return Err(option_error(
                "--budget",
                format!("{} is not between 0 and 3600 seconds", self.budget),
            ));
        }
        Ok(SpawnBenchConfig {
            methods,
            targets,
            memory_bytes,
            threads,
            iterations: self.iterations,
            min_iterations: self.min_iterations,
            warmup: self.warmup,
            budget: Duration::from_secs_f64(self.budget),
        })
    }
}

/// Shows the run's progress on stderr (hidden when stderr is not a
/// terminal, or with --quiet).
struct ProgressDisplay {
    bar: ProgressBar,
    step: u64,
}

/// Resolution of the bar within one step.
const TICKS_PER_STEP: u64 = 1000;

impl Observer for ProgressDisplay {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start { steps } => self.bar.set_length(steps * TICKS_PER_STEP),
            Event::Touching { memory_bytes } => self.bar.set_message(format!(
                "touching {} of parent memory",
                format_bytes(memory_bytes)
            )),
            Event::Preparing { what } => self.bar.set_message(what.to_owned()),
            Event::Step { step, label } => {
                self.step = step;
                self.bar.set_position(step * TICKS_PER_STEP);
                self.bar.set_message(label.to_owned());
            }
            Event::StepProgress { fraction } => self.bar.set_position(
                self.step * TICKS_PER_STEP + (fraction * TICKS_PER_STEP as f64) as u64,
            ),
            Event::Note(note) => self.bar.println(format!("note: {note}")),
        }
    }
}

fn run_spawn(args: SpawnArgs) -> CliResult {
    let config = args.config()?;
    config.validate()?;
    // Where the results go is checked before a minute is spent measuring.
    check_outputs(args.json.as_deref(), args.plot.as_deref())?;
    // The zygote must be forked while this process is single-threaded: now,
    // before the progress bar and the harness start threads.
    if config.methods.contains(&Method::ProgenyZygote) {
        progeny_bench::method::start_zygote()
            .map_err(|e| option_error("--methods progeny-zygote", e))?;
    }
    let bar = progress_bar(
        args.quiet,
        "{bar:32.cyan/blue} {percent:>3}% {elapsed:>4} {wide_msg}",
    )?;
    let mut display = ProgressDisplay { bar, step: 0 };
    let report = progeny_bench::run_spawn_bench(&config, &mut display);
    display.bar.finish_and_clear();
    publish(report?, args.json.as_deref(), args.plot.as_deref())
}

/// A benchmark report as the CLI hands it out: a table, a JSON file, plots.
trait Publish: Sized {
    fn table(&self) -> String;
    fn write_json(&self, path: &Path) -> io::Result<()>;
    fn read_json(path: &Path) -> io::Result<Self>;
    fn plots(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
}

impl Publish for SpawnReport {
    fn table(&self) -> String {
        table::spawn_tables(self)
    }
    fn write_json(&self, path: &Path) -> io::Result<()> {
        SpawnReport::write_json(self, path)
    }
    fn read_json(path: &Path) -> io::Result<Self> {
        SpawnReport::read_json(path)
    }
    fn plots(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        plot::spawn_plots(self, dir)
    }
}

/// Prints the report's table, writes it to `json` if given, and draws its plots into `plot` if
/// given: from the file just written when there is one, so that the plots show exactly what
/// the JSON holds.
fn publish<R: Publish>(report: R, json: Option<&Path>, plot: Option<&Path>) -> CliResult {
    let mut stdout = io::stdout().lock();
    stdout.write_all(report.table().as_bytes())?;
    stdout.flush()?;
    let plotted_from = match json {
        Some(path) => {
            report.write_json(path)?;
            writeln!(stdout, "wrote {}", path.display())?;
            R::read_json(path)?
        }
        None => report,
    };
    if let Some(dir) = plot {
        for path in plotted_from.plots(dir)? {
            writeln!(stdout, "wrote {}", path.display())?;
        }
    }
    Ok(())
}

/// The progress bar of a long run, on stderr (hidden with --quiet, or when stderr is not a
/// terminal).
fn progress_bar(
    quiet: bool,
    template: &str,
) -> Result<ProgressBar, Box<dyn std::error::Error + Send + Sync>> {
    let target = if quiet {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let bar = ProgressBar::with_draw_target(Some(0), target);
    bar.set_style(
        ProgressStyle::with_template(template)
            .map_err(|e| option_error("progress bar", e))?
            .progress_chars("=> "),
    );
    Ok(bar)
}

/// Checks where the results go (`--json`, `--plot`) before any time is spent measuring.
fn check_outputs(json: Option<&Path>, plot: Option<&Path>) -> CliResult {
    if let Some(path) = json {
        check_output_file(path).map_err(|e| option_error("--json", e))?;
    }
    if let Some(dir) = plot {
        std::fs::create_dir_all(dir)
            .map_err(|e| option_error("--plot", format!("cannot create {}: {e}", dir.display())))?;
    }
    Ok(())
}

/// Creates the parent directories of `path` and checks that a file can be
/// created next to it (the report is written to `path.tmp`, then renamed).
fn check_output_file(path: &Path) -> io::Result<()> {
    let describe =
        |e: io::Error| io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()));
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(describe)?;
    }
    if path.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is a directory", path.display()),
        ));
    }
    let mut probe = path.as_os_str().to_owned();
    probe.push(".tmp");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .map_err(describe)?;
    std::fs::remove_file(&probe).map_err(describe)
}

fn run_show(args: ShowArgs) -> CliResult {
    let report = match SpawnReport::read_json(&args.json) {
        Ok(report) => report,
        // An indexer report is shown as `bench indexer` shows it.
        Err(error) => match indexer::show(&args.json, args.plot.as_deref()) {
            Ok(()) => return Ok(()),
            Err(_) => return Err(error.into()),
        },
    };
    publish(report, None, args.plot.as_deref())
}
