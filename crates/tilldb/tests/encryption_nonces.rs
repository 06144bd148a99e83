//! Encryption at rest: no nonce is used twice under one key (docs/encryption.md, section 3),
//! for the log. A database's disk is forked after a crash, as a backup restored beside the
//! original or a VM snapshot rolled back would fork it, and both copies go on committing
//! different rows: both open new segments of the same generation at the same lsn. The copies'
//! segments draw their salts at random (through the storage, whose forks draw differently),
//! so their keys differ: in every segment file of both copies, each (salt, generation, lsn),
//! which names a key and a nonce, maps to one record's bytes only (mutant
//! `segment-salt-not-random`). Small segments take the log through several segments.

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

fn commit_rows(disk: &SimDisk, tag: &str, rows: u32) {
    let db =
        Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options()).expect("open");
    for i in 0..rows {
        let mut txn = db.begin().expect("begin");
        let value = format!("{tag}-value-{i:05}-{}", "v".repeat(150));
        txn.put(format!("{tag}-{i:05}").as_bytes(), value.as_bytes())
            .expect("put");
        txn.commit().expect("commit");
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

#[test]
fn forks_of_one_disk_never_seal_two_records_under_one_key_and_nonce() {
    let disk = SimDisk::new(SimConfig {
        seed: 5,
        ..SimConfig::default()
    });
    commit_rows(&disk, "before", 300);
    let (a, b) = (disk.fork(101), disk.fork(202));
    commit_rows(&a, "fork-a", 300);
    commit_rows(&b, "fork-b", 300);
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
