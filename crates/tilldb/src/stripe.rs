//! Which stripe of a striped counter this thread writes: threads take numbers in turn, at
//! their first ask, so that threads running at once mostly write different cache lines (the
//! buffer pool's hit counter, the tree lock's reader counts).

use std::sync::atomic::{AtomicUsize, Ordering};

/// This thread's stripe among `stripes` (the same one every time it asks).
pub(crate) fn thread_stripe(stripes: usize) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|number| *number) % stripes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_keeps_its_stripe_and_threads_take_them_in_turn() {
        let mine = thread_stripe(8);
        assert_eq!(thread_stripe(8), mine, "a thread's stripe changed");
        assert!(mine < 8);
        let others: Vec<usize> = (0..8)
            .map(|_| {
                std::thread::spawn(|| thread_stripe(1 << 20))
                    .join()
                    .expect("thread")
            })
            .collect();
        let mut distinct = others.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 8, "threads shared a number: {others:?}");
    }
}
