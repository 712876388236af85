//! The spawn benchmark's harness: for every parent-memory point it touches
//! that much memory, then for every target and thread count it runs one
//! *cell*: all in-process methods, interleaved in short time slices
//! (A B C, B C A, C A B, ...) so that drift on a noisy machine hits every
//! method alike, each spawn timed by the same monotonic clock in this
//! process. External peers run last, in their own processes.
//!
//! A cell ends for a method when it has `iterations` measured spawns, or when
//! the cell's time budget is spent and it has at least `min_iterations`, or
//! when it fails. So fast methods get many samples and a slow one (fork from
//! a parent with 4 GiB touched) gets at least `min_iterations` without
//! stretching the run.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use crate::machine::{meminfo_bytes, Machine};
use crate::method::{Method, RunFailure, Spawner};
use crate::peers::{PeerLoop, PeerOutcome, Peers};
use crate::raw::Ballast;
use crate::report::SPAWN_SCHEMA;
use crate::report::{CellKey, Clock, SpawnConfigRecord, SpawnReport, SpawnResult, TargetRecord};
use crate::target::{Target, TargetDir, TargetSpec};
use crate::units::format_bytes;

/// What to measure. [`SpawnBenchConfig::default`] is what
/// `progeny bench spawn` runs without flags.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnBenchConfig {
    /// Methods to compare, in table order.
    pub methods: Vec<Method>,
    /// Targets to spawn.
    pub targets: Vec<TargetSpec>,
    /// Parent memory points in bytes (touched before each point's cells).
    pub memory_bytes: Vec<u64>,
    /// Numbers of threads spawning at once.
    pub threads: Vec<u32>,
    /// Most measured spawns per method and cell.
    pub iterations: u64,
    /// Fewest measured spawns per method and cell, even past the budget.
    pub min_iterations: u64,
    /// Unmeasured spawns per method at the start of each cell (cut short
    /// after [`WARMUP_TIME_LIMIT`]).
    pub warmup: u64,
    /// Time budget of one cell, shared by its methods.
    pub budget: Duration,
}

/// A warm-up stops after this long even if fewer spawns than asked were made
/// (one fork from a 4 GiB parent can take tens of milliseconds).
pub const WARMUP_TIME_LIMIT: Duration = Duration::from_millis(50);

impl Default for SpawnBenchConfig {
    fn default() -> Self {
        SpawnBenchConfig {
            methods: Method::ALL.to_vec(),
            targets: TargetSpec::DEFAULTS.to_vec(),
            memory_bytes: vec![0, 256 << 20, 1 << 30, 4 << 30],
            threads: vec![1, 2],
            iterations: 2000,
            min_iterations: 5,
            warmup: 10,
            budget: Duration::from_secs(2),
        }
    }
}

/// Progress of a run, for a progress bar. Steps are cells and peer runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// The run starts; it has `steps` steps.
    Start {
        /// Number of steps (cells plus peer runs).
        steps: u64,
    },
    /// Touching parent memory before the next cells.
    Touching {
        /// Bytes being touched.
        memory_bytes: u64,
    },
    /// Preparing something that takes a while (building the Go peer).
    Preparing {
        /// What is being prepared, for display.
        what: &'a str,
    },
    /// Step `step` (0-based) starts.
    Step {
        /// Index of the step.
        step: u64,
        /// What it measures, for display.
        label: &'a str,
    },
    /// Within the current step, `fraction` (0..=1) of its budget is spent.
    StepProgress {
        /// Fraction of the step's time budget used so far.
        fraction: f64,
    },
    /// Something the reader should know (a skipped peer, say).
    Note(&'a str),
}

/// Receives [`Event`]s during a run. `()` ignores them.
pub trait Observer {
    /// Called for each event, on the benchmark's main thread.
    fn event(&mut self, event: Event<'_>);
}

impl Observer for () {
    fn event(&mut self, _event: Event<'_>) {}
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn dedup<T: PartialEq + Clone>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out
}

impl SpawnBenchConfig {
    /// Checks the configuration before anything runs.
    ///
    /// Fails (with `InvalidInput`) on an empty list, zero threads or
    /// iterations, `min_iterations > iterations`, a zero budget, or a memory
    /// point larger than the memory available now (touching it would invite
    /// the OOM killer).
    pub fn validate(&self) -> io::Result<()> {
        if self.methods.is_empty() {
            return Err(invalid("no method to run".into()));
        }
        if self.targets.is_empty() {
            return Err(invalid("no target to run".into()));
        }
        if self.memory_bytes.is_empty() {
            return Err(invalid("no parent memory point".into()));
        }
        if self.threads.is_empty() || self.threads.contains(&0) {
            return Err(invalid("threads must be at least 1".into()));
        }
        if self.iterations == 0 {
            return Err(invalid("iterations must be at least 1".into()));
        }
        if self.min_iterations > self.iterations {
            return Err(invalid(format!(
                "min-iterations ({}) exceeds iterations ({})",
                self.min_iterations, self.iterations
            )));
        }
        if self.budget.is_zero() {
            return Err(invalid("the time budget must be positive".into()));
        }
        let largest = self.memory_bytes.iter().copied().max().unwrap_or(0);
        if let Some(available) = meminfo_bytes("MemAvailable") {
            // Keep a margin for the benchmark itself and the rest of the
            // system.
            let margin = 512 << 20;
            if largest > available.saturating_sub(margin) {
                return Err(invalid(format!(
                    "parent memory {} exceeds what is available ({} free, keeping {} spare)",
                    format_bytes(largest),
                    format_bytes(available),
                    format_bytes(margin)
                )));
            }
        }
        Ok(())
    }

