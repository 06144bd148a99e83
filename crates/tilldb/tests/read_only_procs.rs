//! Read-only handles in other processes while a writer commits: a writer process moves money
//! between accounts (each transfer one `Sync` commit, with checkpoints and log segment reuse
//! every few hundred commits), two reader processes open the database read-only and refresh
//! every few milliseconds, checking at every refresh that the balances sum to the total and
//! the transfer count never goes back, and this process kills (`kill -9` / `TerminateProcess`)
//! the writer or a reader at random and starts it again. A reader never sees a torn state,
//! and the writer never fails because of a reader: every child that ends by itself must end
//! well. At the end the database reopens with every transfer a reader saw, and checks clean.
//!
//! One binary, its own `main` (`harness = false`): run with `--role writer|reader DIR SECONDS`
//! it is a child; otherwise it is the test, and prints a libtest summary line.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tilldb::{Db, Durability, Options};

const ACCOUNTS: u32 = 50;
const OPENING_BALANCE: u64 = 1_000;
const TOTAL: u64 = ACCOUNTS as u64 * OPENING_BALANCE;
const COUNT_KEY: &[u8] = b"transfers";

fn options() -> Options {
    Options {
        checkpoint_log_bytes: 256 << 10,
        wal: tilldb::WalOptions {
            segment_bytes: 64 << 10,
            first_segment_bytes: 64 << 10,
            ..Options::for_tests().wal
        },
        ..Options::for_tests()
    }
}

fn account(i: u32) -> Vec<u8> {
    format!("account-{i:04}").into_bytes()
}

fn number(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("8 bytes"))
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--role") {
        let role = args[i + 1].as_str();
        let dir = PathBuf::from(&args[i + 2]);
        let seconds: u64 = args[i + 3].parse().expect("seconds");
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let outcome = match role {
            "writer" => writer(&dir, deadline),
            "reader" => reader(&dir, deadline),
            other => Err(format!("unknown role {other}")),
        };
        match outcome {
            Ok(summary) => {
                println!("{summary}");
                std::process::exit(0);
            }
            Err(why) => {
                eprintln!("{role} failed: {why}");
                std::process::exit(2);
            }
        }
    }
    let name = "readers_and_a_writer_in_separate_processes_killed_at_random";
    // A filter that does not name this test skips it, as libtest would.
    let filters: Vec<&String> = args
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
        println!(
            "running 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 1 filtered out"
        );
        return;
    }
    println!("running 1 test");
    let result = std::panic::catch_unwind(drive);
    if result.is_err() {
        println!("test {name} ... FAILED\n");
        println!("test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out");
        std::process::exit(101);
    }
    println!("test {name} ... ok\n");
    println!("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}

/// The writer: random transfers, each its own `Sync` commit, until the deadline.
fn writer(dir: &Path, deadline: Instant) -> Result<String, String> {
    let db = Db::open(dir, options()).map_err(|e| format!("open: {e}"))?;
    let mut rng = Rng(u64::from(std::process::id()) * 0x9E37_79B9 + 1);
    let mut commits = 0u64;
    while Instant::now() < deadline {
        let from = u32::try_from(rng.below(u64::from(ACCOUNTS))).expect("small");
        let to = u32::try_from(rng.below(u64::from(ACCOUNTS))).expect("small");
        let mut txn = db.begin().map_err(|e| format!("begin: {e}"))?;
        let read = |txn: &mut tilldb::Txn<'_>, key: &[u8]| -> Result<u64, String> {
            Ok(number(
                &txn.get(key)
                    .map_err(|e| format!("get: {e}"))?
                    .ok_or("a key is missing")?,
            ))
        };
        let a = read(&mut txn, &account(from))?;
        let b = read(&mut txn, &account(to))?;
        let n = read(&mut txn, COUNT_KEY)?;
        let amount = rng.below(a + 1);
        if from != to {
            txn.put(&account(from), &(a - amount).to_le_bytes())
                .map_err(|e| format!("put: {e}"))?;
            txn.put(&account(to), &(b + amount).to_le_bytes())
                .map_err(|e| format!("put: {e}"))?;
        }
        txn.put(COUNT_KEY, &(n + 1).to_le_bytes())
            .map_err(|e| format!("put: {e}"))?;
        txn.commit_with(Durability::Sync)
            .map_err(|e| format!("commit: {e}"))?;
        commits += 1;
    }
    db.close().map_err(|e| format!("close: {e}"))?;
    Ok(format!("commits={commits}"))
}

