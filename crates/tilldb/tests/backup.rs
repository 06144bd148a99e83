//! Online backup (issue 20, item 3): a copy taken while threads commit opens, checks clean,
//! and holds every commit acknowledged before the backup began and, per writer, a prefix of
//! its commits (nothing torn); a target that is not empty is refused; a copy cut short is
//! refused by `Db::open` as an interrupted backup, never taken for a database.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tilldb::io::{Fault, FaultKind, IoKind, SimConfig, SimDisk, Storage};
use tilldb::{Db, Direction, Error, Options};

const THREADS: u64 = 4;

fn key(thread: u64, seq: u64) -> Vec<u8> {
    format!("t{thread}-{seq:06}").into_bytes()
}

#[test]
fn a_backup_taken_while_threads_commit_opens_checks_clean_and_holds_a_prefix_of_each_writer() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (source, copy) = (tmp.path().join("db"), tmp.path().join("copy"));
    let db = Db::open(&source, Options::for_tests()).expect("open");
    let acked: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    let stop = AtomicBool::new(false);
    let (report, before) = std::thread::scope(|scope| {
        for (t, acked) in (0..THREADS).zip(&acked) {
            let (db, stop) = (&db, &stop);
            scope.spawn(move || {
                let mut seq = 0;
                while !stop.load(Ordering::SeqCst) {
                    let mut txn = db.begin().expect("begin");
                    txn.put(&key(t, seq), &[u8::try_from(t).expect("small"); 300])
                        .expect("put");
                    txn.put_in("last", &t.to_le_bytes(), &seq.to_le_bytes())
                        .expect("put");
                    txn.commit().expect("commit");
                    seq += 1;
                    acked.store(seq, Ordering::SeqCst);
                }
            });
        }
        // Let the log span several segments and checkpoints first.
        while acked.iter().map(|a| a.load(Ordering::SeqCst)).sum::<u64>() < 3000 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
        let report = db.backup_to(&copy).expect("backup");
        // Commits go on after the backup too.
        std::thread::sleep(std::time::Duration::from_millis(50));
        stop.store(true, Ordering::SeqCst);
        (report, before)
    });
    assert!(report.segments >= 1 && report.bytes > 0, "{report:?}");
    db.close().expect("close");

    let restored = Db::open(&copy, Options::for_tests()).expect("the copy opens");
    restored.check().expect("trees check");
    assert!(
        restored.check_space().expect("space").is_clean(),
        "pages accounted for"
    );
    let mut per_thread: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for entry in restored
        .range(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            Direction::Forward,
        )
        .expect("range")
    {
        let (k, _) = entry.expect("read");
        let text = String::from_utf8(k).expect("utf-8");
        let (t, seq) = text[1..].split_once('-').expect("t-seq");
        per_thread
            .entry(t.parse().expect("t"))
            .or_default()
            .push(seq.parse().expect("seq"));
    }
    for t in 0..THREADS {
        let seqs = per_thread.remove(&t).unwrap_or_default();
        let n = seqs.len() as u64;
        assert_eq!(
            seqs,
            (0..n).collect::<Vec<_>>(),
            "thread {t}: a prefix, nothing torn"
        );
        assert!(
            n >= before[usize::try_from(t).expect("small")],
            "thread {t}: {n} in the copy, {} acknowledged before",
            before[usize::try_from(t).expect("small")]
        );
        // Each commit's two writes agree: the copy holds whole commits.
        let last = restored
            .get_in("last", &t.to_le_bytes())
            .expect("get")
            .map(|v| u64::from_le_bytes(v.try_into().expect("8 bytes")));
        assert_eq!(
            last,
            n.checked_sub(1),
            "thread {t}: the commit's other write"
        );
    }
    restored.close().expect("close");
}

#[test]
fn a_backup_refuses_a_target_that_is_not_empty() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Db::open(tmp.path().join("db"), Options::for_tests()).expect("open");
    let busy = tmp.path().join("busy");
    std::fs::create_dir(&busy).expect("mkdir");
    std::fs::write(busy.join("notes.txt"), b"mine").expect("write");
    let err = db.backup_to(&busy).expect_err("not empty");
    assert!(err.to_string().contains("is not empty"), "{err}");
    let err = db.backup_to(tmp.path().join("db")).expect_err("itself");
    assert!(err.to_string().contains("it holds a database"), "{err}");
    assert_eq!(
        std::fs::read(busy.join("notes.txt")).expect("read"),
        b"mine"
    );
    db.close().expect("close");
}

#[test]
fn a_backup_cut_short_is_refused_as_an_interrupted_backup() {
    let sim = SimDisk::new(SimConfig::default());
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let db = Db::open_with_storage(Arc::clone(&storage), Path::new("/db"), Options::for_tests())
        .expect("open");
    for i in 0..500u32 {
        let mut txn = db.begin().expect("begin");
        txn.put(&i.to_le_bytes(), &[7; 200]).expect("put");
        txn.commit().expect("commit");
    }
    // The disk fills in the middle of the copy.
    // (Paths by a name both separators share: Windows joins with `\`.)
    sim.inject(Fault::once(IoKind::Write, 2, FaultKind::Enospc).on_path("copy"));
    let err = db.backup_to("/copy").expect_err("the copy fails");
    assert!(err.to_string().contains("copy"), "{err}");
    // The source goes on.
    let mut txn = db.begin().expect("begin");
    txn.put(b"after", b"yes").expect("put");
    txn.commit().expect("commit");
    let Err(err) = Db::open_with_storage(
        Arc::clone(&storage),
        Path::new("/copy"),
        Options::for_tests(),
    ) else {
        panic!("the half copy opened as a database");
    };
    assert!(
        matches!(&err, Error::NotADatabase { reason, .. } if reason.contains("backup that was cut short")),
        "{err}"
    );
    db.close().expect("close");
}
