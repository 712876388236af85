//! The parent side: turns a [`Command`] into the frozen data the child executes.
//!
//! Here we may allocate, format and fail loudly. Everything the child will need is built now:
//! C strings in two contiguous blocks (argv and envp), the list of `execve` candidates from the
//! `PATH` search, the descriptor placements with their overlap analysis, and the gaps to close.
#![allow(unsafe_code)]

use std::ffi::{c_char, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use progeny_child::{FdMap, Plan, Rlimit, SignalReset};
use progeny_sys as sys;

use crate::command::{check_nul, Command, StdioDefault};
use crate::error::invalid_input;
use crate::stdio::StdioKind;

/// `execvp`'s search path when `PATH` is not set at all.
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// NUL-terminated strings packed in one buffer, with a NULL-terminated pointer array over them;
/// or, for an unchanged environment, the process's own `environ` array used as it is.
pub(crate) struct CStrBlock {
    bytes: Vec<u8>,
    starts: Vec<usize>,
    pointers: Vec<*const c_char>,
    /// A NULL-terminated array that libc owns (`environ`), or null.
    borrowed: *const *const c_char,
}

impl CStrBlock {
    pub(crate) fn with_capacity(strings: usize, bytes: usize) -> CStrBlock {
        CStrBlock {
            bytes: Vec::with_capacity(bytes),
            starts: Vec::with_capacity(strings),
            pointers: Vec::new(),
            borrowed: std::ptr::null(),
        }
    }

    /// The process environment itself, without a copy (as std and `posix_spawn` pass it).
    fn process_environment(environ: *const *const c_char) -> CStrBlock {
        CStrBlock {
            borrowed: environ,
            ..CStrBlock::with_capacity(0, 0)
        }
    }

    /// Appends the concatenation of `parts` as one string. The caller has checked for NULs.
    pub(crate) fn push(&mut self, parts: &[&[u8]]) {
        self.starts.push(self.bytes.len());
        for part in parts {
            self.bytes.extend_from_slice(part);
        }
        self.bytes.push(0);
    }

    /// Builds the pointer array; the block must not grow afterwards.
    pub(crate) fn seal(&mut self) {
        let base = self.bytes.as_ptr();
        // Sized once, NULL included: no reallocation on the way.
        let mut pointers = Vec::with_capacity(self.starts.len() + 1);
        pointers.extend(
            self.starts
                .iter()
                // `start` is within `bytes`, so the pointer stays inside the allocation.
                .map(|&start| base.wrapping_add(start) as *const c_char),
        );
        pointers.push(std::ptr::null());
        self.pointers = pointers;
    }

    /// The string at `i`, without its NUL (for error messages and the zygote's requests).
    pub(crate) fn get(&self, i: usize) -> Option<&OsStr> {
        if !self.borrowed.is_null() {
            return environ_entries(self.borrowed).nth(i).map(OsStr::from_bytes);
        }
        let start = *self.starts.get(i)?;
        let end = self.starts.get(i + 1).map_or(self.bytes.len(), |&s| s) - 1;
        self.bytes.get(start..end).map(OsStr::from_bytes)
    }

    /// The NULL-terminated pointer array.
    pub(crate) fn as_ptr(&self) -> *const *const c_char {
        if self.borrowed.is_null() {
            self.pointers.as_ptr()
        } else {
            self.borrowed
        }
    }

    /// The pointers without the terminating NULL.
    fn entries(&self) -> &[*const c_char] {
        &self.pointers[..self.pointers.len() - 1]
    }
}

/// The parent's ends of the pipes made for `Stdio::piped()`.
#[derive(Default)]
pub(crate) struct ParentPipes {
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: Option<OwnedFd>,
    pub(crate) stderr: Option<OwnedFd>,
}

/// Everything a spawn needs, owned by the parent for the duration of the spawn.
pub(crate) struct Prepared {
    pub(crate) candidates: CStrBlock,
    pub(crate) argv: CStrBlock,
    pub(crate) envp: CStrBlock,
    pub(crate) cwd: Option<Vec<u8>>,
    pub(crate) fds: Vec<FdMap>,
    pub(crate) relocate_floor: i32,
    pub(crate) close_ranges: Vec<(u32, u32)>,
    pub(crate) groups: Option<Vec<u32>>,
    pub(crate) uid: Option<u32>,
    pub(crate) gid: Option<u32>,
    pub(crate) pgroup: Option<i32>,
    pub(crate) setsid: bool,
    pub(crate) sigmask: u64,
    /// `PATH` differs from the parent's (posix_spawnp could not search it).
    pub(crate) path_changed: bool,
    /// The program has no slash and goes through the `PATH` search.
    pub(crate) path_lookup: bool,
    pub(crate) program: OsString,
    pub(crate) pipes: ParentPipes,
    /// Child ends of pipes and `/dev/null`: held open until the child has them, then closed.
    pub(crate) child_ends: Vec<OwnedFd>,
    /// Whether close-the-rest is on (the ranges are recomputed when a descriptor is reserved).
    pub(crate) close_other_fds: bool,
    /// Descriptors of progeny's own that the child needs until exec, kept above every destination.
    pub(crate) reserved: Vec<RawFd>,
    /// Namespace flags and `CLONE_IO`, for the clone.
    pub(crate) clone_flags: u64,
    /// `uid_map` and `gid_map` text the parent writes, and whether to deny `setgroups` first.
    pub(crate) uid_map: Option<String>,
    pub(crate) gid_map: Option<String>,
    pub(crate) deny_setgroups: bool,
    /// The cgroup directory to start the child in (borrowed from the command for the spawn).
    pub(crate) cgroup_dir: Option<RawFd>,
    pub(crate) cgroup_fallback: bool,
    /// `cgroup.procs` of that directory, opened when the child must move itself.
    pub(crate) cgroup_procs: Option<OwnedFd>,
    pub(crate) hostname: Option<Vec<u8>>,
    pub(crate) rlimits: Vec<Rlimit>,
    pub(crate) nice: Option<i32>,
    pub(crate) ioprio: Option<u16>,
    pub(crate) cpu_affinity: Option<Vec<u64>>,
    pub(crate) bounding_drop: Vec<u32>,
    pub(crate) clear_ambient: bool,
    pub(crate) no_new_privs: bool,
    pub(crate) controlling_tty: i32,
    pub(crate) foreground_tty: i32,
    pub(crate) parent_death: Option<(i32, i32)>,
    pub(crate) share_io_context: bool,
    pub(crate) kill_on_drop: bool,
    /// The read end of the parent's go-ahead pipe, in the child (-1: the child does not wait).
    pub(crate) sync_fd: i32,
}

impl Prepared {
    /// The plan the child executes, borrowing from `self`.
    pub(crate) fn plan(&mut self, signal_reset: SignalReset) -> Plan<'_> {
        Plan {
            candidates: self.candidates.entries(),
            argv: self.argv.as_ptr(),
            envp: self.envp.as_ptr(),
            cwd: self
                .cwd
                .as_ref()
                .map_or(std::ptr::null(), |c| c.as_ptr() as *const c_char),
            fds: &mut self.fds,
            relocate_floor: self.relocate_floor,
            close_ranges: &self.close_ranges,
            groups: self.groups.as_deref(),
            drop_groups_for_uid: self.uid.is_some() && self.groups.is_none(),
            gid: self.gid,
            uid: self.uid,
            setsid: self.setsid,
            pgroup: self.pgroup,
            signal_reset,
            sigmask: self.sigmask,
            sync_fd: self.sync_fd,
            parent_death: self.parent_death,
            cgroup_procs_fd: self.cgroup_procs.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
            hostname: self.hostname.as_deref(),
            controlling_tty: self.controlling_tty,
            foreground_tty: self.foreground_tty,
            rlimits: &self.rlimits,
            nice: self.nice,
            ioprio: self.ioprio,
            cpu_affinity: self.cpu_affinity.as_deref(),
            bounding_drop: &self.bounding_drop,
            clear_ambient: self.clear_ambient,
            no_new_privs: self.no_new_privs,
        }
    }

    /// The first container option set, by name, for a backend that cannot express any.
    pub(crate) fn container_option(&self) -> Option<&'static str> {
        [
            (self.clone_flags != 0, "namespaces or share_io_context"),
            (self.cgroup_dir.is_some(), "cgroup"),
            (!self.rlimits.is_empty(), "rlimit"),
            (self.nice.is_some(), "nice"),
            (self.ioprio.is_some(), "ioprio"),
            (self.cpu_affinity.is_some(), "cpu_affinity"),
            (!self.bounding_drop.is_empty(), "drop_bounding_capabilities"),
            (self.clear_ambient, "clear_ambient_capabilities"),
            (self.no_new_privs, "no_new_privs"),
            (self.controlling_tty >= 0, "controlling_tty"),
            (self.foreground_tty >= 0, "foreground"),
            (self.parent_death.is_some(), "parent_death_signal"),
        ]
        .into_iter()
        .find(|(set, _)| *set)
        .map(|(_, name)| name)
    }

    /// Keeps `fd` (one of progeny's own, close-on-exec) open in the child until exec: moves it
    /// above every destination, so no placement overwrites it and relocations skip it, and keeps
    /// it out of the ranges that close-the-rest closes.
    pub(crate) fn reserve(&mut self, fd: OwnedFd) -> io::Result<OwnedFd> {
        let high = sys::fcntl_int(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, self.relocate_floor)
            .map_err(|e| io::Error::from_raw_os_error(e.raw()))?;
        // SAFETY: F_DUPFD_CLOEXEC returned a fresh descriptor that nothing else owns.
        let high = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(high) };
        self.reserved.push(high.as_raw_fd());
        if self.close_other_fds {
            let kept = self
                .fds
                .iter()
                .map(|m| m.dst)
                .chain(self.reserved.iter().copied());
            self.close_ranges = gaps(kept);
        }
        Ok(high)
    }
}

