//! Rotating an encrypted database's application key (`Db::rotate_key`, docs/encryption.md
//! section 4): the data key is rewrapped in the header, nothing else is rewritten. After it
//! the database opens with the new key only, every row is there, and neither header slot
//! holds the old wrap (mutant `old-wrap-kept`); a compaction after it wraps its copy with the
//! new key. A rotation crashed at each of its header writes and flushes, by a process kill or
//! a power cut, leaves a database that opens with exactly one of the two keys, whole. A
//! rotation waits for a running backup (mutant `rotation-ignores-running-backup`). A plain
//! database and a read-only handle refuse it, changing nothing.

use std::path::Path;
use std::sync::Arc;
use tilldb::internals::crypt::{Cipher, Encryption, KeyProvider, StaticKey};
use tilldb::internals::header::{Header, SLOT_BYTES, SlotState};
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk};
use tilldb::{Db, Error, Options};

const DIR: &str = "/db";
const OLD: [u8; 32] = [0x11; 32];
const NEW: [u8; 32] = [0x22; 32];

fn provider(key: [u8; 32]) -> Arc<dyn KeyProvider> {
    Arc::new(StaticKey::new(&key))
}

fn options(key: Option<[u8; 32]>) -> Options {
    Options {
        encryption: key.map(|key| Encryption {
            provider: provider(key),
            cipher: Cipher::Aes256Gcm,
        }),
        background_threads: false,
        ..Options::for_tests()
    }
}

fn open(disk: &SimDisk, key: Option<[u8; 32]>) -> tilldb::Result<Db> {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new(DIR), options(key))
}

fn row(i: u32) -> (Vec<u8>, Vec<u8>) {
    (
        format!("receipt-{i:04}").into_bytes(),
        format!("total {i}").into_bytes(),
    )
}

/// An encrypted database under `OLD` holding 200 rows, checkpointed and closed.
fn database() -> SimDisk {
    database_on(SimConfig::default().seed)
}

/// [`database`] on a disk of `seed` (which decides how a crash cuts and tears writes).
fn database_on(seed: u64) -> SimDisk {
    let disk = SimDisk::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let db = open(&disk, Some(OLD)).expect("create");
    let mut txn = db.begin().expect("begin");
    for i in 0..200 {
        let (k, v) = row(i);
        txn.put(&k, &v).expect("put");
    }
    txn.commit().expect("commit");
    db.checkpoint().expect("checkpoint");
    db.close().expect("close");
    disk
}

fn assert_rows(db: &Db) {
    for i in 0..200 {
        let (k, v) = row(i);
        assert_eq!(db.get(&k).expect("get"), Some(v), "row {i}");
    }
}

/// The key id of each valid header slot on `disk`.
fn slot_key_ids(disk: &SimDisk) -> Vec<String> {
    let bytes = disk
        .live_contents(&Path::new(DIR).join("tilldb.meta"))
        .expect("header file");
    (0..2)
        .filter_map(|slot| {
            match Header::decode(&bytes[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES], slot) {
                Ok(SlotState::Valid(header)) => header.encryption.map(|b| b.key_id().to_owned()),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn a_rotated_database_opens_with_the_new_key_only_and_keeps_no_old_wrap() {
    let disk = database();
    let old_id = provider(OLD).key_id();
    let new_id = provider(NEW).key_id();
    assert!(slot_key_ids(&disk).contains(&old_id));
    let db = open(&disk, Some(OLD)).expect("open");
    db.rotate_key(provider(NEW)).expect("rotate");
    // At once, not after the close's checkpoint (whose header write would hide a slot left
    // with the old wrap).
    assert_eq!(
        slot_key_ids(&disk),
        vec![new_id.clone(), new_id],
        "a header slot keeps the old wrap"
    );
    assert_rows(&db);
    db.close().expect("close");
    match open(&disk, Some(OLD)) {
        Err(Error::WrongKey { key_id, .. }) => assert_ne!(key_id, old_id),
        other => panic!("the old key opened a rotated database: {:?}", other.err()),
    }
    let db = open(&disk, Some(NEW)).expect("the new key opens it");
    assert_rows(&db);
    db.close().expect("close");
}

#[test]
fn a_compaction_after_a_rotation_wraps_its_copy_with_the_new_key() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options(Some(OLD))).expect("create");
    let mut txn = db.begin().expect("begin");
    txn.put(b"k", b"v").expect("put");
    txn.commit().expect("commit");
    db.rotate_key(provider(NEW)).expect("rotate");
    db.compact_to(tmp.path().join("copy")).expect("compact");
    db.close().expect("close");
    assert!(matches!(
        Db::open(tmp.path().join("copy"), options(Some(OLD))),
        Err(Error::WrongKey { .. })
    ));
    let copy = Db::open(tmp.path().join("copy"), options(Some(NEW))).expect("new key");
    assert_eq!(copy.get(b"k").expect("get"), Some(b"v".to_vec()));
    copy.close().expect("close");
}

/// Crashes a rotation at its `nth` header write or flush (on a disk of `seed`) and checks that
/// the database opens with exactly one of the two keys, with every row; returns which.
fn rotation_crashed_at(kind: IoKind, nth: u64, mode: CrashMode, seed: u64) -> &'static str {
    let disk = database_on(seed);
    let db = open(&disk, Some(OLD)).expect("open");
    disk.inject(Fault::once(kind, nth, FaultKind::Crash).on_path("tilldb.meta"));
    let rotated = db.rotate_key(provider(NEW));
    let fired = disk.faults_pending() == 0;
    disk.crash(mode);
    drop(db);
    disk.clear_faults();
    // One open at a time: an open database holds the lock.
    let try_key = |key| {
        open(&disk, Some(key)).map(|db| {
            assert_rows(&db);
            db.close().expect("close");
        })
    };
    let (old, new) = (try_key(OLD), try_key(NEW));
    let which = match (&old, &new) {
        (Ok(()), Err(Error::WrongKey { .. })) => "old",
        (Err(Error::WrongKey { .. }), Ok(())) => "new",
        _ => panic!("{kind:?} {nth} {mode:?} seed {seed}: opened with old {old:?}, new {new:?}"),
    };
    if !fired {
        assert!(rotated.is_ok(), "{kind:?} {nth}: {rotated:?}");
        assert_eq!(which, "new", "a finished rotation is in force");
    }
    which
}

#[test]
fn a_rotation_crashed_at_any_header_write_opens_with_exactly_one_key() {
    let mut seen = std::collections::BTreeSet::new();
    for mode in [
        CrashMode::ProcessKill,
        CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: true,
        },
    ] {
        for kind in [IoKind::Write, IoKind::Flush] {
            for nth in 1..=3 {
                for seed in 0..6 {
                    seen.insert(rotation_crashed_at(kind, nth, mode, seed));
                }
            }
        }
    }
    assert_eq!(seen.len(), 2, "both outcomes met: {seen:?}");
}

