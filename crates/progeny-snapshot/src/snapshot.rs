//! `Snapshot::take`: stop every thread, record it, inject a `clone`, resume.

use std::collections::BTreeMap;
use std::io;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::error::SnapshotError;
use crate::procfs;
use crate::ptrace::{self, Registers, WaitStatus};
use crate::seccomp;

/// Options for [`Snapshot::take`].
#[derive(Default)]
pub struct SnapshotOptions {
    /// Snapshot a target that runs under a seccomp filter even when the filter cannot be read
    /// and checked (reading it needs `CAP_SYS_ADMIN`). A filter that is read and found to forbid
    /// `clone` is refused even with `force`, since the injection would kill or break the target.
    pub force: bool,
    /// Called inside the pause, after each phase, with the phase just finished and the target's
    /// pid: the target is stopped while it runs, so keep it short. Meant for instrumentation
    /// (reading the target's memory at the very moment of the stop, timestamps).
    #[allow(clippy::type_complexity)]
    pub on_phase: Option<Box<dyn Fn(Phase, i32)>>,
    /// Leave the child holding copies of the target's file descriptors. By default the child
    /// closes them all (`close_range`, run in the child after the target has resumed): a
    /// child holding the write end of the target's pipes would keep their readers from ever
    /// seeing end of file, and one holding its sockets would keep connections open. Targets
    /// under seccomp keep them regardless (the filter might forbid `close_range`).
    pub keep_descriptors: bool,
}

/// Stops and resumes the target's threads at real-time priority where this process may
/// (`CAP_SYS_NICE`).
///
/// Stopping and resuming a many-threaded target is one `PTRACE_INTERRUPT` and one
/// `PTRACE_DETACH` per thread, and on a machine with few cores the target's running threads (and
/// each one resumed first) preempt the tracer that still has the rest to do, which stretches the
/// pause. At `SCHED_FIFO` the tracer is not preempted by them; it still sleeps while it waits for a
/// thread to stop. The injection is not boosted: while the injected thread runs `clone`, a
/// real-time tracer woken by the clone event would preempt it and lengthen the pause instead. The calling thread's policy is restored on
/// drop; without the privilege nothing changes.
///
/// # References
/// - [`sched_setscheduler(2)`](https://man7.org/linux/man-pages/man2/sched_setscheduler.2.html)
struct RealtimeBoost {
    previous: Option<(libc::c_int, libc::sched_param)>,
}

impl RealtimeBoost {
    fn new() -> RealtimeBoost {
        // SAFETY: pid 0 is the calling thread; the calls read or write only `param`.
        let previous = unsafe {
            let policy = libc::sched_getscheduler(0);
            let mut param: libc::sched_param = std::mem::zeroed();
            if policy < 0 || libc::sched_getparam(0, &mut param) != 0 {
                None
            } else {
                let fifo = libc::sched_param { sched_priority: 1 };
                (libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) == 0)
                    .then_some((policy, param))
            }
        };
        RealtimeBoost { previous }
    }
}

impl Drop for RealtimeBoost {
    fn drop(&mut self) {
        if let Some((policy, param)) = self.previous {
            // SAFETY: restores the calling thread's own policy with a valid parameter.
            unsafe { libc::sched_setscheduler(0, policy, &param) };
        }
    }
}

/// The phases of a snapshot's pause, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Every thread of the target has been interrupted and is stopped.
    Stop,
    /// Every thread's registers and signal mask have been recorded.
    Capture,
    /// The child exists and the injecting thread's state has been restored.
    Inject,
    /// Every thread has been resumed.
    Resume,
}

/// How long each phase of the pause took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Phases {
    /// From the first `PTRACE_INTERRUPT` until every thread is stopped.
    pub stop: Duration,
    /// Reading every thread's registers, extended state and signal mask.
    pub capture: Duration,
    /// Checking seccomp, running `clone` in the target and restoring the injecting thread.
    pub inject: Duration,
    /// Resuming (detaching from) every thread.
    pub resume: Duration,
}

impl Phases {
    /// The whole pause: the sum of the phases.
    pub fn total(&self) -> Duration {
        self.stop + self.capture + self.inject + self.resume
    }
}

/// One thread of the target as it was at the moment of the stop.
///
/// The snapshot child has a single thread (a copy of the injecting one), so this record is the
/// only trace of the target's other threads.
#[derive(Clone, Debug)]
pub struct ThreadState {
    /// Thread id.
    pub tid: i32,
    /// General-purpose registers (`NT_PRSTATUS`), before any injection.
    pub regs: Registers,
    /// The XSAVE area (`NT_X86_XSTATE`), full size; its first 512 bytes are the FXSAVE image
    /// that `NT_PRFPREG` would return.
    pub xstate: Vec<u8>,
    /// Blocked signals, bit `n - 1` for signal `n`.
    pub sigmask: u64,
    /// The signal reported with the stop: `SIGTRAP` for an interrupt, a stop signal if the
    /// thread was already in a group stop.
    pub stop_signal: i32,
}

