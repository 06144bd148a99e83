//! The small database `open_files` damages: built once per process on a [`SimDisk`], its
//! files taken as an [`Image`], edited as the fuzz input says ([`Edit`]), laid onto a fresh
//! simulated disk, then opened and used ([`exercise`]).
//!
//! Two variants: `crash` (the process killed after the last commit, so recovery replays a log
//! tail after the checkpoint) and `clean` (closed: a checkpoint at the end). Both hold the
//! default table two levels deep, a named table `t`, one value in an overflow chain, pages
//! freed and reused, and a log that spans more than one segment.

use crate::{Input, seal_batch_header, seal_header_slot, seal_page, seal_segment_header};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Db, Direction, FlushMethod, Options};

/// Where the database lives on every simulated disk.
pub const DIR: &str = "/db";
/// Bytes of a page, a header slot, a doublewrite block.
pub const BLOCK_BYTES: usize = 4096;
const SECTOR_BYTES: usize = 512;

/// The database's files: path and bytes, in a fixed order (header, data file, doublewrite
/// file, then the log segments by name). A removed file is `None`.
pub type Image = Vec<(PathBuf, Option<Vec<u8>>)>;

/// Small pages, pool, log blocks and segments, no background threads (so every run of one
/// input does the same I/O), no automatic checkpoints.
#[must_use]
pub fn options() -> Options {
    let defaults = Options::for_tests();
    Options {
        page_bytes: Some(4096),
        cache_bytes: 64 * 4096,
        flush_method: Some(FlushMethod::Fdatasync),
        torn_page_guard: tilldb::TornPageGuard::Doublewrite,
        checkpoint_log_bytes: 64 << 20,
        wal: tilldb::WalOptions {
            // 8 KiB of header and records, and two 512-byte tail slots.
            segment_bytes: 9 << 10,
            log_block_bytes: Some(512),
            background_threads: false,
            ..defaults.wal.clone()
        },
        background_threads: false,
        ..defaults
    }
}

/// Key `i` of the workload.
#[must_use]
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let len = if i == 7 {
        3000
    } else {
        12 + (i * 29 + round * 7) % 90
    };
    let mut v = format!("v{i}.{round}.").into_bytes();
    v.resize(len as usize, b'a' + u8::try_from(i % 26).expect("small"));
    v
}

fn commit(db: &Db, puts: &[(&str, u32, u32)], deletes: &[u32]) {
    let mut txn = db.begin().expect("begin");
    for &(table, i, round) in puts {
        txn.put_in(table, &key(i), &value(i, round)).expect("put");
    }
    for &i in deletes {
        txn.delete(&key(i)).expect("delete");
    }
    txn.commit().expect("commit");
}

fn build(clean: bool) -> Image {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let dir = Path::new(DIR);
    let db = Db::open_with_storage(disk.clone(), dir, options()).expect("create");
    // Commits of a few keys each: a commit is one log record, and a segment is 8 KiB.
    for chunk in (0..90).collect::<Vec<_>>().chunks(6) {
        let puts: Vec<_> = chunk.iter().map(|&i| ("", i, 0)).collect();
        commit(&db, &puts, &[]);
    }
    let named: Vec<_> = (200..210).map(|i| ("t", i, 0)).collect();
    commit(&db, &named, &[]);
    for chunk in (20..50).collect::<Vec<_>>().chunks(10) {
        commit(&db, &[], chunk);
    }
    db.checkpoint().expect("checkpoint");
    for round in 1..4 {
        let puts: Vec<_> = (0..6).map(|i| ("", i * 9 + round, round)).collect();
        commit(&db, &puts, &[60 + round]);
    }
    commit(&db, &[("t", 201, 9), ("", 7, 4)], &[]);
    if clean {
        db.close().expect("close");
    } else {
        drop(db);
        disk.crash(CrashMode::ProcessKill);
    }
    image_of(&disk, dir)
}

