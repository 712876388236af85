//! The external copy-on-write probe: a forked worker snapshotted from outside by ptrace clone
//! injection. It forks, so it runs without the test harness's threads (`harness = false`).

use progeny_snapshot::cow::{probe, CowOptions};

fn main() {
    let report = probe(&CowOptions {
        pages: 4000,
        writes: 2000,
        external: true,
        ..CowOptions::default()
    })
    .expect("external probe");
    assert_eq!(report.baseline.latencies_ns.len(), 2000);
    assert_eq!(report.with_snapshot.latencies_ns.len(), 2000);
    // Behaviour, not speed: only the run with a live snapshot child takes copy faults.
    assert!(
        report.baseline.minor_faults < 100,
        "{}",
        report.baseline.minor_faults
    );
    assert!(
        report.with_snapshot.minor_faults >= 2000,
        "{}",
        report.with_snapshot.minor_faults
    );
    assert_eq!(report.writes_while_child_lived, 2000);

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
