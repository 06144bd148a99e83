//! A small database damaged systematically (TESTPLAN F9, tier "bad input"; oracle 7).
//!
//! The database: three tables (the default one, `left`, `right`) of a few hundred keys, the
//! default table two levels deep, two values long enough for overflow chains, pages freed
//! and reused, two checkpoints, then a tail of commits in the log after the last one that
//! crosses a log segment switch. Every commit is `Sync` and acknowledged. Two variants:
//! `crash` (the process killed after the last commit; recovery replays the tail) and `clean`
//! (closed, so a checkpoint at the end and nothing to replay).
//!
//! Every image is one variant with one damage to one file of its directory (`tilldb.meta`,
//! `data.tdb`, `doublewrite.tdb`, the log segments):
//! - bit flips: every bit of the fields and checksum of both header slots and a stride
//!   through their zero tails; every bit of every log segment header and of every log record
//!   header from the checkpoint's segment on; every bit of the doublewrite batch header's
//!   fields, first entries, last entry and checksum; every bit of the page header of one page
//!   of each kind. `DB_CORRUPTION_FULL=1`: every bit of both slots, of the whole batch entry
//!   table, of every page header;
//! - every 512-byte sector that holds a nonzero byte zeroed, in every file;
//! - every file truncated at every 4 KiB boundary below its length, and removed;
//! - stale blocks: each 4 KiB block that changed since either checkpoint copied back from
//!   that checkpoint's image (a lost write: an old page, header slot, batch or log block);
//! - swapped pages: data pages exchanged with their neighbour and with every seventh page
//!   after them (every pair with `DB_CORRUPTION_FULL=1`); the two header slots exchanged.
//!
//! Each image is laid onto a simulated disk and opened (recovery); then `Db::check_space`
//! (the `Db::check` of every tree plus an account of every page), a scan of every table, a
//! `get` of every 16th key (present or deleted), and one more commit, read back.
//!
//! The oracle (TESTPLAN 7): every call either fails with an error naming a file of the
//! database and, for bytes that violate the format, an offset (`Error::Corruption`; an
//! `Error::Io`, such as for a missing file, names the file alone), or returns exactly the
//! acknowledged state: every table equal to the model after all commits. A call that
//! succeeds with anything else is a wrong value, whatever other calls reported; so is an
//! open that creates a new database, page accounting that leaks or shares a page, or a
//! refused open that removed files. No call may panic (each runs under `catch_unwind`, and
//! panics of the engine's threads are counted) or hang (each image has a 10 s watchdog).
//!
//! Repair without an error is right where a second copy exists: a header slot while the
//! other slot is valid and the log from its checkpoint is still there; a page in the last
//! doublewrite batch; the doublewrite file, a free log segment or log bytes before the
//! checkpoint's segment when nothing needs them. A damage that loses an acknowledged commit
//! must be an error: every commit here was acknowledged, so a shorter log is no torn tail.
//!
//! Known bugs, each shown by an ignored test below, are counted and printed by the sweep
//! but do not fail it (`DB_CORRUPTION_STRICT=1` makes them fail); the sweep fails on any
//! other failure. Damage to the log's last commit record, which a torn write of its group
//! before the acknowledgement would leave the same, is counted as a limitation of a log with
//! one copy, not as a bug (see `Known`).
//!
//! Counts: 12,900 images by default (TESTPLAN's target for this tier is 12,000), about
//! 152,000 with `DB_CORRUPTION_FULL=1`. The run prints them, with the outcomes per variant,
//! damage kind and file.
//!
//! Replay a case by its description (`DB_CORRUPTION_ONLY` runs the cases whose description
//! contains the text and prints each outcome; `DB_CORRUPTION_VERBOSE=1` prints each case as
//! it starts):
//! `DB_CORRUPTION_ONLY='crash: zero sector 512 of /db/wal/' cargo test --test db_corruption`.
//! The images are the same on every run; the run prints a fingerprint of each variant's,
//! which a replay should match.
//!
//! This file is longer than the house's 500 lines: the workload, the damages, the oracle
//! and the known bugs read together. The harness that could serve other sweeps (lanes,
//! watchdog, panic capture, laying images onto the simulated disk) is `common/sweep.rs`.

mod common;
#[path = "common/sweep.rs"]
mod sweep;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::{Bound, Range};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use sweep::{CaseFn, Image, Watched, guarded, lay_down};
use tilldb::internals::wal::segment::HeaderState;
use tilldb::internals::wal::{LogEvent, RecordKind, SegmentHeader, slot};
use tilldb::io::{CrashMode, SimConfig, SimDisk};
use tilldb::{Db, Direction, Error, FlushMethod, Options};

/// Where the database lives on every simulated disk, and its files.
const DIR: &str = "/db";
const WAL_DIR: &str = "/db/wal";
const DATA_FILE: &str = "/db/data.tdb";
const META_FILE: &str = "/db/tilldb.meta";
const DOUBLEWRITE_FILE: &str = "/db/doublewrite.tdb";
/// The tables commits write to; `""` is the default table.
const TABLES: [&str; 3] = ["", "left", "right"];
/// Page size, header slot size, truncation step, and the unit of stale and swapped blocks.
const BLOCK_BYTES: usize = 4096;
/// The unit zeroed: a logical sector.
const SECTOR_BYTES: usize = 512;
/// Header bytes of a log segment (`wal/segment.rs`), a log record (`wal/record.rs`), a
/// page (`page/mod.rs`), and the fixed part of a doublewrite batch (`page/guard.rs`).
const SEGMENT_HEADER_BYTES: u64 = 44;
const RECORD_HEADER_BYTES: u64 = 24;
const PAGE_HEADER_BYTES: u64 = 24;
const BATCH_FIXED_BYTES: u64 = 32;
/// A header slot's fields end here; zeros follow up to its checksum.
const SLOT_FIELD_BYTES: u64 = 128;
/// An image that has not finished after this long hangs.
const CASE_TIMEOUT: Duration = Duration::from_secs(10);
/// Keys the workload writes: `0..KEYS`, some deleted again.
const KEYS: u32 = 260;

