//! What a spawn request carries: the one place that walks the fields of [`Prepared`].
//!
//! [`encode`] destructures `Prepared` without `..` and [`decode`] builds one field by field, so a
//! new plan field does not compile until it is either carried here or refused with
//! `Unsupported`: the zygote can never drop an option silently.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use progeny_child::{FdMap, Rlimit};

use super::wire::{malformed, Reader, Writer, MAX_FDS};
use crate::error::unsupported;
use crate::plan::{gaps, plan_placements, CStrBlock, ParentPipes, Prepared};

const MAGIC: u32 = 0x7a79_676f;
const VERSION: u32 = 1;

/// What a request carries beside the plan.
pub(crate) struct Extras<'a> {
    /// Matches the answer to the request.
    pub(crate) id: u64,
    /// Signals the caller ignores (bit `n - 1` for signal `n`): the child ignores them too, as it
    /// would after a direct spawn.
    pub(crate) ignored: u64,
    /// The caller's working directory, which the child enters before the plan's own `chdir`.
    pub(crate) cwd_fd: Option<RawFd>,
    /// Where the child reports its pid and its failure.
    pub(crate) report_fd: RawFd,
    /// Standard streams the child inherits from the caller (not from the zygote).
    pub(crate) inherit: &'a [RawFd],
    /// Hooks to run: index in the zygote's table and the data passed to it.
    pub(crate) hooks: &'a [(u32, &'a [u8])],
}

/// A request as the zygote sees it.
pub(crate) struct Decoded {
    pub(crate) id: u64,
    /// The plan, rebuilt over the descriptor numbers the zygote received; its `child_ends` own
    /// those descriptors.
    pub(crate) prepared: Prepared,
    pub(crate) cwd_fd: Option<RawFd>,
    pub(crate) report: OwnedFd,
    pub(crate) ignored: u64,
    pub(crate) hooks: Vec<(u32, Vec<u8>)>,
}

fn refuse(what: &str) -> io::Error {
    unsupported(format!(
        "the zygote cannot carry {what}; spawn this command directly"
    ))
}

fn strings(w: &mut Writer, block: &CStrBlock) {
    let mut all = Vec::new();
    while let Some(s) = block.get(all.len()) {
        all.push(s);
    }
    w.u32(all.len() as u32);
    for s in all {
        w.bytes(std::os::unix::ffi::OsStrExt::as_bytes(s));
    }
}

