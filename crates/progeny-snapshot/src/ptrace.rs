//! Thin, checked wrappers over the `ptrace` requests a snapshot needs.
//!
//! Every request goes through the raw `ptrace` syscall (not glibc's variadic wrapper, whose
//! PEEK convention mixes data and errors) and returns `io::Result`.
//!
//! # References
//! - [ptrace(2)](https://man7.org/linux/man-pages/man2/ptrace.2.html)
//! - [waitpid(2)](https://man7.org/linux/man-pages/man2/waitpid.2.html)

use std::io;
use std::mem::{size_of, MaybeUninit};

pub(crate) const PTRACE_CONT: libc::c_long = 7;
pub(crate) const PTRACE_DETACH: libc::c_long = 17;
pub(crate) const PTRACE_GETREGS: libc::c_long = 12;
pub(crate) const PTRACE_SETREGS: libc::c_long = 13;
pub(crate) const PTRACE_SYSCALL: libc::c_long = 24;
pub(crate) const PTRACE_SETOPTIONS: libc::c_long = 0x4200;
pub(crate) const PTRACE_GETEVENTMSG: libc::c_long = 0x4201;
pub(crate) const PTRACE_GETREGSET: libc::c_long = 0x4204;
pub(crate) const PTRACE_SEIZE: libc::c_long = 0x4206;
pub(crate) const PTRACE_INTERRUPT: libc::c_long = 0x4207;
pub(crate) const PTRACE_GETSIGMASK: libc::c_long = 0x420a;
pub(crate) const PTRACE_SETSIGMASK: libc::c_long = 0x420b;
pub(crate) const PTRACE_SECCOMP_GET_FILTER: libc::c_long = 0x420c;

pub(crate) const PTRACE_O_TRACESYSGOOD: libc::c_long = 1;
pub(crate) const PTRACE_O_TRACECLONE: libc::c_long = 8;
pub(crate) const PTRACE_O_EXITKILL: libc::c_long = 0x0010_0000;

pub(crate) const PTRACE_EVENT_CLONE: i32 = 3;
pub(crate) const PTRACE_EVENT_STOP: i32 = 128;

/// `NT_X86_XSTATE`: the regset holding the full XSAVE area (x87, SSE, AVX, ...).
pub(crate) const NT_X86_XSTATE: libc::c_long = 0x202;

/// The general-purpose registers as `PTRACE_GETREGS` returns them (`struct user_regs_struct`).
pub type Registers = libc::user_regs_struct;

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Issues one ptrace request whose `addr` and `data` are plain integers.
fn request(req: libc::c_long, tid: i32, addr: usize, data: usize) -> io::Result<libc::c_long> {
    // SAFETY: every caller passes either integers or a pointer to a live, correctly sized
    // buffer owned by the caller for the duration of the call; the kernel validates the rest.
    check(unsafe { libc::syscall(libc::SYS_ptrace, req, tid as libc::c_long, addr, data) })
}

/// `PTRACE_SEIZE`: attach without stopping the thread, with `options`.
pub(crate) fn seize(tid: i32, options: libc::c_long) -> io::Result<()> {
    request(PTRACE_SEIZE, tid, 0, options as usize).map(drop)
}

/// `PTRACE_INTERRUPT`: ask a seized thread to enter a `PTRACE_EVENT_STOP`.
pub(crate) fn interrupt(tid: i32) -> io::Result<()> {
    request(PTRACE_INTERRUPT, tid, 0, 0).map(drop)
}

/// `PTRACE_CONT` with `signal` (0 for none).
pub(crate) fn cont(tid: i32, signal: i32) -> io::Result<()> {
    request(PTRACE_CONT, tid, 0, signal as usize).map(drop)
}

/// `PTRACE_SYSCALL`: resume until the next syscall entry or exit.
pub(crate) fn cont_syscall(tid: i32) -> io::Result<()> {
    request(PTRACE_SYSCALL, tid, 0, 0).map(drop)
}

/// `PTRACE_DETACH`, delivering `signal` (0 for none) as the thread resumes.
pub(crate) fn detach(tid: i32, signal: i32) -> io::Result<()> {
    request(PTRACE_DETACH, tid, 0, signal as usize).map(drop)
}

/// `PTRACE_SETOPTIONS`.
pub(crate) fn set_options(tid: i32, options: libc::c_long) -> io::Result<()> {
    request(PTRACE_SETOPTIONS, tid, 0, options as usize).map(drop)
}

