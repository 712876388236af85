//! What `/proc` says about a process: its state, its threads, its mappings.
//!
//! # References
//! - [proc_pid_stat(5)](https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html)
//! - [proc_pid_status(5)](https://man7.org/linux/man-pages/man5/proc_pid_status.5.html)
//! - [proc_pid_maps(5)](https://man7.org/linux/man-pages/man5/proc_pid_maps.5.html)
//! - [proc_pid_task(5)](https://man7.org/linux/man-pages/man5/proc_pid_task.5.html)

use std::fs;
use std::io;

/// `PF_KTHREAD` in the `flags` field of `/proc/PID/stat`: the task is a kernel thread.
const PF_KTHREAD: u64 = 0x0020_0000;

/// The fields of `/proc/PID/stat` a snapshot cares about.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stat {
    /// One-letter state: `R`, `S`, `D`, `T`, `t`, `Z`, `X`, ...
    pub state: char,
    /// The parent's pid.
    pub ppid: i32,
    /// The process group.
    pub pgrp: i32,
    /// The session.
    pub session: i32,
    /// The kernel's `PF_*` flags.
    pub flags: u64,
}

impl Stat {
    /// Whether the task is a kernel thread (it has no user memory to snapshot).
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }

    /// Whether the task has exited and waits to be reaped (or is being released).
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses `/proc/PID/stat` or `/proc/PID/task/TID/stat` at `path`.
pub(crate) fn read_stat(path: &str) -> io::Result<Stat> {
    let text = fs::read_to_string(path)?;
    // The command name is in parentheses and may itself contain spaces or parentheses, so the
    // fields are counted from the last ')'.
    let rest = text
        .rfind(')')
        .map(|at| &text[at + 1..])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed stat"))?;
    let mut fields = rest.split_whitespace();
    let state = fields
        .next()
        .and_then(|s| s.chars().next())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "stat without state"))?;
    // Fields after the state: ppid pgrp session tty_nr tpgid flags.
    let mut number = |name: &str| {
        fields.next().and_then(|s| s.parse().ok()).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("stat without {name}"))
        })
    };
    let ppid = number("ppid")?;
    let pgrp = number("pgrp")?;
    let session = number("session")?;
    let flags = fields
        .nth(2)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "stat without flags"))?;
    Ok(Stat {
        state,
        ppid,
        pgrp,
        session,
        flags,
    })
}

/// The thread ids listed in `/proc/PID/task`, ascending.
pub(crate) fn thread_ids(pid: i32) -> io::Result<Vec<i32>> {
    let mut tids: Vec<i32> = fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// The thread group (process) id of task `tid` (`Tgid:` in its status), if it exists.
pub(crate) fn thread_group(tid: i32) -> Option<i32> {
    let text = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|value| value.trim().parse().ok())
}

/// The seccomp mode of a thread (`Seccomp:` in its status): 0 none, 1 strict, 2 filter.
pub(crate) fn seccomp_mode(pid: i32, tid: i32) -> io::Result<u32> {
    let text = fs::read_to_string(format!("/proc/{pid}/task/{tid}/status"))?;
    Ok(text
        .lines()
        .find_map(|line| line.strip_prefix("Seccomp:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0))
}

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address of the mapping.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Readable.
    pub read: bool,
    /// Writable.
    pub write: bool,
    /// Executable.
    pub execute: bool,
    /// Shared (`s`) rather than private copy-on-write (`p`).
    pub shared: bool,
    /// Offset into the mapped file.
    pub offset: u64,
    /// Device as `major:minor` in hex.
    pub device: String,
    /// Inode of the mapped file, 0 for anonymous memory.
    pub inode: u64,
    /// File path or pseudo-name (`[heap]`, `[stack]`, `[vdso]`), empty for anonymous memory.
    pub path: String,
}

impl Mapping {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the mapping is empty (never true for a real mapping).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// Parses `/proc/PID/maps`.
pub fn read_maps(pid: i32) -> io::Result<Vec<Mapping>> {
    let text = fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(text.lines().filter_map(parse_map_line).collect())
}

fn parse_map_line(line: &str) -> Option<Mapping> {
    let mut parts = line.splitn(6, ' ');
    let range = parts.next()?;
    let perms = parts.next()?.as_bytes();
    let offset = u64::from_str_radix(parts.next()?, 16).ok()?;
    let device = parts.next()?.to_string();
    let inode = parts.next()?.parse().ok()?;
    let path = parts.next().unwrap_or("").trim_start().to_string();
    let (start, end) = range.split_once('-')?;
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        read: perms.first() == Some(&b'r'),
        write: perms.get(1) == Some(&b'w'),
        execute: perms.get(2) == Some(&b'x'),
        shared: perms.get(3) == Some(&b's'),
        offset,
        device,
        inode,
        path,
    })
}

/// Reads `buf.len()` bytes of process `pid` at `addr`; returns how many bytes were read
/// (fewer at an unmapped or unreadable page).
///
/// It reads through `/proc/PID/mem`, not `process_vm_readv`: the latter pins the pages
/// (`FOLL_PIN`), and pinning an anonymous page shared copy-on-write forces the kernel to give
/// the reading side its own copy first, so reading a snapshot child that way would copy every
/// page of it, slowly, doubling its memory. `/proc/PID/mem` takes plain references.
/// `process_vm_readv` remains the fallback if `/proc/PID/mem` cannot be opened.
///
/// # References
/// - [proc_pid_mem(5)](https://man7.org/linux/man-pages/man5/proc_pid_mem.5.html)
/// - [process_vm_readv(2)](https://man7.org/linux/man-pages/man2/process_vm_readv.2.html)
///
/// # Errors
/// Fails if nothing at all can be read at `addr`, or the process is gone or not ours to read.
pub fn read_memory(pid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    match fs::File::open(format!("/proc/{pid}/mem")) {
        Ok(mem) => read_at_most(&mem, addr, buf),
        Err(_) => process_vm_readv(pid, addr, buf),
    }
}

/// Reads as much of `buf` as `mem` (an open `/proc/PID/mem`) has at `addr`.
pub(crate) fn read_at_most(mem: &fs::File, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut done = 0;
    while done < buf.len() {
        match mem.read_at(&mut buf[done..], addr + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) if done == 0 => return Err(err),
            Err(_) => break,
        }
    }
    Ok(done)
}

fn process_vm_readv(pid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, which we exclusively borrow for the call; `remote` is
    // only interpreted by the kernel in the other process's address space.
    let got = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(got as usize)
}

#[cfg(test)]
mod tests {
    use super::read_stat;

    #[test]
    fn read_stat_of_this_process_matches_the_system_calls() {
        // This thread's own entry: it is the one running while it reads.
        let stat = read_stat("/proc/thread-self/stat").unwrap();
        // SAFETY: getppid, getpgrp and getsid(0) take no pointers and cannot fail here.
        let (ppid, pgrp, session) = unsafe { (libc::getppid(), libc::getpgrp(), libc::getsid(0)) };
        assert_eq!(stat.state, 'R');
        assert_eq!(stat.ppid, ppid);
        assert_eq!(stat.pgrp, pgrp);
        assert_eq!(stat.session, session);
        assert!(!stat.is_kernel_thread());
        assert!(read_stat("/proc/self/nonexistent").is_err());
    }
}
