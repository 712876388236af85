//! The zygote: a spawn server forked while the program is still single-threaded.
//!
//! [`Zygote::start`] forks a small helper before the program starts any thread. Later, any
//! thread can ask it to start a child: the caller prepares the command exactly as a direct
//! spawn does (same validation, same pipes), sends the plan over a `SOCK_SEQPACKET` socket with
//! the child's descriptors as `SCM_RIGHTS`, and the helper creates the child with
//! `clone(CLONE_PARENT|CLONE_PIDFD)`. `CLONE_PARENT` makes the new process a child of the
//! *caller*, so the [`Child`] that comes back waits, signals and reaps like any other; its pidfd
//! comes back by `SCM_RIGHTS`.
//!
//! Because the helper is single-threaded, its children may run arbitrary code: registered
//! [`Hook`]s run there, between the clone and the exec. That is progeny's answer to std's
//! `pre_exec`. A request with hooks gets a fork-style child (its own copy of the helper's small
//! memory, so a hook may allocate and lock); a request without hooks gets a child that shares the
//! helper's memory (`CLONE_VM`, on a stack of its own) and runs only the allocation-free plan, as
//! a direct spawn does: no page tables to copy, none to tear down at exec. The helper does not
//! wait for that child's exec: it answers at once, and frees the child's plan and stack when a
//! close-on-exec pipe tells it the child is done.
//!
//! # Processes
//! Two processes make up a zygote, both children of the caller that hold nothing but one socket
//! each (and, for the server, `/dev/null` as its standard streams), block every signal, and die
//! with the thread that started them (`PR_SET_PDEATHSIG`) or when the caller closes its end:
//! - the *template*, a pristine copy of the caller at start, which only makes servers;
//! - the *server*, made by the template, which answers spawn requests.
//!
//! When the server dies (killed, out of memory), [`Zygote::restart`] asks the template for a new
//! one instead of forking the caller again: by then the caller is usually multithreaded, and a
//! fork of it could carry a lock held by another thread into every hook.
//!
//! # References
//! - [`clone(2)`](https://man7.org/linux/man-pages/man2/clone.2.html) (`CLONE_PARENT`,
//!   `CLONE_PIDFD`)
//! - [`unix(7)`](https://man7.org/linux/man-pages/man7/unix.7.html) (`SCM_RIGHTS`)
//! - [`PR_SET_PDEATHSIG(2const)`](https://man7.org/linux/man-pages/man2/PR_SET_PDEATHSIG.2const.html)
#![allow(unsafe_code)]

mod request;
mod server;
mod wire;

use std::fmt;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Output;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use progeny_child::Failure;
use progeny_sys as sys;

use crate::command::{Command, StdioDefault};
use crate::error::invalid_input;
use crate::plan::prepare;
use crate::spawn::{spawn_error, SpawnPath};
use crate::Child;

/// A function that runs in a zygote's child between the clone and the exec, with the bytes a
/// spawn request gives it.
///
/// Hooks are plain functions, not closures: the zygote is a copy of the program made at
/// [`ZygoteBuilder::start`], so it can only run code that existed then, and each request names a
/// hook and passes its data. Register them with [`ZygoteBuilder::hook`].
///
/// A hook runs in a fork-style child of the single-threaded zygote, with its own copy of memory,
/// so it may allocate, lock and call any library. It runs before the plan: the child's
/// descriptors are not yet placed (its standard streams are `/dev/null`), its ids and directory
/// not yet changed (the directory is the caller's), and every signal is blocked, so only
/// `SIGKILL` ends a hook that hangs. An `Err` (or a panic) stops the spawn: the caller gets
/// an `io::Error` carrying a [`HookError`] that names the hook, with the kind of the hook's
/// errno.
pub type Hook = fn(&[u8]) -> io::Result<()>;

