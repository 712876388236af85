//! Builds the C programs that tests and benchmarks use as snapshot targets.
//!
//! They are ordinary executables (not linked into the library): each is compiled with the C
//! compiler the `cc` crate finds, with symbols, so gdb can name their functions in a core file.
//! The library embeds them (`include_bytes!`) so a benchmark can run them from any directory.

use std::path::PathBuf;

const TARGETS: &[&str] = &["snapshot_target"];

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let compiler = cc::Build::new()
        .opt_level(1)
        .debug(true)
        .cargo_metadata(false)
        .get_compiler();
    for name in TARGETS {
        let source = format!("targets/{name}.c");
        println!("cargo:rerun-if-changed={source}");
        let output = out_dir.join(name);
        let status = compiler
            .to_command()
            .args(["-g", "-O1", "-fno-omit-frame-pointer", "-pthread", "-Wall"])
            .arg("-o")
            .arg(&output)
            .arg(&source)
            .status()
            .unwrap_or_else(|err| panic!("cannot run the C compiler for {source}: {err}"));
        assert!(status.success(), "the C compiler failed on {source}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
