//! The zygote, with real processes: waiting and reaping, stdio, descriptor mapping, error parity
//! with a direct spawn, hooks, concurrency, the death of the server and its restart, dying with
//! the caller, and the refusal to start in a multithreaded process.
//!
//! This test has its own `main` (`harness = false`): the zygote must be forked while the
//! process is single-threaded, and the libtest harness runs tests on threads.
#![allow(unsafe_code)]

mod support;

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;

use progeny::{Command, HookError, Stdio, Zygote};
use support::{children, open_fds, parse_fds, TempDir, INSPECT};

type Outcome = Result<(), String>;

/// A test case: it gets the main zygote and the one it may kill.
type Case = fn(&Zygote, &Zygote) -> Outcome;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// Writes the hook's data, `path\0content`, to that file: proof that the hook ran in the child.
fn write_file(data: &[u8]) -> io::Result<()> {
    let split = data
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no NUL in hook data"))?;
    let path = std::str::from_utf8(&data[..split]).map_err(io::Error::other)?;
    // Allocation, formatting and std's file API: what a hook may do that a vfork child may not.
    let text = format!(
        "{} from pid {}",
        String::from_utf8_lossy(&data[split + 1..]),
        std::process::id()
    );
    std::fs::write(path, text)
}

/// Does nothing: a request that names it takes the fork-style path.
fn nothing(_: &[u8]) -> io::Result<()> {
    Ok(())
}

/// Spawns through the path without hooks (`CLONE_VM`) or, with `forked`, through the fork-style
/// path that hooks take.
fn spawn_via(zygote: &Zygote, cmd: &Command, forked: bool) -> io::Result<progeny::Child> {
    if forked {
        zygote.spawn_with_hooks(cmd, &[("nothing", b"")])
    } else {
        zygote.spawn(cmd)
    }
}

/// Blocks until someone writes to the FIFO named by the data and closes it.
fn wait_fifo(data: &[u8]) -> io::Result<()> {
    let path = std::str::from_utf8(data).map_err(io::Error::other)?;
    std::fs::read(path).map(drop)
}

fn refuse(_: &[u8]) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::EACCES))
}

fn panics(_: &[u8]) -> io::Result<()> {
    panic!("this hook panics on purpose")
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("--orphan-probe") => orphan_probe(),
        Some("--template-probe") => template_probe(),
        _ => {}
    }
    let fds_at_start = open_fds();
    // First thing, while single-threaded.
    let zygote = Zygote::builder()
        .hook("write-file", write_file)
        .hook("nothing", nothing)
        .hook("wait-fifo", wait_fifo)
        .hook("refuse", refuse)
        .hook("panics", panics)
        .start()
        .expect("start the zygote");
    let victim = Zygote::builder()
        .hook("wait-fifo", wait_fifo)
        .start()
        .expect("start a second zygote");
    // A hang must fail the run rather than block CI forever: SIGALRM's default action ends the
    // process (no watchdog thread: the refusal test counts threads). The limit is far above any
    // honest duration and asserts nothing about speed.
    // SAFETY: alarm takes an integer.
    unsafe { libc::alarm(600) };

    let cases: &[(&str, Case)] = &[
        ("the zygote holds only its socket", holds_only_its_socket),
        ("wait and pidfd", wait_and_pidfd),
        ("stdio through pipes both ways", stdio_both_ways),
        (
            "inherited stdio is the caller's",
            inherited_stdio_is_the_callers,
        ),
        ("descriptor mapping", descriptor_mapping),
        ("exec error parity, no zombie", exec_error_parity),
        ("hooks run in the child", hooks),
        ("signals and directory come from the caller", caller_state),
        ("options it cannot carry are refused", refusals),
        ("process options are carried", process_options),
        ("a request larger than a datagram", large_request),
        ("4 threads x 200 spawns", concurrent_spawns),
        ("killed mid-run: error, no hang, restart", killed_mid_run),
        ("dies with its parent", dies_with_parent),
        (
            "template gone: restart refuses, nothing left",
            template_gone,
        ),
        ("refused with two threads", refused_with_two_threads),
    ];
    let mut passed = 0;
    let mut failed = 0;
    for (name, case) in cases {
        let fds_case = open_fds();
        let outcome = catch_unwind(AssertUnwindSafe(|| case(&zygote, &victim)))
            .unwrap_or_else(|_| Err("panicked".to_string()));
        // A restart replaces two descriptors by two others: compare counts per case, and the
        // exact set once the zygotes are gone.
        let outcome = outcome.and_then(|()| {
            let now = open_fds();
            ensure!(
                now.len() == fds_case.len(),
                "descriptors before {fds_case:?}, after {now:?}"
            );
            Ok(())
        });
        match outcome {
            Ok(()) => {
                passed += 1;
                println!("test {name} ... ok");
            }
            Err(why) => {
                failed += 1;
                println!("test {name} ... FAILED: {why}");
            }
        }
    }
    drop(zygote);
    drop(victim);
    let now = open_fds();
    if now == fds_at_start {
        passed += 1;
        println!("test no descriptor left after drop ... ok");
    } else {
        failed += 1;
        println!("test no descriptor left after drop ... FAILED: {fds_at_start:?} -> {now:?}");
    }
    let zombies = zombies();
    if zombies.is_empty() {
        passed += 1;
        println!("test no zombie left after drop ... ok");
    } else {
        failed += 1;
        println!("test no zombie left after drop ... FAILED: {zombies:?}");
    }
    println!("zygote: {passed} passed, {failed} failed");
    std::process::exit(if failed == 0 { 0 } else { 1 });
}

