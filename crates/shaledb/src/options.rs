//! Options for opening a database, reading and writing.

use crate::compression::CompressionType;
use crate::fs::FileSystem;
use crate::snapshot::Snapshot;
use std::sync::Arc;

/// The block cache has at most 2^16 shards (`cache/clock.rs` caps it there).
const MAX_BLOCK_CACHE_SHARD_BITS: u32 = 16;

/// How open treats damage found while replaying write-ahead logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalRecoveryMode {
    /// The default. A torn tail of the newest WAL (a write that was never acknowledged) is
    /// dropped; so is a torn tail of an older WAL that was never synced (a power loss cut it
    /// before any synced write, close, or flush with several families synced it), with the
    /// later WALs, whose writes were not synced either: recovery keeps the prefix before the
    /// tear. Any other damage fails open with `Error::Corruption`.
    #[default]
    TolerateCorruptedTailRecords,
    /// Any damage, even a torn tail, fails open.
    AbsoluteConsistency,
    /// Replay stops at the first damaged record and everything after it, in that WAL and in
    /// newer ones, is discarded: the database opens at a consistent earlier point.
    PointInTimeRecovery,
    /// Damaged records are skipped and replay goes on. May lose writes from the middle of the
    /// log; for salvage only.
    SkipAnyCorruptedRecords,
}

/// The CPU priority of the database's background threads ([`Options::background_cpu_priority`]),
/// RocksDB's `CpuPriority` for `Env::LowerThreadPoolCPUPriority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpuPriority {
    /// The scheduler's idle class (`SCHED_IDLE`): background work runs only on CPU time no
    /// other thread wants.
    Idle,
    /// The lowest nice value (19): background work yields to the application's threads.
    Low,
    /// The default: background threads compete for CPU like any other thread.
    #[default]
    Normal,
}

/// Options for [`crate::Db::open`]. `Options::default()` serves well with no tuning.
///
/// Set fields with a struct literal, or chain the `with_*` builder methods (one per field, each
/// taking and returning `Options`); both stay source-compatible as fields are added:
///
/// ```
/// use shaledb::{CompressionType, Options};
/// let a = Options { write_buffer_size: 8 << 20, ..Default::default() };
/// let b = Options::default()
///     .with_write_buffer_size(8 << 20)
///     .with_compression(CompressionType::Zstd)
///     .with_fs(shaledb::fs::MemFileSystem::new());
/// assert_eq!(a.write_buffer_size, b.write_buffer_size);
/// ```
///
/// [`crate::Db::open`] refuses combinations that cannot work (see [`Options::validate`]).
#[derive(Clone)]
pub struct Options {
    /// Create the database if it does not exist. Default true.
    pub create_if_missing: bool,
    /// Fail if the database exists. Default false.
    pub error_if_exists: bool,
    /// [`Db::open_cf`](crate::Db::open_cf) creates the listed column families that do not
    /// exist yet (else it fails). Default false.
    pub create_missing_column_families: bool,
    /// Flush all column families together (RocksDB's `atomic_flush`): when one family's
    /// memtable is frozen every family's is, and their tables are installed by one atomic
    /// MANIFEST write, so after a crash either every family's flush is there or none is. This
    /// keeps families consistent when writes skip the WAL (`WriteOptions::disable_wal`).
    /// Default false.
    pub atomic_flush: bool,
    /// Extra checks, each costing some IO. Default true. With it:
    /// - every table written by a flush or compaction is read back (footer, index, filter and
    ///   properties, checksums verified; entry count compared) before the MANIFEST names it;
    /// - open fails with `Error::Corruption` naming the table if any table's size on disk
    ///   differs from the size the MANIFEST recorded (truncated, extended or replaced).
    ///
    /// Without it neither check runs (as in RocksDB): a damaged or mis-sized table is reported
    /// as `Corruption` by the first read that reaches it, never read as "not found"; bytes
    /// appended past a table's recorded end are never read and do no harm.
    pub paranoid_checks: bool,
    /// The filesystem all IO goes through. Default: the real one.
    pub fs: Arc<dyn FileSystem>,
    /// Read table files with direct IO (`O_DIRECT`), bypassing the operating system's page
    /// cache: the block cache is then the only cache, as when data is much larger than
    /// memory. Open fails with `InvalidArgument` if the filesystem refuses direct IO. The
    /// WAL and MANIFEST are read as usual. Default false.
    pub use_direct_reads: bool,
    /// Write the tables of flushes and compactions with direct IO (`O_DIRECT`), so they do not
    /// push the data users read out of the page cache. Open fails with `InvalidArgument` if
    /// the filesystem refuses direct IO. Compaction inputs are read directly only with
    /// [`use_direct_reads`](Self::use_direct_reads). Default false.
    pub use_direct_io_for_flush_and_compaction: bool,
    /// Map table files into memory and read their blocks in place, as LevelDB does and as
    /// RocksDB's option of the same name does: a block stored uncompressed is then served
    /// from the OS page cache with no system call, no copy and no block-cache memory (the
    /// block cache is neither consulted nor filled for such tables; compressed blocks are
    /// still decompressed into it). Pays when the tables fit in memory and reads are many.
    /// Off by default, as in RocksDB, because of what it trades: a page the device cannot
    /// read (a media error), or a table file truncated by someone else, stops the process
    /// with `SIGBUS` instead of returning `Error::Io`; and the mapped pages are the page
    /// cache's, outside the block cache's (and `memory_budget`'s) bound. Finished blob files
    /// are mapped too (a value is copied out of the map, with no system call);
    /// the WAL, the MANIFEST and blob files still being written are read as usual. Cannot be
    /// combined with [`use_direct_reads`](Self::use_direct_reads). A filesystem that cannot
    /// map files (the in-memory one) reads as usual. Default false.
    pub allow_mmap_reads: bool,
    /// Write each WAL's preallocated space (`wal_preallocate_size`) through a shared memory
    /// map of the file (RocksDB's option): a write group's append is then a copy into the
    /// OS page cache with no system call (fills 1.4x-2.7x as fast on this project's
    /// machine, with values of 100 bytes to 1 KB: bench/results/2026-12-07-mmap-wal). The durability contract is
    /// unchanged: an acknowledged write survives a process crash (its bytes are in the page
    /// cache when the write returns, as after a `write(2)`), and a synced write survives a
    /// power loss (`fdatasync` writes back mapped pages too). Each step of space is written
    /// with zeros before it is mapped, so a full device is an `Error::Io` from that write,
    /// not a fault; with `wal_preallocate_size` 0 the WAL is written with `write(2)` as
    /// without the option. What it trades: a page of the mapped space that was written back
    /// and evicted is read back at the next store into it, and if the device cannot read it
    /// the process gets `SIGBUS` instead of an `Error::Io` (a failing device); on a
    /// copy-on-write file system (btrfs) a store into a page written back may need new space,
    /// and a full device is then a `SIGBUS` too. Tables, blob files and the MANIFEST are
    /// written with `write(2)` either way, and a `FileSystem` other than `PosixFileSystem`
    /// sees ordinary appends. Default true (RocksDB's default is false).
    pub allow_mmap_writes: bool,
    /// Bytes a compaction reads from an input table at a time (RocksDB's option, also 2 MiB
    /// by default there); 0 reads one block at a time. Larger reads matter most with direct
    /// IO, where no page cache reads ahead. Default 2 MiB.
    pub compaction_readahead_size: usize,

    /// Bytes a memtable holds before it is frozen and flushed. Default 64 MiB.
    pub write_buffer_size: usize,
    /// Memtables (active plus frozen) kept in memory before writes stop. Default 2.
    pub max_write_buffer_number: usize,

    /// Size of each memtable's bloom filter as a fraction of `write_buffer_size` (or of a
    /// [`write_buffer_manager`](Options::write_buffer_manager)'s budget if that is smaller;
    /// RocksDB's option of the same name), at most 0.25. The filter holds every key's prefix when the
    /// family has a [`prefix_extractor`](Options::prefix_extractor) (prefix seeks then skip
    /// memtables without the prefix) and every whole key with
    /// [`memtable_whole_key_filtering`](Options::memtable_whole_key_filtering) (gets of absent
    /// keys then skip the memtable's skiplist). Its bytes count toward the memtable's size.
    /// 0 means no memtable bloom. Default 0.02 (RocksDB's default is 0): with whole keys in
    /// it, a get of a key the memtable lacks tests one cache line instead of walking a
    /// skiplist of tens of thousands of entries, which is most gets while writes go on
    /// (readwhilewriting 1.5x-1.7x), for 2% of the write buffer and a hash per insert.
    pub memtable_prefix_bloom_size_ratio: f64,
    /// Adds whole keys to the memtable bloom (which needs
    /// `memtable_prefix_bloom_size_ratio` above 0). Default true (RocksDB's default is false).
    pub memtable_whole_key_filtering: bool,
    /// Gives each memtable's skiplist a hash index from user key to its newest entry, so a
    /// get of a key the memtable holds goes to it directly instead of walking the skiplist
    /// (RocksDB has no such option: its skiplist memtable always walks). It costs one 8-byte
    /// bucket per 128 bytes of write buffer (of a
    /// [`write_buffer_manager`](Options::write_buffer_manager)'s budget if that is smaller)
    /// and 8 bytes per entry. That memory comes on top of `write_buffer_size` (a memtable is
    /// flushed when its entries fill the write buffer, as without the index), and is counted
    /// by the write buffer manager and `cur-size-all-mem-tables`. Default true: gets of
    /// recently written keys (YCSB right after its load) are 1.5x-3x faster.
    pub memtable_hash_index: bool,
    /// Lets the writers of one write group insert their own batches into the memtables at
    /// the same time, after the group's leader appended the group to the WAL (RocksDB's
    /// option of the same name, also on by default there). Off, the leader inserts the whole
    /// group while the others wait. It pays with several writing threads (YCSB's load with
    /// 2 and 8 threads); a lone writer's groups are inserted by it either way. Default true.
    pub allow_concurrent_memtable_write: bool,

