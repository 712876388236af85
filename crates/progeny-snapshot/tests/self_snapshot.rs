//! `snapshot_me`: a parked copy of this process, invisible to plain waits, gone on drop; and
//! the copy-on-write probe built on it.
#![allow(unsafe_code)]

mod common;

use progeny_snapshot::cow::{probe, CowOptions};
use progeny_snapshot::{read_memory, snapshot_me};

static mut MARKER: u64 = 0;

/// A self-snapshot forks this whole test process, which makes every page of it copy-on-write
/// for a moment, including another test's: the tests of this file take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
}

fn set_marker(value: u64) {
    // SAFETY: only this test touches MARKER, through volatile accesses.
    unsafe { std::ptr::addr_of_mut!(MARKER).write_volatile(value) }
}

#[test]
fn child_keeps_memory_of_the_moment_and_is_invisible_to_plain_wait() {
    let _turn = one_at_a_time();
    set_marker(0x1111);
    let snapshot = snapshot_me().unwrap();
    set_marker(0x2222);
    let child = snapshot.child();
    let addr = std::ptr::addr_of!(MARKER) as u64;
    let mut bytes = [0u8; 8];
    assert_eq!(read_memory(child, addr, &mut bytes).unwrap(), 8);
    assert_eq!(u64::from_ne_bytes(bytes), 0x1111);

    // A plain wait for this very pid does not see it (no exit signal); __WCLONE does.
    // SAFETY: siginfo_t is plain data.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let plain = unsafe {
        // SAFETY: `info` is a live local.
        libc::waitid(
            libc::P_PID,
            child as u32,
            &mut info,
            libc::WEXITED | libc::WNOHANG,
        )
    };
    assert_eq!(plain, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ECHILD)
    );
    let clone = unsafe {
        // SAFETY: `info` is a live local; WNOWAIT leaves the child alone.
        libc::waitid(
            libc::P_PID,
            child as u32,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WCLONE,
        )
    };
    assert_eq!(clone, 0);

    let status = std::fs::read_to_string(format!("/proc/{child}/status")).unwrap();
    assert!(status.contains(&format!("PPid:\t{}", std::process::id())));
    // It parks itself with every signal blocked but the two that cannot be (SIGKILL, SIGSTOP).
    let parked = (0..500).any(|_| {
        let status = std::fs::read_to_string(format!("/proc/{child}/status")).unwrap();
        let done = status.contains("SigBlk:\tfffffffffffbfeff");
        if !done {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        done
    });
    assert!(parked, "the child never blocked its signals");
    drop(snapshot);
    assert!(!std::path::Path::new(&format!("/proc/{child}")).exists());
}

#[test]
fn cow_probe_sees_copy_faults_only_with_a_snapshot() {
    let _turn = one_at_a_time();
    let report = probe(&CowOptions {
        pages: 4000,
        writes: 2000,
        ..CowOptions::default()
    })
    .unwrap();
    common::assert_copy_faults_only_with_a_snapshot(&report, 2000);
}

#[test]
fn cow_probe_refuses_more_writes_than_pages() {
    let err = probe(&CowOptions {
        pages: 10,
        writes: 11,
        ..CowOptions::default()
    })
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}