/// Serializes `p` and `x`; returns the body and the descriptors to send with it.
///
/// # Errors
/// `Unsupported` for a plan field the zygote cannot carry, or for more descriptors than one
/// message can hold.
pub(crate) fn encode(p: &Prepared, x: &Extras<'_>) -> io::Result<(Vec<u8>, Vec<RawFd>)> {
    let Prepared {
        candidates,
        argv,
        envp,
        cwd,
        fds,
        // Recomputed by the zygote over the descriptor numbers it receives.
        relocate_floor: _,
        close_ranges: _,
        groups,
        uid,
        gid,
        pgroup,
        setsid,
        sigmask,
        // Only the posix_spawn backend and the caller's error messages use these.
        path_changed: _,
        path_lookup: _,
        program: _,
        // The caller's ends stay with the caller; the child ends travel as `fds` sources.
        pipes: _,
        child_ends: _,
        close_other_fds,
        reserved,
        clone_flags,
        uid_map,
        gid_map,
        deny_setgroups,
        cgroup_dir,
        cgroup_fallback: _,
        cgroup_procs,
        hostname,
        rlimits,
        nice,
        ioprio,
        cpu_affinity,
        bounding_drop,
        clear_ambient,
        no_new_privs,
        controlling_tty,
        foreground_tty,
        parent_death,
        share_io_context,
        // Applied by the caller to the `Child` it builds.
        kill_on_drop: _,
        sync_fd,
    } = p;
    if !close_other_fds {
        return Err(refuse(
            "close_other_fds(false): the zygote cannot pass on the caller's other open \
             descriptors (map the ones the child needs with Command::fd)",
        ));
    }
    if *clone_flags != 0 || *share_io_context {
        return Err(refuse("new namespaces or a shared I/O context"));
    }
    if uid_map.is_some() || gid_map.is_some() || *deny_setgroups {
        return Err(refuse("uid_map or gid_map"));
    }
    if cgroup_dir.is_some() || cgroup_procs.is_some() {
        return Err(refuse("a cgroup"));
    }
    if hostname.is_some() {
        return Err(refuse("a host name"));
    }
    if !reserved.is_empty() || *sync_fd >= 0 {
        return Err(refuse("a plan prepared for another backend"));
    }

    let mut table: Vec<RawFd> = Vec::new();
    let mut index = |fd: RawFd| -> u32 {
        match table.iter().position(|&t| t == fd) {
            Some(i) => i as u32,
            None => {
                table.push(fd);
                (table.len() - 1) as u32
            }
        }
    };
    let mut w = Writer::default();
    w.u32(MAGIC);
    w.u32(VERSION);
    w.u64(x.id);
    strings(&mut w, candidates);
    strings(&mut w, argv);
    strings(&mut w, envp);
    // Without its NUL; the zygote adds it back.
    w.opt(cwd.as_deref(), |w, c| {
        w.bytes(&c[..c.len().saturating_sub(1)])
    });
    w.opt(x.cwd_fd, |w, fd| w.u32(index(fd)));
    w.u32(index(x.report_fd));
    w.u32((fds.len() + x.inherit.len()) as u32);
    for m in fds {
        w.u32(index(m.src));
        w.i32(m.dst);
    }
    for &n in x.inherit {
        w.u32(index(n));
        w.i32(n);
    }
    w.opt(groups.as_deref(), |w, g| {
        w.u32(g.len() as u32);
        g.iter().for_each(|&id| w.u32(id));
    });
    w.opt(*uid, Writer::u32);
    w.opt(*gid, Writer::u32);
    w.opt(*pgroup, Writer::i32);
    w.bool(*setsid);
    w.u64(*sigmask);
    w.u64(x.ignored);
    w.u32(rlimits.len() as u32);
    for r in rlimits {
        w.u32(r.resource);
        w.u64(r.soft);
        w.u64(r.hard);
    }
    w.opt(*nice, Writer::i32);
    w.opt(*ioprio, |w, p| w.u32(u32::from(p)));
    w.opt(cpu_affinity.as_deref(), |w, mask| {
        w.u32(mask.len() as u32);
        mask.iter().for_each(|&m| w.u64(m));
    });
    w.u32(bounding_drop.len() as u32);
    bounding_drop.iter().for_each(|&c| w.u32(c));
    w.bool(*clear_ambient);
    w.bool(*no_new_privs);
    w.i32(*controlling_tty);
    w.i32(*foreground_tty);
    w.opt(*parent_death, |w, (sig, pid)| {
        w.i32(sig);
        w.i32(pid);
    });
    w.u32(x.hooks.len() as u32);
    for (hook, data) in x.hooks {
        w.u32(*hook);
        w.bytes(data);
    }
    if table.len() > MAX_FDS {
        return Err(unsupported(format!(
            "the zygote can pass at most {MAX_FDS} descriptors to one child"
        )));
    }
    let mut body = w.0;
    // The descriptor count goes last, once known; the zygote checks it against what arrived.
    body.extend_from_slice(&(table.len() as u32).to_ne_bytes());
    Ok((body, table))
}

fn read_strings(r: &mut Reader<'_>) -> io::Result<CStrBlock> {
    let n = r.count()?;
    let items: Vec<&[u8]> = (0..n).map(|_| r.bytes()).collect::<io::Result<_>>()?;
    let mut block = CStrBlock::with_capacity(n, items.iter().map(|s| s.len() + 1).sum());
    for s in items {
        block.push(&[s]);
    }
    block.seal();
    Ok(block)
}