    /// Approximate uncompressed size of a data block. Default 4096.
    pub block_size: usize,
    /// Keys between restart points in a block. Default 16.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables filters. Default 10 (about 1% false positives).
    pub bloom_bits_per_key: usize,
    /// Codec per level; levels past the end use the last entry; empty means none.
    /// Default: LZ4 on L0 to L4 (cheap; leaving L0 and L1 uncompressed saved no measurable
    /// time and doubled what flushes write), Zstd from L5 on, where most of the data comes to
    /// rest.
    pub compression_per_level: Vec<CompressionType>,
    /// The codec for tables compaction writes to the bottommost level (no data below it),
    /// which holds most of the data: e.g. zstd there and a fast codec above (RocksDB's
    /// `bottommost_compression`). `None`: `compression_per_level` decides. Default `None`.
    pub bottommost_compression: Option<CompressionType>,
    /// The codecs' level (RocksDB's `compression_opts.level`): zstd 1 to 22 (higher packs
    /// tighter and compresses slower; negative levels are faster still), zlib 0 to 9; snappy
    /// and lz4 have none. Decompression speed barely depends on it. `None`: each codec's
    /// default (zstd 3, zlib 6). Default `None`.
    pub compression_level: Option<i32>,
    /// Largest zstd dictionary per table file (RocksDB's `compression_opts.max_dict_bytes`): a
    /// table written with zstd first collects its first blocks, builds a dictionary from them
    /// and compresses every block with it, so small blocks of similar records share what they
    /// have in common. The dictionary is stored in the file (docs/format/sstable.md). Other
    /// codecs ignore it. 0 (the default): no dictionary. 16 KiB is a common choice.
    pub max_dict_bytes: usize,
    /// Bytes of blocks a dictionary is trained on (RocksDB's `zstd_max_train_bytes`; about 100
    /// times `max_dict_bytes` is zstd's advice). 0 (the default): no training, the dictionary
    /// is the first `max_dict_bytes` of the table's blocks as they are.
    pub zstd_max_train_bytes: usize,
    /// Puts the data blocks a flush writes into the block cache as it writes them (RocksDB's
    /// `prepopulate_block_cache`), so data read soon after it is written is served without a
    /// file read or decompression. Pays when recent writes are read soon and the cache holds
    /// several memtables' worth of data; otherwise flushed blocks push out what readers use.
    /// Default [`PrepopulateBlockCache::Disable`], as in RocksDB.
    pub prepopulate_block_cache: PrepopulateBlockCache,
    /// How each table's index (one entry per data block) is laid out (RocksDB's
    /// `index_type`). [`IndexType::TwoLevel`] splits it into partitions of about
    /// [`metadata_block_size`](Options::metadata_block_size) that go through the block cache,
    /// with only a small top-level index held per open table: index memory then stays within
    /// the cache however large the data grows. Default [`IndexType::BinarySearch`], as in
    /// RocksDB.
    pub index_type: IndexType,
    /// Splits each table's bloom filter into partitions cut with the index partitions
    /// (RocksDB's `partition_filters`), each loaded through the block cache when a lookup
    /// needs it. Requires [`IndexType::TwoLevel`]. Default false.
    pub partition_filters: bool,
    /// Approximate size of an index or filter partition in bytes (RocksDB's
    /// `metadata_block_size`). Default 4096.
    pub metadata_block_size: usize,
    /// Entries between restart points in index blocks, index partitions and their top-level
    /// blocks (RocksDB's `index_block_restart_interval`). Entries between restart points
    /// share key prefixes and store only their block's size (its offset follows from the
    /// entry before), so a larger interval makes a smaller index, at the cost of scanning up
    /// to that many entries per index seek. Default 1, as in RocksDB.
    pub index_block_restart_interval: usize,
    /// How a get finds its entry in a data block (RocksDB's `data_block_index_type`).
    /// [`DataBlockIndexType::BinaryAndHash`] adds a hash index to each data block (about one
    /// byte per user key at the default ratio): a get then scans the one restart interval
    /// its user key hashes to instead of binary-searching the block's restart points, and
    /// learns from an empty bucket that the key is not in the block. Iterators still
    /// binary-search. Tables written with it are format 5 (docs/format/sstable.md), which
    /// ShaleDB releases before 2026-12-07 cannot open. It pays where blocks hold many entries
    /// per restart interval and the search's probes miss the CPU cache; on this project's
    /// benchmark shapes (4 KiB blocks cached in memory) it measured no faster
    /// (bench/results/2026-12-07-data-block-hash-index). Default
    /// [`DataBlockIndexType::BinarySearch`], as in RocksDB.
    pub data_block_index_type: DataBlockIndexType,
    /// User keys per bucket of a data block's hash index (RocksDB's
    /// `data_block_hash_table_util_ratio`): lower means more buckets, fewer shared ones, and
    /// a larger index. Between 0 (exclusive) and 1. Default 0.75, as in RocksDB.
    pub data_block_hash_table_util_ratio: f64,
    /// Keeps every table's index and bloom filter in the block cache, where they compete with
    /// data blocks and are read again when evicted, instead of in memory for as long as the
    /// table is open (RocksDB's `cache_index_and_filter_blocks`, with its high-priority
    /// insertion: they survive one CLOCK sweep more than a data block). Bounds the memory of
    /// a database whose indexes and filters outgrow the cache, at the cost of a cache lookup
    /// per table read and re-reads under pressure. Database-wide (RocksDB sets it per family).
    /// Default false.
    pub cache_index_and_filter_blocks: bool,
    /// Capacity of the shared block cache in bytes. Default 32 MiB.
    pub block_cache_size: usize,
    /// The block cache this database makes (private, or from `memory_budget`) is split into
    /// 2^bits shards, each locked on its own: more shards, fewer readers waiting on one
    /// another's inserts. Fewer are used where a shard would hold less than 512 KiB (RocksDB's
    /// rule: a 32 MiB cache gets all 64 shards, a 4 MiB one 8). Default 6 (RocksDB's).
    pub block_cache_shard_bits: u32,
    /// Bytes of a compressed secondary tier for the block cache this database makes
    /// (private, or from `memory_budget`): data blocks kept as stored in the file, so a
    /// block the cache evicted is decompressed from memory instead of read again (see
    /// [`Cache::with_compressed_secondary`](crate::Cache::with_compressed_secondary), which
    /// gives a shared cache one). These bytes come on top of `block_cache_size` and
    /// `memory_budget`. Cannot be combined with `block_cache` (give that cache its tier).
    /// Default 0: no tier.
    pub compressed_secondary_cache_size: usize,
    /// A block cache shared with other databases, used instead of a private one of
    /// `block_cache_size` bytes (RocksDB's `BlockBasedTableOptions::block_cache`). Default
    /// `None`.
    pub block_cache: Option<crate::Cache>,
    /// Bounds the memory of the memtables of every family (and of every database sharing
    /// it), flushing early and optionally stalling writes (RocksDB's `write_buffer_manager`;
    /// see [`crate::WriteBufferManager`]). Default `None`: only `write_buffer_size` and
    /// `max_write_buffer_number` per family bound them.
    pub write_buffer_manager: Option<crate::WriteBufferManager>,
    /// One number bounding memtables, data blocks, index and filter blocks together: the
    /// database gets a [`crate::Cache`] of this many bytes and a
    /// [`crate::WriteBufferManager`] of a quarter of it charged to that cache, with stalls
    /// (writes wait rather than exceed it). Cannot be combined with `block_cache` or
    /// `write_buffer_manager` (give both of those to share a budget among databases). It
    /// also caps `compaction_readahead_size` at 1/1024 of the budget, since readahead
    /// buffers are not charged to the cache. Default `None`.
    pub memory_budget: Option<usize>,
    /// Open table files kept in the table cache, and (a budget of its own, the same size)
    /// open blob files kept in the blob file cache: a database with blob files holds at most
    /// this many tables and this many blob files open (RocksDB's blob file cache shares the
    /// table cache's budget instead). Default 5000.
    pub max_open_files: usize,

