//! Builds the two C pieces of the benchmark:
//! - `csrc/spawn.c` (vfork + execve, and the clone floor) as a static library
//!   linked into this crate;
//! - `csrc/noop.c` as a tiny static executable without libc (the exec floor
//!   target), which the library embeds and writes out at run time;
//! - `csrc/converter.c` as an ordinary dynamically linked program (the
//!   converter `progeny bench indexer` runs once per document), embedded
//!   the same way.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=csrc/spawn.c");
    println!("cargo:rerun-if-changed=csrc/noop.c");
    println!("cargo:rerun-if-changed=csrc/converter.c");

    cc::Build::new()
        .file("csrc/spawn.c")
        .warnings(true)
        .extra_warnings(true)
        .compile("progeny_bench_spawn");

    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let noop = out_dir.join("noop");
    // The cc crate finds the same C compiler it used above; it builds
    // libraries only, so the executable is linked by calling that compiler.
    let compiler = cc::Build::new().get_compiler();
    let mut link: Command = compiler.to_command();
    // Drop flags meant for library objects (such as -fPIC) that a
    // freestanding static executable does not want.
    link.args([
        "-static",
        "-nostdlib",
        "-fno-pie",
        "-no-pie",
        "-fno-stack-protector",
        "-fno-asynchronous-unwind-tables",
        "-O2",
        "-s",
        "-o",
    ]);
    link.arg(&noop).arg("csrc/noop.c");
    let status = link
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler for csrc/noop.c: {e}"));
    assert!(status.success(), "linking csrc/noop.c failed: {status}");

    // The converter is linked like any program a user would run (dynamic
    // libc, position independent), so exec pays the dynamic loader as it
    // does for a real converter.
    let converter = out_dir.join("converter");
    let mut link: Command = compiler.to_command();
    link.args(["-O2", "-Wall", "-Wextra", "-o"]);
    link.arg(&converter).arg("csrc/converter.c");
    let status = link
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler for csrc/converter.c: {e}"));
    assert!(
        status.success(),
        "linking csrc/converter.c failed: {status}"
    );
}
