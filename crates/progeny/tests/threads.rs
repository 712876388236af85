//! Many threads spawning at once, while others allocate and take locks: nothing hangs, no child
//! holds another spawn's pipe, and the parent leaks no descriptor.

mod support;

use progeny::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const THREADS: usize = 4;
const SPAWNS: usize = 500;

#[test]
fn four_threads_times_five_hundred_spawns_with_pipes() {
    let before = support::open_fds();
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));

    // Busy neighbours: allocate and lock in a loop, so a child that touched the allocator or a
    // lock while sharing memory with the parent would deadlock or corrupt it.
    let noise: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut v = shared.lock().unwrap();
                    v.push(vec![0u8; 512]);
                    if v.len() > 1000 {
                        v.clear();
                    }
                    drop(v);
                    let _s = format!("{:?}", std::time::Instant::now());
                }
            })
        })
        .collect();

    let spawners: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..SPAWNS {
                    let mut child = Command::new(support::INSPECT)
                        .arg("fds")
                        .stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap();
                    let out = child.communicate(&[]).unwrap();
                    assert!(out.status.success(), "thread {t} spawn {i}: {out:?}");
                    let fds = support::parse_fds(&String::from_utf8(out.stdout).unwrap());
                    // Exactly its own three streams: no pipe of a concurrent spawn leaked in.
                    let numbers: Vec<i32> = fds.iter().map(|(n, _)| *n).collect();
                    assert_eq!(numbers, [0, 1, 2], "thread {t} spawn {i}: {fds:?}");
                }
            })
        })
        .collect();

    // A hang is the failure this test exists to catch: fail loudly instead of blocking CI.
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    for s in spawners {
        while !s.is_finished() {
            assert!(
                std::time::Instant::now() < deadline,
                "spawning threads hung"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for n in noise {
        n.join().unwrap();
    }
    assert_eq!(
        support::open_fds(),
        before,
        "descriptors leaked in the parent"
    );
    assert!(support::children().is_empty(), "children left behind");
}
