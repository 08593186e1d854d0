//! Binary search over sorted byte strings through 8-byte "heads": the 8 bytes that follow the
//! strings' common prefix, zero-padded, as a big-endian number. A search then walks one compact
//! array of numbers (eight per cache line) instead of following a pointer to a key at every
//! step, and compares whole keys only among the few whose heads tie.
//!
//! For sorted strings `a <= b`, `head(a) <= head(b)`, so `head(a) < head(b)` implies `a < b`:
//! the order of the heads never contradicts the order of the keys.

/// Heads of a sorted list of keys (the starts of range-tombstone fragments).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HeadIndex {
    /// What every key starts with (the common prefix of the first and the last).
    prefix: Vec<u8>,
    heads: Vec<u64>,
}

impl HeadIndex {
    /// The heads of `keys`, which must be in ascending order (duplicates allowed); `None` if
    /// they are not (damaged data: callers then search without heads).
    pub(crate) fn new(keys: &[&[u8]]) -> Option<HeadIndex> {
        if keys.windows(2).any(|w| w[0] > w[1]) {
            return None;
        }
        let prefix = match (keys.first(), keys.last()) {
            (Some(first), Some(last)) => {
                let n = first
                    .iter()
                    .zip(last.iter())
                    .take_while(|(a, b)| a == b)
                    .count();
                first[..n].to_vec()
            }
            _ => Vec::new(),
        };
        let heads = keys.iter().map(|k| head(&k[prefix.len()..])).collect();
        Some(HeadIndex { prefix, heads })
    }

    /// Number of keys.
    pub(crate) fn len(&self) -> usize {
        self.heads.len()
    }

    /// Bytes of memory held.
    pub(crate) fn heap_size(&self) -> usize {
        self.heads.capacity() * std::mem::size_of::<u64>() + self.prefix.capacity()
    }

    /// The positions `lo..hi` whose keys may equal `key` as far as heads tell: every key before
    /// `lo` is smaller than `key` and every key from `hi` on is larger.
    #[inline]
    pub(crate) fn equal_range(&self, key: &[u8]) -> (usize, usize) {
        let Some(rest) = key.strip_prefix(self.prefix.as_slice()) else {
            // Every key starts with the prefix, so a key that does not is below or above all.
            return if key < self.prefix.as_slice() {
                (0, 0)
            } else {
                (self.heads.len(), self.heads.len())
            };
        };
        let h = head(rest);
        let lo = self.heads.partition_point(|&x| x < h);
        let hi = lo + self.heads[lo..].partition_point(|&x| x == h);
        (lo, hi)
    }
}

/// The first 8 bytes of `s`, zero-padded, as a big-endian number.
#[inline]
fn head(s: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = s.len().min(8);
    b[..n].copy_from_slice(&s[..n]);
    u64::from_be_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// For every probe, `equal_range` brackets exactly where a scan puts it.
    fn check(keys: &[&[u8]], probes: &[&[u8]]) {
        let idx = HeadIndex::new(keys).expect("sorted");
        for p in probes {
            let (lo, hi) = idx.equal_range(p);
            assert!(lo <= hi && hi <= keys.len(), "{p:?}: {lo}..{hi}");
            assert!(
                keys[..lo].iter().all(|k| k < p),
                "{p:?}: a key before {lo} is not smaller"
            );
            assert!(
                keys[hi..].iter().all(|k| k > p),
                "{p:?}: a key from {hi} is not larger"
            );
        }
    }

    #[test]
    fn brackets_probes_with_a_long_common_prefix() {
        // Fixed-width decimal keys: the first 8 bytes of every key are equal.
        let owned: Vec<Vec<u8>> = (0..500)
            .map(|i| format!("user{:016}", i * 7).into_bytes())
            .collect();
        let keys: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        let idx = HeadIndex::new(&keys).expect("sorted");
        let (lo, hi) = idx.equal_range(b"user0000000000000700");
        assert_eq!(
            (lo, hi),
            (100, 101),
            "distinct heads after the common prefix"
        );
        let probes: Vec<Vec<u8>> = (0..3600)
            .map(|i| format!("user{:016}", i).into_bytes())
            .collect();
        let mut all: Vec<&[u8]> = probes.iter().map(Vec::as_slice).collect();
        all.extend([
            &b""[..],
            b"user",
            b"use",
            b"usez",
            b"user0",
            b"zzz",
            b"user00000000000000000",
        ]);
        check(&keys, &all);
    }

    #[test]
    fn brackets_probes_when_heads_tie() {
        let keys: [&[u8]; 7] = [
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"a\0\0",
            b"abcdefgh",
            b"abcdefgh\0x",
        ];
        let probes: [&[u8]; 9] = [
            b"",
            b"\0",
            b"\0\0",
            b"a",
            b"a\0",
            b"a\0\x01",
            b"abcdefgh",
            b"abcdefgh\0",
            b"b",
        ];
        check(&keys, &probes);
    }

    #[test]
    fn unsorted_keys_get_no_index_and_empty_lists_bracket_nothing() {
        assert!(HeadIndex::new(&[&b"b"[..], b"a"]).is_none());
        let empty = HeadIndex::new(&[]).expect("empty is sorted");
        assert_eq!(empty.equal_range(b"x"), (0, 0));
    }
}
