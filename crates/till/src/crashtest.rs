//! `till crashtest`: real process kills. A child process commits in a loop; the parent kills
//! it with SIGKILL at random moments, reopens the database and checks the oracle:
//!
//! 1. every commit the child saw acknowledged at `Sync` is present;
//! 2. the database holds exactly commits `0..n` for some `n` at least the acknowledged count:
//!    no gap, no half-applied commit (each commit writes two keys that must agree);
//! 3. the trees check, and the database goes on from `n` in the next round.
//!
//! Acknowledgements are recorded outside the data directory, one line per commit, written
//! after `commit()` returns; a kill leaves the page cache, so the file holds every line the
//! child wrote.

use clap::Args;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tilldb::{Db, Options};

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
    /// Internal: run as the committing child.
    #[arg(long, hide = true)]
    child: bool,
}

fn options() -> Options {
    // Small cache, 4 MiB segments and checkpoints every 8 MiB of log, so kills land in
    // write-back, segment switches and checkpoints too, not only in commits.
    Options {
        cache_bytes: 1 << 20,
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
        return child(&db_dir, &acks);
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
    println!(
        "crashtest: {} kills in {} (seed {rng})",
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
            .args(["crashtest", "--child", "--dir"])
            .arg(&args.dir)
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
        let present = verify(&db_dir, acked)?;
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
fn child(db_dir: &Path, acks: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let db = Db::open(db_dir, options())?;
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
        txn.commit()?;
        writeln!(log, "{n}")?;
        n += 1;
    }
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
fn verify(db_dir: &Path, acked: u64) -> Result<u64, Box<dyn std::error::Error>> {
    let db = Db::open(db_dir, options())?;
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
