//! Versions: the set of table files per level, and the MANIFEST that records it.
//!
//! A [`Version`] is immutable. Readers hold an `Arc<Version>` for as long as they read from it,
//! which also keeps its files from being deleted. Flushes and compactions build a new version
//! from the current one plus a [`edit::VersionEdit`], log the edit to the MANIFEST, and only
//! then make the new version current (see `set.rs`).

pub mod edit;
pub mod filename;
mod level_iter;
pub mod set;

pub use edit::{FileMetaData, VersionEdit};
pub use level_iter::LevelIterator;
pub use set::VersionSet;

use crate::cache::TableCache;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, ValueKind};
use crate::options::ReadOptions;
use std::cmp::Ordering;
use std::sync::Arc;

/// The result of looking a key up in one source.
#[derive(Debug, PartialEq, Eq)]
pub enum GetResult {
    /// The newest visible version is this value.
    Found(Vec<u8>),
    /// The newest visible version is a tombstone.
    Deleted,
    /// No visible version here.
    NotPresent,
}

/// The table files of every level at one moment.
#[derive(Debug, Default)]
pub struct Version {
    /// `files[0]` (L0) is ordered newest first and its files may overlap; deeper levels are
    /// ordered by smallest key and their files never overlap.
    pub files: Vec<Vec<Arc<FileMetaData>>>,
}

impl Version {
    /// An empty version with `num_levels` levels.
    pub fn empty(num_levels: usize) -> Self {
        Version {
            files: vec![Vec::new(); num_levels],
        }
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.files.len()
    }

    /// Files at `level`.
    pub fn level_files(&self, level: usize) -> &[Arc<FileMetaData>] {
        self.files.get(level).map_or(&[], |v| v.as_slice())
    }

    /// Total bytes of the files at `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.level_files(level).iter().map(|f| f.file_size).sum()
    }

    /// Total bytes of all table files.
    pub fn total_bytes(&self) -> u64 {
        (0..self.num_levels()).map(|l| self.level_bytes(l)).sum()
    }

    /// Looks up `user_key` as of `lookup` (an internal key with the read sequence number):
    /// L0 files newest first, then one file per deeper level. The first version found wins.
    pub fn get(
        &self,
        tables: &TableCache,
        ro: &ReadOptions,
        lookup: &[u8],
        user_key: &[u8],
    ) -> Result<GetResult> {
        for f in self.level_files(0) {
            if user_key < f.smallest.user_key() || user_key > f.largest.user_key() {
                continue;
            }
            match Self::get_in_file(tables, ro, f, lookup, user_key)? {
                GetResult::NotPresent => continue,
                r => return Ok(r),
            }
        }
        for level in 1..self.num_levels() {
            let files = self.level_files(level);
            let i = find_file(files, lookup);
            let Some(f) = files.get(i) else { continue };
            if user_key < f.smallest.user_key() {
                continue;
            }
            match Self::get_in_file(tables, ro, f, lookup, user_key)? {
                GetResult::NotPresent => continue,
                r => return Ok(r),
            }
        }
        Ok(GetResult::NotPresent)
    }

    fn get_in_file(
        tables: &TableCache,
        ro: &ReadOptions,
        f: &FileMetaData,
        lookup: &[u8],
        user_key: &[u8],
    ) -> Result<GetResult> {
        let table = tables.get(f.number, f.file_size)?;
        match table.get(lookup, ro.verify_checksums, ro.fill_cache)? {
            Some((ikey, value)) => match key::parse_internal_key(&ikey) {
                Some(p) if p.user_key == user_key => Ok(match p.kind {
                    ValueKind::Put => GetResult::Found(value),
                    ValueKind::Delete => GetResult::Deleted,
                }),
                Some(_) => Ok(GetResult::NotPresent),
                None => Err(crate::Error::corruption(
                    table.path(),
                    0,
                    "table returned an unparseable internal key",
                )),
            },
            None => Ok(GetResult::NotPresent),
        }
    }

    /// Appends one iterator per L0 file and one per deeper non-empty level. Level iterators
    /// share this version's file lists (they hold the `Arc`) instead of copying them.
    pub fn add_iterators(
        self: &Arc<Self>,
        tables: &Arc<TableCache>,
        ro: &ReadOptions,
        out: &mut Vec<Box<dyn InternalIterator>>,
    ) {
        out.reserve(self.iterator_count());
        for f in self.level_files(0) {
            match tables.get(f.number, f.file_size) {
                Ok(t) => out.push(Box::new(t.iter(ro.verify_checksums, ro.fill_cache))),
                Err(e) => out.push(Box::new(crate::iter::EmptyIterator::with_error(e))),
            }
        }
        for level in 1..self.num_levels() {
            if !self.level_files(level).is_empty() {
                out.push(Box::new(LevelIterator::over_level(
                    self.clone(),
                    level,
                    tables.clone(),
                    ro.verify_checksums,
                    ro.fill_cache,
                )));
            }
        }
    }

    /// How many iterators `add_iterators` appends.
    pub fn iterator_count(&self) -> usize {
        let deeper = (1..self.num_levels())
            .filter(|&l| !self.level_files(l).is_empty())
            .count();
        self.level_files(0).len() + deeper
    }

    /// Files at `level` whose user-key range intersects [`begin`, `end`] (`None` = unbounded).
    pub fn overlapping_files(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Vec<Arc<FileMetaData>> {
        self.level_files(level)
            .iter()
            .filter(|f| {
                let before = end.is_some_and(|e| f.smallest.user_key() > e);
                let after = begin.is_some_and(|b| f.largest.user_key() < b);
                !before && !after
            })
            .cloned()
            .collect()
    }

    /// True if no file at a level deeper than `level` may hold `user_key`: a tombstone for it
    /// compacted into `level` hides nothing below and may be dropped.
    pub fn is_base_level_for_key(&self, level: usize, user_key: &[u8]) -> bool {
        for l in (level + 1)..self.num_levels() {
            let files = self.level_files(l);
            let i = files.partition_point(|f| f.largest.user_key() < user_key);
            if let Some(f) = files.get(i) {
                if user_key >= f.smallest.user_key() {
                    return false;
                }
            }
        }
        true
    }

    /// Total entries in all tables.
    pub fn num_entries(&self) -> u64 {
        self.files.iter().flatten().map(|f| f.num_entries).sum()
    }

    /// Total tombstones in all tables.
    pub fn num_deletions(&self) -> u64 {
        self.files.iter().flatten().map(|f| f.num_deletions).sum()
    }
}

/// Index of the first file in a sorted, non-overlapping level whose largest key is >= `ikey`
/// (`files.len()` if none).
pub fn find_file(files: &[Arc<FileMetaData>], ikey: &[u8]) -> usize {
    files.partition_point(|f| key::compare_internal(f.largest.encoded(), ikey) == Ordering::Less)
}
