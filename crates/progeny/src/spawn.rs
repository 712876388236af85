//! The backends: how the child comes to exist before it executes the plan.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::{c_int, c_void, CString};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicU8, Ordering};

use progeny_child::{Failure, SharedChild, SignalReset, Step};
use progeny_sys as sys;

use crate::command::{Backend, Command, StdioDefault};
use crate::error::{unsupported, SpawnError, Subject};
use crate::plan::{gaps, prepare, Prepared};
use crate::Child;

/// Starts `cmd` with its backend.
pub(crate) fn spawn(
    cmd: &Command,
    stdin_default: StdioDefault,
    out_default: StdioDefault,
) -> io::Result<Child> {
    let mut prepared = prepare(cmd, stdin_default, out_default)?;
    let (pid, pidfd) = match cmd.backend {
        Backend::Clone3 => spawn_vfork_clone(&mut prepared, true)?,
        Backend::Clone => spawn_vfork_clone(&mut prepared, false)?,
        Backend::Fork => spawn_fork(&mut prepared)?,
        Backend::PosixSpawn => spawn_posix(&mut prepared)?,
    };
    // The child has its copies now; dropping `prepared` closes the child ends of pipes and
    // /dev/null in the parent, so that EOF arrives when the child closes its side.
    let pipes = std::mem::take(&mut prepared.pipes);
    Ok(Child::new(pid, pidfd, pipes))
}

/// The size of a child stack, without its guard page. The plan executor needs a few hundred
/// bytes; 64 KiB leaves room for debug builds, and the memory is reused spawn after spawn.
const STACK_SIZE: usize = 64 * 1024;

/// A stack for `CLONE_VM` children: an anonymous mapping with a `PROT_NONE` guard page below it,
/// so an overflow faults instead of writing over the parent's memory.
struct ChildStack {
    base: *mut u8,
    len: usize,
}

impl ChildStack {
    fn new() -> io::Result<ChildStack> {
        let guard = page_size();
        let len = STACK_SIZE + guard;
        // SAFETY: an anonymous private mapping at an address the kernel picks touches no existing
        // memory; the result is checked against MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the first page lies within the mapping just made, which nothing else uses yet.
        if unsafe { libc::mprotect(base, guard, libc::PROT_NONE) } != 0 {
            let err = io::Error::last_os_error();
            // SAFETY: unmapping the mapping we made and never handed out.
            unsafe { libc::munmap(base, len) };
            return Err(err);
        }
        Ok(ChildStack {
            base: base as *mut u8,
            len,
        })
    }