/// Builds the plan data for `cmd`. `stdin_default` applies to stdin, `out_default` to stdout and
/// stderr, when the command does not set them.
pub(crate) fn prepare(
    cmd: &Command,
    stdin_default: StdioDefault,
    out_default: StdioDefault,
) -> io::Result<Prepared> {
    // Validate everything first: no descriptor is created for a command that cannot run.
    check_nul("program", &cmd.program)?;
    if let Some(arg0) = &cmd.arg0 {
        check_nul("arg0", arg0)?;
    }
    for arg in &cmd.args {
        check_nul("argument", arg)?;
    }
    for (k, v) in &cmd.env {
        check_nul("environment variable name", k)?;
        if let Some(v) = v {
            check_nul("environment variable value", v)?;
        }
    }
    if let Some(dir) = &cmd.cwd {
        check_nul("working directory", dir.as_os_str())?;
    }
    if let Some((bad, _)) = cmd.fds.iter().find(|(dst, _)| *dst < 0) {
        return Err(invalid_input(format!(
            "child descriptor number {bad} is negative"
        )));
    }
    let mut sigmask = 0u64;
    for &sig in &cmd.sigmask {
        if !(1..=64).contains(&sig) {
            return Err(invalid_input(format!("signal_mask: {sig} is not a signal")));
        }
        sigmask |= 1u64 << (sig - 1);
    }

    let container = container_fields(cmd)?;

    let path_lookup = !cmd.program.as_bytes().contains(&b'/') && !cmd.program.is_empty();
    let (envp, child_path, path_changed) = environment(cmd, path_lookup);
    let candidates = candidates(&cmd.program, path_lookup, child_path.as_deref());

    let mut argv = CStrBlock::with_capacity(
        cmd.args.len() + 1,
        cmd.args.iter().map(|a| a.len() + 1).sum::<usize>() + cmd.program.len() + 1,
    );
    argv.push(&[cmd.arg0.as_ref().unwrap_or(&cmd.program).as_bytes()]);
    for arg in &cmd.args {
        argv.push(&[arg.as_bytes()]);
    }
    argv.seal();

    let cwd = cmd.cwd.as_ref().map(|d| {
        let mut bytes = d.as_os_str().as_bytes().to_vec();
        bytes.push(0);
        bytes
    });

    let mut prepared = Prepared {
        candidates,
        argv,
        envp,
        cwd,
        fds: Vec::new(),
        relocate_floor: 3,
        close_ranges: Vec::new(),
        groups: cmd.groups.clone(),
        uid: cmd.uid,
        gid: cmd.gid,
        pgroup: cmd.pgroup,
        setsid: cmd.setsid,
        sigmask,
        path_changed,
        path_lookup,
        program: cmd.program.clone(),
        pipes: ParentPipes::default(),
        child_ends: Vec::new(),
        close_other_fds: cmd.close_other_fds,
        reserved: Vec::new(),
        ..container
    };
    descriptors(cmd, stdin_default, out_default, &mut prepared)?;
    Ok(prepared)
}

