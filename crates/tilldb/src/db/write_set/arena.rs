//! The write set's arena: keys and values copied back to back into chunks, and the 32-byte
//! [`Entry`] that names each put or delete (see `write_set/mod.rs` for why).

use super::{CHUNK_BYTES, FIRST_CHUNK_BYTES};
use std::cmp::Ordering;
use std::collections::HashMap;

/// `Entry::value_len` of a delete.
pub(super) const DELETED: u32 = u32::MAX;

/// One put or delete: where its key and value lie in the arena.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    /// The key's first 8 bytes, big-endian, zero-padded: ordered as the keys are where they
    /// differ (a tie falls back to the whole keys).
    pub(super) prefix: u64,
    /// The chunk, and the key's offset in it; the value follows the key.
    pub(super) chunk: u32,
    pub(super) at: u32,
    pub(super) key_len: u32,
    /// The value's length, or [`DELETED`].
    pub(super) value_len: u32,
    /// The table's index in `Arena::tables`.
    pub(super) table: u32,
}

impl Entry {
    pub(super) fn bytes(&self) -> usize {
        self.key_len as usize + self.value_bytes()
    }

    pub(super) fn value_bytes(&self) -> usize {
        if self.value_len == DELETED {
            0
        } else {
            self.value_len as usize
        }
    }
}