/// Steps of the zygote's child before the plan, reported in [`Failure::step`] with values that
/// no [`Step`](crate::Step) uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum ZStep {
    /// A hook failed; `index` is its position in the request.
    Hook = 0x5a59_0001,
    /// `fchdir` to the caller's working directory failed.
    CallerCwd = 0x5a59_0002,
    /// Ignoring a signal the caller ignores failed; `index` is the signal.
    IgnoreSignal = 0x5a59_0003,
}

/// The failure of a [`Hook`] in a zygote's child, inside the `io::Error` that
/// [`Zygote::spawn_with_hooks`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookError {
    name: String,
    errno: Option<i32>,
    message: String,
}

impl HookError {
    /// The name the hook was registered under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The errno of the hook's error, when it had one.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }
}

impl fmt::Display for HookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hook {:?}: {}", self.name, self.message)
    }
}

impl std::error::Error for HookError {}

/// Registers [`Hook`]s, then starts a [`Zygote`].
#[derive(Default)]
pub struct ZygoteBuilder {
    hooks: Vec<(String, Hook)>,
}

impl fmt::Debug for ZygoteBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.hooks.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ZygoteBuilder")
            .field("hooks", &names)
            .finish()
    }
}

impl ZygoteBuilder {
    /// Registers `hook` under `name`, for requests to run with
    /// [`Zygote::spawn_with_hooks`].
    pub fn hook(mut self, name: &str, hook: Hook) -> ZygoteBuilder {
        self.hooks.push((name.to_owned(), hook));
        self
    }

    /// Forks the zygote. Call it first thing in `main`, before anything starts a thread.
    ///
    /// # Errors
    /// A refusal (kind `Other`) when the process already has more than one thread: a fork of a
    /// multithreaded process copies only the calling thread, and any lock another thread held
    /// (in the allocator, in a logger) would stay locked forever in the zygote. `InvalidInput`
    /// for two hooks with the same name. The `socketpair`, `fork` or `clone` error otherwise.
    pub fn start(self) -> io::Result<Zygote> {
        for (i, (name, _)) in self.hooks.iter().enumerate() {
            if self.hooks[..i].iter().any(|(other, _)| other == name) {
                return Err(invalid_input(format!(
                    "zygote hook {name:?} is registered twice"
                )));
            }
        }
        let threads = thread_count()?;
        if threads > 1 {
            return Err(io::Error::other(format!(
                "Zygote::start refused: this process already runs {threads} threads, and a fork \
                 of a multithreaded process can inherit locks that no thread will ever release; \
                 start the zygote first thing in main, while the process is single-threaded"
            )));
        }
        let (ours, theirs) = server::seqpacket_pair()?;
        let caller = sys::getpid();
        // No handler of ours may run in the freshly forked template before it resets them.
        let blocked = crate::spawn::SignalsBlocked::new()?;
        // SAFETY: the process is single-threaded (checked just above), so the child is a
        // complete copy in which any code may run; it never returns into our frames
        // (`forked_main` ends in exit_group).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            server::forked_main(|| server::template_main(theirs, caller, &self.hooks));
        }
        drop(blocked);
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        drop(theirs);
        let template = Proc {
            sock: ours,
            pid: pid as u32,
            pidfd: pidfd_open(pid as u32),
        };
        let server = match make_server(&template) {
            Ok(server) => server,
            Err(e) => {
                template.retire();
                return Err(e);
            }
        };
        Ok(Zygote {
            hooks: self.hooks,
            template_pid: template.pid,
            template: Mutex::new(Some(template)),
            server: Mutex::new(Server {
                pid: server.pid,
                proc: Some(server),
            }),
            next_id: AtomicU64::new(1),
        })
    }
}

