//! Raw Linux system calls for progeny, returning `Result<_, Errno>`.
//!
//! Every wrapper here issues the `syscall` instruction itself instead of calling libc. That is the
//! point of the crate: the code that runs in a child created with `CLONE_VM` shares its memory with
//! a suspended parent thread, so it must not touch the thread-local `errno`, take a libc lock, or
//! run a libc cancellation point. A raw system call does none of that; it just returns `-errno`.
//! (musl's `posix_spawn` child uses `__syscall` for the same reason.)
//!
//! The crate is `no_std` and allocation-free, so it can be used on both sides of a spawn.
//!
//! # References
//! - [`syscall(2)`](https://man7.org/linux/man-pages/man2/syscall.2.html) for the calling convention.
#![no_std]
#![allow(unsafe_code)]

#[cfg(not(target_arch = "x86_64"))]
compile_error!(
    "progeny-sys supports x86_64 Linux only for now: the clone trampolines are written in assembly"
);

use core::arch::{asm, naked_asm};
use core::ffi::{c_char, c_int, c_long, c_uint, c_void};

/// An error number returned by the kernel (the positive `errno` value).
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// `ENOSYS`: the kernel does not know the system call.
    pub const NOSYS: Errno = Errno(libc::ENOSYS);
    /// `EINTR`: interrupted by a signal.
    pub const INTR: Errno = Errno(libc::EINTR);
    /// `EINVAL`: invalid argument.
    pub const INVAL: Errno = Errno(libc::EINVAL);
    /// `EACCES`: permission denied.
    pub const ACCES: Errno = Errno(libc::EACCES);
    /// `ENOENT`: no such file or directory.
    pub const NOENT: Errno = Errno(libc::ENOENT);
    /// `EAGAIN`: try again.
    pub const AGAIN: Errno = Errno(libc::EAGAIN);
    /// `ESRCH`: no such process.
    pub const SRCH: Errno = Errno(libc::ESRCH);
    /// `EPERM`: operation not permitted.
    pub const PERM: Errno = Errno(libc::EPERM);

    /// The raw positive error number.
    pub const fn raw(self) -> i32 {
        self.0
    }
}

impl core::fmt::Debug for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Errno({})", self.0)
    }
}

/// The result of a raw system call.
pub type Result<T> = core::result::Result<T, Errno>;

/// Turns the kernel's return value (`-4095..-1` is an error) into a `Result`.
#[inline(always)]
fn check(ret: usize) -> Result<usize> {
    if ret > (-4096isize) as usize {
        Err(Errno(ret.wrapping_neg() as i32))
    } else {
        Ok(ret)
    }
}

/// Issues system call `nr` with up to six arguments and returns the raw kernel result.
///
/// # Safety
/// The caller must pass arguments that are valid for system call `nr` (pointers that point to
/// memory of the right size and lifetime); the kernel will read and write through them.
#[inline(always)]
pub unsafe fn syscall6(nr: c_long, a: [usize; 6]) -> Result<usize> {
    let ret: usize;
    // SAFETY: the x86_64 syscall ABI: number in rax, arguments in rdi, rsi, rdx, r10, r8, r9;
    // the kernel clobbers rcx and r11 and returns in rax. The caller vouches for the arguments.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") nr as usize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    check(ret)
}

macro_rules! sys {
    ($nr:expr) => { sys!($nr, 0, 0, 0, 0, 0, 0) };
    ($nr:expr, $a:expr) => { sys!($nr, $a, 0, 0, 0, 0, 0) };
    ($nr:expr, $a:expr, $b:expr) => { sys!($nr, $a, $b, 0, 0, 0, 0) };
    ($nr:expr, $a:expr, $b:expr, $c:expr) => { sys!($nr, $a, $b, $c, 0, 0, 0) };
    ($nr:expr, $a:expr, $b:expr, $c:expr, $d:expr) => { sys!($nr, $a, $b, $c, $d, 0, 0) };
    ($nr:expr, $a:expr, $b:expr, $c:expr, $d:expr, $e:expr) => { sys!($nr, $a, $b, $c, $d, $e, 0) };
    ($nr:expr, $a:expr, $b:expr, $c:expr, $d:expr, $e:expr, $f:expr) => {
        syscall6($nr, [$a as usize, $b as usize, $c as usize, $d as usize, $e as usize, $f as usize])
    };
}

