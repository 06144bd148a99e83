//! When a commit becomes visible to readers.
//!
//! Rule: a commit is *acknowledged* when its durability level is met (`Sync`: the log is
//! durable past it; `Buffered`: written to the OS; `Lazy`: at once). Readers see the longest
//! prefix of commits, in lsn order, that are all acknowledged: the *visible lsn*. So no reader
//! ever sees a `Sync` commit that a crash could take back, and no reader sees a commit without
//! every commit before it (a later commit may depend on an earlier one's data).
//!
//! A `Lazy` or `Buffered` commit behind a `Sync` commit that is still flushing therefore waits
//! for that flush before it is visible; its own committer does not wait.

use crate::Durability;
use std::collections::VecDeque;

/// The visible-lsn tracker (see the module doc).
#[derive(Debug, Default)]
pub struct Visibility {
    /// Commits not yet visible, in lsn order.
    pending: VecDeque<(u64, Durability)>,
    visible: u64,
}

impl Visibility {
    /// Everything up to `lsn` (a recovered log's end) is visible.
    #[must_use]
    pub fn new(lsn: u64) -> Self {
        Visibility {
            pending: VecDeque::new(),
            visible: lsn,
        }
    }

    /// Registers a commit whose record ends at `lsn`. Commits register in lsn order.
    pub fn committed(&mut self, lsn: u64, durability: Durability) {
        let last = self.pending.back().map_or(self.visible, |&(l, _)| l);
        assert!(
            lsn > last,
            "commits register in lsn order: {last} then {lsn}"
        );
        self.pending.push_back((lsn, durability));
        assert!(self.pending.len() <= 1 << 24, "visibility queue bound");
    }

    /// Advances the visible lsn over every acknowledged commit at the front, given how far the
    /// log is written and durable. Returns the visible lsn.
    pub fn advance(&mut self, written: u64, durable: u64) -> u64 {
        assert!(
            durable <= written,
            "durable {durable} past written {written}"
        );
        while let Some(&(lsn, durability)) = self.pending.front() {
            let acknowledged = match durability {
                Durability::Lazy => true,
                Durability::Buffered => written >= lsn,
                Durability::Sync => durable >= lsn,
            };
            if !acknowledged {
                break;
            }
            assert!(lsn > self.visible, "visible lsn goes forward");
            self.visible = lsn;
            self.pending.pop_front();
        }
        self.visible
    }

    /// Readers' snapshot: every commit at or before this lsn is visible, none after.
    #[must_use]
    pub fn visible_lsn(&self) -> u64 {
        self.visible
    }

    /// Commits registered but not yet visible.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Panics unless the pending commits are in strictly increasing lsn order, all after the
    /// visible lsn. O(pending).
    pub fn check_invariants(&self) {
        let mut last = self.visible;
        for &(lsn, _) in &self.pending {
            assert!(
                lsn > last,
                "visibility: pending commit {lsn} at or before {last}"
            );
            last = lsn;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Durability::{Buffered, Lazy, Sync};

    #[test]
    fn visibility_table() {
        // (commits, written, durable, visible)
        type Row = (&'static [(u64, Durability)], u64, u64, u64);
        let rows: &[Row] = &[
            (&[(10, Sync)], 10, 9, 0),
            (&[(10, Sync)], 10, 10, 10),
            (&[(10, Buffered)], 9, 0, 0),
            (&[(10, Buffered)], 10, 0, 10),
            (&[(10, Lazy)], 0, 0, 10),
            // A lazy commit behind an unflushed sync commit waits for it.
            (&[(10, Sync), (20, Lazy)], 20, 0, 0),
            (&[(10, Sync), (20, Lazy)], 20, 10, 20),
            (&[(10, Lazy), (20, Sync), (30, Buffered)], 30, 19, 10),
            (&[(10, Lazy), (20, Sync), (30, Buffered)], 30, 20, 30),
        ];
        for &(commits, written, durable, want) in rows {
            let mut v = Visibility::new(0);
            for &(lsn, d) in commits {
                v.committed(lsn, d);
            }
            assert_eq!(
                v.advance(written, durable),
                want,
                "{commits:?} written {written} durable {durable}"
            );
            assert_eq!(v.visible_lsn(), want);
        }
    }

    #[test]
    #[should_panic(expected = "lsn order")]
    fn out_of_order_registration_is_a_bug() {
        let mut v = Visibility::new(0);
        v.committed(20, Sync);
        v.committed(10, Sync);
    }
}
