//! Heap buffers aligned for direct I/O.
//!
//! Always 4096-aligned: that satisfies every device's direct-I/O memory alignment seen so far
//! (512 or 4096), and costs nothing extra for buffered files.
//!
//! A buffer can be *shared* ([`AlignedBuf::share`]): another `AlignedBuf` over the same bytes,
//! made without copying them, counted in a count made by the first share. Shared bytes never
//! change: the first mutable access of any holder while another holder lives copies them
//! first (copy-on-write), and a holder left alone drops the count and owns the bytes again.
//! A range read holds a leaf this way, reading its entries in place while commits change the
//! page in the pool (`db/range.rs`).

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering, fence};

/// A zero-initialised byte buffer whose address is a multiple of [`AlignedBuf::ALIGN`].
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    /// Null while this buffer owns its bytes alone; else the count of the buffers sharing them
    /// (this one included), made by the first [`AlignedBuf::share`] and freed by the last
    /// holder. Set from null only by a share (through `&self`, hence atomic); cleared only
    /// through `&mut self`.
    shared: AtomicPtr<AtomicUsize>,
}

// SAFETY: AlignedBuf owns its allocation like a Vec<u8>, or shares it with other holders that
// only read it (every write first makes the bytes this holder's alone); the count is atomic.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only allow reads of initialised bytes, and a share only touches
// the atomic count.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// The alignment of every buffer's address.
    pub const ALIGN: usize = 4096;

    /// A buffer of `len` zero bytes. `len` may be zero.
    #[must_use]
    pub fn zeroed(len: usize) -> Self {
        if len == 0 {
            return AlignedBuf {
                // A dangling but aligned pointer, as for an empty Vec.
                ptr: NonNull::new(Self::ALIGN as *mut u8).expect("ALIGN is non-zero"),
                len: 0,
                shared: AtomicPtr::new(ptr::null_mut()),
            };
        }
        let layout = Self::layout(len);
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        assert!((ptr.as_ptr() as usize).is_multiple_of(Self::ALIGN));
        AlignedBuf {
            ptr,
            len,
            shared: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// A buffer holding a copy of `bytes`, zero-padded up to `len`.
    #[must_use]
    pub fn from_slice_padded(bytes: &[u8], len: usize) -> Self {
        assert!(
            bytes.len() <= len,
            "{} bytes do not fit in {len}",
            bytes.len()
        );
        if len == 0 {
            return Self::zeroed(0);
        }
        // Not zeroed first: the copy writes the front, the tail is zeroed alone. (A page's
        // clone zeroed 16 KiB and then copied over it: 5.5 % of a no-flush commit's CPU after
        // a bulk load, in the write-back's copies.)
        let layout = Self::layout(len);
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc::alloc(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        assert!((ptr.as_ptr() as usize).is_multiple_of(Self::ALIGN));
        // SAFETY: `ptr` is a fresh allocation of `len` bytes, `bytes` another of at most `len`
        // (checked above): the copy and the fill together write every byte once, before the
        // buffer is handed out, so no uninitialised byte is ever read.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr(), bytes.len());
            std::ptr::write_bytes(ptr.as_ptr().add(bytes.len()), 0, len - bytes.len());
        }
        AlignedBuf {
            ptr,
            len,
            shared: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Another buffer over the same bytes, made without copying them: both read them until
    /// either is written, which first copies them for itself (see the module docs).
    #[must_use]
    pub fn share(&self) -> Self {
        if self.len == 0 {
            return Self::zeroed(0);
        }
        let mut count = self.shared.load(Ordering::Acquire);
        if count.is_null() {
            // This buffer's first share: a count of one (this holder), installed unless a
            // share on another thread installed one first.
            let fresh = Box::into_raw(Box::new(AtomicUsize::new(1)));
            match self.shared.compare_exchange(
                ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => count = fresh,
                Err(theirs) => {
                    // SAFETY: `fresh` came from Box::into_raw above and was never published.
                    drop(unsafe { Box::from_raw(fresh) });
                    count = theirs;
                }
            }
        }
        // SAFETY: the count lives while any holder does, and `self` is one (it is freed only
        // by the last holder's drop, or through `&mut` by a holder left alone).
        let before = unsafe { &*count }.fetch_add(1, Ordering::Relaxed);
        assert!(before >= 1, "a share of a buffer nobody holds");
        AlignedBuf {
            ptr: self.ptr,
            len: self.len,
            shared: AtomicPtr::new(count),
        }
    }

    /// Whether another holder shares these bytes now (a test's view of copy-on-write).
    #[must_use]
    pub fn is_shared(&self) -> bool {
        let count = self.shared.load(Ordering::Acquire);
        // SAFETY: as in `share`: `self` holds the count.
        !count.is_null() && unsafe { &*count }.load(Ordering::Acquire) > 1
    }

    /// Makes the bytes this holder's alone before a write: copies them if another holder
    /// lives, else forgets the count.
    #[cold]
    fn unshare(&mut self) {
        let count = *self.shared.get_mut();
        // SAFETY: as in `share`: `self` holds the count.
        if unsafe { &*count }.load(Ordering::Acquire) == 1 {
            // The other holders are gone (their drops released; this acquires), and none can
            // appear: a share needs a holder, and `&mut self` is the only one.
            // SAFETY: the count came from Box::into_raw in `share`; no holder is left to use it.
            drop(unsafe { Box::from_raw(count) });
            *self.shared.get_mut() = ptr::null_mut();
        } else if !crate::mutants::active("shared-page-written-in-place") {
            // Dropping the old holder counts it out; the others keep the bytes.
            *self = Self::from_slice_padded(self, self.len);
        }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, Self::ALIGN).expect("buffer length overflows a Layout")
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        let count = *self.shared.get_mut();
        if !count.is_null() {
            // SAFETY: as in `share`: `self` holds the count until this decrement.
            if unsafe { &*count }.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            // The last holder: every other holder's reads happened before their decrements.
            fence(Ordering::Acquire);
            // SAFETY: the count came from Box::into_raw in `share`; no holder is left.
            drop(unsafe { Box::from_raw(count) });
        }
        // SAFETY: allocated in `zeroed` or `from_slice_padded` with exactly this layout, and
        // no other holder is left.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) };
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        if !self.shared.get_mut().is_null() {
            self.unshare();
        }
        // SAFETY: as in deref; &mut self gives exclusive access to this holder, and the bytes
        // are no other holder's (`unshare`).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        Self::from_slice_padded(self, self.len)
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_zeroed() {
        for len in [0, 1, 511, 512, 4096, 16384, 1 << 20] {
            let buf = AlignedBuf::zeroed(len);
            assert_eq!(buf.len(), len);
            assert!((buf.as_ptr() as usize).is_multiple_of(AlignedBuf::ALIGN));
            assert!(buf.iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn padded_copy_keeps_bytes_and_zero_fills() {
        let buf = AlignedBuf::from_slice_padded(b"abc", 8);
        assert_eq!(&buf[..], b"abc\0\0\0\0\0");
        assert_eq!(&buf.clone()[..], &buf[..]);
        // Every split of copied and zeroed bytes, empty ones too; clones of whole pages.
        for (copied, len) in [
            (0, 0),
            (0, 1),
            (1, 1),
            (0, 4096),
            (4095, 4096),
            (16384, 16384),
        ] {
            let bytes: Vec<u8> = (0..copied)
                .map(|i| u8::try_from(i % 251 + 1).expect("small"))
                .collect();
            let buf = AlignedBuf::from_slice_padded(&bytes, len);
            assert_eq!(buf.len(), len);
            assert!((buf.as_ptr() as usize).is_multiple_of(AlignedBuf::ALIGN));
            assert_eq!(&buf[..copied], &bytes[..]);
            assert!(buf[copied..].iter().all(|&b| b == 0), "{copied} of {len}");
            assert_eq!(&buf.clone()[..], &buf[..]);
        }
    }

    #[test]
    fn a_shared_buffer_is_copied_before_a_write_and_the_sharer_keeps_the_old_bytes() {
        let mut page = AlignedBuf::from_slice_padded(b"before", 4096);
        assert!(!page.is_shared());
        let reader = page.share();
        let second = reader.share();
        assert!(page.is_shared() && reader.is_shared());
        assert_eq!(reader.as_ptr(), page.as_ptr(), "no copy made to share");
        page[..6].copy_from_slice(b"after!");
        assert_eq!(&page[..6], b"after!");
        assert_eq!(
            &reader[..6],
            b"before",
            "the sharer's bytes changed under it"
        );
        assert_eq!(&second[..6], b"before");
        assert_ne!(reader.as_ptr(), page.as_ptr());
        assert!(!page.is_shared(), "the writer owns its copy alone");
        assert!((page.as_ptr() as usize).is_multiple_of(AlignedBuf::ALIGN));
        // The two readers still share; once one is gone the other writes in place.
        drop(second);
        let mut reader = reader;
        assert!(!reader.is_shared());
        let at = reader.as_ptr();
        reader[0] = b'B';
        assert_eq!(reader.as_ptr(), at, "a holder left alone copied");
        assert_eq!(&reader[..6], b"Before");
        // Holders dropped in any order, on other threads, free the bytes once (Miri- and
        // sanitizer-checkable; here: no double free, no use after free).
        let page = AlignedBuf::from_slice_padded(&[7; 100], 16384);
        let shares: Vec<AlignedBuf> = (0..8).map(|_| page.share()).collect();
        drop(page);
        std::thread::scope(|scope| {
            for share in shares {
                scope.spawn(move || assert!(share.iter().take(100).all(|&b| b == 7)));
            }
        });
        assert!(AlignedBuf::zeroed(0).share().is_empty());
    }
}

/// A growable byte vector on an [`AlignedBuf`]. Bytes past `len` up to the capacity are always
/// zero, so a write of `len` rounded up to a block carries zero padding without extra work.
#[derive(Debug, Clone)]
pub struct AlignedVec {
    buf: AlignedBuf,
    len: usize,
}

impl AlignedVec {
    /// An empty vector with room for `capacity` bytes.
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        AlignedVec {
            buf: AlignedBuf::zeroed(capacity),
            len: 0,
        }
    }

    /// Bytes in use.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no bytes are in use.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes that fit without growing.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Makes room for `additional` more bytes, doubling the capacity as needed.
    pub fn reserve(&mut self, additional: usize) {
        let needed = self.len + additional;
        if needed > self.buf.len() {
            let capacity = needed.next_power_of_two().max(AlignedBuf::ALIGN);
            let mut grown = AlignedBuf::zeroed(capacity);
            grown[..self.len].copy_from_slice(&self.buf[..self.len]);
            self.buf = grown;
        }
        assert!(self.buf.len() >= needed);
    }

    /// The `n` zero bytes after the end, now in use, for the caller to fill in place.
    pub fn extend_zeroed(&mut self, n: usize) -> &mut [u8] {
        self.reserve(n);
        let start = self.len;
        self.len += n;
        debug_assert!(self.buf[start..self.len].iter().all(|&b| b == 0));
        &mut self.buf[start..self.len]
    }

    /// Appends `bytes`.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.extend_zeroed(bytes.len()).copy_from_slice(bytes);
    }

    /// Empties the vector, zeroing what was used so the zero-tail invariant holds.
    pub fn clear(&mut self) {
        self.buf[..self.len].fill(0);
        self.len = 0;
    }

    /// The bytes in use followed by zero padding up to a multiple of `block` (a power of two
    /// no larger than the capacity rounding allows).
    #[must_use]
    pub fn padded_to(&mut self, block: usize) -> &[u8] {
        assert!(block.is_power_of_two());
        let padded = self.len.next_multiple_of(block);
        self.reserve(padded - self.len);
        debug_assert!(self.buf[self.len..padded].iter().all(|&b| b == 0));
        &self.buf[..padded]
    }
}

impl Deref for AlignedVec {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

#[cfg(test)]
mod vec_tests {
    use super::*;

    #[test]
    fn grows_keeps_bytes_and_pads_with_zeros() {
        let mut v = AlignedVec::with_capacity(8);
        v.extend_from_slice(b"abc");
        v.extend_from_slice(&[7u8; 5000]);
        assert_eq!(v.len(), 5003);
        assert_eq!(&v[..3], b"abc");
        assert!((v.as_ptr() as usize).is_multiple_of(AlignedBuf::ALIGN));
        let padded = v.padded_to(4096);
        assert_eq!(padded.len(), 8192);
        assert!(padded[5003..].iter().all(|&b| b == 0));
        v.clear();
        assert!(v.is_empty());
        assert!(v.padded_to(512).is_empty());
        v.extend_from_slice(b"x");
        assert_eq!(v.padded_to(512), {
            let mut want = vec![0u8; 512];
            want[0] = b'x';
            want
        });
    }
}

/// Asks the CPU to bring the first cache lines of `bytes` in ahead of use (at most 192 bytes:
/// a 24-byte key and its 150-byte value). A hint only: it reads nothing, and elsewhere than
/// x86-64 it does nothing. Used where a loop's next item lies far from this one in memory (a
/// commit's writes in key order lie in the write set's arena in put order).
#[inline]
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for offset in (0..bytes.len().min(192)).step_by(64) {
        // SAFETY: a prefetch is a hint that never faults and reads nothing the program can
        // see; the address is inside `bytes` anyway. SSE is part of x86-64.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                bytes.as_ptr().wrapping_add(offset).cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Asks the CPU to bring in the cache lines of `items`, up to `lines` of them spread evenly
/// from its start to its end (a binary search's first probes fall among them). A hint only,
/// as [`prefetch`].
#[inline]
pub fn prefetch_spread<T>(items: &[T], lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let bytes = std::mem::size_of_val(items);
        let start = items.as_ptr().cast::<u8>();
        let count = bytes.div_ceil(64).min(lines);
        for line in 0..count {
            let offset = bytes * line / count.max(1);
            // SAFETY: as in `prefetch`: a hint that never faults; the address is inside
            // `items`.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    start.wrapping_add(offset).cast(),
                );
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (items, lines);
}
