//! progeny: start processes on Linux fast and safely.
//!
//! [`Command`] is a drop-in for [`std::process::Command`] that creates the child with
//! `clone3(CLONE_VM|CLONE_VFORK|CLONE_PIDFD)` on a separate, guard-paged stack. The child shares
//! the parent's memory instead of copying its page tables, so the cost of a spawn does not grow
//! with the parent's memory, as `fork`'s does; and it runs only an allocation-free plan prepared by
//! the parent, with raw system calls, so the hazards of `vfork` (locks held by other threads,
//! signal handlers, `errno`, a shared stack) cannot bite.
//!
//! ```
//! use progeny::{Command, Stdio};
//!
//! let mut child = Command::new("sh")
//!     .args(["-c", "tr a-z A-Z"])
//!     .stdin(Stdio::piped())
//!     .stdout(Stdio::piped())
//!     .spawn()?;
//! let out = child.communicate(b"hello")?;
//! assert_eq!(out.stdout, b"HELLO");
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! What happens on a spawn:
//! 1. The parent validates the command (a NUL byte is `InvalidInput` before any process exists),
//!    makes the pipes (all close-on-exec), and freezes argv, envp, the `PATH` candidates and the
//!    descriptor moves into a plan.
//! 2. It clones (blocking every signal around the clone when the plan needs it). The child
//!    starts with caught signals at their defaults (`CLONE_CLEAR_SIGHAND`) and resets `SIGPIPE`
//!    too, places the descriptors (swaps included), marks every other descriptor close-on-exec
//!    with `close_range`, sets ids, directory and process group, sets its own signal mask, and
//!    execs.
//! 3. A failure in the child is written as `{step, errno}` into the parent's memory; the parent
//!    reaps the failed child and returns a [`SpawnError`] naming the step, inside an `io::Error`.
//!
//! **The zygote.** For code that must run in the child (std's `pre_exec`), start a [`Zygote`]
//! first thing in `main`, while the process is single-threaded: a forked helper that any thread
//! can later ask to start a [`Command`]. It clones each child with `CLONE_PARENT`, so the child
//! is the caller's own and comes back as an ordinary [`Child`], with the same errors as a direct
//! spawn; registered [`Hook`] functions run in that child before the exec, where allocating and
//! locking are safe because the helper has a single thread.
//!
//! Linux on x86_64 only, for now.

pub use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus, Output};

mod child;
mod command;
mod container;
mod error;
mod plan;
mod probe;
mod spawn;
mod stdio;
mod zygote;

pub use child::Child;
pub use command::{Backend, Command, CommandArgs, CommandEnvs};
pub use container::{IdMap, IoPriority, Namespaces};
pub use error::{SpawnError, Step};
pub use probe::{probe, Feature, Probe};
pub use spawn::{SpawnCall, SpawnPath};
pub use stdio::Stdio;
pub use zygote::{Hook, HookError, Zygote, ZygoteBuilder};
