//! The open block: a log write made while a flush runs leaves its last block unpadded, and
//! that flush does not acknowledge what is in it (`wal/group_commit.rs`, "Closed").
//!
//! A flush is held open with a gate on the simulated disk, so the order is exact: A's
//! commit is written (padded) and its flush blocks; B's commit is written during that flush;
//! then the flush is let go.

#[path = "common/gate.rs"]
mod gate;

use gate::Gate;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tilldb::internals::wal::{TailGuard, Wal, WalOptions};
use tilldb::io::{Call, CrashMode, HookedStorage, Hooks, SimConfig, SimDisk, Storage};
use tilldb::{Durability, FlushMethod, Result};

/// Gates on the log files' flushes and writes, as hooks on the simulated disk.
#[derive(Debug)]
struct LogGates {
    flushes: Arc<Gate>,
    writes: Arc<Gate>,
}

impl Hooks for LogGates {
    fn before(&self, call: &Call<'_>) -> Result<()> {
        if call.path().extension().is_some_and(|e| e == "wal") {
            match call {
                Call::Write { .. } => self.writes.pass(),
                Call::Flush { .. } => self.flushes.pass(),
                _ => {}
            }
        }
        Ok(())
    }
}

fn gated(disk: &SimDisk, flushes: &Arc<Gate>, writes: &Arc<Gate>) -> Arc<dyn Storage> {
    let gates = LogGates {
        flushes: Arc::clone(flushes),
        writes: Arc::clone(writes),
    };
    Arc::new(HookedStorage::new(Arc::new(disk.clone()), gates))
}

fn options() -> WalOptions {
    WalOptions {
        flush_method: FlushMethod::Fdatasync,
        log_block_bytes: Some(4096),
        segment_bytes: 64 << 10,
        tail: TailGuard::Pad,
        background_threads: false,
        adaptive_gather: false,
        ..WalOptions::for_tests()
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Cuts the power (unflushed writes torn, with garbage sectors), reopens the log and returns
/// every record's payload.
fn payloads_after_power_cut(disk: &SimDisk, dir: &Path) -> Vec<Vec<u8>> {
    disk.crash(CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: true,
    });
    let (wal, recovery) = Wal::open(Arc::new(disk.clone()), dir, options()).expect("reopen");
    let records = wal.read_from(recovery.start_lsn).expect("read");
    records.into_iter().map(|r| r.payload).collect()
}

/// The order of the test, checked as it goes; returns the disk after a clean close.
fn run_and_check() -> (SimDisk, PathBuf) {
    let disk = SimDisk::new(SimConfig::default());
    let gate = Arc::new(Gate::default());
    let storage = gated(&disk, &gate, &Arc::new(Gate::default()));
    let dir = PathBuf::from("/log");
    let (wal, _) = Wal::open(storage, &dir, options()).expect("open");
    let wal = Arc::new(wal);
    gate.arm(2);
    let commit = |payload: &'static [u8]| {
        let wal = Arc::clone(&wal);
        std::thread::spawn(move || wal.commit(payload, Durability::Sync).expect("commit"))
    };
    // A: written, padded, and its flush held.
    let a = commit(b"record A");
    gate.wait_held();
    let before_b = wal.stats();
    let a_written = wal.written_lsn();
    // B: written while A's flush is held.
    let b = commit(b"record B");
    wait_until("B written", || wal.stats().since(before_b).writes == 1);
    let b_write = wal.stats().since(before_b);
    let b_written = wal.written_lsn();
    let record = tilldb::internals::wal::record::record_len(8) as u64;
    assert_eq!(
        b_write.log_bytes, record,
        "B's write during A's flush added {} log bytes, not its record's {record}: it \
         padded its block",
        b_write.log_bytes
    );
    assert_eq!(b_written.0, a_written.0 + record, "B follows A's pad");
    // A's flush ends; A returns, and B's flush (its second) is held.
    gate.release();
    let a_end = a.join().expect("A's thread");
    gate.wait_held();
    let durable = wal.durable_lsn();
    assert!(durable >= a_end, "A returned before it was durable");
    assert!(
        durable < b_written,
        "A's flush made B durable ({durable:?} >= {b_written:?}) while B's block was open"
    );
    let closing = wal.stats().since(before_b);
    assert_eq!(
        closing.writes, 2,
        "B's flush did not start with a closing write"
    );
    assert!(
        closing.log_bytes > record,
        "the closing write added no pad: {closing:?}"
    );
    gate.release();
    let b_end = b.join().expect("B's thread");
    assert!(
        wal.durable_lsn() >= b_end,
        "B returned before it was durable"
    );
    Arc::try_unwrap(wal)
        .expect("threads joined")
        .close()
        .expect("close");
    (disk, dir)
}

