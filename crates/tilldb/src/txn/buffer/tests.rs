use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::RangeBounds;

fn put<'a>(key: &'a [u8], value: &'a [u8]) -> BufferedWrite<'a> {
    BufferedWrite {
        table: 1,
        key,
        value: Some(value),
    }
}

#[test]
fn readers_see_the_buffered_version_of_their_snapshot() {
    let mut b = WriteBuffer::default();
    b.commit(
        CommitAt { start: 30, end: 40 },
        [put(b"k", b"v1")],
        &[(1, 1)],
    );
    b.commit(
        CommitAt { start: 45, end: 55 },
        [BufferedWrite {
            table: 1,
            key: b"k",
            value: None,
        }],
        &[(1, -1)],
    );
    assert_eq!(b.seen(1, b"k", 39), Seen::Tree);
    assert_eq!(b.seen(1, b"k", 40), Seen::Value(Some(b"v1".to_vec())));
    assert_eq!(b.seen(1, b"k", 54), Seen::Value(Some(b"v1".to_vec())));
    assert_eq!(b.seen(1, b"k", 55), Seen::Value(None));
    assert_eq!(b.seen(2, b"k", 55), Seen::Tree, "other table");
    assert_eq!(b.count_delta(1, 39), 0);
    assert_eq!(b.count_delta(1, 40), 1);
    assert_eq!(b.count_delta(1, 55), 0);
    assert_eq!(b.redo_floor(), Some(30));
    b.check_invariants();

    let drained: Vec<_> = b
        .drain_writes()
        .into_iter()
        .map(|w| (w.table, w.key.to_vec(), w.value.map(<[u8]>::to_vec)))
        .collect();
    assert_eq!(drained, vec![(1, b"k".to_vec(), None)]);
    b.drained(70);
    assert_eq!(b.redo_floor(), None, "nothing left undrained");
    assert_eq!(
        b.seen(1, b"k", 40),
        Seen::Value(Some(b"v1".to_vec())),
        "below the drain"
    );
    assert_eq!(
        b.seen(1, b"k", 70),
        Seen::Tree,
        "at the drain: the tree holds it"
    );
    b.prune(69);
    assert!(!b.is_empty(), "a reader below the drain still reads it");
    b.prune(70);
    assert!(b.is_empty());
    assert_eq!(b.bytes(), 0);
    b.check_invariants();
}

#[test]
fn pruning_keeps_the_version_the_horizon_reads() {
    let mut b = WriteBuffer::default();
    b.commit(CommitAt { start: 0, end: 10 }, [put(b"k", b"1")], &[]);
    b.commit(CommitAt { start: 10, end: 20 }, [put(b"k", b"2")], &[]);
    b.commit(CommitAt { start: 20, end: 30 }, [put(b"k", b"3")], &[]);
    let before = b.live_bytes();
    b.prune(25);
    assert!(b.live_bytes() < before, "the version at 10 is dropped");
    assert_eq!(b.seen(1, b"k", 25), Seen::Value(Some(b"2".to_vec())));
    assert_eq!(b.seen(1, b"k", 30), Seen::Value(Some(b"3".to_vec())));
    b.check_invariants();
}

#[derive(Debug, Clone)]
enum Op {
    /// A buffered commit of these writes (the last of a key wins).
    Buffered(Vec<(u8, Option<u8>)>),
    /// The drain: the buffer's newest versions into the tree.
    Drain,
    /// A commit that is not buffered: a drain, then these writes to the tree.
    Tree(Vec<(u8, Option<u8>)>),
    /// The horizon moves this many commits on.
    Prune(usize),
    /// A chunk of a drain in chunks of at most this many keys (freezing the live generation
    /// first when no drain in chunks is under way).
    Chunk(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let writes = prop::collection::vec((0u8..8, prop::option::of(0u8..50)), 1..4);
    prop_oneof![
        5 => writes.clone().prop_map(Op::Buffered),
        1 => Just(Op::Drain),
        1 => writes.prop_map(Op::Tree),
        2 => (0usize..4).prop_map(Op::Prune),
        3 => (1usize..4).prop_map(Op::Chunk),
    ]
}

/// What the log holds of the buffer since the last whole drain, as replay reads it.
#[derive(Debug, Clone)]
enum Logged {
    /// A buffered commit: its lsns, writes and row delta.
    Commit(CommitAt, Vec<(u8, Option<u8>)>, i64),
    /// A chunk: its lsn, row delta, and with the last chunk the lsn it drained through.
    Chunk(u64, i64, Option<u64>),
}

/// The model: every state the commits made, and every state of the tree, by lsn.
struct Model {
    lsn: u64,
    state: BTreeMap<u8, u8>,
    tree: BTreeMap<u8, u8>,
    history: Vec<(u64, BTreeMap<u8, u8>)>,
    tree_history: Vec<(u64, BTreeMap<u8, u8>)>,
    horizon: u64,
    logged: Vec<Logged>,
}

impl Model {
    fn record(&mut self) -> CommitAt {
        let at = CommitAt {
            start: self.lsn,
            end: self.lsn + 10,
        };
        self.lsn = at.end;
        at
    }

