//! diskcheck on the simulated disk: a power cut without a power cut. The listener runs in
//! this process over loopback; the writer writes to a `SimDisk`, which then loses power;
//! verify reads what the simulated cut left.

use super::listen::Listener;
use super::run::{self, Plan, Stop};
use super::verify::{self, StreamReport};
use super::wire::{Mode, Record};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Durability, FlushMethod, Options};

struct Case {
    mode: Mode,
    methods: Vec<FlushMethod>,
    durability: Durability,
    /// The disk acknowledges flushes (and write-through writes) without making anything
    /// durable, from the first write on.
    lying: bool,
    /// The power goes once the listener holds at least this many of each stream.
    writes: u64,
    seed: u64,
    /// `db` mode: the log's flush interval, when not the tests' 5 ms.
    flush_interval: Option<Duration>,
}

/// A simulated disk after its power cut, and the listener that holds the run's record.
struct Cut {
    sim: SimDisk,
    addr: String,
    streams: usize,
    _listener: Listener,
    _records: tempfile::TempDir,
}

impl Cut {
    /// Verifies what the cut left, with the listener's record changed by `edit` first.
    fn verify(&self, edit: impl Fn(&mut Record)) -> Vec<StreamReport> {
        let storage: Arc<dyn Storage> = Arc::new(self.sim.clone());
        let dir = Path::new("/diskcheck");
        let run_file = run::read_run_file(&*storage, dir).expect("diskcheck.json survived");
        let mut records = verify::fetch(&self.addr, &run_file.run).expect("fetched");
        assert_eq!(records.len(), self.streams);
        records.iter_mut().for_each(edit);
        verify::verify(&storage, dir, &run_file, &records, &Options::for_tests()).expect("verified")
    }
}

/// Runs `case` to its last write, cuts the power, and verifies.
fn run_and_cut(case: &Case) -> Vec<StreamReport> {
    cut(case).verify(|_| {})
}

/// Acknowledgements in the listener's record file `path` so far.
fn recorded(path: &Path) -> u64 {
    std::fs::read(path).map_or(0, |bytes| {
        super::wire::parse_record(&bytes, "record").map_or(0, |r| r.acknowledged)
    })
}

/// Runs `case` until the listener holds `writes` acknowledgements of each stream, and cuts
/// the power.
fn cut(case: &Case) -> Cut {
    let records = tempfile::tempdir().expect("tempdir");
    let listener = Listener::start("127.0.0.1:0", records.path()).expect("listener starts");
    let addr = listener.addr().to_string();
    let sim = SimDisk::new(SimConfig {
        seed: case.seed,
        ..SimConfig::default()
    });
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let dir = Path::new("/diskcheck");
    let plan = Plan {
        run: run::new_run_id(),
        mode: case.mode,
        methods: case.methods.clone(),
        methods_explicit: true,
        durability: case.durability,
        file_bytes: 64 * 4096,
        db_options: Options {
            wal: tilldb::WalOptions {
                flush_interval: case
                    .flush_interval
                    .unwrap_or(Options::for_tests().wal.flush_interval),
                ..Options::for_tests().wal
            },
            ..Options::for_tests()
        },
        listener: addr.clone(),
    };
    let (run_file, notes) = run::prepare(&storage, dir, &plan).expect("prepared");
    assert!(notes.is_empty(), "{notes:?}");
    sim.set_lying_flushes(case.lying);
    // The power goes while the writers write, once every stream has `case.writes`
    // acknowledgements recorded: a cut as a real one comes, in the middle of a write.
    let run_records = records.path().join(&run_file.run);
    std::thread::scope(|scope| {
        let writers = scope.spawn(|| {
            run::write_streams(&storage, dir, &run_file, &plan, Stop::Never, &mut |_, _| {})
        });
        let start = Instant::now();
        while !run_file
            .streams
            .iter()
            .all(|meta| recorded(&run_records.join(format!("{}.acks", meta.stream))) >= case.writes)
        {
            assert!(!writers.is_finished(), "the writers stopped before the cut");
            assert!(start.elapsed() < Duration::from_mins(1), "too slow");
            std::thread::sleep(Duration::from_millis(1));
        }
        sim.crash(CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: false,
        });
        let outcome = writers
            .join()
            .expect("no panic")
            .expect("the writers started");
        assert!(
            !outcome.errors.is_empty(),
            "the cut stopped nothing: {outcome:?}"
        );
    });
    drop(storage);
    sim.set_lying_flushes(false);
    Cut {
        sim,
        addr,
        streams: case.methods.len(),
        _listener: listener,
        _records: records,
    }
}

fn violations(reports: &[StreamReport]) -> Vec<(String, u64)> {
    reports
        .iter()
        .map(|r| (r.stream.clone(), r.violations()))
        .collect()
}

