//! Encryption at rest, the marker test (docs/encryption.md, piece 6): keys, values and table
//! names carrying markers go through every path that writes (one-row commits, a commit in
//! parts, a transaction whose write set spills, checkpoints, a process killed mid-commit and
//! the recovery after it, a compaction and a backup) under each torn-page guard that writes
//! pages twice or logs their images; then no 8-byte window of any marker is in any file of the
//! database, the compacted copy or the backup, nor in any scratch file read just before
//! tilldb removed it. The same workload unencrypted leaves the markers everywhere, so the check
//! can fail. Every row is then read back with the key.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tilldb::internals::crypt::{Cipher, Encryption, StaticKey};
use tilldb::io::{Call, CrashMode, FileStorage, HookedStorage, Hooks, SimConfig, SimDisk, Storage};
use tilldb::{Db, Durability, Options, TornPageGuard};

const DIR: &str = "/db";
/// Table names, keys and values each carry one of these.
const MARKERS: [&[u8]; 3] = [b"TABLE-MARK-7c1e", b"KEY-MARKER-b83d", b"VALUE-MARK-44f0"];

/// Files with their bytes.
type Files = Vec<(PathBuf, Vec<u8>)>;

/// The bytes of every file tilldb removed, read just before.
#[derive(Debug, Default)]
struct Removed {
    disk: Option<SimDisk>,
    files: Arc<Mutex<Files>>,
}

impl Hooks for Removed {
    fn before(&self, call: &Call<'_>) -> tilldb::Result<()> {
        let Call::Remove { path } = call else {
            return Ok(());
        };
        let bytes = match &self.disk {
            Some(disk) => disk.live_contents(path),
            None => std::fs::read(path).ok(),
        };
        if let Some(bytes) = bytes {
            self.files
                .lock()
                .expect("removed")
                .push((path.to_path_buf(), bytes));
        }
        Ok(())
    }
}

fn options(encrypted: bool, guard: TornPageGuard) -> Options {
    Options {
        encryption: encrypted.then(|| Encryption {
            provider: Arc::new(StaticKey::new(&[0x77; 32])),
            cipher: Cipher::Aes256Gcm,
        }),
        torn_page_guard: guard,
        page_bytes: Some(4096),
        cache_bytes: 16 * 4096,
        // Small: the large transaction spills its writes and commits in parts.
        write_set_bytes: 64 << 10,
        commit_part_bytes: 32 << 10,
        background_threads: false,
        ..Options::for_tests()
    }
}

fn table(t: u32) -> String {
    format!("{}-{t}", String::from_utf8_lossy(MARKERS[0]))
}

fn key(i: u32) -> Vec<u8> {
    [MARKERS[1], format!("-{i:06}").as_bytes()].concat()
}

fn value(i: u32) -> Vec<u8> {
    [MARKERS[2], format!("-{i:06}-").as_bytes(), &[b'v'; 80]].concat()
}

/// The workload, up to the kill: one-row commits into three tables, a checkpoint, a
/// transaction of 3,000 rows (its write set spills and it commits in parts), more one-row
/// commits, a checkpoint, `Buffered` commits the log has not flushed, and a large
/// transaction left open. Returns the handle (the caller kills the process) and the rows
/// committed.
fn up_to_the_kill(storage: &Arc<dyn Storage>, options: &Options) -> (Db, u32) {
    let db = Db::open_with_storage(Arc::clone(storage), Path::new(DIR), options.clone())
        .expect("create");
    let mut next = 0;
    // `count` one-row commits at `durability`.
    let one_row_commits = |next: &mut u32, count: u32, durability| {
        for _ in 0..count {
            let mut txn = db.begin().expect("begin");
            txn.put_in(&table(*next % 3), &key(*next), &value(*next))
                .expect("put");
            txn.commit_with(durability).expect("commit");
            *next += 1;
        }
    };
    one_row_commits(&mut next, 60, Durability::Sync);
    db.checkpoint().expect("checkpoint");
    let mut txn = db.begin().expect("begin");
    for _ in 0..3000 {
        txn.put_in(&table(next % 3), &key(next), &value(next))
            .expect("put");
        next += 1;
    }
    txn.commit().expect("commit");
    one_row_commits(&mut next, 60, Durability::Sync);
    db.checkpoint().expect("checkpoint");
    one_row_commits(&mut next, 20, Durability::Buffered);
    let mut open = db.begin().expect("begin");
    for i in 0..2000 {
        open.put_in(&table(i % 3), &key(1_000_000 + i), &value(i))
            .expect("put");
    }
    std::mem::forget(open);
    (db, next)
}

