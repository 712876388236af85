//! Container-grade setup, each option observed from inside the child: namespaces, id maps,
//! cgroups, limits, capabilities, terminals, the parent death signal and the shared I/O context.
#![allow(unsafe_code)]

mod support;

use progeny::{Backend, Command, IdMap, IoPriority, Namespaces, SpawnCall, Stdio};
use std::collections::BTreeMap;
use std::io::ErrorKind;
use support::INSPECT;

/// These tests count this process's children and collect orphans as a subreaper, so they run one
/// at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn namespaces_of(cmd: &mut Command) -> BTreeMap<String, String> {
    run(cmd.arg("ns"))
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn own_namespaces() -> BTreeMap<String, String> {
    ["cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts"]
        .iter()
        .map(|k| {
            let t = std::fs::read_link(format!("/proc/self/ns/{k}")).unwrap();
            (k.to_string(), t.display().to_string())
        })
        .collect()
}

fn field(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {text}"))
        .trim()
        .to_string()
}

#[test]
fn every_namespace_kind_is_new_in_the_child() {
    let _serial = serial();
    let parent = own_namespaces();
    let all = Namespaces::USER
        | Namespaces::MOUNT
        | Namespaces::PID
        | Namespaces::NET
        | Namespaces::UTS
        | Namespaces::IPC
        | Namespaces::CGROUP
        | Namespaces::TIME;
    let mut cmd = Command::new(INSPECT);
    cmd.unshare(all)
        .uid_map(&[IdMap::current_user_as_root()])
        .gid_map(&[IdMap::current_group_as_root()]);
    let child = namespaces_of(&mut cmd);
    for (kind, link) in &parent {
        assert_ne!(&child[kind], link, "{kind} namespace is the parent's");
    }
    // Still CLONE_VM: no copy of the caller's address space, even without CLONE_VFORK.
    let spawned = cmd.stdout(Stdio::null()).spawn().unwrap();
    let path = spawned.spawn_path();
    assert_eq!(path.call(), SpawnCall::Clone3);
    assert!(
        !path.vfork(),
        "maps need the parent between clone and exec: {path}"
    );
    assert!(path.to_string().contains("CLONE_VM"), "{path}");
    assert!(path.to_string().contains("CLONE_NEWTIME"), "{path}");
    let _ = spawned.wait_with_output();
}

#[test]
fn namespaces_without_a_user_namespace_as_root() {
    let _serial = serial();
    if !is_root() {
        eprintln!("skipped: new namespaces without a user namespace need CAP_SYS_ADMIN");
        return;
    }
    let parent = own_namespaces();
    let mut cmd = Command::new(INSPECT);
    cmd.unshare(Namespaces::NET | Namespaces::UTS | Namespaces::IPC | Namespaces::MOUNT);
    let child = namespaces_of(&mut cmd);
    for kind in ["net", "uts", "ipc", "mnt"] {
        assert_ne!(child[kind], parent[kind], "{kind}");
    }
    for kind in ["user", "pid", "cgroup", "time"] {
        assert_eq!(child[kind], parent[kind], "{kind}");
    }
    // No maps to write: the fast vfork path is kept.
    let mut child = cmd.stdout(Stdio::null()).spawn().unwrap();
    assert!(child.spawn_path().vfork(), "{}", child.spawn_path());
    child.wait().unwrap();
}

#[test]
fn the_child_is_pid_one_of_a_new_pid_namespace() {
    let _serial = serial();
    let mut cmd = Command::new(INSPECT);
    cmd.arg("ids").unshare(Namespaces::PID);
    if !is_root() {
        cmd.unshare(Namespaces::USER)
            .uid_map(&[IdMap::current_user_as_root()]);
    }
    assert_eq!(field(&run(&mut cmd), "pid:"), "1");
}