    /// The usable part: lowest address above the guard page, and its size.
    fn usable(&self) -> (*mut u8, usize) {
        let guard = self.len - STACK_SIZE;
        (self.base.wrapping_add(guard), STACK_SIZE)
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours, and no child runs on it: with CLONE_VFORK the stack is
        // free again once clone returns in the parent.
        unsafe { libc::munmap(self.base as *mut c_void, self.len) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as usize
    } else {
        4096
    }
}

thread_local! {
    /// One cached stack per thread: a thread is suspended while its vfork child uses the stack,
    /// so the stack is free again whenever the thread can spawn, and threads never share one.
    static STACK: Cell<Option<ChildStack>> = const { Cell::new(None) };
}

/// Blocks every signal in the calling thread, including the ones libc reserves for itself, and
/// restores the previous mask when dropped.
///
/// A signal handler that ran in the `CLONE_VM` child would run parent code on the child's stack
/// in shared memory; blocking everything before `clone` means the child starts with everything
/// blocked, and it unblocks only its own mask right before `execve`.
struct SignalsBlocked {
    old: sys::KernelSigset,
}

impl SignalsBlocked {
    fn new() -> io::Result<SignalsBlocked> {
        let mut old = 0;
        sys::rt_sigprocmask(libc::SIG_SETMASK, Some(&sys::SIGSET_ALL), Some(&mut old))
            .map_err(|e| io::Error::from_raw_os_error(e.raw()))?;
        Ok(SignalsBlocked { old })
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        let _ = sys::rt_sigprocmask(libc::SIG_SETMASK, Some(&self.old), None);
    }
}

/// Kernel support learned at run time, so that a refusal is paid for once per process.
const UNKNOWN: u8 = 0;
const YES: u8 = 1;
const NO: u8 = 2;
static CLONE3: AtomicU8 = AtomicU8::new(UNKNOWN);
static CLEAR_SIGHAND: AtomicU8 = AtomicU8::new(UNKNOWN);

/// `clone3` or `clone` with `CLONE_VM|CLONE_VFORK|CLONE_PIDFD` on a cached stack.
///
/// # References
/// - [`clone3(2)`](https://man7.org/linux/man-pages/man2/clone.2.html)
fn spawn_vfork_clone(
    prepared: &mut Prepared,
    prefer_clone3: bool,
) -> io::Result<(u32, Option<OwnedFd>)> {
    let stack = match STACK.take() {
        Some(stack) => stack,
        None => ChildStack::new()?,
    };
    let result = clone_on(&stack, prepared, prefer_clone3);
    STACK.set(Some(stack));
    let (pid, pidfd, report) = result?;
    // SAFETY: CLONE_PIDFD stored a fresh descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    if report.step != 0 {
        reap_failed(pid, Some(&pidfd));
        return Err(spawn_error(prepared, report).into());
    }
    Ok((pid, Some(pidfd)))
}

fn clone_on(
    stack: &ChildStack,
    prepared: &mut Prepared,
    prefer_clone3: bool,
) -> io::Result<(u32, c_int, Failure)> {
    let (stack_low, stack_size) = stack.usable();
    let mut use_clone3 = prefer_clone3 && CLONE3.load(Ordering::Relaxed) != NO;
    loop {
        let clear_sighand = use_clone3 && CLEAR_SIGHAND.load(Ordering::Relaxed) != NO;
        let reset = if clear_sighand {
            SignalReset::SigpipeOnly
        } else {
            SignalReset::AllCaught
        };
        let mut report = Failure::default();
        let mut plan = prepared.plan(reset);
        let mut shared = SharedChild {
            plan: &mut plan,
            report: &mut report,
        };
        let arg = &mut shared as *mut SharedChild<'_, '_> as *mut c_void;
        let mut pidfd: c_int = -1;
        let blocked = SignalsBlocked::new()?;
        let ret = if use_clone3 {
            let mut args = sys::CloneArgs {
                flags: sys::CLONE_VM
                    | sys::CLONE_VFORK
                    | sys::CLONE_PIDFD
                    | if clear_sighand {
                        sys::CLONE_CLEAR_SIGHAND
                    } else {
                        0
                    },
                pidfd: &mut pidfd as *mut c_int as u64,
                exit_signal: libc::SIGCHLD as u64,
                stack: stack_low as u64,
                stack_size: stack_size as u64,
                ..Default::default()
            };
            // SAFETY: `args` describes our private stack, unused until the child has exec'ed
            // or exited (CLONE_VFORK suspends us until then); `shared` and everything it points
            // to live in this frame or in `prepared`, which outlive the call; the child runs only
            // the allocation-free plan executor.
            unsafe {
                sys::clone3_run(
                    &mut args,
                    std::mem::size_of::<sys::CloneArgs>(),
                    progeny_child::child_main_shared,
                    arg,
                )
            }
        } else {
            let flags = sys::CLONE_VM | sys::CLONE_VFORK | sys::CLONE_PIDFD | libc::SIGCHLD as u64;
            // SAFETY: as for clone3: the stack top is page-aligned (so 16-byte aligned) and ours
            // alone; the pidfd slot and the shared block outlive the call.
            unsafe {
                sys::clone_run(
                    flags,
                    stack_low.wrapping_add(stack_size),
                    &mut pidfd,
                    progeny_child::child_main_shared,
                    arg,
                )
            }
        };
        drop(blocked);
        match sys::clone_result(ret) {
            Ok(pid) => {
                if use_clone3 {
                    CLONE3.store(YES, Ordering::Relaxed);
                    if clear_sighand {
                        CLEAR_SIGHAND.store(YES, Ordering::Relaxed);
                    }
                }
                // SAFETY: the child wrote the report (or not) before exec or exit, which happened
                // before clone returned here; the read is volatile because the write was made
                // behind the compiler's back, through the pointer in `shared`.
                let report = unsafe { ptr::read_volatile(&report) };
                return Ok((pid, pidfd, report));
            }
            // No clone3 here (old kernel, or a seccomp filter that answers ENOSYS as container
            // runtimes do): use the legacy call from now on.
            Err(sys::Errno::NOSYS) if use_clone3 => {
                CLONE3.store(NO, Ordering::Relaxed);
                use_clone3 = false;
            }
            // clone3 without CLONE_CLEAR_SIGHAND (kernels 5.3 and 5.4): reset by hand.
            Err(sys::Errno::INVAL)
                if clear_sighand && CLEAR_SIGHAND.load(Ordering::Relaxed) == UNKNOWN =>
            {
                CLEAR_SIGHAND.store(NO, Ordering::Relaxed);
            }
            Err(e) => return Err(io::Error::from_raw_os_error(e.raw())),
        }
    }
}

