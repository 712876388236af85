//! `Snapshot::write_core`: an ELF core file of the target, written from the snapshot child
//! while the target runs on.
//!
//! The layout is the one the kernel and gdb use for Linux x86_64 cores: an `ET_CORE` header,
//! one `PT_NOTE` segment, then one `PT_LOAD` segment per mapping. The notes carry, for every
//! thread of the target at the moment of the stop, `NT_PRSTATUS` (its tid and pre-injection
//! registers), `NT_FPREGSET`, `NT_X86_XSTATE` (owner "LINUX", full size) and `NT_SIGINFO`;
//! and once `NT_PRPSINFO`, `NT_AUXV` and `NT_FILE`. Memory is read from the child, never from
//! the running target.
//!
//! # References
//! - [core(5)](https://man7.org/linux/man-pages/man5/core.5.html)
//! - [elf(5)](https://man7.org/linux/man-pages/man5/elf.5.html)

use std::fs;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::procfs::{self, Mapping};
use crate::snapshot::{Snapshot, ThreadState};

const PAGE: u64 = 4096;
const NT_PRSTATUS: u32 = 1;
const NT_FPREGSET: u32 = 2;
const NT_PRPSINFO: u32 = 3;
const NT_AUXV: u32 = 6;
const NT_X86_XSTATE: u32 = 0x202;
const NT_SIGINFO: u32 = 0x5349_4749;
const NT_FILE: u32 = 0x4649_4c45;
const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const ELF_HEADER_SIZE: u64 = 64;
const PROGRAM_HEADER_SIZE: u64 = 56;

/// What to put in a core file.
#[derive(Clone, Debug, Default)]
pub struct CoreOptions {
    /// Leave out the contents of file-backed mappings that are not writable (program and
    /// library text, read-only data): gdb reads those from the files themselves. Their
    /// segments stay, empty, so addresses still resolve. Makes cores much smaller.
    pub skip_file_backed_readonly: bool,
}

/// What happened while writing a core.
#[derive(Clone, Debug, Default)]
pub struct CoreReport {
    /// Size of the file in bytes.
    pub bytes: u64,
    /// Segments written (one per mapping).
    pub segments: usize,
    /// Threads recorded.
    pub threads: usize,
    /// Time to write the file.
    pub write_time: Duration,
    /// Things worth knowing: unreadable mappings written empty, shared or
    /// `MADV_DONTFORK` regions that are not part of the snapshot.
    pub warnings: Vec<String>,
}

/// Progress of a core being written: bytes of memory done and total.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

struct Note {
    name: &'static [u8],
    kind: u32,
    desc: Vec<u8>,
}

impl Note {
    fn size(&self) -> u64 {
        let name = self.name.len() as u64 + 1;
        12 + name.next_multiple_of(4) + (self.desc.len() as u64).next_multiple_of(4)
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.name.len() as u32 + 1).to_le_bytes());
        out.extend_from_slice(&(self.desc.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.kind.to_le_bytes());
        out.extend_from_slice(self.name);
        out.push(0);
        pad4(out);
        out.extend_from_slice(&self.desc);
        pad4(out);
    }
}

fn pad4(out: &mut Vec<u8>) {
    while out.len() & 3 != 0 {
        out.push(0);
    }
}

/// Identity of the target for the notes, read from `/proc`.
#[derive(Default)]
struct ProcessInfo {
    ppid: i32,
    pgrp: i32,
    sid: i32,
    uid: u32,
    gid: u32,
    comm: Vec<u8>,
    args: Vec<u8>,
}

fn process_info(pid: i32) -> ProcessInfo {
    let mut info = ProcessInfo::default();
    if let Ok(stat) = crate::procfs::read_stat(&format!("/proc/{pid}/stat")) {
        info.ppid = stat.ppid;
        info.pgrp = stat.pgrp;
        info.sid = stat.session;
    }
    if let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) {
        let second = |key: &str| {
            status
                .lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        info.uid = second("Uid:");
        info.gid = second("Gid:");
    }
    info.comm = fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
    if info.comm.last() == Some(&b'\n') {
        info.comm.pop();
    }
    info.args = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if info.args.last() == Some(&0) {
        info.args.pop();
    }
    for byte in &mut info.args {
        if *byte == 0 {
            *byte = b' ';
        }
    }
    info
}

