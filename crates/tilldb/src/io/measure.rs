//! Measuring what a flush costs: flushed writes per second and their latency, per method and
//! write size, and the recommendation drawn from the numbers.
//!
//! One measurement is a loop of `write_at(write_bytes)` + `flush()` for a fixed time on one of
//! two files:
//! - `Preallocated`: a 16 MiB file written full of zeros and flushed first, then overwritten
//!   sequentially, wrapping around (as a recycled log segment is). `fdatasync` has no metadata
//!   to write here.
//! - `Append`: a new empty file that grows with every write, so every flush also writes the
//!   file size and block allocation: what a log that is not preallocated pays.

use super::{AlignedBuf, DeviceFacts, IoGeometry, Storage};
use crate::FlushMethod;
use crate::error::Result;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

pub use crate::files::MEASURE_FILE_PREFIX;

/// Size of the preallocated file (the same as `pg_test_fsync`'s).
const PREALLOCATED_FILE_BYTES: u64 = 16 << 20;
/// An append run stops growing the file here, whatever the time left.
const APPEND_FILE_BYTES_MAX: u64 = 256 << 20;
/// A measurement stops after this many flushes, whatever the time left.
const OPS_MAX: u64 = 2_000_000;

/// Which file a measurement writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeasureFile {
    /// Overwrites of a preallocated, zero-filled file.
    Preallocated,
    /// Appends to a growing file.
    Append,
}

impl MeasureFile {
    /// The name used in output and JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            MeasureFile::Preallocated => "preallocated",
            MeasureFile::Append => "append",
        }
    }
}

impl fmt::Display for MeasureFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasureSpec {
    /// How each write is made durable.
    pub method: FlushMethod,
    /// The size of each write, in bytes; a direct method needs a multiple of the device's
    /// direct-I/O alignment, else the measurement is skipped.
    pub write_bytes: u32,
    /// Which file is written: preallocated and overwritten, or appended to.
    pub file: MeasureFile,
    /// How long the loop runs (it stops sooner after 2,000,000 flushes or 256 MiB written).
    pub duration: Duration,
}

/// The result of one measurement, or why it was skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// What was measured.
    pub spec: MeasureSpec,
    /// Why the measurement was not run (e.g. alignment forbids the size). Figures are zero.
    pub skipped: Option<String>,
    /// Flushed writes completed.
    pub ops: u64,
    /// How long the loop ran.
    pub elapsed: Duration,
    /// `ops` divided by `elapsed`, per second.
    pub flushes_per_sec: f64,
    /// The median time of one write plus its flush, in microseconds.
    pub p50_us: f64,
    /// The 99th percentile (nearest rank) of one write plus its flush, in microseconds.
    pub p99_us: f64,
    /// The slowest write plus its flush, in microseconds.
    pub max_us: f64,
}

impl Measurement {
    fn skipped(spec: MeasureSpec, why: String) -> Self {
        Measurement {
            spec,
            skipped: Some(why),
            ops: 0,
            elapsed: Duration::ZERO,
            flushes_per_sec: 0.0,
            p50_us: 0.0,
            p99_us: 0.0,
            max_us: 0.0,
        }
    }
}

/// Runs one measurement in directory `dir` through `storage`, and removes its file.
pub fn measure(
    storage: &dyn Storage,
    dir: &Path,
    facts: &DeviceFacts,
    spec: MeasureSpec,
) -> Result<Measurement> {
    measure_sized(storage, dir, facts, spec, PREALLOCATED_FILE_BYTES)
}

