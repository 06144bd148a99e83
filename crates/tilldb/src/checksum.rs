//! CRC32C (Castagnoli), hardware accelerated, for every checksum tilldb writes.

use crc_fast::{CrcAlgorithm, Digest};

/// CRC32C of `bytes`.
#[must_use]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

/// CRC32C of `seed` (little-endian) followed by each of `parts`: binds a checksum to context
/// that is not stored beside the bytes, such as a log segment's generation.
#[must_use]
pub fn crc32c_seeded(seed: u64, parts: &[&[u8]]) -> u32 {
    let mut digest = Digest::new(CrcAlgorithm::Crc32Iscsi);
    digest.update(&seed.to_le_bytes());
    for part in parts {
        digest.update(part);
    }
    u32::try_from(digest.finalize()).expect("a CRC32 fits in 32 bits")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer() {
        // The CRC32C check value from the Castagnoli parameter set.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn seeded_equals_plain_crc_of_the_concatenation() {
        let mut joined = 7u64.to_le_bytes().to_vec();
        joined.extend_from_slice(b"ab");
        joined.extend_from_slice(b"cd");
        assert_eq!(crc32c_seeded(7, &[b"ab", b"cd"]), crc32c(&joined));
        assert_ne!(crc32c_seeded(8, &[b"abcd"]), crc32c_seeded(7, &[b"abcd"]));
    }
}
