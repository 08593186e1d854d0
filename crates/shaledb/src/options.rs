//! Options for opening a database, reading and writing.

use crate::compression::CompressionType;
use crate::fs::FileSystem;
use crate::snapshot::Snapshot;
use std::sync::Arc;

/// How open treats damage found while replaying write-ahead logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalRecoveryMode {
    /// The default. A torn tail of the newest WAL (a write that was never acknowledged) is
    /// dropped; any other damage fails open with `Error::Corruption`.
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

/// Options for [`crate::Db::open`]. `Options::default()` serves well with no tuning.
#[derive(Clone)]
pub struct Options {
    /// Create the database if it does not exist. Default true.
    pub create_if_missing: bool,
    /// Fail if the database exists. Default false.
    pub error_if_exists: bool,
    /// Verify extra invariants (e.g. read back new tables after writing them). Default true.
    pub paranoid_checks: bool,
    /// The filesystem all IO goes through. Default: the real one.
    pub fs: Arc<dyn FileSystem>,

    /// Bytes a memtable holds before it is frozen and flushed. Default 64 MiB.
    pub write_buffer_size: usize,
    /// Memtables (active plus frozen) kept in memory before writes stop. Default 2.
    pub max_write_buffer_number: usize,

    /// Approximate uncompressed size of a data block. Default 4096.
    pub block_size: usize,
    /// Keys between restart points in a block. Default 16.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables filters. Default 10 (about 1% false positives).
    pub bloom_bits_per_key: usize,
    /// Codec per level; levels past the end use the last entry; empty means none.
    /// Default: none on L0 and L1 (rewritten soon, so compressing them spends CPU on bytes that
    /// do not stay), LZ4 on L2 to L4, Zstd from L5 on, where most of the data comes to rest.
    pub compression_per_level: Vec<CompressionType>,
    /// Capacity of the shared block cache in bytes. Default 32 MiB.
    pub block_cache_size: usize,
    /// The block cache is split into 2^bits shards. Default 4.
    pub block_cache_shard_bits: u32,
    /// Open table files kept in the table cache. Default 5000.
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
    /// Size at which compaction output files are cut, at L1. Default 64 MiB.
    pub target_file_size_base: u64,
    /// Each level's file size is this times the one above. Default 1.
    pub target_file_size_multiplier: u64,
    /// Pending compaction bytes at which writes are slowed. Default 64 GiB.
    pub soft_pending_compaction_bytes_limit: u64,
    /// Pending compaction bytes at which writes stop. Default 256 GiB.
    pub hard_pending_compaction_bytes_limit: u64,
    /// Write rate, in bytes per second, while writes are slowed. Default 16 MiB/s.
    pub delayed_write_rate: u64,
    /// Background threads for flushes and compactions. Default: the number of cores.
    pub max_background_jobs: usize,
    /// Do not compact automatically (bulk loading); `compact_range` still works. Default false.
    pub disable_auto_compactions: bool,

    /// Keys longer than this are rejected with `InvalidArgument`. Default 8 MiB.
    pub max_key_size: usize,
    /// Values longer than this are rejected with `InvalidArgument`. Default 1 GiB.
    pub max_value_size: usize,
    /// How WAL damage is treated at open.
    pub wal_recovery_mode: WalRecoveryMode,
    /// A MANIFEST larger than this is rewritten from a snapshot at the next change. Default
    /// 64 MiB.
    pub max_manifest_file_size: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            paranoid_checks: true,
            fs: crate::fs::default_fs(),
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 2,
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            compression_per_level: vec![
                CompressionType::None,
                CompressionType::None,
                CompressionType::Lz4,
                CompressionType::Lz4,
                CompressionType::Lz4,
                CompressionType::Zstd,
            ],
            block_cache_size: 32 << 20,
            block_cache_shard_bits: 4,
            max_open_files: 5000,
            num_levels: 7,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10.0,
            target_file_size_base: 64 << 20,
            target_file_size_multiplier: 1,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
            delayed_write_rate: 16 << 20,
            max_background_jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            disable_auto_compactions: false,
            max_key_size: 8 << 20,
            max_value_size: 1 << 30,
            wal_recovery_mode: WalRecoveryMode::default(),
            max_manifest_file_size: 64 << 20,
        }
    }
}

impl Options {
    /// The codec for tables written to `level`.
    pub fn compression_for_level(&self, level: usize) -> CompressionType {
        match self.compression_per_level.get(level) {
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

    /// Checks the options for values that cannot work.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |s: &str| Err(crate::Error::InvalidArgument(s.to_string()));
        if self.num_levels < 2 || self.num_levels > 64 {
            return bad("num_levels must be between 2 and 64");
        }
        if self.write_buffer_size < 4096 {
            return bad("write_buffer_size must be at least 4096 bytes");
        }
        if self.max_write_buffer_number < 2 {
            return bad("max_write_buffer_number must be at least 2 (one active memtable plus one being flushed)");
        }
        if self.block_size < 64 || self.block_size > (256 << 20) {
            return bad("block_size must be between 64 bytes and 256 MiB");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be at least 1");
        }
        if self.max_bytes_for_level_multiplier < 1.0 {
            return bad("max_bytes_for_level_multiplier must be at least 1");
        }
        if self.level0_file_num_compaction_trigger == 0 {
            return bad("level0_file_num_compaction_trigger must be at least 1");
        }
        if self.max_background_jobs == 0 {
            return bad("max_background_jobs must be at least 1");
        }
        if self.max_open_files < 16 {
            return bad("max_open_files must be at least 16");
        }
        if self.max_value_size > u32::MAX as usize {
            return bad("max_value_size must fit in 32 bits");
        }
        Ok(())
    }
}

/// Options for a write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Make the write durable (fsync the WAL) before it is acknowledged. Default false: the
    /// write reaches the OS before it is acknowledged and survives a process crash.
    pub sync: bool,
    /// Skip the write-ahead log: the write is lost on any crash until the memtable is flushed.
    pub disable_wal: bool,
}

/// Options for a read or an iterator.
#[derive(Clone)]
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
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            iterate_lower_bound: None,
            iterate_upper_bound: None,
            verify_checksums: true,
            fill_cache: true,
        }
    }
}
