//! Runs many cases that each lay a database image onto a simulated disk and see what the
//! engine makes of it: on a few lanes at once, each case in its own thread under a watchdog
//! (a case that does not finish in time is reported as hung, and its thread and disk are
//! abandoned), panics caught with their messages instead of printed. Used by
//! `db_corruption.rs`; include it with `#[path = "common/sweep.rs"] mod sweep;`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, mpsc};
use std::time::Duration;
use tilldb::FlushMethod;
use tilldb::io::{CrashMode, SimConfig, SimDisk, Storage};

/// Every file under a directory, by path, and its bytes.
pub type Image = BTreeMap<PathBuf, Vec<u8>>;

/// The name of case threads: the panic hook keeps their panic messages for [`guarded`].
const CASE_THREAD: &str = "sweep-case";

thread_local! {
    /// The message of the last panic on this thread (case threads only).
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Panics of the engine's own threads (named `tilldb-*`), with the cases running then.
static ENGINE_PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The cases running now, so a panic of an engine thread can name its suspects.
static RUNNING: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Every file under `dir` (recursively), in path order.
pub fn files_on(disk: &SimDisk, dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if !Storage::exists(disk, dir).expect("exists") {
        return files;
    }
    for name in disk.list_dir(dir).expect("list a directory") {
        let path = dir.join(name);
        if disk.live_contents(&path).is_some() {
            files.push(path);
        } else {
            files.extend(files_on(disk, &path)); // a directory
        }
    }
    files
}

/// What reads of every file under `dir` see now.
pub fn image_of(disk: &SimDisk, dir: &Path) -> Image {
    files_on(disk, dir)
        .into_iter()
        .map(|path| {
            let bytes = disk.live_contents(&path).expect("listed just now");
            (path, bytes)
        })
        .collect()
}

/// Makes the files under `dir` on `disk` those of `image`, except that `changed` holds
/// `bytes` (or is absent, for `None`). Rewrites only the files that differ, since writing a
/// file from nothing is the slowest part of a case. Then crashes the disk (a process kill:
/// everything written is kept and durable), so handles from an earlier case all fail.
pub fn lay_down(disk: &SimDisk, dir: &Path, image: &Image, changed: &Path, bytes: Option<&[u8]>) {
    let storage: &dyn Storage = disk;
    let wanted = |path: &Path| -> Option<&[u8]> {
        if path == changed {
            bytes
        } else {
            image.get(path).map(Vec::as_slice)
        }
    };
    for path in files_on(disk, dir) {
        if wanted(&path).is_none() {
            storage
                .remove(&path)
                .expect("remove a file the image lacks");
        }
    }
    for path in image.keys() {
        let Some(bytes) = wanted(path) else { continue };
        let parent = path.parent().expect("files live in directories");
        storage.create_dir_all(parent).expect("directories");
        let file = match disk.live_contents(path) {
            Some(now) if now == bytes => continue,
            Some(_) => storage.open(path, FlushMethod::Fdatasync).expect("open"),
            None => storage
                .create(path, FlushMethod::Fdatasync)
                .expect("create"),
        };
        file.set_len(bytes.len() as u64).expect("set the length");
        file.write_at(bytes, 0).expect("write the bytes");
    }
    disk.crash(CrashMode::ProcessKill);
}

/// Runs `f`, returning its panic message instead of unwinding further.
pub fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(|_| {
        LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| "a panic without a message".to_owned())
    })
}

/// The panics of engine threads seen so far.
pub fn engine_panics() -> Vec<String> {
    ENGINE_PANICS.lock().expect("engine panics").clone()
}

/// Case threads keep their panic message for [`guarded`]; engine threads' panics are
/// recorded with the cases that were running; other threads print as usual.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            let name = thread.name().unwrap_or("");
            if name == CASE_THREAD {
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()));
            } else if name.starts_with("tilldb") {
                let running = RUNNING.lock().map(|r| r.clone()).unwrap_or_default();
                if let Ok(mut panics) = ENGINE_PANICS.lock() {
                    panics.push(format!("thread {name}: {info} (running: {running:?})"));
                }
            } else {
                previous(info);
            }
        }));
    });
}

/// How one case ended.
#[derive(Debug)]
pub enum Watched<T> {
    Done(T),
    /// A panic outside the case's own `guarded` calls.
    Panicked(String),
    /// Still running when the watchdog gave up on it.
    Hung,
}

/// The per-case work: given a disk (left as the previous case left it) and a case index.
pub type CaseFn<T> = Arc<dyn Fn(&SimDisk, usize) -> T + Send + Sync>;

/// Runs cases `0..count` on `lanes` threads, each case in a thread of its own that may take
/// at most `timeout`; returns how each ended, in case order. `describe` names a case (for a
/// panic of an engine thread, and for `verbose`, which prints each case as it starts).
pub fn run_all<T: Send + 'static>(
    count: usize,
    lanes: usize,
    timeout: Duration,
    describe: &(dyn Fn(usize) -> String + Sync),
    verbose: bool,
    run: &CaseFn<T>,
) -> Vec<Watched<T>> {
    install_panic_hook();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Watched<T>>>> = Mutex::new((0..count).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..lanes {
            scope.spawn(|| {
                let mut disk = SimDisk::new(SimConfig::default());
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= count {
                        break;
                    }
                    let text = describe(index);
                    if verbose {
                        eprintln!("start {text}");
                    }
                    RUNNING.lock().expect("running").insert(text.clone());
                    let (watched, back) = run_watched(disk, index, timeout, run);
                    RUNNING.lock().expect("running").remove(&text);
                    disk = back;
                    results.lock().expect("results")[index] = Some(watched);
                }
            });
        }
    });
    let results = results.into_inner().expect("results");
    assert!(results.iter().all(Option::is_some), "every case ran");
    results.into_iter().flatten().collect()
}

/// Runs case `index` on `disk` in its own thread; returns how it ended and the disk, or a
/// fresh disk if it hung (its thread keeps the old one).
fn run_watched<T: Send + 'static>(
    disk: SimDisk,
    index: usize,
    timeout: Duration,
    run: &CaseFn<T>,
) -> (Watched<T>, SimDisk) {
    let run = Arc::clone(run);
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(CASE_THREAD.into())
        .spawn(move || {
            let watched = match guarded(|| run(&disk, index)) {
                Ok(result) => Watched::Done(result),
                Err(message) => Watched::Panicked(message),
            };
            // The receiver is gone only if the watchdog gave up: nothing to tell then.
            let _ = tx.send((watched, disk));
        })
        .expect("spawn a case thread");
    match rx.recv_timeout(timeout) {
        Ok(result) => {
            handle.join().expect("a case thread ends after sending");
            result
        }
        Err(_) => (Watched::Hung, SimDisk::new(SimConfig::default())),
    }
}
