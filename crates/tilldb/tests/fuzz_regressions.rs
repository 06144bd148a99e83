//! Bugs the fuzz targets (`fuzz/`, run by `scripts/fuzz`) found, each as a minimized
//! reproducer on a `SimDisk`, ignored until its fix lands (TESTPLAN F9: bad input never
//! panics). Run them with `cargo test --test fuzz_regressions -- --ignored`.
//!
//! Both need bytes no crash or torn write produces (a file name, or a segment header whose
//! checksum matches), so they are hostile or foreign input rather than damage. The
//! `wal_record` target keeps generations below 2^63 and lsns below 2^62 until they are fixed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use tilldb::TornPageGuard;
use tilldb::internals::wal::{SegmentHeader, Wal, WalOptions};
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Db, Durability, FlushMethod, Options};

const DIR: &str = "/wal";

fn options() -> WalOptions {
    WalOptions {
        log_block_bytes: Some(512),
        segment_bytes: 8192,
        background_threads: false,
        ..WalOptions::for_tests()
    }
}

/// Opens the log in `DIR`, appends a record and reads the log back. Any `Err` is fine: the
/// point is that nothing panics.
fn open_append_read(disk: Arc<SimDisk>) {
    let Ok((wal, recovery)) = Wal::open(disk, Path::new(DIR), options()) else {
        return;
    };
    let _ = wal.read_from(recovery.start_lsn);
    if wal.commit(b"after recovery", Durability::Sync).is_ok() {
        let _ = wal.read_from(recovery.end_lsn);
    }
    let _ = wal.close();
}

/// A file in the log directory named for generation `u64::MAX` (empty, so free space like
/// an interrupted create) makes `Wal::open` compute the next generation as `u64::MAX + 1`:
/// with overflow checks on (tests, fuzzing) it panics; without them it wraps to 0, a
/// generation older than every segment. Found by `wal_record` (a segment of generation
/// `0xFFFF_FFFF_FFFF_FFFF`). Fixed: generations past `GENERATION_MAX` are refused.
#[test]
fn a_segment_named_for_the_last_generation_is_not_a_panic() {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let storage: &dyn Storage = &*disk;
    storage.create_dir_all(Path::new(DIR)).expect("directory");
    let name = format!("{}/{:020}.wal", DIR, u64::MAX);
    drop(
        storage
            .create(Path::new(&name), FlushMethod::Fdatasync)
            .expect("create"),
    );
    open_append_read(disk);
}

/// A disk whose log holds one valid, empty segment (generation 1) starting at `base_lsn`.
fn disk_with_one_segment_at(base_lsn: u64) -> Arc<SimDisk> {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let storage: &dyn Storage = &*disk;
    storage.create_dir_all(Path::new(DIR)).expect("directory");
    let header = SegmentHeader {
        version: 2,
        log_block_bytes: 512,
        segment_bytes: 8192,
        generation: 1,
        base_lsn,
        seal: None,
    };
    let mut bytes = header.encode().to_vec();
    bytes.resize(8192, 0);
    let name = format!("{}/{:020}.wal", DIR, header.generation);
    let file = storage
        .create(Path::new(&name), FlushMethod::Fdatasync)
        .expect("create");
    file.write_at(&bytes, 0).expect("write");
    disk
}

/// A segment whose header is valid (checksum included) but whose base lsn leaves no room for
/// a segment's lsns (`base_lsn + capacity` past `u64::MAX`) is accepted by recovery; the
/// new segment then starts there, and `Segment::end_lsn` overflows on the next read of the
/// log. Found by `wal_record` (base lsn `0xFFFF_FFFF_FFFF_E1FA`). Fixed: a header whose base
/// lsn is past `LSN_MAX` does not decode.
#[test]
fn a_segment_base_lsn_near_the_end_of_the_lsn_space_is_not_a_panic() {
    open_append_read(disk_with_one_segment_at(u64::MAX - 4096));
}

/// A valid segment whose base lsn is not a multiple of 8 (no writer makes one, but a header
/// may say so): the log goes on from there, and the first lone commit's tail slot copy
/// asserted that a block's lsn is a multiple of 8. Found by `wal_record` when tail slots came
/// (log version 2). Fixed: the assertion was wrong (blocks are counted from the segment's
/// base, whatever it is) and is gone.
#[test]
fn a_segment_base_lsn_that_is_not_a_multiple_of_8_is_not_a_panic() {
    open_append_read(disk_with_one_segment_at(4097));
}

// ---------------------------------------------------------------------------------------------
// The database of the `open_files` target (`fuzz/src/base.rs`, variant `crash`), rebuilt here
// so a reproducer does not depend on the fuzz crate.

const DB_DIR: &str = "/db";