/// `fork` + `execve`, with the failure reported through a close-on-exec pipe.
///
/// # References
/// - [`fork(2)`](https://man7.org/linux/man-pages/man2/fork.2.html)
fn spawn_fork(prepared: &mut Prepared) -> io::Result<(u32, Option<OwnedFd>)> {
    let (mut report_reader, report_pipe) = std::io::pipe()?;
    // The child writes its failure into this pipe, so the pipe must outlive every step before
    // exec: put it above every destination (no placement can overwrite it, and relocations skip
    // it), and keep it out of the ranges that close-the-rest closes. It stays close-on-exec, so
    // EOF tells the parent that exec happened.
    let floor = prepared.relocate_floor;
    let report_writer = sys::fcntl_int(report_pipe.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor)
        // SAFETY: F_DUPFD_CLOEXEC returned a fresh descriptor that nothing else owns.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .map_err(|e| io::Error::from_raw_os_error(e.raw()))?;
    drop(report_pipe);
    if !prepared.close_ranges.is_empty() {
        let kept = prepared.fds.iter().map(|m| m.dst);
        prepared.close_ranges = gaps(kept.chain([report_writer.as_raw_fd()]));
    }
    let mut plan = prepared.plan(SignalReset::AllCaught);
    let blocked = SignalsBlocked::new()?;
    // SAFETY: the child runs only the allocation-free plan executor and raw system calls, which
    // is what is allowed after fork in a multithreaded process.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        progeny_child::child_main_forked(&mut plan, report_writer.as_raw_fd());
    }
    drop(blocked);
    drop(report_writer);
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let pid = pid as u32;
    let mut bytes = [0u8; Failure::WIRE_SIZE];
    let mut got = 0;
    while got < bytes.len() {
        match report_reader.read(&mut bytes[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                reap_failed(pid, None);
                return Err(e);
            }
        }
    }
    if got == bytes.len() {
        reap_failed(pid, None);
        return Err(spawn_error(prepared, Failure::decode(bytes)).into());
    }
    Ok((pid, pidfd_open(pid)))
}

