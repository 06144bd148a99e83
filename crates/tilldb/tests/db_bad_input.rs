//! Bad input, as a user or a crash can hand it to `Db::open` and the API (issue 15, item 4;
//! TESTPLAN F9): every case gets a clear error naming the file (and the offset where bytes
//! violate the format) and changes nothing on disk, or, where the damaged file holds nothing
//! the database needs, opens with every acknowledged commit exactly. docs/durability.md
//! ("Bad input") has the table, one row per case here.
//!
//! On the real file system (the systematic sweep over every bit, sector and 4 KiB cut on the
//! simulated disk is `db_corruption.rs`). The database: three tables, enough keys for a
//! two-level tree and two log segments, closed cleanly with the doublewrite guard, so that
//! every file of the directory exists.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tilldb::TornPageGuard;
use tilldb::{Db, Error, Options};

const KEYS: u32 = 600;
const TABLES: [&str; 3] = ["", "left", "right"];

fn options() -> Options {
    Options {
        background_threads: false,
        ..Options::for_tests()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 7) as usize * 40)).into_bytes()
}

/// A cleanly closed database in `dir`, with every file a database has.
fn build(dir: &Path) {
    let db = Db::open(dir, options()).expect("create");
    // Every key written three times: enough log for two segments of the 1 MiB test size.
    for _round in 0..3 {
        for chunk in 0..KEYS / 50 {
            let mut txn = db.begin().expect("begin");
            for i in chunk * 50..(chunk + 1) * 50 {
                txn.put_in(TABLES[(i % 3) as usize], &key(i), &value(i))
                    .expect("put");
            }
            txn.commit().expect("commit");
        }
    }
    db.close().expect("close");
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(snapshot(&path));
        } else if !is_coordination_file(&path) {
            out.insert(path.clone(), std::fs::read(&path).expect("read"));
        }
    }
    out
}

/// Every table holds exactly what was committed.
fn assert_exact(db: &Db, case: &str) {
    for i in 0..KEYS {
        assert_eq!(
            db.get_in(TABLES[(i % 3) as usize], &key(i)).expect("get"),
            Some(value(i)),
            "{case}: key {i}"
        );
    }
    db.check_tables().expect("tree check");
}

/// What a case may end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Allowed {
    /// Only an error naming the file, with nothing changed.
    Refused,
    /// An error as above, or an open holding every commit (the file was not needed).
    RefusedOrExact,
}

/// Opens the damaged copy in `dir`; checks the error names `file` (and an offset when it is a
/// corruption) and changed nothing, or that an allowed open is exact. Returns the outcome in
/// words for the printed table.
fn judge(case: &str, dir: &Path, file: &Path, allowed: Allowed) -> String {
    let before = snapshot(dir);
    judge_read_only(case, dir, file, allowed);
    assert!(
        snapshot(dir) == before,
        "{case}: a read-only open changed the files"
    );
    match Db::open(dir, options()) {
        Err(e) => {
            let text = e.to_string();
            let place = error_place(file);
            assert!(
                text.contains(&place.display().to_string()),
                "{case}: the error does not name {}: {text}",
                place.display()
            );
            if matches!(e, Error::Corruption { .. }) {
                assert!(text.contains("at offset"), "{case}: no offset: {text}");
            }
            assert!(
                snapshot(dir) == before,
                "{case}: a refused open changed the files ({text})"
            );
            format!("refused: {text}")
        }
        Ok(db) => {
            assert_eq!(
                allowed,
                Allowed::RefusedOrExact,
                "{case}: opened although {} was damaged",
                file.display()
            );
            assert!(!db.recovery().created, "{case}: created a new database");
            assert_exact(&db, case);
            "opened, every commit exact".to_owned()
        }
    }
}

/// Where an error about damaged `file` points: the file, or for a log segment the log
/// directory (a segment that no longer holds records is missing log, named where the records
/// should be).
fn error_place(file: &Path) -> &Path {
    match file.parent() {
        Some(wal) if wal.ends_with("wal") => wal,
        _ => file,
    }
}

