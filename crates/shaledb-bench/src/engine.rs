//! The one trait every engine under test implements, and the option set shared by all of them.

use std::path::Path;

/// Errors from any engine, as text (peers report C strings).
pub type EngineResult<T> = Result<T, String>;

/// Options every engine gets, mapped to its own knobs (see docs/benchmarks.md).
#[derive(Debug, Clone)]
pub struct CommonOptions {
    /// Block cache bytes (WiredTiger: cache size).
    pub cache_size: u64,
    /// Memtable / write buffer bytes.
    pub write_buffer_size: u64,
    /// Memtables kept before stalling.
    pub max_write_buffer_number: u32,
    /// Bloom filter bits per key; 0 = none.
    pub bloom_bits: u32,
    /// Codec name: none, snappy, lz4, zstd, zlib.
    pub compression: String,
    /// The codec's level (db_bench's `--compression_level`); `None`: the codec's default.
    pub compression_level: Option<i32>,
    /// The first level `compression` applies to, the levels above it uncompressed (db_bench's
    /// `--min_level_to_compress`); `None`: every level.
    pub min_level_to_compress: Option<u32>,
    /// Writeback of table and blob files every this many bytes (`--bytes_per_sync`); `None`:
    /// the engine's default.
    pub bytes_per_sync: Option<u64>,
    /// Writeback of WALs every this many bytes (`--wal_bytes_per_sync`); `None`: the
    /// engine's default.
    pub wal_bytes_per_sync: Option<u64>,
    /// Largest zstd dictionary per table (db_bench's `--compression_max_dict_bytes`; 0: none).
    pub max_dict_bytes: u64,
    /// Bytes a zstd dictionary is trained on (`--compression_zstd_max_train_bytes`).
    pub zstd_max_train_bytes: u64,
    /// Data block size in bytes.
    pub block_size: u64,
    /// Max open files.
    pub open_files: i64,
    /// Target SST size.
    pub target_file_size_base: u64,
    /// Target SST size multiplier.
    pub target_file_size_multiplier: u64,
    /// L1 target size.
    pub max_bytes_for_level_base: u64,
    /// Level size multiplier.
    pub max_bytes_for_level_multiplier: f64,
    /// Levels.
    pub num_levels: u32,
    /// L0 compaction trigger.
    pub level0_file_num_compaction_trigger: u32,
    /// L0 slowdown trigger.
    pub level0_slowdown_writes_trigger: u32,
    /// L0 stop trigger.
    pub level0_stop_writes_trigger: u32,
    /// Background threads.
    pub max_background_jobs: u32,
    /// Threads one compaction out of L0 may split into (db_bench's `--subcompactions`).
    pub subcompactions: u32,
    /// CPU priority of the background (flush and compaction) threads: ShaleDB's
    /// `background_cpu_priority`, RocksDB's `Env::LowerThreadPoolCPUPriority` (not a db_bench
    /// flag). `None`: each engine's default.
    pub background_cpu_priority: Option<shaledb::CpuPriority>,
    /// Disable automatic compactions (bulk load).
    pub disable_auto_compactions: bool,
    /// Skip the WAL.
    pub disable_wal: bool,
    /// fsync every write.
    pub sync: bool,
    /// Verify block checksums on reads.
    pub verify_checksums: bool,
    /// Use O_DIRECT reads where the engine supports it.
    pub use_direct_reads: bool,
    /// Map table files and read them in place (`--mmap_read`).
    pub mmap_read: bool,
    /// Write WAL files through a shared memory map (`--mmap_write`, ShaleDB's and RocksDB's
    /// `allow_mmap_writes`); `None`: the engine's default.
    pub mmap_write: Option<bool>,
    /// Write flush and compaction outputs with O_DIRECT where the engine supports it.
    pub use_direct_io_for_flush_and_compaction: bool,
    /// Dynamic level sizes (RocksDB's `level_compaction_dynamic_level_bytes`).
    pub level_compaction_dynamic_level_bytes: bool,
    /// Keep index and filter blocks in the block cache (RocksDB's
    /// `cache_index_and_filter_blocks`, with high priority).
    pub cache_index_and_filter_blocks: bool,
    /// Put the data blocks flushes write into the block cache (RocksDB's
    /// `prepopulate_block_cache=kFlushOnly`).
    pub prepopulate_block_cache: bool,
    /// A two-level (partitioned) index per table: partitions of about `metadata_block_size`
    /// in the block cache under a pinned top-level index (RocksDB's `kTwoLevelIndexSearch`;
    /// db_bench's `--index_type=2`, `--partition_index`, `--partition_index_and_filters`).
    pub two_level_index: bool,
    /// Bloom filters split into partitions cut with the index partitions (RocksDB's
    /// `partition_filters`; db_bench's `--partition_index_and_filters`). Needs
    /// `two_level_index`.
    pub partition_filters: bool,
    /// Approximate bytes of an index or filter partition (db_bench's `--metadata_block_size`).
    pub metadata_block_size: u64,
    /// Entries between restart points of index blocks (db_bench's
    /// `--index_block_restart_interval`; ShaleDB's and RocksDB's default 1).
    pub index_block_restart_interval: u64,
    /// A hash index in every data block for gets (db_bench's `--data_block_index_type=1`,
    /// RocksDB's `kDataBlockBinaryAndHash`); `None`: the engine's default (off in ShaleDB
    /// and RocksDB).
    pub data_block_hash_index: Option<bool>,
    /// User keys per bucket of those hash indexes (db_bench's
    /// `--data_block_hash_table_util_ratio`, default 0.75).
    pub data_block_hash_table_util_ratio: f64,
    /// One number bounding memtables and cached blocks together (ShaleDB's
    /// `Options::memory_budget`; RocksDB: a block cache of 3/4 of it and `db_write_buffer_size`
    /// of 1/4, as its C API cannot charge memtables to the cache); 0: none.
    pub memory_budget: u64,
    /// Bytes of a compressed secondary tier under the block cache (ShaleDB's
    /// `Options::compressed_secondary_cache_size`; db_bench's `--use_compressed_secondary_cache`
    /// with `--compressed_secondary_cache_size`); 0: none. No peer maps it.
    pub compressed_secondary_cache_size: u64,
    /// db_bench's `--num_column_families`: keys are spread over this many families by a
    /// hash of the key (see [`family_of`]). Default 1.
    pub num_column_families: u32,
    /// Open an existing database instead of creating a fresh one.
    pub use_existing_db: bool,
    /// db_bench's `--merge_operator`: "" (none) or "uint64add".
    pub merge_operator: String,
    /// db_bench's `--prefix_size`: a fixed-prefix extractor of this many bytes (0: none).
    pub prefix_size: usize,
    /// db_bench's `--prefix_same_as_start`: iterators stay within the seek target's prefix.
    pub prefix_same_as_start: bool,
    /// db_bench's `--memtable_bloom_size_ratio`: memtable bloom size as a fraction of the
    /// write buffer (0: none); `None`: the engine's default (ShaleDB 0.02, RocksDB 0).
    pub memtable_bloom_size_ratio: Option<f64>,
    /// db_bench's `--memtable_whole_key_filtering`: whole keys in the memtable bloom; `None`:
    /// the engine's default (ShaleDB on, RocksDB off).
    pub memtable_whole_key_filtering: Option<bool>,
    /// `--memtable_hash_index` (ShaleDB only, not a db_bench flag): the memtable's hash index
    /// of newest versions; `None`: ShaleDB's default (on).
    pub memtable_hash_index: Option<bool>,
    /// db_bench's `--allow_concurrent_memtable_write`: a write group's writers insert into
    /// the memtable at once; `None`: the engine's default (on in ShaleDB and RocksDB).
    pub allow_concurrent_memtable_write: Option<bool>,
    /// `--wal_preallocate_size` (ShaleDB only, not a db_bench flag): bytes a WAL's size is
    /// set ahead of its records; `None`: ShaleDB's default (256 KiB).
    pub wal_preallocate_size: Option<u64>,
    /// Blob files (key-value separation; db_bench's integrated-BlobDB flags).
    pub blob: BlobOptions,
}

