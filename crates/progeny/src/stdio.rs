//! `Stdio`: what a child's standard stream is connected to.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::process::{ChildStderr, ChildStdin, ChildStdout};

/// Describes what to do with a standard I/O stream of a child, as std's `Stdio` does.
///
/// Besides [`inherit`](Stdio::inherit), [`null`](Stdio::null) and [`piped`](Stdio::piped), any
/// owned descriptor can be given: a [`File`], an [`OwnedFd`], or another child's pipe
/// (`ChildStdout` of one child as the `stdin` of the next, to build a pipeline).
#[derive(Debug)]
pub struct Stdio(pub(crate) StdioKind);

#[derive(Debug)]
pub(crate) enum StdioKind {
    Inherit,
    Null,
    Piped,
    Fd(OwnedFd),
}

impl Stdio {
    /// The child inherits the parent's descriptor.
    pub fn inherit() -> Stdio {
        Stdio(StdioKind::Inherit)
    }

    /// The stream is connected to `/dev/null`.
    pub fn null() -> Stdio {
        Stdio(StdioKind::Null)
    }

    /// A new pipe connects the child and the parent; the parent's end appears on
    /// [`Child`](crate::Child)'s `stdin`, `stdout` or `stderr`.
    pub fn piped() -> Stdio {
        Stdio(StdioKind::Piped)
    }

    /// Whether this is [`Stdio::piped`] (as std's `Stdio::makes_pipe`).
    pub fn makes_pipe(&self) -> bool {
        matches!(self.0, StdioKind::Piped)
    }
}

impl From<OwnedFd> for Stdio {
    fn from(fd: OwnedFd) -> Stdio {
        Stdio(StdioKind::Fd(fd))
    }
}

impl From<File> for Stdio {
    fn from(file: File) -> Stdio {
        Stdio::from(OwnedFd::from(file))
    }
}

impl From<ChildStdin> for Stdio {
    fn from(pipe: ChildStdin) -> Stdio {
        Stdio::from(OwnedFd::from(pipe))
    }
}

impl From<ChildStdout> for Stdio {
    fn from(pipe: ChildStdout) -> Stdio {
        Stdio::from(OwnedFd::from(pipe))
    }
}

impl From<ChildStderr> for Stdio {
    fn from(pipe: ChildStderr) -> Stdio {
        Stdio::from(OwnedFd::from(pipe))
    }
}

impl From<std::io::PipeWriter> for Stdio {
    fn from(pipe: std::io::PipeWriter) -> Stdio {
        Stdio::from(OwnedFd::from(pipe))
    }
}

impl From<std::io::PipeReader> for Stdio {
    fn from(pipe: std::io::PipeReader) -> Stdio {
        Stdio::from(OwnedFd::from(pipe))
    }
}
