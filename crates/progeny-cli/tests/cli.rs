//! The `progeny` binary: arguments, exit statuses, files written.

mod common;

use common::{assert_one_line_error, progeny, Scratch};
use std::process::Stdio;

/// The quickest real run: two methods, the no-op target, no memory, one thread.
const QUICK: [&str; 12] = [
    "bench",
    "spawn",
    "--methods",
    "progeny,fork",
    "--targets",
    "noop",
    "--memory",
    "0,4M",
    "--threads",
    "1",
    "--budget",
    "0.05",
];

#[test]
fn bad_input_is_one_line_and_exit_2() {
    assert_one_line_error(
        &["bench", "spawn", "--methods", "fork,teleport"],
        "teleport",
    );
    assert_one_line_error(&["bench", "spawn", "--memory", "1X"], "--memory");
    assert_one_line_error(&["bench", "spawn", "--memory", "1,,2"], "--memory");
    assert_one_line_error(&["bench", "spawn", "--threads", "0"], "--threads");
    assert_one_line_error(
        &["bench", "spawn", "--targets", "relative/path"],
        "--targets",
    );
    assert_one_line_error(&["bench", "spawn", "--budget", "0"], "--budget");
    assert_one_line_error(&["bench", "spawn", "--budget", "-1"], "'-1'");
    assert_one_line_error(&["bench", "spawn", "--no-such-flag"], "--no-such-flag");
    assert_one_line_error(&["bench", "spawn", "--iterations", "many"], "many");
    assert_one_line_error(&["bench", "spawn", "--memory", "100T"], "exceeds");
    assert_one_line_error(
        &["bench", "show", "/nonexistent/report.json"],
        "report.json",
    );
    // An unwritable --json or --plot is refused before anything is measured.
    assert_one_line_error(
        &["bench", "spawn", "--json", "/proc/version/x.json"],
        "--json",
    );
    assert_one_line_error(&["bench", "spawn", "--json", "/"], "--json");
    assert_one_line_error(&["bench", "spawn", "--plot", "/proc/version"], "--plot");
}

#[test]
fn help_exits_0_and_a_missing_subcommand_2() {
    let output = progeny().arg("bench").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8(output.stderr).unwrap().contains("spawn"));
    let output = progeny()
        .args(["bench", "spawn", "--help"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(help.contains("--budget"), "{help}");
    assert!(help.contains("about a minute"), "{help}");
}

#[test]
fn a_run_prints_tables_and_writes_json_and_plots() {
    let scratch = Scratch::new("run");
    // Directories that do not exist yet are created.
    let json = scratch.path().join("out/spawn.json");
    let plots = scratch.path().join("plots");
    let output = progeny()
        .args(QUICK)
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&plots)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("target noop"), "{stdout}");
    assert!(stdout.contains("progeny"), "{stdout}");
    assert!(stdout.contains("µs per GiB"), "{stdout}");
    assert!(!stdout.contains("FAILED"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["results"].as_array().unwrap().len(), 2 * 2);
    for name in ["latency-vs-memory.png", "distribution-noop.png"] {
        assert!(plots.join(name).is_file(), "{name} missing");
    }

    // `show` reprints the same tables from the file.
    let shown = progeny()
        .args(["bench", "show"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(shown.status.success());
    let shown = String::from_utf8(shown.stdout).unwrap();
    let tables_only = |text: &str| -> String {
        text.lines()
            .filter(|l| !l.starts_with("wrote "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(tables_only(&shown), tables_only(&stdout));
}

#[test]
fn a_closed_stdout_is_not_an_error() {
    // The reader is gone before anything is written: every write gets EPIPE.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = progeny()
        .args(QUICK)
        .stdout(writer)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}
