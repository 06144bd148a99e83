//! What every commit benchmark compares against: the storage it runs on (real, or with a
//! SIMULATED flush latency) and the raw flushed-write rate of one writer on it.

use super::slow_storage::SlowStorage;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tilldb::FlushMethod;
use tilldb::io::{
    DeviceFacts, FileStorage, MeasureFile, MeasureSpec, Measurement, Storage, measure,
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
        Arc::new(SlowStorage::new(
            real,
            Duration::from_micros(sync_latency_us),
        ))
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