impl ThreadState {
    /// The FXSAVE image (`NT_PRFPREG` / `NT_FPREGSET`): the legacy region of the XSAVE area.
    pub fn fpregs(&self) -> &[u8] {
        &self.xstate[..self.xstate.len().min(512)]
    }
}

/// A live snapshot: a stopped copy-on-write child of the target, plus the record of every
/// thread of the target at the moment of the stop.
///
/// The child is traced (and kept stopped) by the thread that called [`Snapshot::take`], which
/// is why a `Snapshot` cannot be sent to another thread. Dropping it kills the child and makes
/// the target reap it (see [`Snapshot::take`]).
pub struct Snapshot {
    pid: i32,
    child: i32,
    child_traced: bool,
    threads: Vec<ThreadState>,
    injected_tid: i32,
    syscall_insn: u64,
    phases: Phases,
    // ptrace requests must come from the tracing thread: keep the value on it.
    _not_send: PhantomData<*const ()>,
}

/// Options given to every thread we seize: follow thread creation while stopping, and tell
/// syscall stops from signal stops during injection.
const SEIZE_OPTIONS: libc::c_long = ptrace::PTRACE_O_TRACECLONE | ptrace::PTRACE_O_TRACESYSGOOD;

impl Snapshot {
    /// Stops every thread of process `pid`, records each thread's registers and signal mask,
    /// makes one of them run `clone` (a fork without `SIGCHLD`), and resumes them all; returns
    /// with the copy-on-write child stopped and traced by the calling thread.
    ///
    /// How, and which hazard each step avoids:
    /// - Threads are attached with `PTRACE_SEIZE` (which does not stop them) before the pause,
    ///   then stopped with `PTRACE_INTERRUPT`: never `SIGSTOP`, whose group stop the target's
    ///   parent would see. `PTRACE_O_TRACECLONE` catches threads created while stopping, and
    ///   `/proc/PID/task` is rescanned until no new thread appears. A signal arriving meanwhile
    ///   is delivered, not lost.
    /// - The `clone` is executed by pointing the thread at a `syscall` instruction that already
    ///   exists in its executable memory (the vDSO's, else libc's): nothing is written to the
    ///   target's memory. All signals are blocked in that thread meanwhile
    ///   (`PTRACE_SETSIGMASK`), `orig_rax` is set to -1 so the kernel's syscall-restart logic
    ///   cannot rewind into the borrowed instruction, and afterwards the original registers are
    ///   put back and the thread is re-trapped with `PTRACE_INTERRUPT`, so that a syscall it
    ///   was blocked in (read, nanosleep, poll, futex) is restarted by the kernel exactly as if
    ///   nothing had happened: no spurious `EINTR`.
    /// - The child has no exit signal, so the target gets no `SIGCHLD` and its `wait(-1)` never
    ///   sees it (only `__WALL`/`__WCLONE` waits do). It is auto-attached by
    ///   `PTRACE_O_TRACECLONE`, so it never runs a single instruction on its own.
    /// - Dropping the snapshot kills the child and, because a child without exit signal stays a
    ///   zombie of the target until the target reaps it, briefly stops one thread of the target
    ///   to run `wait4(child, __WALL|WNOHANG)` there.
    ///
    /// # Errors
    /// See [`SnapshotError`]: no such process, no permission, kernel thread, zombie, a seccomp
    /// filter that forbids or hides `clone` (unless `options.force`), the target exiting midway,
    /// or a failed `clone`. On every error the target is left running and untraced.
    ///
    /// # References
    /// - [ptrace(2)](https://man7.org/linux/man-pages/man2/ptrace.2.html)
    /// - [clone(2)](https://man7.org/linux/man-pages/man2/clone.2.html)
    /// - [restart_syscall(2)](https://man7.org/linux/man-pages/man2/restart_syscall.2.html)
    pub fn take(pid: i32, options: &SnapshotOptions) -> Result<Snapshot, SnapshotError> {
        if !cfg!(target_arch = "x86_64") {
            return Err(SnapshotError::Unsupported(
                "live snapshots are implemented for x86_64 only",
            ));
        }
        preflight(pid)?;
        let syscall_insn = find_syscall_instruction(pid)?;
        let leader_seccomp = procfs::seccomp_mode(pid, pid).unwrap_or(0);

        let mut group = Group::new(pid);
        group.seize_all()?;

        let pause_start = Instant::now();
        let mut phases = Phases::default();
        let mut mark = pause_start;
        let mut lap = |slot: &mut Duration| {
            let now = Instant::now();
            *slot = now - mark;
            mark = now;
        };
        let hook = |phase: Phase| {
            if let Some(hook) = &options.on_phase {
                hook(phase, pid)
            }
        };

        let outcome = (|| {
            let boost = RealtimeBoost::new();
            group.stop_all()?;
            lap(&mut phases.stop);
            hook(Phase::Stop);
            let threads = group.capture()?;
            drop(boost);
            lap(&mut phases.capture);
            hook(Phase::Capture);
            let injector = threads
                .iter()
                .find(|t| t.tid == pid)
                .or_else(|| threads.first())
                .ok_or(SnapshotError::TargetExited { pid })?;
            let seccomp_mode = if injector.tid == pid {
                leader_seccomp
            } else {
                procfs::seccomp_mode(pid, injector.tid).unwrap_or(0)
            };
            check_seccomp(pid, injector, seccomp_mode, syscall_insn, options.force)?;
            let (ret, child) = inject_syscall(
                injector.tid,
                &injector.regs,
                injector.sigmask,
                syscall_insn,
                libc::SYS_clone as u64,
                [0, 0, 0, 0, 0, injector.regs.r9],
            )
            .map_err(|err| group.explain(err, "inject clone"))?;
            let child = match child {
                Some(child) if ret == i64::from(child) => child,
                Some(child) => {
                    // The kernel reported a child but clone returned something else: never
                    // seen, but do not leave the child behind.
                    kill_traced_child(child);
                    return Err(SnapshotError::io(
                        "inject clone",
                        io::Error::other(format!("clone returned {ret}, child was {child}")),
                    ));
                }
                None => {
                    return Err(SnapshotError::CloneFailed {
                        pid,
                        source: io::Error::from_raw_os_error((-ret) as i32),
                    })
                }
            };
            let injected_tid = injector.tid;
            lap(&mut phases.inject);
            hook(Phase::Inject);
            Ok((threads, injected_tid, child))
        })();

        let (threads, injected_tid, child) = match outcome {
            Ok(done) => done,
            Err(err) => {
                group.release();
                return Err(err);
            }
        };
        let boost = RealtimeBoost::new();
        group.release();
        drop(boost);
        lap(&mut phases.resume);
        hook(Phase::Resume);

        // The target runs again; now collect the child's first stop (it was auto-attached in a
        // PTRACE_EVENT_STOP) and make it die with us if this process dies.
        let mut snapshot = Snapshot {
            pid,
            child,
            child_traced: true,
            threads,
            injected_tid,
            syscall_insn,
            phases,
            _not_send: PhantomData,
        };
        match ptrace::wait(child) {
            Ok(WaitStatus::Stopped { .. }) => {}
            Ok(WaitStatus::Gone) => {
                snapshot.child_traced = false;
                return Err(SnapshotError::io(
                    "wait for the snapshot child",
                    io::Error::other("the child died before its first stop"),
                ));
            }
            Err(err) => return Err(SnapshotError::io("wait for the snapshot child", err)),
        }
        let _ = ptrace::set_options(child, SEIZE_OPTIONS | ptrace::PTRACE_O_EXITKILL);
        if !options.keep_descriptors && leader_seccomp == 0 {
            close_child_descriptors(child, syscall_insn)
                .map_err(|err| SnapshotError::io("close the child's descriptors", err))?;
        }
        // Give the child the injecting thread's real registers (it was cloned with the borrowed
        // ones), so a debugger attached to it sees where that thread really was.
        let _ = ptrace::set_regs(child, &snapshot.thread(injected_tid).regs.clone());
        let _ = ptrace::set_sigmask(child, snapshot.thread(injected_tid).sigmask);
        Ok(snapshot)
    }