#[test]
fn an_honest_disk_keeps_every_acknowledged_raw_write_of_every_method() {
    for seed in 0..3 {
        let reports = run_and_cut(&Case {
            mode: Mode::Raw,
            methods: FlushMethod::DURABLE.to_vec(),
            durability: Durability::Sync,
            lying: false,
            writes: 150,
            seed,
            flush_interval: None,
        });
        for r in &reports {
            assert!(r.acknowledged >= 150, "{r:?}");
            assert_eq!(r.checked, 64, "one check per slot: {r:?}");
            assert_eq!((r.present, r.violations()), (64, 0), "{r:?}");
        }
        assert!(verify::verdicts(&reports)[0].starts_with("every acknowledged write"));
    }
}

#[test]
fn lying_flushes_show_as_lost_acknowledged_writes_in_every_method() {
    let reports = run_and_cut(&Case {
        mode: Mode::Raw,
        methods: FlushMethod::DURABLE.to_vec(),
        durability: Durability::Sync,
        lying: true,
        writes: 150,
        seed: 7,
        flush_interval: None,
    });
    for r in &reports {
        assert!(r.violations() > 0, "a lying disk went unnoticed: {r:?}");
        assert_eq!(r.present + r.violations(), r.checked, "{r:?}");
        assert!(!r.first_lost.is_empty(), "{r:?}");
    }
    let verdicts = verify::verdicts(&reports);
    assert!(
        verdicts
            .iter()
            .any(|v| v.starts_with("method fdatasync (raw-fdatasync) lost")
                && v.contains("this disk does not honour it; turn the disk's write cache off")),
        "{verdicts:?}"
    );
}

#[test]
fn a_cache_that_drops_unflushed_writes_loses_nosync_writes_and_nothing_else() {
    let reports = run_and_cut(&Case {
        mode: Mode::Raw,
        methods: vec![FlushMethod::NoSync, FlushMethod::Fdatasync],
        durability: Durability::Sync,
        lying: false,
        writes: 150,
        seed: 3,
        flush_interval: None,
    });
    assert!(
        reports[0].lost + reports[0].torn + reports[0].corrupt > 0,
        "the cut dropped no unflushed write: {reports:?}"
    );
    // Lost by design: no violation of the nosync stream, none of fdatasync.
    assert_eq!(
        violations(&reports),
        vec![
            ("raw-nosync".to_string(), 0),
            ("raw-fdatasync".to_string(), 0)
        ],
        "{reports:?}"
    );
    let verdicts = verify::verdicts(&reports);
    assert!(
        verdicts[0].starts_with("every acknowledged write"),
        "{verdicts:?}"
    );
    assert!(
        verdicts
            .iter()
            .any(|v| v.starts_with("method nosync (raw-nosync):")
                && v.contains("unflushed by design")
                && v.contains("not a verdict on this disk")),
        "{verdicts:?}"
    );
}

/// Issue 34: `till diskcheck` said of a `nosync` stream's losses "this disk does not honour
/// it", and counted them as violations (exit 1), on an honest disk: nosync never flushes, so
/// its losses are no verdict on the disk, and it is never the method to advise.
#[test]
fn a_nosync_stream_losing_writes_is_not_called_a_lying_disk() {
    let reports = run_and_cut(&Case {
        mode: Mode::Raw,
        methods: vec![FlushMethod::NoSync, FlushMethod::Fdatasync],
        durability: Durability::Sync,
        lying: true,
        writes: 150,
        seed: 5,
        flush_interval: None,
    });
    let verdicts = verify::verdicts(&reports);
    for line in &verdicts {
        assert!(
            !(line.contains("method nosync") && line.contains("does not honour")),
            "{verdicts:?}"
        );
        assert!(!line.contains("use nosync"), "{verdicts:?}");
    }
    // The lying fdatasync stream is still caught, and its advice names no method.
    assert!(
        verdicts
            .iter()
            .any(|v| v.starts_with("method fdatasync (raw-fdatasync) lost")
                && v.contains("turn the disk's write cache off")),
        "{verdicts:?}"
    );
}

