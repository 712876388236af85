//! `progeny core PID`: a gdb-loadable core of a running process, with a pause of a snapshot.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use progeny_snapshot::{CoreOptions, Snapshot, SnapshotOptions};

use crate::CliResult;

/// Write a core file of a running process without stopping it for the dump: progeny stops it
/// only for a snapshot (microseconds to milliseconds), then writes the core from the
/// copy-on-write child while the process runs on. Load it with `gdb PROGRAM CORE`.
///
/// Prints the pause and the write time separately. Mappings that cannot be read are written
/// as empty segments with a warning.
#[derive(Debug, Args)]
pub(crate) struct CoreArgs {
    /// The process to dump.
    pid: i32,

    /// Output file (default: core.PID in the current directory, as gcore does).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// Leave out the contents of file-backed read-only mappings (program and library text):
    /// gdb reads them from the files, and the core is much smaller.
    #[arg(long)]
    skip_file_text: bool,

    /// Snapshot even if the target's seccomp filters cannot be checked.
    #[arg(long)]
    force: bool,
}

/// Runs `progeny core`.
pub(crate) fn run(args: CoreArgs) -> CliResult {
    let output = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("core.{}", args.pid)));
    let options = SnapshotOptions {
        force: args.force,
        ..SnapshotOptions::default()
    };
    let started = Instant::now();
    let snapshot = Snapshot::take(args.pid, &options)?;
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{bytes}/{total_bytes} {wide_bar} {binary_bytes_per_sec} {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let report = snapshot.write_core(
        &output,
        &CoreOptions {
            skip_file_backed_readonly: args.skip_file_text,
        },
        &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        },
    );
    bar.finish_and_clear();
    let pause = snapshot.pause();
    let threads = snapshot.threads().len();
    drop(snapshot);
    let report = report?;
    let total = started.elapsed();
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "{}: {} threads, {} segments, {} bytes",
        output.display(),
        threads,
        report.segments,
        report.bytes
    )?;
    writeln!(
        out,
        "pause {:.1} µs; write {:.1} ms; total {:.1} ms",
        pause.as_secs_f64() * 1e6,
        report.write_time.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3
    )?;
    Ok(())
}

/// Compare the pause of a core dump by gcore and by progeny core.
///
/// gcore keeps the target stopped for the whole dump; progeny stops it for a snapshot and
/// writes the core from the child. For targets with each amount of touched memory, the pause
/// is measured from inside the target, by its 100 µs heartbeat's longest gap; progeny's own
/// pause clock is shown too, and the time to the finished file.
#[derive(Debug, Args)]
pub(crate) struct BenchCoreArgs {
    /// Touched memory of the targets, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "256M,1G,4G")]
    memory: String,

    /// Threads of the targets.
    #[arg(long, default_value_t = 8)]
    threads: usize,

    /// Rounds per size (each: one gcore, one progeny core).
    #[arg(long, default_value_t = 3)]
    rounds: usize,

    /// Back the targets' memory with transparent huge pages (MADV_HUGEPAGE).
    #[arg(long)]
    huge_pages: bool,

    /// Directory for the cores (each is deleted once measured).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// Write the raw figures as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Runs `progeny bench core`.
pub(crate) fn run_bench(args: BenchCoreArgs) -> CliResult {
    use progeny_bench::core_dump::{core_table, run_core_bench, CoreBenchConfig};
    use progeny_bench::units::{parse_list, parse_size};

    let memory: Vec<u64> = parse_list(&args.memory, "--memory", parse_size)?;
    if args.rounds == 0 || args.threads == 0 {
        return Err("--rounds and --threads must be at least 1".into());
    }
    let gcore = ["/usr/bin/gcore", "/usr/local/bin/gcore"]
        .iter()
        .map(PathBuf::from)
        .find(|path| path.exists());
    if gcore.is_none() {
        eprintln!("gcore not found (it comes with gdb): the gcore columns stay empty");
    }
    let config = CoreBenchConfig {
        memory_mib: memory.iter().map(|bytes| bytes >> 20).collect(),
        huge_pages: args.huge_pages,
        threads: args.threads,
        rounds: args.rounds,
        gcore,
        dir: args.dir.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("progeny-bench-core-{}", std::process::id()))
        }),
    };
    let report = run_core_bench(&config, &mut |what| eprintln!("{what}"));
    let _ = std::fs::remove_dir(&config.dir);
    let report = report?;
    let mut out = io::stdout().lock();
    write!(out, "{}", core_table(&report))?;
    if let Some(path) = &args.json {
        report.write_json(path)?;
        writeln!(out, "raw figures: {}", path.display())?;
    }
    Ok(())
}
