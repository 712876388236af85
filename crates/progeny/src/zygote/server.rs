//! The zygote's side: the template process, the server it makes, and the children the server
//! clones for the caller.
//!
//! Everything here runs in processes forked from the caller while it was single-threaded, so
//! ordinary Rust (allocation included) is safe: no other thread can have held a lock at the
//! fork. None of it ever returns into the caller's frames that the fork copied: every path ends
//! in `exit_group`, and a panic is caught before it could unwind into them.
//!
//! The exception is the child of a request without hooks, which shares the server's memory
//! (`CLONE_VM`): [`prelude`] and [`vm_main`] follow the child contract of `progeny-child` (raw
//! system calls only, no allocation, no locks, no panic path).
#![allow(unsafe_code)]

use std::ffi::c_int;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};

use progeny_child::{Failure, Plan, SignalReset};
use progeny_sys as sys;

use super::request::{decode, Decoded};
use super::wire::{recv, recv_request, send, Writer};
use super::{Hook, ZStep};
use crate::error::invalid_input;
use crate::plan::{gaps, Prepared};
use crate::spawn::ChildStack;

/// What the caller asks the template for.
pub(crate) const MAKE_SERVER: u8 = 1;

/// How the server clones a child for a request with hooks: fork-style, so that they may
/// allocate.
pub(crate) const FORK_FLAGS: u64 = libc::CLONE_PARENT as u64 | sys::CLONE_PIDFD;

/// How the server clones a child for a request without hooks: sharing its memory, as a direct
/// spawn does (without `CLONE_VFORK`: the server goes on while the child execs).
pub(crate) const VM_FLAGS: u64 = sys::CLONE_VM | FORK_FLAGS;

/// Answer status: the child exists.
pub(crate) const OK: u32 = 0;
/// Answer status: an errno follows (the clone, or preparing for it, failed).
pub(crate) const ERRNO: u32 = 1;
/// Answer status: the request did not parse.
pub(crate) const MALFORMED: u32 = 2;

/// Runs `body` in a forked process and exits with its status; a panic exits with 101 instead of
/// unwinding into the frames the fork copied from the caller.
pub(crate) fn forked_main(body: impl FnOnce() -> i32) -> ! {
    let status = catch_unwind(AssertUnwindSafe(body)).unwrap_or(101);
    sys::exit_group(status)
}

/// Dies with the caller: `PR_SET_PDEATHSIG(SIGKILL)`, then the check that closes the race where
/// the caller died before the death signal was armed (our parent would then no longer be it).
///
/// # Caveats
/// The "parent" of `PR_SET_PDEATHSIG` is the *thread* that created the process: the template is
/// forked by the thread that calls `Zygote::start` (the only one), and the server, cloned with
/// `CLONE_PARENT`, has the same parent thread.
///
/// # References
/// - [`PR_SET_PDEATHSIG(2const)`](https://man7.org/linux/man-pages/man2/PR_SET_PDEATHSIG.2const.html)
fn die_with(caller: i32) -> bool {
    // SAFETY: prctl with integer arguments only.
    let armed = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    armed == 0 && sys::getppid() == caller
}

