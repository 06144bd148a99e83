//! Where a write transaction knows its tables end, and the entries it has read ahead there.
//!
//! A queue taken from its head inside one transaction leaves a deleted key per pop at the
//! front of its write set; were each pop to read from the table's start it would pass over
//! every key popped before (a quadratic loop). [`Edges`] remembers, per table, a bound below
//! which the transaction sees no key (and one above which): set by a read of the first
//! (last) entry and by a pop, moved by nothing but those, and forgotten when the
//! transaction puts a key beyond it. Every range of the transaction starts there.
//!
//! A pop still made a range each time: a descent of the tree and a cut of every sorted run
//! of the write set, most of a pop's read (docs/benchmarks.md, "The queue and predicate
//! rows"). So a read of an end also keeps the entries that follow it (1, then twice as many
//! each read, up to [`READ_AHEAD_MAX`] and [`READ_AHEAD_BYTES`]), and the next pops from that
//! end take them without a range. They stay exactly what the transaction sees: a put at or
//! before the last of them drops them all (it may fall between two, or change a value), a
//! delete removes its key from them, a drop forgets the table. Nothing else changes what a
//! write transaction sees: it holds the writer lock, so no other commit changes the tree.

use crate::btree::Direction;
use crate::db::write_set::same_name;
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::ops::Bound;

/// Entries read ahead of an end at most (see the module doc).
const READ_AHEAD_MAX: usize = 64;
/// Bytes of keys and values read ahead of an end at most: large values are read one by one.
pub(super) const READ_AHEAD_BYTES: usize = 64 << 10;

/// Index of `direction`'s side in [`Edge::ahead`] and [`Edge::batch`].
fn side_of(direction: Direction) -> usize {
    match direction {
        Direction::Forward => 0,
        Direction::Backward => 1,
    }
}

/// Per table, how far from each end the transaction knows it sees no key (module doc).
#[derive(Debug, Default)]
pub(super) struct Edges {
    /// By table, looked through in order: a transaction pops from a table or two.
    tables: Vec<(String, Edge)>,
}

/// Keys at or below `head` (`Included`: below) and at or above `tail` (`Included`: above)
/// are none the transaction sees.
#[derive(Debug, Default)]
struct Edge {
    head: Option<Bound<Vec<u8>>>,
    tail: Option<Bound<Vec<u8>>>,
    /// The entries the transaction sees next past `head` (`[0]`, ascending) and past `tail`
    /// (`[1]`, descending), read ahead and not yet taken: nothing it sees lies between an
    /// edge and its first, or between two of them.
    ahead: [VecDeque<(Vec<u8>, Vec<u8>)>; 2],
    /// How many entries the next read of each side takes ahead (`READ_AHEAD_MAX` at most).
    batch: [usize; 2],
}

impl Edges {
    /// A put of `key` to `table`: an edge it lies beyond is forgotten.
    pub(super) fn put(&mut self, table: &str, key: &[u8]) {
        if self.tables.is_empty() {
            return;
        }
        if let Some(edge) = self.get_mut(table) {
            let below = |bound: &Bound<Vec<u8>>| match bound {
                Bound::Included(h) => key < h.as_slice(),
                Bound::Excluded(h) => key <= h.as_slice(),
                Bound::Unbounded => false,
            };
            let above = |bound: &Bound<Vec<u8>>| match bound {
                Bound::Included(t) => key > t.as_slice(),
                Bound::Excluded(t) => key >= t.as_slice(),
                Bound::Unbounded => false,
            };
            if edge.head.as_ref().is_some_and(below) {
                edge.head = None;
            }
            if edge.tail.as_ref().is_some_and(above) {
                edge.tail = None;
            }
            // A key among or before the entries read ahead may lie between two of them, or
            // give one a new value: those entries are read again.
            let [forward, backward] = &mut edge.ahead;
            if forward
                .back()
                .is_some_and(|(last, _)| key <= last.as_slice())
            {
                forward.clear();
            }
            if backward
                .back()
                .is_some_and(|(last, _)| key >= last.as_slice())
            {
                backward.clear();
            }
        }
    }

    /// A delete of `key` from `table`: it is no longer among the entries read ahead.
    pub(super) fn delete(&mut self, table: &str, key: &[u8]) {
        if self.tables.is_empty() {
            return;
        }
        if let Some(edge) = self.get_mut(table) {
            // Searched only when the key lies within a side's entries: a pop deletes the key
            // it took, which is past the other side's (one comparison, not a search).
            let [forward, backward] = &mut edge.ahead;
            let within = |side: &VecDeque<(Vec<u8>, Vec<u8>)>, low: usize, high: usize| {
                side.get(low)
                    .zip(side.get(high))
                    .is_some_and(|((l, _), (h, _))| l.as_slice() <= key && key <= h.as_slice())
            };
            let last = |side: &VecDeque<_>| side.len().saturating_sub(1);
            if within(forward, 0, last(forward))
                && let Ok(at) = forward.binary_search_by(|(k, _)| k.as_slice().cmp(key))
            {
                forward.remove(at);
            }
            if within(backward, last(backward), 0)
                && let Ok(at) = backward.binary_search_by(|(k, _)| key.cmp(k.as_slice()))
            {
                backward.remove(at);
            }
        }
    }

