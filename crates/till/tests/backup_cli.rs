//! `till backup SRC DST` (issue 20, item 3): the copy opens and checks clean with every row;
//! a database open in another process is refused with what to do instead; a backup killed
//! with kill -9 leaves a copy that either opens and checks clean or is refused as a backup cut
//! short, never a wrong (or a new, empty) database.

mod common;

use common::{options, till};
use std::ops::Bound;
use std::time::Duration;
use tilldb::{Db, Direction, Error};

fn rows(db: &Db) -> usize {
    db.range(Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .expect("range")
        .count()
}

fn populate(dir: &std::path::Path, commits: u32, value_bytes: usize) {
    let db = Db::open(dir, options()).expect("open");
    for i in 0..commits {
        let mut txn = db.begin().expect("begin");
        for j in 0..20u32 {
            txn.put(format!("k{i:05}-{j:02}").as_bytes(), &vec![7; value_bytes])
                .expect("put");
        }
        txn.commit_with(tilldb::Durability::Buffered)
            .expect("commit");
    }
    db.close().expect("close");
}

#[test]
fn backup_copies_a_database_that_opens_and_checks_clean() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    populate(&src, 200, 100);
    let run = till(&[
        "backup",
        src.to_str().expect("utf-8"),
        dst.to_str().expect("utf-8"),
    ]);
    assert!(run.ok, "{}", run.text());
    assert!(
        run.stdout.contains("the copy opens and checks clean"),
        "{}",
        run.text()
    );
    let copy = Db::open(&dst, options()).expect("the copy opens");
    assert_eq!(rows(&copy), 4000);
    copy.close().expect("close");
    // Again into the same directory: refused, the copy untouched.
    let again = till(&[
        "backup",
        src.to_str().expect("utf-8"),
        dst.to_str().expect("utf-8"),
    ]);
    assert!(!again.ok);
    assert!(again.stderr.contains("is not empty"), "{}", again.text());
}

#[test]
fn backup_of_a_database_open_elsewhere_copies_its_durable_commits_while_it_commits() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    populate(&src, 5, 100);
    let holder = Db::open(&src, options()).expect("open");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let run = std::thread::scope(|scope| {
        // The holder commits all through the backup: it never waits for it, never fails.
        let writer = scope.spawn(|| {
            let mut commits = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut txn = holder.begin().expect("begin");
                txn.put(format!("live-{commits:06}").as_bytes(), b"v")
                    .expect("put");
                txn.commit().expect("a commit during the backup");
                commits += 1;
            }
            commits
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        let run = till(&[
            "backup",
            src.to_str().expect("utf-8"),
            dst.to_str().expect("utf-8"),
        ]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let commits = writer.join().expect("the writer");
        assert!(commits > 0, "the holder committed nothing");
        run
    });
    assert!(run.ok, "{}", run.text());
    let copy = Db::open(&dst, options()).expect("the copy opens");
    let copied = copy.len().expect("len");
    assert!(
        copied >= 100,
        "the copy holds {copied} rows, fewer than before the backup"
    );
    assert!(copied <= holder.len().expect("len"));
    copy.check_tables().expect("the copy checks clean");
    copy.close().expect("close");
    holder.close().expect("close");
}

#[test]
fn a_backup_killed_midway_leaves_a_whole_copy_or_one_refused_as_cut_short() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    populate(&src, 400, 4000);
    let (mut whole, mut refused) = (0, 0);
    for (round, delay_ms) in [0u64, 20, 80, 250, 600, 3000].into_iter().enumerate() {
        let dst = tmp.path().join(format!("dst-{round}"));
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_till"))
            .args([
                "backup",
                src.to_str().expect("utf-8"),
                dst.to_str().expect("utf-8"),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        // Killed before it made anything (or only the empty directory): nothing to open.
        if std::fs::read_dir(&dst).map_or(true, |mut d| d.next().is_none()) {
            refused += 1;
            continue;
        }
        match Db::open(&dst, options()) {
            Ok(copy) => {
                copy.check().expect("a copy that opens checks");
                assert_eq!(rows(&copy), 8000, "a copy that opens holds every row");
                copy.close().expect("close");
                whole += 1;
            }
            Err(Error::NotADatabase { reason, .. }) if reason.contains("cut short") => {
                refused += 1;
            }
            Err(e) => panic!("round {round}: the cut copy opened as neither: {e}"),
        }
    }
    eprintln!("{whole} whole copies, {refused} refused");
}