#[test]
fn db_mode_keeps_every_sync_commit_on_an_honest_disk_and_loses_them_to_lying_flushes() {
    let honest = run_and_cut(&Case {
        mode: Mode::Db,
        methods: vec![FlushMethod::Fdatasync, FlushMethod::Dsync],
        durability: Durability::Sync,
        lying: false,
        writes: 120,
        seed: 1,
        flush_interval: None,
    });
    for r in &honest {
        assert!(r.acknowledged >= 120, "{r:?}");
        assert_eq!(
            (r.checked, r.present),
            (r.acknowledged, r.acknowledged),
            "{r:?}"
        );
        assert_eq!(r.violations(), 0, "{r:?}");
    }
    let lying = run_and_cut(&Case {
        mode: Mode::Db,
        methods: vec![FlushMethod::Fdatasync],
        durability: Durability::Sync,
        lying: true,
        writes: 120,
        seed: 2,
        flush_interval: None,
    });
    assert!(lying[0].violations() > 0, "{lying:?}");
    assert_eq!(
        lying[0].lost_within_window, 0,
        "sync allows no window: {lying:?}"
    );
}

#[test]
fn buffered_commits_lost_in_the_last_flush_interval_are_allowed_and_older_ones_are_not() {
    let cut = cut(&Case {
        mode: Mode::Db,
        methods: vec![FlushMethod::Fdatasync],
        durability: Durability::Buffered,
        lying: false,
        writes: 120,
        seed: 4,
        // No background flush during the run: what the cut finds unflushed is what it takes.
        flush_interval: Some(Duration::from_mins(1)),
    });
    // The whole run took well under the flush interval: every loss is allowed.
    let recent = cut.verify(|_| {});
    assert!(recent[0].lost_within_window > 0, "{recent:?}");
    assert_eq!(recent[0].violations(), 0, "{recent:?}");
    assert_eq!(
        recent[0].present + recent[0].lost_within_window,
        recent[0].acknowledged,
        "{recent:?}"
    );
    // The same losses, recorded two minutes before the last acknowledgement: each one had
    // the flush interval to reach the disk, so each one is a broken promise.
    let old = cut.verify(|record: &mut Record| {
        let last_batch = record.batches.pop().expect("acknowledged");
        let last_first = record.acknowledged - 1;
        for batch in &mut record.batches {
            batch.1 = last_batch.1 - 120_000;
        }
        if last_batch.0 < last_first {
            record.batches.push((last_batch.0, last_batch.1 - 120_000));
        }
        record.batches.push((last_first, last_batch.1));
    });
    assert!(old[0].lost > 0, "{old:?}");
    assert!(
        old[0].lost_within_window <= 1,
        "only the last write is recent: {old:?}"
    );
    assert_eq!(
        old[0].lost + old[0].lost_within_window,
        recent[0].lost_within_window,
        "{old:?}"
    );
}

#[test]
fn the_listener_confirms_a_quiet_batch_and_ends_a_stream_at_an_out_of_order_ack() {
    use std::io::{BufRead, BufReader, Write};
    let records = tempfile::tempdir().expect("tempdir");
    let listener = Listener::start("127.0.0.1:0", records.path()).expect("listener starts");
    let meta = super::wire::StreamMeta {
        run: super::wire::run_name(42),
        stream: "raw-fsync".into(),
        mode: Mode::Raw,
        method: "fsync".into(),
        durability: None,
        flush_interval_ms: None,
        block_bytes: 4096,
        slots: 16,
        path: "raw-fsync.dat".into(),
        host: "test".into(),
        dir: "/dc".into(),
        started_unix_ms: 0,
    };
    let conn = std::net::TcpStream::connect(listener.addr()).expect("connect");
    let mut replies = BufReader::new(conn.try_clone().expect("clone"));
    let mut line = String::new();
    let mut send_and_read = |request: &str| {
        (&conn).write_all(request.as_bytes()).expect("send");
        line.clear();
        replies.read_line(&mut line).expect("reply");
        line.clone()
    };
    let hello = format!(
        "STREAM {} raw-fsync {}\n",
        meta.run,
        serde_json::to_string(&meta).expect("json")
    );
    assert_eq!(send_and_read(&hello), "OK\n");
    // Nothing follows the two: the batch window passes and they are recorded and confirmed.
    assert_eq!(send_and_read("ACK 0\nACK 1\n"), "OK 1\n");
    assert_eq!(
        send_and_read("ACK 5\n"),
        "ERR acknowledgement 5 out of order: 2 was next\n"
    );
    assert_eq!(send_and_read(""), "", "the listener ended the stream");
    let fetched = verify::fetch(&listener.addr().to_string(), &meta.run).expect("fetched");
    assert_eq!(fetched.len(), 1);
    assert_eq!((fetched[0].acknowledged, &fetched[0].meta), (2, &meta));
    // The same stream again is refused: a run's record is never restarted or mixed.
    let again = std::net::TcpStream::connect(listener.addr()).expect("connect");
    (&again).write_all(hello.as_bytes()).expect("send");
    let mut reply = String::new();
    BufReader::new(again).read_line(&mut reply).expect("reply");
    assert!(reply.starts_with("ERR stream raw-fsync of run"), "{reply}");
}
