//! Heap buffers aligned for direct I/O.
//!
//! Always 4096-aligned: that satisfies every device's direct-I/O memory alignment seen so far
//! (512 or 4096), and costs nothing extra for buffered files.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// A zero-initialised byte buffer whose address is a multiple of [`AlignedBuf::ALIGN`].
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only allow reads of initialised bytes.
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
            };
        }
        let layout = Self::layout(len);
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        assert!((ptr.as_ptr() as usize).is_multiple_of(Self::ALIGN));
        AlignedBuf { ptr, len }
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
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, Self::ALIGN).expect("buffer length overflows a Layout")
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with exactly this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) };
        }
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
        // SAFETY: as in deref, and &mut self gives exclusive access.
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
