//! The indexer benchmark with real processes: every method converts a small
//! corpus and every output is checked; a converter that writes a wrong text
//! or fails is reported as failed; nothing (temporary directory, child,
//! descriptor) is left behind.
//!
//! A plain `main` instead of libtest: the progeny-zygote method needs its
//! zygote forked while the process is still single-threaded.

mod common;

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{run_checks, Scratch};
use progeny_bench::indexer::corpus::{checksum, extract_text, generate_document};
use progeny_bench::indexer::plot::indexer_plots;
use progeny_bench::indexer::report::{
    IndexerConfigRecord, IndexerReport, IndexerResult, RoundFigures, INDEXER_SCHEMA,
};
use progeny_bench::indexer::{
    converter_executable, run_indexer_bench, IndexerConfig, IndexerEvent, IndexerObserver, METHODS,
};
use progeny_bench::machine::Machine;
use progeny_bench::method::start_zygote;
use progeny_bench::Method;

/// A small configuration: 200 documents, a little memory, two workers.
fn small(methods: &[Method]) -> IndexerConfig {
    IndexerConfig {
        methods: methods.to_vec(),
        files: 200,
        memory_bytes: 32 << 20,
        threads: 2,
        rounds: 2,
        warmup_files: 4,
        converter: None,
    }
}

fn write_script(path: &Path, body: &str) -> PathBuf {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(path)
        .unwrap();
    writeln!(file, "#!/bin/sh\n{body}").unwrap();
    file.sync_all().unwrap();
    path.to_owned()
}

fn write_converter(path: &Path) -> PathBuf {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(path)
        .unwrap();
    file.write_all(converter_executable()).unwrap();
    file.sync_all().unwrap();
    path.to_owned()
}

/// Temporary directories of this process's benchmark runs
/// (`progeny-bench-<pid>-...`), which must all be gone after a run.
fn leftover_run_dirs() -> Vec<PathBuf> {
    let prefix = format!("progeny-bench-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// This process's open descriptors.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// This process's children, as (pid, state) from `/proc`.
fn children() -> Vec<(u32, char)> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        pids.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    pids.into_iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
                .unwrap_or('?');
            (pid, state)
        })
        .collect()
}

/// Counts the conversions reported to the observer.
#[derive(Default)]
struct Counter {
    planned: u64,
    done: u64,
    failed: Vec<Method>,
}

impl IndexerObserver for Counter {
    fn event(&mut self, event: IndexerEvent<'_>) {
        match event {
            IndexerEvent::Start { conversions } => self.planned = conversions,
            IndexerEvent::Converted { done } => self.done = self.done.max(done),
            IndexerEvent::Failed { method, .. } => self.failed.push(method),
            _ => {}
        }
    }
}