/// `struct elf_prstatus` for x86_64 (336 bytes).
fn prstatus(thread: &ThreadState, info: &ProcessInfo) -> Vec<u8> {
    let mut out = Vec::with_capacity(336);
    // pr_info (si_signo, si_code, si_errno), pr_cursig, padding.
    out.extend_from_slice(&libc::SIGSTOP.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&(libc::SIGSTOP as i16).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&0u64.to_le_bytes()); // pr_sigpend
    out.extend_from_slice(&thread.sigmask.to_le_bytes()); // pr_sighold
    for id in [thread.tid, info.ppid, info.pgrp, info.sid] {
        out.extend_from_slice(&id.to_le_bytes());
    }
    out.extend_from_slice(&[0u8; 64]); // pr_utime, pr_stime, pr_cutime, pr_cstime
    out.extend_from_slice(&registers_bytes(thread));
    out.extend_from_slice(&1i32.to_le_bytes()); // pr_fpvalid
    out.extend_from_slice(&[0u8; 4]);
    debug_assert_eq!(out.len(), 336);
    out
}

/// The general registers in `elf_gregset_t` order, which is `user_regs_struct`'s.
fn registers_bytes(thread: &ThreadState) -> Vec<u8> {
    let r = &thread.regs;
    [
        r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx, r.rdx,
        r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss, r.fs_base, r.gs_base, r.ds,
        r.es, r.fs, r.gs,
    ]
    .iter()
    .flat_map(|value| value.to_le_bytes())
    .collect()
}

/// `struct elf_prpsinfo` for x86_64 (136 bytes).
fn prpsinfo(info: &ProcessInfo, pid: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(136);
    out.extend_from_slice(&[0, b'S', 0, 0, 0, 0, 0, 0]); // state, sname, zomb, nice, pad
    out.extend_from_slice(&0u64.to_le_bytes()); // pr_flag
    out.extend_from_slice(&info.uid.to_le_bytes());
    out.extend_from_slice(&info.gid.to_le_bytes());
    for id in [pid, info.ppid, info.pgrp, info.sid] {
        out.extend_from_slice(&id.to_le_bytes());
    }
    let mut fname = [0u8; 16];
    let n = info.comm.len().min(15);
    fname[..n].copy_from_slice(&info.comm[..n]);
    out.extend_from_slice(&fname);
    let mut args = [0u8; 80];
    let n = info.args.len().min(79);
    args[..n].copy_from_slice(&info.args[..n]);
    out.extend_from_slice(&args);
    debug_assert_eq!(out.len(), 136);
    out
}

/// A 128-byte `siginfo_t` saying the thread was stopped (by `SIGSTOP`, as a debugger would).
fn siginfo() -> Vec<u8> {
    let mut out = vec![0u8; 128];
    out[..4].copy_from_slice(&libc::SIGSTOP.to_le_bytes());
    out
}

/// `NT_FILE`: the file-backed mappings, so gdb can match them to the files.
fn file_note(maps: &[Mapping]) -> Vec<u8> {
    let files: Vec<&Mapping> = maps.iter().filter(|m| m.path.starts_with('/')).collect();
    let mut out = Vec::new();
    out.extend_from_slice(&(files.len() as u64).to_le_bytes());
    out.extend_from_slice(&PAGE.to_le_bytes());
    for m in &files {
        out.extend_from_slice(&m.start.to_le_bytes());
        out.extend_from_slice(&m.end.to_le_bytes());
        out.extend_from_slice(&(m.offset / PAGE).to_le_bytes());
    }
    for m in &files {
        out.extend_from_slice(m.path.trim_end_matches(" (deleted)").as_bytes());
        out.push(0);
    }
    out
}

