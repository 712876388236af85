//! `progeny bench indexer`: a big multithreaded indexer runs a small
//! converter on each of thousands of small documents, the workload of the
//! Recoll measurement in which process creation dominates the work.
//!
//! The run, in [`run_indexer_bench`]:
//! 1. A private temporary directory (removed at the end, on error too)
//!    receives the converter (`csrc/converter.c`, an ordinary dynamically
//!    linked program built with this crate) and a generated corpus
//!    ([`corpus`]), whose expected texts and their checksums the benchmark
//!    computes itself.
//! 2. The indexer maps and writes every page of `memory_bytes` (what makes
//!    `fork` expensive), then starts a pool of worker threads.
//! 3. Each worker takes documents from a shared queue; for each one it starts
//!    the converter with stdin and stdout on pipes, writes the document to
//!    the converter's stdin while reading all of its stdout, waits for it,
//!    and checks its exit status and the checksum of its output. A method
//!    whose converter fails or writes a wrong text is reported as failed,
//!    never as fast.
//! 4. The corpus is cut into `rounds` slices; each round runs every method on
//!    one slice, in an order rotated from round to round, so that drift on a
//!    noisy machine hits every method alike. Each method converts every
//!    document exactly once.
//!
//! Per method the report has real seconds (wall clock), user and system
//! seconds (`getrusage` of this process and of its reaped children, taken
//! around each slice, plus the zygote's own CPU time for `progeny-zygote`),
//! documents per second, and the ratio of real time to fork's.

mod convert;
pub mod corpus;
pub mod plot;
pub mod report;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use crate::machine::{meminfo_bytes, Machine};
use crate::method::Method;
use crate::raw::{self, Ballast, Usage};
use crate::target::TargetDir;
use crate::units::format_bytes;
use convert::Runner;
use corpus::{Corpus, Document};
use report::{
    IndexerConfigRecord, IndexerReport, IndexerResult, RoundFigures, BASELINE_METHOD,
    INDEXER_SCHEMA,
};

/// The converter built by `build.rs` from `csrc/converter.c`.
static CONVERTER_EXECUTABLE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/converter"));

/// The bytes of the built-in converter executable (`csrc/converter.c`), for
/// callers that want to run it themselves.
pub fn converter_executable() -> &'static [u8] {
    CONVERTER_EXECUTABLE
}

/// The methods the indexer runs, in table order (the seed table's first).
pub const METHODS: [Method; 7] = [
    Method::Fork,
    Method::Vfork,
    Method::VforkPidfd,
    Method::PosixSpawn,
    Method::Std,
    Method::Progeny,
    Method::ProgenyZygote,
];

/// Parses a method name the indexer runs.
///
/// Fails, naming the choices, on any other name.
pub fn parse_method(text: &str) -> Result<Method, String> {
    METHODS
        .into_iter()
        .find(|method| method.name() == text)
        .ok_or_else(|| {
            let names: Vec<&str> = METHODS.iter().map(|m| m.name()).collect();
            format!(
                "unknown indexer method {text:?}: choose from {}",
                names.join(", ")
            )
        })
}

/// What to run. [`IndexerConfig::default`] is what `progeny bench indexer`
/// runs without flags.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexerConfig {
    /// Methods, in table order (each one of [`METHODS`]).
    pub methods: Vec<Method>,
    /// Documents in the corpus.
    pub files: usize,
    /// Memory the indexer maps and touches before it starts, in bytes.
    pub memory_bytes: u64,
    /// Worker threads.
    pub threads: u32,
    /// Slices of the corpus; every round runs each method on one slice.
    /// Many short rounds spread a burst of load from elsewhere over all
    /// methods instead of one.
    pub rounds: u32,
    /// Unmeasured conversions per method before the first round (the first
    /// documents of the corpus), so that no method pays for a cold cache.
    pub warmup_files: usize,
    /// The converter to run instead of the built-in one (its output is still
    /// checked against the built-in rules, so a different program fails).
    pub converter: Option<PathBuf>,
}