/// The write made during a flush adds B's record and no pad; the flush running then does not
/// make B durable; B's own flush does, after a write that pads the block; both records come
/// back after a power cut.
#[test]
fn a_write_during_a_flush_leaves_its_block_open_and_unacknowledged() {
    let (disk, dir) = run_and_check();
    assert_eq!(
        payloads_after_power_cut(&disk, &dir),
        vec![b"record A".to_vec(), b"record B".to_vec()]
    );
}

/// A flush that starts while a block is open acknowledges only what lies before it. During
/// A's flush, X's record fills a block exactly (closed at once, no pad needed) and Y's starts
/// the next (open). When A's flush ends, X leads a flush while Y's closing write is held: that
/// flush must make X durable and not Y (mutant `flush-covers-open-block` makes it cover Y).
#[test]
fn a_flush_beside_an_open_block_acknowledges_only_the_closed_part() {
    let disk = SimDisk::new(SimConfig::default());
    let flushes = Arc::new(Gate::default());
    let writes = Arc::new(Gate::default());
    let storage = gated(&disk, &flushes, &writes);
    let dir = PathBuf::from("/log");
    let (wal, _) = Wal::open(storage, &dir, options()).expect("open");
    let wal = Arc::new(wal);
    let block = 4096u64;
    // X's record is exactly one block.
    let x_payload: &'static [u8] = Box::leak(vec![b'x'; 4096 - 24].into_boxed_slice());
    assert_eq!(
        tilldb::internals::wal::record::record_len(x_payload.len()) as u64,
        block
    );
    let commit = |payload: &'static [u8]| {
        let wal = Arc::clone(&wal);
        std::thread::spawn(move || wal.commit(payload, Durability::Sync).expect("commit"))
    };
    flushes.arm(2);
    let a = commit(b"record A");
    flushes.wait_held();
    let before = wal.stats();
    let x = commit(x_payload);
    wait_until("X written", || wal.stats().since(before).writes == 1);
    let x_end = wal.written_lsn();
    assert_eq!(x_end.0 % block, 0, "X ends on a block boundary");
    let y = commit(b"record Y");
    wait_until("Y written", || wal.stats().since(before).writes == 2);
    let y_end = wal.written_lsn();
    assert!(y_end > x_end);
    // Hold Y's closing write; let A's flush end; X now leads a flush of its own.
    writes.arm(1);
    flushes.release();
    a.join().expect("A's thread");
    flushes.wait_held();
    flushes.release();
    let x_returned = x
        .join()
        .expect("X's thread (a broken invariant panics here)");
    assert!(x_returned <= x_end);
    let durable = wal.durable_lsn();
    assert!(durable >= x_end, "X returned before it was durable");
    assert!(
        durable < y_end,
        "X's flush acknowledged Y ({durable:?} >= {y_end:?}), whose block is still open"
    );
    writes.release();
    let y_returned = y.join().expect("Y's thread");
    assert!(wal.durable_lsn() >= y_returned);
    Arc::try_unwrap(wal)
        .expect("threads joined")
        .close()
        .expect("close");
    assert_eq!(
        payloads_after_power_cut(&disk, &dir),
        vec![
            b"record A".to_vec(),
            x_payload.to_vec(),
            b"record Y".to_vec()
        ]
    );
}