fn measure_sized(
    storage: &dyn Storage,
    dir: &Path,
    facts: &DeviceFacts,
    spec: MeasureSpec,
    file_bytes: u64,
) -> Result<Measurement> {
    if spec.method.is_direct() {
        if facts.direct_io == Some(false) {
            return Ok(Measurement::skipped(
                spec,
                "the file system refuses O_DIRECT".into(),
            ));
        }
        let align = facts.direct_align();
        if !spec.write_bytes.is_multiple_of(align) {
            return Ok(Measurement::skipped(
                spec,
                format!("O_DIRECT here needs multiples of {align} bytes"),
            ));
        }
    }
    let path = dir.join(format!(
        "{MEASURE_FILE_PREFIX}{}-{}-{}",
        std::process::id(),
        spec.method,
        spec.write_bytes
    ));
    // The scratch file is ours while we live: its lock (taken first, and creating it) keeps a
    // database create in this directory from removing it as a crashed measurement's.
    let held = storage.lock(&path, super::LockMode::Exclusive)?;
    let result = measure_file(storage, &path, spec, file_bytes);
    let removed = storage.remove(&path);
    drop(held);
    let measurement = result?;
    removed?;
    Ok(measurement)
}

fn measure_file(
    storage: &dyn Storage,
    path: &Path,
    spec: MeasureSpec,
    file_bytes: u64,
) -> Result<Measurement> {
    let file = match storage.open(path, spec.method) {
        // A method this platform (or simulated disk) lacks: macOS refuses the write-through
        // ones, only macOS has the barrier. Skipped, so a probe or a create goes on.
        Err(crate::Error::InvalidOptions(why)) => return Ok(Measurement::skipped(spec, why)),
        other => other?,
    };
    // Empty, as an append run needs: a file of the same name a crashed run left is reused.
    file.set_len(0)?;
    let write_bytes = u64::from(spec.write_bytes);
    if spec.file == MeasureFile::Preallocated {
        file.allocate_zeroed(0, file_bytes)?;
        file.flush()?;
        storage.flush_dir(&super::parent_dir(path))?;
    }
    let mut buf = AlignedBuf::zeroed(spec.write_bytes as usize);
    buf.fill(0xA5);
    let mut latencies_ns: Vec<u64> = Vec::with_capacity(4096);
    let start = Instant::now();
    let mut offset = 0u64;
    while start.elapsed() < spec.duration && (latencies_ns.len() as u64) < OPS_MAX {
        if offset + write_bytes > file_bytes && spec.file == MeasureFile::Preallocated {
            offset = 0;
        }
        if offset + write_bytes > APPEND_FILE_BYTES_MAX {
            break;
        }
        let t = Instant::now();
        file.write_at(&buf, offset)?;
        file.flush()?;
        latencies_ns.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
        offset += write_bytes;
    }
    let elapsed = start.elapsed();
    assert!(
        !latencies_ns.is_empty() || spec.duration.is_zero(),
        "no flush completed"
    );
    latencies_ns.sort_unstable();
    let ops = latencies_ns.len() as u64;
    Ok(Measurement {
        spec,
        skipped: None,
        ops,
        elapsed,
        flushes_per_sec: per_sec(ops, elapsed),
        p50_us: percentile_us(&latencies_ns, 50.0),
        p99_us: percentile_us(&latencies_ns, 99.0),
        max_us: percentile_us(&latencies_ns, 100.0),
    })
}

#[expect(
    clippy::cast_precision_loss,
    reason = "rates are reported with a few digits"
)]
fn per_sec(ops: u64, elapsed: Duration) -> f64 {
    if elapsed.is_zero() {
        0.0
    } else {
        ops as f64 / elapsed.as_secs_f64()
    }
}

/// The `p`th percentile of sorted nanosecond samples, in microseconds (nearest rank).
#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "ranks are small"
)]
fn percentile_us(sorted_ns: &[u64], p: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    debug_assert!(sorted_ns.is_sorted());
    let rank = ((p / 100.0) * sorted_ns.len() as f64).ceil() as usize;
    sorted_ns[rank.clamp(1, sorted_ns.len()) - 1] as f64 / 1000.0
}

