//! `probe()`: which kernel features this process can use for spawning, and why not.

use std::fmt;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;

use progeny_sys as sys;

use crate::spawn::trial_clone3;

/// One feature and whether this process can use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// The feature, named after its system call or flag.
    pub name: &'static str,
    /// Whether a spawn can use it.
    pub available: bool,
    /// How that was learned, or why not.
    pub detail: String,
}

/// The result of [`probe`]: every feature progeny's spawn path may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The features, in a fixed order.
    pub features: Vec<Feature>,
}

impl Probe {
    /// The feature called `name`, if probed.
    pub fn get(&self, name: &str) -> Option<&Feature> {
        self.features.iter().find(|f| f.name == name)
    }

    /// Whether the feature called `name` is available.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some_and(|f| f.available)
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for feature in &self.features {
            writeln!(
                f,
                "{:<22} {:<3} {}",
                feature.name,
                if feature.available { "yes" } else { "no" },
                feature.detail
            )?;
        }
        Ok(())
    }
}

/// Probes the kernel features progeny can use, once per process: `clone3`, `CLONE_PIDFD`,
/// `CLONE_CLEAR_SIGHAND`, `CLONE_INTO_CGROUP`, `close_range`, `pidfd_open`,
/// `pidfd_send_signal`, user namespaces, and whether a seccomp filter is installed.
///
/// Flags are tried for real: a child is created with them and exits at once, so a seccomp filter
/// or a kernel that refuses shows up exactly as a spawn would meet it. The spawn path itself learns
/// the same refusals on first use and never falls back silently: see [`Child::spawn_path`](crate::Child::spawn_path).
pub fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(run_probe)
}

fn errno_text(e: sys::Errno) -> String {
    std::io::Error::from_raw_os_error(e.raw()).to_string()
}

fn run_probe() -> Probe {
    let mut features = Vec::new();
    let mut add = |name, available, detail: String| {
        features.push(Feature {
            name,
            available,
            detail,
        })
    };

    // clone3 refuses a zero-sized argument block with EINVAL before creating anything; ENOSYS
    // means no clone3 (old kernel, or a seccomp filter answering ENOSYS, as container runtimes do).
    let clone3 = sys::clone3_presence();
    let has_clone3 = !matches!(clone3, Err(sys::Errno::NOSYS) | Err(sys::Errno::PERM));
    add(
        "clone3",
        has_clone3,
        match clone3 {
            Err(sys::Errno::NOSYS) => {
                "ENOSYS: kernel before 5.3 or a seccomp filter; spawns use clone".into()
            }
            Err(sys::Errno::PERM) => "EPERM: refused by a seccomp filter; spawns use clone".into(),
            _ => "present".into(),
        },
    );

    let (pidfd_ok, pidfd_detail) = if has_clone3 {
        match trial_clone3(0, None) {
            Ok(()) => (
                true,
                "clone3(CLONE_VM|CLONE_VFORK|CLONE_PIDFD) created a child".to_string(),
            ),
            Err(e) => (false, format!("trial clone3 failed: {}", errno_text(e))),
        }
    } else {
        (
            false,
            "needs clone3 here (the legacy clone also takes it since 5.2)".into(),
        )
    };
    add("CLONE_PIDFD", pidfd_ok, pidfd_detail);

    let (ok, detail) = if !pidfd_ok {
        (false, "needs clone3".to_string())
    } else {
        match trial_clone3(sys::CLONE_CLEAR_SIGHAND, None) {
            Ok(()) => (true, "trial child created".into()),
            Err(e) => (
                false,
                format!(
                    "{} (kernel before 5.5): signals are reset one by one",
                    errno_text(e)
                ),
            ),
        }
    };
    add("CLONE_CLEAR_SIGHAND", ok, detail);

    let (ok, detail) = match own_cgroup_dir() {
        None => (
            false,
            "no cgroup v2 hierarchy mounted for this process".to_string(),
        ),
        Some(_) if !pidfd_ok => (false, "needs clone3".into()),
        Some(dir) => match trial_clone3(sys::CLONE_INTO_CGROUP, Some(dir.as_raw_fd())) {
            Ok(()) => (
                true,
                "trial child created in this process's own cgroup".into(),
            ),
            Err(e) => (false, format!("trial into own cgroup: {}", errno_text(e))),
        },
    };
    add("CLONE_INTO_CGROUP", ok, detail);

    // close_range(~0, ~0) closes nothing where it exists.
    let close = sys::close_range(u32::MAX, u32::MAX, 0);
    add(
        "close_range",
        close.is_ok(),
        match close {
            Ok(()) => "present".into(),
            Err(e) => format!("{}: descriptors are closed one by one", errno_text(e)),
        },
    );

    let open = sys::pidfd_open(std::process::id(), 0);
    if let Ok(fd) = open {
        let _ = sys::close(fd);
    }
    add(
        "pidfd_open",
        open.is_ok(),
        match open {
            Ok(_) => "present".into(),
            Err(e) => format!(
                "{}: fork and posix_spawn children have no pidfd",
                errno_text(e)
            ),
        },
    );

    // A bad descriptor is EBADF where the call exists.
    let send = sys::pidfd_send_signal(-1, 0);
    let has_send = send == Err(sys::Errno(libc::EBADF));
    add(
        "pidfd_send_signal",
        has_send,
        if has_send {
            "present".into()
        } else {
            format!("{:?}", send.err())
        },
    );

    let (ok, detail) = if !pidfd_ok {
        (false, "needs clone3 for the trial".to_string())
    } else {
        match trial_clone3(libc::CLONE_NEWUSER as u64, None) {
            Ok(()) => (true, "trial child created in a new user namespace".into()),
            Err(e) => (false, format!("trial: {}", errno_text(e))),
        }
    };
    add("user namespaces", ok, detail);

    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .map(|l| l[key.len()..].trim().to_string())
    };
    let mode = field("Seccomp:").unwrap_or_else(|| "?".into());
    let filters = field("Seccomp_filters:").unwrap_or_else(|| "?".into());
    add(
        "no seccomp filter",
        mode == "0",
        format!("Seccomp: {mode}, filters: {filters}"),
    );

    Probe { features }
}

/// This process's cgroup v2 directory, opened as a directory.
fn own_cgroup_dir() -> Option<std::fs::File> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2").then(|| left.split_whitespace().nth(4))?
    })?;
    std::fs::File::open(format!("{mount}{path}")).ok()
}
