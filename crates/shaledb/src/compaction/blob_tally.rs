//! Reference counts per blob file, as a flush or compaction tallies them entry by entry.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// (references, record bytes) per blob file number. A compaction of tables whose values are
/// in blob files looks one file up per entry, up to three times (read, written, the output's
/// own count): in a hash map, because searching a `BTreeMap` of a few hundred files took a
/// third of the background CPU of an overwrite of 1 KB values.
#[derive(Default, Debug)]
pub(crate) struct BlobTally {
    counts: HashMap<u64, (u64, u64), BuildHasherDefault<FileNumberHasher>>,
}

impl BlobTally {
    /// A tally that starts from `counts`: (file, (references, bytes)).
    pub(crate) fn from_counts(counts: impl IntoIterator<Item = (u64, (u64, u64))>) -> Self {
        BlobTally {
            counts: counts.into_iter().collect(),
        }
    }

    /// Counts one reference of `bytes` record bytes into blob file `file`.
    pub(crate) fn add(&mut self, file: u64, bytes: u64) {
        let e = self.counts.entry(file).or_default();
        e.0 += 1;
        e.1 += bytes;
    }

    /// The (references, bytes) counted for `file`.
    pub(crate) fn get(&self, file: u64) -> (u64, u64) {
        self.counts.get(&file).copied().unwrap_or_default()
    }

    /// Every file with its (references, bytes), by file number.
    pub(crate) fn sorted(&self) -> Vec<(u64, (u64, u64))> {
        let mut all: Vec<(u64, (u64, u64))> = self.counts.iter().map(|(&f, &c)| (f, c)).collect();
        all.sort_unstable_by_key(|&(f, _)| f);
        all
    }
}

/// Hashes a file number (a counter, one key per file, never chosen by a caller) with one
/// multiplication: `HashMap`'s default SipHash costs more than the lookup it serves here.
#[derive(Default)]
pub(crate) struct FileNumberHasher(u64);

impl Hasher for FileNumberHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: the high bits, which hashbrown uses for its control bytes,
        // depend on every bit of the number.
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_file_and_lists_them_in_file_order() {
        let mut t = BlobTally::from_counts([(7, (1, 3))]);
        for (file, bytes) in [(900, 10), (900, 5), (1 << 40, 1), (7, 4)] {
            t.add(file, bytes);
        }
        assert_eq!(t.get(900), (2, 15));
        assert_eq!(t.get(7), (2, 7));
        assert_eq!(t.get(8), (0, 0));
        let files: Vec<u64> = t.sorted().iter().map(|&(f, _)| f).collect();
        assert_eq!(files, vec![7, 900, 1 << 40]);
        assert_eq!(
            t.sorted(),
            vec![(7, (2, 7)), (900, (2, 15)), (1 << 40, (1, 1))]
        );
    }

    #[test]
    fn thousands_of_consecutive_file_numbers_stay_apart() {
        let mut t = BlobTally::default();
        for file in 0..5000u64 {
            t.add(file, file);
            t.add(file, 1);
        }
        for file in 0..5000u64 {
            assert_eq!(t.get(file), (2, file + 1));
        }
        let files: Vec<u64> = t.sorted().iter().map(|&(f, _)| f).collect();
        assert_eq!(files, (0..5000).collect::<Vec<u64>>());
    }
}