/// The order [`choose_flush_method`] breaks ties in.
pub const PREFERENCE: [FlushMethod; 5] = [
    FlushMethod::Fdatasync,
    FlushMethod::Dsync,
    FlushMethod::DirectDsync,
    FlushMethod::Direct,
    FlushMethod::Fsync,
];

/// Flushed-write rates within this factor count as a tie in [`choose_flush_method`].
const TIE_FACTOR: f64 = 1.10;

/// The engine's automatic flush method: a short probe (`per_method` each, on a 1 MiB
/// preallocated file, writes of `block_bytes`) of every durable method the device allows,
/// in the order of [`PREFERENCE`]. The fastest wins, except that a method earlier in that
/// order keeps its place unless a later one is more than 10 % faster: short probes are noisy,
/// and the earlier methods are simpler or cheaper (`fdatasync` writes no timestamps that
/// `fsync` would; buffered before direct).
pub fn choose_flush_method(
    storage: &dyn Storage,
    dir: &Path,
    facts: &DeviceFacts,
    block_bytes: u32,
    per_method: Duration,
) -> Result<(FlushMethod, Vec<Measurement>)> {
    let mut results = Vec::new();
    for method in PREFERENCE {
        let spec = MeasureSpec {
            method,
            write_bytes: block_bytes,
            file: MeasureFile::Preallocated,
            duration: per_method,
        };
        results.push(measure_sized(storage, dir, facts, spec, 1 << 20)?);
    }
    let mut best: Option<&Measurement> = None;
    for m in results.iter().filter(|m| m.skipped.is_none() && m.ops > 0) {
        if best.is_none_or(|b| m.flushes_per_sec > b.flushes_per_sec * TIE_FACTOR) {
            best = Some(m);
        }
    }
    let method = best.map_or(FlushMethod::Fdatasync, |m| m.spec.method);
    Ok((method, results))
}

/// What `till probe` (and the engine's automatic choice) concludes from the facts and the
/// measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    /// The fastest durable method at the log block size on a preallocated file, if any ran.
    pub flush_method: Option<FlushMethod>,
    /// The default log block size for this device.
    pub log_block_bytes: u32,
    /// Whether atomic page writes (`RWF_ATOMIC`) cover the given page size here.
    pub atomic_page_writes: Option<bool>,
    /// Sentences explaining the choice.
    pub reasons: Vec<String>,
    /// Things the user should know: a cache that does not honour flushes, memory-only storage.
    pub warnings: Vec<String>,
}

/// Flushes per second that no spinning disk can sustain: one flush needs at least part of a
/// rotation (7200 rpm = 120 rotations/s); 250/s already assumes a fast disk and luck.
pub const ROTATIONAL_FLUSHES_PER_SEC_MAX: f64 = 250.0;

