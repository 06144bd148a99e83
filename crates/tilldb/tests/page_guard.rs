//! Torn-page guards under crashes (TESTPLAN tier "exhaustive small", doublewrite batch).
//!
//! A batch of pages (rewritten pages, a new page inside the file and one past its end) is
//! written through the guard while the simulated disk dies at the k-th write or flush, for
//! every k; then the machine crashes (power loss tearing 512- or 4096-byte chunks, with and
//! without garbage, or a process kill), recovery runs `restore_torn_pages`, and every page
//! must read as exactly its old or its new version: never torn, never corrupt, never lost.
//! The same workload with the `None` guard is the negative control: some seed must tear a
//! page, or the test cannot see what the guard excludes.
//!
//! Seeds per case: `PAGE_GUARD_SEEDS` (default 24).

use std::path::Path;
use tilldb::FlushMethod;
use tilldb::internals::page::{
    Doublewrite, PageBuf, PageGuard, PageId, PageKind, PageSlot, PageStore, TornPageGuard,
};
use tilldb::io::{CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk, Storage};

const DIR: &str = "/db";
const METHOD: FlushMethod = FlushMethod::Fdatasync;
/// Pages written before the crash-tested batch, at lsn 10.
const OLD_IDS: [u64; 5] = [1, 2, 3, 5, 7];
/// The crash-tested batch, at lsn 20: rewrites, page 8 (allocated, never written) and page 10
/// (past the end until the batch's own extension).
const NEW_IDS: [u64; 7] = [1, 2, 3, 5, 7, 8, 10];
const MODES: [CrashMode; 5] = [
    CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: false,
    },
    CrashMode::PowerLoss {
        tear_bytes: 512,
        garbage: true,
    },
    CrashMode::PowerLoss {
        tear_bytes: 4096,
        garbage: false,
    },
    CrashMode::PowerLoss {
        tear_bytes: 4096,
        garbage: true,
    },
    CrashMode::ProcessKill,
];

fn seeds() -> u64 {
    std::env::var("PAGE_GUARD_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24)
}

fn page(id: u64, lsn: u64, page_bytes: u32) -> PageBuf {
    let mut page = PageBuf::new(PageId(id), PageKind::Leaf, page_bytes);
    page.set_lsn(lsn);
    // A fill per version, and a stripe per 512-byte sector so a sector landing at the wrong
    // place is visible too. (A byte-by-byte pattern costs more than the crash it checks.)
    let body = page.body_mut();
    body.fill(u8::try_from((id * 101 + lsn) % 253).expect("small"));
    for (sector, chunk) in body.chunks_mut(512).enumerate() {
        chunk[..8].copy_from_slice(&(sector as u64 ^ (id << 32) ^ (lsn << 48)).to_le_bytes());
    }
    page.seal();
    page
}

/// The guard under test, or a mutant of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Doublewrite,
    /// Negative control: no guard.
    None,
    /// Mutant: the doublewrite file opened `NoSync`, so the batch flush does nothing (the
    /// "skip the doublewrite flush" mutant of TESTPLAN).
    DoublewriteUnflushed,
}

impl Variant {
    fn guard(self) -> TornPageGuard {
        match self {
            Variant::Doublewrite | Variant::DoublewriteUnflushed => TornPageGuard::Doublewrite,
            Variant::None => TornPageGuard::None,
        }
    }

    /// True when no page may ever be torn.
    fn safe(self) -> bool {
        self == Variant::Doublewrite
    }
}

#[derive(Debug, Clone, Copy)]
struct Case {
    variant: Variant,
    page_bytes: u32,
    mode: CrashMode,
    /// The call the disk dies at; `None` for a run without a fault (to count calls).
    fault: Option<(IoKind, u64)>,
    seed: u64,
}

/// What the pages were after recovery.
#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    old: u32,
    new: u32,
    torn: u32,
    /// Page 10's place when its extension never returned: never allocated, so whatever a torn
    /// extension left there (zeros, garbage) is not a page of the database.
    unallocated: u32,
    /// Pages restore wrote back from the doublewrite batch.
    restored: u32,
}

fn open_disk(seed: u64) -> SimDisk {
    let disk = SimDisk::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    disk.create_dir_all(Path::new(DIR)).expect("mkdir");
    disk
}

/// Creates the database files and writes the old versions durably.
fn setup(disk: &SimDisk, case: &Case) -> (PageStore, PageGuard) {
    let dir = Path::new(DIR);
    let mut store = PageStore::create(disk, dir, METHOD, case.page_bytes).expect("store");
    // Room for 8 images (the batch needs 7): a small file keeps each crash state cheap.
    let mut guard = match case.variant {
        Variant::None => PageGuard::None,
        Variant::Doublewrite => PageGuard::Doublewrite(
            Doublewrite::create(disk, dir, METHOD, case.page_bytes, 8).expect("doublewrite"),
        ),
        Variant::DoublewriteUnflushed => {
            drop(Doublewrite::create(disk, dir, METHOD, case.page_bytes, 8).expect("create"));
            let dw = Doublewrite::open(disk, dir, FlushMethod::NoSync, case.page_bytes);
            PageGuard::Doublewrite(dw.expect("reopen NoSync"))
        }
    };
    store.extend_to(9).expect("extend");
    store.flush().expect("flush");
    let mut old: Vec<PageBuf> = OLD_IDS.map(|id| page(id, 10, case.page_bytes)).to_vec();
    guard.write_pages(&mut store, &mut old).expect("old pages");
    (store, guard)
}

