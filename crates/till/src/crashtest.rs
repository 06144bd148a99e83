//! `till crashtest`: real process kills. A child process commits in a loop; the parent kills
//! it with SIGKILL at random moments, reopens the database and checks the oracle:
//!
//! 1. every commit the child saw acknowledged (at `Sync`, or `Buffered`: both survive a kill)
//!    is present;
//! 2. the database holds exactly commits `0..n` for some `n` at least the acknowledged count:
//!    no gap, no half-applied commit (each commit writes two keys that must agree);
//! 3. the trees check, and the database goes on from `n` in the next round.
//!
//! Acknowledgements are recorded outside the data directory, one line per commit, written
//! after `commit()` returns; a kill leaves the page cache, so the file holds every line the
//! child wrote.
//!
//! Each commit also updates one of `FILLER_KEYS` random keys with a 400-byte value, so the
//! database is several times the 1 MiB cache and pages are written back all the time: kills
//! land inside page writes, where a torn page is possible. `--guard` chooses the torn-page
//! guard of a new database; with `none` a torn page is eventually caught (the run stops with
//! the error), with any other guard nothing may ever be lost or corrupt.

use clap::Args;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tilldb::page::TornPageGuard;
use tilldb::{Db, Options};

/// Keys the filler updates spread over (400 B values: about 10 MiB of pages).
const FILLER_KEYS: u64 = 20_000;

#[derive(Args, Debug)]
pub struct CrashtestArgs {
    /// Directory for the database and the acknowledgement log (created; reused if present).
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
    /// Torn-page guard of a new database: doublewrite, full-page-images, or none (unsafe:
    /// to watch a torn page get caught). An existing database keeps its own.
    #[arg(long, default_value = "doublewrite")]
    guard: TornPageGuard,
    /// Flush method of a new database [default: the database probes and chooses]. A kill
    /// can tear only buffered page writes (a direct write in flight completes), so watching
    /// `--guard none` fail takes a buffered method such as fdatasync.
    #[arg(long)]
    flush_method: Option<tilldb::FlushMethod>,
    /// Durability of the child's commits. `buffered` survives a process kill too and commits
    /// ten times as fast, so kills land in page write-back far more often.
    #[arg(long, default_value = "sync")]
    durability: tilldb::Durability,
    /// Internal: run as the committing child.
    #[arg(long, hide = true)]
    child: bool,
}

fn options(
    guard: TornPageGuard,
    flush_method: Option<tilldb::FlushMethod>,
    durability: tilldb::Durability,
) -> Options {
    // Small cache, 4 MiB segments and checkpoints every 8 MiB of log, so kills land in
    // write-back, segment switches and checkpoints too, not only in commits.
    Options {
        cache_bytes: 1 << 20,
        torn_page_guard: guard,
        flush_method,
        durability,
        checkpoint_log_bytes: 8 << 20,
        wal: tilldb::wal::WalOptions {
            segment_bytes: 4 << 20,
            ..tilldb::wal::WalOptions::default()
        },
        ..Options::default()
    }
}

fn key(n: u64, half: u8) -> Vec<u8> {
    format!("c{n:012}/{half}").into_bytes()
}