/// Children of ours that have exited and were not reaped.
fn zombies() -> Vec<u32> {
    children()
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.starts_with(" Z")))
                .unwrap_or(false)
        })
        .collect()
}

fn inspect(args: &[&str]) -> Command {
    let mut cmd = Command::new(INSPECT);
    cmd.args(args);
    cmd
}

fn stdout_of(zygote: &Zygote, cmd: &mut Command) -> Result<String, String> {
    stdout_via(zygote, cmd, false)
}

fn stdout_via(zygote: &Zygote, cmd: &mut Command, forked: bool) -> Result<String, String> {
    cmd.stdout(Stdio::piped());
    let out = spawn_via(zygote, cmd, forked)
        .map_err(|e| format!("spawn {cmd:?}: {e}"))?
        .wait_with_output()
        .map_err(|e| format!("wait {cmd:?}: {e}"))?;
    ensure!(out.status.success(), "{cmd:?} exited with {}", out.status);
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn holds_only_its_socket(zygote: &Zygote, victim: &Zygote) -> Outcome {
    let ours = children();
    // Two processes per zygote: template and server, all children of ours.
    ensure!(
        ours.len() == 4,
        "expected 4 zygote processes, found {ours:?}"
    );
    ensure!(
        ours.contains(&zygote.pid()) && ours.contains(&victim.pid()),
        "servers not ours"
    );
    for pid in ours {
        // The template sends a new server's socket and pidfd, then closes its copies: wait for
        // it to be back at rest (a bound for a failure only; a pass does not wait).
        let mut state = holdings(pid);
        for _ in 0..1000 {
            if state.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            state = holdings(pid);
        }
        state?;
    }
    Ok(())
}

/// One zygote process at rest: one thread, one socket (and /dev/null for a server's standard
/// streams), no signal handler.
fn holdings(pid: u32) -> Outcome {
    let fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let target = std::fs::read_link(e.path()).unwrap_or_default();
            format!("{n} {}", target.display())
        })
        .collect();
    let sockets = fds.iter().filter(|f| f.contains("socket:")).count();
    let others: Vec<&String> = fds
        .iter()
        .filter(|f| !f.contains("socket:") && !f.ends_with("/dev/null"))
        .collect();
    ensure!(sockets == 1 && others.is_empty(), "pid {pid} holds {fds:?}");
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|e| e.to_string())?
        .count();
    ensure!(threads == 1, "pid {pid} has {threads} threads");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let caught = status.lines().find(|l| l.starts_with("SigCgt:"));
    ensure!(
        caught == Some("SigCgt:\t0000000000000000"),
        "pid {pid} catches signals: {caught:?}"
    );
    Ok(())
}

