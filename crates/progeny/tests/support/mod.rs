//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeSet;

/// The program the tests spawn to look at the child from the inside.
pub const INSPECT: &str = env!("CARGO_BIN_EXE_progeny-inspect");

/// The pids of this process's living or zombie children, from every thread's `children` file.
pub fn children() -> BTreeSet<u32> {
    let mut pids = BTreeSet::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let path = task.path().join("children");
        if let Ok(text) = std::fs::read_to_string(path) {
            pids.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    pids
}

/// The descriptors open in this process, as numbers.
pub fn open_fds() -> BTreeSet<i32> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Parses `progeny-inspect fds` output into (number, target) pairs.
pub fn parse_fds(text: &str) -> Vec<(i32, String)> {
    text.lines()
        .map(|l| {
            let (n, t) = l.split_once(' ').unwrap();
            (n.parse().unwrap(), t.to_string())
        })
        .collect()
}

/// A fresh temporary directory, removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "progeny-test-{}-{}-{}",
            tag,
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
