//! Flush methods on Linux: how a file is opened and how it is flushed, one function each.
//! Other platforms have their own module beside `linux/` (`io/os/`).
//!
//! Trap (verified on 6.18): rustix's `OFlags::DSYNC` is `O_SYNC`, which also syncs metadata such
//! as timestamps on every write. A true `O_DSYNC` is built from libc's raw bit and checked with
//! `F_GETFL` in a test.

use crate::FlushMethod;
use rustix::fd::AsFd;
use rustix::fs::OFlags;

/// `O_DSYNC` from libc: only data and the metadata needed to read it are written through.
pub(crate) const O_DSYNC: OFlags = OFlags::from_bits_retain(libc::O_DSYNC as u32);
/// `O_DIRECT`: bypass the page cache.
pub(crate) const O_DIRECT: OFlags = OFlags::from_bits_retain(libc::O_DIRECT as u32);

// O_SYNC contains O_DSYNC plus its own bit; a true O_DSYNC must not carry that bit.
const _: () = assert!(libc::O_SYNC & !libc::O_DSYNC != 0);
const _: () = assert!(libc::O_DSYNC & libc::O_DIRECT == 0);

/// The extra open flags for `method`.
pub(crate) fn open_flags(method: FlushMethod) -> OFlags {
    match method {
        FlushMethod::Fsync | FlushMethod::Fdatasync | FlushMethod::NoSync => OFlags::empty(),
        FlushMethod::BarrierFsync => unreachable!("refused at open on Linux (`supports`)"),
        FlushMethod::Dsync => O_DSYNC,
        FlushMethod::Direct => O_DIRECT,
        FlushMethod::DirectDsync => O_DIRECT | O_DSYNC,
    }
}

/// Makes the file's writes durable as `method` requires.
///
/// `metadata_dirty` is true when the file's length changed through `set_len` since the last
/// flush: `O_DSYNC` covers data writes (and the size growth they cause) but not `ftruncate`, so
/// write-through methods then need one `fdatasync` too.
pub(crate) fn flush(
    fd: impl AsFd,
    method: FlushMethod,
    metadata_dirty: bool,
) -> rustix::io::Result<()> {
    match method {
        FlushMethod::Fsync => flush_fsync(fd),
        FlushMethod::Fdatasync | FlushMethod::Direct => flush_fdatasync(fd),
        FlushMethod::Dsync | FlushMethod::DirectDsync => flush_write_through(fd, metadata_dirty),
        FlushMethod::NoSync => Ok(()),
        FlushMethod::BarrierFsync => unreachable!("refused at open on Linux (`supports`)"),
    }
}

fn flush_fsync(fd: impl AsFd) -> rustix::io::Result<()> {
    rustix::fs::fsync(fd)
}

fn flush_fdatasync(fd: impl AsFd) -> rustix::io::Result<()> {
    rustix::fs::fdatasync(fd)
}

fn flush_write_through(fd: impl AsFd, metadata_dirty: bool) -> rustix::io::Result<()> {
    if metadata_dirty {
        rustix::fs::fdatasync(fd)
    } else {
        Ok(())
    }
}
