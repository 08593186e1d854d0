//! Versions: the set of table files per level, and the MANIFEST that records it.
//!
//! A [`Version`] is immutable. Readers hold an `Arc<Version>` for as long as they read from it,
//! which also keeps its files from being deleted. Flushes and compactions build a new version
//! from the current one plus a [`edit::VersionEdit`], log the edit to the MANIFEST, and only
//! then make the new version current (see `set.rs`).

pub(crate) mod edit;
pub(crate) mod filename;
mod level_iter;
pub(crate) mod lifecycle;
pub(crate) mod seeks;
pub(crate) mod set;

pub use edit::VersionEdit;
pub(crate) use edit::{BlobFileAddition, BlobGarbage, FileMetaData};
pub(crate) use level_iter::LevelIterator;
pub(crate) use lifecycle::{DeletionQueue, FileHandle, ObsoleteFile};
pub(crate) use seeks::SeekCandidate;
use seeks::SeekTracker;
pub(crate) use set::{ManifestTail, VersionSet};

use crate::cache::TableCache;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, LookupKey, SequenceNumber};
use crate::range_del::FragmentedRangeTombstones;
use crate::sst::{Block, BlockHandle, BlockReadOptions, Table};
use crate::value::LookupResult;
use parking_lot::Mutex;
use std::cmp::Ordering;
use std::sync::Arc;

/// A point lookup in one table, counting its range tombstones: an entry older than the
/// newest tombstone over the key (from this or a newer source) reads as deleted. Once a
/// tombstone covers the key and this table holds nothing newer, the key is deleted: every
/// older source holds only older versions of a key (a newer source's versions of a key are
/// always newer: flushes and compactions move a key's versions down together with the
/// tombstones over it), as RocksDB also relies on.
#[inline]
fn get_in_table(
    t: &Table,
    lookup: &LookupKey,
    opts: BlockReadOptions,
    covering: &mut SequenceNumber,
) -> Result<LookupResult> {
    let here = t.max_covering_tombstone_seq(lookup.user_key(), lookup.sequence());
    *covering = (*covering).max(here);
    let (r, seq) = t.get_entry(lookup, opts)?;
    match r {
        LookupResult::NotPresent if *covering > 0 => Ok(LookupResult::Deleted),
        LookupResult::NotPresent => Ok(r),
        _ if *covering > seq => Ok(LookupResult::Deleted),
        _ => Ok(r),
    }
}

/// The table files of every level at one moment.
#[derive(Debug, Default)]
pub(crate) struct Version {
    /// `files[0]` (L0) is ordered newest first and its files may overlap; deeper levels are
    /// ordered by smallest key and their files never overlap.
    pub files: Vec<Vec<Arc<FileMetaData>>>,
    /// One handle per listed file, ordered by file number, shared with every other version
    /// listing the file: while any version lists a file, it is not deleted (see lifecycle.rs).
    /// Empty for versions that do not own their files (tests, a version being built).
    pub(crate) handles: Vec<Arc<FileHandle>>,
    /// Compaction scores and the pending-compaction estimate, computed once when the version
    /// set builds the version (LevelDB's `Finalize`) with the database's options, so pickers
    /// and write-stall checks do not re-sum file sizes. `None` for versions built elsewhere
    /// (tests); the picker then computes them.
    pub(crate) scores: Option<VersionScores>,
    /// The blob files some listed table references, ascending by number (see
    /// `set::apply_edit`: a blob file no table references leaves the version).
    pub blob_files: Vec<BlobFile>,
}

/// A blob file as a version lists it: what its addition recorded and the garbage recorded
/// since. Its reader lives in the blob file cache (`TableCache::blob_reader`), not here, so
/// open blob files are bounded by `max_open_files` however many the versions list.
#[derive(Debug, Clone)]
pub(crate) struct BlobFile {
    pub meta: Arc<BlobFileMetaData>,
    /// Records no live table references any more, and their bytes.
    pub garbage_count: u64,
    pub garbage_bytes: u64,
}

/// How a blob is read: checksums, and the cache holding blob values (`Options::blob_cache`).
#[derive(Clone, Copy, Default)]
pub(crate) struct BlobReadOptions<'a> {
    pub verify_checksums: bool,
    /// The block cache, when blob values are cached there.
    pub cache: Option<&'a crate::cache::BlockCache>,
    /// Insert values read into `cache` (`ReadOptions::fill_cache`).
    pub fill_cache: bool,
}

/// Bytes charged to the cache for a blob value beyond its own (the entry and its key).
const BLOB_CACHE_ENTRY_OVERHEAD: usize = 64;

/// A blob file's immutable description.
#[derive(Debug)]
pub(crate) struct BlobFileMetaData {
    pub addition: BlobFileAddition,
    /// The blob file's key space in the block cache (values cached under its offsets).
    pub cache_id: u64,
}

