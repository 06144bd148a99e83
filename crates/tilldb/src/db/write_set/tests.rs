//! Unit tests of the write set: the arena, sorted runs, spills and cursors.

use super::*;
use crate::io::{Fault, FaultKind, IoKind, SimConfig, SimDisk, Storage};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// A write set on a simulated disk that spills past `bound` bytes, and the disk.
fn spilling(bound: usize) -> (WriteSet, Arc<SimDisk>) {
    let disk = Arc::new(SimDisk::new(SimConfig::default()));
    disk.create_dir_all(Path::new("/db")).expect("mkdir");
    let storage: Arc<dyn Storage> = Arc::clone(&disk) as Arc<dyn Storage>;
    let to = SpillTo::new(storage, "/db".into(), bound);
    (WriteSet::spilling(Arc::new(to)), disk)
}

fn runs_on(disk: &SimDisk) -> usize {
    disk.list_dir(Path::new("/db")).expect("list").len()
}

type OwnedWrite = ((String, Vec<u8>), Option<Vec<u8>>);

/// Every write of a cursor, owned.
fn drain(mut cursor: Cursor<'_>) -> Vec<OwnedWrite> {
    let mut out = Vec::new();
    while let Some(w) = cursor.next().expect("read back") {
        out.push((
            (w.table.to_owned(), w.key.to_vec()),
            w.value.map(<[u8]>::to_vec),
        ));
    }
    out
}

type Model = BTreeMap<(String, Vec<u8>), Option<Vec<u8>>>;

#[derive(Debug, Clone)]
enum Op {
    Put(usize, Vec<u8>, Option<Vec<u8>>),
    Get(usize, Vec<u8>),
    Table(usize),
    /// A table's writes between two bounds, descending if the flag is set.
    Range(usize, Bound<Vec<u8>>, Bound<Vec<u8>>, bool),
    RemoveTable(usize),
}

const TABLES: [&str; 3] = ["", "orders", "a"];

fn op() -> impl Strategy<Value = Op> {
    // Short keys over few bytes: repeats, shared prefixes and keys longer than the
    // 8-byte prefix all happen.
    let key = prop::collection::vec(0u8..3, 0..11);
    let value = prop::option::of(prop::collection::vec(any::<u8>(), 0..20));
    prop_oneof![
        8 => (0..3usize, key.clone(), value).prop_map(|(t, k, v)| Op::Put(t, k, v)),
        4 => (0..3usize, key).prop_map(|(t, k)| Op::Get(t, k)),
        1 => (0..3usize).prop_map(Op::Table),
        3 => (0..3usize, bound(), bound(), any::<bool>())
            .prop_map(|(t, lo, hi, back)| Op::Range(t, lo, hi, back)),
        1 => (0..3usize).prop_map(Op::RemoveTable),
    ]
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    let key = prop::collection::vec(0u8..3, 0..11);
    prop_oneof![
        Just(Bound::Unbounded),
        key.clone().prop_map(Bound::Included),
        key.prop_map(Bound::Excluded),
    ]
}

