//! Encryption at rest: the ciphers, the data key and its wrap (docs/encryption.md). Built:
//! the header's wrapped key and MAC (piece 2), the log's sealed records (piece 3,
//! [`RecordSealer`]), the data file's pages and doublewrite images (piece 4, [`PageKeys`],
//! page version 2 in `page/sealed.rs`) and the scratch files (piece 5, [`ScratchKey`]).
//!
//! - [`SealKey`]: an AEAD key (AES-256-GCM or ChaCha20-Poly1305, [`Cipher`]) that seals a
//!   buffer in place under a 96-bit nonce and returns its 16-byte tag, and opens one or
//!   refuses it ([`Mismatch`]). Keys for one instance (a writer's epoch, a log segment) are
//!   derived from the data key by HKDF-SHA256 with a random salt of that instance
//!   ([`SealKey::derive`]): each instance's nonces are a counter or an lsn, which never repeat
//!   inside it, and no two instances share a key (docs/encryption.md, section 3).
//! - [`DataKey`]: the database's 256-bit key, drawn from the OS and stored only wrapped.
//! - [`DatabaseKeys`]: an open encrypted database's data key with its id and cipher, and
//!   what is derived from them (the header's MAC, `header.rs`).
//! - [`KeyProvider`]: the application's key, which wraps and unwraps the data key;
//!   [`StaticKey`] is 32 bytes the application holds. A wrong key is [`KeyError::WrongKey`],
//!   never a garbage key.
//!
//! Two backends seal the same bytes: `ring` (Linux, Windows: 2.8x `RustCrypto`'s AES-GCM on a
//! 16 KiB page here, docs/encryption.md section 6) and `RustCrypto` on macOS, where `ring`'s
//! build needs a C compiler for the target. Unit tests build both and check them against
//! published vectors and each other. Key bytes are zeroed on drop and never printed.

mod aead;
mod block;
mod cipher;
mod database;
mod keys;
mod log;
mod os_key;
mod page;
#[cfg(not(target_os = "macos"))]
mod ring_backend;
#[cfg(any(target_os = "macos", test))]
mod rustcrypto;
mod scratch;

pub use aead::SealKey;
pub use block::{BLOCK_BYTES, KEY_ID_MAX, KeyBlock, WRAPPED_MAX, wrap_context};
pub use cipher::{Cipher, KEY_BYTES, Mismatch, NONCE_BYTES, TAG_BYTES};
pub use database::{DatabaseKeys, HEADER_MAC_BYTES};
pub use keys::{DataKey, KeyError, KeyProvider, StaticKey, fill_random};
pub use log::{RecordOpener, RecordSealer, SEGMENT_SALT_BYTES};
pub use os_key::{OsKeyScope, OsKeyStore};
pub use page::{PAGE_SALT_BYTES, PageKeys, PageSeal};
pub use scratch::{ScratchKey, ScratchSeal};

/// Encryption at rest for a database (`Options::encryption`): the application's key and, for
/// a database being created, the cipher. Compared by the provider's identity.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// // 32 bytes the application keeps apart from the database (a key file, a key store).
/// let key = [7u8; 32];
/// let options = tilldb::Options {
///     encryption: Some(tilldb::Encryption::with_key(&key)),
///     ..tilldb::Options::default()
/// };
/// let db = tilldb::Db::open(dir.path(), options)?;
/// # drop(db);
/// // Without the key, or with another, the database does not open and nothing changes.
/// assert!(matches!(
///     tilldb::Db::open(dir.path(), tilldb::Options::default()),
///     Err(tilldb::Error::KeyRequired { .. })
/// ));
/// # Ok::<(), tilldb::Error>(())
/// ```
#[derive(Clone)]
pub struct Encryption {
    /// The application's key, which wraps and unwraps the data key.
    pub provider: std::sync::Arc<dyn KeyProvider>,
    /// The cipher a new database seals with (an existing one keeps its own).
    pub cipher: Cipher,
}

impl Encryption {
    /// Encryption under the application's key `provider`; a new database seals with
    /// [`Cipher::for_this_cpu`] (AES-256-GCM where the CPU has AES instructions, else
    /// ChaCha20-Poly1305).
    #[must_use]
    pub fn new(provider: std::sync::Arc<dyn KeyProvider>) -> Encryption {
        Encryption {
            provider,
            cipher: Cipher::for_this_cpu(),
        }
    }

    /// Encryption under an application key of 32 bytes the application holds itself
    /// ([`StaticKey::new`]); a new database seals with [`Cipher::for_this_cpu`]. tilldb keeps the key in the
    /// cipher's expanded form for as long as the handle lives (which `ring`, the backend on
    /// Linux and Windows, does not wipe on drop; docs/encryption.md, section 5): wipe the
    /// caller's copy when it is no longer needed.
    #[must_use]
    pub fn with_key(key: &[u8; KEY_BYTES]) -> Encryption {
        Encryption::new(std::sync::Arc::new(StaticKey::new(key)))
    }

    /// This encryption with `cipher` for a new database (an existing one keeps its own).
    #[must_use]
    pub fn with_cipher(mut self, cipher: Cipher) -> Encryption {
        self.cipher = cipher;
        self
    }
}

impl std::fmt::Debug for Encryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Encryption({}, {})",
            self.provider.key_id(),
            self.cipher.name()
        )
    }
}

impl PartialEq for Encryption {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(
            std::sync::Arc::as_ptr(&self.provider),
            std::sync::Arc::as_ptr(&other.provider),
        ) && self.cipher == other.cipher
    }
}

impl Eq for Encryption {}

#[cfg(test)]
mod tests;