#[test]
fn root_inside_a_user_namespace() {
    let _serial = serial();
    let text = run(Command::new(INSPECT)
        .args(["status", "Uid", "Gid"])
        .unshare(Namespaces::USER)
        .uid_map(&[IdMap::current_user_as_root()])
        .gid_map(&[IdMap::current_group_as_root()]));
    assert_eq!(field(&text, "Uid:"), "0\t0\t0\t0");
    assert_eq!(field(&text, "Gid:"), "0\t0\t0\t0");
}

/// Under a dropped uid, an unprivileged process (our inspect program, spawned as nobody) uses
/// progeny to become root in a new user namespace.
#[test]
fn unprivileged_caller_gets_root_in_a_user_namespace() {
    let _serial = serial();
    if !is_root() {
        eprintln!("skipped: needs root to drop to an unprivileged uid for the test");
        return;
    }
    let out = Command::new(INSPECT)
        .args([
            "userns-root",
            "cat",
            "/proc/self/uid_map",
            "/proc/self/status",
        ])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let map: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(map, ["0", "65534", "1"]);
    assert_eq!(field(&text, "Uid:"), "0\t0\t0\t0");
}

/// An unprivileged caller asking for a network namespace without a user namespace is refused by
/// the kernel, and the error names the call.
#[test]
fn unprivileged_namespace_refusal_names_the_call() {
    let _serial = serial();
    if !is_root() {
        eprintln!("skipped: needs root to drop to an unprivileged uid for the test");
        return;
    }
    let out = Command::new(INSPECT)
        .arg("try-unshare-net")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "clone3: Operation not permitted (os error 1)\n"
    );
}

#[test]
fn hostname_in_a_new_uts_namespace() {
    let _serial = serial();
    let before = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let mut cmd = Command::new("cat");
    cmd.arg("/proc/sys/kernel/hostname")
        .unshare(Namespaces::UTS)
        .hostname("progeny-box");
    if !is_root() {
        cmd.unshare(Namespaces::USER)
            .uid_map(&[IdMap::current_user_as_root()]);
    }
    assert_eq!(run(&mut cmd), "progeny-box\n");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap(),
        before
    );
    // Without a new UTS namespace it would rename the host: refused.
    let err = Command::new("true").hostname("x").spawn().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

/// A fresh cgroup v2 directory below this process's own, removed on drop.
struct TempCgroup(std::path::PathBuf);

impl TempCgroup {
    fn new(tag: &str) -> Option<TempCgroup> {
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let own = cgroup
            .lines()
            .find_map(|l| l.strip_prefix("0::"))?
            .to_string();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = mountinfo.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(str::to_string))?
        })?;
        let dir = std::path::PathBuf::from(format!(
            "{mount}{}/progeny-{tag}-{}",
            own.trim_end_matches('/'),
            std::process::id()
        ));
        std::fs::create_dir(&dir).ok()?;
        Some(TempCgroup(dir))
    }

    fn relative(&self) -> String {
        let name = self.0.file_name().unwrap().to_str().unwrap();
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = cgroup.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
        format!("{}/{name}", own.trim_end_matches('/'))
    }
}

impl Drop for TempCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn the_child_starts_in_a_fresh_cgroup() {
    let _serial = serial();
    let Some(cgroup) = TempCgroup::new("into") else {
        eprintln!("skipped: no writable cgroup v2 hierarchy for this process (needs root)");
        return;
    };
    let expected = format!("0::{}\n", cgroup.relative());
    let dir = std::fs::File::open(&cgroup.0).unwrap();
    let mut cmd = Command::new("grep");
    cmd.args(["^0::", "/proc/self/cgroup"]).cgroup(dir);
    assert_eq!(run(&mut cmd), expected);
    let mut child = cmd.stdout(Stdio::null()).spawn().unwrap();
    assert!(child.spawn_path().to_string().contains("CLONE_INTO_CGROUP"));
    assert!(!child.spawn_path().cgroup_moved_by_child());
    child.wait().unwrap();