/// Validates the container options and turns them into plan fields (the rest of the returned
/// value is filled by `prepare`).
fn container_fields(cmd: &Command) -> io::Result<Prepared> {
    use crate::container::Namespaces;
    let c = &cmd.container;
    let user_ns = c.namespaces.contains(Namespaces::USER);
    if (!c.uid_map.is_empty() || !c.gid_map.is_empty()) && !user_ns {
        return Err(invalid_input(
            "uid_map/gid_map need unshare(Namespaces::USER)",
        ));
    }
    let hostname = match &c.hostname {
        None => None,
        Some(_) if !c.namespaces.contains(Namespaces::UTS) => {
            return Err(invalid_input(
                "hostname needs unshare(Namespaces::UTS): it would rename the host",
            ))
        }
        Some(name) => {
            check_nul("hostname", name)?;
            Some(name.as_bytes().to_vec())
        }
    };
    if c.controlling_tty.is_some() && !cmd.setsid {
        return Err(invalid_input(
            "controlling_tty needs setsid(true): only a session leader can take a terminal",
        ));
    }
    if let Some(fd) = c.controlling_tty.filter(|fd| *fd < 0) {
        return Err(invalid_input(format!(
            "controlling_tty: {fd} is not a descriptor"
        )));
    }
    let ioprio = match c.ioprio {
        None => None,
        Some(p) => Some(
            p.to_raw()
                .ok_or_else(|| invalid_input(format!("ioprio: {p:?} is out of range 0..=7")))?,
        ),
    };
    let cpu_affinity = match &c.cpu_affinity {
        None => None,
        Some(cpus) if cpus.is_empty() => {
            return Err(invalid_input("cpu_affinity: the CPU list is empty"))
        }
        Some(cpus) => {
            let max = cpus.iter().copied().max().unwrap_or(0);
            if max >= 1 << 20 {
                return Err(invalid_input(format!(
                    "cpu_affinity: CPU {max} is out of range"
                )));
            }
            let mut mask = vec![0u64; max / 64 + 1];
            for &cpu in cpus {
                mask[cpu / 64] |= 1 << (cpu % 64);
            }
            Some(mask)
        }
    };
    let parent_death = match c.parent_death_signal {
        None => None,
        Some(sig) if !(1..=64).contains(&sig) => {
            return Err(invalid_input(format!(
                "parent_death_signal: {sig} is not a signal"
            )))
        }
        Some(sig) => Some((sig, sys::getpid())),
    };
    let map_text = |map: &[crate::container::IdMap]| {
        (!map.is_empty()).then(|| {
            map.iter()
                .map(|m| format!("{} {} {}\n", m.inside, m.outside, m.count))
                .collect::<String>()
        })
    };
    let mut clone_flags = c.namespaces.0;
    if c.share_io_context {
        clone_flags |= sys::CLONE_IO;
    }
    Ok(Prepared {
        candidates: CStrBlock::with_capacity(0, 0),
        argv: CStrBlock::with_capacity(0, 0),
        envp: CStrBlock::with_capacity(0, 0),
        cwd: None,
        fds: Vec::new(),
        relocate_floor: 3,
        close_ranges: Vec::new(),
        groups: None,
        uid: None,
        gid: None,
        pgroup: None,
        setsid: false,
        sigmask: 0,
        path_changed: false,
        path_lookup: false,
        program: OsString::new(),
        pipes: ParentPipes::default(),
        child_ends: Vec::new(),
        close_other_fds: true,
        reserved: Vec::new(),
        clone_flags,
        uid_map: map_text(&c.uid_map),
        gid_map: map_text(&c.gid_map),
        deny_setgroups: !c.gid_map.is_empty() && cmd.groups.is_none(),
        cgroup_dir: c.cgroup.as_ref().map(|fd| fd.as_raw_fd()),
        cgroup_fallback: c.cgroup_fallback,
        cgroup_procs: None,
        hostname,
        rlimits: c
            .rlimits
            .iter()
            .map(|&(resource, soft, hard)| Rlimit {
                resource,
                soft,
                hard,
            })
            .collect(),
        nice: c.nice,
        ioprio,
        cpu_affinity,
        bounding_drop: c.bounding_drop.clone(),
        clear_ambient: c.clear_ambient,
        no_new_privs: c.no_new_privs,
        controlling_tty: c.controlling_tty.unwrap_or(-1),
        foreground_tty: if c.foreground {
            c.controlling_tty.unwrap_or(0)
        } else {
            -1
        },
        parent_death,
        share_io_context: c.share_io_context,
        kill_on_drop: c.kill_on_drop,
        sync_fd: -1,
    })
}

