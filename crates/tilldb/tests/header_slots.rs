//! The database header's two slots: whatever a crash or a flipped bit does to the slot being
//! written (or to either slot, one at a time), the newest header acknowledged before it is
//! still read back; a header file that holds nothing is "no database", not corruption; and a
//! header file with neither slot valid is corruption naming the file and offset.

use std::path::Path;
use tilldb::FlushMethod;
use tilldb::Lsn;
use tilldb::internals::header::{
    HEADER_FILE_NAME, HEADER_TEMP_FILE_NAME, Header, HeaderFile, SLOT_BYTES,
};
use tilldb::internals::page::{PageId, TornPageGuard};
use tilldb::io::{AlignedBuf, CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk, Storage};
use tilldb::{Error, Result};

const DIR: &str = "/db";
const METHOD: FlushMethod = FlushMethod::Fdatasync;

fn disk(seed: u64) -> SimDisk {
    let disk = SimDisk::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    disk.create_dir_all(Path::new(DIR)).expect("mkdir");
    disk
}

fn meta() -> &'static Path {
    Path::new("/db/tilldb.meta")
}

/// The header a test writes as its `n`th checkpoint: every field changes with `n`.
fn checkpoint(n: u64) -> Header {
    Header {
        page_bytes: 16384,
        flush_method: METHOD,
        torn_page_guard: TornPageGuard::Doublewrite,
        generation: 0,
        checkpoint_lsn: Lsn(1000 * n),
        catalog_root: PageId(n % 3),
        free_head: PageId(n % 2),
        page_count: 10 + n,
        encryption: None,
        write_buffer: false,
        drain_chunks: false,
    }
}

/// Creates the header file and writes checkpoints 2..=n after the first.
fn create_with(disk: &SimDisk, n: u64) -> (HeaderFile, Header) {
    let (mut file, mut last) =
        HeaderFile::create(disk, Path::new(DIR), METHOD, &checkpoint(1), None).expect("create");
    for i in 2..=n {
        last = file.write(&checkpoint(i)).expect("write");
    }
    (file, last)
}

fn open(disk: &SimDisk) -> Result<Option<Header>> {
    HeaderFile::open(disk, Path::new(DIR), METHOD).map(|o| o.map(|(_, header)| header))
}

/// Writes raw bytes over the header file (as a torn write or a bad sector would leave them).
fn overwrite(disk: &SimDisk, offset: u64, bytes: &[u8]) {
    let file = disk.open(meta(), METHOD).expect("open");
    let mut buf = AlignedBuf::zeroed(bytes.len().next_multiple_of(512));
    buf[..bytes.len()].copy_from_slice(bytes);
    file.write_at(&buf[..bytes.len()], offset).expect("write");
    file.flush().expect("flush");
}

#[test]
fn generations_alternate_slots_and_never_overwrite_the_newest() {
    let disk = disk(0);
    let (mut file, first) =
        HeaderFile::create(&disk, Path::new(DIR), METHOD, &checkpoint(1), None).expect("create");
    assert_eq!((file.newest().0, first.generation), (0, 1));
    assert!(
        !disk
            .exists(&Path::new(DIR).join(HEADER_TEMP_FILE_NAME))
            .expect("exists")
    );
    for n in 2..=7 {
        let before = disk.live_contents(meta()).expect("file");
        let (newest_slot, _) = file.newest();
        let written = file.write(&checkpoint(n)).expect("write");
        assert_eq!(written.generation, n);
        let after = disk.live_contents(meta()).expect("file");
        let kept = newest_slot * SLOT_BYTES..(newest_slot + 1) * SLOT_BYTES;
        assert_eq!(
            before[kept.clone()],
            after[kept],
            "the newest slot was overwritten"
        );
        assert_eq!(file.newest().0, 1 - newest_slot, "slots alternate");
        assert_eq!(
            disk.durable_contents(meta()).expect("durable"),
            after,
            "durable on return"
        );
        let read = open(&disk).expect("open").expect("database");
        assert_eq!(
            read,
            Header {
                generation: n,
                ..checkpoint(n)
            }
        );
        assert_eq!(file.read().expect("read"), Some((file.newest().0, read)));
    }
    assert_eq!(
        disk.live_contents(meta()).expect("file").len(),
        2 * SLOT_BYTES
    );
}