    /// Number of levels. Default 7.
    pub num_levels: usize,
    /// L0 files that trigger a compaction. Default 4.
    pub level0_file_num_compaction_trigger: usize,
    /// L0 files at which writes are slowed. Default 20.
    pub level0_slowdown_writes_trigger: usize,
    /// L0 files at which writes stop until compaction catches up. Default 36.
    pub level0_stop_writes_trigger: usize,
    /// Target size of L1. Default 256 MiB.
    pub max_bytes_for_level_base: u64,
    /// Each level's target is this times the one above. Default 10.
    pub max_bytes_for_level_multiplier: f64,
    /// Size the levels from the data down (RocksDB's `level_compaction_dynamic_level_bytes`):
    /// the last level holds most of the data, each level above it targets a multiplier-th of
    /// the one below, and L0 compacts straight into the highest level the data needs (the
    /// levels above it stay empty). Space amplification then stays near 1.1 at every data
    /// size, where static targets leave it large until the last level fills. Default false.
    ///
    /// With it, `compression_per_level[i]` for i > 0 applies to the i-th level from the base
    /// level down, as in RocksDB. A database written without it keeps the upper levels it has
    /// (the base level is never above the first level holding data).
    pub level_compaction_dynamic_level_bytes: bool,
    /// Size at which compaction output files are cut, at L1. Default 64 MiB.
    pub target_file_size_base: u64,
    /// Each level's file size is this times the one above. Default 1.
    pub target_file_size_multiplier: u64,
    /// Pending compaction bytes at which writes are slowed. Default 64 GiB.
    pub soft_pending_compaction_bytes_limit: u64,
    /// Pending compaction bytes at which writes stop. Default 256 GiB.
    pub hard_pending_compaction_bytes_limit: u64,
    /// Write rate, in bytes per second, while writes are slowed (L0 at
    /// `level0_slowdown_writes_trigger` files, or pending compaction bytes past
    /// `soft_pending_compaction_bytes_limit`). A token bucket: each write group costs its size,
    /// credit accrues at this rate (at most one second's worth), and the group's leader sleeps
    /// off any debt. 0 means the default. Default 16 MiB/s.
    pub delayed_write_rate: u64,
    /// How many times in a row a flush or compaction that failed with an IO error (a full
    /// disk, a transient EIO) is retried by itself, `bgerror_resume_retry_interval` apart,
    /// before the failure is final. While a failed flush waits for its retry, writes fail with
    /// [`Error::Suspended`](crate::Error::Suspended) and [`Db::resume`](crate::Db::resume)
    /// retries at once; a failed compaction does not stop writes. A final failure, and any
    /// failed WAL or MANIFEST write or sync, poisons the database until it is reopened.
    /// 0 makes every such failure final at once. Default `u32::MAX` (RocksDB's
    /// `max_bgerror_resume_count`).
    pub max_bgerror_resume_count: u32,
    /// The pause before each automatic retry of a failed flush or compaction. Default 1 s.
    pub bgerror_resume_retry_interval: std::time::Duration,
    /// Background threads for flushes and compactions (one more, for urgent compactions,
    /// when `background_cpu_priority` is lowered). Default: the number of cores.
    pub max_background_jobs: usize,
    /// Threads one compaction out of L0 (or one manual compaction step) may split into, each
    /// writing a range of keys of about equal input bytes, cut at the inputs' data-block
    /// bounds (RocksDB's `max_subcompactions`). Leveled compaction runs one L0 compaction at a
    /// time, so writes that outpace it wait on one thread; these threads come on top of
    /// `max_background_jobs`. Default 1: no split, as RocksDB's.
    pub max_subcompactions: u32,
    /// CPU priority of the compaction threads (and their subcompaction threads) and of the
    /// thread that deletes obsolete files (RocksDB's `Env::LowerThreadPoolCPUPriority`).
    /// Lower than `Normal`, compactions take CPU time from the application's threads only
    /// when those leave some: on a machine whose cores readers keep busy, reads get faster
    /// while compaction debt grows. Flushes keep normal priority on a thread of their own
    /// (writers wait for the memory they free), and so do compactions once the debt is
    /// urgent (L0 files at twice `level0_file_num_compaction_trigger` or a quarter of the way
    /// to `level0_slowdown_writes_trigger`, pending bytes at a quarter of
    /// `soft_pending_compaction_bytes_limit`, or writes slowed or stopped), on one more
    /// thread beside the `max_background_jobs - 1` lowered ones; with `max_background_jobs`
    /// 1 the one thread does everything at normal priority. Linux only: elsewhere the threads
    /// keep their priority and the info log says so. Default `Normal`.
    pub background_cpu_priority: CpuPriority,
    /// Do not compact automatically (bulk loading); `compact_range` still works. Default false.
    pub disable_auto_compactions: bool,
    /// Read-triggered compaction (LevelDB's seek compaction): a table without a filter that
    /// gets keep searching in vain before finding their keys deeper (once per 16 KiB of the
    /// table, at least 100 times) is compacted into the next level when no level is over its
    /// size target, so keys read often stop costing a block read per level. Tables with a
    /// filter are never charged. Default true; off with `disable_auto_compactions`.
    pub seek_compaction: bool,
    /// Combines merge operands (`Db::merge`) into values. Default none: merges are refused.
    pub merge_operator: Option<Arc<dyn crate::MergeOperator>>,
    /// Drops or rewrites values during compaction (see [`crate::CompactionFilter`]). Default
    /// none.
    pub compaction_filter: Option<Arc<dyn crate::CompactionFilter>>,
    /// How keys group into prefixes, for `ReadOptions::prefix_same_as_start` (see
    /// [`crate::PrefixExtractor`]). Default none.
    pub prefix_extractor: Option<Arc<dyn crate::PrefixExtractor>>,
    /// Entries older than this are never returned (by any read, at any snapshot) and are
    /// dropped by compaction (RocksDB's TTL, except that RocksDB may return an expired value
    /// until compaction removes it). A family with a TTL stores each value's write time (8
    /// bytes, from [`Options::clock`]) with it, so the TTL holds across reopens; whether a
    /// family stores write times is fixed when it is created. With
    /// [`enable_blob_files`](Options::enable_blob_files), a value in a blob file keeps its
    /// write time in the table beside its reference, so reads and compactions decide expiry
    /// without reading the blob, and an expired blob becomes garbage for blob garbage
    /// collection (RocksDB's `DBWithTTL` appends the time to the value, so it lands in the
    /// blob). Not combinable with a merge operator yet. Default none.
    pub ttl: Option<std::time::Duration>,
    /// Store values of at least [`min_blob_size`](Options::min_blob_size) bytes in blob files,
    /// apart from the tables, when flushes and compactions write them (RocksDB's integrated
    /// BlobDB): compactions then move a small reference instead of rewriting the value.
    /// Values already written stay where they are until a compaction rewrites them. Default
    /// false.
    pub enable_blob_files: bool,
    /// The smallest value that goes to a blob file (with `enable_blob_files`). Default 0
    /// (RocksDB's): every value.
    pub min_blob_size: u64,
    /// A blob file being written is finished once it passes this many bytes. Default 256 MiB.
    pub blob_file_size: u64,
    /// The codec of values in blob files. Default none.
    pub blob_compression: CompressionType,
    /// Cache blob values read by gets and iterators in the block cache, sharing its byte
    /// budget (RocksDB's `blob_cache` set to the block cache). Worth it when reads of large
    /// values repeat; otherwise large values would evict data blocks. Default false (as
    /// RocksDB, which has no blob cache unless one is set).
    pub blob_cache: bool,
    /// With [`enable_blob_files`](Options::enable_blob_files): compress the tables' data
    /// blocks that hold blob references and no value with the family's codec too. Default
    /// false: a get of a blob value reads its reference's block on every block-cache miss, and
    /// decompressing it costs more than it saves, since such blocks are a few percent of the
    /// family's bytes (1 KB values, 1 GiB of them, 8 MB cache: random reads 1.3x faster
    /// without, for tables 2.5x larger: 27 MB beside the values' 1 GiB). Blocks holding
    /// values are compressed either way.
    pub compress_blob_reference_blocks: bool,
    /// Compactions move the live blobs of the oldest blob files (the first
    /// [`blob_garbage_collection_age_cutoff`](Options::blob_garbage_collection_age_cutoff)
    /// of them by file number) into new blob files, so old files empty out and are deleted
    /// (RocksDB's blob garbage collection). Default false.
    pub enable_blob_garbage_collection: bool,
    /// The fraction (0 to 1) of blob files, oldest first, whose blobs compactions relocate.
    /// Default 0.25.
    pub blob_garbage_collection_age_cutoff: f64,
    /// When the oldest blob files under the age cutoff hold at least this fraction (0 to 1)
    /// of garbage, the tables referencing the oldest one are compacted even if no level
    /// needs it. Default 1.0 (only once everything is garbage).
    pub blob_garbage_collection_force_threshold: f64,
    /// With [`enable_blob_files`](Options::enable_blob_files): a put's value of at least
    /// `min_blob_size` bytes goes to a blob file when it is written, not when it is flushed,
    /// and the WAL and the memtable hold only its reference (WiscKey, RocksDB's legacy
    /// stackable BlobDB). A large value is then written once instead of three times (WAL,
    /// memtable, then the flush's blob file), and flushes write only small tables. A
    /// memtable's values go into files of at most the write buffer's size, as a flush would
    /// write them. The price: a memtable is also full once its blob files hold
    /// [`blob_file_size`](Options::blob_file_size) bytes, and recovery after a crash reads the
    /// blobs the unflushed WALs refer to (each checked; one that did not survive a power loss
    /// ends the replay there, as a torn WAL tail does). A synced write syncs its blob file
    /// before the WAL. With a [`ttl`](Options::ttl), the write time stays beside the
    /// reference, as at flush. Default false (RocksDB's integrated BlobDB separates values at
    /// flush).
    pub separate_blobs_at_write: bool,

