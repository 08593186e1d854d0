//! Read-triggered compaction (LevelDB's "seek compaction"). A get that searches a table's
//! data block in vain and goes on to another table charges the first one; a table charged
//! once per 16 KiB of its size (at least 100 times) becomes its family's seek candidate, and
//! the picker compacts it into the next level when no level is over its size target. Keys
//! that are read often then stop costing a block read in every level they are spread over.
//!
//! Only tables without a filter are charged: with one, a search in vain mostly costs a filter
//! check, not a block read, and compacting to save it would cost more than it saves (the
//! reason RocksDB dropped LevelDB's seek compaction). The allowance is LevelDB's: one block
//! read of about 4 KiB costs about as much as compacting 40 KiB, and 16 KiB per read leaves a
//! margin.

use super::FileMetaData;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

/// Bytes of table per search in vain that a table is allowed before it is compacted.
const BYTES_PER_SEEK: u64 = 16 * 1024;

/// The least number of searches in vain a small table is allowed.
const MIN_ALLOWED_SEEKS: u64 = 100;

/// How many searches in vain a table of `file_size` bytes is allowed.
fn allowed_seeks(file_size: u64) -> u32 {
    (file_size / BYTES_PER_SEEK).clamp(MIN_ALLOWED_SEEKS, u64::from(u32::MAX)) as u32
}

/// Searches in vain charged to one table (runtime state of its [`FileMetaData`], not recorded
/// in the MANIFEST: a reopened database starts counting again, as LevelDB does).
#[derive(Debug, Default)]
pub struct SeekCount(AtomicU32);

impl SeekCount {
    /// Charges one search in vain to a table of `file_size` bytes: true once its allowance is
    /// used up (from the charge that uses it up on).
    pub(crate) fn charge(&self, file_size: u64) -> bool {
        let allowed = allowed_seeks(file_size);
        // Past the allowance the count stays put (no write to a line many readers load).
        if self.0.load(Ordering::Relaxed) >= allowed {
            return true;
        }
        self.0.fetch_add(1, Ordering::Relaxed) + 1 >= allowed
    }
}

/// A clone is the same file at another level (a trivial move): it starts counting again.
impl Clone for SeekCount {
    fn clone(&self) -> Self {
        SeekCount::default()
    }
}

/// The count says nothing about the file's identity: metadata compares equal regardless.
impl PartialEq for SeekCount {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for SeekCount {}

/// A family's seek candidate: the level and number of a table whose allowance is used up,
/// kept until the picker finds the table gone from that level (compacted). One at a time, as in LevelDB:
/// while the slot is taken, other used-up tables wait; the next get that charges one of them
/// once the slot is free offers it.
#[derive(Debug, Default)]
pub(crate) struct SeekCandidate {
    slot: Mutex<Option<(usize, u64)>>,
    /// Whether `slot` holds a candidate, read without the lock by every charge past an
    /// allowance.
    occupied: AtomicBool,
    /// Set with the slot, cleared by the reader that wakes the background threads for it.
    fresh: AtomicBool,
}

impl SeekCandidate {
    /// Makes table `number` at `level` the candidate, unless there is one.
    pub(crate) fn offer(&self, level: usize, number: u64) {
        if self.occupied.load(Ordering::Relaxed) {
            return;
        }
        let mut slot = self.slot.lock();
        if slot.is_none() {
            *slot = Some((level, number));
            self.occupied.store(true, Ordering::Relaxed);
            self.fresh.store(true, Ordering::Release);
        }
    }

    /// True once after each [`SeekCandidate::offer`]: the caller then wakes the background
    /// threads. A relaxed load when nothing was offered.
    #[inline]
    pub(crate) fn take_fresh(&self) -> bool {
        self.fresh.load(Ordering::Relaxed) && self.fresh.swap(false, Ordering::AcqRel)
    }

    /// The candidate, if any, leaving it in place.
    pub(crate) fn get(&self) -> Option<(usize, u64)> {
        *self.slot.lock()
    }

    /// Forgets the candidate if it is still `which` (its table is gone from its level).
    pub(crate) fn clear(&self, which: (usize, u64)) {
        let mut slot = self.slot.lock();
        if *slot == Some(which) {
            *slot = None;
            self.occupied.store(false, Ordering::Relaxed);
        }
    }
}

/// The first table a get searched in vain, charged if the get goes on to search another.
#[derive(Default)]
pub(crate) struct SeekTracker<'a> {
    first: Option<(usize, &'a Arc<FileMetaData>)>,
    /// A table was already recorded (one charge per get, to the first table searched).
    recorded: bool,
}

impl<'a> SeekTracker<'a> {
    /// Called before each table a get searches: charges the table searched in vain before
    /// it, if any, and offers it as the candidate when that uses its allowance up.
    #[inline]
    pub(crate) fn next_table(&mut self, candidate: Option<&SeekCandidate>) {
        if let (Some((level, f)), Some(c)) = (self.first.take(), candidate) {
            if f.seeks.charge(f.file_size) {
                c.offer(level, f.number);
            }
        }
    }

    /// Records that the table just searched (`f`, at `level`) did not hold the key although a
    /// data block of it was searched.
    #[inline]
    pub(crate) fn searched_in_vain(&mut self, level: usize, f: &'a Arc<FileMetaData>) {
        if !self.recorded {
            self.first = Some((level, f));
            self.recorded = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_allowed_one_search_in_vain_per_16_kib_and_at_least_100() {
        assert_eq!(allowed_seeks(0), 100);
        assert_eq!(allowed_seeks(100 * 16384 - 1), 100);
        assert_eq!(allowed_seeks(64 << 20), 4096);
        let count = SeekCount::default();
        let size = 200 * 16384;
        let used_up: Vec<bool> = (0..450).map(|_| count.charge(size)).collect();
        assert_eq!(
            used_up.iter().position(|&u| u),
            Some(199),
            "the 200th charge"
        );
        assert!(used_up[199..].iter().all(|&u| u), "and every one after it");
        assert_eq!(
            count.0.load(Ordering::Relaxed),
            200,
            "the count stops there"
        );
        assert_eq!(
            count.clone().0.load(Ordering::Relaxed),
            0,
            "a clone starts over"
        );
    }

    #[test]
    fn one_candidate_at_a_time_fresh_once_and_cleared_only_by_its_own_taker() {
        let c = SeekCandidate::default();
        assert!(!c.take_fresh());
        assert_eq!(c.get(), None);
        c.offer(1, 42);
        c.offer(2, 7);
        assert!(c.take_fresh());
        assert!(!c.take_fresh(), "once");
        assert_eq!(c.get(), Some((1, 42)), "the first offer holds the slot");
        c.clear((2, 7));
        assert_eq!(c.get(), Some((1, 42)), "another table's clear leaves it");
        c.clear((1, 42));
        assert_eq!(c.get(), None);
        c.offer(2, 7);
        assert!(c.take_fresh());
        assert_eq!(c.get(), Some((2, 7)), "a freed slot takes the next offer");
    }
}