/// Closes every descriptor but `keep`, so the zygote holds nothing of the caller's: no pipe end
/// that would delay someone's end of file, no file that would stay locked.
///
/// # References
/// - [`close_range(2)`](https://man7.org/linux/man-pages/man2/close_range.2.html)
fn close_all_but(keep: RawFd) {
    let keep = keep as u32;
    let ranged = (keep == 0 || sys::close_range(0, keep - 1, 0).is_ok())
        && sys::close_range(keep + 1, u32::MAX, 0).is_ok();
    if !ranged {
        // Before Linux 5.9: close what /proc lists (collected first, the listing holds a
        // descriptor of its own).
        let open: Vec<c_int> = std::fs::read_dir("/proc/self/fd")
            .map(|dir| {
                dir.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        for fd in open {
            if fd != keep as c_int {
                let _ = sys::close(fd);
            }
        }
    }
}

/// Blocks every signal and resets every disposition to the default.
///
/// The zygote must not run the caller's handlers (they would act on a copy of the caller), and
/// must not die of a signal meant for the caller's process group, such as the terminal's
/// `SIGINT`: it dies with the caller instead. Children inherit the full mask and set their own
/// right before `execve`; they get the caller's ignored signals from each request.
fn quiet_signals() {
    let _ = sys::rt_sigprocmask(libc::SIG_SETMASK, Some(&sys::SIGSET_ALL), None);
    let default = sys::KernelSigaction::default();
    for sig in 1..=sys::NSIG {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            let _ = sys::rt_sigaction(sig, Some(&default), None);
        }
    }
}

/// `clone(CLONE_PARENT|CLONE_PIDFD|SIGCHLD)` without a new stack: fork-style, the child returns
/// here with a copy of our memory. `CLONE_PARENT` makes the new process a child of *our* parent,
/// the caller, which can then wait for it and reap it like any child of its own; the pidfd lets
/// the caller signal and wait without racing pid reuse.
///
/// With `CLONE_PARENT` the kernel gives the child our own exit signal rather than the one passed
/// here; ours is `SIGCHLD` (the template was forked, the server cloned with `SIGCHLD`), so the
/// caller sees an ordinary child.
///
/// # References
/// - [`clone(2)`](https://man7.org/linux/man-pages/man2/clone.2.html)
fn clone_parent() -> io::Result<Option<(u32, OwnedFd)>> {
    let flags = FORK_FLAGS | libc::SIGCHLD as u64;
    let mut pidfd: c_int = -1;
    // SAFETY: without CLONE_VM the child gets its own copy of this stack and returns here like
    // after fork; with CLONE_PIDFD the kernel writes the pidfd into `pidfd` (the parent_tid
    // argument). This process is single-threaded, so the child inherits no held lock.
    let ret = unsafe {
        sys::syscall6(
            libc::SYS_clone,
            [
                flags as usize,
                0,
                &mut pidfd as *mut c_int as usize,
                0,
                0,
                0,
            ],
        )
    };
    match ret {
        Ok(0) => Ok(None),
        // SAFETY: CLONE_PIDFD stored a fresh descriptor that nothing else owns.
        Ok(pid) => Ok(Some((pid as u32, unsafe { OwnedFd::from_raw_fd(pidfd) }))),
        Err(e) => Err(io::Error::from_raw_os_error(e.raw())),
    }
}

/// A close-on-exec `SOCK_SEQPACKET` pair.
///
/// # References
/// - [`socketpair(2)`](https://man7.org/linux/man-pages/man2/socketpair.2.html)
pub(crate) fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as c_int; 2];
    // SAFETY: socketpair writes two descriptors into `fds`.
    let ret = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The template: a pristine single-threaded copy of the caller, kept only to make servers.
///
/// A server that dies (killed, out of memory) can be replaced from here without forking the
/// caller again, which by then is usually multithreaded: a fork of it could inherit a lock held
/// by another thread and deadlock in a hook.
pub(crate) fn template_main(ctl: OwnedFd, caller: i32, hooks: &[(String, Hook)]) -> i32 {
    if !die_with(caller) {
        return 0;
    }
    close_all_but(ctl.as_raw_fd());
    quiet_signals();
    let mut buf = [0u8; 16];
    loop {
        match recv(ctl.as_raw_fd(), &mut buf) {
            Ok(Some((1, fds))) if fds.is_empty() && buf[0] == MAKE_SERVER => {}
            // End of file (the caller dropped the zygote) or nonsense: leave.
            _ => return 0,
        }
        let mut answer = Writer::default();
        let made = seqpacket_pair().and_then(|(ours, theirs)| {
            match clone_parent()? {
                // The server closes everything but `theirs` first thing, the control socket
                // included: the caller's end of file on it is how the template learns to exit.
                None => forked_main(|| server_main(theirs, caller, hooks)),
                Some((pid, pidfd)) => Ok((pid, pidfd, ours)),
            }
        });
        let fds = match &made {
            Ok((pid, pidfd, ours)) => {
                answer.u32(OK);
                answer.u32(*pid);
                answer.i32(0);
                vec![ours.as_raw_fd(), pidfd.as_raw_fd()]
            }
            Err(e) => {
                answer.u32(ERRNO);
                answer.u32(0);
                answer.i32(e.raw_os_error().unwrap_or(libc::EIO));
                Vec::new()
            }
        };
        if send(ctl.as_raw_fd(), &answer.0, &fds).is_err() {
            return 0;
        }
    }
}