#[test]
fn a_plain_database_and_a_read_only_handle_refuse_a_rotation() {
    let disk = SimDisk::new(SimConfig::default());
    let db = open(&disk, None).expect("create plain");
    assert!(matches!(
        db.rotate_key(provider(NEW)),
        Err(Error::NotEncrypted { .. })
    ));
    db.close().expect("close");
    let disk = database();
    let before = disk.live_contents(&Path::new(DIR).join("tilldb.meta"));
    let reader =
        Db::open_read_only_with_storage(Arc::new(disk.clone()), Path::new(DIR), options(Some(OLD)))
            .expect("read-only");
    assert!(matches!(
        reader.rotate_key(provider(NEW)),
        Err(Error::ReadOnly { .. })
    ));
    drop(reader);
    assert_eq!(
        disk.live_contents(&Path::new(DIR).join("tilldb.meta")),
        before
    );
}

/// A rotation whose second header write fails (an `EIO`, the process going on): the first
/// is in force, so the database is stopped (poisoned, as after a failed checkpoint) and
/// reopens with the new key only; before that, the handle knew the new key was in force.
#[test]
fn a_rotation_whose_second_write_fails_stops_the_database_under_the_new_key() {
    let disk = database();
    let db = open(&disk, Some(OLD)).expect("open");
    disk.inject(Fault::once(IoKind::Write, 2, FaultKind::Eio).on_path("tilldb.meta"));
    let err = db
        .rotate_key(provider(NEW))
        .expect_err("the second write fails");
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(
        matches!(db.begin().map(drop), Err(Error::PoisonedBy { .. })),
        "the database goes on after a failed header write"
    );
    drop(db);
    disk.clear_faults();
    assert!(matches!(
        open(&disk, Some(OLD)),
        Err(Error::WrongKey { .. })
    ));
    let db = open(&disk, Some(NEW)).expect("the new key opens it");
    assert_rows(&db);
    db.close().expect("close");
}

/// A backup running when a rotation is asked for finishes first: the rotation waits for it,
/// so no backup finishes after `rotate_key` returned with the old wrap in its copy. The
/// backup is held inside its first progress report (the checkpoint hold already taken).
#[test]
fn a_rotation_waits_for_a_running_backup() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (dir, copy) = (tmp.path().join("db"), tmp.path().join("backup"));
    let real = |key: [u8; 32]| Options {
        background_threads: true,
        ..options(Some(key))
    };
    let db = Db::open(&dir, real(OLD)).expect("create");
    let mut txn = db.begin().expect("begin");
    for i in 0..200 {
        let (k, v) = row(i);
        txn.put(&k, &v).expect("put");
    }
    txn.commit().expect("commit");
    let (paused, wait_paused) = std::sync::mpsc::channel();
    let (go, wait_go) = std::sync::mpsc::channel::<()>();
    let waited = std::thread::scope(|s| {
        let (db, copy) = (&db, &copy);
        let backup = s.spawn(move || {
            let mut first = true;
            db.backup_to_with_progress(copy, &mut |_| {
                if std::mem::take(&mut first) {
                    paused.send(()).expect("the test waits");
                    wait_go.recv().expect("the test lets it go on");
                }
            })
        });
        wait_paused.recv().expect("the backup began");
        let rotation = s.spawn(move || db.rotate_key(provider(NEW)));
        std::thread::sleep(std::time::Duration::from_millis(500));
        let waited = !rotation.is_finished();
        go.send(()).expect("the backup waits");
        backup.join().expect("backup thread").expect("backup");
        rotation.join().expect("rotation thread").expect("rotate");
        waited
    });
    assert!(waited, "the rotation returned while a backup was running");
    db.close().expect("close");
    // The backup finished before the rotation: it opens with the old key, the database with
    // the new one only.
    assert_rows(&Db::open(&copy, real(OLD)).expect("the backup, with the old key"));
    assert!(matches!(
        Db::open(&dir, real(OLD)),
        Err(Error::WrongKey { .. })
    ));
    assert_rows(&Db::open(&dir, real(NEW)).expect("the database, with the new key"));
}