/// A spawn server: starts children on behalf of any thread, from a process forked while the
/// program was single-threaded.
///
/// ```
/// use progeny::{Command, Stdio, Zygote};
///
/// // First thing in main, before any thread exists.
/// let zygote = Zygote::start()?;
/// let mut cmd = Command::new("echo");
/// cmd.arg("hello").stdout(Stdio::piped());
/// let out = zygote.spawn(&cmd)?.wait_with_output()?;
/// assert_eq!(out.stdout, b"hello\n");
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// A `Zygote` is `Send` and `Sync`: share it by reference or in an `Arc`. Dropping it ends the
/// zygote's processes and reaps them; children it started live on and are the caller's to wait
/// for.
///
/// # What the child gets from the caller, and what from the zygote
/// Everything a [`Command`] says is carried, and so are the caller's environment (as a direct
/// spawn reads it), its working directory at the time of the spawn, the standard streams it
/// lets the child inherit, and the signals it ignores. A few process attributes come from the
/// zygote instead, that is, from the caller as it was at [`Zygote::start`]: resource limits,
/// umask, nice value and CPU affinity (unless the command sets them), credentials (unless the
/// command sets `uid`, `gid` or `groups`), capabilities, cgroup, namespaces, session and process
/// group.
///
/// # Concurrency
/// Requests go through one lock held for the round trip to the server: the server is one thread
/// that starts one child at a time, so a queue in front of it costs nothing, and with the lock
/// every answer trivially belongs to the request just sent (each still carries an id, checked).
/// The server answers as soon as the child is cloned; the caller then waits for the exec outside
/// the lock, on a pipe of the spawn's own, so the children of several threads exec in parallel.
///
/// # Caveats
/// - Code that reaps every child (`waitpid(-1)`, a `SIGCHLD` handler that loops on it) reaps the
///   zygote's processes too; the zygote then reports itself gone.
/// - The zygote dies when the thread that called [`Zygote::start`] exits (that thread is its
///   parent for `PR_SET_PDEATHSIG`), which is why it belongs at the top of `main`.
/// - A [`Command`]'s [`backend`](Command::backend) is not used: the zygote is the backend.
pub struct Zygote {
    hooks: Vec<(String, Hook)>,
    template: Mutex<Option<Proc>>,
    /// The template's pid, for messages once it is gone.
    template_pid: u32,
    server: Mutex<Server>,
    next_id: AtomicU64,
}

/// One of the zygote's processes, seen from the caller.
struct Proc {
    sock: OwnedFd,
    pid: u32,
    pidfd: Option<OwnedFd>,
}

impl Proc {
    /// Ends the process and reaps it, so it leaves no zombie. Closing the socket would make it
    /// exit too, but `SIGKILL` cannot be delayed by anything, so this never hangs.
    fn retire(self) {
        drop(self.sock);
        match &self.pidfd {
            Some(fd) => {
                let _ = sys::pidfd_send_signal(fd.as_raw_fd(), libc::SIGKILL);
            }
            // Not yet reaped by us, so the pid cannot belong to anyone else.
            // SAFETY: kill takes integers.
            None => unsafe {
                libc::kill(self.pid as i32, libc::SIGKILL);
            },
        }
        reap(self.pid, self.pidfd.as_ref());
    }
}

struct Server {
    /// `None` once the server is known to be gone (and reaped).
    proc: Option<Proc>,
    /// The server's pid, kept for messages once it is gone.
    pid: u32,
}

/// What the server answered.
enum Answer {
    /// The child exists.
    Child { pid: u32, pidfd: OwnedFd },
    /// No child: why.
    Refused(io::Error),
}

impl fmt::Debug for Zygote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.hooks.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Zygote")
            .field("pid", &self.pid())
            .field("hooks", &names)
            .finish()
    }
}

impl Zygote {
    /// Forks a zygote without hooks: see [`ZygoteBuilder::start`], which this calls.
    ///
    /// # Errors
    /// As [`ZygoteBuilder::start`]: notably a refusal when the process already has more than
    /// one thread.
    pub fn start() -> io::Result<Zygote> {
        ZygoteBuilder::default().start()
    }

    /// A builder to register [`Hook`]s before starting.
    pub fn builder() -> ZygoteBuilder {
        ZygoteBuilder::default()
    }

