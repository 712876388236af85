//! Helpers shared by the CLI's integration tests (included with `mod common`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `progeny` binary under test.
pub fn progeny() -> Command {
    Command::new(env!("CARGO_BIN_EXE_progeny"))
}

/// A fresh, private directory removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let path =
            std::env::temp_dir().join(format!("progeny-cli-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `progeny args` and checks the contract for bad input: exit status 2, nothing on stdout,
/// and one line on stderr, starting with `progeny: ` and mentioning `mentions`.
pub fn assert_one_line_error(args: &[&str], mentions: &str) {
    let output = progeny().args(args).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{args:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("progeny: "), "{stderr}");
    assert!(stderr.contains(mentions), "{args:?}: {stderr}");
    assert!(output.stdout.is_empty());
}
