//! A method that fails is reported as failed, never as fast.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use progeny_bench::harness::{run_spawn_bench, SpawnBenchConfig};
use progeny_bench::peers::find_in_path;
use progeny_bench::table::spawn_tables;
use progeny_bench::{Method, Spawner, Target, TargetSpec};

fn quick(methods: Vec<Method>, target: TargetSpec) -> SpawnBenchConfig {
    SpawnBenchConfig {
        methods,
        targets: vec![target],
        memory_bytes: vec![0],
        threads: vec![1],
        iterations: 5,
        min_iterations: 1,
        warmup: 1,
        budget: Duration::from_millis(100),
    }
}

fn available_methods() -> Vec<Method> {
    let mut methods = common::in_process_methods();
    if find_in_path("python3").is_some() {
        methods.extend([Method::PythonPopen, Method::PythonPosixSpawn]);
    }
    methods
}

#[test]
fn a_missing_target_fails_every_method_that_execs_it() {
    let missing = PathBuf::from("/nonexistent/progeny-bench-target");
    let report = run_spawn_bench(
        &quick(available_methods(), TargetSpec::Path(missing)),
        &mut (),
    )
    .unwrap();
    assert!(!report.results.is_empty());
    for result in &report.results {
        if result.execs_target {
            assert!(
                !result.ok,
                "{} reported ok for a missing target",
                result.method
            );
            let error = result.error.as_deref().unwrap_or("");
            assert!(
                !error.is_empty(),
                "{} failed without saying why",
                result.method
            );
            assert_eq!(result.median_us, None, "{}", result.method);
            assert_eq!(result.p99_us, None, "{}", result.method);
            assert_eq!(result.spawns_per_s, None, "{}", result.method);
        } else {
            // The clone floor never execs: it has nothing to fail on.
            assert!(result.ok, "{}: {:?}", result.method, result.error);
        }
    }
    let tables = spawn_tables(&report);
    assert!(tables.contains("FAILED"), "{tables}");
}

#[test]
fn a_target_that_exits_nonzero_is_a_failure() {
    let report = run_spawn_bench(
        &quick(available_methods(), TargetSpec::Path("/bin/false".into())),
        &mut (),
    )
    .unwrap();
    for result in report.results.iter().filter(|r| r.execs_target) {
        assert!(
            !result.ok,
            "{} counted /bin/false as a success",
            result.method
        );
        assert!(result.median_us.is_none());
    }
}

#[test]
fn a_spawner_reports_the_failure() {
    for method in common::in_process_methods()
        .into_iter()
        .filter(|m| m.execs_target())
    {
        let target = Target::new("missing", "/nonexistent/x", Vec::new());
        let mut spawner = Spawner::new(method, &target).unwrap();
        let failure = spawner.run_once().expect_err(method.name());
        assert!(
            failure.to_string().contains("/nonexistent/x"),
            "{method}: {failure}"
        );
    }
}

#[test]
fn bad_configurations_are_refused_before_running() {
    let mut config = quick(vec![Method::Fork], TargetSpec::True);
    config.threads = vec![0];
    assert!(run_spawn_bench(&config, &mut ()).is_err());
    let mut config = quick(vec![Method::Fork], TargetSpec::True);
    config.memory_bytes = vec![u64::MAX / 2];
    let error = run_spawn_bench(&config, &mut ()).unwrap_err();
    assert!(error.to_string().contains("exceeds"), "{error}");
    let mut config = quick(vec![], TargetSpec::True);
    config.methods.clear();
    assert!(run_spawn_bench(&config, &mut ()).is_err());
}