// ---------------------------------------------------------------------------------------------
// The workload and its model

/// Key number and the round of its new value (`None`: delete); the key picks the table.
type Op = (u32, Option<u32>);
type Model = BTreeMap<(String, Vec<u8>), Vec<u8>>;

fn options() -> Options {
    let defaults = Options::for_tests();
    Options {
        // No eviction and an idle background writer (it starts at three quarters of the frames
        // dirty), so pages reach the disk only at checkpoints and the images are the same
        // on every run. Checkpoints only when asked. Segments of 13 KiB: the tail crosses one.
        cache_bytes: 256 * 4096,
        checkpoint_log_bytes: 4 << 20,
        wal: tilldb::WalOptions {
            segment_bytes: 13 << 10,
            ..defaults.wal.clone()
        },
        ..defaults
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Keys 13 and 150 hold values of two overflow pages; the others 16 to 165 bytes.
fn value(i: u32, round: u32) -> Vec<u8> {
    let len = if i % 137 == 13 {
        4500
    } else {
        16 + (i * 37 + round * 11) % 150
    };
    let mut v = format!("v{i}.{round}.").into_bytes();
    v.resize(
        len as usize,
        b'a' + u8::try_from((i + round) % 26).expect("small"),
    );
    v
}

/// Keys 0..120 go to the default table (two levels deep), 120..180 to `left`, the rest to
/// `right`.
fn table_of(i: u32) -> &'static str {
    TABLES[match i {
        0..120 => 0,
        120..180 => 1,
        _ => 2,
    }]
}

/// The commits of the three phases: load, churn (updates and deletes, so pages are freed
/// and reused), and the tail left in the log after the last checkpoint.
fn phases() -> [Vec<Vec<Op>>; 3] {
    let load = (0..24u32)
        .map(|c| (c * 10..c * 10 + 10).map(|i| (i, Some(0))).collect())
        .collect();
    let churn = (0..12u32)
        .map(|c| {
            (0..8u32)
                .map(|j| {
                    (
                        (c * 29 + j * 31) % 240,
                        (!(c + j).is_multiple_of(4)).then_some(1),
                    )
                })
                .collect()
        })
        .collect();
    let tail = (0..6u32)
        .map(|c| {
            let mut ops: Vec<Op> = (0..4u32)
                .map(|j| {
                    let i = (c * 41 + j * 17 + 5) % KEYS;
                    (i, (j != 3 || c % 2 == 1).then_some(2))
                })
                .collect();
            if c == 2 {
                ops.push((13, Some(2))); // a new overflow chain; the old one is freed
            }
            ops
        })
        .collect();
    [load, churn, tail]
}

fn apply(model: &mut Model, ops: &[Op]) {
    for &(i, round) in ops {
        let entry = (table_of(i).to_owned(), key(i));
        match round {
            Some(r) => model.insert(entry, value(i, r)),
            None => model.remove(&entry),
        };
    }
}

fn commit(db: &Db, ops: &[Op]) {
    let mut txn = db.begin().expect("begin");
    for &(i, round) in ops {
        match round {
            Some(r) => txn.put_in(table_of(i), &key(i), &value(i, r)),
            None => txn.delete_in(table_of(i), &key(i)),
        }
        .expect("write");
    }
    txn.commit().expect("commit");
}

// ---------------------------------------------------------------------------------------------
// The variants

/// Where a valid log record sits.
#[derive(Debug, Clone)]
struct LogRecord {
    path: PathBuf,
    bytes: Range<u64>,
    lsn: u64,
    kind: RecordKind,
    /// A commit record that ends its commit (a whole commit, or the last of its parts).
    ends_commit: bool,
}

/// One variant of the database: its files, older images (for stale blocks), the model after
/// every commit, and its log as recovery reads it.
#[derive(Debug)]
struct Variant {
    name: &'static str,
    image: Image,
    /// The images at the two checkpoints.
    older: Vec<Image>,
    /// `prefixes[n]`: the state after the first `n` commits; the last is the acknowledged one.
    prefixes: Vec<Model>,
    checkpoint_lsn: u64,
    /// The records from the start of the segment holding the checkpoint, in lsn order.
    log: Vec<LogRecord>,
    /// The highest durable mark in the log (pads and tail slots): damage to a record ending
    /// at or below it must be refused.
    durable_mark: u64,
}

impl Variant {
    fn model(&self) -> &Model {
        self.prefixes.last().expect("the empty state at least")
    }
}

/// Runs the workload; `clean` closes the database at the end, otherwise the process dies.
fn build(clean: bool) -> Variant {
    let disk = SimDisk::new(SimConfig::default());
    let db =
        Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options()).expect("create");
    let mut prefixes = vec![Model::new()];
    let mut older = Vec::new();
    for (index, phase) in phases().iter().enumerate() {
        for ops in phase {
            commit(&db, ops);
            settle(&disk);
            let mut model = prefixes.last().expect("a state").clone();
            apply(&mut model, ops);
            prefixes.push(model);
        }
        if index < 2 {
            db.checkpoint().expect("checkpoint");
            settle(&disk);
            older.push(sweep::image_of(&disk, Path::new(DIR)));
        }
    }
    // The shape the damages are meant to meet.
    let space = db.check_space().expect("the undamaged database checks");
    let default = &space.tables[0].1;
    assert!(default.depth >= 2, "a multi-level tree: {space:?}");
    assert!(default.overflow_pages >= 2, "an overflow chain: {space:?}");
    assert!(space.free_pages > 0, "pages on the free list: {space:?}");
    assert!(space.is_clean(), "{space:?}");
    if clean {
        db.close().expect("close");
    } else {
        // Leaked: its threads fail on the dead process's handles after the crash.
        std::mem::forget(db);
        disk.crash(CrashMode::ProcessKill);
    }
    let (checkpoint_lsn, log, durable_mark) = log_layout(&disk);
    let variant = Variant {
        name: if clean { "clean" } else { "crash" },
        image: sweep::image_of(&disk, Path::new(DIR)),
        older,
        prefixes,
        checkpoint_lsn,
        log,
        durable_mark,
    };
    let tail_segments: BTreeSet<&Path> = variant
        .log
        .iter()
        .filter(|r| r.lsn >= checkpoint_lsn && r.kind == RecordKind::Data)
        .map(|r| r.path.as_path())
        .collect();
    assert!(
        clean || tail_segments.len() >= 2,
        "the tail crosses a segment switch: {tail_segments:?}"
    );
    variant
}