/// A reader: opens read-only, refreshes every few milliseconds and checks the invariant.
fn reader(dir: &Path, deadline: Instant) -> Result<String, String> {
    let mut db = Db::open_read_only(dir, options()).map_err(|e| format!("open: {e}"))?;
    let mut last = 0u64;
    let mut refreshes = 0u64;
    while Instant::now() < deadline {
        db.refresh().map_err(|e| format!("refresh: {e}"))?;
        refreshes += 1;
        let txn = db.begin_read().map_err(|e| format!("begin_read: {e}"))?;
        let mut sum = 0;
        for i in 0..ACCOUNTS {
            let value = txn
                .get(&account(i))
                .map_err(|e| format!("get: {e}"))?
                .ok_or_else(|| format!("account {i} is missing"))?;
            sum += number(&value);
        }
        let n = number(
            &txn.get(COUNT_KEY)
                .map_err(|e| format!("get: {e}"))?
                .ok_or("the count is missing")?,
        );
        drop(txn);
        if sum != TOTAL {
            return Err(format!(
                "balances sum to {sum}, not {TOTAL}, at transfer {n}"
            ));
        }
        if n < last {
            return Err(format!("the transfer count went back from {last} to {n}"));
        }
        last = n;
        if refreshes.is_multiple_of(25) {
            db.check_tables().map_err(|e| format!("check: {e}"))?;
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    Ok(format!("refreshes={refreshes} transfers={last}"))
}

/// A running child and what it is.
struct Running {
    role: &'static str,
    child: Child,
}

fn spawn(role: &'static str, dir: &Path, seconds: u64) -> Running {
    let child = Command::new(std::env::current_exe().expect("this test's executable"))
        .args(["--role", role])
        .arg(dir)
        .arg(seconds.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a child");
    Running { role, child }
}

/// Waits for a child that ends by itself: it must end well. Returns its summary line.
fn finish(running: Running) -> String {
    let out = running.child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        out.status.success(),
        "the {} failed ({}): {}{}",
        running.role,
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn kill(mut running: Running) {
    let _ = running.child.kill();
    let out = running.child.wait_with_output().expect("wait");
    // Killed, or it had ended by itself just before: then it must have ended well.
    if out.status.success() || out.status.code() == Some(2) {
        assert!(
            out.status.success(),
            "the {} failed before it was killed: {}",
            running.role,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn drive() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("bank");
    {
        let db = Db::open(&dir, options()).expect("create");
        let mut txn = db.begin().expect("begin");
        for i in 0..ACCOUNTS {
            txn.put(&account(i), &OPENING_BALANCE.to_le_bytes())
                .expect("put");
        }
        txn.put(COUNT_KEY, &0u64.to_le_bytes()).expect("put");
        txn.commit().expect("commit");
        db.close().expect("close");
    }
    let run_for = Duration::from_secs(if cfg!(windows) { 8 } else { 12 });
    // Children live a little longer than the run; the last ones end by themselves.
    let child_seconds = run_for.as_secs() + 3;
    let seed = u64::from(std::process::id()) | 1;
    println!("seed {seed}");
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut writer = Some(spawn("writer", &dir, child_seconds));
    let mut readers = vec![
        spawn("reader", &dir, child_seconds),
        spawn("reader", &dir, child_seconds),
    ];
    let (mut writer_kills, mut reader_kills) = (0, 0);
    while started.elapsed() < run_for {
        std::thread::sleep(Duration::from_millis(100 + rng.below(400)));
        let left = (run_for.saturating_sub(started.elapsed())).as_secs() + 3;
        match rng.below(3) {
            0 => {
                kill(writer.take().expect("a writer runs"));
                writer_kills += 1;
                writer = Some(spawn("writer", &dir, left));
            }
            1 => {
                let i = usize::try_from(rng.below(readers.len() as u64)).expect("small");
                kill(readers.swap_remove(i));
                reader_kills += 1;
                readers.push(spawn("reader", &dir, left));
            }
            _ => {}
        }
    }
    let written = finish(writer.take().expect("a writer runs"));
    let mut most_seen = 0u64;
    for reader in readers {
        let summary = finish(reader);
        println!("reader: {summary}");
        let transfers = summary
            .split_whitespace()
            .find_map(|w| w.strip_prefix("transfers="))
            .and_then(|n| n.parse::<u64>().ok())
            .expect("a reader's summary");
        most_seen = most_seen.max(transfers);
        let refreshes = summary
            .split_whitespace()
            .find_map(|w| w.strip_prefix("refreshes="))
            .and_then(|n| n.parse::<u64>().ok())
            .expect("a reader's summary");
        assert!(refreshes > 10, "a reader refreshed only {refreshes} times");
    }
    println!("writer: {written}; {writer_kills} writer kills, {reader_kills} reader kills");
    let db = Db::open(&dir, options()).expect("reopen");
    let n = number(&db.get(COUNT_KEY).expect("get").expect("the count"));
    assert!(
        n >= most_seen,
        "readers saw transfer {most_seen}, the database holds {n}"
    );
    assert!(n > 0, "no transfer was committed");
    let sum: u64 = (0..ACCOUNTS)
        .map(|i| number(&db.get(&account(i)).expect("get").expect("an account")))
        .sum();
    assert_eq!(sum, TOTAL);
    db.check_tables().expect("check");
    db.close().expect("close");
}
