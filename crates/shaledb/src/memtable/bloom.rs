//! A memtable's bloom filter (RocksDB's `DynamicBloom`): a fixed array of 64-byte lines sized
//! when the memtable is created, filled as entries are inserted, read concurrently. Like the
//! table filter (`sst/filter.rs`), every probe of a key falls in one cache line; unlike it, the
//! bits are atomics, so the single writer sets them while readers test them.
//!
//! Ordering: the one writer sets a key's bits right after it inserts the key (having asked for
//! the line before the insert's walk, `prefetch`), and a reader only looks for writes whose
//! sequence number it has acquired, which the write group publishes (Release) after all its
//! inserts: so a key a reader may see always has its bits visible to that reader. Readers
//! with older sequences skip the new entry whatever its bits say.

use std::sync::atomic::{AtomicU64, Ordering};

const WORDS_PER_LINE: usize = 8;
const LINE_BITS: u32 = 512;
const PROBES: u32 = 6;
const GOLDEN: u32 = 0x9e37_79b9;

pub(crate) struct MemBloom {
    words: Box<[AtomicU64]>,
    lines: usize,
}

impl MemBloom {
    /// A filter of about `bytes` bytes (at least one line).
    pub(crate) fn with_bytes(bytes: usize) -> MemBloom {
        let lines = bytes.div_ceil(WORDS_PER_LINE * 8).max(1);
        let words = (0..lines * WORDS_PER_LINE)
            .map(|_| AtomicU64::new(0))
            .collect();
        MemBloom { words, lines }
    }

    /// Bytes of bits held.
    pub(crate) fn size(&self) -> usize {
        self.words.len() * 8
    }

    /// Records hash `h` (`sst::filter::key_hash` of a key or prefix).
    ///
    /// REQUIRES: one thread adds at a time (the memtable's one writer), so a plain load and
    /// store set the bits: a concurrent add could lose them. A locked read-modify-write would
    /// stall the insert that follows until the line, often a cache miss, arrived; a plain
    /// store lets the skiplist walk start meanwhile (fillrandom with the filter 2-7% slower
    /// than without before, see bench/results/2026-11-26-memtable-bloom).
    pub(crate) fn add(&self, h: u64) {
        let (base, masks) = self.masks(h);
        for (word, mask) in self.words[base..base + WORDS_PER_LINE].iter().zip(masks) {
            let old = word.load(Ordering::Relaxed);
            // Most bits are set already after a while: the line is then only read.
            if old & mask != mask {
                word.store(old | mask, Ordering::Relaxed);
            }
        }
    }

    /// [`add`](Self::add) for one of several threads adding at once: a word missing bits
    /// gets them with an atomic OR, so no thread's bits are lost.
    pub(crate) fn add_concurrent(&self, h: u64) {
        let (base, masks) = self.masks(h);
        for (word, mask) in self.words[base..base + WORDS_PER_LINE].iter().zip(masks) {
            if word.load(Ordering::Relaxed) & mask != mask {
                word.fetch_or(mask, Ordering::Relaxed);
            }
        }
    }

    /// The first word of hash `h`'s line and the bits to set in each of its words.
    fn masks(&self, h: u64) -> (usize, [u64; WORDS_PER_LINE]) {
        let mut masks = [0u64; WORDS_PER_LINE];
        let mut g = h as u32;
        for _ in 0..PROBES {
            let bit = g >> 23;
            masks[(bit / 64) as usize] |= 1u64 << (bit % 64);
            g = g.wrapping_mul(GOLDEN);
        }
        (self.line_of(h), masks)
    }

    /// Asks the CPU to start loading the line hash `h` falls in, so that an
    /// [`add`](Self::add) after other work finds it in the cache.
    #[inline]
    pub(crate) fn prefetch(&self, h: u64) {
        super::prefetch(&self.words[self.line_of(h)]);
    }

    /// False if hash `h` was certainly never added.
    pub(crate) fn may_contain(&self, h: u64) -> bool {
        let base = self.line_of(h);
        let mut g = h as u32;
        for _ in 0..PROBES {
            let bit = g >> 23;
            let word = self.words[base + (bit / 64) as usize].load(Ordering::Relaxed);
            if word & (1u64 << (bit % 64)) == 0 {
                return false;
            }
            g = g.wrapping_mul(GOLDEN);
        }
        true
    }

    #[inline]
    fn line_of(&self, h: u64) -> usize {
        // Bit indexes are 9 bits (`g >> 23`): one line of 512 bits.
        const _: () = assert!(LINE_BITS as usize == WORDS_PER_LINE * 64);
        let line = (((h >> 32) * self.lines as u64) >> 32) as usize;
        line * WORDS_PER_LINE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::filter::key_hash;

    #[test]
    fn added_keys_are_always_found_and_others_mostly_not() {
        // 10 bits per key.
        let bloom = MemBloom::with_bytes(10_000 * 10 / 8);
        for i in 0..10_000u32 {
            bloom.add(key_hash(format!("key{i}").as_bytes()));
        }
        for i in 0..10_000u32 {
            assert!(bloom.may_contain(key_hash(format!("key{i}").as_bytes())));
        }
        let false_positives = (0..10_000u32)
            .filter(|i| bloom.may_contain(key_hash(format!("other{i}").as_bytes())))
            .count();
        // About 1% expected with 10 bits and 6 probes in cache-line blocks; 3% is a failure.
        assert!(false_positives < 300, "{false_positives} false positives");
        assert!(
            false_positives > 0,
            "a bloom filter this full must have some"
        );
    }

    #[test]
    fn a_tiny_filter_has_one_line() {
        let bloom = MemBloom::with_bytes(0);
        assert_eq!(bloom.size(), 64);
        assert!(!bloom.may_contain(key_hash(b"x")));
        bloom.add(key_hash(b"x"));
        assert!(bloom.may_contain(key_hash(b"x")));
    }
}
