//! The data key, the application's key that wraps it, and the OS's randomness.
//!
//! [`StaticKey`]'s wrap (what a header will store, docs/encryption.md section 4), 61 bytes:
//!
//! ```text
//! offset size field
//!      0    1 version  1
//!      1   12 nonce    random for each wrap
//!     13   32 sealed   the data key, AES-256-GCM under the application's key
//!     45   16 tag      over the sealed key and "tilldb dek 1" ‖ context (the database's id
//!                      and cipher: a wrap moved to another database does not open)
//! ```

use super::aead::SealKey;
use super::cipher::{Cipher, KEY_BYTES, NONCE_BYTES, TAG_BYTES};
use std::fmt;
use zeroize::Zeroizing;

const WRAP_VERSION: u8 = 1;
const WRAP_BYTES: usize = 1 + NONCE_BYTES + KEY_BYTES + TAG_BYTES;
const WRAP_AAD: &[u8] = b"tilldb dek 1";

/// Why a key could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The wrap was not made by this key for this database: the application gave another key.
    #[error("the key does not open this database's data key (another key, or another database)")]
    WrongKey,
    /// The wrap's bytes are not a wrap this provider makes.
    #[error("the wrapped data key is malformed: {0}")]
    Malformed(&'static str),
    /// The OS gave no random bytes.
    #[error("the OS gave no random bytes: {0}")]
    Random(String),
    /// The provider's own failure (a key store that refused, a device not present).
    #[error("the key provider failed: {0}")]
    Provider(String),
}

/// Fills `buf` from the OS's random number generator.
pub fn fill_random(buf: &mut [u8]) -> Result<(), KeyError> {
    getrandom::getrandom(buf).map_err(|e| KeyError::Random(e.to_string()))
}

/// The database's data key: 256 random bits, zeroed on drop, never printed, never cloned.
pub struct DataKey(Zeroizing<[u8; KEY_BYTES]>);

impl fmt::Debug for DataKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DataKey(..)")
    }
}

impl DataKey {
    /// A new data key from the OS's random number generator.
    pub fn generate() -> Result<DataKey, KeyError> {
        let mut key = Zeroizing::new([0u8; KEY_BYTES]);
        fill_random(key.as_mut())?;
        Ok(DataKey(key))
    }

    /// A data key from its bytes (a provider's unwrap), which it takes and zeroes on drop
    /// (`zeroize::Zeroizing`, the crate a provider wipes its own copies with).
    #[must_use]
    pub fn from_bytes(bytes: Zeroizing<[u8; KEY_BYTES]>) -> DataKey {
        DataKey(bytes)
    }

    /// The key's bytes, for a wrap: never to be stored or printed.
    #[must_use]
    pub fn bytes(&self) -> &[u8; KEY_BYTES] {
        &self.0
    }

    /// The key of one instance (a writer's epoch, a log segment): [`SealKey::derive`] of this
    /// key with the instance's random `salt` and `info`. The engine's, not the API's: a
    /// caller with a `SealKey` could seal under nonces of its own choosing.
    #[must_use]
    pub(crate) fn derive(&self, cipher: Cipher, salt: &[u8], info: &[&[u8]]) -> SealKey {
        SealKey::derive(cipher, &self.0, salt, info)
    }
}

/// The application's key: it wraps the data key when a database is created or its key
/// rotated, and unwraps it at every open. tilldb never stores it.
pub trait KeyProvider: Send + Sync + fmt::Debug {
    /// The public name of the application's key, stored beside the wrap so that a wrong key
    /// is told from a damaged file. At most 64 bytes; never secret.
    fn key_id(&self) -> String;
    /// Wraps `data_key`, binding `context` (the database's id and cipher) to the result.
    fn wrap(&self, data_key: &DataKey, context: &[u8]) -> Result<Vec<u8>, KeyError>;
    /// The data key in `wrapped`; [`KeyError::WrongKey`] when this key did not wrap it with
    /// `context`.
    fn unwrap(&self, wrapped: &[u8], context: &[u8]) -> Result<DataKey, KeyError>;
}

/// An application's key of 32 bytes that it holds itself (read from a key file, a key store,
/// a back office), kept in the cipher's expanded form (wiped on drop by the `RustCrypto`
/// backend, not by `ring`'s: docs/encryption.md, section 5).
pub struct StaticKey {
    kek: SealKey,
    id: String,
}

impl fmt::Debug for StaticKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StaticKey({})", self.id)
    }
}

impl StaticKey {
    /// The key of these bytes, named `kek:` and 16 hex digits derived from it (one-way: the
    /// name tells keys apart and gives nothing of them away).
    #[must_use]
    pub fn new(kek: &[u8; KEY_BYTES]) -> StaticKey {
        let mut name = Zeroizing::new([0u8; KEY_BYTES]);
        super::aead::derive_bytes(kek, b"tilldb key id", &[], &mut name);
        let id = name[..8].iter().fold(String::from("kek:"), |mut id, b| {
            use std::fmt::Write as _;
            write!(id, "{b:02x}").expect("a String takes it");
            id
        });
        StaticKey::with_id(kek, id)
    }

    /// The key of these bytes under a name of the application's (at most 64 bytes).
    #[must_use]
    pub fn with_id(kek: &[u8; KEY_BYTES], id: String) -> StaticKey {
        StaticKey {
            kek: SealKey::new(Cipher::Aes256Gcm, kek),
            id,
        }
    }
}

impl KeyProvider for StaticKey {
    fn key_id(&self) -> String {
        self.id.clone()
    }

    fn wrap(&self, data_key: &DataKey, context: &[u8]) -> Result<Vec<u8>, KeyError> {
        let mut nonce = [0u8; NONCE_BYTES];
        fill_random(&mut nonce)?;
        let mut wrapped = Vec::with_capacity(WRAP_BYTES);
        wrapped.push(WRAP_VERSION);
        wrapped.extend_from_slice(&nonce);
        wrapped.extend_from_slice(data_key.bytes());
        let aad = [WRAP_AAD, context].concat();
        let tag = self.kek.seal(nonce, &aad, &mut wrapped[1 + NONCE_BYTES..]);
        wrapped.extend_from_slice(&tag);
        Ok(wrapped)
    }

    fn unwrap(&self, wrapped: &[u8], context: &[u8]) -> Result<DataKey, KeyError> {
        if wrapped.len() != WRAP_BYTES {
            return Err(KeyError::Malformed("not 61 bytes"));
        }
        if wrapped[0] != WRAP_VERSION {
            return Err(KeyError::Malformed("an unknown wrap version"));
        }
        let nonce: [u8; NONCE_BYTES] = wrapped[1..=NONCE_BYTES].try_into().expect("12 bytes");
        let mut key = Zeroizing::new([0u8; KEY_BYTES]);
        key.copy_from_slice(&wrapped[1 + NONCE_BYTES..1 + NONCE_BYTES + KEY_BYTES]);
        let tag: [u8; TAG_BYTES] = wrapped[1 + NONCE_BYTES + KEY_BYTES..]
            .try_into()
            .expect("16 bytes");
        let aad = [WRAP_AAD, context].concat();
        match self.kek.open(nonce, &aad, key.as_mut(), &tag) {
            Ok(()) => Ok(DataKey::from_bytes(key)),
            // The bytes as they came out, taken for the key: a wrong application key would
            // seal the database under garbage, never to be opened again.
            Err(_) if crate::mutants::active("key-wrap-unchecked") => Ok(DataKey::from_bytes(key)),
            Err(_) => Err(KeyError::WrongKey),
        }
    }
}
