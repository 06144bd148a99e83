//! What `till` needs that differs per operating system, in one place (the benchmarks'
//! own needs are in `till-bench`'s `platform.rs`).

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

/// Restores SIGPIPE's default action, so that `till check DIR | head` ends quietly when
/// `head` has read enough, as every Unix tool does. Rust's runtime ignores SIGPIPE, which
/// turns each later `println!` into a panic ("failed printing to stdout: Broken pipe"). For
/// the commands that only print: with it, a write to a closed socket would kill the process.
/// Nothing to do on Windows, which has no SIGPIPE.
pub fn default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any thread starts; SIG_DFL is a valid
    // action for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