/// Waits until the log's segment preparer is idle (the log directory unchanged for three
/// polls), so which segment it recycles, and so every file name, is the same on every run.
fn settle(disk: &SimDisk) {
    let wal = Path::new(WAL_DIR);
    let heads = || -> Vec<(PathBuf, Vec<u8>)> {
        sweep::files_on(disk, wal)
            .into_iter()
            .filter_map(|p| {
                let mut head = disk.live_contents(&p)?;
                head.truncate(SECTOR_BYTES);
                Some((p, head))
            })
            .collect()
    };
    let (mut last, mut same) = (heads(), 0);
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(1));
        let now = heads();
        same = if now == last { same + 1 } else { 0 };
        if same == 3 {
            return;
        }
        last = now;
    }
}

/// The header's checkpoint lsn, and the log from the segment holding it, as recovery reads
/// it.
fn log_layout(disk: &SimDisk) -> (u64, Vec<LogRecord>, u64) {
    let (_, header) =
        tilldb::internals::header::HeaderFile::open(disk, Path::new(DIR), FlushMethod::Fdatasync)
            .expect("header")
            .expect("a database");
    let checkpoint = header.checkpoint_lsn;
    let mut log = Vec::new();
    let mut current = PathBuf::new();
    let found =
        tilldb::internals::wal::inspect_log(disk, Path::new(WAL_DIR), Some(checkpoint), |event| {
            match event {
                LogEvent::Segment { path, .. } => current = path.to_path_buf(),
                LogEvent::Record { offset, record } => log.push(LogRecord {
                    path: current.clone(),
                    bytes: offset..offset + record.len as u64,
                    lsn: record.lsn,
                    kind: record.kind,
                    ends_commit: record.kind == RecordKind::Data
                        && tilldb::internals::record::part_of(record.payload)
                            .expect("an undamaged commit record")
                            .last,
                }),
                LogEvent::Stop(_) => {}
            }
        })
        .expect("the undamaged log reads");
    (checkpoint.0, log, found.recovery.durable_mark.0)
}

/// A hash of an image, printed so two runs can tell whether they damaged the same bytes.
fn fingerprint(image: &Image) -> u64 {
    let mut hash = 0xCBF2_9CE4_8422_2325u64;
    for (path, bytes) in image {
        for &b in path.as_os_str().as_encoded_bytes().iter().chain(bytes) {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
    }
    hash
}

// ---------------------------------------------------------------------------------------------
// Damage

/// One damage to one file of a variant's image.
#[derive(Debug, Clone)]
enum Damage {
    FlipBit {
        file: PathBuf,
        offset: u64,
        bit: u8,
    },
    ZeroSector {
        file: PathBuf,
        offset: u64,
    },
    Truncate {
        file: PathBuf,
        len: u64,
    },
    Remove {
        file: PathBuf,
    },
    /// The block at `offset` copied back from the variant's older image `older`.
    Stale {
        file: PathBuf,
        offset: u64,
        older: usize,
    },
    Swap {
        file: PathBuf,
        first: u64,
        second: u64,
    },
}

impl Damage {
    fn file(&self) -> &Path {
        match self {
            Damage::FlipBit { file, .. }
            | Damage::ZeroSector { file, .. }
            | Damage::Truncate { file, .. }
            | Damage::Remove { file }
            | Damage::Stale { file, .. }
            | Damage::Swap { file, .. } => file,
        }
    }

    /// The kind, for the summary.
    fn kind(&self) -> &'static str {
        match self {
            Damage::FlipBit { .. } => "flip bit",
            Damage::ZeroSector { .. } => "zero sector",
            Damage::Truncate { .. } => "truncate",
            Damage::Remove { .. } => "remove",
            Damage::Stale { .. } => "stale block",
            Damage::Swap { .. } => "swap blocks",
        }
    }

    /// The damaged file's new bytes (`None`: removed).
    fn apply(&self, variant: &Variant) -> Option<Vec<u8>> {
        let mut bytes = variant.image[self.file()].clone();
        let at = |offset: u64| usize::try_from(offset).expect("small files");
        match self {
            Damage::FlipBit { offset, bit, .. } => bytes[at(*offset)] ^= 1 << bit,
            Damage::ZeroSector { offset, .. } => {
                let start = at(*offset);
                let end = (start + SECTOR_BYTES).min(bytes.len());
                bytes[start..end].fill(0);
            }
            Damage::Truncate { len, .. } => bytes.truncate(at(*len)),
            Damage::Remove { .. } => return None,
            Damage::Stale {
                file,
                offset,
                older,
            } => {
                let old = &variant.older[*older][file];
                let start = at(*offset);
                let end = (start + BLOCK_BYTES).min(old.len()).min(bytes.len());
                bytes[start..end].copy_from_slice(&old[start..end]);
            }
            Damage::Swap { first, second, .. } => {
                let (a, b) = (at(*first), at(*second));
                assert!(a + BLOCK_BYTES <= b, "swapped blocks do not overlap");
                let (head, tail) = bytes.split_at_mut(b);
                head[a..a + BLOCK_BYTES].swap_with_slice(&mut tail[..BLOCK_BYTES]);
            }
        }
        Some(bytes)
    }

    /// The bytes of the file that differ from the undamaged image, first to last.
    fn changed(&self, variant: &Variant) -> Range<u64> {
        let base = &variant.image[self.file()];
        let damaged = self.apply(variant).unwrap_or_default();
        let common = base.len().min(damaged.len());
        let differs = |i: &usize| base[*i] != damaged[*i];
        let first = (0..common).find(differs).unwrap_or(common);
        let last = if base.len() == damaged.len() {
            (0..common).rev().find(differs).map_or(first, |i| i + 1)
        } else {
            base.len().max(damaged.len())
        };
        first as u64..last as u64
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.file().display();
        match self {
            Damage::FlipBit { offset, bit, .. } => {
                write!(f, "flip bit {bit} of byte {offset} of {path}")
            }
            Damage::ZeroSector { offset, .. } => write!(f, "zero sector {offset} of {path}"),
            Damage::Truncate { len, .. } => write!(f, "truncate {path} to {len}"),
            Damage::Remove { .. } => write!(f, "remove {path}"),
            Damage::Stale { offset, older, .. } => write!(
                f,
                "stale block {offset} of {path} from checkpoint {}",
                older + 1
            ),
            Damage::Swap { first, second, .. } => {
                write!(f, "swap blocks {first} and {second} of {path}")
            }
        }
    }
}

