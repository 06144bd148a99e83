//! `till crashtest`: real process kills. A child process commits from several threads; the
//! parent kills it with SIGKILL at random moments (some right after it starts, while it is
//! still recovering), reopens the database and checks the oracle, per writer thread `t`:
//!
//! 1. every commit the thread saw acknowledged (at `Sync`, or `Buffered`: both survive a
//!    kill) is present;
//! 2. the database holds exactly that thread's commits `0..n` for some `n` at least the
//!    acknowledged count: no gap, no half-applied commit (each commit writes two keys that
//!    must agree);
//! 3. the trees check, and the database goes on from `n` in the next round.
//!
//! Acknowledgements are recorded outside the data directory, one file per thread
//! (`acks-T.txt`), one line per commit, written after `commit()` returns; a kill leaves the
//! page cache, so the files hold every line the child wrote.
//!
//! Each commit also updates one of `FILLER_KEYS` random keys with a 400-byte value, so the
//! database is several times the 1 MiB cache and pages are written back all the time: kills
//! land inside page writes, where a torn page is possible. `--guard` chooses the torn-page
//! guard of a new database; with `none` a torn page is eventually caught (the run stops with
//! the error), with any other guard nothing may ever be lost or corrupt.
//!
//! `--racers N` starts N more children each round, identical to the first: every child opens
//! the database in a loop until it gets it (a refusal is `Error::Locked`; each one appends a
//! line to `refused.txt`), then commits as above. One process per database means exactly one
//! of them commits at a time; two at once would write two logs into one directory, which the
//! oracle catches (it did, before the lock: every acknowledged commit lost). The parent kills
//! them all.
//!
//! `--encrypt` encrypts the database (docs/encryption.md): the same oracle, over sealed pages
//! and log records.
//!
//! `--write-buffer-bytes N` turns the write buffer on in the child (docs/write-buffer.md):
//! commits are buffered and drained into the tree every N bytes, so kills land in drains
//! and in the recovery that rebuilds the buffer.
//!
//! `--json` prints `{ kills, commits_verified, lost, corrupt, threads, guard, durability,
//! racers, encrypted, write_buffer_bytes, opens_refused, seconds, seed, dir, error (null unless the oracle
//! failed) }`;
//! `commits_verified` is the acknowledged commits found present after the last kill, over all
//! threads; `opens_refused` counts the refused opens of all rounds.

use clap::Args;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tilldb::TornPageGuard;
use tilldb::{Db, Durability, FlushMethod, Options};

/// Keys the filler updates spread over (400 B values: about 10 MiB of pages).
const FILLER_KEYS: u64 = 20_000;
/// Most writer threads.
const THREADS_MAX: usize = 64;
/// Most racing children besides the first.
const RACERS_MAX: usize = 8;
/// A child refused the database retries after this long.
const RETRY_OPEN_MS: u64 = 1;
/// One round in this many kills the child within `EARLY_KILL_MS`, while it opens (recovers).
const EARLY_KILL_EVERY: u32 = 5;
const EARLY_KILL_MS: u64 = 8;

