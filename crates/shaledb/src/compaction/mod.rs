//! Leveled compaction: choosing what to compact ([`picker`]) and running it ([`job`]).
//!
//! L0 holds flushed memtables whose key ranges overlap; every deeper level is sorted and
//! non-overlapping, and each is `max_bytes_for_level_multiplier` times larger than the one
//! above. A compaction merges files of level n with the overlapping files of level n+1,
//! dropping versions no snapshot can see and tombstones that hide nothing below.

pub mod job;
pub mod picker;

use crate::version::FileMetaData;
use std::sync::Arc;

/// One unit of compaction work.
#[derive(Debug, Clone)]
pub struct Compaction {
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
}

impl Compaction {
    /// Builds a compaction and computes its key range.
    pub fn new(
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
        }
    }

    /// True if the single input file can be moved down without rewriting it.
    pub fn is_trivial_move(&self) -> bool {
        !self.manual
            && self.output_level != self.level
            && self.inputs[0].len() == 1
            && self.inputs[1].is_empty()
    }

    /// Every input file number.
    pub fn input_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.inputs.iter().flatten().map(|f| f.number)
    }

    /// Total bytes of the input files.
    pub fn input_bytes(&self) -> [u64; 2] {
        [
            self.inputs[0].iter().map(|f| f.file_size).sum(),
            self.inputs[1].iter().map(|f| f.file_size).sum(),
        ]
    }
}

/// Per-level counters shown by the `shaledb.stats` property.
#[derive(Debug, Clone, Default)]
pub struct LevelStats {
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