/// `Db::open_read_only` of the damaged copy: refused as `Db::open` refuses it (an error
/// naming the file), or, where an open is allowed, every commit exact.
fn judge_read_only(case: &str, dir: &Path, file: &Path, allowed: Allowed) {
    match Db::open_read_only(dir, options()) {
        Err(e) => {
            let text = e.to_string();
            let place = error_place(file);
            assert!(
                text.contains(&place.display().to_string()),
                "{case}: the read-only open's error does not name {}: {text}",
                place.display()
            );
        }
        Ok(db) => {
            assert_eq!(
                allowed,
                Allowed::RefusedOrExact,
                "{case}: opened read-only although {} was damaged",
                file.display()
            );
            assert_exact(&db, case);
        }
    }
}

/// Copies the template database to a fresh directory for one case.
fn copy_of(template: &Path, root: &Path, case: &str) -> PathBuf {
    let dir = root.join(case.replace(['/', ' '], "_"));
    copy_dir(template, &dir);
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("a name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
}

/// The database files of a directory, relative to it (the lock files hold no data, and the
/// durable lsn published for read-only handles is rewritten by every writer's open).
fn database_files(dir: &Path) -> Vec<PathBuf> {
    snapshot(dir)
        .into_keys()
        .map(|p| p.strip_prefix(dir).expect("under dir").to_path_buf())
        .filter(|p| {
            ![tilldb::LOCK_FILE_NAME, "tilldb.readers", "tilldb.durable"]
                .iter()
                .any(|name| p == Path::new(name))
        })
        .collect()
}

/// Which damaged files a clean database can do without: the doublewrite file (no batch is
/// needed after a clean close), log segments holding nothing after the checkpoint, and the
/// page ledger (lost-write detection only; an empty one is the documented way to open
/// without it, `page/ledger.rs`).
fn may_open(relative: &Path, cut: u64) -> Allowed {
    let name = relative.to_string_lossy();
    let spare = ["doublewrite.tdb", "ledger.tdb"];
    // A header cut after its first slot still has that slot: the previous header, whose log
    // a clean close keeps.
    let one_slot = name == "tilldb.meta" && cut >= 4096;
    if spare.contains(&name.as_ref()) || name.starts_with("wal/") || one_slot {
        Allowed::RefusedOrExact
    } else {
        Allowed::Refused
    }
}

#[test]
fn an_empty_or_truncated_database_file_is_refused_naming_it_and_changes_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let template = root.path().join("template");
    build(&template);
    let files = database_files(&template);
    assert!(files.len() >= 5, "every kind of file: {files:?}");
    let mut table = Vec::new();
    for relative in &files {
        let len = std::fs::metadata(template.join(relative))
            .expect("stat")
            .len();
        for (how, cut) in [("empty", 0), ("half", len / 2), ("one byte short", len - 1)] {
            let case = format!("{} {how}", relative.display());
            let dir = copy_of(&template, root.path(), &case);
            let file = dir.join(relative);
            std::fs::OpenOptions::new()
                .write(true)
                .open(&file)
                .expect("open")
                .set_len(cut)
                .expect("truncate");
            table.push((
                case.clone(),
                judge(&case, &dir, &file, may_open(relative, cut)),
            ));
        }
    }
    for (case, outcome) in &table {
        println!("{case:<40} {outcome}");
    }
}