/// Every file of the database on `disk`, in the order of [`Image`].
#[must_use]
pub fn image_of(disk: &SimDisk, dir: &Path) -> Image {
    let storage: &dyn Storage = disk;
    let mut paths = vec![
        dir.join("tilldb.meta"),
        dir.join("data.tdb"),
        dir.join("doublewrite.tdb"),
        dir.join("ledger.tdb"),
    ];
    let wal = dir.join("wal");
    let mut names = storage.list_dir(&wal).unwrap_or_default();
    names.sort();
    paths.extend(names.into_iter().map(|name| wal.join(name)));
    paths
        .into_iter()
        .map(|path| {
            let bytes = disk.live_contents(&path);
            (path, bytes)
        })
        .collect()
}

/// The base images, built on first use: `[crash, clean]`.
pub fn images() -> &'static [Image; 2] {
    static IMAGES: OnceLock<[Image; 2]> = OnceLock::new();
    IMAGES.get_or_init(|| [build(false), build(true)])
}

/// One change to one file of an image. Offsets and indices wrap around what exists, so every
/// input names a real place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Write `bytes` at `offset`, growing the file if they run past its end.
    Overwrite {
        file: u8,
        offset: u32,
        bytes: Vec<u8>,
    },
    /// Flip bits of one byte.
    Xor { file: u8, offset: u32, mask: u8 },
    /// Cut the file to `len` (modulo its length plus one).
    Truncate { file: u8, len: u32 },
    /// Zero one 512-byte sector (a lost or wiped sector).
    ZeroSector { file: u8, sector: u16 },
    /// Copy a 4 KiB block over another, maybe of another file (a stale or misdirected write).
    CopyBlock {
        file: u8,
        block: u16,
        source_file: u8,
        source_block: u16,
    },
    /// Remove the file.
    Remove { file: u8 },
    /// Make the checksum of one structure of the file match again, so what was written
    /// inside it reaches the checks behind the checksum: a header slot (`tilldb.meta`), a
    /// page (`data.tdb`), the batch header (`doublewrite.tdb`), a slot (`ledger.tdb`), a
    /// segment header (log).
    Reseal { file: u8, index: u16 },
}

impl Edit {
    /// Reads one edit; `None` at the end of the input.
    pub fn read(input: &mut Input<'_>) -> Option<Edit> {
        if input.is_empty() {
            return None;
        }
        let op = input.u8();
        let file = input.u8();
        Some(match op % 7 {
            0 => {
                let offset = input.u32();
                let len = usize::from(input.u8());
                let bytes = input.take(len).to_vec();
                Edit::Overwrite {
                    file,
                    offset,
                    bytes,
                }
            }
            1 => Edit::Xor {
                file,
                offset: input.u32(),
                mask: input.u8(),
            },
            2 => Edit::Truncate {
                file,
                len: input.u32(),
            },
            3 => Edit::ZeroSector {
                file,
                sector: input.u16(),
            },
            4 => Edit::CopyBlock {
                file,
                block: input.u16(),
                source_file: input.u8(),
                source_block: input.u16(),
            },
            5 => Edit::Remove { file },
            _ => Edit::Reseal {
                file,
                index: input.u16(),
            },
        })
    }

