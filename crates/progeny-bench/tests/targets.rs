//! Targets: the built-in no-op, parsing, and the temporary directory.

use progeny_bench::{TargetDir, TargetSpec};

#[test]
fn the_noop_target_is_a_static_executable_that_exits_0() {
    let dir = TargetDir::create().unwrap();
    let target = dir.resolve(&TargetSpec::Noop).unwrap();
    let bytes = std::fs::read(&target.program).unwrap();
    assert!(bytes.starts_with(b"\x7fELF"), "not an ELF file");
    // Tiny: no libc linked in.
    assert!(bytes.len() < 64 * 1024, "{} bytes", bytes.len());
    let status = std::process::Command::new(&target.program)
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    // Statically linked: no interpreter (PT_INTERP) to load.
    assert!(!bytes.windows(b"ld-linux".len()).any(|w| w == b"ld-linux"));
    let path = dir.path().to_owned();
    drop(dir);
    assert!(!path.exists(), "the target directory outlived its owner");
}

#[test]
fn target_names_parse() {
    assert_eq!(TargetSpec::parse("true"), Ok(TargetSpec::True));
    assert_eq!(TargetSpec::parse("noop"), Ok(TargetSpec::Noop));
    assert_eq!(
        TargetSpec::parse("/usr/bin/env"),
        Ok(TargetSpec::Path("/usr/bin/env".into()))
    );
    assert!(TargetSpec::parse("env").is_err());
    assert!(TargetSpec::parse("./a.out").is_err());
}

#[test]
fn directories_left_by_killed_runs_are_swept() {
    // No process can have this pid (above the kernel's PID_MAX_LIMIT).
    let stale = std::env::temp_dir().join("progeny-bench-4194305-0-0");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("noop"), b"left behind").unwrap();
    let dir = TargetDir::create().unwrap();
    assert!(!stale.exists(), "{} was not swept", stale.display());
    assert!(dir.path().exists());
}