/// What the crash-tested step got done before the disk died.
#[derive(Debug, Clone, Copy)]
struct Progress {
    /// `extend_to(11)` returned: page 10's place is durable zeros, so it may be allocated.
    extended: bool,
    /// The batch call returned `Ok`: every new page is durable.
    acknowledged: bool,
}

/// The crash-tested step: extend for page 10, write the new batch through the guard.
fn write_new_batch(store: &mut PageStore, guard: &mut PageGuard, page_bytes: u32) -> Progress {
    let mut new: Vec<PageBuf> = NEW_IDS.map(|id| page(id, 20, page_bytes)).to_vec();
    let extended = store.extend_to(11).is_ok();
    let acknowledged = extended && guard.write_pages(store, &mut new).is_ok();
    Progress {
        extended,
        acknowledged,
    }
}

/// Reopens after the crash, restores torn pages, and classifies every page. Panics on any
/// page that is neither version (for every variant: wrong data is never acceptable), and on
/// a torn page unless the variant is unsafe.
fn recover_and_check(disk: &SimDisk, case: &Case, progress: Progress) -> Outcome {
    let dir = Path::new(DIR);
    let mut store = PageStore::open(disk, dir, METHOD, case.page_bytes).expect("reopen store");
    let guard = PageGuard::open(case.variant.guard(), disk, dir, METHOD, case.page_bytes);
    let guard = guard.expect("reopen guard");
    let report = guard.restore_torn_pages(&mut store).expect("restore");
    let mut outcome = Outcome::default();
    for id in NEW_IDS {
        let old = OLD_IDS.contains(&id).then(|| page(id, 10, case.page_bytes));
        let new = page(id, 20, case.page_bytes);
        let slot = store.inspect(PageId(id)).expect("inspect");
        if id == 10 && !progress.extended {
            assert!(
                !matches!(slot, PageSlot::Valid(_)),
                "{case:?}: page 10 never written"
            );
            outcome.unallocated += 1;
            continue;
        }
        match slot {
            PageSlot::Valid(got) if got.bytes() == new.bytes() => outcome.new += 1,
            PageSlot::Valid(got) if old.as_ref().is_some_and(|o| o.bytes() == got.bytes()) => {
                outcome.old += 1;
            }
            PageSlot::Missing | PageSlot::Unwritten if old.is_none() => outcome.old += 1,
            PageSlot::Invalid(fault) => {
                assert!(
                    !case.variant.safe(),
                    "{case:?}: page {id} torn ({fault:?}) after restore {report:?}"
                );
                outcome.torn += 1;
            }
            other => panic!("{case:?}: page {id} is neither version: {other:?}"),
        }
    }
    // A durable, whole batch 2 means the in-place writes may have begun: restore must have
    // brought every page to its new version.
    if case.variant.safe() && report.sequence == Some(2) && report.images_invalid == 0 {
        assert_eq!(outcome.new as usize, NEW_IDS.len(), "{case:?}: {report:?}");
    }
    if case.variant.safe() && report.sequence == Some(1) {
        let old = outcome.old + outcome.unallocated;
        assert_eq!(old as usize, NEW_IDS.len(), "{case:?}: {report:?}");
    }
    if progress.acknowledged {
        assert_eq!(
            outcome.new as usize,
            NEW_IDS.len(),
            "{case:?}: acknowledged, not durable"
        );
    }
    outcome.restored = u32::try_from(report.restored.len()).expect("small");
    store.check_invariants();
    outcome
}

/// One crash state: set up, arm the fault, write the batch, crash, recover, check.
fn run_case(case: &Case) -> Outcome {
    let disk = open_disk(case.seed);
    let (mut store, mut guard) = setup(&disk, case);
    if let Some((kind, nth)) = case.fault {
        disk.inject(Fault::once(kind, nth, FaultKind::Crash));
    }
    let progress = write_new_batch(&mut store, &mut guard, case.page_bytes);
    drop((store, guard));
    disk.crash(case.mode);
    disk.clear_faults();
    let outcome = recover_and_check(&disk, case, progress);
    disk.check_invariants();
    outcome
}

/// How many writes and flushes the crash-tested step makes without faults.
fn calls_of_the_batch(variant: Variant, page_bytes: u32) -> (u64, u64) {
    let disk = open_disk(0);
    let case = Case {
        variant,
        page_bytes,
        mode: CrashMode::ProcessKill,
        fault: None,
        seed: 0,
    };
    let (mut store, mut guard) = setup(&disk, &case);
    let (writes, flushes) = (
        disk.call_count(IoKind::Write),
        disk.call_count(IoKind::Flush),
    );
    assert!(write_new_batch(&mut store, &mut guard, page_bytes).acknowledged);
    (
        disk.call_count(IoKind::Write) - writes,
        disk.call_count(IoKind::Flush) - flushes,
    )
}

