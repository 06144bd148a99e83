//! [`SealKey`]: one AEAD key of a [`Cipher`], through the platform's backend.

use super::cipher::{Backend, Cipher, KEY_BYTES, Mismatch, NONCE_BYTES, TAG_BYTES};
use std::fmt;
use zeroize::Zeroizing;

/// HKDF-SHA256 of `secret` into `out`, through the platform's backend.
pub(super) fn derive_bytes(secret: &[u8], salt: &[u8], info: &[&[u8]], out: &mut [u8; KEY_BYTES]) {
    Platform::hkdf(secret, salt, info, out);
}

#[cfg(not(target_os = "macos"))]
pub(super) type Platform = super::ring_backend::RingKey;
#[cfg(target_os = "macos")]
pub(super) type Platform = super::rustcrypto::RustCryptoKey;

/// An AEAD key. It never leaves the process and prints as its cipher only.
pub struct SealKey {
    cipher: Cipher,
    key: Platform,
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealKey({}, ..)", self.cipher.name())
    }
}

impl SealKey {
    /// A key of `cipher` from 32 key bytes.
    #[must_use]
    pub fn new(cipher: Cipher, key: &[u8; KEY_BYTES]) -> SealKey {
        SealKey {
            cipher,
            key: Platform::new(cipher, key),
        }
    }

    /// The key of one instance: HKDF-SHA256 of `secret` (the data key) with the instance's
    /// random `salt` and `info` (the purpose, the database id, ...), concatenated.
    #[must_use]
    pub fn derive(
        cipher: Cipher,
        secret: &[u8; KEY_BYTES],
        salt: &[u8],
        info: &[&[u8]],
    ) -> SealKey {
        let mut derived = Zeroizing::new([0u8; KEY_BYTES]);
        derive_bytes(secret, salt, info, &mut derived);
        SealKey::new(cipher, &derived)
    }

    /// Its cipher.
    #[must_use]
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// Encrypts `buf` in place and returns the tag over it and `aad`. `nonce` must never
    /// have sealed anything under this key before (the caller's counter or lsn).
    #[must_use]
    pub fn seal(&self, nonce: [u8; NONCE_BYTES], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_BYTES] {
        self.key.seal(nonce, aad, buf)
    }

    /// Decrypts `buf` in place if `tag` matches it, `nonce` and `aad`. On [`Mismatch`] the
    /// contents of `buf` are unspecified: the caller reports the unit as corrupt.
    pub fn open(
        &self,
        nonce: [u8; NONCE_BYTES],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_BYTES],
    ) -> Result<(), Mismatch> {
        self.key.open(nonce, aad, buf, tag)
    }
}