    /// The pid of the server process that answers spawn requests (the last one, if it is gone).
    pub fn pid(&self) -> u32 {
        lock(&self.server).pid
    }

    /// Starts `cmd` through the zygote, with the same defaults as [`Command::spawn`] (stdio
    /// inherited, from the caller).
    ///
    /// # Errors
    /// The errors of [`Command::spawn`], with the same kinds and messages: `InvalidInput` before
    /// any process exists, a [`SpawnError`](crate::SpawnError) naming the failed step (the
    /// failed child is reaped). `Unsupported` for an option the zygote cannot carry (for example
    /// `close_other_fds(false)`, namespaces, cgroups). A `BrokenPipe` error naming the zygote
    /// when its server is gone; every later spawn fails the same way until
    /// [`restart`](Zygote::restart).
    pub fn spawn(&self, cmd: &Command) -> io::Result<Child> {
        self.run(cmd, &[], StdioDefault::Inherit, StdioDefault::Inherit)
    }

    /// Starts `cmd` through the zygote, running the registered hooks named in `hooks`, in order,
    /// each with its data, in the child before the exec.
    ///
    /// # Errors
    /// As [`spawn`](Zygote::spawn); `InvalidInput` for a name that was not registered (before
    /// any process exists); an error carrying a [`HookError`] when a hook fails.
    pub fn spawn_with_hooks(&self, cmd: &Command, hooks: &[(&str, &[u8])]) -> io::Result<Child> {
        self.run(cmd, hooks, StdioDefault::Inherit, StdioDefault::Inherit)
    }

    /// Runs `cmd` through the zygote to completion and collects its output, with the defaults
    /// of [`Command::output`] (stdin null, stdout and stderr captured).
    ///
    /// # Errors
    /// As [`spawn`](Zygote::spawn), and the errors of reading the pipes.
    pub fn output(&self, cmd: &Command) -> io::Result<Output> {
        self.run(cmd, &[], StdioDefault::Null, StdioDefault::Piped)?
            .wait_with_output()
    }

    /// Replaces the server with a new one made by the template, whether the old one is gone or
    /// still running (it is then ended and reaped). Restarting is explicit, never automatic
    /// (spawn never restarts lazily), so the death of a server is seen rather than hidden. A
    /// server that dies is reaped as soon as a spawn or a restart notices.
    ///
    /// # Errors
    /// An error naming the template when it is gone too (a new zygote must then be started while
    /// the process is single-threaded); the template's `clone` error.
    pub fn restart(&self) -> io::Result<()> {
        let mut server = lock(&self.server);
        let mut template = lock(&self.template);
        let Some(t) = template.as_ref() else {
            return Err(template_gone(self.template_pid));
        };
        let fresh = match make_server(t) {
            Ok(fresh) => fresh,
            Err(e) => {
                if e.kind() == io::ErrorKind::BrokenPipe {
                    // The template is gone for good: reap it now rather than at drop.
                    if let Some(t) = template.take() {
                        t.retire();
                    }
                }
                return Err(e);
            }
        };
        drop(template);
        server.pid = fresh.pid;
        if let Some(old) = server.proc.replace(fresh) {
            old.retire();
        }
        Ok(())
    }