fn wait_and_pidfd(zygote: &Zygote, _: &Zygote) -> Outcome {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "exit 7"]);
    let mut child = zygote.spawn(&cmd).map_err(|e| e.to_string())?;
    ensure!(
        children().contains(&child.id()),
        "the zygote's child {} is not a child of the caller",
        child.id()
    );
    let path = child.spawn_path().to_string();
    ensure!(
        path == "clone(CLONE_VM|CLONE_PARENT|CLONE_PIDFD)",
        "spawn path {path}"
    );
    let status = child.wait().map_err(|e| e.to_string())?;
    ensure!(status.code() == Some(7), "status {status}");
    ensure!(!children().contains(&child.id()), "not reaped by wait");

    // Through the pidfd: it becomes readable when the child exits; then reap without blocking.
    // The fork-style path this time.
    let mut child =
        spawn_via(zygote, Command::new("sleep").arg("0.2"), true).map_err(|e| e.to_string())?;
    let path = child.spawn_path().to_string();
    ensure!(
        path == "clone(CLONE_PARENT|CLONE_PIDFD)",
        "spawn path {path}"
    );
    let mut pfd = libc::pollfd {
        fd: child.pidfd().map_err(|e| e.to_string())?.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut pfd, 1, 60_000) };
    ensure!(ready == 1, "pidfd never became readable");
    let status = child.try_wait().map_err(|e| e.to_string())?;
    ensure!(
        status.is_some_and(|s| s.success()),
        "try_wait gave {status:?}"
    );

    // Signals go through the pidfd too.
    let mut child = zygote
        .spawn(Command::new("sleep").arg("60"))
        .map_err(|e| e.to_string())?;
    child.signal(libc::SIGTERM).map_err(|e| e.to_string())?;
    let status = child.wait().map_err(|e| e.to_string())?;
    ensure!(status.signal() == Some(libc::SIGTERM), "status {status}");

    // The parent the child sees is the caller.
    let text = stdout_of(zygote, Command::new("sh").args(["-c", "echo $PPID"]))?;
    ensure!(
        text.trim() == std::process::id().to_string(),
        "child's parent is {text}"
    );
    Ok(())
}

fn stdio_both_ways(zygote: &Zygote, _: &Zygote) -> Outcome {
    let mut cmd = Command::new("cat");
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = zygote.spawn(&cmd).map_err(|e| e.to_string())?;
    let input: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let out = child.communicate(&input).map_err(|e| e.to_string())?;
    ensure!(out.status.success(), "cat: {}", out.status);
    ensure!(
        out.stdout == input,
        "cat gave back {} bytes",
        out.stdout.len()
    );

    let out = zygote
        .output(Command::new("sh").args(["-c", "echo out; echo err >&2"]))
        .map_err(|e| e.to_string())?;
    ensure!(out.stdout == b"out\n", "stdout {:?}", out.stdout);
    ensure!(out.stderr == b"err\n", "stderr {:?}", out.stderr);

    // output() reads stdin from /dev/null, as std does.
    let fds = parse_fds(&stdout_of(
        zygote,
        inspect(&["fds"]).stdin(Stdio::null()).stderr(Stdio::null()),
    )?);
    ensure!(
        fds.iter().any(|(n, t)| *n == 0 && t == "/dev/null"),
        "fds {fds:?}"
    );
    Ok(())
}

fn inherited_stdio_is_the_callers(zygote: &Zygote, _: &Zygote) -> Outcome {
    // Point our own stdout at a pipe after the zygote started: a child that inherits stdout must
    // write into that pipe, not where stdout was when the zygote was forked.
    let (mut reader, writer) = std::io::pipe().map_err(|e| e.to_string())?;
    io::stdout().flush().map_err(|e| e.to_string())?;
    // SAFETY: dup and dup2 on descriptors we hold; stdout is restored below.
    let saved = unsafe { libc::dup(1) };
    ensure!(saved >= 0, "dup");
    // SAFETY: as above.
    unsafe { libc::dup2(writer.as_raw_fd(), 1) };
    drop(writer);
    let status = zygote
        .spawn(Command::new("echo").arg("through the caller's stdout"))
        .and_then(|mut c| c.wait());
    // SAFETY: restores stdout from the saved copy, then closes the copy.
    unsafe {
        libc::dup2(saved, 1);
        libc::close(saved);
    }
    let status = status.map_err(|e| e.to_string())?;
    ensure!(status.success(), "echo: {status}");
    let mut text = String::new();
    reader
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    ensure!(text == "through the caller's stdout\n", "pipe got {text:?}");

    // A stream the caller has closed is closed in the child too, as after a direct spawn (and
    // the pipe the spawn makes on the free number 0 must not become the child's stdin).
    // SAFETY: stdin is saved, closed for the two spawns, and restored.
    let saved = unsafe { libc::dup(0) };
    ensure!(saved >= 0, "dup");
    // SAFETY: as above.
    unsafe { libc::close(0) };
    // The shell, not progeny-inspect: Rust's runtime reopens a closed stdin on /dev/null.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "[ -e /proc/self/fd/0 ] && echo open || echo closed"])
        .stdin(Stdio::inherit())
        .stderr(Stdio::null());
    let direct = cmd
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|c| c.wait_with_output());
    let via = stdout_of(zygote, &mut cmd);
    // SAFETY: restores stdin.
    unsafe {
        libc::dup2(saved, 0);
        libc::close(saved);
    }
    let direct = direct.map_err(|e| e.to_string())?;
    let direct = String::from_utf8_lossy(&direct.stdout);
    let via = via?;
    ensure!(direct == "closed\n", "direct child's stdin is {direct}");
    ensure!(via == direct, "zygote child's stdin is {via}");
    Ok(())
}

