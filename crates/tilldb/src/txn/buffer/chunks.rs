//! The drain in chunks (the module doc of `txn/buffer.rs`, "Chunks"): the frozen
//! generation, its next chunk, and what a chunk's commit, or its record read back, changes.

use super::keys::{BufKey, KeyView, Versions};
use super::{Generation, OwnedWrites, TableId, WriteBuffer, version_bytes};
use std::ops::Bound;

/// The generation a drain in chunks is applying to the tree (see the module doc).
#[derive(Debug)]
pub(super) struct Frozen {
    pub(super) generation: Generation,
    /// The last (table, key) a chunk applied; `None` before the first chunk.
    pub(super) applied_through: Option<(TableId, BufKey)>,
}

impl Frozen {
    /// Its keys no chunk applied yet, in (table, key) order, with their newest versions.
    pub(super) fn remaining(&self) -> impl Iterator<Item = (TableId, &BufKey, &Versions)> {
        let from = self.applied_through.as_ref();
        self.generation
            .entries
            .range(from.map_or(0, |(table, _)| *table)..)
            .flat_map(move |(&table, keys)| {
                let after = from.filter(|(t, _)| *t == table).map(|(_, key)| key);
                let lower = after.map_or(Bound::Unbounded, |key| Bound::Excluded(key.as_view()));
                keys.range::<dyn KeyView, _>((lower, Bound::Unbounded))
                    .map(move |(key, versions)| (table, key, versions))
            })
    }
}

/// The next chunk of a drain in chunks ([`WriteBuffer::next_chunk`]).
#[derive(Debug)]
pub struct Chunk {
    /// The newest version of each key it applies, in (table, key) order (`None`: deleted).
    pub writes: OwnedWrites,
    /// The end of the frozen generation's last commit.
    pub through: u64,
    /// No key of the frozen generation comes after these: the drain's last chunk.
    pub last: bool,
}

impl WriteBuffer {
    /// Whether a drain in chunks is under way (a frozen generation is left).
    #[must_use]
    pub fn draining(&self) -> bool {
        self.frozen.is_some()
    }

    /// The next chunk of a drain in chunks: the newest versions of the frozen generation's
    /// next keys, at least one and at most `max_bytes` of them (as the buffer counts bytes).
    /// Freezes the live generation first when no drain in chunks is under way (its commits
    /// then go to a fresh live generation). `None`: nothing to drain. Requires: the caller
    /// commits the chunk and calls [`WriteBuffer::chunk_drained`] before any other change.
    pub fn next_chunk(&mut self, max_bytes: usize) -> Option<Chunk> {
        if self.frozen.is_none() {
            if self.live.is_empty() {
                return None;
            }
            let generation = std::mem::take(&mut self.live);
            self.live.since = self.last_lsn;
            self.frozen = Some(Frozen {
                generation,
                applied_through: None,
            });
        }
        let frozen = self.frozen.as_ref().expect("frozen above");
        let through = frozen
            .generation
            .last_end
            .expect("a frozen generation holds a commit");
        let mut writes = OwnedWrites::default();
        let mut bytes = 0;
        let mut remaining = frozen.remaining().peekable();
        while let Some((table, key, versions)) =
            remaining.next_if(|_| writes.is_empty() || bytes < max_bytes)
        {
            let newest = versions.newest();
            bytes += version_bytes(key.bytes(), newest.value.as_deref());
            writes.push(table, key.bytes(), newest.value.as_deref());
        }
        let last = remaining.peek().is_none();
        assert!(
            !writes.is_empty(),
            "write buffer: a frozen generation with no key left"
        );
        Some(Chunk {
            writes,
            through,
            last,
        })
    }

    /// Records that the chunk whose commit ends at `at` applied the frozen generation's keys
    /// up to and including `(table, key)` to the tree, changing each table's row count by its
    /// delta in `deltas` (taken off the frozen generation's sums from `at` on); the last chunk
    /// drains the frozen generation at `at`.
    pub fn chunk_drained(
        &mut self,
        at: u64,
        (table, key): (TableId, &[u8]),
        deltas: &[(TableId, i64)],
        last: bool,
    ) {
        assert!(
            self.last_lsn < at,
            "write buffer: a chunk at {at} before what it drains, at {}",
            self.last_lsn
        );
        self.last_lsn = at;
        let frozen = self
            .frozen
            .as_mut()
            .expect("write buffer: a chunk with no drain in chunks");
        assert!(
            frozen
                .applied_through
                .as_ref()
                .is_none_or(|(t, k)| (*t, k.bytes()) < (table, key)),
            "write buffer: chunks out of key order"
        );
        frozen.applied_through = Some((table, BufKey::new(key)));
        if !crate::mutants::active("chunk-counts-rows-twice") {
            for &(table, delta) in deltas {
                frozen.generation.add_to_sum(table, at, -delta);
            }
        }
        if last {
            let frozen = self.frozen.take().expect("looked at above");
            self.retire(frozen.generation, at);
        }
    }

    /// A chunk recovery or a refresh read (`db/commit/buffer.rs`, `rebuild`), ending at `at`:
    /// its rows are taken off the sums from `at` on, and with `forget_through` (the drain's
    /// last chunk) the versions at or before it are forgotten (the tree holds them). Requires:
    /// no reader (readers after `at` count the newest sums only), no drain in chunks or
    /// drained generation (a rebuilt buffer has neither).
    pub fn replayed_chunk(
        &mut self,
        at: u64,
        deltas: &[(TableId, i64)],
        forget_through: Option<u64>,
    ) {
        assert!(
            self.frozen.is_none() && self.drained.is_empty(),
            "write buffer: a chunk replayed into a buffer that drains"
        );
        assert!(
            self.last_lsn < at,
            "write buffer: a replayed chunk at {at} before {}",
            self.last_lsn
        );
        self.last_lsn = at;
        if !crate::mutants::active("rebuild-counts-chunks-twice") {
            for &(table, delta) in deltas {
                self.live.add_to_sum(table, at, -delta);
            }
        }
        if let Some(through) = forget_through {
            self.live.forget_through(through);
        }
    }
}