    /// The wall clock write times and expiry are read from (see [`crate::Clock`]). Default
    /// [`crate::SystemClock`].
    pub clock: Arc<dyn crate::Clock>,
    /// Keys longer than this are rejected with `InvalidArgument`. Default 8 MiB.
    pub max_key_size: usize,
    /// Values longer than this are rejected with `InvalidArgument`. Default 1 GiB.
    pub max_value_size: usize,
    /// How WAL damage is treated at open.
    pub wal_recovery_mode: WalRecoveryMode,
    /// A MANIFEST larger than this is rewritten from a snapshot at the next change. Default
    /// 64 MiB.
    pub max_manifest_file_size: u64,
    /// Ask the OS to start writing a WAL back to disk every this many bytes (RocksDB's
    /// `wal_bytes_per_sync`; 0: never). Only a hint: it promises nothing about durability
    /// (`WriteOptions::sync` does). It shortens the sync of a full WAL, which the flush after
    /// a memtable switch waits for when there are several column families (and the next
    /// synced write or close), so flushes keep pace with a fill. Default 8 MiB: 1 MiB cost an
    /// uncompressed fill 5-10% in calls, 0 (RocksDB's default) a compressed fill 12% in
    /// flushes waiting for 64 MiB of WAL (bench/results/2026-11-27-deferred-wal-sync, when
    /// every flush synced the WAL).
    pub wal_bytes_per_sync: u64,
    /// Set each WAL's size this many bytes (rounded up to 32 KiB) ahead of its appends, the
    /// space reading as zeros until written (0: never; RocksDB preallocates its WAL too,
    /// `allow_fallocate`, but keeps the size). A write that syncs then does not change the
    /// file's size, so its `fdatasync` has no size to commit: one synced put of 800 bytes
    /// takes about a quarter less time on ext4. The newest WAL may therefore end in up to
    /// this many zeros (also after a crash, and in checkpoints and backups, which copy WALs
    /// whole); recovery reads zeros to the end of a WAL as its end. A WAL is cut back to its
    /// records when the next one takes over. Default 256 KiB.
    pub wal_preallocate_size: u64,
    /// Ask the OS to start writing a table or blob file back to disk every this many bytes as
    /// a flush or compaction writes it (RocksDB's `bytes_per_sync`; 0: never). Only a hint:
    /// every file is still synced before the MANIFEST names it, but that sync then waits for
    /// the last stretch only, not the whole file (a flush of 4 MiB of large values spent most
    /// of its time in the blob file's sync). Default 1 MiB (RocksDB's default is 0; its tuning
    /// guide recommends 1 MiB).
    pub bytes_per_sync: u64,
    /// With more than one column family: once the live WALs hold more than this many bytes,
    /// the families whose active memtable still has data in the oldest WAL are flushed, so a
    /// rarely written family does not keep old WALs alive (RocksDB's option). 0: four times
    /// the sum over families of `write_buffer_size * max_write_buffer_number`. Default 0.
    pub max_total_wal_size: u64,