fn descriptor_mapping(zygote: &Zygote, _: &Zygote) -> Outcome {
    let dir = TempDir::new("zygote-fds");
    let open = |name: &str| -> Result<std::fs::File, String> {
        std::fs::File::create(dir.0.join(name)).map_err(|e| e.to_string())
    };
    // Low destinations collide with the numbers the server receives descriptors on (it holds
    // 0-2 and its socket), so swaps and relocations happen there for real.
    let mut cmd = inspect(&["fds"]);
    cmd.fd(3, open("three")?)
        .fd(4, open("four")?)
        .fd(5, open("five")?)
        .fd(9, open("nine")?)
        .stdin(Stdio::null())
        .stderr(Stdio::from(open("err")?));
    let fds = parse_fds(&stdout_of(zygote, &mut cmd)?);
    let want = |n: i32, name: &str| {
        fds.iter()
            .any(|(m, t)| *m == n && t.ends_with(&format!("/{name}")))
    };
    ensure!(
        want(3, "three") && want(4, "four") && want(5, "five") && want(9, "nine"),
        "fds {fds:?}"
    );
    ensure!(want(2, "err"), "stderr not the file: {fds:?}");
    let numbers: BTreeSet<i32> = fds.iter().map(|(n, _)| *n).collect();
    ensure!(
        numbers == BTreeSet::from([0, 1, 2, 3, 4, 5, 9]),
        "the child holds {fds:?}"
    );

    // Many destinations, given from the highest down: the zygote receives the sources on low
    // numbers that later mappings' destinations cover, so some must be moved out of the way
    // before placing (the swap case of a direct spawn, on the zygote's numbers).
    let mut cmd = inspect(&["fds"]);
    for k in 0..24 {
        cmd.fd(26 - k, open(&format!("f{k}"))?);
    }
    cmd.stdin(Stdio::null()).stderr(Stdio::null());
    for forked in [false, true] {
        let fds = parse_fds(&stdout_via(zygote, &mut cmd, forked)?);
        for k in 0..24 {
            let n = 26 - k;
            ensure!(
                fds.iter()
                    .any(|(m, t)| *m == n && t.ends_with(&format!("/f{k}"))),
                "descriptor {n} is not f{k} (forked: {forked}): {fds:?}"
            );
        }
        ensure!(
            fds.len() == 27,
            "the child holds {fds:?} (forked: {forked})"
        );
    }

    // A swap of the standard streams: the command's 1 is a file, 2 is a pipe; map them over each
    // other by number.
    let (mut reader, writer) = std::io::pipe().map_err(|e| e.to_string())?;
    let mut cmd = inspect(&["write-fd", "0", "via zero"]);
    cmd.fd(0, writer)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let status = zygote
        .spawn(&cmd)
        .and_then(|mut c| c.wait())
        .map_err(|e| e.to_string())?;
    drop(cmd);
    ensure!(status.success(), "write-fd: {status}");
    let mut text = String::new();
    reader
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    ensure!(text == "via zero", "pipe got {text:?}");
    Ok(())
}