/// The server: receives requests, clones one child per request, answers with its pid and pidfd.
fn server_main(sock: OwnedFd, caller: i32, hooks: &[(String, Hook)]) -> i32 {
    if !die_with(caller) {
        return 0;
    }
    // The socket may have been made on a low number; keep it off the standard streams.
    let sock = match sys::fcntl_int(sock.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) {
        // SAFETY: F_DUPFD_CLOEXEC returned a fresh descriptor that nothing else owns.
        Ok(high) => unsafe { OwnedFd::from_raw_fd(high) },
        Err(_) => return 1,
    };
    close_all_but(sock.as_raw_fd());
    // /dev/null on 0, 1 and 2, so that nothing the server receives lands on a standard stream:
    // a hook that prints (or panics) writes to /dev/null, not into a descriptor on its way to
    // the child. The child closes or replaces them like any inherited descriptor.
    if let Ok(null) = std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        // With 0, 1 and 2 closed, the file is on 0: copy it to 1 and 2 and keep it there, all
        // three inheritable like standard streams (the child's plan decides what survives).
        let null = OwnedFd::from(null);
        let _ = sys::fcntl_int(null.as_raw_fd(), libc::F_SETFD, 0);
        let _ = sys::dup3(null.as_raw_fd(), 1, 0);
        let _ = sys::dup3(null.as_raw_fd(), 2, 0);
        std::mem::forget(null);
    }
    let mut flights: Vec<Flight> = Vec::new();
    let mut stacks: Vec<ChildStack> = Vec::new();
    loop {
        // Wait for a request or for children in flight to exec (or exit), whichever comes
        // first; a child that is done frees its plan and its stack.
        let mut pfds: Vec<libc::pollfd> = std::iter::once(sock.as_raw_fd())
            .chain(flights.iter().map(|f| f.done.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `pfds` is a valid array of pollfd of the length passed.
        if unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) } < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return 1;
        }
        for i in (0..flights.len()).rev() {
            if pfds[i + 1].revents != 0 {
                stacks.push(flights.swap_remove(i).land());
            }
        }
        if pfds[0].revents == 0 {
            continue;
        }
        let (body, fds) = match recv_request(sock.as_raw_fd()) {
            Ok(Some(request)) => request,
            // The caller closed its end (restart or drop) or died: nothing more to do. A
            // request that does not even frame means the stream is out of step: leave too, and
            // the caller reports the zygote as gone.
            Ok(None) | Err(_) => return 0,
        };
        let mut answer = Writer::default();
        let mut pidfd = None;
        match decode(&body, fds) {
            Err(_) => {
                // Without a readable id there is no answer to match; this id is never used.
                answer.u64(u64::MAX);
                answer.u32(MALFORMED);
                answer.u32(0);
                answer.i32(0);
            }
            Ok(request) => {
                answer.u64(request.id);
                let room = Room {
                    stacks: &mut stacks,
                    flights: &mut flights,
                };
                match start_child(request, hooks, room, sock.as_raw_fd()) {
                    Ok((pid, fd)) => {
                        answer.u32(OK);
                        answer.u32(pid);
                        answer.i32(0);
                        pidfd = Some(fd);
                    }
                    Err(e) => {
                        answer.u32(ERRNO);
                        answer.u32(0);
                        answer.i32(e.raw_os_error().unwrap_or(libc::EINVAL));
                    }
                }
            }
        }
        let fds: Vec<RawFd> = pidfd.iter().map(|fd| fd.as_raw_fd()).collect();
        if send(sock.as_raw_fd(), &answer.0, &fds).is_err() {
            return 0;
        }
        // `pidfd` and every descriptor of the request close here: the server goes back to
        // holding its socket alone (and the done pipes of children still in flight).
    }
}

