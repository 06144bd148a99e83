//! Positional reads and writes to the end, the same on Linux and macOS (`pread`/`pwrite`,
//! retried on `EINTR` and short counts).

use crate::error::{Error, IoOp, Result};
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use std::path::Path;

/// Reads into `buf` at `offset` until it is full or the file ends; returns the bytes read.
/// A `direct` file's short read is the end of file: asking again for the unaligned rest would
/// be refused.
pub(crate) fn read_full(
    fd: &OwnedFd,
    path: &Path,
    buf: &mut [u8],
    offset: u64,
    direct: bool,
) -> Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(Error::io(IoOp::Read, path, e)),
        }
        if direct && done < buf.len() {
            break;
        }
    }
    assert!(done <= buf.len());
    Ok(done)
}

/// Writes all of `buf` at `offset`; a write of nothing is a full device (`ENOSPC`).
pub(crate) fn write_full(fd: &OwnedFd, path: &Path, buf: &[u8], offset: u64) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pwrite(fd, &buf[done..], offset + done as u64) {
            Ok(0) => return Err(Error::io(IoOp::Write, path, Errno::NOSPC)),
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(Error::io(IoOp::Write, path, e)),
        }
    }
    assert_eq!(done, buf.len());
    Ok(())
}