impl BlobFileMetaData {
    pub(crate) fn new(addition: BlobFileAddition) -> Self {
        BlobFileMetaData {
            addition,
            cache_id: Table::new_cache_id(),
        }
    }
}

/// A version's compaction needs (see `compaction::picker::score_version`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct VersionScores {
    /// Score of each level but the last: >= 1 means the level needs compaction.
    pub level_scores: Vec<f64>,
    /// The order in which levels that need compaction are picked: each level's score over
    /// the score of the level it compacts into (see `picker::pick_priorities`).
    pub pick_priorities: Vec<f64>,
    /// Bytes compaction must still rewrite to bring every level to its target.
    pub pending_compaction_bytes: u64,
    /// The level L0 compacts into (1 unless level sizes are dynamic).
    pub base_level: usize,
}

impl Version {
    /// An empty version with `num_levels` levels (tests build versions from edits on it).
    #[cfg(test)]
    pub(crate) fn empty(num_levels: usize) -> Self {
        Version {
            files: vec![Vec::new(); num_levels],
            handles: Vec::new(),
            scores: None,
            blob_files: Vec::new(),
        }
    }

    /// The blob file numbered `number`, if the version lists it.
    pub(crate) fn blob_file(&self, number: u64) -> Option<&BlobFile> {
        self.blob_files
            .binary_search_by_key(&number, |b| b.meta.addition.number)
            .ok()
            .map(|i| &self.blob_files[i])
    }

    /// Reads the value `r` references, stored under `user_key`, from a blob file this version
    /// lists (its reader from the blob file cache of `tables`). A reference to a file the
    /// version does not list is corruption. `readahead`: an iterator's (gets and compactions
    /// read each record alone).
    pub(crate) fn read_blob(
        &self,
        tables: &TableCache,
        user_key: &[u8],
        r: &crate::blob::BlobRef,
        opts: BlobReadOptions<'_>,
        readahead: Option<&mut crate::blob::BlobReadahead>,
    ) -> Result<Vec<u8>> {
        let Some(b) = self.blob_file(r.file_number) else {
            return Err(crate::error::Error::corruption(
                filename::blob_file(tables.dir(), r.file_number),
                r.offset,
                "a table references a blob file the version does not list",
            ));
        };
        let key = (b.meta.cache_id, r.offset);
        if let Some(cache) = opts.cache {
            if let Some(v) = cache.get(&key).and_then(|v| v.downcast::<Vec<u8>>().ok()) {
                return Ok(v.to_vec());
            }
        }
        let reader = tables.blob_reader(&b.meta.addition)?;
        let value = match readahead {
            Some(ra) => reader.read_ahead(user_key, r, opts.verify_checksums, ra)?,
            None => reader.read(user_key, r, opts.verify_checksums)?,
        };
        if let (Some(cache), true) = (opts.cache, opts.fill_cache) {
            let charge = value.len() + BLOB_CACHE_ENTRY_OVERHEAD;
            cache.insert(key, Arc::new(value.clone()), charge);
        }
        Ok(value)
    }

    /// Number of levels.
    pub(crate) fn num_levels(&self) -> usize {
        self.files.len()
    }

    /// Files at `level`.
    pub(crate) fn level_files(&self, level: usize) -> &[Arc<FileMetaData>] {
        self.files.get(level).map_or(&[], |v| v.as_slice())
    }

    /// Total bytes of the files at `level`.
    pub(crate) fn level_bytes(&self, level: usize) -> u64 {
        self.level_files(level).iter().map(|f| f.file_size).sum()
    }

    /// Total bytes of all table files.
    pub(crate) fn total_bytes(&self) -> u64 {
        (0..self.num_levels()).map(|l| self.level_bytes(l)).sum()
    }

    /// An estimate of the bytes the live data would take fully compacted (RocksDB's
    /// `estimate-live-data-size`): from the last level up, the sizes of the files whose key
    /// ranges overlap no file already counted. Overwritten data in upper levels is then not
    /// counted; the less compacted the tree, the lower (more optimistic) the estimate.
    pub(crate) fn estimate_live_data_size(&self) -> u64 {
        // Counted ranges: largest user key -> smallest user key (disjoint, so ordered by both).
        let mut counted: std::collections::BTreeMap<&[u8], &[u8]> =
            std::collections::BTreeMap::new();
        let mut size = 0;
        for level in (0..self.num_levels()).rev() {
            for f in self.level_files(level) {
                let (small, large) = (f.smallest.user_key(), f.largest.user_key());
                // The first counted range ending at or after `small` is the only candidate
                // for an overlap.
                let overlaps = counted
                    .range(small..)
                    .next()
                    .is_some_and(|(_, &start)| start <= large);
                if !overlaps {
                    counted.insert(large, small);
                    size += f.file_size;
                }
            }
        }
        size
    }

