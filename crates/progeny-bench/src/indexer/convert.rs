//! One worker's way of running the converter on a document with one method:
//! read the document, start the converter with stdin and stdout on pipes,
//! write the document to its stdin while reading all of its stdout, wait for
//! it, and check its exit status and its output's checksum.
//!
//! progeny uses its own `Child::communicate`. The other methods share one
//! hand-written `poll` loop ([`pump`]) doing the same thing, so that what
//! differs between methods is how the child is started and reaped.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::process::ExitStatus;

use super::corpus::Document;
use crate::method::{environment_entries, Method};
use crate::raw::{self, ChildStdio};

/// How a runner starts the converter.
enum Start {
    /// fork, vfork, posix_spawn: a frozen exec plan.
    Raw(raw::ExecPlan),
    /// std: a Command built once, spawned for every document.
    Std(std::process::Command),
    /// progeny: likewise (boxed: its builder is large).
    Progeny(Box<progeny::Command>),
    /// progeny through the zygote.
    Zygote(Box<progeny::Command>, &'static progeny::Zygote),
}

/// A method prepared to run the converter, with its buffers. Tied to the
/// thread that made it (the exec plan holds raw pointers); make one per
/// worker.
pub(crate) struct Runner {
    method: Method,
    start: Start,
    output: Vec<u8>,
    buffer: Vec<u8>,
}

/// Fails with `InvalidInput` naming the method.
fn unsupported(method: Method) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{method} is not a method of the indexer benchmark"),
    )
}

impl Runner {
    /// Prepares `method` to run `converter` (argv `[converter]`: it reads the
    /// document on stdin).
    ///
    /// Fails for a method the indexer does not run, a path with a NUL byte,
    /// or `progeny-zygote` when no zygote was started.
    pub(crate) fn new(method: Method, converter: &Path) -> io::Result<Runner> {
        let program = converter.as_os_str();
        let start = match method {
            Method::Fork | Method::Vfork | Method::VforkPidfd | Method::PosixSpawn => {
                let env: Vec<OsString> = environment_entries();
                let env: Vec<&OsStr> = env.iter().map(OsString::as_os_str).collect();
                Start::Raw(raw::ExecPlan::new(program, &[], &env)?)
            }
            Method::Std => {
                let mut command = std::process::Command::new(program);
                command
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped());
                Start::Std(command)
            }
            Method::Progeny | Method::ProgenyZygote => {
                let mut command = progeny::Command::new(program);
                command
                    .stdin(progeny::Stdio::piped())
                    .stdout(progeny::Stdio::piped());
                if method == Method::Progeny {
                    command.backend(progeny::Backend::Clone3);
                    Start::Progeny(Box::new(command))
                } else {
                    let zygote = crate::method::zygote().ok_or_else(|| {
                        io::Error::other(
                            "progeny-zygote: the zygote was not started (start_zygote, while \
                             the process is single-threaded)",
                        )
                    })?;
                    Start::Zygote(Box::new(command), zygote)
                }
            }
            other => return Err(unsupported(other)),
        };
        Ok(Runner {
            method,
            start,
            output: Vec::with_capacity(16 * 1024),
            buffer: vec![0; 64 * 1024],
        })
    }

    /// Converts `document` once and checks the result. Returns the size of
    /// the converter's output.
    ///
    /// Fails, with a message naming the document, when the document cannot
    /// be read, the converter cannot be started, a pipe fails, the converter
    /// does not exit with status 0, or its output is not the expected text.
    /// The converter is always reaped.
    pub(crate) fn convert(&mut self, document: &Document) -> Result<u64, String> {
        let name = document.name();
        let input = fs::read(&document.path)
            .map_err(|e| format!("cannot read {}: {e}", document.path.display()))?;
        let method = self.method;
        let failed = |what: &str, e: io::Error| format!("{name}: {what}: {e}");
        let status = match &mut self.start {
            Start::Raw(plan) => {
                let (stdin_r, stdin_w) = io::pipe().map_err(|e| failed("pipe", e))?;
                let (stdout_r, stdout_w) = io::pipe().map_err(|e| failed("pipe", e))?;
                let stdin_r = above_stdio(stdin_r.into()).map_err(|e| failed("dup", e))?;
                let stdout_w = above_stdio(stdout_w.into()).map_err(|e| failed("dup", e))?;
                let stdio = ChildStdio {
                    stdin: Some(stdin_r.as_fd()),
                    stdout: stdout_w.as_fd(),
                };
                let spawned = match method {
                    Method::Fork => raw::fork_execve(plan, stdio),
                    Method::Vfork | Method::VforkPidfd => raw::vfork_execve(plan, stdio),
                    _ => raw::posix_spawn(plan, stdio),
                };
                // The child's ends close in the parent at once, or the parent
                // would never see EOF on stdout.
                drop(stdin_r);
                drop(stdout_w);
                let pid = spawned.map_err(|e| failed(&format!("{method}"), e))?;
                // The pipes are closed when pump returns, so a converter that
                // is still reading or writing sees EOF or EPIPE and exits:
                // the wait below cannot hang on a pump error.
                let pumped = pump(
                    Some(File::from(OwnedFd::from(stdin_w))),
                    &input,
                    File::from(OwnedFd::from(stdout_r)),
                    &mut self.output,
                    &mut self.buffer,
                );
                let status = raw::wait_pid_with(pid, method == Method::VforkPidfd)
                    .map_err(|e| failed("waitpid", e))?;
                pumped.map_err(|e| failed("converter pipes", e))?;
                status
            }
            Start::Std(command) => {
                let mut child = command.spawn().map_err(|e| failed("std spawn", e))?;
                let stdin = child.stdin.take().map(|s| File::from(OwnedFd::from(s)));
                let Some(stdout) = child.stdout.take() else {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("{name}: std gave no stdout pipe"));
                };
                let pumped = pump(
                    stdin,
                    &input,
                    File::from(OwnedFd::from(stdout)),
                    &mut self.output,
                    &mut self.buffer,
                );
                if pumped.is_err() {
                    let _ = child.kill();
                }
                let status = child.wait().map_err(|e| failed("wait", e))?;
                pumped.map_err(|e| failed("converter pipes", e))?;
                status
            }
            Start::Progeny(command) => {
                let child = command.spawn().map_err(|e| failed("progeny spawn", e))?;
                communicate(child, &input, &mut self.output)
                    .map_err(|e| failed("communicate", e))?
            }
            Start::Zygote(command, zygote) => {
                let child = zygote
                    .spawn(command)
                    .map_err(|e| failed("progeny zygote spawn", e))?;
                communicate(child, &input, &mut self.output)
                    .map_err(|e| failed("communicate", e))?
            }
        };
        check_status(&name, status)?;
        document.check(&self.output)?;
        Ok(self.output.len() as u64)
    }
}

