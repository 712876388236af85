//! The copy-on-write bill: what a live snapshot child costs the original's writes.
//!
//! [`probe`] maps and touches `pages` pages, then writes one byte to each of `writes` random
//! pages twice, timing every write: once with no snapshot, once while a [`snapshot_me`] child
//! shares the pages (each first write to a shared page faults and copies it). Both runs write
//! to pages that are present and dirty, so the child is the only difference.
//!
//! # References
//! - [fork(2), copy-on-write](https://man7.org/linux/man-pages/man2/fork.2.html)

use std::io;
use std::time::{Duration, Instant};

use crate::self_snapshot::snapshot_me;

/// What to measure.
#[derive(Clone, Debug)]
pub struct CowOptions {
    /// Pages mapped and touched before measuring.
    pub pages: usize,
    /// Random pages written (each at most once per run), at most `pages`.
    pub writes: usize,
    /// Kill the snapshot child after this long (as an analysis would finish), `None` to keep it
    /// for the whole run.
    pub child_lifetime: Option<Duration>,
    /// Seed of the page order.
    pub seed: u64,
    /// Measure in a forked worker process snapshotted from outside with
    /// [`Snapshot::take`](crate::Snapshot::take) (ptrace clone injection), instead of in this
    /// process with [`snapshot_me`]. The caller must be single-threaded (it forks).
    pub external: bool,
}

impl Default for CowOptions {
    fn default() -> Self {
        CowOptions {
            pages: 100_000,
            writes: 100_000,
            child_lifetime: None,
            seed: 0x5eed,
            external: false,
        }
    }
}

/// The timed writes of one run.
#[derive(Clone, Debug)]
pub struct CowRun {
    /// Per-write latency in nanoseconds, in write order.
    pub latencies_ns: Vec<u64>,
    /// Wall time of the whole run (sum of writes and timer overhead).
    pub total: Duration,
    /// Minor page faults the writing thread took during the run (`getrusage(RUSAGE_THREAD)`).
    pub minor_faults: u64,
}

/// Summary figures of one run's latencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencySummary {
    /// Fastest write, ns.
    pub min: u64,
    /// Median write, ns.
    pub median: u64,
    /// 99th percentile, ns.
    pub p99: u64,
    /// Slowest write, ns.
    pub max: u64,
    /// Sum of all writes, ns.
    pub sum: u64,
}

impl CowRun {
    /// Min, median, p99, max and sum of the latencies.
    pub fn summary(&self) -> LatencySummary {
        summarize(&self.latencies_ns)
    }

    /// Median latency (ns) of the writes in each window `[lo, hi)` of write indices, for the
    /// windows 0-10, 10-100, 100-1000, ... up to the run's length: how the cost decays.
    pub fn decay(&self) -> Vec<(usize, usize, u64)> {
        let mut windows = Vec::new();
        let (mut lo, mut hi) = (0usize, 10usize);
        while lo < self.latencies_ns.len() {
            let end = hi.min(self.latencies_ns.len());
            windows.push((lo, end, summarize(&self.latencies_ns[lo..end]).median));
            lo = hi;
            hi *= 10;
        }
        windows
    }
}

