//! A target snapshotted again and again computes exactly what an untouched run computes, never
//! sees a SIGCHLD, and is left with no child: registers, floating-point state, signal masks and
//! interrupted syscalls all survive the injection.

mod common;

use common::{field, Target};
use progeny_snapshot::{Snapshot, SnapshotOptions};

fn snapshot_repeatedly(threads: &str, rounds: &str, snapshots: usize) {
    let reference = Target::start(&["checksum", threads, rounds]);
    let target = Target::start(&["checksum", threads, rounds]);
    let max_threads: usize = threads.parse().unwrap();
    let mut children = Vec::new();
    let mut computing = 0;
    for _ in 0..snapshots {
        let snapshot = Snapshot::take(target.pid(), &SnapshotOptions::default())
            .unwrap_or_else(|err| panic!("snapshot of {}: {err}", target.pid()));
        // The target's threads stay alive until it reads EOF, so every snapshot sees them all.
        assert_eq!(snapshot.threads().len(), max_threads);
        // A thread outside any syscall (orig_rax -1) was caught computing in user mode.
        computing += usize::from(
            snapshot
                .threads()
                .iter()
                .any(|t| t.regs.orig_rax as i64 == -1),
        );
        assert!(snapshot.pause() > std::time::Duration::ZERO);
        children.push(snapshot.child());
    }
    // How many snapshots caught the target mid-computation depends on the machine's speed:
    // reported, not asserted.
    eprintln!("{computing} of {snapshots} snapshots caught a thread computing in user mode");
    common::assert_not_stopped_or_traced(target.pid());
    assert!(
        common::children_of(target.pid()).is_empty(),
        "a snapshot child was left behind"
    );
    for child in children {
        assert!(!common::alive(child), "snapshot child {child} still alive");
    }

    let expected = reference.finish();
    let report = target.finish();
    assert_eq!(
        field(&report, "checksum"),
        field(&expected, "checksum"),
        "{report}"
    );
    assert_eq!(field(&report, "sigchld"), "0", "{report}");
    // wait(-1) saw nothing: no child at all (ECHILD), and the __WALL probe agrees.
    assert_eq!(
        field(&report, "plain_wait"),
        format!("-1/{}", libc::ECHILD),
        "{report}"
    );
    assert_eq!(field(&report, "children"), "none", "{report}");
}

#[test]
fn single_threaded_target_survives_200_snapshots_with_the_same_checksum() {
    snapshot_repeatedly("1", "6000", 200);
}

#[test]
fn sixty_four_threads_survive_200_snapshots_with_the_same_checksum() {
    snapshot_repeatedly("64", "600", 200);
}
