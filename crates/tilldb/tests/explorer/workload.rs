//! The canonical small workloads the explorer crashes at every step, and the model they are
//! checked against.
//!
//! Each workload is a fixed list of steps (commits and checkpoints) chosen to reach one part
//! of the engine: the first commit of a new database, small transactions, a leaf split, a
//! root split, checkpoints, log segment switches and recycling, doublewrite batches, free-page
//! reuse, overflow values. Steps are plain data, so one workload gives the same calls, and
//! with `Options::background_threads` off the same I/O, on every run.

use std::collections::BTreeMap;
use tilldb::Durability;

/// Table, key -> value: the whole database as the model sees it.
pub type Model = BTreeMap<(String, Vec<u8>), Vec<u8>>;

/// One change of a commit: table, key, new value (`None`: delete).
pub type Op = (String, Vec<u8>, Option<Vec<u8>>);

/// One step of a workload.
#[derive(Debug, Clone)]
pub enum Step {
    Commit(Vec<Op>),
    Checkpoint,
}

/// A workload: its steps, and the log segment size that makes it reach what it is for.
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: &'static str,
    pub steps: Vec<Step>,
    pub segment_bytes: u64,
}

impl Workload {
    /// The commits alone, in order (commit `c` is the c-th `Step::Commit`).
    pub fn commits(&self) -> Vec<&[Op]> {
        self.steps
            .iter()
            .filter_map(|step| match step {
                Step::Commit(ops) => Some(ops.as_slice()),
                Step::Checkpoint => None,
            })
            .collect()
    }

    /// The model after the first `n` commits.
    pub fn model_after(&self, n: usize) -> Model {
        let mut model = Model::new();
        for ops in self.commits().into_iter().take(n) {
            apply(&mut model, ops);
        }
        model
    }

    /// The tables any commit writes, the default table `""` included.
    pub fn tables(&self) -> Vec<String> {
        let mut tables: Vec<String> = self
            .commits()
            .iter()
            .flat_map(|ops| ops.iter().map(|(t, _, _)| t.clone()))
            .chain([String::new()])
            .collect();
        tables.sort();
        tables.dedup();
        tables
    }
}

pub fn apply(model: &mut Model, ops: &[Op]) {
    for (t, k, v) in ops {
        match v {
            Some(v) => model.insert((t.clone(), k.clone()), v.clone()),
            None => model.remove(&(t.clone(), k.clone())),
        };
    }
}

/// The durability of commit `c` in a scenario at `level`: every third commit of a `Buffered`
/// or `Lazy` scenario is `Sync`, so the others have a durable commit after them to ride on.
pub fn durability_of(level: Durability, c: usize) -> Durability {
    if c % 3 == 2 { Durability::Sync } else { level }
}

fn put(table: &str, key: impl Into<Vec<u8>>, value: Vec<u8>) -> Op {
    (table.to_owned(), key.into(), Some(value))
}

fn delete(table: &str, key: impl Into<Vec<u8>>) -> Op {
    (table.to_owned(), key.into(), None)
}

/// A value that names its commit, `len` bytes long.
fn value(commit: usize, len: usize) -> Vec<u8> {
    let mut v = format!("c{commit}-").into_bytes();
    v.resize(
        len.max(v.len()),
        b'a' + u8::try_from(commit % 26).expect("small"),
    );
    v
}

/// `n` puts of keys `first..first + n` (zero-padded to `key_len`) into `table`.
fn puts(table: &str, commit: usize, first: usize, n: usize, key_len: usize, len: usize) -> Vec<Op> {
    (first..first + n)
        .map(|i| {
            let mut key = format!("k{i:05}").into_bytes();
            key.resize(key_len.max(key.len()), b'.');
            put(table, key, value(commit, len))
        })
        .collect()
}

/// Every canonical workload.
pub fn all() -> Vec<Workload> {
    vec![
        first_commit(),
        small_txns(),
        leaf_split(),
        root_split(),
        checkpoints(),
        segment_switch_and_recycle(),
        doublewrite_batch(),
        free_page_reuse(),
        overflow_values(),
        multi_part_commit(),
    ]
}

/// Commits too large for one part (issue 36): with the explorer's 12-page cache a commit is
/// cut into parts every 4 pages it changes (the second and third here: two and three log
/// records), and spills pages held for its last part. A crash
/// at every write and cut of them must leave all of each or none (`record` asserts that the
/// parts happened).
fn multi_part_commit() -> Workload {
    let steps = vec![
        Step::Commit(puts("", 0, 0, 6, 8, 60)),
        Step::Commit(puts("", 1, 6, 80, 8, 150)),
        Step::Commit({
            let mut ops = puts("", 2, 0, 40, 8, 200);
            ops.extend((50..60).map(|i| delete("", format!("k{i:05}.."))));
            ops
        }),
        Step::Commit(puts("", 3, 50, 2, 8, 20)),
    ];
    Workload {
        name: "multi-part-commit",
        steps,
        segment_bytes: 32 << 10,
    }
}

