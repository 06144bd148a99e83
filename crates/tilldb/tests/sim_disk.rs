//! `SimDisk`: what each crash mode keeps, what each fault does, and that one seed replays.
//!
//! Property tests state the durability promises (flushed data survives every crash, a torn
//! write is torn only at chunk boundaries, a process kill loses nothing, a seed replays
//! byte for byte). Example tests pin each fault and each metadata rule, each with a control
//! showing the test would see the opposite outcome.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tilldb::io::{
    AlignedBuf, CrashMode, Fault, FaultKind, IoKind, SimConfig, SimDisk, Storage, StorageFile,
    WriteCache,
};
use tilldb::{Error, FlushMethod, IoOp};

const DIR: &str = "/db";

/// How many seeds example tests try when they need "for some seed" or "for every seed".
const SEED_COUNT: u64 = 64;

fn seeds() -> std::ops::Range<u64> {
    0..SEED_COUNT
}

fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

/// A disk with the directory `/db`.
fn disk_with(config: SimConfig) -> SimDisk {
    let disk = SimDisk::new(config);
    disk.create_dir_all(Path::new(DIR)).expect("create /db");
    disk
}

fn disk(seed: u64) -> SimDisk {
    disk_with(SimConfig {
        seed,
        ..SimConfig::default()
    })
}

/// Creates `name` and makes its name durable.
fn durable_file(disk: &SimDisk, name: &str, method: FlushMethod) -> Box<dyn StorageFile> {
    let file = disk.create(&path(name), method).expect("create");
    disk.flush_dir(Path::new(DIR)).expect("flush /db");
    file
}

fn power_loss(tear_bytes: u32, garbage: bool) -> CrashMode {
    CrashMode::PowerLoss {
        tear_bytes,
        garbage,
    }
}

/// A block-aligned buffer of `len` copies of `byte`, usable with direct methods.
fn filled(byte: u8, len: usize) -> AlignedBuf {
    AlignedBuf::from_slice_padded(&vec![byte; len], len)
}

fn errno<T: std::fmt::Debug>(result: tilldb::Result<T>) -> i32 {
    let err = result.expect_err("the call should fail");
    err.raw_os_error()
        .unwrap_or_else(|| panic!("no OS error in {err}"))
}

fn io_op(err: &Error) -> IoOp {
    match err {
        Error::Io { op, .. } => *op,
        other => panic!("not an I/O error: {other}"),
    }
}

