//! Helpers shared by the integration tests (included with `mod common`).

#![allow(missing_docs, dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use std::time::Duration;

use progeny_bench::harness::SpawnBenchConfig;
use progeny_bench::{Method, Target, TargetSpec};

/// A fresh, private directory removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!(
            "progeny-bench-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A target that appends one byte to `file` each time it runs:
/// `/bin/sh -c 'printf x >> "$0"' FILE`.
pub fn appending_target(file: &Path) -> Target {
    Target::new(
        "append",
        "/bin/sh",
        vec![
            OsString::from("-c"),
            OsString::from("printf x >> \"$0\""),
            file.as_os_str().to_owned(),
        ],
    )
}

/// How many times the appending target ran.
pub fn runs(file: &Path) -> u64 {
    std::fs::read(file).map(|b| b.len() as u64).unwrap_or(0)
}

/// The in-process methods that any test process can run. `progeny-zygote`
/// is left out: its zygote must be started while the process is
/// single-threaded, which a libtest binary never is; `tests/zygote.rs` runs
/// it in a binary of its own.
pub fn in_process_methods() -> Vec<Method> {
    Method::ALL
        .into_iter()
        .filter(|m| !m.is_external() && *m != Method::ProgenyZygote)
        .collect()
}

/// Runs the checks of a test binary without libtest's harness (one that must start the zygote
/// while it is single-threaded), printing a libtest-like line per check and a summary. A check
/// fails by panicking; returns how many failed.
pub fn run_checks(checks: &[(&str, &dyn Fn())]) -> usize {
    let mut failed = 0;
    for (name, check) in checks {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)) {
            Ok(()) => println!("test {name} ... ok"),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    println!("{} passed, {failed} failed", checks.len() - failed);
    failed
}

/// A spawn benchmark of `method` alone, on `threads` threads, whose target appends a line to
/// `file` each run.
pub fn config_for(method: Method, file: &Path, threads: u32) -> SpawnBenchConfig {
    SpawnBenchConfig {
        methods: vec![method],
        targets: vec![TargetSpec::Custom(appending_target(file))],
        memory_bytes: vec![0],
        threads: vec![threads],
        // min = max: however slow the machine, exactly 6 are measured.
        iterations: 6,
        min_iterations: 6,
        warmup: 2,
        budget: Duration::from_millis(200),
    }
}
