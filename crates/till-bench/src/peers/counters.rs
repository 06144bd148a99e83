//! What `till bench peers` counts around each row, the same way for every engine (the peers
//! have no flush counters of their own, and tilldb's are not used, so all rows compare):
//!
//! - device flush requests and bytes written: `/proc/diskstats`, the device under the
//!   benchmark directory. The bytes include the file system's journal and metadata (SQLite's
//!   rollback journal is a file created and deleted per commit). Device-wide: another
//!   process's I/O on the same disk is counted too, so on a busy machine these are upper
//!   bounds. Kernels before 5.5 have no flush column: then the flushes are unknown (`None`),
//!   never 0. A flush here is a cache-flush request that reached the device; one fdatasync
//!   costs one or more (measured on the raw rate); on a device without a volatile cache the
//!   kernel sends none, and nothing is counted.
//! - not `write_bytes` of `/proc/self/io`: the kernel charges it when a clean page-cache
//!   folio is dirtied, the whole folio, and with large folios (ext4 on 6.x) one 4 KiB write
//!   into a file written earlier in large pieces (tilldb's preallocated log segments) is
//!   charged 1 MiB: tilldb measured "1,048,576 bytes per commit" that the device never saw.
//! - the growth of the engine's directory: blocks allocated to its files (`st_blocks`), which
//!   counts preallocation and files the engine has not synced yet.
//! - the CPU time other processes used meanwhile (`/proc/stat` busy time minus this process's
//!   `/proc/self/stat`), as a share of all CPUs: the machine is shared, and a row during which
//!   others were busy says so instead of passing for the engine's own result. Kernel threads
//!   working for this process (the file system's journal) count as others.

use std::path::Path;

/// `/proc/diskstats` columns after major, minor and name (0-based): sectors written, and
/// flush requests completed (present since Linux 5.5).
const SECTORS_WRITTEN_COLUMN: usize = 6;
const FLUSHES_COLUMN: usize = 15;
/// `/proc/diskstats` counts 512-byte sectors whatever the device's block size.
const SECTOR_BYTES: u64 = 512;
/// Deepest directory walked when summing an engine's files (they nest one or two levels).
const DIR_DEPTH_MAX: u32 = 8;

/// One reading of the counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Cache-flush requests the device completed; `None` when not reported.
    pub device_flushes: Option<u64>,
    /// Bytes written to the device; `None` when the device was not found.
    pub device_write_bytes: Option<u64>,
    /// CPU time in clock ticks; `None` when `/proc` cannot be read.
    pub cpu: Option<CpuTicks>,
}

/// CPU time in clock ticks (`USER_HZ`, the unit of both `/proc/stat` and `/proc/self/stat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// Busy time of all CPUs together (user, nice, system, irq, softirq, steal).
    pub busy: u64,
    /// Busy plus idle and iowait time of all CPUs together.
    pub total: u64,
    /// User plus system time of this process, every thread.
    pub this_process: u64,
}

impl CpuTicks {
    fn read() -> Option<CpuTicks> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        let (busy, total) = all_cpus(&stat)?;
        Some(CpuTicks {
            busy,
            total,
            this_process: crate::platform::process_ticks(&own)?,
        })
    }

    /// The share of all CPUs that other processes kept busy over these (delta) ticks.
    #[expect(clippy::cast_precision_loss, reason = "a share reported in percent")]
    pub fn others_share(self) -> Option<f64> {
        (self.total > 0)
            .then(|| self.busy.saturating_sub(self.this_process) as f64 / self.total as f64)
    }
}