    /// Looks `lookup`'s user key up as of its sequence number: L0 files newest first, then
    /// one file per deeper level. The first version found wins, unless a range tombstone seen
    /// on the way (`covering`: the newest so far, from newer sources too) is newer than it.
    ///
    /// With `seeks`, the first table searched in vain before another is charged for it, and
    /// becomes the family's seek candidate once its allowance is used up (seeks.rs).
    pub(crate) fn get(
        &self,
        tables: &TableCache,
        opts: BlockReadOptions,
        lookup: &LookupKey,
        covering: &mut SequenceNumber,
        seeks: Option<&SeekCandidate>,
    ) -> Result<LookupResult> {
        let user_key = lookup.user_key();
        if *covering > 0 {
            // A newer source's tombstone covers the key, and nothing newer was found there.
            return Ok(LookupResult::Deleted);
        }
        let mut tracker = SeekTracker::default();
        for f in self.level_files(0) {
            if user_key < f.smallest.user_key() || user_key > f.largest.user_key() {
                continue;
            }
            tracker.next_table(seeks);
            match self.get_in_file(tables, opts, f, lookup, covering)? {
                (LookupResult::NotPresent, in_vain) => {
                    if in_vain {
                        tracker.searched_in_vain(0, f);
                    }
                }
                (r, _) => return Ok(r),
            }
        }
        for level in 1..self.num_levels() {
            let files = self.level_files(level);
            let i = find_file(files, lookup.internal_key());
            let Some(f) = files.get(i) else { continue };
            if user_key < f.smallest.user_key() {
                continue;
            }
            tracker.next_table(seeks);
            match self.get_in_file(tables, opts, f, lookup, covering)? {
                (LookupResult::NotPresent, in_vain) => {
                    if in_vain {
                        tracker.searched_in_vain(level, f);
                    }
                }
                (r, _) => return Ok(r),
            }
        }
        Ok(LookupResult::NotPresent)
    }

    /// [`Version::get`] for a batch of lookups in ascending order of user key: each table a
    /// key may be in is searched once for all such keys (see [`Table::multi_get_entries`]).
    /// `covering[i]` is lookup i's newest covering tombstone from newer sources; `results[i]`
    /// is set to what `get` would return (an error stays with the keys it concerns).
    pub(crate) fn multi_get(
        &self,
        tables: &TableCache,
        opts: BlockReadOptions,
        lookups: &[&LookupKey],
        covering: &mut [SequenceNumber],
        results: &mut [Option<Result<LookupResult>>],
    ) {
        for (i, c) in covering.iter().enumerate() {
            if *c > 0 {
                results[i] = Some(Ok(LookupResult::Deleted));
            }
        }
        for f in self.level_files(0) {
            let group: Vec<usize> = (0..lookups.len())
                .filter(|&i| {
                    let k = lookups[i].user_key();
                    results[i].is_none() && k >= f.smallest.user_key() && k <= f.largest.user_key()
                })
                .collect();
            let mut batch = LevelBatch {
                lookups,
                covering,
                results,
            };
            self.multi_get_in_files(tables, opts, vec![(&**f, group)], &mut batch);
        }
        for level in 1..self.num_levels() {
            let files = self.level_files(level);
            if files.is_empty() {
                continue;
            }
            // Sorted keys fall into the level's files in order: one group per file.
            let mut groups: Vec<(&FileMetaData, Vec<usize>)> = Vec::new();
            let mut current: Option<usize> = None;
            for i in 0..lookups.len() {
                if results[i].is_some() {
                    continue;
                }
                let n = find_file(files, lookups[i].internal_key());
                let Some(f) = files.get(n) else { break };
                if lookups[i].user_key() < f.smallest.user_key() {
                    continue;
                }
                if current != Some(n) {
                    groups.push((f, Vec::new()));
                    current = Some(n);
                }
                if let Some((_, g)) = groups.last_mut() {
                    g.push(i);
                }
            }
            let mut batch = LevelBatch {
                lookups,
                covering,
                results,
            };
            self.multi_get_in_files(tables, opts, groups, &mut batch);
        }
    }

