//! The commit queue.
//!
//! A transaction that read holds the writer lock since its first read and applies its own
//! changes. One that only wrote reaches commit without it, and joins the *commit queue*: the
//! first to arrive leads, takes the writer lock once and applies every commit that queues
//! behind it while it works, each as its own log record in arrival order, handing each round
//! to the log as one batch of waiters, then hands the lock back (after 256 commits it hands
//! the lead to the first commit still queued). The others sleep once, until their commit is
//! as durable as they asked:
//!
//! ```text
//!   commit ──queue.leading?──no──> lead: lock; apply own; apply each queued ... unlock;
//!                  │                      wait for the log (leading its stages when free)
//!                  yes
//!                  └──> queued ──(leader applied it: lsn)──> enlisted with the log
//!                                   ──(log says durable, or "lead a stage")──> wait returns
//! ```
//!
//! Why: with the lock taken at `begin()` and handed from committer to committer, every commit
//! paid a wake-up of the next one inside the lock (the hand-off is serial), and a second one
//! when its flush completed: at 64 threads on 2 CPUs the CPUs idled 40 % of the time while
//! the lock went round (docs/benchmarks-journal.md, "The commit queue: one
//! lock hold per batch, one sleep per commit"). Here the lock is handed over once
//! per batch, and a queued commit costs one sleep.
//!
//! Invariants (asserted where they hold): at most one leader (`CommitQueue::leading`);
//! every queued commit is finished (applied or failed) exactly once and woken exactly once
//! (by its leader when it failed, is `Lazy`, or leads next, else by the log); a leader that
//! unwinds fails every commit it holds and every queued one, and poisons the database (the
//! pages may be half changed), so nobody sleeps forever.

use super::{Changes, apply};
use crate::Durability;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::wal::{Lsn, WaitSlot};
use parking_lot::Mutex;
use std::sync::Arc;

/// Commits one leader applies before it hands the lead to the next queued commit: a bound on
/// how long a leader works for others before its own commit returns.
const LEAD_COMMITS_MAX: usize = 256;

/// Who leads, and the commits waiting for a leader.
#[derive(Debug, Default)]
pub(in crate::db) struct CommitQueue {
    leading: bool,
    queued: Vec<Arc<Queued>>,
}

/// A commit waiting in the queue.
#[derive(Debug)]
struct Queued {
    /// Read by the leader, not taken: the leader lets go of a commit before the log can wake
    /// it, so the committer's own thread usually drops it last, and the allocations a
    /// transaction made go back to the thread that made them, whose allocator cache serves
    /// its next transaction (freed by the leader, they went through the allocator's shared
    /// arenas; docs/benchmarks-journal.md, "Allocations freed where they were made").
    changes: Changes,
    durability: Durability,
    turn: Mutex<Turn>,
    slot: Arc<WaitSlot>,
}

/// What a queued commit's thread does when it wakes.
#[derive(Debug)]
enum Turn {
    /// Not applied yet (and, for a queued commit, asleep until it is).
    Waiting,
    /// Lead the queue: the previous leader applied its share and handed over.
    Lead,
    /// Applied (its lsn) or failed; the wait for the log is the thread's own.
    Finished(Result<Lsn>),
    /// The thread took its outcome: nothing is left to apply, hand over or wake.
    Taken,
}

/// Commits `changes` without the writer lock held: through the queue. Returns the commit's
/// lsn, applied and appended; the caller then waits for the log (at once for a queued commit
/// the log woke).
pub(in crate::db) fn commit_queued(
    db: &Db,
    changes: Changes,
    durability: Durability,
) -> Result<Lsn> {
    let me = Arc::new(Queued {
        changes,
        durability: if crate::mutants::active("queued-sync-as-buffered")
            && durability == Durability::Sync
        {
            Durability::Buffered
        } else {
            durability
        },
        turn: Mutex::new(Turn::Waiting),
        slot: WaitSlot::for_current_thread(),
    });
    {
        let mut queue = db.inner.commits.lock();
        if queue.leading {
            queue.queued.push(Arc::clone(&me));
            drop(queue);
            db.inner.wal.park(&me.slot);
            let turn = std::mem::replace(&mut *me.turn.lock(), Turn::Taken);
            match turn {
                Turn::Finished(outcome) => return outcome,
                // Not applied: it applies its own commit first, as the leader.
                Turn::Lead => *me.turn.lock() = Turn::Waiting,
                Turn::Waiting | Turn::Taken => {
                    unreachable!("woken before its commit was finished: {turn:?}")
                }
            }
        } else {
            queue.leading = true;
        }
    }
    lead(db, &me)
}

