//! Container-grade child setup: namespaces, cgroups, limits, capabilities, terminals, lifetime and
//! the I/O context. Every option runs on the fast path (no `fork` of the caller's address space);
//! a backend that cannot express one says so with `Unsupported`.

use std::ffi::{OsStr, OsString};
use std::ops::{BitOr, BitOrAssign};
use std::os::fd::OwnedFd;

use crate::Command;

/// A set of namespaces for [`Command::unshare`]: the child is created in new ones of these kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Namespaces(pub(crate) u64);

impl Namespaces {
    /// No new namespace.
    pub const NONE: Namespaces = Namespaces(0);
    /// A new user namespace (`CLONE_NEWUSER`); see [`Command::uid_map`].
    pub const USER: Namespaces = Namespaces(libc::CLONE_NEWUSER as u64);
    /// A new mount namespace (`CLONE_NEWNS`).
    pub const MOUNT: Namespaces = Namespaces(libc::CLONE_NEWNS as u64);
    /// A new PID namespace (`CLONE_NEWPID`): the child is its pid 1.
    pub const PID: Namespaces = Namespaces(libc::CLONE_NEWPID as u64);
    /// A new network namespace (`CLONE_NEWNET`).
    pub const NET: Namespaces = Namespaces(libc::CLONE_NEWNET as u64);
    /// A new UTS namespace (`CLONE_NEWUTS`); see [`Command::hostname`].
    pub const UTS: Namespaces = Namespaces(libc::CLONE_NEWUTS as u64);
    /// A new IPC namespace (`CLONE_NEWIPC`).
    pub const IPC: Namespaces = Namespaces(libc::CLONE_NEWIPC as u64);
    /// A new cgroup namespace (`CLONE_NEWCGROUP`).
    pub const CGROUP: Namespaces = Namespaces(libc::CLONE_NEWCGROUP as u64);
    /// A new time namespace (`CLONE_NEWTIME`).
    ///
    /// # Caveats
    /// With `CLONE_VM` the kernel does not move the child into the new time namespace at clone
    /// time; since Linux 6.0 it does so at `execve` (`exec_task_namespaces`), which is exactly
    /// when the program starts. On older kernels the program stays in the caller's time
    /// namespace and only its own children get the new one.
    pub const TIME: Namespaces = Namespaces(libc::CLONE_NEWTIME as u64);

    /// Whether every namespace of `other` is in `self`.
    pub fn contains(self, other: Namespaces) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for Namespaces {
    type Output = Namespaces;
    fn bitor(self, rhs: Namespaces) -> Namespaces {
        Namespaces(self.0 | rhs.0)
    }
}

impl BitOrAssign for Namespaces {
    fn bitor_assign(&mut self, rhs: Namespaces) {
        self.0 |= rhs.0;
    }
}

/// One line of a `uid_map` or `gid_map`: ids `inside..inside+count` in the new user namespace are
/// ids `outside..outside+count` outside it.
///
/// # References
/// - [`user_namespaces(7)`](https://man7.org/linux/man-pages/man7/user_namespaces.7.html)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdMap {
    /// First id inside the namespace.
    pub inside: u32,
    /// First id outside (in the caller's namespace).
    pub outside: u32,
    /// How many ids.
    pub count: u32,
}

impl IdMap {
    /// Root inside the namespace is the caller's effective user outside: what an unprivileged
    /// caller may always write.
    pub fn current_user_as_root() -> IdMap {
        IdMap {
            inside: 0,
            outside: effective_id("Uid:"),
            count: 1,
        }
    }

    /// Group 0 inside the namespace is the caller's effective group outside.
    pub fn current_group_as_root() -> IdMap {
        IdMap {
            inside: 0,
            outside: effective_id("Gid:"),
            count: 1,
        }
    }
}

/// The effective uid or gid (the second field of `Uid:`/`Gid:` in `/proc/self/status`).
fn effective_id(key: &str) -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l[key.len()..].split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

/// An I/O scheduling class and level for [`Command::ioprio`].
///
/// # References
/// - [`ioprio_set(2)`](https://man7.org/linux/man-pages/man2/ioprio_set.2.html)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoPriority {
    /// Real time, level 0 (highest) to 7.
    RealTime(u8),
    /// Best effort, level 0 (highest) to 7.
    BestEffort(u8),
    /// Idle: I/O only when nobody else wants the disk.
    Idle,
}

impl IoPriority {
    /// The kernel's `IOPRIO_PRIO_VALUE(class, data)`, or `None` for a level above 7.
    pub fn to_raw(self) -> Option<u16> {
        let (class, level) = match self {
            IoPriority::RealTime(l) => (1u16, l),
            IoPriority::BestEffort(l) => (2, l),
            IoPriority::Idle => (3, 0),
        };
        (level <= 7).then_some((class << 13) | u16::from(level))
    }

    /// Decodes a raw value as `ioprio_get` returns it; `None` for the "no class" value.
    pub fn from_raw(raw: u16) -> Option<IoPriority> {
        let level = (raw & 0xff) as u8;
        match raw >> 13 {
            1 => Some(IoPriority::RealTime(level)),
            2 => Some(IoPriority::BestEffort(level)),
            3 => Some(IoPriority::Idle),
            _ => None,
        }
    }
}

