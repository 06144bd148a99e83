//! What every commit benchmark compares against: the storage it runs on (real, or with a
//! SIMULATED flush latency) and the raw flushed-write rate of one writer on it.

use super::scratch::ScratchDir;
use super::slow_storage::slow;
use indicatif::ProgressBar;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tilldb::FlushMethod;
use tilldb::io::{
    DeviceFacts, FileStorage, IoGeometry, MeasureFile, MeasureSpec, Measurement, Storage, measure,
};

/// Longest accepted simulated flush latency: 1 s per flush already makes a row crawl.
pub const SYNC_LATENCY_US_MAX: u64 = 1_000_000;

/// Checks `--sync-latency-us`.
pub fn check_sync_latency(us: u64) -> Result<(), String> {
    if us > SYNC_LATENCY_US_MAX {
        return Err(format!(
            "--sync-latency-us {us} is more than the {SYNC_LATENCY_US_MAX} (1 s) supported"
        ));
    }
    Ok(())
}

/// The real file system, or, when `sync_latency_us > 0`, the real file system whose flushes
/// each take that much longer, one at a time (see `slow_storage.rs`).
pub fn storage(sync_latency_us: u64) -> Arc<dyn Storage> {
    let real: Arc<dyn Storage> = Arc::new(FileStorage::new());
    if sync_latency_us == 0 {
        real
    } else {
        Arc::new(slow(real, Duration::from_micros(sync_latency_us)))
    }
}

/// The flushed-write rate of one writer writing one `block_bytes` block and flushing it with
/// `method`, in a loop on a preallocated file in `dir`, for `duration`. `Ok(Err(why))` when the
/// device cannot do it (e.g. `O_DIRECT` refused by the file system).
pub fn flushed_writes(
    storage: &dyn Storage,
    dir: &Path,
    facts: &DeviceFacts,
    method: FlushMethod,
    block_bytes: u32,
    duration: Duration,
) -> Result<Result<Measurement, String>, Box<dyn std::error::Error>> {
    let spec = MeasureSpec {
        method,
        write_bytes: block_bytes,
        file: MeasureFile::Preallocated,
        duration,
    };
    let raw = measure(storage, dir, facts, spec)?;
    if let Some(why) = raw.skipped {
        return Ok(Err(why));
    }
    assert!(
        raw.ops > 0,
        "a measurement that ran completed no flushed write"
    );
    Ok(Ok(raw))
}

/// Where a thread-count benchmark (`bench log`, `bench commit`) starts: a fresh run
/// directory, the device facts there, the log block the method uses, and the raw
/// flushed-write rate of one writer at that block (one step of `bar`).
pub struct RunStart {
    pub scratch: ScratchDir,
    pub facts: DeviceFacts,
    pub block_bytes: u32,
    pub raw: Measurement,
}

/// The raw measurement runs this long, or the benchmark's `--seconds` if shorter.
const RAW_SECONDS_MAX: f64 = 1.0;

/// Creates the run directory `PREFIX-PID-N` in `parent`, resolves the log block for `method`
/// (`block_bytes`: the flag, or the device's) and measures the raw rate.
#[expect(
    clippy::too_many_arguments,
    reason = "each is one flag of the benchmarks"
)]
pub fn start_run(
    storage: &dyn Storage,
    parent: &Path,
    prefix: &str,
    method: FlushMethod,
    block_bytes: Option<u32>,
    page_bytes: u32,
    seconds: f64,
    bar: &ProgressBar,
) -> Result<RunStart, Box<dyn std::error::Error>> {
    let scratch = ScratchDir::for_run(parent, prefix)?;
    let facts = storage.device_facts(scratch.path())?;
    let block_bytes = IoGeometry::resolve(&facts, method, block_bytes, page_bytes)?.log_block_bytes;
    bar.set_message(format!("raw flushed writes of {block_bytes} B"));
    let raw = raw_at_block(
        storage,
        scratch.path(),
        &facts,
        method,
        block_bytes,
        seconds,
    )?;
    bar.inc(1);
    Ok(RunStart {
        scratch,
        facts,
        block_bytes,
        raw,
    })
}

/// The raw flushed-write rate of `method` at `block_bytes`, for at most a second (or
/// `seconds`), in `dir`; an error when the device refuses the method.
fn raw_at_block(
    storage: &dyn Storage,
    dir: &Path,
    facts: &DeviceFacts,
    method: FlushMethod,
    block_bytes: u32,
    seconds: f64,
) -> Result<Measurement, Box<dyn std::error::Error>> {
    let duration = Duration::from_secs_f64(seconds.min(RAW_SECONDS_MAX));
    Ok(
        flushed_writes(storage, dir, facts, method, block_bytes, duration)?
            .map_err(|why| format!("cannot measure raw flushed writes: {why}"))?,
    )
}

/// What a store benchmark (`bench store`, `bench torn`) compares its commits with: the raw
/// flushed-write rate in `dir` of the database's flush method at the log block the device
/// gives it (`page_bytes`: the database's page size), and that block.
pub fn raw_for_store(
    storage: &dyn Storage,
    dir: &Path,
    method: FlushMethod,
    page_bytes: u32,
    seconds: f64,
) -> Result<(Measurement, u32), Box<dyn std::error::Error>> {
    let facts = storage.device_facts(dir)?;
    let block_bytes = IoGeometry::resolve(&facts, method, None, page_bytes)?.log_block_bytes;
    let raw = raw_at_block(storage, dir, &facts, method, block_bytes, seconds)?;
    Ok((raw, block_bytes))
}

/// The report line every commit benchmark prints about the raw rate; `extra` ends the
/// parenthesis (e.g. "; SIMULATED +8000 us per flush").
pub fn raw_line(raw: &Measurement, block_bytes: u32, method: FlushMethod, extra: &str) -> String {
    format!(
        "Raw flushed writes: {:.0}/s, p50 {:.0} us, p99 {:.0} us ({block_bytes} B write + {method} \
         on a preallocated file, one writer, {:.2} s{extra})",
        raw.flushes_per_sec,
        raw.p50_us,
        raw.p99_us,
        raw.elapsed.as_secs_f64(),
    )
}
