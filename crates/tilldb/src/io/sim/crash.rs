//! What survives a crash: the post-crash image of every file and of the namespace.
//!
//! ```text
//!   ProcessKill (F1)    live ──────────────────────────────────────────► live = durable
//!                        (the kernel's page cache outlives the process)
//!
//!   PowerLoss (F2, F3)  durable ─ each unflushed op, in order ─────────► live = durable
//!                          write:    keep | drop | tear (per tear_bytes chunk:
//!                                                        new | old | garbage)
//!                          set_len:  keep | drop
//!                       durable names ─ each queued create/rename/remove: keep | lose
//! ```
//!
//! A write the device promises to do atomically (its length a power of two within
//! `SimConfig::atomic_write_unit`, its offset aligned to its length) is kept or dropped, never
//! torn (F7: tears allowed only above the advertised unit).

use super::State;
use super::image::{DataOp, FileData, to_index};
use super::rng::SimRng;

/// How the machine goes down in [`super::SimDisk::crash`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// F1: the process dies, the kernel lives on. Every write and metadata op so far survives.
    ProcessKill,
    /// F2 + F3: the power goes. What was flushed survives; each unflushed write, in order, is
    /// kept, dropped or torn: each `tear_bytes`-aligned chunk of it (aligned in the file)
    /// independently new, old, or (if `garbage`) random bytes. Each unflushed `set_len` is kept
    /// or dropped; each create, rename and remove not made durable by `flush_dir` is kept or
    /// lost, in order, skipping those that no longer apply.
    PowerLoss {
        /// The granularity of a tear, in bytes: a power of two (the device's sector, say).
        tear_bytes: u32,
        /// True when a torn chunk may also hold random bytes, not only the old or new ones.
        garbage: bool,
    },
}

/// How one power cut tears writes.
#[derive(Debug, Clone, Copy)]
struct Tear {
    chunk_bytes: u32,
    garbage: bool,
    atomic_write_unit: Option<(u32, u32)>,
}

impl Tear {
    /// True when the device promises to write `len` bytes at `offset` all or nothing.
    fn is_atomic(self, offset: u64, len: usize) -> bool {
        let Some((min, max)) = self.atomic_write_unit else {
            return false;
        };
        let len = len as u64;
        len.is_power_of_two()
            && u64::from(min) <= len
            && len <= u64::from(max)
            && offset.is_multiple_of(len)
    }
}

impl State {
    /// Replaces every image with its post-crash image, then invalidates every open handle.
    pub(super) fn crash(&mut self, mode: CrashMode) {
        match mode {
            CrashMode::ProcessKill => {
                for file in self.files.values_mut() {
                    let image = file.live.clone();
                    file.settle(image);
                }
                self.names.settle_process_kill();
            }
            CrashMode::PowerLoss {
                tear_bytes,
                garbage,
            } => {
                assert!(
                    tear_bytes.is_power_of_two(),
                    "tear_bytes {tear_bytes}: not a power of two"
                );
                let tear = Tear {
                    chunk_bytes: tear_bytes,
                    garbage,
                    atomic_write_unit: self.config.atomic_write_unit,
                };
                // BTreeMap order: the same files draw the same random numbers on every run.
                for file in self.files.values_mut() {
                    let image = power_loss_image(file, tear, &mut self.rng);
                    file.settle(image);
                }
                self.names.settle_power_loss(&mut self.rng);
            }
        }
        // Every handle is stale now, so a file without a name is gone for good.
        let referenced = self.names.referenced();
        self.files.retain(|id, _| referenced.contains(id));
        self.epoch += 1;
        self.dead = false;
        self.locks.clear();
        self.check_invariants();
    }
}

/// The bytes a power cut leaves of `file`.
fn power_loss_image(file: &FileData, tear: Tear, rng: &mut SimRng) -> Vec<u8> {
    let mut image = file.durable.clone();
    for op in &file.unflushed {
        match op {
            DataOp::SetLen { .. } => {
                if rng.coin() {
                    op.apply(&mut image);
                }
            }
            DataOp::Write { offset, bytes } => {
                let fates = if tear.is_atomic(*offset, bytes.len()) {
                    2
                } else {
                    3
                };
                match rng.below(fates) {
                    0 => op.apply(&mut image),
                    1 => {}
                    _ => tear_write(&mut image, *offset, bytes, tear, rng),
                }
            }
        }
    }
    image
}

/// Lands part of a write: each `tear_bytes`-aligned chunk new, old or garbage. The file's size
/// covers the whole write (the size update landed; the data in part).
///
/// Worked example, `tear_bytes` 512, a write of 1000 bytes at offset 300: chunks 300..512,
/// 512..1024, 1024..1300, each decided on its own.
fn tear_write(image: &mut Vec<u8>, offset: u64, bytes: &[u8], tear: Tear, rng: &mut SimRng) {
    let end = offset + bytes.len() as u64;
    if (image.len() as u64) < end {
        image.resize(to_index(end), 0);
    }
    let unit = u64::from(tear.chunk_bytes);
    let chunks_max = bytes.len() as u64 / unit + 2;
    let mut chunks = 0;
    let mut start = offset;
    while start < end {
        let chunk_end = ((start / unit + 1) * unit).min(end);
        let new = &bytes[to_index(start - offset)..to_index(chunk_end - offset)];
        let target = &mut image[to_index(start)..to_index(chunk_end)];
        match rng.below(if tear.garbage { 3 } else { 2 }) {
            0 => target.copy_from_slice(new),
            1 => {} // The old bytes stay.
            _ => rng.fill(target),
        }
        start = chunk_end;
        chunks += 1;
        assert!(chunks <= chunks_max, "tear loop ran past the write");
    }
    assert_eq!(start, end);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tear(tear_bytes: u32, garbage: bool) -> Tear {
        Tear {
            chunk_bytes: tear_bytes,
            garbage,
            atomic_write_unit: None,
        }
    }

    #[test]
    fn torn_write_chunks_are_wholly_old_or_new() {
        for seed in 0..50 {
            let mut rng = SimRng::new(seed);
            let mut image = vec![0xAA; 2048];
            tear_write(&mut image, 300, &[0x55; 1000], tear(512, false), &mut rng);
            assert_eq!(image.len(), 2048);
            for range in [300..512, 512..1024, 1024..1300] {
                let chunk = &image[range.clone()];
                let whole = chunk.iter().all(|&b| b == 0xAA) || chunk.iter().all(|&b| b == 0x55);
                assert!(whole, "seed {seed}: chunk {range:?} mixed");
            }
            assert!(
                image[..300]
                    .iter()
                    .chain(&image[1300..])
                    .all(|&b| b == 0xAA)
            );
        }
    }

    #[test]
    fn torn_write_past_the_end_extends_with_zeros() {
        let mut rng = SimRng::new(1);
        let mut image = vec![1; 100];
        tear_write(&mut image, 200, &[2; 10], tear(4096, false), &mut rng);
        assert_eq!(image.len(), 210);
        assert!(image[100..200].iter().all(|&b| b == 0));
    }

    #[test]
    fn atomic_unit_covers_only_aligned_power_of_two_writes() {
        let tear = Tear {
            atomic_write_unit: Some((4096, 16384)),
            ..tear(512, true)
        };
        assert!(tear.is_atomic(16384, 16384));
        assert!(tear.is_atomic(4096, 4096));
        assert!(!tear.is_atomic(4096, 8192), "misaligned");
        assert!(!tear.is_atomic(0, 32768), "above max");
        assert!(!tear.is_atomic(0, 2048), "below min");
        assert!(!tear.is_atomic(0, 12288), "not a power of two");
    }
}
