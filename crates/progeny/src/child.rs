//! `Child`: a running or exited child process, waited on and signalled through its pidfd.
#![allow(unsafe_code)]

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus, Output};
use std::time::{Duration, Instant};

use progeny_sys as sys;

use crate::plan::ParentPipes;
use crate::spawn::SpawnPath;

/// A child process, as std's `std::process::Child`, with a pidfd behind it.
///
/// The pidfd makes waiting and signalling exact: [`signal`](Child::signal) can never hit another
/// process that reused the pid, and [`wait_timeout`](Child::wait_timeout) sleeps in `poll` on the
/// pidfd instead of polling in a loop.
///
/// As with std, dropping a `Child` neither kills nor waits for the process: call
/// [`wait`](Child::wait) (or one of its relatives) to reap it.
#[derive(Debug)]
pub struct Child {
    /// The parent's end of the child's stdin, when it was [`piped`](crate::Stdio::piped).
    pub stdin: Option<ChildStdin>,
    /// The parent's end of the child's stdout, when it was piped.
    pub stdout: Option<ChildStdout>,
    /// The parent's end of the child's stderr, when it was piped.
    pub stderr: Option<ChildStderr>,
    pid: u32,
    pidfd: Option<OwnedFd>,
    status: Option<ExitStatus>,
    path: SpawnPath,
    kill_on_drop: bool,
}

impl Child {
    pub(crate) fn new(
        pid: u32,
        pidfd: Option<OwnedFd>,
        pipes: ParentPipes,
        path: SpawnPath,
    ) -> Child {
        Child {
            stdin: pipes.stdin.map(ChildStdin::from),
            stdout: pipes.stdout.map(ChildStdout::from),
            stderr: pipes.stderr.map(ChildStderr::from),
            pid,
            pidfd,
            status: None,
            path,
            kill_on_drop: false,
        }
    }

    /// How the child was created: the system call and its flags, e.g.
    /// `clone3(CLONE_VM|CLONE_VFORK|CLONE_PIDFD|CLONE_CLEAR_SIGHAND)`. progeny never falls back
    /// silently; this shows which path a spawn took.
    pub fn spawn_path(&self) -> SpawnPath {
        self.path
    }

    /// When on, dropping this handle before the child was reaped kills it with `SIGKILL` (through
    /// the pidfd) and reaps it, so it can neither outlive the handle nor stay a zombie. The safe
    /// alternative to [`parent_death_signal`](crate::Command::parent_death_signal), which fires
    /// when the spawning *thread* exits.
    pub fn kill_on_drop(&mut self, on: bool) -> &mut Child {
        self.kill_on_drop = on;
        self
    }

    /// The child's process id (as std's `id`).
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// The child's process id as a signed `pid_t`.
    pub fn pid(&self) -> i32 {
        self.pid as i32
    }

