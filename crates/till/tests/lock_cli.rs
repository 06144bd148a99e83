//! `till check`, `stats` and `dump-log` on a database that is open elsewhere refuse with the
//! database's `Locked` error (naming the directory and the holder's pid) and change no byte
//! (issue 15, item 2). The holder here is this test process: the lock is the OS's, so a `Db`
//! open in the test conflicts with the `till` child processes exactly as another program's
//! would. Once the holder closes, each tool runs.

mod common;

use common::{options, snapshot, till};
use tilldb::Db;
use tilldb::io::{LockMode, Storage};

#[test]
fn read_only_tools_refuse_a_database_open_elsewhere_and_change_nothing() {
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
    let pid = std::process::id().to_string();
    let before = snapshot(&dir);
    for args in [
        vec!["check", dir_arg],
        vec!["stats", dir_arg],
        vec!["stats", "--json", dir_arg],
        vec!["dump-log", dir_arg],
    ] {
        let run = till(&args);
        assert!(
            !run.ok,
            "till {args:?} ran on an open database: {}",
            run.text()
        );
        let text = run.stderr;
        assert!(text.contains("is already open"), "{args:?}: {text}");
        assert!(text.contains(dir_arg), "{args:?}: {text}");
        assert!(text.contains(&pid), "{args:?}: the holder's pid: {text}");
        assert!(
            snapshot(&dir) == before,
            "till {args:?} changed a file of an open database"
        );
    }
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
