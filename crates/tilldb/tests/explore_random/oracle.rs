//! The model of each committing thread, and the oracle a recovered database must satisfy
//! (shared/TESTPLAN.md, oracle 1-3, with several threads):
//!
//! - each thread's table is the model after the first `n` of its commits, with `n` at least
//!   its commits acknowledged at `Sync` (after a process kill: at `Sync` or `Buffered`), and
//!   everything an earlier recovery served, and at most the commits it began;
//! - across threads, no gap: every commit also bumps a shared counter (table `seq`) inside the
//!   same transaction, and commits take the writer lock in the order the test records them
//!   (`Attempt`), which is the order of the log. The recovered commits must be a prefix of
//!   that order (a commit that returned an error may be missing from it), and the counter
//!   must say how long;
//! - the trees check and every page is accounted for exactly once.
//!
//! Under `TornPageGuard::None` a torn page may instead make recovery, the check or a read
//! fail with an error naming the file and offset (counted as caught); a wrong state fails
//! under every guard.

use super::config::{COUNT_KEY, Commit, Config};
use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Bound;
use tilldb::TornPageGuard;
use tilldb::io::{CrashMode, SimDisk};
use tilldb::{Db, Direction};

/// The shared counter's table and key: how many commits the database holds, all threads'.
pub const SEQ_TABLE: &str = "seq";
pub const SEQ_KEY: &[u8] = b"n";

pub type Table = BTreeMap<Vec<u8>, Vec<u8>>;

/// One committing thread's sequence of commits and the model after each prefix of it.
#[derive(Debug)]
pub struct Lane {
    pub thread: usize,
    pub table: String,
    /// Every commit of the sequence: those recovered so far, then this cycle's attempts.
    pub history: Vec<Commit>,
    /// `digests[n]`: the digest of the table after the first `n` commits.
    digests: Vec<u64>,
    /// The table after all of `history`.
    model: Table,
    /// Commits recovered at the start of this cycle: no crash may take them any more.
    pub base: usize,
    /// Whether each commit of this cycle (`history[base..]`) returned `Ok`, once it returned.
    pub outcomes: Vec<bool>,
}

impl Lane {
    pub fn new(thread: usize) -> Lane {
        Lane {
            thread,
            table: Config::table(thread),
            history: Vec::new(),
            digests: vec![digest(&Table::new())],
            model: Table::new(),
            base: 0,
            outcomes: Vec::new(),
        }
    }

    pub fn push(&mut self, commit: Commit) {
        let mut digest = *self.digests.last().expect("digest of the empty prefix");
        for (key, value) in &commit.ops {
            if let Some(old) = self.model.remove(key) {
                digest = digest.wrapping_sub(entry_hash(key, &old));
            }
            if let Some(value) = value {
                digest = digest.wrapping_add(entry_hash(key, value));
                self.model.insert(key.clone(), value.clone());
            }
        }
        self.history.push(commit);
        self.digests.push(digest);
        assert_eq!(self.digests.len(), self.history.len() + 1);
    }

    /// Keeps the first `n` commits, as recovered: they are the base of the next cycle.
    pub fn truncate(&mut self, n: usize) {
        assert!(n <= self.history.len(), "recovered more than was begun");
        let history: Vec<Commit> = self.history.drain(..n).collect();
        *self = Lane::new(self.thread);
        for commit in history {
            self.push(commit);
        }
        self.base = n;
    }

    pub fn model_after(&self, n: usize) -> Table {
        let mut table = Table::new();
        for commit in &self.history[..n] {
            for (key, value) in &commit.ops {
                match value {
                    Some(value) => table.insert(key.clone(), value.clone()),
                    None => table.remove(key),
                };
            }
        }
        table
    }
}

fn entry_hash(key: &[u8], value: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    value.hash(&mut hasher);
    hasher.finish()
}

/// An order-independent digest of a table, updated per entry as commits apply.
pub fn digest(table: &Table) -> u64 {
    table
        .iter()
        .fold(0u64, |d, (k, v)| d.wrapping_add(entry_hash(k, v)))
}

/// One commit attempt, in the order the attempts held the writer lock (the log's order).
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    pub thread: usize,
    /// Its place in the thread's sequence.
    pub index: usize,
    /// The shared counter it read; it wrote one more.
    pub seq_before: u64,
}

/// A crash point: the disk as it was when the machine went down, and what the test knew
/// then: the least each thread must keep (per crash mode) and how many attempts had begun.
#[derive(Debug)]
pub struct Frozen {
    pub label: String,
    pub disk: SimDisk,
    pub low_power: Vec<usize>,
    pub low_kill: Vec<usize>,
    pub attempts: usize,
}

/// What a cycle knows after its threads are done: the threads' sequences with every
/// outcome, the attempts in log order, and the counter at the cycle's start.
#[derive(Debug)]
pub struct Cycle<'a> {
    pub lanes: &'a [Lane],
    pub attempts: &'a [Attempt],
    pub seq_base: u64,
}

/// What a recovered database holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holds {
    /// Commits of each thread.
    pub counts: Vec<usize>,
    pub seq: u64,
}

