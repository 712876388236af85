//! `progeny snapshot PID`: a live snapshot of a running process.

use std::io::{self, BufRead, Write};
use std::time::Duration;

use clap::Args;
use progeny_snapshot::{Snapshot, SnapshotOptions};

use crate::CliResult;

/// Snapshot a running process: stop every thread with ptrace (never SIGSTOP), record their
/// registers, make the process fork a copy-on-write child of itself, resume it.
///
/// Prints the pause (first interrupt to last resume) by phase, the thread count and the
/// child's pid. The child is a single-threaded copy of the process as it was at the stop; it
/// sends no SIGCHLD, is invisible to the target's wait(-1), and is killed and reaped when
/// progeny exits. Needs ptrace permission over the target (same user, or CAP_SYS_PTRACE).
#[derive(Debug, Args)]
pub(crate) struct SnapshotArgs {
    /// The process to snapshot.
    pid: i32,

    /// Print one JSON object: pid, child, threads, pause_us, phases (µs per phase).
    #[arg(long)]
    json: bool,

    /// Keep the child after printing, left stopped and untraced so another tool can attach
    /// (`gdb -p CHILD`), until stdin reaches end of file (Ctrl-D); then kill and reap it. The
    /// kernel reports the child's stop to the target as one SIGCHLD (CLD_STOPPED) unless the
    /// target set SA_NOCLDSTOP.
    #[arg(long)]
    hold: bool,

    /// Snapshot even if the target's seccomp filters cannot be read to check that they allow
    /// clone (reading them needs CAP_SYS_ADMIN).
    #[arg(long)]
    force: bool,
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// Runs `progeny snapshot`.
pub(crate) fn run(args: SnapshotArgs) -> CliResult {
    let options = SnapshotOptions {
        force: args.force,
        ..SnapshotOptions::default()
    };
    let mut snapshot = Snapshot::take(args.pid, &options)?;
    let phases = snapshot.phases();
    let mut out = io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{{\"pid\":{},\"child\":{},\"threads\":{},\"pause_us\":{:.1},\"phases\":{{\"stop\":{:.1},\"capture\":{:.1},\"inject\":{:.1},\"resume\":{:.1}}}}}",
            snapshot.pid(),
            snapshot.child(),
            snapshot.threads().len(),
            micros(snapshot.pause()),
            micros(phases.stop),
            micros(phases.capture),
            micros(phases.inject),
            micros(phases.resume),
        )?;
    } else {
        writeln!(
            out,
            "snapshot of {}: child {}, {} thread{}",
            snapshot.pid(),
            snapshot.child(),
            snapshot.threads().len(),
            if snapshot.threads().len() == 1 {
                ""
            } else {
                "s"
            }
        )?;
        writeln!(out, "pause {:>10.1} µs", micros(snapshot.pause()))?;
        for (name, value) in [
            ("stop", phases.stop),
            ("capture", phases.capture),
            ("inject", phases.inject),
            ("resume", phases.resume),
        ] {
            writeln!(out, "  {name:<8}{:>8.1} µs", micros(value))?;
        }
    }
    out.flush()?;
    if args.hold {
        snapshot.release_child_stopped()?;
        eprintln!(
            "holding child {} (stopped; e.g. gdb -p {}); end of input (Ctrl-D) releases it",
            snapshot.child(),
            snapshot.child()
        );
        let mut line = String::new();
        let stdin = io::stdin();
        while stdin.lock().read_line(&mut line)? > 0 {
            line.clear();
        }
    }
    drop(snapshot);
    Ok(())
}

/// Measure the snapshot pause against the stop of `gdb -p PID -batch -ex 'info threads'`.
///
/// Targets with each thread count and touched memory are snapshotted repeatedly and attached
/// by gdb, cells visited in rotating order over several rounds; medians.
///
/// "pause" is progeny's own clock (first interrupt to last resume) with its phases; "felt" is
/// the longest gap the target's 100 µs heartbeat saw around the snapshot (the pause from the
/// inside, plus up to a tick of scheduling noise); "gdb stop" is the same heartbeat gap around
/// a gdb run. One target is alive at a time.
#[derive(Debug, Args)]
pub(crate) struct BenchSnapshotArgs {
    /// Thread counts of the targets, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "1,8,64,256")]
    threads: String,

    /// Touched memory of the targets, comma-separated (e.g. 0,1G,4G).
    #[arg(long, value_name = "LIST", default_value = "0,1G,4G")]
    memory: String,

    /// Snapshots per cell per round.
    #[arg(long, default_value_t = 10)]
    snapshots: usize,

    /// gdb attaches per cell per round (0 skips gdb).
    #[arg(long, default_value_t = 1)]
    gdb_runs: usize,

    /// Rounds over all cells.
    #[arg(long, default_value_t = 3)]
    rounds: usize,

    /// Back the targets' memory with transparent huge pages (MADV_HUGEPAGE): the clone then
    /// copies one page-table entry per 2 MiB instead of 512.
    #[arg(long)]
    huge_pages: bool,

    /// Write the raw figures as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
}

/// Runs `progeny bench snapshot`.
pub(crate) fn run_bench(args: BenchSnapshotArgs) -> CliResult {
    use progeny_bench::snapshot::{run_snapshot_bench, snapshot_table, SnapshotBenchConfig};
    use progeny_bench::units::{parse_list, parse_size};

    let threads: Vec<usize> = parse_list(&args.threads, "--threads", |t: &str| {
        t.trim().parse::<usize>()
    })?;
    if threads.contains(&0) {
        return Err("--threads: a target has at least one thread".into());
    }
    let memory: Vec<u64> = parse_list(&args.memory, "--memory", parse_size)?;
    if args.rounds == 0 || args.snapshots == 0 {
        return Err("--rounds and --snapshots must be at least 1".into());
    }
    let gdb = ["/usr/bin/gdb", "/usr/local/bin/gdb"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|path| path.exists());
    if gdb.is_none() && args.gdb_runs > 0 {
        eprintln!("gdb not found: the gdb columns stay empty");
    }
    let config = SnapshotBenchConfig {
        threads,
        memory_mib: memory.iter().map(|bytes| bytes >> 20).collect(),
        huge_pages: args.huge_pages,
        snapshots: args.snapshots,
        gdb_runs: args.gdb_runs,
        rounds: args.rounds,
        gdb,
    };
    let report = run_snapshot_bench(&config, &mut |what| eprintln!("{what}"))?;
    let mut out = io::stdout().lock();
    write!(out, "{}", snapshot_table(&report))?;
    if let Some(path) = &args.json {
        report.write_json(path)?;
        writeln!(out, "raw figures: {}", path.display())?;
    }
    Ok(())
}
