//! `progeny-inspect`: a small program the integration tests spawn to look at the child from the
//! inside (its descriptors, signals, environment, directory, ids, arguments) and print it.
//!
//! Usage: `progeny-inspect COMMAND [ARGS...]`; each command prints plain lines on stdout.
#![allow(unsafe_code)]

use std::io::{Read, Write};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut out = std::io::stdout().lock();
    match args.first().map(String::as_str) {
        // One line per open descriptor: "N TARGET", read from /proc/self/fd without keeping the
        // directory's own descriptor in the answer.
        Some("fds") => {
            let mut fds: Vec<(i32, String)> = Vec::new();
            let dir = std::fs::read_dir("/proc/self/fd").expect("read /proc/self/fd");
            for entry in dir.flatten() {
                let n: i32 = entry.file_name().to_string_lossy().parse().unwrap_or(-1);
                if let Ok(target) = std::fs::read_link(entry.path()) {
                    fds.push((n, target.to_string_lossy().into_owned()));
                }
            }
            fds.sort();
            for (n, target) in fds {
                // read_dir's own descriptor shows up as the directory itself and is gone by now.
                if target.ends_with("/fd") && target.starts_with("/proc/") {
                    continue;
                }
                writeln!(out, "{n} {target}").unwrap();
            }
        }
        // The signal lines of /proc/self/status: SigBlk, SigIgn, SigCgt as hex masks.
        Some("signals") => status_lines(&mut out, &["SigBlk:", "SigIgn:", "SigCgt:"]),
        Some("env") => {
            for (k, v) in std::env::vars_os() {
                writeln!(out, "{}={}", k.to_string_lossy(), v.to_string_lossy()).unwrap();
            }
        }
        Some("cwd") => writeln!(out, "{}", std::env::current_dir().unwrap().display()).unwrap(),
        // Every argument (argv[0] included) framed by brackets, one per line.
        Some("argv") => {
            for a in std::env::args_os() {
                writeln!(out, "[{}]", a.to_string_lossy()).unwrap();
            }
        }
        Some("ids") => {
            status_lines(&mut out, &["Uid:", "Gid:", "Groups:"]);
            let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            let fields: Vec<&str> = after.split(' ').collect();
            writeln!(out, "pgrp: {}", fields[2]).unwrap();
            writeln!(out, "tty_nr: {}", fields[4]).unwrap();
            writeln!(out, "tpgid: {}", fields[5]).unwrap();
            writeln!(out, "nice: {}", fields[16]).unwrap();
            writeln!(out, "session: {}", fields[3]).unwrap();
            writeln!(out, "pid: {}", std::process::id()).unwrap();
        }
        // Reads descriptor N (default 0) to EOF and writes what it read to stdout.
        Some("cat-fd") => {
            let fd: i32 = args.get(1).map_or(0, |a| a.parse().unwrap());
            let mut f = reopen(fd);
            let mut buf = Vec::new();
            f.read_to_end(&mut buf).unwrap();
            out.write_all(&buf).unwrap();
        }
        // Writes a line to descriptor N.
        Some("write-fd") => {
            let fd: i32 = args[1].parse().unwrap();
            let mut f = reopen(fd);
            f.write_all(args[2].as_bytes()).unwrap();
        }
        Some("exit") => std::process::exit(args[1].parse().unwrap()),
        // The namespace links of this process: "kind target".
        Some("ns") => {
            for kind in ["cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts"] {
                let target = std::fs::read_link(format!("/proc/self/ns/{kind}")).unwrap();
                writeln!(out, "{kind} {}", target.display()).unwrap();
            }
        }
        // Lines of /proc/self/status whose key is one of the arguments.
        Some("status") => {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            for line in status.lines() {
                if args[1..].iter().any(|k| line.starts_with(&format!("{k}:"))) {
                    writeln!(out, "{line}").unwrap();
                }
            }
        }
        Some("ioprio") => {
            writeln!(out, "{}", progeny_sys::ioprio_get_self().unwrap()).unwrap();
        }
        // Spawns, with progeny, `PROGRAM ARGS...` as root of a new user namespace (maps written
        // by the parent) and passes its output through: run under a dropped uid, it shows that
        // an unprivileged caller gets root inside.
        Some("userns-root") => {
            let output = progeny::Command::new(&args[1])
                .args(&args[2..])
                .unshare(progeny::Namespaces::USER)
                .uid_map(&[progeny::IdMap::current_user_as_root()])
                .gid_map(&[progeny::IdMap::current_group_as_root()])
                .output();
            match output {
                Ok(o) => {
                    out.write_all(&o.stdout).unwrap();
                    std::process::exit(o.status.code().unwrap_or(1));
                }
                Err(e) => {
                    eprintln!("{e}");
                    std::process::exit(3);
                }
            }
        }
        // Installs a seccomp filter that answers ENOSYS to clone3 (as container runtimes do),
        // then spawns `true` with progeny and prints the path it took and the probe's verdict.
        Some("no-clone3") => {
            deny_clone3_with_enosys();
            let mut child = progeny::Command::new("true").spawn().unwrap();
            assert!(child.wait().unwrap().success());
            writeln!(out, "{}", child.spawn_path()).unwrap();
            let probe = progeny::probe();
            writeln!(out, "clone3 available: {}", probe.has("clone3")).unwrap();
        }
        // Spawns `true` in a new network namespace and prints the error (run unprivileged).
        Some("try-unshare-net") => {
            match progeny::Command::new("true")
                .unshare(progeny::Namespaces::NET)
                .status()
            {
                Ok(status) => writeln!(out, "spawned: {status}").unwrap(),
                Err(e) => writeln!(out, "{e}").unwrap(),
            }
        }
        // Spawns `sleep 60` with a parent death signal of SIGKILL, prints its pid, and exits
        // at once without waiting: the sleep must die with us.
        Some("spawn-orphan") => {
            let child = progeny::Command::new("sleep")
                .arg("60")
                .parent_death_signal(9)
                .spawn()
                .unwrap();
            writeln!(out, "{}", child.id()).unwrap();
            out.flush().unwrap();
            std::process::exit(0);
        }
        // Spawns `sleep 60` with a parent death signal again and again, printing each pid,
        // until killed (at most 500): killed mid-spawn, no sleep may outlive us.
        Some("spawn-loop") => {
            let mut children = Vec::new();
            for _ in 0..500 {
                let child = progeny::Command::new("sleep")
                    .arg("60")
                    .parent_death_signal(9)
                    .spawn()
                    .unwrap();
                writeln!(out, "{}", child.id()).unwrap();
                out.flush().unwrap();
                children.push(child);
            }
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
        other => {
            eprintln!("progeny-inspect: unknown command {other:?}");
            std::process::exit(2);
        }
    }
}