    fn run(
        &self,
        cmd: &Command,
        hooks: &[(&str, &[u8])],
        stdin_default: StdioDefault,
        out_default: StdioDefault,
    ) -> io::Result<Child> {
        let mut wanted = Vec::with_capacity(hooks.len());
        for (name, data) in hooks {
            match self.hooks.iter().position(|(n, _)| n == name) {
                Some(i) => wanted.push((i as u32, *data)),
                None => {
                    return Err(invalid_input(format!(
                        "no zygote hook is registered as {name:?}"
                    )))
                }
            }
        }
        // Which standard streams a direct spawn would pass on: open and not close-on-exec. Read
        // before `prepare`, whose new pipes may land on a closed 0, 1 or 2.
        let inheritable: Vec<RawFd> = (0..3).filter(|&n| inheritable(n)).collect();
        let mut prepared = prepare(cmd, stdin_default, out_default)?;
        let cwd = match cmd.get_current_dir() {
            Some(dir) if dir.is_absolute() => None,
            // The child must start where a direct spawn would: in the caller's directory now,
            // not the zygote's (which is the caller's at start).
            _ => Some(open_cwd()?),
        };
        let (report_reader, report_writer) = std::io::pipe()?;
        // Streams the command leaves inherited come from the caller's own descriptors as they
        // are now (the zygote's own are /dev/null).
        let inherit: Vec<RawFd> = inheritable
            .into_iter()
            .filter(|n| !prepared.fds.iter().any(|m| m.dst == *n))
            .collect();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (body, fds) = request::encode(
            &prepared,
            &request::Extras {
                id,
                ignored: ignored_signals(),
                cwd_fd: cwd.as_ref().map(AsRawFd::as_raw_fd),
                report_fd: report_writer.as_raw_fd(),
                inherit: &inherit,
                hooks: &wanted,
            },
        )?;
        let answer = self.round_trip(id, &body, &fds);
        // The server has its copies now (or is gone): from here only the child holds the
        // report pipe's write end, so its end of file means exec or exit.
        drop(report_writer);
        drop(cwd);
        let (pid, pidfd) = match answer {
            Ok(Answer::Child { pid, pidfd }) => (pid, Some(pidfd)),
            Ok(Answer::Refused(e)) => return Err(e),
            Err(gone) => {
                // The server died with our request: a child may exist all the same, and it is
                // ours. Its first report bytes are its pid.
                let report = read_report(report_reader)?;
                let Some(pid) = report.pid else {
                    return Err(gone);
                };
                return self.finish(&mut prepared, report, pid, pidfd_open(pid), hooks);
            }
        };
        let report = match read_report(report_reader) {
            Ok(report) => report,
            Err(e) => {
                kill_and_reap(pid, pidfd.as_ref());
                return Err(e);
            }
        };
        self.finish(&mut prepared, report, pid, pidfd, hooks)
    }

    /// Turns the child's report into the `Child`, or into the error a direct spawn would give
    /// (the failed child reaped).
    fn finish(
        &self,
        prepared: &mut crate::plan::Prepared,
        report: Report,
        pid: u32,
        pidfd: Option<OwnedFd>,
        hooks: &[(&str, &[u8])],
    ) -> io::Result<Child> {
        let Some((failure, message)) = report.failure else {
            let pipes = std::mem::take(&mut prepared.pipes);
            let flags = if hooks.is_empty() {
                server::VM_FLAGS
            } else {
                server::FORK_FLAGS
            };
            let mut child = Child::new(pid, pidfd, pipes, SpawnPath::zygote(flags));
            child.kill_on_drop(prepared.kill_on_drop);
            return Ok(child);
        };
        reap(pid, pidfd.as_ref());
        let os = |errno: i32| io::Error::from_raw_os_error(errno);
        Err(match failure.step {
            s if s == ZStep::Hook as u32 => {
                let name = hooks
                    .get(failure.index as usize)
                    .map_or("?", |(n, _)| *n)
                    .to_owned();
                let errno = (failure.errno != 0).then_some(failure.errno);
                let kind = errno.map_or(io::ErrorKind::Other, |e| os(e).kind());
                let message = String::from_utf8_lossy(&message).into_owned();
                io::Error::new(
                    kind,
                    HookError {
                        name,
                        errno,
                        message,
                    },
                )
            }
            s if s == ZStep::CallerCwd as u32 => io::Error::new(
                os(failure.errno).kind(),
                format!(
                    "fchdir to the caller's working directory: {}",
                    os(failure.errno)
                ),
            ),
            s if s == ZStep::IgnoreSignal as u32 => io::Error::new(
                os(failure.errno).kind(),
                format!("ignore signal {}: {}", failure.index, os(failure.errno)),
            ),
            _ => spawn_error(prepared, failure).into(),
        })
    }

