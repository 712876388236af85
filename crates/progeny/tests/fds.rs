//! Descriptor mapping (overlaps and swaps included) and close-the-rest, seen from the child.
#![allow(unsafe_code)]

mod support;

use progeny::{Backend, Command, Stdio};

/// The backends that run progeny's own child plan.
const BACKENDS: [Backend; 3] = [Backend::Clone3, Backend::Clone, Backend::Fork];
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use support::INSPECT;

/// One test here counts this process's open descriptors, so the tests (which open files) take
/// turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn child_fds(cmd: &mut Command) -> Vec<(i32, String)> {
    let out = cmd.arg("fds").stdout(Stdio::piped()).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    support::parse_fds(&String::from_utf8(out.stdout).unwrap())
}

fn target(fds: &[(i32, String)], n: i32) -> Option<&str> {
    fds.iter().find(|(fd, _)| *fd == n).map(|(_, t)| t.as_str())
}

fn temp_file(dir: &support::TempDir, name: &str) -> (File, String) {
    let path = dir.0.join(name);
    let file = File::create(&path).unwrap();
    (file, path.to_str().unwrap().to_string())
}

#[test]
fn maps_a_descriptor_to_any_number() {
    let _serial = serial();
    let dir = support::TempDir::new("fdmap");
    let (file, path) = temp_file(&dir, "seven");
    let fds = child_fds(Command::new(INSPECT).fd(7, file));
    assert_eq!(target(&fds, 7), Some(path.as_str()));
    // Nothing else above 2: the plan's relocation copies are close-on-exec.
    assert_eq!(fds.iter().filter(|(n, _)| *n > 2).count(), 1, "{fds:?}");
}

#[test]
fn swaps_two_descriptors() {
    let _serial = serial();
    let dir = support::TempDir::new("swap");
    let (a, path_a) = temp_file(&dir, "a");
    let (b, path_b) = temp_file(&dir, "b");
    let (na, nb) = (a.as_raw_fd(), b.as_raw_fd());
    let mut cmd = Command::new(INSPECT);
    // a's number gets b and b's number gets a: each source is the other's destination.
    cmd.fd(nb, a).fd(na, b);
    for backend in BACKENDS {
        let fds = child_fds(cmd.backend(backend));
        assert_eq!(
            target(&fds, nb),
            Some(path_a.as_str()),
            "{backend:?} {fds:?}"
        );
        assert_eq!(
            target(&fds, na),
            Some(path_b.as_str()),
            "{backend:?} {fds:?}"
        );
        assert_eq!(
            fds.iter().filter(|(n, _)| *n > 2).count(),
            2,
            "{backend:?} {fds:?}"
        );
    }
}

#[test]
fn three_to_four_and_four_to_three() {
    let _serial = serial();
    let dir = support::TempDir::new("34");
    let (x, path_x) = temp_file(&dir, "x");
    let (y, path_y) = temp_file(&dir, "y");
    let fds = child_fds(Command::new(INSPECT).fd(3, x).fd(4, y));
    assert_eq!(target(&fds, 3), Some(path_x.as_str()));
    assert_eq!(target(&fds, 4), Some(path_y.as_str()));
}

#[test]
fn a_descriptor_mapped_to_its_own_number_survives_exec() {
    let _serial = serial();
    let dir = support::TempDir::new("same");
    let (file, path) = temp_file(&dir, "same");
    let n = file.as_raw_fd();
    let fds = child_fds(Command::new(INSPECT).fd(n, file));
    assert_eq!(target(&fds, n), Some(path.as_str()));
}

#[test]
fn mapping_onto_stdio_overrides_the_stream() {
    let _serial = serial();
    let dir = support::TempDir::new("over");
    let (file, path) = temp_file(&dir, "in");
    let fds = child_fds(Command::new(INSPECT).stdin(Stdio::null()).fd(0, file));
    assert_eq!(target(&fds, 0), Some(path.as_str()));
}

#[test]
fn a_mapped_pipe_carries_data() {
    let _serial = serial();
    let (mut reader, writer) = std::io::pipe().unwrap();
    let status = Command::new(INSPECT)
        .args(["write-fd", "9", "hello on nine"])
        .fd(9, writer)
        .status()
        .unwrap();
    assert!(status.success());
    let mut text = String::new();
    std::io::Read::read_to_string(&mut reader, &mut text).unwrap();
    assert_eq!(text, "hello on nine");
}

/// A descriptor without FD_CLOEXEC, as other libraries leave them.
fn leaky_fd() -> (OwnedFd, String) {
    let file = File::open("/proc/self/status").unwrap();
    // SAFETY: fcntl on a descriptor we own, clearing FD_CLOEXEC.
    let cleared = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFD, 0) };
    assert_eq!(cleared, 0);
    let n = file.as_raw_fd();
    let target = std::fs::read_link(format!("/proc/self/fd/{n}")).unwrap();
    (OwnedFd::from(file), target.to_str().unwrap().to_string())
}

#[test]
fn other_descriptors_are_closed_by_default() {
    let _serial = serial();
    let (leak, _) = leaky_fd();
    for backend in BACKENDS {
        let fds = child_fds(Command::new(INSPECT).backend(backend));
        assert_eq!(target(&fds, leak.as_raw_fd()), None, "{backend:?} {fds:?}");
        assert!(fds.iter().all(|(n, _)| *n <= 2), "{backend:?} {fds:?}");
    }
}

#[test]
fn close_other_fds_false_lets_them_through() {
    let _serial = serial();
    let (leak, path) = leaky_fd();
    let fds = child_fds(Command::new(INSPECT).close_other_fds(false));
    assert_eq!(
        target(&fds, leak.as_raw_fd()),
        Some(path.as_str()),
        "{fds:?}"
    );
}

#[test]
fn kept_descriptors_between_gaps_survive_close_the_rest() {
    let _serial = serial();
    let dir = support::TempDir::new("gaps");
    let (f5, p5) = temp_file(&dir, "five");
    let (f9, p9) = temp_file(&dir, "nine");
    let (leak, _) = leaky_fd();
    let mut cmd = Command::new(INSPECT);
    cmd.fd(5, f5).fd(9, f9);
    for backend in BACKENDS {
        let fds = child_fds(cmd.backend(backend));
        assert_eq!(target(&fds, 5), Some(p5.as_str()));
        assert_eq!(target(&fds, 9), Some(p9.as_str()));
        let above: Vec<i32> = fds.iter().map(|(n, _)| *n).filter(|n| *n > 2).collect();
        assert_eq!(above, [5, 9], "{backend:?} {fds:?}");
    }
    drop(leak);
}

#[test]
fn negative_child_descriptor_is_invalid_input() {
    let _serial = serial();
    let before = support::open_fds();
    let err = Command::new(INSPECT)
        .fd(-1, File::open("/dev/null").unwrap())
        .spawn()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("-1"), "{err}");
    assert_eq!(support::open_fds(), before);
}

#[test]
fn descriptor_beyond_the_limit_names_the_mapping() {
    let _serial = serial();
    let file = File::open("/dev/null").unwrap();
    let src = file.as_raw_fd();
    let err = Command::new(INSPECT).fd(1 << 30, file).spawn().unwrap_err();
    assert_eq!(
        progeny::SpawnError::errno_of(&err),
        Some(libc::EBADF),
        "{err}"
    );
    // The source is no other mapping's destination, so no relocation: the placement refuses.
    assert_eq!(
        err.to_string(),
        format!(
            "map descriptor {src} -> {}: Bad file descriptor (os error 9)",
            1 << 30
        )
    );
}