fn flip_bits(out: &mut Vec<Damage>, file: &Path, offsets: impl IntoIterator<Item = u64>) {
    for offset in offsets {
        for bit in 0..8 {
            out.push(Damage::FlipBit {
                file: file.to_path_buf(),
                offset,
                bit,
            });
        }
    }
}

/// Every damage of one variant's image.
fn damages(variant: &Variant, full: bool) -> Vec<Damage> {
    let mut out = Vec::new();
    header_bits(variant, full, &mut out);
    for (path, bytes) in &variant.image {
        // A sector of zeros already would give the undamaged image.
        for (index, sector) in bytes.chunks(SECTOR_BYTES).enumerate() {
            if sector.iter().any(|&b| b != 0) {
                out.push(Damage::ZeroSector {
                    file: path.clone(),
                    offset: (index * SECTOR_BYTES) as u64,
                });
            }
        }
        for len in (0..bytes.len() as u64).step_by(BLOCK_BYTES) {
            out.push(Damage::Truncate {
                file: path.clone(),
                len,
            });
        }
        out.push(Damage::Remove { file: path.clone() });
    }
    stale_blocks(variant, &mut out);
    swapped_blocks(variant, full, &mut out);
    out
}

/// Bit flips in every kind of header the directory holds.
fn header_bits(variant: &Variant, full: bool, out: &mut Vec<Damage>) {
    let block = BLOCK_BYTES as u64;
    // Header slots: the fields and the checksum; of the zero tail every bit in full runs,
    // else one bit (`offset % 8`) of every 64th byte.
    let meta = Path::new(META_FILE);
    for slot in 0..2 {
        let start = slot * block;
        let fields = start..start + SLOT_FIELD_BYTES;
        let crc = start + block - 4..start + block;
        flip_bits(out, meta, fields.chain(crc));
        for offset in start + SLOT_FIELD_BYTES..start + block - 4 {
            if full {
                flip_bits(out, meta, [offset]);
            } else if offset.is_multiple_of(64) {
                let bit = u8::try_from(offset % 8).expect("a bit");
                out.push(Damage::FlipBit {
                    file: meta.to_path_buf(),
                    offset,
                    bit,
                });
            }
        }
    }
    for path in variant.image.keys().filter(|p| p.starts_with(WAL_DIR)) {
        flip_bits(out, path, 0..SEGMENT_HEADER_BYTES);
    }
    // Log record headers: every bit in full runs, else bit `offset % 8` of every byte.
    for record in &variant.log {
        let header = record.bytes.start..record.bytes.start + RECORD_HEADER_BYTES;
        if full {
            flip_bits(out, &record.path, header);
        } else {
            out.extend(header.map(|offset| Damage::FlipBit {
                file: record.path.clone(),
                offset,
                bit: u8::try_from(offset % 8).expect("a bit"),
            }));
        }
    }
    // The doublewrite batch: fixed fields, the first two and the last entry (every entry in
    // full runs), the checksum.
    let dw = Path::new(DOUBLEWRITE_FILE);
    let count = u32::from_le_bytes(variant.image[dw][24..28].try_into().expect("4 bytes"));
    let entries_end = BATCH_FIXED_BYTES + 12 * u64::from(count);
    let first = if full {
        entries_end
    } else {
        entries_end.min(BATCH_FIXED_BYTES + 24)
    };
    let batch: BTreeSet<u64> = (0..first)
        .chain(entries_end.saturating_sub(12)..entries_end)
        .chain(block - 4..block)
        .collect();
    flip_bits(out, dw, batch);
    // Page headers: of the first page of each kind (every page in full runs).
    let mut kinds = BTreeSet::new();
    let data = &variant.image[Path::new(DATA_FILE)];
    for (index, page) in data.chunks(BLOCK_BYTES).enumerate().skip(1) {
        if full || kinds.insert(page[4]) {
            let start = index as u64 * block;
            flip_bits(out, Path::new(DATA_FILE), start..start + PAGE_HEADER_BYTES);
        }
    }
}

/// Each block that differs from its version at a checkpoint, copied back (once per
/// distinct older version).
fn stale_blocks(variant: &Variant, out: &mut Vec<Damage>) {
    for (path, bytes) in &variant.image {
        let mut seen: BTreeSet<(usize, &[u8])> = BTreeSet::new();
        for (older, image) in variant.older.iter().enumerate() {
            let Some(old) = image.get(path) else { continue };
            for (index, block) in old.chunks(BLOCK_BYTES).enumerate() {
                let now = bytes.get(index * BLOCK_BYTES..).unwrap_or_default();
                let now = &now[..now.len().min(block.len())];
                if now.len() == block.len() && now != block && seen.insert((index, block)) {
                    out.push(Damage::Stale {
                        file: path.clone(),
                        offset: (index * BLOCK_BYTES) as u64,
                        older,
                    });
                }
            }
        }
    }
}

