//! The `progeny-zygote` method, in a test binary of its own: its zygote must
//! be forked while the process is still single-threaded, and libtest runs
//! tests on threads. So this is a plain `main` that starts the zygote first
//! and then runs its checks in order.

mod common;

use common::{appending_target, config_for, run_checks, runs, Scratch};
use progeny_bench::harness::run_spawn_bench;
use progeny_bench::method::start_zygote;
use progeny_bench::{Method, Spawner, Target};

fn the_zygote_runs_the_target_each_time(scratch: &Scratch) {
    let file = scratch.path().join("spawner");
    let mut spawner = Spawner::new(Method::ProgenyZygote, &appending_target(&file)).unwrap();
    for _ in 0..3 {
        spawner.run_once().unwrap();
    }
    assert_eq!(runs(&file), 3);
}

fn the_harness_counts_zygote_spawns(scratch: &Scratch) {
    for threads in [1, 2] {
        let file = scratch.path().join(format!("harness-{threads}"));
        let config = config_for(Method::ProgenyZygote, &file, threads);
        let report = run_spawn_bench(&config, &mut ()).unwrap();
        let result = &report.results[0];
        assert!(result.ok, "{threads} thread(s): {:?}", result.error);
        assert_eq!(result.iterations, 6);
        assert_eq!(runs(&file), result.iterations + result.warmup);
    }
}

fn a_missing_target_fails_through_the_zygote() {
    let target = Target::new("missing", "/nonexistent/x", Vec::new());
    let mut spawner = Spawner::new(Method::ProgenyZygote, &target).unwrap();
    let failure = spawner
        .run_once()
        .expect_err("a missing target cannot succeed");
    assert!(failure.to_string().contains("/nonexistent/x"), "{failure}");
}

fn main() {
    // Before anything can start a thread.
    start_zygote().expect("starting the zygote in a single-threaded process");
    let scratch = Scratch::new("zygote");
    let checks: [(&str, &dyn Fn()); 3] = [
        ("the_zygote_runs_the_target_each_time", &|| {
            the_zygote_runs_the_target_each_time(&scratch)
        }),
        ("the_harness_counts_zygote_spawns", &|| {
            the_harness_counts_zygote_spawns(&scratch)
        }),
        (
            "a_missing_target_fails_through_the_zygote",
            &a_missing_target_fails_through_the_zygote,
        ),
    ];
    let failed = run_checks(&checks);
    // exit() skips destructors: remove the scratch directory first.
    drop(scratch);
    if failed > 0 {
        std::process::exit(1);
    }
}