/// glibc's `posix_spawn` (or `posix_spawnp` for a `PATH` search).
///
/// # References
/// - [`posix_spawn(3)`](https://man7.org/linux/man-pages/man3/posix_spawn.3.html)
fn spawn_posix(prepared: &mut Prepared) -> io::Result<(u32, Option<OwnedFd>)> {
    if prepared.uid.is_some() || prepared.gid.is_some() || prepared.groups.is_some() {
        return Err(unsupported("posix_spawn cannot set uid, gid or groups"));
    }
    if prepared.path_lookup && prepared.path_changed {
        return Err(unsupported(
            "posix_spawn searches the parent's PATH, not the one the command sets",
        ));
    }
    if prepared.fds.iter().any(|m| m.relocate) {
        return Err(unsupported(
            "posix_spawn cannot place descriptors whose numbers overlap",
        ));
    }
    // posix_spawn can only close everything from one number up, so the kept descriptors above 2
    // must be contiguous from 3.
    let closefrom = match prepared.close_ranges.as_slice() {
        [] => None,
        [(first, u32::MAX)] => Some(*first),
        _ => {
            return Err(unsupported(
                "posix_spawn cannot keep descriptors with gaps while closing the others",
            ))
        }
    };
    let mut actions = FileActions::new()?;
    for m in &prepared.fds {
        posix_check(
            // SAFETY: `actions` is initialised; dup2 actions take plain integers.
            unsafe { libc::posix_spawn_file_actions_adddup2(&mut actions.0, m.src, m.dst) },
        )?;
    }
    if let Some(first) = closefrom {
        posix_check(
            // SAFETY: `actions` is initialised.
            unsafe {
                libc::posix_spawn_file_actions_addclosefrom_np(&mut actions.0, first as c_int)
            },
        )?;
    }
    if let Some(cwd) = &prepared.cwd {
        posix_check(
            // SAFETY: `cwd` is NUL-terminated and glibc copies it.
            unsafe {
                libc::posix_spawn_file_actions_addchdir_np(&mut actions.0, cwd.as_ptr() as *const _)
            },
        )?;
    }
    let mut attr = SpawnAttr::new()?;
    let mut flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
    if let Some(pgroup) = prepared.pgroup {
        flags |= libc::POSIX_SPAWN_SETPGROUP;
        // SAFETY: `attr` is initialised.
        posix_check(unsafe { libc::posix_spawnattr_setpgroup(&mut attr.0, pgroup) })?;
    }
    if prepared.setsid {
        flags |= libc::POSIX_SPAWN_SETSID as c_int;
    }
    let mask = sigset(prepared.sigmask);
    let sigpipe = sigset(1u64 << (libc::SIGPIPE - 1));
    // SAFETY: `attr` is initialised; the sets are valid sigset_t values.
    unsafe {
        posix_check(libc::posix_spawnattr_setsigmask(&mut attr.0, &mask))?;
        posix_check(libc::posix_spawnattr_setsigdefault(&mut attr.0, &sigpipe))?;
        posix_check(libc::posix_spawnattr_setflags(
            &mut attr.0,
            flags as libc::c_short,
        ))?;
    }
    let mut pid: libc::pid_t = 0;
    let program = CString::new(prepared.program.as_encoded_bytes())
        .map_err(|_| crate::error::invalid_input("program contains a NUL byte"))?;
    // SAFETY: every pointer is a valid NUL-terminated string or NULL-terminated array owned by
    // `prepared`, and `actions`/`attr` are initialised; glibc reports the child's exec error as
    // the return value after the child is gone.
    let ret = unsafe {
        if prepared.path_lookup {
            libc::posix_spawnp(
                &mut pid,
                program.as_ptr(),
                &actions.0,
                &attr.0,
                prepared.argv.as_ptr() as *const *mut _,
                prepared.envp.as_ptr() as *const *mut _,
            )
        } else {
            libc::posix_spawn(
                &mut pid,
                program.as_ptr(),
                &actions.0,
                &attr.0,
                prepared.argv.as_ptr() as *const *mut _,
                prepared.envp.as_ptr() as *const *mut _,
            )
        }
    };
    if ret != 0 {
        return Err(SpawnError::new(
            Step::Exec,
            ret,
            Subject::PosixSpawn(prepared.program.clone()),
        )
        .into());
    }
    Ok((pid as u32, pidfd_open(pid as u32)))
}