    /// The target's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The snapshot child's pid: a single-threaded copy-on-write copy of the target, stopped.
    pub fn child(&self) -> i32 {
        self.child
    }

    /// Every thread of the target at the moment of the stop, by ascending tid.
    pub fn threads(&self) -> &[ThreadState] {
        &self.threads
    }

    /// The thread that ran the injected `clone` (the child is a copy of it).
    pub fn injected_tid(&self) -> i32 {
        self.injected_tid
    }

    /// How long the target was stopped, by phase.
    pub fn phases(&self) -> Phases {
        self.phases
    }

    /// How long the target was stopped: first interrupt to last resume.
    pub fn pause(&self) -> Duration {
        self.phases.total()
    }

    fn thread(&self, tid: i32) -> &ThreadState {
        self.threads
            .iter()
            .find(|t| t.tid == tid)
            .expect("the injecting thread is recorded")
    }

    /// Reads the child's memory at `addr` (the target's memory as it was at the stop).
    ///
    /// # Errors
    /// Fails if the range is not mapped in the child or cannot be read.
    pub fn read_memory(&self, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
        procfs::read_memory(self.child, addr, buf)
    }

    /// The child's memory map (the target's as it was at the stop, minus `MADV_DONTFORK`
    /// regions).
    ///
    /// # Errors
    /// Fails if `/proc/CHILD/maps` cannot be read.
    pub fn child_maps(&self) -> io::Result<Vec<procfs::Mapping>> {
        procfs::read_maps(self.child)
    }

