//! Running `till bench kv`: the keys once, then each engine in turn through every row of
//! `workload.rs` on a fresh store. No engine error or panic ends the run: the row is
//! recorded as failed (or chunked) and the next one runs.
//!
//! ```text
//!  per engine:  open ─ write rows ─ read rows ─ removals ─ length ─ close ─ size before
//!                     (a failed write: recover(), which reopens tilldb)
//!               reopen ─ compact (timed) ─ close ─ size after ─ remove the directories
//! ```

use super::KvArgs;
use super::engines::{self, BoxError, Commit, Compacted, KvStore, Settings};
use super::reads;
use super::report::{EngineRun, KvRun, Outcome, Status};
use super::workload::{self, BATCH_ROWS, Key, Keys, SORTED_TXN_ROWS, Workload};
use crate::disk_usage::DiskUsage;
use crate::machine::Setting;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// Rows per transaction when a one-transaction row is refused and run again in parts
/// (about 9 MB of keys and values: far below tilldb's largest log record, 64 MiB).
pub const CHUNK_ROWS: usize = 50_000;
/// Most rows accepted: the keys are held in memory (24 B each, plus the engines' own).
const ROWS_MAX: u64 = 100_000_000;
/// Fewest rows: every derived count (N/10 ranges, N/5 sorted inserts) is at least one.
const ROWS_MIN: u64 = 10;
/// The default cache, when a quarter of the machine's memory is at least this.
const CACHE_BYTES_DEFAULT: u64 = 4 << 30;
/// The smallest `--cache-bytes`: tilldb's pool needs eight 16 KiB pages, and less measures
/// nothing a user would run.
const CACHE_BYTES_MIN: u64 = 1 << 20;

pub fn run(args: &KvArgs) -> Result<(), Box<dyn std::error::Error>> {
    let engines = validate(args)?;
    let rows = usize::try_from(args.rows)?;
    let keys = Keys::generate(rows);
    let scratch = crate::scratch::ScratchDir::for_run(&args.dir, "kv")?;
    let setting = Setting::read(scratch.path())?;
    let cache_bytes = args
        .cache_bytes
        .unwrap_or_else(|| default_cache_bytes(setting.memory_bytes));
    let settings = Settings {
        cache_bytes,
        flush_method: args.flush_method,
        torn_page_guard: args.torn_page_guard,
        write_buffer_bytes: args.write_buffer_bytes,
    };
    let workloads = Workload::all(&args.threads);
    let bar = crate::progress_bar((engines.len() * workloads.len()) as u64);
    let mut runs = Vec::with_capacity(engines.len());
    for &engine in &engines {
        let mut ctx = EngineCtx {
            engine,
            dir: scratch.path().join(engines::name(engine)),
            copy_dir: scratch
                .path()
                .join(format!("{}-compacted", engines::name(engine))),
            settings,
            keys: &keys,
            bar: &bar,
            store: None,
            results: Vec::with_capacity(workloads.len()),
            notes: None,
        };
        ctx.run(&workloads);
        // A store a failed close left open still owns its files: drop it before removing them.
        drop(ctx.store.take());
        for dir in [&ctx.dir, &ctx.copy_dir] {
            if dir.exists() {
                std::fs::remove_dir_all(dir)
                    .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
            }
        }
        runs.push(EngineRun {
            engine,
            notes: ctx.notes,
            results: ctx.results,
        });
    }
    bar.finish_and_clear();
    let run = KvRun {
        dir: scratch
            .path()
            .parent()
            .unwrap_or(scratch.path())
            .to_path_buf(),
        setting,
        rows: args.rows,
        cache_bytes,
        write_buffer_bytes: args.write_buffer_bytes,
        threads: args.threads.clone(),
        workloads,
        engines: runs,
    };
    drop(scratch);
    if let Some(path) = &args.plot {
        crate::png::write_plot(path, &super::plot::render(&run))?;
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&super::report::json(&run))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    super::report::print_text(&run);
    if let Some(path) = &args.json {
        println!("JSON written to {}", path.display());
    }
    if let Some(path) = &args.plot {
        println!("Plot written to {}", path.display());
    }
    Ok(())
}

