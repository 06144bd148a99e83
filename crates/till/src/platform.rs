//! What `till` needs that differs per operating system, in one place.

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

/// This machine's name, for reports: `COMPUTERNAME` on Windows, the kernel's host name
/// elsewhere, `unknown` when neither can be read.
pub fn host_name() -> String {
    let name = if cfg!(windows) {
        std::env::var("COMPUTERNAME").ok()
    } else {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
    };
    name.map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}
