//! The rows of `till bench kv` (the table in `kv.rs`) and the keys and values they write:
//! every engine gets the same keys in the same order.

use crate::store_load::XorShift;

/// Bytes per key.
pub const KEY_BYTES: usize = 24;
/// Bytes per value.
pub const VALUE_BYTES: usize = 150;
/// One-row durable transactions of `individual_writes`.
pub const INDIVIDUAL_WRITES: usize = 1_000;
/// Transactions of `batch_writes`, and the rows of each.
pub const BATCHES: usize = 100;
pub const BATCH_ROWS: usize = 1_000;
/// One-row no-flush transactions of `no_flush_writes`.
pub const NO_FLUSH_WRITES: usize = 50_000;
/// Rows per transaction of `sorted_inserts`.
pub const SORTED_TXN_ROWS: usize = 1_000;
/// Keys one range read returns.
pub const RANGE_KEYS: usize = 10;
/// The first byte of every sorted insert's key; every other key's first byte is below it.
const SORTED_FIRST_BYTE: u8 = 0xFF;
/// Leading 0xFF bytes of every key of `sorted_load`: above every other key of the run.
const APPENDED_PREFIX: usize = 8;
/// The range of `extract_if`: keys from the first to the second (excluded), about a tenth of
/// the random keys.
pub const EXTRACT_FROM: &[u8] = &[0x00];
pub const EXTRACT_TO: &[u8] = &[0x1A];

/// Whether `retain` keeps `key`: its last byte is even (about half the keys).
pub fn keep(key: &[u8]) -> bool {
    key[KEY_BYTES - 1].is_multiple_of(2)
}

/// Whether `extract_if` takes `key`: its next-to-last byte is a multiple of four (about a
/// quarter of the range).
pub fn take(key: &[u8]) -> bool {
    key[KEY_BYTES - 2].is_multiple_of(4)
}

/// Pops of `pop_first_last` at `rows` (N/100, at least 10).
pub fn pops(rows: u64) -> usize {
    usize::try_from(rows / 100).unwrap_or(usize::MAX).max(10)
}
/// Seed of the keys (the same for every engine and run).
const SEED: u64 = 0x4B56_2D4B_4559_5300;

pub type Key = [u8; KEY_BYTES];
pub type Value = [u8; VALUE_BYTES];

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    BulkLoad,
    IndividualWrites,
    BatchWrites,
    NoFlushWrites,
    SortedInserts,
    /// Random point reads from this many threads.
    PointReads(usize),
    RangeReads,
    Removals,
    Length,
    /// N/100 pops, alternately the first entry and the last, in one transaction.
    PopFirstLast,
    /// One transaction removing every entry whose key [`keep`] rejects.
    Retain,
    /// One transaction removing and returning the entries of [`EXTRACT_FROM`]..[`EXTRACT_TO`]
    /// that [`take`] selects.
    ExtractIf,
    /// N keys above every other, ascending, in one transaction (the engine's sorted path).
    SortedLoad,
    SizeBeforeCompaction,
    SizeAfterCompaction,
}

impl Workload {
    /// Every row, in the order they run.
    pub fn all(threads: &[usize]) -> Vec<Workload> {
        let mut rows = vec![
            Workload::BulkLoad,
            Workload::IndividualWrites,
            Workload::BatchWrites,
            Workload::NoFlushWrites,
            Workload::SortedInserts,
        ];
        rows.extend(threads.iter().map(|&t| Workload::PointReads(t)));
        rows.extend([
            Workload::RangeReads,
            Workload::Removals,
            Workload::Length,
            Workload::PopFirstLast,
            Workload::Retain,
            Workload::ExtractIf,
            Workload::SortedLoad,
            Workload::SizeBeforeCompaction,
            Workload::SizeAfterCompaction,
        ]);
        rows
    }

    /// The name in JSON.
    pub fn name(self) -> String {
        match self {
            Workload::BulkLoad => "bulk_load".into(),
            Workload::IndividualWrites => "individual_writes".into(),
            Workload::BatchWrites => "batch_writes".into(),
            Workload::NoFlushWrites => "no_flush_writes".into(),
            Workload::SortedInserts => "sorted_inserts".into(),
            Workload::PointReads(t) => format!("point_reads_t{t}"),
            Workload::RangeReads => "range_reads".into(),
            Workload::Removals => "removals".into(),
            Workload::Length => "length".into(),
            Workload::PopFirstLast => "pop_first_last".into(),
            Workload::Retain => "retain".into(),
            Workload::ExtractIf => "extract_if".into(),
            Workload::SortedLoad => "sorted_load".into(),
            Workload::SizeBeforeCompaction => "size_before_compaction".into(),
            Workload::SizeAfterCompaction => "size_after_compaction".into(),
        }
    }

    /// The row's label in the table, with its operation count for `rows` (N).
    pub fn label(self, rows: u64) -> String {
        match self {
            Workload::BulkLoad => format!("bulk load, {rows} rows in 1 txn"),
            Workload::IndividualWrites => format!("{INDIVIDUAL_WRITES} durable 1-row commits"),
            Workload::BatchWrites => format!("{BATCHES} durable txns of {BATCH_ROWS} rows"),
            Workload::NoFlushWrites => format!("{NO_FLUSH_WRITES} no-flush 1-row commits"),
            Workload::SortedInserts => format!("{} sorted inserts", rows / 5),
            Workload::PointReads(t) => format!("random point reads, {t} threads"),
            Workload::RangeReads => format!("{} range reads of {RANGE_KEYS} keys", rows / 10),
            Workload::Removals => format!("remove {} rows in 1 txn", rows / 2),
            Workload::Length => "table length".into(),
            Workload::PopFirstLast => format!("{} pops, first and last, in 1 txn", pops(rows)),
            Workload::Retain => "retain half of the table in 1 txn (rows read)".into(),
            Workload::ExtractIf => "extract a quarter of a tenth in 1 txn (rows taken)".into(),
            Workload::SortedLoad => format!("sorted load, {rows} keys in 1 txn"),
            Workload::SizeBeforeCompaction => "size before compaction".into(),
            Workload::SizeAfterCompaction => "size after compaction".into(),
        }
    }