    /// Lets go of the child, leaving it stopped (in a group stop), so another tracer such as
    /// `gdb -p CHILD` can attach to it. The child is still killed and reaped when the snapshot
    /// is dropped.
    ///
    /// # Caveats
    /// The kernel reports the child's group stop to its parent, the target, as one `SIGCHLD`
    /// with `CLD_STOPPED`, unless the target set `SA_NOCLDSTOP` or ignores `SIGCHLD`. And once
    /// a debugger detaches, the child runs the target's code on its own until it is killed.
    ///
    /// # Errors
    /// Fails if the child cannot be signalled or detached.
    pub fn release_child_stopped(&mut self) -> io::Result<()> {
        if !self.child_traced {
            return Ok(());
        }
        // A SIGSTOP queued while traced shows up as a signal-delivery-stop; detaching from that
        // stop with SIGSTOP makes the child enter a real group stop with no tracer.
        // SAFETY: plain syscall on a pid we own.
        if unsafe { libc::kill(self.child, libc::SIGSTOP) } != 0 {
            return Err(io::Error::last_os_error());
        }
        ptrace::cont(self.child, 0)?;
        loop {
            match ptrace::wait(self.child)? {
                WaitStatus::Stopped { signal, event: 0 } if signal == libc::SIGSTOP => break,
                WaitStatus::Stopped { .. } => ptrace::cont(self.child, 0)?,
                WaitStatus::Gone => {
                    self.child_traced = false;
                    return Err(io::Error::other("the snapshot child died"));
                }
            }
        }
        ptrace::detach(self.child, libc::SIGSTOP)?;
        self.child_traced = false;
        // The group stop happens when the child runs again after the detach: wait for it, so
        // a tool started right after this returns finds the child stopped.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            match procfs::read_stat(&format!("/proc/{}/stat", self.child)) {
                Ok(stat) if stat.state == 'T' => return Ok(()),
                Ok(_) => std::thread::sleep(Duration::from_micros(100)),
                Err(err) => return Err(err),
            }
        }
        Err(io::Error::other(
            "the snapshot child did not enter its stop",
        ))
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        if self.child_traced {
            kill_traced_child(self.child);
        } else {
            // SAFETY: plain syscall; the pid cannot be reused while it is our zombie-to-be,
            // since only the target can reap it.
            unsafe { libc::kill(self.child, libc::SIGKILL) };
            wait_until_zombie(self.child);
        }
        reap_through_target(self.pid, self.child, self.syscall_insn);
    }
}

/// Runs `close_range(0, ~0, 0)` in the stopped child, by the same injection as the `clone`.
///
/// # References
/// - [close_range(2)](https://man7.org/linux/man-pages/man2/close_range.2.html)
fn close_child_descriptors(child: i32, syscall_insn: u64) -> io::Result<()> {
    let regs = ptrace::get_regs(child)?;
    let mask = ptrace::get_sigmask(child)?;
    let (ret, _) = inject_syscall(
        child,
        &regs,
        mask,
        syscall_insn,
        libc::SYS_close_range as u64,
        [0, u64::from(u32::MAX), 0, 0, 0, 0],
    )?;
    match ret {
        0 => Ok(()),
        // Kernels before 5.9: the child keeps its descriptors, as a plain fork would.
        ret if ret == -i64::from(libc::ENOSYS) => Ok(()),
        ret => Err(io::Error::from_raw_os_error((-ret) as i32)),
    }
}

/// Kills a child we trace and consumes its exit, which hands the zombie to its real parent.
fn kill_traced_child(child: i32) {
    // SAFETY: plain syscall on a pid we trace.
    unsafe { libc::kill(child, libc::SIGKILL) };
    while let Ok(WaitStatus::Stopped { .. }) = ptrace::wait(child) {}
}

fn wait_until_zombie(child: i32) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match procfs::read_stat(&format!("/proc/{child}/stat")) {
            Ok(stat) if stat.is_dead() => return,
            Ok(_) => std::thread::sleep(Duration::from_micros(200)),
            Err(_) => return,
        }
    }
}