#[expect(
    clippy::big_endian_bytes,
    reason = "big-endian so that the prefixes' order is the keys' byte order"
)]
pub(super) fn prefix_of(key: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    let n = key.len().min(8);
    head[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(head)
}

/// How many tables [`Arena::find_table`] looks through in order before it hashes.
const TABLES_SCANNED: usize = 8;

/// Whether two table names are the same: by length first, so that the default table's empty
/// name compares without a call to `memcmp` (which `==` on two slices makes at any length).
pub(in crate::db) fn same_name(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

/// The keys and values, and the tables' names.
#[derive(Debug, Default)]
pub(super) struct Arena {
    pub(super) chunks: Vec<Vec<u8>>,
    /// Table names by index, in first-use order.
    pub(super) tables: Vec<String>,
    pub(super) index: HashMap<String, u32>,
    /// Key and value bytes stored, live or dead.
    pub(super) stored_bytes: usize,
}

impl Arena {
    /// The index of `table`, added if new.
    pub(super) fn table_id(&mut self, table: &str) -> u32 {
        if let Some(id) = self.find_table(table) {
            return id;
        }
        let id = u32::try_from(self.tables.len()).expect("tables fit u32");
        self.tables.push(table.to_owned());
        self.index.insert(table.to_owned(), id);
        id
    }

    /// Forgets every key and value (the tables stay).
    pub(super) fn clear_bytes(&mut self) {
        self.chunks.clear();
        self.stored_bytes = 0;
    }

    /// The index of `table`, if it has one. A transaction writes to a few tables: they are
    /// looked for in order (names compared by length first), and hashed only past
    /// [`TABLES_SCANNED`]. Hashing the name and comparing it were a sixth of a pop (`Txn::pop_first`:
    /// each looks its table up twice).
    pub(super) fn find_table(&self, table: &str) -> Option<u32> {
        if self.tables.len() <= TABLES_SCANNED {
            return self
                .tables
                .iter()
                .position(|name| same_name(name, table))
                .map(|id| u32::try_from(id).expect("tables fit u32"));
        }
        self.index.get(table).copied()
    }

    pub(super) fn push(&mut self, table: u32, key: &[u8], value: Option<&[u8]>) -> Entry {
        let value_len = value.map_or(0, <[u8]>::len);
        let len = key.len() + value_len;
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= len);
        if !fits {
            // The first chunks small, doubling: a transaction of a few writes (most of them)
            // allocates a few KiB, not a chunk of 1 MiB.
            let size = self
                .chunks
                .last()
                .map_or(FIRST_CHUNK_BYTES, |c| (c.capacity() * 2).min(CHUNK_BYTES));
            self.chunks.push(Vec::with_capacity(size.max(len)));
        }
        let chunk_index = self.chunks.len() - 1;
        let chunk = self.chunks.last_mut().expect("pushed above");
        let at = chunk.len();
        chunk.extend_from_slice(key);
        if let Some(v) = value {
            chunk.extend_from_slice(v);
        }
        self.stored_bytes += len;
        let value_len = match value {
            Some(v) => {
                let len = u32::try_from(v.len()).expect("values are checked below 4 GiB");
                assert_ne!(len, DELETED, "a value of u32::MAX bytes");
                len
            }
            None => DELETED,
        };
        Entry {
            prefix: prefix_of(key),
            chunk: u32::try_from(chunk_index).expect("chunks fit u32"),
            at: u32::try_from(at).expect("a chunk is under 4 GiB"),
            key_len: u32::try_from(key.len()).expect("keys are short"),
            value_len,
            table,
        }
    }

    pub(super) fn key(&self, e: &Entry) -> &[u8] {
        let at = e.at as usize;
        &self.chunks[e.chunk as usize][at..at + e.key_len as usize]
    }

    pub(super) fn value(&self, e: &Entry) -> Option<&[u8]> {
        if e.value_len == DELETED {
            return None;
        }
        let at = e.at as usize + e.key_len as usize;
        Some(&self.chunks[e.chunk as usize][at..at + e.value_len as usize])
    }

    pub(super) fn cmp(&self, a: &Entry, b: &Entry) -> Ordering {
        if a.table != b.table {
            return self.tables[a.table as usize]
                .as_bytes()
                .cmp(self.tables[b.table as usize].as_bytes());
        }
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| self.key(a).cmp(self.key(b)))
    }

    /// `e` against the probe (`table`, `key` with `prefix`).
    pub(super) fn cmp_probe(&self, e: &Entry, table: u32, prefix: u64, key: &[u8]) -> Ordering {
        if e.table != table {
            return self.tables[e.table as usize]
                .as_bytes()
                .cmp(self.tables[table as usize].as_bytes());
        }
        e.prefix.cmp(&prefix).then_with(|| self.key(e).cmp(key))
    }

    /// `entries` (in put order) sorted, the latest of each key kept. Adds the bytes of the
    /// ones dropped to `dead`.
    pub(super) fn sorted_run(&self, mut entries: Vec<Entry>, dead: &mut usize) -> Vec<Entry> {
        // Stable: equal keys stay in put order, and the dedup keeps the last.
        entries.sort_by(|a, b| self.cmp(a, b));
        entries.dedup_by(|later, kept| {
            if self.cmp(later, kept) == Ordering::Equal {
                *dead += kept.bytes();
                std::mem::swap(later, kept);
                true
            } else {
                false
            }
        });
        entries
    }

    /// Two sorted runs as one; of a key in both, `newer`'s entry.
    pub(super) fn merge(
        &self,
        older: Vec<Entry>,
        newer: Vec<Entry>,
        dead: &mut usize,
    ) -> Vec<Entry> {
        let mut out = Vec::with_capacity(older.len() + newer.len());
        let (mut a, mut b) = (older.into_iter().peekable(), newer.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => match self.cmp(x, y) {
                    Ordering::Less => a.next(),
                    Ordering::Greater => b.next(),
                    Ordering::Equal => {
                        *dead += x.bytes();
                        a.next();
                        b.next()
                    }
                },
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            out.push(next.expect("peeked"));
        }
        out
    }

    /// The entries of table `id` in a sorted run (contiguous: tables sort by name).
    pub(super) fn table_slice<'r>(&self, run: &'r [Entry], id: u32) -> &'r [Entry] {
        // A run of one table (the usual case) is that table's whole, or none of it.
        match (run.first(), run.last()) {
            (Some(first), Some(last)) if first.table == last.table => {
                return if first.table == id { run } else { &run[..0] };
            }
            _ => {}
        }
        let name = self.tables[id as usize].as_bytes();
        let start = run
            .partition_point(|e| e.table != id && self.tables[e.table as usize].as_bytes() < name);
        let len = run[start..].partition_point(|e| e.table == id);
        &run[start..start + len]
    }

    /// Copies the entries' keys and values into fresh chunks (dropping the dead bytes).
    pub(super) fn compact<'a>(&mut self, runs: impl Iterator<Item = &'a mut Vec<Entry>>) {
        let mut fresh = Arena {
            chunks: Vec::new(),
            tables: std::mem::take(&mut self.tables),
            index: std::mem::take(&mut self.index),
            stored_bytes: 0,
        };
        for run in runs {
            for e in run.iter_mut() {
                let (key, value) = (self.key(e), self.value(e));
                *e = fresh.push(e.table, key, value);
            }
        }
        *self = fresh;
    }
}