    /// Sends the request and receives the answer under the lock. `Err` means the server is gone
    /// (it is then reaped, and later calls fail at once until a restart).
    fn round_trip(&self, id: u64, body: &[u8], fds: &[RawFd]) -> Result<Answer, io::Error> {
        let mut server = lock(&self.server);
        let pid = server.pid;
        let Some(sock) = server.proc.as_ref().map(|p| p.sock.as_raw_fd()) else {
            return Err(server_gone(pid));
        };
        match wire::send_request(sock, body, fds) {
            Ok(()) => {}
            // Nothing went out (a descriptor closed meanwhile, no memory): the stream is still
            // in step and the server alive.
            Err((false, e)) if !is_disconnect(&e) => return Ok(Answer::Refused(e)),
            // The server is gone, or part of a long request went out and the server would read
            // our next request as its rest: give up on this server.
            Err(_) => return Err(server.gone()),
        }
        let mut buf = [0u8; 64];
        let (n, mut received) = match wire::recv(sock, &mut buf) {
            Ok(Some(answer)) => answer,
            Ok(None) | Err(_) => return Err(server.gone()),
        };
        let mut r = wire::Reader::new(&buf[..n]);
        let parsed = (|| Ok::<_, io::Error>((r.u64()?, r.u32()?, r.u32()?, r.i32()?)))();
        match parsed {
            Ok((answer_id, server::OK, child, _)) if answer_id == id && received.len() == 1 => {
                Ok(Answer::Child {
                    pid: child,
                    pidfd: received.remove(0),
                })
            }
            Ok((answer_id, server::ERRNO, _, errno)) if answer_id == id => {
                Ok(Answer::Refused(io::Error::from_raw_os_error(errno)))
            }
            Ok((_, server::MALFORMED, _, _)) => Ok(Answer::Refused(io::Error::new(
                io::ErrorKind::InvalidData,
                "the zygote could not read the request",
            ))),
            // An answer to another request, or nonsense: the conversation is out of step.
            _ => Err(server.gone()),
        }
    }
}

impl Server {
    /// Reaps a server found gone (or out of step) and returns the error that names it.
    fn gone(&mut self) -> io::Error {
        if let Some(p) = self.proc.take() {
            p.retire();
        }
        server_gone(self.pid)
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        let server = self.server.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = server.proc.take() {
            p.retire();
        }
        let template = self.template.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = template.take() {
            t.retire();
        }
    }
}

/// Asks the template for a new server.
fn make_server(template: &Proc) -> io::Result<Proc> {
    let sock = template.sock.as_raw_fd();
    wire::send(sock, &[server::MAKE_SERVER], &[]).map_err(|_| template_gone(template.pid))?;
    let mut buf = [0u8; 32];
    let Some((n, mut fds)) = wire::recv(sock, &mut buf).map_err(|_| template_gone(template.pid))?
    else {
        return Err(template_gone(template.pid));
    };
    let mut r = wire::Reader::new(&buf[..n]);
    let (status, pid, errno) = (r.u32()?, r.u32()?, r.i32()?);
    match status {
        server::OK if fds.len() == 2 => {
            let pidfd = fds.pop();
            let sock = fds.pop().ok_or_else(wire::malformed)?;
            Ok(Proc { sock, pid, pidfd })
        }
        server::ERRNO => Err(io::Error::from_raw_os_error(errno)),
        _ => Err(wire::malformed()),
    }
}

fn server_gone(pid: u32) -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        format!(
            "the zygote (pid {pid}) is gone: it exited or was killed; Zygote::restart starts \
             a new one"
        ),
    )
}

fn template_gone(pid: u32) -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        format!(
            "the zygote's template process (pid {pid}) is gone, so no new zygote can be made \
             from it; start a new Zygote while the process is single-threaded"
        ),
    )
}

fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPIPE | libc::ECONNRESET | libc::ENOTCONN | libc::ECONNREFUSED)
    )
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these locks; if something did, the state is still whole.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the child wrote into its report pipe before exec or exit.
struct Report {
    /// The child's pid, its first words: `None` when no child was ever made.
    pid: Option<u32>,
    /// The failure and, for hooks, the message.
    failure: Option<(Failure, Vec<u8>)>,
}

/// Reads the report pipe to its end (the child's exec or exit closes the last writer).
fn read_report(mut reader: std::io::PipeReader) -> io::Result<Report> {
    let mut bytes = Vec::new();
    loop {
        match reader.read_to_end(&mut bytes) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let pid = bytes
        .get(..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    let failure = bytes.get(4..4 + Failure::WIRE_SIZE).map(|b| {
        let mut raw = [0u8; Failure::WIRE_SIZE];
        raw.copy_from_slice(b);
        let message = bytes[4 + Failure::WIRE_SIZE..].to_vec();
        (Failure::decode(raw), message)
    });
    Ok(Report { pid, failure })
}

/// Waits for one of our children that is done or about to be, so it leaves no zombie.
///
/// # References
/// - [`waitid(2)`](https://man7.org/linux/man-pages/man2/waitid.2.html)
fn reap(pid: u32, pidfd: Option<&OwnedFd>) {
    // SAFETY: an all-zero siginfo_t is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let (idtype, id) = match pidfd {
        Some(fd) => (libc::P_PIDFD, fd.as_raw_fd() as libc::id_t),
        None => (libc::P_PID, pid as libc::id_t),
    };
    loop {
        // SAFETY: waitid writes only `info`.
        let ret = unsafe { libc::waitid(idtype, id, &mut info, libc::WEXITED) };
        if ret == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

fn kill_and_reap(pid: u32, pidfd: Option<&OwnedFd>) {
    match pidfd {
        Some(fd) => {
            let _ = sys::pidfd_send_signal(fd.as_raw_fd(), libc::SIGKILL);
        }
        // SAFETY: kill takes integers; the child is not reaped, so the pid is still its own.
        None => unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        },
    }
    reap(pid, pidfd);
}

/// A pidfd for a child of ours that is not reaped yet, where the kernel has `pidfd_open`.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    sys::pidfd_open(pid, 0)
        .ok()
        // SAFETY: pidfd_open returned a fresh descriptor that nothing else owns.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The caller's working directory as an `O_PATH` descriptor, for the child's `fchdir`: it works
/// even for a directory that was renamed, deleted, or cannot be read.
///
/// # References
/// - [`open(2)`](https://man7.org/linux/man-pages/man2/open.2.html) (`O_PATH`)
fn open_cwd() -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path and integer flags.
    let fd = unsafe {
        libc::open(
            c".".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether a child would inherit `fd` through exec: open, and not close-on-exec.
fn inheritable(fd: RawFd) -> bool {
    sys::fcntl_int(fd, libc::F_GETFD, 0).is_ok_and(|flags| flags & libc::FD_CLOEXEC == 0)
}

/// The signals the caller ignores right now, as a mask (bit `n - 1` for signal `n`).
///
/// A direct spawn's child keeps ignored signals ignored (except `SIGPIPE`); the zygote's child
/// starts from the zygote's dispositions, so the request carries the caller's.
fn ignored_signals() -> u64 {
    let mut mask = 0u64;
    for sig in 1..=sys::NSIG {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let mut old = sys::KernelSigaction::default();
        if sys::rt_sigaction(sig, None, Some(&mut old)).is_ok() && old.handler == sys::SIG_IGN {
            mask |= 1u64 << (sig - 1);
        }
    }
    mask
}

/// The number of threads in this process, from `/proc/self/task`.
fn thread_count() -> io::Result<usize> {
    let tasks = std::fs::read_dir("/proc/self/task").map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("Zygote::start cannot count this process's threads in /proc/self/task: {e}"),
        )
    })?;
    Ok(tasks.count())
}