/// One worker thread per core this process may use.
pub fn default_threads() -> u32 {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 1024) as u32
}

impl Default for IndexerConfig {
    fn default() -> Self {
        IndexerConfig {
            methods: METHODS.to_vec(),
            files: 12_500,
            memory_bytes: 512 << 20,
            threads: default_threads(),
            rounds: 20,
            warmup_files: 16,
            converter: None,
        }
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

impl IndexerConfig {
    /// Checks the configuration before anything runs.
    ///
    /// Fails (with `InvalidInput`) on no method or one the indexer does not
    /// run, `progeny-zygote` without a started zygote
    /// ([`start_zygote`](crate::method::start_zygote)), no document or more
    /// than ten million, threads outside 1 to 1024, rounds outside 1 to the
    /// number of documents, or more memory than is available now (touching it
    /// would invite the OOM killer).
    pub fn validate(&self) -> io::Result<()> {
        if self.methods.is_empty() {
            return Err(invalid("no method to run".into()));
        }
        for method in &self.methods {
            parse_method(method.name()).map_err(invalid)?;
        }
        if self.methods.contains(&Method::ProgenyZygote) && crate::method::zygote().is_none() {
            return Err(invalid(
                "progeny-zygote needs the zygote started while the process was single-threaded"
                    .into(),
            ));
        }
        if self.files == 0 || self.files > 10_000_000 {
            return Err(invalid(format!(
                "{} documents: expected 1 to 10,000,000",
                self.files
            )));
        }
        if !(1..=1024).contains(&self.threads) {
            return Err(invalid(format!(
                "{} threads: expected 1 to 1024",
                self.threads
            )));
        }
        if self.rounds == 0 || self.rounds as usize > self.files {
            return Err(invalid(format!(
                "{} rounds: expected 1 to the number of documents ({})",
                self.rounds, self.files
            )));
        }
        if let Some(available) = meminfo_bytes("MemAvailable") {
            // Keep a margin for the corpus, the converters and the system.
            let margin = 512 << 20;
            if self.memory_bytes > available.saturating_sub(margin) {
                return Err(invalid(format!(
                    "memory {} exceeds what is available ({} free, keeping {} spare)",
                    format_bytes(self.memory_bytes),
                    format_bytes(available),
                    format_bytes(margin)
                )));
            }
        }
        Ok(())
    }
}

/// Progress of a run, for a progress bar.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexerEvent<'a> {
    /// The run will make `conversions` conversions in all (every method,
    /// warm-up included).
    Start {
        /// Conversions planned.
        conversions: u64,
    },
    /// Something that takes a while before measuring (writing the corpus,
    /// touching memory).
    Preparing {
        /// What, for display.
        what: &'a str,
    },
    /// A method starts on a slice.
    Slice {
        /// What runs, for display (`round 2/5 · fork`).
        label: &'a str,
    },
    /// Conversions done so far in the whole run.
    Converted {
        /// Count, warm-up included.
        done: u64,
    },
    /// A method failed.
    Failed {
        /// The method.
        method: Method,
        /// Why.
        error: &'a str,
    },
}

/// Receives [`IndexerEvent`]s, on the thread that called
/// [`run_indexer_bench`]. `()` ignores them.
pub trait IndexerObserver {
    /// Called for each event.
    fn event(&mut self, event: IndexerEvent<'_>);
}

impl IndexerObserver for () {
    fn event(&mut self, _event: IndexerEvent<'_>) {}
}

/// How often the progress is reported while workers run. The clock that
/// measures a slice does not depend on it: the slice ends when the last
/// worker says so.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// CPU times at one instant: this process, its reaped children, the helper.
#[derive(Debug, Clone, Copy)]
struct CpuSnapshot {
    process: (f64, f64),
    children: (f64, f64),
    helper: (f64, f64),
}

/// User and system seconds of process `pid` from `/proc/<pid>/stat`
/// (fields 14 and 15, in clock ticks); zeros when it cannot be read.
fn proc_cpu_time(pid: u32) -> (f64, f64) {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return (0.0, 0.0);
    };
    // The command name (field 2) is in parentheses and may hold spaces;
    // fields are counted after its closing parenthesis.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return (0.0, 0.0);
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = raw::clock_ticks_per_second();
    let field = |index: usize| {
        fields
            .get(index)
            .and_then(|f| f.parse::<f64>().ok())
            .map_or(0.0, |t| t / ticks)
    };
    // fields[0] is field 3 (state), so utime (14) and stime (15) are 11, 12.
    (field(11), field(12))
}

impl CpuSnapshot {
    fn take(helper: Option<u32>) -> io::Result<CpuSnapshot> {
        Ok(CpuSnapshot {
            process: raw::cpu_time(Usage::Process)?,
            children: raw::cpu_time(Usage::Children)?,
            helper: helper.map_or((0.0, 0.0), proc_cpu_time),
        })
    }
}

/// What one method's slice came to.
struct SliceOutcome {
    files: u64,
    output_bytes: u64,
    real_s: f64,
    failure: Option<String>,
}

/// Shared state of a slice's workers.
struct SliceWork<'a> {
    documents: &'a [Document],
    next: AtomicUsize,
    stop: AtomicBool,
    done: &'a AtomicU64,
    files: AtomicU64,
    output_bytes: AtomicU64,
    failure: Mutex<Option<String>>,
}

impl SliceWork<'_> {
    fn fail(&self, error: String) {
        self.stop.store(true, Ordering::Relaxed);
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        failure.get_or_insert(error);
    }