    /// The child's pidfd, for `poll`/`epoll` or `pidfd_*` calls.
    ///
    /// # Errors
    /// `Unsupported` when the kernel gave none (before Linux 5.3).
    pub fn pidfd(&self) -> io::Result<BorrowedFd<'_>> {
        self.pidfd
            .as_ref()
            .map(|fd| fd.as_fd())
            .ok_or_else(|| crate::error::unsupported("this kernel has no pidfd"))
    }

    /// Sends `SIGKILL` to the child (as std's `kill`). If the child was already reaped, this
    /// returns `Ok(())`, as std does.
    pub fn kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        self.signal(libc::SIGKILL)
    }

    /// Sends `sig` to the child with `pidfd_send_signal`, so that a recycled pid can never be hit.
    ///
    /// # Errors
    /// `ESRCH` (kind `NotFound`... as the OS maps it) once the child has been reaped by this
    /// handle; the kernel's error otherwise (`EINVAL` for a bad signal number).
    ///
    /// # References
    /// - [`pidfd_send_signal(2)`](https://man7.org/linux/man-pages/man2/pidfd_send_signal.2.html)
    pub fn signal(&mut self, sig: i32) -> io::Result<()> {
        if self.status.is_some() {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        match &self.pidfd {
            Some(fd) => sys::pidfd_send_signal(fd.as_raw_fd(), sig)
                .map_err(|e| io::Error::from_raw_os_error(e.raw())),
            None => {
                // Without a pidfd, kill(pid) is still exact: the child is not reaped, so its
                // pid cannot have been given to anyone else.
                // SAFETY: kill takes plain integers.
                if unsafe { libc::kill(self.pid as i32, sig) } == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            }
        }
    }

    /// Waits for the child to exit and reaps it. Closes the child's stdin first, as std does, so
    /// a child reading it sees EOF.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        if let Some(status) = self.status {
            return Ok(status);
        }
        loop {
            match self.waitid(0) {
                Ok(Some(status)) => return Ok(status),
                Ok(None) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reaps the child if it has exited, without blocking.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        self.waitid(libc::WNOHANG)
    }

    /// Waits at most `timeout` for the child to exit; `Ok(None)` if it is still running.
    ///
    /// Sleeps in `poll` on the pidfd (which becomes readable when the child exits), so it wakes
    /// the moment the child is done and burns no CPU meanwhile.
    ///
    /// # Errors
    /// `Unsupported` without a pidfd.
    pub fn wait_timeout(&mut self, timeout: Duration) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let fd = self.pidfd()?.as_raw_fd();
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // Round up so a sub-millisecond remainder still sleeps rather than spins.
            let ms = left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
            match poll(&mut [poll_entry(Some(&fd), libc::POLLIN)], ms) {
                Ok(0) => {}
                Ok(_) => return self.try_wait(),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }

    /// Waits for the child and collects all of its stdout and stderr (as std's
    /// `wait_with_output`). Both pipes are drained by one poll loop, so no deadlock.
    pub fn wait_with_output(mut self) -> io::Result<Output> {
        self.communicate(&[])
    }

    /// Writes `input` to the child's stdin while reading its stdout and stderr, then closes
    /// stdin, waits, and returns everything.
    ///
    /// One poll loop serves the three pipes, so a child that writes megabytes before it reads its
    /// input cannot deadlock against us. If the child exits or closes stdin before taking all of
    /// `input`, the rest is dropped (as Python's `communicate` does) and the output is still
    /// returned.
    ///
    /// # Errors
    /// `InvalidInput` when `input` is not empty but stdin was not piped (the child and its pipes
    /// are left untouched); I/O errors of the pipes.
    pub fn communicate(&mut self, input: &[u8]) -> io::Result<Output> {
        if self.stdin.is_none() && !input.is_empty() {
            return Err(crate::error::invalid_input(
                "communicate: input given but the child's stdin is not piped",
            ));
        }
        let stdin = self.stdin.take();
        let mut out = Vec::new();
        let mut err = Vec::new();
        pump(
            stdin,
            input,
            self.stdout.take(),
            &mut out,
            self.stderr.take(),
            &mut err,
        )?;
        let status = self.wait()?;
        Ok(Output {
            status,
            stdout: out,
            stderr: err,
        })
    }

    /// `waitid(P_PIDFD, ...)`, or `P_PID` without a pidfd; caches the status once reaped.
    ///
    /// # References
    /// - [`waitid(2)`](https://man7.org/linux/man-pages/man2/waitid.2.html)
    fn waitid(&mut self, flags: i32) -> io::Result<Option<ExitStatus>> {
        // SAFETY: an all-zero siginfo_t is a valid out-parameter; si_pid stays 0 when WNOHANG
        // finds nothing.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let (idtype, id) = match &self.pidfd {
            Some(fd) => (libc::P_PIDFD, fd.as_raw_fd() as libc::id_t),
            None => (libc::P_PID, self.pid as libc::id_t),
        };
        // SAFETY: waitid writes only `info`.
        if unsafe { libc::waitid(idtype, id, &mut info, libc::WEXITED | flags) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: after a successful waitid these union fields are the ones the kernel filled.
        let (pid, code, status) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
        if pid == 0 {
            return Ok(None);
        }
        let raw = match code {
            libc::CLD_EXITED => (status & 0xff) << 8,
            libc::CLD_KILLED => status & 0x7f,
            libc::CLD_DUMPED => (status & 0x7f) | 0x80,
            _ => status,
        };
        let status = ExitStatus::from_raw(raw);
        self.status = Some(status);
        Ok(Some(status))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.kill_on_drop && self.status.is_none() {
            let _ = self.signal(libc::SIGKILL);
            let _ = self.wait();
        }
    }
}

/// Writes `input` into `stdin` while draining `stdout` and `stderr`, with one `poll` loop.
///
/// The loop is shaped for the common case of a short-lived child, whose every syscall counts
/// when thousands are run:
/// - the input is written once before the first `poll`: a fresh pipe (64 KiB on Linux) usually
///   takes all of it at once, and stdin is closed straight away;
/// - once nothing is left to write and one output pipe remains, that pipe is read to its end
///   with blocking `read`s, which wait exactly as `poll` would, without a `poll` per read.
///
/// With two outputs, or input still to write, every wait is a `poll` on all of them, so a child
/// that fills one pipe while we wait on another can never deadlock.
///
/// # References
/// - [`poll(2)`](https://man7.org/linux/man-pages/man2/poll.2.html),
///   [`pipe(7)`](https://man7.org/linux/man-pages/man7/pipe.7.html) (capacity, `O_NONBLOCK`)
fn pump(
    stdin: Option<ChildStdin>,
    input: &[u8],
    stdout: Option<ChildStdout>,
    out: &mut Vec<u8>,
    stderr: Option<ChildStderr>,
    err: &mut Vec<u8>,
) -> io::Result<()> {
    let mut written = 0;
    let mut stdin = match stdin {
        Some(mut s) if !input.is_empty() => {
            set_nonblocking(s.as_raw_fd())?;
            // `None` once all the input is in: dropping stdin then gives the child end of file.
            (!write_some(&mut s, input, &mut written)?).then_some(s)
        }
        // Nothing to write: closing stdin now gives the child EOF at once.
        _ => None,
    };
    let mut stdout = stdout;
    let mut stderr = stderr;
    loop {
        match (&stdin, &stdout, &stderr) {
            (None, None, None) => return Ok(()),
            (None, Some(pipe), None) => return read_to_end(pipe, out),
            (None, None, Some(pipe)) => return read_to_end(pipe, err),
            _ => {}
        }
        let mut fds = [
            poll_entry(stdin.as_ref(), libc::POLLOUT),
            poll_entry(stdout.as_ref(), libc::POLLIN),
            poll_entry(stderr.as_ref(), libc::POLLIN),
        ];
        if let Err(e) = poll(&mut fds, -1) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[0].revents != 0 {
            if let Some(s) = stdin.as_mut() {
                if write_some(s, input, &mut written)? {
                    stdin = None;
                }
            }
        }
        if fds[1].revents != 0 && drain(&stdout, out)? {
            stdout = None;
        }
        if fds[2].revents != 0 && drain(&stderr, err)? {
            stderr = None;
        }
    }
}