fn every_method_converts_and_checks_every_document(scratch: &Scratch) {
    let fds = open_fds();
    let before = children();
    let mut counter = Counter::default();
    let report = run_indexer_bench(&small(&METHODS), &mut counter).unwrap();
    assert_eq!(report.results.len(), METHODS.len());
    for (result, method) in report.results.iter().zip(METHODS) {
        assert_eq!(result.method, method.name());
        assert!(result.ok, "{}: {:?}", result.method, result.error);
        assert_eq!(result.files, 200, "{}", result.method);
        assert_eq!(result.warmup_files, 4, "{}", result.method);
        // Every byte of every expected text came back from a converter.
        assert_eq!(
            result.output_bytes, report.config.text_bytes,
            "{}",
            result.method
        );
        assert_eq!(result.rounds.len(), 2, "{}", result.method);
        assert_eq!(
            result.rounds.iter().map(|r| r.files).sum::<u64>(),
            200,
            "{}",
            result.method
        );
        let real = result.real_s.unwrap();
        assert!(real > 0.0);
        assert!(result.user_s.unwrap() >= 0.0 && result.sys_s.unwrap() > 0.0);
        assert!((result.files_per_s.unwrap() - 200.0 / real).abs() < 1e-6);
    }
    assert_eq!(report.results[0].ratio_to_fork, Some(1.0));
    assert!(report.results.iter().all(|r| r.ratio_to_fork.is_some()));
    assert_eq!(counter.planned, (204 * METHODS.len()) as u64);
    assert_eq!(counter.done, counter.planned);
    assert!(counter.failed.is_empty());

    // Nothing left behind: the corpus, the descriptors, the converters.
    assert_eq!(leftover_run_dirs(), Vec::<PathBuf>::new());
    assert_eq!(open_fds(), fds, "a descriptor leaked");
    // Only the zygote's processes remain, none of them a zombie.
    let after = children();
    let pids = |list: &[(u32, char)]| list.iter().map(|c| c.0).collect::<Vec<u32>>();
    assert_eq!(
        pids(&after),
        pids(&before),
        "children before {before:?}, after {after:?}"
    );
    assert!(after.iter().all(|&(_, state)| state != 'Z'), "{after:?}");

    // The table, the JSON round trip and the plot.
    let table = report.table();
    for method in METHODS {
        assert!(table.contains(method.name()), "{table}");
    }
    assert!(table.contains("×fork") && table.contains("progeny's real time"));
    assert!(!table.contains("FAILED"), "{table}");
    let json = scratch.path().join("indexer.json");
    report.write_json(&json).unwrap();
    assert_eq!(IndexerReport::read_json(&json).unwrap(), report);
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for key in ["method", "files", "real_s", "user_s", "sys_s", "ok"] {
        assert!(value["results"][0].get(key).is_some(), "{key} missing");
    }
    let written = indexer_plots(&report, &scratch.path().join("plots")).unwrap();
    assert_eq!(written.len(), 1);
    assert!(std::fs::read(&written[0])
        .unwrap()
        .starts_with(b"\x89PNG\r\n\x1a\n"));
}

fn a_converter_writing_the_wrong_text_fails_every_method(scratch: &Scratch) {
    let cat = write_script(&scratch.path().join("cat"), "exec cat");
    let mut config = small(&METHODS);
    config.converter = Some(cat);
    config.warmup_files = 0;
    let mut counter = Counter::default();
    let report = run_indexer_bench(&config, &mut counter).unwrap();
    for result in &report.results {
        assert!(
            !result.ok,
            "{} passed with a wrong converter",
            result.method
        );
        let error = result.error.as_deref().unwrap();
        assert!(error.contains("checksum"), "{}: {error}", result.method);
        assert_eq!(result.real_s, None);
        assert_eq!(result.files, 0);
    }
    assert_eq!(counter.failed, METHODS);
    assert!(report.table().contains("FAILED"));
    assert_eq!(leftover_run_dirs(), Vec::<PathBuf>::new());
}

fn a_failing_converter_fails_every_method(scratch: &Scratch) {
    let failing = write_script(&scratch.path().join("failing"), "cat >/dev/null; exit 3");
    let mut config = small(&METHODS);
    config.converter = Some(failing);
    let report = run_indexer_bench(&config, &mut ()).unwrap();
    for result in &report.results {
        assert!(
            !result.ok,
            "{} passed with a failing converter",
            result.method
        );
        let error = result.error.as_deref().unwrap();
        assert!(
            error.contains("exit status: 3"),
            "{}: {error}",
            result.method
        );
    }
    let missing = scratch.path().join("missing");
    config.converter = Some(missing);
    let report = run_indexer_bench(&config, &mut ()).unwrap();
    assert!(report.results.iter().all(|r| !r.ok));
    assert_eq!(leftover_run_dirs(), Vec::<PathBuf>::new());
}

