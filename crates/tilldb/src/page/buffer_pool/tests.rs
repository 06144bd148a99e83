//! Unit tests of `buffer_pool.rs`.

use super::*;
use crate::error::Error;
use std::sync::Arc;

/// An in-memory data file and log that checks the write-ahead rule on every write.
#[derive(Default)]
struct FakeBackend {
    pages: Mutex<HashMap<PageId, PageBuf>>,
    durable: AtomicU64,
    fail_writes: AtomicBool,
    writes: AtomicU64,
    spill: Mutex<HashMap<u64, PageBuf>>,
}

impl Backend for Arc<FakeBackend> {
    fn log_durable_to(&self, lsn: u64) -> Result<u64> {
        Ok(self.durable.fetch_max(lsn, Ordering::AcqRel).max(lsn))
    }
    fn log_end(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }
    fn read_page(&self, id: PageId) -> Result<Option<PageBuf>> {
        Ok(self.pages.lock().get(&id).cloned())
    }
    fn write_pages(&self, pages: &mut [PageBuf]) -> Result<()> {
        if self.fail_writes.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        let mut ids: Vec<PageId> = pages.iter().map(PageBuf::id).collect();
        ids.sort_unstable();
        for pair in ids.windows(2) {
            assert!(pair[0] != pair[1], "{} twice in one batch", pair[0]);
        }
        for p in pages.iter() {
            assert!(
                p.lsn() <= self.durable.load(Ordering::Acquire),
                "WAL rule broken"
            );
            // As the data files do (the Backend contract): a copy older than what was
            // written of its page is skipped.
            let mut written = self.pages.lock();
            if written.get(&p.id()).is_none_or(|w| w.lsn() < p.lsn()) {
                written.insert(p.id(), p.clone());
            }
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn save_ledger(&self) -> Result<()> {
        Ok(())
    }
    fn spill_write(&self, slot: u64, page: &mut PageBuf) -> Result<()> {
        self.spill.lock().insert(slot, page.clone());
        Ok(())
    }
    fn spill_read(&self, slot: u64, id: PageId) -> Result<PageBuf> {
        let page = self.spill.lock().get(&slot).cloned().expect("spilled");
        assert_eq!(page.id(), id, "slot {slot} holds another page");
        Ok(page)
    }
}

fn pool(frames: u64) -> (BufferPool, Arc<FakeBackend>) {
    let backend = Arc::new(FakeBackend::default());
    (
        BufferPool::new(
            PageFormat::plain(4096),
            frames * 4096,
            Box::new(Arc::clone(&backend)),
        ),
        backend,
    )
}

fn put(pool: &BufferPool, id: u64, byte: u8, lsn: u64) {
    {
        let mut page = pool.create(PageId(id), PageKind::Leaf).expect("create");
        page.body_mut()[0] = byte;
    }
    pool.stamp(&[PageId(id)], lsn, lsn - 1);
}

#[test]
fn pages_survive_eviction_through_the_backend() {
    let (pool, backend) = pool(8);
    for id in 1..=100 {
        put(&pool, id, u8::try_from(id).expect("small"), id);
    }
    for id in 1..=100 {
        let page = pool.read(PageId(id)).expect("read");
        assert_eq!(
            page.body()[0],
            u8::try_from(id).expect("small"),
            "page {id}"
        );
        assert_eq!(page.lsn(), id);
    }
    let stats = pool.stats();
    assert!(stats.evictions >= 92, "{stats:?}");
    assert!(stats.eviction_writes >= 92, "{stats:?}");
    assert!(backend.pages.lock().len() >= 92);
    pool.check_invariants();
}

/// A miss takes a clean frame while there is one, leaving dirty pages to the batched
/// background write-back; only a pool of dirty frames writes a victim itself.
#[test]
fn a_miss_evicts_a_clean_frame_before_a_dirty_one() {
    let (pool, backend) = pool(8);
    for id in 1..=4 {
        put(&pool, id, 1, 1); // dirty
    }
    for id in 5..=8 {
        put(&pool, id, 1, 1);
    }
    assert_eq!(pool.flush_dirty_before(u64::MAX, 100).expect("flush"), 8);
    for id in 1..=4 {
        put(&pool, id, 2, 2); // dirty again; 5..=8 stay clean
    }
    let written = backend.pages.lock().len();
    for id in 100..104 {
        drop(pool.read(PageId(id)).expect("miss"));
    }
    let stats = pool.stats();
    assert_eq!(stats.eviction_writes, 0, "{stats:?}");
    assert_eq!(backend.pages.lock().len(), written, "a miss wrote a page");
    for id in 1..=4 {
        assert_eq!(pool.read(PageId(id)).expect("cached").body()[0], 2);
    }
    // Every frame dirty: a miss must write one.
    for id in 200..=207 {
        put(&pool, id, 3, 3);
    }
    let before = pool.stats().eviction_writes;
    drop(pool.read(PageId(300)).expect("miss"));
    assert_eq!(pool.stats().eviction_writes, before + 1);
    pool.check_invariants();
}

#[test]
fn unlogged_pages_are_never_written_or_evicted() {
    let (pool, backend) = pool(8);
    for id in 1..=8 {
        let mut page = pool.create(PageId(id), PageKind::Leaf).expect("create");
        page.body_mut()[0] = 1;
    }
    assert_eq!(
        pool.flush_dirty(100).expect("flush"),
        0,
        "wrote an unlogged page"
    );
    let err = pool.read(PageId(9)).expect_err("no victim");
    assert!(err.to_string().contains("unlogged"), "{err}");
    assert!(backend.pages.lock().is_empty());
    pool.stamp(&(1..=8).map(PageId).collect::<Vec<_>>(), 3, 2);
    assert_eq!(pool.flush_dirty(100).expect("flush"), 8);
    pool.read(PageId(9)).expect("room now");
    pool.check_invariants();
}

#[test]
fn pinned_pages_stay_while_others_churn() {
    let (pool, _) = pool(8);
    for id in 1..=7 {
        put(&pool, id, 7, 1);
    }
    let held: Vec<_> = (1..=7)
        .map(|id| pool.read(PageId(id)).expect("read"))
        .collect();
    for id in 100..200 {
        put(&pool, id, 1, 2);
    }
    for (i, page) in held.iter().enumerate() {
        assert_eq!(page.id(), PageId(i as u64 + 1));
        assert_eq!(page.body()[0], 7);
    }
    drop(held);
    pool.check_invariants();
}

#[test]
fn write_back_obeys_the_log_and_tracks_rec_lsn() {
    let (pool, backend) = pool(16);
    put(&pool, 1, 1, 5);
    put(&pool, 2, 2, 9);
    assert_eq!(
        pool.min_rec_lsn(),
        Some(4),
        "the redo point of the oldest change"
    );
    assert_eq!(pool.flush_all().expect("flush"), 2);
    assert!(
        backend.durable.load(Ordering::Acquire) >= 9,
        "log not forced before writing"
    );
    assert_eq!(pool.min_rec_lsn(), None);
    assert_eq!(pool.dirty_count(), 0);
}

#[test]
fn a_failed_write_back_keeps_pages_dirty() {
    let (pool, backend) = pool(16);
    put(&pool, 1, 1, 5);
    backend.fail_writes.store(true, Ordering::Release);
    assert!(pool.flush_dirty(10).is_err());
    assert_eq!(pool.dirty_count(), 1);
    backend.fail_writes.store(false, Ordering::Release);
    assert_eq!(pool.flush_dirty(10).expect("flush"), 1);
    assert_eq!(pool.dirty_count(), 0);
}

/// The deadlock this guards against: `stamp` once held the map lock while waiting for a
/// page latch, and a reader holding that latch needed the map lock to pin its next page.
#[test]
fn stamping_while_a_reader_holds_the_page_does_not_deadlock() {
    let (pool, _) = pool(16);
    let pool = Arc::new(pool);
    put(&pool, 2, 2, 1);
    drop(
        pool.write(PageId(1))
            .or_else(|_| pool.create(PageId(1), PageKind::Leaf))
            .expect("unlogged page"),
    );
    let reader = pool.read(PageId(1)).expect("read");
    let (done, finished) = std::sync::mpsc::channel();
    let stamper = {
        let pool = Arc::clone(&pool);
        std::thread::spawn(move || {
            pool.stamp(&[PageId(1)], 7, 6);
            done.send(()).expect("send");
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    // With the old lock order this pin blocked forever on the map lock.
    let other = pool.read(PageId(2)).expect("read another page");
    drop(other);
    drop(reader);
    finished
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("stamp finished");
    stamper.join().expect("stamper");
    assert_eq!(pool.read(PageId(1)).expect("read").lsn(), 7);
}

#[test]
#[should_panic(expected = "was not changed")]
fn stamping_an_unchanged_page_is_a_bug() {
    let (pool, _) = pool(8);
    put(&pool, 1, 1, 5);
    pool.stamp(&[PageId(1)], 6, 5);
}

#[test]
fn concurrent_readers_and_writers_on_a_small_pool() {
    let (pool, _) = pool(12);
    let pool = Arc::new(pool);
    let lsn = Arc::new(AtomicU64::new(1));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (pool, lsn) = (Arc::clone(&pool), Arc::clone(&lsn));
            std::thread::spawn(move || {
                let ids: Vec<u64> = (0..10).map(|i| 1 + t * 10 + i).collect();
                for &id in &ids {
                    put(&pool, id, 0, lsn.fetch_add(1, Ordering::AcqRel));
                }
                for round in 1..=30u8 {
                    for &id in &ids {
                        {
                            let mut page = pool.write(PageId(id)).expect("write");
                            assert_eq!(page.body()[0], round - 1, "page {id} lost an update");
                            page.body_mut()[0] = round;
                        }
                        let l = lsn.fetch_add(1, Ordering::AcqRel);
                        pool.stamp(&[PageId(id)], l, l - 1);
                        let other = PageId(1 + (id * 7 + u64::from(round)) % 40);
                        drop(pool.read(other).expect("read"));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    for id in 1..=40 {
        assert_eq!(
            pool.read(PageId(id)).expect("read").body()[0],
            30,
            "page {id}"
        );
    }
    pool.check_invariants();
}

/// Reads hold their frames by the latch alone, no pin: a read that holds every frame and
/// needs another page gets the pool's error, not an endless hunt for a victim it could latch.
#[test]
fn a_read_holding_every_frame_is_told_to_raise_the_cache_not_left_spinning() {
    let (pool, _) = pool(8);
    for id in 1..=8 {
        put(&pool, id, 7, 1);
    }
    let held: Vec<_> = (1..=8)
        .map(|id| pool.read(PageId(id)).expect("read"))
        .collect();
    match pool.read(PageId(9)) {
        Err(Error::InvalidOptions(why)) => {
            assert!(why.contains("raise cache_bytes"), "{why}");
        }
        other => panic!("expected the pool's error, got {other:?}"),
    }
    drop(held);
    assert_eq!(pool.read(PageId(9)).expect("read").id(), PageId(9));
    pool.check_invariants();
}

/// Readers descend as a tree read does, holding a page while they read the next, on a pool so
/// small that nearly every read evicts: no read waits for a latch its own thread holds, none
/// finds the wrong page, and a page read through a stale hint is the page asked for.
#[test]
fn readers_holding_a_page_while_reading_the_next_churn_a_small_pool() {
    let (pool, _) = pool(10);
    for id in 1..=60 {
        put(&pool, id, u8::try_from(id).expect("small"), 1);
    }
    let pool = Arc::new(pool);
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || {
                let mut seed = 0x9E37_79B9_u64 + t;
                for _ in 0..3_000 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let (a, b) = (1 + seed % 60, 1 + (seed >> 20) % 60);
                    let first = pool.read(PageId(a)).expect("read");
                    let second = pool.read(PageId(b)).expect("read");
                    let byte = |id: u64| u8::try_from(id).expect("small");
                    assert_eq!((first.id(), first.body()[0]), (PageId(a), byte(a)));
                    assert_eq!((second.id(), second.body()[0]), (PageId(b), byte(b)));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    pool.check_invariants();
}

/// A write-back gathers its batch frame by frame, letting each latch go: a page it copied can
/// be evicted (written back), read into another frame, changed again and stamped before the
/// gathering reaches that frame. The batch then held two copies of one page, and the page
/// store's check panicked ("page 3 twice in one batch": `explore_random` seed 2413, a
/// checkpoint beside seven committing threads on an 11-page cache). The newer copy is the one
/// written.
#[test]
fn a_page_evicted_and_changed_again_while_a_write_back_gathers_is_written_once() {
    let (pool, backend) = pool(8);
    let pool = Arc::new(pool);
    let lsn = Arc::new(AtomicU64::new(2));
    let stop = Arc::new(AtomicBool::new(false));
    let flusher = {
        let (pool, stop) = (Arc::clone(&pool), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut batches = 0u64;
            while !stop.load(Ordering::Acquire) {
                pool.flush_dirty(usize::MAX).expect("flush");
                batches += 1;
            }
            batches
        })
    };
    let writers: Vec<_> = (0..3u64)
        .map(|t| {
            let (pool, lsn) = (Arc::clone(&pool), Arc::clone(&lsn));
            std::thread::spawn(move || {
                let mut seed = 0x2545_F491_u64 + t;
                for _ in 0..20_000 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    // Each thread its own pages: the lsn is drawn after the change.
                    let id = PageId(1 + t * 8 + seed % 8);
                    {
                        let mut page = pool.write(id).expect("write");
                        page.body_mut()[1] = page.body()[1].wrapping_add(1);
                    }
                    let l = lsn.fetch_add(1, Ordering::AcqRel);
                    pool.stamp(&[id], l, l - 1);
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    stop.store(true, Ordering::Release);
    let batches = flusher.join().expect("flusher");
    assert!(batches > 0);
    pool.flush_all().expect("flush all");
    let total: u64 = (1..=24)
        .map(|id| {
            let page = pool.read(PageId(id)).expect("read");
            assert_eq!(
                backend.pages.lock().get(&PageId(id)).map(|p| p.body()[1]),
                Some(page.body()[1]),
                "page {id}: the data file holds an older copy than the cache"
            );
            u64::from(page.body()[1])
        })
        .sum();
    assert_eq!(total % 256, 60_000 % 256);
    pool.check_invariants();
}

/// The redo point is read frame by frame, then from the spill file's list: a page moving from
/// the spill file back into a frame already passed was in neither place the scan looked, and
/// a checkpoint took a redo point past its oldest change (the change lost on a crash). Here a
/// held page with a redo point of 4 leaves for the spill file and comes back, over and over,
/// while another thread reads the redo point.
#[test]
fn the_redo_point_sees_a_page_moving_between_spill_file_and_frame() {
    let (pool, _) = pool(8);
    put(&pool, 1, 1, 5);
    {
        let mut page = pool.write(PageId(1)).expect("write");
        page.body_mut()[0] = 2;
    }
    pool.hold(&[PageId(1)]);
    assert_eq!(pool.min_rec_lsn(), Some(4));
    let pool = Arc::new(pool);
    let stop = Arc::new(AtomicBool::new(false));
    let mover = {
        let (pool, stop) = (Arc::clone(&pool), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Acquire) {
                // Seven frames held by reads: the eighth page's frame must be the held one.
                let held: Vec<_> = (100..107)
                    .map(|id| pool.read(PageId(id)).expect("read"))
                    .collect();
                drop(pool.read(PageId(107)).expect("read"));
                drop(held);
                assert_eq!(pool.read(PageId(1)).expect("read back").body()[0], 2);
                rounds += 1;
            }
            rounds
        })
    };
    let mut reads = 0u64;
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_millis(500) {
        assert_eq!(
            pool.min_rec_lsn(),
            Some(4),
            "the redo point missed the held page (read {reads})"
        );
        reads += 1;
    }
    stop.store(true, Ordering::Release);
    let rounds = mover.join().expect("mover");
    assert!(rounds > 10, "the page moved {rounds} times");
    assert!(pool.stats().spills > 10, "spilled {:?}", pool.stats());
}

/// A branch's guess of where its child is (`locate`, `read_guessed`) is only a guess: a
/// guess of a frame holding another page, of no frame, or of a frame the page was evicted
/// from reads the right page, and `locate` refreshes a stale guess from the hint table.
#[test]
fn a_wrong_frame_guess_reads_the_right_page() {
    let (pool, _backend) = pool(8);
    for id in 1..=4 {
        put(&pool, id, u8::try_from(id).expect("small"), id);
    }
    let guess_of = |id: u64| {
        let slot = AtomicU32::new(0);
        let guess = pool.locate(PageId(id), &slot);
        assert_ne!(guess, 0, "page {id} is in the pool: its frame is known");
        assert_eq!(
            slot.load(Ordering::Relaxed),
            guess,
            "the slot keeps the guess"
        );
        guess
    };
    let (one, two) = (guess_of(1), guess_of(2));
    assert_ne!(one, two);
    for (id, guess) in [(1, one), (1, two), (2, one), (2, 0), (3, u32::MAX), (4, 9)] {
        let page = pool.read_guessed(PageId(id), guess).expect("read");
        assert_eq!(page.id(), PageId(id), "guess {guess}");
        assert_eq!(page.body()[0], u8::try_from(id).expect("small"));
    }
    // A slot guessing page 2's frame for page 1 is put right.
    let slot = AtomicU32::new(two);
    assert_eq!(pool.locate(PageId(1), &slot), one);
    assert_eq!(slot.load(Ordering::Relaxed), one);
    // Page 1 evicted: the old guess now names a frame holding another page or none, and
    // the read still finds page 1.
    for id in 5..=40 {
        put(&pool, id, u8::try_from(id).expect("small"), id);
    }
    let guess = pool.locate(PageId(1), &slot);
    assert!(
        guess == 0 || pool.read_guessed(PageId(1), guess).expect("read").id() == PageId(1),
        "locate guessed frame {guess} for an evicted page"
    );
    let page = pool.read_guessed(PageId(1), one).expect("read");
    assert_eq!((page.id(), page.body()[0]), (PageId(1), 1));
    drop(page);
    pool.check_invariants();
}
