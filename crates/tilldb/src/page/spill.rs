//! # The spill file (`txn-spill.tdb`): pages of a commit not yet whole
//!
//! A large commit is logged in parts (`record.rs`). Until its last part is in the log, the
//! pages it changed may not reach the data file: a crash then would leave there a change that
//! replay, which applies none of an unfinished commit, never undoes. The buffer pool keeps such
//! pages in memory (*held*), and when it needs the frame of one it writes the page here
//! instead (`page/buffer_pool/held.rs`), reading it back when it is needed again or when the
//! commit's last part is logged. It also takes ordinary dirty pages an eviction *parks* while
//! read-only handles hold their snapshots (the data file may not change under them), until a
//! miss or the next checkpoint reads them back.
//!
//! ```text
//! offset          size        field
//! slot * page     page_bytes  one page as the data file holds it (crc seeded with its id)
//! ```
//!
//! Which page is in which slot lives only in the pool's memory. The file is scratch: never
//! flushed, never read by recovery, made only when a page is first spilled, removed when the
//! pool finds no page left in it (`SpillFile::discard`: after a commit's last part read its
//! held pages back, after a checkpoint or a close unparked the parked ones), and removed when
//! the database opens, should a process that died have left it (`SpillFile::new`). A page read back is checked like a data page; one
//! that fails is `Corruption` naming this file and the offset.
//!
//! In an encrypted database each slot's page is sealed under the open's scratch key
//! (`crypt/scratch.rs`, [`SpillFile::with_key`]), the slot and the page id bound; the seal
//! lives in memory beside the slot. A page that fails its tag is `Corruption` as well.

use super::{PageBuf, PageId};
use crate::FlushMethod;
use crate::crypt::{ScratchKey, ScratchSeal};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Storage, StorageFile};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::files::SPILL_FILE_NAME;

/// The spill file of one open database.
pub struct SpillFile {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    page_bytes: u32,
    /// Made at the first spill.
    file: Mutex<Option<Box<dyn StorageFile>>>,
    /// An encrypted database's scratch key, and the seal of each slot written under it.
    key: Option<Arc<ScratchKey>>,
    seals: Mutex<HashMap<u64, ScratchSeal>>,
}

/// What a spilled page's tag binds: its slot and its id.
fn aad(slot: u64, id: PageId) -> [u8; 16] {
    let mut aad = [0u8; 16];
    aad[..8].copy_from_slice(&slot.to_le_bytes());
    aad[8..].copy_from_slice(&id.0.to_le_bytes());
    aad
}

impl std::fmt::Debug for SpillFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SpillFile({})", self.path.display())
    }
}

impl SpillFile {
    /// The spill file of the database in `dir`; removes one a previous run left behind.
    pub fn new(storage: Arc<dyn Storage>, dir: &Path, page_bytes: u32) -> Result<Self> {
        let path = dir.join(SPILL_FILE_NAME);
        if storage.exists(&path)? {
            storage.remove(&path)?;
        }
        Ok(SpillFile {
            storage,
            path,
            page_bytes,
            file: Mutex::new(None),
            key: None,
            seals: Mutex::new(HashMap::new()),
        })
    }

    /// This spill file, its pages sealed under `key` (an encrypted database's scratch key).
    #[must_use]
    pub fn with_key(self, key: Option<Arc<ScratchKey>>) -> Self {
        SpillFile { key, ..self }
    }

    /// Writes `page` to `slot`.
    pub fn write(&self, slot: u64, page: &mut PageBuf) -> Result<()> {
        assert_eq!(page.page_bytes(), self.page_bytes as usize, "page size");
        let mut file = self.file.lock();
        if file.is_none() {
            // Buffered: nothing here needs to outlive the process, and a direct method would
            // ask for alignment this scratch file does not need.
            *file = Some(self.storage.create(&self.path, FlushMethod::Fdatasync)?);
        }
        let file = file.as_ref().expect("made above");
        let offset = slot * u64::from(self.page_bytes);
        let id = page.id();
        let bytes = page.seal();
        let Some(key) = &self.key else {
            return file.write_at(bytes, offset);
        };
        let mut sealed = AlignedBuf::zeroed(bytes.len());
        sealed.copy_from_slice(bytes);
        let seal = key.seal(&aad(slot, id), &mut sealed);
        self.seals.lock().insert(slot, seal);
        file.write_at(&sealed, offset)
    }

    /// Removes the file, if made: no page is in it any more (the pool's slots are all free
    /// and none is on its way in or out). The next spill makes it afresh. Returns whether it
    /// went: a file that cannot be removed stays as it was, in use (a scratch file is no
    /// reason to fail the commit that emptied it; the next open removes it).
    pub fn discard(&self) -> bool {
        let mut file = self.file.lock();
        // Closed first: Windows removes no file that is open.
        if file.take().is_none() {
            return false;
        }
        match self.storage.remove(&self.path) {
            Ok(()) => {
                self.seals.lock().clear();
                true
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "spill file not removed");
                // Its slots stay taken, so its pages' places stay valid; a file that cannot be
                // opened again is made afresh by the next spill (and fails it, not silently).
                *file = self.storage.open(&self.path, FlushMethod::Fdatasync).ok();
                false
            }
        }
    }

    /// Reads back page `id` from `slot`, checked.
    pub fn read(&self, slot: u64, id: PageId) -> Result<PageBuf> {
        let offset = slot * u64::from(self.page_bytes);
        let corrupt = |what| Error::Corruption {
            file: self.path.clone(),
            offset,
            what,
        };
        let file = self.file.lock();
        let file = file
            .as_ref()
            .ok_or_else(|| corrupt("a page read back from a spill file never written"))?;
        let mut buf = AlignedBuf::zeroed(self.page_bytes as usize);
        let n = file.read_at(&mut buf, offset)?;
        if n != buf.len() {
            return Err(corrupt("spill file shorter than a page written to it"));
        }
        if let Some(key) = &self.key {
            let seal = *self
                .seals
                .lock()
                .get(&slot)
                .ok_or_else(|| corrupt("a spilled page read back from a slot never sealed"))?;
            key.open(&seal, &aad(slot, id), &mut buf).map_err(|_| {
                corrupt("a spilled page fails its authentication (changed on disk)")
            })?;
        }
        match PageBuf::from_bytes(id, buf) {
            Ok(Some(page)) => Ok(page),
            Ok(None) => Err(corrupt("a spilled page reads back as zeros")),
            Err(fault) => Err(corrupt(fault.what())),
        }
    }
}