/// Where the server keeps children in flight: `CLONE_VM` children that have not exec'ed yet, and
/// the stacks that finished ones gave back.
struct Room<'a> {
    stacks: &'a mut Vec<ChildStack>,
    flights: &'a mut Vec<Flight>,
}

/// Clones the child for `request`; returns its pid and pidfd. The request's descriptors close
/// when this returns (the child has its copies).
fn start_child(
    request: Decoded,
    hooks: &[(String, Hook)],
    room: Room<'_>,
    sock: RawFd,
) -> io::Result<(u32, OwnedFd)> {
    let Decoded {
        id: _,
        mut prepared,
        cwd_fd,
        report,
        ignored,
        hooks: wanted,
    } = request;
    if wanted.iter().any(|(i, _)| *i as usize >= hooks.len()) {
        return Err(invalid_input("unknown zygote hook"));
    }
    // A child that shares our memory tells us it is done (exec'ed or exited) by closing this
    // pipe's write end: it is close-on-exec and only the child holds it once cloned.
    let (done, done_writer) = if wanted.is_empty() {
        let (r, w) = std::io::pipe()?;
        (Some(OwnedFd::from(r)), Some(OwnedFd::from(w)))
    } else {
        (None, None)
    };
    let report = keep(&mut prepared, report)?;
    let done_writer = done_writer.map(|w| keep(&mut prepared, w)).transpose()?;
    let mapped: Vec<i32> = prepared.fds.iter().map(|m| m.dst).collect();
    prepared.close_ranges = gaps(
        mapped
            .iter()
            .copied()
            .chain(prepared.reserved.iter().copied()),
    );
    // Standard streams that the request leaves unmapped are closed, as a direct spawn from a
    // caller without them would have them: the zygote's own low numbers hold other things.
    for n in 0..3u32 {
        if !mapped.contains(&(n as i32)) {
            prepared.close_ranges.push((n, n));
        }
    }
    let prelude = Prelude {
        sock,
        cwd_fd,
        ignored,
        report: report.as_raw_fd(),
    };
    if let (Some(done), Some(_writer)) = (done, &done_writer) {
        // The child gets its own copy of our descriptor table at the clone: ours of the
        // request's descriptors, the report and the done pipe's write end close when this
        // returns (`_writer` included), so the next children cannot inherit them.
        let received = std::mem::take(&mut prepared.child_ends);
        let started = clone_vm(room, prepared, prelude, done);
        drop(received);
        return started;
    }
    let setup = ChildSetup {
        prelude,
        hooks: &wanted,
    };
    match clone_parent()? {
        None => child_main(&mut prepared, &setup, hooks),
        Some(child) => Ok(child),
    }
}

/// Keeps `fd` open in the child until exec: it must not sit on a destination (a placement would
/// overwrite it) and must stay out of the ranges that close-the-rest closes (the caller
/// recomputes them from `reserved`). Relocated copies go at or above the relocation floor, to
/// free numbers, so they cannot land on it either. Unlike the fork backend's report pipe, it is
/// not moved above the floor: with a destination near the descriptor limit that would fail
/// here, where a direct spawn fails in the child with the step and errno the caller must see.
fn keep(prepared: &mut Prepared, fd: OwnedFd) -> io::Result<OwnedFd> {
    let dsts: Vec<i32> = prepared.fds.iter().map(|m| m.dst).collect();
    let mut fd = fd;
    while dsts.contains(&fd.as_raw_fd()) {
        let moved = sys::fcntl_int(
            fd.as_raw_fd(),
            libc::F_DUPFD_CLOEXEC,
            fd.as_raw_fd().saturating_add(1),
        )
        .map_err(|e| io::Error::from_raw_os_error(e.raw()))?;
        // SAFETY: F_DUPFD_CLOEXEC returned a fresh descriptor that nothing else owns.
        fd = unsafe { OwnedFd::from_raw_fd(moved) };
    }
    prepared.reserved.push(fd.as_raw_fd());
    Ok(fd)
}