/// Draws the recommendation from device facts and measurements.
#[must_use]
pub fn recommend(facts: &DeviceFacts, results: &[Measurement], page_bytes: u32) -> Recommendation {
    let log_block_bytes = IoGeometry::default_log_block_bytes(facts);
    let ran = |m: &&Measurement| m.skipped.is_none() && m.ops > 0 && m.spec.method.is_durable();
    let at_block = |m: &&Measurement| {
        m.spec.write_bytes == log_block_bytes && m.spec.file == MeasureFile::Preallocated
    };
    let best = results
        .iter()
        .filter(ran)
        .filter(at_block)
        .max_by(|a, b| a.flushes_per_sec.total_cmp(&b.flushes_per_sec));
    let mut reasons = Vec::new();
    let mut warnings = Vec::new();
    if let Some(best) = best {
        reasons.push(format!(
            "{} is the fastest durable method for {} B log blocks on a preallocated file: {:.0} flushes/s, p99 {:.0} us",
            best.spec.method, log_block_bytes, best.flushes_per_sec, best.p99_us
        ));
        let append = results.iter().filter(ran).find(|m| {
            m.spec.method == best.spec.method
                && m.spec.write_bytes == log_block_bytes
                && m.spec.file == MeasureFile::Append
        });
        if let Some(append) = append.filter(|a| a.flushes_per_sec > 0.0) {
            reasons.push(format!(
                "appending to a growing file instead runs at {:.2}x that rate: log segments are preallocated",
                append.flushes_per_sec / best.flushes_per_sec
            ));
        }
    }
    reasons.push(format!(
        "log block {log_block_bytes} B: the largest of 4096, the physical block ({}) and the direct-I/O alignment ({})",
        show(facts.physical_block_bytes),
        show(facts.dio_offset_align)
    ));
    let atomic_page_writes = facts.atomic_write_covers(page_bytes);
    let fastest = results
        .iter()
        .filter(ran)
        .map(|m| m.flushes_per_sec)
        .fold(0.0, f64::max);
    if facts.rotational == Some(true) && fastest > ROTATIONAL_FLUSHES_PER_SEC_MAX {
        warnings.push(format!(
            "the device says it is rotational, yet it acknowledged {fastest:.0} flushes/s; no spinning disk \
             can do more than ~{ROTATIONAL_FLUSHES_PER_SEC_MAX:.0}/s. Its write cache is not honouring flushes, \
             or the device is virtual and durability depends on the host: test with a power cut before trusting it"
        ));
    }
    if facts.fs_type.as_deref() == Some("tmpfs") {
        warnings.push("tmpfs is memory: nothing here survives a reboot or power cut, whatever the flush method".into());
    }
    if facts.direct_io == Some(false) {
        warnings.push(
            "the file system refuses O_DIRECT: only buffered flush methods can be used".into(),
        );
    }
    if facts.write_cache == Some(super::WriteCache::WriteBack) && facts.fua == Some(false) {
        reasons.push(
            "volatile write cache without FUA: every durable write costs a full cache flush".into(),
        );
    }
    Recommendation {
        flush_method: best.map(|m| m.spec.method),
        log_block_bytes,
        atomic_page_writes,
        reasons,
        warnings,
    }
}

