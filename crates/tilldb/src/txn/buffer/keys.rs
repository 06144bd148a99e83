//! The write buffer's keys and a key's versions, shaped for the commit path: a buffered
//! commit of 1,000 rows searches the buffer's map twice a row (once to learn whether the
//! key is new, once to add its version), and with a key held only behind a pointer each of
//! a search's comparisons was a cache miss (a third of such a commit's time, profiled).
//!
//! A [`BufKey`] keeps the key's first eight bytes inline, as a big-endian integer: two keys
//! that differ there (random keys nearly always do) compare without reading the heap. The
//! order is the keys' byte order: the heads are zero-padded, so a key shorter than eight
//! bytes is a prefix of any longer key with the same head, and sorts first both ways; keys
//! with equal heads compare their whole bytes.
//!
//! A search needs no allocation: the map is searched through `dyn KeyView`, which a
//! [`Probe`] (a borrowed key and its head) and a stored [`BufKey`] both are.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::Arc;

/// A key's first eight bytes as a big-endian integer, zero-padded.
#[expect(
    clippy::big_endian_bytes,
    reason = "big-endian so that the integer order is the bytes' order"
)]
fn head_of(key: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    let n = key.len().min(8);
    head[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(head)
}

/// What the buffer's map compares: a key's head and its whole bytes.
pub(super) trait KeyView {
    fn head(&self) -> u64;
    fn bytes(&self) -> &[u8];
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for dyn KeyView + '_ {}

impl PartialOrd for dyn KeyView + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn KeyView + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.head()
            .cmp(&other.head())
            .then_with(|| self.bytes().cmp(other.bytes()))
    }
}

/// A key as the buffer's map holds it (shared with the pruning index, hence the `Arc`).
#[derive(Debug, Clone)]
pub(super) struct BufKey {
    head: u64,
    key: Arc<[u8]>,
}

impl BufKey {
    pub(super) fn new(key: &[u8]) -> Self {
        Self {
            head: head_of(key),
            key: Arc::from(key),
        }
    }

    pub(super) fn as_view(&self) -> &dyn KeyView {
        self
    }
}

impl KeyView for BufKey {
    fn head(&self) -> u64 {
        self.head
    }
    fn bytes(&self) -> &[u8] {
        &self.key
    }
}

impl PartialEq for BufKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_view() == other.as_view()
    }
}

impl Eq for BufKey {}

impl PartialOrd for BufKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for BufKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_view().cmp(other.as_view())
    }
}

impl<'a> Borrow<dyn KeyView + 'a> for BufKey {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

/// A borrowed key to search the map with.
pub(super) struct Probe<'k> {
    head: u64,
    key: &'k [u8],
}

impl<'k> Probe<'k> {
    pub(super) fn new(key: &'k [u8]) -> Self {
        Self {
            head: head_of(key),
            key,
        }
    }
}

impl KeyView for Probe<'_> {
    fn head(&self) -> u64 {
        self.head
    }
    fn bytes(&self) -> &[u8] {
        self.key
    }
}

/// The value a buffered commit wrote, and that commit's lsn.
#[derive(Debug)]
pub(super) struct After {
    pub(super) lsn: u64,
    /// `None`: deleted.
    pub(super) value: Option<Box<[u8]>>,
}

/// A key's versions, lsns increasing, never empty. Most keys have one, held without an
/// allocation of its own.
#[derive(Debug)]
pub(super) enum Versions {
    One(After),
    Many(VecDeque<After>),
}

impl Versions {
    /// The newest version.
    pub(super) fn newest(&self) -> &After {
        match self {
            Self::One(after) => after,
            Self::Many(all) => all.back().expect("a key's versions are never empty"),
        }
    }

    /// The oldest version.
    pub(super) fn oldest(&self) -> &After {
        match self {
            Self::One(after) => after,
            Self::Many(all) => all.front().expect("a key's versions are never empty"),
        }
    }

    /// The newest version at or before `snapshot`.
    pub(super) fn at(&self, snapshot: u64) -> Option<&After> {
        match self {
            Self::One(after) => (after.lsn <= snapshot).then_some(after),
            Self::Many(all) => all.iter().rev().find(|after| after.lsn <= snapshot),
        }
    }

    /// Adds a version newer than every one held.
    pub(super) fn push(&mut self, after: After) {
        assert!(
            self.newest().lsn < after.lsn,
            "write buffer: two writes of one key in one commit, or out of order"
        );
        match self {
            Self::One(_) => {
                let Self::One(first) = std::mem::replace(self, Self::Many(VecDeque::new())) else {
                    unreachable!("matched above")
                };
                *self = Self::Many(VecDeque::from([first, after]));
            }
            Self::Many(all) => all.push_back(after),
        }
    }

    /// Drops the versions older than `lsn`, calling `dropped` with each; the version at
    /// `lsn` stays.
    pub(super) fn drop_before(&mut self, lsn: u64, mut dropped: impl FnMut(&After)) {
        let Self::Many(all) = self else {
            return;
        };
        while all.front().is_some_and(|after| after.lsn < lsn) {
            dropped(&all.pop_front().expect("looked at above"));
        }
        assert!(
            !all.is_empty(),
            "write buffer: pruned every version of a key"
        );
    }

    /// Drops the versions at or before `lsn`, calling `dropped` with each; `None` when none is
    /// left.
    pub(super) fn drop_through(self, lsn: u64, mut dropped: impl FnMut(&After)) -> Option<Self> {
        let mut kept: Option<Self> = None;
        let all: Vec<After> = match self {
            Self::One(after) => vec![after],
            Self::Many(all) => all.into(),
        };
        for after in all {
            if after.lsn <= lsn {
                dropped(&after);
            } else if let Some(versions) = kept.as_mut() {
                versions.push(after);
            } else {
                kept = Some(Self::One(after));
            }
        }
        kept
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &After> {
        let (one, many) = match self {
            Self::One(after) => (Some(after), None),
            Self::Many(all) => (None, Some(all.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The map's order is the keys' byte order, whatever their lengths and heads.
        #[test]
        fn buffered_keys_sort_in_byte_order(
            a in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..12),
            b in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..12),
        ) {
            prop_assert_eq!(BufKey::new(&a).cmp(&BufKey::new(&b)), a.cmp(&b));
            let (pa, pb) = (Probe::new(&a), Probe::new(&b));
            prop_assert_eq!((&pa as &dyn KeyView).cmp(&pb as &dyn KeyView), a.cmp(&b));
        }
    }
}
