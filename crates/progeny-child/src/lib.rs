//! The plan executor: the only progeny code that runs in a child between `clone` and `execve`.
//!
//! # The child contract
//! Everything in this crate runs in the cloned child: async-signal-safe, no allocation, no locks.
//!
//! The child created with `CLONE_VM|CLONE_VFORK` shares every byte of memory with its parent,
//! whose calling thread is suspended while the other threads run on. Anything that takes a lock
//! (malloc, stdio, the dynamic loader), writes thread-local state (`errno`), or unwinds could
//! deadlock or corrupt the parent. So this crate is `no_std` without `alloc`, which makes an
//! allocation impossible to write; it calls only the raw system calls of `progeny-sys`, which return
//! `-errno` instead of touching `errno`; and its lints forbid indexing, `unwrap`, arithmetic that can
//! overflow and every other panic path. The parent prepares everything (C strings, pointer arrays,
//! descriptor moves, ranges to close) into a [`Plan`] first; the child only walks it.
//! (Go's `forkAndExecInChild1` states the same rule at its top: no allocation after this point.)
//!
//! The first failure is reported as a [`Failure`] `{step, errno, index}`; the entry points write it
//! where the parent reads it (shared memory for `CLONE_VM`, a pipe after `fork`) and exit with 127.
#![no_std]
#![allow(unsafe_code)]
#![deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::unreachable,
    clippy::todo
)]

use core::ffi::{c_char, c_int, c_void};
use progeny_sys as sys;
use progeny_sys::{Errno, KernelSigaction, KernelSigset};

/// The step of child setup that failed, reported to the parent with the errno.
#[repr(u32)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Resetting a signal disposition (`rt_sigaction`).
    SignalDisposition = 1,
    /// Setting the child's signal mask (`rt_sigprocmask`).
    SignalMask = 2,
    /// Moving a descriptor out of the way before the mapping (`fcntl(F_DUPFD_CLOEXEC)`).
    /// `index` is the mapping.
    FdRelocate = 3,
    /// Placing a descriptor at its number in the child (`dup3` or `fcntl(F_SETFD)`).
    /// `index` is the mapping.
    FdMap = 4,
    /// Closing the descriptors the child must not inherit (`close_range`).
    CloseOtherFds = 5,
    /// `setgroups`.
    SetGroups = 6,
    /// `setgid`.
    SetGid = 7,
    /// `setuid`.
    SetUid = 8,
    /// `chdir`.
    Chdir = 9,
    /// `setpgid`.
    SetPgid = 10,
    /// `setsid`.
    SetSid = 11,
    /// `execve`. `index` is the program candidate whose error is reported.
    Exec = 12,
    /// Waiting for the parent to finish its part (user namespace maps): the parent went away.
    ParentSync = 13,
    /// `prctl(PR_SET_PDEATHSIG)`.
    ParentDeathSignal = 14,
    /// The parent died before the death signal was armed: the child exits instead of running
    /// orphaned.
    ParentGone = 15,
    /// Moving into the cgroup by writing `cgroup.procs`.
    CgroupMove = 16,
    /// `sethostname`.
    Hostname = 17,
    /// `ioctl(TIOCSCTTY)`.
    ControllingTty = 18,
    /// `tcsetpgrp` (`ioctl(TIOCSPGRP)`).
    Foreground = 19,
    /// `prlimit64`. `index` is the limit.
    Rlimit = 20,
    /// `setpriority`.
    Nice = 21,
    /// `ioprio_set`.
    IoPriority = 22,
    /// `sched_setaffinity`.
    CpuAffinity = 23,
    /// `prctl(PR_CAPBSET_DROP)`. `index` is the capability.
    CapabilityBound = 24,
    /// `prctl(PR_CAP_AMBIENT_CLEAR_ALL)`.
    AmbientCapabilities = 25,
    /// `prctl(PR_SET_NO_NEW_PRIVS)`.
    NoNewPrivs = 26,
    /// Parent side: writing the child's `uid_map`.
    UidMap = 27,
    /// Parent side: writing the child's `gid_map` (or `setgroups`).
    GidMap = 28,
    /// Parent side: `clone3` itself refused (for example `CLONE_INTO_CGROUP`).
    Clone = 29,
}

