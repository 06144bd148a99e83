//! diskcheck on the simulated disk: a power cut without a power cut. The listener runs in
//! this process over loopback; the writer writes to a `SimDisk`, which then loses power;
//! verify reads what the simulated cut left.

use super::listen::Listener;
use super::run::{self, Plan, Stop};
use super::verify::{self, StreamReport};
use super::wire::Mode;
use std::path::Path;
use std::sync::Arc;
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};
use tilldb::{Durability, FlushMethod, Options};

struct Case {
    mode: Mode,
    methods: Vec<FlushMethod>,
    durability: Durability,
    /// The disk acknowledges flushes (and write-through writes) without making anything
    /// durable, from the first write on.
    lying: bool,
    writes: u64,
    seed: u64,
}

/// Runs `case` to its last write, cuts the power, and verifies.
fn run_and_cut(case: &Case) -> Vec<StreamReport> {
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
        db_options: Options::for_tests(),
        listener: addr.clone(),
    };
    let (run_file, notes) = run::prepare(&storage, dir, &plan).expect("prepared");
    assert!(notes.is_empty(), "{notes:?}");
    sim.set_lying_flushes(case.lying);
    let outcome = run::write_streams(
        &storage,
        dir,
        &run_file,
        &plan,
        Stop::Writes(case.writes),
        &mut |_, _| {},
    )
    .expect("writes");
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    for p in &outcome.progress {
        assert_eq!(
            (p.written, p.recorded),
            (case.writes, case.writes),
            "{}",
            p.stream
        );
    }
    drop(storage);
    sim.crash(CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: false,
    });
    sim.set_lying_flushes(false);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let run_file = run::read_run_file(&*storage, dir).expect("diskcheck.json survived");
    let records = verify::fetch(&addr, &run_file.run).expect("fetched");
    assert_eq!(records.len(), case.methods.len());
    verify::verify(&storage, dir, &run_file, &records, &Options::for_tests()).expect("verified")
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
        });
        for r in &reports {
            assert_eq!(r.acknowledged, 150, "{r:?}");
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
    });
    let by_stream = violations(&reports);
    assert!(by_stream[0].1 > 0, "{reports:?}");
    assert_eq!(
        by_stream[1],
        ("raw-fdatasync".to_string(), 0),
        "{reports:?}"
    );
    let verdicts = verify::verdicts(&reports);
    assert!(
        verdicts
            .iter()
            .any(|v| v.contains("method nosync") && v.contains("use fdatasync")),
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
    });
    for r in &honest {
        assert_eq!(
            (r.acknowledged, r.checked, r.present),
            (120, 120, 120),
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
    });
    assert!(lying[0].violations() > 0, "{lying:?}");
    assert_eq!(
        lying[0].lost_within_window, 0,
        "sync allows no window: {lying:?}"
    );
}
