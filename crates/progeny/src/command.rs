//! `Command`: a drop-in for `std::process::Command`.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output};

use crate::container::Container;
use crate::error::invalid_input;
use crate::stdio::{Stdio, StdioKind};
use crate::{spawn, Child};

/// How progeny creates the child process.
///
/// Every backend runs the same allocation-free plan in the child; they differ in how the child
/// comes to exist. A backend that cannot express an option returns an
/// [`Unsupported`](io::ErrorKind::Unsupported) error instead of dropping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// `clone3(CLONE_VM|CLONE_VFORK|CLONE_PIDFD|CLONE_CLEAR_SIGHAND)` on a separate, guard-paged
    /// stack. The default. Where the kernel (or a seccomp filter) has no `clone3`, it uses the
    /// legacy `clone` path, once and for all.
    #[default]
    Clone3,
    /// The legacy `clone(CLONE_VM|CLONE_VFORK|CLONE_PIDFD)` system call on a separate stack.
    Clone,
    /// `fork` + `execve`: copies the parent's page tables, so its cost grows with the parent's
    /// memory. For comparison.
    Fork,
    /// glibc's `posix_spawn`. For comparison; it cannot set ids, search a changed `PATH`, or
    /// place descriptors that overlap, and says so.
    PosixSpawn,
}

/// What the plan needs from a stream when the caller gave nothing.
#[derive(Debug, Clone, Copy)]
pub(crate) enum StdioDefault {
    Inherit,
    Null,
    Piped,
}

/// A process builder with the methods and meaning of [`std::process::Command`].
///
/// Replace `std::process::Command` by `progeny::Command` and ordinary code compiles and behaves
/// the same, with the child started by `clone3(CLONE_VM|CLONE_VFORK)` instead of
/// `fork`-or-`posix_spawn`, so the cost does not grow with the parent's memory.
///
/// Beyond std: [`fd`](Command::fd) maps any descriptor to any number in the child,
/// [`close_other_fds`](Command::close_other_fds) controls the close-the-rest step (on by default),
/// [`signal_mask`](Command::signal_mask) sets the child's initial mask, [`setsid`](Command::setsid)
/// starts a session, and [`backend`](Command::backend) chooses how the child is created.
///
/// # No `pre_exec`
/// std's `CommandExt::pre_exec` runs an arbitrary closure in the child. progeny's child shares
/// memory with a suspended parent thread while the parent's other threads run on, so the closure
/// could not allocate, lock, or touch anything a parent thread might hold: almost any Rust code
/// breaks that rule silently. progeny therefore has no `pre_exec`; every supported setup step is
/// a method here, executed by raw system calls. For arbitrary child-side code, register a hook
/// with a [`Zygote`](crate::Zygote): a single-threaded spawn server, where fork-style setup is safe.
///
/// # Caveats
/// Like `posix_spawn` with `environ`, and like std, progeny reads the process environment when it
/// spawns: an unchanged environment is handed to the child as libc's `environ` array itself, and a
/// changed one is built from it. Rust's `std::env::set_var` requires that no other thread reads
/// the environment through libc while it runs (which is why it is `unsafe` in edition 2024); a
/// program that changes its environment from one thread while another spawns breaks that rule.
///
/// # Example
/// ```
/// let out = progeny::Command::new("echo").arg("hello").output()?;
/// assert_eq!(out.stdout, b"hello\n");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Command {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) arg0: Option<OsString>,
    pub(crate) env_clear: bool,
    pub(crate) env: BTreeMap<OsString, Option<OsString>>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) stdin: Option<Stdio>,
    pub(crate) stdout: Option<Stdio>,
    pub(crate) stderr: Option<Stdio>,
    pub(crate) fds: Vec<(i32, OwnedFd)>,
    pub(crate) close_other_fds: bool,
    pub(crate) uid: Option<u32>,
    pub(crate) gid: Option<u32>,
    pub(crate) groups: Option<Vec<u32>>,
    pub(crate) pgroup: Option<i32>,
    pub(crate) setsid: bool,
    pub(crate) sigmask: Vec<i32>,
    pub(crate) backend: Backend,
    pub(crate) container: Container,
}

impl Command {
    /// A command for launching `program`, with no arguments, the parent's environment and
    /// working directory, inherited stdio for `spawn`/`status` and captured stdio for `output`.
    ///
    /// A program without a `/` is searched in `PATH`: the child's `PATH` if the command changed
    /// it, else the parent's (std's rule).
    pub fn new<S: AsRef<OsStr>>(program: S) -> Command {
        Command {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            arg0: None,
            env_clear: false,
            env: BTreeMap::new(),
            cwd: None,
            stdin: None,
            stdout: None,
            stderr: None,
            fds: Vec::new(),
            close_other_fds: true,
            uid: None,
            gid: None,
            groups: None,
            pgroup: None,
            setsid: false,
            sigmask: Vec::new(),
            backend: Backend::default(),
            container: Container::default(),
        }
    }