/// Installs a seccomp filter under which `clone3` fails with `ENOSYS` and everything else runs.
fn deny_clone3_with_enosys() {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    let stmt = |code: u16, k: u32| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code: u16, k: u32, jt: u8, jf: u8| libc::sock_filter { code, jt, jf, k };
    let filter = [
        // seccomp_data.arch
        stmt((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 4),
        jump(
            (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            AUDIT_ARCH_X86_64,
            0,
            3,
        ),
        // seccomp_data.nr
        stmt((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 0),
        jump(
            (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            libc::SYS_clone3 as u32,
            0,
            1,
        ),
        stmt(
            (libc::BPF_RET | libc::BPF_K) as u16,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
        stmt(
            (libc::BPF_RET | libc::BPF_K) as u16,
            libc::SECCOMP_RET_ALLOW,
        ),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with integer arguments, then with a pointer to a filter program that
    // outlives the call (the kernel copies it).
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        let ret = libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        );
        assert_eq!(ret, 0, "{}", std::io::Error::last_os_error());
    }
}

/// Copies the lines of /proc/self/status that start with one of `keys` to `out`.
fn status_lines(out: &mut impl Write, keys: &[&str]) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    for line in status.lines() {
        if keys.iter().any(|key| line.starts_with(key)) {
            writeln!(out, "{line}").unwrap();
        }
    }
}

/// Opens the descriptor this process inherited as number `fd`, through /proc (no unsafe needed).
fn reopen(fd: i32) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/self/fd/{fd}"))
        .or_else(|_| std::fs::File::open(format!("/proc/self/fd/{fd}")))
        .or_else(|_| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(format!("/proc/self/fd/{fd}"))
        })
        .unwrap()
}