impl Step {
    /// Decodes a step written by [`Failure::encode`]; `None` for an unknown value.
    pub fn from_u32(v: u32) -> Option<Step> {
        Some(match v {
            1 => Step::SignalDisposition,
            2 => Step::SignalMask,
            3 => Step::FdRelocate,
            4 => Step::FdMap,
            5 => Step::CloseOtherFds,
            6 => Step::SetGroups,
            7 => Step::SetGid,
            8 => Step::SetUid,
            9 => Step::Chdir,
            10 => Step::SetPgid,
            11 => Step::SetSid,
            12 => Step::Exec,
            13 => Step::ParentSync,
            14 => Step::ParentDeathSignal,
            15 => Step::ParentGone,
            16 => Step::CgroupMove,
            17 => Step::Hostname,
            18 => Step::ControllingTty,
            19 => Step::Foreground,
            20 => Step::Rlimit,
            21 => Step::Nice,
            22 => Step::IoPriority,
            23 => Step::CpuAffinity,
            24 => Step::CapabilityBound,
            25 => Step::AmbientCapabilities,
            26 => Step::NoNewPrivs,
            27 => Step::UidMap,
            28 => Step::GidMap,
            29 => Step::Clone,
            _ => return None,
        })
    }
}

/// The first failure in the child: which step, which errno, and which item of that step.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct Failure {
    /// A [`Step`] as `u32`; 0 means "no failure".
    pub step: u32,
    /// The positive errno.
    pub errno: i32,
    /// Which mapping, candidate or signal the step was working on.
    pub index: u32,
}

impl Failure {
    /// The size of a failure on the wire (used by the fork backend's report pipe).
    pub const WIRE_SIZE: usize = 12;

    /// A failure of `step` with `errno` at item `index`.
    pub fn new(step: Step, errno: Errno, index: usize) -> Failure {
        Failure {
            step: step as u32,
            errno: errno.raw(),
            index: index as u32,
        }
    }

    /// The bytes written into the report pipe.
    pub fn encode(&self) -> [u8; 12] {
        let s = self.step.to_ne_bytes();
        let e = self.errno.to_ne_bytes();
        let i = self.index.to_ne_bytes();
        [
            s[0], s[1], s[2], s[3], e[0], e[1], e[2], e[3], i[0], i[1], i[2], i[3],
        ]
    }

    /// Decodes the bytes of [`Failure::encode`].
    pub fn decode(b: [u8; 12]) -> Failure {
        Failure {
            step: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            errno: i32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
            index: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
        }
    }
}

/// One descriptor placement: `src` (open in the parent, inherited by the child) becomes `dst`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FdMap {
    /// The descriptor as the parent holds it.
    pub src: c_int,
    /// The number the child's program sees.
    pub dst: c_int,
    /// `src` is the `dst` of another mapping, so it must be moved above every `dst` before any
    /// mapping is placed (this is what makes swaps such as 3→4 with 4→3 work).
    pub relocate: bool,
    /// Where the child keeps the relocated copy: scratch space in the plan, so the child needs no
    /// memory of its own (the parent sets it to -1).
    pub moved: c_int,
}

/// One resource limit to set in the child.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Rlimit {
    /// `RLIMIT_*`.
    pub resource: u32,
    /// Soft limit (`RLIM_INFINITY` is `u64::MAX`).
    pub soft: u64,
    /// Hard limit.
    pub hard: u64,
}

/// What happens to signal dispositions in the child.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SignalReset {
    /// The kernel already reset caught signals (`CLONE_CLEAR_SIGHAND`): only `SIGPIPE` is left.
    SigpipeOnly,
    /// Walk every signal: caught ones go to `SIG_DFL`, ignored ones stay ignored (as std does),
    /// except `SIGPIPE`, which is reset too.
    AllCaught,
}