/// What a `CLONE_VM` child reads: its plan and its prelude. It lives on the heap, at an address
/// that does not move, until the child is done.
struct VmChild {
    plan: Plan<'static>,
    prelude: Prelude,
}

/// A `CLONE_VM` child that may still be running on our memory: what it reads, its stack, and
/// the pipe that tells when it is done.
struct Flight {
    /// Readable (end of file) once the child has exec'ed or exited.
    done: OwnedFd,
    /// From `Box::into_raw`: what the child reads; borrows from `prepared`.
    child: *mut VmChild,
    /// From `Box::into_raw`: the plan's strings, arrays and placements.
    prepared: *mut Prepared,
    stack: ChildStack,
}

impl Flight {
    /// Frees what the child read, now that it is done, and returns its stack.
    fn land(self) -> ChildStack {
        // SAFETY: both pointers come from Box::into_raw in `clone_vm` and are freed only here,
        // once; the child no longer runs on our memory (its done pipe is closed), and the plan
        // that borrows from `prepared` is freed first.
        unsafe {
            drop(Box::from_raw(self.child));
            drop(Box::from_raw(self.prepared));
        }
        self.stack
    }
}

/// The common case, a request without hooks: `clone(CLONE_VM|CLONE_PARENT|CLONE_PIDFD)` on a
/// stack of its own. The child copies no page tables (nor does its exec have to tear a copy
/// down) and runs only raw system calls on memory the server leaves alone until the child is
/// done. Without `CLONE_VFORK` the server answers at once and takes the next request while the
/// child execs, so children of several callers exec in parallel.
///
/// # References
/// - [`clone(2)`](https://man7.org/linux/man-pages/man2/clone.2.html)
fn clone_vm(
    room: Room<'_>,
    prepared: Prepared,
    prelude: Prelude,
    done: OwnedFd,
) -> io::Result<(u32, OwnedFd)> {
    let stack = match room.stacks.pop() {
        Some(stack) => stack,
        None => ChildStack::new()?,
    };
    let prepared = Box::into_raw(Box::new(prepared));
    // SAFETY: `prepared` is a live heap allocation that nothing else touches until the flight
    // lands; the plan's lifetime is extended to match, and `Flight::land` frees the plan before
    // `prepared`.
    let plan: Plan<'static> = unsafe { (*prepared).plan(SignalReset::SigpipeOnly) };
    let child = Box::into_raw(Box::new(VmChild { plan, prelude }));
    let flight = Flight {
        done,
        child,
        prepared,
        stack,
    };
    let flags = VM_FLAGS | libc::SIGCHLD as u64;
    let mut pidfd: c_int = -1;
    // SAFETY: the stack is ours, mapped, page-aligned at the top and used by no one else until
    // the flight lands; `child` and what it points to stay allocated and untouched by us until
    // then; the child runs only raw system calls and the allocation-free plan executor.
    let ret = unsafe {
        sys::clone_run(
            flags,
            flight.stack.top(),
            &mut pidfd,
            vm_main,
            child as *mut libc::c_void,
        )
    };
    match sys::clone_result(ret) {
        Ok(pid) => {
            room.flights.push(flight);
            // SAFETY: CLONE_PIDFD stored a fresh descriptor that nothing else owns.
            Ok((pid, unsafe { OwnedFd::from_raw_fd(pidfd) }))
        }
        Err(e) => {
            // No child: nothing runs on this memory.
            room.stacks.push(flight.land());
            Err(io::Error::from_raw_os_error(e.raw()))
        }
    }
}

/// The `CLONE_VM` child: the prelude, then the plan; a failure goes into the report pipe.
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
///
/// # Safety
/// `arg` must point to a live [`VmChild`] that nothing else touches until the child has exec'ed
/// or exited.
unsafe extern "C" fn vm_main(arg: *mut libc::c_void) -> c_int {
    // SAFETY: the caller guarantees `arg` is a VmChild exclusively ours for now.
    let child = unsafe { &mut *(arg as *mut VmChild) };
    let failure = match prelude(&child.prelude) {
        Ok(()) => progeny_child::execute(&mut child.plan),
        Err(failure) => failure,
    };
    let _ = sys::write(child.prelude.report, &failure.encode());
    127
}