/// Checks the flags before anything touches the disk; returns the engines to run.
fn validate(args: &KvArgs) -> Result<Vec<super::Engine>, String> {
    crate::check_threads_and_seconds(&args.threads, 1.0)?;
    if let Some(bytes) = args.cache_bytes.filter(|&b| b < CACHE_BYTES_MIN) {
        return Err(format!(
            "--cache-bytes must be at least {CACHE_BYTES_MIN}, not {bytes}"
        ));
    }
    if !(ROWS_MIN..=ROWS_MAX).contains(&args.rows) {
        return Err(format!(
            "--rows must be from {ROWS_MIN} to {ROWS_MAX}, not {}",
            args.rows
        ));
    }
    let mut engines = if args.engines.is_empty() {
        engines::default_engines()
    } else {
        args.engines.clone()
    };
    if engines.iter().any(|&e| !engines::is_built(e)) {
        return Err(engines::ROCKSDB_NOT_BUILT.into());
    }
    if args.encrypt && !engines.contains(&super::Engine::TilldbEncrypted) {
        let at = engines
            .iter()
            .position(|&e| e == super::Engine::Tilldb)
            .map_or(0, |i| i + 1);
        engines.insert(at, super::Engine::TilldbEncrypted);
    }
    let mut seen = Vec::with_capacity(engines.len());
    engines.retain(|e| {
        let first = !seen.contains(e);
        seen.push(*e);
        first
    });
    Ok(engines)
}

/// 4 GiB, or a quarter of the machine's memory when that is less (the engines' caches
/// are filled one engine at a time).
fn default_cache_bytes(memory_bytes: Option<u64>) -> u64 {
    memory_bytes.map_or(CACHE_BYTES_DEFAULT, |m| {
        (m / 4).clamp(CACHE_BYTES_MIN, CACHE_BYTES_DEFAULT)
    })
}

/// One engine's pass through the rows.
struct EngineCtx<'a> {
    engine: super::Engine,
    dir: std::path::PathBuf,
    copy_dir: std::path::PathBuf,
    settings: Settings,
    keys: &'a Keys,
    bar: &'a indicatif::ProgressBar,
    /// `None` when closed, or when an open failed.
    store: Option<Box<dyn KvStore>>,
    results: Vec<Outcome>,
    notes: Option<String>,
}