// ---------------------------------------------------------------------------------------------
// Process creation

/// `CLONE_VM`: share the address space with the parent.
pub const CLONE_VM: u64 = 0x0000_0100;
/// `CLONE_VFORK`: suspend the parent until the child execs or exits.
pub const CLONE_VFORK: u64 = 0x0000_4000;
/// `CLONE_PIDFD`: return a pidfd for the child.
pub const CLONE_PIDFD: u64 = 0x0000_1000;
/// `CLONE_CLEAR_SIGHAND`: reset every caught signal to `SIG_DFL` in the child (clone3 only).
pub const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
/// `CLONE_INTO_CGROUP`: start the child in the cgroup given by `clone_args.cgroup` (clone3 only).
pub const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
/// `CLONE_IO`: share the I/O context.
pub const CLONE_IO: u64 = 0x8000_0000;

/// The argument block of `clone3`, as `struct clone_args` in `<linux/sched.h>`.
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub struct CloneArgs {
    /// Flags (`CLONE_*`).
    pub flags: u64,
    /// Where the kernel stores the pidfd (`CLONE_PIDFD`), as a pointer to `c_int`.
    pub pidfd: u64,
    /// Where the kernel stores the child's tid in the child (`CLONE_CHILD_SETTID`).
    pub child_tid: u64,
    /// Where the kernel stores the child's tid in the parent (`CLONE_PARENT_SETTID`).
    pub parent_tid: u64,
    /// The signal sent to the parent when the child exits (`SIGCHLD` for a normal child).
    pub exit_signal: u64,
    /// Lowest address of the child's stack.
    pub stack: u64,
    /// Size of the child's stack in bytes.
    pub stack_size: u64,
    /// Thread-local storage descriptor (`CLONE_SETTLS`).
    pub tls: u64,
    /// Array of tids for `set_tid`.
    pub set_tid: u64,
    /// Number of entries in `set_tid`.
    pub set_tid_size: u64,
    /// A descriptor of the target cgroup (`CLONE_INTO_CGROUP`).
    pub cgroup: u64,
}

/// The function a cloned child runs on its own stack. Its return value becomes the exit status.
pub type ChildMain = unsafe extern "C" fn(arg: *mut c_void) -> c_int;

/// Raw `clone3` that runs `child(arg)` in the child and returns the child's pid in the parent.
///
/// The child starts on the stack described by `args` (`stack`, `stack_size`), calls
/// `child(arg)`, and exits the process with its return value. It never returns into the caller's
/// frames, which is why this has to be written in assembly: after `clone3` the child has the
/// parent's registers but a different stack pointer.
///
/// # Safety
/// `args` must point to a valid `CloneArgs` of `size` bytes whose stack is mapped, writable and
/// not used by anyone else until the child has exited or exec'ed; `child` must be safe to run in
/// the child (with `CLONE_VM`: async-signal-safe, no allocation, no locks, no TLS writes).
#[unsafe(naked)]
pub unsafe extern "C" fn clone3_run(
    args: *mut CloneArgs,
    size: usize,
    child: ChildMain,
    arg: *mut c_void,
) -> isize {
    // rdi = args, rsi = size (already the syscall's arguments), rdx = child, rcx = arg.
    // r8 and r9 are not touched by `syscall`, so they carry child/arg across it.
    naked_asm!(
        "mov r8, rdx",
        "mov r9, rcx",
        "mov eax, {nr}",
        "syscall",
        "test rax, rax",
        "jnz 2f",
        // Child: the kernel set rsp to stack + stack_size (16-byte aligned by the caller).
        "xor ebp, ebp",
        "mov rdi, r9",
        "call r8",
        "mov edi, eax",
        "mov eax, {exit}",
        "syscall",
        "ud2",
        "2:",
        "ret",
        nr = const libc::SYS_clone3,
        exit = const libc::SYS_exit_group,
    )
}