/// (busy, total) ticks of the `cpu` line of `/proc/stat` text.
fn all_cpus(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map_while(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let [user, nice, system, idle, iowait, irq, softirq, steal] = *v.get(..8)? else {
        return None;
    };
    let busy = user + nice + system + irq + softirq + steal;
    Some((busy, busy + idle + iowait))
}

impl Counters {
    /// Reads every counter now, for block device `device` (as `DeviceFacts` names it).
    pub fn read(device: Option<&str>) -> Counters {
        let disk = device
            .zip(std::fs::read_to_string("/proc/diskstats").ok())
            .map(|(name, text)| Counters::from_diskstats(&text, name))
            .unwrap_or_default();
        Counters {
            cpu: CpuTicks::read(),
            ..disk
        }
    }

    /// The counters of `device` in `/proc/diskstats` text.
    pub fn from_diskstats(text: &str, device: &str) -> Counters {
        let disk = disk_stats(text, device);
        Counters {
            device_flushes: disk.and_then(|(_, flushes)| flushes),
            device_write_bytes: disk.map(|(sectors, _)| sectors * SECTOR_BYTES),
            cpu: None,
        }
    }

    /// The counts from `before` to `self`; unknown when either reading is.
    pub fn since(self, before: Counters) -> Counters {
        let delta = |after: Option<u64>, before: Option<u64>| Some(after?.saturating_sub(before?));
        Counters {
            device_flushes: delta(self.device_flushes, before.device_flushes),
            device_write_bytes: delta(self.device_write_bytes, before.device_write_bytes),
            cpu: self.cpu.zip(before.cpu).map(|(a, b)| CpuTicks {
                busy: a.busy.saturating_sub(b.busy),
                total: a.total.saturating_sub(b.total),
                this_process: a.this_process.saturating_sub(b.this_process),
            }),
        }
    }
}

/// (sectors written, flush requests) of `device` in `/proc/diskstats` text.
fn disk_stats(text: &str, device: &str) -> Option<(u64, Option<u64>)> {
    let line = text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let name = fields.nth(2)?;
        (name == device).then_some(fields)
    })?;
    let columns: Vec<u64> = line.map_while(|f| f.parse().ok()).collect();
    let sectors = *columns.get(SECTORS_WRITTEN_COLUMN)?;
    Some((sectors, columns.get(FLUSHES_COLUMN).copied()))
}

/// Bytes allocated to the files under `dir` (`st_blocks` x 512), 0 for what vanished
/// meanwhile (engines delete files while running).
pub fn dir_allocated_bytes(dir: &Path) -> u64 {
    dir_bytes_at(dir, 0)
}

fn dir_bytes_at(dir: &Path, depth: u32) -> u64 {
    if depth > DIR_DEPTH_MAX {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut total = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            total += dir_bytes_at(&entry.path(), depth + 1);
        } else {
            total += crate::platform::allocated_bytes(&meta);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::process_ticks;

    #[test]
    fn reads_diskstats_with_and_without_the_flush_columns() {
        let text = "   8       0 sda 1 2 3 4 5 6 7 8 9 10 11\n \
                    253       0 vda 5585966 53172 225443938 1611225 26092197 186607 \
                    749195720 6441388 0 1648104 9023135 130828 97 386721200 133240 \
                    10401508 837281\n";
        assert_eq!(
            disk_stats(text, "vda"),
            Some((749_195_720, Some(10_401_508)))
        );
        assert_eq!(disk_stats(text, "sda"), Some((7, None)));
        assert_eq!(disk_stats(text, "vdb"), None);
    }

    #[test]
    fn deltas_are_unknown_when_either_side_is() {
        let before = Counters {
            device_flushes: Some(10),
            device_write_bytes: None,
            cpu: None,
        };
        let after = Counters {
            device_flushes: Some(15),
            device_write_bytes: Some(4096),
            cpu: Some(CpuTicks::default()),
        };
        let d = after.since(before);
        assert_eq!(d.device_flushes, Some(5));
        assert_eq!(d.device_write_bytes, None);
        assert_eq!(d.cpu, None);
    }

    #[test]
    fn reads_cpu_ticks_and_the_share_of_others() {
        let stat = "cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\n";
        assert_eq!(all_cpus(stat), Some((160, 980)));
        assert_eq!(all_cpus("intr 1 2\n"), None);
        let own = "4242 (till bench) peers) S 1 2 3 4 5 6 7 8 9 10 70 30 0 0 20 0\n";
        assert_eq!(process_ticks(own), Some(100));
        let ticks = CpuTicks {
            busy: 150,
            total: 200,
            this_process: 100,
        };
        assert_eq!(ticks.others_share(), Some(0.25));
        assert_eq!(CpuTicks::default().others_share(), None);
    }

    #[test]
    fn counts_allocated_bytes_of_nested_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/a"), vec![1u8; 10_000]).expect("write");
        std::fs::write(dir.path().join("b"), vec![1u8; 5000]).expect("write");
        let bytes = dir_allocated_bytes(dir.path());
        assert!(bytes >= 15_000, "{bytes}");
        assert_eq!(dir_allocated_bytes(&dir.path().join("missing")), 0);
    }
}