    fn tree_at(&self, snapshot: u64) -> &BTreeMap<u8, u8> {
        &self
            .tree_history
            .iter()
            .rev()
            .find(|(lsn, _)| *lsn <= snapshot)
            .expect("the empty tree at 0")
            .1
    }

    fn drain(&mut self, b: &mut WriteBuffer) {
        let writes: Vec<(u8, Option<u8>)> = b
            .drain_writes()
            .into_iter()
            .map(|w| {
                assert_eq!(w.table, 1);
                (w.key[0], w.value.map(|v| v[0]))
            })
            .collect();
        apply(&mut self.tree, &writes);
        let at = self.record();
        b.drained(at.end);
        assert_eq!(
            self.tree, self.state,
            "a drain leaves the tree as the commits left it"
        );
        self.tree_history.push((at.end, self.tree.clone()));
        self.history.push((at.end, self.state.clone()));
        self.logged.clear();
    }

    /// The next chunk of at most `keys` keys into the tree, as its commit would.
    fn chunk(&mut self, b: &mut WriteBuffer, keys: usize) {
        let Some(chunk) = b.next_chunk(keys * version_bytes(&[0], None) - 1) else {
            assert!(
                b.redo_floor().is_none(),
                "nothing to chunk: nothing undrained"
            );
            return;
        };
        assert!((1..=keys).contains(&chunk.writes.len()), "a chunk's size");
        let writes: Vec<(u8, Option<u8>)> = chunk
            .writes
            .iter()
            .map(|(table, key, value)| {
                assert_eq!(table, 1);
                (key[0], value.map(|v| v[0]))
            })
            .collect();
        let before = i64::try_from(self.tree.len()).expect("small");
        apply(&mut self.tree, &writes);
        let delta = i64::try_from(self.tree.len()).expect("small") - before;
        let at = self.record();
        let (table, key, _) = chunk.writes.last().expect("a key");
        b.chunk_drained(at.end, (table, key), &[(1, delta)], chunk.last);
        if chunk.last {
            assert!(!b.draining(), "the last chunk ends the drain");
        }
        self.tree_history.push((at.end, self.tree.clone()));
        self.history.push((at.end, self.state.clone()));
        self.logged.push(Logged::Chunk(
            at.end,
            delta,
            chunk.last.then_some(chunk.through),
        ));
    }
}

/// A buffer rebuilt from `logged` as recovery and a read-only handle's refresh rebuild it
/// (`db/commit/buffer.rs`, `rebuild`), with a refresh's prune to its end after the first
/// `cut` records, checked against the final state over the final tree.
fn rebuilt_matches(
    logged: &[Logged],
    cut: usize,
    tree: &BTreeMap<u8, u8>,
    state: &BTreeMap<u8, u8>,
) -> Result<(), TestCaseError> {
    let mut r = WriteBuffer::default();
    let mut last = 0;
    for (i, record) in logged.iter().enumerate() {
        if i == cut {
            r.prune(last);
        }
        match record {
            Logged::Commit(at, writes, delta) => {
                let keys: Vec<[u8; 1]> = writes.iter().map(|(k, _)| [*k]).collect();
                let values: Vec<Option<[u8; 1]>> =
                    writes.iter().map(|(_, v)| v.map(|v| [v])).collect();
                r.commit(
                    *at,
                    keys.iter().zip(&values).map(|(k, v)| BufferedWrite {
                        table: 1,
                        key: k,
                        value: v.as_ref().map(|v| &v[..]),
                    }),
                    &[(1, *delta)],
                );
                last = at.end;
            }
            Logged::Chunk(at, delta, through) => {
                r.replayed_chunk(*at, &[(1, *delta)], *through);
                last = *at;
            }
        }
        r.check_invariants();
    }
    for k in 0u8..8 {
        let got = match r.seen(1, &[k], u64::MAX) {
            Seen::Tree => tree.get(&k).copied(),
            Seen::Value(v) => v.map(|v| v[0]),
        };
        prop_assert_eq!(got, state.get(&k).copied(), "rebuilt, key {}", k);
    }
    let len = i64::try_from(tree.len()).expect("small") + r.count_delta(1, u64::MAX);
    prop_assert_eq!(
        len,
        i64::try_from(state.len()).expect("small"),
        "rebuilt length"
    );
    Ok(())
}

fn apply(map: &mut BTreeMap<u8, u8>, writes: &[(u8, Option<u8>)]) {
    for &(k, v) in writes {
        match v {
            Some(v) => map.insert(k, v),
            None => map.remove(&k),
        };
    }
}

/// The writes of one commit, one per key, the last of a key winning.
fn one_per_key(writes: &[(u8, Option<u8>)]) -> Vec<(u8, Option<u8>)> {
    writes
        .iter()
        .copied()
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect()
}

proptest! {
    /// Against a model that keeps every state: a reader at any snapshot at or after the
    /// horizon, reading the buffer and then the tree as it was at its snapshot (what the
    /// overlay gives it), sees exactly the state the commits up to its snapshot made: by
    /// point reads, by a scan of the table and of a part of it, and by its length.
    #[test]
    fn buffer_over_the_tree_matches_full_history(ops in prop::collection::vec(op(), 1..40), cut in 0usize..40) {
        let mut b = WriteBuffer::default();
        let mut m = Model {
            lsn: 0,
            state: BTreeMap::new(),
            tree: BTreeMap::new(),
            history: vec![(0, BTreeMap::new())],
            tree_history: vec![(0, BTreeMap::new())],
            horizon: 0,
            logged: Vec::new(),
        };
        for op in &ops {
            match op {
                Op::Buffered(writes) => {
                    let writes = one_per_key(writes);
                    let delta: i64 = writes
                        .iter()
                        .map(|(k, v)| i64::from(v.is_some()) - i64::from(m.state.contains_key(k)))
                        .sum();
                    let keys: Vec<[u8; 1]> = writes.iter().map(|(k, _)| [*k]).collect();
                    let values: Vec<Option<[u8; 1]>> = writes.iter().map(|(_, v)| v.map(|v| [v])).collect();
                    let at = m.record();
                    b.commit(
                        at,
                        keys.iter().zip(&values).map(|(k, v)| BufferedWrite {
                            table: 1,
                            key: k,
                            value: v.as_ref().map(|v| &v[..]),
                        }),
                        &[(1, delta)],
                    );
                    apply(&mut m.state, &writes);
                    m.history.push((at.end, m.state.clone()));
                    m.logged.push(Logged::Commit(at, writes, delta));
                }
                Op::Drain => m.drain(&mut b),
                Op::Chunk(keys) => m.chunk(&mut b, *keys),
                Op::Tree(writes) => {
                    m.drain(&mut b);
                    let at = m.record();
                    apply(&mut m.tree, writes);
                    apply(&mut m.state, writes);
                    m.tree_history.push((at.end, m.tree.clone()));
                    m.history.push((at.end, m.state.clone()));
                }
                Op::Prune(steps) => {
                    let at = m.history.iter().position(|(lsn, _)| *lsn >= m.horizon).expect("the horizon is a state's lsn");
                    m.horizon = m.history[(at + steps).min(m.history.len() - 1)].0;
                    b.prune(m.horizon);
                }
            }
            b.check_invariants();
            prop_assert_eq!(b.redo_floor().is_some(), b.live_bytes() > 0 || b.draining());
            for (snapshot, state) in m.history.iter().filter(|(lsn, _)| *lsn >= m.horizon) {
                let tree = m.tree_at(*snapshot);
                for k in 0u8..8 {
                    let got = match b.seen(1, &[k], *snapshot) {
                        Seen::Tree => tree.get(&k).copied(),
                        Seen::Value(v) => v.map(|v| v[0]),
                    };
                    prop_assert_eq!(got, state.get(&k).copied(), "key {} at {}", k, snapshot);
                    prop_assert_eq!(b.seen(2, &[k], *snapshot), Seen::Tree, "another table");
                }
                for (lower, upper) in [(Bound::Unbounded, Bound::Unbounded), (Bound::Included(&[2u8][..]), Bound::Excluded(&[6u8][..]))] {
                    let in_bounds = |k: &u8| (lower, upper).contains(&&[*k][..]);
                    let mut scanned: BTreeMap<u8, u8> = tree.iter().filter(|(k, _)| in_bounds(k)).map(|(k, v)| (*k, *v)).collect();
                    for (key, value) in b.changed_in(1, (lower, upper), *snapshot) {
                        prop_assert!(in_bounds(&key[0]), "a key out of bounds");
                        match value {
                            Some(v) => scanned.insert(key[0], v[0]),
                            None => scanned.remove(&key[0]),
                        };
                    }
                    let want: BTreeMap<u8, u8> = state.iter().filter(|(k, _)| in_bounds(k)).map(|(k, v)| (*k, *v)).collect();
                    prop_assert_eq!(scanned, want, "scan at {}", snapshot);
                }
                let len = i64::try_from(tree.len()).expect("small") + b.count_delta(1, *snapshot);
                prop_assert_eq!(len, i64::try_from(state.len()).expect("small"), "length at {}", snapshot);
            }
        }
        rebuilt_matches(&m.logged, cut, &m.tree, &m.state)?;
    }
}
