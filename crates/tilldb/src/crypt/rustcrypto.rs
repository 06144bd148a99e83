//! The `RustCrypto` backend (macOS; and in unit tests, beside `ring`, which it must agree with).

use super::cipher::{Backend, Cipher, KEY_BYTES, Mismatch, NONCE_BYTES, TAG_BYTES};
use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{AeadInOut, KeyInit};
use chacha20poly1305::ChaCha20Poly1305;

/// A `RustCrypto` AEAD key (its `aes` wipes its round keys on drop).
pub(in crate::crypt) enum RustCryptoKey {
    Aes(Box<Aes256Gcm>),
    ChaCha(Box<ChaCha20Poly1305>),
}

impl Backend for RustCryptoKey {
    fn new(cipher: Cipher, key: &[u8; KEY_BYTES]) -> Self {
        match cipher {
            Cipher::Aes256Gcm => RustCryptoKey::Aes(Box::new(Aes256Gcm::new(key.into()))),
            Cipher::ChaCha20Poly1305 => {
                RustCryptoKey::ChaCha(Box::new(ChaCha20Poly1305::new(key.into())))
            }
        }
    }

    fn seal(&self, nonce: [u8; NONCE_BYTES], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_BYTES] {
        let nonce = (&nonce).into();
        let tag = match self {
            RustCryptoKey::Aes(key) => key.encrypt_inout_detached(nonce, aad, buf.into()),
            RustCryptoKey::ChaCha(key) => key.encrypt_inout_detached(nonce, aad, buf.into()),
        };
        tag.expect("a page or a record is far below the ciphers' limits")
            .into()
    }

    fn open(
        &self,
        nonce: [u8; NONCE_BYTES],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_BYTES],
    ) -> Result<(), Mismatch> {
        let nonce = (&nonce).into();
        match self {
            RustCryptoKey::Aes(key) => {
                key.decrypt_inout_detached(nonce, aad, buf.into(), tag.into())
            }
            RustCryptoKey::ChaCha(key) => {
                key.decrypt_inout_detached(nonce, aad, buf.into(), tag.into())
            }
        }
        .map_err(|_| Mismatch)
    }

    fn hkdf(secret: &[u8], salt: &[u8], info: &[&[u8]], out: &mut [u8; KEY_BYTES]) {
        hkdf::Hkdf::<sha2::Sha256>::new(Some(salt), secret)
            .expand_multi_info(info, out)
            .expect("32 bytes is within HKDF-SHA256's 8,160");
    }
}