/// db_bench's integrated-BlobDB flags (RocksDB's `enable_blob_files` and friends), with
/// db_bench's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct BlobOptions {
    /// `--enable_blob_files`: values of at least `min_size` bytes go to blob files.
    pub enabled: bool,
    /// `--min_blob_size`: the smallest value stored in a blob file (0: every value).
    pub min_size: u64,
    /// `--blob_file_size`: a blob file is finished once it reaches this many bytes.
    pub file_size: u64,
    /// `--blob_compression_type`: codec of the values in blob files (none, snappy, lz4, zstd,
    /// zlib).
    pub compression: String,
    /// `--enable_blob_garbage_collection`: compactions relocate the live blobs of the oldest
    /// blob files.
    pub gc: bool,
    /// `--blob_garbage_collection_age_cutoff`: the fraction of blob files, oldest first, that
    /// garbage collection relocates (0 to 1).
    pub gc_age_cutoff: f64,
    /// `--blob_garbage_collection_force_threshold`: a garbage ratio of the oldest blob files
    /// that forces compactions to collect them (0 to 1; 1: never forced).
    pub gc_force_threshold: f64,
    /// `--use_blob_cache` (with `--use_shared_block_and_blob_cache`, db_bench's default):
    /// blob values read are cached in the block cache.
    pub cache: bool,
    /// `--separate_blobs_at_write` (ShaleDB only; RocksDB's integrated BlobDB separates at
    /// flush): large values go to blob files when written, the WAL holds references.
    pub separate_at_write: bool,
}