/// `PTRACE_GETEVENTMSG`: the message of the last ptrace event (a new thread's or child's id).
pub(crate) fn event_message(tid: i32) -> io::Result<u64> {
    let mut message: libc::c_ulong = 0;
    request(
        PTRACE_GETEVENTMSG,
        tid,
        0,
        &mut message as *mut libc::c_ulong as usize,
    )?;
    Ok(message)
}

/// `PTRACE_GETREGS`.
pub(crate) fn get_regs(tid: i32) -> io::Result<Registers> {
    let mut regs = MaybeUninit::<Registers>::zeroed();
    request(PTRACE_GETREGS, tid, 0, regs.as_mut_ptr() as usize)?;
    // SAFETY: the struct was zero-initialised (a valid value for plain integers) and the
    // kernel filled it on success.
    Ok(unsafe { regs.assume_init() })
}

/// `PTRACE_SETREGS`.
pub(crate) fn set_regs(tid: i32, regs: &Registers) -> io::Result<()> {
    request(PTRACE_SETREGS, tid, 0, regs as *const Registers as usize).map(drop)
}

/// `PTRACE_GETREGSET` for `note_type` into `buf`; returns how many bytes the kernel wrote.
pub(crate) fn get_regset(tid: i32, note_type: libc::c_long, buf: &mut [u8]) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    request(
        PTRACE_GETREGSET,
        tid,
        note_type as usize,
        &mut iov as *mut libc::iovec as usize,
    )?;
    Ok(iov.iov_len)
}

/// `PTRACE_GETSIGMASK`: the thread's blocked-signal mask as a 64-bit set.
pub(crate) fn get_sigmask(tid: i32) -> io::Result<u64> {
    let mut mask: u64 = 0;
    request(
        PTRACE_GETSIGMASK,
        tid,
        size_of::<u64>(),
        &mut mask as *mut u64 as usize,
    )?;
    Ok(mask)
}

/// `PTRACE_SETSIGMASK`.
pub(crate) fn set_sigmask(tid: i32, mask: u64) -> io::Result<()> {
    request(
        PTRACE_SETSIGMASK,
        tid,
        size_of::<u64>(),
        &mask as *const u64 as usize,
    )
    .map(drop)
}

/// One classic-BPF instruction as the kernel stores it (`struct sock_filter`).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `PTRACE_SECCOMP_GET_FILTER`: the `index`-th seccomp filter of the thread (0 is the newest).
///
/// Needs `CAP_SYS_ADMIN` and a stopped tracee; fails with `ENOENT` past the last filter.
pub(crate) fn seccomp_filter(tid: i32, index: usize) -> io::Result<Vec<SockFilter>> {
    let count = request(PTRACE_SECCOMP_GET_FILTER, tid, index, 0)? as usize;
    let mut program = vec![SockFilter::default(); count];
    let written = request(
        PTRACE_SECCOMP_GET_FILTER,
        tid,
        index,
        program.as_mut_ptr() as usize,
    )? as usize;
    program.truncate(written);
    Ok(program)
}

/// How a waited-for thread changed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitStatus {
    /// The thread exited or was killed; it is gone.
    Gone,
    /// A ptrace stop: the stop signal and the ptrace event (0 for none).
    Stopped { signal: i32, event: i32 },
}

/// `waitpid(tid, __WALL)`, retrying on `EINTR`: blocks until `tid` changes state.
pub(crate) fn wait(tid: i32) -> io::Result<WaitStatus> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a live local the kernel writes one int into.
        let ret = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
        if ret == -1 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        break;
    }
    if libc::WIFSTOPPED(status) {
        Ok(WaitStatus::Stopped {
            signal: libc::WSTOPSIG(status),
            event: (status >> 16) & 0xffff,
        })
    } else {
        Ok(WaitStatus::Gone)
    }
}

/// Like [`wait`], but an exit is only observed, not consumed (`waitid` with `WNOWAIT`): used
/// for a target that is also our own child, whose exit status belongs to the code that
/// spawned it, not to the snapshot.
pub(crate) fn wait_keeping_exit(tid: i32) -> io::Result<WaitStatus> {
    loop {
        // SAFETY: siginfo_t is plain data; zeroed is a valid value the kernel overwrites.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a live local of the right type.
        let ret = unsafe {
            libc::waitid(
                libc::P_PID,
                tid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WSTOPPED | libc::WNOWAIT | libc::__WALL,
            )
        };
        if ret == -1 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        return match info.si_code {
            libc::CLD_EXITED | libc::CLD_KILLED | libc::CLD_DUMPED => Ok(WaitStatus::Gone),
            _ => wait(tid),
        };
    }
}