/// The container options of a command; all default to "leave as the parent has it".
#[derive(Debug, Default)]
pub(crate) struct Container {
    pub(crate) namespaces: Namespaces,
    pub(crate) uid_map: Vec<IdMap>,
    pub(crate) gid_map: Vec<IdMap>,
    pub(crate) hostname: Option<OsString>,
    pub(crate) cgroup: Option<OwnedFd>,
    pub(crate) cgroup_fallback: bool,
    pub(crate) no_new_privs: bool,
    pub(crate) bounding_drop: Vec<u32>,
    pub(crate) clear_ambient: bool,
    pub(crate) rlimits: Vec<(u32, u64, u64)>,
    pub(crate) nice: Option<i32>,
    pub(crate) ioprio: Option<IoPriority>,
    pub(crate) cpu_affinity: Option<Vec<usize>>,
    pub(crate) controlling_tty: Option<i32>,
    pub(crate) foreground: bool,
    pub(crate) parent_death_signal: Option<i32>,
    pub(crate) share_io_context: bool,
    pub(crate) kill_on_drop: bool,
}

impl Command {
    /// Creates the child in new namespaces of the given kinds, as `clone` flags.
    ///
    /// Every kind combines with `CLONE_VM` on current kernels, so the child is still created
    /// without copying the caller's address space; see [`Namespaces::TIME`] for the one subtlety.
    /// With [`Namespaces::USER`] and a [`uid_map`](Command::uid_map) or
    /// [`gid_map`](Command::gid_map), the parent writes the maps between clone and exec while the
    /// child waits for it (that spawn runs without `CLONE_VFORK`, still with `CLONE_VM`).
    ///
    /// # Errors
    /// The clone fails with `EPERM` without the privilege for the namespace (`CAP_SYS_ADMIN`,
    /// except for a user namespace or one owned by a new user namespace created at the same time),
    /// `EINVAL` where the kernel does not know the kind; `Fork` and `PosixSpawn` return
    /// `Unsupported`.
    ///
    /// # References
    /// - [`namespaces(7)`](https://man7.org/linux/man-pages/man7/namespaces.7.html),
    ///   [`clone(2)`](https://man7.org/linux/man-pages/man2/clone.2.html)
    pub fn unshare(&mut self, namespaces: Namespaces) -> &mut Command {
        self.container.namespaces |= namespaces;
        self
    }

    /// The `uid_map` of the child's new user namespace, written by the parent before the child
    /// goes on. Needs [`Namespaces::USER`]. `IdMap::current_user_as_root()` gives an
    /// unprivileged caller root inside.
    ///
    /// # References
    /// - [`user_namespaces(7)`](https://man7.org/linux/man-pages/man7/user_namespaces.7.html)
    pub fn uid_map(&mut self, map: &[IdMap]) -> &mut Command {
        self.container.uid_map = map.to_vec();
        self
    }

    /// The `gid_map` of the child's new user namespace. Unless [`groups`](Command::groups) is
    /// also set, the parent writes `deny` to the child's `setgroups` first, which the kernel
    /// requires of an unprivileged writer.
    pub fn gid_map(&mut self, map: &[IdMap]) -> &mut Command {
        self.container.gid_map = map.to_vec();
        self
    }

    /// Sets the host name in the child's new UTS namespace. Needs [`Namespaces::UTS`]
    /// (refused with `InvalidInput` otherwise, so that it can never rename the host).
    pub fn hostname<S: AsRef<OsStr>>(&mut self, name: S) -> &mut Command {
        self.container.hostname = Some(name.as_ref().to_owned());
        self
    }

    /// Starts the child directly in the cgroup v2 directory `dir` (an `O_DIRECTORY` or `O_PATH`
    /// descriptor), with `clone3(CLONE_INTO_CGROUP)`: it never runs in the caller's cgroup.
    ///
    /// # Errors
    /// Where the kernel refuses (`ENOSYS`: no clone3; `E2BIG`: a kernel before 5.7; `EOPNOTSUPP`:
    /// not a cgroup v2 directory; `EPERM`/`EACCES`: no permission; `EBUSY`: a cgroup with
    /// controllers and children), the spawn fails with an error naming `clone3 into cgroup`,
    /// unless [`cgroup_fallback`](Command::cgroup_fallback) is on.
    ///
    /// # References
    /// - [`clone3(2)`](https://man7.org/linux/man-pages/man2/clone3.2.html),
    ///   [`cgroups(7)`](https://man7.org/linux/man-pages/man7/cgroups.7.html)
    pub fn cgroup<F: Into<OwnedFd>>(&mut self, dir: F) -> &mut Command {
        self.container.cgroup = Some(dir.into());
        self
    }

    /// When `CLONE_INTO_CGROUP` is refused (or the backend is the legacy `clone`), move the child
    /// by writing `cgroup.procs` in the child before exec instead. The program still never runs
    /// outside the cgroup; the child's setup before exec does.
    pub fn cgroup_fallback(&mut self, fallback: bool) -> &mut Command {
        self.container.cgroup_fallback = fallback;
        self
    }