fn db_options() -> Options {
    let defaults = Options::for_tests();
    Options {
        page_bytes: Some(4096),
        cache_bytes: 64 * 4096,
        flush_method: Some(FlushMethod::Fdatasync),
        torn_page_guard: TornPageGuard::Doublewrite,
        checkpoint_log_bytes: 64 << 20,
        wal: WalOptions {
            // 8 KiB of records and header, and two 512-byte tail slots.
            segment_bytes: 9 << 10,
            log_block_bytes: Some(512),
            background_threads: false,
            ..defaults.wal.clone()
        },
        background_threads: false,
        ..defaults
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let len = if i == 7 {
        3000
    } else {
        12 + (i * 29 + round * 7) % 90
    };
    let mut v = format!("v{i}.{round}.").into_bytes();
    v.resize(len as usize, b'a' + u8::try_from(i % 26).expect("below 26"));
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

/// The base database, its process killed after the last commit; returns the disk and the
/// path of its newest log segment.
fn crashed_database() -> (Arc<SimDisk>, PathBuf) {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    let dir = Path::new(DB_DIR);
    let db = Db::open_with_storage(disk.clone(), dir, db_options()).expect("create");
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
    drop(db);
    disk.crash(CrashMode::ProcessKill);
    let storage: &dyn Storage = &*disk;
    let wal = dir.join("wal");
    let newest = storage
        .list_dir(&wal)
        .expect("the log directory")
        .into_iter()
        .max()
        .expect("a segment");
    (disk, wal.join(newest))
}

/// Zeroes `len` bytes of `path` at `offset` (a lost or wiped sector).
fn zero(disk: &SimDisk, path: &Path, offset: u64, len: usize) {
    let storage: &dyn Storage = disk;
    let file = storage.open(path, FlushMethod::Fdatasync).expect("open");
    file.write_at(&vec![0; len], offset).expect("write");
    file.flush().expect("flush");
}

/// Two damages: the newest header slot torn (a crash while writing it makes the same bytes,
/// and the older slot is then the header, by design) and one zeroed sector inside the log
/// after the older slot's checkpoint. Recovery takes the log to end at the damage, before
/// lsns that pages already in the data file carry (the newer checkpoint wrote them); it
/// opens without an error, and the next commit panics (`page 4 lsn going backwards`), and
/// so does the checkpoint when the database is dropped (`checkpoint lsn going backwards`).
/// It should be refused as corruption: the log does not reach the pages' lsns. Related to
/// `damage_inside_the_log_is_refused_not_taken_for_its_end` in `db_corruption.rs` (one
/// damage, acknowledged commits lost silently); with the torn slot the symptom is a panic.
/// Found by `open_files` (input `30 03 30 03 00 03`, minimized). Fixed: a page read from
/// disk whose lsn is past the end of the log is `Corruption` (the write-ahead rule, checked
/// backwards).
#[test]
fn a_torn_newest_header_slot_and_a_damaged_log_are_refused_not_a_panic() {
    let (disk, newest_segment) = crashed_database();
    let dir = Path::new(DB_DIR);
    zero(&disk, &newest_segment, 3 * 512, 512);
    zero(&disk, &dir.join("tilldb.meta"), 0, 512);
    let Ok(db) = Db::open_with_storage(disk.clone(), dir, db_options()) else {
        return;
    };
    let committed = (|| {
        let mut txn = db.begin()?;
        txn.put(b"after", b"recovery")?;
        txn.commit()
    })();
    if committed.is_ok() {
        assert_eq!(db.get(b"after").expect("get"), Some(b"recovery".to_vec()));
    }
    let _ = db.close();
}

/// Replaces `path`'s bytes at `offset` with `bytes`.
fn overwrite(disk: &SimDisk, path: &Path, offset: u64, bytes: &[u8]) {
    let storage: &dyn Storage = disk;
    let file = storage.open(path, FlushMethod::Fdatasync).expect("open");
    file.write_at(bytes, offset).expect("write");
    file.flush().expect("flush");
}

/// Three damages: the data file cut inside page 1 (a lost size change or truncation), the
/// doublewrite batch header damaged (so the batch cannot restore the page), and the newest
/// header slot torn (so recovery starts from the older slot's checkpoint, with more log to
/// redo). Redo then applies a logged node op to page 1, which now reads as no node, and
/// `PageOp::apply_to` panics ("node op applied to a non-node page"). The op's record is
/// intact; the page under it is not, so this should be refused as corruption of the data
/// file naming page 1, not a panic. Any two of the three damages open without a panic.
/// Found by `open_files` (minimized input
/// `06 55 56 00 00 00 00 6b 6b 55 4e 00 30 30 35 00 00 30 35`). Fixed: redo checks that an
/// op fits the page's kind (`PageOp::fits_kind`) and refuses with `Corruption` if not.
#[test]
fn redo_onto_a_page_lost_from_the_data_file_is_refused_not_a_panic() {
    let (disk, _) = crashed_database();
    let dir = Path::new(DB_DIR);
    let storage: &dyn Storage = &*disk;
    let data = storage
        .open(&dir.join("data.tdb"), FlushMethod::Fdatasync)
        .expect("open the data file");
    data.set_len(8175).expect("truncate");
    data.flush().expect("flush");
    drop(data);
    overwrite(&disk, &dir.join("doublewrite.tdb"), 0, &[b'T' ^ 0x6b]);
    // Header slot 0 overwritten by the first block of the second log segment (torn).
    let mut segments = storage.list_dir(&dir.join("wal")).expect("the log");
    segments.sort();
    let block = disk
        .live_contents(&dir.join("wal").join(&segments[1]))
        .expect("a segment");
    overwrite(&disk, &dir.join("tilldb.meta"), 0, &block[..4096]);
    if let Ok(db) = Db::open_with_storage(disk.clone(), dir, db_options()) {
        let _ = db.check_space();
        let _ = db.close();
    }
}
