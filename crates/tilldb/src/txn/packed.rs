//! Writes copied back to back into one buffer: (tag, key, value or `None` for a delete), the
//! tag naming the write's table (its root, its name, or an index into a list of names).
//!
//! A commit's writes copied out of its write set, a part's for the feed, and a drain's or a
//! chunk's copied out of the write buffer: two allocations for any number of writes, where a
//! `Vec` of owned keys and values took two for each (a drain's chunk of 1,000 rows spent a
//! fifth of its time allocating and freeing them: docs/write-buffer.md).

/// One write lent by [`Packed`]: (tag, key, value or `None` for a delete).
pub type PackedWrite<'a, T> = (T, &'a [u8], Option<&'a [u8]>);

/// Writes copied back to back (see the module doc).
#[derive(Debug, Clone)]
pub struct Packed<T> {
    bytes: Vec<u8>,
    /// Each write: its tag, the end of its key in `bytes`, the end of its value (`None`: a
    /// delete). Its key begins where the write before it ends.
    ends: Vec<(T, usize, Option<usize>)>,
}

impl<T> Default for Packed<T> {
    fn default() -> Self {
        Self {
            bytes: Vec::new(),
            ends: Vec::new(),
        }
    }
}

impl<T: Copy> Packed<T> {
    /// Copies a write in after the others.
    pub fn push(&mut self, tag: T, key: &[u8], value: Option<&[u8]>) {
        self.bytes.extend_from_slice(key);
        let key_end = self.bytes.len();
        let value_end = value.map(|value| {
            self.bytes.extend_from_slice(value);
            self.bytes.len()
        });
        self.ends.push((tag, key_end, value_end));
    }

    /// Each write in the order pushed: (tag, key, value).
    #[must_use]
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = PackedWrite<'_, T>> + Clone {
        self.ends
            .iter()
            .enumerate()
            .map(|(i, &(tag, key_end, value_end))| {
                let start = i.checked_sub(1).map_or(0, |before| self.end_of(before));
                let key = &self.bytes[start..key_end];
                let value = value_end.map(|end| &self.bytes[key_end..end]);
                (tag, key, value)
            })
    }

    /// The last write pushed.
    #[must_use]
    pub fn last(&self) -> Option<PackedWrite<'_, T>> {
        self.iter().next_back()
    }

    /// How many writes it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Forgets every write, keeping the memory.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Where write `i` ends in `bytes`.
    fn end_of(&self, i: usize) -> usize {
        let (_, key_end, value_end) = self.ends[i];
        value_end.unwrap_or(key_end)
    }
}

#[cfg(test)]
mod tests {
    use super::Packed;

    #[test]
    fn writes_read_back_in_order_with_their_tags_keys_and_values() {
        let mut packed = Packed::default();
        assert!(packed.is_empty());
        assert_eq!(packed.last(), None);
        packed.push(7u64, b"a", Some(b"one".as_slice()));
        packed.push(7, b"bb", None);
        packed.push(9, b"", Some(b"".as_slice()));
        packed.push(3, b"ccc", Some(b"three".as_slice()));
        let writes: Vec<_> = packed.iter().collect();
        assert_eq!(
            writes,
            [
                (7, b"a".as_slice(), Some(b"one".as_slice())),
                (7, b"bb".as_slice(), None),
                (9, b"".as_slice(), Some(b"".as_slice())),
                (3, b"ccc".as_slice(), Some(b"three".as_slice())),
            ]
        );
        assert_eq!(packed.len(), 4);
        assert_eq!(packed.last(), Some(writes[3]));
        let backward: Vec<_> = packed.iter().rev().collect();
        assert_eq!(backward, writes.iter().rev().copied().collect::<Vec<_>>());
        packed.clear();
        assert!(packed.is_empty());
        assert_eq!(packed.iter().count(), 0);
    }
}
