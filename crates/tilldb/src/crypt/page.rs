//! The data file's keys (docs/encryption.md, section 3; piece 4 of its plan): each writer's
//! epoch (every [`crate::page::PageStore`] opened with the database's keys) seals pages under
//! a key of its own, HKDF-SHA256 of the data key with 16 random bytes drawn for the epoch and
//! `"tilldb page 1" ‖ database id` as info. Inside an epoch the nonce is a counter taken once
//! per seal, followed by four zero bytes. Every seal writes the epoch's salt and its counter
//! into the page's trailer (`page/sealed.rs`), so a reader derives the key from the page alone.
//!
//! So no nonce repeats under one key: the counter only grows inside an epoch (a page sealed
//! twice, unchanged, gets two nonces), and every open, crash, restore or copy starts a new
//! epoch with new random bytes, so a new key. Nothing that a crash or a copy rolls back
//! (a header counter, a page's lsn) takes part in a nonce.
//!
//! [`PageKeys`] holds the epoch's sealer and the keys of the epochs it has read pages of (a
//! small cache: a derivation costs 0.7 us, a page's open 2 us).

use super::aead::SealKey;
use super::cipher::{Cipher, Mismatch, NONCE_BYTES, TAG_BYTES};
use super::database::DatabaseKeys;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of an epoch's salt.
pub const PAGE_SALT_BYTES: usize = 16;
const PAGE_INFO: &[u8] = b"tilldb page 1";
/// Epoch keys a reader keeps (about 1 KiB each): a till reopened daily keeps the keys of
/// three years of opens whose pages are still unchanged. Past this many, one key is dropped
/// for each new one, and a page of a dropped epoch derives its key again (0.7 us).
const CACHED_EPOCHS_MAX: usize = 1024;

/// What opens one sealed page: its epoch's salt, its nonce's counter and its tag, as the
/// page's trailer stores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSeal {
    /// The salt of the epoch that sealed the page.
    pub salt: [u8; PAGE_SALT_BYTES],
    /// The nonce's counter inside that epoch.
    pub counter: u64,
    /// The tag over the page's body and header.
    pub tag: [u8; TAG_BYTES],
}

fn nonce(counter: u64) -> [u8; NONCE_BYTES] {
    let mut nonce = [0u8; NONCE_BYTES];
    nonce[..8].copy_from_slice(&counter.to_le_bytes());
    nonce
}

fn epoch_key(keys: &DatabaseKeys, salt: &[u8; PAGE_SALT_BYTES]) -> SealKey {
    keys.derive(salt, &[PAGE_INFO, &keys.db_id()])
}

/// The page keys of one open data file: the epoch that seals, and the epochs read.
pub struct PageKeys {
    keys: Arc<DatabaseKeys>,
    salt: [u8; PAGE_SALT_BYTES],
    key: Arc<SealKey>,
    /// The next counter: taken once per seal, never given back.
    next: AtomicU64,
    /// Keys of other epochs, by salt.
    read: Mutex<HashMap<[u8; PAGE_SALT_BYTES], Arc<SealKey>>>,
}

impl fmt::Debug for PageKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PageKeys({}, ..)", self.keys.cipher().name())
    }
}

impl PageKeys {
    /// The page keys of a new epoch of the database `keys`, its salt the 16 bytes `fill`
    /// draws (the storage's randomness).
    pub fn new_epoch(
        keys: Arc<DatabaseKeys>,
        fill: impl FnOnce(&mut [u8]) -> Result<(), String>,
    ) -> Result<PageKeys, String> {
        let mut salt = [0u8; PAGE_SALT_BYTES];
        fill(&mut salt)?;
        if crate::mutants::active("epoch-salt-kept-after-open") {
            salt = keys.db_id();
        }
        Ok(PageKeys {
            key: Arc::new(epoch_key(&keys, &salt)),
            keys,
            salt,
            next: AtomicU64::new(0),
            read: Mutex::new(HashMap::new()),
        })
    }

    /// The database's cipher.
    #[must_use]
    pub fn cipher(&self) -> Cipher {
        self.keys.cipher()
    }

    /// This epoch's salt.
    #[must_use]
    pub fn salt(&self) -> [u8; PAGE_SALT_BYTES] {
        self.salt
    }

    /// Encrypts `body` in place under the epoch's next nonce, binding `aad` (the page's
    /// header), and returns what opens it.
    #[must_use]
    pub fn seal(&self, aad: &[u8], body: &mut [u8], lsn: u64) -> PageSeal {
        let counter = if crate::mutants::active("nonce-reused-on-rewrite") {
            lsn
        } else {
            self.next.fetch_add(1, Ordering::Relaxed)
        };
        assert!(counter < u64::MAX, "the epoch's page nonces are used up");
        let tag = self.key.seal(nonce(counter), aad, body);
        PageSeal {
            salt: self.salt,
            counter,
            tag,
        }
    }

