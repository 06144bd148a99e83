//! Helpers shared by integration tests.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Records that `test` skipped a check and why: printed now (visible with `--nocapture`) and
/// appended to `target/tmp/skipped.txt`, which `scripts/test` prints after the run so that a
/// skipped check is never reported as a silent pass.
pub fn skip(test: &str, reason: &str) {
    let line = format!("SKIPPED {test}: {reason}");
    eprintln!("{line}");
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

/// Runs a command, returning its trimmed stdout, or a description of the failure.
pub fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Finds a program on PATH or in the sbin directories.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
}

/// A file system made on a loop device over a sparse image, mounted in a temp dir; torn down
/// (unmounted, detached) on drop.
pub struct LoopMount {
    pub dir: tempfile::TempDir,
    pub mount: PathBuf,
    device: String,
}

impl LoopMount {
    /// Makes `fs` ("ext4" or "xfs") on a loop device with `sector_bytes` logical sectors.
    /// `Err` says why it cannot be done here (not root, no loop devices, no mkfs).
    pub fn new(fs: &str, sector_bytes: u32) -> Result<LoopMount, String> {
        if run("id", &["-u"]).as_deref() != Ok("0") {
            return Err("needs root for losetup and mount".into());
        }
        let mkfs = format!("mkfs.{fs}");
        for tool in ["losetup", "mount", "umount", mkfs.as_str()] {
            if which(tool).is_none() {
                return Err(format!("{tool} is not installed"));
            }
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("image");
        let file = std::fs::File::create(&image).map_err(|e| e.to_string())?;
        // XFS needs at least 300 MiB; the image is sparse, so this costs little.
        file.set_len(512 << 20).map_err(|e| e.to_string())?;
        let image_str = image.to_string_lossy().into_owned();
        let sector = sector_bytes.to_string();
        let device = run(
            "losetup",
            &["--sector-size", &sector, "-f", "--show", &image_str],
        )?;
        let mount = dir.path().join("mnt");
        let guard = LoopMount { dir, mount, device };
        std::fs::create_dir(&guard.mount).map_err(|e| e.to_string())?;
        let force = if fs == "xfs" { "-f" } else { "-F" };
        run(&mkfs, &["-q", force, &guard.device])?;
        run("mount", &[&guard.device, &guard.mount.to_string_lossy()])?;
        Ok(guard)
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let _ = run("umount", &[&self.mount.to_string_lossy()]);
        let _ = run("losetup", &["-d", &self.device]);
    }
}

/// The crash a seed gets in the crash tests: a process kill, or a power loss tearing unflushed
/// writes at 512 B or 4 KiB, with and without garbage sectors.
pub fn crash_mode(seed: u64) -> tilldb::io::CrashMode {
    use tilldb::io::CrashMode;
    match seed % 4 {
        0 => CrashMode::ProcessKill,
        1 => CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: false,
        },
        2 => CrashMode::PowerLoss {
            tear_bytes: 512,
            garbage: true,
        },
        _ => CrashMode::PowerLoss {
            tear_bytes: 4096,
            garbage: true,
        },
    }
}

/// A deterministic workload of three puts per commit: the keys and value sizes a commit
/// writes, and the model of the table after the first n commits.
#[derive(Debug, Clone, Copy)]
pub struct Puts {
    /// Keys `k0000..k{keys}`; commit `c`'s i-th key is `(c * key_step + i * 61) % keys`.
    pub keys: u64,
    pub key_step: u64,
    /// Value bytes `40 + (c * 13 + i * len_step) % len_span`, every byte `c % 251`.
    pub len_step: u64,
    pub len_span: u64,
}

impl Puts {
    /// Commit `c`'s puts.
    pub fn commit(self, c: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..3u64)
            .map(|i| {
                let k = (c * self.key_step + i * 61) % self.keys;
                let len = 40
                    + usize::try_from((c * 13 + i * self.len_step) % self.len_span).expect("small");
                (
                    format!("k{k:04}").into_bytes(),
                    vec![u8::try_from(c % 251).expect("small"); len],
                )
            })
            .collect()
    }

    /// The table after commits `0..n`.
    pub fn model_after(self, n: u64) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
        (0..n).flat_map(|c| self.commit(c)).collect()
    }
}

/// True when running under CI (`CI=true`, as `.ci/run` sets it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A check that needs what this machine lacks (root, loop devices, a tool to install):
/// skipped here, but under CI, which must install everything the tests need, it fails,
/// naming what is missing, so a skipped real-device test can never pass CI unseen.
pub fn skip_missing(test: &str, reason: &str) {
    assert!(
        !under_ci(),
        "{test} cannot run under CI: {reason} (.ci/run must provide it)"
    );
    skip(test, reason);
}

/// Segments recovery would read now in the database directory `dir` on `disk`: from the
/// header's redo point to the log's end (the log to replay, in segments). It reads a copy of
/// the disk taken in one step (`SimDisk::fork`): a live database goes on writing between the
/// reads of its header and of each segment, and a segment read before its last group was
/// written, beside a later one read after, looks like a log damaged after it was written
/// (CI stop 43 failed so, and the writers it sampled ran on until the disk's op limit).
pub fn redo_segments(disk: &tilldb::io::SimDisk, dir: &Path) -> usize {
    let disk = &disk.fork(0);
    let (_, header) =
        tilldb::internals::header::HeaderFile::open(disk, dir, tilldb::FlushMethod::Fdatasync)
            .expect("header")
            .expect("a header");
    tilldb::internals::wal::inspect_log(disk, &dir.join("wal"), Some(header.checkpoint_lsn), |_| {})
        .expect("inspect")
        .recovery
        .segments
}

/// `TILLDB_TEST_SAMPLE=N` (default 1): the long sweeps (the exhaustive explorer, the
/// corruption sweep) run one case in N, and their headline counts, which a sample cannot
/// reach, are not asserted. `scripts/test` sets it for the Windows run under Wine, where each
/// case costs several times what it does natively; the full counts are asserted on Linux.
pub fn sample() -> usize {
    match std::env::var("TILLDB_TEST_SAMPLE") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| panic!("TILLDB_TEST_SAMPLE must be a number from 1, not {v:?}")),
        Err(_) => 1,
    }
}

/// Sets its flag when dropped: a test thread that panics (or returns) stops the load
/// threads that watch the flag, instead of leaving them running.
pub struct StopOnDrop<'a>(pub &'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Every file under `dir` that `keep` keeps, with its bytes: what "changes nothing" is checked
/// against.
pub fn files_under(
    dir: &Path,
    keep: impl Fn(&Path) -> bool,
) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if keep(&path) {
                out.insert(path.clone(), std::fs::read(&path).expect("read"));
            }
        }
    }
    out
}

/// CRC-32C (Castagnoli), bitwise, `seed`'s 8 little-endian bytes first when given: an
/// independent reading of the formats' checksum (a header slot's is seeded with its index).
pub fn crc32c(seed: Option<u64>, bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    let seed_bytes = seed.map(u64::to_le_bytes);
    for &b in seed_bytes.iter().flatten().chain(bytes) {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
