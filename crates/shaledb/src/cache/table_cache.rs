//! The table cache: open table files (their index and filter in memory), bounded by
//! `max_open_files`, so a read does not reopen and re-parse a file every time; beside it, the
//! blob file cache: open blob file readers, bounded the same way.

use super::BlockCache;
use super::ShardedCache;
use crate::blob::BlobFileReader;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, RandomAccessFile};
use crate::sst::Table;
use crate::version::{filename, BlobFileAddition, FileMetaData};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Open tables, and open blob file readers, by file number (tables and blob files share one
/// numbering, so a number names one file of either kind).
pub(crate) struct TableCache {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    tables: ShardedCache<u64, Table>,
    /// The blob file cache: under `capacity` blob files open, opened on a read's miss and
    /// closed when evicted (CLOCK) or when the file is deleted ([`TableCache::evict`]); a
    /// reader a read holds stays valid (`Arc`) after eviction, and closes when the read drops
    /// it. A budget of its own, the same size as the tables' (`max_open_files`), rather than
    /// a share of theirs as RocksDB's blob file cache has: a table entry also holds its index
    /// and filter in memory and costs their reads to reopen, a blob reader holds a descriptor
    /// and a few dozen bytes, so a scan over many blob files must not evict tables. A database
    /// therefore keeps at most `max_open_files` tables and `max_open_files` blob files open.
    blobs: ShardedCache<u64, BlobFileReader>,
    block_cache: Arc<BlockCache>,
    /// Open table files with direct IO (`Options::use_direct_reads`).
    direct_reads: bool,
    /// Map table files into memory (`Options::allow_mmap_reads`).
    mmap_reads: bool,
    /// Index and filter blocks go into the block cache (`Options::cache_index_and_filter_blocks`).
    meta_in_cache: bool,
    /// Counts block cache hits and filter answers in the tables opened
    /// (`Options::statistics`).
    stats: Option<Arc<crate::statistics::Statistics>>,
    /// Block-cache ids of tables written with their blocks put into the block cache
    /// (`prepopulate_block_cache`), by file number: the file's first open reads under it.
    reserved_cache_ids: Mutex<HashMap<u64, u64>>,
}

impl TableCache {
    /// A cache keeping at most `capacity` tables open.
    pub(crate) fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        capacity: usize,
        block_cache: Arc<BlockCache>,
    ) -> Self {
        TableCache {
            fs,
            dir,
            tables: ShardedCache::new(capacity, 4),
            blobs: blob_file_cache(capacity),
            block_cache,
            direct_reads: false,
            mmap_reads: false,
            meta_in_cache: false,
            stats: None,
            reserved_cache_ids: Mutex::new(HashMap::new()),
        }
    }

    /// Opens table files with direct IO from now on.
    pub(crate) fn with_direct_reads(mut self, direct_reads: bool) -> Self {
        self.direct_reads = direct_reads;
        self
    }

    /// Maps table files opened from now on into memory.
    pub(crate) fn with_mmap_reads(mut self, mmap_reads: bool) -> Self {
        self.mmap_reads = mmap_reads;
        self
    }

    /// Keeps the index and filter of tables opened from now on in the block cache rather
    /// than in the tables (`Options::cache_index_and_filter_blocks`).
    pub(crate) fn with_index_and_filter_in_cache(mut self, yes: bool) -> Self {
        self.meta_in_cache = yes;
        self
    }

    /// The table cache of a database opened with `opts`, keeping at most `capacity` tables
    /// open: direct or mapped reads, index and filter in the cache, statistics, as `opts` say.
    pub(crate) fn for_database(
        dir: PathBuf,
        opts: &crate::options::Options,
        capacity: usize,
        block_cache: Arc<BlockCache>,
    ) -> Self {
        TableCache::new(opts.fs.clone(), dir, capacity, block_cache)
            .with_direct_reads(opts.use_direct_reads)
            .with_mmap_reads(opts.allow_mmap_reads)
            .with_index_and_filter_in_cache(opts.cache_index_and_filter_blocks)
            .with_statistics(opts.statistics.clone())
    }

    /// Tables opened from now on count statistics into `stats`.
    pub(crate) fn with_statistics(
        mut self,
        stats: Option<Arc<crate::statistics::Statistics>>,
    ) -> Self {
        self.stats = stats;
        self
    }

    /// The table of file `f`, opened if needed (an ingested file with its global sequence
    /// number).
    pub(crate) fn get(&self, f: &FileMetaData) -> Result<Arc<Table>> {
        let (number, file_size) = (f.number, f.file_size);
        if let Some(t) = self.tables.get(&number) {
            return Ok(t);
        }
        let path = filename::table_file(&self.dir, number);
        let file = self
            .open_for_reads(&path, FileKind::Table)
            .map_err(|e| Error::io(format!("opening table {}", path.display()), e))?;
        let cache_id = self
            .reserved_cache_ids
            .lock()
            .remove(&number)
            .unwrap_or_else(Table::new_cache_id);
        let mut table = Table::open_with_cache_id(
            file,
            path,
            f.footer_number(),
            file_size,
            Some(self.block_cache.clone()),
            cache_id,
            self.meta_in_cache,
        )?;
        table.set_statistics(self.stats.clone());
        let table = Arc::new(table.with_global_seqno(f.global_seqno));
        self.tables.insert(number, table.clone(), 1);
        Ok(table)
    }

    /// Forgets a table or blob file (its file is being deleted): its reader closes once no
    /// read holds it.
    pub(crate) fn evict(&self, number: u64) {
        self.tables.erase(&number);
        self.blobs.erase(&number);
        self.reserved_cache_ids.lock().remove(&number);
    }

    /// The reader of blob file `a`, from the blob file cache or opened (header and footer
    /// checked) and put there. The hit path is one shard's read lock and a hash lookup.
    pub(crate) fn blob_reader(&self, a: &BlobFileAddition) -> Result<Arc<BlobFileReader>> {
        if let Some(r) = self.blobs.get(&a.number) {
            return Ok(r);
        }
        let path = filename::blob_file(&self.dir, a.number);
        let file = self
            .open_for_reads(&path, FileKind::Blob)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let reader = Arc::new(BlobFileReader::open(file, path, a.number, a.file_size)?);
        // Two reads that missed together both open it: the second insert replaces the
        // first, whose reader closes when its read is done.
        self.blobs.insert(a.number, reader.clone(), 1);
        Ok(reader)
    }

    /// Opens a finished file of `kind` as the options ask: mapped (`allow_mmap_reads`; a
    /// listed file is never written again), with direct IO (`use_direct_reads`: tables only,
    /// a blob record read is not aligned for it), else through `pread`.
    fn open_for_reads(&self, path: &Path, kind: FileKind) -> io::Result<Arc<dyn RandomAccessFile>> {
        match (self.direct_reads, self.mmap_reads, kind) {
            (true, _, FileKind::Table) => self.fs.open_random_access_direct(path),
            (true, _, FileKind::Blob) | (false, false, _) => self.fs.open_random_access(path),
            (false, true, _) => self.fs.open_random_access_mapped(path),
        }
    }

    /// The database directory the files are opened in.
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The block cache and the cache id file `number` (being written) will be read under
    /// once opened: its writer puts blocks there (see `sst::TableBuilder::warm_cache`).
    pub(crate) fn reserve_cache_id(&self, number: u64) -> (Arc<BlockCache>, u64) {
        let id = Table::new_cache_id();
        self.reserved_cache_ids.lock().insert(number, id);
        (self.block_cache.clone(), id)
    }

    /// How many tables the cache keeps open (`max_open_files`).
    pub(crate) fn capacity(&self) -> usize {
        self.tables.capacity()
    }
}