    /// The lookups of each group (indexes into `lookups`, ascending) in its file, the files
    /// being of one level (or one L0 file); a key a file does not hold stays unresolved.
    /// Data blocks missing from the cache are read concurrently (`io_pool`) before the
    /// files are searched, so a batch waits for about one read, not one per block.
    fn multi_get_in_files(
        &self,
        tables: &TableCache,
        opts: BlockReadOptions,
        groups: Vec<(&FileMetaData, Vec<usize>)>,
        batch: &mut LevelBatch<'_, '_>,
    ) {
        let mut planned = Vec::with_capacity(groups.len());
        for (f, group) in groups {
            if group.is_empty() {
                continue;
            }
            let table = match self.table_for(tables, f) {
                Ok(t) => t,
                Err(e) => {
                    for &i in &group {
                        batch.results[i] = Some(Err(e.duplicate()));
                    }
                    continue;
                }
            };
            let keys: Vec<&LookupKey> = group.iter().map(|&i| batch.lookups[i]).collect();
            let mut found = Vec::with_capacity(group.len());
            found.resize_with(group.len(), || (LookupResult::NotPresent, 0));
            match table.multi_get_plan(&keys, &mut found) {
                Ok(plan) => planned.push(PlannedFile {
                    table,
                    group,
                    keys,
                    plan,
                    found,
                }),
                Err(_) => batch.one_by_one(&table, &group, opts),
            }
        }
        let preloaded = preload_blocks(&planned, opts);
        for (p, blocks) in planned.into_iter().zip(preloaded) {
            let PlannedFile {
                table,
                group,
                keys,
                plan,
                mut found,
            } = p;
            if table
                .multi_get_search(&keys, &plan, &blocks, opts, &mut found)
                .is_err()
            {
                batch.one_by_one(&table, &group, opts);
                continue;
            }
            batch.record(&table, &group, found);
        }
    }

    /// File `f`'s open table: borrowed from its metadata when kept there, else from the table
    /// cache (and kept in the metadata while every live file fits in the table cache).
    fn table_for(&self, tables: &TableCache, f: &FileMetaData) -> Result<Arc<Table>> {
        if let Some(t) = f.open_table.get() {
            return Ok(t.clone());
        }
        let t = tables.get(f)?;
        if self.num_files() <= tables.capacity() {
            f.open_table.keep(t.clone());
        }
        Ok(t)
    }
}

/// A file's part of a level's `multi_get`: its keys (`group`, indexes into the lookups), the
/// data block to search for each key its filter lets through, and the answers so far.
struct PlannedFile<'k> {
    table: Arc<Table>,
    group: Vec<usize>,
    keys: Vec<&'k LookupKey>,
    plan: Vec<(usize, BlockHandle)>,
    found: Vec<(LookupResult, SequenceNumber)>,
}

/// The state of a `Version::multi_get` that one level's search updates.
struct LevelBatch<'a, 'k> {
    lookups: &'a [&'k LookupKey],
    covering: &'a mut [SequenceNumber],
    results: &'a mut [Option<Result<LookupResult>>],
}

/// A data block a planned search needs, with whether the block cache holds it.
type Preloaded = (BlockHandle, Arc<Block>, bool);