#[test]
fn create_refuses_an_existing_database_and_ignores_a_stale_temp_file() {
    let disk = disk(0);
    let temp = Path::new(DIR).join(HEADER_TEMP_FILE_NAME);
    drop(disk.create(&temp, METHOD).expect("stale temp"));
    create_with(&disk, 1);
    assert!(!disk.exists(&temp).expect("exists"), "stale temp removed");
    let again = HeaderFile::create(&disk, Path::new(DIR), METHOD, &checkpoint(1), None);
    assert!(again.is_err(), "created over an existing database");
    assert_eq!(open(&disk).expect("open").expect("db").generation, 1);
}

#[test]
fn an_empty_or_all_zero_file_is_no_database() {
    let disk = disk(0);
    let path = Path::new(DIR).join(HEADER_FILE_NAME);
    let file = disk.create(&path, METHOD).expect("create");
    assert!(open(&disk).expect("empty file").is_none());
    file.allocate_zeroed(0, 2 * SLOT_BYTES as u64)
        .expect("zeros");
    assert!(open(&disk).expect("zero file").is_none());
}

#[test]
fn every_bit_flip_of_either_slot_falls_back_to_the_other() {
    let disk = disk(0);
    // Generation 3 in slot 0, generation 4 (newest) in slot 1.
    create_with(&disk, 4);
    for (slot, survivor) in [(0, 4), (1, 3)] {
        for bit in 0..SLOT_BYTES * 8 {
            let offset = (slot * SLOT_BYTES + bit / 8) as u64;
            let mask = 1 << (bit % 8);
            disk.corrupt(meta(), offset, mask);
            let header = open(&disk).expect("one slot is enough").expect("db");
            assert_eq!(header.generation, survivor, "slot {slot} bit {bit}");
            assert_eq!(
                header,
                Header {
                    generation: survivor,
                    ..checkpoint(survivor)
                }
            );
            disk.corrupt(meta(), offset, mask);
        }
    }
    // Both slots bad: corruption naming the file and offset, never a header.
    disk.corrupt(meta(), 100, 1);
    disk.corrupt(meta(), SLOT_BYTES as u64 + 100, 1);
    match open(&disk) {
        Err(Error::Corruption { file, offset, what }) => {
            assert_eq!(file, meta());
            assert_eq!(offset, 0);
            assert!(what.contains("neither"), "{what}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_only_written_slot_torn_is_corruption_not_no_database() {
    let disk = disk(0);
    create_with(&disk, 1);
    disk.corrupt(meta(), 7, 0x40);
    match open(&disk) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, meta());
            assert_eq!(offset, 0);
        }
        other => panic!("{other:?}"),
    }
}

/// A header write torn by hand: each 512-byte sector of the slot being written lands new, or
/// stays old, or (with `garbage`) holds other bytes: all 256 sector subsets. The previous
/// header is read unless the slot holds exactly the new bytes, and then the new one is.
#[test]
fn a_torn_header_write_by_hand_always_leaves_the_previous_header() {
    let sectors = SLOT_BYTES / 512;
    for garbage in [false, true] {
        for landed in 0u32..1 << sectors {
            let disk = disk(u64::from(landed));
            let (_, previous) = create_with(&disk, 2);
            // The next write goes to slot 0 (generation 3).
            let new = checkpoint(3).encode_with_generation(3, 0);
            let old = disk.live_contents(meta()).expect("file")[..SLOT_BYTES].to_vec();
            let mut torn = old.clone();
            for sector in 0..sectors {
                let range = sector * 512..(sector + 1) * 512;
                if landed & (1 << sector) != 0 {
                    torn[range.clone()].copy_from_slice(&new[range]);
                } else if garbage {
                    let fill = u8::try_from((u64::from(landed) * 7 + sector as u64) % 251);
                    torn[range].fill(fill.expect("small") | 1);
                }
            }
            overwrite(&disk, 0, &torn);
            let header = open(&disk).expect("never corruption").expect("db");
            // The new header counts only when its bytes are all there (sectors of zeros in
            // the middle of the slot are the same old and new, so not all must land).
            if torn[..] == new[..] {
                assert_eq!(header.generation, 3, "garbage {garbage} landed {landed:#b}");
            } else {
                assert_eq!(header, previous, "garbage {garbage} landed {landed:#b}");
            }
        }
    }
}

