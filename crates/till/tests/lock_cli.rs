//! `till check`, `stats`, `dump-log`, `backup` and the data commands on a database that is
//! open elsewhere: they run (issue 38) through the readers' lock and a read-only handle,
//! while the writer's commits go on, and change no byte of the database (issue 15, item 2,
//! asked for a refusal then; the lock files aside). The writer here is this test process:
//! the lock is the OS's, so a `Db` open in the test is live to the `till` child processes
//! exactly as another program's would be.

mod common;

use common::{options, snapshot, till};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tilldb::Db;
use tilldb::io::{LockMode, Storage};

/// The database's files and bytes, without the lock files (empty; a reader may make
/// `tilldb.readers`).
fn data_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = snapshot(dir);
    files.retain(|path, _| {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name != tilldb::LOCK_FILE_NAME && name != "tilldb.readers"
    });
    files
}

#[test]
fn read_only_tools_run_on_a_database_open_elsewhere_and_change_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    // No background threads: the holder itself writes nothing while the tools run (its log
    // would prepare a spare segment in the background).
    let quiet = tilldb::Options {
        background_threads: false,
        ..options()
    };
    let db = Db::open(&dir, quiet).expect("create");
    for i in 0..30u32 {
        let mut txn = db.begin().expect("begin");
        txn.put(format!("k{i:03}").as_bytes(), b"v").expect("put");
        txn.commit().expect("commit");
    }
    let dir_arg = dir.to_str().expect("utf-8 path");
    let copy = tmp.path().join("copy");
    let copy_arg = copy.to_str().expect("utf-8 path");
    let before = data_files(&dir);
    for args in [
        vec!["check", dir_arg],
        vec!["stats", dir_arg],
        vec!["stats", "--json", dir_arg],
        vec!["dump-log", dir_arg],
        vec!["tables", dir_arg],
        vec!["get", dir_arg, "k007"],
        vec!["scan", dir_arg, "--limit", "5"],
        vec!["backup", dir_arg, copy_arg],
    ] {
        let run = till(&args);
        assert!(run.ok, "till {args:?} on an open database: {}", run.text());
        assert!(
            data_files(&dir) == before,
            "till {args:?} changed a file of an open database"
        );
    }
    assert!(
        till(&["check", dir_arg])
            .stdout
            .contains("open for writing elsewhere")
    );
    assert_eq!(till(&["get", dir_arg, "k029"]).stdout.trim(), "v");
    // The backup holds all 30 commits, and the writer goes on.
    let backup = Db::open(&copy, options()).expect("open the copy");
    assert_eq!(backup.len().expect("len"), 30);
    backup.close().expect("close");
    let mut txn = db.begin().expect("begin after the tools");
    txn.put(b"k999", b"v").expect("put");
    txn.commit().expect("commit");
    db.close().expect("close");
    for args in [
        vec!["stats", dir_arg],
        vec!["dump-log", dir_arg],
        vec!["check", dir_arg],
    ] {
        let run = till(&args);
        assert!(run.ok, "till {args:?} after close: {}", run.text());
    }
}

/// Two read-only tools may read at once (their locks are shared), and a database cannot be
/// opened for writing while one reads.
#[test]
fn a_shared_lock_of_a_reader_keeps_a_writer_out() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    Db::open(&dir, options())
        .expect("create")
        .close()
        .expect("close");
    let storage = tilldb::io::FileStorage::new();
    let lock = dir.join(tilldb::LOCK_FILE_NAME);
    let reader = storage.lock(&lock, LockMode::Shared).expect("a reader");
    let run = till(&["stats", dir.to_str().expect("utf-8")]);
    assert!(run.ok, "a second reader: {}", run.text());
    match Db::open(&dir, options()) {
        Err(tilldb::Error::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("a writer while a reader holds the lock: {other:?}"),
    }
    drop(reader);
    Db::open(&dir, options()).expect("open once the reader is gone");
}

/// On read-only media (a tmpfs remounted read-only; root ignores permission bits) `till
/// stats`, `dump-log` and `check` read a database without writing anything, not even a lock file,
/// and `Db::open` refuses with an error naming the lock file it could not make.
#[test]
fn read_only_media_can_be_inspected_and_are_refused_for_writing() {
    let name = "read_only_media_can_be_inspected_and_are_refused_for_writing";
    if common_run("id", &["-u"]).as_deref() != Ok("0") {
        common::skip_missing(name, "needs root to mount a read-only tmpfs");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let mount = tmp.path().join("mnt");
    std::fs::create_dir(&mount).expect("mkdir");
    let m = mount.to_str().expect("utf-8");
    if let Err(e) = common_run("mount", &["-t", "tmpfs", "-o", "size=64m", "tmpfs", m]) {
        common::skip_missing(name, &format!("cannot mount a tmpfs: {e}"));
        return;
    }
    let dir = mount.join("db");
    Db::open(&dir, options())
        .expect("create")
        .close()
        .expect("close");
    std::fs::remove_file(dir.join(tilldb::LOCK_FILE_NAME)).expect("remove the lock file");
    let remounted = common_run("mount", &["-o", "remount,ro", m]);
    let result = std::panic::catch_unwind(|| {
        remounted.expect("remount read-only");
        let dir_arg = dir.to_str().expect("utf-8");
        for args in [
            vec!["stats", dir_arg],
            vec!["dump-log", dir_arg],
            vec!["check", dir_arg],
            vec!["tables", dir_arg],
            vec!["scan", dir_arg],
        ] {
            let run = till(&args);
            assert!(run.ok, "till {args:?} on read-only media: {}", run.text());
        }
        assert!(!dir.join(tilldb::LOCK_FILE_NAME).exists());
        match Db::open(&dir, options()) {
            Err(e) => assert!(e.to_string().contains(tilldb::LOCK_FILE_NAME), "{e}"),
            Ok(_) => panic!("opened read-only media for writing"),
        }
    });
    let _ = common_run("umount", &[m]);
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

fn common_run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}
