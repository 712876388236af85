//! The backends: how the child comes to exist before it executes the plan.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ffi::{c_int, c_void, CString};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicU8, Ordering};

use progeny_child::{Failure, SharedChild, SignalReset, Step};
use progeny_sys as sys;

use crate::command::{Backend, Command, StdioDefault};
use crate::error::{unsupported, SpawnError, Subject};
use crate::plan::{prepare, Prepared};
use crate::Child;

/// Starts `cmd` with its backend.
pub(crate) fn spawn(
    cmd: &Command,
    stdin_default: StdioDefault,
    out_default: StdioDefault,
) -> io::Result<Child> {
    let mut prepared = prepare(cmd, stdin_default, out_default)?;
    let (pid, pidfd, path) = match cmd.backend {
        Backend::Clone3 => spawn_vm_clone(&mut prepared, true)?,
        Backend::Clone => spawn_vm_clone(&mut prepared, false)?,
        Backend::Fork => spawn_fork(&mut prepared)?,
        Backend::PosixSpawn => spawn_posix(&mut prepared)?,
    };
    // The child has its copies now; dropping `prepared` closes the child ends of pipes and
    // /dev/null in the parent, so that EOF arrives when the child closes its side.
    let pipes = std::mem::take(&mut prepared.pipes);
    let mut child = Child::new(pid, pidfd, pipes, path);
    child.kill_on_drop(prepared.kill_on_drop);
    Ok(child)
}

/// The system call that created a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnCall {
    /// `clone3`.
    Clone3,
    /// The legacy `clone`.
    Clone,
    /// `fork`.
    Fork,
    /// glibc's `posix_spawn`.
    PosixSpawn,
}

/// How a child was created, from [`Child::spawn_path`]: the call and its flags. Displays as
/// `clone3(CLONE_VM|CLONE_VFORK|CLONE_PIDFD|CLONE_CLEAR_SIGHAND)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpawnPath {
    call: SpawnCall,
    flags: u64,
    cgroup_by_child: bool,
}

impl SpawnPath {
    /// A child the zygote cloned with `flags` (`CLONE_PARENT|CLONE_PIDFD`, with `CLONE_VM`
    /// unless hooks ran).
    pub(crate) fn zygote(flags: u64) -> SpawnPath {
        SpawnPath {
            call: SpawnCall::Clone,
            flags,
            cgroup_by_child: false,
        }
    }

    pub(crate) fn other(call: SpawnCall, cgroup_by_child: bool) -> SpawnPath {
        SpawnPath {
            call,
            flags: 0,
            cgroup_by_child,
        }
    }

    /// The system call.
    pub fn call(&self) -> SpawnCall {
        self.call
    }

    /// The `CLONE_*` flags passed (0 for `fork` and `posix_spawn`).
    pub fn flags(&self) -> u64 {
        self.flags
    }

    /// Whether the caller's thread was suspended until exec (`CLONE_VFORK`); false when the
    /// parent had to act between clone and exec (user namespace maps).
    pub fn vfork(&self) -> bool {
        self.flags & sys::CLONE_VFORK != 0
    }

    /// Whether the child moved itself into its cgroup (the `cgroup_fallback` path) instead of
    /// being created there with `CLONE_INTO_CGROUP`.
    pub fn cgroup_moved_by_child(&self) -> bool {
        self.cgroup_by_child
    }
}

impl std::fmt::Display for SpawnPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [(u64, &str); 15] = [
            (sys::CLONE_VM, "CLONE_VM"),
            (libc::CLONE_PARENT as u64, "CLONE_PARENT"),
            (sys::CLONE_VFORK, "CLONE_VFORK"),
            (sys::CLONE_PIDFD, "CLONE_PIDFD"),
            (sys::CLONE_CLEAR_SIGHAND, "CLONE_CLEAR_SIGHAND"),
            (sys::CLONE_INTO_CGROUP, "CLONE_INTO_CGROUP"),
            (sys::CLONE_IO, "CLONE_IO"),
            (libc::CLONE_NEWUSER as u64, "CLONE_NEWUSER"),
            (libc::CLONE_NEWNS as u64, "CLONE_NEWNS"),
            (libc::CLONE_NEWPID as u64, "CLONE_NEWPID"),
            (libc::CLONE_NEWNET as u64, "CLONE_NEWNET"),
            (libc::CLONE_NEWUTS as u64, "CLONE_NEWUTS"),
            (libc::CLONE_NEWIPC as u64, "CLONE_NEWIPC"),
            (libc::CLONE_NEWCGROUP as u64, "CLONE_NEWCGROUP"),
            (libc::CLONE_NEWTIME as u64, "CLONE_NEWTIME"),
        ];
        let name = match self.call {
            SpawnCall::Clone3 => "clone3",
            SpawnCall::Clone => "clone",
            SpawnCall::Fork => "fork",
            SpawnCall::PosixSpawn => "posix_spawn",
        };
        let names: Vec<&str> = NAMES
            .iter()
            .filter(|(bit, _)| self.flags & bit != 0)
            .map(|(_, n)| *n)
            .collect();
        write!(f, "{name}({})", names.join("|"))?;
        if self.cgroup_by_child {
            f.write_str(" + cgroup.procs")?;
        }
        Ok(())
    }
}

