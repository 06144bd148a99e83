//! Searching a node: binary search over its keys, narrowed by the page's search hints
//! ([`search_hints`]: the prefix every key shares and the next 4 bytes of each key as a
//! number, kept in memory with a checked page).

use super::NodeRef;
use std::cmp::Ordering;

impl NodeRef<'_> {
    /// Binary search for `key`: `Ok(index)` if present, else `Err(insertion index)`. Assumes
    /// the keys are sorted (a corrupt order gives wrong answers, never a panic). With the
    /// page's hints, the search narrows to the keys whose hint equals `key`'s first, reading
    /// one array instead of a cell for each probe.
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        let (low, high) = match self.hints.and_then(|hints| self.narrow(hints, key)) {
            Some(Ok(range)) => range,
            Some(Err(outside)) => return Err(outside),
            None => (0, self.count),
        };
        self.search_between(key, low, high)
    }

    /// [`NodeRef::search`] among the keys from `from` on: every key below `from` is less
    /// than `key` (a run of ascending keys searched one after another). Gallops from `from`
    /// (1, 2, 4, ... keys on) to a key not below `key`, then searches between: a key near the
    /// last one found costs a few compares, not a search of the rest of the node.
    pub fn search_from(&self, key: &[u8], from: usize) -> Result<usize, usize> {
        let mut low = from.min(self.count);
        let mut step = 1;
        while low < self.count {
            let probe = (low + step - 1).min(self.count - 1);
            match compare_keys(self.key(probe), key) {
                Ordering::Less => {
                    low = probe + 1;
                    step *= 2;
                }
                Ordering::Equal => return Ok(probe),
                Ordering::Greater => return self.search_between(key, low, probe),
            }
        }
        Err(self.count)
    }

    /// With the page's `hints` (see [`search_hints`]): the keys `low..high` whose hint equals
    /// `key`'s, or `Err` with the insertion index when `key` lies outside the prefix every key
    /// shares; `None` when the hints are not this node's.
    fn narrow(&self, hints: &[u32], key: &[u8]) -> Option<Result<(usize, usize), usize>> {
        let prefix_len = *hints.first()? as usize;
        let words = prefix_len.div_ceil(4);
        if self.count == 0 || hints.len() != 1 + words + self.count {
            return None;
        }
        let (prefix, hints) = hints[1..].split_at(words);
        // Every key starts with the prefix: a key below it (or ending inside it) goes first,
        // one above it last.
        for (index, &word) in prefix.iter().enumerate() {
            let start = 4 * index;
            let end = (start + 4).min(prefix_len).min(key.len());
            match hint_of(key.get(start..end).unwrap_or(&[])).cmp(&word) {
                Ordering::Less => return Some(Err(0)),
                Ordering::Greater => return Some(Err(self.count)),
                Ordering::Equal => {}
            }
        }
        if key.len() < prefix_len {
            return Some(Err(0));
        }
        let hint = hint_of(&key[prefix_len..]);
        let low = hints.partition_point(|&h| h < hint);
        Some(Ok((
            low,
            low + hints[low..].partition_point(|&h| h == hint),
        )))
    }

    /// Binary search for `key` among the keys `low..high` (all keys below `low` are less than
    /// `key`, all from `high` on greater).
    fn search_between(&self, key: &[u8], mut low: usize, mut high: usize) -> Result<usize, usize> {
        while low < high {
            let mid = low + (high - low) / 2;
            match compare_keys(self.key(mid), key) {
                Ordering::Less => low = mid + 1,
                Ordering::Greater => high = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }
}

/// The search hints of a checked node, kept with its page while the page is unchanged: the
/// length `p` of the prefix every key shares (that of the first and last keys), the prefix
/// itself in `ceil(p / 4)` words, then for each key the 4 bytes after the prefix, each word
/// the bytes as a big-endian `u32` (zeros past the end). Keys in order have hints in order,
/// so a search finds the few keys whose hint equals its own by two searches of one small
/// array, then compares whole keys among those only; no cell is read to place a key outside
/// the prefix.
#[must_use]
pub fn search_hints(node: &NodeRef<'_>) -> Box<[u32]> {
    let count = node.count();
    let prefix_len = if count == 0 {
        0
    } else {
        let (first, last) = (node.key(0), node.key(count - 1));
        first.iter().zip(last).take_while(|(a, b)| a == b).count()
    };
    let mut hints = Vec::with_capacity(1 + prefix_len.div_ceil(4) + count);
    hints.push(u32::try_from(prefix_len).expect("a key is shorter than a page"));
    if count > 0 {
        hints.extend(node.key(0)[..prefix_len].chunks(4).map(hint_of));
    }
    hints.extend((0..count).map(|index| hint_of(&node.key(index)[prefix_len..])));
    hints.into_boxed_slice()
}

/// `a.cmp(b)`, deciding most pairs by their first 8 bytes as two numbers (big-endian: the
/// numbers' order is the bytes'), without the call to `memcmp` a slice comparison makes. A
/// search without hints (a commit's, a page not yet hinted) compares a key at every probe.
#[expect(
    clippy::big_endian_bytes,
    reason = "in memory only, never stored: big-endian makes the numbers' order the bytes' order"
)]
#[inline]
fn compare_keys(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some(x), Some(y)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
        if x != y {
            return x.cmp(&y);
        }
    }
    a.cmp(b)
}