/// Makes the target reap `child`, which has no exit signal and so stays its zombie until it
/// waits with `__WALL`: stops one thread of the target, injects `wait4(child, NULL,
/// __WALL|WNOHANG, NULL)`, restores it.
fn reap_through_target(pid: i32, child: i32, syscall_insn: u64) {
    let tids = procfs::thread_ids(pid).unwrap_or_default();
    for tid in tids {
        let mut group = Group::new(pid);
        if ptrace::seize(tid, ptrace::PTRACE_O_TRACESYSGOOD).is_err() {
            continue;
        }
        group.threads.insert(tid, Tracee::Seized);
        let _ = ptrace::interrupt(tid);
        if group.stop_one(tid).is_ok() && group.threads[&tid] != Tracee::Gone {
            if let (Ok(regs), Ok(mask)) = (ptrace::get_regs(tid), ptrace::get_sigmask(tid)) {
                let args = [
                    child as u64,
                    0,
                    (libc::__WALL | libc::WNOHANG) as u64,
                    0,
                    0,
                    0,
                ];
                let _ =
                    inject_syscall(tid, &regs, mask, syscall_insn, libc::SYS_wait4 as u64, args);
            }
        }
        group.release();
        return;
    }
}

/// Refuses targets that cannot be snapshotted, before touching them.
fn preflight(pid: i32) -> Result<(), SnapshotError> {
    if pid <= 0 {
        return Err(SnapshotError::NoSuchProcess { pid });
    }
    if pid == std::process::id() as i32 {
        return Err(SnapshotError::CallingProcess { pid });
    }
    if let Some(process) = procfs::thread_group(pid) {
        if process != pid {
            return Err(SnapshotError::NotAProcess { tid: pid, process });
        }
    }
    let stat = match procfs::read_stat(&format!("/proc/{pid}/stat")) {
        Ok(stat) => stat,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            return Err(SnapshotError::NoSuchProcess { pid })
        }
        Err(err) => return Err(SnapshotError::io("read /proc/PID/stat", err)),
    };
    if stat.is_kernel_thread() {
        return Err(SnapshotError::KernelThread { pid });
    }
    // /proc/PID is also a thread's directory: a tid is not a process.
    if procfs::thread_ids(pid).map_or(true, |tids| tids.is_empty()) {
        return Err(SnapshotError::NoSuchProcess { pid });
    }
    if stat.is_dead() && live_threads(pid).is_empty() {
        return Err(SnapshotError::Zombie { pid });
    }
    Ok(())
}

fn live_threads(pid: i32) -> Vec<i32> {
    procfs::thread_ids(pid)
        .unwrap_or_default()
        .into_iter()
        .filter(|tid| {
            procfs::read_stat(&format!("/proc/{pid}/task/{tid}/stat"))
                .is_ok_and(|stat| !stat.is_dead())
        })
        .collect()
}

/// Finds a `syscall` instruction (`0f 05`) the target can execute: in the vDSO first (tiny,
/// always mapped, never unmapped), else in any executable file mapping. Read-only: the bytes
/// are read, never written.
fn find_syscall_instruction(pid: i32) -> Result<u64, SnapshotError> {
    let maps = procfs::read_maps(pid).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => SnapshotError::NoSuchProcess { pid },
        io::ErrorKind::PermissionDenied => SnapshotError::PermissionDenied { pid, source: err },
        _ => SnapshotError::io("read /proc/PID/maps", err),
    })?;
    let mut candidates: Vec<&procfs::Mapping> = maps
        .iter()
        .filter(|m| m.execute && m.read && m.path == "[vdso]")
        .collect();
    candidates.extend(
        maps.iter()
            .filter(|m| m.execute && m.read && m.path.starts_with('/') && m.path.contains("libc")),
    );
    candidates
        .extend(maps.iter().filter(|m| {
            m.execute && m.read && m.path.starts_with('/') && !m.path.contains("libc")
        }));
    for mapping in candidates {
        let len = mapping.len().min(4 << 20) as usize;
        let mut bytes = vec![0u8; len];
        let Ok(got) = procfs::read_memory(pid, mapping.start, &mut bytes) else {
            continue;
        };
        if let Some(at) = bytes[..got].windows(2).position(|w| w == [0x0f, 0x05]) {
            return Ok(mapping.start + at as u64);
        }
    }
    Err(SnapshotError::NoSyscallInstruction { pid })
}