/// A `poll` entry waiting for `events` on `pipe`, or one that `poll` ignores (fd -1).
fn poll_entry<P: AsRawFd>(pipe: Option<&P>, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd: pipe.map_or(-1, |p| p.as_raw_fd()),
        events,
        revents: 0,
    }
}

/// `poll` for at most `timeout_ms` (-1: no limit); the number of entries with events.
///
/// # References
/// - [`poll(2)`](https://man7.org/linux/man-pages/man2/poll.2.html)
fn poll(fds: &mut [libc::pollfd], timeout_ms: libc::c_int) -> io::Result<usize> {
    // SAFETY: `fds` is a valid array of pollfd entries of the length given; negative fds are
    // ignored by poll.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if ready < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ready as usize)
}

/// Writes what the non-blocking `stdin` takes of `input[*written..]`; `true` when nothing is
/// left to write, either because all of it is in or because the child closed its end (the rest
/// has no reader).
fn write_some(stdin: &mut ChildStdin, input: &[u8], written: &mut usize) -> io::Result<bool> {
    match stdin.write(&input[*written..]) {
        Ok(n) => *written += n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => *written = input.len(),
        Err(e) => return Err(e),
    }
    Ok(*written == input.len())
}

/// Reads `pipe` to its end with blocking reads. A pipe the caller made non-blocking is waited
/// for with `poll` when it has nothing yet.
fn read_to_end<R: AsRawFd>(pipe: &R, into: &mut Vec<u8>) -> io::Result<()> {
    loop {
        match read_once(pipe, into) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                match poll(&mut [poll_entry(Some(pipe), libc::POLLIN)], -1) {
                    Err(e) if e.kind() != io::ErrorKind::Interrupted => return Err(e),
                    _ => {}
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Room made in the output before a read when less than [`MIN_READ`] is free: a few typical
/// outputs fit in one read, and the vector still doubles as it grows, so a large output costs
/// few reads.
const READ_CHUNK: usize = 16 * 1024;

/// The least free room a read is given; less than this and the output grows first. Reading into
/// what is left rather than growing for every read spares a short output its copy.
const MIN_READ: usize = 4 * 1024;

/// Reads once from a pipe that `poll` found readable; `true` at end of file.
///
/// One `read` per wake-up: after `POLLIN` it returns at once with what the pipe holds, so the
/// pipe needs no `O_NONBLOCK` (nor the two `fcntl` calls to set it), and there is no extra
/// `read` to learn that the pipe is empty; `poll` says so. A descriptor the caller made
/// non-blocking is fine too: "would block" reads as nothing yet.
fn drain<R: AsRawFd>(pipe: &Option<R>, into: &mut Vec<u8>) -> io::Result<bool> {
    let Some(p) = pipe else {
        return Ok(true);
    };
    match read_once(p, into) {
        Ok(at_end) => Ok(at_end),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// One `read` from `pipe` straight into the spare capacity of `into` (no bounce buffer to zero
/// and copy); `true` at end of file.
///
/// # References
/// - [`read(2)`](https://man7.org/linux/man-pages/man2/read.2.html)
fn read_once<R: AsRawFd>(pipe: &R, into: &mut Vec<u8>) -> io::Result<bool> {
    if into.capacity() - into.len() < MIN_READ {
        into.reserve(READ_CHUNK);
    }
    let spare = into.spare_capacity_mut();
    // SAFETY: read writes at most `spare.len()` bytes into the vector's spare capacity, which
    // this function borrows exclusively.
    let n = unsafe { libc::read(pipe.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n == 0 {
        return Ok(true);
    }
    // SAFETY: the kernel initialized the first `n` bytes of the spare capacity (n <= its length).
    unsafe { into.set_len(into.len() + n as usize) };
    Ok(false)
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
