//! The C programs tests and benchmarks snapshot.
//!
//! They are compiled by the build script and embedded here, so a benchmark run from any
//! directory can start them: [`path`] writes the program once to a private directory under
//! the system temporary directory and returns its path. See `targets/snapshot_target.c` for
//! the modes (`checksum`, `read`, `nanosleep`, `poll`, `futex`, `counter`, `seccomp-*`,
//! `bench`, `parked`).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Mutex;

const SNAPSHOT_TARGET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/snapshot_target"));

static WRITTEN: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The path of the `snapshot_target` program, written out on first use.
///
/// The file name carries a hash of the program, so different builds never share a file, and
/// it is written under a temporary name and renamed into place, so a concurrent user never
/// executes a half-written file.
///
/// # Errors
/// Fails if the temporary directory is not writable.
pub fn path() -> io::Result<PathBuf> {
    let mut written = WRITTEN.lock().unwrap_or_else(|poison| poison.into_inner());
    if let Some(path) = written.as_ref() {
        return Ok(path.clone());
    }
    let hash = SNAPSHOT_TARGET
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir().join(format!("progeny-snapshot-targets-{uid}"));
    fs::create_dir_all(&dir)?;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))?;
    let path = dir.join(format!("snapshot_target-{hash:016x}"));
    if !path.exists() {
        let staging = dir.join(format!(
            "snapshot_target-{hash:016x}.{}",
            std::process::id()
        ));
        {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o755)
                .custom_flags(libc::O_CLOEXEC)
                .open(&staging)?;
            file.write_all(SNAPSHOT_TARGET)?;
        }
        fs::rename(&staging, &path)?;
    }
    *written = Some(path.clone());
    Ok(path)
}