fn summarize(values: &[u64]) -> LatencySummary {
    if values.is_empty() {
        return LatencySummary {
            min: 0,
            median: 0,
            p99: 0,
            max: 0,
            sum: 0,
        };
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    LatencySummary {
        min: sorted[0],
        median: at(0.5),
        p99: at(0.99),
        max: sorted[sorted.len() - 1],
        sum: sorted.iter().sum(),
    }
}

/// Both runs of a probe.
#[derive(Clone, Debug)]
pub struct CowReport {
    /// The options used.
    pub options: CowOptions,
    /// Writes with no snapshot child.
    pub baseline: CowRun,
    /// Writes while a snapshot child shares the pages.
    pub with_snapshot: CowRun,
    /// Writes done before the child was killed (all of them if it lived throughout).
    pub writes_while_child_lived: usize,
}

impl CowReport {
    /// Extra time the snapshot cost the writes: sum with child minus sum without.
    pub fn extra(&self) -> Duration {
        let with = self.with_snapshot.summary().sum;
        let without = self.baseline.summary().sum;
        Duration::from_nanos(with.saturating_sub(without))
    }
}

/// An anonymous private mapping, unmapped on drop.
struct Region {
    addr: *mut u8,
    len: usize,
}

impl Region {
    fn new(len: usize) -> io::Result<Region> {
        Ok(Region {
            addr: map_anonymous(len, libc::MAP_PRIVATE)?,
            len,
        })
    }

    /// Writes `value` to the first byte of page `page`, volatile so the compiler keeps every
    /// write (the whole point is the fault it may take).
    #[inline(always)]
    fn touch(&self, page: usize, value: u8) {
        assert!(page * PAGE < self.len);
        // SAFETY: the offset is inside the mapping (checked above), which is writable.
        unsafe { self.addr.add(page * PAGE).write_volatile(value) };
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`, which nothing borrows any more.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

const PAGE: usize = 4096;

/// Runs the probe (see the module docs).
///
/// # Errors
/// Fails if the memory cannot be mapped or the snapshot child cannot be created; `writes`
/// larger than `pages` or zero pages are refused as `InvalidInput`.
pub fn probe(options: &CowOptions) -> io::Result<CowReport> {
    if options.pages == 0 || options.writes == 0 || options.writes > options.pages {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "need 0 < writes ({}) <= pages ({})",
                options.writes, options.pages
            ),
        ));
    }
    if options.external {
        return probe_external(options);
    }
    let region = Region::new(options.pages * PAGE)?;
    for page in 0..options.pages {
        region.touch(page, 1);
    }
    let order = random_order(options.pages, options.writes, options.seed);

    let baseline = timed_writes(&region, &order, 2, None);
    let snapshot = snapshot_me()?;
    let mut snapshot = Some(snapshot);
    let mut lived = order.len();
    let with_snapshot = timed_writes(
        &region,
        &order,
        3,
        options.child_lifetime.map(|lifetime| {
            (lifetime, &mut snapshot, &mut lived) as (Duration, &mut Option<_>, &mut usize)
        }),
    );
    drop(snapshot);
    Ok(CowReport {
        options: options.clone(),
        baseline,
        with_snapshot,
        writes_while_child_lived: lived,
    })
}

/// The external flavour of [`probe`]: a forked worker does the writes; this process
/// snapshots it from outside between its two runs.
fn probe_external(options: &CowOptions) -> io::Result<CowReport> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    if !status
        .lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Threads:", "1"])
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the external copy-on-write probe forks, so it must run in a single-threaded process",
        ));
    }
    let writes = options.writes;
    // Results travel back through shared memory: [killed flag, lived, baseline faults, with
    // faults, baseline ns, with ns, baseline latencies..., with latencies...].
    let words = 6 + 2 * writes;
    let shared = SharedWords::new(words)?;
    let (ready_read, ready_write) = pipe()?;
    let (go_read, go_write) = pipe()?;
    // SAFETY: the caller is single-threaded (checked above), so the child may allocate and run
    // ordinary code; it only ever leaves through `_exit`.
    let worker = unsafe { libc::fork() };
    if worker < 0 {
        return Err(io::Error::last_os_error());
    }
    if worker == 0 {
        // The parent's ends, or our reads would never see end of file.
        close(ready_read);
        close(go_write);
        worker_main(options, &shared, ready_write, go_read);
    }
    close(ready_write);
    close(go_read);
    let outcome = (|| {
        read_byte(ready_read)?;
        let snapshot = crate::Snapshot::take(worker, &crate::SnapshotOptions::default())
            .map_err(io::Error::from)?;
        write_byte(go_write)?;
        let mut snapshot = Some(snapshot);
        if let Some(lifetime) = options.child_lifetime {
            std::thread::sleep(lifetime);
            shared.set(0, 1);
            snapshot = None;
        }
        read_byte(ready_read)?;
        drop(snapshot);
        Ok::<(), io::Error>(())
    })();
    close(go_write);
    close(ready_read);
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a live local.
    unsafe { libc::waitpid(worker, &mut status, 0) };
    outcome?;
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(io::Error::other("the copy-on-write worker failed"));
    }
    let run = |faults: usize, total: usize, first: usize| CowRun {
        latencies_ns: (first..first + writes).map(|i| shared.get(i)).collect(),
        total: Duration::from_nanos(shared.get(total)),
        minor_faults: shared.get(faults),
    };
    let lived = if shared.get(0) == 1 {
        shared.get(1) as usize
    } else {
        writes
    };
    Ok(CowReport {
        options: options.clone(),
        baseline: run(2, 4, 6),
        with_snapshot: run(3, 5, 6 + writes),
        writes_while_child_lived: lived,
    })
}

/// The forked worker: baseline run, tell the parent, wait for the snapshot, measured run, tell
/// the parent, wait to be released, exit.
fn worker_main(options: &CowOptions, shared: &SharedWords, ready: i32, go: i32) -> ! {
    let region = match Region::new(options.pages * PAGE) {
        Ok(region) => region,
        // SAFETY: _exit ends the forked worker without running the parent's destructors.
        Err(_) => unsafe { libc::_exit(1) },
    };
    for page in 0..options.pages {
        region.touch(page, 1);
    }
    let order = random_order(options.pages, options.writes, options.seed);
    let baseline = timed_writes(&region, &order, 2, None);
    let ok = write_byte(ready).is_ok() && read_byte(go).is_ok();
    let mut latencies = Vec::with_capacity(order.len());
    let faults_before = minor_faults();
    let start = Instant::now();
    let mut lived = order.len();
    for (index, &page) in order.iter().enumerate() {
        if lived == order.len() && shared.get(0) == 1 {
            lived = index;
        }
        let before = Instant::now();
        region.touch(page, 3);
        latencies.push(before.elapsed().as_nanos() as u64);
    }
    let total = start.elapsed();
    let faults = minor_faults().saturating_sub(faults_before);
    shared.set(1, lived as u64);
    shared.set(2, baseline.minor_faults);
    shared.set(3, faults);
    shared.set(4, baseline.total.as_nanos() as u64);
    shared.set(5, total.as_nanos() as u64);
    for (i, ns) in baseline.latencies_ns.iter().chain(&latencies).enumerate() {
        shared.set(6 + i, *ns);
    }
    let ok = ok && write_byte(ready).is_ok();
    // Stay alive until the parent has dropped its snapshot (which makes us reap the child).
    let _ = read_byte(go);
    // SAFETY: _exit ends the forked worker without running the parent's destructors.
    unsafe { libc::_exit(if ok { 0 } else { 1 }) }
}

/// An anonymous shared mapping of `u64` words, visible to a forked worker.
struct SharedWords {
    addr: *mut u64,
    words: usize,
}

impl SharedWords {
    fn new(words: usize) -> io::Result<SharedWords> {
        Ok(SharedWords {
            addr: map_anonymous(words * 8, libc::MAP_SHARED)?.cast(),
            words,
        })
    }

    fn get(&self, index: usize) -> u64 {
        assert!(index < self.words);
        // SAFETY: in bounds (checked); volatile because another process writes it.
        unsafe { self.addr.add(index).read_volatile() }
    }

    fn set(&self, index: usize, value: u64) {
        assert!(index < self.words);
        // SAFETY: in bounds (checked); volatile because another process reads it.
        unsafe { self.addr.add(index).write_volatile(value) }
    }
}

impl Drop for SharedWords {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.addr.cast(), self.words * 8) };
    }
}

/// A new readable and writable anonymous mapping of `len` bytes, `MAP_PRIVATE` or `MAP_SHARED`
/// as `sharing` says; the caller unmaps it.
///
/// # References
/// - [`mmap(2)`](https://man7.org/linux/man-pages/man2/mmap.2.html)
fn map_anonymous(len: usize, sharing: libc::c_int) -> io::Result<*mut u8> {
    // SAFETY: anonymous mapping with no address hint, so no existing memory is affected; the
    // result is checked.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            sharing | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(addr.cast())
}

fn pipe() -> io::Result<(i32, i32)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a live array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

fn close(fd: i32) {
    // SAFETY: closes a descriptor this module created and closes only once.
    unsafe { libc::close(fd) };
}

fn read_byte(fd: i32) -> io::Result<()> {
    let mut byte = 0u8;
    loop {
        // SAFETY: reads one byte into a live local.
        let n = unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) };
        match n {
            1 => return Ok(()),
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => continue,
            _ => return Err(io::Error::last_os_error()),
        }
    }
}

fn write_byte(fd: i32) -> io::Result<()> {
    // SAFETY: writes one byte from a live local.
    if unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) } == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

type Lifetime<'a> = (Duration, &'a mut Option<crate::SelfSnapshot>, &'a mut usize);

fn timed_writes(
    region: &Region,
    order: &[usize],
    value: u8,
    mut lifetime: Option<Lifetime>,
) -> CowRun {
    let mut latencies = Vec::with_capacity(order.len());
    let faults_before = minor_faults();
    let start = Instant::now();
    for (index, &page) in order.iter().enumerate() {
        if let Some((limit, snapshot, lived)) = lifetime.as_mut() {
            if snapshot.is_some() && start.elapsed() >= *limit {
                **snapshot = None;
                **lived = index;
            }
        }
        let before = Instant::now();
        region.touch(page, value);
        latencies.push(before.elapsed().as_nanos() as u64);
    }
    let total = start.elapsed();
    CowRun {
        latencies_ns: latencies,
        total,
        minor_faults: minor_faults().saturating_sub(faults_before),
    }
}

/// Minor faults of the calling thread so far.
///
/// # References
/// - [getrusage(2)](https://man7.org/linux/man-pages/man2/getrusage.2.html)
fn minor_faults() -> u64 {
    // SAFETY: rusage is plain data; zeroed is valid and the kernel fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live local of the right type.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    usage.ru_minflt as u64
}

/// The first `count` entries of a seeded random permutation of `0..pages` (xorshift64*,
/// Fisher-Yates): distinct pages in an order the prefetcher cannot follow.
fn random_order(pages: usize, count: usize, seed: u64) -> Vec<usize> {
    let mut state = seed | 1;
    let mut next = || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut all: Vec<usize> = (0..pages).collect();
    for i in 0..count {
        let j = i + (next() % (pages - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(count);
    all
}
