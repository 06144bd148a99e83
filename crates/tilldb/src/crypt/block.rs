//! The key block: what an encrypted database's header (version 3, `header.rs`) holds from
//! offset 128 of each slot, inside the slot's crc. Little-endian; offsets in the block:
//!
//! ```text
//! offset size field
//!      0    1 cipher       1 AES-256-GCM · 2 ChaCha20-Poly1305 (crypt/cipher.rs)
//!      1    1 wrap         1: the provider's wrap of the data key (`KeyProvider::wrap`)
//!      2    2 wrapped_len  1..=512
//!      4    4 zero
//!      8   16 db_id        random at create; with the cipher, the wrap's context
//!     24   64 key_id       the provider's public name of its key, UTF-8, zero-padded
//!     88  512 wrapped      wrapped_len bytes of the wrapped data key, zeros after
//!    600    - zero         to the slot's crc, must be zero
//! ```
//!
//! A wrong key is told from a damaged file by `key_id` before any unwrap, and by the wrap's
//! own tag after: neither changes a byte on disk (`db/open/keys.rs`).

use super::cipher::Cipher;
use std::fmt;

/// Bytes the block takes.
pub const BLOCK_BYTES: usize = 600;
/// Most bytes of a wrapped data key.
pub const WRAPPED_MAX: usize = 512;
/// Most bytes of a key id.
pub const KEY_ID_MAX: usize = 64;
const WRAP_PROVIDER: u8 = 1;
const CIPHER_OFFSET: usize = 0;
const WRAP_OFFSET: usize = 1;
const WRAPPED_LEN_OFFSET: usize = 2;
const ZERO_OFFSET: usize = 4;
const DB_ID_OFFSET: usize = 8;
const KEY_ID_OFFSET: usize = 24;
const WRAPPED_OFFSET: usize = KEY_ID_OFFSET + KEY_ID_MAX;
const _: () = assert!(WRAPPED_OFFSET + WRAPPED_MAX == BLOCK_BYTES);

/// What a wrap of the data key of database `db_id`, sealed with `cipher`, is bound to: the id,
/// then the cipher's number. A wrap moved to another database, or read as another cipher's,
/// does not open.
#[must_use]
pub fn wrap_context(db_id: [u8; 16], cipher: Cipher) -> Vec<u8> {
    let mut context = db_id.to_vec();
    context.push(cipher.code());
    context
}

/// An encrypted database's key block.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyBlock {
    cipher: Cipher,
    db_id: [u8; 16],
    key_id: [u8; KEY_ID_MAX],
    key_id_len: u8,
    wrapped: [u8; WRAPPED_MAX],
    wrapped_len: u16,
}

impl fmt::Debug for KeyBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyBlock")
            .field("cipher", &self.cipher)
            .field("key_id", &self.key_id())
            .field("wrapped_len", &self.wrapped_len)
            .finish_non_exhaustive()
    }
}