/// Header writes on the simulated disk, which dies at the k-th write or flush (every k across
/// four writes) and then loses power (sector tears, with and without garbage) or the process.
/// After the crash the header is the last acknowledged one or the one in flight, the next
/// write succeeds, and it too reads back.
#[test]
fn a_crash_at_every_point_of_header_writes_keeps_the_last_acknowledged_header() {
    let modes = [
        CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: false,
        },
        CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: true,
        },
        CrashMode::PowerLoss {
            tear_bytes: 4096,
            garbage: true,
        },
        CrashMode::ProcessKill,
    ];
    let mut states = 0;
    for seed in 0..48 {
        for mode in modes {
            for kind in [IoKind::Write, IoKind::Flush] {
                for nth in 1..=5 {
                    let disk = disk(seed);
                    let (mut file, mut acknowledged) = create_with(&disk, 1);
                    disk.inject(Fault::once(kind, nth, FaultKind::Crash));
                    let mut in_flight = None;
                    for n in 2..=5 {
                        in_flight = Some(n);
                        match file.write(&checkpoint(n)) {
                            Ok(written) => acknowledged = written,
                            Err(_) => break,
                        }
                        in_flight = None;
                    }
                    drop(file);
                    disk.crash(mode);
                    disk.clear_faults();
                    let case = format!("seed {seed} {mode:?} {kind:?} {nth}");
                    let (mut file, header) = HeaderFile::open(&disk, Path::new(DIR), METHOD)
                        .unwrap_or_else(|e| panic!("{case}: {e}"))
                        .unwrap_or_else(|| panic!("{case}: no database"));
                    let is_in_flight = in_flight.is_some_and(|n| {
                        header
                            == Header {
                                generation: n,
                                ..checkpoint(n)
                            }
                    });
                    assert!(header == acknowledged || is_in_flight, "{case}: {header:?}");
                    let next = header.generation + 1;
                    let written = file.write(&checkpoint(next)).expect("write after crash");
                    assert_eq!(open(&disk).expect("reopen"), Some(written), "{case}");
                    states += 1;
                }
            }
        }
    }
    eprintln!("header writes: {states} crash states");
}

/// Mutant, by hand: writing both slots (generations 3 and 4) before one flush lets a single
/// power cut tear both, and the test sees it (some seed leaves no valid slot). The real
/// `HeaderFile::write` never does this, so the test above finds no such seed.
#[test]
fn writing_both_slots_in_one_flush_is_caught() {
    let mut lost = 0;
    for seed in 0..64 {
        let disk = disk(seed);
        create_with(&disk, 2);
        let file = disk.open(meta(), METHOD).expect("open");
        let mut both = AlignedBuf::zeroed(2 * SLOT_BYTES);
        both[..SLOT_BYTES].copy_from_slice(&checkpoint(3).encode_with_generation(3, 0));
        both[SLOT_BYTES..].copy_from_slice(&checkpoint(4).encode_with_generation(4, 1));
        disk.inject(Fault::once(IoKind::Flush, 1, FaultKind::Crash));
        file.write_at(&both, 0).expect("write");
        assert!(file.flush().is_err());
        drop(file);
        disk.crash(CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: true,
        });
        disk.clear_faults();
        if matches!(open(&disk), Err(Error::Corruption { .. })) {
            lost += 1;
        }
    }
    assert!(lost > 0, "the both-slots mutant survived 64 seeds");
}

