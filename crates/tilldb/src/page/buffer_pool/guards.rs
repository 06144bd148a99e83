//! The guards a page is held by: [`PageRead`] holds its frame's latch shared (which keeps the
//! page in the frame: an eviction latches its victim exclusively); [`PageWrite`] pins its
//! frame and holds its latch exclusively, and dropping it unpins the frame, exactly once.

use super::{BufferPool, FrameData};
use crate::page::PageBuf;
use parking_lot::{RwLockReadGuard, RwLockWriteGuard};
use std::fmt;
use std::ops::{Deref, DerefMut};

/// A page held for reading. The page cannot change or leave the pool while this lives.
pub struct PageRead<'a> {
    pub(super) frame: usize,
    pub(super) guard: RwLockReadGuard<'a, FrameData>,
}

/// A page held for changing; it becomes dirty and *unlogged* until [`BufferPool::stamp`].
pub struct PageWrite<'a> {
    pub(super) pool: &'a BufferPool,
    pub(super) frame: usize,
    pub(super) guard: RwLockWriteGuard<'a, FrameData>,
}

impl fmt::Debug for PageRead<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PageRead(frame {}, {:?})", self.frame, **self)
    }
}

impl fmt::Debug for PageWrite<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PageWrite(frame {}, {:?})", self.frame, **self)
    }
}

/// The page of a pinned frame, which always holds one.
fn held(data: &FrameData) -> &PageBuf {
    data.page.as_ref().expect("a pinned frame holds its page")
}

impl Deref for PageRead<'_> {
    type Target = PageBuf;
    fn deref(&self) -> &PageBuf {
        held(&self.guard)
    }
}

impl Deref for PageWrite<'_> {
    type Target = PageBuf;
    fn deref(&self) -> &PageBuf {
        held(&self.guard)
    }
}

impl DerefMut for PageWrite<'_> {
    fn deref_mut(&mut self) -> &mut PageBuf {
        self.guard
            .page
            .as_mut()
            .expect("a pinned frame holds its page")
    }
}

impl Drop for PageWrite<'_> {
    fn drop(&mut self) {
        self.pool.unpin(self.frame);
    }
}
