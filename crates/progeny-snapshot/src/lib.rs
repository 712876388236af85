//! Live process snapshots.
//!
//! [`Snapshot::take`] stops every thread of a running process with `ptrace`, records their
//! registers, makes the process fork a copy-on-write child of itself by borrowing a `syscall`
//! instruction it already has, and lets it run on: the pause is measured in microseconds, and
//! the child keeps the process's memory exactly as it was at the stop for as long as a slow
//! analysis needs (a core dump, a heap walk), while the original pays only the copy-on-write
//! faults of the pages it writes meanwhile (measured by [`cow`]).
//!
//! [`snapshot_me`] is the in-process flavour: a stopped copy of the calling process, with no
//! `SIGCHLD` to anyone.
//!
//! Only x86_64 Linux is implemented; elsewhere the functions return
//! [`SnapshotError::Unsupported`].
#![allow(unsafe_code)]

mod core_file;
pub mod cow;
mod error;
mod procfs;
mod ptrace;
mod seccomp;
mod self_snapshot;
mod snapshot;
pub mod targets;

pub use core_file::{CoreOptions, CoreReport, Progress};
pub use error::SnapshotError;
pub use procfs::{read_maps, read_memory, Mapping};
pub use ptrace::Registers;
pub use self_snapshot::{snapshot_me, SelfSnapshot};
pub use snapshot::{Phase, Phases, Snapshot, SnapshotOptions, ThreadState};