/// Data pages exchanged with the next and every seventh after (every pair in full runs),
/// and the two header slots exchanged.
fn swapped_blocks(variant: &Variant, full: bool, out: &mut Vec<Damage>) {
    let block = BLOCK_BYTES as u64;
    let pages = variant.image[Path::new(DATA_FILE)].len() as u64 / block;
    out.push(Damage::Swap {
        file: PathBuf::from(META_FILE),
        first: 0,
        second: block,
    });
    for first in 1..pages {
        for second in first + 1..pages {
            if full || second == first + 1 || (second - first).is_multiple_of(7) {
                out.push(Damage::Swap {
                    file: PathBuf::from(DATA_FILE),
                    first: first * block,
                    second: second * block,
                });
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One image

/// What the calls on one image returned.
#[derive(Debug, Default)]
struct Verdict {
    /// The database opened (it may then recycle log segments).
    opened: bool,
    /// Errors that name a file of the database, and an offset for a corruption.
    errors: Vec<String>,
    /// Errors that do not.
    unnamed: Vec<String>,
    /// Successful calls that returned something other than the acknowledged state.
    wrong: Vec<String>,
    panics: Vec<String>,
    /// Every table as scanned, when every scan succeeded.
    state: Option<Model>,
}

impl Verdict {
    /// Records an error: it must name a file of the database, and an offset if it is a
    /// corruption.
    fn error(&mut self, call: &str, error: &Error) {
        let text = format!("{call}: {error}");
        let named = match error {
            Error::Corruption { file, .. } => file.starts_with(DIR) && text.contains("offset"),
            Error::Io { path, .. } => path.starts_with(DIR),
            _ => false,
        };
        if named {
            self.errors.push(text);
        } else {
            self.unnamed.push(text);
        }
    }

    fn absorb(&mut self, other: Verdict) {
        self.errors.extend(other.errors);
        self.unnamed.extend(other.unnamed);
        self.wrong.extend(other.wrong);
        self.panics.extend(other.panics);
        self.state = other.state;
    }
}

/// Lays the damaged image down, opens it, uses it, and judges every call.
fn run_image(disk: &SimDisk, variant: &Variant, damage: &Damage) -> Verdict {
    let damaged = damage.apply(variant);
    let dir = Path::new(DIR);
    lay_down(disk, dir, &variant.image, damage.file(), damaged.as_deref());
    let before: BTreeSet<PathBuf> = sweep::files_on(disk, dir).into_iter().collect();
    let mut verdict = open_and_use(disk, variant.model());
    // Refusing a damaged database must leave its files for a repair tool or a backup. (An
    // open that succeeded may recycle log segments.)
    let after: BTreeSet<PathBuf> = sweep::files_on(disk, dir).into_iter().collect();
    let gone: Vec<&PathBuf> = before
        .difference(&after)
        .filter(|p| !(verdict.opened && p.starts_with(WAL_DIR)))
        .collect();
    if !gone.is_empty() {
        verdict.wrong.push(format!("the files {gone:?} are gone"));
    }
    verdict
}

/// Opens the database on `disk` and uses it, every call under `catch_unwind`. The handle
/// is dropped (which checkpoints) only after a panic of `use_db` is caught, never while it
/// unwinds: a second panic there would abort the whole test.
fn open_and_use(disk: &SimDisk, model: &Model) -> Verdict {
    let mut verdict = Verdict::default();
    let opened =
        guarded(|| Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options()));
    let db = match opened {
        Ok(Ok(db)) => db,
        Ok(Err(e)) => {
            verdict.error("open", &e);
            return verdict;
        }
        Err(message) => {
            verdict.panics.push(format!("open: {message}"));
            return verdict;
        }
    };
    verdict.opened = true;
    let mut used = Verdict::default();
    if let Err(message) = guarded(|| use_db(&db, model, &mut used)) {
        used.panics.push(format!("use: {message}"));
    }
    if let Err(message) = guarded(move || drop(db)) {
        used.panics.push(format!("close: {message}"));
    }
    verdict.absorb(used);
    verdict
}

/// Checks, reads every table, reads a sample of keys, and commits once more.
fn use_db(db: &Db, model: &Model, verdict: &mut Verdict) {
    if db.recovery().created {
        verdict
            .wrong
            .push("open created a new database over the damaged one".to_owned());
    }
    match db.check_space() {
        Ok(space) if space.is_clean() => {}
        Ok(space) => verdict.wrong.push(format!(
            "check_space: leaked pages {:?}, doubly used {:?}",
            space.leaked, space.doubly_used
        )),
        Err(e) => verdict.error("check", &e),
    }
    let mut state = Some(Model::new());
    for table in TABLES {
        let all = (Bound::Unbounded, Bound::Unbounded);
        match db.scan_in(table, all.0, all.1, Direction::Forward) {
            Ok(entries) => {
                if let Some(state) = &mut state {
                    state.extend(entries.into_iter().map(|(k, v)| ((table.to_owned(), k), v)));
                }
            }
            Err(e) => {
                verdict.error(&format!("scan {table:?}"), &e);
                state = None;
            }
        }
    }
    if let Some(state) = state.as_ref().filter(|s| *s != model) {
        verdict.wrong.extend(difference(state, model));
    }
    verdict.state = state;
    // Point reads descend from the root (a scan follows the leaf links, so a stale branch
    // can mislead one and not the other): every 16th key, present or deleted.
    for i in (0..KEYS).step_by(16) {
        let table = table_of(i);
        let want = model.get(&(table.to_owned(), key(i)));
        match db.get_in(table, &key(i)) {
            Ok(got) if got.as_ref() == want => {}
            Ok(got) => verdict.wrong.push(format!(
                "get {table:?} key {i}: {:?} bytes, want {:?}",
                got.map(|v| v.len()),
                want.map(Vec::len)
            )),
            Err(e) => verdict.error(&format!("get {table:?} key {i}"), &e),
        }
    }
    // The database goes on (TESTPLAN oracle 8), unless it said it cannot.
    if verdict.errors.is_empty() {
        let written = db.begin().and_then(|mut txn| {
            txn.put_in("left", b"after", b"damage")?;
            txn.commit()
        });
        match written.and_then(|()| db.get_in("left", b"after")) {
            Ok(Some(v)) if v == b"damage" => {}
            Ok(other) => verdict
                .wrong
                .push(format!("a commit after recovery reads back as {other:?}")),
            Err(e) => verdict.error("commit after recovery", &e),
        }
    }
}

/// How a scanned state differs from the model, per table.
fn difference(state: &Model, model: &Model) -> Vec<String> {
    TABLES
        .iter()
        .filter_map(|table| {
            let of = |m: &Model| -> BTreeMap<Vec<u8>, Vec<u8>> {
                m.iter()
                    .filter(|((t, _), _)| t == table)
                    .map(|((_, k), v)| (k.clone(), v.clone()))
                    .collect()
            };
            let (got, want) = (of(state), of(model));
            (got != want).then(|| {
                let missing = want.keys().filter(|k| !got.contains_key(*k)).count();
                let extra = got.keys().filter(|k| !want.contains_key(*k)).count();
                let changed = want
                    .iter()
                    .filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v))
                    .count();
                format!(
                    "table {table:?}: {missing} keys missing, {extra} extra, {changed} values \
                     changed"
                )
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Judging

/// What one image did.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Every call succeeded with the acknowledged state.
    Correct,
    /// Some call failed naming a file (and an offset where it has one); every call that
    /// succeeded returned the acknowledged state.
    Refused(String),
    /// A call succeeded with something else. `prefix`: the scanned state is that after the
    /// first n commits.
    Wrong {
        what: String,
        prefix: Option<usize>,
    },
    /// An error that names no file of the database, or a corruption without an offset.
    Unnamed(String),
    Panicked(String),
    Hung,
}

impl Outcome {
    fn of(watched: Watched<Verdict>, variant: &Variant) -> Outcome {
        let verdict = match watched {
            Watched::Done(verdict) => verdict,
            Watched::Panicked(message) => return Outcome::Panicked(message),
            Watched::Hung => return Outcome::Hung,
        };
        let reported = if verdict.errors.is_empty() {
            "nothing reported".to_owned()
        } else {
            format!("reported: {}", verdict.errors.join("; "))
        };
        if !verdict.panics.is_empty() {
            let wrong = verdict.wrong.join("; ");
            Outcome::Panicked(format!(
                "{} ({wrong}; {reported})",
                verdict.panics.join("; ")
            ))
        } else if !verdict.wrong.is_empty() {
            let prefix = verdict
                .state
                .as_ref()
                .and_then(|s| variant.prefixes.iter().position(|p| p == s));
            Outcome::Wrong {
                what: format!("{} ({reported})", verdict.wrong.join("; ")),
                prefix,
            }
        } else if !verdict.unnamed.is_empty() {
            Outcome::Unnamed(verdict.unnamed.join("; "))
        } else if let Some(first) = verdict.errors.into_iter().next() {
            Outcome::Refused(first)
        } else {
            Outcome::Correct
        }
    }

    fn is_failure(&self) -> bool {
        !matches!(self, Outcome::Correct | Outcome::Refused(_))
    }

    fn label(&self) -> &'static str {
        match self {
            Outcome::Correct => "correct",
            Outcome::Refused(_) => "refused",
            Outcome::Wrong { .. } => "WRONG",
            Outcome::Unnamed(_) => "UNNAMED",
            Outcome::Panicked(_) => "PANIC",
            Outcome::Hung => "HANG",
        }
    }
}

/// Failures the sweep knows the cause of: library bugs, each shown by an ignored test, and
/// one limitation. Each is recognized by its damage and its exact symptom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Known {
    /// Limitation: damage to the last commit record loses that commit without an error. Its
    /// group (the record and the pad after it) was one write, which a crash before the
    /// acknowledgement may tear in any sector: the same bytes, and nothing later proves
    /// that this one was acknowledged.
    LastCommit,
}

impl Known {
    fn test(self) -> &'static str {
        match self {
            Known::LastCommit => "(a limitation, no test)",
        }
    }
}

/// Where a damage to the log hits it first, if it hits a record recovery reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogHit {
    BeforeCheckpoint,
    /// A record at or after the checkpoint, with more commits after it. `kept`: the commits
    /// before it, the state recovery has if the log ends there.
    Middle {
        kept: usize,
    },
    /// The last commit record, or what follows it.
    LastCommit {
        kept: usize,
    },
}

/// The bytes a damage stands for in the log: for a damaged tail slot, the home bytes of the
/// block it holds a copy of (`wal/slot.rs`: a partly filled block's records are only there);
/// elsewhere the damaged bytes themselves.
fn home_of(variant: &Variant, file: &Path, changed: Range<u64>) -> Range<u64> {
    let bytes = &variant.image[file];
    let Ok(HeaderState::Valid(h)) = SegmentHeader::decode(bytes, file) else {
        return changed;
    };
    if h.slots() == 0 || changed.end <= slot::offset(&h, 0) {
        return changed;
    }
    let block = u64::from(h.log_block_bytes);
    let (mut lo, mut hi) = (u64::MAX, 0);
    for i in 0..2 {
        let at = slot::offset(&h, i);
        let slot_bytes = &bytes[usize::try_from(at).expect("fits")..][..h.log_block_bytes as usize];
        if changed.start < at + block
            && at < changed.end
            && let Some(s) = slot::decode(slot_bytes, &h)
        {
            let home = block + (s.block_lsn - h.base_lsn);
            lo = lo.min(home);
            hi = hi.max(home + s.used as u64);
        }
    }
    if lo < hi { lo..hi } else { changed }
}

fn log_hit(variant: &Variant, damage: &Damage, prefix: Option<usize>) -> Option<LogHit> {
    if !damage.file().starts_with(WAL_DIR) {
        return None;
    }
    let changed = home_of(variant, damage.file(), damage.changed(variant));
    let hit = |r: &LogRecord| {
        r.path == damage.file() && r.bytes.start < changed.end && changed.start < r.bytes.end
    };
    let index = variant.log.iter().position(hit)?;
    // A damaged record loses its commit: the commits ending at or after it.
    let commits_from = |i: usize| variant.log[i..].iter().filter(|r| r.ends_commit).count();
    let kept = |i: usize| variant.prefixes.len() - 1 - commits_from(i);
    if variant.log[index].lsn < variant.checkpoint_lsn {
        return Some(LogHit::BeforeCheckpoint);
    }
    // The records the damage reaches; a tail slot may repair the first of them, so the log
    // can end at any. One that ends above every durable mark (in pads and tail slots) is in
    // the last groups written, which a torn tail looks exactly like; one below a mark is
    // vouched for by a later group, and its damage must be refused.
    let lost_unvouched = (index..variant.log.len())
        .take_while(|&i| hit(&variant.log[i]))
        .find(|&i| {
            let r = &variant.log[i];
            let end = r.lsn + (r.bytes.end - r.bytes.start);
            end > variant.durable_mark && prefix == Some(kept(i))
        });
    Some(match lost_unvouched {
        Some(i) => LogHit::LastCommit { kept: kept(i) },
        None => LogHit::Middle { kept: kept(index) },
    })
}

/// The known cause of a failure, when its damage and symptom match one exactly.
fn known(variant: &Variant, damage: &Damage, outcome: &Outcome) -> Option<Known> {
    let commits = variant.prefixes.len() - 1;
    let prefix = match outcome {
        Outcome::Wrong { prefix, .. } => *prefix,
        _ => None,
    };
    match log_hit(variant, damage, prefix)? {
        // Exactly the commits from the damaged record on are lost.
        LogHit::LastCommit { kept } if prefix == Some(kept) && kept < commits => {
            Some(Known::LastCommit)
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Running and reporting

/// One image: a variant and its damage.
struct Case {
    variant: usize,
    damage: Damage,
}

/// Every case's description, outcome and known cause.
struct Judged {
    text: String,
    row: String,
    outcome: Outcome,
    known: Option<Known>,
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Runs every case on two lanes and judges each.
fn run_cases(variants: &[Arc<Variant>], cases: Vec<Case>) -> Vec<Judged> {
    let cases = Arc::new(cases);
    let describe = |index: usize| {
        let case = &cases[index];
        format!("{}: {}", variants[case.variant].name, case.damage)
    };
    let run: CaseFn<Verdict> = {
        let (cases, variants) = (Arc::clone(&cases), variants.to_vec());
        Arc::new(move |disk: &SimDisk, index: usize| {
            let case = &cases[index];
            run_image(disk, &variants[case.variant], &case.damage)
        })
    };
    let verbose = env_flag("DB_CORRUPTION_VERBOSE");
    let watched = sweep::run_all(cases.len(), 2, CASE_TIMEOUT, &describe, verbose, &run);
    watched
        .into_iter()
        .enumerate()
        .map(|(index, watched)| {
            let case = &cases[index];
            let variant = &variants[case.variant];
            let outcome = Outcome::of(watched, variant);
            let known = if outcome.is_failure() {
                known(variant, &case.damage, &outcome)
            } else {
                None
            };
            let file = case.damage.file().to_string_lossy();
            let file = if file.starts_with(WAL_DIR) {
                "log segment"
            } else {
                file.trim_start_matches("/db/")
            };
            Judged {
                text: describe(index),
                row: format!("{:5} {:11} {:15}", variant.name, case.damage.kind(), file),
                outcome,
                known,
            }
        })
        .collect()
}

/// Prints the outcome counts per variant, damage kind and file, then the known bugs with
/// examples, then every other failure. Returns the failures that count.
fn report(judged: &[Judged], strict: bool) -> usize {
    let mut rows: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for j in judged {
        let label = if j.known.is_some() {
            "known"
        } else {
            j.outcome.label()
        };
        *rows.entry(&j.row).or_default().entry(label).or_default() += 1;
    }
    for (row, counts) in rows {
        let counts: Vec<String> = counts.iter().map(|(l, c)| format!("{c} {l}")).collect();
        println!("  {row} {}", counts.join(", "));
    }
    let mut by_known: BTreeMap<Known, Vec<&Judged>> = BTreeMap::new();
    for j in judged {
        if let Some(k) = j.known {
            by_known.entry(k).or_default().push(j);
        }
    }
    for (k, cases) in &by_known {
        println!("KNOWN {k:?}: {} images (test {})", cases.len(), k.test());
        for j in cases.iter().take(2) {
            println!("    e.g. {}: {:?}", j.text, j.outcome);
        }
    }
    let failing: Vec<&Judged> = judged
        .iter()
        .filter(|j| j.outcome.is_failure() && (strict || j.known.is_none()))
        .collect();
    for j in failing.iter().take(60) {
        println!("FAIL {}: {:?}", j.text, j.outcome);
    }
    if failing.len() > 60 {
        println!("... and {} more failures", failing.len() - 60);
    }
    failing.len()
}

/// Both variants, each checked to read exactly when undamaged (the harness works).
fn variants() -> Vec<Arc<Variant>> {
    let variants: Vec<Arc<Variant>> = [false, true].map(|clean| Arc::new(build(clean))).into();
    for v in &variants {
        let files: Vec<String> = v
            .image
            .iter()
            .map(|(p, b)| format!("{} {}", p.display(), b.len()))
            .collect();
        println!(
            "db_corruption: {} image {:016x}, checkpoint lsn {}, {} log records read: {}",
            v.name,
            fingerprint(&v.image),
            v.checkpoint_lsn,
            v.log.len(),
            files.join(", ")
        );
        let disk = SimDisk::new(SimConfig::default());
        let meta = Path::new(META_FILE);
        lay_down(&disk, Path::new(DIR), &v.image, meta, Some(&v.image[meta]));
        let verdict = open_and_use(&disk, v.model());
        let outcome = Outcome::of(Watched::Done(verdict), v);
        assert_eq!(outcome, Outcome::Correct, "{} undamaged", v.name);
    }
    variants
}

#[test]
fn every_damaged_image_is_refused_naming_the_place_or_read_exactly() {
    let started = Instant::now();
    let full = env_flag("DB_CORRUPTION_FULL");
    let strict = env_flag("DB_CORRUPTION_STRICT");
    let only = std::env::var("DB_CORRUPTION_ONLY").ok();
    let variants = variants();
    let mut cases: Vec<Case> = Vec::new();
    for (index, v) in variants.iter().enumerate() {
        let damages = damages(v, full);
        cases.extend(damages.into_iter().map(|damage| Case {
            variant: index,
            damage,
        }));
    }
    if let Some(only) = &only {
        cases.retain(|c| format!("{}: {}", variants[c.variant].name, c.damage).contains(only));
    }
    let sample = common::sample();
    if sample > 1 {
        cases = cases.into_iter().step_by(sample).collect();
    }
    let judged = run_cases(&variants, cases);
    if only.is_some() {
        for j in &judged {
            println!("{}: {:?}", j.text, j.outcome);
        }
    }
    let failures = report(&judged, strict);
    let engine_panics = sweep::engine_panics();
    for p in &engine_panics {
        println!("ENGINE PANIC {p}");
    }
    let count = |f: &dyn Fn(&Judged) -> bool| judged.iter().filter(|j| f(j)).count();
    println!(
        "db_corruption: {} images ({}) in {:.1} s: {} read exactly, {} refused naming the \
         file and offset, {} known bugs and limitations{}, {failures} failures, {} \
         engine-thread panics",
        judged.len(),
        if full {
            "full"
        } else {
            "DB_CORRUPTION_FULL=1 for every header bit and page pair"
        },
        started.elapsed().as_secs_f64(),
        count(&|j| j.outcome == Outcome::Correct),
        count(&|j| matches!(j.outcome, Outcome::Refused(_))),
        count(&|j| j.known.is_some()),
        if strict { " (strict: failing)" } else { "" },
        engine_panics.len()
    );
    assert!(
        failures == 0 && engine_panics.is_empty(),
        "{failures} damaged images were neither refused naming the place nor read exactly"
    );
    if only.is_none() && sample == 1 {
        // The headline count, asserted (TESTPLAN: 12,000 images for this tier).
        assert!(
            judged.len() >= IMAGES_MIN,
            "{} damaged images, fewer than {IMAGES_MIN}",
            judged.len()
        );
    }
}

/// Fewest damaged images a default sweep must judge.
const IMAGES_MIN: usize = 12_000;

// ---------------------------------------------------------------------------------------------
// The known bugs, one test each

/// Runs `damages` of the variant (`clean` or not) and asserts each is refused naming the
/// place, or read exactly.
fn assert_refused_or_exact(clean: bool, damages: impl Fn(&Variant) -> Vec<Damage>) {
    let variant = Arc::new(build(clean));
    let cases: Vec<Case> = damages(&variant)
        .into_iter()
        .map(|damage| Case { variant: 0, damage })
        .collect();
    assert!(!cases.is_empty(), "no damage to try");
    let judged = run_cases(&[variant], cases);
    let failures: Vec<String> = judged
        .iter()
        .filter(|j| j.outcome.is_failure())
        .map(|j| format!("{}: {:?}", j.text, j.outcome))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A database whose `tilldb.meta` is gone or empty is not a crash during create: its log and
/// data file hold acknowledged commits. Open must refuse it, naming the header file, and
/// leave every file in place.
#[test]
fn a_missing_or_empty_header_file_is_refused_and_kept() {
    assert_refused_or_exact(true, |_| {
        let file = PathBuf::from(META_FILE);
        vec![
            Damage::Remove { file: file.clone() },
            Damage::Truncate { file, len: 0 },
        ]
    });
}

/// The header promises that the log reaches its checkpoint lsn. A log that ends before it
/// (a damaged record the checkpoint's segment holds before that lsn) must be refused.
#[test]
fn a_log_ending_before_the_checkpoint_is_refused() {
    assert_refused_or_exact(true, |v| {
        let record = v
            .log
            .iter()
            .find(|r| r.lsn < v.checkpoint_lsn && r.kind == RecordKind::Data)
            .expect("the checkpoint's segment holds a commit before it");
        vec![Damage::FlipBit {
            file: record.path.clone(),
            offset: record.bytes.start + RECORD_HEADER_BYTES + 2,
            bit: 0,
        }]
    });
}

/// A record that does not validate while later acknowledged records do is damage, not the
/// torn tail of a crash: recovery must refuse it rather than end the log there and drop the
/// acknowledged commits after it. (TESTPLAN lists "treat a bad CRC in mid-log as the end of
/// the log" as a mutant the suite must catch; today it is the engine's behaviour.) A fix
/// cannot refuse whenever valid records follow a bad one: a power cut may land the unflushed
/// groups out of order, leaving valid unacknowledged records after a torn one. It needs
/// proof that the bad record was durable, such as a later record stating the durable lsn
/// when it was written.
#[test]
fn damage_inside_the_log_is_refused_not_taken_for_its_end() {
    assert_refused_or_exact(false, |v| {
        v.log
            .iter()
            .filter(|r| r.lsn >= v.checkpoint_lsn && r.kind == RecordKind::Data)
            .rev()
            // The last commit (its last record, then its earlier parts): a limitation, not
            // this bug.
            .skip(1)
            .skip_while(|r| !r.ends_commit)
            .map(|r| Damage::FlipBit {
                file: r.path.clone(),
                offset: r.bytes.start + RECORD_HEADER_BYTES + 2,
                bit: 0,
            })
            .collect()
    });
}

/// A write the device acknowledged but lost leaves an older valid page in place (TESTPLAN
/// F6). Nothing in the page tells it from the current one; the page ledger does
/// (`page/ledger.rs`), so the old contents are refused, or rebuilt by a torn-page guard.
#[test]
fn a_stale_page_is_refused_not_served() {
    assert_refused_or_exact(true, |v| {
        let mut out = Vec::new();
        stale_blocks(v, &mut out);
        out.retain(|d| d.file() == Path::new(DATA_FILE));
        out
    });
}