    /// The configuration as recorded in the report.
    fn record(&self, targets: &[Target]) -> SpawnConfigRecord {
        SpawnConfigRecord {
            methods: self.methods.iter().map(|m| m.name().to_owned()).collect(),
            targets: targets
                .iter()
                .map(|t| TargetRecord {
                    name: t.name.clone(),
                    program: t.program.display().to_string(),
                    args: t
                        .args
                        .iter()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect(),
                    about: t.about.clone(),
                })
                .collect(),
            memory_bytes: self.memory_bytes.clone(),
            threads: self.threads.clone(),
            iterations: self.iterations,
            min_iterations: self.min_iterations,
            warmup: self.warmup,
            budget_s: self.budget.as_secs_f64(),
        }
    }
}

/// Runs the spawn benchmark and returns its report.
///
/// Fails before measuring when the configuration is invalid (see
/// [`SpawnBenchConfig::validate`]) or the built-in targets cannot be written
/// to the temporary directory. A method that fails is not an error: it is
/// reported in its results with `ok: false`. So is a memory point that
/// cannot be mapped.
pub fn run_spawn_bench(
    config: &SpawnBenchConfig,
    observer: &mut dyn Observer,
) -> io::Result<SpawnReport> {
    config.validate()?;
    let methods = dedup(&config.methods);
    let memory_points = dedup(&config.memory_bytes);
    let thread_counts = dedup(&config.threads);
    let directory = TargetDir::create()?;
    let targets: Vec<Target> = dedup(&config.targets)
        .iter()
        .map(|spec| directory.resolve(spec))
        .collect::<io::Result<_>>()?;

    let in_process: Vec<Method> = methods
        .iter()
        .copied()
        .filter(|m| !m.is_external())
        .collect();
    let external: Vec<Method> = methods
        .iter()
        .copied()
        .filter(|m| m.is_external())
        .collect();

    let mut notes = Vec::new();
    if methods.contains(&Method::CloneFloor) {
        notes.push(
            "clone-floor does not exec the target: it is the cost of creating and reaping a process"
                .to_owned(),
        );
    }
    if methods.contains(&Method::ProgenyZygote) {
        notes.push(
            "progeny-zygote spawns through a server process forked when the benchmark started,              before any parent memory was touched"
                .to_owned(),
        );
    }
    if !external.is_empty() {
        notes.push(
            "external peers (python-*, go-*) are timed by their own clock in their own process \
             (there is no other way); their parent memory is their own (listed as 0) and they run \
             on one thread"
                .to_owned(),
        );
    }

    let cells = if in_process.is_empty() {
        0
    } else {
        memory_points.len() * targets.len() * thread_counts.len()
    };
    let steps = (cells + external.len() * targets.len()) as u64;
    observer.event(Event::Start { steps });

    let mut results = Vec::new();
    let mut step = 0u64;
    if !in_process.is_empty() {
        for &memory_bytes in &memory_points {
            observer.event(Event::Touching { memory_bytes });
            let ballast = Ballast::touch(memory_bytes);
            for target in &targets {
                for &threads in &thread_counts {
                    let label = format!(
                        "{} · {} parent memory · {} thread{}",
                        target.name,
                        format_bytes(memory_bytes),
                        threads,
                        if threads == 1 { "" } else { "s" }
                    );
                    observer.event(Event::Step {
                        step,
                        label: &label,
                    });
                    step += 1;
                    let cell = Cell {
                        methods: &in_process,
                        target,
                        memory_bytes,
                        threads,
                        config,
                    };
                    match &ballast {
                        Ok(_) => results.extend(cell.run(observer)),
                        Err(error) => results.extend(cell.all_failed(&format!(
                            "cannot map {} of parent memory: {error}",
                            format_bytes(memory_bytes)
                        ))),
                    }
                }
            }
            drop(ballast);
        }
    }

    if !external.is_empty() {
        observer.event(Event::Preparing {
            what: "preparing the external peers (the first Go build takes a few seconds)",
        });
        let peers = Peers::prepare(&directory, &external);
        let knobs = PeerLoop {
            iterations: config.iterations,
            budget_s: config.budget.as_secs_f64() / (in_process.len() + 1) as f64,
            warmup: config.warmup,
            min_iterations: config.min_iterations,
        };
        for &method in &external {
            for target in &targets {
                let label = format!("{} · {method} (external)", target.name);
                observer.event(Event::Step {
                    step,
                    label: &label,
                });
                step += 1;
                let key = CellKey {
                    method: method.name().to_owned(),
                    target: target.name.clone(),
                    memory_bytes: 0,
                    threads: 1,
                    execs_target: true,
                    clock: Clock::External,
                };
                match peers.run(method, target, knobs) {
                    PeerOutcome::Measured(figures) => results.push(
                        SpawnResult::measured(key, figures.samples_ns, figures.wall_ns)
                            .with_warmup(knobs.warmup),
                    ),
                    PeerOutcome::Failed(error) => {
                        results.push(SpawnResult::failed(key, error, Vec::new()))
                    }
                    PeerOutcome::Skipped(why) => {
                        let note = format!("{method} skipped: {why}");
                        observer.event(Event::Note(&note));
                        if !notes.contains(&note) {
                            notes.push(note);
                        }
                    }
                }
            }
        }
    }

    Ok(SpawnReport {
        schema: SPAWN_SCHEMA.to_owned(),
        machine: Machine::current(),
        config: config.record(&targets),
        notes,
        results,
    })
}

/// The state of one method within a cell.
struct Tally {
    method: Method,
    samples_ns: Vec<u64>,
    wall_ns: u64,
    warmup: u64,
    failure: Option<String>,
    done: bool,
}

/// One cell: every in-process method on one target, memory point and thread
/// count.
struct Cell<'a> {
    methods: &'a [Method],
    target: &'a Target,
    memory_bytes: u64,
    threads: u32,
    config: &'a SpawnBenchConfig,
}

/// A batch for the spawning threads: run `method_index` until `slice` has
/// passed (at least one spawn each) or `remaining` is used up.
struct Batch {
    method_index: usize,
    slice: Duration,
    remaining: Arc<AtomicU64>,
}

/// What one thread measured in one batch.
struct BatchOutcome {
    samples_ns: Vec<u64>,
    failure: Option<RunFailure>,
}

/// Runs spawns of one prepared method until the batch's slice is over or its
/// quota is used up. Each spawn is timed from just before the spawn to just
/// after the wait returned, on the monotonic clock.
fn run_batch(spawner: &mut Spawner, slice: Duration, remaining: &AtomicU64) -> BatchOutcome {
    let deadline = Instant::now() + slice;
    let mut samples_ns = Vec::new();
    loop {
        // Claim one spawn of the quota shared by all threads.
        if remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(1)
            })
            .is_err()
        {
            break;
        }
        let before = Instant::now();
        let result = spawner.run_once();
        let after = Instant::now();
        if let Err(failure) = result {
            return BatchOutcome {
                samples_ns,
                failure: Some(failure),
            };
        }
        samples_ns.push(u64::try_from((after - before).as_nanos()).unwrap_or(u64::MAX));
        if after >= deadline {
            break;
        }
    }
    BatchOutcome {
        samples_ns,
        failure: None,
    }
}