fn assert_simulated_crash<T: std::fmt::Debug>(result: tilldb::Result<T>) {
    let text = result
        .expect_err("the disk should refuse the call")
        .to_string();
    assert!(text.contains("simulated crash"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Properties

#[derive(Debug, Clone)]
enum BlockOp {
    /// `count` 512-byte blocks of `byte` at block `block`.
    Write {
        block: u64,
        count: usize,
        byte: u8,
    },
    Flush,
}

fn block_op() -> impl Strategy<Value = BlockOp> {
    prop_oneof![
        3 => (0..16u64, 1..4usize, any::<u8>())
            .prop_map(|(block, count, byte)| BlockOp::Write { block, count, byte }),
        1 => Just(BlockOp::Flush),
    ]
}

fn any_method() -> impl Strategy<Value = FlushMethod> {
    prop::sample::select(vec![
        FlushMethod::Fsync,
        FlushMethod::Fdatasync,
        FlushMethod::Dsync,
        FlushMethod::Direct,
        FlushMethod::DirectDsync,
        FlushMethod::NoSync,
    ])
}

fn any_crash() -> impl Strategy<Value = CrashMode> {
    prop_oneof![
        Just(CrashMode::ProcessKill),
        (prop::sample::select(vec![512u32, 4096]), any::<bool>()).prop_map(
            |(tear_bytes, garbage)| CrashMode::PowerLoss {
                tear_bytes,
                garbage
            }
        ),
    ]
}

/// One of the files `process_kill_keeps_everything` plays with, and what to do to it.
#[derive(Debug, Clone)]
enum FileOp {
    Write {
        file: usize,
        offset: u64,
        len: usize,
        byte: u8,
    },
    SetLen {
        file: usize,
        len: u64,
    },
    Flush {
        file: usize,
    },
    Lie(bool),
}

fn file_op() -> impl Strategy<Value = FileOp> {
    prop_oneof![
        4 => (0..2usize, 0..6000u64, 1..3000usize, any::<u8>())
            .prop_map(|(file, offset, len, byte)| FileOp::Write { file, offset, len, byte }),
        1 => (0..2usize, 0..9000u64).prop_map(|(file, len)| FileOp::SetLen { file, len }),
        1 => (0..2usize).prop_map(|file| FileOp::Flush { file }),
        1 => any::<bool>().prop_map(FileOp::Lie),
    ]
}

/// Plays `ops` on two files of a fresh disk, then crashes it; returns every file's contents.
fn play(seed: u64, ops: &[FileOp], short_write_at: Option<u64>, mode: CrashMode) -> Vec<Vec<u8>> {
    let disk = disk(seed);
    if let Some(nth) = short_write_at {
        disk.inject(Fault::once(IoKind::Write, nth, FaultKind::ShortWrite));
    }
    let files = [
        disk.create(&path("a"), FlushMethod::Fdatasync)
            .expect("create a"),
        disk.create(&path("b"), FlushMethod::Dsync)
            .expect("create b"),
    ];
    for op in ops {
        // A short write fails on purpose; everything else must succeed.
        let _ = apply_file_op(&disk, &files, op);
    }
    disk.flush_dir(Path::new(DIR)).expect("flush /db");
    disk.crash(mode);
    disk.check_invariants();
    ["a", "b"]
        .iter()
        .map(|name| disk.live_contents(&path(name)).unwrap_or_default())
        .collect()
}

fn apply_file_op(
    disk: &SimDisk,
    files: &[Box<dyn StorageFile>],
    op: &FileOp,
) -> tilldb::Result<()> {
    match *op {
        FileOp::Write {
            file,
            offset,
            len,
            byte,
        } => files[file].write_at(&vec![byte; len], offset),
        FileOp::SetLen { file, len } => files[file].set_len(len),
        FileOp::Flush { file } => files[file].flush(),
        FileOp::Lie(lie) => {
            disk.set_lying_flushes(lie);
            Ok(())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Every byte whose last write was made durable (by a flush, or on return for write-through
    /// methods) reads back after any crash.
    #[test]
    fn flushed_data_survives_every_crash_mode(
        seed in any::<u64>(),
        method in any_method(),
        ops in prop::collection::vec(block_op(), 1..24),
        mode in any_crash(),
    ) {
        let disk = disk(seed);
        let file = durable_file(&disk, "f", method);
        let mut model: Vec<u8> = Vec::new();
        let mut settled: Vec<bool> = Vec::new();
        for op in &ops {
            match *op {
                BlockOp::Write { block, count, byte } => {
                    let offset = block * 512;
                    let start = usize::try_from(offset).expect("small");
                    let end = start + count * 512;
                    file.write_at(&filled(byte, count * 512), offset).expect("write");
                    if model.len() < end {
                        model.resize(end, 0);
                        settled.resize(end, false);
                    }
                    model[start..end].fill(byte);
                    settled[start..end].fill(method.is_write_through());
                }
                BlockOp::Flush => {
                    file.flush().expect("flush");
                    if method.is_durable() {
                        settled.fill(true);
                    }
                }
            }
        }
        disk.crash(mode);
        disk.check_invariants();
        let after = disk.live_contents(&path("f")).expect("a dir-flushed file survives");
        for (i, _) in settled.iter().enumerate().filter(|(_, settled)| **settled) {
            prop_assert!(i < after.len(), "flushed byte {} beyond end {}", i, after.len());
            prop_assert_eq!(after[i], model[i], "flushed byte {} changed", i);
        }
        if mode == CrashMode::ProcessKill {
            prop_assert_eq!(after, model);
        }
    }

    /// After a power cut without garbage, each `tear_bytes`-aligned chunk of an unflushed write
    /// is wholly old or wholly new; bytes no write touched are old.
    #[test]
    fn power_loss_tears_writes_only_at_chunk_boundaries(
        seed in any::<u64>(),
        tear_bytes in prop::sample::select(vec![512u32, 4096]),
        writes in prop::collection::vec((0..4096u64, 1..=4096usize), 5),
    ) {
        const SLOT_BYTES: u64 = 8192;
        const BASE_BYTES: usize = 4 * 8192;
        let disk = disk(seed);
        let file = durable_file(&disk, "f", FlushMethod::Fdatasync);
        file.write_at(&vec![0xAA; BASE_BYTES], 0).expect("base");
        file.flush().expect("flush base");
        // One write per 8 KiB slot, so writes never overlap; slot 4 lies past the end.
        let ranges: Vec<(u64, u64)> = writes.iter().enumerate().map(|(slot, &(at, len))| {
            let offset = slot as u64 * SLOT_BYTES + at;
            (offset, offset + len as u64)
        }).collect();
        for (slot, &(start, end)) in ranges.iter().enumerate() {
            let byte = u8::try_from(slot + 1).expect("five slots");
            let len = usize::try_from(end - start).expect("small");
            file.write_at(&vec![byte; len], start).expect("write");
        }
        disk.crash(power_loss(tear_bytes, false));
        let after = disk.live_contents(&path("f")).expect("file survives");
        let (extend_start, extend_end) = ranges[4];
        prop_assert!(after.len() == BASE_BYTES || after.len() as u64 == extend_end);
        let old = |i: usize| if i < BASE_BYTES { 0xAA } else { 0 };
        let mut touched = vec![false; after.len()];
        for (slot, &(start, end)) in ranges.iter().enumerate() {
            if start == extend_start && after.len() == BASE_BYTES {
                continue; // The extending write was dropped whole.
            }
            let unit = u64::from(tear_bytes);
            let mut chunk_start = start;
            while chunk_start < end {
                let chunk_end = ((chunk_start / unit + 1) * unit).min(end);
                let range = usize::try_from(chunk_start).expect("small")
                    ..usize::try_from(chunk_end).expect("small");
                let new = u8::try_from(slot + 1).expect("five slots");
                let all_new = after[range.clone()].iter().all(|&b| b == new);
                let all_old = range.clone().all(|i| after[i] == old(i));
                prop_assert!(all_new || all_old, "chunk {:?} is mixed", range);
                touched[range].fill(true);
                chunk_start = chunk_end;
            }
        }
        for (i, _) in touched.iter().enumerate().filter(|(_, t)| !**t) {
            prop_assert_eq!(after[i], old(i), "untouched byte {} changed", i);
        }
    }

    /// A process kill keeps every write, size change and name, flushed or not, lies or not.
    #[test]
    fn process_kill_keeps_everything(
        seed in any::<u64>(),
        ops in prop::collection::vec(file_op(), 1..32),
    ) {
        let disk = disk(seed);
        let names = ["a", "b"];
        let files: Vec<_> = names.iter()
            .map(|name| disk.create(&path(name), FlushMethod::Fdatasync).expect("create"))
            .collect();
        let mut model = vec![Vec::new(), Vec::new()];
        for op in &ops {
            apply_file_op(&disk, &files, op).expect("no faults injected");
            match *op {
                FileOp::Write { file, offset, len, byte } => {
                    let start = usize::try_from(offset).expect("small");
                    if model[file].len() < start + len {
                        model[file].resize(start + len, 0);
                    }
                    model[file][start..start + len].fill(byte);
                }
                FileOp::SetLen { file, len } => {
                    model[file].resize(usize::try_from(len).expect("small"), 0);
                }
                FileOp::Flush { .. } | FileOp::Lie(_) => {}
            }
        }
        disk.crash(CrashMode::ProcessKill);
        disk.check_invariants();
        prop_assert_eq!(disk.list_dir(Path::new(DIR)).expect("list"), names.to_vec());
        for (name, expected) in names.iter().zip(&model) {
            prop_assert_eq!(disk.live_contents(&path(name)), Some(expected.clone()));
            prop_assert_eq!(disk.durable_contents(&path(name)), Some(expected.clone()));
        }
    }

    /// The same seed and the same calls give byte-identical images, faults and tears included.
    #[test]
    fn one_seed_replays_byte_for_byte(
        seed in any::<u64>(),
        ops in prop::collection::vec(file_op(), 1..32),
        short_write_at in prop::option::of(1..8u64),
    ) {
        let mode = power_loss(512, true);
        let first = play(seed, &ops, short_write_at, mode);
        let second = play(seed, &ops, short_write_at, mode);
        prop_assert_eq!(first, second);
    }
}

/// The control for `one_seed_replays_byte_for_byte`: the seed does steer the outcome.
#[test]
fn different_seeds_give_different_crash_images() {
    let ops: Vec<FileOp> = (0..8)
        .map(|i| FileOp::Write {
            file: 0,
            offset: i * 4096,
            len: 4096,
            byte: 0x11,
        })
        .collect();
    let images: std::collections::BTreeSet<_> = (0..8)
        .map(|seed| play(seed, &ops, None, power_loss(512, true)))
        .collect();
    assert!(images.len() > 1, "eight seeds gave one image");
}

// ---------------------------------------------------------------------------------------------
// Faults

#[test]
fn eio_fails_only_the_nth_call_once() {
    let disk = disk(1);
    let file = durable_file(&disk, "f", FlushMethod::Fdatasync);
    disk.inject(Fault::once(IoKind::Write, 2, FaultKind::Eio));
    file.write_at(b"one", 0).expect("first write");
    let err = file.write_at(b"two", 3).expect_err("second write fails");
    assert_eq!(err.raw_os_error(), Some(tilldb::io::errno::EIO));
    assert_eq!(io_op(&err), IoOp::Write);
    assert!(
        err.to_string().contains(&path("f").display().to_string()),
        "{err}"
    );
    file.write_at(b"three", 3).expect("third write");
    assert_eq!(disk.live_contents(&path("f")).expect("f"), b"onethree");
}

#[test]
fn persistent_enospc_fails_every_later_call() {
    let disk = disk(1);
    let file = durable_file(&disk, "f", FlushMethod::Fdatasync);
    disk.inject(Fault::persistent(IoKind::SetLen, 2, FaultKind::Enospc));
    file.set_len(10).expect("first set_len");
    for len in [20, 30, 40] {
        assert_eq!(errno(file.set_len(len)), tilldb::io::errno::ENOSPC);
    }
    assert_eq!(file.len().expect("len"), 10);
    disk.clear_faults();
    file.set_len(50).expect("after clear_faults");
}

#[test]
fn path_filter_limits_a_fault_to_matching_files() {
    let disk = disk(1);
    disk.inject(Fault::once(IoKind::Create, 1, FaultKind::Eio).on_path("wal"));
    disk.create(&path("page"), FlushMethod::Fsync)
        .expect("page is not filtered in");
    let err = disk
        .create(&path("wal-1"), FlushMethod::Fsync)
        .expect_err("wal fails");
    assert_eq!(
        (io_op(&err), err.raw_os_error()),
        (IoOp::Create, Some(tilldb::io::errno::EIO))
    );
    assert!(
        !disk.exists(&path("wal-1")).expect("exists"),
        "a failed create creates nothing"
    );
    disk.create(&path("wal-1"), FlushMethod::Fsync)
        .expect("only once");
}

/// One storage call, for tables of calls.
type Call<'a> = dyn Fn() -> tilldb::Result<()> + 'a;

#[test]
fn every_kind_of_call_can_fail_and_is_counted() {
    let disk = disk(1);
    let file = durable_file(&disk, "f", FlushMethod::Fsync);
    let dir = Path::new(DIR);
    let calls: [(IoKind, IoOp, &Call); 11] = [
        (IoKind::Create, IoOp::Create, &|| {
            disk.create(&path("g"), FlushMethod::Fsync).map(drop)
        }),
        (IoKind::Open, IoOp::Open, &|| {
            disk.open(&path("f"), FlushMethod::Fsync).map(drop)
        }),
        (IoKind::Read, IoOp::Read, &|| {
            file.read_at(&mut [0; 4], 0).map(drop)
        }),
        (IoKind::Write, IoOp::Write, &|| file.write_at(b"x", 0)),
        (IoKind::SetLen, IoOp::SetLen, &|| file.set_len(1)),
        (IoKind::Flush, IoOp::Flush, &|| file.flush()),
        (IoKind::Rename, IoOp::Rename, &|| {
            disk.rename(&path("f"), &path("h"))
        }),
        (IoKind::Remove, IoOp::Remove, &|| disk.remove(&path("f"))),
        (IoKind::FlushDir, IoOp::FlushDir, &|| disk.flush_dir(dir)),
        (IoKind::CreateDir, IoOp::CreateDir, &|| {
            disk.create_dir_all(&path("sub"))
        }),
        (IoKind::ListDir, IoOp::ListDir, &|| {
            disk.list_dir(dir).map(drop)
        }),
    ];
    for (kind, op, call) in calls {
        let before = disk.call_count(kind);
        disk.inject(Fault::once(kind, 1, FaultKind::Eio));
        let err = call().expect_err("the injected fault fires");
        assert_eq!(
            (io_op(&err), err.raw_os_error()),
            (op, Some(tilldb::io::errno::EIO)),
            "{kind:?}"
        );
        assert_eq!(disk.call_count(kind), before + 1, "{kind:?} counted");
    }
    disk.check_invariants();
}

#[test]
fn short_write_lands_a_block_aligned_prefix() {
    let mut prefix_lens = std::collections::BTreeSet::new();
    for seed in seeds() {
        let disk = disk(seed);
        let file = durable_file(&disk, "f", FlushMethod::Fdatasync);
        file.write_at(&[0xAA; 8192], 0).expect("base");
        disk.inject(Fault::once(IoKind::Write, 1, FaultKind::ShortWrite));
        assert_eq!(
            errno(file.write_at(&[0x55; 6000], 1000)),
            tilldb::io::errno::ENOSPC
        );
        let live = disk.live_contents(&path("f")).expect("f");
        assert_eq!(
            live.len(),
            8192,
            "seed {seed}: the write stopped short of the end"
        );
        let landed = live[1000..].iter().take_while(|&&b| b == 0x55).count();
        assert!(
            live[1000 + landed..].iter().all(|&b| b == 0xAA),
            "seed {seed}: not a prefix"
        );
        let cut = 1000 + landed;
        assert!(landed == 0 || cut % 512 == 0, "seed {seed}: cut at {cut}");
        assert!(landed < 6000, "seed {seed}: a short write is short");
        prefix_lens.insert(landed);
    }
    assert!(prefix_lens.contains(&0), "the prefix may be empty");
    assert!(
        prefix_lens.len() > 3,
        "prefixes vary with the seed: {prefix_lens:?}"
    );
}

#[test]
fn flush_loses_data_like_linux_fsync() {
    let disk = disk(1);
    let file = durable_file(&disk, "f", FlushMethod::Fdatasync);
    file.write_at(b"kept", 0).expect("write");
    file.flush().expect("flush");
    file.write_at(b"LOST", 4).expect("write");
    disk.inject(Fault::once(IoKind::Flush, 1, FaultKind::FlushLosesData));
    let err = file.flush().expect_err("the flush fails");
    assert_eq!(
        (io_op(&err), err.raw_os_error()),
        (IoOp::Flush, Some(tilldb::io::errno::EIO))
    );
    let mut buf = [0; 8];
    assert_eq!(file.read_at(&mut buf, 0).expect("read"), 8);
    assert_eq!(&buf, b"keptLOST", "reads still show the lost write");
    file.flush().expect("a retried flush succeeds");
    assert_eq!(disk.durable_contents(&path("f")).expect("f"), b"kept");
    disk.check_invariants();
    disk.crash(power_loss(512, false));
    assert_eq!(disk.live_contents(&path("f")).expect("f"), b"kept");
}

#[test]
fn crash_fault_kills_the_disk_until_crash() {
    let mut partial = false;
    for seed in 0..16 {
        let disk = disk(seed);
        let file = durable_file(&disk, "f", FlushMethod::Fdatasync);
        disk.inject(Fault::once(IoKind::Write, 2, FaultKind::Crash));
        file.write_at(&[1; 100], 0).expect("first write");
        assert_simulated_crash(file.write_at(&[2; 16384], 0));
        let live = disk.live_contents(&path("f")).expect("f");
        let landed = live.iter().take_while(|&&b| b == 2).count();
        assert!(
            landed % 4096 == 0 || landed == 16384,
            "seed {seed}: cut at {landed}"
        );
        partial |= landed > 0 && landed < 16384;
        assert_simulated_crash(file.read_at(&mut [0; 8], 0));
        assert_simulated_crash(file.flush());
        assert_simulated_crash(disk.open(&path("f"), FlushMethod::Fdatasync));
        assert_simulated_crash(disk.list_dir(Path::new(DIR)));
        disk.clear_faults();
        assert_simulated_crash(disk.exists(&path("f")));
        disk.crash(CrashMode::ProcessKill);
        let file = disk
            .open(&path("f"), FlushMethod::Fdatasync)
            .expect("alive again");
        assert_eq!(file.len().expect("len"), live.len() as u64);
        assert_eq!(
            disk.live_contents(&path("f")).expect("f"),
            live,
            "F1 keeps the prefix"
        );
    }
    assert!(partial, "some seed cuts the write in the middle");
}

// ---------------------------------------------------------------------------------------------
// Crashes and metadata

#[test]
fn create_without_flush_dir_can_vanish_on_power_loss() {
    let mut vanished = 0;
    for seed in seeds() {
        let disk = disk(seed);
        let file = disk.create(&path("f"), FlushMethod::Fsync).expect("create");
        file.write_at(b"data", 0).expect("write");
        file.flush().expect("flush data, not the name");
        disk.crash(power_loss(512, false));
        match disk.live_contents(&path("f")) {
            None => vanished += 1,
            Some(data) => assert_eq!(data, b"data", "seed {seed}"),
        }
        assert_eq!(
            disk.exists(&path("f")).expect("exists"),
            disk.live_contents(&path("f")).is_some()
        );
    }
    assert!(vanished > 0, "no seed lost the unflushed name");
    assert!(vanished < SEED_COUNT, "every seed lost the name");
}

#[test]
fn create_with_flush_dir_always_survives_power_loss() {
    for seed in seeds() {
        let disk = disk(seed);
        let file = durable_file(&disk, "f", FlushMethod::Fsync);
        file.write_at(b"data", 0).expect("write");
        file.flush().expect("flush");
        disk.crash(power_loss(512, true));
        assert_eq!(
            disk.live_contents(&path("f")).as_deref(),
            Some(&b"data"[..]),
            "seed {seed}"
        );
        assert_eq!(disk.list_dir(Path::new(DIR)).expect("list"), ["f"]);
    }
}

/// Writes `final` through a temporary name; `flush_target_dir` decides whether the rename is
/// made durable. Returns which names hold the data after a power cut.
fn rename_then_power_loss(seed: u64, flush_target_dir: bool) -> (bool, bool) {
    let disk = disk(seed);
    let file = durable_file(&disk, "tmp", FlushMethod::Fsync);
    file.write_at(b"data", 0).expect("write");
    file.flush().expect("flush");
    disk.rename(&path("tmp"), &path("final")).expect("rename");
    if flush_target_dir {
        disk.flush_dir(Path::new(DIR)).expect("flush /db");
    }
    disk.crash(power_loss(512, true));
    disk.check_invariants();
    let has = |name| {
        disk.live_contents(&path(name))
            .is_some_and(|data| data == b"data")
    };
    (has("tmp"), has("final"))
}

#[test]
fn rename_made_durable_by_flush_dir_survives() {
    for seed in seeds() {
        assert_eq!(
            rename_then_power_loss(seed, true),
            (false, true),
            "seed {seed}"
        );
    }
    let lost = seeds()
        .filter(|&seed| rename_then_power_loss(seed, false) == (true, false))
        .count();
    assert!(
        lost > 0,
        "control: without flush_dir some power cut undoes the rename"
    );
}

#[test]
fn handles_opened_before_a_crash_fail() {
    for mode in [CrashMode::ProcessKill, power_loss(4096, true)] {
        let disk = disk(1);
        let file = durable_file(&disk, "f", FlushMethod::Fdatasync);
        file.write_at(b"data", 0).expect("write");
        file.flush().expect("flush");
        disk.crash(mode);
        assert_eq!(file.path(), path("f"));
        assert_simulated_crash(file.len());
        assert_simulated_crash(file.read_at(&mut [0; 4], 0));
        assert_simulated_crash(file.write_at(b"x", 0));
        assert_simulated_crash(file.set_len(0));
        assert_simulated_crash(file.flush());
        let reopened = disk
            .open(&path("f"), FlushMethod::Fdatasync)
            .expect("reopen");
        let mut buf = [0; 4];
        assert_eq!(reopened.read_at(&mut buf, 0).expect("read"), 4);
        assert_eq!(&buf, b"data");
    }
}

/// Writes 8 KiB to a dir-flushed file without flushing it, then cuts the power.
fn unflushed_write_survives(seed: u64, method: FlushMethod, lie: bool) -> bool {
    let disk = disk(seed);
    let file = durable_file(&disk, "f", method);
    disk.set_lying_flushes(lie);
    file.write_at(&filled(7, 8192), 0).expect("write");
    file.flush().expect("flush");
    disk.crash(power_loss(512, true));
    disk.live_contents(&path("f"))
        .is_some_and(|data| data == [7; 8192])
}

#[test]
fn write_through_writes_survive_power_loss_without_flush() {
    for seed in seeds() {
        let disk = disk(seed);
        for (name, method) in [("d", FlushMethod::Dsync), ("dd", FlushMethod::DirectDsync)] {
            let file = durable_file(&disk, name, method);
            file.write_at(&filled(7, 8192), 0).expect("write");
        }
        disk.crash(power_loss(512, true));
        for name in ["d", "dd"] {
            let data = disk.live_contents(&path(name));
            assert!(
                data.is_some_and(|d| d == [7; 8192]),
                "seed {seed}: {name} lost"
            );
        }
    }
    // Control: buffered writes without a flush are lost by some power cut.
    let unflushed = |seed| {
        let disk = disk(seed);
        let file = durable_file(&disk, "f", FlushMethod::Fdatasync);
        file.write_at(&[7; 8192], 0).expect("write");
        disk.crash(power_loss(512, true));
        disk.live_contents(&path("f"))
            .is_some_and(|data| data == [7; 8192])
    };
    assert!(seeds().any(|seed| !unflushed(seed)));
}

#[test]
fn write_through_size_change_needs_a_flush() {
    let shrunk = |seed, flush: bool| {
        let disk = disk(seed);
        let file = durable_file(&disk, "f", FlushMethod::Dsync);
        file.write_at(&[1; 4096], 0).expect("write");
        file.set_len(100).expect("set_len");
        if flush {
            file.flush().expect("flush");
        }
        disk.crash(power_loss(512, false));
        disk.live_contents(&path("f")).expect("f").len() == 100
    };
    assert!(seeds().all(|seed| shrunk(seed, true)));
    assert!(
        seeds().any(|seed| !shrunk(seed, false)),
        "control: the size change can be lost"
    );
}

#[test]
fn lying_flushes_lose_data_on_power_loss() {
    for method in [
        FlushMethod::Fdatasync,
        FlushMethod::Direct,
        FlushMethod::DirectDsync,
    ] {
        assert!(
            seeds().all(|seed| unflushed_write_survives(seed, method, false)),
            "{method}"
        );
        let lost = seeds()
            .filter(|&seed| !unflushed_write_survives(seed, method, true))
            .count();
        assert!(lost > 0, "{method}: a lying flush never lost data");
    }
    let disk = disk(1);
    let file = durable_file(&disk, "f", FlushMethod::Fsync);
    disk.set_lying_flushes(true);
    file.write_at(b"data", 0).expect("write");
    file.flush().expect("the lie returns Ok");
    assert_eq!(disk.durable_contents(&path("f")).expect("f"), b"");
    disk.set_lying_flushes(false);
    file.flush().expect("an honest flush");
    assert_eq!(disk.durable_contents(&path("f")).expect("f"), b"data");
}

/// Writes a 16 KiB page over an old one and cuts the power; true if the result mixes both.
fn page_torn(seed: u64, atomic_write_unit: Option<(u32, u32)>) -> bool {
    let disk = disk_with(SimConfig {
        seed,
        atomic_write_unit,
        ..SimConfig::default()
    });
    let file = durable_file(&disk, "f", FlushMethod::Direct);
    file.write_at(&filled(1, 16384), 16384).expect("old page");
    file.flush().expect("flush");
    file.write_at(&filled(2, 16384), 16384).expect("new page");
    disk.crash(power_loss(512, false));
    let data = disk.live_contents(&path("f")).expect("f");
    let page = &data[16384..];
    assert!(
        page.iter().all(|&b| b == 1 || b == 2),
        "seed {seed}: garbage without garbage"
    );
    page.contains(&1) && page.contains(&2)
}

#[test]
fn atomic_write_unit_writes_are_never_torn() {
    assert!(seeds().all(|seed| !page_torn(seed, Some((4096, 16384)))));
    assert!(
        seeds().any(|seed| page_torn(seed, None)),
        "control: without the unit, pages tear"
    );
    assert!(
        seeds().any(|seed| page_torn(seed, Some((4096, 8192)))),
        "control: above the unit"
    );
}

#[test]
fn power_loss_with_garbage_leaves_random_sectors() {
    let garbage_seen = seeds().any(|seed| {
        let disk = disk(seed);
        let file = durable_file(&disk, "f", FlushMethod::Fdatasync);
        file.write_at(&[1; 8192], 0).expect("write");
        disk.crash(power_loss(512, true));
        let data = disk.live_contents(&path("f")).expect("f");
        data.chunks(512)
            .any(|sector| sector.iter().any(|&b| b != 0 && b != 1))
    });
    assert!(garbage_seen);
}

// ---------------------------------------------------------------------------------------------
// The Storage contract

#[test]
fn open_missing_is_enoent_and_create_existing_is_eexist() {
    let disk = disk(1);
    let err = disk
        .open(&path("f"), FlushMethod::Fsync)
        .expect_err("missing");
    assert_eq!(
        (io_op(&err), err.raw_os_error()),
        (IoOp::Open, Some(tilldb::io::errno::ENOENT))
    );
    durable_file(&disk, "f", FlushMethod::Fsync);
    let err = disk
        .create(&path("f"), FlushMethod::Fsync)
        .expect_err("exists");
    assert_eq!(
        (io_op(&err), err.raw_os_error()),
        (IoOp::Create, Some(tilldb::io::errno::EEXIST))
    );
    assert_eq!(
        errno(disk.create(Path::new("/nodir/f"), FlushMethod::Fsync)),
        tilldb::io::errno::ENOENT
    );
    assert_eq!(errno(disk.remove(&path("g"))), tilldb::io::errno::ENOENT);
    assert_eq!(
        errno(disk.rename(&path("g"), &path("h"))),
        tilldb::io::errno::ENOENT
    );
}

#[test]
fn names_list_rename_and_remove() {
    let disk = disk(1);
    disk.create_dir_all(&path("sub/deeper")).expect("mkdir -p");
    let file = durable_file(&disk, "b", FlushMethod::Fsync);
    durable_file(&disk, "a", FlushMethod::Fsync);
    assert_eq!(
        disk.list_dir(Path::new(DIR)).expect("list"),
        ["a", "b", "sub"]
    );
    disk.rename(&path("b"), &path("a")).expect("rename over a");
    disk.remove(&path("a")).expect("remove");
    assert_eq!(disk.list_dir(Path::new(DIR)).expect("list"), ["sub"]);
    assert!(disk.exists(&path("sub/deeper")).expect("exists"));
    assert!(!disk.exists(&path("a")).expect("exists"));
    file.write_at(b"x", 0)
        .expect("an unlinked file stays writable while open");
    disk.flush_dir(Path::new(DIR)).expect("flush /db");
    disk.crash(power_loss(512, true));
    assert_eq!(disk.list_dir(Path::new(DIR)).expect("list"), ["sub"]);
    disk.check_invariants();
}

#[test]
fn direct_methods_need_direct_io() {
    let disk = disk_with(SimConfig {
        direct_io: false,
        ..SimConfig::default()
    });
    for method in [FlushMethod::Direct, FlushMethod::DirectDsync] {
        let err = disk.create(&path("f"), method).expect_err("refused");
        assert!(matches!(err, Error::InvalidOptions(_)), "{err}");
    }
    assert!(!disk.exists(&path("f")).expect("exists"));
    let file = disk
        .create(&path("f"), FlushMethod::Fdatasync)
        .expect("buffered is fine");
    assert_eq!(file.direct_align(), None);
    let facts = disk.device_facts(Path::new(DIR)).expect("facts");
    assert_eq!(
        (facts.direct_io, facts.dio_offset_align),
        (Some(false), None)
    );
}

#[test]
#[should_panic(expected = "not a multiple of 4096")]
fn misaligned_direct_write_panics() {
    let disk = disk_with(SimConfig::four_k_native());
    let file = disk
        .create(&path("f"), FlushMethod::Direct)
        .expect("create");
    assert_eq!(file.direct_align(), Some(4096));
    let _ = file.write_at(&filled(0, 4096)[..512], 0);
}

#[test]
fn allocate_zeroed_uses_aligned_writes() {
    let disk = disk_with(SimConfig::four_k_native());
    let file = disk
        .create(&path("f"), FlushMethod::DirectDsync)
        .expect("create");
    file.allocate_zeroed(0, 3 << 20).expect("allocate");
    assert_eq!(file.len().expect("len"), 3 << 20);
    assert_eq!(disk.call_count(IoKind::Write), 3, "one write per MiB");
    assert_eq!(
        disk.durable_contents(&path("f")),
        None,
        "the name is not durable yet"
    );
}

#[test]
fn device_facts_come_from_the_config() {
    let config = SimConfig {
        atomic_write_unit: Some((4096, 65536)),
        ..SimConfig::default()
    };
    let facts = disk_with(config)
        .device_facts(Path::new(DIR))
        .expect("facts");
    assert_eq!(facts.fs_type.as_deref(), Some("simdisk"));
    assert_eq!(facts.path, Path::new(DIR));
    assert_eq!(
        (facts.logical_block_bytes, facts.physical_block_bytes),
        (Some(512), Some(4096))
    );
    assert_eq!(
        (facts.dio_mem_align, facts.dio_offset_align),
        (Some(512), Some(512))
    );
    assert_eq!(facts.atomic_write_covers(16384), Some(true));
    assert_eq!((facts.rotational, facts.fua), (Some(false), Some(false)));
    assert_eq!(facts.write_cache, Some(WriteCache::WriteBack));
    let facts = disk(1).device_facts(Path::new(DIR)).expect("facts");
    assert_eq!(facts.atomic_write_unit_max_bytes, Some(0));
    assert_eq!(facts.direct_align(), 512);
    assert_eq!(
        errno(disk(1).device_facts(Path::new("/missing"))),
        tilldb::io::errno::ENOENT
    );
}

#[test]
fn corrupt_flips_bits_in_live_and_durable() {
    let disk = disk(1);
    let file = durable_file(&disk, "f", FlushMethod::Fsync);
    file.write_at(&[0; 8], 0).expect("write");
    file.flush().expect("flush");
    disk.corrupt(&path("f"), 3, 0x81);
    let expected = [0, 0, 0, 0x81, 0, 0, 0, 0];
    assert_eq!(disk.live_contents(&path("f")).expect("f"), expected);
    assert_eq!(disk.durable_contents(&path("f")).expect("f"), expected);
    disk.crash(power_loss(512, true));
    assert_eq!(disk.live_contents(&path("f")).expect("f"), expected);
}

#[test]
fn flush_latency_is_slept_outside_the_lock() {
    const LATENCY: Duration = Duration::from_millis(300);
    let disk = disk_with(SimConfig {
        flush_latency: LATENCY,
        ..SimConfig::default()
    });
    let file: Arc<dyn StorageFile> = Arc::from(durable_file(&disk, "f", FlushMethod::Fsync));
    let flusher = {
        let file = Arc::clone(&file);
        std::thread::spawn(move || {
            let start = Instant::now();
            file.flush().expect("flush");
            start.elapsed()
        })
    };
    std::thread::sleep(Duration::from_millis(30));
    let start = Instant::now();
    file.read_at(&mut [0; 4], 0).expect("read during the flush");
    assert!(
        start.elapsed() < LATENCY / 2,
        "the read waited for the flush: {:?}",
        start.elapsed()
    );
    assert!(flusher.join().expect("flusher") >= LATENCY);
    let start = Instant::now();
    disk.flush_dir(Path::new(DIR)).expect("flush dir");
    assert!(start.elapsed() >= LATENCY);
}

/// A clone made before a crash is a process the crash killed: its directory calls fail from
/// then on (found by a store test whose leaked handle's log thread renamed a segment under
/// the next open). The harness handle, a handle that crashed the disk, and clones made after
/// go on.
#[test]
fn a_clone_from_before_a_crash_cannot_touch_names_after_it() {
    let harness = disk(7);
    let storage: &dyn Storage = &harness;
    storage.create_dir_all(Path::new("/d")).expect("mkdir");
    drop(
        storage
            .create(Path::new("/d/a"), FlushMethod::Fdatasync)
            .expect("create"),
    );
    let old = harness.clone();
    let crasher = harness.clone();
    crasher.crash(CrashMode::ProcessKill);
    let old_storage: &dyn Storage = &old;
    for result in [
        old_storage.rename(Path::new("/d/a"), Path::new("/d/b")),
        old_storage.remove(Path::new("/d/a")),
        old_storage.flush_dir(Path::new("/d")),
    ] {
        assert!(result.is_err(), "a dead process changed the disk");
    }
    assert!(old_storage.list_dir(Path::new("/d")).is_err());
    assert!(old_storage.exists(Path::new("/d/a")).is_err());
    assert!(
        old_storage
            .open(Path::new("/d/a"), FlushMethod::Fdatasync)
            .is_err()
    );
    // The file is still there, for everyone alive.
    for alive in [harness.clone(), crasher, harness] {
        let s: &dyn Storage = &alive;
        assert_eq!(
            s.list_dir(Path::new("/d")).expect("ls"),
            vec!["a".to_owned()]
        );
    }
}
