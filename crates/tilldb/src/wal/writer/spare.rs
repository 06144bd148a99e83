//! Segment switching and the spare segment: the next segment is prepared (created or
//! recycled, zero-filled, its header durable) before the active one fills, by the preparer
//! thread or, when it is behind, by the appender that needs it.

use super::{
    Arc, Chunk, Error, IoOp, MutexGuard, Result, Shared, State, new_segment_header,
    prepare_segment, record, segment,
};

impl Shared {
    /// Closes the active segment with a `SegmentEnd` record and makes the spare active.
    /// Returns false (changing nothing) when no spare is ready.
    pub(super) fn switch_segment(&self, st: &mut State) -> bool {
        let Some(next) = st.spare.take() else {
            return false;
        };
        let lsn = st.progress.appended;
        let old = &st.active().segment;
        assert_eq!(
            next.header.base_lsn,
            old.end_lsn(),
            "spare does not continue the active segment"
        );
        let end_bytes = record::segment_end_bytes(self.keys.is_some());
        assert!(
            lsn + end_bytes as u64 <= old.end_lsn(),
            "no room left for SegmentEnd"
        );
        let generation = old.header.generation;
        let chunk = st.chunks.last_mut().expect("active chunk");
        let target = chunk.buf.extend_zeroed(end_bytes);
        let sealer = chunk.segment.sealer.as_ref();
        let written = record::encode_segment_end(target, (generation, sealer), lsn);
        assert_eq!(written, end_bytes);
        let base = next.header.base_lsn;
        tracing::debug!(
            target: "tilldb",
            generation = next.header.generation,
            base_lsn = base,
            "log segment switch"
        );
        let buf = st.buffer();
        st.chunks.push(Chunk {
            file_offset: u64::from(self.block_bytes),
            start_lsn: base,
            buf,
            segment: next,
        });
        // The lsns between the SegmentEnd record and the next base do not exist; the written
        // and durable marks jump over them with the appended one.
        st.progress.appended = base;
        self.preparer_wake.notify_all();
        true
    }

    /// The size of the next segment: twice the active one's, at least what a waiting record
    /// asked for (`State::segment_need`, taken here), at most `segment_bytes`.
    fn next_segment_bytes(&self, st: &mut State) -> u64 {
        let doubled = st.active().segment.header.segment_bytes.saturating_mul(2);
        let need = std::mem::take(&mut st.segment_need);
        let bytes = doubled
            .max(need)
            .next_multiple_of(u64::from(self.block_bytes))
            .min(self.options.segment_bytes);
        assert!(
            bytes >= need,
            "a record needs a segment of {need} bytes, more than the largest ({})",
            self.options.segment_bytes
        );
        bytes
    }

    /// Before a switch for a record of `len` bytes: when the spare has too little room for
    /// it, it goes back to the free segments and a larger one is asked for, which the next
    /// preparation makes (resizing that file). Without this a record larger than the next
    /// few segments would switch through each of them, empty.
    pub(super) fn ensure_spare_room(&self, st: &mut State, len: usize) {
        let room = (len + self.tail_reserve()) as u64;
        let header_blocks = (1 + segment::TAIL_SLOTS) * u64::from(self.block_bytes);
        let fits = |bytes: u64| bytes >= room + header_blocks;
        if let Some(spare) = &st.spare
            && !fits(spare.header.segment_bytes)
        {
            let spare = st.spare.take().expect("checked");
            st.free.push(spare.header.generation);
        }
        if st.spare.is_none() {
            st.segment_need = st.segment_need.max(room + header_blocks);
        }
    }

    /// Makes sure a spare segment is ready (preparing it here if no one else is).
    pub(super) fn prepare_spare(&self) -> Result<()> {
        let mut st = self.state.lock();
        if st.spare.is_some() {
            return Ok(());
        }
        if st.preparing {
            self.spare_ready.wait(&mut st);
            return Ok(());
        }
        st.preparing = true;
        let segment_bytes = self.next_segment_bytes(&mut st);
        let active = &st.active().segment;
        let (generation, base_lsn) = (st.next_generation, active.end_lsn());
        st.next_generation += 1;
        let free = st.free.pop();
        let keys = self.keys.as_deref();
        let result = MutexGuard::unlocked(&mut st, || {
            let header = new_segment_header(
                (&*self.storage, &self.dir),
                keys,
                (self.block_bytes, segment_bytes),
                generation,
                base_lsn,
            )?;
            prepare_segment(&*self.storage, &self.dir, (self.method, keys), header, free)
        });
        st.preparing = false;
        // A failed directory flush is fail-stop, like any failed flush: the directory's
        // pending creates, renames and removes (other segments' among them) may be lost, and
        // a retry that succeeds proves nothing. Other failures concern only the spare's own
        // file, which is removed below and never reused: a full disk while creating or
        // zero-filling, or a failed flush of its zeros or header (retried with a new file).
        let result = match result {
            Err(
                e @ Error::Io {
                    op: IoOp::FlushDir, ..
                },
            ) => Err(st.poison(e)),
            other => other,
        };
        if result.is_err() {
            // The file a failed preparation made (or renamed to the new generation's name) is
            // no part of the log: remove it, rather than leave one more each time the preparer
            // retries (every flush interval, on a full disk). Not reused: after a failed flush
            // its length can promise zeros that never reached the disk (the random tier met
            // that, seed 1741). A free segment that was never renamed stays free.
            let made = self.dir.join(segment::segment_name(generation));
            if self.storage.exists(&made).unwrap_or(false) {
                let _ = self.storage.remove(&made);
            } else if let Some(old) = free {
                st.free.push(old);
            }
        }
        let result = result.map(|segment| st.spare = Some(Arc::new(segment)));
        self.spare_ready.notify_all();
        self.preparer_wake.notify_all();
        result
    }
}