    // Observability (docs/operations.md, "Observability").
    /// What goes to the `LOG` file in the database directory (open, flushes, compactions,
    /// stalls, errors, statistics dumps). [`InfoLogLevel::Off`](crate::InfoLogLevel::Off):
    /// no `LOG` file. Default [`InfoLogLevel::Info`](crate::InfoLogLevel::Info).
    pub info_log_level: crate::InfoLogLevel,
    /// The `LOG` file is moved aside to `LOG.old.<micros>` and a new one started once it
    /// would pass this many bytes; 0: only at open (RocksDB's default). At least 1 KiB.
    /// Default 0.
    pub max_log_file_size: u64,
    /// Old `LOG.old.*` files kept (the oldest are deleted). Default 1000, as RocksDB.
    pub keep_log_file_num: usize,
    /// Every this many seconds, `shaledb.stats` (and the statistics, when kept) is written
    /// to the `LOG`; 0: never. Default 600, as RocksDB.
    pub stats_dump_period: u64,
    /// Counters and latency histograms (see [`crate::Statistics`]), read with
    /// [`Db::statistics`](crate::Db::statistics). An `Arc` so that several databases may
    /// share one and the caller may keep a handle. Default `None`: nothing is counted (no
    /// cost on any path).
    pub statistics: Option<Arc<crate::Statistics>>,
    /// Callbacks on flushes, compactions, stalls, background errors and table file
    /// deletions (see [`crate::EventListener`]). Default none.
    pub listeners: Vec<Arc<dyn crate::EventListener>>,
    /// Bytes per second that flushes and compactions together may write to table and blob
    /// files (RocksDB's `rate_limiter`), so background writes leave the device to the
    /// foreground; 0: no limit. Too low a rate makes writes stall behind flushes. Default 0.
    pub rate_limit_bytes_per_sec: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            create_missing_column_families: false,
            atomic_flush: false,
            paranoid_checks: true,
            fs: crate::fs::default_fs(),
            use_direct_reads: false,
            use_direct_io_for_flush_and_compaction: false,
            allow_mmap_reads: false,
            allow_mmap_writes: true,
            compaction_readahead_size: crate::sst::COMPACTION_READAHEAD,
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 2,
            memtable_prefix_bloom_size_ratio: 0.02,
            memtable_whole_key_filtering: true,
            memtable_hash_index: true,
            allow_concurrent_memtable_write: true,
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            compression_per_level: vec![
                CompressionType::Lz4,
                CompressionType::Lz4,
                CompressionType::Lz4,
                CompressionType::Lz4,
                CompressionType::Lz4,
                CompressionType::Zstd,
            ],
            bottommost_compression: None,
            compression_level: None,
            max_dict_bytes: 0,
            zstd_max_train_bytes: 0,
            prepopulate_block_cache: PrepopulateBlockCache::Disable,
            index_type: IndexType::BinarySearch,
            partition_filters: false,
            metadata_block_size: 4096,
            index_block_restart_interval: 1,
            data_block_index_type: DataBlockIndexType::BinarySearch,
            data_block_hash_table_util_ratio: 0.75,
            cache_index_and_filter_blocks: false,
            block_cache_size: 32 << 20,
            block_cache_shard_bits: 6,
            compressed_secondary_cache_size: 0,
            block_cache: None,
            write_buffer_manager: None,
            memory_budget: None,
            max_open_files: 5000,
            num_levels: 7,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10.0,
            level_compaction_dynamic_level_bytes: false,
            target_file_size_base: 64 << 20,
            target_file_size_multiplier: 1,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
            delayed_write_rate: 16 << 20,
            max_bgerror_resume_count: u32::MAX,
            bgerror_resume_retry_interval: std::time::Duration::from_secs(1),
            max_background_jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            max_subcompactions: 1,
            background_cpu_priority: CpuPriority::Normal,
            disable_auto_compactions: false,
            seek_compaction: true,
            merge_operator: None,
            compaction_filter: None,
            prefix_extractor: None,
            ttl: None,
            enable_blob_files: false,
            min_blob_size: 0,
            blob_file_size: 256 << 20,
            blob_compression: CompressionType::None,
            blob_cache: false,
            compress_blob_reference_blocks: false,
            enable_blob_garbage_collection: false,
            blob_garbage_collection_age_cutoff: 0.25,
            blob_garbage_collection_force_threshold: 1.0,
            separate_blobs_at_write: false,
            clock: Arc::new(crate::SystemClock),
            max_key_size: 8 << 20,
            max_value_size: 1 << 30,
            wal_recovery_mode: WalRecoveryMode::default(),
            max_manifest_file_size: 64 << 20,
            wal_bytes_per_sync: 8 << 20,
            wal_preallocate_size: 256 << 10,
            bytes_per_sync: 1 << 20,
            max_total_wal_size: 0,
            info_log_level: crate::InfoLogLevel::Info,
            max_log_file_size: 0,
            keep_log_file_num: 1000,
            stats_dump_period: 600,
            statistics: None,
            listeners: Vec::new(),
            rate_limit_bytes_per_sec: 0,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured so that a new field cannot be forgotten here.
        let Options {
            create_if_missing,
            error_if_exists,
            create_missing_column_families,
            atomic_flush,
            paranoid_checks,
            fs,
            use_direct_reads,
            use_direct_io_for_flush_and_compaction,
            allow_mmap_reads,
            allow_mmap_writes,
            compaction_readahead_size,
            write_buffer_size,
            max_write_buffer_number,
            memtable_prefix_bloom_size_ratio,
            memtable_whole_key_filtering,
            memtable_hash_index,
            allow_concurrent_memtable_write,
            block_size,
            block_restart_interval,
            bloom_bits_per_key,
            compression_per_level,
            bottommost_compression,
            compression_level,
            max_dict_bytes,
            zstd_max_train_bytes,
            prepopulate_block_cache,
            index_type,
            partition_filters,
            metadata_block_size,
            index_block_restart_interval,
            data_block_index_type,
            data_block_hash_table_util_ratio,
            cache_index_and_filter_blocks,
            block_cache_size,
            block_cache_shard_bits,
            compressed_secondary_cache_size,
            block_cache,
            write_buffer_manager,
            memory_budget,
            max_open_files,
            num_levels,
            level0_file_num_compaction_trigger,
            level0_slowdown_writes_trigger,
            level0_stop_writes_trigger,
            max_bytes_for_level_base,
            max_bytes_for_level_multiplier,
            level_compaction_dynamic_level_bytes,
            target_file_size_base,
            target_file_size_multiplier,
            soft_pending_compaction_bytes_limit,
            hard_pending_compaction_bytes_limit,
            delayed_write_rate,
            max_bgerror_resume_count,
            bgerror_resume_retry_interval,
            max_background_jobs,
            max_subcompactions,
            background_cpu_priority,
            disable_auto_compactions,
            seek_compaction,
            merge_operator,
            compaction_filter,
            prefix_extractor,
            ttl,
            enable_blob_files,
            min_blob_size,
            blob_file_size,
            blob_compression,
            blob_cache,
            compress_blob_reference_blocks,
            enable_blob_garbage_collection,
            blob_garbage_collection_age_cutoff,
            blob_garbage_collection_force_threshold,
            separate_blobs_at_write,
            clock: _,
            max_key_size,
            max_value_size,
            wal_recovery_mode,
            max_manifest_file_size,
            wal_bytes_per_sync,
            wal_preallocate_size,
            bytes_per_sync,
            max_total_wal_size,
            info_log_level,
            max_log_file_size,
            keep_log_file_num,
            stats_dump_period,
            statistics,
            listeners,
            rate_limit_bytes_per_sec,
        } = self;
        f.debug_struct("Options")
            .field("create_if_missing", create_if_missing)
            .field("error_if_exists", error_if_exists)
            .field(
                "create_missing_column_families",
                create_missing_column_families,
            )
            .field("atomic_flush", atomic_flush)
            .field("paranoid_checks", paranoid_checks)
            .field("fs", &format_args!("{}", fs.name()))
            .field("use_direct_reads", use_direct_reads)
            .field(
                "use_direct_io_for_flush_and_compaction",
                use_direct_io_for_flush_and_compaction,
            )
            .field("allow_mmap_reads", allow_mmap_reads)
            .field("allow_mmap_writes", allow_mmap_writes)
            .field("compaction_readahead_size", compaction_readahead_size)
            .field("write_buffer_size", write_buffer_size)
            .field("max_write_buffer_number", max_write_buffer_number)
            .field(
                "memtable_prefix_bloom_size_ratio",
                memtable_prefix_bloom_size_ratio,
            )
            .field("memtable_whole_key_filtering", memtable_whole_key_filtering)
            .field("memtable_hash_index", memtable_hash_index)
            .field(
                "allow_concurrent_memtable_write",
                allow_concurrent_memtable_write,
            )
            .field("block_size", block_size)
            .field("block_restart_interval", block_restart_interval)
            .field("bloom_bits_per_key", bloom_bits_per_key)
            .field("compression_per_level", compression_per_level)
            .field("bottommost_compression", bottommost_compression)
            .field("compression_level", compression_level)
            .field("max_dict_bytes", max_dict_bytes)
            .field("zstd_max_train_bytes", zstd_max_train_bytes)
            .field("prepopulate_block_cache", prepopulate_block_cache)
            .field("index_type", index_type)
            .field("partition_filters", partition_filters)
            .field("metadata_block_size", metadata_block_size)
            .field("index_block_restart_interval", index_block_restart_interval)
            .field("data_block_index_type", data_block_index_type)
            .field(
                "data_block_hash_table_util_ratio",
                data_block_hash_table_util_ratio,
            )
            .field(
                "cache_index_and_filter_blocks",
                cache_index_and_filter_blocks,
            )
            .field("block_cache_size", block_cache_size)
            .field("block_cache_shard_bits", block_cache_shard_bits)
            .field(
                "compressed_secondary_cache_size",
                compressed_secondary_cache_size,
            )
            .field("block_cache", block_cache)
            .field("write_buffer_manager", write_buffer_manager)
            .field("memory_budget", memory_budget)
            .field("max_open_files", max_open_files)
            .field("num_levels", num_levels)
            .field(
                "level0_file_num_compaction_trigger",
                level0_file_num_compaction_trigger,
            )
            .field(
                "level0_slowdown_writes_trigger",
                level0_slowdown_writes_trigger,
            )
            .field("level0_stop_writes_trigger", level0_stop_writes_trigger)
            .field("max_bytes_for_level_base", max_bytes_for_level_base)
            .field(
                "max_bytes_for_level_multiplier",
                max_bytes_for_level_multiplier,
            )
            .field(
                "level_compaction_dynamic_level_bytes",
                level_compaction_dynamic_level_bytes,
            )
            .field("target_file_size_base", target_file_size_base)
            .field("target_file_size_multiplier", target_file_size_multiplier)
            .field(
                "soft_pending_compaction_bytes_limit",
                soft_pending_compaction_bytes_limit,
            )
            .field(
                "hard_pending_compaction_bytes_limit",
                hard_pending_compaction_bytes_limit,
            )
            .field("delayed_write_rate", delayed_write_rate)
            .field("max_bgerror_resume_count", max_bgerror_resume_count)
            .field(
                "bgerror_resume_retry_interval",
                bgerror_resume_retry_interval,
            )
            .field("max_background_jobs", max_background_jobs)
            .field("max_subcompactions", max_subcompactions)
            .field("background_cpu_priority", background_cpu_priority)
            .field("disable_auto_compactions", disable_auto_compactions)
            .field("seek_compaction", seek_compaction)
            .field("merge_operator", merge_operator)
            .field("compaction_filter", compaction_filter)
            .field("prefix_extractor", prefix_extractor)
            .field("ttl", ttl)
            .field("enable_blob_files", enable_blob_files)
            .field("min_blob_size", min_blob_size)
            .field("blob_file_size", blob_file_size)
            .field("blob_compression", blob_compression)
            .field("blob_cache", blob_cache)
            .field(
                "compress_blob_reference_blocks",
                compress_blob_reference_blocks,
            )
            .field(
                "enable_blob_garbage_collection",
                enable_blob_garbage_collection,
            )
            .field(
                "blob_garbage_collection_age_cutoff",
                blob_garbage_collection_age_cutoff,
            )
            .field(
                "blob_garbage_collection_force_threshold",
                blob_garbage_collection_force_threshold,
            )
            .field("separate_blobs_at_write", separate_blobs_at_write)
            .field("max_key_size", max_key_size)
            .field("max_value_size", max_value_size)
            .field("wal_recovery_mode", wal_recovery_mode)
            .field("max_manifest_file_size", max_manifest_file_size)
            .field("wal_bytes_per_sync", wal_bytes_per_sync)
            .field("wal_preallocate_size", wal_preallocate_size)
            .field("bytes_per_sync", bytes_per_sync)
            .field("max_total_wal_size", max_total_wal_size)
            .field("info_log_level", info_log_level)
            .field("max_log_file_size", max_log_file_size)
            .field("keep_log_file_num", keep_log_file_num)
            .field("stats_dump_period", stats_dump_period)
            .field("statistics", &statistics.is_some())
            .field("listeners", &listeners.len())
            .field("rate_limit_bytes_per_sec", rate_limit_bytes_per_sec)
            .finish()
    }
}

/// Builder methods `with_<field>(value) -> Self`, one per plain field.
macro_rules! with_setters {
    ($($method:ident => $field:ident: $ty:ty),* $(,)?) => {
        $(
            #[doc = concat!("Sets [`Options::", stringify!($field), "`] (builder style).")]
            #[must_use]
            pub fn $method(mut self, value: $ty) -> Self {
                self.$field = value;
                self
            }
        )*
    };
}

