//! `progeny bench indexer`: arguments, exit statuses, files written.

mod common;

use common::{assert_one_line_error, progeny, Scratch};
/// A quick real run: a few documents, a little memory, every method.
const QUICK: [&str; 10] = [
    "bench",
    "indexer",
    "--files",
    "60",
    "--memory",
    "8M",
    "--rounds",
    "2",
    "--threads",
    "2",
];

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let indexer = |extra: &[&'static str]| {
        let mut args = vec!["bench", "indexer"];
        args.extend_from_slice(extra);
        args
    };
    assert_one_line_error(&indexer(&["--methods", "fork,teleport"]), "teleport");
    assert_one_line_error(&indexer(&["--methods", "clone-floor"]), "clone-floor");
    assert_one_line_error(&indexer(&["--memory", "12Q"]), "--memory");
    assert_one_line_error(&indexer(&["--memory", "1000T"]), "exceeds");
    assert_one_line_error(&indexer(&["--threads", "0"]), "--threads");
    assert_one_line_error(&indexer(&["--files", "0"]), "--files");
    assert_one_line_error(&indexer(&["--files", "x"]), "--files");
    assert_one_line_error(&indexer(&["--files", "3", "--rounds", "4"]), "--rounds");
}

#[test]
fn an_unwritable_json_path_is_refused_before_measuring() {
    let scratch = Scratch::new("indexer-json");
    let blocker = scratch.path().join("file");
    std::fs::write(&blocker, b"").unwrap();
    let json = blocker.join("report.json");
    let started = std::time::Instant::now();
    // A run that would take minutes: the refusal must come first.
    assert_one_line_error(
        &[
            "bench",
            "indexer",
            "--json",
            json.to_str().unwrap(),
            "--methods",
            "fork",
        ],
        "--json",
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_one_line_error(
        &[
            "bench",
            "indexer",
            "--json",
            scratch.path().to_str().unwrap(),
        ],
        "is a directory",
    );
}

#[test]
fn a_run_prints_the_table_and_writes_json_and_a_plot() {
    let scratch = Scratch::new("indexer-run");
    let json = scratch.path().join("out/indexer.json");
    let plots = scratch.path().join("plots");
    let mut args: Vec<&str> = QUICK.to_vec();
    args.extend(["--json", json.to_str().unwrap()]);
    args.extend(["--plot", plots.to_str().unwrap()]);
    let output = progeny().args(&args).output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let methods = [
        "fork",
        "vfork",
        "vfork-pidfd",
        "posix_spawn",
        "std",
        "progeny",
        "progeny-zygote",
    ];
    for method in methods {
        assert!(
            stdout.lines().any(|l| l.starts_with(&format!("{method} "))),
            "{method} missing: {stdout}"
        );
    }
    assert!(stdout.contains("real s") && stdout.contains("×fork"));
    assert!(!stdout.contains("FAILED"), "{stdout}");
    let text = std::fs::read_to_string(&json).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let results = value["results"].as_array().unwrap();
    assert_eq!(results.len(), methods.len());
    for result in results {
        assert_eq!(result["ok"], true, "{result}");
        assert_eq!(result["files"], 60);
        assert!(result["real_s"].as_f64().unwrap() > 0.0);
        assert!(result["user_s"].as_f64().is_some() && result["sys_s"].as_f64().is_some());
    }
    assert_eq!(value["config"]["memory_bytes"], 8 << 20);
    assert!(value["machine"]["kernel"].is_string());
    let png = std::fs::read(plots.join("indexer.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));

    // `bench show` prints the same table from the file.
    let shown = progeny()
        .args(["bench", "show", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(shown.status.success());
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(stdout.starts_with(&shown), "{shown}");
}
