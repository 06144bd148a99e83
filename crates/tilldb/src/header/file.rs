//! `tilldb.meta` as a file: its create, open, the choice of slot and the writes that keep the
//! newest valid header (the rules are at the top of `header.rs`).

use super::{
    Header, MAC_END, MAC_OFFSET, SLOT_BYTES, SLOT_COUNT, SlotState, VERSION_OFFSET, choose_slot,
    slot_of_generation,
};
use crate::FlushMethod;
use crate::crypt::DatabaseKeys;
use crate::error::{Error, IoOp, Result};
use crate::io::{AlignedBuf, Storage, StorageFile};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::files::{HEADER_FILE_NAME, HEADER_TEMP_FILE_NAME};

/// `tilldb.meta`, open, with the slot holding the newest valid header.
#[derive(Debug)]
pub struct HeaderFile {
    path: PathBuf,
    file: Box<dyn StorageFile>,
    /// The slot holding the newest valid header, and that header.
    newest: (usize, Header),
    /// A write or flush failed. The newest valid header is still intact, but what the other
    /// slot holds is unknown until reopen.
    poisoned: bool,
    /// An encrypted database's keys, once its header is authenticated (or created): every
    /// write computes the MAC with them. `None` for a plain database.
    keys: Option<Arc<DatabaseKeys>>,
    /// An encrypted header's newest slot up to the end of its MAC, as read at open: what
    /// [`HeaderFile::authenticate`] checks is what was decoded, never a second read.
    read_mac_bytes: Option<Vec<u8>>,
}

impl HeaderFile {
    /// Creates `tilldb.meta` in `dir` holding `header` as generation 1 in slot 0, by way of a
    /// temporary file renamed into place, and makes it and its name durable. Fails if
    /// `tilldb.meta` exists. Returns the header as written.
    /// An encrypted header takes the database's `keys` (for its MAC); a plain one `None`.
    pub fn create(
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
        header: &Header,
        keys: Option<Arc<DatabaseKeys>>,
    ) -> Result<(HeaderFile, Header)> {
        assert_eq!(
            header.encryption.is_some(),
            keys.is_some(),
            "an encrypted header is created with its keys, a plain one without"
        );
        let path = dir.join(HEADER_FILE_NAME);
        let temp = dir.join(HEADER_TEMP_FILE_NAME);
        if storage.exists(&path)? {
            return Err(Error::os(IoOp::Create, path, crate::io::errno::EEXIST));
        }
        if storage.exists(&temp)? {
            // Left by a create that crashed before its rename: never a database.
            storage.remove(&temp)?;
        }
        let first = Header {
            generation: 1,
            ..*header
        };
        let file = storage.create(&temp, method)?;
        file.allocate_zeroed(0, (SLOT_COUNT * SLOT_BYTES) as u64)?;
        file.write_at(&first.encode_with(0, keys.as_deref()), 0)?;
        file.flush()?;
        drop(file);
        storage.rename(&temp, &path)?;
        storage.flush_dir(dir)?;
        let file = storage.open(&path, method)?;
        let header_file = HeaderFile {
            path,
            file,
            newest: (0, first),
            poisoned: false,
            keys,
            read_mac_bytes: None,
        };
        header_file.check_invariants();
        Ok((header_file, first))
    }

    /// Opens `tilldb.meta` in `dir` and reads the header. `Ok(None)` when both slots are all
    /// zeros: no database (never the result of [`HeaderFile::create`]).
    pub fn open(
        storage: &dyn Storage,
        dir: &Path,
        method: FlushMethod,
    ) -> Result<Option<(HeaderFile, Header)>> {
        let path = dir.join(HEADER_FILE_NAME);
        let file = storage.open(&path, method)?;
        let Some(((slot, header), bytes)) = read_slots(&*file, &path)? else {
            return Ok(None);
        };
        let header_file = HeaderFile {
            path,
            file,
            newest: (slot, header),
            poisoned: false,
            keys: None,
            read_mac_bytes: header
                .encryption
                .is_some()
                .then(|| bytes[slot * SLOT_BYTES..slot * SLOT_BYTES + MAC_END].to_vec()),
        };
        header_file.check_invariants();
        Ok(Some((header_file, header)))
    }

    /// Checks the newest slot's MAC with the database's `keys` (the key already checked
    /// against the key block) and keeps them for the writes to come. A MAC that does not
    /// match is [`Error::Corruption`] at the MAC's offset: the key opened the data key, so
    /// the slot was changed after it was written.
    pub fn authenticate(&mut self, keys: Arc<DatabaseKeys>) -> Result<()> {
        let (slot, header) = self.newest;
        let offset = (slot * SLOT_BYTES) as u64;
        let corrupt = |at: usize, what| Error::Corruption {
            file: self.path.clone(),
            offset: offset + at as u64,
            what,
        };
        // A header read again (a read-only handle's refresh) that is no longer the
        // database's: plain, or another database's key block.
        let same = header
            .encryption
            .is_some_and(|block| block.db_id() == keys.db_id());
        let bytes = self
            .read_mac_bytes
            .as_deref()
            .filter(|_| same)
            .ok_or_else(|| {
                corrupt(
                    VERSION_OFFSET,
                    "the header is no longer the encrypted database's it was (plain, or \
                     another database's key block)",
                )
            })?;
        let unchecked = crate::mutants::active("header-mac-unchecked");
        if !(unchecked || keys.header_mac_matches(&bytes[..MAC_OFFSET], &bytes[MAC_OFFSET..])) {
            return Err(corrupt(
                MAC_OFFSET,
                "header MAC does not match (the key is right: the slot was changed after it \
                 was written)",
            ));
        }
        self.keys = Some(keys);
        Ok(())
    }

