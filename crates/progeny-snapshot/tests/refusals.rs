//! Every refusal gives its own error and leaves the target running, untraced, with no child.
#![allow(unsafe_code)]

mod common;

use common::{alive, Target};
use progeny_snapshot::{Phase, Snapshot, SnapshotError, SnapshotOptions};
use std::process::Command;

fn take(pid: i32) -> Result<Snapshot, SnapshotError> {
    Snapshot::take(pid, &SnapshotOptions::default())
}

fn assert_left_running(target: &Target) {
    assert!(alive(target.pid()));
    common::assert_not_stopped_or_traced(target.pid());
    assert!(common::children_of(target.pid()).is_empty());
}

#[test]
fn missing_pid_is_no_such_process() {
    // Above the kernel's maximum pid, so it can never exist.
    let err = take(i32::MAX).map(drop).unwrap_err();
    assert!(matches!(err, SnapshotError::NoSuchProcess { .. }), "{err}");
    let err = take(0).map(drop).unwrap_err();
    assert!(matches!(err, SnapshotError::NoSuchProcess { .. }), "{err}");
    let err = take(-5).map(drop).unwrap_err();
    assert!(matches!(err, SnapshotError::NoSuchProcess { .. }), "{err}");
}

#[test]
fn this_process_and_a_thread_id_are_refused() {
    let err = take(std::process::id() as i32).map(drop).unwrap_err();
    assert!(matches!(err, SnapshotError::CallingProcess { .. }), "{err}");

    let target = Target::start(&["checksum", "4", "1000000"]);
    let pid = target.pid();
    let thread = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .find(|&tid| tid != pid)
        .expect("the target has threads");
    let err = take(thread).map(drop).unwrap_err();
    assert!(
        matches!(err, SnapshotError::NotAProcess { process, .. } if process == pid),
        "{err}"
    );
    assert_left_running(&target);
}

#[test]
fn another_users_process_is_permission_denied() {
    if !common::is_root() {
        eprintln!("skipped: needs root to drop to another uid in a thread");
        return;
    }
    let target = Target::start(&["counter"]);
    let pid = target.pid();
    // Credentials are per thread in the kernel: a raw setresuid (not libc's, which changes
    // every thread) makes only this thread an unprivileged user.
    let result = std::thread::spawn(move || {
        // SAFETY: raw syscalls changing only this thread's credentials; the thread ends here.
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_setresgid, 65534, 65534, 65534), 0);
            assert_eq!(libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534), 0);
        }
        take(pid).map(drop)
    })
    .join()
    .unwrap();
    let err = result.unwrap_err();
    assert!(
        matches!(err, SnapshotError::PermissionDenied { .. }),
        "{err}"
    );
    assert_left_running(&target);
    target.finish();
}

#[test]
fn kernel_thread_is_refused() {
    let kthread = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let flags: u64 = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(6)?
                .parse()
                .ok()?;
            (flags & 0x0020_0000 != 0).then_some(pid)
        });
    let Some(pid) = kthread else {
        eprintln!("skipped: no kernel thread is visible in this pid namespace");
        return;
    };
    let err = take(pid).map(drop).unwrap_err();
    assert!(matches!(err, SnapshotError::KernelThread { .. }), "{err}");
}

#[test]
fn zombie_is_refused() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id() as i32;
    // Let it exit without reaping it.
    for _ in 0..500 {
        if !alive(pid) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let err = take(pid).map(drop).unwrap_err();
    assert!(matches!(err, SnapshotError::Zombie { .. }), "{err}");
    child.wait().unwrap();
}

#[test]
fn target_killed_mid_snapshot_is_target_exited_and_nothing_is_left() {
    let target = Target::start(&["checksum", "8", "100000"]);
    let pid = target.pid();
    let options = SnapshotOptions {
        on_phase: Some(Box::new(|phase, pid| {
            if phase == Phase::Stop {
                // SAFETY: plain syscall on the test's own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        })),
        ..SnapshotOptions::default()
    };
    let err = Snapshot::take(pid, &options).map(drop).unwrap_err();
    assert!(matches!(err, SnapshotError::TargetExited { .. }), "{err}");
    // Our threads were released and every traced thread's exit collected: what remains is the
    // target's own zombie, for its parent (this test) to reap.
    let mut target = target;
    let status = target.child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
    assert!(tasks.is_err(), "threads of the target linger");
}

#[test]
fn seccomp_filter_that_kills_on_clone_is_refused_even_with_force() {
    let target = Target::start(&["seccomp-kill-clone"]);
    for force in [false, true] {
        let options = SnapshotOptions {
            force,
            ..SnapshotOptions::default()
        };
        let err = Snapshot::take(target.pid(), &options)
            .map(drop)
            .unwrap_err();
        assert!(matches!(err, SnapshotError::Seccomp { .. }), "{err}");
        if common::is_root() {
            // Root can read the filter, so the refusal names what it would do.
            assert!(err.to_string().contains("KILL_PROCESS"), "{err}");
        }
        assert_left_running(&target);
    }
    assert_eq!(target.finish().trim(), "alive");
}

#[test]
fn seccomp_filter_that_allows_clone_is_snapshotted() {
    if !common::is_root() {
        eprintln!("skipped: reading seccomp filters needs CAP_SYS_ADMIN");
        return;
    }
    let target = Target::start(&["seccomp-allow"]);
    let snapshot = take(target.pid()).expect("an allowing filter must not block the snapshot");
    assert!(alive(snapshot.child()));
    drop(snapshot);
    assert_left_running(&target);
    assert_eq!(target.finish().trim(), "alive");
}