    /// Adds an argument.
    pub fn arg<S: AsRef<OsStr>>(&mut self, arg: S) -> &mut Command {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds several arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable for the child.
    pub fn env<K, V>(&mut self, key: K, val: V) -> &mut Command
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.env
            .insert(key.as_ref().to_owned(), Some(val.as_ref().to_owned()));
        self
    }

    /// Sets several environment variables.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    /// Removes an environment variable from the child's environment.
    pub fn env_remove<K: AsRef<OsStr>>(&mut self, key: K) -> &mut Command {
        if self.env_clear {
            self.env.remove(key.as_ref());
        } else {
            self.env.insert(key.as_ref().to_owned(), None);
        }
        self
    }

    /// Clears the child's environment: it gets only the variables set afterwards.
    pub fn env_clear(&mut self) -> &mut Command {
        self.env_clear = true;
        self.env.clear();
        self
    }

    /// Sets the child's working directory. A relative program path is then resolved from it.
    pub fn current_dir<P: AsRef<Path>>(&mut self, dir: P) -> &mut Command {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Sets the child's standard input.
    pub fn stdin<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.stdin = Some(cfg.into());
        self
    }

    /// Sets the child's standard output.
    pub fn stdout<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.stdout = Some(cfg.into());
        self
    }

    /// Sets the child's standard error.
    pub fn stderr<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.stderr = Some(cfg.into());
        self
    }

    /// Makes `fd` appear as descriptor number `child_fd` in the child (any number, including 0–2,
    /// where it overrides `stdin`/`stdout`/`stderr`). Mappings may overlap and swap: `3→4` with
    /// `4→3` does what it says. A later mapping to the same `child_fd` replaces the earlier one.
    ///
    /// The command keeps `fd` open for later spawns; a negative `child_fd` fails the spawn with
    /// `InvalidInput`, and a number beyond the child's descriptor limit fails it with `EBADF`.
    pub fn fd<F: Into<OwnedFd>>(&mut self, child_fd: i32, fd: F) -> &mut Command {
        self.fds.retain(|(dst, _)| *dst != child_fd);
        self.fds.push((child_fd, fd.into()));
        self
    }

    /// Whether the program starts without every descriptor above 2 that is not mapped with
    /// [`fd`](Command::fd) (default `true`: the child marks them close-on-exec with one
    /// `close_range` call, and `execve` closes them).
    ///
    /// progeny's own descriptors are all close-on-exec, but other libraries in the process may
    /// leave descriptors open without it; closing the rest keeps them out of the child.
    pub fn close_other_fds(&mut self, close: bool) -> &mut Command {
        self.close_other_fds = close;
        self
    }

    /// Sets the child's user id (`setuid`, by raw system call in the child). When no
    /// [`groups`](Command::groups) are given, supplementary groups are dropped first where
    /// permitted, as std does.
    pub fn uid(&mut self, id: u32) -> &mut Command {
        self.uid = Some(id);
        self
    }

    /// Sets the child's group id (`setgid`).
    pub fn gid(&mut self, id: u32) -> &mut Command {
        self.gid = Some(id);
        self
    }

    /// Sets the child's supplementary groups (`setgroups`).
    pub fn groups(&mut self, groups: &[u32]) -> &mut Command {
        self.groups = Some(groups.to_vec());
        self
    }

    /// Puts the child in process group `pgroup` (`setpgid(0, pgroup)`); 0 makes a new group
    /// whose id is the child's pid.
    pub fn process_group(&mut self, pgroup: i32) -> &mut Command {
        self.pgroup = Some(pgroup);
        self
    }

    /// Starts the child in a new session (`setsid`).
    pub fn setsid(&mut self, setsid: bool) -> &mut Command {
        self.setsid = setsid;
        self
    }

    /// Sets `argv[0]` to something other than the program.
    pub fn arg0<S: AsRef<OsStr>>(&mut self, arg: S) -> &mut Command {
        self.arg0 = Some(arg.as_ref().to_owned());
        self
    }

    /// Blocks these signals in the child's initial signal mask (empty by default, whatever the
    /// parent's mask). Numbers outside `1..=64` fail the spawn with `InvalidInput`.
    pub fn signal_mask(&mut self, signals: &[i32]) -> &mut Command {
        self.sigmask = signals.to_vec();
        self
    }

    /// Chooses how the child is created (default [`Backend::Clone3`]).
    pub fn backend(&mut self, backend: Backend) -> &mut Command {
        self.backend = backend;
        self
    }

    /// Starts the child and returns a handle to it. Stdio defaults to inherit.
    ///
    /// # Errors
    /// `InvalidInput` for a NUL byte in the program, an argument, an environment variable or the
    /// directory, before any process exists; a [`SpawnError`](crate::SpawnError) naming the step
    /// for a failure in the child (the failed child is reaped); `Unsupported` when the chosen
    /// backend cannot express an option; the `clone3`/`fork` error itself (e.g. `EAGAIN`).
    pub fn spawn(&mut self) -> io::Result<Child> {
        spawn::spawn(self, StdioDefault::Inherit, StdioDefault::Inherit)
    }

    /// Runs the child to completion, capturing stdout and stderr (stdin defaults to null), as
    /// std does. Output is read with one poll loop, so a child writing lots to both streams
    /// cannot deadlock.
    pub fn output(&mut self) -> io::Result<Output> {
        spawn::spawn(self, StdioDefault::Null, StdioDefault::Piped)?.wait_with_output()
    }

    /// Runs the child to completion and returns its exit status. Stdio defaults to inherit.
    pub fn status(&mut self) -> io::Result<ExitStatus> {
        self.spawn()?.wait()
    }

    /// The program, as given to [`new`](Command::new).
    pub fn get_program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments (without the program or `arg0`).
    pub fn get_args(&self) -> CommandArgs<'_> {
        CommandArgs {
            inner: self.args.iter(),
        }
    }

    /// The explicit environment changes: `Some(value)` for a set variable, `None` for a removed
    /// one. After [`env_clear`](Command::env_clear), only variables set since appear.
    pub fn get_envs(&self) -> CommandEnvs<'_> {
        CommandEnvs {
            inner: self.env.iter(),
        }
    }

    /// The working directory set with [`current_dir`](Command::current_dir).
    pub fn get_current_dir(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }

    pub(crate) fn stdio_slot(&self, n: usize) -> Option<&StdioKind> {
        match n {
            0 => self.stdin.as_ref(),
            1 => self.stdout.as_ref(),
            _ => self.stderr.as_ref(),
        }
        .map(|s| &s.0)
    }
}