fn exec_error_parity(zygote: &Zygote, _: &Zygote) -> Outcome {
    let dir = TempDir::new("zygote-errors");
    let plain = dir.0.join("plain");
    std::fs::write(&plain, "not a program").map_err(|e| e.to_string())?;
    let garbage = dir.0.join("garbage");
    std::fs::write(&garbage, [0x7f, b'E', b'L', b'F', 0, 1, 2]).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&garbage, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    let cases: Vec<Command> = vec![
        Command::new("/nonexistent/program"),
        Command::new("progeny-no-such-program"),
        Command::new(&plain),
        Command::new(&garbage),
        {
            let mut c = Command::new("true");
            c.current_dir("/nonexistent-directory");
            c
        },
        {
            let mut c = Command::new("true");
            c.env_clear().env("PATH", "/nonexistent");
            c
        },
        Command::new("nul\0byte"),
        {
            let mut c = Command::new("true");
            c.fd(
                -1,
                std::fs::File::open("/dev/null").map_err(|e| e.to_string())?,
            );
            c
        },
    ];
    let before = children();
    for mut cmd in cases {
        let direct = match cmd.spawn() {
            Ok(mut c) => {
                let _ = c.wait();
                return Err(format!("{cmd:?} started directly"));
            }
            Err(e) => e,
        };
        for forked in [false, true] {
            let via = match spawn_via(zygote, &cmd, forked) {
                Ok(mut c) => {
                    let _ = c.wait();
                    return Err(format!("{cmd:?} started through the zygote"));
                }
                Err(e) => e,
            };
            ensure!(
                direct.to_string() == via.to_string() && direct.kind() == via.kind(),
                "{cmd:?}: direct {:?} ({direct}) but zygote {:?} ({via}), forked: {forked}",
                direct.kind(),
                via.kind()
            );
            ensure!(
                progeny::SpawnError::errno_of(&direct) == progeny::SpawnError::errno_of(&via),
                "{cmd:?}: errno differs"
            );
        }
    }
    let after = children();
    ensure!(
        before == after,
        "children before {before:?}, after {after:?}"
    );
    Ok(())
}

fn hooks(zygote: &Zygote, _: &Zygote) -> Outcome {
    let dir = TempDir::new("zygote-hooks");
    let target = dir.0.join("written");
    let mut data = target.to_str().ok_or("path")?.as_bytes().to_vec();
    data.push(0);
    data.extend_from_slice(b"hello");
    let mut child = zygote
        .spawn_with_hooks(&Command::new("true"), &[("write-file", &data)])
        .map_err(|e| e.to_string())?;
    let pid = child.id();
    let status = child.wait().map_err(|e| e.to_string())?;
    ensure!(status.success(), "true: {status}");
    let text = std::fs::read_to_string(&target).map_err(|e| format!("hook output: {e}"))?;
    ensure!(
        text == format!("hello from pid {pid}"),
        "the hook wrote {text:?}"
    );

    let before = children();
    let err = zygote
        .spawn_with_hooks(&Command::new("true"), &[("refuse", b"")])
        .err()
        .ok_or("a failing hook did not fail the spawn")?;
    ensure!(
        err.kind() == io::ErrorKind::PermissionDenied,
        "kind {:?}",
        err.kind()
    );
    let hook = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<HookError>())
        .ok_or(format!("not a HookError: {err}"))?;
    ensure!(
        hook.name() == "refuse" && hook.errno() == Some(libc::EACCES),
        "hook error {hook:?}"
    );
    ensure!(
        err.to_string().starts_with("hook \"refuse\": "),
        "message {err}"
    );

    let err = zygote
        .spawn_with_hooks(&Command::new("true"), &[("panics", b"")])
        .err()
        .ok_or("a panicking hook did not fail the spawn")?;
    ensure!(
        err.to_string() == "hook \"panics\": the hook panicked",
        "message {err}"
    );

    let err = zygote
        .spawn_with_hooks(&Command::new("true"), &[("unknown", b"")])
        .err()
        .ok_or("an unknown hook was accepted")?;
    ensure!(
        err.kind() == io::ErrorKind::InvalidInput,
        "kind {:?}",
        err.kind()
    );
    ensure!(children() == before, "a failed hook left a child");
    Ok(())
}

extern "C" fn on_usr1(_: libc::c_int) {}