/// posix_spawn's helpers return the error number instead of setting errno.
fn posix_check(ret: c_int) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

struct FileActions(libc::posix_spawn_file_actions_t);

impl FileActions {
    fn new() -> io::Result<FileActions> {
        // SAFETY: an all-zero value is a valid place for init to write into.
        let mut actions = FileActions(unsafe { std::mem::zeroed() });
        // SAFETY: init writes the structure it is given.
        let ret = unsafe { libc::posix_spawn_file_actions_init(&mut actions.0) };
        if ret != 0 {
            // Do not run Drop on an uninitialised structure.
            std::mem::forget(actions);
            return Err(io::Error::from_raw_os_error(ret));
        }
        Ok(actions)
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

struct SpawnAttr(libc::posix_spawnattr_t);

impl SpawnAttr {
    fn new() -> io::Result<SpawnAttr> {
        // SAFETY: an all-zero value is a valid place for init to write into.
        let mut attr = SpawnAttr(unsafe { std::mem::zeroed() });
        // SAFETY: init writes the structure it is given.
        let ret = unsafe { libc::posix_spawnattr_init(&mut attr.0) };
        if ret != 0 {
            std::mem::forget(attr);
            return Err(io::Error::from_raw_os_error(ret));
        }
        Ok(attr)
    }
}

impl Drop for SpawnAttr {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

/// A libc `sigset_t` with the signals of a kernel mask.
fn sigset(mask: u64) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set it is given.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t.
    unsafe { libc::sigemptyset(&mut set) };
    for sig in 1..=64 {
        if mask & (1u64 << (sig - 1)) != 0 {
            // SAFETY: `set` is initialised; an out-of-range number is rejected, not UB.
            unsafe { libc::sigaddset(&mut set, sig) };
        }
    }
    set
}

/// A pidfd for a child we have not reaped yet (its pid cannot have been reused), or `None`
/// where the kernel has no `pidfd_open`.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    sys::pidfd_open(pid, 0)
        .ok()
        // SAFETY: pidfd_open returned a fresh descriptor that nothing else owns.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Waits for a child that failed before exec, so it leaves no zombie.
fn reap_failed(pid: u32, pidfd: Option<&OwnedFd>) {
    // SAFETY: an all-zero siginfo_t is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waitid writes only `info`; the child is ours and not yet reaped.
        let ret = unsafe {
            match pidfd {
                Some(fd) => libc::waitid(
                    libc::P_PIDFD,
                    fd.as_raw_fd() as libc::id_t,
                    &mut info,
                    libc::WEXITED,
                ),
                None => libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED),
            }
        };
        if ret == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Turns the child's report into an error with the step's subject.
fn spawn_error(prepared: &Prepared, f: Failure) -> SpawnError {
    let index = f.index as usize;
    let step = Step::from_u32(f.step).unwrap_or(Step::Exec);
    let subject = match step {
        // Every PATH candidate was missing: name the program the caller gave, not the last
        // directory tried.
        Step::Exec if prepared.path_lookup && f.errno == libc::ENOENT => {
            Subject::Path(prepared.program.clone())
        }
        Step::Exec => Subject::Path(prepared.candidate(index)),
        Step::Chdir => Subject::Path(prepared.cwd_display()),
        Step::FdMap | Step::FdRelocate => match prepared.fds.get(index) {
            Some(m) => Subject::Fd {
                src: m.src,
                dst: m.dst,
            },
            None => Subject::None,
        },
        Step::SignalDisposition => Subject::Signal(f.index as i32),
        Step::SetUid => prepared.uid.map_or(Subject::None, Subject::Id),
        Step::SetGid => prepared.gid.map_or(Subject::None, Subject::Id),
        Step::SetPgid => prepared
            .pgroup
            .map_or(Subject::None, |p| Subject::Id(p as u32)),
        _ => Subject::None,
    };
    SpawnError::new(step, f.errno, subject)
}