/// Everything the child needs, prepared by the parent. The child only reads it, except for the
/// `moved` scratch field of relocated [`FdMap`]s and the report slot.
pub struct Plan<'a> {
    /// Paths to try with `execve`, in order (a single one when the program has a slash).
    pub candidates: &'a [*const c_char],
    /// NULL-terminated `argv`.
    pub argv: *const *const c_char,
    /// NULL-terminated `envp`.
    pub envp: *const *const c_char,
    /// Directory to change into, or null.
    pub cwd: *const c_char,
    /// Descriptor placements.
    pub fds: &'a mut [FdMap],
    /// The lowest number a relocated descriptor may take (above every `dst`).
    pub relocate_floor: c_int,
    /// Inclusive ranges of descriptors to close after the placements (gaps between kept ones).
    pub close_ranges: &'a [(u32, u32)],
    /// Supplementary groups to set, or `None` to leave them.
    pub groups: Option<&'a [u32]>,
    /// Drop all supplementary groups before `setuid`, ignoring `EPERM` (std's rule when a uid
    /// is set without explicit groups).
    pub drop_groups_for_uid: bool,
    /// Group id to set.
    pub gid: Option<u32>,
    /// User id to set.
    pub uid: Option<u32>,
    /// Start a new session.
    pub setsid: bool,
    /// Process group to join (0 = a new group led by the child).
    pub pgroup: Option<i32>,
    /// How signal dispositions are reset.
    pub signal_reset: SignalReset,
    /// The signal mask the program starts with.
    pub sigmask: KernelSigset,
    /// A pipe to read one byte from before anything else, or -1: the parent writes it once it has
    /// done its part (user namespace maps). End of file means the parent is gone.
    pub sync_fd: c_int,
    /// `(signal, parent pid)`: arm `PR_SET_PDEATHSIG`, then check that the parent is still the
    /// one that cloned us.
    pub parent_death: Option<(c_int, i32)>,
    /// A `cgroup.procs` opened for writing, or -1: the child moves itself there.
    pub cgroup_procs_fd: c_int,
    /// Host name to set (in a new UTS namespace).
    pub hostname: Option<&'a [u8]>,
    /// Descriptor (in the child) of the terminal to make the controlling terminal, or -1.
    pub controlling_tty: c_int,
    /// Descriptor (in the child) of the terminal whose foreground group becomes the child's, or -1.
    pub foreground_tty: c_int,
    /// Resource limits.
    pub rlimits: &'a [Rlimit],
    /// Nice value.
    pub nice: Option<i32>,
    /// I/O priority (`IOPRIO_PRIO_VALUE(class, data)`).
    pub ioprio: Option<u16>,
    /// CPU mask words for `sched_setaffinity`.
    pub cpu_affinity: Option<&'a [u64]>,
    /// Capabilities to drop from the bounding set.
    pub bounding_drop: &'a [u32],
    /// Clear the ambient capability set.
    pub clear_ambient: bool,
    /// Set `no_new_privs`.
    pub no_new_privs: bool,
}

/// Runs the plan up to `execve`; returns only on failure, with the first failure.
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
pub fn execute(plan: &mut Plan<'_>) -> Failure {
    match setup(plan) {
        Ok(()) => exec(plan),
        Err(f) => f,
    }
}

