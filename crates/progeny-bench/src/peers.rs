//! The external peers: Python's `subprocess.Popen` and `os.posix_spawn`, and
//! Go's `os/exec`. Each is a small program shipped with this crate
//! (`peers/`) that runs its own timed loop in its own process and prints its
//! raw samples; this module runs it and parses them.
//!
//! A peer is timed by its own clock in its own process (there is no other
//! way to time another runtime's spawn API), and its parent memory is its
//! own, so peers appear at parent memory 0 and one thread only. A peer whose
//! runtime is missing is skipped with a note.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::method::Method;
use crate::target::{Target, TargetDir};

/// The Python peer program (both Python methods).
pub const PYTHON_PEER_SOURCE: &str = include_str!("../peers/spawn_peer.py");
/// The Go peer program.
pub const GO_PEER_SOURCE: &str = include_str!("../peers/spawn_peer.go");

/// How much a peer should measure: the same knobs as the in-process cells.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeerLoop {
    /// Most measured spawns.
    pub iterations: u64,
    /// Seconds after which the loop stops once `min_iterations` are done.
    pub budget_s: f64,
    /// Unmeasured spawns first.
    pub warmup: u64,
    /// Fewest measured spawns.
    pub min_iterations: u64,
}

/// The raw figures a peer printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerFigures {
    /// One latency per measured spawn, in ns.
    pub samples_ns: Vec<u64>,
    /// Wall time of the measured loop, in ns.
    pub wall_ns: u64,
}

/// What running a peer came to.
#[derive(Debug)]
pub enum PeerOutcome {
    /// The peer measured its loop.
    Measured(PeerFigures),
    /// The peer ran and reported a failure (its target failed, say).
    Failed(String),
    /// The peer's runtime is not available; the string says why.
    Skipped(String),
}

/// Finds `name` in `PATH`, as a shell would.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Peer programs made ready to run: the Python script written out, the Go
/// program built. Built once per benchmark run.
#[derive(Debug)]
pub struct Peers {
    python: Result<(PathBuf, PathBuf), String>,
    go: Result<PathBuf, String>,
}

impl Peers {
    /// Writes and builds the peers needed for `methods` into `dir`.
    /// A missing `python3` or `go`, or a failed `go build`, makes that peer
    /// skipped (not an error). Building Go can take several seconds the first
    /// time (its build cache is cold).
    pub fn prepare(dir: &TargetDir, methods: &[Method]) -> Peers {
        let wants_python = methods
            .iter()
            .any(|m| matches!(m, Method::PythonPopen | Method::PythonPosixSpawn));
        let wants_go = methods.contains(&Method::GoExec);
        let python = if wants_python {
            prepare_python(dir)
        } else {
            Err("not requested".to_owned())
        };
        let go = if wants_go {
            prepare_go(dir)
        } else {
            Err("not requested".to_owned())
        };
        Peers { python, go }
    }

    /// Runs the peer for `method` against `target` with `knobs`.
    /// An in-process `method` yields [`PeerOutcome::Failed`]; a peer whose
    /// runtime is missing yields [`PeerOutcome::Skipped`].
    pub fn run(&self, method: Method, target: &Target, knobs: PeerLoop) -> PeerOutcome {
        let mut command = match method {
            Method::PythonPopen | Method::PythonPosixSpawn => match &self.python {
                Ok((python, script)) => {
                    let mut command = Command::new(python);
                    command.arg(script).arg(if method == Method::PythonPopen {
                        "popen"
                    } else {
                        "posix_spawn"
                    });
                    command
                }
                Err(why) => return PeerOutcome::Skipped(why.clone()),
            },
            Method::GoExec => match &self.go {
                Ok(binary) => Command::new(binary),
                Err(why) => return PeerOutcome::Skipped(why.clone()),
            },
            other => return PeerOutcome::Failed(format!("{other} is not an external peer")),
        };
        command
            .arg(knobs.iterations.to_string())
            .arg(format!("{}", knobs.budget_s))
            .arg(knobs.warmup.to_string())
            .arg(knobs.min_iterations.to_string())
            .arg(&target.program)
            .args(&target.args);
        match run_and_parse(&mut command) {
            Ok(figures) => PeerOutcome::Measured(figures),
            Err(why) => PeerOutcome::Failed(why),
        }
    }
}

fn prepare_python(dir: &TargetDir) -> Result<(PathBuf, PathBuf), String> {
    let python = find_in_path("python3").ok_or("python3 is not in PATH")?;
    let script = dir.path().join("spawn_peer.py");
    std::fs::write(&script, PYTHON_PEER_SOURCE)
        .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    Ok((python, script))
}

fn prepare_go(dir: &TargetDir) -> Result<PathBuf, String> {
    let go = find_in_path("go").ok_or("go is not in PATH")?;
    let source = dir.path().join("spawn_peer.go");
    std::fs::write(&source, GO_PEER_SOURCE)
        .map_err(|e| format!("cannot write {}: {e}", source.display()))?;
    let binary = dir.path().join("spawn_peer_go");
    let mut command = Command::new(go);
    // Go needs a build cache; without GOCACHE, HOME or XDG_CACHE_HOME (a
    // bare CI environment) it refuses to build, so give it a private one.
    if ["GOCACHE", "HOME", "XDG_CACHE_HOME"]
        .iter()
        .all(|name| std::env::var_os(name).unwrap_or_default().is_empty())
    {
        command.env("GOCACHE", dir.path().join("go-cache"));
    }
    let output = command
        .arg("build")
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .current_dir(dir.path())
        // Offline and with the installed toolchain only: the program needs
        // nothing beyond the standard library, and a build must never try to
        // download a module or another Go release.
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "")
        .env("GO111MODULE", "on")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run go build: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().next().unwrap_or("no message");
        return Err(format!("go build failed ({}): {first}", output.status));
    }
    Ok(binary)
}

/// Runs a peer and parses its `samples_ns` and `wall_ns` lines.
fn run_and_parse(command: &mut Command) -> Result<PeerFigures, String> {
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run the peer: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if let Some(message) = stdout.lines().find_map(|l| l.strip_prefix("error ")) {
        return Err(message.to_owned());
    }
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().last().unwrap_or("no message");
        return Err(format!("the peer failed ({}): {last}", output.status));
    }
    parse_peer_output(&stdout)
}

/// Parses a peer's output: a `samples_ns N N ...` line and a `wall_ns N`
/// line.
///
/// Fails when either line is missing or holds something other than whole
/// numbers.
pub fn parse_peer_output(text: &str) -> Result<PeerFigures, String> {
    let mut samples_ns = None;
    let mut wall_ns = None;
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        match words.next() {
            Some("samples_ns") => {
                let parsed: Result<Vec<u64>, _> = words.map(str::parse).collect();
                samples_ns =
                    Some(parsed.map_err(|e| format!("bad samples_ns line from the peer: {e}"))?);
            }
            Some("wall_ns") => {
                let value = words.next().unwrap_or("");
                wall_ns = Some(
                    value
                        .parse()
                        .map_err(|e| format!("bad wall_ns {value:?} from the peer: {e}"))?,
                );
            }
            _ => {}
        }
    }
    match (samples_ns, wall_ns) {
        (Some(samples_ns), Some(wall_ns)) => Ok(PeerFigures {
            samples_ns,
            wall_ns,
        }),
        _ => Err("the peer printed no samples_ns/wall_ns lines".to_owned()),
    }
}

/// Whether `path` is a regular file with an execute bit set.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