#[derive(Args, Debug)]
pub struct CrashtestArgs {
    /// Directory for the database and the acknowledgement logs (created; reused if present).
    #[arg(long, default_value = "tilldb-crashtest")]
    dir: PathBuf,
    /// Number of kills.
    #[arg(long, default_value_t = 20)]
    kills: u32,
    /// Longest a child runs before it is killed, in milliseconds (each run is random below).
    #[arg(long, default_value_t = 400)]
    max_run_ms: u64,
    /// Seed for the kill times (default: the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Writer threads in the child, each with its own sequence of commits.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Torn-page guard of a new database: doublewrite, full-page-images, atomic, auto, or
    /// none (unsafe: to watch a torn page get caught). An existing database keeps its own.
    #[arg(long, default_value = "doublewrite")]
    guard: TornPageGuard,
    /// Flush method of a new database [default: the database probes and chooses]. A kill
    /// can tear only buffered page writes (a direct write in flight completes), so watching
    /// `--guard none` fail takes a buffered method such as fdatasync.
    #[arg(long)]
    flush_method: Option<FlushMethod>,
    /// Durability of the child's commits. `buffered` survives a process kill too and commits
    /// faster, so kills land in page write-back more often. `lazy` does not survive a kill
    /// and is refused.
    #[arg(long, default_value = "sync")]
    durability: Durability,
    /// More children started each round, each racing to open the same database: exactly
    /// one may hold it and commit, the others are refused and retry.
    #[arg(long, default_value_t = 0)]
    racers: usize,
    /// The child's write buffer (`Options::write_buffer_bytes`, docs/write-buffer.md): its
    /// commits are buffered, and drained into the tree each time the buffer holds this many
    /// bytes (and when the writer is idle), so kills land inside drains too. 0: off, every
    /// commit changes the tree. [default: `Options::default()`'s, 64 MiB]
    #[arg(long, default_value_t = Options::default().write_buffer_bytes)]
    write_buffer_bytes: u64,
    /// Print JSON (stable for scripts) instead of a line per kill.
    #[arg(long)]
    json: bool,
    /// Encrypt the database (docs/encryption.md), with the key given as to every command
    /// (--key-file, `TILLDB_KEY_FILE`, `TILLDB_KEY`), else with a random key kept in
    /// DIR/crashtest.key.
    #[arg(long)]
    encrypt: bool,
    /// Internal: run as the committing child.
    #[arg(long, hide = true)]
    child: bool,
}

/// The key file `--encrypt` makes when no key is given.
const KEY_FILE: &str = "crashtest.key";

/// The key the database is encrypted with (`--encrypt`), or none.
fn encryption(
    args: &CrashtestArgs,
) -> Result<Option<tilldb::Encryption>, Box<dyn std::error::Error>> {
    if !args.encrypt {
        return Ok(None);
    }
    if let Some(given) = crate::key::encryption()? {
        return Ok(Some(given));
    }
    let path = args.dir.join(KEY_FILE);
    if !path.exists() {
        let mut key = zeroize::Zeroizing::new([0u8; 32]);
        tilldb::internals::crypt::fill_random(key.as_mut())?;
        let mut file = std::fs::OpenOptions::new();
        file.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
        file.open(&path)?.write_all(key.as_ref())?;
    }
    let key = crate::key::read_key_file(&path)?;
    Ok(Some(tilldb::Encryption::with_key(&key)))
}

fn options(
    args: &CrashtestArgs,
    guard: TornPageGuard,
    encryption: Option<tilldb::Encryption>,
) -> Options {
    // Small cache, 4 MiB segments and checkpoints every 8 MiB of log, so kills land in
    // write-back, segment switches and checkpoints too, not only in commits.
    Options {
        cache_bytes: 1 << 20,
        torn_page_guard: guard,
        flush_method: args.flush_method,
        durability: args.durability,
        checkpoint_log_bytes: 8 << 20,
        wal: tilldb::WalOptions {
            segment_bytes: 4 << 20,
            ..tilldb::WalOptions::default()
        },
        encryption,
        write_buffer_bytes: args.write_buffer_bytes,
        ..Options::default()
    }
}

fn key(thread: usize, n: u64, half: u8) -> Vec<u8> {
    format!("c{thread:02}-{n:012}/{half}").into_bytes()
}

fn acks_path(dir: &Path, thread: usize) -> PathBuf {
    dir.join(format!("acks-{thread}.txt"))
}

/// What a run found.
#[derive(Debug, Default)]
struct Summary {
    kills: u32,
    commits_verified: u64,
    lost: u64,
    corrupt: u64,
    /// Opens refused because another child held the database (`--racers`).
    opens_refused: u64,
    error: Option<String>,
}

