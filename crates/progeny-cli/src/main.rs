//! `progeny`: measure how processes are created on this machine.
//!
//! A thin shell over the libraries: `main` parses the command line and hands
//! it to [`run`], which calls a library function and turns its error into
//! one line on stderr and exit status 2. A closed stdout (`progeny ... |
//! head`) is not an error: the command exits 0.

mod bench;
#[path = "core.rs"]
mod core_dump;
mod cow;
mod probe;
mod snapshot;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};

/// What a subcommand returns: any error becomes one line on stderr.
pub(crate) type CliResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Measure process creation on Linux: progeny against fork, vfork,
/// posix_spawn, std::process::Command and other runtimes.
#[derive(Debug, Parser)]
#[command(name = "progeny", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks (the spawn comparison, and redrawing its tables and plots).
    Bench(bench::BenchArgs),
    /// Snapshot a running process into a stopped copy-on-write child, pausing it only briefly.
    Snapshot(snapshot::SnapshotArgs),
    /// Measure what a live snapshot child costs the original's page writes.
    Cow(cow::CowArgs),
    /// Write a gdb-loadable core of a running process, pausing it only for the snapshot.
    Core(core_dump::CoreArgs),
    /// Which kernel features this process can use for spawning, and why not.
    Probe(probe::ProbeArgs),
}

fn main() -> ExitCode {
    run(parse())
}

/// Parses the command line. `--help` and `--version` print and exit 0; a
/// missing subcommand prints the help and exits 2; any other usage error
/// prints one line (clap's first) and exits 2, like every other error of
/// this command.
fn parse() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version (stdout, 0), and a missing subcommand (its
        // help on stderr, 2).
        Err(error)
            if !error.use_stderr()
                || error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            error.exit()
        }
        Err(error) => {
            let text = error.render().to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("progeny: {first} (see --help)");
            std::process::exit(2);
        }
    }
}

/// Runs the parsed command line and maps the outcome to an exit status.
fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Cow(args) => cow::run(args),
        Command::Core(args) => core_dump::run(args),
        Command::Probe(args) => probe::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if is_broken_pipe(error.as_ref()) => ExitCode::SUCCESS,
        Err(error) => {
            let message = error.to_string();
            let line = message.lines().next().unwrap_or("failed");
            eprintln!("progeny: {line}");
            ExitCode::from(2)
        }
    }
}

/// True when the error is a write to a closed pipe (the reader went away,
/// as `head` does): the output was simply not wanted any more.
fn is_broken_pipe(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(io_error) = error.downcast_ref::<std::io::Error>() {
            if io_error.kind() == std::io::ErrorKind::BrokenPipe {
                return true;
            }
        }
        current = error.source();
    }
    false
}
