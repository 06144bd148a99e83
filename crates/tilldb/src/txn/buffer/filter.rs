//! A generation's key filter: a blocked Bloom filter of the (table, key)s it ever held, so
//! that a point read or a buffered commit's lookup of a key the generation does not hold
//! (most of them: a read of a loaded key, a commit's new key) costs a hash and one cache
//! line, not a descent of its map. It answers "maybe" for every key inserted (never a false
//! "no"); a key a generation forgot (`Generation::forget_through`) stays a "maybe", which
//! the map then answers.
//!
//! Measured (docs/write-buffer.md, "Reads through the buffer"): a point read through a buffer
//! of 150,000 keys searched a map of that many keys for each read of a loaded key.

/// Bits a key at the filter's fullest: about 1 % false "maybe"s with four bits a key in a
/// block of 512.
const BITS_PER_KEY: usize = 10;

/// Bits set a key, all in one block of 512 bits (one cache line).
const PROBES: u32 = 4;

/// The filter (see the module doc).
#[derive(Debug, Default, Clone)]
pub(super) struct KeyFilter {
    /// Blocks of 512 bits; empty before the first key.
    blocks: Vec<[u64; 8]>,
    /// Keys inserted since it was sized.
    keys: usize,
}

/// A (table, key)'s hash, computed once for every generation a read asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct KeyHash(u64);

impl KeyHash {
    pub(super) fn of(table: u64, key: &[u8]) -> KeyHash {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut h = (table ^ (key.len() as u64).rotate_left(32)).wrapping_mul(K);
        let mut words = key.chunks_exact(8);
        for word in &mut words {
            let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
            h = (h ^ w).wrapping_mul(K).rotate_left(29);
        }
        let mut last = [0u8; 8];
        last[..words.remainder().len()].copy_from_slice(words.remainder());
        h = (h ^ u64::from_le_bytes(last)).wrapping_mul(K);
        // The finisher of splitmix64: every input bit reaches every output bit.
        h ^= h >> 30;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        KeyHash(h ^ (h >> 31))
    }
}

impl KeyFilter {
    /// Whether a key of `hash` may have been inserted: `false` only for one that was not.
    pub(super) fn may_contain(&self, hash: KeyHash) -> bool {
        if crate::mutants::active("buffer-filter-says-no") {
            return false;
        }
        if self.blocks.is_empty() {
            return false;
        }
        let block = &self.blocks[self.block_of(hash)];
        bits_of(hash).all(|(word, bit)| block[word] & bit != 0)
    }

    /// Whether it holds as many keys as it was sized for: the next insert should go into a
    /// filter sized anew ([`KeyFilter::sized_for`]) with every key of the generation.
    pub(super) fn is_full(&self) -> bool {
        self.keys >= self.blocks.len() * 512 / BITS_PER_KEY
    }

    /// An empty filter for `keys` keys (at least one block).
    pub(super) fn sized_for(keys: usize) -> KeyFilter {
        let blocks = (keys * BITS_PER_KEY)
            .div_ceil(512)
            .max(1)
            .next_power_of_two();
        KeyFilter {
            blocks: vec![[0; 8]; blocks],
            keys: 0,
        }
    }

    /// Inserts a key of `hash`. Requires: a filter that is not empty (sized).
    pub(super) fn insert(&mut self, hash: KeyHash) {
        let at = self.block_of(hash);
        let block = &mut self.blocks[at];
        for (word, bit) in bits_of(hash) {
            block[word] |= bit;
        }
        self.keys += 1;
    }

    fn block_of(&self, hash: KeyHash) -> usize {
        // The block count is a power of two: the hash's high bits (none of the probes'
        // 36) pick it.
        let mask = self.blocks.len() - 1;
        usize::try_from(hash.0 >> 36).expect("usize holds 28 bits") & mask
    }
}

/// The (word, bit) pairs a hash sets in its block: `PROBES` of its low 32 bits, nine at a time.
fn bits_of(hash: KeyHash) -> impl Iterator<Item = (usize, u64)> {
    (0..PROBES).map(move |i| {
        let bits = (hash.0 >> (i * 9)) & 511;
        (
            usize::try_from(bits >> 6).expect("below 8"),
            1u64 << (bits & 63),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::{KeyFilter, KeyHash};

    #[test]
    fn every_key_inserted_may_be_held_and_few_others_are() {
        let mut filter = KeyFilter::default();
        assert!(!filter.may_contain(KeyHash::of(1, b"a")), "empty");
        let keys: Vec<Vec<u8>> = (0..20_000u32)
            .map(|i| format!("key-{i:08}").into_bytes())
            .collect();
        for (n, key) in keys.iter().enumerate() {
            if filter.is_full() {
                // As a generation does: sized anew with every key so far.
                filter = KeyFilter::sized_for(2 * n.max(1));
                for old in &keys[..n] {
                    filter.insert(KeyHash::of(1, old));
                }
            }
            filter.insert(KeyHash::of(1, key));
        }
        for key in &keys {
            assert!(filter.may_contain(KeyHash::of(1, key)), "{key:?} lost");
        }
        let others = (0..20_000u32)
            .filter(|i| filter.may_contain(KeyHash::of(1, format!("other-{i:08}").as_bytes())))
            .count();
        assert!(others < 20_000 / 20, "{others} false maybes in 20,000");
        let other_table = keys
            .iter()
            .filter(|key| filter.may_contain(KeyHash::of(2, key)))
            .count();
        assert!(other_table < 20_000 / 20, "{other_table} in another table");
    }
}
