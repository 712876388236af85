//! Every stdio mode, output capture, and `communicate` that cannot deadlock.
#![allow(unsafe_code)]

mod support;

use progeny::{Command, Stdio};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;
use support::INSPECT;

/// The descriptors the child sees, as (number, target).
fn child_fds(cmd: &mut Command) -> Vec<(i32, String)> {
    let out = cmd.arg("fds").stdout(Stdio::piped()).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    support::parse_fds(&String::from_utf8(out.stdout).unwrap())
}

fn target(fds: &[(i32, String)], n: i32) -> &str {
    &fds.iter().find(|(fd, _)| *fd == n).unwrap().1
}

#[test]
fn null_connects_to_dev_null() {
    let fds = child_fds(
        Command::new(INSPECT)
            .stdin(Stdio::null())
            .stderr(Stdio::null()),
    );
    assert_eq!(target(&fds, 0), "/dev/null");
    assert_eq!(target(&fds, 2), "/dev/null");
    assert!(target(&fds, 1).starts_with("pipe:"));
}

#[test]
fn inherit_keeps_the_parents_descriptor() {
    let file = std::fs::File::create(
        std::env::temp_dir().join(format!("progeny-inherit-{}", std::process::id())),
    )
    .unwrap();
    let path = std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&file)
    ))
    .unwrap();
    // The parent's stderr is whatever the test harness gave it; the child must see the same.
    let parent_stderr = std::fs::read_link("/proc/self/fd/2").unwrap();
    let fds = child_fds(
        Command::new(INSPECT)
            .stderr(Stdio::inherit())
            .stdin(file.try_clone().unwrap()),
    );
    assert_eq!(target(&fds, 2), parent_stderr.to_str().unwrap());
    assert_eq!(target(&fds, 0), path.to_str().unwrap());
    std::fs::remove_file(path).unwrap();
}

#[test]
fn piped_stdin_and_stdout() {
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"through the pipe")
        .unwrap();
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "through the pipe");
    assert!(child.wait().unwrap().success());
}

#[test]
fn output_captures_both_streams_and_nulls_stdin() {
    let out = Command::new("sh")
        .args(["-c", "echo out; echo err >&2; cat; echo after"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"out\nafter\n");
    assert_eq!(out.stderr, b"err\n");
}

#[test]
fn file_and_owned_fd_as_stdio() {
    let dir = support::TempDir::new("stdio");
    let path = dir.0.join("out.txt");
    let file = std::fs::File::create(&path).unwrap();
    let status = Command::new("echo")
        .arg("to a file")
        .stdout(file)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "to a file\n");

    let input = std::fs::File::open(&path).unwrap();
    let owned = std::os::fd::OwnedFd::from(input);
    let out = Command::new("cat").stdin(owned).output().unwrap();
    assert_eq!(out.stdout, b"to a file\n");
}

#[test]
fn one_childs_pipe_feeds_another() {
    let mut first = Command::new("echo")
        .arg("pipeline")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let second = Command::new("tr")
        .args(["a-z", "A-Z"])
        .stdin(first.stdout.take().unwrap())
        .output()
        .unwrap();
    assert_eq!(second.stdout, b"PIPELINE\n");
    assert!(first.wait().unwrap().success());
}

#[test]
fn std_pipes_work_as_stdio() {
    let (mut reader, writer) = std::io::pipe().unwrap();
    let status = Command::new("echo")
        .arg("via std pipe")
        .stdout(writer)
        .status()
        .unwrap();
    assert!(status.success());
    let mut text = String::new();
    reader.read_to_string(&mut text).unwrap();
    assert_eq!(text, "via std pipe\n");
}

/// 16 MiB each way through `cat`, which writes as it reads: a naive write-all-then-read would
/// fill both pipes and hang forever.
#[test]
fn communicate_sixteen_mib_each_way_through_cat() {
    let input: Vec<u8> = (0..16 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.communicate(&input).unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), input.len());
    assert!(out.stdout == input);
    assert!(out.stderr.is_empty());
}

/// A child that writes megabytes to stdout and stderr before it reads its input.
#[test]
fn communicate_with_a_child_that_writes_before_reading() {
    let script = "head -c 3000000 /dev/zero; head -c 2000000 /dev/zero >&2; wc -c";
    let mut child = Command::new("sh")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = vec![b'x'; 1_000_000];
    let out = child.communicate(&input).unwrap();
    assert!(out.status.success());
    assert_eq!(out.stderr.len(), 2_000_000);
    assert_eq!(&out.stdout[3_000_000..], b"1000000\n");
}

/// Only stdout is piped, and the child writes megabytes before it reads: stdout may be read to
/// its end with plain blocking reads only once all the input is in, or both sides would wait.
#[test]
fn communicate_with_only_stdout_piped_and_a_child_that_writes_first() {
    let mut child = Command::new("sh")
        .args(["-c", "head -c 3000000 /dev/zero; wc -c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.communicate(&vec![b'x'; 1_000_000]).unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), 3_000_000 + b"1000000\n".len());
    assert_eq!(&out.stdout[3_000_000..], b"1000000\n");
    assert!(out.stderr.is_empty());
}

/// Only stderr is piped: the input comes back on it whole.
#[test]
fn communicate_with_only_stderr_piped() {
    let input: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
    let mut child = Command::new("sh")
        .args(["-c", "cat >&2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.communicate(&input).unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(out.stderr == input);
}

/// The CPU time this thread has used, from `getrusage(RUSAGE_THREAD)`.
fn thread_cpu_time() -> Duration {
    // SAFETY: an all-zero rusage is a valid out-parameter that getrusage fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes only `usage`.
    let ret = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(ret, 0);
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// A stdout pipe that the caller made non-blocking is still read to its end, and waiting on it
/// sleeps in `poll` rather than spinning on "would block": the 300 ms the child sleeps cost this
/// thread far less CPU time than that.
#[test]
fn communicate_waits_on_a_non_blocking_stdout_without_spinning() {
    let mut child = Command::new("sh")
        .args(["-c", "sleep 0.3; echo late"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let fd = child.stdout.as_ref().unwrap().as_raw_fd();
    // SAFETY: fcntl on a descriptor the child handle owns, with integer arguments.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK), 0);
    }
    let before = thread_cpu_time();
    let out = child.communicate(&[]).unwrap();
    let used = thread_cpu_time() - before;
    assert!(out.status.success());
    assert_eq!(out.stdout, b"late\n");
    assert!(used < Duration::from_millis(100), "{used:?} of CPU time");
}

#[test]
fn communicate_survives_a_child_that_ignores_its_input() {
    let mut child = Command::new("true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.communicate(&vec![0u8; 4 * 1024 * 1024]).unwrap();
    assert!(out.status.success());
}

#[test]
fn communicate_refuses_input_without_a_pipe_and_keeps_the_child() {
    let mut child = Command::new("true").stdin(Stdio::null()).spawn().unwrap();
    let err = child.communicate(b"lost").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    // Nothing was lost: the child can still be waited for.
    assert!(child.wait().unwrap().success());
}
