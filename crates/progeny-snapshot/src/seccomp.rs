//! Would the target's seccomp filters let our injected `clone` through?
//!
//! A filter that kills the process (or traps, or asks a user-space supervisor) on `clone` would
//! turn a snapshot into a crash, so the filters are fetched with `PTRACE_SECCOMP_GET_FILTER` and
//! run here on the exact `seccomp_data` the injected call will present.
//!
//! # References
//! - [seccomp(2)](https://man7.org/linux/man-pages/man2/seccomp.2.html)
//! - [ptrace(2), PTRACE_SECCOMP_GET_FILTER](https://man7.org/linux/man-pages/man2/ptrace.2.html)

use crate::ptrace::SockFilter;

/// `AUDIT_ARCH_X86_64`: the `arch` field the kernel presents for native x86_64 syscalls.
pub(crate) const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

pub(crate) const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
pub(crate) const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
pub(crate) const SECCOMP_RET_LOG: u32 = 0x7ffc_0000;
const SECCOMP_RET_ACTION_FULL: u32 = 0xffff_0000;

/// The `struct seccomp_data` a filter sees for one syscall.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SeccompData {
    pub nr: i32,
    pub arch: u32,
    pub instruction_pointer: u64,
    pub args: [u64; 6],
}

impl SeccompData {
    /// The 32-bit word at byte `offset` of the structure, as `BPF_LD|BPF_W|BPF_ABS` loads it.
    fn word(&self, offset: u32) -> Option<u32> {
        let low = |v: u64| v as u32;
        let high = |v: u64| (v >> 32) as u32;
        Some(match offset {
            0 => self.nr as u32,
            4 => self.arch,
            8 => low(self.instruction_pointer),
            12 => high(self.instruction_pointer),
            16..=63 if offset & 3 == 0 => {
                let arg = self.args[(offset as usize - 16) / 8];
                if offset & 7 == 0 {
                    low(arg)
                } else {
                    high(arg)
                }
            }
            _ => return None,
        })
    }
}

/// Runs one classic-BPF seccomp program on `data`; `None` if the program is malformed (which
/// the kernel would have refused to load, so it means we misread it).
pub(crate) fn run_filter(program: &[SockFilter], data: &SeccompData) -> Option<u32> {
    let (mut a, mut x) = (0u32, 0u32);
    let mut scratch = [0u32; 16];
    let mut pc = 0usize;
    // Classic BPF only jumps forward, so a program terminates within its length.
    while let Some(insn) = program.get(pc) {
        pc += 1;
        let k = insn.k;
        let class = insn.code & 0x07;
        match class {
            // BPF_LD / BPF_LDX
            0x00 | 0x01 => {
                let value = match insn.code & 0xe0 {
                    0x00 => k,                         // BPF_IMM
                    0x20 => data.word(k)?,             // BPF_ABS
                    0x60 => *scratch.get(k as usize)?, // BPF_MEM
                    0x80 => 64,                        // BPF_LEN
                    _ => return None,
                };
                if class == 0x00 {
                    a = value;
                } else {
                    x = value;
                }
            }
            0x02 => *scratch.get_mut(k as usize)? = a, // BPF_ST
            0x03 => *scratch.get_mut(k as usize)? = x, // BPF_STX
            0x04 => {
                // BPF_ALU
                let operand = if insn.code & 0x08 != 0 { x } else { k };
                a = match insn.code & 0xf0 {
                    0x00 => a.wrapping_add(operand),
                    0x10 => a.wrapping_sub(operand),
                    0x20 => a.wrapping_mul(operand),
                    0x30 => a.checked_div(operand)?,
                    0x40 => a | operand,
                    0x50 => a & operand,
                    0x60 => a.checked_shl(operand).unwrap_or(0),
                    0x70 => a.checked_shr(operand).unwrap_or(0),
                    0x80 => a.wrapping_neg(),
                    0x90 => a.checked_rem(operand)?,
                    0xa0 => a ^ operand,
                    _ => return None,
                };
            }
            0x05 => {
                // BPF_JMP
                let operand = if insn.code & 0x08 != 0 { x } else { k };
                let taken = match insn.code & 0xf0 {
                    0x00 => {
                        pc = pc.checked_add(k as usize)?;
                        continue;
                    }
                    0x10 => a == operand,
                    0x20 => a > operand,
                    0x30 => a >= operand,
                    0x40 => a & operand != 0,
                    _ => return None,
                };
                pc += usize::from(if taken { insn.jt } else { insn.jf });
            }
            0x06 => return Some(if insn.code & 0x18 == 0x10 { a } else { k }), // BPF_RET
            0x07 => {
                // BPF_MISC: TAX / TXA
                if insn.code & 0xf8 == 0x80 {
                    a = x;
                } else {
                    x = a;
                }
            }
            _ => return None,
        }
    }
    None
}

/// Combines the results of every filter the way the kernel does: the action with the lowest
/// value as a signed number wins (so `KILL_PROCESS`, 0x80000000, beats everything).
pub(crate) fn strictest(results: impl IntoIterator<Item = u32>) -> u32 {
    results
        .into_iter()
        .min_by_key(|ret| (ret & SECCOMP_RET_ACTION_FULL) as i32)
        .unwrap_or(SECCOMP_RET_ALLOW)
}

/// Whether an action lets the syscall run normally.
pub(crate) fn allows(action: u32) -> bool {
    matches!(
        action & SECCOMP_RET_ACTION_FULL,
        SECCOMP_RET_ALLOW | SECCOMP_RET_LOG
    )
}

/// A human name for a seccomp action, for error messages.
pub(crate) fn action_name(action: u32) -> &'static str {
    match action & SECCOMP_RET_ACTION_FULL {
        SECCOMP_RET_KILL_PROCESS => "KILL_PROCESS",
        0x0000_0000 => "KILL_THREAD",
        0x0003_0000 => "TRAP",
        0x0005_0000 => "ERRNO",
        0x7fc0_0000 => "USER_NOTIF",
        0x7ff0_0000 => "TRACE",
        SECCOMP_RET_LOG => "LOG",
        SECCOMP_RET_ALLOW => "ALLOW",
        _ => "unknown action",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(code: u16, k: u32) -> SockFilter {
        SockFilter {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    fn jump(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
        SockFilter { code, jt, jf, k }
    }

    fn data(nr: i32) -> SeccompData {
        SeccompData {
            nr,
            arch: AUDIT_ARCH_X86_64,
            instruction_pointer: 0x7fff_0000_1234,
            args: [0; 6],
        }
    }

    #[test]
    fn kill_on_clone_filter_kills_clone_and_allows_others() {
        let program = [
            stmt(0x20, 4),
            jump(0x15, AUDIT_ARCH_X86_64, 1, 0),
            stmt(0x06, SECCOMP_RET_ALLOW),
            stmt(0x20, 0),
            jump(0x15, libc::SYS_clone as u32, 0, 1),
            stmt(0x06, SECCOMP_RET_KILL_PROCESS),
            stmt(0x06, SECCOMP_RET_ALLOW),
        ];
        let clone = run_filter(&program, &data(libc::SYS_clone as i32)).unwrap();
        assert_eq!(action_name(clone), "KILL_PROCESS");
        let read = run_filter(&program, &data(0)).unwrap();
        assert!(allows(read));
        assert_eq!(strictest([read, clone]), clone);
    }

    #[test]
    fn malformed_program_is_not_trusted() {
        assert_eq!(run_filter(&[stmt(0x20, 3)], &data(0)), None);
        assert_eq!(run_filter(&[], &data(0)), None);
    }
}