fn model_table(model: &Model, table: &str) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    model
        .iter()
        .filter(|((t, _), _)| t == table)
        .map(|((_, k), v)| (k.clone(), v.clone()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Against a map of the latest write per (table, key): every get, every table's
    /// writes, a table's removal, and the sealed set in (table, key) order; in memory,
    /// and spilling to runs on disk (merged into larger ones) every few writes.
    #[test]
    fn the_write_set_is_a_map_of_the_latest_writes(
        ops in prop::collection::vec(op(), 0..300),
        bound in prop_oneof![Just(None), (40usize..400).prop_map(Some)],
    ) {
        let (mut set, disk) = match bound {
            None => (WriteSet::default(), None),
            Some(bound) => {
                let (set, disk) = spilling(bound);
                (set, Some(disk))
            }
        };
        let mut model = Model::new();
        for op in ops {
            match op {
                Op::Put(t, k, v) => {
                    set.put(TABLES[t], &k, v.as_deref()).expect("put");
                    model.insert((TABLES[t].to_owned(), k), v);
                }
                Op::Get(t, k) => {
                    let got = set.get(TABLES[t], &k).expect("get").map(|v| v.map(<[u8]>::to_vec));
                    prop_assert_eq!(got, model.get(&(TABLES[t].to_owned(), k)).cloned());
                }
                Op::Table(t) => {
                    let got: Vec<_> = drain(set.table(TABLES[t]).expect("table"))
                        .into_iter()
                        .map(|((_, k), v)| (k, v))
                        .collect();
                    prop_assert_eq!(got, model_table(&model, TABLES[t]));
                }
                Op::Range(t, lo, hi, back) => {
                    let direction = if back { Direction::Backward } else { Direction::Forward };
                    let mut range = set
                        .table_range(TABLES[t], lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice), direction)
                        .expect("range");
                    prop_assert!(range.current().is_none());
                    let mut got = Vec::new();
                    while let Some(w) = range.next().expect("read back") {
                        got.push((w.key.to_vec(), w.value.map(<[u8]>::to_vec)));
                        let again = range.current().expect("the write just yielded");
                        prop_assert_eq!((again.key, again.value), (got[got.len() - 1].0.as_slice(), got[got.len() - 1].1.as_deref()));
                    }
                    let mut want: Vec<_> = model_table(&model, TABLES[t])
                        .into_iter()
                        .filter(|(k, _)| std::ops::RangeBounds::contains(&(lo.clone(), hi.clone()), k))
                        .collect();
                    if back {
                        want.reverse();
                    }
                    prop_assert_eq!(got, want);
                }
                Op::RemoveTable(t) => {
                    let put = model_table(&model, TABLES[t]).iter().any(|(_, v)| v.is_some());
                    prop_assert_eq!(set.remove_table(TABLES[t]).expect("remove"), put);
                    model.retain(|(table, _), _| table != TABLES[t]);
                }
            }
        }
        prop_assert_eq!(set.is_empty(), model.is_empty());
        let sealed = set.seal();
        let got = drain(sealed.cursor().expect("cursor"));
        let want: Vec<_> = model.clone().into_iter().collect();
        prop_assert_eq!(&got, &want);
        let mut tables: Vec<&str> = model.keys().map(|(t, _)| t.as_str()).collect();
        tables.dedup();
        prop_assert_eq!(sealed.tables(), tables.clone());
        let grouped: Vec<_> = tables
            .iter()
            .flat_map(|&name| drain(sealed.table(name).expect("table")))
            .collect();
        prop_assert_eq!(&grouped, &want);
        // The runs' files go with the write set.
        drop(sealed);
        if let Some(disk) = disk {
            prop_assert_eq!(runs_on(&disk), 0);
        }
    }
}

#[test]
fn a_key_written_again_and_again_does_not_grow_the_arena_without_bound() {
    let mut set = WriteSet::default();
    let value = [5u8; 1000];
    for i in 0..50_000u32 {
        set.put("", b"counter", Some(&value)).expect("put");
        if i % 7 == 0 {
            // A read now and then sorts the pending writes, dropping the replaced ones.
            assert_eq!(
                set.get("", b"counter").expect("get"),
                Some(Some(&value[..]))
            );
        }
    }
    // 50 MB written; at most the compaction threshold twice over (and a chunk) kept.
    assert!(
        set.arena.stored_bytes <= 2 * COMPACT_DEAD_BYTES_MIN + CHUNK_BYTES,
        "{} bytes stored",
        set.arena.stored_bytes
    );
    let sealed = set.seal();
    assert_eq!(drain(sealed.cursor().expect("cursor")).len(), 1);
}

#[test]
fn a_value_larger_than_a_chunk_gets_a_chunk_of_its_own() {
    let mut set = WriteSet::default();
    let big = vec![9u8; CHUNK_BYTES * 3 + 5];
    set.put("t", b"small", Some(b"x")).expect("put");
    set.put("t", b"big", Some(&big)).expect("put");
    set.put("t", b"after", Some(b"y")).expect("put");
    assert_eq!(set.get("t", b"big").expect("get"), Some(Some(&big[..])));
    let sealed = set.seal();
    let keys: Vec<_> = drain(sealed.cursor().expect("cursor"))
        .into_iter()
        .map(|((_, k), _)| k)
        .collect();
    assert_eq!(keys, [&b"after"[..], b"big", b"small"]);
}

#[test]
fn a_write_set_past_its_bound_keeps_that_much_in_memory_and_the_rest_in_runs() {
    let (mut set, disk) = spilling(64 << 10);
    let value = [7u8; 150];
    for i in 0..20_000u32 {
        set.put("t", format!("key{i:08}").as_bytes(), Some(&value))
            .expect("put");
        assert!(
            set.resident_bytes() <= 64 << 10,
            "{} bytes",
            set.resident_bytes()
        );
    }
    // 3.6 MB written: about 56 runs of 64 KiB, merged by sixteens.
    assert!(runs_on(&disk) >= 4, "{} runs", runs_on(&disk));
    assert!(
        runs_on(&disk) < 2 * RUNS_PER_LEVEL,
        "{} runs",
        runs_on(&disk)
    );
    assert_eq!(
        set.get("t", b"key00000017").expect("get"),
        Some(Some(&value[..]))
    );
    assert_eq!(set.get("t", b"key99999999").expect("get"), None);
    let sealed = set.seal();
    let all = drain(sealed.cursor().expect("cursor"));
    assert_eq!(all.len(), 20_000);
    assert!(
        all.windows(2).all(|w| w[0].0 < w[1].0),
        "in key order, once each"
    );
    drop(sealed);
    assert_eq!(runs_on(&disk), 0, "the runs go with the write set");
}