impl Options {
    with_setters! {
        with_create_if_missing => create_if_missing: bool,
        with_error_if_exists => error_if_exists: bool,
        with_create_missing_column_families => create_missing_column_families: bool,
        with_atomic_flush => atomic_flush: bool,
        with_paranoid_checks => paranoid_checks: bool,
        with_use_direct_reads => use_direct_reads: bool,
        with_use_direct_io_for_flush_and_compaction => use_direct_io_for_flush_and_compaction: bool,
        with_allow_mmap_reads => allow_mmap_reads: bool,
        with_allow_mmap_writes => allow_mmap_writes: bool,
        with_compaction_readahead_size => compaction_readahead_size: usize,
        with_write_buffer_size => write_buffer_size: usize,
        with_max_write_buffer_number => max_write_buffer_number: usize,
        with_memtable_prefix_bloom_size_ratio => memtable_prefix_bloom_size_ratio: f64,
        with_memtable_whole_key_filtering => memtable_whole_key_filtering: bool,
        with_memtable_hash_index => memtable_hash_index: bool,
        with_allow_concurrent_memtable_write => allow_concurrent_memtable_write: bool,
        with_block_size => block_size: usize,
        with_block_restart_interval => block_restart_interval: usize,
        with_bloom_bits_per_key => bloom_bits_per_key: usize,
        with_compression_per_level => compression_per_level: Vec<CompressionType>,
        with_bottommost_compression => bottommost_compression: Option<CompressionType>,
        with_compression_level => compression_level: Option<i32>,
        with_max_dict_bytes => max_dict_bytes: usize,
        with_zstd_max_train_bytes => zstd_max_train_bytes: usize,
        with_prepopulate_block_cache => prepopulate_block_cache: PrepopulateBlockCache,
        with_index_type => index_type: IndexType,
        with_partition_filters => partition_filters: bool,
        with_metadata_block_size => metadata_block_size: usize,
        with_index_block_restart_interval => index_block_restart_interval: usize,
        with_data_block_index_type => data_block_index_type: DataBlockIndexType,
        with_data_block_hash_table_util_ratio => data_block_hash_table_util_ratio: f64,
        with_cache_index_and_filter_blocks => cache_index_and_filter_blocks: bool,
        with_block_cache_size => block_cache_size: usize,
        with_block_cache_shard_bits => block_cache_shard_bits: u32,
        with_compressed_secondary_cache_size => compressed_secondary_cache_size: usize,
        with_max_open_files => max_open_files: usize,
        with_num_levels => num_levels: usize,
        with_level0_file_num_compaction_trigger => level0_file_num_compaction_trigger: usize,
        with_level0_slowdown_writes_trigger => level0_slowdown_writes_trigger: usize,
        with_level0_stop_writes_trigger => level0_stop_writes_trigger: usize,
        with_max_bytes_for_level_base => max_bytes_for_level_base: u64,
        with_max_bytes_for_level_multiplier => max_bytes_for_level_multiplier: f64,
        with_level_compaction_dynamic_level_bytes => level_compaction_dynamic_level_bytes: bool,
        with_target_file_size_base => target_file_size_base: u64,
        with_target_file_size_multiplier => target_file_size_multiplier: u64,
        with_soft_pending_compaction_bytes_limit => soft_pending_compaction_bytes_limit: u64,
        with_hard_pending_compaction_bytes_limit => hard_pending_compaction_bytes_limit: u64,
        with_delayed_write_rate => delayed_write_rate: u64,
        with_max_bgerror_resume_count => max_bgerror_resume_count: u32,
        with_bgerror_resume_retry_interval => bgerror_resume_retry_interval: std::time::Duration,
        with_max_background_jobs => max_background_jobs: usize,
        with_max_subcompactions => max_subcompactions: u32,
        with_background_cpu_priority => background_cpu_priority: CpuPriority,
        with_disable_auto_compactions => disable_auto_compactions: bool,
        with_seek_compaction => seek_compaction: bool,
        with_max_key_size => max_key_size: usize,
        with_max_value_size => max_value_size: usize,
        with_wal_recovery_mode => wal_recovery_mode: WalRecoveryMode,
        with_max_manifest_file_size => max_manifest_file_size: u64,
        with_wal_bytes_per_sync => wal_bytes_per_sync: u64,
        with_wal_preallocate_size => wal_preallocate_size: u64,
        with_bytes_per_sync => bytes_per_sync: u64,
        with_max_total_wal_size => max_total_wal_size: u64,
        with_enable_blob_files => enable_blob_files: bool,
        with_min_blob_size => min_blob_size: u64,
        with_blob_file_size => blob_file_size: u64,
        with_blob_compression => blob_compression: CompressionType,
        with_blob_cache => blob_cache: bool,
        with_compress_blob_reference_blocks => compress_blob_reference_blocks: bool,
        with_enable_blob_garbage_collection => enable_blob_garbage_collection: bool,
        with_blob_garbage_collection_age_cutoff => blob_garbage_collection_age_cutoff: f64,
        with_blob_garbage_collection_force_threshold => blob_garbage_collection_force_threshold: f64,
        with_separate_blobs_at_write => separate_blobs_at_write: bool,
        with_info_log_level => info_log_level: crate::InfoLogLevel,
        with_max_log_file_size => max_log_file_size: u64,
        with_keep_log_file_num => keep_log_file_num: usize,
        with_stats_dump_period => stats_dump_period: u64,
        with_rate_limit_bytes_per_sec => rate_limit_bytes_per_sec: u64,
    }

    /// Sets [`Options::statistics`] (builder style).
    #[must_use]
    pub fn with_statistics(mut self, statistics: Arc<crate::Statistics>) -> Self {
        self.statistics = Some(statistics);
        self
    }

    /// Sets [`Options::block_cache`] (builder style).
    #[must_use]
    pub fn with_block_cache(mut self, cache: crate::Cache) -> Self {
        self.block_cache = Some(cache);
        self
    }

    /// Sets [`Options::write_buffer_manager`] (builder style).
    #[must_use]
    pub fn with_write_buffer_manager(mut self, wbm: crate::WriteBufferManager) -> Self {
        self.write_buffer_manager = Some(wbm);
        self
    }

    /// Sets [`Options::memory_budget`] (builder style).
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let opts = Options::default().with_memory_budget(64 << 20);
    /// let db = Db::open(dir.path(), opts).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// let cap = db.property("shaledb.block-cache-capacity").unwrap();
    /// assert_eq!(cap, (64 << 20).to_string());
    /// ```
    #[must_use]
    pub fn with_memory_budget(mut self, bytes: usize) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// `memory_budget` turned into the cache and manager it stands for (and cleared), so the
    /// families derived from these options share them.
    pub(crate) fn resolve_memory_budget(mut self) -> Self {
        if let Some(budget) = self.memory_budget.take() {
            // The tier is now the cache's (and the size taken, as the budget is, so the
            // families derived from these options pass validation with the cache given).
            let secondary = std::mem::take(&mut self.compressed_secondary_cache_size);
            let bits = crate::cache::shard_bits_for(budget, self.block_cache_shard_bits);
            let cache =
                crate::Cache::with_shard_bits(budget, bits).with_compressed_secondary(secondary);
            let wbm = crate::WriteBufferManager::with_cache(budget / 4, &cache).allow_stall(true);
            self.block_cache = Some(cache);
            self.write_buffer_manager = Some(wbm);
            // Readahead buffers are outside the cache, and what background threads allocate
            // stays with their allocator arenas once freed: keep them small against the
            // budget (1/1024 of it: 256 KiB for 256 MiB; RocksDB 7's default is none).
            self.compaction_readahead_size = self.compaction_readahead_size.min(budget >> 10);
        }
        self
    }

    /// The block cache these options name: the shared one, or a new private one.
    pub(crate) fn block_cache_for_open(&self) -> Arc<crate::cache::BlockCache> {
        match &self.block_cache {
            Some(c) => c.inner.clone(),
            None => {
                let bits = crate::cache::shard_bits_for(
                    self.block_cache_size,
                    self.block_cache_shard_bits,
                );
                Arc::new(
                    crate::cache::BlockCache::new(self.block_cache_size, bits)
                        .with_secondary(self.compressed_secondary_cache_size),
                )
            }
        }
    }

    /// Adds a listener to [`Options::listeners`] (builder style).
    #[must_use]
    pub fn with_listener(mut self, listener: Arc<dyn crate::EventListener>) -> Self {
        self.listeners.push(listener);
        self
    }

    /// Sets [`Options::fs`] (builder style), e.g. to a
    /// [`MemFileSystem`](crate::fs::MemFileSystem) in tests.
    #[must_use]
    pub fn with_fs(mut self, fs: impl FileSystem) -> Self {
        self.fs = Arc::new(fs);
        self
    }

    /// Uses one codec on every level (builder style; see [`Options::set_compression`]).
    #[must_use]
    pub fn with_compression(mut self, c: CompressionType) -> Self {
        self.set_compression(c);
        self
    }

    /// The codec for tables written to `level`.
    pub fn compression_for_level(&self, level: usize) -> CompressionType {
        self.compression_at(level)
    }

    /// The codec of an output at `level` when L0 compacts into `base_level`: entry 0 for L0,
    /// else entry `level - base_level + 1` (the last entry past the end), as RocksDB maps
    /// `compression_per_level` (with static level sizes the base level is 1, so entry `level`).
    pub(crate) fn compression_for_output(
        &self,
        level: usize,
        base_level: usize,
    ) -> CompressionType {
        let index = match level {
            0 => 0,
            _ => (level + 1).saturating_sub(base_level).max(1),
        };
        self.compression_at(index)
    }

    /// The hash-index ratio of data blocks written under these options (`None`: none).
    pub(crate) fn data_block_hash_ratio(&self) -> Option<f64> {
        (self.data_block_index_type == DataBlockIndexType::BinaryAndHash)
            .then_some(self.data_block_hash_table_util_ratio)
    }