/// Everything before `execve`: the parent's go-ahead and the death signal first, then the cgroup,
/// descriptors, session and terminal, limits, capabilities, ids, directory, and signals last.
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
fn setup(plan: &mut Plan<'_>) -> Result<(), Failure> {
    if plan.sync_fd >= 0 {
        let mut byte = [0u8; 1];
        match sys::read(plan.sync_fd, &mut byte) {
            Ok(1) => {}
            Ok(_) => return Err(Failure::new(Step::ParentSync, Errno(libc::EPIPE), 0)),
            Err(e) => return Err(Failure::new(Step::ParentSync, e, 0)),
        }
    }
    if let Some((sig, parent)) = plan.parent_death {
        sys::prctl(libc::PR_SET_PDEATHSIG, sig as usize, 0, 0, 0)
            .map_err(|e| Failure::new(Step::ParentDeathSignal, e, 0))?;
        // The parent may have died before the signal was armed: then nothing would ever deliver
        // it, and the child must not run on as an orphan.
        if sys::getppid() != parent {
            return Err(Failure::new(Step::ParentGone, Errno::SRCH, 0));
        }
    }
    if plan.cgroup_procs_fd >= 0 {
        // "0" moves the writing process.
        sys::write(plan.cgroup_procs_fd, b"0").map_err(|e| Failure::new(Step::CgroupMove, e, 0))?;
    }
    place_fds(plan.fds, plan.relocate_floor)?;
    for &(first, last) in plan.close_ranges {
        close_other_fds(first, last).map_err(|e| Failure::new(Step::CloseOtherFds, e, 0))?;
    }
    if plan.setsid {
        sys::setsid().map_err(|e| Failure::new(Step::SetSid, e, 0))?;
    }
    if plan.controlling_tty >= 0 {
        sys::ioctl_tiocsctty(plan.controlling_tty)
            .map_err(|e| Failure::new(Step::ControllingTty, e, 0))?;
    }
    if let Some(pgid) = plan.pgroup {
        sys::setpgid(0, pgid).map_err(|e| Failure::new(Step::SetPgid, e, 0))?;
    }
    if plan.foreground_tty >= 0 {
        // SIGTTOU is still blocked here (the parent blocked everything before cloning), so a
        // background child may take the terminal.
        let pgrp = sys::getpgrp().map_err(|e| Failure::new(Step::Foreground, e, 0))?;
        sys::ioctl_tiocspgrp(plan.foreground_tty, pgrp)
            .map_err(|e| Failure::new(Step::Foreground, e, 0))?;
    }
    if let Some(name) = plan.hostname {
        sys::sethostname(name).map_err(|e| Failure::new(Step::Hostname, e, 0))?;
    }
    limits(plan)?;
    for (i, &cap) in plan.bounding_drop.iter().enumerate() {
        sys::prctl(libc::PR_CAPBSET_DROP, cap as usize, 0, 0, 0)
            .map_err(|e| Failure::new(Step::CapabilityBound, e, i))?;
    }
    if plan.clear_ambient {
        sys::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as usize,
            0,
            0,
            0,
        )
        .map_err(|e| Failure::new(Step::AmbientCapabilities, e, 0))?;
    }
    if let Some(groups) = plan.groups {
        sys::setgroups(groups).map_err(|e| Failure::new(Step::SetGroups, e, 0))?;
    } else if plan.drop_groups_for_uid {
        match sys::setgroups(&[]) {
            Ok(()) | Err(Errno::PERM) => {}
            Err(e) => return Err(Failure::new(Step::SetGroups, e, 0)),
        }
    }
    if let Some(gid) = plan.gid {
        sys::setgid(gid).map_err(|e| Failure::new(Step::SetGid, e, 0))?;
    }
    if let Some(uid) = plan.uid {
        sys::setuid(uid).map_err(|e| Failure::new(Step::SetUid, e, 0))?;
    }
    if !plan.cwd.is_null() {
        // SAFETY: the parent built `cwd` as a NUL-terminated C string that outlives the child.
        unsafe { sys::chdir(plan.cwd) }.map_err(|e| Failure::new(Step::Chdir, e, 0))?;
    }
    if plan.no_new_privs {
        sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            .map_err(|e| Failure::new(Step::NoNewPrivs, e, 0))?;
    }
    reset_signals(plan.signal_reset)?;
    sys::rt_sigprocmask(libc::SIG_SETMASK, Some(&plan.sigmask), None)
        .map_err(|e| Failure::new(Step::SignalMask, e, 0))
}