impl fmt::Debug for Command {
    /// Formats like std: the program and arguments, quoted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.program)?;
        for arg in &self.args {
            write!(f, " {:?}", arg)?;
        }
        Ok(())
    }
}

impl From<&std::process::Command> for Command {
    /// Copies what std exposes: program, arguments, explicit environment changes and the
    /// working directory.
    ///
    /// # Caveats
    /// std does not expose `env_clear`, stdio, `arg0`, ids or the process group, so those are
    /// not copied: set them again on the result.
    fn from(std_cmd: &std::process::Command) -> Command {
        let mut cmd = Command::new(std_cmd.get_program());
        cmd.args(std_cmd.get_args());
        for (k, v) in std_cmd.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        if let Some(dir) = std_cmd.get_current_dir() {
            cmd.current_dir(dir);
        }
        cmd
    }
}

/// An iterator over a command's arguments, from [`Command::get_args`].
#[derive(Debug)]
pub struct CommandArgs<'a> {
    inner: std::slice::Iter<'a, OsString>,
}

impl<'a> Iterator for CommandArgs<'a> {
    type Item = &'a OsStr;
    fn next(&mut self) -> Option<&'a OsStr> {
        self.inner.next().map(OsString::as_os_str)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl ExactSizeIterator for CommandArgs<'_> {}

/// An iterator over a command's environment changes, from [`Command::get_envs`].
#[derive(Debug)]
pub struct CommandEnvs<'a> {
    inner: std::collections::btree_map::Iter<'a, OsString, Option<OsString>>,
}

impl<'a> Iterator for CommandEnvs<'a> {
    type Item = (&'a OsStr, Option<&'a OsStr>);
    fn next(&mut self) -> Option<Self::Item> {
        self.inner
            .next()
            .map(|(k, v)| (k.as_os_str(), v.as_deref()))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl ExactSizeIterator for CommandEnvs<'_> {}

/// Rejects a NUL byte in `what` before any process exists.
pub(crate) fn check_nul(what: &str, value: &OsStr) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    if value.as_bytes().contains(&0) {
        Err(invalid_input(format!(
            "{what} contains a NUL byte: {value:?}"
        )))
    } else {
        Ok(())
    }
}