fn one_corrupted_document_among_two_hundred_is_caught(scratch: &Scratch) {
    // The real converter, except that its 150th run appends a byte.
    let real = write_converter(&scratch.path().join("real-converter"));
    let count = scratch.path().join("count");
    let script = write_script(
        &scratch.path().join("corrupting"),
        &format!(
            "n=$(($(cat '{count}' 2>/dev/null || echo 0) + 1)); echo $n > '{count}'\n\
             if [ $n -eq 150 ]; then '{real}'; echo x; else exec '{real}'; fi",
            count = count.display(),
            real = real.display()
        ),
    );
    let mut config = small(&[Method::Progeny, Method::Vfork]);
    config.converter = Some(script);
    // One worker and no warm-up, so the 150th run is progeny's 150th
    // document of the first round.
    config.threads = 1;
    config.warmup_files = 0;
    config.rounds = 1;
    let report = run_indexer_bench(&config, &mut ()).unwrap();
    let progeny = report.find("progeny").unwrap();
    assert!(!progeny.ok);
    assert_eq!(progeny.files, 149);
    assert!(
        progeny.error.as_deref().unwrap().contains("doc-00149.doc"),
        "{:?}",
        progeny.error
    );
    let vfork = report.find("vfork").unwrap();
    assert!(vfork.ok, "{:?}", vfork.error);
    assert_eq!(vfork.files, 200);
}