    /// The first entry read ahead of `table` in `direction`, removed if `take`.
    pub(super) fn ahead(
        &mut self,
        table: &str,
        direction: Direction,
        take: bool,
    ) -> Option<(Vec<u8>, Vec<u8>)> {
        let side = &mut self.get_mut(table)?.ahead[side_of(direction)];
        if take {
            side.pop_front()
        } else {
            side.front().cloned()
        }
    }

    /// How many entries a read of `table`'s end in `direction` takes: 1 the first time, then
    /// twice as many each time, up to `READ_AHEAD_MAX`, so a transaction that reads an end
    /// once copies nothing more and a queue drained from it descends once per batch.
    pub(super) fn read_ahead(&mut self, table: &str, direction: Direction) -> usize {
        let batch = self.get_mut(table).map_or(0, |edge| {
            let batch = &mut edge.batch[side_of(direction)];
            let now = *batch;
            *batch = (now * 2).clamp(1, READ_AHEAD_MAX);
            now
        });
        batch.max(1)
    }

    /// Keeps `entries`, the ones the transaction sees next past `table`'s edge in
    /// `direction` (learned just before), in order from it.
    pub(super) fn keep_ahead(
        &mut self,
        table: &str,
        direction: Direction,
        entries: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>,
    ) {
        if let Some(edge) = self.get_mut(table) {
            let side = &mut edge.ahead[side_of(direction)];
            side.clear();
            side.extend(entries);
        }
    }

    /// `table` dropped: nothing is known of it.
    pub(super) fn forget(&mut self, table: &str) {
        self.tables.retain(|(name, _)| !same_name(name, table));
    }

    fn get(&self, table: &str) -> Option<&Edge> {
        self.tables
            .iter()
            .find(|(name, _)| same_name(name, table))
            .map(|(_, edge)| edge)
    }

    fn get_mut(&mut self, table: &str) -> Option<&mut Edge> {
        self.tables
            .iter_mut()
            .find(|(name, _)| same_name(name, table))
            .map(|(_, edge)| edge)
    }

    /// The bounds a range of `table` reads: the caller's, narrowed to the edges.
    pub(super) fn narrow(
        &self,
        table: &str,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let lower = lower.map(<[u8]>::to_vec);
        let upper = upper.map(<[u8]>::to_vec);
        let Some(edge) = self.get(table) else {
            return (lower, upper);
        };
        let lower = match &edge.head {
            Some(head) => tighter(lower, head, Ordering::Greater),
            None => lower,
        };
        let upper = match &edge.tail {
            Some(tail) => tighter(upper, tail, Ordering::Less),
            None => upper,
        };
        (lower, upper)
    }

    /// The transaction sees no key of `table` before `bound` at the start (`Forward`) or
    /// past it at the end (`Backward`).
    pub(super) fn learn(&mut self, table: &str, direction: Direction, bound: Bound<&[u8]>) {
        if self.get(table).is_none() {
            self.tables.push((table.to_owned(), Edge::default()));
        }
        let edge = self.get_mut(table).expect("added above");
        let side = match direction {
            Direction::Forward => &mut edge.head,
            Direction::Backward => &mut edge.tail,
        };
        // The key copied into the bound's own buffer, kept from pop to pop.
        let buffer = match side.take() {
            Some(Bound::Included(mut k) | Bound::Excluded(mut k)) => {
                k.clear();
                k
            }
            Some(Bound::Unbounded) | None => Vec::new(),
        };
        *side = Some(bound.map(|key| {
            let mut buffer = buffer;
            buffer.extend_from_slice(key);
            buffer
        }));
    }
}

/// Of a bound and an edge, the one that lets fewer keys through: `inward` is the way keys
/// grow past a lower bound (`Greater`) or an upper one (`Less`).
fn tighter(bound: Bound<Vec<u8>>, edge: &Bound<Vec<u8>>, inward: Ordering) -> Bound<Vec<u8>> {
    let edge_key = match edge {
        Bound::Included(k) | Bound::Excluded(k) => k,
        Bound::Unbounded => return bound,
    };
    let bound_key = match &bound {
        Bound::Included(k) | Bound::Excluded(k) => k,
        Bound::Unbounded => return edge.clone(),
    };
    match edge_key.cmp(bound_key) {
        order if order == inward => edge.clone(),
        Ordering::Equal if matches!(edge, Bound::Excluded(_)) => edge.clone(),
        _ => bound,
    }
}