pub fn run(args: &CrashtestArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db_dir = args.dir.join("db");
    let acks = args.dir.join("acks.txt");
    if args.child {
        return child(
            &db_dir,
            &acks,
            options(args.guard, args.flush_method, args.durability),
        );
    }
    if args.kills == 0 || args.max_run_ms < 10 {
        return Err("--kills must be at least 1 and --max-run-ms at least 10".into());
    }
    std::fs::create_dir_all(&args.dir)?;
    let mut rng = args.seed.unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| {
            u64::try_from(d.as_nanos() % u128::from(u64::MAX)).unwrap_or(1)
        })
    }) | 1;
    let guard = existing_guard(&db_dir)?.unwrap_or(args.guard);
    if guard != args.guard {
        return Err(format!(
            "the database in {} was made with --guard {guard}; remove it or pass --guard {guard}",
            db_dir.display()
        )
        .into());
    }
    println!(
        "crashtest: {} kills in {} (seed {rng}, guard {guard})",
        args.kills,
        args.dir.display()
    );
    let exe = std::env::current_exe()?;
    let started = Instant::now();
    let mut total_acked = 0u64;
    for round in 1..=args.kills {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let run_ms = 10 + rng % (args.max_run_ms - 9);
        let mut child = Command::new(&exe)
            .args(["crashtest", "--child", "--guard", guard.name()])
            .args(["--durability", args.durability.name(), "--dir"])
            .arg(&args.dir)
            .args(
                args.flush_method
                    .map(|m| vec!["--flush-method".to_owned(), m.name().to_owned()])
                    .unwrap_or_default(),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        std::thread::sleep(Duration::from_millis(run_ms));
        child.kill()?; // SIGKILL on Unix
        let status = child.wait()?;
        if status.success() {
            return Err("the child exited by itself; it should run until killed".into());
        }
        let acked = read_acks(&acks)?;
        let present = verify(
            &db_dir,
            acked,
            options(guard, args.flush_method, args.durability),
        )
        .map_err(|e| {
            let unsafe_note = if guard == TornPageGuard::None {
                " (guard none: a kill during a page write tore the page, and nothing can \
                 repair it; this is why none is unsafe)"
            } else {
                ""
            };
            format!("kill {round} after {run_ms} ms: {e}{unsafe_note}")
        })?;
        total_acked = acked;
        println!(
            "kill {round:>3} after {run_ms:>4} ms: {acked} acknowledged, {present} present, check ok"
        );
    }
    println!(
        "crashtest: {} kills, {total_acked} commits acknowledged, none lost or half applied ({:.1} s)",
        args.kills,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Commits 0, 1, 2, ... each writing two keys with the same value, recording every
/// acknowledgement. Continues from what the database holds.
fn child(db_dir: &Path, acks: &Path, options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let db = Db::open(db_dir, options)?;
    let mut n = count_present(&db)?;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(acks)?;
    loop {
        let value = n.to_le_bytes();
        let mut txn = db.begin()?;
        txn.put(&key(n, 0), &value)?;
        txn.put(&key(n, 1), &value)?;
        let filler = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) % FILLER_KEYS;
        txn.put(format!("f{filler:06}").as_bytes(), &[0xF1; 400])?;
        txn.commit()?;
        writeln!(log, "{n}")?;
        n += 1;
    }
}

/// The guard of the database in `db_dir`, if there is one.
fn existing_guard(db_dir: &Path) -> Result<Option<TornPageGuard>, Box<dyn std::error::Error>> {
    let storage = tilldb::io::FileStorage::new();
    if !db_dir.join(tilldb::header::HEADER_FILE_NAME).exists() {
        return Ok(None);
    }
    let header =
        tilldb::header::HeaderFile::open(&storage, db_dir, tilldb::FlushMethod::Fdatasync)?;
    Ok(header.map(|(_, h)| h.torn_page_guard))
}

/// Commits present: `n` such that commits `0..n` are all there (both keys).
fn count_present(db: &Db) -> Result<u64, Box<dyn std::error::Error>> {
    let mut n = 0;
    while db.get(&key(n, 0))?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// The highest acknowledged commit + 1 (0 if none).
fn read_acks(acks: &Path) -> Result<u64, Box<dyn std::error::Error>> {
    let Ok(file) = std::fs::File::open(acks) else {
        return Ok(0);
    };
    let mut last = None;
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        // A kill can cut the last line short; only whole lines count.
        if let Ok(n) = line.trim().parse::<u64>() {
            last = Some(n);
        }
    }
    Ok(last.map_or(0, |n| n + 1))
}

/// Reopens the database and checks the oracle; returns how many commits are present.
fn verify(db_dir: &Path, acked: u64, options: Options) -> Result<u64, Box<dyn std::error::Error>> {
    let db = Db::open(db_dir, options)?;
    db.check()?;
    let present = count_present(&db)?;
    if present < acked {
        return Err(format!(
            "lost acknowledged commits: {acked} acknowledged, only {present} present"
        )
        .into());
    }
    for n in 0..present {
        let (a, b) = (db.get(&key(n, 0))?, db.get(&key(n, 1))?);
        if a != b || a != Some(n.to_le_bytes().to_vec()) {
            return Err(format!("commit {n} is half applied or wrong: {a:?} / {b:?}").into());
        }
    }
    // Nothing after the prefix: no gap.
    for n in present..present + 8 {
        if db.get(&key(n, 0))?.is_some() || db.get(&key(n, 1))?.is_some() {
            return Err(format!("commit {n} present after missing commit {present}: a gap").into());
        }
    }
    db.close()?;
    Ok(present)
}