pub fn run(args: &CrashtestArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db_dir = args.dir.join("db");
    if args.child {
        return child(&db_dir, &args.dir, args);
    }
    if args.kills == 0 || args.max_run_ms < 10 {
        return Err("--kills must be at least 1 and --max-run-ms at least 10".into());
    }
    if !(1..=THREADS_MAX).contains(&args.threads) {
        return Err(format!("--threads must be from 1 to {THREADS_MAX}").into());
    }
    if args.racers > RACERS_MAX {
        return Err(format!("--racers must be from 0 to {RACERS_MAX}").into());
    }
    if args.durability == Durability::Lazy {
        return Err(
            "--durability lazy: a kill may take back lazy commits, so the oracle (nothing \
             acknowledged is lost) does not apply; use sync or buffered"
                .into(),
        );
    }
    std::fs::create_dir_all(&args.dir)?;
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| {
            u64::try_from(d.as_nanos() % u128::from(u64::MAX)).unwrap_or(1)
        })
    }) | 1;
    let guard = match existing_guard(&db_dir)? {
        Some(g) if args.guard != TornPageGuard::Auto && g != args.guard => {
            return Err(format!(
                "the database in {} was made with --guard {g}; remove it or pass --guard {g}",
                db_dir.display()
            )
            .into());
        }
        Some(g) => g,
        None => args.guard,
    };
    if !args.json {
        println!(
            "crashtest: {} kills in {} (seed {seed}, guard {guard}, {} threads, {}{}{})",
            args.kills,
            args.dir.display(),
            args.threads,
            args.durability,
            if args.encrypt { ", encrypted" } else { "" },
            if args.write_buffer_bytes > 0 {
                format!(", write buffer {} bytes", args.write_buffer_bytes)
            } else {
                ", write buffer off".to_owned()
            }
        );
    }
    // The key, made now if it is to be made: before any child could race to make it.
    encryption(args)?;
    let started = Instant::now();
    let summary = kill_rounds(args, &db_dir, guard, seed)?;
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        let doc = json!({
            "kills": summary.kills,
            "commits_verified": summary.commits_verified,
            "lost": summary.lost,
            "corrupt": summary.corrupt,
            "threads": args.threads,
            "guard": guard.name(),
            "durability": args.durability.name(),
            "racers": args.racers,
            "encrypted": args.encrypt,
            "write_buffer_bytes": args.write_buffer_bytes,
            "opens_refused": summary.opens_refused,
            "seconds": seconds,
            "seed": seed,
            "dir": args.dir,
            "error": summary.error,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else if summary.error.is_none() {
        println!(
            "crashtest: {} kills, {} commits verified, lost = 0, corrupt = 0 ({seconds:.1} s)",
            summary.kills, summary.commits_verified
        );
        if args.racers > 0 {
            println!(
                "crashtest: {} racing children, {} opens refused (one holder at a time)",
                args.racers, summary.opens_refused
            );
        }
    }
    match summary.error {
        None => Ok(()),
        Some(e) => Err(e.into()),
    }
}

/// Runs the kill rounds; an oracle failure ends them and is reported in the summary.
fn kill_rounds(
    args: &CrashtestArgs,
    db_dir: &Path,
    guard: TornPageGuard,
    seed: u64,
) -> Result<Summary, Box<dyn std::error::Error>> {
    let exe = std::env::current_exe()?;
    // Counted per run: the directory may hold an earlier run's count.
    match std::fs::remove_file(args.dir.join(REFUSED_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    let mut rng = seed;
    let mut summary = Summary::default();
    for round in 1..=args.kills {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let run_ms = if round % EARLY_KILL_EVERY == 0 {
            1 + rng % EARLY_KILL_MS
        } else {
            10 + rng % (args.max_run_ms - 9)
        };
        let children = (0..=args.racers)
            .map(|_| spawn_child(&exe, args, guard))
            .collect::<Result<Vec<_>, _>>()?;
        std::thread::sleep(Duration::from_millis(run_ms));
        for mut child in children {
            child.kill()?; // SIGKILL on Unix
            let output = child.wait_with_output()?;
            if output.status.success() {
                return Err("a child exited by itself; it should run until killed".into());
            }
        }
        summary.kills = round;
        summary.opens_refused = count_lines(&args.dir.join(REFUSED_FILE))?;
        let acked: Vec<u64> = (0..args.threads)
            .map(|t| read_acks(&acks_path(&args.dir, t)))
            .collect::<Result<_, _>>()?;
        match verify(db_dir, &acked, options(args, guard, encryption(args)?)) {
            Ok(present) => {
                summary.commits_verified = acked.iter().sum();
                if !args.json {
                    println!(
                        "kill {round:>3} after {run_ms:>4} ms: {} acknowledged, {} present, \
                         check ok",
                        acked.iter().sum::<u64>(),
                        present.iter().sum::<u64>()
                    );
                }
            }
            Err(failure) => {
                let unsafe_note = if guard == TornPageGuard::None {
                    " (guard none: a kill during a page write tore the page, and nothing can \
                     repair it; this is why none is unsafe)"
                } else {
                    ""
                };
                match &failure {
                    Failure::Lost(n, _) => summary.lost = *n,
                    Failure::Corrupt(_) => summary.corrupt = 1,
                }
                summary.error = Some(format!(
                    "kill {round} after {run_ms} ms: {failure}{unsafe_note}"
                ));
                break;
            }
        }
    }
    Ok(summary)
}

/// Where refused opens are counted, a line each (`--racers`).
const REFUSED_FILE: &str = "refused.txt";

fn spawn_child(
    exe: &Path,
    args: &CrashtestArgs,
    guard: TornPageGuard,
) -> std::io::Result<std::process::Child> {
    Command::new(exe)
        .args(["crashtest", "--child", "--guard", guard.name()])
        .args(["--durability", args.durability.name()])
        .args(["--write-buffer-bytes", &args.write_buffer_bytes.to_string()])
        .args(["--threads", &args.threads.to_string(), "--dir"])
        .arg(&args.dir)
        .args(if args.encrypt {
            &["--encrypt"][..]
        } else {
            &[]
        })
        .args(
            crate::key::key_file_flag()
                .map(|path| vec!["--key-file".into(), path.into_os_string()])
                .unwrap_or_default(),
        )
        .args(crate::key::key_dpapi_args())
        .args(
            args.flush_method
                .map(|m| vec!["--flush-method".to_owned(), m.name().to_owned()])
                .unwrap_or_default(),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
}

/// Lines in `path`, 0 when it does not exist.
fn count_lines(path: &Path) -> std::io::Result<u64> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(bytes.iter().fold(0, |n, &b| n + u64::from(b == b'\n'))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// Opens the database, retrying while another child holds it; each refusal is a line in
/// `refused.txt`.
fn open_when_free(db_dir: &Path, dir: &Path, options: &Options) -> tilldb::Result<Db> {
    loop {
        match Db::open(db_dir, options.clone()) {
            Err(tilldb::Error::Locked { .. }) => {
                let mut refused = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join(REFUSED_FILE))
                    .map_err(|source| tilldb::Error::Io {
                        op: tilldb::IoOp::Write,
                        path: dir.join(REFUSED_FILE),
                        source,
                    })?;
                let _ = refused.write_all(b"refused\n");
                std::thread::sleep(Duration::from_millis(RETRY_OPEN_MS));
            }
            other => return other,
        }
    }
}

/// Each thread commits 0, 1, 2, ... of its own sequence, two keys with the same value per
/// commit, recording every acknowledgement. Continues from what the database holds.
fn child(
    db_dir: &Path,
    dir: &Path,
    args: &CrashtestArgs,
) -> Result<(), Box<dyn std::error::Error>> {
    let db = open_when_free(db_dir, dir, &options(args, args.guard, encryption(args)?))?;
    let durability = args.durability;
    std::thread::scope(|s| -> Result<(), String> {
        let handles: Vec<_> = (0..args.threads)
            .map(|t| {
                let db = db.clone();
                s.spawn(move || commit_forever(&db, dir, t, durability).map_err(|e| e.to_string()))
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| "a writer thread panicked".to_owned())??;
        }
        Ok(())
    })?;
    Ok(())
}

fn commit_forever(
    db: &Db,
    dir: &Path,
    thread: usize,
    durability: Durability,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut n = count_present(db, thread)?;
    let path = acks_path(dir, thread);
    let mut acks = crate::acks::AckFile::open(&path)?;
    loop {
        let value = n.to_le_bytes();
        let mut txn = db.begin()?;
        txn.put(&key(thread, n, 0), &value)?;
        txn.put(&key(thread, n, 1), &value)?;
        let filler = (n ^ (thread as u64) << 40).wrapping_mul(0x9E37_79B9_7F4A_7C15) % FILLER_KEYS;
        txn.put(format!("f{filler:06}").as_bytes(), &[0xF1; 400])?;
        txn.commit_with(durability)?;
        acks.ack(n)?;
        n += 1;
    }
}

/// The guard of the database in `db_dir`, if there is one.
fn existing_guard(db_dir: &Path) -> Result<Option<TornPageGuard>, Box<dyn std::error::Error>> {
    let storage = tilldb::io::FileStorage::new();
    if !db_dir
        .join(tilldb::internals::header::HEADER_FILE_NAME)
        .exists()
    {
        return Ok(None);
    }
    let header =
        tilldb::internals::header::HeaderFile::open(&storage, db_dir, FlushMethod::Fdatasync)?;
    Ok(header.map(|(_, h)| h.torn_page_guard))
}

/// Commits of `thread` present: `n` such that its commits `0..n` are all there.
fn count_present(db: &Db, thread: usize) -> tilldb::Result<u64> {
    let mut n = 0;
    while db.get(&key(thread, n, 0))?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// The highest acknowledged commit + 1 (0 if none).
fn read_acks(acks: &Path) -> Result<u64, Box<dyn std::error::Error>> {
    Ok(crate::acks::read(acks)?.last().map_or(0, |n| n + 1))
}

/// How the oracle failed.
#[derive(Debug)]
enum Failure {
    /// Acknowledged commits missing (how many), with the details.
    Lost(u64, String),
    /// Recovery, the check or the contents failed otherwise.
    Corrupt(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Lost(_, what) | Failure::Corrupt(what) => f.write_str(what),
        }
    }
}

/// Reopens the database and checks the oracle; returns how many commits of each thread are
/// present.
fn verify(db_dir: &Path, acked: &[u64], options: Options) -> Result<Vec<u64>, Failure> {
    let corrupt = |e: tilldb::Error| Failure::Corrupt(e.to_string());
    let db = Db::open(db_dir, options).map_err(corrupt)?;
    db.check().map_err(corrupt)?;
    let mut present = Vec::with_capacity(acked.len());
    for (thread, &acked) in acked.iter().enumerate() {
        let n = count_present(&db, thread).map_err(corrupt)?;
        if n < acked {
            return Err(Failure::Lost(
                acked - n,
                format!(
                    "thread {thread}: lost acknowledged commits: {acked} acknowledged, only {n} \
                     present"
                ),
            ));
        }
        for i in 0..n {
            let a = db.get(&key(thread, i, 0)).map_err(corrupt)?;
            let b = db.get(&key(thread, i, 1)).map_err(corrupt)?;
            if a != b || a != Some(i.to_le_bytes().to_vec()) {
                return Err(Failure::Corrupt(format!(
                    "thread {thread}: commit {i} is half applied or wrong: {a:?} / {b:?}"
                )));
            }
        }
        // Nothing after the prefix: no gap.
        for i in n..n + 8 {
            if db.get(&key(thread, i, 0)).map_err(corrupt)?.is_some()
                || db.get(&key(thread, i, 1)).map_err(corrupt)?.is_some()
            {
                return Err(Failure::Corrupt(format!(
                    "thread {thread}: commit {i} present after missing commit {n}: a gap"
                )));
            }
        }
        present.push(n);
    }
    db.close().map_err(corrupt)?;
    Ok(present)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by `scripts/prove`: a kill between the number and its newline left `1350`, the
    /// next child appended `1351`, and the line read `13501351`: a false "lost". Only lines
    /// ended by a newline count now.
    #[test]
    fn an_acknowledgement_line_cut_by_a_kill_does_not_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("acks");
        std::fs::write(&path, "0\n1\n2\n1350").expect("write");
        assert_eq!(read_acks(&path).expect("read"), 3);
        std::fs::write(&path, "0\n1\n2\n").expect("write");
        assert_eq!(read_acks(&path).expect("read"), 3);
        assert_eq!(read_acks(&dir.path().join("none")).expect("read"), 0);
    }
}
