//! What the benchmarks need that differs per operating system, in one place.

/// Bytes a file occupies on the device: `st_blocks` x 512 on Unix (whatever the file
/// system's block size), its length on Windows (allocation is not read there).
pub fn allocated_bytes(meta: &std::fs::Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.blocks() * 512
    }
    #[cfg(not(unix))]
    {
        meta.len()
    }
}

/// Writes the OS's dirty pages and drops its page cache (Linux, root only), so the next
/// reads come from the device, as after a power cut.
pub fn drop_caches() -> Result<(), String> {
    // sync(1) first: dropping the cache drops only clean pages.
    let _ = std::process::Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| {
        format!(
            "--cold: cannot drop the page cache via /proc/sys/vm/drop_caches (Linux, root): {e}"
        )
    })
}

/// The most memory this process has held resident since it started or since
/// [`reset_peak_resident`] (`VmHWM` of `/proc/self/status`); `None` where it cannot be read
/// (not Linux).
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

/// Restarts [`peak_resident_bytes`] from what is resident now (Linux: `5` to
/// `/proc/self/clear_refs`); false where it cannot.
pub fn reset_peak_resident() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, 100 on every Linux ABI).
pub const USER_HZ: u64 = 100;

/// User plus system CPU time this process has used, every thread (its own and the
/// database's background threads), from `/proc/self/stat` (10 ms resolution); `None` where it
/// cannot be read (not Linux).
pub fn process_cpu_time() -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let ticks = process_ticks(&stat)?;
    Some(std::time::Duration::from_millis(ticks * 1000 / USER_HZ))
}

/// utime + stime, in clock ticks, of `/proc/<pid>/stat` text. The command name (field 2)
/// may hold spaces and parentheses, so fields are counted after its last `)`.
pub fn process_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}