/// Applies the oracle to a database recovered from `frozen` crashed in `mode`. `Err` is a
/// torn page caught under `None`; a violation panics.
pub fn check(
    config: &Config,
    db: &Db,
    frozen: &Frozen,
    mode: CrashMode,
    cycle: &Cycle<'_>,
) -> Result<Holds, String> {
    let space = db
        .check_space()
        .map_err(|e| caught(config, &format!("check: {e}")))?;
    assert!(space.is_clean(), "space accounting: {space:?}");
    let mut expected_tables: Vec<String> = cycle
        .lanes
        .iter()
        .filter(|lane| !lane.history.is_empty() || lane.thread == 0)
        .map(|lane| lane.table.clone())
        .chain([SEQ_TABLE.to_owned()])
        .collect();
    expected_tables.sort();
    for (name, _) in &space.tables {
        assert!(
            expected_tables.contains(name),
            "a table no commit made: {name:?}"
        );
    }
    let kill = mode == CrashMode::ProcessKill;
    let mut counts = Vec::new();
    for (t, lane) in cycle.lanes.iter().enumerate() {
        let low = if kill {
            frozen.low_kill[t]
        } else {
            frozen.low_power[t]
        };
        counts.push(check_lane(config, db, lane, cycle, frozen, low)?);
    }
    let seq = read_table(config, db, SEQ_TABLE)?;
    let seq = match (seq.len(), seq.get(SEQ_KEY)) {
        (0, None) => 0,
        (1, Some(v)) => String::from_utf8_lossy(v)
            .parse()
            .unwrap_or_else(|_| panic!("counter {v:?} is no number")),
        _ => panic!("the counter table holds more than the counter: {seq:?}"),
    };
    check_no_gap(cycle, frozen.attempts, &counts, seq);
    Ok(Holds { counts, seq })
}

/// One thread's table must be the model after `n` of its commits, `low <= n <= high`.
fn check_lane(
    config: &Config,
    db: &Db,
    lane: &Lane,
    cycle: &Cycle<'_>,
    frozen: &Frozen,
    low: usize,
) -> Result<usize, String> {
    let table = read_table(config, db, &lane.table)?;
    let n: usize = table.get(COUNT_KEY).map_or(0, |v| {
        String::from_utf8_lossy(v)
            .parse()
            .unwrap_or_else(|_| panic!("thread {}: count {v:?} is no number", lane.thread))
    });
    let begun = cycle.attempts[..frozen.attempts]
        .iter()
        .filter(|a| a.thread == lane.thread)
        .count();
    let high = lane.base + begun;
    assert!(
        n >= low.max(lane.base),
        "thread {}: recovered {n} commits, but {low} were acknowledged as durable for this \
         crash and {} recovered before (an acknowledged commit lost)",
        lane.thread,
        lane.base
    );
    assert!(
        n <= high,
        "thread {}: recovered {n} commits, but only {high} were begun",
        lane.thread
    );
    if digest(&table) != lane.digests[n] {
        let model = lane.model_after(n);
        let wrong: Vec<String> = model
            .keys()
            .chain(table.keys())
            .filter(|k| model.get(*k) != table.get(*k))
            .take(5)
            .map(|k| {
                format!(
                    "{:?}: expected {:?}, found {:?}",
                    String::from_utf8_lossy(k),
                    model
                        .get(k)
                        .map(|v| String::from_utf8_lossy(&v[..v.len().min(24)])),
                    table
                        .get(k)
                        .map(|v| String::from_utf8_lossy(&v[..v.len().min(24)]))
                )
            })
            .collect();
        panic!(
            "thread {}: the table says it holds {n} commits, but it is not the model after {n} \
             (half a commit applied, or a wrong value): {wrong:?}",
            lane.thread
        );
    }
    Ok(n)
}

/// Across threads: the recovered commits are a prefix of the log order, apart from commits
/// that returned an error; the counter says where that prefix ends.
fn check_no_gap(cycle: &Cycle<'_>, begun: usize, counts: &[usize], seq: u64) {
    let attempts = &cycle.attempts[..begun];
    let position: HashMap<(usize, usize), usize> = attempts
        .iter()
        .enumerate()
        .map(|(p, a)| ((a.thread, a.index), p))
        .collect();
    let last = cycle
        .lanes
        .iter()
        .zip(counts)
        .filter(|(lane, n)| **n > lane.base)
        .map(|(lane, n)| position[&(lane.thread, n - 1)])
        .max();
    let Some(last) = last else {
        assert_eq!(
            seq, cycle.seq_base,
            "no commit of this cycle recovered, but the counter moved"
        );
        return;
    };
    for a in &attempts[..last] {
        let lane = &cycle.lanes[a.thread];
        let returned_ok = lane.outcomes[a.index - lane.base];
        assert!(
            a.index < counts[a.thread] || !returned_ok,
            "a gap: commit {} of thread {} returned Ok and is lost, while commit {} of thread \
             {}, logged after it, was recovered",
            a.index,
            a.thread,
            attempts[last].index,
            attempts[last].thread
        );
    }
    assert_eq!(
        seq,
        attempts[last].seq_before + 1,
        "the counter disagrees with the last commit recovered (commit {} of thread {})",
        attempts[last].index,
        attempts[last].thread
    );
}

fn read_table(config: &Config, db: &Db, table: &str) -> Result<Table, String> {
    let rows = db
        .scan_in(
            table,
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )
        .map_err(|e| caught(config, &format!("scan {table:?}: {e}")))?;
    Ok(rows.into_iter().collect())
}

/// An error is acceptable only under `None`, and must say where the damage is.
pub fn caught(config: &Config, error: &str) -> String {
    assert!(
        config.guard == TornPageGuard::None,
        "an error under guard {}: {error}",
        config.guard
    );
    assert!(
        error.contains("offset") || error.contains("corrupt"),
        "an error without a location: {error}"
    );
    error.to_owned()
}