/// The size of a child stack, without its guard page. The plan executor needs a few hundred
/// bytes; 64 KiB leaves room for debug builds, and the memory is reused spawn after spawn.
const STACK_SIZE: usize = 64 * 1024;

/// A stack for `CLONE_VM` children: an anonymous mapping with a `PROT_NONE` guard page below it,
/// so an overflow faults instead of writing over the parent's memory.
pub(crate) struct ChildStack {
    base: *mut u8,
    len: usize,
}

impl ChildStack {
    pub(crate) fn new() -> io::Result<ChildStack> {
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

    /// The highest address, where the downward-growing stack starts (page-aligned, so 16-byte
    /// aligned as the ABI wants at a call).
    pub(crate) fn top(&self) -> *mut u8 {
        self.base.wrapping_add(self.len)
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
/// blocked, and it unblocks only its own mask right before `execve`. The shared-memory spawn
/// skips it when [`needs_signals_blocked`] says it is for nothing.
pub(crate) struct SignalsBlocked {
    old: sys::KernelSigset,
}

impl SignalsBlocked {
    pub(crate) fn new() -> io::Result<SignalsBlocked> {
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

/// Whether the parent must block every signal around the clone.
///
/// Blocking exists for two reasons. Without `CLONE_CLEAR_SIGHAND` the child starts with the
/// parent's handlers, and one that ran before the child reset it would run parent code in shared
/// memory. And a signal that the program is to start with blocked, sent in the moment before the
/// child sets that mask, must wait rather than act (likewise `SIGTTOU` while a background child
/// takes the terminal). With `CLONE_CLEAR_SIGHAND` (the kernel resets the handlers as it creates
/// the child), the default empty mask and no terminal to take, neither applies: a signal that
/// reaches the child before `execve` gets the default action it would get a moment later from
/// the program, and two `rt_sigprocmask` calls per spawn are saved.
///
/// # References
/// - [`clone3(2)`](https://man7.org/linux/man-pages/man2/clone.2.html) (`CLONE_CLEAR_SIGHAND`)
fn needs_signals_blocked(child_mask: u64, takes_foreground: bool, clear_sighand: bool) -> bool {
    !clear_sighand || child_mask != 0 || takes_foreground
}

/// Kernel support learned at run time, so that a refusal is paid for once per process.
const UNKNOWN: u8 = 0;
const YES: u8 = 1;
const NO: u8 = 2;
static CLONE3: AtomicU8 = AtomicU8::new(UNKNOWN);
static CLEAR_SIGHAND: AtomicU8 = AtomicU8::new(UNKNOWN);

/// `clone3` or `clone` with `CLONE_VM|CLONE_PIDFD` on a cached stack, and `CLONE_VFORK` unless the
/// parent has to act between clone and exec (user namespace maps).
///
/// # References
/// - [`clone3(2)`](https://man7.org/linux/man-pages/man2/clone.2.html)
fn spawn_vm_clone(
    prepared: &mut Prepared,
    prefer_clone3: bool,
) -> io::Result<(u32, Option<OwnedFd>, SpawnPath)> {
    if prepared.share_io_context {
        ensure_io_context();
    }
    let sync = if prepared.uid_map.is_some() || prepared.gid_map.is_some() {
        Some(ParentSync::new(prepared)?)
    } else {
        None
    };
    let stack = match STACK.take() {
        Some(stack) => stack,
        None => ChildStack::new()?,
    };
    // `clone_on` returns only once the child has exec'ed or exited, so the stack is free again.
    let result = clone_on(&stack, prepared, prefer_clone3, sync);
    STACK.set(Some(stack));
    let (pid, pidfd, report, path) = result?;
    // SAFETY: CLONE_PIDFD stored a fresh descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    if let Some(err) = report {
        reap_failed(pid, Some(&pidfd));
        return Err(err);
    }
    Ok((pid, Some(pidfd), path))
}

/// The pipes of a spawn in which the parent acts between clone and exec: the child waits on `go`
/// until the parent has written its user namespace maps, and the parent waits for end-of-file on
/// `done` (close-on-exec, so it closes at exec or exit) before it reads the report and reuses the
/// stack, since without `CLONE_VFORK` it runs alongside the child.
struct ParentSync {
    go_parent: OwnedFd,
    go_child: OwnedFd,
    done_parent: OwnedFd,
    done_child: OwnedFd,
    maps: (Option<String>, Option<String>, bool),
}

impl ParentSync {
    fn new(prepared: &mut Prepared) -> io::Result<ParentSync> {
        let (go_read, go_write) = std::io::pipe()?;
        let (done_read, done_write) = std::io::pipe()?;
        let go_child = prepared.reserve(go_read.into())?;
        let done_child = prepared.reserve(done_write.into())?;
        prepared.sync_fd = go_child.as_raw_fd();
        Ok(ParentSync {
            go_parent: go_write.into(),
            go_child,
            done_parent: done_read.into(),
            done_child,
            maps: (
                prepared.uid_map.clone(),
                prepared.gid_map.clone(),
                prepared.deny_setgroups,
            ),
        })
    }

    /// The parent's part, right after clone: write the maps, let the child go (or kill it if the
    /// maps were refused), then wait until the child has exec'ed or exited.
    fn finish(self, pid: u32, pidfd: c_int) -> Result<(), SpawnError> {
        // The parent's copies of the child's ends must go, or end-of-file could never come.
        drop(self.go_child);
        drop(self.done_child);
        let written = write_id_maps(pid, &self.maps);
        match written {
            Ok(()) => {
                // A child that died meanwhile makes this EPIPE; the report tells why.
                let _ = std::fs::File::from(self.go_parent).write(&[1]);
            }
            Err(_) => {
                let _ = sys::pidfd_send_signal(pidfd, libc::SIGKILL);
                drop(self.go_parent);
            }
        }
        let mut done = std::fs::File::from(self.done_parent);
        let mut byte = [0u8; 1];
        loop {
            match done.read(&mut byte) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        written
    }
}

/// Writes `setgroups` (deny), `uid_map` and `gid_map` of the child's new user namespace, each in
/// one `write` as the kernel requires.
///
/// # References
/// - [`user_namespaces(7)`](https://man7.org/linux/man-pages/man7/user_namespaces.7.html)
fn write_id_maps(
    pid: u32,
    (uid_map, gid_map, deny): &(Option<String>, Option<String>, bool),
) -> Result<(), SpawnError> {
    let write = |name: &str, text: &str, step: Step| {
        let path = format!("/proc/{pid}/{name}");
        std::fs::write(&path, text).map_err(|e| {
            SpawnError::new(
                step,
                e.raw_os_error().unwrap_or(libc::EIO),
                Subject::Path(path.into()),
            )
        })
    };
    if *deny {
        write("setgroups", "deny", Step::GidMap)?;
    }
    if let Some(map) = uid_map {
        write("uid_map", map, Step::UidMap)?;
    }
    if let Some(map) = gid_map {
        write("gid_map", map, Step::GidMap)?;
    }
    Ok(())
}

/// Makes sure the calling thread has an I/O context, so that `CLONE_IO` shares something: the
/// kernel ignores the flag for a thread that has none yet. `ioprio_set` creates one; it is given
/// the thread's current priority, and "no class" where the current one is just what the nice
/// value implies, so the thread's I/O priority does not change.
///
/// # References
/// - [`ioprio_set(2)`](https://man7.org/linux/man-pages/man2/ioprio_set.2.html)
fn ensure_io_context() {
    let Ok(current) = sys::ioprio_get_self() else {
        return;
    };
    // SAFETY: getpriority has no preconditions; -1 is also a valid nice value, which only makes
    // the comparison below conservative.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let implied_level = ((nice.clamp(-20, 19) + 20) / 5) as u16;
    let value = if current >> 13 == 2 && current & 0xff == implied_level {
        0
    } else {
        current
    };
    let _ = sys::ioprio_set_self(value);
}

/// What a successful clone gives: pid, pidfd, the child's failure if any, and the path taken.
type Cloned = (u32, c_int, Option<io::Error>, SpawnPath);

fn clone_on(
    stack: &ChildStack,
    prepared: &mut Prepared,
    prefer_clone3: bool,
    mut sync: Option<ParentSync>,
) -> io::Result<Cloned> {
    let (stack_low, stack_size) = stack.usable();
    let mut use_clone3 = prefer_clone3 && CLONE3.load(Ordering::Relaxed) != NO;
    let mut into_cgroup = prepared.cgroup_dir.is_some();
    loop {
        if into_cgroup && !use_clone3 {
            if !prepared.cgroup_fallback {
                return Err(cgroup_error(libc::ENOSYS).into());
            }
            open_cgroup_procs(prepared)?;
            into_cgroup = false;
        }
        let clear_sighand = use_clone3 && CLEAR_SIGHAND.load(Ordering::Relaxed) != NO;
        let reset = if clear_sighand {
            SignalReset::SigpipeOnly
        } else {
            SignalReset::AllCaught
        };
        let vfork = if sync.is_some() { 0 } else { sys::CLONE_VFORK };
        let flags = sys::CLONE_VM
            | vfork
            | sys::CLONE_PIDFD
            | prepared.clone_flags
            | if clear_sighand {
                sys::CLONE_CLEAR_SIGHAND
            } else {
                0
            }
            | if into_cgroup {
                sys::CLONE_INTO_CGROUP
            } else {
                0
            };
        let cgroup_fd = prepared.cgroup_dir.unwrap_or(-1);
        let cgroup_by_child = prepared.cgroup_procs.is_some();
        let prepared_sigmask = prepared.sigmask;
        let foreground = prepared.foreground_tty >= 0;
        let mut report = Failure::default();
        let mut pidfd: c_int = -1;
        let mut sync_result = Ok(());
        let ret = {
            let mut plan = prepared.plan(reset);
            let mut shared = SharedChild {
                plan: &mut plan,
                report: &mut report,
            };
            let arg = &mut shared as *mut SharedChild<'_, '_> as *mut c_void;
            let blocked = if needs_signals_blocked(prepared_sigmask, foreground, clear_sighand) {
                Some(SignalsBlocked::new()?)
            } else {
                None
            };
            let ret = if use_clone3 {
                let mut args = sys::CloneArgs {
                    flags,
                    pidfd: &mut pidfd as *mut c_int as u64,
                    exit_signal: libc::SIGCHLD as u64,
                    stack: stack_low as u64,
                    stack_size: stack_size as u64,
                    cgroup: if into_cgroup { cgroup_fd as u64 } else { 0 },
                    ..Default::default()
                };
                // SAFETY: `args` describes our private stack, unused until the child has
                // exec'ed or exited (CLONE_VFORK suspends us until then; without it we wait for
                // the done pipe below); `shared` and everything it points to live in this frame
                // or in `prepared`, which outlive the child's use; the child runs only the
                // allocation-free plan executor.
                unsafe {
                    sys::clone3_run(
                        &mut args,
                        std::mem::size_of::<sys::CloneArgs>(),
                        progeny_child::child_main_shared,
                        arg,
                    )
                }
            } else {
                // SAFETY: as for clone3: the stack top is page-aligned (so 16-byte aligned) and
                // ours alone; the pidfd slot and the shared block outlive the child's use.
                unsafe {
                    sys::clone_run(
                        flags | libc::SIGCHLD as u64,
                        stack_low.wrapping_add(stack_size),
                        &mut pidfd,
                        progeny_child::child_main_shared,
                        arg,
                    )
                }
            };
            drop(blocked);
            if let (Ok(pid), Some(sync)) = (sys::clone_result(ret), sync.take()) {
                // The child runs alongside us on `plan` and the stack: finish our part and
                // wait for exec or exit while both are still alive in this scope.
                sync_result = sync.finish(pid, pidfd);
            }
            std::hint::black_box(&mut shared);
            ret
        };
        match sys::clone_result(ret) {
            Ok(pid) => {
                if use_clone3 {
                    CLONE3.store(YES, Ordering::Relaxed);
                    if clear_sighand {
                        CLEAR_SIGHAND.store(YES, Ordering::Relaxed);
                    }
                }
                let path = SpawnPath {
                    call: if use_clone3 {
                        SpawnCall::Clone3
                    } else {
                        SpawnCall::Clone
                    },
                    flags,
                    cgroup_by_child,
                };
                // SAFETY: the child wrote the report (or not) before exec or exit, which
                // happened before we got here; the read is volatile because the write was made
                // behind the compiler's back, through the pointer in `shared`.
                let report = unsafe { ptr::read_volatile(&report) };
                let failure = match sync_result {
                    Err(e) => Some(e.into()),
                    Ok(()) if report.step != 0 => Some(spawn_error(prepared, report).into()),
                    Ok(()) => None,
                };
                return Ok((pid, pidfd, failure, path));
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
            Err(e) if into_cgroup => {
                let refused = [
                    libc::E2BIG,
                    libc::EOPNOTSUPP,
                    libc::EPERM,
                    libc::EACCES,
                    libc::EBUSY,
                    libc::EINVAL,
                ];
                if prepared.cgroup_fallback && refused.contains(&e.raw()) {
                    open_cgroup_procs(prepared)?;
                    into_cgroup = false;
                } else {
                    return Err(cgroup_error(e.raw()).into());
                }
            }
            Err(e) => {
                let call = if use_clone3 { "clone3" } else { "clone" };
                return Err(SpawnError::new(Step::Clone, e.raw(), Subject::Call(call)).into());
            }
        }
    }
}

/// Creates a child with `clone3(CLONE_VM|CLONE_VFORK|CLONE_PIDFD|extra)` that exits at once, and
/// reaps it: a trial that tells whether the kernel (and any seccomp filter) accepts the flags.
pub(crate) fn trial_clone3(extra: u64, cgroup: Option<c_int>) -> Result<(), sys::Errno> {
    let stack = match STACK.take() {
        Some(stack) => stack,
        None => {
            ChildStack::new().map_err(|e| sys::Errno(e.raw_os_error().unwrap_or(libc::ENOMEM)))?
        }
    };
    let (stack_low, stack_size) = stack.usable();
    let mut pidfd: c_int = -1;
    let mut args = sys::CloneArgs {
        flags: sys::CLONE_VM | sys::CLONE_VFORK | sys::CLONE_PIDFD | extra,
        pidfd: &mut pidfd as *mut c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack_low as u64,
        stack_size: stack_size as u64,
        cgroup: cgroup.map_or(0, |fd| fd as u64),
        ..Default::default()
    };
    let blocked = SignalsBlocked::new().map_err(|_| sys::Errno::INVAL)?;
    // SAFETY: our private stack; the child only returns 0, touching nothing.
    let ret = unsafe {
        sys::clone3_run(
            &mut args,
            std::mem::size_of::<sys::CloneArgs>(),
            progeny_child::child_exit_immediately,
            ptr::null_mut(),
        )
    };
    drop(blocked);
    STACK.set(Some(stack));
    let pid = sys::clone_result(ret)?;
    // SAFETY: CLONE_PIDFD stored a fresh descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    reap_failed(pid, Some(&pidfd));
    Ok(())
}

/// The error for a cgroup the kernel would not start the child in.
fn cgroup_error(errno: i32) -> SpawnError {
    SpawnError::new(Step::Clone, errno, Subject::Call("clone3 into cgroup"))
}

/// Opens `cgroup.procs` of the command's cgroup directory for the child to write itself into.
fn open_cgroup_procs(prepared: &mut Prepared) -> io::Result<()> {
    let Some(dir) = prepared.cgroup_dir else {
        return Ok(());
    };
    // SAFETY: openat with a valid NUL-terminated name; the result is checked.
    let fd = unsafe {
        libc::openat(
            dir,
            c"cgroup.procs".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        return Err(SpawnError::new(
            Step::CgroupMove,
            errno,
            Subject::Path("cgroup.procs".into()),
        )
        .into());
    }
    // SAFETY: openat returned a fresh descriptor that nothing else owns.
    let procs = unsafe { OwnedFd::from_raw_fd(fd) };
    prepared.cgroup_procs = Some(prepared.reserve(procs)?);
    Ok(())
}

/// `fork` + `execve`, with the failure reported through a close-on-exec pipe.
///
/// # References
/// - [`fork(2)`](https://man7.org/linux/man-pages/man2/fork.2.html)
fn spawn_fork(prepared: &mut Prepared) -> io::Result<(u32, Option<OwnedFd>, SpawnPath)> {
    if prepared.clone_flags != 0 {
        return Err(unsupported(
            "fork cannot create namespaces or share the I/O context: use Backend::Clone3",
        ));
    }
    if prepared.cgroup_dir.is_some() {
        if !prepared.cgroup_fallback {
            return Err(unsupported(
                "fork cannot start a child in a cgroup: use Backend::Clone3 or cgroup_fallback(true)",
            ));
        }
        open_cgroup_procs(prepared)?;
    }
    let (mut report_reader, report_pipe) = std::io::pipe()?;
    // The child writes its failure into this pipe, so the pipe must outlive every step before
    // exec; it stays close-on-exec, so EOF tells the parent that exec happened.
    let report_writer = prepared.reserve(report_pipe.into())?;
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
    let path = SpawnPath::other(SpawnCall::Fork, prepared.cgroup_procs.is_some());
    Ok((pid, pidfd_open(pid), path))
}

/// glibc's `posix_spawn` (or `posix_spawnp` for a `PATH` search).
///
/// # References
/// - [`posix_spawn(3)`](https://man7.org/linux/man-pages/man3/posix_spawn.3.html)
fn spawn_posix(prepared: &mut Prepared) -> io::Result<(u32, Option<OwnedFd>, SpawnPath)> {
    if let Some(option) = prepared.container_option() {
        return Err(unsupported(format!("posix_spawn cannot express {option}")));
    }
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
    // SAFETY: glibc's init and destroy for file actions.
    let mut actions: FileActions = unsafe {
        PosixSpawnObject::new(
            libc::posix_spawn_file_actions_init,
            libc::posix_spawn_file_actions_destroy,
        )
    }?;
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
    // SAFETY: glibc's init and destroy for spawn attributes.
    let mut attr: SpawnAttr = unsafe {
        PosixSpawnObject::new(libc::posix_spawnattr_init, libc::posix_spawnattr_destroy)
    }?;
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
    // posix_spawnp searches PATH; both take the same arguments.
    let spawn = if prepared.path_lookup {
        libc::posix_spawnp
    } else {
        libc::posix_spawn
    };
    // SAFETY: every pointer is a valid NUL-terminated string or NULL-terminated array owned by
    // `prepared`, and `actions`/`attr` are initialised; glibc reports the child's exec error as
    // the return value after the child is gone.
    let ret = unsafe {
        spawn(
            &mut pid,
            program.as_ptr(),
            &actions.0,
            &attr.0,
            prepared.argv.as_ptr() as *const *mut _,
            prepared.envp.as_ptr() as *const *mut _,
        )
    };
    if ret != 0 {
        return Err(SpawnError::new(
            Step::Exec,
            ret,
            Subject::PosixSpawn(prepared.program.clone()),
        )
        .into());
    }
    let path = SpawnPath::other(SpawnCall::PosixSpawn, false);
    Ok((pid as u32, pidfd_open(pid as u32), path))
}

/// posix_spawn's helpers return the error number instead of setting errno.
fn posix_check(ret: c_int) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

/// A posix_spawn object of glibc's (file actions or attributes): initialised by its `init`,
/// handed out as `.0`, and destroyed by its `destroy` when dropped.
struct PosixSpawnObject<T>(T, unsafe extern "C" fn(*mut T) -> c_int);

impl<T> PosixSpawnObject<T> {
    /// # Safety
    /// `init` must fully initialise the object it is given, or fail, and `destroy` must be its
    /// counterpart (`posix_spawn_file_actions_init`/`_destroy`, `posix_spawnattr_init`/`_destroy`).
    unsafe fn new(
        init: unsafe extern "C" fn(*mut T) -> c_int,
        destroy: unsafe extern "C" fn(*mut T) -> c_int,
    ) -> io::Result<PosixSpawnObject<T>> {
        let mut value = std::mem::MaybeUninit::<T>::uninit();
        // SAFETY: init writes the object it is given (the caller's promise).
        posix_check(unsafe { init(value.as_mut_ptr()) })?;
        // SAFETY: init succeeded, so the object is initialised; glibc's objects may be moved (they
        // hold pointers to heap data, never to themselves).
        Ok(PosixSpawnObject(unsafe { value.assume_init() }, destroy))
    }
}

impl<T> Drop for PosixSpawnObject<T> {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once, by the counterpart of its init.
        unsafe { (self.1)(&mut self.0) };
    }
}

type FileActions = PosixSpawnObject<libc::posix_spawn_file_actions_t>;
type SpawnAttr = PosixSpawnObject<libc::posix_spawnattr_t>;

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
pub(crate) fn spawn_error(prepared: &Prepared, f: Failure) -> SpawnError {
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
