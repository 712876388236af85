//! Signal dispositions and masks in the child, and signalling / waiting through the pidfd.
#![allow(unsafe_code)]

mod support;

use progeny::{Backend, Command, Stdio};
use std::time::{Duration, Instant};

/// Reads a hex mask line (`SigIgn:` ...) from a /proc status text.
fn mask(status: &str, key: &str) -> u64 {
    let line = status.lines().find(|l| l.starts_with(key)).unwrap();
    u64::from_str_radix(line[key.len()..].trim(), 16).unwrap()
}

fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

extern "C" fn on_usr1(_: libc::c_int) {}

/// The parent catches SIGUSR1, ignores SIGUSR2 (and SIGPIPE, as every Rust program does), and
/// blocks SIGTERM in the spawning thread. The child must start with SIGUSR1 at its default, SIGUSR2
/// still ignored, SIGPIPE back at its default, and an empty mask. `cat` reads its own status: it
/// installs no handler of its own (unlike `grep`, which catches SIGSEGV).
#[test]
fn child_gets_default_dispositions_and_an_empty_mask() {
    // SAFETY: installing a handler that does nothing, and SIG_IGN; sigaction is given valid
    // structures.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_usr1 as *const () as usize;
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &act, std::ptr::null_mut()),
            0
        );
        assert_eq!(libc::signal(libc::SIGUSR2, libc::SIG_IGN), 0);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        assert_eq!(
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()),
            0
        );
    }
    let parent = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    assert_ne!(mask(&parent, "SigCgt:") & bit(libc::SIGUSR1), 0);
    assert_ne!(mask(&parent, "SigBlk:") & bit(libc::SIGTERM), 0);
    let parent_ignored = mask(&parent, "SigIgn:");
    assert_ne!(
        parent_ignored & bit(libc::SIGPIPE),
        0,
        "Rust ignores SIGPIPE"
    );

    for backend in [
        Backend::Clone3,
        Backend::Clone,
        Backend::Fork,
        Backend::PosixSpawn,
    ] {
        let out = Command::new("cat")
            .arg("/proc/self/status")
            .backend(backend)
            .output()
            .unwrap();
        assert!(out.status.success(), "{backend:?}");
        let child = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            mask(&child, "SigBlk:"),
            0,
            "{backend:?}: mask must be empty\n{child}"
        );
        assert_eq!(
            mask(&child, "SigCgt:"),
            0,
            "{backend:?}: no handler survives exec"
        );
        // glibc's posix_spawn has its own opinion on its two internal signals (32 and 33).
        let internal = if backend == Backend::PosixSpawn {
            bit(32) | bit(33)
        } else {
            0
        };
        assert_eq!(
            mask(&child, "SigIgn:") & !internal,
            parent_ignored & !bit(libc::SIGPIPE) & !internal,
            "{backend:?}: ignored stay ignored, except SIGPIPE\n{child}"
        );
    }

    // The parent's own state is untouched by the spawns. The mask is this thread's; handlers are
    // the whole process's, and another test in this binary may install one meanwhile (the signal
    // storm's SIGWINCH), so the check is that none of the parent's handlers was lost.
    let after = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    assert_eq!(mask(&after, "SigBlk:"), mask(&parent, "SigBlk:"));
    let caught = mask(&parent, "SigCgt:");
    assert_eq!(mask(&after, "SigCgt:") & caught, caught);
    assert_eq!(mask(&after, "SigIgn:"), parent_ignored);
}

