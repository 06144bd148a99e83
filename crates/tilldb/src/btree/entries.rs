//! [`Entries`]: a scan's batch of `(key, value)` pairs in one buffer.
//!
//! A range read copies entries out of a leaf (its guard cannot be held while the caller looks
//! at them). One owned `Vec` per key and per value cost two allocations an entry, for every
//! entry of the batch whether the caller took it or not; with a fragmented heap after a bulk
//! load the allocator was most of a short range's time. Here the keys and values lie back to
//! back in one buffer, reused from batch to batch: filling a batch allocates nothing once the
//! buffer has grown, and a caller that wants owned copies makes them for the entries it takes.

use std::fmt;

/// Entries in one buffer, taken from the front.
#[derive(Default, Clone)]
pub struct Entries {
    /// Keys and values back to back: entry i's key is `bytes[s[0]..s[1]]`, its value
    /// `bytes[s[1]..s[2]]`, where `s = spans[i]`.
    bytes: Vec<u8>,
    spans: Vec<[usize; 3]>,
    /// The first entry not yet taken.
    taken: usize,
}

impl Entries {
    /// An empty batch.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an entry.
    pub fn push(&mut self, key: &[u8], value: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
        self.spans
            .push([start, start + key.len(), start + key.len() + value.len()]);
    }

    /// Makes room for `entries` more entries holding `bytes` more bytes of keys and values,
    /// in one allocation each rather than a doubling per push.
    pub fn reserve(&mut self, entries: usize, bytes: usize) {
        self.spans.reserve(entries);
        self.bytes.reserve(bytes);
    }

    /// Bytes of keys and values held, taken or not.
    #[must_use]
    pub fn bytes_len(&self) -> usize {
        self.bytes.len()
    }

    /// Entries pushed since the last clear, taken or not.
    #[must_use]
    pub fn pushed(&self) -> usize {
        self.spans.len()
    }

    /// Forgets the entries pushed after the first `pushed` (none of them taken).
    pub fn truncate(&mut self, pushed: usize) {
        assert!(
            self.taken <= pushed && pushed <= self.spans.len(),
            "truncate to {pushed} of {} with {} taken",
            self.spans.len(),
            self.taken
        );
        if let Some(&[start, _, _]) = self.spans.get(pushed) {
            self.bytes.truncate(start);
        }
        self.spans.truncate(pushed);
    }

    /// Entries not yet taken.
    #[must_use]
    pub fn len(&self) -> usize {
        self.spans.len() - self.taken
    }

    /// Whether every entry was taken (or none was pushed).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every entry; the buffer keeps its capacity.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
        self.taken = 0;
    }

    fn at(&self, index: usize) -> (&[u8], &[u8]) {
        let [key, value, end] = self.spans[index];
        (&self.bytes[key..value], &self.bytes[value..end])
    }

    /// The next entry not taken, without taking it.
    #[must_use]
    pub fn first(&self) -> Option<(&[u8], &[u8])> {
        (self.taken < self.spans.len()).then(|| self.at(self.taken))
    }

    /// The last entry pushed, if it is not taken.
    #[must_use]
    pub fn last(&self) -> Option<(&[u8], &[u8])> {
        (self.taken < self.spans.len()).then(|| self.at(self.spans.len() - 1))
    }

    /// Takes the next entry.
    pub fn take_first(&mut self) -> Option<(&[u8], &[u8])> {
        if self.taken == self.spans.len() {
            return None;
        }
        self.taken += 1;
        Some(self.at(self.taken - 1))
    }

    /// The entries not taken, in order.
    #[must_use]
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], &[u8])> + '_ {
        (self.taken..self.spans.len()).map(|index| self.at(index))
    }
}

impl fmt::Debug for Entries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Entries({} of {})", self.len(), self.spans.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back_in_order_and_the_buffer_is_reused() {
        let mut entries = Entries::new();
        assert!(entries.is_empty() && entries.first().is_none() && entries.last().is_none());
        entries.push(b"a", b"1");
        entries.push(b"", b"");
        entries.push(b"ccc", b"33333");
        assert_eq!(entries.len(), 3);
        assert_eq!(entries.last(), Some((&b"ccc"[..], &b"33333"[..])));
        assert_eq!(entries.take_first(), Some((&b"a"[..], &b"1"[..])));
        assert_eq!(entries.first(), Some((&b""[..], &b""[..])));
        assert_eq!(
            entries.iter().collect::<Vec<_>>(),
            vec![(&b""[..], &b""[..]), (&b"ccc"[..], &b"33333"[..])]
        );
        assert_eq!(entries.take_first(), Some((&b""[..], &b""[..])));
        assert_eq!(entries.take_first(), Some((&b"ccc"[..], &b"33333"[..])));
        assert_eq!(entries.take_first(), None);
        assert!(entries.is_empty() && entries.last().is_none());
        let capacity = entries.bytes.capacity();
        entries.clear();
        entries.push(b"k", b"v");
        assert_eq!(entries.bytes.capacity(), capacity, "the buffer is kept");
        assert_eq!(entries.take_first(), Some((&b"k"[..], &b"v"[..])));
        entries.push(b"l", b"w");
        entries.push(b"m", b"x");
        entries.truncate(2);
        entries.push(b"n", b"y");
        assert_eq!(
            entries.iter().collect::<Vec<_>>(),
            vec![(&b"l"[..], &b"w"[..]), (&b"n"[..], &b"y"[..])]
        );
    }
}
