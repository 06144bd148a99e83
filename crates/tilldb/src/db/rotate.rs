//! [`Db::rotate_key`]: an encrypted database's application key replaced, its data not
//! rewritten (docs/encryption.md, section 4). The data key stays; only its wrap in the header
//! changes, in the header's crash-safe write (`HeaderFile::rewrap`).

use super::Db;
use crate::crypt::{Cipher, Encryption, KeyProvider};
use crate::error::{Error, Result};
use std::sync::Arc;

impl Db {
    /// The cipher an encrypted database seals with; `None` for a plain database.
    #[must_use]
    pub fn cipher(&self) -> Option<Cipher> {
        self.inner.checkpoints.encryption().map(|e| e.cipher)
    }

    /// Wraps the database's data key with `provider`, the application's new key, in the
    /// header: from when this returns, the database opens with the new key only, and no slot
    /// of the header holds the old wrap. Pages and log are not rewritten (the data key is the
    /// same): a rotation costs two header writes. A crash during it leaves the database
    /// opening with exactly one of the two keys; between the two writes, the old wrap stays in
    /// the older slot until the next checkpoint's header write. It waits for a running
    /// checkpoint or backup. Copies made before (backups, and a backup a read-only handle in
    /// another process makes meanwhile) keep the old wrap: to retire a key that may have
    /// leaked, compact the database (a new data key) and replace the backups.
    ///
    /// # Errors
    ///
    /// `NotEncrypted` for a plain database, `ReadOnly` on a read-only handle,
    /// `KeyUnavailable` when `provider` cannot wrap, `InvalidArgument` for a key id longer
    /// than 64 bytes; nothing is written then. An I/O error poisons the header as a
    /// checkpoint's would.
    pub fn rotate_key(&self, provider: Arc<dyn KeyProvider>) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::ReadOnly {
                dir: self.inner.dir.clone(),
                what: "rotating the key",
            });
        }
        self.check_poison()?;
        // No checkpoint and no backup meanwhile: a backup copies the header it began with,
        // so one running now finishes under the old wrap, before the rotation.
        let _running = (!crate::mutants::active("rotation-ignores-running-backup"))
            .then(|| self.inner.checkpoints.hold());
        let cipher = self
            .inner
            .checkpoints
            .encryption()
            .ok_or_else(|| Error::NotEncrypted {
                dir: self.inner.dir.clone(),
            })?
            .cipher;
        match self
            .inner
            .checkpoints
            .rewrap(&self.inner.dir, Encryption { provider, cipher })
        {
            // A failed header write poisons the database, as a checkpoint's does.
            Err(e @ (Error::Io { .. } | Error::Poisoned | Error::PoisonedBy { .. })) => {
                Err(self.poison(e))
            }
            result => result,
        }
    }
}