/// Creating the database and its first commit.
fn first_commit() -> Workload {
    Workload {
        name: "first-commit",
        steps: vec![Step::Commit(vec![put("", "alpha", value(0, 20))])],
        segment_bytes: 16 << 10,
    }
}

/// A few small transactions over two tables, with overwrites and deletes.
fn small_txns() -> Workload {
    let steps = vec![
        Step::Commit(vec![
            put("", "a", value(0, 10)),
            put("t", "b", value(0, 30)),
        ]),
        Step::Commit(vec![put("", "c", value(1, 10))]),
        Step::Commit(vec![put("", "a", value(2, 40)), delete("t", "b")]),
        Step::Commit(vec![
            put("t", "d", value(3, 10)),
            put("t", "e", value(3, 10)),
        ]),
        Step::Commit(vec![delete("", "c"), put("", "f", value(4, 90))]),
        Step::Commit(vec![put("t", "b", value(5, 5))]),
    ];
    Workload {
        name: "small-txns",
        steps,
        segment_bytes: 16 << 10,
    }
}

/// Enough rows to split the first leaf, then an update of rows on both halves.
fn leaf_split() -> Workload {
    let steps = vec![
        Step::Commit(puts("", 0, 0, 20, 8, 120)),
        Step::Commit(puts("", 1, 20, 20, 8, 120)),
        Step::Commit(puts("", 2, 5, 30, 8, 60)),
    ];
    Workload {
        name: "leaf-split",
        steps,
        segment_bytes: 32 << 10,
    }
}

/// Long keys, so inner nodes hold few and the root splits: a three-level tree.
fn root_split() -> Workload {
    let steps = (0..6)
        .map(|c| Step::Commit(puts("", c, c * 40, 40, 300, 20)))
        .collect();
    Workload {
        name: "root-split",
        steps,
        segment_bytes: 64 << 10,
    }
}

/// Commits, a checkpoint, commits to the same pages (full-page images after the horizon),
/// another checkpoint, more commits.
fn checkpoints() -> Workload {
    let steps = vec![
        Step::Commit(puts("", 0, 0, 30, 8, 100)),
        Step::Commit(puts("t", 1, 0, 10, 8, 100)),
        Step::Checkpoint,
        Step::Commit(puts("", 2, 10, 10, 8, 50)),
        Step::Commit(puts("t", 3, 5, 10, 8, 50)),
        Step::Checkpoint,
        Step::Commit(puts("", 4, 0, 5, 8, 200)),
        Step::Commit(vec![delete("t", "k00007")]),
    ];
    Workload {
        name: "checkpoints",
        steps,
        segment_bytes: 32 << 10,
    }
}

/// Tiny log segments: commits cross segment ends, and checkpoints let old segments be
/// recycled.
fn segment_switch_and_recycle() -> Workload {
    let mut steps = Vec::new();
    for c in 0..16 {
        steps.push(Step::Commit(puts("", c, (c * 3) % 20, 3, 8, 150)));
        if c % 6 == 5 {
            steps.push(Step::Checkpoint);
        }
    }
    Workload {
        name: "segment-switch",
        steps,
        segment_bytes: 8 << 10,
    }
}

/// Many dirty pages in a small cache, so a checkpoint writes them back in one batch (a
/// doublewrite batch under that guard), and misses write dirty pages back.
fn doublewrite_batch() -> Workload {
    let mut steps: Vec<Step> = (0..5)
        .map(|c| Step::Commit(puts(["", "t", "u"][c % 3], c, c * 20, 30, 40, 150)))
        .collect();
    steps.push(Step::Checkpoint);
    steps.push(Step::Commit(puts("", 5, 0, 40, 40, 30)));
    steps.push(Step::Checkpoint);
    Workload {
        name: "doublewrite-batch",
        steps,
        segment_bytes: 64 << 10,
    }
}

/// Rows in several leaves, most deleted (merges free pages), a checkpoint, then new rows
/// that take the freed pages again.
fn free_page_reuse() -> Workload {
    let mut steps = vec![
        Step::Commit(puts("", 0, 0, 40, 8, 150)),
        Step::Commit(puts("", 1, 40, 40, 8, 150)),
    ];
    steps.push(Step::Commit(
        (0..70).map(|i| delete("", format!("k{i:05}"))).collect(),
    ));
    steps.push(Step::Checkpoint);
    steps.push(Step::Commit(puts("", 3, 200, 40, 8, 150)));
    steps.push(Step::Commit(puts("", 4, 300, 30, 8, 150)));
    Workload {
        name: "free-page-reuse",
        steps,
        segment_bytes: 64 << 10,
    }
}

/// Values larger than a page (overflow chains): put, replace, delete.
fn overflow_values() -> Workload {
    let steps = vec![
        Step::Commit(vec![
            put("", "big", value(0, 9000)),
            put("", "small", value(0, 10)),
        ]),
        Step::Commit(vec![put("", "big", value(1, 5000))]),
        Step::Checkpoint,
        Step::Commit(vec![delete("", "big"), put("", "big2", value(2, 6000))]),
    ];
    Workload {
        name: "overflow",
        steps,
        segment_bytes: 64 << 10,
    }
}