fn the_converter_follows_the_rules(scratch: &Scratch) {
    let converter = write_converter(&scratch.path().join("converter"));
    let mut inputs: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"a".to_vec(),
        b"Hello, World! x 42".to_vec(),
        (0..=255u8).collect(),
        format!("ab {} cd", "Q".repeat(200)).into_bytes(),
        vec!["abc"; 100].join(" ").into_bytes(),
    ];
    inputs.extend((0..20).map(generate_document));
    for (index, input) in inputs.iter().enumerate() {
        let expected = extract_text(input);
        // On stdin.
        let mut child = Command::new(&converter)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        assert_eq!(output.stdout, expected, "input {index} on stdin");
        // By name.
        let file = scratch.path().join(format!("input-{index}"));
        std::fs::write(&file, input).unwrap();
        let output = Command::new(&converter).arg(&file).output().unwrap();
        assert!(output.status.success());
        assert_eq!(
            checksum(&output.stdout),
            checksum(&expected),
            "input {index}"
        );
    }
    let output = Command::new(&converter)
        .arg(scratch.path().join("no-such-file"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no-such-file"));
}

/// Rounds of a method, each with the given real seconds and 100 files.
fn rounds(reals: &[f64]) -> Vec<RoundFigures> {
    reals
        .iter()
        .enumerate()
        .map(|(round, &real_s)| RoundFigures {
            round: round as u32,
            files: 100,
            real_s,
            process_user_s: 0.1,
            process_sys_s: 0.2,
            children_user_s: 0.3,
            children_sys_s: 0.4,
            helper_user_s: 0.0,
            helper_sys_s: 0.0,
        })
        .collect()
}

fn ratios_and_the_table_from_known_figures() {
    let report = IndexerReport {
        schema: INDEXER_SCHEMA.to_owned(),
        machine: Machine::current(),
        config: IndexerConfigRecord {
            methods: vec![
                "fork".into(),
                "vfork".into(),
                "progeny".into(),
                "std".into(),
            ],
            files: 300,
            corpus_bytes: 300 << 12,
            text_bytes: 300 << 11,
            memory_bytes: 1 << 20,
            threads: 2,
            rounds: 3,
            warmup_files: 0,
            converter: "built-in".into(),
        },
        notes: Vec::new(),
        results: vec![
            IndexerResult::measured("fork", rounds(&[10.0, 10.0, 10.0]), 0, 0),
            IndexerResult::measured("vfork", rounds(&[1.0, 1.0, 4.0]), 0, 0),
            // One slow round (a burst of load elsewhere) among fast ones.
            IndexerResult::measured("progeny", rounds(&[1.0, 5.0, 2.0]), 0, 0),
            IndexerResult::failed("std", "std broke".into(), 12, rounds(&[1.0]), 0, 0),
        ],
    };
    let progeny = report.find("progeny").unwrap();
    assert_eq!(progeny.files, 300);
    assert_eq!(progeny.real_s, Some(8.0));
    assert!((progeny.user_s.unwrap() - 1.2).abs() < 1e-9);
    assert!((progeny.sys_s.unwrap() - 1.8).abs() < 1e-9);
    assert_eq!(progeny.files_per_s, Some(37.5));
    assert_eq!(report.ratio("progeny", "fork"), Some(8.0 / 30.0));
    assert_eq!(report.ratio("progeny", "vfork"), Some(8.0 / 6.0));
    // Medians of (0.1, 0.5, 0.2) and (1, 5, 0.5).
    assert_eq!(report.round_ratio("progeny", "fork"), Some(0.2));
    assert_eq!(report.round_ratio("progeny", "vfork"), Some(1.0));
    assert_eq!(report.ratio("std", "fork"), None);
    assert_eq!(report.round_ratio("std", "fork"), None);
    let table = report.table();
    assert!(
        table.contains(
            "progeny's real time: 0.27 × fork's, 1.33 × vfork's (median of the rounds' \
             ratios: 0.20 × fork's, 1.00 × vfork's)"
        ),
        "{table}"
    );
    let std_row = table.lines().find(|l| l.starts_with("std ")).unwrap();
    assert!(std_row.contains("FAILED"), "{std_row}");
    assert!(table.contains("FAILED: std failed after 12 documents: std broke"));
    let progeny_row = table.lines().find(|l| l.starts_with("progeny ")).unwrap();
    let cells: Vec<&str> = progeny_row.split_whitespace().collect();
    assert_eq!(cells, ["progeny", "8.00", "1.20", "1.80", "38", "0.27"]);
}

fn bad_configurations_are_refused() {
    let good = small(&[Method::Progeny]);
    let bad = [
        IndexerConfig {
            files: 0,
            ..good.clone()
        },
        IndexerConfig {
            threads: 0,
            ..good.clone()
        },
        IndexerConfig {
            rounds: 201,
            ..good.clone()
        },
        IndexerConfig {
            methods: Vec::new(),
            ..good.clone()
        },
        IndexerConfig {
            methods: vec![Method::CloneFloor],
            ..good.clone()
        },
        IndexerConfig {
            memory_bytes: u64::MAX / 2,
            ..good.clone()
        },
    ];
    for config in bad {
        let error = run_indexer_bench(&config, &mut ()).expect_err("refused");
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{error}");
    }
    assert_eq!(leftover_run_dirs(), Vec::<PathBuf>::new());
}

fn main() {
    // Before anything can start a thread.
    start_zygote().expect("starting the zygote in a single-threaded process");
    let scratch = Scratch::new("indexer");
    let checks: [(&str, &dyn Fn()); 7] = [
        ("every_method_converts_and_checks_every_document", &|| {
            every_method_converts_and_checks_every_document(&scratch)
        }),
        (
            "a_converter_writing_the_wrong_text_fails_every_method",
            &|| a_converter_writing_the_wrong_text_fails_every_method(&scratch),
        ),
        ("a_failing_converter_fails_every_method", &|| {
            a_failing_converter_fails_every_method(&scratch)
        }),
        (
            "one_corrupted_document_among_two_hundred_is_caught",
            &|| one_corrupted_document_among_two_hundred_is_caught(&scratch),
        ),
        ("the_converter_follows_the_rules", &|| {
            the_converter_follows_the_rules(&scratch)
        }),
        (
            "ratios_and_the_table_from_known_figures",
            &ratios_and_the_table_from_known_figures,
        ),
        (
            "bad_configurations_are_refused",
            &bad_configurations_are_refused,
        ),
    ];
    let failed = run_checks(&checks);
    // exit() skips destructors: remove the scratch directory first.
    drop(scratch);
    if failed > 0 {
        std::process::exit(1);
    }
}