/// Leads the queue: applies `me` and what queues meanwhile, up to [`LEAD_COMMITS_MAX`], then
/// gives the lead up (or to the next queued commit). Returns `me`'s outcome.
fn lead(db: &Db, me: &Arc<Queued>) -> Result<Lsn> {
    // The lock before the guard: on unwind the guard drops first, so the database is
    // poisoned before a waiting writer can take the lock and build on half-changed pages.
    let mut alloc = db.inner.writer.lock();
    let mut leader = Leader {
        db,
        me: Arc::clone(me),
        batch: vec![Arc::clone(me)],
        enlisted: Vec::new(),
        done: false,
    };
    let mut applied = 0usize;
    loop {
        // Applied in place: if this unwinds, `leader` still holds every commit of the round.
        let mut i = 0;
        while i < leader.batch.len() && applied < LEAD_COMMITS_MAX {
            let queued = Arc::clone(&leader.batch[i]);
            assert!(
                matches!(*queued.turn.lock(), Turn::Waiting),
                "a queued commit is applied once"
            );
            // Checked under the lock, before every commit: one that failed in this batch (or
            // anywhere) poisoned the database, and may have left pages half changed.
            let checked = if crate::mutants::active("queue-skips-poison-check") {
                Ok(())
            } else {
                db.check_poison()
            };
            let outcome = checked
                .and_then(|()| apply(db, &mut alloc, &queued.changes, queued.durability))
                .map_err(|e| db.poison(e));
            applied += 1;
            i += 1;
            if Arc::ptr_eq(&queued, me) {
                *me.turn.lock() = Turn::Finished(outcome);
            } else {
                db.inner.counters.queued_commit();
                finish(&queued, outcome, &mut leader.enlisted);
            }
        }
        // Not applied (the lead's share is done): back to the front of the queue, before
        // anything else can unwind, so that `Leader::drop` finds them there.
        let rest = leader.batch.split_off(i);
        leader.batch.clear();
        if !rest.is_empty() {
            db.inner.commits.lock().queued.splice(0..0, rest);
        }
        // The log learns of this round's commits now, so that a follower can lead the write
        // and flush of this round while this thread applies the next.
        leader.enlist();
        let mut queue = db.inner.commits.lock();
        assert!(queue.leading, "a leader without the lead");
        if queue.queued.is_empty() {
            queue.leading = false;
            break;
        }
        if applied >= LEAD_COMMITS_MAX {
            // Enough for others: the first queued commit leads next (the lead stays taken).
            let next = queue.queued.remove(0);
            drop(queue);
            drop(alloc);
            leader.done = true;
            hand(&next, Turn::Lead);
            return take_outcome(me);
        }
        leader.batch = std::mem::take(&mut queue.queued);
    }
    drop(alloc);
    leader.done = true;
    take_outcome(me)
}

/// The outcome the leader recorded for its own commit.
fn take_outcome(me: &Queued) -> Result<Lsn> {
    match std::mem::replace(&mut *me.turn.lock(), Turn::Taken) {
        Turn::Finished(outcome) => outcome,
        turn => unreachable!("the leader's own commit not finished: {turn:?}"),
    }
}

/// Records a queued commit's outcome and arranges its one wake-up: by the log (once the
/// round is enlisted) when its commit is as durable as it asked, or when it should lead a
/// stage; now when it failed.
fn finish(queued: &Arc<Queued>, outcome: Result<Lsn>, enlisted: &mut Vec<Arc<Queued>>) {
    match outcome {
        Ok(lsn) => {
            *queued.turn.lock() = Turn::Finished(Ok(lsn));
            enlisted.push(Arc::clone(queued));
        }
        Err(e) => hand(queued, Turn::Finished(Err(e))),
    }
}

/// Gives a queued commit its turn and wakes it.
fn hand(queued: &Queued, turn: Turn) {
    *queued.turn.lock() = turn;
    queued.slot.wake();
}

/// The commits a leader holds. If the leader unwinds (a bug panicked while applying), they
/// and everything queued fail instead of sleeping forever, the lead is given up and the
/// database is poisoned: the pages may be half changed.
struct Leader<'a> {
    db: &'a Db,
    /// The leader's own commit: its thread is the one unwinding, not a sleeper to wake.
    me: Arc<Queued>,
    batch: Vec<Arc<Queued>>,
    /// Commits of this round applied for others, for the log to wake once it is enlisted.
    enlisted: Vec<Arc<Queued>>,
    done: bool,
}

impl Leader<'_> {
    /// Hands the commits applied this round to the log, which wakes each when its need is met.
    fn enlist(&mut self) {
        let waiters = self
            .enlisted
            .iter()
            .map(|queued| {
                let lsn = match &*queued.turn.lock() {
                    Turn::Finished(Ok(lsn)) => *lsn,
                    turn => unreachable!("enlisting a commit not applied: {turn:?}"),
                };
                (lsn, queued.durability, Arc::clone(&queued.slot))
            })
            .collect();
        self.enlisted.clear();
        self.db.inner.wal.enlist(waiters);
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.db.poison(Error::PoisonedBy {
            cause: "a committing thread panicked while it applied commits".to_owned(),
        });
        let mut queue = self.db.inner.commits.lock();
        queue.leading = false;
        let stranded: Vec<_> = self.batch.drain(..).chain(queue.queued.drain(..)).collect();
        drop(queue);
        // Applied ones not yet enlisted fail too: nothing is acknowledged after the panic.
        let unenlisted: Vec<_> = self.enlisted.drain(..).collect();
        for queued in stranded {
            if Arc::ptr_eq(&queued, &self.me) {
                continue;
            }
            let asleep = matches!(*queued.turn.lock(), Turn::Waiting)
                || unenlisted.iter().any(|q| Arc::ptr_eq(q, &queued));
            if asleep {
                let failed = self.db.check_poison().expect_err("poisoned above");
                hand(&queued, Turn::Finished(Err(failed)));
            }
        }
    }
}