/// Raw legacy `clone` that runs `child(arg)` on `stack_top` and returns the child's pid.
///
/// With `CLONE_PIDFD` in `flags`, the kernel stores the pidfd at `pidfd_out`.
///
/// # Safety
/// As for [`clone3_run`]: `stack_top` must be the 16-byte aligned top of a mapped stack that no
/// one else uses until the child has exited or exec'ed, and `child` must be safe to run there.
#[unsafe(naked)]
pub unsafe extern "C" fn clone_run(
    flags: u64,
    stack_top: *mut u8,
    pidfd_out: *mut c_int,
    child: ChildMain,
    arg: *mut c_void,
) -> isize {
    // clone(flags=rdi, newsp=rsi, parent_tid=rdx, child_tid=r10, tls=r8).
    // child arrives in rcx and arg in r8: park them in r9 and r12 (r12 is callee-saved, so the
    // parent saves it on its own stack; the child starts on a fresh stack and never returns).
    naked_asm!(
        "push r12",
        "mov r9, rcx",
        "mov r12, r8",
        "xor r10d, r10d",
        "xor r8d, r8d",
        "mov eax, {nr}",
        "syscall",
        "test rax, rax",
        "jnz 2f",
        "xor ebp, ebp",
        "mov rdi, r12",
        "call r9",
        "mov edi, eax",
        "mov eax, {exit}",
        "syscall",
        "ud2",
        "2:",
        "pop r12",
        "ret",
        nr = const libc::SYS_clone,
        exit = const libc::SYS_exit_group,
    )
}

/// Turns the value returned by [`clone3_run`] or [`clone_run`] into a `Result`.
pub fn clone_result(ret: isize) -> Result<u32> {
    check(ret as usize).map(|pid| pid as u32)
}

/// `execve(path, argv, envp)`—Replaces the process image. Returns only on failure.
///
/// # Safety
/// `path` must be a NUL-terminated string; `argv` and `envp` NULL-terminated arrays of them.
///
/// # References
/// - [`execve(2)`](https://man7.org/linux/man-pages/man2/execve.2.html)
pub unsafe fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> Errno {
    // SAFETY: the caller guarantees the three pointers; execve only reads them.
    match unsafe { sys!(libc::SYS_execve, path, argv, envp) } {
        Ok(_) => Errno::INVAL,
        Err(e) => e,
    }
}

/// `exit_group(status)`—Ends every thread of the calling process.
///
/// # References
/// - [`exit_group(2)`](https://man7.org/linux/man-pages/man2/exit_group.2.html)
pub fn exit_group(status: i32) -> ! {
    loop {
        // SAFETY: exit_group takes an integer and does not return.
        let _ = unsafe { sys!(libc::SYS_exit_group, status) };
    }
}

// ---------------------------------------------------------------------------------------------
// Descriptors

/// `dup3(old, new, flags)`—Duplicates `old` onto `new`.
///
/// # References
/// - [`dup3(2)`](https://man7.org/linux/man-pages/man2/dup3.2.html)
pub fn dup3(old: c_int, new: c_int, flags: c_int) -> Result<c_int> {
    // SAFETY: integer arguments only.
    unsafe { sys!(libc::SYS_dup3, old, new, flags) }.map(|fd| fd as c_int)
}

/// `fcntl(fd, cmd, arg)` for the integer commands (`F_DUPFD_CLOEXEC`, `F_SETFD`, `F_GETFD`, ...).
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub fn fcntl_int(fd: c_int, cmd: c_int, arg: c_int) -> Result<c_int> {
    // SAFETY: integer arguments only; the commands allowed here take no pointer.
    unsafe { sys!(libc::SYS_fcntl, fd, cmd, arg) }.map(|r| r as c_int)
}

/// `close(fd)`.
///
/// # References
/// - [`close(2)`](https://man7.org/linux/man-pages/man2/close.2.html)
pub fn close(fd: c_int) -> Result<()> {
    // SAFETY: integer argument only.
    unsafe { sys!(libc::SYS_close, fd) }.map(drop)
}

/// `close_range(first, last, flags)`—Closes every descriptor in `first..=last`.
///
/// # References
/// - [`close_range(2)`](https://man7.org/linux/man-pages/man2/close_range.2.html)
pub fn close_range(first: c_uint, last: c_uint, flags: c_uint) -> Result<()> {
    // SAFETY: integer arguments only.
    unsafe { sys!(libc::SYS_close_range, first, last, flags) }.map(drop)
}

/// `write(fd, buf)`—Writes bytes; returns how many were written.
///
/// # References
/// - [`write(2)`](https://man7.org/linux/man-pages/man2/write.2.html)
pub fn write(fd: c_int, buf: &[u8]) -> Result<usize> {
    // SAFETY: the slice is valid for reads of its length.
    unsafe { sys!(libc::SYS_write, fd, buf.as_ptr(), buf.len()) }
}

