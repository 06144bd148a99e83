//! The ciphers, their sizes, and what a backend provides.

use std::fmt;

/// Bytes of every key: 256 bits.
pub const KEY_BYTES: usize = 32;
/// Bytes of a nonce: 96 bits, as both ciphers take them.
pub const NONCE_BYTES: usize = 12;
/// Bytes of a tag.
pub const TAG_BYTES: usize = 16;

/// An authenticated cipher. The numbers are what a header stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cipher {
    /// AES-256-GCM: the default where the CPU has AES instructions.
    Aes256Gcm = 1,
    /// ChaCha20-Poly1305 (RFC 8439): 2-6x AES-GCM's speed on a CPU without them.
    ChaCha20Poly1305 = 2,
}

impl Cipher {
    /// The number a header stores.
    #[must_use]
    #[doc(hidden)]
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The cipher a header's number names; `None` for one this build does not know.
    #[must_use]
    #[doc(hidden)]
    pub fn from_code(code: u8) -> Option<Cipher> {
        match code {
            1 => Some(Cipher::Aes256Gcm),
            2 => Some(Cipher::ChaCha20Poly1305),
            _ => None,
        }
    }

    /// The cipher for a database created on this CPU: AES-256-GCM where it has AES and
    /// carry-less multiply instructions (AES-NI and PCLMULQDQ, or 64-bit ARM's AES and PMULL),
    /// else ChaCha20-Poly1305, 2-6x faster than AES in software (docs/encryption.md,
    /// section 5).
    #[must_use]
    pub fn for_this_cpu() -> Cipher {
        Cipher::choose(Cipher::has_aes_instructions())
    }

    /// Whether this CPU has the instructions AES-256-GCM runs fast with.
    #[must_use]
    pub fn has_aes_instructions() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("aes")
                && std::arch::is_x86_feature_detected!("pclmulqdq")
        }
        #[cfg(target_arch = "aarch64")]
        {
            std::arch::is_aarch64_feature_detected!("aes")
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            false
        }
    }

    /// The cipher of a CPU with (`aes`) or without AES instructions.
    fn choose(aes: bool) -> Cipher {
        if aes {
            Cipher::Aes256Gcm
        } else {
            Cipher::ChaCha20Poly1305
        }
    }

    /// Its name, as `till stats` prints it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes256Gcm => "aes-256-gcm",
            Cipher::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }
}

/// A tag that does not match: the bytes, their nonce, their associated data or the key
/// differ from what was sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch;

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("authentication failed")
    }
}

impl std::error::Error for Mismatch {}

/// What a backend provides (`ring_backend.rs`, `rustcrypto.rs`).
pub(super) trait Backend: Sized + Send + Sync {
    fn new(cipher: Cipher, key: &[u8; KEY_BYTES]) -> Self;
    fn seal(&self, nonce: [u8; NONCE_BYTES], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_BYTES];
    fn open(
        &self,
        nonce: [u8; NONCE_BYTES],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_BYTES],
    ) -> Result<(), Mismatch>;
    /// HKDF-SHA256 (RFC 5869) of `secret` with `salt`, `info` the concatenation of its parts,
    /// into `out`.
    fn hkdf(secret: &[u8], salt: &[u8], info: &[&[u8]], out: &mut [u8; KEY_BYTES]);
}

#[cfg(test)]
mod choice_tests {
    use super::Cipher;

    #[test]
    fn a_cpu_without_aes_instructions_gets_chacha20_poly1305() {
        assert_eq!(Cipher::choose(true), Cipher::Aes256Gcm);
        assert_eq!(Cipher::choose(false), Cipher::ChaCha20Poly1305);
        assert_eq!(
            Cipher::for_this_cpu(),
            Cipher::choose(Cipher::has_aes_instructions())
        );
    }
}
