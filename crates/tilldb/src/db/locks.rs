//! The database's two locks, and the proofs that a function holds them.
//!
//! - **The writer lock** (`Inner::writer`): one read-write transaction at a time. It holds the
//!   allocator state ([`Alloc`]). A function that needs it takes the guard, [`Writer`] (`&mut`
//!   when it changes the allocator): a copy of `Alloc` is no proof, the guard is.
//! - **The tree lock** ([`TreeLock`]): readers hold it shared while they read pages; a commit
//!   holds it exclusively while it changes them, so no reader sees a page half way through a
//!   split. A function that needs it either way takes a [`TreeHeld`], which only a guard of it
//!   hands out; one that needs it exclusively takes the guard itself, [`TreeExclusive`].
//!
//! The order, when both are taken: the writer lock first, then the tree lock. A reader takes
//! only the tree lock, never while it holds the writer lock's guard unless it is the writer.

use crate::record::Alloc;
use parking_lot::{MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::marker::PhantomData;

/// The writer lock, held: the allocator state, changed only by its holder.
pub(super) type Writer<'a> = MutexGuard<'a, Alloc>;

/// The tree lock (see the module doc).
#[derive(Debug, Default)]
pub(super) struct TreeLock(RwLock<()>);

impl TreeLock {
    /// Takes the lock shared (a read of the trees).
    pub(super) fn read(&self) -> TreeShared<'_> {
        TreeShared {
            _guard: self.0.read(),
        }
    }

    /// Takes the lock exclusively (a change of the trees).
    pub(super) fn write(&self) -> TreeExclusive<'_> {
        TreeExclusive {
            _guard: self.0.write(),
        }
    }
}

/// The tree lock, held shared.
#[must_use = "the tree lock is released when the guard is dropped"]
pub(super) struct TreeShared<'a> {
    _guard: RwLockReadGuard<'a, ()>,
}

/// The tree lock, held exclusively.
#[must_use = "the tree lock is released when the guard is dropped"]
pub(super) struct TreeExclusive<'a> {
    _guard: RwLockWriteGuard<'a, ()>,
}

/// Proof that the caller holds the tree lock, shared or exclusive, for as long as it lives
/// (it borrows the guard it came from).
#[derive(Clone, Copy)]
pub(super) struct TreeHeld<'a>(PhantomData<&'a ()>);

impl TreeShared<'_> {
    #[expect(clippy::unused_self, reason = "the borrow of the guard is the proof")]
    pub(super) fn held(&self) -> TreeHeld<'_> {
        TreeHeld(PhantomData)
    }
}

impl TreeExclusive<'_> {
    #[expect(clippy::unused_self, reason = "the borrow of the guard is the proof")]
    pub(super) fn held(&self) -> TreeHeld<'_> {
        TreeHeld(PhantomData)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_guards_hold_the_lock_until_dropped() {
        let lock = TreeLock::default();
        let shared = lock.read();
        let again = lock.read();
        assert!(
            lock.0.try_write().is_none(),
            "a shared guard keeps writers out"
        );
        drop((shared, again));
        let exclusive = lock.write();
        assert!(
            lock.0.try_read().is_none(),
            "an exclusive guard keeps readers out"
        );
        let _held: TreeHeld<'_> = exclusive.held();
        drop(exclusive);
        assert!(lock.0.try_write().is_some(), "released when dropped");
    }
}
