//! Group commit decisions, as plain code over plain data (the threads live in `writer.rs`).
//!
//! A committer waits for its lsn to be *written* (`Buffered`) or *durable* (`Sync`). Two
//! stages stand between an appended record and durability, each run by at most one thread at a
//! time, with no lock held during its I/O:
//!
//! ```text
//!   appended ──write stage──> written ──flush stage──> durable
//!   (log buffer)   take all pending    (OS)   flush every   (stable storage)
//!                  chunks, write them         segment written
//! ```
//!
//! The stages overlap: while one thread flushes group k, another may write group k+1 (flush
//! pipelining), and appenders keep gathering group k+2.
//!
//! *Closed*: with padding on (the default), a write that starts while no flush runs ends
//! its group with a `Pad` to the block boundary; a write made while a flush runs does not,
//! and leaves its last block *open*, to be rewritten (same bytes first) by the next write.
//! A flush makes durable only what lies before the open block (`closed`), so no block that
//! holds an acknowledged commit is ever written again (a torn rewrite could destroy it),
//! and a pipelined write costs no padding: measured at 64 threads, 6.4 writes per flush had
//! each padded its last block, 1,616 log bytes per 200-byte commit (docs/benchmarks-journal.md).
//!
//! ```text
//!   durable <= closed <= written <= appended
//! ```
//!
//! [`Progress::role`] tells a committer what to do; [`wake_plan`] tells a thread that finished a stage whom to wake: exactly the
//! waiters it satisfied, plus the lowest-lsn waiter that can lead each free stage. Everyone
//! else sleeps on.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;

/// What a committer waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Written to the OS (`Durability::Buffered`).
    Written,
    /// Flushed to stable storage (`Durability::Sync`).
    Durable,
}

/// What a committer should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Its need is met: return.
    Done,
    /// Lead the write stage.
    Write,
    /// Lead the flush stage.
    Flush,
    /// Another thread holds the stage it needs: sleep until woken.
    Wait,
}

/// How far the log has got. Invariant: `durable <= closed <= written <= appended`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    pub appended: u64,
    pub written: u64,
    /// Written and never to be written again: the end of the last block a write closed
    /// (with a pad, or by filling it). What a flush may make durable.
    pub closed: u64,
    pub durable: u64,
    pub writing: bool,
    pub flushing: bool,
    /// The write running also writes a tail slot (`slot.rs`): no flush may start until it
    /// completes, so that a flush makes durable exactly the slot writes done before it.
    pub shadowing: bool,
}

impl Progress {
    pub fn check_invariants(&self) {
        assert!(
            !self.shadowing || (self.writing && !self.flushing),
            "a slot write outside a write stage, or beside a flush"
        );
        assert!(
            self.durable <= self.closed,
            "durable {} > closed {}",
            self.durable,
            self.closed
        );
        assert!(
            self.closed <= self.written,
            "closed {} > written {}",
            self.closed,
            self.written
        );
        assert!(
            self.written <= self.appended,
            "written {} > appended {}",
            self.written,
            self.appended
        );
    }

    /// The role of a committer that needs `lsn` to reach `need`.
    pub fn role(&self, lsn: u64, need: Need) -> Role {
        self.check_invariants();
        assert!(
            lsn <= self.appended,
            "waiting for lsn {lsn} beyond the log end {}",
            self.appended
        );
        let met = match need {
            Need::Written => self.written >= lsn,
            Need::Durable => self.durable >= lsn,
        };
        if met {
            Role::Done
        } else if self.written < lsn {
            if self.writing {
                Role::Wait
            } else {
                Role::Write
            }
        } else if self.closed < lsn {
            // Written into the open block: a write must close it first, and a write made
            // while a flush runs would not (need is Durable here: Written is met).
            if self.writing || self.flushing {
                Role::Wait
            } else {
                Role::Write
            }
        } else if self.flushing || self.shadowing {
            Role::Wait
        } else {
            Role::Flush
        }
    }
}

/// A parked committer.
#[derive(Debug)]
pub(crate) struct Waiter {
    pub lsn: u64,
    pub need: Need,
    pub slot: Arc<WaitSlot>,
}

