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
//! [`Snapshot::write_core`] turns a snapshot into an ELF core file that gdb loads like one
//! written by `gcore`, while the target runs on.
//!
//! # Caveats
//! - The pause has two parts: stopping, recording and resuming every thread (about 150 µs for
//!   one thread, under 2 ms for 64), and the `clone` itself, whose cost grows with the target's
//!   resident memory because the kernel copies and write-protects every page-table entry
//!   (about 25 ms per GiB of 4 KiB pages here; far less with transparent huge pages).
//! - The child holds the target's memory as of the stop; `MAP_SHARED` memory keeps changing
//!   and `MADV_DONTFORK` memory is absent. It closes the file descriptors it inherited.
//! - Dropping a snapshot briefly stops one thread of the target again, to make it reap the
//!   child (which has no exit signal, so nothing else would).
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