/// The process environment as libc keeps it: libc's `environ` (possibly null).
fn process_environ() -> *const *const c_char {
    extern "C" {
        static mut environ: *const *const c_char;
    }
    // SAFETY: reads the pointer's value once; see "Caveats" on `Command` for why the array it
    // points to may be read without std's environment lock.
    unsafe { std::ptr::addr_of!(environ).read() }
}

/// The `KEY=VALUE` entries of a NULL-terminated environment array.
fn environ_entries<'a>(environ: *const *const c_char) -> impl Iterator<Item = &'a [u8]> {
    let mut i = 0;
    std::iter::from_fn(move || {
        if environ.is_null() {
            return None;
        }
        // SAFETY: `environ` is a NULL-terminated array of NUL-terminated strings (libc's
        // invariant), and `i` never passes its NULL.
        let entry = unsafe { *environ.add(i) };
        if entry.is_null() {
            return None;
        }
        i += 1;
        // SAFETY: as above: a NUL-terminated string that lives as long as the environment.
        Some(unsafe { std::ffi::CStr::from_ptr(entry) }.to_bytes())
    })
}

/// The variable name of an environment entry (all of it where there is no `=`).
fn entry_key(entry: &[u8]) -> &[u8] {
    entry.split(|&b| b == b'=').next().unwrap_or(entry)
}

