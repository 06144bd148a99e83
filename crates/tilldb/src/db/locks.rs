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
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockWriteGuard};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The writer lock, held: the allocator state, changed only by its holder.
pub(super) type Writer<'a> = MutexGuard<'a, Alloc>;

/// The writer lock: a mutex over the allocator state that counts who waits for it.
#[derive(Debug)]
pub(super) struct WriterLock {
    lock: Mutex<Alloc>,
    /// Threads waiting for the lock: for tests, which must know a commit is asleep behind a
    /// write transaction that holds it, not about to begin.
    waiting: AtomicUsize,
}

impl WriterLock {
    pub(super) fn new(alloc: Alloc) -> Self {
        WriterLock {
            lock: Mutex::new(alloc),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Takes the lock, waiting for its holder.
    pub(super) fn lock(&self) -> Writer<'_> {
        if let Some(held) = self.lock.try_lock() {
            return held;
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let held = self.lock.lock();
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        held
    }

    /// The lock if nobody holds it.
    pub(super) fn try_lock(&self) -> Option<Writer<'_>> {
        self.lock.try_lock()
    }

    /// The allocator state, with no other handle on the database.
    pub(super) fn get_mut(&mut self) -> &mut Alloc {
        self.lock.get_mut()
    }

    /// Threads waiting for the lock now.
    #[cfg(any(test, feature = "internals"))]
    pub(super) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }
}

/// The tree lock (see the module doc). Readers count themselves in one of a few stripes, a
/// cache line each, so that readers on two CPUs write no line in common (a `RwLock`'s one
/// state word was two contended writes a point read, the root's latch besides: issue 37,
/// docs/benchmarks-journal.md, "A tree lock readers share no line of"). A writer takes `exclusive`,
/// raises `writing`, then waits for every stripe to empty; a reader that finds `writing`
/// raised steps back out of its stripe and waits on `exclusive`.
#[derive(Debug, Default)]
pub(super) struct TreeLock {
    exclusive: RwLock<()>,
    /// Readers waiting for a writer (on `exclusive`): for tests, which must know a reader
    /// is asleep behind a commit, not about to begin.
    waiting: AtomicUsize,
    writing: AtomicBool,
    readers: [Stripe; STRIPES],
}

const STRIPES: usize = 16;

#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(AtomicUsize);

impl TreeLock {
    /// Takes the lock shared (a read of the trees).
    pub(super) fn read(&self) -> TreeShared<'_> {
        let stripe = crate::stripe::thread_stripe(STRIPES);
        let count = &self.readers[stripe].0;
        loop {
            // SeqCst, both sides: the reader's count before its look at `writing`, the
            // writer's flag before its look at the counts; one of them sees the other.
            count.fetch_add(1, Ordering::SeqCst);
            if !self.writing.load(Ordering::SeqCst)
                || crate::mutants::active("tree-lock-reader-ignores-writer")
            {
                return TreeShared { lock: self, stripe };
            }
            count.fetch_sub(1, Ordering::SeqCst);
            // Wait for the writer, then try again.
            self.waiting.fetch_add(1, Ordering::SeqCst);
            drop(self.exclusive.read());
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Readers waiting for a writer to release the lock.
    pub(super) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Takes the lock exclusively (a change of the trees).
    pub(super) fn write(&self) -> TreeExclusive<'_> {
        let guard = self.exclusive.write();
        let was = self.writing.swap(true, Ordering::SeqCst);
        assert!(!was, "two writers held the tree lock");
        let mut spins = 0u32;
        while self
            .readers
            .iter()
            .any(|stripe| stripe.0.load(Ordering::SeqCst) != 0)
        {
            // Reads hold the lock for microseconds: spin; one that lost its CPU needs this
            // one's: yield; one that reads a page from the disk takes a while: sleep.
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else if spins < 256 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
        }
        TreeExclusive {
            lock: self,
            _guard: guard,
        }
    }
}

/// The tree lock, held shared.
#[must_use = "the tree lock is released when the guard is dropped"]
pub(super) struct TreeShared<'a> {
    lock: &'a TreeLock,
    stripe: usize,
}

impl Drop for TreeShared<'_> {
    fn drop(&mut self) {
        let before = self.lock.readers[self.stripe]
            .0
            .fetch_sub(1, Ordering::SeqCst);
        assert!(before > 0, "a tree lock stripe counted below zero");
    }
}

/// The tree lock, held exclusively.
#[must_use = "the tree lock is released when the guard is dropped"]
pub(super) struct TreeExclusive<'a> {
    lock: &'a TreeLock,
    _guard: RwLockWriteGuard<'a, ()>,
}

impl Drop for TreeExclusive<'_> {
    fn drop(&mut self) {
        // Before the guard (a field, dropped after this): readers waiting on it find the flag
        // down when they come back.
        self.lock.writing.store(false, Ordering::SeqCst);
    }
}

