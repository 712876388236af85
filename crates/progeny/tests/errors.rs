//! Exec and setup errors: the exact errno and step, std's ErrorKind, no zombie left behind, and
//! bad input refused before any process exists.

mod support;

use progeny::{Backend, Command, SpawnError, Step};
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;
use support::{children, open_fds, TempDir, INSPECT};

/// The tests here count this process's children, so they run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Spawns `cmd`, expects an error, and checks that it left no child and no descriptor behind.
fn spawn_error(cmd: &mut Command) -> std::io::Error {
    let before_children = children();
    let before_fds = open_fds();
    let err = cmd.spawn().map(|mut c| c.wait()).unwrap_err();
    assert_eq!(
        children(),
        before_children,
        "a failed spawn left a child behind"
    );
    assert_eq!(open_fds(), before_fds, "a failed spawn leaked a descriptor");
    err
}

fn script(dir: &TempDir, name: &str, body: &[u8], mode: u32) -> String {
    let path = dir.0.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.to_str().unwrap().to_string()
}

const BACKENDS: [Backend; 3] = [Backend::Clone3, Backend::Clone, Backend::Fork];

#[test]
fn missing_program() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for backend in BACKENDS {
        let err = spawn_error(Command::new("/nonexistent/progeny-prog").backend(backend));
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(
            err.to_string(),
            r#"exec "/nonexistent/progeny-prog": No such file or directory (os error 2)"#
        );
        assert_eq!(SpawnError::errno_of(&err), Some(libc::ENOENT));
        let inner = err.get_ref().unwrap().downcast_ref::<SpawnError>().unwrap();
        assert_eq!(inner.step(), Step::Exec);
    }
}

#[test]
fn missing_program_in_path_names_the_program() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let err = spawn_error(&mut Command::new("progeny-no-such-program"));
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(
        err.to_string(),
        r#"exec "progeny-no-such-program": No such file or directory (os error 2)"#
    );
}

#[test]
fn non_executable_file() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("noexec");
    let path = script(&dir, "plain", b"#!/bin/sh\ntrue\n", 0o644);
    for backend in BACKENDS {
        let err = spawn_error(Command::new(&path).backend(backend));
        assert_eq!(err.kind(), ErrorKind::PermissionDenied);
        assert_eq!(
            err.to_string(),
            format!("exec {path:?}: Permission denied (os error 13)")
        );
    }
}

#[test]
fn garbage_file_is_exec_format_error_without_a_shell_retry() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("garbage");
    let path = script(&dir, "garbage", b"\x01\x02\x03 not a program\n", 0o755);
    for backend in BACKENDS {
        let err = spawn_error(Command::new(&path).backend(backend));
        assert_eq!(SpawnError::errno_of(&err), Some(libc::ENOEXEC));
        assert_eq!(
            err.kind(),
            std::io::Error::from_raw_os_error(libc::ENOEXEC).kind()
        );
        assert_eq!(
            err.to_string(),
            format!("exec {path:?}: Exec format error (os error 8)")
        );
    }
}

#[test]
fn missing_working_directory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for backend in BACKENDS {
        let err = spawn_error(Command::new("true").current_dir("/nope").backend(backend));
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(
            err.to_string(),
            r#"chdir "/nope": No such file or directory (os error 2)"#
        );
    }
}

#[test]
fn bad_descriptor_number() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let file = std::fs::File::open("/dev/null").unwrap();
    let err = spawn_error(Command::new("true").fd(i32::MAX, file));
    assert_eq!(SpawnError::errno_of(&err), Some(libc::EBADF));
    assert!(err.to_string().starts_with("map descriptor "), "{err}");
}

#[test]
fn nul_bytes_are_refused_before_any_process_exists() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases: Vec<(&str, Command)> = vec![
        ("program", Command::new("tr\0ue")),
        ("argument", {
            let mut c = Command::new("true");
            c.arg("a\0b");
            c
        }),
        ("arg0", {
            let mut c = Command::new("true");
            c.arg0("x\0");
            c
        }),
        ("environment variable name", {
            let mut c = Command::new("true");
            c.env("K\0", "v");
            c
        }),
        ("environment variable value", {
            let mut c = Command::new("true");
            c.env("K", "v\0");
            c
        }),
        ("working directory", {
            let mut c = Command::new("true");
            c.current_dir("/tmp\0x");
            c
        }),
    ];
    for (what, mut cmd) in cases {
        // Piped stdio would create pipes: none may exist after the refusal.
        cmd.stdout(progeny::Stdio::piped());
        let err = spawn_error(&mut cmd);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}");
        assert!(
            err.to_string()
                .starts_with(&format!("{what} contains a NUL byte")),
            "{err}"
        );
    }
}