/// Rewrites the version of every written slot of the header file `meta` (tilldb.meta:
/// version at 8, crc at 4092 seeded with the slot index).
fn set_header_version(meta: &Path, version: u32) {
    let mut bytes = std::fs::read(meta).expect("read");
    for slot in 0..2 {
        let at = slot * 4096;
        if bytes[at..at + 4096].iter().all(|&b| b == 0) {
            continue;
        }
        bytes[at + 8..at + 12].copy_from_slice(&version.to_le_bytes());
        let crc = common::crc32c(Some(slot as u64), &bytes[at..at + 4092]);
        bytes[at + 4092..at + 4096].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(meta, &bytes).expect("write");
}

/// A database of the previous header version (1, before commits in parts) opens, reads
/// exactly, and is written back as version 2 (one slot at a time: the other slot stays a
/// valid version 1 header until the next write, so a crash between leaves one to open).
#[test]
fn a_database_of_header_version_1_opens_and_is_upgraded() {
    let root = tempfile::tempdir().expect("tempdir");
    let template = root.path().join("template");
    build(&template);
    let dir = copy_of(&template, root.path(), "version 1");
    let meta = dir.join("tilldb.meta");
    set_header_version(&meta, 1);
    let db = Db::open(&dir, options()).expect("a version 1 database opens");
    assert_exact(&db, "version 1");
    db.close().expect("close");
    let bytes = std::fs::read(&meta).expect("read");
    let versions: Vec<u32> = (0..2)
        .map(|slot| {
            u32::from_le_bytes(
                bytes[slot * 4096 + 8..slot * 4096 + 12]
                    .try_into()
                    .expect("4"),
            )
        })
        .collect();
    assert!(
        versions.contains(&2),
        "not upgraded: slots say {versions:?}"
    );
    let db = Db::open(&dir, options()).expect("reopens upgraded");
    assert_exact(&db, "upgraded");
}

#[test]
fn files_from_a_newer_format_version_are_refused_naming_the_version_field() {
    let root = tempfile::tempdir().expect("tempdir");
    let template = root.path().join("template");
    build(&template);

    // Both header slots claim version 4 (tilldb.meta: version at 8, crc at 4092 seeded with
    // the slot index; 3 is an encrypted database's).
    let dir = copy_of(&template, root.path(), "newer header");
    let meta = dir.join("tilldb.meta");
    set_header_version(&meta, 4);
    let outcome = judge("newer header", &dir, &meta, Allowed::Refused);
    assert!(outcome.contains("version"), "{outcome}");

    // Every log segment claims log version 4 (version at 8, crc over 0..40 at 40; 3 is an
    // encrypted database's).
    let dir = copy_of(&template, root.path(), "newer log");
    let wal = dir.join("wal");
    let mut segments: Vec<PathBuf> = std::fs::read_dir(&wal)
        .expect("wal")
        .map(|e| e.expect("entry").path())
        .collect();
    segments.sort();
    for segment in &segments {
        let mut bytes = std::fs::read(segment).expect("read");
        bytes[8..12].copy_from_slice(&4u32.to_le_bytes());
        let crc = common::crc32c(None, &bytes[..40]);
        bytes[40..44].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(segment, &bytes).expect("write");
    }
    let outcome = judge("newer log", &dir, &wal, Allowed::Refused);
    assert!(outcome.contains("version"), "{outcome}");
}

#[test]
fn a_directory_of_another_program_or_a_file_is_refused_and_left_as_it_was() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("photos");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("notes.txt"), b"mine").expect("write");
    std::fs::create_dir(dir.join("2026")).expect("mkdir");
    let before = snapshot(&dir);
    let names = |d: &Path| -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(d)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    match Db::open(&dir, options()) {
        Err(e @ Error::NotADatabase { .. }) => {
            let text = e.to_string();
            assert!(text.contains("notes.txt"), "{text}");
            assert!(text.contains(&dir.display().to_string()), "{text}");
        }
        other => panic!("a foreign directory: {other:?}"),
    }
    assert_eq!(snapshot(&dir), before);
    assert_eq!(names(&dir), ["2026", "notes.txt"], "not even a lock file");

    let file = root.path().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write");
    match Db::open(&file, options()) {
        Err(e @ Error::NotADatabase { .. }) => {
            assert!(e.to_string().contains("is a file"), "{e}");
        }
        other => panic!("a file as the directory: {other:?}"),
    }
    assert_eq!(std::fs::read(&file).expect("read"), b"not a directory");
}