/// Where a parked thread learns it was woken (so a spurious unpark is told apart).
#[derive(Debug)]
pub(crate) struct WaitSlot {
    woken: AtomicBool,
    thread: Thread,
}

thread_local! {
    /// Each thread's one slot, reused by every wait it makes (see [`WaitSlot::for_current_thread`]).
    static SLOT: Arc<WaitSlot> = WaitSlot::new();
}

impl WaitSlot {
    /// The calling thread's slot, made ready for one wait: not woken.
    ///
    /// One slot per thread, reused (a commit waits once or twice, and a new slot each time was
    /// an allocation, often freed by another thread). Sound because a slot is woken exactly
    /// once per wait it is registered for, and its thread leaves a wait only after seeing that
    /// wake-up (`park`), so no wake-up meant for an earlier wait is still to come when the
    /// next one starts here. A late `unpark` of the earlier wake-up is harmless: `park` sleeps
    /// again until `woken`.
    ///
    /// A thread whose thread-locals are being torn down (a commit from another thread-local's
    /// destructor) gets a slot of its own.
    pub fn for_current_thread() -> Arc<WaitSlot> {
        SLOT.try_with(|slot| {
            if !crate::mutants::active("wait-slot-not-reset") {
                slot.woken.store(false, Ordering::Relaxed);
            }
            Arc::clone(slot)
        })
        .unwrap_or_else(|_| WaitSlot::new())
    }

    fn new() -> Arc<WaitSlot> {
        Arc::new(WaitSlot {
            woken: AtomicBool::new(false),
            thread: std::thread::current(),
        })
    }

    /// Wakes the thread. Call after removing its waiter from the queue.
    pub fn wake(&self) {
        let twice = self.woken.swap(true, Ordering::Release);
        // Not while unwinding: a second panic there aborts the process, and the waker may be
        // failing the waiters of a panicked leader (they learn of it from the poison).
        assert!(
            !twice || std::thread::panicking(),
            "a wait slot woken twice for one wait"
        );
        self.thread.unpark();
    }

    /// Parks the calling thread (the slot's own) until [`WaitSlot::wake`].
    pub fn park(&self) {
        assert_eq!(
            std::thread::current().id(),
            self.thread.id(),
            "parked on another thread's slot"
        );
        while !self.woken.load(Ordering::Acquire) {
            std::thread::park();
        }
    }
}

/// Wakes a group of parked committers with the help of the ones already woken.
///
/// A flush releases tens of committers at once (about 30 per flush at 64 threads), and each wake-up
/// is a futex call that costs the waker a few microseconds (on a VM, more when the woken
/// thread's CPU is idle). Made by the flush leader alone they form a serial storm, and the
/// last committer it releases starts tens of microseconds after the first. So the waking
/// thread puts the group on the relay and wakes from it until it is empty, and every woken
/// committer wakes one more ([`Relay::help`], from `Wal::park`) before it goes on: the wake-ups spread over the
/// CPUs. Measured in docs/benchmarks-journal.md ("Woken committers wake the next").
///
/// A slot on the relay has left the waiters' queue and is woken exactly once, by whoever
/// pops it; [`Relay::wake_all`] returns only once the relay was empty, so none is left behind.
#[derive(Debug, Default)]
pub(crate) struct Relay {
    queue: Mutex<Vec<Arc<WaitSlot>>>,
}

impl Relay {
    /// Wakes every slot in `slots` (removed from the waiters' queue by the caller), helped by
    /// the threads it wakes. Call without the log's state lock held.
    pub fn wake_all(&self, slots: Vec<Arc<WaitSlot>>) {
        let mut slots = slots.into_iter();
        let Some(first) = slots.next() else {
            return;
        };
        self.queue.lock().extend(slots);
        first.wake();
        while self.help() {}
    }

    /// Wakes one slot waiting on the relay, if there is one; `true` if it did. A thread the
    /// relay woke calls this once, before it goes on.
    pub fn help(&self) -> bool {
        let next = self.queue.lock().pop();
        next.map(|slot| slot.wake()).is_some()
    }
}

