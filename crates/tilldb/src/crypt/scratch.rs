//! [`ScratchKey`]: the key of an encrypted database's scratch files (docs/encryption.md,
//! piece 5): the spill file's pages (`page/spill.rs`) and a large transaction's spilled runs
//! (`db/write_set/spill.rs`). No recovery ever reads them, so their key need not outlive the
//! process: 256 random bits drawn at each open, held only in memory, never written. A scratch
//! file a crash leaves is unreadable by anyone, and removed at the next open.
//!
//! Each seal takes the next value of a counter as its nonce and returns it with the tag
//! ([`ScratchSeal`]), which the caller keeps in memory beside what it knows of the unit (a
//! spill slot, a run's block): so no nonce repeats under the key, and a unit read back opens
//! only where it was written (the caller binds its place into the associated data).

use super::aead::SealKey;
use super::cipher::{Cipher, KEY_BYTES, Mismatch, NONCE_BYTES, TAG_BYTES};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use zeroize::Zeroizing;

/// What opens one sealed scratch unit: its nonce's counter and its tag. Kept in memory only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScratchSeal {
    counter: u64,
    tag: [u8; TAG_BYTES],
}

/// The key of one open database's scratch files.
pub struct ScratchKey {
    key: SealKey,
    next: AtomicU64,
}

impl fmt::Debug for ScratchKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScratchKey({}, ..)", self.key.cipher().name())
    }
}

fn nonce(counter: u64) -> [u8; NONCE_BYTES] {
    let mut nonce = [0u8; NONCE_BYTES];
    nonce[..8].copy_from_slice(&counter.to_le_bytes());
    nonce
}

impl ScratchKey {
    /// A new key of `cipher` from 32 bytes `fill` draws (the storage's randomness).
    pub fn generate(
        cipher: Cipher,
        fill: impl FnOnce(&mut [u8]) -> Result<(), String>,
    ) -> Result<ScratchKey, String> {
        let mut bytes = Zeroizing::new([0u8; KEY_BYTES]);
        fill(bytes.as_mut())?;
        Ok(ScratchKey {
            key: SealKey::new(cipher, &bytes),
            next: AtomicU64::new(0),
        })
    }

    /// Encrypts `buf` in place under the next nonce, binding `aad` (the unit's place).
    #[must_use]
    pub fn seal(&self, aad: &[u8], buf: &mut [u8]) -> ScratchSeal {
        let counter = self.next.fetch_add(1, Ordering::Relaxed);
        assert!(counter < u64::MAX, "scratch nonces used up");
        let tag = self.key.seal(nonce(counter), aad, buf);
        ScratchSeal { counter, tag }
    }

    /// Decrypts `buf` in place if `seal` and `aad` match it.
    pub fn open(&self, seal: &ScratchSeal, aad: &[u8], buf: &mut [u8]) -> Result<(), Mismatch> {
        self.key.open(nonce(seal.counter), aad, buf, &seal.tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> ScratchKey {
        ScratchKey::generate(Cipher::Aes256Gcm, |b| {
            b.fill(byte);
            Ok(())
        })
        .expect("key")
    }

    #[test]
    fn a_scratch_unit_opens_only_with_its_seal_its_place_and_its_key() {
        let k = key(1);
        let plain = b"table 2, key 'receipt 9', value '2 coffees'".to_vec();
        let mut a = plain.clone();
        let seal_a = k.seal(b"slot 1", &mut a);
        let mut b = plain.clone();
        let seal_b = k.seal(b"slot 1", &mut b);
        assert_ne!(a, b, "the same bytes sealed twice differ: a new nonce each");
        assert_ne!(seal_a, seal_b);
        let mut opened = a.clone();
        k.open(&seal_a, b"slot 1", &mut opened).expect("opens");
        assert_eq!(opened, plain);
        assert_eq!(k.open(&seal_a, b"slot 2", &mut a.clone()), Err(Mismatch));
        assert_eq!(k.open(&seal_b, b"slot 1", &mut a.clone()), Err(Mismatch));
        assert_eq!(
            key(2).open(&seal_a, b"slot 1", &mut a.clone()),
            Err(Mismatch)
        );
        assert_eq!(format!("{k:?}"), "ScratchKey(aes-256-gcm, ..)");
    }
}
