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
        let mut buf = Self::zeroed(len);
        buf[..bytes.len()].copy_from_slice(bytes);
        buf
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
    }
}
