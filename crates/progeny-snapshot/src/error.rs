//! Why a snapshot was refused or failed.

use std::fmt;
use std::io;

/// Why [`Snapshot::take`](crate::Snapshot::take) refused or failed.
///
/// Every variant is returned only after the target has been left as it was found: every thread
/// that was stopped has been resumed, nothing is left traced.
#[derive(Debug)]
#[non_exhaustive]
pub enum SnapshotError {
    /// There is no process with this id (or it vanished before it could be attached).
    NoSuchProcess {
        /// The requested pid.
        pid: i32,
    },
    /// The kernel refused `ptrace` access (another user's process, a setuid program, Yama,
    /// missing `CAP_SYS_PTRACE`, or a process already traced by a debugger).
    PermissionDenied {
        /// The requested pid.
        pid: i32,
        /// The error the kernel returned.
        source: io::Error,
    },
    /// The pid is a kernel thread, which has no user memory to copy.
    KernelThread {
        /// The requested pid.
        pid: i32,
    },
    /// The process has exited and waits to be reaped by its parent.
    Zombie {
        /// The requested pid.
        pid: i32,
    },
    /// The pid is the calling process itself, which cannot trace its own threads (use
    /// [`snapshot_me`](crate::snapshot_me)).
    CallingProcess {
        /// The requested pid.
        pid: i32,
    },
    /// The id names a thread, not a process (its thread group leader is `process`).
    NotAProcess {
        /// The requested id.
        tid: i32,
        /// The process the thread belongs to.
        process: i32,
    },
    /// The process exited (or was killed) while it was being snapshotted.
    TargetExited {
        /// The requested pid.
        pid: i32,
    },
    /// A seccomp filter would not let the injected `clone` run (or could not be checked).
    Seccomp {
        /// The requested pid.
        pid: i32,
        /// What the filters would do, or why they could not be read.
        detail: String,
    },
    /// No `syscall` instruction was found in the target's executable mappings to borrow.
    NoSyscallInstruction {
        /// The requested pid.
        pid: i32,
    },
    /// The injected `clone` returned an error inside the target.
    CloneFailed {
        /// The requested pid.
        pid: i32,
        /// The error `clone` returned.
        source: io::Error,
    },
    /// This architecture is not supported (only x86_64 is implemented).
    Unsupported(&'static str),
    /// A system call failed at a named step.
    Io {
        /// What was being done.
        step: &'static str,
        /// The error.
        source: io::Error,
    },
}

impl SnapshotError {
    pub(crate) fn io(step: &'static str, source: io::Error) -> Self {
        SnapshotError::Io { step, source }
    }
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::NoSuchProcess { pid } => write!(f, "no such process: {pid}"),
            SnapshotError::PermissionDenied { pid, source } => {
                write!(f, "not permitted to trace process {pid}: {source}")
            }
            SnapshotError::KernelThread { pid } => {
                write!(
                    f,
                    "process {pid} is a kernel thread: it has no user memory to snapshot"
                )
            }
            SnapshotError::Zombie { pid } => {
                write!(
                    f,
                    "process {pid} is a zombie: it has exited and waits to be reaped"
                )
            }
            SnapshotError::CallingProcess { pid } => write!(
                f,
                "process {pid} is this process: it cannot trace itself (a self-snapshot is snapshot_me)"
            ),
            SnapshotError::NotAProcess { tid, process } => {
                write!(f, "{tid} is a thread of process {process}, not a process")
            }
            SnapshotError::TargetExited { pid } => {
                write!(f, "process {pid} exited during the snapshot")
            }
            SnapshotError::Seccomp { pid, detail } => write!(
                f,
                "process {pid} runs under seccomp: {detail} (use --force to snapshot anyway)"
            ),
            SnapshotError::NoSyscallInstruction { pid } => write!(
                f,
                "process {pid} has no executable `syscall` instruction to borrow (no vDSO, no libc)"
            ),
            SnapshotError::CloneFailed { pid, source } => {
                write!(f, "clone inside process {pid} failed: {source}")
            }
            SnapshotError::Unsupported(what) => write!(f, "unsupported: {what}"),
            SnapshotError::Io { step, source } => write!(f, "{step}: {source}"),
        }
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::PermissionDenied { source, .. }
            | SnapshotError::CloneFailed { source, .. }
            | SnapshotError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<SnapshotError> for io::Error {
    fn from(err: SnapshotError) -> io::Error {
        let kind = match &err {
            SnapshotError::NoSuchProcess { .. } | SnapshotError::TargetExited { .. } => {
                io::ErrorKind::NotFound
            }
            SnapshotError::PermissionDenied { .. } | SnapshotError::Seccomp { .. } => {
                io::ErrorKind::PermissionDenied
            }
            SnapshotError::Unsupported(_) => io::ErrorKind::Unsupported,
            SnapshotError::Io { source, .. } | SnapshotError::CloneFailed { source, .. } => {
                source.kind()
            }
            _ => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, err)
    }
}
