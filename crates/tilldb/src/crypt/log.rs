//! The log's keys (docs/encryption.md, section 3; piece 3 of its plan): each segment file
//! seals its records under a key of its own, HKDF-SHA256 of the data key with the segment's
//! random salt (drawn whenever its header is written: at create and at every recycle) and
//! `"tilldb wal 1" ‖ database id ‖ generation` as info. Inside a segment the nonce is the
//! record's lsn followed by four zero bytes: a log appends each lsn once, so no nonce repeats
//! under one key, and a recycled segment's new salt gives it a new key.
//!
//! Sealing and opening are separate types, so a reader of the log cannot seal: only the
//! writer holds a [`RecordSealer`], and it refuses (panics on) an lsn that is not above the
//! last it sealed.

use super::aead::SealKey;
use super::cipher::{Cipher, Mismatch, NONCE_BYTES, TAG_BYTES};
use super::database::DatabaseKeys;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of a segment's salt.
pub const SEGMENT_SALT_BYTES: usize = 16;
const SEGMENT_INFO: &[u8] = b"tilldb wal 1";

/// The nonce of the record at `lsn`: its 8 little-endian bytes, then 4 zero bytes.
fn nonce(lsn: u64) -> [u8; NONCE_BYTES] {
    let mut nonce = [0u8; NONCE_BYTES];
    nonce[..8].copy_from_slice(&lsn.to_le_bytes());
    nonce
}

fn segment_key(keys: &DatabaseKeys, salt: &[u8; SEGMENT_SALT_BYTES], generation: u64) -> SealKey {
    keys.derive(
        salt,
        &[SEGMENT_INFO, &keys.db_id(), &generation.to_le_bytes()],
    )
}

/// Seals the records of one segment; held by the log's writer only.
#[derive(Debug)]
pub struct RecordSealer {
    key: SealKey,
    /// The lsn after the last one sealed: the next must be at or above it.
    next: AtomicU64,
}

impl RecordSealer {
    /// The sealer of segment `generation`, whose header holds `salt`.
    #[must_use]
    pub fn new(
        keys: &DatabaseKeys,
        salt: &[u8; SEGMENT_SALT_BYTES],
        generation: u64,
    ) -> RecordSealer {
        RecordSealer {
            key: segment_key(keys, salt, generation),
            next: AtomicU64::new(0),
        }
    }

    /// The segment's cipher.
    #[must_use]
    pub fn cipher(&self) -> Cipher {
        self.key.cipher()
    }

    /// Encrypts `payload`, the record at `lsn`, in place, and returns its tag over it and
    /// `aad` (the record's header). Panics if `lsn` is not above the last record sealed: its
    /// nonce would repeat.
    #[must_use]
    pub fn seal(&self, lsn: u64, aad: &[u8], payload: &mut [u8]) -> [u8; TAG_BYTES] {
        let next = self.next.fetch_max(lsn + 1, Ordering::AcqRel);
        assert!(
            lsn >= next,
            "lsn {lsn} sealed again or out of order (the next was {next}): its nonce would repeat"
        );
        self.key.seal(nonce(lsn), aad, payload)
    }
}

/// Opens the records of one segment: recovery, the change feed, `till dump-log`.
#[derive(Debug)]
pub struct RecordOpener {
    key: SealKey,
}

impl RecordOpener {
    /// The opener of segment `generation`, whose header holds `salt`.
    #[must_use]
    pub fn new(
        keys: &DatabaseKeys,
        salt: &[u8; SEGMENT_SALT_BYTES],
        generation: u64,
    ) -> RecordOpener {
        RecordOpener {
            key: segment_key(keys, salt, generation),
        }
    }

    /// Decrypts `payload`, the record at `lsn`, in place if `tag` matches it and `aad`.
    pub fn open(
        &self,
        lsn: u64,
        aad: &[u8],
        payload: &mut [u8],
        tag: &[u8; TAG_BYTES],
    ) -> Result<(), Mismatch> {
        self.key.open(nonce(lsn), aad, payload, tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypt::{DataKey, KEY_BYTES};
    use zeroize::Zeroizing;

    fn keys(db_id: [u8; 16]) -> DatabaseKeys {
        DatabaseKeys::new(
            Cipher::Aes256Gcm,
            db_id,
            DataKey::from_bytes(Zeroizing::new([3; KEY_BYTES])),
        )
    }

    #[test]
    fn a_record_opens_only_at_its_lsn_in_its_segment_of_its_database() {
        let k = keys([1; 16]);
        let salt = [9; SEGMENT_SALT_BYTES];
        let writer = RecordSealer::new(&k, &salt, 5);
        let plain = b"put receipt 7 = 2 coffees".to_vec();
        let mut sealed = plain.clone();
        let tag = writer.seal(4096, b"header", &mut sealed);
        assert_ne!(sealed, plain, "sealed bytes differ from the plaintext");
        let open = |opener: &RecordOpener, lsn: u64, aad: &[u8]| {
            let mut bytes = sealed.clone();
            opener.open(lsn, aad, &mut bytes, &tag).map(|()| bytes)
        };
        let opener = RecordOpener::new(&k, &salt, 5);
        assert_eq!(open(&opener, 4096, b"header"), Ok(plain.clone()));
        assert_eq!(open(&opener, 4104, b"header"), Err(Mismatch), "another lsn");
        assert_eq!(
            open(&opener, 4096, b"headex"),
            Err(Mismatch),
            "another header"
        );
        let others = [
            RecordOpener::new(&k, &salt, 6),
            RecordOpener::new(&k, &[8; SEGMENT_SALT_BYTES], 5),
            RecordOpener::new(&keys([2; 16]), &salt, 5),
        ];
        for (i, other) in others.iter().enumerate() {
            assert_eq!(open(other, 4096, b"header"), Err(Mismatch), "opener {i}");
        }
    }

    #[test]
    fn a_recycled_segments_new_salt_seals_the_same_record_to_other_bytes() {
        let k = keys([1; 16]);
        let seal = |salt: [u8; SEGMENT_SALT_BYTES]| {
            let mut bytes = b"the same record".to_vec();
            let tag = RecordSealer::new(&k, &salt, 5).seal(512, b"h", &mut bytes);
            (bytes, tag)
        };
        assert_eq!(seal([1; 16]), seal([1; 16]), "deterministic under one key");
        assert_ne!(
            seal([1; 16]).0,
            seal([2; 16]).0,
            "another salt, another keystream"
        );
    }

    #[test]
    #[should_panic(expected = "its nonce would repeat")]
    fn a_sealer_refuses_an_lsn_it_has_sealed() {
        let k = keys([1; 16]);
        let sealer = RecordSealer::new(&k, &[1; SEGMENT_SALT_BYTES], 5);
        let mut bytes = [0u8; 8];
        let _ = sealer.seal(512, b"h", &mut bytes);
        let _ = sealer.seal(1024, b"h", &mut bytes);
        let _ = sealer.seal(1024, b"h", &mut bytes);
    }
}
