//! Panics of the engine under fuzz input, sorted into known bugs and new ones.
//!
//! libFuzzer's Rust harness aborts on every panic, which stops the run at the first one. A
//! known bug (one that already has an `#[ignore]`d test naming it) would then stop every run
//! of `open_files` within seconds and hide everything after it. So [`install`] replaces the
//! panic hook: a panic inside [`guarded`] is caught and compared with [`KNOWN`]; a known one
//! is counted and the input given up, anything else aborts as before (libFuzzer saves the
//! input as a crash). A panic outside [`guarded`], or on another thread, always aborts.
//!
//! An entry of [`KNOWN`] is removed when its bug is fixed; then the same panic is a crash.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A known bug: a panic message fragment, and the ignored test that shows the bug.
#[derive(Debug, Clone, Copy)]
pub struct Known {
    pub message: &'static str,
    pub test: &'static str,
}

/// Known bugs whose panics `open_files` counts instead of reporting. Keep each entry as
/// narrow as its symptom allows. `TILLDB_FUZZ_STRICT=1` reports them as crashes too.
pub const KNOWN: &[Known] = &[
    // Empty: the two panics open_files found (a page lsn past the end of the log; a node op
    // meeting a page of another kind) are fixed, and `fuzz_regressions.rs` keeps them fixed.
];

fn is_known(message: &str) -> Option<&'static Known> {
    static STRICT: OnceLock<bool> = OnceLock::new();
    if *STRICT.get_or_init(|| std::env::var_os("TILLDB_FUZZ_STRICT").is_some_and(|v| v == "1")) {
        return None;
    }
    KNOWN.iter().find(|k| message.contains(k.message))
}

thread_local! {
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// Every panic message of the current input, in order.
    static PANICS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

static KNOWN_SEEN: AtomicU64 = AtomicU64::new(0);

/// Replaces the panic hook (call once, from the target's `init`).
pub fn install() {
    let abort_hook = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if GUARDED.with(Cell::get) {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            let location = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let message = format!("{message}{location}");
            // A new panic is printed at once: a second panic while unwinding (in a `Drop`)
            // aborts before `guarded` sees the first.
            if is_known(&message).is_none() {
                eprintln!("open_files: panic: {message}");
                // `RUST_BACKTRACE=1` when replaying an input: the whole stack of each panic.
                let trace = std::backtrace::Backtrace::capture();
                if trace.status() == std::backtrace::BacktraceStatus::Captured {
                    eprintln!("{trace}");
                }
            }
            PANICS.with(|p| p.borrow_mut().push(message));
        } else {
            abort_hook(info);
        }
    }));
}

/// Runs `f`. If it panics and every panic message of the run matches [`KNOWN`], the panics
/// are counted and swallowed; any other panic is printed and aborts the process (a crash for
/// libFuzzer).
pub fn guarded(f: impl FnOnce()) {
    PANICS.with(|p| p.borrow_mut().clear());
    GUARDED.with(|g| g.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(false));
    let panics = PANICS.with(|p| std::mem::take(&mut *p.borrow_mut()));
    if result.is_ok() && panics.is_empty() {
        return;
    }
    let known: Vec<_> = panics.iter().map(|m| is_known(m)).collect();
    if !panics.is_empty() && known.iter().all(Option::is_some) {
        // One line per input (scripts/fuzz counts them), the messages now and then.
        let seen = KNOWN_SEEN.fetch_add(1, Ordering::Relaxed) + 1;
        let test = known[0].map_or("", |k| k.test);
        eprintln!("open_files: known bug, test {test}");
        if seen.is_power_of_two() {
            eprintln!("open_files: ({seen} so far) {}", panics.join(" / then: "));
        }
        return;
    }
    eprintln!(
        "open_files: the engine panicked: {}",
        panics.join(" / then: ")
    );
    std::process::abort();
}

/// Runs `f`, catching a panic so that values it borrows are dropped after it returns rather
/// than while it unwinds (a second panic in a `Drop` during unwinding aborts before
/// [`guarded`] can look at the first), then resumes the panic.
pub fn unwind_later<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    panic::catch_unwind(AssertUnwindSafe(f))
}
