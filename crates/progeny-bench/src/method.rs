//! The ways to start a process that `progeny bench spawn` compares, and the
//! [`Spawner`] that runs one of them once: spawn the target, let it exec and
//! exit, wait for it, and check that it exited with status 0.
//!
//! Every in-process method does the same housekeeping: stdout goes to
//! `/dev/null` (opened for each spawn, as `Stdio::null()` does), stdin and
//! stderr are inherited, argv is `[program, args...]`, and the environment is
//! the parent's. Beyond that each library does what it always does: std
//! resets the child's signal mask and `SIGPIPE`, progeny also closes every
//! descriptor above 2 in the child (`close_range`, its default), and so on;
//! that is part of what is being compared.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitStatus;

use crate::raw;
use crate::target::Target;

/// One way of starting a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// `progeny::Command` with its default backend
    /// (`clone3(CLONE_VM|CLONE_VFORK|CLONE_PIDFD)` on a separate stack).
    Progeny,
    /// `progeny::Command` with the legacy `clone` system call backend.
    ProgenyClone,
    /// `progeny::Zygote`: a spawn server forked while the process was still
    /// single-threaded creates the child with `clone(CLONE_PARENT)`.
    ProgenyZygote,
    /// `std::process::Command` (glibc `posix_spawn` underneath when it can).
    Std,
    /// `fork()` + `execve()`: copies the parent's page tables.
    Fork,
    /// `vfork()` + `execve()`, in C: shares memory and stack with the parent.
    Vfork,
    /// `vfork()` + `execve()` as [`Method::Vfork`], plus a pidfd for the child
    /// (`pidfd_open`), closed after the wait: what the race-free handle that
    /// progeny's `Child` is built on costs by itself.
    VforkPidfd,
    /// glibc `posix_spawn()` (`clone(CLONE_VM|CLONE_VFORK)` inside glibc).
    PosixSpawn,
    /// `clone(CLONE_VM|CLONE_VFORK)` whose child exits at once without exec:
    /// the floor of process creation. It ignores the target.
    CloneFloor,
    /// Python's `subprocess.Popen`, timed by the Python program itself.
    PythonPopen,
    /// Python's `os.posix_spawn`, timed by the Python program itself.
    PythonPosixSpawn,
    /// Go's `os/exec`, timed by the Go program itself.
    GoExec,
}

impl Method {
    /// Every method, in the order tables list them.
    pub const ALL: [Method; 12] = [
        Method::Progeny,
        Method::ProgenyClone,
        Method::ProgenyZygote,
        Method::Std,
        Method::Fork,
        Method::Vfork,
        Method::VforkPidfd,
        Method::PosixSpawn,
        Method::CloneFloor,
        Method::PythonPopen,
        Method::PythonPosixSpawn,
        Method::GoExec,
    ];