// ---------------------------------------------------------------------------------------------
// Process attributes

/// `chdir(path)`.
///
/// # Safety
/// `path` must be a NUL-terminated string.
///
/// # References
/// - [`chdir(2)`](https://man7.org/linux/man-pages/man2/chdir.2.html)
pub unsafe fn chdir(path: *const c_char) -> Result<()> {
    // SAFETY: the caller guarantees a NUL-terminated path.
    unsafe { sys!(libc::SYS_chdir, path) }.map(drop)
}

/// `setpgid(pid, pgid)`.
///
/// # References
/// - [`setpgid(2)`](https://man7.org/linux/man-pages/man2/setpgid.2.html)
pub fn setpgid(pid: i32, pgid: i32) -> Result<()> {
    // SAFETY: integer arguments only.
    unsafe { sys!(libc::SYS_setpgid, pid, pgid) }.map(drop)
}

/// `setsid()`.
///
/// # References
/// - [`setsid(2)`](https://man7.org/linux/man-pages/man2/setsid.2.html)
pub fn setsid() -> Result<i32> {
    // SAFETY: no arguments.
    unsafe { sys!(libc::SYS_setsid) }.map(|r| r as i32)
}

/// `setgroups(groups)`—Sets the supplementary groups of the calling thread only.
///
/// The raw system call changes one thread, unlike libc's wrapper, which signals every thread of
/// the process to keep them in step; in a freshly cloned single-threaded child that is exactly right.
///
/// # References
/// - [`setgroups(2)`](https://man7.org/linux/man-pages/man2/setgroups.2.html)
pub fn setgroups(groups: &[u32]) -> Result<()> {
    // SAFETY: the slice is valid for reads of `len` gid_t (u32) values.
    unsafe { sys!(libc::SYS_setgroups, groups.len(), groups.as_ptr()) }.map(drop)
}

/// `setgid(gid)` for the calling thread only (see [`setgroups`]).
///
/// # References
/// - [`setgid(2)`](https://man7.org/linux/man-pages/man2/setgid.2.html)
pub fn setgid(gid: u32) -> Result<()> {
    // SAFETY: integer argument only.
    unsafe { sys!(libc::SYS_setgid, gid) }.map(drop)
}

/// `setuid(uid)` for the calling thread only (see [`setgroups`]).
///
/// # References
/// - [`setuid(2)`](https://man7.org/linux/man-pages/man2/setuid.2.html)
pub fn setuid(uid: u32) -> Result<()> {
    // SAFETY: integer argument only.
    unsafe { sys!(libc::SYS_setuid, uid) }.map(drop)
}

/// `getpid()`.
pub fn getpid() -> i32 {
    // SAFETY: no arguments; getpid cannot fail.
    unsafe { sys!(libc::SYS_getpid) }.map_or(0, |p| p as i32)
}

// ---------------------------------------------------------------------------------------------
// Signals

/// A kernel signal set (`sigset_t` as the kernel sees it: 64 bits on x86_64).
pub type KernelSigset = u64;

/// Every signal, including the ones libc reserves for itself (the kernel ignores the bits of
/// `SIGKILL` and `SIGSTOP`).
pub const SIGSET_ALL: KernelSigset = !0;

/// The highest signal number.
pub const NSIG: c_int = 64;

/// `rt_sigprocmask(how, set, old)` on the calling thread.
///
/// # References
/// - [`rt_sigprocmask(2)`](https://man7.org/linux/man-pages/man2/sigprocmask.2.html)
pub fn rt_sigprocmask(
    how: c_int,
    set: Option<&KernelSigset>,
    old: Option<&mut KernelSigset>,
) -> Result<()> {
    let set = set.map_or(core::ptr::null(), |s| s as *const KernelSigset);
    let old = old.map_or(core::ptr::null_mut(), |s| s as *mut KernelSigset);
    // SAFETY: both pointers are null or point to a KernelSigset of the size passed.
    unsafe { sys!(libc::SYS_rt_sigprocmask, how, set, old, 8usize) }.map(drop)
}