    // The legacy clone cannot start a child in a cgroup: refused, or moved by the child itself
    // with the fallback.
    let err = cmd.backend(Backend::Clone).spawn().unwrap_err();
    assert!(err.to_string().starts_with("clone3 into cgroup: "), "{err}");
    cmd.cgroup_fallback(true).stdout(Stdio::piped());
    assert_eq!(run(&mut cmd), expected);
    let mut child = cmd.spawn().unwrap();
    assert!(
        child.spawn_path().cgroup_moved_by_child(),
        "{}",
        child.spawn_path()
    );
    child.wait().unwrap();
    // The fork backend takes the fallback path too.
    assert_eq!(run(cmd.backend(Backend::Fork)), expected);
}

#[test]
fn a_directory_that_is_no_cgroup_is_refused_by_name() {
    let _serial = serial();
    let before = support::children();
    let dir = std::fs::File::open("/tmp").unwrap();
    let err = Command::new("true").cgroup(dir).spawn().unwrap_err();
    assert!(err.to_string().starts_with("clone3 into cgroup: "), "{err}");
    assert_eq!(support::children(), before);
}

#[test]
fn resource_limits_nice_and_affinity() {
    let _serial = serial();
    let out = run(Command::new("cat")
        .arg("/proc/self/limits")
        .rlimit(libc::RLIMIT_NOFILE, 100, 200)
        .rlimit(libc::RLIMIT_CORE, 0, 0));
    let line = out
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>()[3..5],
        ["100", "200"]
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("Max core file size"))
        .unwrap();
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>()[4..6],
        ["0", "0"]
    );

    let ids = run(Command::new(INSPECT).arg("ids").nice(7));
    assert_eq!(field(&ids, "nice:"), "7");

    let status = run(Command::new(INSPECT)
        .args(["status", "Cpus_allowed_list"])
        .cpu_affinity(&[0]));
    assert_eq!(field(&status, "Cpus_allowed_list:"), "0");
}

#[test]
fn io_priority_is_set_in_the_child() {
    let _serial = serial();
    let prio = run(Command::new(INSPECT).arg("ioprio").ioprio(IoPriority::Idle));
    let raw: u16 = prio.trim().parse().unwrap();
    assert_eq!(IoPriority::from_raw(raw), Some(IoPriority::Idle));
    let err = Command::new("true")
        .ioprio(IoPriority::BestEffort(9))
        .spawn()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

#[test]
fn no_new_privs_and_capabilities() {
    let _serial = serial();
    let status = run(Command::new(INSPECT)
        .args(["status", "NoNewPrivs", "CapBnd", "CapAmb"])
        .no_new_privs(true)
        .clear_ambient_capabilities(true));
    assert_eq!(field(&status, "NoNewPrivs:"), "1");
    assert_eq!(
        u64::from_str_radix(&field(&status, "CapAmb:"), 16).unwrap(),
        0
    );
    if !is_root() {
        eprintln!("skipped: dropping bounding capabilities needs CAP_SETPCAP");
        return;
    }
    let cap_net_raw = 13;
    let status = run(Command::new(INSPECT)
        .args(["status", "CapBnd"])
        .drop_bounding_capabilities(&[cap_net_raw]));
    let bounding = u64::from_str_radix(&field(&status, "CapBnd:"), 16).unwrap();
    assert_eq!(bounding & (1 << cap_net_raw), 0);
    let own = std::fs::read_to_string("/proc/self/status").unwrap();
    let own_bounding = u64::from_str_radix(&field(&own, "CapBnd:"), 16).unwrap();
    assert_eq!(bounding, own_bounding & !(1 << cap_net_raw));
}

/// Opens a new pseudo-terminal pair: (controller, terminal).
fn open_pty() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    // SAFETY: posix_openpt/grantpt/unlockpt/ptsname_r on a descriptor we own, results checked.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(master >= 0);
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let path = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_str()
            .unwrap()
            .to_string();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(path)
            .unwrap();
        (std::fs::File::from_raw_fd(master), slave)
    }
}