fn caller_state(zygote: &Zygote, _: &Zygote) -> Outcome {
    // Dispositions changed after the zygote started: an ignored signal stays ignored in the
    // child, a caught one is default there, as after a direct spawn.
    // SAFETY: installing SIG_IGN and a handler that does nothing; restored below.
    let (old2, old1) = unsafe {
        (
            libc::signal(libc::SIGUSR2, libc::SIG_IGN),
            libc::signal(libc::SIGUSR1, on_usr1 as *const () as libc::sighandler_t),
        )
    };
    let direct = inspect(&["signals"]).output();
    let via = stdout_of(zygote, &mut inspect(&["signals"]));
    // SAFETY: restores the previous dispositions.
    unsafe {
        libc::signal(libc::SIGUSR2, old2);
        libc::signal(libc::SIGUSR1, old1);
    }
    let direct = String::from_utf8_lossy(&direct.map_err(|e| e.to_string())?.stdout).into_owned();
    let via = via?;
    ensure!(direct == via, "direct:\n{direct}zygote:\n{via}");
    let ignored = via
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:\t"))
        .and_then(|m| u64::from_str_radix(m, 16).ok())
        .ok_or(format!("no SigIgn in {via}"))?;
    ensure!(
        ignored & (1 << (libc::SIGUSR2 - 1)) != 0,
        "SIGUSR2 not ignored: {via}"
    );

    // The working directory at the time of the spawn, and relative directories from it.
    let dir = TempDir::new("zygote-cwd");
    std::fs::create_dir(dir.0.join("sub")).map_err(|e| e.to_string())?;
    let home = std::env::current_dir().map_err(|e| e.to_string())?;
    std::env::set_current_dir(&dir.0).map_err(|e| e.to_string())?;
    let here = stdout_of(zygote, &mut inspect(&["cwd"]));
    let sub = stdout_of(zygote, inspect(&["cwd"]).current_dir("sub"));
    std::env::set_current_dir(&home).map_err(|e| e.to_string())?;
    let real = dir.0.canonicalize().map_err(|e| e.to_string())?;
    ensure!(here?.trim() == real.to_str().ok_or("path")?, "cwd differs");
    ensure!(
        sub?.trim() == real.join("sub").to_str().ok_or("path")?,
        "relative cwd differs"
    );
    Ok(())
}

fn refusals(zygote: &Zygote, _: &Zygote) -> Outcome {
    let mut cmd = Command::new("true");
    cmd.close_other_fds(false);
    let err = zygote
        .spawn(&cmd)
        .err()
        .ok_or("close_other_fds(false) accepted")?;
    ensure!(
        err.kind() == io::ErrorKind::Unsupported,
        "kind {:?}",
        err.kind()
    );
    ensure!(err.to_string().contains("close_other_fds"), "message {err}");
    // Namespaces are the clone's flags, which only a direct spawn sets.
    let mut cmd = Command::new("true");
    cmd.unshare(progeny::Namespaces::UTS);
    let err = zygote.spawn(&cmd).err().ok_or("a namespace was accepted")?;
    ensure!(
        err.kind() == io::ErrorKind::Unsupported,
        "kind {:?}",
        err.kind()
    );
    ensure!(err.to_string().contains("namespaces"), "message {err}");
    Ok(())
}

fn process_options(zygote: &Zygote, _: &Zygote) -> Outcome {
    // Limits, nice value and no_new_privs travel in the request; the child reports them.
    let script = "ulimit -n; ulimit -Hn; grep NoNewPrivs /proc/self/status; \
                  cut -d' ' -f19 /proc/self/stat";
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script])
        .rlimit(libc::RLIMIT_NOFILE, 100, 200)
        .nice(3)
        .no_new_privs(true);
    let direct = cmd
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| e.to_string())?;
    let direct = String::from_utf8_lossy(&direct.stdout).into_owned();
    let via = stdout_of(zygote, &mut cmd)?;
    ensure!(
        direct == "100\n200\nNoNewPrivs:\t1\n3\n",
        "direct child reports {direct:?}"
    );
    ensure!(via == direct, "zygote child reports {via:?}");

    // kill_on_drop is the caller's Child's business: dropping it kills and reaps the child.
    let mut cmd = Command::new("sleep");
    cmd.arg("60").kill_on_drop(true);
    let child = zygote.spawn(&cmd).map_err(|e| e.to_string())?;
    let pid = child.id();
    ensure!(children().contains(&pid), "sleep is not our child");
    drop(child);
    ensure!(!children().contains(&pid), "kill_on_drop left {pid} behind");
    Ok(())
}