/// Proof that the caller holds the tree lock, shared or exclusive, for as long as it lives
/// (it borrows the guard it came from).
#[derive(Clone, Copy)]
pub(super) struct TreeHeld<'a>(PhantomData<&'a ()>);

/// Proof that the caller may change pages through its commit's `TxnPages`: it holds the tree
/// lock exclusively, or holds it shared and its pages are shadowed (`db/pages.rs`: its changes
/// go to copies that readers never see until they are installed under the exclusive lock).
#[derive(Clone, Copy)]
pub(super) struct TreeChanging<'a>(PhantomData<&'a ()>);

impl TreeShared<'_> {
    #[expect(clippy::unused_self, reason = "the borrow of the guard is the proof")]
    pub(super) fn held(&self) -> TreeHeld<'_> {
        TreeHeld(PhantomData)
    }

    /// [`TreeChanging`] for a commit whose pages are shadowed (`shadowed` says so: its
    /// `TxnPages::is_shadowed`).
    #[expect(clippy::unused_self, reason = "the borrow of the guard is the proof")]
    pub(super) fn changing_shadows(&self, shadowed: bool) -> TreeChanging<'_> {
        assert!(
            shadowed,
            "a commit changed pages in place under the shared tree lock"
        );
        TreeChanging(PhantomData)
    }
}

impl TreeExclusive<'_> {
    #[expect(clippy::unused_self, reason = "the borrow of the guard is the proof")]
    pub(super) fn held(&self) -> TreeHeld<'_> {
        TreeHeld(PhantomData)
    }

    #[expect(clippy::unused_self, reason = "the borrow of the guard is the proof")]
    pub(super) fn changing(&self) -> TreeChanging<'_> {
        TreeChanging(PhantomData)
    }
}

#[cfg(test)]
impl TreeLock {
    /// Readers holding the lock now.
    fn readers_in(&self) -> usize {
        self.readers
            .iter()
            .map(|stripe| stripe.0.load(Ordering::SeqCst))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that holds the lock a long while (a page read from the disk) keeps a writer
    /// out all that while (the writer spins, yields, then sleeps), and the writer gets in
    /// once it leaves.
    #[test]
    fn a_writer_waits_for_a_slow_reader_and_gets_in_once_it_leaves() {
        let lock = TreeLock::default();
        let entered = AtomicBool::new(false);
        let shared = lock.read();
        std::thread::scope(|s| {
            s.spawn(|| {
                let _exclusive = lock.write();
                entered.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(std::time::Duration::from_millis(30));
            assert!(
                !entered.load(Ordering::SeqCst),
                "a writer got in beside a reader"
            );
            drop(shared);
        });
        assert!(entered.load(Ordering::SeqCst), "the writer never got in");
        assert_eq!(lock.readers_in(), 0);
    }

    /// Writers change two counters that must stay equal, one after the other, under the
    /// exclusive guard; readers in other threads (more than the stripes) check them under the
    /// shared guard: no reader sees them apart, and no writer or reader waits forever.
    #[test]
    fn readers_never_see_a_writer_half_way_and_nobody_waits_forever() {
        let lock = TreeLock::default();
        let (a, b) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..2_000 {
                        let _exclusive = lock.write();
                        a.fetch_add(1, Ordering::Relaxed);
                        // A window long enough for a reader that got in to see.
                        for _ in 0..50 {
                            std::hint::spin_loop();
                        }
                        std::thread::yield_now();
                        b.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            for _ in 0..STRIPES + 3 {
                s.spawn(|| {
                    for _ in 0..2_000 {
                        let _shared = lock.read();
                        let seen_b = b.load(Ordering::Relaxed);
                        let seen_a = a.load(Ordering::Relaxed);
                        assert_eq!(seen_a, seen_b, "a reader saw a writer half way");
                    }
                });
            }
        });
        assert_eq!(a.load(Ordering::Relaxed), 4_000);
        assert_eq!(lock.readers_in(), 0);
        assert!(!lock.writing.load(Ordering::SeqCst));
    }

    #[test]
    fn the_tree_guards_hold_the_lock_until_dropped() {
        let lock = TreeLock::default();
        let shared = lock.read();
        let again = lock.read();
        assert_eq!(lock.readers_in(), 2, "both shared guards are counted");
        drop((shared, again));
        assert_eq!(lock.readers_in(), 0, "released when dropped");
        let exclusive = lock.write();
        assert!(
            lock.writing.load(Ordering::SeqCst) && lock.exclusive.try_read().is_none(),
            "an exclusive guard keeps readers out"
        );
        let _held: TreeHeld<'_> = exclusive.held();
        drop(exclusive);
        assert!(
            !lock.writing.load(Ordering::SeqCst) && lock.exclusive.try_write().is_some(),
            "released when dropped"
        );
    }
}