impl Cell<'_> {
    fn key(&self, method: Method) -> CellKey {
        CellKey {
            method: method.name().to_owned(),
            target: self.target.name.clone(),
            memory_bytes: self.memory_bytes,
            threads: self.threads,
            execs_target: method.execs_target(),
            clock: Clock::Harness,
        }
    }

    fn all_failed(&self, error: &str) -> Vec<SpawnResult> {
        self.methods
            .iter()
            .map(|&m| SpawnResult::failed(self.key(m), error.to_owned(), Vec::new()))
            .collect()
    }

    fn prepare(&self) -> Vec<Result<Spawner, String>> {
        self.methods
            .iter()
            .map(|&m| Spawner::new(m, self.target).map_err(|e| format!("cannot prepare {m}: {e}")))
            .collect()
    }

    /// Measures the cell. The calling thread is spawning thread 0; the others
    /// are started for the cell and each prepares its own spawners.
    fn run(&self, observer: &mut dyn Observer) -> Vec<SpawnResult> {
        let mut spawners = self.prepare();
        let mut tallies: Vec<Tally> = self
            .methods
            .iter()
            .map(|&method| Tally {
                method,
                samples_ns: Vec::new(),
                wall_ns: 0,
                warmup: 0,
                failure: None,
                done: false,
            })
            .collect();

        // Warm-up, on this thread: page cache, dynamic loader caches, the
        // allocator's arenas.
        for (tally, spawner) in tallies.iter_mut().zip(spawners.iter_mut()) {
            match spawner {
                Err(error) => tally.failure = Some(error.clone()),
                Ok(spawner) => {
                    let start = Instant::now();
                    for _ in 0..self.config.warmup {
                        if let Err(failure) = spawner.run_once() {
                            tally.failure = Some(failure.0);
                            break;
                        }
                        tally.warmup += 1;
                        if start.elapsed() >= WARMUP_TIME_LIMIT {
                            break;
                        }
                    }
                }
            }
            tally.done = tally.failure.is_some();
        }

        let helpers = self.threads as usize - 1;
        let slice = (self.config.budget / (self.methods.len() as u32 * 10))
            .clamp(Duration::from_millis(1), Duration::from_millis(50));
        let barrier = Barrier::new(helpers + 1);
        std::thread::scope(|scope| {
            let (outcome_sender, outcomes) = mpsc::channel::<(usize, BatchOutcome)>();
            let mut job_senders = Vec::with_capacity(helpers);
            for _ in 0..helpers {
                let (job_sender, jobs) = mpsc::channel::<Batch>();
                job_senders.push(job_sender);
                let outcome_sender = outcome_sender.clone();
                let barrier = &barrier;
                scope.spawn(move || {
                    let mut spawners = self.prepare();
                    while let Ok(batch) = jobs.recv() {
                        barrier.wait();
                        let outcome = match &mut spawners[batch.method_index] {
                            Ok(spawner) => run_batch(spawner, batch.slice, &batch.remaining),
                            Err(error) => BatchOutcome {
                                samples_ns: Vec::new(),
                                failure: Some(RunFailure(error.clone())),
                            },
                        };
                        if outcome_sender.send((batch.method_index, outcome)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(outcome_sender);

            let cell_start = Instant::now();
            let mut round = 0usize;
            loop {
                let active: Vec<usize> = (0..tallies.len()).filter(|&i| !tallies[i].done).collect();
                if active.is_empty() {
                    break;
                }
                // Rotate the order each round: A B C, B C A, C A B, ...
                for offset in 0..active.len() {
                    let index = active[(round + offset) % active.len()];
                    let tally = &mut tallies[index];
                    let quota = self
                        .config
                        .iterations
                        .saturating_sub(tally.samples_ns.len() as u64);
                    let remaining = Arc::new(AtomicU64::new(quota));
                    for sender in &job_senders {
                        // A helper that is gone shows up as missing samples;
                        // it cannot be gone while this scope runs.
                        let _ = sender.send(Batch {
                            method_index: index,
                            slice,
                            remaining: Arc::clone(&remaining),
                        });
                    }
                    barrier.wait();
                    let started = Instant::now();
                    let mut outcome = match &mut spawners[index] {
                        Ok(spawner) => run_batch(spawner, slice, &remaining),
                        Err(error) => BatchOutcome {
                            samples_ns: Vec::new(),
                            failure: Some(RunFailure(error.clone())),
                        },
                    };
                    let mut helper_outcomes = Vec::with_capacity(helpers);
                    for _ in 0..helpers {
                        if let Ok((_, helper_outcome)) = outcomes.recv() {
                            helper_outcomes.push(helper_outcome);
                        }
                    }
                    let wall = started.elapsed();
                    tally.wall_ns += u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX);
                    tally.samples_ns.append(&mut outcome.samples_ns);
                    if tally.failure.is_none() {
                        tally.failure = outcome.failure.take().map(|f| f.0);
                    }
                    for mut helper_outcome in helper_outcomes {
                        tally.samples_ns.append(&mut helper_outcome.samples_ns);
                        if tally.failure.is_none() {
                            tally.failure = helper_outcome.failure.take().map(|f| f.0);
                        }
                    }
                }
                round += 1;
                let elapsed = cell_start.elapsed();
                for tally in &mut tallies {
                    let count = tally.samples_ns.len() as u64;
                    tally.done = tally.done
                        || tally.failure.is_some()
                        || count >= self.config.iterations
                        || (elapsed >= self.config.budget && count >= self.config.min_iterations);
                }
                observer.event(Event::StepProgress {
                    fraction: (elapsed.as_secs_f64() / self.config.budget.as_secs_f64()).min(1.0),
                });
            }
            // Dropping the job senders ends the helpers' loops.
            drop(job_senders);
        });

        tallies
            .into_iter()
            .map(|tally| {
                let key = self.key(tally.method);
                match tally.failure {
                    Some(error) => SpawnResult::failed(key, error, tally.samples_ns),
                    None => SpawnResult::measured(key, tally.samples_ns, tally.wall_ns),
                }
                .with_warmup(tally.warmup)
            })
            .collect()
    }
}
