//! A clean close leaves one small segment of log when the log's files take more than
//! `WalOptions::close_trim_bytes` (8 MiB; issue 37: a closed database was its data file plus up to seven
//! preallocated 64 MiB segments, the active one, the spare and the free ones kept for reuse).
//! A smaller log stays as it is, for `till dump-log` to show.
//!
//! ```text
//!   close: every page written back, the log durable to `end`
//!     start_fresh_segment: a new segment of first_segment_bytes, base `end`, durable;
//!                          the old active one joins the chain, ending at `end`
//!     (the caller writes the header: checkpoint = `end`)
//!     trim_after_close:    every segment before `end` released; the spare and every free
//!                          segment removed; the directory flushed
//! ```
//!
//! Each step leaves a log recovery reads as before: a fresh segment whose base lies inside
//! the previous one is what every open makes (`open.rs`), a spare or free segment is no part
//! of the chain, and segments go oldest first, so what stays is a contiguous suffix.

use super::{Chunk, Lsn, Result, TailSlots, Wal, new_segment_header, prepare_segment, segment};
use crate::wal::reader::ChainSegment;
use std::sync::Arc;

impl Wal {
    /// Whether a clean close should trim the log: its segment files take more than
    /// `WalOptions::close_trim_bytes`.
    #[must_use]
    pub fn trim_at_close(&self) -> bool {
        self.segment_file_bytes() > self.shared.options.close_trim_bytes
    }

    /// Bytes of the log's segment files: the closed segments it still reads, the active one
    /// and the spare (not the free ones kept for reuse).
    #[must_use]
    pub fn segment_file_bytes(&self) -> u64 {
        let st = self.shared.state.lock();
        st.chain.iter().map(|c| c.header.segment_bytes).sum::<u64>()
            + st.active().segment.header.segment_bytes
            + st.spare.as_ref().map_or(0, |s| s.header.segment_bytes)
    }

    /// At a clean close, with nothing more to append: stops the background threads, makes
    /// the log durable, and starts a fresh segment of `first_segment_bytes` at its end (unless
    /// the active segment holds no record). Returns the end, which the caller's header then
    /// names as its checkpoint before [`Wal::trim_after_close`].
    pub fn start_fresh_segment(&self) -> Result<Lsn> {
        self.stop_background();
        self.shared.check_poison()?;
        self.sync()?;
        let shared = &*self.shared;
        let mut st = shared.state.lock();
        let end = st.progress.appended;
        assert_eq!(
            st.progress.durable, end,
            "a fresh segment at close, with the log not durable to its end"
        );
        let active = Arc::clone(&st.active().segment);
        if active.header.base_lsn == end {
            return Ok(Lsn(end));
        }
        let generation = st.next_generation;
        st.next_generation += 1;
        let free = st.free.pop();
        drop(st);
        let keys = shared.keys.as_deref();
        let segment_bytes = super::open::first_segment_bytes(&shared.options, shared.block_bytes);
        let made = new_segment_header(
            (&*shared.storage, &shared.dir),
            keys,
            (shared.block_bytes, segment_bytes),
            generation,
            end,
        )
        .and_then(|header| {
            prepare_segment(
                &*shared.storage,
                &shared.dir,
                (shared.method, keys),
                header,
                free,
            )
        });
        let mut st = shared.state.lock();
        let fresh = match made {
            Ok(fresh) => fresh,
            Err(e) => {
                // As a failed spare: its file is no part of the log; remove it.
                let path = shared.dir.join(segment::segment_name(generation));
                if shared.storage.exists(&path).unwrap_or(false) {
                    let _ = shared.storage.remove(&path);
                } else if let Some(old) = free {
                    st.free.push(old);
                }
                return Err(e);
            }
        };
        assert!(
            st.chain
                .last()
                .is_none_or(|c| c.header.generation < active.header.generation),
            "the active segment is already in the chain"
        );
        st.chain.push(ChainSegment {
            header: active.header,
            path: active.path.clone(),
            end_lsn: end,
        });
        let buf = st.buffer();
        st.chunks = vec![Chunk {
            file_offset: u64::from(shared.block_bytes),
            start_lsn: end,
            buf,
            segment: Arc::new(fresh),
        }];
        st.slots = TailSlots::default();
        st.dirty.clear();
        st.dirty_buffered.clear();
        debug_assert!({
            st.check_invariants(shared.block_bytes);
            true
        });
        Ok(Lsn(end))
    }

    /// After [`Wal::start_fresh_segment`] and the header that names `end` as its checkpoint:
    /// releases every segment before `end`, and removes the spare and every free segment
    /// (an open makes what it needs). A failed removal leaves a free segment, which the next
    /// open finds; a failed directory flush poisons the log, as any failed flush does.
    pub fn trim_after_close(&self, end: Lsn) -> Result<()> {
        self.release_before(end)?;
        let shared = &*self.shared;
        let mut st = shared.state.lock();
        let mut gone: Vec<u64> = st.free.drain(..).collect();
        if let Some(spare) = st.spare.take() {
            gone.push(spare.header.generation);
        }
        drop(st);
        if gone.is_empty() {
            return Ok(());
        }
        // Oldest first: a crash in between leaves the newest, which are free either way.
        gone.sort_unstable();
        for generation in gone {
            let _ = shared
                .storage
                .remove(&shared.dir.join(segment::segment_name(generation)));
        }
        if let Err(e) = shared.storage.flush_dir(&shared.dir) {
            return Err(shared.state.lock().poison(e));
        }
        Ok(())
    }
}