    /// What the row's value counts.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::BulkLoad
            | Workload::BatchWrites
            | Workload::SortedInserts
            | Workload::Removals
            | Workload::PopFirstLast
            | Workload::Retain
            | Workload::ExtractIf
            | Workload::SortedLoad => "rows/s",
            Workload::IndividualWrites | Workload::NoFlushWrites => "commits/s",
            Workload::PointReads(_) => "reads/s",
            Workload::RangeReads => "ranges/s",
            Workload::Length => "ms",
            Workload::SizeBeforeCompaction | Workload::SizeAfterCompaction => "bytes",
        }
    }

    /// Rates are better high; times and sizes low.
    pub fn higher_is_better(self) -> bool {
        !matches!(
            self,
            Workload::Length | Workload::SizeBeforeCompaction | Workload::SizeAfterCompaction
        )
    }
}

/// The JSON names of every row, in order.
#[cfg(test)]
pub fn names(threads: &[usize]) -> Vec<String> {
    Workload::all(threads)
        .into_iter()
        .map(Workload::name)
        .collect()
}

/// The keys of a run, made once and given to every engine.
#[derive(Debug)]
pub struct Keys {
    /// The bulk load's N random keys; reads pick from them, removals take the first half.
    pub loaded: Vec<Key>,
    pub individual: Vec<Key>,
    pub batches: Vec<Key>,
    pub no_flush: Vec<Key>,
    /// N/5 keys above every other, ascending.
    pub sorted: Vec<Key>,
    /// N keys above those, ascending: `sorted_load`'s.
    pub appended: Vec<Key>,
}

impl Keys {
    pub fn generate(rows: usize) -> Keys {
        let mut rng = XorShift::new(SEED);
        let mut random = |count: usize| -> Vec<Key> { (0..count).map(|_| key(&mut rng)).collect() };
        let loaded = random(rows);
        let individual = random(INDIVIDUAL_WRITES);
        let batches = random(BATCHES * BATCH_ROWS);
        let no_flush = random(NO_FLUSH_WRITES);
        let mut sorted = random(rows / 5);
        for k in &mut sorted {
            k[0] = SORTED_FIRST_BYTE;
        }
        sorted.sort_unstable();
        sorted.dedup();
        assert!(
            sorted.windows(2).all(|w| w[0] < w[1]),
            "sorted keys not ascending"
        );
        assert!(loaded.iter().all(|k| k[0] < SORTED_FIRST_BYTE));
        let appended: Vec<Key> = (0..rows as u64)
            .map(|i| {
                let mut k = [0xFF; KEY_BYTES];
                // Most significant byte first, so that the keys ascend with `i`.
                let mut counter = i.to_le_bytes();
                counter.reverse();
                k[APPENDED_PREFIX..APPENDED_PREFIX + 8].copy_from_slice(&counter);
                k
            })
            .collect();
        assert!(
            sorted
                .last()
                .is_none_or(|last| appended.first().is_none_or(|a| a > last)),
            "appended keys not above the sorted ones"
        );
        Keys {
            loaded,
            individual,
            batches,
            no_flush,
            sorted,
            appended,
        }
    }

    /// Entries a store holds after every write row and the removals succeeded (24 random
    /// bytes do not collide).
    pub fn expected_entries(&self) -> u64 {
        let written = self.loaded.len()
            + self.individual.len()
            + self.batches.len()
            + self.no_flush.len()
            + self.sorted.len()
            - self.removed().len();
        written as u64
    }

    /// The keys the removals row removes: the first half of the loaded ones.
    pub fn removed(&self) -> &[Key] {
        &self.loaded[..self.loaded.len() / 2]
    }
}

/// A random key whose first byte is below [`SORTED_FIRST_BYTE`].
fn key(rng: &mut XorShift) -> Key {
    let mut k = [0u8; KEY_BYTES];
    for chunk in k.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    k[0] = k[0].min(SORTED_FIRST_BYTE - 1);
    k
}

/// The value stored under `key`: 150 bytes, random, made from the key (so nothing holds N
/// values; making one costs about 20 ns, the same for every engine).
pub fn value_of(key: &Key) -> Value {
    let mut seed = [0u8; 8];
    seed.copy_from_slice(&key[KEY_BYTES - 8..]);
    let mut rng = XorShift::new(u64::from_le_bytes(seed));
    let mut v = [0u8; VALUE_BYTES];
    for chunk in v.chunks_mut(8) {
        let bytes = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_disjoint_and_sorted_keys_come_last() {
        let keys = Keys::generate(1000);
        assert_eq!(keys.loaded.len(), 1000);
        assert_eq!(keys.sorted.len(), 200);
        let max_random = keys
            .loaded
            .iter()
            .chain(&keys.individual)
            .chain(&keys.batches)
            .chain(&keys.no_flush)
            .max()
            .expect("keys");
        assert!(keys.sorted[0] > *max_random);
        assert_eq!(
            keys.expected_entries(),
            1000 + 1000 + 100_000 + 50_000 + 200 - 500
        );
        assert_eq!(value_of(&keys.loaded[0]), value_of(&keys.loaded[0]));
        assert_ne!(value_of(&keys.loaded[0]), value_of(&keys.loaded[1]));
    }
}
