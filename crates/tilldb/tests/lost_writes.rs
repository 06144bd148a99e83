//! Lost writes (TESTPLAN F6, issue 6): the device acknowledges a write of the data file and
//! never does it. One disk has no second copy to repair every such write from, so the rule is
//! detect and refuse: never return wrong data. Where a copy exists (the doublewrite area, a
//! whole-page image in the log, the log records after the redo point) the page comes back.
//!
//! For every torn-page guard, and every write of `data.tdb` a fault-free run makes (counted by
//! injecting the fault at each position until it no longer fires), the k-th write is lost
//! while a store commits with small caches, frequent checkpoints and reopens. After the run
//! the database is closed, or killed, and reopened; every key is read. Each case must end
//! with the exact model, or with `Error::Corruption` naming `data.tdb` (at a read, a commit,
//! or the open). A wrong value, another error or a panic fails the test.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use tilldb::TornPageGuard;
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk};
use tilldb::{Db, Direction, Error, FlushMethod, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Commits per case, reopened every `REOPEN_EVERY`.
const COMMITS: u64 = 150;
const REOPEN_EVERY: u64 = 40;

fn options(guard: TornPageGuard) -> Options {
    let defaults = Options::for_tests();
    Options {
        // Few frames: pages are evicted and read back; checkpoints every few commits.
        cache_bytes: 8 * 4096,
        checkpoint_log_bytes: 32 << 10,
        torn_page_guard: guard,
        flush_method: Some(if guard == TornPageGuard::Atomic {
            FlushMethod::DirectDsync
        } else {
            FlushMethod::Fdatasync
        }),
        wal: tilldb::WalOptions {
            segment_bytes: 32 << 10,
            ..defaults.wal.clone()
        },
        // Every call in program order: the k-th write is the same write in every run.
        background_threads: false,
        ..defaults
    }
}

fn config(guard: TornPageGuard, seed: u64) -> SimConfig {
    SimConfig {
        seed,
        atomic_write_unit: (guard == TornPageGuard::Atomic).then_some((4096, 65536)),
        ..SimConfig::default()
    }
}

/// Commit `c`: three puts over 400 keys with values of 40-340 bytes, so pages split, fill
/// and are rewritten many times.
const PUTS: common::Puts = common::Puts {
    keys: 400,
    key_step: 37,
    len_step: 170,
    len_span: 300,
};

fn open(disk: &SimDisk, guard: TornPageGuard) -> tilldb::Result<Db> {
    Db::open_with_storage(Arc::new(disk.clone()), Path::new("/db"), options(guard))
}

fn commit(db: &Db, c: u64) -> tilldb::Result<()> {
    let mut txn = db.begin()?;
    for (k, v) in PUTS.commit(c) {
        txn.put(&k, &v)?;
    }
    txn.commit()
}

/// Every key, read one by one and by a scan.
fn read_all(db: &Db) -> tilldb::Result<Model> {
    let scanned: Model = db
        .scan(Bound::Unbounded, Bound::Unbounded, Direction::Forward)?
        .into_iter()
        .collect();
    for (k, v) in &scanned {
        assert_eq!(db.get(k)?.as_ref(), Some(v), "get and scan disagree");
    }
    Ok(scanned)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Every key read back exactly: the write was healed (a later write, redo, a guard's
    /// copy) or never needed.
    Exact,
    /// `Error::Corruption` naming the data file.
    Refused,
    /// The fault never fired: past the last write.
    NotFired,
}

/// Turns an error into `Refused` if it is the corruption this test allows, else panics.
fn refused(case: &str, e: &Error) -> Outcome {
    match e {
        Error::Corruption { file, .. } if file.ends_with("data.tdb") => Outcome::Refused,
        Error::PoisonedBy { cause } if cause.contains("data.tdb") => Outcome::Refused,
        other => panic!("{case}: an error other than corruption of data.tdb: {other}"),
    }
}

fn run_case(guard: TornPageGuard, nth: u64) -> Outcome {
    let case = format!("{guard} lost data write {nth}");
    let disk = SimDisk::new(config(guard, nth));
    let mut db = open(&disk, guard).unwrap_or_else(|e| panic!("{case}: create: {e}"));
    disk.inject(Fault::once(IoKind::Write, nth, FaultKind::LostWrite).on_path("data.tdb"));
    for c in 0..COMMITS {
        if c > 0 && c % REOPEN_EVERY == 0 {
            drop(db);
            db = match open(&disk, guard) {
                Ok(db) => db,
                Err(e) => return refused(&case, &e),
            };
        }
        if let Err(e) = commit(&db, c) {
            return refused(&case, &e);
        }
    }
    // A kill for odd positions (redo from the last checkpoint), a clean close for even ones
    // (which writes pages back: the fault may fire there).
    if nth % 2 == 1 {
        std::mem::forget(db);
        disk.crash(CrashMode::ProcessKill);
    } else {
        drop(db);
    }
    let fired = disk.faults_pending() == 0;
    disk.clear_faults();
    let db = match open(&disk, guard) {
        Ok(db) => db,
        Err(e) => return refused(&case, &e),
    };
    match read_all(&db) {
        Ok(found) => {
            assert!(
                found == PUTS.model_after(COMMITS),
                "{case}: WRONG DATA: {} keys read, {} expected",
                found.len(),
                PUTS.model_after(COMMITS).len()
            );
            if fired {
                Outcome::Exact
            } else {
                Outcome::NotFired
            }
        }
        Err(e) => {
            assert!(fired, "{case}: refused without a lost write: {e}");
            refused(&case, &e)
        }
    }
}

#[test]
fn every_lost_data_write_is_healed_or_refused_never_served() {
    let guards = [
        TornPageGuard::None,
        TornPageGuard::Doublewrite,
        TornPageGuard::FullPageImages,
        TornPageGuard::Atomic,
    ];
    let mut total = BTreeMap::new();
    for guard in guards {
        let (mut exact, mut refused) = (0u64, 0u64);
        let mut nth = 1;
        loop {
            match run_case(guard, nth) {
                Outcome::Exact => exact += 1,
                Outcome::Refused => refused += 1,
                Outcome::NotFired => break,
            }
            nth += 1;
            assert!(nth < 100_000, "{guard}: runaway position count");
        }
        println!(
            "lost_writes: {guard}: {} data-file writes lost one at a time: {exact} healed or \
             not needed, {refused} refused naming data.tdb, 0 wrong",
            nth - 1
        );
        total.insert(guard.to_string(), (exact, refused));
        assert!(
            nth > 20,
            "{guard}: only {} data writes: the workload is too small",
            nth - 1
        );
    }
    // Without guards, most lost writes leave a stale page only the ledger can tell: a test in
    // which nothing is ever refused would show nothing.
    let (_, refused_unguarded) = total[&TornPageGuard::None.to_string()];
    assert!(
        refused_unguarded > 0,
        "no lost write was ever refused: the workload never reads a stale page back"
    );
}

/// A removed ledger is refused naming it; an empty one in its place opens the database
/// (nothing known yet about the pages written: no lost write can be seen for them).
#[test]
fn a_missing_ledger_is_refused_and_an_empty_one_opens() {
    use tilldb::io::Storage;
    let guard = TornPageGuard::Doublewrite;
    let disk = SimDisk::new(config(guard, 7));
    let db = open(&disk, guard).expect("create");
    for c in 0..10 {
        commit(&db, c).expect("commit");
    }
    drop(db);
    let ledger = Path::new("/db/ledger.tdb");
    disk.remove(ledger).expect("remove the ledger");
    match open(&disk, guard) {
        Err(Error::Corruption { file, offset, what }) => {
            assert_eq!((file.as_path(), offset), (ledger, 0));
            assert!(what.contains("empty file"), "{what}");
        }
        Err(other) => panic!("expected corruption naming the ledger, got {other}"),
        Ok(_) => panic!("opened without its ledger"),
    }
    drop(
        disk.create(ledger, FlushMethod::Fdatasync)
            .expect("create an empty ledger"),
    );
    let db = open(&disk, guard).expect("opens with an empty ledger");
    assert!(read_all(&db).expect("read") == PUTS.model_after(10));
}