    /// The database's keys, once authenticated or created: `None` for a plain database.
    #[must_use]
    pub fn keys(&self) -> Option<&Arc<DatabaseKeys>> {
        self.keys.as_ref()
    }

    /// Reads both slots again and returns the header with the slot it came from.
    pub fn read(&self) -> Result<Option<(usize, Header)>> {
        Ok(read_slots(&*self.file, &self.path)?.map(|(newest, _)| newest))
    }

    /// The newest valid header and its slot, as last read or written.
    #[must_use]
    pub fn newest(&self) -> (usize, Header) {
        self.newest
    }

    /// The header file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `header` with the next generation into the slot not holding the newest valid
    /// header, then flushes. Returns the header as written. Page size and guard never change;
    /// the checkpoint lsn and page count never go backwards.
    pub fn write(&mut self, header: &Header) -> Result<Header> {
        let (_, newest) = self.newest;
        assert_eq!(
            header.page_bytes, newest.page_bytes,
            "page size never changes"
        );
        assert_eq!(
            header.torn_page_guard, newest.torn_page_guard,
            "guard never changes"
        );
        assert_eq!(
            header.encryption, newest.encryption,
            "the key block changes only through a rewrap"
        );
        assert!(
            header.write_buffer || !newest.write_buffer,
            "the write-buffer feature is never cleared: the log may hold its records"
        );
        assert!(
            header.checkpoint_lsn >= newest.checkpoint_lsn,
            "checkpoint lsn going backwards: {} -> {}",
            newest.checkpoint_lsn,
            header.checkpoint_lsn
        );
        assert!(
            header.page_count >= newest.page_count,
            "page count going backwards"
        );
        self.write_slot(header)
    }

    /// Replaces the key block (`Db::rotate_key`): the same data key, wrapped by another
    /// application key. Written twice: first into the slot not holding the newest header and
    /// flushed (from there the new wrap is in force; a crash during that write leaves one of
    /// the two in force, whole), then into the other, so that no slot keeps the old wrap. A crash between
    /// the two leaves the old wrap in the older slot until the next header write (the next
    /// checkpoint's) replaces it.
    pub fn rewrap(&mut self, block: &crate::crypt::KeyBlock) -> Result<()> {
        let (_, newest) = self.newest;
        let old = newest
            .encryption
            .expect("only an encrypted database's key is rotated");
        assert_eq!(
            (block.cipher(), block.db_id()),
            (old.cipher(), old.db_id()),
            "a rotation keeps the data key: its cipher and database"
        );
        let writes = if crate::mutants::active("old-wrap-kept") {
            1
        } else {
            2
        };
        for _ in 0..writes {
            let header = Header {
                encryption: Some(*block),
                ..self.newest.1
            };
            self.write_slot(&header)?;
        }
        Ok(())
    }

    /// Writes `header` into the slot not holding the newest header, one generation on, and
    /// flushes it.
    fn write_slot(&mut self, header: &Header) -> Result<Header> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        let (slot, newest) = self.newest;
        let target = 1 - slot;
        assert_ne!(target, slot, "never overwrite the newest valid header");
        let written = Header {
            generation: newest.generation + 1,
            ..*header
        };
        assert_eq!(slot_of_generation(written.generation), target);
        assert_eq!(
            written.encryption.is_some(),
            self.keys.is_some(),
            "an encrypted header is written only once authenticated"
        );
        let result = self
            .file
            .write_at(
                &written.encode_with(target, self.keys.as_deref()),
                (target * SLOT_BYTES) as u64,
            )
            .and_then(|()| self.file.flush());
        if let Err(err) = result {
            self.poisoned = true;
            return Err(err);
        }
        self.newest = (target, written);
        self.check_invariants();
        Ok(written)
    }

    /// Panics if the state is inconsistent.
    pub fn check_invariants(&self) {
        let (slot, header) = self.newest;
        assert!(slot < SLOT_COUNT);
        header.check();
        // Checked by `Header::decode` for headers read, by `write` for headers written.
        assert_eq!(
            slot,
            slot_of_generation(header.generation),
            "generation {} in slot {slot}",
            header.generation
        );
    }
}

/// Reads both slots of `file` and chooses one ([`choose_slot`]); with the bytes read (both
/// slots).
fn read_slots(
    file: &dyn StorageFile,
    path: &Path,
) -> Result<Option<((usize, Header), AlignedBuf)>> {
    let mut buf = AlignedBuf::zeroed(SLOT_COUNT * SLOT_BYTES);
    let n = file.read_at(&mut buf, 0)?;
    assert!(n <= buf.len());
    // A short file reads as zero-padded: a slot never written is zeros either way.
    let corrupt = |offset: u64, what| Error::Corruption {
        file: path.to_path_buf(),
        offset,
        what,
    };
    let mut slots = [SlotState::Zero; SLOT_COUNT];
    for (slot, state) in slots.iter_mut().enumerate() {
        let bytes = &buf[slot * SLOT_BYTES..(slot + 1) * SLOT_BYTES];
        *state = Header::decode(bytes, slot)
            .map_err(|(offset, what)| corrupt((slot * SLOT_BYTES + offset) as u64, what))?;
    }
    let chosen = choose_slot(slots).map_err(|(offset, what)| corrupt(offset, what))?;
    Ok(chosen.map(|newest| (newest, buf)))
}