/// Every case of one guard: page sizes x crash modes x every write and flush (and one past
/// the last, where nothing fails) x seeds. Returns the summed outcomes and the count.
fn explore(variant: Variant, seeds: u64) -> (Outcome, u64) {
    let mut total = Outcome::default();
    let mut states = 0;
    for page_bytes in [4096, 16384] {
        let (writes, flushes) = calls_of_the_batch(variant, page_bytes);
        match variant.guard() {
            // Writes: extension zeros, the batch, 4 in-place runs (1-3, 5, 7-8, 10).
            // Flushes: the extension, the batch, the data file.
            TornPageGuard::Doublewrite => assert_eq!((writes, flushes), (6, 3)),
            // Full-page images write pages like None: the log, not this layer, repairs them.
            TornPageGuard::None | TornPageGuard::FullPageImages => {
                assert_eq!((writes, flushes), (5, 2));
            }
            // Its crash cases need a device with atomic writes: `db_crash` runs them.
            TornPageGuard::Atomic | TornPageGuard::Auto => {
                unreachable!("no Variant uses the atomic or auto guard")
            }
        }
        for mode in MODES {
            for (kind, calls) in [(IoKind::Write, writes), (IoKind::Flush, flushes)] {
                for nth in 1..=calls + 1 {
                    for seed in 0..seeds {
                        let case = Case {
                            variant,
                            page_bytes,
                            mode,
                            fault: Some((kind, nth)),
                            seed,
                        };
                        let outcome = run_case(&case);
                        total.old += outcome.old;
                        total.new += outcome.new;
                        total.torn += outcome.torn;
                        total.unallocated += outcome.unallocated;
                        total.restored += outcome.restored;
                        states += 1;
                    }
                }
            }
        }
    }
    (total, states)
}

#[test]
fn doublewrite_leaves_every_page_old_or_new_at_every_crash_point() {
    let (total, states) = explore(Variant::Doublewrite, seeds());
    eprintln!("doublewrite: {states} crash states, pages {total:?}");
    assert_eq!(total.torn, 0);
    assert!(
        total.old > 0 && total.new > 0,
        "both outcomes reached: {total:?}"
    );
    assert!(
        total.restored > 0,
        "restore never repaired a page: {total:?}"
    );
}

/// Negative control: without a guard the same crashes tear pages, and the crc catches them.
#[test]
fn the_none_guard_is_caught_tearing_a_page() {
    let (total, states) = explore(Variant::None, seeds());
    eprintln!("none: {states} crash states, pages {total:?}");
    assert!(
        total.torn > 0,
        "no seed tore a page: the test cannot see torn pages"
    );
}

/// Mutant: a doublewrite whose batch flush does nothing must be caught tearing a page too.
#[test]
fn skipping_the_doublewrite_flush_is_caught() {
    let (total, states) = explore(Variant::DoublewriteUnflushed, seeds().min(8));
    eprintln!("doublewrite without its flush: {states} crash states, pages {total:?}");
    assert!(total.torn > 0, "the mutant survived: {total:?}");
}

/// F8: the machine crashes again during restore, at every write and flush of it; the next
/// restore still leaves every page old or new.
#[test]
fn a_crash_during_restore_is_repaired_by_the_next_restore() {
    let seeds = seeds().min(12);
    let mut states = 0;
    for seed in 0..seeds {
        for mode in MODES {
            let case = Case {
                variant: Variant::Doublewrite,
                page_bytes: 16384,
                mode,
                // Die at the store flush: the batch is durable, the in-place writes are not.
                fault: Some((IoKind::Flush, 3)),
                seed,
            };
            for (kind, nth) in [1, 2, 3, 4, 5]
                .map(|n| (IoKind::Write, n))
                .into_iter()
                .chain([(IoKind::Flush, 1), (IoKind::Flush, 2)])
            {
                let disk = open_disk(seed);
                let (mut store, mut guard) = setup(&disk, &case);
                disk.inject(Fault::once(IoKind::Flush, 3, FaultKind::Crash));
                let progress = write_new_batch(&mut store, &mut guard, 16384);
                assert!(progress.extended && !progress.acknowledged);
                drop((store, guard));
                disk.crash(mode);
                disk.clear_faults();
                // The first restore dies part-way.
                disk.inject(Fault::once(kind, nth, FaultKind::Crash));
                let dir = Path::new(DIR);
                let restored = PageStore::open(&disk, dir, METHOD, 16384).and_then(|mut store| {
                    let guard =
                        PageGuard::open(TornPageGuard::Doublewrite, &disk, dir, METHOD, 16384)?;
                    guard.restore_torn_pages(&mut store)
                });
                drop(restored);
                disk.crash(mode);
                disk.clear_faults();
                let outcome = recover_and_check(&disk, &case, progress);
                assert_eq!(outcome.torn, 0, "{case:?} then {kind:?} {nth}");
                states += 1;
            }
        }
    }
    eprintln!("crash during restore: {states} crash states");
}