/// Resource limits, nice value, I/O priority and CPU affinity.
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
fn limits(plan: &Plan<'_>) -> Result<(), Failure> {
    for (i, l) in plan.rlimits.iter().enumerate() {
        sys::setrlimit(l.resource, l.soft, l.hard).map_err(|e| Failure::new(Step::Rlimit, e, i))?;
    }
    if let Some(nice) = plan.nice {
        sys::setpriority_self(nice).map_err(|e| Failure::new(Step::Nice, e, 0))?;
    }
    if let Some(prio) = plan.ioprio {
        sys::ioprio_set_self(prio).map_err(|e| Failure::new(Step::IoPriority, e, 0))?;
    }
    if let Some(mask) = plan.cpu_affinity {
        sys::sched_setaffinity_self(mask).map_err(|e| Failure::new(Step::CpuAffinity, e, 0))?;
    }
    Ok(())
}

/// Places every descriptor at its number, in two passes so that overlaps cannot clobber a source.
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
fn place_fds(fds: &mut [FdMap], floor: c_int) -> Result<(), Failure> {
    // Pass 1: move every source that is also some mapping's destination above all destinations.
    // The copy is close-on-exec: only the placed descriptors of pass 2 survive exec.
    for (i, m) in fds.iter_mut().enumerate() {
        if m.relocate {
            m.moved = sys::fcntl_int(m.src, libc::F_DUPFD_CLOEXEC, floor)
                .map_err(|e| Failure::new(Step::FdRelocate, e, i))?;
        }
    }
    // Pass 2: place. dup3 gives a descriptor without FD_CLOEXEC; when the source already has the
    // right number, dup3 would fail with EINVAL, so clear FD_CLOEXEC on it instead.
    for (i, m) in fds.iter().enumerate() {
        let src = if m.relocate { m.moved } else { m.src };
        let placed = if src == m.dst {
            sys::fcntl_int(m.dst, libc::F_SETFD, 0)
        } else {
            sys::dup3(src, m.dst, 0)
        };
        placed.map_err(|e| Failure::new(Step::FdMap, e, i))?;
    }
    Ok(())
}

/// Makes `first..=last` go away at `execve`: marks them close-on-exec with
/// `close_range(CLOSE_RANGE_CLOEXEC)` (5.11), or closes them with `close_range` (5.9), or, before
/// that, with one `close` at a time up to the highest descriptor the process may hold.
///
/// Marking is the fast way: closing `3..=u32::MAX` costs about 2 µs on Linux 6.18 even with
/// nothing open to close, marking about 0.15 µs, and `execve` closes what is marked anyway. The
/// program sees the same table; only a child whose exec fails still holds them, until it exits
/// a moment later.
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
fn close_other_fds(first: u32, last: u32) -> Result<(), Errno> {
    let closed = match sys::close_range(first, last, libc::CLOSE_RANGE_CLOEXEC) {
        // A kernel before 5.11 does not know the flag.
        Err(Errno::INVAL) => sys::close_range(first, last, 0),
        other => other,
    };
    match closed {
        Err(Errno::NOSYS) => {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: prlimit64(0, RLIMIT_NOFILE, NULL, &limit) only writes `limit`.
            unsafe {
                sys::syscall6(
                    libc::SYS_prlimit64,
                    [
                        0,
                        libc::RLIMIT_NOFILE as usize,
                        0,
                        &mut limit as *mut libc::rlimit as usize,
                        0,
                        0,
                    ],
                )
            }?;
            let top = core::cmp::min(u64::from(last), limit.rlim_cur.saturating_sub(1));
            let mut fd = u64::from(first);
            while fd <= top {
                let _ = sys::close(fd as c_int);
                fd = fd.saturating_add(1);
            }
            Ok(())
        }
        other => other,
    }
}