    /// One worker: prepare the method, then convert documents from the
    /// shared queue until it is empty or a conversion failed anywhere.
    fn work(&self, method: Method, converter: &Path) {
        let mut runner = match Runner::new(method, converter) {
            Ok(runner) => runner,
            Err(e) => return self.fail(format!("cannot prepare {method}: {e}")),
        };
        while !self.stop.load(Ordering::Relaxed) {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(document) = self.documents.get(index) else {
                break;
            };
            match runner.convert(document) {
                Ok(bytes) => {
                    self.files.fetch_add(1, Ordering::Relaxed);
                    self.output_bytes.fetch_add(bytes, Ordering::Relaxed);
                    self.done.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => return self.fail(error),
            }
        }
    }
}

/// Runs `method` on `documents` with `threads` workers. The wall clock runs
/// from just before the workers start to the moment the last one is done.
fn run_slice(
    method: Method,
    documents: &[Document],
    threads: u32,
    converter: &Path,
    done: &AtomicU64,
    observer: &mut dyn IndexerObserver,
) -> SliceOutcome {
    let work = SliceWork {
        documents,
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        done,
        files: AtomicU64::new(0),
        output_bytes: AtomicU64::new(0),
        failure: Mutex::new(None),
    };
    let workers = (threads as usize).min(documents.len()).max(1);
    let (finished, finishing) = mpsc::channel::<()>();
    let start = Instant::now();
    let mut end = start;
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let finished = finished.clone();
            let work = &work;
            scope.spawn(move || {
                work.work(method, converter);
                let _ = finished.send(());
            });
        }
        drop(finished);
        let mut remaining = workers;
        while remaining > 0 {
            match finishing.recv_timeout(PROGRESS_INTERVAL) {
                Ok(()) => remaining -= 1,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // Every sender is gone: a worker ended without reporting,
                // which only a panic can do; the scope re-raises it.
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            observer.event(IndexerEvent::Converted {
                done: done.load(Ordering::Relaxed),
            });
        }
        end = Instant::now();
    });
    SliceOutcome {
        files: work.files.load(Ordering::Relaxed),
        output_bytes: work.output_bytes.load(Ordering::Relaxed),
        real_s: (end - start).as_secs_f64(),
        failure: work.failure.into_inner().unwrap_or_else(|p| p.into_inner()),
    }
}

