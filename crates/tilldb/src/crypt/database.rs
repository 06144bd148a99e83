//! [`DatabaseKeys`]: an open encrypted database's data key with its id and cipher, and what is
//! derived from them (docs/encryption.md, section 4): the header's MAC, and the keys of log
//! segments and page epochs (pieces 3 and 4).
//!
//! The header MAC is the first 16 bytes of HKDF-SHA256 with the data key as secret, the
//! database id as salt, and `"tilldb header 1"` followed by the slot's bytes 0..728 as info.
//! HKDF's expand step is HMAC-SHA256 keyed by the extracted key, over the info and a counter
//! byte: a MAC of the slot under a key derived from the data key, with the primitive the
//! backends already have (no home-made construction, no further crate).

use super::cipher::{Cipher, KEY_BYTES};
use super::keys::DataKey;
use std::fmt;
use zeroize::Zeroizing;

/// Bytes of the header's MAC.
pub const HEADER_MAC_BYTES: usize = 16;
const HEADER_MAC_INFO: &[u8] = b"tilldb header 1";

/// An open encrypted database's keys: its data key, id and cipher. Held by the open database
/// for as long as it is open; never printed.
pub struct DatabaseKeys {
    cipher: Cipher,
    db_id: [u8; 16],
    data_key: DataKey,
}

impl fmt::Debug for DatabaseKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatabaseKeys({}, ..)", self.cipher.name())
    }
}

impl DatabaseKeys {
    /// The keys of the database `db_id` whose pages and log `cipher` seals under `data_key`.
    #[must_use]
    pub fn new(cipher: Cipher, db_id: [u8; 16], data_key: DataKey) -> DatabaseKeys {
        DatabaseKeys {
            cipher,
            db_id,
            data_key,
        }
    }

    /// The database's cipher.
    #[must_use]
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// The database's random id.
    #[must_use]
    pub fn db_id(&self) -> [u8; 16] {
        self.db_id
    }

    /// The key of one instance (a log segment, a writer's epoch): HKDF-SHA256 of the data key
    /// with the instance's random `salt` and `info`, under the database's cipher.
    pub(super) fn derive(&self, salt: &[u8], info: &[&[u8]]) -> super::aead::SealKey {
        self.data_key.derive(self.cipher, salt, info)
    }

    /// The data key wrapped by `provider` (an application's key), bound to this database's
    /// id and cipher: what a key block holds. A rotation (`Db::rotate_key`) writes it.
    pub fn wrap_with(&self, provider: &dyn super::KeyProvider) -> Result<Vec<u8>, super::KeyError> {
        provider.wrap(
            &self.data_key,
            &super::block::wrap_context(self.db_id, self.cipher),
        )
    }

    /// The MAC of a header slot's bytes before the MAC (`header.rs`).
    #[must_use]
    pub fn header_mac(&self, slot_bytes: &[u8]) -> [u8; HEADER_MAC_BYTES] {
        let mut out = Zeroizing::new([0u8; KEY_BYTES]);
        super::aead::derive_bytes(
            self.data_key.bytes(),
            &self.db_id,
            &[HEADER_MAC_INFO, slot_bytes],
            &mut out,
        );
        out[..HEADER_MAC_BYTES].try_into().expect("16 of 32 bytes")
    }

    /// Whether `mac` is the MAC of `slot_bytes`, compared in constant time.
    #[must_use]
    pub fn header_mac_matches(&self, slot_bytes: &[u8], mac: &[u8]) -> bool {
        let expected = self.header_mac(slot_bytes);
        mac.len() == HEADER_MAC_BYTES
            && expected
                .iter()
                .zip(mac)
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(byte: u8, db_id: [u8; 16]) -> DatabaseKeys {
        DatabaseKeys::new(
            Cipher::Aes256Gcm,
            db_id,
            DataKey::from_bytes(Zeroizing::new([byte; KEY_BYTES])),
        )
    }

    #[test]
    fn a_header_mac_depends_on_every_byte_the_key_and_the_database_id() {
        let slot = vec![0x5au8; 728];
        let a = keys(1, [2; 16]);
        let mac = a.header_mac(&slot);
        assert!(a.header_mac_matches(&slot, &mac));
        assert_eq!(mac, a.header_mac(&slot), "the same bytes, the same MAC");
        for i in (0..slot.len()).step_by(7) {
            let mut changed = slot.clone();
            changed[i] ^= 0x10;
            assert!(!a.header_mac_matches(&changed, &mac), "byte {i} changed");
        }
        assert!(
            !keys(3, [2; 16]).header_mac_matches(&slot, &mac),
            "another key"
        );
        assert!(
            !keys(1, [4; 16]).header_mac_matches(&slot, &mac),
            "another id"
        );
        let mut bad = mac;
        bad[15] ^= 1;
        assert!(!a.header_mac_matches(&slot, &bad));
        assert!(!a.header_mac_matches(&slot, &mac[..15]), "a short MAC");
        assert_eq!(format!("{a:?}"), "DatabaseKeys(aes-256-gcm, ..)");
    }
}