/// `struct sigaction` as the `rt_sigaction` system call takes it on x86_64.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct KernelSigaction {
    /// `SIG_DFL` (0), `SIG_IGN` (1) or a handler address.
    pub handler: usize,
    /// `SA_*` flags.
    pub flags: u64,
    /// The restorer trampoline (`SA_RESTORER`).
    pub restorer: usize,
    /// Signals blocked while the handler runs.
    pub mask: KernelSigset,
}

/// `SIG_DFL` as a handler value.
pub const SIG_DFL: usize = 0;
/// `SIG_IGN` as a handler value.
pub const SIG_IGN: usize = 1;

/// `rt_sigaction(sig, new, old)`.
///
/// # References
/// - [`sigaction(2)`](https://man7.org/linux/man-pages/man2/sigaction.2.html)
pub fn rt_sigaction(
    sig: c_int,
    new: Option<&KernelSigaction>,
    old: Option<&mut KernelSigaction>,
) -> Result<()> {
    let new = new.map_or(core::ptr::null(), |s| s as *const KernelSigaction);
    let old = old.map_or(core::ptr::null_mut(), |s| s as *mut KernelSigaction);
    // SAFETY: both pointers are null or point to a KernelSigaction; the size is the kernel's.
    unsafe { sys!(libc::SYS_rt_sigaction, sig, new, old, 8usize) }.map(drop)
}

// ---------------------------------------------------------------------------------------------
// pidfd

/// `pidfd_open(pid, flags)`—Opens a descriptor for a process (close-on-exec).
///
/// # References
/// - [`pidfd_open(2)`](https://man7.org/linux/man-pages/man2/pidfd_open.2.html)
pub fn pidfd_open(pid: u32, flags: c_uint) -> Result<c_int> {
    // SAFETY: integer arguments only.
    unsafe { sys!(libc::SYS_pidfd_open, pid, flags) }.map(|fd| fd as c_int)
}

/// `pidfd_send_signal(pidfd, sig, NULL, 0)`—Sends a signal to the process behind a pidfd.
///
/// Unlike `kill(pid)`, it can never hit a process that reused the pid after the child was reaped.
///
/// # References
/// - [`pidfd_send_signal(2)`](https://man7.org/linux/man-pages/man2/pidfd_send_signal.2.html)
pub fn pidfd_send_signal(pidfd: c_int, sig: c_int) -> Result<()> {
    // SAFETY: a null siginfo is allowed and means "as kill() would fill it".
    unsafe { sys!(libc::SYS_pidfd_send_signal, pidfd, sig, 0usize, 0u32) }.map(drop)
}

// ---------------------------------------------------------------------------------------------
// Container-grade setup

/// `read(fd, buf)`—Reads bytes; returns how many were read (0 at end of file).
///
/// # References
/// - [`read(2)`](https://man7.org/linux/man-pages/man2/read.2.html)
pub fn read(fd: c_int, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: the slice is valid for writes of its length.
    unsafe { sys!(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) }
}

/// `getppid()`.
pub fn getppid() -> i32 {
    // SAFETY: no arguments; getppid cannot fail.
    unsafe { sys!(libc::SYS_getppid) }.map_or(0, |p| p as i32)
}

/// `getpgid(0)`: the calling process's process group.
pub fn getpgrp() -> Result<i32> {
    // SAFETY: integer argument only.
    unsafe { sys!(libc::SYS_getpgid, 0) }.map(|p| p as i32)
}

/// `prctl(option, a, b, c, d)` for the integer options.
///
/// # References
/// - [`prctl(2)`](https://man7.org/linux/man-pages/man2/prctl.2.html)
pub fn prctl(option: c_int, a: usize, b: usize, c: usize, d: usize) -> Result<usize> {
    // SAFETY: the options progeny uses take integers only.
    unsafe { sys!(libc::SYS_prctl, option, a, b, c, d) }
}

/// `prlimit64(0, resource, new, NULL)`—Sets a resource limit of the calling process.
///
/// # References
/// - [`prlimit(2)`](https://man7.org/linux/man-pages/man2/getrlimit.2.html)
pub fn setrlimit(resource: u32, soft: u64, hard: u64) -> Result<()> {
    let limit = [soft, hard];
    // SAFETY: `limit` has the layout of struct rlimit64 and outlives the call.
    unsafe { sys!(libc::SYS_prlimit64, 0, resource, limit.as_ptr(), 0usize) }.map(drop)
}

