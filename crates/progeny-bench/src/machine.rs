//! A description of the machine a benchmark ran on, stored with its figures.

use serde::{Deserialize, Serialize};
use std::fs;

/// The machine: enough to tell whether two reports are comparable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
    /// Kernel version string (`/proc/sys/kernel/version`).
    pub kernel_version: String,
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu: String,
    /// CPUs this process may run on.
    pub cores: usize,
    /// glibc version, or `null` on another C library.
    pub glibc: Option<String>,
    /// Total memory in bytes (`MemTotal`).
    pub memory_bytes: u64,
    /// Transparent huge page mode (`always`, `madvise` or `never`).
    pub transparent_hugepages: Option<String>,
    /// Machine architecture the benchmark was built for.
    pub arch: String,
}

fn read_trimmed(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

/// Reads a `/proc/meminfo` field in bytes.
pub fn meminfo_bytes(field: &str) -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    })
}

impl Machine {
    /// Describes the running machine. Fields that cannot be read are
    /// `unknown` (or `null`); this never fails.
    pub fn current() -> Machine {
        let cpu = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines().find_map(|line| {
                    let (key, value) = line.split_once(':')?;
                    let key = key.trim();
                    (key == "model name" || key == "Model" || key == "cpu model")
                        .then(|| value.trim().to_owned())
                })
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let transparent_hugepages = read_trimmed("/sys/kernel/mm/transparent_hugepage/enabled")
            .and_then(|modes| {
                // The active mode is the bracketed one: "always [madvise] never".
                let start = modes.find('[')?;
                let end = modes[start..].find(']')? + start;
                Some(modes[start + 1..end].to_owned())
            });
        Machine {
            kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
            kernel_version: read_trimmed("/proc/sys/kernel/version")
                .unwrap_or_else(|| "unknown".into()),
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            glibc: crate::raw::glibc_version(),
            memory_bytes: meminfo_bytes("MemTotal").unwrap_or(0),
            transparent_hugepages,
            arch: std::env::consts::ARCH.to_owned(),
        }
    }

    /// The one-line description every benchmark table starts with.
    pub fn summary(&self) -> String {
        format!(
            "machine: {}, {} core{}, {} RAM, Linux {}, glibc {}, transparent huge pages: {}",
            self.cpu,
            self.cores,
            if self.cores == 1 { "" } else { "s" },
            crate::units::format_bytes(self.memory_bytes),
            self.kernel,
            self.glibc.as_deref().unwrap_or("none"),
            self.transparent_hugepages.as_deref().unwrap_or("unknown"),
        )
    }
}