/// The kinds of file a table cache opens.
#[derive(Clone, Copy)]
enum FileKind {
    Table,
    Blob,
}

/// The blob file cache of a table cache of `capacity` tables. It keeps one reader fewer than
/// `capacity`: a read that misses opens its file before the insert evicts another, so a
/// reader alone at a time stays within `capacity` open files (concurrent misses and readers
/// that reads in flight still hold may pass it briefly). 16 shards once each holds at least
/// 64 readers, one below; the capacity is rounded down to a multiple of the shard count, as
/// every shard holds a whole share.
fn blob_file_cache(capacity: usize) -> ShardedCache<u64, BlobFileReader> {
    const SHARD_BITS: u32 = 4;
    const SHARDS: usize = 1 << SHARD_BITS;
    let keep = capacity.saturating_sub(1).max(1);
    if keep >= SHARDS * 64 {
        ShardedCache::new(keep - keep % SHARDS, SHARD_BITS)
    } else {
        ShardedCache::new(keep, 0)
    }
}

/// A live file's open table, kept in its [`crate::version::FileMetaData`] after the first read
/// so later reads reach it with a borrow: no table-cache lock and no reference count touched.
/// Filled only while every live file fits in the table cache (`max_open_files`). Dropped with
/// the metadata, so the table (and its file descriptor) lives no longer than the file's entry
/// in some version.
#[derive(Default)]
pub struct OpenTable(OnceLock<Arc<Table>>);

impl OpenTable {
    /// The table, if one was kept.
    #[inline]
    pub fn get(&self) -> Option<&Arc<Table>> {
        self.0.get()
    }

    /// Keeps `table` (the first one kept wins; later calls do nothing).
    pub fn keep(&self, table: Arc<Table>) {
        let _ = self.0.set(table);
    }
}

/// A clone (a trivial move re-adds a file's metadata at another level) shares the open table:
/// it is the same file.
impl Clone for OpenTable {
    fn clone(&self) -> Self {
        OpenTable(self.0.clone())
    }
}

/// Whether a table is open says nothing about the file's identity: metadata compares equal
/// regardless.
impl PartialEq for OpenTable {
    fn eq(&self, _: &OpenTable) -> bool {
        true
    }
}

impl Eq for OpenTable {}

impl std::fmt::Debug for OpenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.get().is_some() {
            "open"
        } else {
            "closed"
        })
    }
}