    /// Sets `no_new_privs`: exec never grants privileges (setuid bits, file capabilities).
    ///
    /// # References
    /// - [`PR_SET_NO_NEW_PRIVS`](https://man7.org/linux/man-pages/man2/PR_SET_NO_NEW_PRIVS.2const.html)
    pub fn no_new_privs(&mut self, on: bool) -> &mut Command {
        self.container.no_new_privs = on;
        self
    }

    /// Drops these capabilities (`CAP_*` numbers) from the child's bounding set, before ids
    /// change. Needs `CAP_SETPCAP`.
    ///
    /// # References
    /// - [`capabilities(7)`](https://man7.org/linux/man-pages/man7/capabilities.7.html)
    pub fn drop_bounding_capabilities(&mut self, caps: &[u32]) -> &mut Command {
        self.container.bounding_drop = caps.to_vec();
        self
    }

    /// Clears the child's ambient capability set.
    pub fn clear_ambient_capabilities(&mut self, on: bool) -> &mut Command {
        self.container.clear_ambient = on;
        self
    }

    /// Sets a resource limit (`libc::RLIMIT_*`) with `prlimit64` in the child; `u64::MAX` is
    /// unlimited. A later call for the same resource replaces the earlier one.
    ///
    /// # References
    /// - [`prlimit(2)`](https://man7.org/linux/man-pages/man2/getrlimit.2.html)
    pub fn rlimit(&mut self, resource: u32, soft: u64, hard: u64) -> &mut Command {
        self.container.rlimits.retain(|(r, _, _)| *r != resource);
        self.container.rlimits.push((resource, soft, hard));
        self
    }

    /// Sets the child's nice value (`setpriority`).
    pub fn nice(&mut self, nice: i32) -> &mut Command {
        self.container.nice = Some(nice);
        self
    }

    /// Sets the child's I/O priority (`ioprio_set`). With
    /// [`share_io_context`](Command::share_io_context), the priority is the shared context's, so
    /// the parent's changes too.
    pub fn ioprio(&mut self, prio: IoPriority) -> &mut Command {
        self.container.ioprio = Some(prio);
        self
    }

    /// Pins the child to these CPUs (`sched_setaffinity`).
    ///
    /// # References
    /// - [`sched_setaffinity(2)`](https://man7.org/linux/man-pages/man2/sched_setaffinity.2.html)
    pub fn cpu_affinity(&mut self, cpus: &[usize]) -> &mut Command {
        self.container.cpu_affinity = Some(cpus.to_vec());
        self
    }

    /// Makes the terminal at descriptor `fd` *in the child* (after [`fd`](Command::fd) and stdio
    /// mappings) the child's controlling terminal (`TIOCSCTTY`). Needs [`setsid`](Command::setsid).
    ///
    /// # References
    /// - [`ioctl_tty(2)`](https://man7.org/linux/man-pages/man2/TIOCSCTTY.2const.html)
    pub fn controlling_tty(&mut self, fd: i32) -> &mut Command {
        self.container.controlling_tty = Some(fd);
        self
    }

    /// Makes the child's process group the foreground group of its terminal (`tcsetpgrp` on the
    /// [`controlling_tty`](Command::controlling_tty) descriptor, or on 0), as a shell does for a
    /// foreground job.
    pub fn foreground(&mut self, on: bool) -> &mut Command {
        self.container.foreground = on;
        self
    }

    /// Delivers `signal` to the child when its parent dies (`PR_SET_PDEATHSIG`). If the parent is
    /// already gone when the child arms it, the child exits instead of running orphaned.
    ///
    /// # Caveats
    /// "Parent" is the *thread* that spawned the child: the signal fires when that thread exits,
    /// even though the process lives on. Spawning from a short-lived thread kills the child early;
    /// [`kill_on_drop`](Command::kill_on_drop) ties the child to its `Child` handle instead.
    ///
    /// # References
    /// - [`PR_SET_PDEATHSIG`](https://man7.org/linux/man-pages/man2/PR_SET_PDEATHSIG.2const.html)
    pub fn parent_death_signal(&mut self, signal: i32) -> &mut Command {
        self.container.parent_death_signal = Some(signal);
        self
    }

    /// Kills (`SIGKILL`) and reaps the child when its [`Child`](crate::Child) is dropped without
    /// having been waited for. See also [`Child::kill_on_drop`](crate::Child::kill_on_drop).
    pub fn kill_on_drop(&mut self, on: bool) -> &mut Command {
        self.container.kill_on_drop = on;
        self
    }

    /// Shares the parent's I/O context with the child (`CLONE_IO`), so that I/O schedulers treat
    /// their I/O as one stream (dump's cooperating processes).
    ///
    /// The kernel silently ignores `CLONE_IO` when the calling thread has no I/O context yet
    /// (one is created by its first block I/O or by `ioprio_set`); progeny sets the thread's own
    /// I/O priority to its current value before cloning, which creates the context, so the option
    /// always takes effect.
    pub fn share_io_context(&mut self, on: bool) -> &mut Command {
        self.container.share_io_context = on;
        self
    }
}