impl KeyBlock {
    /// A block for a database `db_id` sealed with `cipher`, its data key `wrapped` by the key
    /// named `key_id`. `Err` names what does not fit.
    pub fn new(
        cipher: Cipher,
        db_id: [u8; 16],
        key_id: &str,
        wrapped: &[u8],
    ) -> Result<KeyBlock, &'static str> {
        if key_id.is_empty() || key_id.len() > KEY_ID_MAX || key_id.contains('\0') {
            return Err("a key id is 1 to 64 bytes of UTF-8 without NUL");
        }
        if wrapped.is_empty() || wrapped.len() > WRAPPED_MAX {
            return Err("a wrapped data key is 1 to 512 bytes");
        }
        let mut block = KeyBlock {
            cipher,
            db_id,
            key_id: [0; KEY_ID_MAX],
            key_id_len: u8::try_from(key_id.len()).expect("at most 64"),
            wrapped: [0; WRAPPED_MAX],
            wrapped_len: u16::try_from(wrapped.len()).expect("at most 512"),
        };
        block.key_id[..key_id.len()].copy_from_slice(key_id.as_bytes());
        block.wrapped[..wrapped.len()].copy_from_slice(wrapped);
        Ok(block)
    }

    /// The cipher the database seals with.
    #[must_use]
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// The database's random id.
    #[must_use]
    pub fn db_id(&self) -> [u8; 16] {
        self.db_id
    }

    /// The public name of the key that wrapped the data key.
    #[must_use]
    pub fn key_id(&self) -> &str {
        std::str::from_utf8(&self.key_id[..usize::from(self.key_id_len)])
            .expect("checked UTF-8 when made or decoded")
    }

    /// The wrapped data key.
    #[must_use]
    pub fn wrapped(&self) -> &[u8] {
        &self.wrapped[..usize::from(self.wrapped_len)]
    }

    /// What the wrap binds the data key to: this database's id and cipher ([`wrap_context`]).
    #[must_use]
    pub fn context(&self) -> Vec<u8> {
        wrap_context(self.db_id, self.cipher)
    }

    /// Writes the block into `out` (`BLOCK_BYTES` of zeros).
    pub fn encode(&self, out: &mut [u8]) {
        assert_eq!(out.len(), BLOCK_BYTES);
        assert!(out.iter().all(|&b| b == 0), "the block goes into zeros");
        out[CIPHER_OFFSET] = self.cipher.code();
        out[WRAP_OFFSET] = WRAP_PROVIDER;
        out[WRAPPED_LEN_OFFSET..ZERO_OFFSET].copy_from_slice(&self.wrapped_len.to_le_bytes());
        out[DB_ID_OFFSET..KEY_ID_OFFSET].copy_from_slice(&self.db_id);
        out[KEY_ID_OFFSET..WRAPPED_OFFSET].copy_from_slice(&self.key_id);
        out[WRAPPED_OFFSET..].copy_from_slice(&self.wrapped);
    }

    /// Reads a block from `bytes` (`BLOCK_BYTES`). `Err((offset in the block, what))`.
    pub fn decode(bytes: &[u8]) -> Result<KeyBlock, (usize, &'static str)> {
        assert_eq!(bytes.len(), BLOCK_BYTES);
        let cipher = Cipher::from_code(bytes[CIPHER_OFFSET])
            .ok_or((CIPHER_OFFSET, "key block: cipher unknown to this build"))?;
        if bytes[WRAP_OFFSET] != WRAP_PROVIDER {
            return Err((WRAP_OFFSET, "key block: wrap kind unknown to this build"));
        }
        let wrapped_len = u16::from_le_bytes(
            bytes[WRAPPED_LEN_OFFSET..ZERO_OFFSET]
                .try_into()
                .expect("2 bytes"),
        );
        if wrapped_len == 0 || usize::from(wrapped_len) > WRAPPED_MAX {
            return Err((
                WRAPPED_LEN_OFFSET,
                "key block: wrapped key length impossible",
            ));
        }
        if bytes[ZERO_OFFSET..DB_ID_OFFSET].iter().any(|&b| b != 0) {
            return Err((ZERO_OFFSET, "key block: zero bytes not zero"));
        }
        let key_id = &bytes[KEY_ID_OFFSET..WRAPPED_OFFSET];
        let key_id_len = key_id.iter().position(|&b| b == 0).unwrap_or(KEY_ID_MAX);
        if key_id_len == 0
            || key_id[key_id_len..].iter().any(|&b| b != 0)
            || std::str::from_utf8(&key_id[..key_id_len]).is_err()
        {
            return Err((KEY_ID_OFFSET, "key block: key id not zero-padded UTF-8"));
        }
        let wrapped = &bytes[WRAPPED_OFFSET..];
        if wrapped[usize::from(wrapped_len)..].iter().any(|&b| b != 0) {
            return Err((
                WRAPPED_OFFSET,
                "key block: bytes past the wrapped key not zero",
            ));
        }
        let mut block = KeyBlock {
            cipher,
            db_id: bytes[DB_ID_OFFSET..KEY_ID_OFFSET]
                .try_into()
                .expect("16 bytes"),
            key_id: [0; KEY_ID_MAX],
            key_id_len: u8::try_from(key_id_len).expect("at most 64"),
            wrapped: [0; WRAPPED_MAX],
            wrapped_len,
        };
        block.key_id.copy_from_slice(key_id);
        block.wrapped.copy_from_slice(wrapped);
        Ok(block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_reads_back_as_written_and_every_field_is_checked() {
        let block =
            KeyBlock::new(Cipher::ChaCha20Poly1305, [7; 16], "kek:0011", &[9; 61]).expect("fits");
        let mut bytes = vec![0u8; BLOCK_BYTES];
        block.encode(&mut bytes);
        assert_eq!(KeyBlock::decode(&bytes), Ok(block));
        assert_eq!(block.key_id(), "kek:0011");
        assert_eq!(block.wrapped(), &[9; 61]);
        assert_eq!(block.context(), [&[7u8; 16][..], &[2]].concat());
        for (offset, value) in [(0, 9), (1, 2), (2, 0), (4, 1), (30, 0xff), (88 + 61, 1)] {
            let mut bad = bytes.clone();
            bad[offset] = value;
            assert!(KeyBlock::decode(&bad).is_err(), "byte {offset} = {value}");
        }
        assert!(KeyBlock::new(Cipher::Aes256Gcm, [0; 16], "", &[1]).is_err());
        assert!(KeyBlock::new(Cipher::Aes256Gcm, [0; 16], &"k".repeat(65), &[1]).is_err());
        assert!(KeyBlock::new(Cipher::Aes256Gcm, [0; 16], "k", &[1; 513]).is_err());
    }
}
