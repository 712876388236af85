//! Each method really runs the target: counted by a target that appends to a
//! file, once through a bare `Spawner`, once through the whole harness (on
//! two threads, and for the external peers that are installed).

mod common;

use common::{appending_target, config_for, in_process_methods, runs, Scratch};
use progeny_bench::harness::run_spawn_bench;
use progeny_bench::peers::find_in_path;
use progeny_bench::{Method, Spawner};

#[test]
fn every_spawner_runs_the_target_each_time() {
    let scratch = Scratch::new("spawner");
    for method in in_process_methods() {
        let file = scratch.path().join(method.name());
        let mut spawner = Spawner::new(method, &appending_target(&file)).unwrap();
        for _ in 0..3 {
            spawner
                .run_once()
                .unwrap_or_else(|e| panic!("{method}: {e}"));
        }
        let expected = if method.execs_target() { 3 } else { 0 };
        assert_eq!(
            runs(&file),
            expected,
            "{method} ran the target {} times",
            runs(&file)
        );
    }
}

#[test]
fn spawners_send_stdout_to_dev_null() {
    // A target that fails unless its stdout is /dev/null: the housekeeping
    // is the same for every method.
    let scratch = Scratch::new("stdout");
    for method in in_process_methods()
        .into_iter()
        .filter(|m| m.execs_target())
    {
        let file = scratch.path().join(method.name());
        let target = progeny_bench::Target::new(
            "check-stdout",
            "/bin/sh",
            vec![
                "-c".into(),
                "[ \"$(readlink /proc/$$/fd/1)\" = /dev/null ] && printf x >> \"$0\"".into(),
                file.as_os_str().to_owned(),
            ],
        );
        let mut spawner = Spawner::new(method, &target).unwrap();
        spawner
            .run_once()
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        assert_eq!(runs(&file), 1, "{method}");
    }
}

#[test]
fn the_harness_counts_every_spawn_it_makes() {
    let scratch = Scratch::new("harness");
    for threads in [1, 2] {
        for method in in_process_methods()
            .into_iter()
            .filter(|m| m.execs_target())
        {
            let file = scratch.path().join(format!("{method}-{threads}"));
            let report = run_spawn_bench(&config_for(method, &file, threads), &mut ()).unwrap();
            assert_eq!(report.results.len(), 1);
            let result = &report.results[0];
            assert!(result.ok, "{method}: {:?}", result.error);
            assert_eq!(result.threads, threads);
            assert_eq!(result.iterations, result.samples_ns.len() as u64);
            assert_eq!(
                result.iterations, 6,
                "{method}: the quota is exact across threads"
            );
            assert_eq!(
                runs(&file),
                result.iterations + result.warmup,
                "{method} with {threads} thread(s): measured + warm-up = runs of the target"
            );
            assert!(result.median_us.unwrap() > 0.0);
            assert!(result.spawns_per_s.unwrap() > 0.0);
        }
    }
}

#[test]
fn external_peers_run_the_target_too() {
    let scratch = Scratch::new("peers");
    let mut checked = 0;
    for method in Method::ALL.into_iter().filter(|m| m.is_external()) {
        let runtime = if method == Method::GoExec {
            "go"
        } else {
            "python3"
        };
        if find_in_path(runtime).is_none() {
            eprintln!("skipping {method}: {runtime} is not installed");
            continue;
        }
        let file = scratch.path().join(method.name());
        let report = run_spawn_bench(&config_for(method, &file, 1), &mut ()).unwrap();
        let Some(result) = report.results.first() else {
            // Installed but unusable (say, `go build` failed): the report
            // says why in its notes.
            panic!("{method} was skipped: {:?}", report.notes);
        };
        assert!(result.ok, "{method}: {:?}", result.error);
        assert_eq!(runs(&file), result.iterations + result.warmup, "{method}");
        checked += 1;
    }
    eprintln!("{checked} external peer(s) checked");
}
