//! The text tables, from a report with known figures.

use progeny_bench::machine::Machine;
use progeny_bench::report::{
    CellKey, Clock, SpawnConfigRecord, SpawnReport, SpawnResult, TargetRecord, SPAWN_SCHEMA,
};
use progeny_bench::table::{memory_slope_us_per_gib, spawn_tables};

const GIB: u64 = 1 << 30;

fn cell(method: &str, memory_bytes: u64, clock: Clock) -> CellKey {
    CellKey {
        method: method.into(),
        target: "true".into(),
        memory_bytes,
        threads: 1,
        execs_target: true,
        clock,
    }
}

/// `count` samples of exactly `us` microseconds, taking `count * us` of wall time.
fn steady(key: CellKey, us: u64, count: usize) -> SpawnResult {
    SpawnResult::measured(key, vec![us * 1000; count], us * 1000 * count as u64)
}

fn report() -> SpawnReport {
    let results = vec![
        steady(cell("progeny", 0, Clock::Harness), 100, 50),
        steady(cell("fork", 0, Clock::Harness), 200, 50),
        steady(cell("progeny", GIB, Clock::Harness), 100, 50),
        steady(cell("fork", GIB, Clock::Harness), 10_200, 5),
        SpawnResult::failed(cell("vfork", 0, Clock::Harness), "boom".into(), vec![]),
        steady(cell("go-exec", 0, Clock::External), 300, 50),
    ];
    SpawnReport {
        schema: SPAWN_SCHEMA.into(),
        machine: Machine::current(),
        config: SpawnConfigRecord {
            methods: vec![
                "progeny".into(),
                "fork".into(),
                "vfork".into(),
                "go-exec".into(),
            ],
            targets: vec![TargetRecord {
                name: "true".into(),
                program: "/bin/true".into(),
                args: vec![],
                about: "/bin/true".into(),
            }],
            memory_bytes: vec![0, GIB],
            threads: vec![1],
            iterations: 50,
            min_iterations: 5,
            warmup: 0,
            budget_s: 1.0,
        },
        notes: vec![],
        results,
    }
}

#[test]
fn ratios_rates_failures_and_slopes() {
    let report = report();
    let text = spawn_tables(&report);
    let line = |start: &str| -> String {
        text.lines()
            .find(|l| l.split_whitespace().take(3).any(|w| w == start))
            .unwrap_or_else(|| panic!("no {start} row in\n{text}"))
            .to_owned()
    };
    // fork at 0 B: median 200 µs, 5,000 spawns/s, twice progeny's median.
    let fork = line("fork");
    assert!(fork.contains("200"), "{fork}");
    assert!(fork.contains("5,000"), "{fork}");
    assert!(fork.contains("2.00"), "{fork}");
    // The external peer is marked, and compared all the same.
    assert!(line("go-exec*").contains("3.00"), "{text}");
    // The failure is shown as such, with its reason below the table.
    assert!(line("vfork").contains("FAILED"), "{text}");
    assert!(
        text.contains("FAILED: vfork on true at 0 B with 1 thread(s): boom"),
        "{text}"
    );
    // fork grows by 10,000 µs per GiB (within the histogram's 0.1%),
    // progeny not at all; the table prints the slope.
    let fork_slope = memory_slope_us_per_gib(&report, "fork", "true", 1).unwrap();
    assert!((fork_slope - 10_000.0).abs() <= 10.2 + 0.1, "{fork_slope}");
    assert_eq!(
        memory_slope_us_per_gib(&report, "progeny", "true", 1),
        Some(0.0)
    );
    assert!(text.contains(&format!("{fork_slope:.1}")), "{text}");
    assert!(memory_slope_us_per_gib(&report, "go-exec", "true", 1).is_none());
}