impl EngineCtx<'_> {
    fn run(&mut self, workloads: &[Workload]) {
        let name = engines::name(self.engine);
        let opened = std::fs::create_dir(&self.dir)
            .map_err(BoxError::from)
            .and_then(|()| engines::open(self.engine, &self.dir, self.settings));
        let open_error = match opened {
            Ok(store) => {
                self.notes = store.notes();
                self.store = Some(store);
                None
            }
            Err(e) => Some(format!("open: {e}")),
        };
        for &workload in workloads {
            self.bar.set_message(format!(
                "{name}: {}",
                workload.label(self.keys.loaded.len() as u64)
            ));
            let outcome = match &open_error {
                Some(e) => Outcome::failed(workload, e.clone()),
                None => self.row(workload),
            };
            self.results.push(outcome);
            self.bar.inc(1);
        }
    }

    /// Runs one row; a panic in it becomes a failed row.
    fn row(&mut self, workload: Workload) -> Outcome {
        match catch_unwind(AssertUnwindSafe(|| self.row_inner(workload))) {
            Ok(outcome) => outcome,
            Err(panic) => {
                let text = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".to_owned());
                self.recover();
                Outcome::failed(workload, format!("panicked: {text}"))
            }
        }
    }

    fn row_inner(&mut self, workload: Workload) -> Outcome {
        let keys = self.keys;
        match workload {
            Workload::BulkLoad => self.one_txn_row(workload, &keys.loaded, true),
            Workload::IndividualWrites => {
                let txns: Vec<&[Key]> = keys.individual.chunks(1).collect();
                self.writes(workload, &txns, Commit::Sync)
            }
            Workload::BatchWrites => {
                let txns: Vec<&[Key]> = keys.batches.chunks(BATCH_ROWS).collect();
                self.writes(workload, &txns, Commit::Sync)
            }
            Workload::NoFlushWrites => {
                let txns: Vec<&[Key]> = keys.no_flush.chunks(1).collect();
                self.writes(workload, &txns, Commit::NoFlush)
            }
            Workload::SortedInserts => {
                let txns: Vec<&[Key]> = keys.sorted.chunks(SORTED_TXN_ROWS).collect();
                self.writes(workload, &txns, Commit::Sync)
            }
            Workload::PointReads(threads) => self.point_reads(workload, threads),
            Workload::RangeReads => self.range_reads(workload),
            Workload::Removals => self.one_txn_row(workload, keys.removed(), false),
            Workload::Length => self.length(workload),
            Workload::PopFirstLast => self.pops(workload),
            Workload::Retain => self.retain(workload),
            Workload::ExtractIf => self.extract(workload),
            Workload::SortedLoad => {
                let timed = self.store().and_then(|store| {
                    let started = Instant::now();
                    store.append_txn(&keys.appended)?;
                    Ok(started.elapsed())
                });
                self.rate_or_failed(workload, keys.appended.len() as u64, timed)
            }
            Workload::SizeBeforeCompaction => self.size_before(workload),
            Workload::SizeAfterCompaction => self.size_after(workload),
        }
    }

    fn store(&mut self) -> Result<&mut Box<dyn KvStore>, BoxError> {
        self.store
            .as_mut()
            .ok_or_else(|| "the store is not open (an earlier close or reopen failed)".into())
    }

    /// After a failed write: lets the engine make itself usable again (tilldb reopens).
    fn recover(&mut self) {
        if let Some(store) = self.store.as_mut()
            && let Err(e) = store.recover()
        {
            self.store = None;
            let note = format!("reopen after an error failed: {e}");
            self.notes = Some(
                self.notes
                    .take()
                    .map_or(note.clone(), |n| format!("{n}; {note}")),
            );
        }
    }

    /// Each of `txns` in a transaction of its own, at `commit`.
    fn writes(&mut self, workload: Workload, txns: &[&[Key]], commit: Commit) -> Outcome {
        // Rows, which are the commits where each transaction has one.
        let rows: usize = txns.iter().map(|t| t.len()).sum();
        match self.timed_txns(txns, commit) {
            Ok(elapsed) => Outcome::rate(workload, rows as u64, elapsed),
            Err(e) => {
                self.recover();
                Outcome::failed(workload, e.to_string())
            }
        }
    }

    fn timed_txns(&mut self, txns: &[&[Key]], commit: Commit) -> Result<Duration, BoxError> {
        let store = self.store()?;
        let started = Instant::now();
        for keys in txns {
            store.put_txn(keys, commit)?;
        }
        Ok(started.elapsed())
    }

    /// The bulk load (`put`) or the removals: one durable transaction; if the engine refuses
    /// it, the same rows again in transactions of [`CHUNK_ROWS`], reported as chunked.
    fn one_txn_row(&mut self, workload: Workload, keys: &[Key], put: bool) -> Outcome {
        let write = |store: &mut Box<dyn KvStore>, keys: &[Key]| {
            if put {
                store.put_txn(keys, Commit::Sync)
            } else {
                store.remove_txn(keys, Commit::Sync)
            }
        };
        let started = Instant::now();
        let first = self.store().and_then(|store| write(store, keys));
        let refused = match first {
            Ok(()) => return Outcome::rate(workload, keys.len() as u64, started.elapsed()),
            Err(e) => format!(
                "one transaction of {} rows failed after {:.1} s: {e}",
                keys.len(),
                started.elapsed().as_secs_f64()
            ),
        };
        self.recover();
        let started = Instant::now();
        let chunked = self.store().and_then(|store| {
            keys.chunks(CHUNK_ROWS)
                .try_for_each(|chunk| write(store, chunk))
        });
        match chunked {
            Ok(()) => {
                let mut outcome = Outcome::rate(workload, keys.len() as u64, started.elapsed());
                outcome.status = Status::Chunked;
                outcome.error = Some(format!(
                    "{refused}; then {} transactions of at most {CHUNK_ROWS} rows",
                    keys.len().div_ceil(CHUNK_ROWS)
                ));
                outcome
            }
            Err(e) => {
                self.recover();
                Outcome::failed(
                    workload,
                    format!("{refused}; in transactions of {CHUNK_ROWS} rows too: {e}"),
                )
            }
        }
    }

    /// N random gets of loaded keys from `threads` threads (`reads.rs`).
    fn point_reads(&mut self, workload: Workload, threads: usize) -> Outcome {
        let keys: &[Key] = &self.keys.loaded;
        let timed = self
            .store()
            .map_err(|e| e.to_string())
            .and_then(|store| reads::point_reads(&**store, keys, threads));
        match timed {
            Ok(t) if t.found == t.operations => {
                let mut outcome = Outcome::rate(workload, t.operations, t.elapsed);
                outcome.threads = Some(threads);
                outcome
            }
            Ok(t) => Outcome::failed(
                workload,
                format!(
                    "found {} of {} loaded keys (the bulk load failed?)",
                    t.found, t.operations
                ),
            ),
            Err(e) => Outcome::failed(workload, e),
        }
    }

    /// N/10 ranges of 10 entries from random loaded keys (`reads.rs`).
    fn range_reads(&mut self, workload: Workload) -> Outcome {
        let keys: &[Key] = &self.keys.loaded;
        let timed = self
            .store()
            .and_then(|store| reads::range_reads(&**store, keys));
        match timed {
            Ok(t) => {
                let mut outcome = Outcome::rate(workload, t.operations, t.elapsed);
                outcome.entries = Some(t.found);
                outcome
            }
            Err(e) => Outcome::failed(workload, e.to_string()),
        }
    }

    /// A rate of `rows` over the time taken, or the row failed (the store recovered).
    fn rate_or_failed(
        &mut self,
        workload: Workload,
        rows: u64,
        timed: Result<Duration, BoxError>,
    ) -> Outcome {
        match timed {
            Ok(elapsed) => Outcome::rate(workload, rows, elapsed),
            Err(e) => {
                self.recover();
                Outcome::failed(workload, e.to_string())
            }
        }
    }

    /// N/100 pops in one transaction, alternately the first entry and the last.
    fn pops(&mut self, workload: Workload) -> Outcome {
        let pops = workload::pops(self.keys.loaded.len() as u64);
        let timed = self.store().and_then(|store| {
            let started = Instant::now();
            let taken = store.pop_txn(pops)?;
            let elapsed = started.elapsed();
            if taken == pops {
                Ok(elapsed)
            } else {
                Err(format!("took {taken} of {pops} pops").into())
            }
        });
        self.rate_or_failed(workload, pops as u64, timed)
    }

    /// One transaction removing what `workload::keep` rejects; the rate counts the rows read
    /// (the table's entries before it, counted untimed), `entries` the rows removed.
    fn retain(&mut self, workload: Workload) -> Outcome {
        let timed = self.store().and_then(|store| {
            let before = store.count_entries()?;
            let started = Instant::now();
            let removed = store.retain_txn(workload::keep)?;
            Ok((before, removed, started.elapsed()))
        });
        match timed {
            Ok((before, removed, elapsed)) => {
                let mut outcome = Outcome::rate(workload, before, elapsed);
                outcome.entries = Some(removed);
                outcome
            }
            Err(e) => self.rate_or_failed(workload, 0, Err(e)),
        }
    }

    /// One transaction removing and returning the entries of a tenth of the key space that
    /// `workload::take` selects; the rate counts the rows taken.
    fn extract(&mut self, workload: Workload) -> Outcome {
        let timed = self.store().and_then(|store| {
            let started = Instant::now();
            let taken =
                store.extract_txn(workload::EXTRACT_FROM, workload::EXTRACT_TO, workload::take)?;
            Ok((taken, started.elapsed()))
        });
        match timed {
            Ok((taken, elapsed)) => {
                let mut outcome = Outcome::rate(workload, taken, elapsed);
                outcome.entries = Some(taken);
                outcome
            }
            Err(e) => self.rate_or_failed(workload, 0, Err(e)),
        }
    }

    /// The entry count, timed, checked against what the rows before it left when every
    /// write row succeeded.
    fn length(&mut self, workload: Workload) -> Outcome {
        let writes_ok = self.results.iter().all(|r| {
            !matches!(
                r.workload,
                Workload::BulkLoad
                    | Workload::IndividualWrites
                    | Workload::BatchWrites
                    | Workload::NoFlushWrites
                    | Workload::SortedInserts
                    | Workload::Removals
            ) || r.status != Status::Failed
        });
        let started = Instant::now();
        let counted = self.store().and_then(|store| store.count_entries());
        let elapsed = started.elapsed();
        let expected = self.keys.expected_entries();
        match counted {
            Ok(count) if writes_ok && count != expected => Outcome::failed(
                workload,
                format!("counted {count} entries, expected {expected}"),
            ),
            Ok(count) => {
                let mut outcome = Outcome::measured(workload, 1, elapsed, millis(elapsed));
                outcome.entries = Some(count);
                outcome
            }
            Err(e) => Outcome::failed(workload, e.to_string()),
        }
    }

    /// Closes the store (timed: the row's seconds) and measures its directory.
    fn size_before(&mut self, workload: Workload) -> Outcome {
        let started = Instant::now();
        let closed = match self.store.take() {
            Some(store) => store.close(),
            None => Err("the store is not open".into()),
        };
        let elapsed = started.elapsed();
        if let Err(e) = closed {
            return Outcome::failed(workload, format!("close: {e}"));
        }
        match DiskUsage::of(&self.dir) {
            Ok(usage) => bytes_outcome(workload, &usage, elapsed),
            Err(e) => Outcome::failed(workload, e),
        }
    }

    /// Reopens, compacts (timed), closes, and measures the compacted store.
    fn size_after(&mut self, workload: Workload) -> Outcome {
        let compacted = (|| -> Result<(Compacted, Duration), BoxError> {
            let store = match self.store.take() {
                Some(store) => store,
                None => engines::open(self.engine, &self.dir, self.settings)?,
            };
            let store = self.store.insert(store);
            let started = Instant::now();
            let how = store.compact(&self.copy_dir)?;
            let elapsed = started.elapsed();
            self.store.take().map_or(Ok(()), KvStore::close)?;
            Ok((how, elapsed))
        })();
        let (how, elapsed) = match compacted {
            Ok(done) => done,
            Err(e) => return Outcome::failed(workload, format!("compaction: {e}")),
        };
        let dir = match how {
            Compacted::InPlace => &self.dir,
            Compacted::Copy => &self.copy_dir,
        };
        match DiskUsage::of(dir) {
            Ok(usage) => bytes_outcome(workload, &usage, elapsed),
            Err(e) => Outcome::failed(workload, e),
        }
    }
}