/// Set by the `SIGWINCH` handler when it runs in any process but the test's own.
static HANDLER_RAN_ELSEWHERE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);
static TEST_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_winch(_: libc::c_int) {
    // SAFETY: getpid is async-signal-safe and has no preconditions.
    if unsafe { libc::getpid() } != TEST_PID.load(std::sync::atomic::Ordering::Relaxed) {
        HANDLER_RAN_ELSEWHERE.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The plain clone3 spawn does not block signals around the clone, because `CLONE_CLEAR_SIGHAND` takes
/// the parent's handlers away from the child as the kernel creates it. A handler that ran in the
/// `CLONE_VM` child would write to the parent's memory: here the parent catches `SIGWINCH` and
/// another thread sends `SIGWINCH` without pause to a process group that every child joins
/// before it execs. The handler must never run in a child (it would set the flag in the shared
/// memory), and every child must run to its normal end.
#[test]
fn a_signal_storm_never_runs_a_parent_handler_in_the_child() {
    use std::sync::atomic::{AtomicBool, Ordering};
    // SAFETY: getpid has no preconditions.
    TEST_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    // SAFETY: installing a handler that only calls getpid and stores to an atomic.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_winch as *const () as usize;
        assert_eq!(
            libc::sigaction(libc::SIGWINCH, &act, std::ptr::null_mut()),
            0
        );
    }
    // The group's leader: a sleeper in a group of its own.
    let mut leader = Command::new("sleep")
        .arg("60")
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let group = leader.id() as i32;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let storm = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: kill with a negative pid signals that process group; no memory involved.
                unsafe { libc::kill(-group, libc::SIGWINCH) };
                sent += 1;
            }
            sent
        })
    };
    // Clone3 skips the blocking; Clone (no CLONE_CLEAR_SIGHAND) must block and reset by hand.
    for backend in [Backend::Clone3, Backend::Clone] {
        for _ in 0..200 {
            let status = Command::new("true")
                .process_group(group)
                .backend(backend)
                .status()
                .unwrap();
            assert!(status.success(), "{backend:?}: {status}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let sent = storm.join().unwrap();
    assert!(sent > 0);
    assert!(
        !HANDLER_RAN_ELSEWHERE.load(Ordering::Relaxed),
        "the parent's handler ran in a child"
    );
    leader.kill().unwrap();
    leader.wait().unwrap();
}

#[test]
fn signal_mask_sets_the_childs_initial_mask() {
    for backend in [Backend::Clone3, Backend::Fork, Backend::PosixSpawn] {
        let out = Command::new("cat")
            .arg("/proc/self/status")
            .signal_mask(&[libc::SIGINT, libc::SIGHUP])
            .backend(backend)
            .output()
            .unwrap();
        let child = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            mask(&child, "SigBlk:"),
            bit(libc::SIGINT) | bit(libc::SIGHUP),
            "{backend:?}"
        );
    }
    let err = Command::new("true").signal_mask(&[0]).spawn().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn signal_reaches_the_child_and_shows_in_its_status() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    child.signal(libc::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[test]
fn signal_after_reaping_is_a_clean_error_and_kill_is_ok() {
    let mut child = Command::new("true").spawn().unwrap();
    assert!(child.wait().unwrap().success());
    let err = child.signal(libc::SIGTERM).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
    // std's kill returns Ok once the child has exited and been reaped.
    child.kill().unwrap();
    // Waiting again returns the cached status.
    assert!(child.wait().unwrap().success());
}

#[test]
fn signal_with_a_bad_number_is_einval() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let err = child.signal(1000).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn wait_timeout_on_sleep() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    assert_eq!(
        child.wait_timeout(Duration::from_millis(100)).unwrap(),
        None
    );
    assert_eq!(child.try_wait().unwrap(), None);
    child.kill().unwrap();
    let status = child.wait_timeout(Duration::from_secs(30)).unwrap();
    assert!(status.is_some());

    let mut quick = Command::new("sleep").arg("0.2").spawn().unwrap();
    let start = Instant::now();
    let status = quick.wait_timeout(Duration::from_secs(60)).unwrap();
    assert!(status.unwrap().success());
    // It returned because the child exited, not because the minute ran out.
    assert!(start.elapsed() < Duration::from_secs(60));
}

#[test]
fn pidfd_becomes_readable_when_the_child_exits() {
    use std::os::fd::AsRawFd;
    let mut child = Command::new("true").stdout(Stdio::null()).spawn().unwrap();
    let fd = child.pidfd().unwrap().as_raw_fd();
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut pfd, 1, 30_000) };
    assert_eq!(ready, 1);
    assert!(child.wait().unwrap().success());
}