    /// The codec of an output at `level`, with `bottommost_compression` where nothing lies
    /// below it.
    pub(crate) fn codec_for_output(
        &self,
        level: usize,
        base_level: usize,
        bottommost: bool,
    ) -> CompressionType {
        match (bottommost, self.bottommost_compression) {
            (true, Some(c)) => c,
            _ => self.compression_for_output(level, base_level),
        }
    }

    fn compression_at(&self, index: usize) -> CompressionType {
        match self.compression_per_level.get(index) {
            Some(c) => *c,
            None => self
                .compression_per_level
                .last()
                .copied()
                .unwrap_or(CompressionType::None),
        }
    }

    /// Uses one codec on every level.
    pub fn set_compression(&mut self, c: CompressionType) {
        self.compression_per_level = vec![c];
    }

    /// Checks the options for values, and combinations, that cannot work; `Db::open` calls it.
    /// The `InvalidArgument` error names the option.
    pub fn validate(&self) -> crate::Result<()> {
        self.validate_sizes()?;
        self.validate_write_stalls()?;
        self.validate_levels()
    }

    fn validate_sizes(&self) -> crate::Result<()> {
        let bad = |s: &str| Err(crate::Error::InvalidArgument(s.to_string()));
        if self.num_levels < 2 || self.num_levels > 64 {
            return bad("num_levels must be between 2 and 64");
        }
        if self.write_buffer_size < 4096 {
            return bad("write_buffer_size must be at least 4096 bytes");
        }
        if self.allow_mmap_reads && self.use_direct_reads {
            return bad(
                "allow_mmap_reads and use_direct_reads cannot both be set: a mapped file is \
                 read through the page cache that direct reads bypass",
            );
        }
        if self.max_write_buffer_number < 2 {
            return bad("max_write_buffer_number must be at least 2 (one active memtable plus one being flushed)");
        }
        if self.max_dict_bytes > MAX_DICT_BYTES {
            return bad("max_dict_bytes must be at most 1 MiB");
        }
        if self.zstd_max_train_bytes > MAX_TRAIN_BYTES {
            return bad(
                "zstd_max_train_bytes must be at most 256 MiB (the samples are held in memory)",
            );
        }
        if self.zstd_max_train_bytes > 0 && self.zstd_max_train_bytes < self.max_dict_bytes {
            return bad("zstd_max_train_bytes must be 0 or at least max_dict_bytes (zstd trains a dictionary on about 100 times its size)");
        }
        if self.block_size < 64 || self.block_size > (256 << 20) {
            return bad("block_size must be between 64 bytes and 256 MiB");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be at least 1");
        }
        if self.index_block_restart_interval == 0 {
            return bad("index_block_restart_interval must be at least 1 (1 puts a restart point at every index entry)");
        }
        let ratio = self.data_block_hash_table_util_ratio;
        if !(ratio > 0.0 && ratio <= 1.0) {
            return bad("data_block_hash_table_util_ratio must be above 0 and at most 1 (user keys per hash bucket of a data block)");
        }
        if self.metadata_block_size < 64 || self.metadata_block_size > (256 << 20) {
            return bad("metadata_block_size must be between 64 bytes and 256 MiB");
        }
        if self.partition_filters && self.index_type != IndexType::TwoLevel {
            return bad("partition_filters needs index_type IndexType::TwoLevel (filter partitions are cut with the index partitions)");
        }
        if !(0.0..=0.25).contains(&self.memtable_prefix_bloom_size_ratio) {
            return bad("memtable_prefix_bloom_size_ratio must be between 0 and 0.25");
        }
        if self.max_background_jobs == 0 {
            return bad("max_background_jobs must be at least 1");
        }
        if self.max_subcompactions == 0 {
            return bad("max_subcompactions must be at least 1 (1: compactions are not split)");
        }
        if self.ttl.is_some_and(|t| t.as_secs() == 0) {
            return bad("ttl must be at least one second (None: entries never expire)");
        }
        if self.ttl.is_some() && self.merge_operator.is_some() {
            return bad("a column family cannot have both a ttl and a merge operator yet");
        }
        if self.blob_file_size < 4096 {
            return bad("blob_file_size must be at least 4096 bytes");
        }
        if !(0.0..=1.0).contains(&self.blob_garbage_collection_age_cutoff) {
            return bad("blob_garbage_collection_age_cutoff must be between 0 and 1");
        }
        if !(0.0..=1.0).contains(&self.blob_garbage_collection_force_threshold) {
            return bad("blob_garbage_collection_force_threshold must be between 0 and 1");
        }
        if self.separate_blobs_at_write && !self.enable_blob_files {
            return bad("separate_blobs_at_write needs enable_blob_files");
        }
        if self.max_log_file_size != 0 && self.max_log_file_size < 1024 {
            return bad("max_log_file_size must be 0 (no size limit) or at least 1024 bytes");
        }
        if self.max_open_files < 16 {
            return bad("max_open_files must be at least 16");
        }
        if self.max_value_size > u32::MAX as usize {
            return bad("max_value_size must fit in 32 bits");
        }
        if let Some(budget) = self.memory_budget {
            if self.block_cache.is_some() || self.write_buffer_manager.is_some() {
                return bad(
                    "memory_budget makes its own block cache and write buffer manager; it \
                     cannot be combined with block_cache or write_buffer_manager (give both \
                     of those instead to share one budget among databases)",
                );
            }
            if budget < 1 << 20 {
                return Err(crate::Error::InvalidArgument(format!(
                    "memory_budget is {budget} bytes; at least 1 MiB is needed (a quarter \
                     of it bounds the memtables)"
                )));
            }
        }
        if self.block_cache.is_some() && self.compressed_secondary_cache_size > 0 {
            return bad(
                "compressed_secondary_cache_size applies to the block cache the database \
                 makes; with a shared block_cache, give that cache its tier with \
                 Cache::with_compressed_secondary instead",
            );
        }
        if self.block_cache_shard_bits > MAX_BLOCK_CACHE_SHARD_BITS {
            return Err(crate::Error::InvalidArgument(format!(
                "block_cache_shard_bits is {}; at most {MAX_BLOCK_CACHE_SHARD_BITS} \
                 (65,536 shards) is supported",
                self.block_cache_shard_bits
            )));
        }
        Ok(())
    }

    /// The L0 triggers and pending-bytes limits must be ordered, or writes stop before
    /// compaction is even asked for (or the "slow" state is never reached).
    fn validate_write_stalls(&self) -> crate::Result<()> {
        let bad = |s: String| Err(crate::Error::InvalidArgument(s));
        let (compact, slow, stop) = (
            self.level0_file_num_compaction_trigger,
            self.level0_slowdown_writes_trigger,
            self.level0_stop_writes_trigger,
        );
        if compact == 0 {
            return bad("level0_file_num_compaction_trigger must be at least 1".into());
        }
        // Slowing down before compaction starts is odd but safe (tests use it); stopping
        // before it starts would wait forever for a compaction nothing asks for.
        if stop < compact {
            return bad(format!(
                "level0_stop_writes_trigger ({stop}) must be at least \
                 level0_file_num_compaction_trigger ({compact}): writes would stop with no \
                 compaction to resume them"
            ));
        }
        if stop < slow {
            return bad(format!(
                "level0_stop_writes_trigger ({stop}) must be at least \
                 level0_slowdown_writes_trigger ({slow})"
            ));
        }
        let (soft, hard) = (
            self.soft_pending_compaction_bytes_limit,
            self.hard_pending_compaction_bytes_limit,
        );
        if soft == 0 || hard == 0 {
            return bad(
                "soft_pending_compaction_bytes_limit and hard_pending_compaction_bytes_limit \
                 must be at least 1 (0 does not disable them: it would slow or stop every write)"
                    .into(),
            );
        }
        if soft > hard {
            return bad(format!(
                "soft_pending_compaction_bytes_limit ({soft}) must not exceed \
                 hard_pending_compaction_bytes_limit ({hard})"
            ));
        }
        Ok(())
    }

    fn validate_levels(&self) -> crate::Result<()> {
        let bad = |s: &str| Err(crate::Error::InvalidArgument(s.to_string()));
        let m = self.max_bytes_for_level_multiplier;
        if m.is_nan() || m < 1.0 {
            return bad("max_bytes_for_level_multiplier must be a number of at least 1");
        }
        if self.max_bytes_for_level_base == 0 {
            return bad("max_bytes_for_level_base must be at least 1 byte");
        }
        if self.target_file_size_base == 0 {
            return bad("target_file_size_base must be at least 1 byte");
        }
        if self.target_file_size_multiplier == 0 {
            return bad("target_file_size_multiplier must be at least 1");
        }
        Ok(())
    }
}

/// Options for a write: a struct literal (`WriteOptions { sync: true, ..Default::default() }`)
/// or the builder methods (`WriteOptions::default().with_sync(true)`).
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Make the write durable (fsync the WAL) before it is acknowledged. Default false: the
    /// write reaches the OS before it is acknowledged and survives a process crash.
    pub sync: bool,
    /// Skip the write-ahead log: the write is lost on any crash until the memtable is flushed.
    /// Together with `sync` the write is refused with `Error::InvalidArgument` (there would be
    /// nothing to sync).
    pub disable_wal: bool,
    /// A low-priority write (RocksDB's `low_pri`): while compaction falls behind (L0 or
    /// pending compaction bytes a quarter of the way from the compaction trigger to the
    /// slowdown limits), it is paced to `Options::delayed_write_rate` before it queues, so
    /// background loads give way before normal writes are slowed. Default false.
    pub low_pri: bool,
}