/// Reads the injecting thread's seccomp filters and refuses if they would not allow our exact
/// `clone` (or cannot be read, unless `force`).
fn check_seccomp(
    pid: i32,
    injector: &ThreadState,
    mode: u32,
    syscall_insn: u64,
    force: bool,
) -> Result<(), SnapshotError> {
    match mode {
        0 => return Ok(()),
        1 => {
            return Err(SnapshotError::Seccomp {
                pid,
                detail: "strict mode kills the process on clone".into(),
            })
        }
        _ => {}
    }
    let data = seccomp::SeccompData {
        nr: libc::SYS_clone as i32,
        arch: seccomp::AUDIT_ARCH_X86_64,
        instruction_pointer: syscall_insn + 2,
        args: [0, 0, 0, 0, 0, injector.regs.r9],
    };
    let mut results = Vec::new();
    for index in 0.. {
        match ptrace::seccomp_filter(injector.tid, index) {
            Ok(program) => match seccomp::run_filter(&program, &data) {
                Some(action) => results.push(action),
                None => {
                    return refuse_unless(force, pid, "a filter could not be interpreted".into())
                }
            },
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) && index > 0 => break,
            Err(err) => {
                return refuse_unless(force, pid, format!("its filters cannot be read ({err})"))
            }
        }
    }
    let action = seccomp::strictest(results);
    if seccomp::allows(action) {
        Ok(())
    } else {
        Err(SnapshotError::Seccomp {
            pid,
            detail: format!(
                "its filter answers clone with {}",
                seccomp::action_name(action)
            ),
        })
    }
}

fn refuse_unless(force: bool, pid: i32, detail: String) -> Result<(), SnapshotError> {
    if force {
        Ok(())
    } else {
        Err(SnapshotError::Seccomp { pid, detail })
    }
}

