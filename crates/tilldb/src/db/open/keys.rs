//! The key, before anything is written (docs/encryption.md, piece 2): a create draws the
//! database's data key and wraps it with the application's key into the header's key block;
//! an open checks the key given against the header's block. A missing key, a wrong one, or a
//! key for a plain database is an error that leaves every file as it was: the checks run
//! right after the header is read, before the first write of an open (`check_openable`).
//! Only then is the header's MAC checked (`HeaderFile::authenticate`): with the key known
//! right, a MAC that fails is a changed slot, `Corruption`.
//!
//! Random bytes (the data key, the database id) come through the storage
//! (`Storage::fill_random`), so the simulated disk's runs repeat exactly.
//!
//! The log (piece 3), the data file's pages and the doublewrite file (piece 4, sealed by
//! `PageStore` under an epoch key drawn at each open) and the scratch files (piece 5) are
//! sealed: [`scratch_key`] draws the scratch files' key of each open.

use crate::Options;
use crate::crypt::{
    DataKey, DatabaseKeys, KEY_BYTES, KeyBlock, KeyError, ScratchKey, wrap_context,
};
use crate::error::{Error, Result};
use crate::header::Header;
use crate::io::Storage;
use std::path::Path;
use std::sync::Arc;
use zeroize::Zeroizing;

/// The key block of a database being created with `options`, with the database's keys: a
/// new data key, wrapped by the application's key, and a new random database id. `None` for
/// a plain database.
pub(super) fn new_block(
    storage: &dyn Storage,
    dir: &Path,
    options: &Options,
) -> Result<Option<(KeyBlock, Arc<DatabaseKeys>)>> {
    let Some(encryption) = options.encryption() else {
        return Ok(None);
    };
    let unavailable = |reason: String| Error::KeyUnavailable {
        dir: dir.to_path_buf(),
        reason,
    };
    let mut key = Zeroizing::new([0u8; KEY_BYTES]);
    storage.fill_random(key.as_mut()).map_err(unavailable)?;
    let data_key = DataKey::from_bytes(key);
    let mut db_id = [0u8; 16];
    storage.fill_random(&mut db_id).map_err(unavailable)?;
    let unavailable = |e: KeyError| unavailable(e.to_string());
    let wrapped = encryption
        .provider
        .wrap(&data_key, &wrap_context(db_id, encryption.cipher))
        .map_err(unavailable)?;
    let key_id = encryption.provider.key_id();
    let block = KeyBlock::new(encryption.cipher, db_id, &key_id, &wrapped).map_err(|what| {
        Error::InvalidOptions(format!("the key provider's key id or wrap: {what}"))
    })?;
    let keys = DatabaseKeys::new(encryption.cipher, db_id, data_key);
    Ok(Some((block, Arc::new(keys))))
}

/// A new key for the scratch files of an encrypted database in `dir` (its `keys`), drawn
/// through the storage; `None` for a plain one. It lives as long as this open.
pub(super) fn scratch_key(
    storage: &dyn Storage,
    dir: &Path,
    keys: Option<&DatabaseKeys>,
) -> Result<Option<Arc<ScratchKey>>> {
    let Some(keys) = keys.filter(|_| !crate::mutants::active("scratch-in-plaintext")) else {
        return Ok(None);
    };
    let key =
        ScratchKey::generate(keys.cipher(), |buf| storage.fill_random(buf)).map_err(|reason| {
            Error::KeyUnavailable {
                dir: dir.to_path_buf(),
                reason,
            }
        })?;
    Ok(Some(Arc::new(key)))
}

/// The keys of the database in `dir` whose header is `header`, opened with `options`;
/// `None` for a plain database opened without a key. Errors change nothing on disk.
pub(super) fn check(
    dir: &Path,
    header: &Header,
    options: &Options,
) -> Result<Option<Arc<DatabaseKeys>>> {
    database_keys(dir, header, options.encryption())
}

/// [`check`] with the application's key itself: the keys a tool that reads the files without
/// opening the database (`till check`'s page scan, `till dump-log`) opens them with.
pub(crate) fn database_keys(
    dir: &Path,
    header: &Header,
    encryption: Option<&crate::crypt::Encryption>,
) -> Result<Option<Arc<DatabaseKeys>>> {
    let dir = dir.to_path_buf();
    match (&header.encryption, encryption) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(Error::NotEncrypted { dir }),
        (Some(block), None) => Err(Error::KeyRequired {
            dir,
            key_id: block.key_id().to_owned(),
        }),
        (Some(block), Some(encryption)) => {
            let wrong = |dir| Error::WrongKey {
                dir,
                key_id: block.key_id().to_owned(),
            };
            if encryption.provider.key_id() != block.key_id() {
                return Err(wrong(dir));
            }
            match encryption
                .provider
                .unwrap(block.wrapped(), &block.context())
            {
                Ok(key) => Ok(Some(Arc::new(DatabaseKeys::new(
                    block.cipher(),
                    block.db_id(),
                    key,
                )))),
                Err(KeyError::WrongKey | KeyError::Malformed(_)) => Err(wrong(dir)),
                Err(e) => Err(Error::KeyUnavailable {
                    dir,
                    reason: e.to_string(),
                }),
            }
        }
    }
}
