//! Plots are drawn from a report into real PNG files.

mod common;

use std::time::Duration;

use common::Scratch;
use progeny_bench::harness::{run_spawn_bench, SpawnBenchConfig};
use progeny_bench::plot::spawn_plots;
use progeny_bench::{Method, TargetSpec};

#[test]
fn spawn_plots_writes_pngs() {
    let config = SpawnBenchConfig {
        methods: vec![Method::Progeny, Method::Fork],
        targets: vec![TargetSpec::Noop],
        memory_bytes: vec![0, 8 << 20],
        threads: vec![1],
        iterations: 10,
        min_iterations: 2,
        warmup: 1,
        budget: Duration::from_millis(30),
    };
    let report = run_spawn_bench(&config, &mut ()).unwrap();
    let scratch = Scratch::new("plots");
    let dir = scratch.path().join("nested/plots");
    let written = spawn_plots(&report, &dir).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["latency-vs-memory.png", "distribution-noop.png"]);
    for path in &written {
        let bytes = std::fs::read(path).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{} is not a PNG",
            path.display()
        );
        assert!(
            bytes.len() > 10_000,
            "{} is suspiciously small",
            path.display()
        );
    }
}
