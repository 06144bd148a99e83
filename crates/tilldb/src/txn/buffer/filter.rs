//! A generation's key filter: blocked Bloom filters of the (table, key)s it ever held, so
//! that a point read or a buffered commit's lookup of a key the generation does not hold
//! (most of them: a read of a loaded key, a commit's new key) costs a hash and a cache line
//! per filter, not a descent of its map. It answers "maybe" for every key inserted (never a
//! false "no"); a key a generation forgot (`Generation::forget_through`) stays a "maybe",
//! which the map then answers.
//!
//! It grows as a chain ([`KeyFilters`]): when the newest filter is full, the next key goes
//! into a new one for eight times as many keys, and a lookup asks each (five filters hold
//! some 30 million keys). One filter sized anew for twice the keys, rebuilt from all of them,
//! held a commit (and the buffer's readers) for 40 ms at 210,000 keys and 107 ms at
//! 840,000.
//!
//! Measured (docs/write-buffer.md, "The drain's cost, reads through the buffer, and a race"):
//! 1,000,000 point reads through a buffer of 150,000 keys took 1.46-2.01 s searching its map
//! for each, 1.10-1.55 s with the filter, and 1.31-1.45 s with no buffer.

/// Bits a key at the filter's fullest: about 1 % false "maybe"s with four bits a key in a
/// block of 512.
const BITS_PER_KEY: usize = 10;

/// Bits set a key, all in one block of 512 bits (one cache line).
const PROBES: u32 = 4;

/// Keys the first filter of a chain is sized for (rounded up to a power of two of blocks:
/// 8 KiB, which holds 6,553).
const FIRST_KEYS: usize = 4096;

/// How many times the keys of the filter before it a filter of a chain holds.
const GROWTH: usize = 8;

/// A generation's filters, oldest (smallest) first (see the module doc).
#[derive(Debug, Default, Clone)]
pub(super) struct KeyFilters {
    chain: Vec<KeyFilter>,
}

impl KeyFilters {
    /// Whether a key of `hash` may have been inserted: `false` only for one that was not.
    pub(super) fn may_contain(&self, hash: KeyHash) -> bool {
        if crate::mutants::active("buffer-filter-says-no") {
            return false;
        }
        self.chain
            .iter()
            .rev()
            .any(|filter| filter.may_contain(hash))
    }

    /// Inserts a key of `hash`, into a new filter when the newest is full.
    pub(super) fn insert(&mut self, hash: KeyHash) {
        if self.chain.last().is_none_or(KeyFilter::is_full) {
            let keys = self
                .chain
                .last()
                .map_or(FIRST_KEYS, |last| last.capacity() * GROWTH);
            self.chain.push(KeyFilter::sized_for(keys));
        }
        self.chain
            .last_mut()
            .expect("a filter pushed above")
            .insert(hash);
    }
}

/// One filter of a chain.
#[derive(Debug, Clone)]
struct KeyFilter {
    /// Blocks of 512 bits, a power of two of them.
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
    fn may_contain(&self, hash: KeyHash) -> bool {
        let block = &self.blocks[self.block_of(hash)];
        bits_of(hash).all(|(word, bit)| block[word] & bit != 0)
    }

    /// Keys it holds before a false "maybe" passes about 1 %.
    fn capacity(&self) -> usize {
        self.blocks.len() * 512 / BITS_PER_KEY
    }

    fn is_full(&self) -> bool {
        self.keys >= self.capacity()
    }

    /// An empty filter for `keys` keys (at least one block).
    fn sized_for(keys: usize) -> KeyFilter {
        let blocks = (keys * BITS_PER_KEY)
            .div_ceil(512)
            .max(1)
            .next_power_of_two();
        KeyFilter {
            blocks: vec![[0; 8]; blocks],
            keys: 0,
        }
    }

    fn insert(&mut self, hash: KeyHash) {
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
    use super::{KeyFilters, KeyHash};

    #[test]
    fn every_key_inserted_may_be_held_and_few_others_are() {
        let mut filters = KeyFilters::default();
        assert!(!filters.may_contain(KeyHash::of(1, b"a")), "empty");
        // Past the first filter and the second: a chain of three.
        let keys: Vec<Vec<u8>> = (0..60_000u32)
            .map(|i| format!("key-{i:08}").into_bytes())
            .collect();
        for key in &keys {
            filters.insert(KeyHash::of(1, key));
        }
        assert_eq!(
            filters.chain.len(),
            3,
            "filters of 6,553, 52,428 and 419,430 keys"
        );
        for key in &keys {
            assert!(filters.may_contain(KeyHash::of(1, key)), "{key:?} lost");
        }
        let others = (0..60_000u32)
            .filter(|i| filters.may_contain(KeyHash::of(1, format!("other-{i:08}").as_bytes())))
            .count();
        assert!(others < 60_000 / 20, "{others} false maybes in 60,000");
        let other_table = keys
            .iter()
            .filter(|key| filters.may_contain(KeyHash::of(2, key)))
            .count();
        assert!(other_table < 60_000 / 20, "{other_table} in another table");
    }
}
