//! Shared helpers: start a target program, wait until it is in the state under test, collect
//! its report.
#![allow(dead_code, unsafe_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// A running `snapshot_target` in some mode, with pipes on stdin and stdout.
pub struct Target {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// The `ready ...` line.
    pub ready_line: String,
}

impl Target {
    /// Starts `snapshot_target ARGS...` and waits for its `ready` line.
    pub fn start(args: &[&str]) -> Target {
        let path = progeny_snapshot::targets::path().expect("write the target program");
        let mut attempts = 0;
        let mut child = loop {
            match Command::new(&path)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
            {
                Ok(child) => break child,
                // Another test thread may still hold an inherited descriptor of the freshly
                // written program for an instant (ETXTBSY): retry.
                Err(err) if err.raw_os_error() == Some(libc::ETXTBSY) && attempts < 100 => {
                    attempts += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(err) => panic!("spawn {}: {err}", path.display()),
            }
        };
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ready_line = String::new();
        stdout.read_line(&mut ready_line).unwrap();
        assert!(
            ready_line.starts_with("ready"),
            "target said {ready_line:?}"
        );
        Target {
            child,
            stdin,
            stdout,
            ready_line,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// A `key=value` field of the ready line.
    pub fn ready_field(&self, key: &str) -> String {
        field(&self.ready_line, key)
    }

    pub fn write(&mut self, bytes: &[u8]) {
        self.stdin.as_mut().unwrap().write_all(bytes).unwrap();
    }

    /// Closes stdin, reads everything the target prints and waits for it to exit.
    pub fn finish(mut self) -> String {
        drop(self.stdin.take());
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        let status = self.child.wait().unwrap();
        assert!(
            status.success(),
            "target failed: {status:?}, printed {rest:?}"
        );
        rest
    }

    /// Waits until the target's main thread sleeps in a syscall (state S, a syscall number in
    /// /proc/PID/syscall), so a test snapshots it while blocked, not before.
    pub fn wait_blocked(&self) {
        for _ in 0..500 {
            let syscall = std::fs::read_to_string(format!("/proc/{}/syscall", self.pid()))
                .unwrap_or_default();
            let stat =
                std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            if state == Some('S') && !syscall.starts_with("running") && !syscall.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("target {} never blocked", self.pid());
    }
}

impl Target {
    /// Waits until the target's main thread sleeps in syscall `nr` (e.g. 0 for read): the
    /// `ready` line is written before that, so the thread may still be on its way.
    pub fn wait_in_syscall(&self, nr: u32) {
        let prefix = format!("{nr} ");
        for _ in 0..2500 {
            let syscall = std::fs::read_to_string(format!("/proc/{}/syscall", self.pid()))
                .unwrap_or_default();
            if syscall.starts_with(&prefix) {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("target {} never entered syscall {nr}", self.pid());
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of `key=` in a line of `key=value` words.
pub fn field(line: &str, key: &str) -> String {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
        .to_string()
}

/// Whether process `pid` exists (and is not a zombie).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            !matches!(state, Some('Z') | Some('X'))
        })
        .unwrap_or(false)
}

/// The children of every thread of `pid` (from /proc/PID/task/*/children).
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut all = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            all.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    all
}

/// Every thread of `pid` is running or sleeping: none is left stopped or traced.
pub fn assert_not_stopped_or_traced(pid: i32) {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    for task in tasks.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let state = status
            .lines()
            .find(|l| l.starts_with("State:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("");
        let tracer = status
            .lines()
            .find(|l| l.starts_with("TracerPid:"))
            .unwrap_or("");
        assert!(
            state != "T" && state != "t",
            "{}: {state}",
            task.path().display()
        );
        assert_eq!(
            tracer.split_whitespace().nth(1),
            Some("0"),
            "{}",
            task.path().display()
        );
    }
}

/// Whether we run as root (tests that need it skip otherwise, saying why).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The copy-on-write probe's behaviour for `writes` writes, not its speed: both runs made every
/// write; without a child the pages are private and present, so writing them takes (almost) no
/// fault; with the snapshot child alive every first write is a copy-on-write fault.
pub fn assert_copy_faults_only_with_a_snapshot(
    report: &progeny_snapshot::cow::CowReport,
    writes: usize,
) {
    assert_eq!(report.baseline.latencies_ns.len(), writes);
    assert_eq!(report.with_snapshot.latencies_ns.len(), writes);
    assert!(
        report.baseline.minor_faults < 100,
        "{}",
        report.baseline.minor_faults
    );
    assert!(
        report.with_snapshot.minor_faults >= writes as u64,
        "{}",
        report.with_snapshot.minor_faults
    );
    assert_eq!(report.writes_while_child_lived, writes);
}
