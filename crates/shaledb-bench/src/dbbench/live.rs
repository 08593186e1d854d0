//! The keys a database holds, as the write benchmarks of one run made them: how many distinct
//! keys are live and how big each entry is, so a fill can report its bytes on disk per byte of
//! live data (space amplification) beside its write amplification.

use std::sync::atomic::{AtomicU64, Ordering};

/// One bit per key index (`make_key`'s number), set when a benchmark writes the key.
pub struct LiveKeys {
    words: Vec<AtomicU64>,
    /// Key and value bytes of every entry written so far; `None` before the first write.
    entry_bytes: Option<u64>,
}

impl LiveKeys {
    /// No key live yet.
    pub fn new() -> LiveKeys {
        LiveKeys {
            words: Vec::new(),
            entry_bytes: None,
        }
    }

    /// Makes room for key indexes below `keys`, and records the size of the entries a
    /// benchmark is about to write. Returns false if it differs from earlier writes' (the
    /// live bytes are then no longer one size times a count).
    pub fn prepare(&mut self, keys: u64, entry_bytes: u64) -> bool {
        let words = usize::try_from(keys.div_ceil(64)).unwrap_or(usize::MAX);
        if words > self.words.len() {
            self.words.resize_with(words, || AtomicU64::new(0));
        }
        *self.entry_bytes.get_or_insert(entry_bytes) == entry_bytes
    }

    /// Marks key `k` live (an overwrite finds it set and writes nothing).
    #[inline]
    pub fn insert(&self, k: u64) {
        let Some(w) = usize::try_from(k / 64).ok().and_then(|i| self.words.get(i)) else {
            return;
        };
        let bit = 1u64 << (k % 64);
        if w.load(Ordering::Relaxed) & bit == 0 {
            w.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Distinct live keys.
    pub fn count(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }

    /// Key and value bytes of the live entries.
    pub fn bytes(&self) -> u64 {
        self.count() * self.entry_bytes.unwrap_or(0)
    }
}

impl Default for LiveKeys {
    fn default() -> Self {
        LiveKeys::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_distinct_keys_and_their_bytes() {
        let mut live = LiveKeys::new();
        assert!(live.prepare(100, 26));
        for k in [0, 5, 63, 64, 99, 5, 0] {
            live.insert(k);
        }
        // Beyond the prepared range: ignored, never a panic.
        live.insert(1_000_000);
        assert_eq!(live.count(), 5);
        assert_eq!(live.bytes(), 5 * 26);
        // A later benchmark writing other keys of the same size grows the set.
        assert!(live.prepare(200, 26));
        live.insert(150);
        assert_eq!(live.count(), 6);
        // Entries of another size: the caller stops reporting.
        assert!(!live.prepare(200, 100_010));
    }
}