fn large_request(zygote: &Zygote, _: &Zygote) -> Outcome {
    // Far beyond one datagram: the request goes out in chunks.
    // Four variables of 100 KB: each stays under the kernel's limit for one string.
    let big = "x".repeat(100_000);
    let args: Vec<String> = (0..2000).map(|i| format!("argument-{i}")).collect();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo ${#BIG} $#", "sh"])
        .args(&args)
        .env("BIG", &big)
        .env("BIG2", &big)
        .env("BIG3", &big)
        .env("BIG4", &big);
    let text = stdout_of(zygote, &mut cmd)?;
    ensure!(text == "100000 2000\n", "got {text:?}");
    Ok(())
}

fn concurrent_spawns(zygote: &Zygote, _: &Zygote) -> Outcome {
    let before = children();
    let fds_before = open_fds();
    let results: Vec<Outcome> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|t| {
                s.spawn(move || -> Outcome {
                    for i in 0..200 {
                        let tag = format!("{t}-{i}");
                        let text = stdout_of(zygote, Command::new("echo").arg(&tag))?;
                        ensure!(text.trim() == tag, "thread {t} spawn {i} got {text:?}");
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("worker panicked".into())))
            .collect()
    });
    for r in results {
        r?;
    }
    ensure!(children() == before, "children left: {:?}", children());
    ensure!(open_fds() == fds_before, "descriptors leaked");
    Ok(())
}

fn killed_mid_run(_: &Zygote, victim: &Zygote) -> Outcome {
    let old = victim.pid();
    let (tx, rx) = mpsc::channel();
    let outcome = std::thread::scope(|s| {
        let worker = s.spawn(move || -> Result<io::Error, String> {
            for i in 0.. {
                match victim
                    .spawn(&Command::new("true"))
                    .and_then(|mut c| c.wait())
                {
                    Ok(status) if status.success() => {}
                    Ok(status) => return Err(format!("true: {status}")),
                    Err(e) => return Ok(e),
                }
                if i == 20 {
                    let _ = tx.send(());
                }
            }
            Err("unreachable".into())
        });
        rx.recv().map_err(|e| e.to_string())?;
        // SAFETY: the server is our child and not reaped (the worker is still spawning), so the
        // pid is its own.
        unsafe { libc::kill(old as i32, libc::SIGKILL) };
        worker.join().map_err(|_| "worker panicked".to_string())?
    })?;
    ensure!(
        outcome.kind() == io::ErrorKind::BrokenPipe && outcome.to_string().contains("zygote"),
        "error {:?}: {outcome}",
        outcome.kind()
    );
    // Every later spawn fails the same way, at once.
    let again = victim
        .spawn(&Command::new("true"))
        .err()
        .ok_or("spawned on a dead zygote")?;
    ensure!(
        again.to_string() == outcome.to_string(),
        "second error {again}"
    );
    ensure!(!children().contains(&old), "the dead server was not reaped");
    ensure!(zombies().is_empty(), "zombies {:?}", zombies());

    victim.restart().map_err(|e| format!("restart: {e}"))?;
    ensure!(victim.pid() != old, "same pid after restart");
    let status = victim
        .spawn(&Command::new("true"))
        .and_then(|mut c| c.wait())
        .map_err(|e| format!("after restart: {e}"))?;
    ensure!(status.success(), "true after restart: {status}");

    // A hook still running in a child when the server dies must not hide the death: the next
    // spawn fails at once instead of waiting for the hook.
    let dir = TempDir::new("zygote-fifo");
    let fifo = dir.0.join("fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().ok_or("path")?).map_err(|e| e.to_string())?;
    // SAFETY: a NUL-terminated path.
    let made = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    ensure!(made == 0, "mkfifo: {}", io::Error::last_os_error());
    let before = children();
    let outcome = std::thread::scope(|s| -> Outcome {
        let blocked = s.spawn(|| {
            victim
                .spawn_with_hooks(
                    &Command::new("true"),
                    &[("wait-fifo", fifo.as_os_str().as_encoded_bytes())],
                )
                .and_then(|mut c| c.wait())
        });
        // The hook's child is ours once cloned: wait for it to appear (bounded for a failure).
        let mut appeared = false;
        for _ in 0..6000 {
            if blocked.is_finished() {
                break;
            }
            if children().len() > before.len() {
                appeared = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if blocked.is_finished() {
            let early = blocked.join().map_err(|_| "spawner panicked".to_string())?;
            return Err(format!("the hook's spawn ended early: {early:?}"));
        }
        let server = victim.pid();
        // SAFETY: the server is our child and not reaped, so the pid is its own.
        unsafe { libc::kill(server as i32, libc::SIGKILL) };
        let next = victim.spawn(&Command::new("true"));
        // Release the hook, so the blocked spawn finishes and its child exits.
        std::fs::write(&fifo, b"go").map_err(|e| e.to_string())?;
        let status = blocked.join().map_err(|_| "spawner panicked".to_string())?;
        ensure!(appeared, "the hook's child never appeared");
        let err = next.err().ok_or("spawned on a dead zygote")?;
        ensure!(err.kind() == io::ErrorKind::BrokenPipe, "error {err}");
        let status = status.map_err(|e| format!("the hook's spawn: {e}"))?;
        ensure!(status.success(), "true after the hook: {status}");
        Ok(())
    });
    outcome?;
    ensure!(zombies().is_empty(), "zombies {:?}", zombies());
    victim
        .restart()
        .map_err(|e| format!("restart after the hook: {e}"))?;

    // Restarting a healthy zygote replaces it too, and reaps the old one.
    let healthy = victim.pid();
    victim
        .restart()
        .map_err(|e| format!("second restart: {e}"))?;
    ensure!(
        !children().contains(&healthy),
        "the replaced server was not reaped"
    );
    ensure!(zombies().is_empty(), "zombies {:?}", zombies());
    Ok(())
}

/// Run as `--orphan-probe`: start a zygote, print our children (its processes), wait for stdin
/// to close, and exit without dropping it.
fn orphan_probe() -> ! {
    let zygote = Zygote::start().expect("start");
    let pids: Vec<String> = children().iter().map(u32::to_string).collect();
    println!("{}", pids.join(" "));
    io::stdout().flush().expect("flush");
    let _ = io::stdin().read_to_end(&mut Vec::new());
    std::mem::forget(zygote);
    std::process::exit(0);
}

/// Run as `--template-probe`, in a process of its own where the zygote's two processes are the
/// only children: kill both, check that restart names the template, and that neither is left
/// as a zombie. Prints `ok` or why not.
fn template_probe() -> ! {
    let outcome = (|| -> Outcome {
        let zygote = Zygote::start().map_err(|e| e.to_string())?;
        let server = zygote.pid();
        let ours = children();
        ensure!(
            ours.len() == 2 && ours.contains(&server),
            "children {ours:?}"
        );
        for pid in ours {
            // SAFETY: our own unreaped children.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        let err = zygote.spawn(&Command::new("true")).err().ok_or("spawned")?;
        ensure!(err.kind() == io::ErrorKind::BrokenPipe, "spawn error {err}");
        let err = zygote
            .restart()
            .err()
            .ok_or("restarted without a template")?;
        ensure!(err.to_string().contains("template"), "restart error {err}");
        let err = zygote.restart().err().ok_or("restarted twice")?;
        ensure!(
            err.to_string().contains("template"),
            "second restart error {err}"
        );
        ensure!(children().is_empty(), "left behind: {:?}", children());
        drop(zygote);
        Ok(())
    })();
    match outcome {
        Ok(()) => println!("ok"),
        Err(why) => println!("{why}"),
    }
    std::process::exit(0);
}

fn template_gone(_: &Zygote, _: &Zygote) -> Outcome {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .arg("--template-probe")
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && text == "ok\n",
        "probe: {}: {text}",
        out.status
    );
    Ok(())
}

fn dies_with_parent(_: &Zygote, _: &Zygote) -> Outcome {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut probe = Command::new(exe)
        .arg("--orphan-probe")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    let mut stdout = probe.stdout.take().ok_or("stdout")?;
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).map_err(|e| e.to_string())? == 1 && byte[0] != b'\n' {
        line.push(byte[0] as char);
    }
    let pids: Vec<u32> = line
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    ensure!(pids.len() == 2, "the probe's zygote processes: {line:?}");
    // The probe has not exited yet, so these pids are still its zygote's.
    let pidfds: Vec<OwnedFd> = pids
        .iter()
        .map(|&pid| {
            // SAFETY: pidfd_open takes integers and returns a fresh descriptor.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            if fd < 0 {
                Err(format!("pidfd_open {pid}: {}", io::Error::last_os_error()))
            } else {
                // SAFETY: a fresh descriptor that nothing else owns.
                Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
            }
        })
        .collect::<Result<_, _>>()?;
    drop(probe.stdin.take());
    let status = probe.wait().map_err(|e| e.to_string())?;
    ensure!(status.success(), "probe: {status}");
    for (pid, fd) in pids.iter().zip(&pidfds) {
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd. The limit only bounds a failure; a pass is immediate.
        let ready = unsafe { libc::poll(&mut pfd, 1, 60_000) };
        ensure!(ready == 1, "zygote process {pid} outlived its parent");
    }
    Ok(())
}

fn refused_with_two_threads(_: &Zygote, _: &Zygote) -> Outcome {
    let (tx, rx) = mpsc::channel::<()>();
    let other = std::thread::spawn(move || {
        let _ = rx.recv();
    });
    let result = Zygote::start();
    drop(tx);
    let _ = other.join();
    let err = match result {
        Ok(_) => return Err("started with two threads".into()),
        Err(e) => e,
    };
    ensure!(err.to_string().contains("runs 2 threads"), "message {err}");
    ensure!(err.to_string().contains("single-threaded"), "message {err}");
    Ok(())
}