/// `Header::encode` for a given generation (the field `HeaderFile::write` fills in).
trait EncodeWithGeneration {
    fn encode_with_generation(&self, generation: u64, slot: usize) -> AlignedBuf;
}

impl EncodeWithGeneration for Header {
    fn encode_with_generation(&self, generation: u64, slot: usize) -> AlignedBuf {
        Header {
            generation,
            ..*self
        }
        .encode(slot)
    }
}

/// Issue 23: the header file was flushed with the flush method the caller passed in
/// `Options`, not the one stored at create: reopened with `NoSync`, checkpoints wrote headers
/// that were never made durable while the log segments before them were reused. The header
/// is now flushed as the database was created to be.
#[test]
fn the_header_is_flushed_with_the_stored_method_whatever_the_options_say() {
    use std::sync::Arc;
    use tilldb::{Db, Options};
    let disk = disk(3);
    let open = |method| {
        Db::open_with_storage(
            Arc::new(disk.clone()),
            Path::new(DIR),
            Options {
                flush_method: Some(method),
                background_threads: false,
                ..Options::for_tests()
            },
        )
    };
    open(METHOD).expect("create").close().expect("close");
    let db = open(FlushMethod::NoSync).expect("reopen asking for nosync");
    for i in 0..20u32 {
        let mut txn = db.begin().expect("begin");
        txn.put(&i.to_le_bytes(), b"v").expect("put");
        txn.commit().expect("commit");
    }
    db.checkpoint().expect("checkpoint");
    assert!(
        disk.durable_contents(meta()) == disk.live_contents(meta()),
        "the checkpoint's header is not durable"
    );
    drop(db);
}

/// An encrypted database's header (version 3) carries its key block through every write, and
/// a MAC its keys check; a flipped bit anywhere in the newest slot's block or MAC falls back
/// to the other slot, whose block is the same (the block never changes).
#[test]
fn an_encrypted_header_keeps_its_key_block_and_a_flip_in_it_falls_back() {
    use tilldb::internals::crypt::{Cipher, DataKey, DatabaseKeys, KeyBlock};
    let disk = disk(0);
    let keys = || {
        let key = DataKey::from_bytes(zeroize::Zeroizing::new([1; 32]));
        std::sync::Arc::new(DatabaseKeys::new(Cipher::Aes256Gcm, [5; 16], key))
    };
    let block = KeyBlock::new(Cipher::Aes256Gcm, [5; 16], "kek:till-7", &[0xa5; 61]).expect("fits");
    let encrypted = |n: u64| Header {
        encryption: Some(block),
        ..checkpoint(n)
    };
    let (mut file, _) =
        HeaderFile::create(&disk, Path::new(DIR), METHOD, &encrypted(1), Some(keys()))
            .expect("create");
    for n in 2..=4 {
        file.write(&encrypted(n)).expect("write");
    }
    drop(file);
    let (mut file, header) = HeaderFile::open(&disk, Path::new(DIR), METHOD)
        .expect("open")
        .expect("db");
    assert_eq!(header.encryption, Some(block));
    file.authenticate(keys()).expect("its MAC checks out");
    drop(file);
    let bytes = disk.live_contents(meta()).expect("meta");
    for slot in 0..2 {
        let version = &bytes[slot * SLOT_BYTES + 8..slot * SLOT_BYTES + 12];
        assert_eq!(version, 3u32.to_le_bytes(), "slot {slot}: version 3");
    }
    // Generation 4, the newest, is in slot 1.
    for bit in (128 * 8..(128 + 600 + 16) * 8).step_by(7) {
        let offset = (SLOT_BYTES + bit / 8) as u64;
        let mask = 1 << (bit % 8);
        disk.corrupt(meta(), offset, mask);
        let header = open(&disk).expect("slot 0 is enough").expect("db");
        assert_eq!(
            (header.generation, header.encryption),
            (3, Some(block)),
            "bit {bit}"
        );
        disk.corrupt(meta(), offset, mask);
    }
}