use std::os::unix::fs::OpenOptionsExt;

#[test]
fn controlling_terminal_and_foreground_group() {
    let _serial = serial();
    let (_controller, terminal) = open_pty();
    let ids = run(Command::new(INSPECT)
        .arg("ids")
        .stdin(terminal)
        .setsid(true)
        .controlling_tty(0)
        .foreground(true));
    assert_ne!(
        field(&ids, "tty_nr:"),
        "0",
        "no controlling terminal:\n{ids}"
    );
    assert_eq!(
        field(&ids, "tpgid:"),
        field(&ids, "pgrp:"),
        "not in the foreground:\n{ids}"
    );
    assert_eq!(field(&ids, "session:"), field(&ids, "pid:"));

    let err = Command::new("true").controlling_tty(0).spawn().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

/// Makes this process the reaper of orphaned descendants, so the test can collect grandchildren.
fn become_subreaper() {
    // SAFETY: prctl with integer arguments.
    let ret = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(ret, 0);
}

/// Waits for `pid` (a reparented orphan) and returns its raw wait status.
fn reap(pid: i32) -> i32 {
    let mut status = 0;
    // SAFETY: waitpid writes only `status`.
    let ret = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(ret, pid, "{}", std::io::Error::last_os_error());
    status
}

#[test]
fn parent_death_signal_kills_the_orphan() {
    let _serial = serial();
    become_subreaper();
    let out = Command::new(INSPECT)
        .arg("spawn-orphan")
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(out.status.success());
    let orphan: i32 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The spawner exited, so the sleep got SIGKILL and came to us, its subreaper.
    let status = reap(orphan);
    assert!(libc::WIFSIGNALED(status), "status {status:#x}");
    assert_eq!(libc::WTERMSIG(status), libc::SIGKILL);
}

/// The spawner is killed at arbitrary moments, including in the middle of a spawn, when its
/// child may not have armed the death signal yet. No child may survive it: each one is killed by
/// the signal or, finding its parent gone, exits before exec.
#[test]
fn no_orphan_survives_a_parent_killed_mid_spawn() {
    let _serial = serial();
    use std::io::BufRead;
    become_subreaper();
    for round in 0..10 {
        let mut spawner = Command::new(INSPECT)
            .arg("spawn-loop")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(spawner.stdout.take().unwrap()).lines();
        let mut pids = Vec::new();
        for _ in 0..(round * 3 + 1) {
            pids.push(lines.next().unwrap().unwrap().parse::<i32>().unwrap());
        }
        spawner.kill().unwrap();
        spawner.wait().unwrap();
        // Every grandchild reported so far, and any the spawner started afterwards, must end.
        for pid in pids {
            let status = reap(pid);
            let killed = libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL;
            let gave_up = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 127;
            assert!(
                killed || gave_up,
                "round {round}: pid {pid} status {status:#x}"
            );
        }
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes only `status`; WNOHANG never blocks.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
        }
    }
}

#[test]
fn kill_on_drop_kills_and_reaps() {
    let _serial = serial();
    let child = Command::new("sleep")
        .arg("60")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(support::children().contains(&pid));
    drop(child);
    assert!(
        !support::children().contains(&pid),
        "the child outlived its handle"
    );
}

