//! The snapshot child's memory is the target's memory at the moment of the stop.
#![allow(unsafe_code)]

mod common;

use common::Target;
use progeny_snapshot::{read_memory, Phase, Snapshot, SnapshotOptions};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

fn read_u64(pid: i32, addr: u64) -> u64 {
    let mut bytes = [0u8; 8];
    assert_eq!(read_memory(pid, addr, &mut bytes).unwrap(), 8);
    u64::from_ne_bytes(bytes)
}

#[test]
fn child_holds_the_counter_value_of_the_moment_of_the_stop() {
    let target = Target::start(&["counter"]);
    let addr =
        u64::from_str_radix(target.ready_field("addr").trim_start_matches("0x"), 16).unwrap();
    let pid = target.pid();
    std::thread::sleep(Duration::from_millis(50));

    for _ in 0..5 {
        // Read the target's counter while it is stopped: that is the value the child must hold.
        let at_stop = Rc::new(Cell::new(None));
        let seen = at_stop.clone();
        let options = SnapshotOptions {
            on_phase: Some(Box::new(move |phase, pid| {
                if phase == Phase::Stop {
                    seen.set(Some(read_u64(pid, addr)));
                }
            })),
            ..SnapshotOptions::default()
        };
        let snapshot = Snapshot::take(pid, &options).expect("snapshot");
        let at_stop = at_stop.get().expect("the hook ran");
        assert!(at_stop > 0);

        let mut bytes = [0u8; 8];
        snapshot.read_memory(addr, &mut bytes).unwrap();
        assert_eq!(
            u64::from_ne_bytes(bytes),
            at_stop,
            "child differs from the stopped target"
        );

        // The target runs on and its counter moves; the child's copy does not.
        std::thread::sleep(Duration::from_millis(20));
        assert!(read_u64(pid, addr) > at_stop, "the target was not resumed");
        snapshot.read_memory(addr, &mut bytes).unwrap();
        assert_eq!(
            u64::from_ne_bytes(bytes),
            at_stop,
            "the child's copy changed"
        );
    }
    let report = target.finish();
    assert!(report.starts_with("counter="), "{report}");
}

#[test]
fn child_is_a_stopped_traced_child_of_the_target_and_disappears_on_drop() {
    let target = Target::start(&["counter"]);
    let snapshot = Snapshot::take(target.pid(), &SnapshotOptions::default()).unwrap();
    let child = snapshot.child();
    let status = std::fs::read_to_string(format!("/proc/{child}/status")).unwrap();
    let line = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_string()
    };
    assert_eq!(line("PPid:"), target.pid().to_string());
    assert_eq!(
        line("State:"),
        "t",
        "the child must be held in a ptrace stop"
    );
    // The tracer is the thread that took the snapshot.
    // SAFETY: gettid has no preconditions.
    assert_eq!(line("TracerPid:"), unsafe { libc::gettid() }.to_string());
    assert_eq!(line("Threads:"), "1");
    // The child runs the same program.
    assert_eq!(
        std::fs::read_link(format!("/proc/{child}/exe")).unwrap(),
        std::fs::read_link(format!("/proc/{}/exe", target.pid())).unwrap()
    );
    common::assert_not_stopped_or_traced(target.pid());
    // It holds none of the target's descriptors (the target's pipes see EOF as usual).
    let fds = std::fs::read_dir(format!("/proc/{child}/fd"))
        .unwrap()
        .count();
    assert_eq!(fds, 0, "the child holds descriptors");
    drop(snapshot);
    assert!(
        !std::path::Path::new(&format!("/proc/{child}")).exists(),
        "child left behind"
    );
    assert!(common::children_of(target.pid()).is_empty());
    target.finish();
}

#[test]
fn released_child_is_stopped_untraced_and_still_reaped_on_drop() {
    let target = Target::start(&["counter"]);
    let mut snapshot = Snapshot::take(target.pid(), &SnapshotOptions::default()).unwrap();
    let child = snapshot.child();
    snapshot.release_child_stopped().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{child}/status")).unwrap();
    assert!(status.contains("State:\tT (stopped)"), "{status}");
    assert!(status.contains("TracerPid:\t0"), "{status}");
    drop(snapshot);
    assert!(
        !std::path::Path::new(&format!("/proc/{child}")).exists(),
        "child left behind"
    );
    assert!(common::children_of(target.pid()).is_empty());
    common::assert_not_stopped_or_traced(target.pid());
    target.finish();
}