/// The data blocks each planned file's search needs, in plan order: those the block cache
/// holds, and those it does not, read concurrently (`io_pool`) when recent reads waited on
/// the device, else one after another. A failed read is left out (the search reads that
/// block again and reports the error with the keys it concerns).
fn preload_blocks(planned: &[PlannedFile<'_>], opts: BlockReadOptions) -> Vec<Vec<Preloaded>> {
    type Slot = Arc<Mutex<Option<(Arc<Block>, bool)>>>;
    /// A block to search: in the cache, or being read into a slot.
    enum Wanted {
        Cached(Arc<Block>),
        Reading(Slot),
    }
    let mut lists: Vec<Vec<(BlockHandle, Wanted)>> = Vec::new();
    let mut jobs: Vec<crate::io_pool::Job> = Vec::new();
    for p in planned {
        let mut list: Vec<(BlockHandle, Wanted)> = Vec::new();
        for &(_, h) in &p.plan {
            if list.last().is_some_and(|(last, _)| *last == h) {
                continue;
            }
            if let Some(b) = p.table.cached_data_block(h, opts) {
                list.push((h, Wanted::Cached(b)));
                continue;
            }
            let slot: Slot = Arc::new(Mutex::new(None));
            let (table, job_slot) = (p.table.clone(), slot.clone());
            jobs.push(Box::new(move || {
                let start = std::time::Instant::now();
                // Through the cache: another reader may have brought the block in meanwhile.
                let read = table.data_block(h, opts);
                crate::io_pool::record_read(start.elapsed());
                if let Ok(block) = read {
                    *job_slot.lock() = Some(block);
                }
            }));
            list.push((h, Wanted::Reading(slot)));
        }
        lists.push(list);
    }
    if crate::io_pool::worth_parallel(jobs.len()) {
        crate::io_pool::run_all(jobs);
    } else {
        jobs.into_iter().for_each(|job| job());
    }
    lists
        .into_iter()
        .map(|list| {
            list.into_iter()
                .filter_map(|(h, wanted)| match wanted {
                    Wanted::Cached(b) => Some((h, b, true)),
                    Wanted::Reading(slot) => slot.lock().take().map(|(b, c)| (h, b, c)),
                })
                .collect()
        })
        .collect()
}

impl LevelBatch<'_, '_> {
    /// Looks each key of `group` up on its own in `table` (after a batched search failed, so
    /// that an error stays with the keys it concerns).
    fn one_by_one(&mut self, table: &Table, group: &[usize], opts: BlockReadOptions) {
        for &i in group {
            match get_in_table(table, self.lookups[i], opts, &mut self.covering[i]) {
                Ok(LookupResult::NotPresent) => {}
                r => self.results[i] = Some(r),
            }
        }
    }

    /// Records what `table` said about each key of `group`.
    fn record(
        &mut self,
        table: &Table,
        group: &[usize],
        found: Vec<(LookupResult, SequenceNumber)>,
    ) {
        let (lookups, covering, results) = (self.lookups, &mut *self.covering, &mut *self.results);
        for (&i, (r, seq)) in group.iter().zip(found) {
            let lookup = lookups[i];
            let here = table.max_covering_tombstone_seq(lookup.user_key(), lookup.sequence());
            covering[i] = covering[i].max(here);
            results[i] = match r {
                LookupResult::NotPresent if covering[i] > 0 => Some(Ok(LookupResult::Deleted)),
                LookupResult::NotPresent => None,
                _ if covering[i] > seq => Some(Ok(LookupResult::Deleted)),
                r => Some(Ok(r)),
            };
        }
    }
}

impl Version {
    /// Looks the key up in one file. The file's open table is borrowed from its metadata when
    /// it was kept there (no table-cache lock, no reference count touched); otherwise it comes
    /// from the table cache and, while every live file fits in the table cache, is kept in the
    /// metadata for the next read.
    ///
    /// Also says whether a miss searched a data block of the table (it has no filter).
    fn get_in_file(
        &self,
        tables: &TableCache,
        opts: BlockReadOptions,
        f: &FileMetaData,
        lookup: &LookupKey,
        covering: &mut SequenceNumber,
    ) -> Result<(LookupResult, bool)> {
        if let Some(t) = f.open_table.get() {
            return Ok((get_in_table(t, lookup, opts, covering)?, t.has_no_filter()));
        }
        let table = tables.get(f)?;
        if self.num_files() <= tables.capacity() {
            f.open_table.keep(table.clone());
        }
        let r = get_in_table(&table, lookup, opts, covering)?;
        Ok((r, table.has_no_filter()))
    }

    /// The range tombstones of every table that has any (the MANIFEST says which).
    pub(crate) fn range_tombstones(
        &self,
        tables: &TableCache,
    ) -> Result<Vec<Arc<FragmentedRangeTombstones>>> {
        let mut out = Vec::new();
        for f in self.files.iter().flatten() {
            if f.num_range_deletions == 0 {
                continue;
            }
            let t = tables.get(f)?;
            if let Some(r) = t.range_tombstones() {
                out.push(r.clone());
            }
        }
        Ok(out)
    }

    /// True if some table has range tombstones.
    pub(crate) fn has_range_tombstones(&self) -> bool {
        self.files
            .iter()
            .flatten()
            .any(|f| f.num_range_deletions > 0)
    }

    /// Number of table files in all levels.
    pub(crate) fn num_files(&self) -> usize {
        self.files.iter().map(Vec::len).sum()
    }

    /// Appends one iterator per L0 file and one per deeper non-empty level. Level iterators
    /// share this version's file lists (they hold the `Arc`) instead of copying them.
    pub(crate) fn add_iterators(
        self: &Arc<Self>,
        tables: &Arc<TableCache>,
        opts: BlockReadOptions,
        out: &mut Vec<Box<dyn InternalIterator>>,
    ) {
        out.reserve(self.iterator_count());
        for f in self.level_files(0) {
            match tables.get(f) {
                Ok(t) => out.push(Box::new(t.iter(opts))),
                Err(e) => out.push(Box::new(crate::iter::EmptyIterator::with_error(e))),
            }
        }
        for level in 1..self.num_levels() {
            if !self.level_files(level).is_empty() {
                out.push(Box::new(LevelIterator::over_level(
                    self.clone(),
                    level,
                    tables.clone(),
                    opts,
                )));
            }
        }
    }

    /// Like `add_iterators`, for an iteration that stays within the keys starting with
    /// `prefix` (`ReadOptions::prefix_same_as_start`): leaves out every table whose key range
    /// misses the prefix or whose bloom filter, built with the extractor `extractor_id`, says
    /// it holds no key with it.
    pub(crate) fn add_prefix_iterators(
        &self,
        tables: &Arc<TableCache>,
        opts: BlockReadOptions,
        prefix: &[u8],
        extractor_id: &str,
        out: &mut Vec<Box<dyn InternalIterator>>,
    ) {
        let in_range = |f: &FileMetaData| {
            let (small, large) = (f.smallest.user_key(), f.largest.user_key());
            large >= prefix && (small < prefix || small.starts_with(prefix))
        };
        let keep = |f: &FileMetaData| -> std::result::Result<Option<Arc<Table>>, crate::Error> {
            if !in_range(f) {
                return Ok(None);
            }
            let t = tables.get(f)?;
            Ok(t.may_contain_prefix(prefix, extractor_id).then_some(t))
        };
        for f in self.level_files(0) {
            match keep(f) {
                Ok(Some(t)) => out.push(Box::new(t.iter(opts))),
                Ok(None) => {}
                Err(e) => out.push(Box::new(crate::iter::EmptyIterator::with_error(e))),
            }
        }
        for level in 1..self.num_levels() {
            let mut files = Vec::new();
            for f in self.level_files(level) {
                match keep(f) {
                    Ok(Some(_)) => files.push(f.clone()),
                    Ok(None) => {}
                    Err(e) => out.push(Box::new(crate::iter::EmptyIterator::with_error(e))),
                }
            }
            if !files.is_empty() {
                out.push(Box::new(LevelIterator::new(files, tables.clone(), opts)));
            }
        }
    }

    /// How many iterators `add_iterators` appends.
    pub(crate) fn iterator_count(&self) -> usize {
        let deeper = (1..self.num_levels())
            .filter(|&l| !self.level_files(l).is_empty())
            .count();
        self.level_files(0).len() + deeper
    }

    /// Files at `level` whose user-key range intersects [`begin`, `end`] (`None` = unbounded).
    /// About how many table bytes hold user keys in [`start`, `end`) (`None`: unbounded), from
    /// file sizes and index blocks only (no data block is read): whole files inside the range
    /// count fully, a file the range cuts counts between the index positions of its bounds.
    pub(crate) fn approximate_size(
        &self,
        tables: &TableCache,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<u64> {
        // Seek targets sorting before every entry of their user key.
        let start_key =
            start.map(|s| key::make_internal_key(s, key::MAX_SEQUENCE, key::KIND_FOR_SEEK));
        let end_key = end.map(|e| key::make_internal_key(e, key::MAX_SEQUENCE, key::KIND_FOR_SEEK));
        let mut total = 0u64;
        for f in self.files.iter().flatten() {
            let (small, large) = (f.smallest.user_key(), f.largest.user_key());
            if end.is_some_and(|e| small >= e) || start.is_some_and(|s| large < s) {
                continue;
            }
            let starts_inside = start.is_none_or(|s| small >= s);
            let ends_inside = end.is_none_or(|e| large < e);
            if starts_inside && ends_inside {
                total += f.file_size;
                continue;
            }
            let table = tables.get(f)?;
            let from = match &start_key {
                Some(k) if !starts_inside => table.approximate_offset_of(k),
                _ => 0,
            };
            let to = match &end_key {
                Some(k) if !ends_inside => table.approximate_offset_of(k),
                _ => f.file_size,
            };
            total += to.saturating_sub(from);
        }
        Ok(total)
    }

    pub(crate) fn overlapping_files(
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

    /// True if every level deeper than `level` is empty: an output written to `level` is at
    /// the bottom (`bottommost_compression`, sequence-number zeroing).
    pub(crate) fn nothing_below(&self, level: usize) -> bool {
        (level + 1..self.num_levels()).all(|l| self.level_files(l).is_empty())
    }

    /// True if no file at a level deeper than `level` may hold `user_key`: a tombstone for it
    /// compacted into `level` hides nothing below and may be dropped.
    pub(crate) fn is_base_level_for_key(&self, level: usize, user_key: &[u8]) -> bool {
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

    /// True if no file at a level deeper than `level` may hold a key in `[start, end)`: a
    /// range tombstone over it compacted into `level` hides nothing below.
    pub(crate) fn is_base_level_for_range(&self, level: usize, start: &[u8], end: &[u8]) -> bool {
        for l in (level + 1)..self.num_levels() {
            let files = self.level_files(l);
            let i = files.partition_point(|f| f.largest.user_key() < start);
            if files.get(i).is_some_and(|f| f.smallest.user_key() < end) {
                return false;
            }
        }
        true
    }

    /// True if no file at a level deeper than `level` holds a key in `[start, end]`.
    pub(crate) fn is_base_level_for_range_inclusive(
        &self,
        level: usize,
        start: &[u8],
        end: &[u8],
    ) -> bool {
        for l in (level + 1)..self.num_levels() {
            let files = self.level_files(l);
            let i = files.partition_point(|f| f.largest.user_key() < start);
            if files.get(i).is_some_and(|f| f.smallest.user_key() <= end) {
                return false;
            }
        }
        true
    }

    /// Total entries in all tables.
    pub(crate) fn num_entries(&self) -> u64 {
        self.files.iter().flatten().map(|f| f.num_entries).sum()
    }

    /// Total tombstones in all tables.
    pub(crate) fn num_deletions(&self) -> u64 {
        self.files.iter().flatten().map(|f| f.num_deletions).sum()
    }
}

/// Index of the first file in a sorted, non-overlapping level whose largest key is >= `ikey`
/// (`files.len()` if none).
pub(crate) fn find_file(files: &[Arc<FileMetaData>], ikey: &[u8]) -> usize {
    files.partition_point(|f| key::compare_internal(f.largest.encoded(), ikey) == Ordering::Less)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::BlockCache;
    use crate::compression::CompressionType;
    use crate::fs::{FileSystem, MemFileSystem};
    use crate::key::{InternalKey, ValueKind};
    use crate::sst::{TableBuilder, TableBuilderOptions};
    use std::path::Path;

    /// Writes table `number` holding `key{i}` -> `value{i}` (sequence 1) for i in 0..n, and
    /// returns its metadata.
    fn write_table(fs: &dyn FileSystem, dir: &Path, number: u64, n: usize) -> FileMetaData {
        let path = filename::table_file(dir, number);
        let file = fs.create(&path).expect("create");
        let opts = TableBuilderOptions {
            block_size: 64,
            restart_interval: 4,
            bloom_bits_per_key: 10,
            compression: CompressionType::None,
            compression_level: None,
            compress_blob_reference_blocks: false,
            prefix_extractor: None,
            partition_index: false,
            partition_filters: false,
            metadata_block_size: 4096,
            index_restart_interval: 1,
            legacy_format: false,
            data_block_hash_ratio: None,
        };
        let mut b = TableBuilder::new(opts, file, path, number);
        let ikey = |i: usize| InternalKey::new(format!("key{i:04}").as_bytes(), 1, ValueKind::Put);
        for i in 0..n {
            b.add(ikey(i).encoded(), format!("value{i}").as_bytes())
                .expect("add");
        }
        let props = b.finish().expect("finish");
        FileMetaData {
            number,
            file_size: props.file_size,
            smallest: ikey(0),
            largest: ikey(n - 1),
            smallest_seqno: 1,
            largest_seqno: 1,
            num_entries: n as u64,
            num_deletions: 0,
            num_range_deletions: 0,
            blob_files: Vec::new(),
            global_seqno: None,
            file_checksum: None,
            open_table: Default::default(),
            seeks: Default::default(),
        }
    }

    fn setup(max_open_files: usize) -> (Arc<TableCache>, Version) {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).expect("mkdir");
        let meta = write_table(&*fs, dir, 5, 200);
        let cache = Arc::new(BlockCache::new(1 << 20, 0));
        let tables = Arc::new(TableCache::new(
            fs,
            dir.to_path_buf(),
            max_open_files,
            cache,
        ));
        let mut v = Version::empty(2);
        v.files[1].push(Arc::new(meta));
        (tables, v)
    }

    fn get(v: &Version, tables: &TableCache, key: &[u8]) -> LookupResult {
        v.get(
            tables,
            BlockReadOptions::default(),
            &LookupKey::new(key, 10),
            &mut 0,
            None,
        )
        .expect("get")
    }

    /// Counts reads in flight on the files it wraps (each read takes 20 ms) and the most seen.
    #[derive(Default)]
    struct SlowReads {
        in_flight: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
    }

    struct SlowFile(Arc<dyn crate::fs::RandomAccessFile>, Arc<SlowReads>);

    impl crate::fs::RandomAccessFile for SlowFile {
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
            use std::sync::atomic::Ordering::SeqCst;
            let now = self.1.in_flight.fetch_add(1, SeqCst) + 1;
            self.1.most.fetch_max(now, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            let r = self.0.read_exact_at(offset, buf);
            self.1.in_flight.fetch_sub(1, SeqCst);
            r
        }
        fn len(&self) -> std::io::Result<u64> {
            self.0.len()
        }
    }

    struct SlowHook(Arc<SlowReads>);

    impl crate::fs::FsHook for SlowHook {
        fn random_access(
            &self,
            _: &Path,
            file: Arc<dyn crate::fs::RandomAccessFile>,
        ) -> Arc<dyn crate::fs::RandomAccessFile> {
            Arc::new(SlowFile(file, self.0.clone()))
        }
    }

    #[test]
    fn multi_get_reads_missing_blocks_concurrently_and_agrees_with_get() {
        let reads = Arc::new(SlowReads::default());
        let mem: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
        let dir = Path::new("/db");
        mem.create_dir_all(dir).expect("mkdir");
        let meta = write_table(&*mem, dir, 5, 200);
        let fs: Arc<dyn FileSystem> = Arc::new(crate::fs::HookedFileSystem::new(
            mem,
            SlowHook(reads.clone()),
        ));
        let cache = Arc::new(BlockCache::new(1 << 20, 0));
        let tables = TableCache::new(fs, dir.to_path_buf(), 10, cache);
        let mut v = Version::empty(2);
        v.files[1].push(Arc::new(meta));
        // Keys far apart (in different 64-byte blocks), present and absent.
        let keys: Vec<Vec<u8>> = (0..12)
            .map(|i| format!("key{:04}{}", i * 17, if i % 4 == 3 { "x" } else { "" }).into_bytes())
            .collect();
        let lookups: Vec<LookupKey> = keys.iter().map(|k| LookupKey::new(k, 10)).collect();
        let refs: Vec<&LookupKey> = lookups.iter().collect();
        let mut covering = vec![0; refs.len()];
        let mut results: Vec<Option<Result<LookupResult>>> =
            (0..refs.len()).map(|_| None).collect();
        // Not cached, so every batch reads its blocks: the first batch's slow reads show that
        // reads wait on the device, and the second batch reads concurrently.
        let uncached = BlockReadOptions {
            fill_cache: false,
            ..BlockReadOptions::default()
        };
        v.multi_get(&tables, uncached, &refs, &mut covering, &mut results);
        results.iter_mut().for_each(|r| *r = None);
        reads.most.store(0, std::sync::atomic::Ordering::SeqCst);
        v.multi_get(&tables, uncached, &refs, &mut covering, &mut results);
        assert!(
            reads.most.load(std::sync::atomic::Ordering::SeqCst) >= 2,
            "blocks were read one at a time"
        );
        for (k, r) in keys.iter().zip(results) {
            let want = get(&v, &tables, k);
            let got = r
                .unwrap_or(Ok(LookupResult::NotPresent))
                .expect("multi_get");
            assert_eq!(got, want, "{}", String::from_utf8_lossy(k));
        }
    }

    #[test]
    fn get_keeps_the_open_table_in_the_file_metadata() {
        let (tables, v) = setup(10);
        let meta = v.files[1][0].clone();
        assert!(meta.open_table.get().is_none());
        let r = get(&v, &tables, b"key0123");
        assert_eq!(r, LookupResult::Found(b"value123".to_vec().into()));
        let kept = meta
            .open_table
            .get()
            .expect("table kept in the metadata")
            .clone();
        // The next get reads through the kept table and finds a cached, pinned value.
        match get(&v, &tables, b"key0123") {
            LookupResult::Found(val) => {
                assert_eq!(val, b"value123");
                assert!(val.is_pinned());
            }
            other => panic!("expected the value, got {other:?}"),
        }
        assert!(Arc::ptr_eq(
            &kept,
            meta.open_table.get().expect("still kept")
        ));
        assert_eq!(get(&v, &tables, b"key0123x"), LookupResult::NotPresent);
        assert_eq!(get(&v, &tables, b"key9999"), LookupResult::NotPresent);
        // A metadata clone (a trivial move) shares the open table.
        let moved = FileMetaData::clone(&meta);
        assert!(Arc::ptr_eq(&kept, moved.open_table.get().expect("shared")));
    }

    #[test]
    fn get_goes_through_the_table_cache_when_files_exceed_max_open_files() {
        // A version with more files than the table cache holds keeps no table in metadata.
        let (tables, mut v) = setup(1);
        let extra = Arc::new(FileMetaData {
            number: 6,
            smallest: InternalKey::new(b"zz0", 1, ValueKind::Put),
            largest: InternalKey::new(b"zz1", 1, ValueKind::Put),
            ..FileMetaData::clone(&v.files[1][0])
        });
        v.files[1].push(extra);
        assert_eq!(
            get(&v, &tables, b"key0007"),
            LookupResult::Found(b"value7".to_vec().into())
        );
        assert!(v.files[1][0].open_table.get().is_none());
    }

    #[test]
    fn live_data_estimate_counts_each_key_range_once_from_the_bottom() {
        let file = |number: u64, a: &str, b: &str, size: u64| FileMetaData {
            number,
            file_size: size,
            smallest: InternalKey::new(a.as_bytes(), number, ValueKind::Put),
            largest: InternalKey::new(b.as_bytes(), number, ValueKind::Put),
            smallest_seqno: number,
            largest_seqno: number,
            num_entries: 1,
            num_deletions: 0,
            num_range_deletions: 0,
            blob_files: Vec::new(),
            global_seqno: None,
            file_checksum: None,
            open_table: Default::default(),
            seeks: Default::default(),
        };
        let mut edit = crate::version::VersionEdit::default();
        edit.add_file(2, file(1, "a", "c", 100));
        edit.add_file(2, file(2, "d", "f", 100));
        edit.add_file(1, file(3, "b", "b", 10)); // overlaps a-c: overwritten data
        edit.add_file(1, file(4, "g", "h", 20)); // new keys: counted
        edit.add_file(0, file(5, "f", "g", 5)); // overlaps d-f and g-h
        edit.add_file(0, file(6, "x", "z", 7)); // new keys
        let v = crate::version::set::apply_for_tests(&Version::empty(3), &edit).expect("v");
        assert_eq!(v.total_bytes(), 242);
        assert_eq!(v.estimate_live_data_size(), 100 + 100 + 20 + 7);
    }
}
