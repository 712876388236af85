//! Process group, session and user/group ids, observed from inside the child.

mod support;

use progeny::Command;
use support::INSPECT;

fn field(text: &str, key: &str) -> String {
    let line = text.lines().find(|l| l.starts_with(key)).unwrap();
    line[key.len()..].trim().to_string()
}

fn ids(cmd: &mut Command) -> String {
    let out = cmd.arg("ids").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn process_group_zero_makes_a_new_group() {
    let text = ids(Command::new(INSPECT).process_group(0));
    assert_eq!(field(&text, "pgrp:"), field(&text, "pid:"));
}

#[test]
fn setsid_starts_a_session() {
    let text = ids(Command::new(INSPECT).setsid(true));
    assert_eq!(field(&text, "session:"), field(&text, "pid:"));
    assert_eq!(field(&text, "pgrp:"), field(&text, "pid:"));
}

#[test]
fn default_keeps_the_parents_group() {
    let text = ids(&mut Command::new(INSPECT));
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let pgrp = after.split(' ').nth(2).unwrap();
    assert_eq!(field(&text, "pgrp:"), pgrp);
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| field(&s, "Uid:").split_whitespace().nth(1) == Some("0"))
        .unwrap_or(false)
}

#[test]
fn uid_gid_and_groups_are_set_in_the_child() {
    if !is_root() {
        eprintln!("skipped: changing ids needs root (CAP_SETUID/CAP_SETGID)");
        return;
    }
    let text = ids(Command::new(INSPECT)
        .uid(65534)
        .gid(65533)
        .groups(&[65533, 65532]));
    assert_eq!(field(&text, "Uid:"), "65534\t65534\t65534\t65534");
    assert_eq!(field(&text, "Gid:"), "65533\t65533\t65533\t65533");
    assert_eq!(field(&text, "Groups:"), "65532 65533");
    // Without explicit groups, setting the uid drops the supplementary groups, as std does.
    let text = ids(Command::new(INSPECT).uid(65534).gid(65534));
    assert_eq!(field(&text, "Groups:"), "");
    // The parent keeps its own ids: the child's raw setuid changed one thread of one process.
    assert!(is_root());
}

#[test]
fn setuid_refusal_names_the_step() {
    if is_root() {
        // As root every uid is allowed; the refusal is shown by a child that cannot setgroups.
        let err = Command::new("true")
            .uid(65534)
            .gid(65534)
            .groups(&[1])
            .arg0("x")
            .current_dir("/")
            .spawn()
            .map(|mut c| c.wait())
            .err();
        assert!(err.is_none(), "root may set any ids");
        return;
    }
    let err = Command::new("true").uid(0).spawn().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    assert_eq!(
        err.to_string(),
        "setuid 0: Operation not permitted (os error 1)"
    );
}