    /// Decrypts `body` in place if `seal` and `aad` match it.
    pub fn open(&self, seal: &PageSeal, aad: &[u8], body: &mut [u8]) -> Result<(), Mismatch> {
        if crate::mutants::active("page-tag-unchecked") {
            let mut copy = body.to_vec();
            if self
                .key_of(&seal.salt)
                .open(nonce(seal.counter), aad, &mut copy, &seal.tag)
                .is_err()
            {
                // Decrypts without the tag: GCM's and ChaCha's keystream do not depend on
                // it, so sealing again under the same nonce undoes the encryption.
                let _ = self.key_of(&seal.salt).seal(nonce(seal.counter), aad, body);
                return Ok(());
            }
        }
        self.key_of(&seal.salt)
            .open(nonce(seal.counter), aad, body, &seal.tag)
    }

    fn key_of(&self, salt: &[u8; PAGE_SALT_BYTES]) -> Arc<SealKey> {
        if *salt == self.salt {
            return Arc::clone(&self.key);
        }
        let mut read = self.read.lock();
        if let Some(key) = read.get(salt) {
            return Arc::clone(key);
        }
        if read.len() >= CACHED_EPOCHS_MAX
            && let Some(&dropped) = read.keys().next()
        {
            read.remove(&dropped);
        }
        let key = Arc::new(epoch_key(&self.keys, salt));
        read.insert(*salt, Arc::clone(&key));
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypt::{DataKey, KEY_BYTES};
    use std::collections::HashSet;
    use zeroize::Zeroizing;

    fn keys(db_id: [u8; 16]) -> Arc<DatabaseKeys> {
        Arc::new(DatabaseKeys::new(
            Cipher::Aes256Gcm,
            db_id,
            DataKey::from_bytes(Zeroizing::new([5; KEY_BYTES])),
        ))
    }

    fn epoch(keys: &Arc<DatabaseKeys>, salt: u8) -> PageKeys {
        PageKeys::new_epoch(Arc::clone(keys), |b| {
            b.fill(salt);
            Ok(())
        })
        .expect("salt")
    }

    #[test]
    fn a_page_opens_under_any_epoch_of_its_database_and_nowhere_else() {
        let k = keys([1; 16]);
        let writer = epoch(&k, 7);
        let plain = b"leaf: receipt 7 = 2 coffees".to_vec();
        let mut body = plain.clone();
        let seal = writer.seal(b"header", &mut body, 9);
        assert_ne!(body, plain);
        assert_eq!(seal.salt, [7; 16]);
        let open = |reader: &PageKeys, seal: &PageSeal, aad: &[u8]| {
            let mut bytes = body.clone();
            reader.open(seal, aad, &mut bytes).map(|()| bytes)
        };
        assert_eq!(open(&writer, &seal, b"header"), Ok(plain.clone()));
        let later = epoch(&k, 8);
        assert_eq!(
            open(&later, &seal, b"header"),
            Ok(plain.clone()),
            "a later epoch"
        );
        assert_eq!(
            open(&later, &seal, b"headex"),
            Err(Mismatch),
            "another header"
        );
        let moved = PageSeal {
            counter: seal.counter + 1,
            ..seal
        };
        assert_eq!(
            open(&later, &moved, b"header"),
            Err(Mismatch),
            "another nonce"
        );
        let other = PageSeal {
            salt: [6; 16],
            ..seal
        };
        assert_eq!(
            open(&later, &other, b"header"),
            Err(Mismatch),
            "another salt"
        );
        let elsewhere = epoch(&keys([2; 16]), 7);
        assert_eq!(
            open(&elsewhere, &seal, b"header"),
            Err(Mismatch),
            "another database"
        );
        assert_eq!(format!("{writer:?}"), "PageKeys(aes-256-gcm, ..)");
    }

    #[test]
    fn a_page_sealed_again_unchanged_gets_another_nonce_and_other_bytes() {
        let k = keys([1; 16]);
        let (mut nonces, mut sealed) = (HashSet::new(), HashSet::new());
        for e in 0..3u8 {
            let writer = epoch(&k, e);
            for _ in 0..1000 {
                let mut body = vec![0x42u8; 64];
                let seal = writer.seal(b"h", &mut body, 100);
                assert!(nonces.insert((seal.salt, seal.counter)), "a nonce repeated");
                assert!(
                    sealed.insert(body),
                    "the same page sealed to the same bytes"
                );
            }
        }
        assert_eq!(nonces.len(), 3000);
    }

    #[test]
    fn the_cache_of_read_epochs_stays_bounded() {
        let k = keys([1; 16]);
        let reader = epoch(&k, 0);
        for e in 1..=1100u32 {
            let writer = PageKeys::new_epoch(Arc::clone(&k), |salt| {
                salt[..4].copy_from_slice(&e.to_le_bytes());
                Ok(())
            })
            .expect("salt");
            let mut body = e.to_le_bytes().repeat(8);
            let seal = writer.seal(b"h", &mut body, 1);
            reader.open(&seal, b"h", &mut body).expect("opens");
            assert_eq!(body, e.to_le_bytes().repeat(8));
            assert!(reader.read.lock().len() <= CACHED_EPOCHS_MAX);
        }
        assert_eq!(reader.read.lock().len(), CACHED_EPOCHS_MAX);
    }
}