impl WriteOptions {
    /// Sets [`WriteOptions::sync`] (builder style).
    #[must_use]
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// Sets [`WriteOptions::disable_wal`] (builder style).
    #[must_use]
    pub fn with_disable_wal(mut self, disable_wal: bool) -> Self {
        self.disable_wal = disable_wal;
        self
    }

    /// Sets [`WriteOptions::low_pri`] (builder style).
    #[must_use]
    pub fn with_low_pri(mut self, low_pri: bool) -> Self {
        self.low_pri = low_pri;
        self
    }
}

/// Options for a read or an iterator: a struct literal or the builder methods.
///
/// ```
/// use shaledb::{Db, Options, ReadOptions};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// let ro = ReadOptions::default().with_snapshot(db.snapshot()).with_upper_bound("m");
/// assert_eq!(ro.iterate_upper_bound.as_deref(), Some(&b"m"[..]));
/// ```
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Read as of this snapshot; `None` reads the latest state.
    pub snapshot: Option<Snapshot>,
    /// Iterators skip keys below this bound (inclusive).
    pub iterate_lower_bound: Option<Vec<u8>>,
    /// Iterators stop before this bound (exclusive).
    pub iterate_upper_bound: Option<Vec<u8>>,
    /// Verify block checksums on read. Default true.
    pub verify_checksums: bool,
    /// Put blocks read into the block cache. Default true.
    pub fill_cache: bool,
    /// A tailing iterator (RocksDB's `tailing`): each seek first moves the iterator to the
    /// database's latest state, so it sees writes made after it was created. No effect with
    /// `snapshot` (a snapshot's view never changes). Default false.
    pub tailing: bool,
    /// With the family's `prefix_extractor`: after a `seek`, the iterator ends at the first
    /// key whose prefix differs from the seek target's (RocksDB's option; keys outside the
    /// extractor's domain end it too). Ignored without an extractor or after `seek_to_first`
    /// and `seek_to_last`. Default false.
    pub prefix_same_as_start: bool,
    /// RocksDB's option to seek in total order despite a prefix extractor: with
    /// `prefix_same_as_start`, seeks then read every table instead of leaving out those whose
    /// prefix bloom rules the target's prefix out. Results are the same either way (ShaleDB's
    /// positioning is always total-order); only the tables read differ. Default false.
    pub total_order_seek: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            iterate_lower_bound: None,
            iterate_upper_bound: None,
            verify_checksums: true,
            fill_cache: true,
            tailing: false,
            prefix_same_as_start: false,
            total_order_seek: false,
        }
    }
}

impl ReadOptions {
    /// Sets [`ReadOptions::snapshot`] (builder style).
    #[must_use]
    pub fn with_snapshot(mut self, snapshot: Snapshot) -> Self {
        self.snapshot = Some(snapshot);
        self
    }

    /// Sets [`ReadOptions::iterate_lower_bound`] (builder style).
    #[must_use]
    pub fn with_lower_bound(mut self, key: impl AsRef<[u8]>) -> Self {
        self.iterate_lower_bound = Some(key.as_ref().to_vec());
        self
    }

    /// Sets [`ReadOptions::iterate_upper_bound`] (builder style).
    #[must_use]
    pub fn with_upper_bound(mut self, key: impl AsRef<[u8]>) -> Self {
        self.iterate_upper_bound = Some(key.as_ref().to_vec());
        self
    }

    /// Sets [`ReadOptions::verify_checksums`] (builder style).
    #[must_use]
    pub fn with_verify_checksums(mut self, verify: bool) -> Self {
        self.verify_checksums = verify;
        self
    }

    /// Sets [`ReadOptions::fill_cache`] (builder style).
    #[must_use]
    pub fn with_fill_cache(mut self, fill: bool) -> Self {
        self.fill_cache = fill;
        self
    }

    /// Sets [`ReadOptions::tailing`] (builder style).
    #[must_use]
    pub fn with_tailing(mut self, tailing: bool) -> Self {
        self.tailing = tailing;
        self
    }
}

/// Bound on `Options::max_dict_bytes`.
const MAX_DICT_BYTES: usize = 1 << 20;
/// Bound on `Options::zstd_max_train_bytes`.
const MAX_TRAIN_BYTES: usize = 256 << 20;

/// Which written blocks go into the block cache as they are written
/// ([`Options::prepopulate_block_cache`], RocksDB's `PrepopulateBlockCache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PrepopulateBlockCache {
    /// None: blocks enter the cache when a read misses them.
    #[default]
    Disable,
    /// The data blocks of every flush (not of compactions, whose outputs are read less soon).
    FlushOnly,
}

/// How a table's index is laid out ([`Options::index_type`], RocksDB's `IndexType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexType {
    /// One index block per table, held in memory while the table is open (or in the block
    /// cache with [`Options::cache_index_and_filter_blocks`]).
    #[default]
    BinarySearch,
    /// Index partitions of about [`Options::metadata_block_size`] bytes in the block cache
    /// under a small top-level index pinned per table (RocksDB's `kTwoLevelIndexSearch`).
    TwoLevel,
}

/// How a get searches a data block ([`Options::data_block_index_type`], RocksDB's
/// `DataBlockIndexType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DataBlockIndexType {
    /// Binary search over the block's restart points.
    #[default]
    BinarySearch,
    /// A hash index from user key to restart interval beside the restart points; gets use
    /// it, iterators and keys whose bucket is shared binary-search.
    BinaryAndHash,
}

/// What [`Db::compact_range_opt`](crate::Db::compact_range_opt) does with the deepest level
/// holding data in the range (RocksDB's `BottommostLevelCompaction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BottommostLevelCompaction {
    /// Data above moves down into it; its own files are not rewritten.
    Skip,
    /// Its files are rewritten only if the family has a compaction filter (RocksDB's default).
    IfHaveCompactionFilter,
    /// All its files in the range are rewritten, also those the step above just wrote.
    Force,
    /// Its files in the range are rewritten, except those this compaction just wrote into it
    /// (they hold no garbage). ShaleDB's default, as db_bench's `compact`: a full compaction
    /// then leaves no overwritten version or deletable tombstone anywhere.
    #[default]
    ForceOptimized,
}

/// Options of [`Db::compact_range_opt`](crate::Db::compact_range_opt) (RocksDB's
/// `CompactRangeOptions`).
///
/// ```
/// use shaledb::{BottommostLevelCompaction, CompactRangeOptions};
/// let o = CompactRangeOptions {
///     bottommost_level_compaction: BottommostLevelCompaction::Skip,
/// };
/// assert_ne!(o.bottommost_level_compaction, CompactRangeOptions::default().bottommost_level_compaction);
/// ```
#[derive(Debug, Clone, Default)]
pub struct CompactRangeOptions {
    /// What happens to the deepest level holding data in the range.
    pub bottommost_level_compaction: BottommostLevelCompaction,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_per_level_counts_from_the_base_level() {
        use CompressionType::{Lz4, Snappy, Zstd};
        let o = Options {
            compression_per_level: vec![CompressionType::None, Snappy, Lz4, Zstd],
            ..Options::default()
        };
        // Static level sizes: the base level is 1, entry i is level i, the last entry repeats.
        let static_codecs: Vec<_> = (0..6).map(|l| o.compression_for_output(l, 1)).collect();
        assert_eq!(
            static_codecs,
            [CompressionType::None, Snappy, Lz4, Zstd, Zstd, Zstd]
        );
        assert_eq!(o.compression_for_level(2), Lz4);
        // L0 compacting into L3: L3 takes entry 1, L4 entry 2, L5 entry 3; a level above
        // the base (left from static sizes) takes entry 1.
        let dynamic: Vec<_> = (0..7).map(|l| o.compression_for_output(l, 3)).collect();
        assert_eq!(
            dynamic,
            [
                CompressionType::None,
                Snappy,
                Snappy,
                Snappy,
                Lz4,
                Zstd,
                Zstd
            ]
        );
    }

    #[test]
    fn partition_options_are_checked() {
        let message = |o: Options| match o.validate() {
            Err(crate::Error::InvalidArgument(m)) => m,
            other => panic!("expected InvalidArgument, got {other:?}"),
        };
        let m = message(Options::default().with_partition_filters(true));
        assert!(m.starts_with("partition_filters needs index_type"), "{m}");
        let m = message(Options::default().with_metadata_block_size(10));
        assert!(m.starts_with("metadata_block_size must be"), "{m}");
        let m = message(Options::default().with_index_block_restart_interval(0));
        assert!(m.starts_with("index_block_restart_interval must be"), "{m}");
        let ok = Options::default()
            .with_index_type(IndexType::TwoLevel)
            .with_partition_filters(true)
            .with_metadata_block_size(64);
        assert!(ok.validate().is_ok());
    }
}
