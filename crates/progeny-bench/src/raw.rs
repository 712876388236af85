//! The benchmark's only direct calls into libc: `fork`, `posix_spawn`,
//! `waitpid`, the C spawners of `csrc/spawn.c`, the parent's memory ballast
//! (`mmap`), and for the indexer `poll`, `fcntl` and `getrusage`. Everything
//! here is `unsafe` underneath; the rest of the crate stays safe.

use std::ffi::{c_char, c_int, c_void, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::ptr;

extern "C" {
    // csrc/spawn.c
    fn progeny_bench_vfork_execve(
        path: *const c_char,
        argv: *const *const c_char,
        envp: *const *const c_char,
        stdin_fd: c_int,
        stdout_fd: c_int,
    ) -> libc::pid_t;
    fn progeny_bench_clone_floor(stack: *mut c_void, stack_size: libc::size_t) -> libc::pid_t;
}

/// Converts a path or argument to a C string; fails (with `InvalidInput`) on
/// an interior NUL, which no exec could pass.
fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{text:?} contains a NUL byte"),
        )
    })
}

/// Everything `execve` needs, frozen in the parent before any timing starts:
/// the program path, argv and envp as NUL-terminated pointer arrays.
///
/// The pointer arrays point into the `CString`s owned by the same value, so
/// they stay valid for as long as the plan lives (a `CString`'s heap buffer
/// does not move when the `CString` itself is moved).
pub(crate) struct ExecPlan {
    path: CString,
    _strings: Vec<CString>,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
}

impl ExecPlan {
    /// Freezes `program` with `args` (`argv[0]` is `program` itself) and the
    /// environment `env` (`KEY=value` strings).
    pub(crate) fn new(program: &OsStr, args: &[&OsStr], env: &[&OsStr]) -> io::Result<Self> {
        let path = c_string(program)?;
        let mut strings = Vec::with_capacity(1 + args.len() + env.len());
        strings.push(path.clone());
        for arg in args {
            strings.push(c_string(arg)?);
        }
        for entry in env {
            strings.push(c_string(entry)?);
        }
        let argc = 1 + args.len();
        let mut argv: Vec<*const c_char> = strings[..argc].iter().map(|s| s.as_ptr()).collect();
        argv.push(ptr::null());
        let mut envp: Vec<*const c_char> = strings[argc..].iter().map(|s| s.as_ptr()).collect();
        envp.push(ptr::null());
        Ok(ExecPlan {
            path,
            _strings: strings,
            argv,
            envp,
        })
    }
}

/// What the raw methods place in the child: its stdout, and for the indexer
/// its stdin too (`bench spawn` leaves stdin inherited). Descriptors the
/// caller keeps above 2 (so that placing one on 0 cannot overwrite the other
/// before it is placed on 1) and close-on-exec (so that children of other
/// threads, spawned meanwhile, do not inherit them; `dup2` clears the flag on
/// the copies the child keeps).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildStdio<'a> {
    /// Becomes the child's descriptor 0; `None` leaves it inherited.
    pub(crate) stdin: Option<BorrowedFd<'a>>,
    /// Becomes the child's descriptor 1.
    pub(crate) stdout: BorrowedFd<'a>,
}