/// Resets caught signals to `SIG_DFL` and `SIGPIPE` to `SIG_DFL`; ignored signals stay ignored.
///
/// A handler inherited from the parent would run parent code on the child's stack in shared
/// memory; once the program is exec'ed the kernel resets caught signals anyway. With
/// `CLONE_CLEAR_SIGHAND` the kernel reset them when it created the child, and only `SIGPIPE` is
/// left to do (`SigpipeOnly`). Without it (`AllCaught`) the parent blocked all signals before
/// cloning, which this child inherited, so no handler can run before the reset.
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
fn reset_signals(mode: SignalReset) -> Result<(), Failure> {
    let default = KernelSigaction::default();
    if mode == SignalReset::AllCaught {
        for sig in 1..=sys::NSIG {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut old = KernelSigaction::default();
            sys::rt_sigaction(sig, None, Some(&mut old))
                .map_err(|e| Failure::new(Step::SignalDisposition, e, sig as usize))?;
            if old.handler != sys::SIG_DFL && old.handler != sys::SIG_IGN {
                sys::rt_sigaction(sig, Some(&default), None)
                    .map_err(|e| Failure::new(Step::SignalDisposition, e, sig as usize))?;
            }
        }
    }
    sys::rt_sigaction(libc::SIGPIPE, Some(&default), None)
        .map_err(|e| Failure::new(Step::SignalDisposition, e, libc::SIGPIPE as usize))
}

/// Tries every candidate with `execve`, following execvp's rules: a candidate that does not exist
/// (or whose directory does not) moves on to the next; `EACCES` is remembered and the search goes on,
/// then reported if nothing else worked; any other error stops the search. There is no `/bin/sh`
/// retry for `ENOEXEC`.
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
fn exec(plan: &Plan<'_>) -> Failure {
    let mut last = Failure::new(Step::Exec, Errno::NOENT, 0);
    let mut denied: Option<Failure> = None;
    for (i, &path) in plan.candidates.iter().enumerate() {
        // SAFETY: the parent built each candidate as a NUL-terminated string and argv/envp as
        // NULL-terminated arrays of them, all alive until the child has exec'ed or exited.
        let err = unsafe { sys::execve(path, plan.argv, plan.envp) };
        let failure = Failure::new(Step::Exec, err, i);
        match err.raw() {
            libc::EACCES => {
                if denied.is_none() {
                    denied = Some(failure);
                }
            }
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            _ => return failure,
        }
        last = failure;
    }
    denied.unwrap_or(last)
}

/// The child side of a `CLONE_VM` spawn: the argument points to a [`SharedChild`].
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
///
/// # Safety
/// `arg` must point to a live [`SharedChild`] that no one else touches until the child has exec'ed
/// or exited (with `CLONE_VFORK` the parent's thread is suspended for exactly that long).
pub unsafe extern "C" fn child_main_shared(arg: *mut c_void) -> c_int {
    // SAFETY: the caller guarantees `arg` is a SharedChild exclusively ours for now.
    let shared = unsafe { &mut *(arg as *mut SharedChild<'_, '_>) };
    let failure = execute(shared.plan);
    // SAFETY: `report` points into the parent's stack frame, which is alive and not read until
    // the child is gone; a volatile write keeps the compiler from dropping a store it cannot see read.
    unsafe { core::ptr::write_volatile(shared.report, failure) };
    127
}

/// What a `CLONE_VM` child receives: the plan and where to write a failure.
pub struct SharedChild<'p, 'a> {
    /// The plan to execute.
    pub plan: &'p mut Plan<'a>,
    /// Where the child writes its failure (the parent zeroes it first).
    pub report: *mut Failure,
}

/// The child side of a `fork` spawn: runs the plan, writes a failure into `report_fd`, exits 127.
///
/// Runs in the forked child: async-signal-safe, no allocation, no locks.
pub fn child_main_forked(plan: &mut Plan<'_>, report_fd: c_int) -> ! {
    let failure = execute(plan);
    let bytes = failure.encode();
    // A 12-byte write to a pipe is atomic; if it fails the parent sees EOF and a 127 exit.
    let _ = sys::write(report_fd, &bytes);
    sys::exit_group(127)
}

/// A child that exits at once with status 0: the body of capability trials, which create a real
/// child to learn whether the kernel accepts a combination of flags.
///
/// Runs in the cloned child: async-signal-safe, no allocation, no locks.
///
/// # Safety
/// None beyond the clone's own: the argument is not used.
pub unsafe extern "C" fn child_exit_immediately(_arg: *mut c_void) -> c_int {
    0
}