/// The value of `PATH` in an environment array.
fn environ_path(environ: *const *const c_char) -> Option<OsString> {
    environ_entries(environ)
        .find_map(|e| e.strip_prefix(b"PATH="))
        .map(|v| OsStr::from_bytes(v).to_owned())
}

/// The child's environment block, the `PATH` that the search must use (when `path_lookup`), and
/// whether that `PATH` was changed by the command.
///
/// An unchanged environment is passed as the process's own `environ`, as std and `posix_spawn`
/// do: no copy, which spares a spawn a few dozen allocations (and the kernel copies it anyway).
/// A changed one is built from `environ` and the command's changes, in one buffer.
fn environment(cmd: &Command, path_lookup: bool) -> (CStrBlock, Option<OsString>, bool) {
    let path_key = OsStr::new("PATH");
    let path_changed = cmd.env_clear || cmd.env.contains_key(path_key);
    let environ = process_environ();
    if !cmd.env_clear && cmd.env.is_empty() && !environ.is_null() {
        let path = if path_lookup {
            environ_path(environ)
        } else {
            None
        };
        return (CStrBlock::process_environment(environ), path, false);
    }
    let inherited: Vec<&[u8]> = if cmd.env_clear {
        Vec::new()
    } else {
        environ_entries(environ)
            .filter(|e| !cmd.env.contains_key(OsStr::from_bytes(entry_key(e))))
            .collect()
    };
    let set = cmd.env.iter().filter_map(|(k, v)| Some((k, v.as_ref()?)));
    let mut block = CStrBlock::with_capacity(
        inherited.len() + cmd.env.len(),
        inherited.iter().map(|e| e.len() + 1).sum::<usize>()
            + set
                .clone()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>(),
    );
    for entry in &inherited {
        block.push(&[entry]);
    }
    for (k, v) in set {
        block.push(&[k.as_bytes(), b"=", v.as_bytes()]);
    }
    block.seal();
    let child_path = match (path_lookup, path_changed) {
        (false, _) => None,
        (true, true) => cmd.env.get(path_key).cloned().flatten(),
        (true, false) => environ_path(environ),
    };
    (block, child_path, path_changed)
}