/// Rebuilds the plan from a request and the descriptors that came with it. The placements are
/// recomputed over the received numbers (which differ from the caller's), close-the-rest keeps
/// only the destinations, and the standard streams the request does not map are closed, so the
/// child holds exactly what it would after a direct spawn.
pub(crate) fn decode(body: &[u8], received: Vec<OwnedFd>) -> io::Result<Decoded> {
    let (body, count) = body.split_at(body.len().checked_sub(4).ok_or_else(malformed)?);
    if u32::from_ne_bytes([count[0], count[1], count[2], count[3]]) as usize != received.len() {
        return Err(malformed());
    }
    let mut table: Vec<Option<OwnedFd>> = received.into_iter().map(Some).collect();
    let raw = |table: &[Option<OwnedFd>], i: u32| -> io::Result<RawFd> {
        match table.get(i as usize) {
            Some(Some(fd)) => Ok(fd.as_raw_fd()),
            _ => Err(malformed()),
        }
    };
    let mut r = Reader::new(body);
    if r.u32()? != MAGIC || r.u32()? != VERSION {
        return Err(malformed());
    }
    let id = r.u64()?;
    let candidates = read_strings(&mut r)?;
    let argv = read_strings(&mut r)?;
    let envp = read_strings(&mut r)?;
    let cwd = r.opt(|r| {
        let mut c = r.bytes()?.to_vec();
        c.push(0);
        Ok(c)
    })?;
    let cwd_fd = match r.opt(Reader::u32)? {
        Some(i) => Some(raw(&table, i)?),
        None => None,
    };
    let report_index = r.u32()? as usize;
    let report = table
        .get_mut(report_index)
        .and_then(Option::take)
        .ok_or_else(malformed)?;
    let nmaps = r.count()?;
    let mut fds = Vec::with_capacity(nmaps);
    for _ in 0..nmaps {
        let src = raw(&table, r.u32()?)?;
        let dst = r.i32()?;
        if dst < 0 {
            return Err(malformed());
        }
        fds.push(FdMap {
            src,
            dst,
            relocate: false,
            moved: -1,
        });
    }
    let groups = r.opt(|r| (0..r.count()?).map(|_| r.u32()).collect())?;
    let uid = r.opt(Reader::u32)?;
    let gid = r.opt(Reader::u32)?;
    let pgroup = r.opt(Reader::i32)?;
    let setsid = r.bool()?;
    let sigmask = r.u64()?;
    let ignored = r.u64()?;
    let rlimits = (0..r.count()?)
        .map(|_| {
            Ok(Rlimit {
                resource: r.u32()?,
                soft: r.u64()?,
                hard: r.u64()?,
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    let nice = r.opt(Reader::i32)?;
    let ioprio = r.opt(|r| u16::try_from(r.u32()?).map_err(|_| malformed()))?;
    let cpu_affinity = r.opt(|r| (0..r.count()?).map(|_| r.u64()).collect())?;
    let bounding_drop = (0..r.count()?)
        .map(|_| r.u32())
        .collect::<io::Result<_>>()?;
    let clear_ambient = r.bool()?;
    let no_new_privs = r.bool()?;
    let controlling_tty = r.i32()?;
    let foreground_tty = r.i32()?;
    let parent_death = r.opt(|r| Ok((r.i32()?, r.i32()?)))?;
    let hooks = (0..r.count()?)
        .map(|_| Ok((r.u32()?, r.bytes()?.to_vec())))
        .collect::<io::Result<Vec<_>>>()?;
    r.finish()?;

    plan_placements(&mut fds);
    let relocate_floor = fds
        .iter()
        .map(|m| m.dst)
        .max()
        .map_or(3, |m| m.saturating_add(1).max(3));
    let close_ranges = gaps(fds.iter().map(|m| m.dst));
    let prepared = Prepared {
        candidates,
        argv,
        envp,
        cwd,
        fds,
        relocate_floor,
        close_ranges,
        groups,
        uid,
        gid,
        pgroup,
        setsid,
        sigmask,
        path_changed: false,
        path_lookup: false,
        program: Default::default(),
        pipes: ParentPipes::default(),
        child_ends: table.into_iter().flatten().collect(),
        close_other_fds: true,
        reserved: Vec::new(),
        clone_flags: 0,
        uid_map: None,
        gid_map: None,
        deny_setgroups: false,
        cgroup_dir: None,
        cgroup_fallback: false,
        cgroup_procs: None,
        hostname: None,
        rlimits,
        nice,
        ioprio,
        cpu_affinity,
        bounding_drop,
        clear_ambient,
        no_new_privs,
        controlling_tty,
        foreground_tty,
        parent_death,
        share_io_context: false,
        kill_on_drop: false,
        sync_fd: -1,
    };
    Ok(Decoded {
        id,
        prepared,
        cwd_fd,
        report,
        ignored,
        hooks,
    })
}
