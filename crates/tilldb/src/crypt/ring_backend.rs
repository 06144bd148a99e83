//! The `ring` backend (Linux, Windows).

use super::cipher::{Backend, Cipher, KEY_BYTES, Mismatch, NONCE_BYTES, TAG_BYTES};
use ring::aead::{AES_256_GCM, Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, Tag, UnboundKey};
use ring::hkdf;

/// A `ring` AEAD key (`LessSafeKey`: the nonces are ours to keep unique, docs/encryption.md
/// section 3).
pub(in crate::crypt) struct RingKey(LessSafeKey);

impl Backend for RingKey {
    fn new(cipher: Cipher, key: &[u8; KEY_BYTES]) -> Self {
        let algorithm = match cipher {
            Cipher::Aes256Gcm => &AES_256_GCM,
            Cipher::ChaCha20Poly1305 => &CHACHA20_POLY1305,
        };
        RingKey(LessSafeKey::new(
            UnboundKey::new(algorithm, key).expect("both ciphers take 32-byte keys"),
        ))
    }

    fn seal(&self, nonce: [u8; NONCE_BYTES], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_BYTES] {
        let tag = self
            .0
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), buf)
            .expect("a page or a record is far below the ciphers' 64 GiB limit");
        tag.as_ref().try_into().expect("16-byte tags")
    }

    fn open(
        &self,
        nonce: [u8; NONCE_BYTES],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_BYTES],
    ) -> Result<(), Mismatch> {
        self.0
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                Tag::from(*tag),
                buf,
                0..,
            )
            .map(|_| ())
            .map_err(|_| Mismatch)
    }

    fn hkdf(secret: &[u8], salt: &[u8], info: &[&[u8]], out: &mut [u8; KEY_BYTES]) {
        /// An output length of 32 bytes, as `ring`'s HKDF asks for it.
        struct Len32;
        impl hkdf::KeyType for Len32 {
            fn len(&self) -> usize {
                KEY_BYTES
            }
        }
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(secret);
        prk.expand(info, Len32)
            .expect("32 bytes is within HKDF-SHA256's 8,160")
            .fill(out)
            .expect("the length asked for");
    }
}