impl Default for BlobOptions {
    fn default() -> Self {
        BlobOptions {
            enabled: false,
            min_size: 0,
            file_size: 256 << 20,
            compression: "none".into(),
            gc: false,
            gc_age_cutoff: 0.25,
            gc_force_threshold: 1.0,
            cache: false,
            separate_at_write: false,
        }
    }
}

impl Default for CommonOptions {
    fn default() -> Self {
        CommonOptions {
            cache_size: 8 << 20,
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 2,
            bloom_bits: 10,
            compression: "snappy".into(),
            compression_level: None,
            min_level_to_compress: None,
            bytes_per_sync: None,
            wal_bytes_per_sync: None,
            max_dict_bytes: 0,
            zstd_max_train_bytes: 0,
            block_size: 4096,
            open_files: 5000,
            target_file_size_base: 64 << 20,
            target_file_size_multiplier: 1,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10.0,
            num_levels: 7,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_background_jobs: 2,
            subcompactions: 1,
            background_cpu_priority: None,
            disable_auto_compactions: false,
            disable_wal: false,
            sync: false,
            verify_checksums: true,
            use_direct_reads: false,
            mmap_read: false,
            mmap_write: None,
            use_direct_io_for_flush_and_compaction: false,
            level_compaction_dynamic_level_bytes: false,
            prepopulate_block_cache: false,
            cache_index_and_filter_blocks: false,
            two_level_index: false,
            partition_filters: false,
            metadata_block_size: 4096,
            index_block_restart_interval: 1,
            data_block_hash_index: None,
            data_block_hash_table_util_ratio: 0.75,
            memory_budget: 0,
            compressed_secondary_cache_size: 0,
            num_column_families: 1,
            use_existing_db: false,
            merge_operator: String::new(),
            prefix_size: 0,
            prefix_same_as_start: false,
            memtable_bloom_size_ratio: None,
            memtable_whole_key_filtering: None,
            memtable_hash_index: None,
            allow_concurrent_memtable_write: None,
            wal_preallocate_size: None,
            blob: BlobOptions::default(),
        }
    }
}

/// A write batch as plain operations, applied atomically by [`Engine::write_batch`].
#[derive(Debug, Clone)]
pub enum BatchOp {
    /// Store a value.
    Put(Vec<u8>, Vec<u8>),
    /// Delete a key.
    Delete(Vec<u8>),
}

