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