/// Every file under `dir` on `disk` (recursively), with its bytes.
fn files(disk: &SimDisk, dir: &Path) -> Files {
    let mut found = Vec::new();
    if !Storage::exists(disk, dir).expect("exists") {
        return found;
    }
    for name in disk.list_dir(dir).expect("list") {
        let path = dir.join(name);
        match disk.live_contents(&path) {
            Some(bytes) => found.push((path, bytes)),
            None => found.extend(files(disk, &path)),
        }
    }
    found
}

/// The files among `files` holding an 8-byte window of a marker.
fn holding_markers(files: &[(PathBuf, Vec<u8>)]) -> Vec<PathBuf> {
    files
        .iter()
        .filter(|(_, bytes)| {
            MARKERS.iter().any(|marker| {
                marker
                    .windows(8)
                    .any(|window| bytes.windows(8).any(|w| w == window))
            })
        })
        .map(|(path, _)| path.clone())
        .collect()
}

/// Runs the whole workload; returns every file it left or removed. The kill and the
/// recovery run on the simulated disk; the backup and the compaction (whose swap renames a
/// directory, which the simulated disk does not) on a copy of its files in a real directory.
fn run(encrypted: bool, guard: TornPageGuard) -> Files {
    let disk = SimDisk::new(SimConfig::default());
    let captured = Arc::default();
    // The storage of one process: a crash leaves the old one's handles stale.
    let process = |disk: &SimDisk| -> Arc<dyn Storage> {
        let removed = Removed {
            disk: Some(disk.clone()),
            files: Arc::clone(&captured),
        };
        Arc::new(HookedStorage::new(Arc::new(disk.clone()), removed))
    };
    let options = options(encrypted, guard);
    let (killed, rows) = up_to_the_kill(&process(&disk), &options);
    // The kill: the process dies with commits unflushed and a transaction open.
    disk.crash(CrashMode::ProcessKill);
    drop(killed);
    let db =
        Db::open_with_storage(process(&disk), Path::new(DIR), options.clone()).expect("recovered");
    for i in (0..rows).step_by(97) {
        assert_eq!(
            db.get_in(&table(i % 3), &key(i)).expect("get"),
            Some(value(i)),
            "row {i}"
        );
    }
    db.close().expect("close");
    let mut all = files(&disk, Path::new(DIR));

    let tmp = tempfile::tempdir().expect("tempdir");
    let real = tmp.path().join("db");
    for (path, bytes) in &all {
        let to = real.join(path.strip_prefix(DIR).expect("under the database"));
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&to, bytes).expect("copy");
    }
    let storage: Arc<dyn Storage> = Arc::new(HookedStorage::new(
        Arc::new(FileStorage::new()),
        Removed {
            disk: None,
            files: Arc::clone(&captured),
        },
    ));
    let db = Db::open_with_storage(Arc::clone(&storage), &real, options.clone()).expect("reopen");
    db.backup_to(tmp.path().join("backup")).expect("backup");
    db.compact_to(tmp.path().join("compacted"))
        .expect("compact");
    db.close().expect("close");
    let copy = Db::open_with_storage(storage, &tmp.path().join("compacted"), options)
        .expect("the compacted copy opens");
    assert_eq!(
        copy.get_in(&table(7 % 3), &key(7)).expect("get"),
        Some(value(7))
    );
    copy.close().expect("close");
    all.extend(real_files(tmp.path()));
    all.extend(captured.lock().expect("removed").drain(..));
    all
}

/// Every file under `dir` on the real file system (recursively), with its bytes.
fn real_files(dir: &Path) -> Files {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(real_files(&path));
        } else {
            let bytes = std::fs::read(&path).expect("read");
            found.push((path, bytes));
        }
    }
    found
}

#[test]
fn no_file_of_an_encrypted_database_holds_a_table_name_key_or_value() {
    for guard in [TornPageGuard::Doublewrite, TornPageGuard::FullPageImages] {
        let plain = run(false, guard);
        assert!(
            !holding_markers(&plain).is_empty(),
            "{guard}: the plain run left no marker: the check could not fail"
        );
        let encrypted = run(true, guard);
        let names: Vec<_> = encrypted.iter().map(|(p, _)| p.clone()).collect();
        for dir in ["wal", "backup", "compacted"] {
            assert!(
                names
                    .iter()
                    .any(|p| p.components().any(|c| c.as_os_str() == dir)),
                "{guard}: no file under a directory {dir}: {names:?}"
            );
        }
        assert!(
            names.iter().any(|p| p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("txn-"))),
            "{guard}: no scratch file was seen: {names:?}"
        );
        assert_eq!(
            holding_markers(&encrypted),
            Vec::<PathBuf>::new(),
            "{guard}: files holding plaintext"
        );
    }
}