/// The `execve` candidates: the program itself when it has a slash, else one per `PATH` entry
/// (an empty entry means the current directory, as in `execvp`).
fn candidates(program: &OsStr, path_lookup: bool, path: Option<&OsStr>) -> CStrBlock {
    if !path_lookup {
        let mut block = CStrBlock::with_capacity(1, program.len() + 1);
        block.push(&[program.as_bytes()]);
        block.seal();
        return block;
    }
    let path = path.map_or(DEFAULT_PATH, |p| p.as_bytes());
    let dirs: Vec<&[u8]> = path.split(|&b| b == b':').collect();
    let mut block =
        CStrBlock::with_capacity(dirs.len(), path.len() + dirs.len() * (program.len() + 2));
    for dir in dirs {
        // A NUL in PATH would cut the candidate short; such an entry cannot name a directory.
        if dir.contains(&0) {
            continue;
        }
        if dir.is_empty() {
            block.push(&[program.as_bytes()]);
        } else {
            block.push(&[dir, b"/", program.as_bytes()]);
        }
    }
    block.seal();
    block
}

/// Creates pipes and `/dev/null` as needed and computes the descriptor placements and the ranges
/// to close.
fn descriptors(
    cmd: &Command,
    stdin_default: StdioDefault,
    out_default: StdioDefault,
    prepared: &mut Prepared,
) -> io::Result<()> {
    let mut null: Option<RawFd> = None;
    let mut maps: Vec<FdMap> = Vec::with_capacity(3 + cmd.fds.len());
    for n in 0..3 {
        // A user mapping of 0, 1 or 2 overrides the stream.
        if cmd.fds.iter().any(|(dst, _)| *dst == n as i32) {
            continue;
        }
        let default = if n == 0 { stdin_default } else { out_default };
        let src = match (cmd.stdio_slot(n), default) {
            (Some(StdioKind::Inherit), _) | (None, StdioDefault::Inherit) => continue,
            (Some(StdioKind::Fd(fd)), _) => fd.as_raw_fd(),
            (Some(StdioKind::Null), _) | (None, StdioDefault::Null) => match null {
                Some(fd) => fd,
                None => {
                    let file = File::options().read(true).write(true).open("/dev/null")?;
                    let fd = OwnedFd::from(file);
                    let raw = fd.as_raw_fd();
                    prepared.child_ends.push(fd);
                    null = Some(raw);
                    raw
                }
            },
            (Some(StdioKind::Piped), _) | (None, StdioDefault::Piped) => {
                let (reader, writer) = std::io::pipe()?;
                let (parent, child) = if n == 0 {
                    (OwnedFd::from(writer), OwnedFd::from(reader))
                } else {
                    (OwnedFd::from(reader), OwnedFd::from(writer))
                };
                let raw = child.as_raw_fd();
                prepared.child_ends.push(child);
                let slot = match n {
                    0 => &mut prepared.pipes.stdin,
                    1 => &mut prepared.pipes.stdout,
                    _ => &mut prepared.pipes.stderr,
                };
                *slot = Some(parent);
                raw
            }
        };
        maps.push(FdMap {
            src,
            dst: n as i32,
            relocate: false,
            moved: -1,
        });
    }
    for (dst, fd) in &cmd.fds {
        maps.push(FdMap {
            src: fd.as_raw_fd(),
            dst: *dst,
            relocate: false,
            moved: -1,
        });
    }
    plan_placements(&mut maps);
    prepared.relocate_floor = maps
        .iter()
        .map(|m| m.dst)
        .max()
        .map_or(3, |m| m.saturating_add(1).max(3));
    if cmd.close_other_fds {
        prepared.close_ranges = gaps(maps.iter().map(|m| m.dst));
    }
    prepared.fds = maps;
    Ok(())
}

