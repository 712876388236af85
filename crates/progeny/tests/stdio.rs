//! Every stdio mode, output capture, and `communicate` that cannot deadlock.

mod support;

use progeny::{Command, Stdio};
use std::io::{Read, Write};
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
