//! `snapshot_me`: a copy-on-write copy of the calling process, parked for an analyser.

use std::io;
use std::marker::PhantomData;

/// A parked copy-on-write child of the calling process (see [`snapshot_me`]).
///
/// Dropping it kills and reaps the child.
#[derive(Debug)]
pub struct SelfSnapshot {
    child: i32,
    reaped: bool,
    // The child is reaped with waitpid(__WCLONE), which any thread may do, but keep the value
    // with its creator so the reap cannot race a `wait` of the same thread elsewhere.
    _not_send: PhantomData<*const ()>,
}

impl SelfSnapshot {
    /// The child's pid: attach to it with `ptrace`, read it with `process_vm_readv`.
    pub fn child(&self) -> i32 {
        self.child
    }

    /// Kills and reaps the child now (dropping does the same, ignoring errors).
    ///
    /// # Errors
    /// Fails if the child cannot be waited for (it was reaped by someone else).
    pub fn kill(mut self) -> io::Result<()> {
        self.kill_and_reap()
    }

    fn kill_and_reap(&mut self) -> io::Result<()> {
        if self.reaped {
            return Ok(());
        }
        self.reaped = true;
        // SAFETY: plain syscall on our own unreaped child, whose pid cannot be reused.
        unsafe { libc::kill(self.child, libc::SIGKILL) };
        let mut status = 0;
        loop {
            // SAFETY: `status` is a live local; __WCLONE because the child has no exit signal.
            let ret = unsafe { libc::waitpid(self.child, &mut status, libc::__WCLONE) };
            if ret == self.child {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

impl Drop for SelfSnapshot {
    fn drop(&mut self) {
        let _ = self.kill_and_reap();
    }
}

/// Forks a copy-on-write child of the calling process that parks itself at once, for an
/// out-of-process analyser to inspect, and returns while the caller runs on.
///
/// The child is created with a raw `clone` whose exit signal is 0: no `SIGCHLD` ever reaches
/// the caller and its `wait(-1)` never sees the child (only `__WALL`/`__WCLONE` waits do). In
/// the child only raw syscalls run (it is a one-thread copy of a possibly multi-threaded
/// process, where a lock held by another thread at the fork stays held forever): it blocks
/// every signal and sleeps in `pause` until killed. It does not stop itself with `SIGSTOP`,
/// because a stop is reported to the parent as `SIGCHLD` whatever the exit signal.
///
/// # Errors
/// Fails if `clone` fails (`EAGAIN` at the process limit, `ENOMEM`).
///
/// # References
/// - [clone(2)](https://man7.org/linux/man-pages/man2/clone.2.html)
/// - [wait(2), `__WCLONE`](https://man7.org/linux/man-pages/man2/wait.2.html)
pub fn snapshot_me() -> io::Result<SelfSnapshot> {
    // SAFETY: a clone without CLONE_VM is a fork: the child gets a private copy of the address
    // space, including this stack frame, and runs only `park`, which makes raw syscalls and
    // never returns.
    let ret = unsafe { libc::syscall(libc::SYS_clone, 0 as libc::c_ulong, 0, 0, 0, 0) };
    match ret {
        -1 => Err(io::Error::last_os_error()),
        0 => park(),
        child => Ok(SelfSnapshot {
            child: child as i32,
            reaped: false,
            _not_send: PhantomData,
        }),
    }
}

/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
fn park() -> ! {
    let all: u64 = !0;
    // SAFETY: raw syscalls with valid pointers to locals; rt_sigprocmask takes the 8-byte
    // kernel sigset.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            &all as *const u64,
            0usize,
            8usize,
        );
        loop {
            libc::syscall(libc::SYS_pause);
        }
    }
}