fn bytes_outcome(workload: Workload, usage: &DiskUsage, elapsed: Duration) -> Outcome {
    #[expect(
        clippy::cast_precision_loss,
        reason = "a size reported with a few digits"
    )]
    let value = usage.allocated_bytes as f64;
    let mut outcome = Outcome::measured(workload, 1, elapsed, value);
    outcome.parts = Some(usage.parts.iter().cloned().collect());
    outcome
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_out_of_bounds_are_refused() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: KvArgs,
        }
        for rows in ["5", "1000000000"] {
            let cli = Cli::try_parse_from(["kv", "--rows", rows]).expect("parses");
            assert!(validate(&cli.args).is_err(), "--rows {rows} accepted");
        }
        let cli = Cli::try_parse_from(["kv", "--threads", "1,0"]).expect("parses");
        assert!(validate(&cli.args).is_err());
    }

    /// A store that refuses a transaction of more than `max_rows` rows, as tilldb refuses one
    /// larger than a log record, and panics when counted.
    struct Refusing {
        max_rows: usize,
        rows: u64,
        recovered: std::sync::Arc<std::sync::atomic::AtomicU32>,
    }

    impl KvStore for Refusing {
        fn put_txn(&mut self, keys: &[Key], _commit: Commit) -> Result<(), BoxError> {
            if keys.len() > self.max_rows {
                return Err(format!("too large: {} rows", keys.len()).into());
            }
            self.rows += keys.len() as u64;
            Ok(())
        }
        fn remove_txn(&mut self, keys: &[Key], commit: Commit) -> Result<(), BoxError> {
            self.put_txn(keys, commit)
        }
        fn reader(&self) -> Result<Box<dyn engines::KvReader + '_>, BoxError> {
            Err("no reads".into())
        }
        fn count_entries(&self) -> Result<u64, BoxError> {
            panic!("count_entries is broken")
        }
        fn compact(&mut self, _copy_dir: &std::path::Path) -> Result<Compacted, BoxError> {
            Ok(Compacted::InPlace)
        }
        fn recover(&mut self) -> Result<(), BoxError> {
            self.recovered
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
        fn close(self: Box<Self>) -> Result<(), BoxError> {
            Ok(())
        }
    }

    /// The bench must outlive its engines: a refused bulk load is loaded in chunks and says
    /// so, a refused batch fails alone, a failed reader and a panic fail their rows, and the
    /// rows after them still run.
    #[test]
    fn engine_errors_and_panics_fail_rows_not_the_run() {
        let keys = Keys::generate(3 * CHUNK_ROWS / 2);
        let bar = indicatif::ProgressBar::hidden();
        let recovered = std::sync::Arc::default();
        let base = tempfile::tempdir().expect("tempdir");
        let mut ctx = EngineCtx {
            engine: super::super::Engine::Tilldb,
            dir: base.path().join("store"),
            copy_dir: base.path().join("copy"),
            settings: Settings {
                cache_bytes: CACHE_BYTES_MIN,
                flush_method: None,
                torn_page_guard: None,
                write_buffer_bytes: 0,
            },
            keys: &keys,
            bar: &bar,
            store: Some(Box::new(Refusing {
                max_rows: CHUNK_ROWS,
                rows: 0,
                recovered: std::sync::Arc::clone(&recovered),
            })),
            results: Vec::new(),
            notes: None,
        };
        let bulk = ctx.row(Workload::BulkLoad);
        assert_eq!(bulk.status, Status::Chunked, "{bulk:?}");
        let error = bulk.error.as_deref().expect("why it was chunked");
        assert!(error.contains("too large: 75000 rows"), "{error}");
        assert!(error.contains("2 transactions"), "{error}");
        assert_eq!(bulk.operations, 75_000);
        let batches = ctx.row(Workload::BatchWrites);
        assert_eq!(batches.status, Status::Ok, "{batches:?}");
        let reads = ctx.row(Workload::PointReads(2));
        assert_eq!(reads.status, Status::Failed);
        assert!(
            reads
                .error
                .as_deref()
                .is_some_and(|e| e.contains("no reads"))
        );
        let length = ctx.row(Workload::Length);
        assert_eq!(length.status, Status::Failed);
        let error = length.error.as_deref().expect("the panic's text");
        assert!(error.contains("count_entries is broken"), "{error}");
        let removals = ctx.row(Workload::Removals);
        assert_eq!(removals.status, Status::Ok, "{removals:?}");
        // The refused bulk load and the panic each asked the store to recover.
        assert_eq!(recovered.load(std::sync::atomic::Ordering::Relaxed), 2);
    }
}
