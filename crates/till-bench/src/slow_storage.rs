//! [`SlowStorage`]: real files whose flushes take a SIMULATED extra latency, one at a time.
//!
//! A fast SSD (or a virtual disk whose host ignores flushes) hides what group commit is for.
//! Wrapping the storage makes every flush cost at least `latency` more, as a spinning disk's
//! cache flush would, so the benchmark shows how commits share flushes when flushes are dear.
//!
//! What is charged, per file flush method (see the table on `tilldb::FlushMethod`):
//!
//! | method                        | `write_at`  | `flush()`    |
//! |-------------------------------|-------------|--------------|
//! | `fsync`, `fdatasync`, `direct`| -           | `latency`    |
//! | `dsync`, `direct-dsync`       | `latency`   | -            |
//! | `nosync`                      | -           | -            |
//!
//! Write-through files make each write durable, so each write is the flush; their `flush()`
//! does nothing in the common case and is not charged. `nosync` never flushes. A directory
//! flush is a device flush too and is charged. `allocate_zeroed` (segment preallocation) is
//! passed through whole: its flush follows and is charged once.
//!
//! The extra sleep runs after the real operation, while holding one mutex per `SlowStorage`
//! (the "device"), so simulated flushes never overlap: a disk does one cache flush at a time.
//! Sleeps are minimums, so every charged operation takes at least `latency` longer.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tilldb::FlushMethod;
use tilldb::io::{Call, HookedStorage, Hooks, Storage};

/// Storage whose flushes take `latency` longer, serialized across all its files: any storage
/// with a [`Device`] as its hooks.
pub type SlowStorage = HookedStorage<Device>;

/// Wraps `inner`, adding `latency` to every flush its files and directories do.
pub fn slow(inner: Arc<dyn Storage>, latency: Duration) -> SlowStorage {
    assert!(
        !latency.is_zero(),
        "a zero simulated latency: use the inner storage"
    );
    HookedStorage::new(
        inner,
        Device {
            latency,
            busy: Mutex::new(()),
        },
    )
}

/// The simulated device: one flush at a time.
pub struct Device {
    latency: Duration,
    /// Held for the duration of each simulated flush. Guards nothing but the device's time.
    busy: Mutex<()>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("latency", &self.latency)
            .finish_non_exhaustive()
    }
}

impl Device {
    /// Spends `latency` on the device, waiting first for any flush in progress.
    fn flush(&self) {
        // A panic while sleeping cannot leave `()` inconsistent, so a poisoned lock is fine.
        let _busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        std::thread::sleep(self.latency);
    }
}

/// Charges after the real operation succeeded (the table in the module doc).
impl Hooks for Device {
    fn after(&self, call: &Call<'_>) {
        let pays = match *call {
            Call::Write { method, .. } => charged(method) == Charged::Write,
            Call::Flush { method, .. } => charged(method) == Charged::Flush,
            Call::FlushDir { .. } => true,
            _ => false,
        };
        if pays {
            self.flush();
        }
    }
}

/// Which operation of a file pays the latency (the table in the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Charged {
    Write,
    Flush,
    Nothing,
}

fn charged(method: FlushMethod) -> Charged {
    if !method.is_durable() {
        Charged::Nothing
    } else if method.is_write_through() {
        Charged::Write
    } else {
        Charged::Flush
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::time::Instant;
    use tilldb::io::{FileStorage, Storage};

    const LATENCY: Duration = Duration::from_millis(40);

    fn slow_files() -> SlowStorage {
        slow(Arc::new(FileStorage::new()), LATENCY)
    }

    #[test]
    fn concurrent_flushes_are_serialized_like_one_device() {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = slow_files();
        let files: Vec<_> = ["a", "b"]
            .iter()
            .map(|name| {
                let f = storage
                    .create(&dir.path().join(name), FlushMethod::Fdatasync)
                    .expect("create");
                f.write_at(&[1; 512], 0).expect("write");
                f
            })
            .collect();
        let barrier = Barrier::new(files.len());
        let start = Instant::now();
        std::thread::scope(|s| {
            for f in &files {
                s.spawn(|| {
                    barrier.wait();
                    f.flush().expect("flush");
                });
            }
        });
        // Sleeps are minimums: two serialized flushes take at least two latencies.
        assert!(start.elapsed() >= 2 * LATENCY, "{:?}", start.elapsed());
    }

    #[test]
    fn write_through_files_pay_on_every_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = slow_files()
            .create(&dir.path().join("d"), FlushMethod::Dsync)
            .expect("create");
        let start = Instant::now();
        f.write_at(&[1; 512], 0).expect("write");
        f.write_at(&[2; 512], 512).expect("write");
        assert!(start.elapsed() >= 2 * LATENCY, "{:?}", start.elapsed());
    }

    #[test]
    fn each_method_is_charged_once_per_flushed_write() {
        use FlushMethod::{Direct, DirectDsync, Dsync, Fdatasync, Fsync, NoSync};
        for m in [Fsync, Fdatasync, Direct] {
            assert_eq!(charged(m), Charged::Flush, "{m}");
        }
        for m in [Dsync, DirectDsync] {
            assert_eq!(charged(m), Charged::Write, "{m}");
        }
        assert_eq!(charged(NoSync), Charged::Nothing);
    }
}
