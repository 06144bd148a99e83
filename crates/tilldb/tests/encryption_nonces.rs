//! Encryption at rest: no nonce is used twice under one key (docs/encryption.md, section 3),
//! for the log and the pages. A database's disk is forked after a crash, as a backup restored beside the
//! original or a VM snapshot rolled back would fork it, and both copies go on committing
//! different rows: both open new segments of the same generation at the same lsn. The copies'
//! segments draw their salts at random (through the storage, whose forks draw differently),
//! so their keys differ: in every segment file of both copies, each (salt, generation, lsn),
//! which names a key and a nonce, maps to one record's bytes only (mutant
//! `segment-salt-not-random`). Small segments take the log through several segments.
//!
//! Each copy also writes pages at checkpoints, sealed under its open's epoch key (a random
//! salt per open) with a counter as nonce: in the data file and the doublewrite file of all
//! copies, read after every checkpoint (whose pages all pass through the doublewrite batch)
//! and at the end, each (salt, counter) maps to one sealed page only (mutants
//! `epoch-salt-kept-after-open`, `nonce-reused-on-rewrite`). What the test does not see: a
//! page written by eviction between two checkpoints and overwritten before the next.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use tilldb::internals::crypt::{Cipher, Encryption, StaticKey};
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Db, Options};

const DIR: &str = "/db";

fn options() -> Options {
    let defaults = Options::for_tests();
    Options {
        encryption: Some(Encryption {
            provider: Arc::new(StaticKey::new(&[0x41; 32])),
            cipher: Cipher::Aes256Gcm,
        }),
        background_threads: false,
        checkpoint_log_bytes: 128 << 10,
        wal: tilldb::WalOptions {
            segment_bytes: 64 << 10,
            first_segment_bytes: 16 << 10,
            ..defaults.wal.clone()
        },
        ..defaults
    }
}

/// Commits `rows` rows, one a commit, with a checkpoint every 100; then kills the process.
/// The sealed pages of the disk after each checkpoint go into `pages`: a checkpoint's pages
/// all pass through the doublewrite batch, so each page write of the run is seen there.
fn commit_rows(disk: &SimDisk, tag: &str, rows: u32, pages: &mut SealedPages) {
    let db =
        Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options()).expect("open");
    for i in 0..rows {
        let mut txn = db.begin().expect("begin");
        let value = format!("{tag}-value-{i:05}-{}", "v".repeat(150));
        txn.put(format!("{tag}-{i:05}").as_bytes(), value.as_bytes())
            .expect("put");
        txn.commit().expect("commit");
        if i % 100 == 50 {
            db.checkpoint().expect("checkpoint");
            sealed_pages(disk, pages);
        }
    }
    disk.crash(CrashMode::ProcessKill);
    drop(db);
}

/// A record's key and nonce: (segment salt, generation, lsn) -> the distinct records found.
type Sealed = HashMap<([u8; 16], u64, u64), Vec<Vec<u8>>>;

/// Every valid record of every sealed segment file on `disk`, into `into`.
fn sealed_records(disk: &SimDisk, into: &mut Sealed) {
    let wal = Path::new(DIR).join("wal");
    for name in disk.list_dir(&wal).expect("list") {
        let bytes = disk.live_contents(&wal.join(&name)).expect("segment");
        if bytes.len() < 64 || bytes[8..12] != 3u32.to_le_bytes() {
            continue;
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4"));
        let block = u32_at(12) as usize;
        let generation = u64::from_le_bytes(bytes[24..32].try_into().expect("8"));
        let salt: [u8; 16] = bytes[44..60].try_into().expect("16");
        let end = bytes.len() - 2 * block;
        let mut at = block;
        while at + 24 <= end {
            let len = u32_at(at + 4) as usize;
            if len < 24 || !len.is_multiple_of(8) || at + len > end {
                break;
            }
            if common::crc32c(Some(generation), &bytes[at + 4..at + len]) != u32_at(at) {
                break;
            }
            let lsn = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().expect("8"));
            let record = bytes[at..at + len].to_vec();
            let seen = into.entry((salt, generation, lsn)).or_default();
            if !seen.contains(&record) {
                seen.push(record);
            }
            if bytes[at + 16] == 2 {
                break;
            }
            at += len;
        }
    }
}