    /// The edit as input bytes ([`Edit::read`] reads it back).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Edit::Overwrite {
                file,
                offset,
                bytes,
            } => {
                out.extend([0, *file]);
                out.extend(offset.to_le_bytes());
                let len = bytes.len().min(255);
                out.push(u8::try_from(len).expect("at most 255"));
                out.extend(&bytes[..len]);
            }
            Edit::Xor { file, offset, mask } => {
                out.extend([1, *file]);
                out.extend(offset.to_le_bytes());
                out.push(*mask);
            }
            Edit::Truncate { file, len } => {
                out.extend([2, *file]);
                out.extend(len.to_le_bytes());
            }
            Edit::ZeroSector { file, sector } => {
                out.extend([3, *file]);
                out.extend(sector.to_le_bytes());
            }
            Edit::CopyBlock {
                file,
                block,
                source_file,
                source_block,
            } => {
                out.extend([4, *file]);
                out.extend(block.to_le_bytes());
                out.push(*source_file);
                out.extend(source_block.to_le_bytes());
            }
            Edit::Remove { file } => out.extend([5, *file]),
            Edit::Reseal { file, index } => {
                out.extend([6, *file]);
                out.extend(index.to_le_bytes());
            }
        }
        out
    }

    /// Applies the edit to `image`.
    pub fn apply(&self, image: &mut Image) {
        let count = image.len();
        let pick = |file: u8| usize::from(file) % count;
        match self {
            Edit::Overwrite {
                file,
                offset,
                bytes,
            } => {
                let Some(data) = &mut image[pick(*file)].1 else {
                    return;
                };
                let at = *offset as usize % (data.len() + 1);
                if at + bytes.len() > data.len() {
                    data.resize(at + bytes.len(), 0);
                }
                data[at..at + bytes.len()].copy_from_slice(bytes);
            }
            Edit::Xor { file, offset, mask } => {
                if let Some(data) = &mut image[pick(*file)].1
                    && !data.is_empty()
                {
                    let at = *offset as usize % data.len();
                    data[at] ^= mask;
                }
            }
            Edit::Truncate { file, len } => {
                if let Some(data) = &mut image[pick(*file)].1 {
                    let len = *len as usize % (data.len() + 1);
                    data.truncate(len);
                }
            }
            Edit::ZeroSector { file, sector } => {
                if let Some(data) = &mut image[pick(*file)].1 {
                    let sectors = data.len().div_ceil(SECTOR_BYTES);
                    if sectors > 0 {
                        let at = usize::from(*sector) % sectors * SECTOR_BYTES;
                        let end = (at + SECTOR_BYTES).min(data.len());
                        data[at..end].fill(0);
                    }
                }
            }
            Edit::CopyBlock {
                file,
                block,
                source_file,
                source_block,
            } => {
                let Some(source) = &image[pick(*source_file)].1 else {
                    return;
                };
                let blocks = source.len().div_ceil(BLOCK_BYTES);
                if blocks == 0 {
                    return;
                }
                let from = usize::from(*source_block) % blocks * BLOCK_BYTES;
                let bytes = source[from..(from + BLOCK_BYTES).min(source.len())].to_vec();
                let Some(data) = &mut image[pick(*file)].1 else {
                    return;
                };
                let blocks = data.len().div_ceil(BLOCK_BYTES).max(1);
                let at = usize::from(*block) % blocks * BLOCK_BYTES;
                if at + bytes.len() > data.len() {
                    data.resize(at + bytes.len(), 0);
                }
                data[at..at + bytes.len()].copy_from_slice(&bytes);
            }
            Edit::Remove { file } => image[pick(*file)].1 = None,
            Edit::Reseal { file, index } => {
                let (path, data) = &mut image[pick(*file)];
                if let Some(data) = data {
                    reseal(path, data, usize::from(*index));
                }
            }
        }
    }
}

/// See [`Edit::Reseal`].
fn reseal(path: &Path, data: &mut [u8], index: usize) {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match name {
        "tilldb.meta" => {
            let slot = index % 2;
            if data.len() >= (slot + 1) * BLOCK_BYTES {
                seal_header_slot(
                    &mut data[slot * BLOCK_BYTES..(slot + 1) * BLOCK_BYTES],
                    slot,
                );
            }
        }
        "data.tdb" => {
            let pages = data.len() / BLOCK_BYTES;
            if pages > 1 {
                let id = 1 + index % (pages - 1);
                seal_page(
                    &mut data[id * BLOCK_BYTES..(id + 1) * BLOCK_BYTES],
                    id as u64,
                );
            }
        }
        "doublewrite.tdb" => seal_batch_header(data),
        "ledger.tdb" => {
            // A ledger slot is sealed as a page whose id is its block index.
            let slots = data.len() / BLOCK_BYTES;
            if slots > 0 {
                let slot = index % slots;
                seal_page(
                    &mut data[slot * BLOCK_BYTES..(slot + 1) * BLOCK_BYTES],
                    (slot / 2) as u64,
                );
            }
        }
        _ => seal_segment_header(data),
    }
}