/// Writes the built-in converter into `dir` and runs it once on a sample,
/// comparing its output with [`corpus::extract_text`]. Retries while exec
/// fails with `ETXTBSY`: a child forked by another thread of this process
/// while the file was open for writing holds that descriptor until it execs,
/// and the kernel refuses to run a file open for writing.
///
/// Fails when the file cannot be written, the converter does not run within
/// a second, or its output differs from the benchmark's own extraction.
fn install_converter(dir: &TargetDir) -> io::Result<PathBuf> {
    let path = dir.write_executable("converter", CONVERTER_EXECUTABLE)?;
    let sample = corpus::generate_document(u64::MAX);
    let expected = corpus::extract_text(&sample);
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let output = progeny::Command::new(&path)
            .stdin(progeny::Stdio::piped())
            .stdout(progeny::Stdio::piped())
            .stderr(progeny::Stdio::piped())
            .spawn()
            .and_then(|mut child| child.communicate(&sample));
        match output {
            Ok(output) if output.status.success() && output.stdout == expected => return Ok(path),
            Ok(output) => {
                return Err(io::Error::other(format!(
                    "the built-in converter disagrees with the benchmark's extraction ({}, {} \
                     bytes instead of {}): {}",
                    output.status,
                    output.stdout.len(),
                    expected.len(),
                    String::from_utf8_lossy(&output.stderr).trim()
                )))
            }
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("the built-in converter does not run: {e}"),
                ))
            }
        }
    }
}

/// The state of one method across rounds.
struct Tally {
    method: Method,
    rounds: Vec<RoundFigures>,
    files: u64,
    output_bytes: u64,
    warmup_files: u64,
    failure: Option<String>,
}