    /// The name used on the command line, in tables and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Method::Progeny => "progeny",
            Method::ProgenyClone => "progeny-clone",
            Method::ProgenyZygote => "progeny-zygote",
            Method::Std => "std",
            Method::Fork => "fork",
            Method::Vfork => "vfork",
            Method::VforkPidfd => "vfork-pidfd",
            Method::PosixSpawn => "posix_spawn",
            Method::CloneFloor => "clone-floor",
            Method::PythonPopen => "python-popen",
            Method::PythonPosixSpawn => "python-posix_spawn",
            Method::GoExec => "go-exec",
        }
    }

    /// One line saying what the method does.
    pub fn about(self) -> &'static str {
        match self {
            Method::Progeny => "progeny::Command spawn + wait (clone3 backend, the default)",
            Method::ProgenyClone => "progeny::Command spawn + wait (legacy clone backend)",
            Method::ProgenyZygote => "progeny::Zygote spawn + wait (spawn server forked at start)",
            Method::Std => "std::process::Command spawn + wait",
            Method::Fork => "fork + execve + waitpid",
            Method::Vfork => "vfork + execve + waitpid (C)",
            Method::VforkPidfd => {
                "vfork + execve (C) + pidfd_open + waitpid + close: vfork's cost with a pidfd"
            }
            Method::PosixSpawn => "glibc posix_spawn + waitpid",
            Method::CloneFloor => "clone(CLONE_VM|CLONE_VFORK), child exits without exec (C)",
            Method::PythonPopen => "Python subprocess.Popen + wait (own process, own clock)",
            Method::PythonPosixSpawn => "Python os.posix_spawn + waitpid (own process, own clock)",
            Method::GoExec => "Go os/exec Cmd.Run (own process, own clock)",
        }
    }

    /// Parses a method name as printed by [`Method::name`].
    pub fn parse(text: &str) -> Result<Method, String> {
        Method::ALL
            .into_iter()
            .find(|method| method.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
                format!("unknown method {text:?}: choose from {}", names.join(", "))
            })
    }

    /// True for the peers that run in their own process with their own clock.
    pub fn is_external(self) -> bool {
        matches!(
            self,
            Method::PythonPopen | Method::PythonPosixSpawn | Method::GoExec
        )
    }

    /// False for the clone floor, whose child never execs the target.
    pub fn execs_target(self) -> bool {
        self != Method::CloneFloor
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why one run of a method failed: the spawn, the wait, or the target's exit
/// status. A failed run is never counted as a fast one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFailure(pub String);

impl fmt::Display for RunFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RunFailure {}

/// Checks that a child exited normally with status 0.
fn check_status(status: ExitStatus, program: &OsStr) -> Result<(), RunFailure> {
    if status.success() {
        return Ok(());
    }
    let what = match status.code() {
        Some(127) => " (127: the child could not exec it)".to_owned(),
        _ => String::new(),
    };
    Err(RunFailure(format!(
        "{} did not succeed: {status}{what}",
        program.to_string_lossy()
    )))
}

fn spawn_failed(what: &str, program: &OsStr, error: io::Error) -> RunFailure {
    RunFailure(format!(
        "{what} {}: {error}",
        String::from_utf8_lossy(program.as_bytes())
    ))
}

/// The parent's environment as `KEY=value` strings, the same for every
/// method (std and the others inherit exactly this).
pub fn environment_entries() -> Vec<OsString> {
    std::env::vars_os()
        .map(|(key, value)| {
            let mut entry = key;
            entry.push("=");
            entry.push(value);
            entry
        })
        .collect()
}

enum Prepared {
    /// fork, vfork, posix_spawn: a frozen exec plan.
    Raw(raw::ExecPlan),
    /// The clone floor: just a stack for the child.
    Floor(raw::FloorStack),
    /// std: a Command built once and spawned again and again.
    Std(std::process::Command),
    /// progeny: likewise (boxed: its builder is large).
    Progeny(Box<progeny::Command>),
    /// progeny's zygote: the same `Command`, sent to the zygote.
    Zygote(Box<progeny::Command>, &'static progeny::Zygote),
}

/// The zygote of the `progeny-zygote` method, started by [`start_zygote`].
static ZYGOTE: std::sync::OnceLock<progeny::Zygote> = std::sync::OnceLock::new();

/// Starts the zygote that the `progeny-zygote` method spawns through. It must
/// run while the process is still single-threaded (`progeny::Zygote::start`
/// refuses otherwise), so call it before anything starts a thread; calling it
/// again does nothing.
pub fn start_zygote() -> io::Result<()> {
    if ZYGOTE.get().is_none() {
        let zygote = progeny::Zygote::start()?;
        let _ = ZYGOTE.set(zygote);
    }
    Ok(())
}

/// The zygote started by [`start_zygote`], if it was.
pub fn zygote() -> Option<&'static progeny::Zygote> {
    ZYGOTE.get()
}

/// A method prepared for one target: everything that can be done before the
/// clock starts (C strings, argv/envp arrays, stacks, `Command`s) is done.
///
/// A `Spawner` is tied to the thread that made it (it holds raw pointers into
/// its own strings); make one per spawning thread.
pub struct Spawner {
    method: Method,
    program: OsString,
    prepared: Prepared,
}

impl Spawner {
    /// Prepares `method` to run `target`.
    ///
    /// Fails with `InvalidInput` for an external method (those run in their
    /// own process, see `peers`) or for a path or argument with a NUL byte.
    pub fn new(method: Method, target: &Target) -> io::Result<Self> {
        let program = target.program.as_os_str().to_owned();
        let args: Vec<&OsStr> = target.args.iter().map(OsString::as_os_str).collect();
        let prepared = match method {
            Method::Fork | Method::Vfork | Method::VforkPidfd | Method::PosixSpawn => {
                let env = environment_entries();
                let env: Vec<&OsStr> = env.iter().map(OsString::as_os_str).collect();
                Prepared::Raw(raw::ExecPlan::new(&program, &args, &env)?)
            }
            Method::CloneFloor => Prepared::Floor(raw::FloorStack::new()),
            Method::Std => {
                let mut command = std::process::Command::new(&program);
                command.args(&args).stdout(std::process::Stdio::null());
                Prepared::Std(command)
            }
            Method::ProgenyZygote => {
                let zygote = ZYGOTE.get().ok_or_else(|| {
                    io::Error::other(
                        "the zygote was not started (start_zygote, while single-threaded)",
                    )
                })?;
                let mut command = progeny::Command::new(&program);
                command.args(&args).stdout(progeny::Stdio::null());
                Prepared::Zygote(Box::new(command), zygote)
            }
            Method::Progeny | Method::ProgenyClone => {
                let mut command = progeny::Command::new(&program);
                command.args(&args).stdout(progeny::Stdio::null());
                command.backend(if method == Method::Progeny {
                    progeny::Backend::Clone3
                } else {
                    progeny::Backend::Clone
                });
                Prepared::Progeny(Box::new(command))
            }
            Method::PythonPopen | Method::PythonPosixSpawn | Method::GoExec => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{method} runs in its own process, not through a Spawner"),
                ))
            }
        };
        Ok(Spawner {
            method,
            program,
            prepared,
        })
    }

    /// The method this spawner runs.
    pub fn method(&self) -> Method {
        self.method
    }

    /// Spawns the target once, waits for it, and checks its exit status.
    ///
    /// Fails when the spawn or the wait fails, or the target does not exit
    /// with status 0 (for the raw methods, 127 means the child's `execve`
    /// failed). No child is left unreaped either way.
    pub fn run_once(&mut self) -> Result<(), RunFailure> {
        let program = self.program.as_os_str();
        match &mut self.prepared {
            Prepared::Raw(plan) => {
                let dev_null = File::options()
                    .write(true)
                    .open("/dev/null")
                    .map_err(|e| spawn_failed("open /dev/null for", program, e))?;
                let stdio = raw::ChildStdio {
                    stdin: None,
                    stdout: dev_null.as_fd(),
                };
                let spawned = match self.method {
                    Method::Fork => raw::fork_execve(plan, stdio),
                    Method::Vfork | Method::VforkPidfd => raw::vfork_execve(plan, stdio),
                    _ => raw::posix_spawn(plan, stdio),
                };
                // The parent's copy closes before the wait, as std's does.
                drop(dev_null);
                let pid = spawned
                    .map_err(|e| spawn_failed(&format!("{} of", self.method), program, e))?;
                let status = raw::wait_pid_with(pid, self.method == Method::VforkPidfd)
                    .map_err(|e| spawn_failed("waitpid for", program, e))?;
                check_status(status, program)
            }
            Prepared::Floor(stack) => {
                let pid = raw::clone_floor(stack)
                    .map_err(|e| RunFailure(format!("clone(CLONE_VM|CLONE_VFORK): {e}")))?;
                let status = raw::wait_pid(pid)
                    .map_err(|e| RunFailure(format!("waitpid for the clone floor: {e}")))?;
                check_status(status, OsStr::new("the clone floor's child"))
            }
            Prepared::Std(command) => {
                let mut child = command
                    .spawn()
                    .map_err(|e| spawn_failed("std spawn of", program, e))?;
                let status = child
                    .wait()
                    .map_err(|e| spawn_failed("wait for", program, e))?;
                check_status(status, program)
            }
            Prepared::Progeny(command) => {
                let mut child = command
                    .spawn()
                    .map_err(|e| spawn_failed("progeny spawn of", program, e))?;
                let status = child
                    .wait()
                    .map_err(|e| spawn_failed("wait for", program, e))?;
                check_status(status, program)
            }
            Prepared::Zygote(command, zygote) => {
                let mut child = zygote
                    .spawn(command)
                    .map_err(|e| spawn_failed("progeny zygote spawn of", program, e))?;
                let status = child
                    .wait()
                    .map_err(|e| spawn_failed("wait for", program, e))?;
                check_status(status, program)
            }
        }
    }
}
