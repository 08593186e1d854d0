//! Leveled compaction: choosing what to compact ([`picker`]) and running it ([`job`]).
//!
//! L0 holds flushed memtables whose key ranges overlap; every deeper level is sorted and
//! non-overlapping, and each is `max_bytes_for_level_multiplier` times larger than the one
//! above. A compaction merges files of level n with the overlapping files of level n+1,
//! dropping versions no snapshot can see and tombstones that hide nothing below.

mod blob_tally;
pub(crate) mod job;
pub(crate) mod picker;
pub(crate) mod subcompactions;

use crate::version::FileMetaData;
use std::sync::Arc;

/// One unit of compaction work.
#[derive(Debug, Clone)]
pub(crate) struct Compaction {
    /// The source level.
    pub level: usize,
    /// The level outputs go to: `level + 1`, or `level` itself for a manual compaction of
    /// the deepest level (which rewrites it to drop garbage).
    pub output_level: usize,
    /// Manual compactions always rewrite, so they drop garbage even where a move would do.
    pub manual: bool,
    /// Input files: `inputs[0]` at `level`, `inputs[1]` at `output_level`.
    pub inputs: [Vec<Arc<FileMetaData>>; 2],
    /// Smallest user key of all inputs.
    pub smallest_user_key: Vec<u8>,
    /// Largest user key of all inputs.
    pub largest_user_key: Vec<u8>,
    /// The level L0 compacted into when this compaction was picked (chooses the codec with
    /// dynamic level sizes). 1 unless set.
    pub base_level: usize,
    /// The output level's codec is the one the input level is written with, so moving the
    /// files down keeps them as that level would write them (RocksDB's
    /// `InputCompressionMatchesOutput`). True unless set.
    pub codecs_match: bool,
    /// Why it was picked (reported to listeners). `Unknown` unless set.
    pub reason: crate::CompactionReason,
}

impl Compaction {
    /// Builds a compaction and computes its key range.
    pub(crate) fn new(
        level: usize,
        output_level: usize,
        inputs0: Vec<Arc<FileMetaData>>,
        inputs1: Vec<Arc<FileMetaData>>,
    ) -> Self {
        let all = inputs0.iter().chain(inputs1.iter());
        let smallest = all
            .clone()
            .map(|f| f.smallest.user_key())
            .min()
            .unwrap_or_default()
            .to_vec();
        let largest = all
            .map(|f| f.largest.user_key())
            .max()
            .unwrap_or_default()
            .to_vec();
        Compaction {
            level,
            output_level,
            manual: false,
            inputs: [inputs0, inputs1],
            smallest_user_key: smallest,
            largest_user_key: largest,
            base_level: 1,
            codecs_match: true,
            reason: crate::CompactionReason::Unknown,
        }
    }

    /// True if the input files can be moved down without rewriting them: nothing in the
    /// output level overlaps their range, and no two of them share a user key (at L0 a
    /// flush's file may overlap another's). Sequential loads then write each byte once, as
    /// in LevelDB and RocksDB, instead of once more per L0 compaction.
    pub(crate) fn is_trivial_move(&self) -> bool {
        !self.manual
            && self.codecs_match
            && self.output_level != self.level
            && !self.inputs[0].is_empty()
            && self.inputs[1].is_empty()
            && disjoint_by_user_key(&self.inputs[0])
    }

    /// Every input file number.
    pub(crate) fn input_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.inputs.iter().flatten().map(|f| f.number)
    }

    /// Total bytes of the input files.
    pub(crate) fn input_bytes(&self) -> [u64; 2] {
        [
            self.inputs[0].iter().map(|f| f.file_size).sum(),
            self.inputs[1].iter().map(|f| f.file_size).sum(),
        ]
    }
}

/// True if no two of `files` hold the same user key (their ranges, sorted by smallest key,
/// each end before the next begins).
fn disjoint_by_user_key(files: &[Arc<FileMetaData>]) -> bool {
    let mut ranges: Vec<(&[u8], &[u8])> = files
        .iter()
        .map(|f| (f.smallest.user_key(), f.largest.user_key()))
        .collect();
    ranges.sort_unstable();
    ranges.windows(2).all(|w| w[0].1 < w[1].0)
}

/// Per-level counters shown by the `shaledb.stats` property.
#[derive(Debug, Clone, Default)]
pub(crate) struct LevelStats {
    /// Compactions (or flushes, at L0) that wrote into this level.
    pub count: u64,
    /// Bytes read from this level's and the level above's files by those compactions.
    pub bytes_read: u64,
    /// Bytes written into this level.
    pub bytes_written: u64,
    /// Bytes moved into this level without rewriting.
    pub bytes_moved: u64,
    /// Time spent, in microseconds.
    pub micros: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{InternalKey, ValueKind};

    pub(super) fn file(number: u64, small: &[u8], large: &[u8]) -> Arc<FileMetaData> {
        Arc::new(FileMetaData {
            number,
            file_size: 1000,
            smallest: InternalKey::new(small, 10, ValueKind::Put),
            largest: InternalKey::new(large, 5, ValueKind::Put),
            smallest_seqno: 5,
            largest_seqno: 10,
            num_entries: 2,
            num_deletions: 0,
            num_range_deletions: 0,
            blob_files: Vec::new(),
            global_seqno: None,
            file_checksum: None,
            open_table: Default::default(),
            seeks: Default::default(),
        })
    }

    #[test]
    fn disjoint_l0_files_with_nothing_below_move_without_a_rewrite() {
        // Flush order (newest first) is not key order: the move must not depend on it.
        let c = Compaction::new(
            0,
            1,
            vec![
                file(3, b"m", b"p"),
                file(1, b"a", b"c"),
                file(2, b"d", b"k"),
            ],
            vec![],
        );
        assert!(c.is_trivial_move());
    }

    #[test]
    fn l0_files_sharing_a_user_key_are_merged() {
        // "c" is in both: its versions must be merged, not placed side by side in L1.
        let c = Compaction::new(0, 1, vec![file(2, b"c", b"f"), file(1, b"a", b"c")], vec![]);
        assert!(!c.is_trivial_move());
        let c = Compaction::new(0, 1, vec![file(2, b"b", b"f"), file(1, b"a", b"z")], vec![]);
        assert!(!c.is_trivial_move());
    }

    #[test]
    fn overlap_below_or_a_manual_compaction_rewrites() {
        let c = Compaction::new(0, 1, vec![file(2, b"a", b"c")], vec![file(1, b"b", b"d")]);
        assert!(!c.is_trivial_move());
        let mut c = Compaction::new(1, 2, vec![file(2, b"a", b"c")], vec![]);
        assert!(c.is_trivial_move());
        c.manual = true;
        assert!(!c.is_trivial_move());
        let c = Compaction::new(1, 2, vec![], vec![]);
        assert!(!c.is_trivial_move());
    }
}