/// progeny's own way: `communicate` writes the input while draining stdout,
/// then waits. On an error the child is killed and reaped, so nothing is
/// left behind.
fn communicate(
    mut child: progeny::Child,
    input: &[u8],
    output: &mut Vec<u8>,
) -> io::Result<ExitStatus> {
    match child.communicate(input) {
        Ok(result) => {
            *output = result.stdout;
            Ok(result.status)
        }
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(error)
        }
    }
}

fn check_status(name: &str, status: ExitStatus) -> Result<(), String> {
    if status.success() {
        return Ok(());
    }
    let what = if status.code() == Some(127) {
        " (127: the child could not exec the converter)"
    } else {
        ""
    };
    Err(format!(
        "{name}: the converter did not succeed: {status}{what}"
    ))
}

/// Moves a descriptor the child must receive above 2, so that placing the
/// child's stdin on 0 can never overwrite the descriptor meant for 1 (which
/// can happen when this process runs with 0, 1 or 2 closed and a pipe lands
/// there). The copy is close-on-exec, like the original.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // std duplicates with F_DUPFD_CLOEXEC starting at 3.
    let moved = fd.try_clone()?;
    if moved.as_raw_fd() > 2 {
        Ok(moved)
    } else {
        Err(io::Error::other("could not move a pipe above descriptor 2"))
    }
}

/// Writes `input` to the child's stdin while reading all of its stdout into
/// `output`, with one `poll` loop, then closes both pipes (by dropping them).
/// Input the child does not take before closing its stdin is dropped, as
/// `communicate` does. A child that writes its whole output before reading
/// cannot deadlock against this loop.
///
/// Fails when a pipe or `poll` fails.
fn pump(
    stdin: Option<File>,
    input: &[u8],
    stdout: File,
    output: &mut Vec<u8>,
    buffer: &mut [u8],
) -> io::Result<()> {
    output.clear();
    let mut stdin = match stdin {
        Some(pipe) if !input.is_empty() => {
            raw::set_nonblocking(pipe.as_fd())?;
            Some(pipe)
        }
        // Nothing to write: dropping stdin gives the child EOF at once.
        _ => None,
    };
    let mut stdout = Some(stdout);
    let mut written = 0;
    while stdin.is_some() || stdout.is_some() {
        let mut fds = [
            libc::pollfd {
                fd: stdin.as_ref().map_or(-1, |p| p.as_raw_fd()),
                events: libc::POLLOUT,
                revents: 0,
            },
            libc::pollfd {
                fd: stdout.as_ref().map_or(-1, |p| p.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        match raw::poll(&mut fds) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if fds[0].revents != 0 {
            if let Some(pipe) = stdin.as_mut() {
                match pipe.write(&input[written..]) {
                    Ok(n) => written += n,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                        ) => {}
                    // The child closed its stdin or exited: nobody reads the rest.
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => written = input.len(),
                    Err(e) => return Err(e),
                }
                if written == input.len() {
                    stdin = None;
                }
            }
        }
        if fds[1].revents != 0 {
            if let Some(pipe) = stdout.as_mut() {
                match pipe.read(buffer) {
                    Ok(0) => stdout = None,
                    Ok(n) => output.extend_from_slice(&buffer[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(())
}
