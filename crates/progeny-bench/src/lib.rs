//! The head-to-head spawn benchmark behind `progeny bench spawn`.
//!
//! It compares the ways to start a process on Linux ([`Method`]): progeny
//! itself, `std::process::Command`, `fork`+`execve`, `vfork`+`execve` (also with a pidfd), glibc
//! `posix_spawn`, the floor of process creation (`clone(CLONE_VM|CLONE_VFORK)`
//! without exec), and external peers (Python, Go). Each spawns a [`Target`]
//! (`/bin/true`, or a static no-op that is the floor of exec), waits for it,
//! and checks it exited with 0, from a parent holding a chosen amount of
//! touched memory, on one or more threads at once.
//!
//! The pieces are public so that other benchmarks can reuse them:
//! [`stats`] (HDR histograms), [`report`] (the JSON layout), [`plot`]
//! (line charts and distributions with `plotters`), [`table`] (text tables)
//! and [`units`] (sizes, lists, µs).
//!
//! [`indexer`] is the second benchmark (`progeny bench indexer`): a big
//! multithreaded process runs a small converter on each of thousands of
//! documents, with pipes, as a desktop indexer does.

#[path = "core.rs"]
pub mod core_dump;
pub mod harness;
pub mod indexer;
pub mod machine;
pub mod method;
pub mod peers;
pub mod plot;
#[allow(unsafe_code)]
mod raw;
pub mod report;
pub mod snapshot;
pub mod stats;
pub mod table;
pub mod target;
pub mod units;

pub use harness::{run_spawn_bench, Event, Observer, SpawnBenchConfig};
pub use method::{Method, RunFailure, Spawner};
pub use raw::Ballast;
pub use report::{SpawnReport, SpawnResult};
pub use target::{Target, TargetDir, TargetSpec};