#[test]
fn options_contradicting_the_stored_page_size_or_guard_are_refused_and_change_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("db");
    build(&dir);
    let before = snapshot(&dir);
    for (what, asked) in [
        (
            "page size",
            Options {
                page_bytes: Some(8192),
                ..options()
            },
        ),
        (
            "guard",
            Options {
                torn_page_guard: TornPageGuard::FullPageImages,
                ..options()
            },
        ),
    ] {
        match Db::open(&dir, asked) {
            Err(e @ Error::InvalidOptions(_)) => {
                let text = e.to_string();
                assert!(text.contains("tilldb.meta"), "{what}: {text}");
                assert!(text.contains("fixed at create"), "{what}: {text}");
            }
            other => panic!("{what}: {other:?}"),
        }
        assert!(
            snapshot(&dir) == before,
            "{what}: a refused open changed files"
        );
    }
    // Unset (None / Auto) takes the database's own.
    let db = Db::open(
        &dir,
        Options {
            page_bytes: None,
            torn_page_guard: TornPageGuard::Auto,
            ..options()
        },
    )
    .expect("open with the stored settings");
    assert_exact(&db, "unset options");
}

/// The atomic guard asked for on a device without atomic writes: the refusal said "invalid
/// options: invalid options: ..." (the check's own error was wrapped in another).
#[test]
fn the_atomic_guard_on_a_device_without_atomic_writes_says_invalid_options_once() {
    let disk = tilldb::io::SimDisk::new(tilldb::io::SimConfig::default());
    let asked = Options {
        torn_page_guard: TornPageGuard::Atomic,
        ..options()
    };
    let storage = std::sync::Arc::new(disk.clone());
    match Db::open_with_storage(storage, Path::new("/db"), asked) {
        Err(e @ Error::InvalidOptions(_)) => {
            let text = e.to_string();
            assert_eq!(text.matches("invalid options").count(), 1, "{text}");
            assert!(text.contains("atomic writes of 4096 B in /db"), "{text}");
            assert!(text.contains("full-page-images or doublewrite"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn keys_values_and_table_names_over_the_limits_fail_alone_and_write_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("db");
    build(&dir);
    let db = Db::open(&dir, options()).expect("open");
    let before = snapshot(&dir);
    let long_key = vec![b'k'; 64 << 10];
    let long_value = vec![b'v'; 1 << 20]; // a 1 MiB segment holds no 1 MiB value
    let long_name = "t".repeat(256);
    let mut txn = db.begin().expect("begin");
    for (what, result) in [
        ("key", txn.put(&long_key, b"v")),
        ("value", txn.put(b"k", &long_value)),
        ("table name", txn.put_in(&long_name, b"k", b"v")),
    ] {
        match result {
            Err(e @ Error::TooLarge { .. }) => println!("{what}: {e}"),
            other => panic!("{what} over the limit: {other:?}"),
        }
    }
    // The transaction and the database go on.
    txn.put(b"after", b"ok").expect("put after the refusals");
    assert!(snapshot(&dir) == before, "a refused put wrote to disk");
    txn.commit().expect("commit");
    assert_eq!(db.get(b"after").expect("get"), Some(b"ok".to_vec()));
    assert_exact(&db, "after refusals");
    // The empty name is the default table, by design (`Txn::put_in`).
    assert_eq!(db.get_in("", b"after").expect("get"), Some(b"ok".to_vec()));
}

#[test]
#[cfg(unix)] // permissions and symlinks as POSIX has them
fn a_read_only_database_directory_gives_a_clear_error_naming_the_lock_file() {
    let root = tempfile::tempdir().expect("tempdir");
    let Some(ro) = ReadOnlyDir::new(root.path()) else {
        return;
    };
    build(&ro.dir);
    ro.make_read_only();
    let before = snapshot(&ro.dir);
    match Db::open(&ro.dir, options()) {
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains(tilldb::LOCK_FILE_NAME), "{text}");
            assert!(
                text.contains("Read-only") || text.contains("ermission"),
                "{text}"
            );
        }
        Ok(_) => panic!("opened a database on read-only media for writing"),
    }
    assert!(snapshot(&ro.dir) == before);
}

/// A database directory that can be made read-only: a tmpfs remounted read-only as root
/// (root ignores permission bits), or a directory without write permission otherwise.
#[cfg(unix)]
struct ReadOnlyDir {
    dir: PathBuf,
    mount: Option<PathBuf>,
}

#[cfg(unix)]
impl ReadOnlyDir {
    fn new(root: &Path) -> Option<ReadOnlyDir> {
        let test = "a_read_only_database_directory_gives_a_clear_error_naming_the_lock_file";
        let is_root = common::run("id", &["-u"]).as_deref() == Ok("0");
        if !is_root {
            let dir = root.join("db");
            return Some(ReadOnlyDir { dir, mount: None });
        }
        let mount = root.join("mnt");
        std::fs::create_dir(&mount).expect("mkdir");
        let mount_str = mount.to_string_lossy().into_owned();
        if let Err(e) = common::run(
            "mount",
            &["-t", "tmpfs", "-o", "size=64m", "tmpfs", &mount_str],
        ) {
            common::skip_missing(test, &format!("cannot mount a tmpfs: {e}"));
            return None;
        }
        Some(ReadOnlyDir {
            dir: mount.join("db"),
            mount: Some(mount),
        })
    }

    fn make_read_only(&self) {
        use std::os::unix::fs::PermissionsExt;
        if let Some(mount) = &self.mount {
            let m = mount.to_string_lossy();
            common::run("mount", &["-o", "remount,ro", &m]).expect("remount read-only");
            return;
        }
        for d in [self.dir.clone(), self.dir.join("wal")] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        }
    }
}

#[cfg(unix)]
impl Drop for ReadOnlyDir {
    fn drop(&mut self) {
        if let Some(mount) = &self.mount {
            let _ = common::run("umount", &[&mount.to_string_lossy()]);
        }
    }
}

/// Issue 23, then issue 36: a transaction too large as a whole (values that each pass the
/// value limit, together beyond a log segment; values needing more pages than the cache holds)
/// used to poison the whole database, then was refused alone. It commits now, in parts (the
/// pages beyond the cache spilled), and the next commit succeeds.
#[test]
fn a_transaction_beyond_a_log_segment_or_the_cache_commits_and_the_next_commit_succeeds() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("db");
    build(&dir);
    let roomy = Options {
        cache_bytes: 16 << 20,
        ..options()
    };
    let db = Db::open(&dir, roomy).expect("open");
    // The value limit is half a 1 MiB segment's payload: three of them fit no segment.
    let half = vec![7u8; 500 << 10];
    let mut txn = db.begin().expect("begin");
    for i in 0..3u8 {
        txn.put(&[b'h', i], &half).expect("each value passes alone");
    }
    txn.commit()
        .expect("three half-segment values in one commit");
    assert!(db.stats().commit_parts >= 3, "{:?}", db.stats());
    let mut txn = db.begin().expect("begin after");
    txn.put(b"after-log", b"ok").expect("put");
    txn.commit().expect("the next commit");
    db.close().expect("close");
    // The test cache holds 64 pages of 4 KiB; 20 values of 30 KB need 150 overflow pages.
    let db = Db::open(&dir, options()).expect("open");
    let value = vec![9u8; 30_000];
    let mut txn = db.begin().expect("begin");
    for i in 0..20u8 {
        txn.put(&[b'c', i], &value).expect("put");
    }
    txn.commit()
        .expect("more pages than the cache holds in one commit");
    assert!(db.stats().pool.spills > 0, "{:?}", db.stats());
    let mut txn = db.begin().expect("begin after");
    txn.put(b"after-cache", b"ok").expect("put");
    txn.commit().expect("the next commit");
    db.close().expect("close");
    let db = Db::open(&dir, options()).expect("reopen");
    assert_eq!(db.get(b"after-log").expect("get"), Some(b"ok".to_vec()));
    assert_eq!(db.get(b"after-cache").expect("get"), Some(b"ok".to_vec()));
    for i in 0..3u8 {
        assert_eq!(db.get(&[b'h', i]).expect("get"), Some(half.clone()));
    }
    for i in 0..20u8 {
        assert_eq!(db.get(&[b'c', i]).expect("get"), Some(value.clone()));
    }
    db.check().expect("check");
}

/// The files that coordinate a writer with read-only handles (`db/readers.rs`): the durable
/// lsn a live writer publishes every few milliseconds (an opening writer marks it first, even
/// one refused afterwards) and the readers' lock file. Not the database's data: the checks
/// that nothing changed leave them out.
fn is_coordination_file(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n == "tilldb.durable" || n == "tilldb.readers")
}