const PAGE_BYTES: usize = 4096;

/// A page's key and nonce: (epoch salt, counter) -> the distinct sealed pages found.
type SealedPages = HashMap<([u8; 16], u64), Vec<Vec<u8>>>;

/// Every sealed page (version 2, its crc valid) of the data file and the doublewrite file's
/// images on `disk`, into `into`.
fn sealed_pages(disk: &SimDisk, into: &mut SealedPages) {
    let data = disk
        .live_contents(&Path::new(DIR).join("data.tdb"))
        .expect("data");
    let dw = disk
        .live_contents(&Path::new(DIR).join("doublewrite.tdb"))
        .expect("doublewrite");
    let places = data
        .chunks_exact(PAGE_BYTES)
        .chain(dw[4096..].chunks_exact(PAGE_BYTES));
    for page in places {
        let id = u64::from_le_bytes(page[8..16].try_into().expect("8"));
        let crc = u32::from_le_bytes(page[..4].try_into().expect("4"));
        if page[5] != 2 || common::crc32c(Some(id), &page[4..]) != crc {
            continue;
        }
        let trailer = PAGE_BYTES - 40;
        let salt: [u8; 16] = page[trailer..trailer + 16].try_into().expect("16");
        let counter = u64::from_le_bytes(page[trailer + 16..trailer + 24].try_into().expect("8"));
        let seen = into.entry((salt, counter)).or_default();
        if !seen.iter().any(|p| p == page) {
            seen.push(page.to_vec());
        }
    }
}

#[test]
fn forks_of_one_disk_never_seal_two_pages_under_one_key_and_nonce() {
    let disk = SimDisk::new(SimConfig {
        seed: 6,
        ..SimConfig::default()
    });
    let mut pages = HashMap::new();
    commit_rows(&disk, "before", 300, &mut pages);
    let (a, b) = (disk.fork(303), disk.fork(404));
    commit_rows(&a, "fork-a", 300, &mut pages);
    commit_rows(&b, "fork-b", 300, &mut pages);
    for d in [&disk, &a, &b] {
        sealed_pages(d, &mut pages);
    }
    assert!(pages.len() > 20, "{} sealed pages found", pages.len());
    for ((salt, counter), seen) in &pages {
        assert_eq!(
            seen.len(),
            1,
            "salt {salt:02x?}, counter {counter}: {} pages under one key and nonce",
            seen.len()
        );
    }
    let epochs: std::collections::BTreeSet<[u8; 16]> = pages.keys().map(|(s, _)| *s).collect();
    assert!(epochs.len() >= 3, "{} epochs wrote pages", epochs.len());
}

#[test]
fn forks_of_one_disk_never_seal_two_records_under_one_key_and_nonce() {
    let disk = SimDisk::new(SimConfig {
        seed: 5,
        ..SimConfig::default()
    });
    let mut pages = HashMap::new();
    commit_rows(&disk, "before", 300, &mut pages);
    let (a, b) = (disk.fork(101), disk.fork(202));
    commit_rows(&a, "fork-a", 300, &mut pages);
    commit_rows(&b, "fork-b", 300, &mut pages);
    let mut records = HashMap::new();
    for d in [&disk, &a, &b] {
        sealed_records(d, &mut records);
    }
    assert!(
        records.len() > 500,
        "{} sealed records found",
        records.len()
    );
    let generations: std::collections::BTreeSet<u64> = records.keys().map(|(_, g, _)| *g).collect();
    assert!(generations.len() > 3, "segments made: {generations:?}");
    for ((salt, generation, lsn), seen) in &records {
        assert_eq!(
            seen.len(),
            1,
            "generation {generation}, lsn {lsn}, salt {salt:02x?}: {} records under one key \
             and nonce",
            seen.len()
        );
    }
}