/// What every zygote child does before the plan; plain numbers, so a `CLONE_VM` child can read
/// it.
#[derive(Clone, Copy)]
struct Prelude {
    /// The server's socket, which the child must not keep.
    sock: RawFd,
    /// The caller's working directory, to enter.
    cwd_fd: Option<RawFd>,
    /// The signals the caller ignores.
    ignored: u64,
    /// Where the pid and a failure go.
    report: RawFd,
}

/// What a fork-style child does before the plan: the prelude and the hooks.
struct ChildSetup<'a> {
    prelude: Prelude,
    hooks: &'a [(u32, Vec<u8>)],
}

/// Writes a failure (and a message, for hooks) into the report pipe and exits 127.
fn fail(report: RawFd, failure: Failure, message: &[u8]) -> ! {
    let mut bytes = failure.encode().to_vec();
    bytes.extend_from_slice(&message[..message.len().min(1024)]);
    // One write under PIPE_BUF is atomic; if it fails the caller sees a child that exited 127
    // without a report.
    let _ = sys::write(report, &bytes);
    sys::exit_group(127)
}

fn failure(step: ZStep, errno: i32, index: usize) -> Failure {
    Failure {
        step: step as u32,
        errno,
        index: index as u32,
    }
}

/// What every zygote child does first: report its pid, ignore the signals the caller ignores,
/// and enter the caller's working directory.
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
fn prelude(setup: &Prelude) -> Result<(), Failure> {
    // The child's copy of the server's socket would keep the caller from seeing the server's
    // death (end of file) for as long as the child lives, a hook that blocks included.
    let _ = sys::close(setup.sock);
    // The pid first: should the zygote die before its answer reaches the caller, the caller
    // still learns which child to wait for.
    let _ = sys::write(setup.report, &(sys::getpid() as u32).to_ne_bytes());
    let ignore = sys::KernelSigaction {
        handler: sys::SIG_IGN,
        ..Default::default()
    };
    for sig in 1..=sys::NSIG {
        let ignored = setup.ignored & (1u64 << (sig - 1)) != 0;
        if ignored && sig != libc::SIGKILL && sig != libc::SIGSTOP && sig != libc::SIGPIPE {
            sys::rt_sigaction(sig, Some(&ignore), None)
                .map_err(|e| failure(ZStep::IgnoreSignal, e.raw(), sig as usize))?;
        }
    }
    if let Some(fd) = setup.cwd_fd {
        // SAFETY: fchdir takes an integer.
        unsafe { sys::syscall6(libc::SYS_fchdir, [fd as usize, 0, 0, 0, 0, 0]) }
            .map_err(|e| failure(ZStep::CallerCwd, e.raw(), 0))?;
    }
    Ok(())
}

/// The fork-style child of a request with hooks: the prelude, the hooks, then the plan. Never
/// returns.
///
/// This is a fork-style child of a single-threaded process: it has its own copy of the memory
/// and no lock can be held by anyone else, which is why the hooks may allocate.
fn child_main(prepared: &mut Prepared, setup: &ChildSetup<'_>, hooks: &[(String, Hook)]) -> ! {
    let report = setup.prelude.report;
    if let Err(f) = prelude(&setup.prelude) {
        fail(report, f, b"");
    }
    for (position, (index, data)) in setup.hooks.iter().enumerate() {
        let Some((_, hook)) = hooks.get(*index as usize) else {
            fail(
                report,
                failure(ZStep::Hook, libc::EINVAL, position),
                b"unknown hook",
            );
        };
        match catch_unwind(AssertUnwindSafe(|| hook(data))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let errno = e.raw_os_error().unwrap_or(0);
                let f = failure(ZStep::Hook, errno, position);
                fail(report, f, e.to_string().as_bytes());
            }
            Err(_) => fail(
                report,
                failure(ZStep::Hook, 0, position),
                b"the hook panicked",
            ),
        }
    }
    let mut plan = prepared.plan(SignalReset::SigpipeOnly);
    progeny_child::child_main_forked(&mut plan, report)
}