/// Marks every placement whose source an earlier placement would overwrite: those are moved out
/// of the way first. This is what makes `3→4` together with `4→3` a swap, not a copy.
pub(crate) fn plan_placements(maps: &mut [FdMap]) {
    for i in 0..maps.len() {
        let src = maps[i].src;
        maps[i].relocate = maps[..i].iter().any(|earlier| earlier.dst == src);
    }
}

/// The inclusive ranges of descriptors above 2 that are not kept, up to the largest number.
pub(crate) fn gaps(kept: impl Iterator<Item = i32>) -> Vec<(u32, u32)> {
    let mut kept: Vec<u32> = kept.filter(|&fd| fd > 2).map(|fd| fd as u32).collect();
    kept.sort_unstable();
    kept.dedup();
    let mut ranges = Vec::with_capacity(kept.len() + 1);
    let mut next = 3u32;
    for fd in kept {
        if fd > next {
            ranges.push((next, fd - 1));
        }
        next = fd + 1;
    }
    ranges.push((next, u32::MAX));
    ranges
}

impl Prepared {
    /// The candidate the child's failure at `index` refers to, for the message.
    pub(crate) fn candidate(&self, index: usize) -> OsString {
        self.candidates
            .get(index)
            .map_or_else(|| self.program.clone(), OsStr::to_owned)
    }

    /// The working directory, for the message.
    pub(crate) fn cwd_display(&self) -> OsString {
        self.cwd.as_ref().map_or_else(OsString::new, |c| {
            OsString::from_vec(c[..c.len().saturating_sub(1)].to_vec())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(src: i32, dst: i32) -> FdMap {
        FdMap {
            src,
            dst,
            relocate: false,
            moved: -1,
        }
    }

    #[test]
    fn swap_relocates_the_second_source() {
        let mut maps = vec![map(3, 4), map(4, 3)];
        plan_placements(&mut maps);
        assert!(!maps[0].relocate);
        assert!(maps[1].relocate);
    }

    #[test]
    fn disjoint_placements_need_no_move() {
        let mut maps = vec![map(10, 0), map(11, 1), map(12, 2), map(13, 5)];
        plan_placements(&mut maps);
        assert!(maps.iter().all(|m| !m.relocate));
    }

    #[test]
    fn gaps_cover_everything_but_kept() {
        assert_eq!(gaps([0, 1, 2].into_iter()), vec![(3, u32::MAX)]);
        assert_eq!(
            gaps([1, 5, 3, 9].into_iter()),
            vec![(4, 4), (6, 8), (10, u32::MAX)]
        );
    }

    #[test]
    fn path_candidates_follow_execvp() {
        let block = candidates(OsStr::new("ls"), true, Some(OsStr::new("/a::/b")));
        assert_eq!(block.get(0), Some(OsStr::new("/a/ls")));
        assert_eq!(block.get(1), Some(OsStr::new("ls")));
        assert_eq!(block.get(2), Some(OsStr::new("/b/ls")));
        assert_eq!(block.get(3), None);
        let direct = candidates(OsStr::new("./x"), false, Some(OsStr::new("/a")));
        assert_eq!(direct.get(0), Some(OsStr::new("./x")));
        assert_eq!(direct.get(1), None);
    }
}
