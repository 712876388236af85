//! A core written from the snapshot loads in real gdb and shows what gcore's core shows: every
//! thread with the same functions, registers equal, globals with the values the program set.

mod common;

use common::Target;
use progeny_snapshot::{CoreOptions, Snapshot, SnapshotOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const GDB: &str = "/usr/bin/gdb";
const GCORE: &str = "/usr/bin/gcore";

fn tools_present() -> bool {
    if Path::new(GDB).exists() && Path::new(GCORE).exists() {
        return true;
    }
    eprintln!("skipped: gdb and gcore are not installed (apt-get install gdb)");
    false
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("progeny-core-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gdb(program: &Path, core: &Path, commands: &[&str]) -> String {
    let mut command = Command::new(GDB);
    command.args(["-nx", "-batch"]);
    for c in commands {
        command.args(["-ex", c]);
    }
    let output = command.arg(program).arg(core).output().unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Thread id → function names of its backtrace, from `thread apply all bt`.
fn backtraces(text: &str) -> BTreeMap<u32, Vec<String>> {
    let mut threads = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Thread ") {
            let lwp = rest
                .split("LWP ")
                .nth(1)
                .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|s| s.parse::<u32>().ok());
            current = lwp;
            if let Some(lwp) = lwp {
                threads.insert(lwp, Vec::new());
            }
        } else if line.starts_with('#') {
            // "#1  0x... in park_alpha () at ..." or "#0  park_alpha () at ...".
            let words: Vec<&str> = line.split_whitespace().collect();
            let name = match words.iter().position(|w| *w == "in") {
                Some(at) => words.get(at + 1),
                None => words.get(1),
            };
            if let (Some(lwp), Some(name)) = (current, name) {
                threads.get_mut(&lwp).unwrap().push(name.to_string());
            }
        }
    }
    threads
}

/// Thread id → `info registers` general registers (fs_base included).
fn registers(program: &Path, core: &Path) -> BTreeMap<u32, Vec<String>> {
    let text = gdb(program, core, &["thread apply all info registers"]);
    let mut threads = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Thread ") {
            current = rest
                .split("LWP ")
                .nth(1)
                .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|s| s.parse::<u32>().ok());
            if let Some(lwp) = current {
                threads.insert(lwp, Vec::new());
            }
        } else if let Some(lwp) = current {
            let mut words = line.split_whitespace();
            if let (Some(name), Some(value)) = (words.next(), words.next()) {
                // The AVX-512 mask registers are left out: gdb reads them at Intel's fixed
                // XSAVE offsets, but the core carries the kernel's layout, which follows the
                // CPU's CPUID offsets (they differ on CPUs without MPX state, e.g. AMD), so
                // gdb shows them unavailable in a kernel-format core and zero in its own.
                let mask_register = name.len() == 2 && name.starts_with('k');
                if !mask_register && !name.starts_with("warning") {
                    threads
                        .get_mut(&lwp)
                        .unwrap()
                        .push(format!("{name}={value}"));
                }
            }
        }
    }
    threads
}

#[test]
fn core_matches_gcore_in_gdb() {
    if !tools_present() {
        return;
    }
    let target = Target::start(&["parked"]);
    target.wait_in_syscall(0);
    let program = progeny_snapshot::targets::path().unwrap();
    let dir = scratch_dir("match");
    let ours = dir.join("progeny.core");

    let snapshot = Snapshot::take(target.pid(), &SnapshotOptions::default()).unwrap();
    assert_eq!(snapshot.threads().len(), 8);
    let mut calls = 0;
    let report = snapshot
        .write_core(&ours, &CoreOptions::default(), &mut |_, _| calls += 1)
        .unwrap();
    assert!(calls > 0);
    assert_eq!(report.threads, 8);
    drop(snapshot);

    // gcore stops the target for the whole dump; the threads are parked, so both cores see
    // the same state.
    let prefix = dir.join("gcore");
    let status = Command::new(GCORE)
        .arg("-o")
        .arg(&prefix)
        .arg(target.pid().to_string())
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let theirs = PathBuf::from(format!("{}.{}", prefix.display(), target.pid()));

    let ours_bt = backtraces(&gdb(&program, &ours, &["thread apply all bt"]));
    let theirs_bt = backtraces(&gdb(&program, &theirs, &["thread apply all bt"]));
    assert_eq!(ours_bt.len(), 8, "{ours_bt:?}");
    assert_eq!(ours_bt, theirs_bt);
    // Every thread is in its own park_ function (park_thread is the common trampoline).
    let mut parked: Vec<&String> = ours_bt
        .values()
        .flatten()
        .filter(|f| f.starts_with("park_") && *f != "park_thread")
        .collect();
    parked.sort();
    parked.dedup();
    assert_eq!(parked.len(), 8, "{ours_bt:?}");

    assert_eq!(registers(&program, &ours), registers(&program, &theirs));

    let printed = gdb(&program, &ours, &["print/x progeny_marker"]);
    assert!(printed.contains("0x5eed1234"), "{printed}");

    target.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn skipping_file_backed_text_makes_a_smaller_core_that_still_loads() {
    if !tools_present() {
        return;
    }
    let target = Target::start(&["parked"]);
    target.wait_in_syscall(0);
    let program = progeny_snapshot::targets::path().unwrap();
    let dir = scratch_dir("small");
    let snapshot = Snapshot::take(target.pid(), &SnapshotOptions::default()).unwrap();
    let full = snapshot
        .write_core(
            &dir.join("full.core"),
            &CoreOptions::default(),
            &mut |_, _| {},
        )
        .unwrap();
    let small_path = dir.join("small.core");
    let small = snapshot
        .write_core(
            &small_path,
            &CoreOptions {
                skip_file_backed_readonly: true,
            },
            &mut |_, _| {},
        )
        .unwrap();
    drop(snapshot);
    assert!(
        small.bytes < full.bytes,
        "{} vs {}",
        small.bytes,
        full.bytes
    );
    let bt = backtraces(&gdb(&program, &small_path, &["thread apply all bt"]));
    assert_eq!(bt.len(), 8);
    let printed = gdb(&program, &small_path, &["print/x progeny_marker"]);
    assert!(printed.contains("0x5eed1234"), "{printed}");
    target.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Private memory (clean and dirty) of a process in kB, from /proc/PID/smaps_rollup: pages
/// mapped by this process alone.
fn private_kb(pid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    text.lines()
        .filter(|l| l.starts_with("Private_Clean:") || l.starts_with("Private_Dirty:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

#[test]
fn writing_a_core_does_not_copy_the_childs_memory() {
    // Reading the child with a pinning call (process_vm_readv) would make the kernel give it a
    // private copy of every shared page; the core writer must leave them shared.
    let target = Target::start(&["bench", "1", "64"]);
    let snapshot = Snapshot::take(target.pid(), &SnapshotOptions::default()).unwrap();
    let dir = scratch_dir("shared");
    let core = dir.join("shared.core");
    snapshot
        .write_core(&core, &CoreOptions::default(), &mut |_, _| {})
        .unwrap();
    let private = private_kb(snapshot.child());
    assert!(
        private < 16 * 1024,
        "the child now owns {private} kB of private copies"
    );
    drop(snapshot);
    let _ = std::fs::remove_dir_all(&dir);
}