/// Issue 35, item 1: a `Sync` committer whose record another thread wrote returns through the
/// lock-free path (`Wal::wait` on the published marks) only once the log is flushed past it.
/// C's record is appended while A's flush is held; B's write carries it; C then waits. Each
/// committer records the log's durable lsn (read under its lock) as it returns: it must cover
/// its record. With the mutant `durable-mark-at-write` (the durable mark published at the
/// write), B and C returned during A's flush, before any flush covered them.
#[test]
fn a_sync_commit_whose_record_another_thread_wrote_returns_only_once_flushed() {
    let disk = SimDisk::new(SimConfig::default());
    let flushes = Arc::new(Gate::default());
    let storage = gated(&disk, &flushes, &Arc::new(Gate::default()));
    let (wal, _) = Wal::open(storage, Path::new("/log"), options()).expect("open");
    let wal = Arc::new(wal);
    flushes.arm(2);
    // Returns (its record's end, the durable lsn when its wait returned).
    let committed = |wal: &Arc<Wal>, payload: &'static [u8]| {
        let wal = Arc::clone(wal);
        std::thread::spawn(move || {
            let end = wal.commit(payload, Durability::Sync).expect("commit");
            (end, wal.durable_lsn())
        })
    };
    let a = committed(&wal, b"record A");
    flushes.wait_held();
    let before = wal.stats();
    let c_end = wal.append(b"record C").expect("append C");
    let b = committed(&wal, b"record B");
    wait_until("B's write", || wal.stats().since(before).writes == 1);
    assert!(
        wal.written_lsn() >= c_end,
        "B's write did not carry C's record"
    );
    let c = {
        let wal = Arc::clone(&wal);
        std::thread::spawn(move || {
            wal.wait(c_end, Durability::Sync).expect("wait");
            (c_end, wal.durable_lsn())
        })
    };
    // Release A's flush only once C has either returned or parked behind it with B: had
    // the flush gone first, a C that starts late finds its record durable by then on either
    // path, and a wrong lock-free check goes unseen (a CI run let the mutant survive so).
    wait_until("C parked or returned", || {
        c.is_finished() || wal.waiters() >= 2
    });
    flushes.release();
    flushes.wait_held();
    flushes.release();
    for (name, thread) in [("A", a), ("B", b), ("C", c)] {
        let (end, durable) = thread.join().expect("committer");
        assert!(
            durable >= end,
            "{name} returned with the log durable to {durable:?}, before its record's end \
             {end:?}: a Sync commit acknowledged before its flush"
        );
    }
    Arc::try_unwrap(wal)
        .expect("threads joined")
        .close()
        .expect("close");
}

/// Issue 35, item 3: a thread's wait slot is reused by its next wait, which starts unwoken.
/// One thread, T, commits twice; each time another thread's flush is held, T's record is
/// written during it and T parks behind it (its record is in the open block). Each commit
/// must return with its record durable. With the mutant `wait-slot-not-reset` T's second
/// wait began already woken: T spun, queueing its slot again and again, and the flush's
/// wake-up found it woken twice.
#[test]
fn a_committer_that_waited_once_waits_again_for_its_next_flush() {
    let disk = SimDisk::new(SimConfig::default());
    let flushes = Arc::new(Gate::default());
    let storage = gated(&disk, &flushes, &Arc::new(Gate::default()));
    let (wal, _) = Wal::open(storage, Path::new("/log"), options()).expect("open");
    let wal = Arc::new(wal);
    let (ask, asked) = std::sync::mpsc::channel::<&'static [u8]>();
    let (told, answers) = std::sync::mpsc::channel();
    let t = {
        let wal = Arc::clone(&wal);
        std::thread::spawn(move || {
            for payload in asked {
                let end = wal.commit(payload, Durability::Sync).expect("T's commit");
                told.send((end, wal.durable_lsn()))
                    .expect("the test listens");
            }
        })
    };
    for round in 0..2 {
        flushes.arm(1);
        let leader = {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || wal.commit(b"leader", Durability::Sync).expect("commit"))
        };
        flushes.wait_held();
        ask.send(b"T's record").expect("T listens");
        wait_until("T parked behind the held flush", || wal.waiters() >= 1);
        flushes.release();
        leader
            .join()
            .expect("the leader's thread (a slot woken twice panics its waker)");
        let (end, durable) = answers
            .recv_timeout(Duration::from_secs(10))
            .expect("T's commit returned");
        assert!(
            durable >= end,
            "round {round}: T returned with the log durable to {durable:?}, before its \
             record's end {end:?}"
        );
    }
    drop(ask);
    t.join().expect("T's thread");
    Arc::try_unwrap(wal)
        .expect("threads joined")
        .close()
        .expect("close");
}