impl Snapshot {
    /// Writes an ELF core file of the target as it was at the stop to `path`, reading memory
    /// from the snapshot child while the target runs on. `progress` is called with bytes of
    /// memory done and the total.
    ///
    /// Mappings that cannot be read are written as empty segments and reported in
    /// [`CoreReport::warnings`], not as failures; so are regions the child does not share with
    /// the target's present state (`MADV_DONTFORK` memory, or mappings made after the stop),
    /// and `MAP_SHARED` regions, whose contents kept changing after the stop.
    ///
    /// # Errors
    /// Fails if the file cannot be created or written, or the child's map cannot be read.
    pub fn write_core(
        &self,
        path: &Path,
        options: &CoreOptions,
        progress: Progress<'_>,
    ) -> io::Result<CoreReport> {
        let start = Instant::now();
        let mut report = CoreReport::default();
        let child_maps = self.child_maps()?;
        // What the target has now but the child lacks was not part of the snapshot.
        if let Ok(target_maps) = procfs::read_maps(self.pid()) {
            for m in target_maps.iter().filter(|m| {
                !child_maps
                    .iter()
                    .any(|c| c.start <= m.start && m.end <= c.end)
            }) {
                report.warnings.push(format!(
                    "{:#x}-{:#x} {}: in the target but not in the snapshot (MADV_DONTFORK, or mapped after the stop)",
                    m.start, m.end, m.path
                ));
            }
        }
        for m in child_maps.iter().filter(|m| m.shared) {
            report.warnings.push(format!(
                "{:#x}-{:#x} {}: MAP_SHARED, its contents are live, not as of the stop",
                m.start, m.end, m.path
            ));
        }
        let info = process_info(self.pid());
        let mut auxv = fs::read(format!("/proc/{}/auxv", self.child())).unwrap_or_default();
        if auxv.is_empty() {
            auxv = fs::read(format!("/proc/{}/auxv", self.pid())).unwrap_or_default();
        }

        // Notes: the thread that was the leader first (gdb's "current" thread), then the rest.
        let mut threads: Vec<&ThreadState> = self.threads().iter().collect();
        threads.sort_by_key(|t| (t.tid != self.pid(), t.tid));
        let mut notes = Vec::new();
        for (index, thread) in threads.iter().enumerate() {
            notes.push(Note {
                name: b"CORE",
                kind: NT_PRSTATUS,
                desc: prstatus(thread, &info),
            });
            if index == 0 {
                notes.push(Note {
                    name: b"CORE",
                    kind: NT_PRPSINFO,
                    desc: prpsinfo(&info, self.pid()),
                });
                notes.push(Note {
                    name: b"CORE",
                    kind: NT_AUXV,
                    desc: auxv.clone(),
                });
                notes.push(Note {
                    name: b"CORE",
                    kind: NT_FILE,
                    desc: file_note(&child_maps),
                });
            }
            notes.push(Note {
                name: b"CORE",
                kind: NT_SIGINFO,
                desc: siginfo(),
            });
            notes.push(Note {
                name: b"CORE",
                kind: NT_FPREGSET,
                desc: thread.fpregs().to_vec(),
            });
            notes.push(Note {
                name: b"LINUX",
                kind: NT_X86_XSTATE,
                desc: thread.xstate.clone(),
            });
        }
        let notes_size: u64 = notes.iter().map(Note::size).sum();

        let segments: Vec<(&Mapping, bool)> = child_maps
            .iter()
            .map(|m| {
                let wanted = m.read
                    && !(options.skip_file_backed_readonly && m.path.starts_with('/') && !m.write);
                // A mapping whose first byte cannot be read ([vvar], device memory) is written
                // as an empty segment, with a warning.
                let readable = wanted && self.read_memory(m.start, &mut [0u8; 1]).unwrap_or(0) == 1;
                if wanted && !readable {
                    report.warnings.push(format!(
                        "{:#x}-{:#x} {}: unreadable, written as an empty segment",
                        m.start, m.end, m.path
                    ));
                }
                (m, readable)
            })
            .collect();
        let phnum = 1 + segments.len();
        if phnum >= 0xffff {
            return Err(io::Error::other("more than 65534 mappings: not supported"));
        }
        let notes_offset = ELF_HEADER_SIZE + PROGRAM_HEADER_SIZE * phnum as u64;
        let mut data_offset = (notes_offset + notes_size).next_multiple_of(PAGE);

        let mut header = Vec::with_capacity(notes_offset as usize);
        header.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
        header.extend_from_slice(&[0u8; 8]);
        header.extend_from_slice(&4u16.to_le_bytes()); // ET_CORE
        header.extend_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        header.extend_from_slice(&1u32.to_le_bytes()); // EV_CURRENT
        header.extend_from_slice(&0u64.to_le_bytes()); // e_entry
        header.extend_from_slice(&ELF_HEADER_SIZE.to_le_bytes()); // e_phoff
        header.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
        header.extend_from_slice(&0u32.to_le_bytes()); // e_flags
        header.extend_from_slice(&(ELF_HEADER_SIZE as u16).to_le_bytes());
        header.extend_from_slice(&(PROGRAM_HEADER_SIZE as u16).to_le_bytes());
        header.extend_from_slice(&(phnum as u16).to_le_bytes());
        header.extend_from_slice(&64u16.to_le_bytes()); // e_shentsize
        header.extend_from_slice(&0u16.to_le_bytes()); // e_shnum
        header.extend_from_slice(&0u16.to_le_bytes()); // e_shstrndx

        let mut program_header = |kind: u32,
                                  flags: u32,
                                  offset: u64,
                                  vaddr: u64,
                                  filesz: u64,
                                  memsz: u64,
                                  align: u64| {
            header.extend_from_slice(&kind.to_le_bytes());
            header.extend_from_slice(&flags.to_le_bytes());
            header.extend_from_slice(&offset.to_le_bytes());
            header.extend_from_slice(&vaddr.to_le_bytes());
            header.extend_from_slice(&0u64.to_le_bytes()); // p_paddr
            header.extend_from_slice(&filesz.to_le_bytes());
            header.extend_from_slice(&memsz.to_le_bytes());
            header.extend_from_slice(&align.to_le_bytes());
        };
        program_header(PT_NOTE, 0, notes_offset, 0, notes_size, 0, 4);
        let mut layout = Vec::with_capacity(segments.len());
        for (m, dump) in &segments {
            let flags = (u32::from(m.read) << 2) | (u32::from(m.write) << 1) | u32::from(m.execute);
            let filesz = if *dump { m.len() } else { 0 };
            program_header(PT_LOAD, flags, data_offset, m.start, filesz, m.len(), PAGE);
            layout.push((data_offset, filesz));
            data_offset += filesz;
        }
        for note in &notes {
            note.write(&mut header);
        }

        // One descriptor on the child's memory for the whole dump (see `read_memory` for why
        // not process_vm_readv).
        let memory = fs::File::open(format!("/proc/{}/mem", self.child()))?;
        let file = fs::File::create(path)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&header)?;
        let total: u64 = layout.iter().map(|(_, size)| size).sum();
        let mut done = 0u64;
        let mut buffer = vec![0u8; 1 << 20];
        progress(0, total);
        for ((m, _), (offset, filesz)) in segments.iter().zip(&layout) {
            if *filesz == 0 {
                continue;
            }
            out.seek(SeekFrom::Start(*offset))?;
            let mut address = m.start;
            let mut unreadable = 0u64;
            while address < m.end {
                let chunk = ((m.end - address) as usize).min(buffer.len());
                let got = procfs::read_at_most(&memory, address, &mut buffer[..chunk]).unwrap_or(0);
                if got < chunk {
                    // A hole (a file mapping past the end of its file, a guard page): zeros,
                    // so every later byte keeps its offset.
                    buffer[got..chunk].fill(0);
                    unreadable += (chunk - got) as u64;
                }
                out.write_all(&buffer[..chunk])?;
                address += chunk as u64;
                done += chunk as u64;
                progress(done, total);
            }
            if unreadable > 0 {
                report.warnings.push(format!(
                    "{:#x}-{:#x} {}: {unreadable} bytes unreadable, written as zeros",
                    m.start, m.end, m.path
                ));
            }
        }
        out.flush()?;
        let file = out.into_inner().map_err(|err| err.into_error())?;
        file.set_len(data_offset)?;
        report.bytes = data_offset;
        report.segments = segments.len();
        report.threads = threads.len();
        report.write_time = start.elapsed();
        Ok(report)
    }
}