/// CLONE_IO shares the I/O context: the child's `ioprio_set` changes the parent thread's own
/// priority. Each case runs in a fresh thread, which has no I/O context of its own yet: without
/// progeny's preparation the kernel would ignore CLONE_IO there.
#[test]
fn share_io_context_really_shares() {
    let _serial = serial();
    let shared = std::thread::spawn(|| {
        let before = progeny_sys::ioprio_get_self().unwrap();
        let mut child = Command::new("true")
            .share_io_context(true)
            .ioprio(IoPriority::Idle)
            .spawn()
            .unwrap();
        child.wait().unwrap();
        assert!(child.spawn_path().to_string().contains("CLONE_IO"));
        (before, progeny_sys::ioprio_get_self().unwrap())
    })
    .join()
    .unwrap();
    assert_ne!(IoPriority::from_raw(shared.0), Some(IoPriority::Idle));
    assert_eq!(IoPriority::from_raw(shared.1), Some(IoPriority::Idle));

    let separate = std::thread::spawn(|| {
        let before = progeny_sys::ioprio_get_self().unwrap();
        Command::new("true")
            .ioprio(IoPriority::Idle)
            .status()
            .unwrap();
        (before, progeny_sys::ioprio_get_self().unwrap())
    })
    .join()
    .unwrap();
    assert_eq!(
        separate.0, separate.1,
        "without CLONE_IO the parent is untouched"
    );
}

#[test]
fn refusals_name_their_step_and_leave_no_process() {
    let _serial = serial();
    let _ = Command::new("true").status();
    let before = support::children();
    let check = |cmd: &mut Command, kind: Option<ErrorKind>, starts: &str| {
        let result = cmd.spawn().map(|mut c| c.wait());
        let err = result.expect_err(&format!("{cmd:?} should fail with {starts}"));
        if let Some(kind) = kind {
            assert_eq!(err.kind(), kind, "{err}");
        }
        assert!(
            err.to_string().starts_with(starts),
            "{err} (wanted {starts})"
        );
    };
    check(
        Command::new("true").rlimit(libc::RLIMIT_NOFILE, 200, 100),
        Some(ErrorKind::InvalidInput),
        "prlimit: Invalid argument",
    );
    check(
        Command::new("true").cpu_affinity(&[4000]),
        Some(ErrorKind::InvalidInput),
        "sched_setaffinity: Invalid argument",
    );
    check(
        Command::new("true").uid_map(&[IdMap::current_user_as_root()]),
        Some(ErrorKind::InvalidInput),
        "uid_map/gid_map need",
    );
    check(
        Command::new("true")
            .unshare(Namespaces::NET)
            .backend(Backend::Fork),
        Some(ErrorKind::Unsupported),
        "fork cannot",
    );
    check(
        Command::new("true").nice(1).backend(Backend::PosixSpawn),
        Some(ErrorKind::Unsupported),
        "posix_spawn cannot express nice",
    );
    check(
        Command::new("true").parent_death_signal(0),
        Some(ErrorKind::InvalidInput),
        "parent_death_signal: 0",
    );
    // A map the kernel refuses (two lines whose inside ranges overlap): the parent names the
    // map, and the child that was waiting for it is killed and reaped.
    check(
        Command::new("true").unshare(Namespaces::USER).uid_map(&[
            IdMap {
                inside: 0,
                outside: 0,
                count: 10,
            },
            IdMap {
                inside: 5,
                outside: 100,
                count: 10,
            },
        ]),
        None,
        "write uid_map \"/proc/",
    );
    assert_eq!(support::children(), before);
}

#[test]
fn probe_reports_the_features_this_process_can_use() {
    let _serial = serial();
    let probe = progeny::probe();
    let text = probe.to_string();
    for name in [
        "clone3",
        "CLONE_PIDFD",
        "CLONE_CLEAR_SIGHAND",
        "CLONE_INTO_CGROUP",
        "close_range",
        "pidfd_open",
        "pidfd_send_signal",
        "user namespaces",
        "no seccomp filter",
    ] {
        assert!(probe.get(name).is_some(), "{name} missing:\n{text}");
    }
    // What the probe says agrees with what a spawn does.
    let mut child = Command::new("true").spawn().unwrap();
    let path = child.spawn_path();
    child.wait().unwrap();
    assert_eq!(
        probe.has("clone3"),
        path.call() == SpawnCall::Clone3,
        "{path}\n{text}"
    );
    assert_eq!(
        probe.has("CLONE_CLEAR_SIGHAND"),
        path.to_string().contains("CLONE_CLEAR_SIGHAND"),
        "{path}\n{text}"
    );
}
