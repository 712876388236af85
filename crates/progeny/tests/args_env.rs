//! Arguments, environment, working directory and the std-compatible getters.

mod support;

use progeny::Command;
use std::ffi::OsStr;
use support::INSPECT;

fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{:?}: {:?}", cmd, out);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn arguments_arrive_exactly() {
    let args = [
        "plain",
        "with space",
        "it's \"quoted\"",
        "ünïcødé ✓",
        "",
        "$HOME",
        "a\\b",
    ];
    let text = stdout_of(Command::new(INSPECT).arg("argv").args(args));
    let seen: Vec<&str> = text.lines().collect();
    assert_eq!(seen[0], format!("[{INSPECT}]"));
    assert_eq!(seen[1], "[argv]");
    let expected: Vec<String> = args.iter().map(|a| format!("[{a}]")).collect();
    assert_eq!(&seen[2..], expected.as_slice());
}

#[test]
fn arg0_replaces_argv0_only() {
    let text = stdout_of(Command::new(INSPECT).arg0("renamed").arg("argv"));
    assert_eq!(text, "[renamed]\n[argv]\n");
}

#[test]
fn env_set_remove_and_clear() {
    let parent_home = std::env::var("HOME").ok();
    let text = stdout_of(
        Command::new(INSPECT)
            .arg("env")
            .env("PROGENY_A", "1")
            .env("PROGENY_B", "two words")
            .env_remove("HOME"),
    );
    assert!(text.lines().any(|l| l == "PROGENY_A=1"));
    assert!(text.lines().any(|l| l == "PROGENY_B=two words"));
    assert!(!text.lines().any(|l| l.starts_with("HOME=")));
    // PATH is inherited untouched.
    let path = std::env::var("PATH").unwrap();
    assert!(text.lines().any(|l| l == format!("PATH={path}")));
    assert_eq!(
        std::env::var("HOME").ok(),
        parent_home,
        "the parent's env is untouched"
    );

    let cleared = stdout_of(
        Command::new(INSPECT)
            .arg("env")
            .env("BEFORE", "x")
            .env_clear()
            .env("ONLY", "this"),
    );
    assert_eq!(cleared, "ONLY=this\n");
}

#[test]
fn current_dir_is_the_childs() {
    let dir = support::TempDir::new("cwd");
    let text = stdout_of(Command::new(INSPECT).arg("cwd").current_dir(&dir.0));
    assert_eq!(
        text.trim_end(),
        dir.0.canonicalize().unwrap().to_str().unwrap()
    );
}

#[test]
fn relative_program_resolves_from_current_dir() {
    let dir = support::TempDir::new("relprog");
    std::fs::copy(INSPECT, dir.0.join("inspect-copy")).unwrap();
    let text = stdout_of(
        Command::new("./inspect-copy")
            .arg("cwd")
            .current_dir(&dir.0),
    );
    assert_eq!(
        text.trim_end(),
        dir.0.canonicalize().unwrap().to_str().unwrap()
    );
}

#[test]
fn getters_mirror_std() {
    let mut cmd = Command::new("prog");
    cmd.arg("a")
        .args(["b", "c"])
        .env("K", "V")
        .env_remove("GONE")
        .current_dir("/tmp");
    assert_eq!(cmd.get_program(), "prog");
    assert_eq!(cmd.get_args().collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(cmd.get_args().len(), 3);
    let envs: Vec<_> = cmd.get_envs().collect();
    assert_eq!(
        envs,
        [
            (OsStr::new("GONE"), None),
            (OsStr::new("K"), Some(OsStr::new("V")))
        ]
    );
    assert_eq!(cmd.get_current_dir(), Some(std::path::Path::new("/tmp")));
    cmd.env_clear();
    assert_eq!(cmd.get_envs().len(), 0);
    assert_eq!(format!("{cmd:?}"), r#""prog" "a" "b" "c""#);
}

#[test]
fn converts_from_std_command() {
    let mut std_cmd = std::process::Command::new(INSPECT);
    std_cmd.arg("env").env("FROM_STD", "yes").env_remove("HOME");
    let mut cmd = Command::from(&std_cmd);
    let text = stdout_of(&mut cmd);
    assert!(text.lines().any(|l| l == "FROM_STD=yes"));
    assert!(!text.lines().any(|l| l.starts_with("HOME=")));
}

#[test]
fn std_and_progeny_agree_on_output() {
    for args in [&["argv", "x y", ""][..], &["env"][..], &["cwd"][..]] {
        let std_out = std::process::Command::new(INSPECT)
            .args(args)
            .output()
            .unwrap();
        let out = Command::new(INSPECT).args(args).output().unwrap();
        assert_eq!(out.status.code(), std_out.status.code());
        assert_eq!(out.stdout, std_out.stdout, "{args:?}");
        assert_eq!(out.stderr, std_out.stderr);
    }
}

#[test]
fn exit_codes_and_signals_come_back_as_std_exit_status() {
    use std::os::unix::process::ExitStatusExt;
    let status = Command::new(INSPECT).args(["exit", "7"]).status().unwrap();
    assert_eq!(status.code(), Some(7));
    assert!(!status.success());
    let status = Command::new("sh")
        .args(["-c", "kill -TERM $$"])
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    assert_eq!(status.code(), None);
    assert!(!status.core_dumped());
    assert!(Command::new("true").status().unwrap().success());
}