fn show(v: Option<u32>) -> String {
    v.map_or_else(|| "unknown".into(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FileStorage, WriteCache};

    fn fake(method: FlushMethod, write_bytes: u32, file: MeasureFile, rate: f64) -> Measurement {
        Measurement {
            spec: MeasureSpec {
                method,
                write_bytes,
                file,
                duration: Duration::from_secs(1),
            },
            skipped: None,
            ops: 100,
            elapsed: Duration::from_secs(1),
            flushes_per_sec: rate,
            p50_us: 1.0,
            p99_us: 2.0,
            max_us: 3.0,
        }
    }

    #[test]
    fn automatic_choice_measures_every_method_and_picks_a_durable_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let facts = DeviceFacts::for_dir(dir.path()).expect("facts");
        let (method, results) = choose_flush_method(
            &FileStorage::new(),
            dir.path(),
            &facts,
            4096,
            Duration::from_millis(20),
        )
        .expect("choose");
        assert!(method.is_durable());
        assert_eq!(results.len(), FlushMethod::DURABLE.len());
        let chosen = results
            .iter()
            .find(|m| m.spec.method == method)
            .expect("chosen was measured");
        let fastest = results
            .iter()
            .map(|m| m.flushes_per_sec)
            .fold(0.0, f64::max);
        assert!(
            chosen.flushes_per_sec * TIE_FACTOR >= fastest,
            "{results:?}"
        );
        assert!(
            std::fs::read_dir(dir.path()).expect("ls").next().is_none(),
            "probe files left"
        );
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let ns: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        assert!((percentile_us(&ns, 50.0) - 50.0).abs() < 1e-9);
        assert!((percentile_us(&ns, 99.0) - 99.0).abs() < 1e-9);
        assert!((percentile_us(&[7000], 99.0) - 7.0).abs() < 1e-9);
        assert!(percentile_us(&[], 50.0).abs() < 1e-9);
    }

    #[test]
    fn recommends_fastest_preallocated_method_at_block_size() {
        let facts = DeviceFacts {
            physical_block_bytes: Some(4096),
            ..DeviceFacts::default()
        };
        let results = [
            fake(
                FlushMethod::Fdatasync,
                4096,
                MeasureFile::Preallocated,
                1000.0,
            ),
            fake(
                FlushMethod::DirectDsync,
                4096,
                MeasureFile::Preallocated,
                3000.0,
            ),
            fake(FlushMethod::Dsync, 4096, MeasureFile::Append, 9000.0),
            fake(
                FlushMethod::NoSync,
                4096,
                MeasureFile::Preallocated,
                90000.0,
            ),
            fake(FlushMethod::Direct, 512, MeasureFile::Preallocated, 8000.0),
        ];
        let r = recommend(&facts, &results, 16384);
        assert_eq!(r.flush_method, Some(FlushMethod::DirectDsync));
        assert_eq!(r.log_block_bytes, 4096);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn rotational_disk_acknowledging_too_many_flushes_is_flagged() {
        let facts = DeviceFacts {
            rotational: Some(true),
            write_cache: Some(WriteCache::WriteBack),
            ..DeviceFacts::default()
        };
        let slow = [fake(
            FlushMethod::Fdatasync,
            4096,
            MeasureFile::Preallocated,
            120.0,
        )];
        assert!(recommend(&facts, &slow, 16384).warnings.is_empty());
        let fast = [fake(
            FlushMethod::Fdatasync,
            4096,
            MeasureFile::Preallocated,
            4000.0,
        )];
        let r = recommend(&facts, &fast, 16384);
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0].contains("not honouring flushes"),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn measures_real_flushes_and_skips_misaligned_direct_sizes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let facts = DeviceFacts {
            dio_offset_align: Some(4096),
            direct_io: Some(true),
            ..DeviceFacts::default()
        };
        let spec = MeasureSpec {
            method: FlushMethod::Direct,
            write_bytes: 512,
            file: MeasureFile::Append,
            duration: Duration::from_millis(50),
        };
        let m = measure(&FileStorage::new(), dir.path(), &facts, spec).expect("measure");
        assert!(
            m.skipped
                .as_deref()
                .is_some_and(|s| s.contains("multiples of 4096")),
            "{m:?}"
        );
        let spec = MeasureSpec {
            method: FlushMethod::Fdatasync,
            write_bytes: 4096,
            ..spec
        };
        let m = measure(&FileStorage::new(), dir.path(), &facts, spec).expect("measure");
        assert!(m.skipped.is_none());
        assert!(m.ops > 0 && m.flushes_per_sec > 0.0);
        assert!(m.p50_us <= m.p99_us && m.p99_us <= m.max_us);
        assert!(
            std::fs::read_dir(dir.path()).expect("ls").next().is_none(),
            "measure left a file"
        );
    }

    #[test]
    fn a_method_the_platform_lacks_is_skipped_not_an_error_and_leaves_no_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lacking = FlushMethod::ALL
            .into_iter()
            .find(|&m| !crate::io::platform_supports(m))
            .expect("every platform lacks one");
        let spec = MeasureSpec {
            method: lacking,
            write_bytes: 4096,
            file: MeasureFile::Preallocated,
            duration: Duration::from_millis(20),
        };
        let m = measure(
            &FileStorage::new(),
            dir.path(),
            &DeviceFacts::default(),
            spec,
        )
        .expect("a lacking method is skipped, not an error");
        assert!(
            m.skipped
                .as_deref()
                .is_some_and(|s| s.contains(lacking.name())),
            "{m:?}"
        );
        assert!(
            std::fs::read_dir(dir.path()).expect("ls").next().is_none(),
            "measure left a file"
        );
    }
}