/// Runs one syscall in stopped thread `tid` by borrowing the instruction at `syscall_insn`,
/// then puts the thread back exactly as it was: registers `original`, mask `mask`, and in a
/// `PTRACE_EVENT_STOP` again, so the kernel's own restart logic runs on the original registers
/// when it is resumed. Returns the syscall's raw result and, for `clone`, the new child.
fn inject_syscall(
    tid: i32,
    original: &Registers,
    mask: u64,
    syscall_insn: u64,
    nr: u64,
    args: [u64; 6],
) -> io::Result<(i64, Option<i32>)> {
    // Block everything (SIGKILL and SIGSTOP excepted) so no handler runs on borrowed
    // registers.
    ptrace::set_sigmask(tid, !0)?;
    let mut regs = *original;
    regs.rip = syscall_insn;
    regs.rax = nr;
    // -1: "not in a syscall", so the restart logic that runs when we resume this stop does not
    // rewind rip by two bytes or replace rax.
    regs.orig_rax = u64::MAX;
    regs.rdi = args[0];
    regs.rsi = args[1];
    regs.rdx = args[2];
    regs.r10 = args[3];
    regs.r8 = args[4];
    regs.r9 = args[5];
    ptrace::set_regs(tid, &regs)?;

    let mut child = None;
    let mut syscall_stops = 0;
    let result = loop {
        ptrace::cont_syscall(tid)?;
        match ptrace::wait(tid)? {
            WaitStatus::Stopped { signal, event: 0 } if signal == libc::SIGTRAP | 0x80 => {
                syscall_stops += 1;
                if syscall_stops == 2 {
                    break ptrace::get_regs(tid)?.rax as i64;
                }
            }
            WaitStatus::Stopped { event, .. } if event == ptrace::PTRACE_EVENT_CLONE => {
                child = Some(ptrace::event_message(tid)? as i32);
            }
            // Anything else (a stop signal, which cannot be blocked) is suppressed; the thread
            // is restored below either way.
            WaitStatus::Stopped { .. } => {}
            WaitStatus::Gone => return Err(io::Error::from_raw_os_error(libc::ESRCH)),
        }
    };

    ptrace::set_regs(tid, original)?;
    // Re-enter the same kind of stop the thread was in: resuming a PTRACE_EVENT_STOP runs the
    // kernel's syscall-restart logic on the restored registers (read → restarted, nanosleep →
    // restart_syscall with the remaining time), which resuming a syscall-exit stop would not.
    ptrace::interrupt(tid)?;
    ptrace::cont(tid, 0)?;
    loop {
        match ptrace::wait(tid)? {
            WaitStatus::Stopped { event, .. } if event == ptrace::PTRACE_EVENT_STOP => break,
            WaitStatus::Stopped { .. } => ptrace::cont(tid, 0)?,
            WaitStatus::Gone => return Err(io::Error::from_raw_os_error(libc::ESRCH)),
        }
    }
    ptrace::set_sigmask(tid, mask)?;
    Ok((result, child))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tracee {
    /// Attached, maybe running.
    Seized,
    /// In a `PTRACE_EVENT_STOP`, with the signal it reported.
    Stopped(i32),
    /// Exited; nothing to release.
    Gone,
}

/// The threads of one target we have seized.
struct Group {
    pid: i32,
    threads: BTreeMap<i32, Tracee>,
    /// The target is our own child: its exit status is not ours to consume.
    parent_is_us: bool,
}

impl Group {
    fn new(pid: i32) -> Self {
        Group {
            pid,
            threads: BTreeMap::new(),
            parent_is_us: procfs::read_stat(&format!("/proc/{pid}/stat"))
                .is_ok_and(|stat| stat.ppid == std::process::id() as i32),
        }
    }

    /// Our thread ids with the leader last: a traced leader's exit is reported only after
    /// every other traced thread's exit has been collected, so waiting for it first could block
    /// forever when the target is dying.
    fn leader_last(&self) -> Vec<i32> {
        let mut tids: Vec<i32> = self
            .threads
            .keys()
            .copied()
            .filter(|&t| t != self.pid)
            .collect();
        if self.threads.contains_key(&self.pid) {
            tids.push(self.pid);
        }
        tids
    }

    /// Seizes every thread listed in `/proc/PID/task` (without stopping them).
    fn seize_all(&mut self) -> Result<(), SnapshotError> {
        let tids = procfs::thread_ids(self.pid)
            .map_err(|_| SnapshotError::NoSuchProcess { pid: self.pid })?;
        let mut denied = None;
        for tid in tids {
            if self.threads.contains_key(&tid) {
                continue;
            }
            match ptrace::seize(tid, SEIZE_OPTIONS) {
                Ok(()) => {
                    self.threads.insert(tid, Tracee::Seized);
                }
                // The thread exited, or is a zombie (a leader that called pthread_exit): there
                // is nothing to stop.
                Err(err) if err.raw_os_error() == Some(libc::ESRCH) => {}
                Err(err) if err.raw_os_error() == Some(libc::EPERM) => {
                    let dead = procfs::read_stat(&format!("/proc/{}/task/{tid}/stat", self.pid))
                        .map_or(true, |stat| stat.is_dead());
                    if !dead {
                        denied = Some(err);
                        break;
                    }
                }
                Err(err) => {
                    self.release();
                    return Err(SnapshotError::io("PTRACE_SEIZE", err));
                }
            }
        }
        if let Some(source) = denied {
            self.release();
            return Err(SnapshotError::PermissionDenied {
                pid: self.pid,
                source,
            });
        }
        if self.threads.is_empty() {
            return Err(
                if procfs::read_stat(&format!("/proc/{}/stat", self.pid)).is_ok() {
                    SnapshotError::Zombie { pid: self.pid }
                } else {
                    SnapshotError::NoSuchProcess { pid: self.pid }
                },
            );
        }
        Ok(())
    }

    /// Interrupts every seized thread and collects every stop, until a rescan of
    /// `/proc/PID/task` finds no thread we do not hold.
    fn stop_all(&mut self) -> Result<(), SnapshotError> {
        let seized: Vec<i32> = self.threads.keys().copied().collect();
        for tid in seized {
            if ptrace::interrupt(tid).is_err() {
                // Gone between seize and interrupt; its exit is collected below.
            }
        }
        loop {
            while let Some(tid) = self
                .leader_last()
                .into_iter()
                .find(|tid| self.threads[tid] == Tracee::Seized)
            {
                self.stop_one(tid)?;
            }
            let mut new = false;
            let listed = procfs::thread_ids(self.pid)
                .map_err(|_| SnapshotError::TargetExited { pid: self.pid })?;
            for tid in listed {
                if self.threads.contains_key(&tid) {
                    continue;
                }
                if ptrace::seize(tid, SEIZE_OPTIONS).is_ok() {
                    self.threads.insert(tid, Tracee::Seized);
                    let _ = ptrace::interrupt(tid);
                    new = true;
                }
            }
            if !new {
                break;
            }
        }
        if !self
            .threads
            .values()
            .any(|s| matches!(s, Tracee::Stopped(_)))
            || self.threads.get(&self.pid) == Some(&Tracee::Gone)
        {
            return Err(SnapshotError::TargetExited { pid: self.pid });
        }
        Ok(())
    }

    /// Waits until seized thread `tid` reports its interrupt stop, delivering any signal that
    /// arrives first and adopting threads it creates.
    fn stop_one(&mut self, tid: i32) -> Result<(), SnapshotError> {
        loop {
            let waited = if tid == self.pid && self.parent_is_us {
                ptrace::wait_keeping_exit(tid)
            } else {
                ptrace::wait(tid)
            };
            let status = match waited {
                Ok(status) => status,
                Err(err) if err.raw_os_error() == Some(libc::ECHILD) => WaitStatus::Gone,
                Err(err) => return Err(SnapshotError::io("waitpid", err)),
            };
            match status {
                WaitStatus::Gone => {
                    self.threads.insert(tid, Tracee::Gone);
                    return Ok(());
                }
                WaitStatus::Stopped { signal, event } if event == ptrace::PTRACE_EVENT_STOP => {
                    self.threads.insert(tid, Tracee::Stopped(signal));
                    return Ok(());
                }
                WaitStatus::Stopped { event, .. } if event == ptrace::PTRACE_EVENT_CLONE => {
                    // A new thread, auto-attached: it starts in a PTRACE_EVENT_STOP of its own,
                    // collected by the caller's loop. Our interrupt is still pending here.
                    if let Ok(new) = ptrace::event_message(tid) {
                        self.threads.entry(new as i32).or_insert(Tracee::Seized);
                    }
                    self.resume_waiting(tid, 0)?;
                }
                WaitStatus::Stopped { event: 0, signal } if signal != libc::SIGTRAP | 0x80 => {
                    // A signal-delivery-stop: deliver the signal as the kernel would have; the
                    // pending interrupt stops the thread right after.
                    self.resume_waiting(tid, signal)?;
                }
                WaitStatus::Stopped { .. } => self.resume_waiting(tid, 0)?,
            }
        }
    }

    fn resume_waiting(&mut self, tid: i32, signal: i32) -> Result<(), SnapshotError> {
        match ptrace::cont(tid, signal) {
            Ok(()) => Ok(()),
            // Killed while stopped: its exit is the next thing wait reports.
            Err(err) if err.raw_os_error() == Some(libc::ESRCH) => Ok(()),
            Err(err) => Err(SnapshotError::io("PTRACE_CONT", err)),
        }
    }

    /// Records every stopped thread.
    fn capture(&mut self) -> Result<Vec<ThreadState>, SnapshotError> {
        let mut xstate_len = 0usize;
        let mut threads = Vec::with_capacity(self.threads.len());
        for (&tid, state) in &self.threads {
            let Tracee::Stopped(stop_signal) = *state else {
                continue;
            };
            let regs = ptrace::get_regs(tid).map_err(|err| self.explain(err, "PTRACE_GETREGS"))?;
            let mut xstate = vec![
                0u8;
                if xstate_len == 0 {
                    64 << 10
                } else {
                    xstate_len
                }
            ];
            let got = ptrace::get_regset(tid, ptrace::NT_X86_XSTATE, &mut xstate)
                .map_err(|err| self.explain(err, "PTRACE_GETREGSET NT_X86_XSTATE"))?;
            xstate.truncate(got);
            xstate_len = got;
            let sigmask =
                ptrace::get_sigmask(tid).map_err(|err| self.explain(err, "PTRACE_GETSIGMASK"))?;
            threads.push(ThreadState {
                tid,
                regs,
                xstate,
                sigmask,
                stop_signal,
            });
        }
        Ok(threads)
    }

    /// Turns a failed request into the right error: `ESRCH` on a stopped thread means the
    /// target was killed meanwhile.
    fn explain(&self, err: io::Error, step: &'static str) -> SnapshotError {
        let alive = procfs::read_stat(&format!("/proc/{}/stat", self.pid))
            .is_ok_and(|stat| !stat.is_dead());
        if err.raw_os_error() == Some(libc::ESRCH) || !alive {
            SnapshotError::TargetExited { pid: self.pid }
        } else {
            SnapshotError::io(step, err)
        }
    }

    /// Lets every thread go: detaches stopped ones, stops-then-detaches seized ones that never
    /// reported, and collects the exit of threads that died while traced (so none lingers as
    /// our zombie).
    fn release(&mut self) {
        let tids = self.leader_last();
        for tid in &tids {
            if self.threads[tid] == Tracee::Seized {
                let _ = ptrace::interrupt(*tid);
            }
        }
        for tid in tids {
            loop {
                match self.threads[&tid] {
                    Tracee::Gone => break,
                    Tracee::Stopped(_) => {
                        match ptrace::detach(tid, 0) {
                            Ok(()) => {
                                self.threads.insert(tid, Tracee::Gone);
                            }
                            // Not stopped after all (killed): collect its exit.
                            Err(_) => {
                                self.threads.insert(tid, Tracee::Seized);
                            }
                        }
                    }
                    Tracee::Seized => {
                        if self.stop_one(tid).is_err() {
                            self.threads.insert(tid, Tracee::Gone);
                        }
                    }
                }
            }
        }
    }
}
