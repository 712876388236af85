//! A target blocked in a syscall completes it exactly after a snapshot: same result, same
//! timing, no spurious EINTR (the injection restores the registers and lets the kernel's own
//! restart logic run).
#![allow(unsafe_code)]

mod common;

use common::{field, Target};
use progeny_snapshot::{Snapshot, SnapshotOptions};
use std::time::Duration;

fn snapshot_while_blocked(target: &Target) {
    target.wait_blocked();
    let snapshot = Snapshot::take(target.pid(), &SnapshotOptions::default()).expect("snapshot");
    assert_eq!(snapshot.threads().len(), 1);
    drop(snapshot);
}

#[test]
fn read_on_a_pipe_returns_the_data_written_after_the_snapshot() {
    let mut target = Target::start(&["read"]);
    snapshot_while_blocked(&target);
    snapshot_while_blocked(&target);
    target.write(b"hello");
    let report = target.finish();
    assert_eq!(field(&report, "read"), "5", "{report}");
    assert_eq!(field(&report, "errno"), "0", "{report}");
}

#[test]
fn nanosleep_sleeps_its_full_time_and_returns_zero() {
    let target = Target::start(&["nanosleep", "2000"]);
    std::thread::sleep(Duration::from_millis(300));
    snapshot_while_blocked(&target);
    let report = target.finish();
    assert_eq!(field(&report, "ret"), "0", "{report}");
    assert_eq!(field(&report, "errno"), "0", "{report}");
    let elapsed: u64 = field(&report, "elapsed_ms").parse().unwrap();
    // The sleep resumes with its remaining time: not cut short, not restarted from zero.
    assert!((2000..3500).contains(&elapsed), "{report}");
}

#[test]
fn poll_with_timeout_times_out_once_at_the_right_time() {
    let target = Target::start(&["poll", "2000"]);
    std::thread::sleep(Duration::from_millis(300));
    snapshot_while_blocked(&target);
    // Keep stdin open until the poll is over, so only the timeout can end it.
    std::thread::sleep(Duration::from_millis(2300));
    let report = target.finish();
    assert_eq!(field(&report, "ret"), "0", "{report}");
    assert_eq!(field(&report, "errno"), "0", "{report}");
    let elapsed: u64 = field(&report, "elapsed_ms").parse().unwrap();
    assert!((2000..3500).contains(&elapsed), "{report}");
}

#[test]
fn poll_sees_data_written_after_the_snapshot() {
    let mut target = Target::start(&["poll", "10000"]);
    snapshot_while_blocked(&target);
    target.write(b"x");
    let report = target.finish();
    assert_eq!(field(&report, "ret"), "1", "{report}");
    // POLLIN, maybe with POLLHUP if the pipe was closed before poll looked again.
    let revents: i32 = field(&report, "revents").parse().unwrap();
    assert_eq!(
        revents & i32::from(libc::POLLIN),
        i32::from(libc::POLLIN),
        "{report}"
    );
}

#[test]
fn futex_wait_times_out_with_etimedout() {
    let target = Target::start(&["futex", "1500"]);
    std::thread::sleep(Duration::from_millis(200));
    snapshot_while_blocked(&target);
    let report = target.finish();
    assert_eq!(field(&report, "ret"), "-1", "{report}");
    assert_eq!(
        field(&report, "errno"),
        libc::ETIMEDOUT.to_string(),
        "{report}"
    );
    let elapsed: u64 = field(&report, "elapsed_ms").parse().unwrap();
    assert!((1500..3000).contains(&elapsed), "{report}");
}