#[test]
fn a_spill_that_fails_leaves_the_write_set_as_it_was() {
    let (mut set, disk) = spilling(4 << 10);
    let mut i = 0u32;
    // Up to the bound: in memory.
    while set.resident_bytes() < 3 << 10 {
        set.put("t", &i.to_le_bytes(), Some(&[1u8; 100]))
            .expect("put");
        i += 1;
    }
    disk.inject(Fault::once(IoKind::Write, 1, FaultKind::Enospc).on_path("txn-writes-"));
    let mut failed = None;
    for j in i..i + 100 {
        if let Err(e) = set.put("t", &j.to_le_bytes(), Some(&[1u8; 100])) {
            failed = Some((j, e));
            break;
        }
    }
    let (j, e) = failed.expect("a spill hit the full disk");
    assert!(e.to_string().contains("txn-writes-"), "{e}");
    assert_eq!(runs_on(&disk), 0, "the run cut short is removed");
    // Every write before the failed one is there; the failed one is not; the next
    // spill succeeds.
    for k in 0..j {
        assert_eq!(
            set.get("t", &k.to_le_bytes()).expect("get"),
            Some(Some(&[1u8; 100][..])),
            "{k}"
        );
    }
    assert_eq!(set.get("t", &j.to_le_bytes()).expect("get"), None);
    set.put("t", &j.to_le_bytes(), Some(&[2u8; 100]))
        .expect("put again");
    let sealed = set.seal();
    assert_eq!(
        drain(sealed.cursor().expect("cursor")).len(),
        j as usize + 1
    );
}

#[test]
fn a_spilled_block_that_reads_back_changed_is_corruption_naming_the_file_and_offset() {
    let (mut set, disk) = spilling(4 << 10);
    for i in 0..400u32 {
        set.put("t", &i.to_le_bytes(), Some(&[3u8; 100]))
            .expect("put");
    }
    let names = disk.list_dir(Path::new("/db")).expect("list");
    let first = names.iter().min().expect("a run");
    disk.corrupt(&Path::new("/db").join(first), 40, 0x10);
    let sealed = set.seal();
    // A cursor reads each run's first block as it is made.
    let err = match sealed.cursor() {
        Err(e) => e,
        Ok(mut cursor) => loop {
            match cursor.next() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("a changed block read back whole"),
                Err(e) => break e,
            }
        },
    };
    match err {
        crate::Error::Corruption { file, offset, .. } => {
            assert!(file.ends_with(first), "{}", file.display());
            assert_eq!(offset, 0);
        }
        other => panic!("{other}"),
    }
}

/// Runs on disk of several blocks (merged from 16 runs of one level), read in both
/// directions between bounds that fall inside blocks and at their edges, against a map.
#[test]
fn a_range_reads_spilled_runs_of_many_blocks_in_both_directions() {
    let (mut set, _disk) = spilling(64 << 10);
    let mut model = BTreeMap::new();
    let mut x: u64 = 7;
    for i in 0..24_000u32 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let key = format!("{:06}", x % 20_000).into_bytes();
        let value = (i % 5 != 0).then(|| vec![(i % 251) as u8; 100]);
        let table = if i % 7 == 0 { "a" } else { "orders" };
        set.put(table, &key, value.as_deref()).expect("put");
        model.insert((table.to_owned(), key), value);
    }
    assert!(
        set.disk.runs.iter().any(|r| r.blocks_len() > 2),
        "a run of more than two blocks: {:?}",
        set.disk.runs
    );
    let bounds = [
        Bound::Unbounded,
        Bound::Included(b"000000".to_vec()),
        Bound::Excluded(b"004321".to_vec()),
        Bound::Included(b"012345".to_vec()),
        Bound::Excluded(b"019999".to_vec()),
    ];
    for table in ["a", "orders", "absent"] {
        for lo in &bounds {
            for hi in &bounds {
                for direction in [Direction::Forward, Direction::Backward] {
                    let range = set
                        .table_range(
                            table,
                            lo.as_ref().map(Vec::as_slice),
                            hi.as_ref().map(Vec::as_slice),
                            direction,
                        )
                        .expect("range");
                    let got: Vec<_> = drain(range).into_iter().map(|((_, k), v)| (k, v)).collect();
                    let mut want: Vec<_> = model_table(&model, table)
                        .into_iter()
                        .filter(|(k, _)| {
                            std::ops::RangeBounds::contains(&(lo.clone(), hi.clone()), k)
                        })
                        .collect();
                    if direction == Direction::Backward {
                        want.reverse();
                    }
                    assert_eq!(
                        got.len(),
                        want.len(),
                        "{table:?} {lo:?}..{hi:?} {direction:?}"
                    );
                    assert!(got == want, "{table:?} {lo:?}..{hi:?} {direction:?}");
                }
            }
        }
    }
}