/// Which waiters (indices into `waiters`) to wake after a stage completed: every waiter whose
/// need is met, plus the lowest-lsn waiter able to lead each stage that is free.
pub(crate) fn wake_plan(progress: &Progress, waiters: &[(u64, Need)]) -> Vec<usize> {
    let mut wake = Vec::new();
    let mut writer: Option<usize> = None;
    let mut flusher: Option<usize> = None;
    for (i, &(lsn, need)) in waiters.iter().enumerate() {
        let lowest = |best: Option<usize>| best.is_none_or(|b| waiters[b].0 > lsn);
        match progress.role(lsn, need) {
            Role::Done => wake.push(i),
            Role::Write if lowest(writer) => writer = Some(i),
            Role::Flush if lowest(flusher) => flusher = Some(i),
            Role::Write | Role::Flush | Role::Wait => {}
        }
    }
    wake.extend(writer);
    wake.extend(flusher);
    assert!(wake.len() <= waiters.len());
    wake
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(
        appended: u64,
        written: u64,
        durable: u64,
        writing: bool,
        flushing: bool,
    ) -> Progress {
        Progress {
            appended,
            written,
            closed: written,
            durable,
            writing,
            flushing,
            shadowing: false,
        }
    }

    /// Checks each row (lsn, need, writing, flushing, role) against `base` with those stages
    /// busy.
    fn check_roles(base: Progress, rows: &[(u64, Need, bool, bool, Role)]) {
        for &(lsn, need, writing, flushing, want) in rows {
            let p = Progress {
                writing,
                flushing,
                ..base
            };
            assert_eq!(
                p.role(lsn, need),
                want,
                "lsn {lsn} {need:?} writing {writing} flushing {flushing}"
            );
        }
    }

    /// Every combination of where the lsn lies and which stages are busy.
    #[test]
    fn role_table() {
        use Need::{Durable, Written};
        use Role::{Done, Flush, Wait, Write};
        // appended 30, written 20, durable 10
        let rows = [
            // lsn, need, writing, flushing, role
            (5, Durable, false, false, Done),
            (10, Durable, true, true, Done),
            (15, Written, true, true, Done),
            (15, Durable, false, false, Flush),
            (15, Durable, true, false, Flush),
            (15, Durable, false, true, Wait),
            (25, Written, false, false, Write),
            (25, Written, false, true, Write),
            (25, Written, true, false, Wait),
            (25, Durable, false, false, Write),
            (25, Durable, true, true, Wait),
            (30, Durable, false, true, Write),
        ];
        check_roles(progress(30, 20, 10, false, false), &rows);
    }

    /// A commit written into the open block (closed 16, written 20) needs a write that
    /// closes it, which only a write made while no flush runs does.
    #[test]
    fn a_commit_in_the_open_block_waits_for_a_closing_write() {
        use Need::{Durable, Written};
        use Role::{Done, Flush, Wait, Write};
        let rows = [
            // lsn, need, writing, flushing, role
            (18, Written, false, false, Done),
            (18, Durable, false, false, Write),
            (18, Durable, true, false, Wait),
            (18, Durable, false, true, Wait),
            (18, Durable, true, true, Wait),
            (16, Durable, false, false, Flush),
            (16, Durable, true, false, Flush),
            (12, Durable, false, true, Wait),
        ];
        check_roles(
            Progress {
                closed: 16,
                ..progress(30, 20, 10, false, false)
            },
            &rows,
        );
    }

    /// While a write also writes a tail slot, no flush starts: a flush must make durable
    /// exactly the slot copies written before it began (`slot.rs`).
    #[test]
    fn no_flush_starts_while_a_slot_is_written() {
        use Need::Durable;
        let writing = Progress {
            writing: true,
            ..progress(30, 20, 10, false, false)
        };
        assert_eq!(writing.role(15, Durable), Role::Flush);
        let shadowing = Progress {
            shadowing: true,
            ..writing
        };
        assert_eq!(shadowing.role(15, Durable), Role::Wait);
        assert_eq!(wake_plan(&shadowing, &[(15, Durable)]), Vec::<usize>::new());
    }

    /// Parks a thread on a new slot; the receiver hears when it has woken.
    fn parked_thread(relay: &Arc<Relay>) -> (Arc<WaitSlot>, std::sync::mpsc::Receiver<()>) {
        let (slot_tx, slot_rx) = std::sync::mpsc::channel();
        let (woke_tx, woke_rx) = std::sync::mpsc::channel();
        let relay = Arc::clone(relay);
        std::thread::spawn(move || {
            let slot = WaitSlot::for_current_thread();
            slot_tx.send(Arc::clone(&slot)).expect("the test waits");
            slot.park();
            relay.help();
            woke_tx.send(()).expect("the test waits");
        });
        (slot_rx.recv().expect("the thread made its slot"), woke_rx)
    }

    /// A thread's next wait reuses its slot, and starts unwoken: the wake-up that ended the
    /// last wait does not end this one.
    #[test]
    fn a_thread_reuses_its_slot_unwoken() {
        let first = WaitSlot::for_current_thread();
        first.wake();
        first.park();
        let second = WaitSlot::for_current_thread();
        assert!(Arc::ptr_eq(&first, &second), "a new slot per wait");
        assert!(
            !second.woken.load(Ordering::Acquire),
            "the next wait starts woken"
        );
        let other = std::thread::spawn(WaitSlot::for_current_thread)
            .join()
            .expect("the thread ran");
        assert!(!Arc::ptr_eq(&first, &other), "two threads share a slot");
    }

    /// Waking a slot twice for one wait is a bug (with reused slots, the second wake-up would
    /// end the thread's next wait early).
    #[test]
    #[should_panic(expected = "woken twice")]
    fn a_slot_woken_twice_for_one_wait_panics() {
        let slot = WaitSlot::for_current_thread();
        slot.wake();
        slot.wake();
    }

    /// A woken committer wakes the next one on the relay: the waker woke only the first.
    #[test]
    fn a_woken_thread_wakes_the_next_on_the_relay() {
        let relay = Arc::new(Relay::default());
        let (first, first_woke) = parked_thread(&relay);
        let (second, second_woke) = parked_thread(&relay);
        relay.queue.lock().push(second);
        first.wake();
        let wait = std::time::Duration::from_secs(10);
        first_woke
            .recv_timeout(wait)
            .expect("the first thread woke");
        second_woke
            .recv_timeout(wait)
            .expect("the first thread woke the second");
        assert!(relay.queue.lock().is_empty());
    }

    /// `wake_all` leaves nobody parked, however the woken threads race it for the relay.
    #[test]
    fn wake_all_wakes_every_slot() {
        let relay = Arc::new(Relay::default());
        for _ in 0..20 {
            let parked: Vec<_> = (0..8).map(|_| parked_thread(&relay)).collect();
            let (slots, woke): (Vec<_>, Vec<_>) = parked.into_iter().unzip();
            relay.wake_all(slots);
            assert!(relay.queue.lock().is_empty());
            for rx in woke {
                rx.recv_timeout(std::time::Duration::from_secs(10))
                    .expect("every slot woken");
            }
        }
        relay.wake_all(Vec::new());
    }

    #[test]
    #[should_panic(expected = "beyond the log end")]
    fn waiting_past_the_end_is_a_bug() {
        let _ = progress(30, 20, 10, false, false).role(31, Need::Written);
    }

    #[test]
    #[should_panic(expected = "durable 21 > closed 20")]
    fn broken_progress_panics() {
        let _ = progress(30, 20, 21, false, false).role(1, Need::Written);
    }

    #[test]
    fn wakes_exactly_the_covered_waiters_and_one_leader_per_free_stage() {
        let p = progress(100, 60, 40, false, false);
        let waiters = [
            (50, Need::Durable), // needs flush
            (40, Need::Durable), // done
            (90, Need::Durable), // needs write
            (70, Need::Written), // needs write, lower lsn: leads it
            (60, Need::Written), // done
            (45, Need::Durable), // needs flush, lower lsn: leads it
        ];
        let mut woken = wake_plan(&p, &waiters);
        woken.sort_unstable();
        assert_eq!(woken, vec![1, 3, 4, 5]);
    }

    #[test]
    fn busy_stages_get_no_new_leader() {
        let p = progress(100, 60, 40, true, true);
        let waiters = [
            (50, Need::Durable),
            (90, Need::Written),
            (30, Need::Written),
        ];
        assert_eq!(wake_plan(&p, &waiters), vec![2]);
    }
}