/// An ordered cursor over an engine.
pub trait EngineIterator {
    /// Positions at the first key >= `key`.
    fn seek(&mut self, key: &[u8]);
    /// Positions at the first key.
    fn seek_to_first(&mut self);
    /// Positions at the last key.
    fn seek_to_last(&mut self);
    /// True if positioned on an entry.
    fn valid(&self) -> bool;
    /// Moves forward.
    fn next(&mut self);
    /// Moves backward.
    fn prev(&mut self);
    /// Current key.
    fn key(&self) -> &[u8];
    /// Current value.
    fn value(&self) -> &[u8];
    /// Error met during iteration, if any.
    fn status(&self) -> EngineResult<()>;
}

/// One storage engine under test. Shared across benchmark threads.
pub trait Engine: Send + Sync {
    /// The engine's name as used by `--engine`.
    fn name(&self) -> &'static str;
    /// Stores a value.
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()>;
    /// Reads a value.
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>>;
    /// Reads a value and gives only its length: what db_bench's read benchmarks keep. An
    /// engine overrides it where it can read without copying the value out (RocksDB's
    /// db_bench reads into a `PinnableSlice`); the default copies as `get` does.
    fn get_len(&self, key: &[u8]) -> EngineResult<Option<usize>> {
        Ok(self.get(key)?.map(|v| v.len()))
    }
    /// Deletes a key.
    fn delete(&self, key: &[u8]) -> EngineResult<()>;
    /// Applies operations atomically.
    fn write_batch(&self, ops: &[BatchOp]) -> EngineResult<()>;
    /// A new iterator over the current state.
    fn iter(&self) -> Box<dyn EngineIterator + '_>;
    /// Flushes memtables to disk and waits.
    fn flush(&self) -> EngineResult<()>;
    /// Compacts everything and waits.
    fn compact(&self) -> EngineResult<()>;
    /// Waits for background compactions to settle (best effort for peers without a call).
    fn wait_for_compactions(&self) -> EngineResult<()>;
    /// Engine statistics text, if any (`stats` benchmark).
    fn stats(&self) -> Option<String>;
    /// Bytes written by flush and compaction so far, if the engine reports it.
    fn compaction_bytes_written(&self) -> Option<u64>;
    /// A named engine property (`levelstats`, ...), if the engine has it. Added for the
    /// `levelstats` benchmark; engines without properties keep the default.
    /// Merges `value` into `key` with the engine's merge operator (`--merge_operator`).
    fn merge(&self, _key: &[u8], _value: &[u8]) -> EngineResult<()> {
        Err(format!("{}: merge is not supported", self.name()))
    }

    /// Deletes every key in `[begin, end)` (db_bench's range tombstones,
    /// `--writes_per_range_tombstone`).
    fn delete_range(&self, _begin: &[u8], _end: &[u8]) -> EngineResult<()> {
        Err(format!("{}: delete_range is not supported", self.name()))
    }

    /// Reads several keys at once; engines without a batched read loop over `get`.
    fn multi_get(&self, keys: &[&[u8]]) -> EngineResult<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Loads `entries` (sorted by key, each key once) as external table files, if the engine
    /// can (`--fill_by_ingestion`).
    fn ingest_sorted(&self, _entries: &[(Vec<u8>, Vec<u8>)]) -> EngineResult<()> {
        Err(format!("{} cannot ingest external files", self.name()))
    }
    fn property(&self, _name: &str) -> Option<String> {
        None
    }
}

/// Bytes used by the files under `path`.
pub fn size_on_disk(path: &Path) -> u64 {
    fn walk(p: &Path) -> u64 {
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            return 0;
        };
        if meta.is_dir() {
            std::fs::read_dir(p)
                .map(|rd| rd.flatten().map(|e| walk(&e.path())).sum())
                .unwrap_or(0)
        } else {
            meta.len()
        }
    }
    walk(path)
}

/// The family (of `n`) a key is written to and read from with `--num_column_families`: an
/// FNV-1a hash of the key, so every engine spreads the same keys the same way.
pub fn family_of(key: &[u8], n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h % n as u64) as usize
}

/// The names of the families beside the default one with `--num_column_families=n`.
pub fn family_names(n: u32) -> Vec<String> {
    (1..n.max(1)).map(|i| format!("cf{i}")).collect()
}
