//! Spawn cost against the parent's memory: `/bin/true` spawned and waited 2,000 times with the
//! parent holding 0 and 2 GiB of touched memory, through progeny's default backend and through
//! `fork`. Prints the median microseconds per spawn and the ratio.
//!
//! ```text
//! cargo run --release -p progeny --example cost [-- ITERATIONS]
//! ```
//!
//! `fork` copies the parent's page tables, so its cost grows with the memory; `clone3` with
//! `CLONE_VM` shares them, so it stays flat. Runs of the two backends are interleaved in rounds so
//! that drift on a noisy machine hits both alike. (The full comparison is `progeny bench spawn`.)

use progeny::{Backend, Command, Stdio};
use std::time::Instant;

const GIB: usize = 1 << 30;

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let backends = [Backend::Clone3, Backend::Fork];
    println!("/bin/true, {iterations} spawns per cell, median µs per spawn+wait");
    println!(
        "{:>10} {:>12} {:>12} {:>12}",
        "memory", "progeny", "fork", "fork/progeny"
    );
    let mut ballast: Vec<u8> = Vec::new();
    for memory in [0, 2 * GIB] {
        // Touch every page so the page tables really exist (a fresh allocation maps nothing).
        ballast.resize(memory, 0);
        for page in ballast.chunks_mut(4096) {
            page[0] = 1;
        }
        let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(iterations); backends.len()];
        let rounds = 20;
        for _ in 0..rounds {
            for (b, backend) in backends.iter().enumerate() {
                let mut cmd = Command::new("/bin/true");
                cmd.stdout(Stdio::null()).backend(*backend);
                for _ in 0..iterations / rounds {
                    let start = Instant::now();
                    let status = cmd.status().expect("spawn /bin/true");
                    samples[b].push(start.elapsed().as_secs_f64() * 1e6);
                    assert!(status.success(), "/bin/true failed under {backend:?}");
                }
            }
        }
        let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
        println!(
            "{:>8}Gi {:>12.1} {:>12.1} {:>12.2}",
            memory / GIB,
            medians[0],
            medians[1],
            medians[1] / medians[0]
        );
    }
    std::hint::black_box(&ballast);
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}
