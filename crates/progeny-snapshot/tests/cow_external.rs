//! The external copy-on-write probe: a forked worker snapshotted from outside by ptrace clone
//! injection. It forks, so it runs without the test harness's threads (`harness = false`).

mod common;

use progeny_snapshot::cow::{probe, CowOptions};

fn main() {
    let report = probe(&CowOptions {
        pages: 4000,
        writes: 2000,
        external: true,
        ..CowOptions::default()
    })
    .expect("external probe");
    // Behaviour, not speed: only the run with a live snapshot child takes copy faults.
    common::assert_copy_faults_only_with_a_snapshot(&report, 2000);

    // A multi-threaded caller is refused: it could not fork safely.
    let refused = std::thread::spawn(|| {
        probe(&CowOptions {
            pages: 10,
            writes: 10,
            external: true,
            ..CowOptions::default()
        })
        .map(drop)
    })
    .join()
    .unwrap();
    assert_eq!(
        refused.unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    println!("cow_external: ok");
}