/// The first 4 bytes of `rest` as a big-endian number, zeros past its end: in key order.
#[expect(
    clippy::big_endian_bytes,
    reason = "in memory only, never stored: big-endian makes the numbers' order the bytes' order"
)]
fn hint_of(rest: &[u8]) -> u32 {
    if let Some(four) = rest.first_chunk::<4>() {
        return u32::from_be_bytes(*four);
    }
    let mut bytes = [0u8; 4];
    let n = rest.len().min(4);
    bytes[..n].copy_from_slice(&rest[..n]);
    u32::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::super::{LeafValue, NodeKind, encode_leaf_cell};
    use super::*;
    use crate::btree::Limits;
    use crate::btree::node_mut::build;
    use crate::page::PageId;

    /// The body of a 4 KiB leaf holding `keys` (sorted), each with the value `v`.
    fn leaf_body(keys: &[Vec<u8>]) -> Vec<u8> {
        let cells: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| encode_leaf_cell(k, &LeafValue::Inline(b"v".to_vec())))
            .collect();
        build(
            NodeKind::Leaf,
            &Limits::new(4096),
            PageId(0),
            PageId(0),
            &cells,
        )
    }

    /// The fast comparison orders keys as slices do: shorter and longer than 8 bytes, equal
    /// in their first 8 bytes or not, one a prefix of the other.
    #[test]
    fn keys_compare_as_slices_do() {
        let keys: [&[u8]; 12] = [
            b"",
            b"a",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgi",
            b"abcdefgha",
            b"abcdefghb",
            &[0xff; 8],
            &[0xff; 9],
            &[0, 0, 0, 0, 0, 0, 0, 0, 1],
            &[0x80, 0, 0, 0, 0, 0, 0, 0],
        ];
        for a in keys {
            for b in keys {
                assert_eq!(compare_keys(a, b), a.cmp(b), "{a:?} against {b:?}");
            }
        }
    }

    /// A search with the node's hints gives what a plain binary search gives, for every key
    /// of the node, every key between and around them, and keys shorter than, equal to and
    /// diverging from the prefix the keys share.
    #[test]
    fn a_search_with_hints_finds_what_a_plain_search_finds() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % 1_000_003).expect("small")
        };
        for round in 0..300 {
            // Keys from a small alphabet (0, 1, 2, 255) after a shared prefix of 0-9 bytes,
            // so equal hints, zero bytes and keys ending inside the prefix all occur.
            let prefix: Vec<u8> = b"p\0q\0\0rs\0t"[..next() % 10].to_vec();
            let alphabet = [0u8, 1, 2, 255];
            let mut keys: Vec<Vec<u8>> = (0..=next() % 60)
                .map(|_| {
                    let mut key = prefix.clone();
                    key.extend((0..next() % 7).map(|_| alphabet[next() % 4]));
                    key
                })
                .collect();
            keys.sort();
            keys.dedup();
            let body = leaf_body(&keys);
            let plain = NodeRef::parse_body(NodeKind::Leaf, &body).expect("valid");
            let hints = search_hints(&plain);
            let hinted = NodeRef {
                hints: Some(&hints),
                ..plain
            };
            let mut probes = keys.clone();
            for _ in 0..100 {
                let mut key = prefix[..next() % (prefix.len() + 1)].to_vec();
                key.extend((0..next() % 8).map(|_| alphabet[next() % 4]));
                probes.push(key);
            }
            probes.push(Vec::new());
            probes.push(b"a".to_vec());
            probes.push(vec![255; 9]);
            for probe in &probes {
                assert_eq!(
                    hinted.search(probe),
                    plain.search(probe),
                    "round {round}: {probe:?} in {keys:?}"
                );
                assert_eq!(
                    plain.search(probe),
                    keys.binary_search(probe),
                    "round {round}: {probe:?} in {keys:?}, against the keys' own search"
                );
            }
        }
    }

    /// A galloping search from any index at or below where a key belongs finds what a
    /// binary search of the whole node finds: present keys, keys between, before the first
    /// and after the last.
    #[test]
    fn a_search_from_an_index_below_a_key_finds_what_a_whole_search_finds() {
        for count in [0u8, 1, 2, 3, 7, 8, 9, 40] {
            let keys: Vec<Vec<u8>> = (0..count).map(|i| vec![b'k', 2 * i + 1]).collect();
            let body = leaf_body(&keys);
            let node = NodeRef::parse_body(NodeKind::Leaf, &body).expect("valid");
            for probe in 0..=(2 * count + 1) {
                let key = vec![b'k', probe];
                let whole = node.search(&key);
                let place = whole.unwrap_or_else(|insert| insert);
                for from in 0..=place {
                    assert_eq!(
                        node.search_from(&key, from),
                        whole,
                        "{count} keys, probe {probe} from {from}"
                    );
                }
            }
        }
    }
}
