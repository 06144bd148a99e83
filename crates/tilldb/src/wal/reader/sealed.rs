//! An encrypted database's log, as its readers meet it (docs/encryption.md, piece 3): every
//! segment in its chain is sealed with the database's cipher, and its records are opened with
//! the segment's key when the reader has the database's keys.

use super::super::segment::{SegmentHeader, VERSION_OFFSET};
use crate::crypt::{DatabaseKeys, RecordOpener};
use crate::error::{Error, Result};
use std::path::Path;

/// Refuses a segment of the log of an encrypted database (`keys`) that is not sealed with its
/// cipher: tilldb writes every segment of such a log sealed, so a plain one was put there by
/// something else, and its records, whose crc anyone can make, must never be replayed.
pub(in crate::wal) fn check_sealed(
    keys: Option<&DatabaseKeys>,
    header: &SegmentHeader,
    path: &Path,
) -> Result<()> {
    let Some(keys) = keys else {
        return Ok(());
    };
    if header.seal.map(|s| s.cipher) == Some(keys.cipher()) {
        return Ok(());
    }
    Err(Error::Corruption {
        file: path.to_path_buf(),
        offset: VERSION_OFFSET as u64,
        what: "a log segment not sealed with the database's cipher, in an encrypted \
               database's log: tilldb writes none, so it was put there by something else",
    })
}

/// The opener of a sealed segment's records, when the reader has the database's `keys`.
pub(in crate::wal) fn opener_of(
    keys: Option<&DatabaseKeys>,
    header: &SegmentHeader,
) -> Option<RecordOpener> {
    let seal = header.seal?;
    keys.map(|keys| RecordOpener::new(keys, &seal.salt, header.generation))
}
