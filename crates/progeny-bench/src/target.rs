//! What the spawned children run: `/bin/true`, the static no-op built with
//! this crate (the exec floor), or any program the caller names.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The static no-op executable built by `build.rs` from `csrc/noop.c`:
/// `-static -nostdlib`, one `exit_group(0)` system call.
static NOOP_EXECUTABLE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/noop"));

/// A program to spawn, with its arguments (`argv[0]` is the program itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Short name used in tables, JSON and plots (`true`, `noop`, or a path).
    pub name: String,
    /// Path of the executable (absolute, so no `PATH` search is involved).
    pub program: PathBuf,
    /// Arguments after `argv[0]`.
    pub args: Vec<OsString>,
    /// What it is, for tables and plot titles (by default its path).
    pub about: String,
}

impl Target {
    /// A target running `program` with `args`, named `name`.
    pub fn new(name: impl Into<String>, program: impl Into<PathBuf>, args: Vec<OsString>) -> Self {
        let program = program.into();
        Target {
            name: name.into(),
            about: program.display().to_string(),
            program,
            args,
        }
    }
}

/// Which target a user asked for, before any file is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// `/bin/true`: a small dynamically linked program, the everyday case.
    True,
    /// The static no-op executable shipped in this crate: the exec floor.
    Noop,
    /// Any executable, by absolute path, run without arguments.
    Path(PathBuf),
    /// A fully described target (program, arguments, name), for callers of
    /// the library.
    Custom(Target),
}

impl TargetSpec {
    /// The targets `progeny bench spawn` runs by default.
    pub const DEFAULTS: [TargetSpec; 2] = [TargetSpec::True, TargetSpec::Noop];

    /// Parses `true`, `noop`, or an absolute path.
    ///
    /// Fails on anything else (a relative path would depend on the current
    /// directory, and a bare name on `PATH`, which not every method searches).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "true" => Ok(TargetSpec::True),
            "noop" => Ok(TargetSpec::Noop),
            path if path.starts_with('/') => Ok(TargetSpec::Path(PathBuf::from(path))),
            other => Err(format!(
                "unknown target {other:?}: use `true`, `noop`, or an absolute path"
            )),
        }
    }

    /// The name used in tables and JSON.
    pub fn name(&self) -> String {
        match self {
            TargetSpec::True => "true".to_owned(),
            TargetSpec::Noop => "noop".to_owned(),
            TargetSpec::Path(path) => path.display().to_string(),
            TargetSpec::Custom(target) => target.name.clone(),
        }
    }
}

impl fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A private temporary directory holding the materialized built-in targets;
/// removed, with its contents, on drop.
#[derive(Debug)]
pub struct TargetDir {
    path: PathBuf,
}

impl TargetDir {
    /// Creates a fresh directory under the system's temporary directory.
    ///
    /// Fails when the directory cannot be created.
    pub fn create() -> io::Result<Self> {
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for attempt in 0..100u32 {
            let path = base.join(format!(
                "progeny-bench-{}-{nanos:x}-{attempt}",
                std::process::id()
            ));
            match fs::create_dir(&path) {
                Ok(()) => {
                    sweep_stale_dirs(&base, &path);
                    return Ok(TargetDir { path });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot create a directory in {}: {e}", base.display()),
                    ))
                }
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("cannot find a free directory name in {}", base.display()),
        ))
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `contents` to `name` in this directory with mode 0755 and
    /// returns its path.
    ///
    /// Fails when the file cannot be written.
    pub fn write_executable(&self, name: &str, contents: &[u8]) -> io::Result<PathBuf> {
        let path = self.path.join(name);
        // The file is closed before anything is spawned from it: a writable
        // descriptor inherited by a concurrently forked child would make
        // execve fail with ETXTBSY.
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .open(&path)?;
        file.write_all(contents)?;
        file.sync_all()?;
        Ok(path)
    }

    /// Resolves `spec` to a runnable target, writing the no-op executable
    /// into this directory when asked for.
    ///
    /// Fails when the no-op cannot be written. A path that does not exist is
    /// not an error here: the methods report it as a failed run.
    pub fn resolve(&self, spec: &TargetSpec) -> io::Result<Target> {
        Ok(match spec {
            TargetSpec::True => Target::new("true", "/bin/true", Vec::new()),
            TargetSpec::Noop => {
                let path = self.path.join("noop");
                let path = if path.exists() {
                    path
                } else {
                    let path = self.write_executable("noop", NOOP_EXECUTABLE)?;
                    wait_until_executable(&path)?;
                    path
                };
                let mut target = Target::new("noop", path, Vec::new());
                target.about = "static no-op executable: the exec floor".to_owned();
                target
            }
            TargetSpec::Path(path) => Target::new(spec.name(), path.clone(), Vec::new()),
            TargetSpec::Custom(target) => target.clone(),
        })
    }
}

/// Removes the target directories of earlier runs that were killed before
/// they could clean up (Ctrl-C, SIGKILL): directories named like ours, owned
/// by the same user, whose process no longer exists. Best effort: anything
/// that cannot be read or removed is left alone.
fn sweep_stale_dirs(base: &Path, ours: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(our_uid) = fs::metadata(ours).map(|m| m.uid()) else {
        return;
    };
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("progeny-bench-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let owned = entry
            .metadata()
            .map(|m| m.is_dir() && m.uid() == our_uid)
            .unwrap_or(false);
        if owned && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Runs a freshly written executable once, retrying while `execve` fails
/// with `ETXTBSY`.
///
/// A child forked by another thread while the file was open for writing
/// holds a copy of that descriptor until it execs, and the kernel refuses to
/// execute a file that anyone has open for writing. Our descriptor is closed,
/// so no new writer can appear: once one exec succeeds, every later one will.
///
/// Fails when the executable does not run and exit with 0 within a second,
/// or fails otherwise.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/execve.2.html> (`ETXTBSY`)
fn wait_until_executable(path: &Path) -> io::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        match std::process::Command::new(path).status() {
            Ok(status) if status.success() => return Ok(()),
            Ok(status) => {
                return Err(io::Error::other(format!(
                    "{} did not run: {status}",
                    path.display()
                )))
            }
            Err(e)
                if e.raw_os_error() == Some(libc::ETXTBSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("{} did not run: {e}", path.display()),
                ))
            }
        }
    }
}

impl Drop for TargetDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}