/// Reads the edits of an `open_files` input after its first byte (the variant).
#[must_use]
pub fn read_edits(input: &mut Input<'_>, max: usize) -> Vec<Edit> {
    let mut edits = Vec::new();
    while edits.len() < max {
        let Some(edit) = Edit::read(input) else { break };
        edits.push(edit);
    }
    edits
}

/// A fresh simulated disk holding `image` (durable, as after a process kill).
#[must_use]
pub fn lay_down(image: &Image) -> Arc<SimDisk> {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let storage: &dyn Storage = &*disk;
    storage
        .create_dir_all(&Path::new(DIR).join("wal"))
        .expect("directories");
    for (path, bytes) in image {
        let Some(bytes) = bytes else { continue };
        let file = storage
            .create(path, FlushMethod::Fdatasync)
            .expect("create");
        file.set_len(bytes.len() as u64).expect("set the length");
        if !bytes.is_empty() {
            file.write_at(bytes, 0).expect("write");
        }
    }
    disk.crash(CrashMode::ProcessKill);
    disk
}

/// Opens the database on `disk` and uses it: every check, scans of every table both ways,
/// gets, one commit read back, a close (a checkpoint), and a reopen that must still hold the
/// commit. Any call may fail; none may panic or hang, and a call that succeeds must not
/// contradict an acknowledged commit.
pub fn exercise(disk: &Arc<SimDisk>) {
    let dir = Path::new(DIR);
    let Ok(db) = Db::open_with_storage(disk.clone(), dir, options()) else {
        return;
    };
    // The database is dropped (a checkpoint, which may panic too) after a panic of `use_db`
    // is caught, not while it unwinds: see `guard::unwind_later`.
    let used = crate::guard::unwind_later(|| use_db(&db));
    let committed = match used {
        Ok(committed) => committed,
        Err(panic) => {
            drop(db);
            std::panic::resume_unwind(panic);
        }
    };
    let closed = db.close();
    if committed && closed.is_ok() {
        let Ok(db) = Db::open_with_storage(disk.clone(), dir, options()) else {
            return;
        };
        match db.get(b"fuzz-key") {
            Ok(Some(value)) => {
                assert_eq!(
                    value, b"fuzz-value",
                    "an acknowledged commit reads back wrong after reopen"
                );
            }
            Ok(None) => panic!("an acknowledged commit is lost after close and reopen"),
            Err(_) => {}
        }
    }
}

/// The calls [`exercise`] makes on an open database; returns whether its commit succeeded.
fn use_db(db: &Db) -> bool {
    let _ = db.check_space();
    let _ = db.check_tables();
    let mut tables = vec![String::new()];
    if let Ok(named) = db.tables() {
        tables.extend(named.into_iter().take(4));
    }
    for table in &tables {
        for direction in [Direction::Forward, Direction::Backward] {
            let _ = db.scan_in(table, Bound::Unbounded, Bound::Unbounded, direction);
        }
    }
    for i in (0..100).step_by(9) {
        let _ = db.get(&key(i));
    }
    let committed = (|| {
        let mut txn = db.begin()?;
        txn.put(b"fuzz-key", b"fuzz-value")?;
        txn.put_in("t", &key(203), b"changed")?;
        txn.delete(&key(3))?;
        txn.commit()
    })();
    if committed.is_ok() {
        match db.get(b"fuzz-key") {
            Ok(Some(value)) => assert_eq!(
                value, b"fuzz-value",
                "an acknowledged commit reads back wrong"
            ),
            Ok(None) => panic!("an acknowledged commit is not visible"),
            Err(_) => {}
        }
    }
    committed.is_ok()
}