/// `setpriority(PRIO_PROCESS, 0, nice)`—Sets the calling process's nice value.
///
/// # References
/// - [`setpriority(2)`](https://man7.org/linux/man-pages/man2/setpriority.2.html)
pub fn setpriority_self(nice: i32) -> Result<()> {
    // SAFETY: integer arguments only.
    unsafe { sys!(libc::SYS_setpriority, libc::PRIO_PROCESS, 0, nice) }.map(drop)
}

/// `IOPRIO_WHO_PROCESS`: `ioprio_set`/`ioprio_get` on one thread (0 = the caller).
pub const IOPRIO_WHO_PROCESS: c_int = 1;

/// `ioprio_set(IOPRIO_WHO_PROCESS, 0, prio)`—Sets the calling thread's I/O priority.
///
/// # References
/// - [`ioprio_set(2)`](https://man7.org/linux/man-pages/man2/ioprio_set.2.html)
pub fn ioprio_set_self(prio: u16) -> Result<()> {
    // SAFETY: integer arguments only.
    unsafe { sys!(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, prio) }.map(drop)
}

/// `ioprio_get(IOPRIO_WHO_PROCESS, 0)`—The calling thread's I/O priority.
pub fn ioprio_get_self() -> Result<u16> {
    // SAFETY: integer arguments only.
    unsafe { sys!(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0) }.map(|p| p as u16)
}

/// `sched_setaffinity(0, mask)`—Pins the calling thread to the CPUs set in `mask`.
///
/// # References
/// - [`sched_setaffinity(2)`](https://man7.org/linux/man-pages/man2/sched_setaffinity.2.html)
pub fn sched_setaffinity_self(mask: &[u64]) -> Result<()> {
    // SAFETY: the slice is valid for reads of its length in bytes.
    unsafe {
        sys!(
            libc::SYS_sched_setaffinity,
            0,
            mask.len() * 8,
            mask.as_ptr()
        )
    }
    .map(drop)
}

/// `sethostname(name)`.
///
/// # References
/// - [`sethostname(2)`](https://man7.org/linux/man-pages/man2/sethostname.2.html)
pub fn sethostname(name: &[u8]) -> Result<()> {
    // SAFETY: the slice is valid for reads of its length.
    unsafe { sys!(libc::SYS_sethostname, name.as_ptr(), name.len()) }.map(drop)
}

/// `ioctl(fd, TIOCSCTTY, 0)`—Makes the terminal `fd` the controlling terminal.
///
/// # References
/// - [`ioctl_tty(2)`](https://man7.org/linux/man-pages/man2/TIOCSCTTY.2const.html)
pub fn ioctl_tiocsctty(fd: c_int) -> Result<()> {
    // SAFETY: TIOCSCTTY takes an integer argument.
    unsafe { sys!(libc::SYS_ioctl, fd, libc::TIOCSCTTY, 0) }.map(drop)
}

/// `ioctl(fd, TIOCSPGRP, &pgrp)`—`tcsetpgrp`: makes `pgrp` the terminal's foreground group.
///
/// # References
/// - [`tcsetpgrp(3)`](https://man7.org/linux/man-pages/man3/tcsetpgrp.3.html)
pub fn ioctl_tiocspgrp(fd: c_int, pgrp: i32) -> Result<()> {
    // SAFETY: TIOCSPGRP reads one pid_t through the pointer, which outlives the call.
    unsafe { sys!(libc::SYS_ioctl, fd, libc::TIOCSPGRP, &pgrp as *const i32) }.map(drop)
}

/// `clone3(NULL, 0)`: always refused, with `EINVAL` where `clone3` exists and `ENOSYS` (or a
/// seccomp filter's answer) where it does not. Creates no process.
pub fn clone3_presence() -> Result<usize> {
    // SAFETY: a zero size is below CLONE_ARGS_SIZE_VER0, so the kernel refuses before reading
    // the (null) pointer or creating anything.
    unsafe { sys!(libc::SYS_clone3, 0usize, 0usize) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_come_back_as_errno() {
        assert_eq!(close(-1), Err(Errno(libc::EBADF)));
        assert_eq!(dup3(-1, 100, 0), Err(Errno(libc::EBADF)));
    }

    #[test]
    fn getpid_matches_libc() {
        // SAFETY: getpid has no preconditions.
        assert_eq!(getpid(), unsafe { libc::getpid() });
    }
}