/// `fork()` then, in the child, the `dup2`s of `stdio` and `execve`; returns
/// the child's pid. The child exits with 127 when a `dup2` or the `execve`
/// fails, which the caller sees as a failed run.
///
/// Fails when `fork` fails (`EAGAIN`, `ENOMEM`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/fork.2.html>
/// - <https://man7.org/linux/man-pages/man2/execve.2.html>
pub(crate) fn fork_execve(plan: &ExecPlan, stdio: ChildStdio<'_>) -> io::Result<libc::pid_t> {
    let stdin_fd = stdio.stdin.map_or(-1, |fd| fd.as_raw_fd());
    let stdout_fd = stdio.stdout.as_raw_fd();
    // SAFETY: fork has no memory-safety preconditions. The process may have
    // other threads (workers, progress display) holding locks; the child
    // therefore calls only async-signal-safe functions (dup2, execve, _exit)
    // on data frozen before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the forked child; dup2 and _exit are async-signal-safe
        // and take plain integers.
        unsafe {
            if (stdin_fd >= 0 && libc::dup2(stdin_fd, 0) < 0) || libc::dup2(stdout_fd, 1) < 0 {
                libc::_exit(127);
            }
        }
        // SAFETY: path, argv and envp are NUL-terminated C strings and
        // NULL-terminated pointer arrays owned by `plan`, alive in the
        // child's copy of the parent's memory.
        unsafe {
            libc::execve(plan.path.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
            libc::_exit(127);
        }
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// `vfork()` then the `dup2`s of `stdio` and `execve` in the child, written
/// in C (`csrc/spawn.c`) because the function calling `vfork` must be
/// compiled as returning twice. Returns the child's pid; the child exits with
/// 127 when a `dup2` or the `execve` fails.
///
/// Fails when `vfork` fails (`EAGAIN`, `ENOMEM`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/vfork.2.html>
pub(crate) fn vfork_execve(plan: &ExecPlan, stdio: ChildStdio<'_>) -> io::Result<libc::pid_t> {
    // SAFETY: the C function reads the NUL-terminated strings and
    // NULL-terminated arrays owned by `plan`, which outlive the call; its
    // child only makes raw system calls before execve or exit.
    let pid = unsafe {
        progeny_bench_vfork_execve(
            plan.path.as_ptr(),
            plan.argv.as_ptr(),
            plan.envp.as_ptr(),
            stdio.stdin.map_or(-1, |fd| fd.as_raw_fd()),
            stdio.stdout.as_raw_fd(),
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// glibc's `posix_spawn` with the `dup2`s of `stdio` as file actions and
/// default attributes. Returns the child's pid; glibc reports a failed
/// `execve` as the error of this call.
///
/// # References
/// - <https://man7.org/linux/man-pages/man3/posix_spawn.3.html>
pub(crate) fn posix_spawn(plan: &ExecPlan, stdio: ChildStdio<'_>) -> io::Result<libc::pid_t> {
    let mut actions = std::mem::MaybeUninit::<libc::posix_spawn_file_actions_t>::uninit();
    // SAFETY: init writes a valid, empty file-actions object into `actions`.
    let rc = unsafe { libc::posix_spawn_file_actions_init(actions.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: initialized by posix_spawn_file_actions_init just above.
    let mut actions = unsafe { actions.assume_init() };
    let dups = [(stdio.stdin, 0), (Some(stdio.stdout), 1)];
    let mut rc = 0;
    for (fd, target) in dups.iter().filter_map(|&(fd, n)| Some((fd?, n))) {
        // SAFETY: `actions` is initialized; the descriptor is open for the call.
        rc =
            unsafe { libc::posix_spawn_file_actions_adddup2(&mut actions, fd.as_raw_fd(), target) };
        if rc != 0 {
            break;
        }
    }
    let mut pid: libc::pid_t = 0;
    if rc == 0 {
        // SAFETY: path/argv/envp are valid C strings and NULL-terminated
        // arrays owned by `plan`; `actions` is initialized; a NULL attribute
        // pointer asks for the defaults.
        rc = unsafe {
            libc::posix_spawn(
                &mut pid,
                plan.path.as_ptr(),
                &actions,
                ptr::null(),
                plan.argv.as_ptr() as *const *mut c_char,
                plan.envp.as_ptr() as *const *mut c_char,
            )
        };
    }
    // SAFETY: `actions` was initialized and is destroyed exactly once.
    unsafe { libc::posix_spawn_file_actions_destroy(&mut actions) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(pid)
}

/// Puts `fd` in non-blocking mode (`O_NONBLOCK`), so that a write to a pipe
/// that `poll` called writable takes what fits instead of waiting for all.
///
/// Fails when `fcntl` does (`EBADF`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/fcntl.2.html>
pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on an open descriptor (borrowed for the call) with
    // integer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `poll(fds, -1)`: waits until one of `fds` is ready and returns how many
/// are. Entries with a negative descriptor are ignored by the kernel.
///
/// Fails when `poll` does, `EINTR` included (the caller retries).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/poll.2.html>
pub(crate) fn poll(fds: &mut [libc::pollfd]) -> io::Result<usize> {
    let count = libc::nfds_t::try_from(fds.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many descriptors"))?;
    // SAFETY: `fds` is a valid, exclusively borrowed array of `count`
    // pollfd entries for the duration of the call.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), count, -1) };
    if ready < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ready as usize)
}

/// Whose CPU time [`cpu_time`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Usage {
    /// This process, all of its threads (`RUSAGE_SELF`).
    Process,
    /// Its children that have exited and been waited for, with their own
    /// waited-for descendants (`RUSAGE_CHILDREN`).
    Children,
}

/// User and system CPU time (`getrusage`) of this process or of its reaped
/// children, in seconds.
///
/// Fails when `getrusage` does (it cannot for these arguments).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/getrusage.2.html>
pub(crate) fn cpu_time(who: Usage) -> io::Result<(f64, f64)> {
    let who = match who {
        Usage::Process => libc::RUSAGE_SELF,
        Usage::Children => libc::RUSAGE_CHILDREN,
    };
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid out-pointer for one rusage.
    if unsafe { libc::getrusage(who, usage.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getrusage succeeded, so it filled the structure (and it was
    // zeroed before, so every field is initialized either way).
    let usage = unsafe { usage.assume_init() };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Ok((seconds(usage.ru_utime), seconds(usage.ru_stime)))
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of the CPU
/// times in `/proc/<pid>/stat`; 100 if the system does not say.
pub(crate) fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// A stack for the clone floor's child. 64 KiB is far more than a child that
/// only calls `exit_group` needs; 16-byte alignment comes from `u128`.
pub(crate) struct FloorStack(Vec<u128>);

impl FloorStack {
    /// Allocates the stack.
    pub(crate) fn new() -> Self {
        FloorStack(vec![0u128; 64 * 1024 / 16])
    }
}

/// The floor of process creation: `clone(CLONE_VM | CLONE_VFORK | SIGCHLD)`
/// whose child exits with 0 at once, without exec (`csrc/spawn.c`). Returns
/// the child's pid after the child has exited (that is what `CLONE_VFORK`
/// waits for); the caller still reaps it.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/clone.2.html>
pub(crate) fn clone_floor(stack: &mut FloorStack) -> io::Result<libc::pid_t> {
    let bytes = std::mem::size_of_val(stack.0.as_slice());
    // SAFETY: the stack is a live, exclusively borrowed buffer of `bytes`
    // bytes; the parent is suspended (CLONE_VFORK) until the child has
    // exited, so the buffer outlives the child's use of it, and the child
    // touches nothing else of the shared memory.
    let pid = unsafe { progeny_bench_clone_floor(stack.0.as_mut_ptr().cast(), bytes) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// [`wait_pid`], with `pidfd`: first a pidfd for the child (`pidfd_open`),
/// held across the wait and closed after it, as progeny holds one in its
/// `Child`. The `vfork-pidfd` method thus shows what the pidfd alone costs.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pidfd_open.2.html>
pub(crate) fn wait_pid_with(pid: libc::pid_t, pidfd: bool) -> io::Result<ExitStatus> {
    if !pidfd {
        return wait_pid(pid);
    }
    // SAFETY: pidfd_open takes two integers and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let error = io::Error::last_os_error();
        // Still reaped: no zombie is left behind by a failed pidfd_open.
        wait_pid(pid)?;
        return Err(io::Error::new(error.kind(), format!("pidfd_open: {error}")));
    }
    // SAFETY: pidfd_open returned a fresh descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as c_int) };
    let status = wait_pid(pid);
    drop(pidfd);
    status
}

/// `waitpid(pid, 0)`, retried on `EINTR`, for a child this process created.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/waitpid.2.html>
pub(crate) fn wait_pid(pid: libc::pid_t) -> io::Result<ExitStatus> {
    loop {
        let mut status: c_int = 0;
        // SAFETY: `status` is a valid out-pointer for the call.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Ok(ExitStatus::from_raw(status));
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Parent memory for the memory dimension: an anonymous private mapping
/// whose every page has been written, so `fork` has real page tables to copy.
///
/// The mapping asks for ordinary pages (`MADV_NOHUGEPAGE`), so its page-table
/// size, which is what `fork` copies, does not depend on the system's
/// transparent-huge-page setting. Unmapped on drop.
pub struct Ballast {
    start: *mut c_void,
    len: usize,
}

// SAFETY: the mapping is owned exclusively by this value and is plain
// memory; nothing about it is tied to the creating thread.
unsafe impl Send for Ballast {}

impl Ballast {
    /// Maps `bytes` bytes (rounded up to whole pages) and writes one byte in
    /// every page. `0` maps nothing.
    ///
    /// Fails when `mmap` does (`ENOMEM`: not enough address space or commit
    /// charge). Touching can still meet the OOM killer if the machine lacks
    /// the memory, so callers check available memory first.
    ///
    /// # References
    /// - <https://man7.org/linux/man-pages/man2/mmap.2.html>
    /// - <https://man7.org/linux/man-pages/man2/madvise.2.html>
    pub fn touch(bytes: u64) -> io::Result<Self> {
        let len = usize::try_from(bytes).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "ballast larger than the address space",
            )
        })?;
        if len == 0 {
            return Ok(Ballast {
                start: ptr::null_mut(),
                len: 0,
            });
        }
        let page = page_size();
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing; no existing memory is affected.
        let start = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if start == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ballast = Ballast { start, len };
        // SAFETY: advice on the mapping just created; failure (a kernel
        // without THP) is harmless, so the result is ignored.
        unsafe { libc::madvise(start, len, libc::MADV_NOHUGEPAGE) };
        let base = start.cast::<u8>();
        let mut offset = 0;
        while offset < len {
            // SAFETY: `offset < len`, inside the writable mapping; the
            // volatile write keeps the compiler from eliding the touch.
            unsafe { ptr::write_volatile(base.add(offset), 1) };
            offset += page;
        }
        Ok(ballast)
    }

    /// Size of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for the empty ballast (`touch(0)`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Ballast {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: unmaps exactly the mapping this value owns; no
            // references into it exist outside this value.
            unsafe { libc::munmap(self.start, self.len) };
        }
    }
}

/// The system's page size in bytes.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(1)
}

/// The running glibc's version (`gnu_get_libc_version`), or `None` on
/// another C library.
pub(crate) fn glibc_version() -> Option<String> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: returns a pointer to a static NUL-terminated string.
        let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
        Some(version.to_string_lossy().into_owned())
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}
