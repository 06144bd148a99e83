//! The machine and disk a benchmark measured: the header of every `till bench` report, and
//! the `machine` and `disk` objects of every JSON document.
//!
//! ```text
//! JSON   machine  { kernel, cpus, memory_bytes }            (null where unknown)
//!        disk     { fs_type, device, logical_block_bytes, physical_block_bytes,
//!                   write_cache ("write back" | "write through"), fua, rotational }
//! ```

use serde::Serialize;
use std::path::Path;
use tilldb::io::{DeviceFacts, WriteCache};

/// The machine and the disk under the benchmark's directory.
#[derive(Debug, Clone)]
pub struct Setting {
    /// `uname -r`.
    pub kernel: Option<String>,
    pub cpus: Option<usize>,
    pub memory_bytes: Option<u64>,
    pub facts: DeviceFacts,
}

impl Setting {
    /// Reads the machine, and the device facts of the file system holding `dir`.
    pub fn read(dir: &Path) -> tilldb::Result<Setting> {
        Ok(Setting::with_facts(DeviceFacts::for_dir(dir)?))
    }

    /// Reads the machine; `facts` were read already.
    pub fn with_facts(facts: DeviceFacts) -> Setting {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_owned());
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| memory_total(&text));
        Setting {
            kernel,
            cpus: std::thread::available_parallelism().ok().map(usize::from),
            memory_bytes,
            facts,
        }
    }

    /// The `machine` object of the JSON documents.
    pub fn machine_json(&self) -> MachineJson {
        MachineJson {
            kernel: self.kernel.clone(),
            cpus: self.cpus,
            memory_bytes: self.memory_bytes,
        }
    }

    /// The `disk` object of the JSON documents.
    pub fn disk_json(&self) -> DiskJson {
        let f = &self.facts;
        DiskJson {
            fs_type: f.fs_type.clone(),
            device: f.device.clone(),
            logical_block_bytes: f.logical_block_bytes,
            physical_block_bytes: f.physical_block_bytes,
            write_cache: f.write_cache.map(write_cache_name),
            fua: f.fua,
            rotational: f.rotational,
        }
    }

    /// "Linux 6.18.0, 2 CPUs, 23 GiB memory"; under Wine it says so, and that the numbers
    /// are not Windows numbers.
    pub fn machine_line(&self) -> String {
        let os = match std::env::consts::OS {
            "linux" => "Linux",
            "windows" => "Windows",
            other => other,
        };
        let wine = self
            .facts
            .notes
            .iter()
            .find(|n| n.starts_with(tilldb::io::WINE_NOTE))
            .map(|n| format!(" (NOT WINDOWS NUMBERS: {n})"))
            .unwrap_or_default();
        format!(
            "{os} {}, {} CPUs, {} GiB memory{wine}",
            show(self.kernel.as_deref()),
            show(self.cpus),
            show(self.memory_bytes.map(|b| b >> 30))
        )
    }

    /// "ext4 on vda: logical 512 B, physical 512 B, cache write back, FUA no, rotational yes".
    pub fn disk_line(&self) -> String {
        let f = &self.facts;
        let yes_no = |b: bool| if b { "yes" } else { "no" };
        format!(
            "{} on {}: logical {} B, physical {} B, cache {}, FUA {}, rotational {}",
            show(f.fs_type.as_deref()),
            show(f.device.as_deref()),
            show(f.logical_block_bytes),
            show(f.physical_block_bytes),
            show(f.write_cache.map(write_cache_name)),
            show(f.fua.map(yes_no)),
            show(f.rotational.map(yes_no)),
        )
    }

    /// The two header rows of a text report: ("machine", ...), ("disk", ...).
    pub fn rows(&self) -> [(&'static str, String); 2] {
        [("machine", self.machine_line()), ("disk", self.disk_line())]
    }

    /// The file system name for plot subtitles: "ext4 on vda".
    pub fn short(&self) -> String {
        format!(
            "{} on {}",
            show(self.facts.fs_type.as_deref()),
            show(self.facts.device.as_deref())
        )
    }
}

/// The `machine` object of every JSON document; each field is null where unknown.
#[derive(Debug, Clone, Serialize)]
pub struct MachineJson {
    /// `uname -r`.
    kernel: Option<String>,
    cpus: Option<usize>,
    memory_bytes: Option<u64>,
}

/// The `disk` object of every JSON document: the device under the benchmark's directory;
/// each field is null where unknown.
#[derive(Debug, Clone, Serialize)]
pub struct DiskJson {
    fs_type: Option<String>,
    /// The block device's name ("vda"; a partition reports its parent disk).
    device: Option<String>,
    logical_block_bytes: Option<u32>,
    physical_block_bytes: Option<u32>,
    /// "write back" or "write through".
    write_cache: Option<&'static str>,
    /// Whether the device supports Force Unit Access writes.
    fua: Option<bool>,
    /// True for a spinning disk, as the device reports it (virtual disks often say true).
    rotational: Option<bool>,
}

pub fn write_cache_name(w: WriteCache) -> &'static str {
    match w {
        WriteCache::WriteBack => "write back",
        WriteCache::WriteThrough => "write through",
    }
}

fn show<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "unknown".to_owned(), |v| v.to_string())
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn memory_total(meminfo: &str) -> Option<u64> {
    let kib = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = kib.trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_memory_total_and_says_unknown_for_what_is_missing() {
        assert_eq!(
            memory_total("MemFree: 5 kB\nMemTotal:   24576000 kB\n"),
            Some(24_576_000 * 1024)
        );
        assert_eq!(memory_total("MemFree: 5 kB\n"), None);
        let setting = Setting {
            kernel: None,
            cpus: Some(2),
            memory_bytes: None,
            facts: DeviceFacts::default(),
        };
        // The operating system's name is this build's (the Windows build runs under Wine).
        let os = if cfg!(windows) { "Windows" } else { "Linux" };
        assert_eq!(
            setting.machine_line(),
            format!("{os} unknown, 2 CPUs, unknown GiB memory")
        );
        assert!(setting.disk_line().starts_with("unknown on unknown"));
        assert_eq!(setting.disk_json().fs_type, None);
        assert_eq!(setting.machine_json().cpus, Some(2));
    }
}