/// Runs the indexer benchmark; see the module documentation.
///
/// Fails before measuring when the configuration is invalid
/// ([`IndexerConfig::validate`]), the temporary directory, the converter or
/// the corpus cannot be written, the built-in converter does not agree with
/// the benchmark's own extraction, or the memory cannot be mapped. A method
/// that fails while measuring is a failed result in the report, not an
/// error. The temporary directory is removed in every case.
pub fn run_indexer_bench(
    config: &IndexerConfig,
    observer: &mut dyn IndexerObserver,
) -> io::Result<IndexerReport> {
    config.validate()?;
    let mut methods: Vec<Method> = Vec::new();
    for &method in &config.methods {
        if !methods.contains(&method) {
            methods.push(method);
        }
    }
    let directory = TargetDir::create()?;
    let converter = match &config.converter {
        Some(path) => path.clone(),
        None => install_converter(&directory)?,
    };
    let what = format!("writing {} documents", config.files);
    observer.event(IndexerEvent::Preparing { what: &what });
    let corpus = Corpus::generate(&directory.path().join("corpus"), config.files)?;
    let what = format!("touching {} of memory", format_bytes(config.memory_bytes));
    observer.event(IndexerEvent::Preparing { what: &what });
    let ballast = Ballast::touch(config.memory_bytes).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot map {} of memory: {e}",
                format_bytes(config.memory_bytes)
            ),
        )
    })?;

    let warmup = config.warmup_files.min(corpus.documents.len());
    observer.event(IndexerEvent::Start {
        conversions: ((warmup + corpus.documents.len()) * methods.len()) as u64,
    });
    let zygote_pid = crate::method::zygote().map(|z| z.pid());
    let helper_of = |method: Method| (method == Method::ProgenyZygote).then_some(zygote_pid)?;
    let done = AtomicU64::new(0);
    let mut tallies: Vec<Tally> = methods
        .iter()
        .map(|&method| Tally {
            method,
            rounds: Vec::new(),
            files: 0,
            output_bytes: 0,
            warmup_files: 0,
            failure: None,
        })
        .collect();

    for tally in tallies.iter_mut().filter(|_| warmup > 0) {
        let label = format!("warm-up · {}", tally.method);
        observer.event(IndexerEvent::Slice { label: &label });
        let outcome = run_slice(
            tally.method,
            &corpus.documents[..warmup],
            config.threads,
            &converter,
            &done,
            observer,
        );
        tally.warmup_files = outcome.files;
        if let Some(error) = outcome.failure {
            observer.event(IndexerEvent::Failed {
                method: tally.method,
                error: &error,
            });
            tally.failure = Some(format!("in the warm-up: {error}"));
        }
    }

    let count = corpus.documents.len();
    let rounds = config.rounds as usize;
    for round in 0..rounds {
        let slice = &corpus.documents[round * count / rounds..(round + 1) * count / rounds];
        for offset in 0..tallies.len() {
            // Rotate the order each round: A B C, B C A, C A B, ...
            let tally = &mut tallies[(round + offset) % methods.len()];
            if tally.failure.is_some() {
                continue;
            }
            let label = format!("round {}/{rounds} · {}", round + 1, tally.method);
            observer.event(IndexerEvent::Slice { label: &label });
            let helper = helper_of(tally.method);
            let before = CpuSnapshot::take(helper)?;
            let outcome = run_slice(
                tally.method,
                slice,
                config.threads,
                &converter,
                &done,
                observer,
            );
            let after = CpuSnapshot::take(helper)?;
            tally.files += outcome.files;
            tally.output_bytes += outcome.output_bytes;
            tally.rounds.push(RoundFigures {
                round: round as u32,
                files: outcome.files,
                real_s: outcome.real_s,
                process_user_s: after.process.0 - before.process.0,
                process_sys_s: after.process.1 - before.process.1,
                children_user_s: after.children.0 - before.children.0,
                children_sys_s: after.children.1 - before.children.1,
                helper_user_s: after.helper.0 - before.helper.0,
                helper_sys_s: after.helper.1 - before.helper.1,
            });
            if let Some(error) = outcome.failure {
                observer.event(IndexerEvent::Failed {
                    method: tally.method,
                    error: &error,
                });
                tally.failure = Some(error);
            }
        }
    }
    drop(ballast);

    let mut results: Vec<IndexerResult> = tallies
        .into_iter()
        .map(|tally| {
            let name = tally.method.name();
            match tally.failure {
                Some(error) => IndexerResult::failed(
                    name,
                    error,
                    tally.files,
                    tally.rounds,
                    tally.output_bytes,
                    tally.warmup_files,
                ),
                None => IndexerResult::measured(
                    name,
                    tally.rounds,
                    tally.output_bytes,
                    tally.warmup_files,
                ),
            }
        })
        .collect();
    let baseline = results
        .iter()
        .find(|r| r.method == BASELINE_METHOD && r.ok)
        .and_then(|r| r.real_s)
        .filter(|&s| s > 0.0);
    for result in &mut results {
        result.ratio_to_fork = baseline.and_then(|b| Some(result.real_s? / b));
    }

    let mut notes = vec![
        "user and sys are getrusage of the indexer process and of its reaped children (the \
         converters), taken around each method's slice of every round"
            .to_owned(),
    ];
    if methods.contains(&Method::ProgenyZygote) {
        notes.push(
            "progeny-zygote: the zygote was forked when the benchmark started, before the \
             memory was touched; its own CPU time (from /proc, in clock ticks) is included in \
             user and sys"
                .to_owned(),
        );
    }
    Ok(IndexerReport {
        schema: INDEXER_SCHEMA.to_owned(),
        machine: Machine::current(),
        config: IndexerConfigRecord {
            methods: methods.iter().map(|m| m.name().to_owned()).collect(),
            files: count as u64,
            corpus_bytes: corpus.bytes(),
            text_bytes: corpus.text_bytes(),
            memory_bytes: config.memory_bytes,
            threads: config.threads,
            rounds: config.rounds,
            warmup_files: warmup as u64,
            converter: match &config.converter {
                Some(path) => path.display().to_string(),
                None => "built-in".to_owned(),
            },
        },
        notes,
        results,
    })
}