#[test]
fn path_search_uses_the_childs_path_when_changed() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("path");
    script(
        &dir,
        "progeny-tool",
        b"#!/bin/sh\necho found-in-child-path\n",
        0o755,
    );
    let path = format!("{}:/usr/bin:/bin", dir.0.display());
    let out = Command::new("progeny-tool")
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"found-in-child-path\n");
    // Without the change, the parent's PATH does not have it.
    let err = spawn_error(&mut Command::new("progeny-tool"));
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[test]
fn path_search_goes_on_after_eacces() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let first = TempDir::new("denied");
    let second = TempDir::new("allowed");
    script(&first, "progeny-tool", b"#!/bin/sh\necho first\n", 0o644);
    script(&second, "progeny-tool", b"#!/bin/sh\necho second\n", 0o755);
    let path = format!("{}:{}", first.0.display(), second.0.display());
    let out = Command::new("progeny-tool")
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"second\n");

    // When nothing else works, EACCES is what is reported, naming the denied candidate.
    let path = format!("{}:/nonexistent", first.0.display());
    let err = spawn_error(Command::new("progeny-tool").env("PATH", &path));
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("denied"), "{err}");
}

#[test]
fn path_search_stops_at_enoexec() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let first = TempDir::new("noexec-first");
    let second = TempDir::new("noexec-second");
    script(&first, "progeny-tool", b"echo no shebang\n", 0o755);
    script(&second, "progeny-tool", b"#!/bin/sh\necho second\n", 0o755);
    let path = format!("{}:{}", first.0.display(), second.0.display());
    let err = spawn_error(Command::new("progeny-tool").env("PATH", &path));
    assert_eq!(SpawnError::errno_of(&err), Some(libc::ENOEXEC), "{err}");
}

#[test]
fn path_search_uses_the_parents_path_otherwise() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new("sh").args(["-c", "echo ok"]).output().unwrap();
    assert_eq!(out.stdout, b"ok\n");
    // A cleared environment has no PATH: execvp's default /bin:/usr/bin is searched.
    let out = Command::new("sh")
        .args(["-c", "echo ok"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"ok\n");
}

#[test]
fn posix_spawn_backend_reports_errors_and_refuses_what_it_cannot_do() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let err = spawn_error(Command::new("/nonexistent/prog").backend(Backend::PosixSpawn));
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(
        err.to_string(),
        r#"posix_spawn "/nonexistent/prog": No such file or directory (os error 2)"#
    );
    let err = spawn_error(Command::new("true").uid(0).backend(Backend::PosixSpawn));
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    let err = spawn_error(
        Command::new("true")
            .env("PATH", "/bin")
            .backend(Backend::PosixSpawn),
    );
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    let file = std::fs::File::open("/dev/null").unwrap();
    let err = spawn_error(
        Command::new("true")
            .fd(7, file)
            .backend(Backend::PosixSpawn),
    );
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
}

#[test]
fn every_backend_runs_a_program() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for backend in [
        Backend::Clone3,
        Backend::Clone,
        Backend::Fork,
        Backend::PosixSpawn,
    ] {
        let out = Command::new(INSPECT)
            .args(["argv", "x"])
            .backend(backend)
            .output()
            .unwrap();
        assert!(out.status.success(), "{backend:?}");
        assert_eq!(
            out.stdout,
            format!("[{INSPECT}]\n[argv]\n[x]\n").as_bytes(),
            "{backend:?}"
        );
        let before = children();
        assert!(before.is_empty(), "{backend:?} left {before:?}");
    }
}

/// Where clone3 answers ENOSYS (an old kernel, or a container runtime's seccomp filter), spawns
/// take the legacy clone path, and the probe says why.
#[test]
fn spawns_fall_back_to_clone_where_clone3_is_missing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(INSPECT).arg("no-clone3").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let path = lines.next().unwrap();
    assert!(
        path.starts_with("clone(CLONE_VM|CLONE_VFORK|CLONE_PIDFD"),
        "{path}"
    );
    assert_eq!(lines.next(), Some("clone3 available: false"));
}
