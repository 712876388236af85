//! Spawn errors that name the step of child setup that failed.

use std::ffi::OsString;
use std::fmt;
use std::io;

pub use progeny_child::Step;

/// A failure to start a program, naming the step that failed and the kernel's errno.
///
/// `spawn` returns it inside an [`io::Error`] whose [`kind`](io::Error::kind) is the one std gives
/// for the same errno (`NotFound` for `ENOENT`, `PermissionDenied` for `EACCES`, ...), and whose
/// message reads like `chdir "/nope": No such file or directory (os error 2)`.
///
/// # Caveats
/// Because the message carries the step, [`io::Error::raw_os_error`] is `None` for these errors;
/// use [`SpawnError::errno_of`] (or downcast with `get_ref`) to read the errno.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnError {
    step: Step,
    errno: i32,
    subject: Subject,
}

/// What the failed step was working on, for the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Subject {
    None,
    Path(OsString),
    Fd {
        src: i32,
        dst: i32,
    },
    Signal(i32),
    Id(u32),
    /// A system call of the parent's (`clone3`, `clone3 into cgroup`).
    Call(&'static str),
    /// posix_spawn reports one errno for every step, so the message names the call.
    PosixSpawn(OsString),
}

impl SpawnError {
    pub(crate) fn new(step: Step, errno: i32, subject: Subject) -> SpawnError {
        SpawnError {
            step,
            errno,
            subject,
        }
    }

    /// The step of child setup that failed.
    pub fn step(&self) -> Step {
        self.step
    }

    /// The errno the kernel returned for that step.
    pub fn errno(&self) -> i32 {
        self.errno
    }

    /// The errno behind an `io::Error` from progeny or std: the `SpawnError`'s, else
    /// [`io::Error::raw_os_error`].
    pub fn errno_of(err: &io::Error) -> Option<i32> {
        err.get_ref()
            .and_then(|e| e.downcast_ref::<SpawnError>())
            .map(|e| e.errno)
            .or_else(|| err.raw_os_error())
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.step {
            Step::SignalDisposition => "reset signal disposition",
            Step::SignalMask => "set signal mask",
            Step::FdRelocate => "move descriptor",
            Step::FdMap => "map descriptor",
            Step::CloseOtherFds => "close inherited descriptors",
            Step::SetGroups => "setgroups",
            Step::SetGid => "setgid",
            Step::SetUid => "setuid",
            Step::Chdir => "chdir",
            Step::SetPgid => "setpgid",
            Step::SetSid => "setsid",
            Step::Exec => "exec",
            Step::ParentSync => "wait for the parent",
            Step::ParentDeathSignal => "set parent death signal",
            Step::ParentGone => "parent died before the child started",
            Step::CgroupMove => "move into cgroup",
            Step::Hostname => "sethostname",
            Step::ControllingTty => "set controlling terminal",
            Step::Foreground => "tcsetpgrp",
            Step::Rlimit => "prlimit",
            Step::Nice => "setpriority",
            Step::IoPriority => "ioprio_set",
            Step::CpuAffinity => "sched_setaffinity",
            Step::CapabilityBound => "drop bounding capability",
            Step::AmbientCapabilities => "clear ambient capabilities",
            Step::NoNewPrivs => "set no_new_privs",
            Step::UidMap => "write uid_map",
            Step::GidMap => "write gid_map",
            Step::Clone => "clone",
        };
        if let Subject::Call(call) = &self.subject {
            return write!(f, "{call}: {}", io::Error::from_raw_os_error(self.errno));
        }
        if let Subject::PosixSpawn(program) = &self.subject {
            return write!(
                f,
                "posix_spawn {:?}: {}",
                program,
                io::Error::from_raw_os_error(self.errno)
            );
        }
        f.write_str(what)?;
        match &self.subject {
            Subject::None => {}
            Subject::Path(p) => write!(f, " {:?}", p)?,
            Subject::Fd { src, dst } => write!(f, " {src} -> {dst}")?,
            Subject::Signal(sig) => write!(f, " of signal {sig}")?,
            Subject::Id(id) => write!(f, " {id}")?,
            Subject::PosixSpawn(_) | Subject::Call(_) => {}
        }
        write!(f, ": {}", io::Error::from_raw_os_error(self.errno))
    }
}

impl std::error::Error for SpawnError {}

impl From<SpawnError> for io::Error {
    fn from(e: SpawnError) -> io::Error {
        io::Error::new(io::Error::from_raw_os_error(e.errno).kind(), e)
    }
}

/// An `InvalidInput` error with a message, for bad arguments caught before any process exists.
pub(crate) fn invalid_input(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

/// An `Unsupported` error: a backend cannot express an option (DESIGN: a fast path may decline).
pub(crate) fn unsupported(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, msg.into())
}
