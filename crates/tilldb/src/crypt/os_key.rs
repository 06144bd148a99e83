//! [`OsKeyStore`]: the application's key kept by the operating system, so that a till needs
//! no key file on its disk: on Windows DPAPI seals the database's data key under a secret
//! Windows keeps for the user, or for the machine (a service's till), and only that user or
//! machine can unseal it. Elsewhere there is no such store yet, and the provider says so.
//!
//! The wrap the header stores is DPAPI's blob, with `"tilldb dek 1" ‖ context` (the
//! database's id and cipher) as its entropy, so a wrap moved to another database does not
//! open. The key id is `dpapi:machine` or `dpapi:user`.
//!
//! What it protects against, and what not (docs/encryption.md, section 4): a backup copied
//! off the till opens nowhere else; but anyone who runs code as that user (or, in machine
//! scope, as anyone on that machine) opens the database, and machine scope's master keys are
//! protected by secrets in the registry hives on the same disk, so against a stolen disk it
//! is obfuscation, not protection. User scope holds while the till account's password is not
//! on the till. A TPM-bound key or a key fetched from the back office at start is the strong
//! answer (another `KeyProvider`). Keep a way to recover (rotate to a `StaticKey` held in a
//! safe place) before relying on it alone: a reinstalled Windows, or a user profile reset,
//! loses the key.

use super::keys::{DataKey, KeyError, KeyProvider};
use crate::io::os::keystore;
use std::fmt;
use zeroize::Zeroizing;

const WRAP_AAD: &[u8] = b"tilldb dek 1";

/// Whose secret seals the data key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OsKeyScope {
    /// The Windows user the process runs as.
    User,
    /// Any process on this machine (a till running as a service).
    Machine,
}

/// The application's key held by the operating system's key store (DPAPI on Windows).
#[derive(Clone, Copy)]
pub struct OsKeyStore {
    scope: OsKeyScope,
}

impl fmt::Debug for OsKeyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OsKeyStore({})", self.key_id())
    }
}

impl OsKeyStore {
    /// The key store of `scope`. Opening or creating a database with it fails with
    /// `KeyUnavailable` on a platform without one ([`OsKeyStore::available`]).
    #[must_use]
    pub fn new(scope: OsKeyScope) -> OsKeyStore {
        OsKeyStore { scope }
    }

    /// The OS key store this platform has ("DPAPI"), or `None`.
    #[must_use]
    pub fn available() -> Option<&'static str> {
        keystore::KEY_STORE
    }

    fn machine(self) -> bool {
        self.scope == OsKeyScope::Machine
    }
}

impl KeyProvider for OsKeyStore {
    fn key_id(&self) -> String {
        match self.scope {
            OsKeyScope::User => "dpapi:user".to_owned(),
            OsKeyScope::Machine => "dpapi:machine".to_owned(),
        }
    }

    fn wrap(&self, data_key: &DataKey, context: &[u8]) -> Result<Vec<u8>, KeyError> {
        let entropy = [WRAP_AAD, context].concat();
        keystore::protect(data_key.bytes(), &entropy, self.machine())
    }

    fn unwrap(&self, wrapped: &[u8], context: &[u8]) -> Result<DataKey, KeyError> {
        let entropy = [WRAP_AAD, context].concat();
        let bytes = keystore::unprotect(wrapped, &entropy, self.machine())?;
        let key: [u8; super::cipher::KEY_BYTES] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError::Malformed("DPAPI gave back a key of another length"))?;
        Ok(DataKey::from_bytes(Zeroizing::new(key)))
    }
}
