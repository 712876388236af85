//! The JSON report: a real run written and read back unchanged, with the
//! fields other tools rely on.

mod common;

use std::time::Duration;

use common::Scratch;
use progeny_bench::harness::{run_spawn_bench, SpawnBenchConfig};
use progeny_bench::report::SpawnReport;
use progeny_bench::{Method, TargetSpec};

fn small_run() -> SpawnReport {
    let config = SpawnBenchConfig {
        methods: vec![
            Method::Progeny,
            Method::Fork,
            Method::PosixSpawn,
            Method::CloneFloor,
        ],
        targets: vec![
            TargetSpec::Noop,
            TargetSpec::Path("/nonexistent/progeny-bench".into()),
        ],
        memory_bytes: vec![0, 16 << 20],
        threads: vec![1, 2],
        iterations: 20,
        min_iterations: 2,
        warmup: 2,
        budget: Duration::from_millis(40),
    };
    run_spawn_bench(&config, &mut ()).unwrap()
}

#[test]
fn a_report_round_trips_through_json() {
    let report = small_run();
    // methods × targets × memory points × threads
    assert_eq!(report.results.len(), 4 * 2 * 2 * 2);
    let scratch = Scratch::new("json");
    let path = scratch.path().join("report.json");
    report.write_json(&path).unwrap();
    let read = SpawnReport::read_json(&path).unwrap();
    assert_eq!(read, report);
    // Nothing is left behind but the report itself.
    let names: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("report.json")]);
}

#[test]
fn the_json_has_the_documented_fields() {
    let report = small_run();
    let value = serde_json::to_value(&report).unwrap();
    for key in ["kernel", "cpu", "cores", "glibc"] {
        assert!(value["machine"].get(key).is_some(), "machine.{key} missing");
    }
    assert!(value["machine"]["cores"].as_u64().unwrap() >= 1);
    let results = value["results"].as_array().unwrap();
    for result in results {
        for key in [
            "method",
            "target",
            "memory_bytes",
            "threads",
            "median_us",
            "p99_us",
            "spawns_per_s",
            "ok",
            "samples_ns",
        ] {
            assert!(result.get(key).is_some(), "{key} missing in {result}");
        }
        if result["ok"].as_bool().unwrap() {
            assert!(result["median_us"].as_f64().unwrap() > 0.0);
            assert!(result.get("error").is_none());
            assert_eq!(
                result["samples_ns"].as_array().unwrap().len() as u64,
                result["iterations"].as_u64().unwrap()
            );
        } else {
            assert!(result["median_us"].is_null());
            assert!(!result["error"].as_str().unwrap().is_empty());
        }
    }
    // The missing target failed, the no-op did not (the floor never execs).
    assert!(results
        .iter()
        .any(|r| r["ok"] == false && r["target"] == "/nonexistent/progeny-bench"));
    for result in results.iter().filter(|r| r["target"] == "noop") {
        assert_eq!(
            result["ok"], true,
            "{} failed: {}",
            result["method"], result["error"]
        );
    }
}

#[test]
fn reading_rejects_other_files() {
    let scratch = Scratch::new("json-bad");
    let path = scratch.path().join("other.json");
    std::fs::write(&path, "{\"results\": []}").unwrap();
    assert!(SpawnReport::read_json(&path).is_err());
    let mut report = small_run();
    report.schema = "something-else/9".into();
    report.write_json(&path).unwrap();
    let error = SpawnReport::read_json(&path).unwrap_err();
    assert!(error.to_string().contains("schema"), "{error}");
    assert!(SpawnReport::read_json(&scratch.path().join("absent.json")).is_err());
}
