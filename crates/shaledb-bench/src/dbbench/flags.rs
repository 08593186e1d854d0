//! db_bench's command-line syntax: `--name=value`, `--name value`, bool `--name`,
//! `--name=1|0|true|false`. Flags with no ShaleDB meaning are accepted and reported once as
//! ignored, with the reason; any other unknown flag is an error naming it.

use crate::engine::{BlobOptions, CommonOptions};
use std::collections::BTreeMap;

/// How a flag is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagUse {
    /// Read by shale-bench.
    Used,
    /// Accepted for compatibility and ignored; the text says why.
    Ignored(&'static str),
}

/// A known flag: name, whether it is a bool, its use, and its help.
pub struct FlagSpec {
    /// Name without dashes.
    pub name: &'static str,
    /// Bool flags may appear bare (`--histogram`).
    pub is_bool: bool,
    /// Used or ignored.
    pub usage: FlagUse,
    /// One line of help.
    pub help: &'static str,
}

const fn used(name: &'static str, is_bool: bool, help: &'static str) -> FlagSpec {
    FlagSpec {
        name,
        is_bool,
        usage: FlagUse::Used,
        help,
    }
}

const fn ignored(name: &'static str, is_bool: bool, why: &'static str) -> FlagSpec {
    FlagSpec {
        name,
        is_bool,
        usage: FlagUse::Ignored(why),
        help: why,
    }
}

/// Every flag shale-bench knows.
pub const FLAGS: &[FlagSpec] = &[
    used(
        "benchmarks",
        false,
        "comma-separated benchmarks, run in order",
    ),
    used(
        "engine",
        false,
        "shaledb|rocksdb|leveldb|wiredtiger|fjall (default shaledb)",
    ),
    used("json", false, "write every result as JSON to this path"),
    used(
        "num",
        false,
        "number of keys (per thread for fills, as db_bench)",
    ),
    used("reads", false, "reads per thread (-1: --num)"),
    used("writes", false, "writes per thread (-1: --num)"),
    used("deletes", false, "deletes per thread (-1: --num)"),
    used(
        "duration",
        false,
        "seconds to run each benchmark instead of an op count (0: off)",
    ),
    used("threads", false, "worker threads"),
    used("key_size", false, "key bytes"),
    used("value_size", false, "value bytes"),
    used("batch_size", false, "writes per write batch"),
    used(
        "compression_ratio",
        false,
        "fraction of a value a codec keeps",
    ),
    used("compression_type", false, "none|snappy|lz4|zstd|zlib"),
    used(
        "bytes_per_sync",
        false,
        "start writeback of table and blob files every N bytes (ShaleDB and RocksDB; unset: each \
         engine's default, 1 MiB in ShaleDB, 0 in RocksDB; the others have no such option)",
    ),
    used(
        "wal_bytes_per_sync",
        false,
        "start writeback of the WAL every N bytes (ShaleDB and RocksDB; unset: each engine's \
         default, 8 MiB in ShaleDB, 0 in RocksDB; the others have no such option)",
    ),
    used(
        "compression_level",
        false,
        "codec level: zstd 1-22, zlib 0-9 (32767 or -1: the codec's default; ShaleDB and RocksDB)",
    ),
    used(
        "min_level_to_compress",
        false,
        "levels above this one are not compressed, -1: every level is (ShaleDB and RocksDB)",
    ),
    used(
        "compression_max_dict_bytes",
        false,
        "largest zstd dictionary per table, 0: none (ShaleDB and RocksDB)",
    ),
    used(
        "compression_zstd_max_train_bytes",
        false,
        "bytes a zstd dictionary is trained on, 0: raw samples (ShaleDB and RocksDB)",
    ),
    used("block_size", false, "data block bytes"),
    used("cache_size", false, "block cache bytes"),
    used(
        "bloom_bits",
        false,
        "bloom filter bits per key (-1/0: none)",
    ),
    used("open_files", false, "max open files (-1: unlimited)"),
    used("write_buffer_size", false, "memtable bytes"),
    used(
        "max_write_buffer_number",
        false,
        "memtables before writes stall",
    ),
    used("target_file_size_base", false, "SST target size"),
    used(
        "target_file_size_multiplier",
        false,
        "SST size multiplier per level",
    ),
    used("max_bytes_for_level_base", false, "L1 target bytes"),
    used(
        "max_bytes_for_level_multiplier",
        false,
        "level size multiplier",
    ),
    used("num_levels", false, "number of levels"),
    used(
        "level0_file_num_compaction_trigger",
        false,
        "L0 files that start a compaction",
    ),
    used(
        "level0_slowdown_writes_trigger",
        false,
        "L0 files that slow writes",
    ),
    used(
        "level0_stop_writes_trigger",
        false,
        "L0 files that stop writes",
    ),
    used(
        "max_background_compactions",
        false,
        "background compaction threads (max with --max_background_jobs)",
    ),
    used("max_background_jobs", false, "background threads"),
    used(
        "subcompactions",
        false,
        "threads one compaction out of L0 splits into (max_subcompactions; 1: none)",
    ),
    used(
        "background_cpu_priority",
        false,
        "normal|low|idle: CPU priority of flush and compaction threads (ShaleDB; RocksDB low)",
    ),
    used(
        "disable_auto_compactions",
        true,
        "no automatic compactions (bulk load)",
    ),
    used("disable_wal", true, "write without the WAL"),
    used(
        "fill_by_ingestion",
        true,
        "fillseq/fillrandom/filluniquerandom: sort the writes and load them as external table \
         files (SstFileWriter + ingest; ShaleDB only, one thread)",
    ),
    used("sync", true, "fsync every write"),
    used("verify_checksum", true, "verify block checksums on reads"),
    used(
        "use_direct_reads",
        true,
        "O_DIRECT reads of table files (LevelDB and fjall have none)",
    ),
    used(
        "use_existing_db",
        true,
        "reuse the database at --db; fills are skipped",
    ),
    used(
        "db",
        false,
        "database directory (default: a fresh temp dir)",
    ),
    used(
        "seed",
        false,
        "seed base of the per-thread key generators (0: 1000)",
    ),
    used("histogram", true, "print latency histograms"),
    used(
        "stats_interval_seconds",
        false,
        "seconds between progress lines (default 5)",
    ),
    used(
        "stats_interval",
        false,
        "ops between progress lines (0: use --stats_interval_seconds)",
    ),
    used(
        "seek_nexts",
        false,
        "Next() calls after each seek in seekrandom",
    ),
    used(
        "readwritepercent",
        false,
        "percent reads in readrandomwriterandom",
    ),
    used(
        "mergereadpercent",
        false,
        "percent reads in readrandommergerandom",
    ),
    used(
        "prefix_size",
        false,
        "fixed-prefix extractor of N bytes, prefix blooms (ShaleDB, RocksDB; 0: none)",
    ),
    used(
        "prefix_same_as_start",
        true,
        "iterators stay within the seek target's prefix (ShaleDB, RocksDB)",
    ),
    used(
        "memtable_bloom_size_ratio",
        false,
        "memtable bloom filter size as a fraction of write_buffer_size (ShaleDB, RocksDB; 0: none; default: the engine's, ShaleDB 0.02, RocksDB 0)",
    ),
    used(
        "memtable_whole_key_filtering",
        true,
        "whole keys in the memtable bloom, not only prefixes (ShaleDB, RocksDB)",
    ),
    used(
        "memtable_hash_index",
        true,
        "a hash index of newest versions beside the memtable's skiplist (ShaleDB only; default on)",
    ),
    used(
        "wal_preallocate_size",
        false,
        "bytes a WAL's size is set ahead of its records, 0: none (ShaleDB only)",
    ),
    used(
        "writes_per_range_tombstone",
        false,
        "write benchmarks: a range delete every N writes (0: none)",
    ),
    used(
        "range_tombstone_width",
        false,
        "keys each range delete covers",
    ),
    used(
        "max_num_range_tombstones",
        false,
        "range deletes per thread at most (0: no limit)",
    ),
    used(
        "writes_before_delete_range",
        false,
        "writes before the first range delete",
    ),
    used(
        "merge_operator",
        false,
        "merge operator: uint64add (needed by mergerandom, readrandommergerandom)",
    ),
    used(
        "benchmark_write_rate_limit",
        false,
        "bytes/s cap on writes (0: none)",
    ),
    ignored(
        "cache_numshardbits",
        false,
        "ShaleDB's block cache shards itself",
    ),
    ignored(
        "memtablerep",
        false,
        "ShaleDB has one memtable (a concurrent skiplist)",
    ),
    ignored(
        "max_background_flushes",
        false,
        "ShaleDB flushes from its --max_background_jobs pool",
    ),
    ignored(
        "statistics",
        true,
        "ShaleDB always counts; use the `stats` benchmark",
    ),
    ignored(
        "stats_per_interval",
        true,
        "ShaleDB prints no per-interval DB stats",
    ),
    used(
        "mmap_read",
        true,
        "map table files and read blocks in place (ShaleDB's and RocksDB's allow_mmap_reads; \
         LevelDB always maps its tables, WiredTiger maps by default, fjall cannot: refused)",
    ),
    used(
        "mmap_write",
        false,
        "write WAL files through a shared memory map (ShaleDB's and RocksDB's \
         allow_mmap_writes; LevelDB, WiredTiger and fjall have no such switch: 1 is refused); \
         unset: the engine's default",
    ),
    ignored(
        "disable_seek_compaction",
        true,
        "ShaleDB has no seek-triggered compaction",
    ),
    ignored(
        "delete_obsolete_files_period_micros",
        false,
        "ShaleDB deletes obsolete files at once",
    ),
    ignored(
        "max_grandparent_overlap_factor",
        false,
        "removed from RocksDB; ShaleDB splits by target size",
    ),
    ignored(
        "source_compaction_factor",
        false,
        "removed from RocksDB; no ShaleDB equivalent",
    ),
    ignored(
        "disable_data_sync",
        true,
        "removed from RocksDB; use --sync / --disable_wal",
    ),
    used(
        "allow_concurrent_memtable_write",
        true,
        "writers of a group insert into the memtable at once (ShaleDB and RocksDB)",
    ),
    used(
        "level_compaction_dynamic_level_bytes",
        true,
        "dynamic level sizes (ShaleDB and RocksDB)",
    ),
    used(
        "cache_index_and_filter_blocks",
        true,
        "index and filter blocks in the block cache, high priority (ShaleDB and RocksDB)",
    ),
    used(
        "prepopulate_block_cache",
        true,
        "1: flushed data blocks go into the block cache as they are written (ShaleDB and RocksDB)",
    ),
    used(
        "index_type",
        false,
        "table index: 0 binary search (default), 2 two-level, partitioned (ShaleDB and RocksDB)",
    ),
    used(
        "partition_index",
        true,
        "two-level index, as --index_type=2 (ShaleDB and RocksDB)",
    ),
    used(
        "partition_index_and_filters",
        true,
        "two-level index and partitioned bloom filters (ShaleDB and RocksDB)",
    ),
    used(
        "metadata_block_size",
        false,
        "bytes of an index or filter partition, default 4096 (ShaleDB and RocksDB)",
    ),
    used(
        "memory_budget",
        false,
        "bytes bounding memtables and cached blocks together, 0: none (ShaleDB's \
         Options::memory_budget; RocksDB: 3/4 block cache + 1/4 db_write_buffer_size)",
    ),
    used(
        "use_compressed_secondary_cache",
        true,
        "a compressed secondary tier under the block cache, of --compressed_secondary_cache_size \
         bytes (ShaleDB only: RocksDB 7.8's C API cannot build one)",
    ),
    used(
        "compressed_secondary_cache_size",
        false,
        "bytes of the compressed secondary tier, default 32 MiB (as db_bench, it needs \
         --use_compressed_secondary_cache=1; given alone it is refused rather than ignored)",
    ),
    used(
        "num_column_families",
        false,
        "column families the keys are spread over by a hash of the key, default 1",
    ),
    used(
        "index_block_restart_interval",
        false,
        "index entries between restart points, default 1 (ShaleDB and RocksDB)",
    ),
    used(
        "data_block_index_type",
        false,
        "0: gets binary-search data blocks; 1: data blocks carry a hash index for gets \
         (RocksDB's kDataBlockBinaryAndHash); unset: the engine's default (0 in both)",
    ),
    used(
        "data_block_hash_table_util_ratio",
        false,
        "user keys per bucket of data-block hash indexes, default 0.75 (ShaleDB and RocksDB)",
    ),
    used(
        "use_direct_io_for_flush_and_compaction",
        true,
        "O_DIRECT writes of flush and compaction outputs (ShaleDB and RocksDB)",
    ),
    used(
        "enable_blob_files",
        true,
        "values of at least --min_blob_size in blob files (ShaleDB, RocksDB; fjall: KV separation)",
    ),
    used(
        "min_blob_size",
        false,
        "smallest value stored in a blob file, default 0: every value",
    ),
    used(
        "blob_file_size",
        false,
        "bytes at which a blob file is finished, default 268435456",
    ),
    used(
        "blob_compression_type",
        false,
        "codec of blob file values: none (default), snappy, lz4, zstd, zlib",
    ),
    used(
        "enable_blob_garbage_collection",
        true,
        "compactions relocate the oldest blob files' live values",
    ),
    used(
        "separate_blobs_at_write",
        true,
        "ShaleDB: large values go to blob files when written, the WAL holds references",
    ),
    used(
        "use_blob_cache",
        true,
        "cache blob values read, in the block cache (with --use_shared_block_and_blob_cache)",
    ),
    used(
        "use_shared_block_and_blob_cache",
        true,
        "the blob cache is the block cache (default true; false is refused: no engine here has a separate one)",
    ),
    used(
        "blob_garbage_collection_age_cutoff",
        false,
        "fraction of blob files, oldest first, that blob GC relocates, 0-1 (default 0.25)",
    ),
    used(
        "blob_garbage_collection_force_threshold",
        false,
        "garbage ratio of the oldest blob files that forces their GC, 0-1 (default 1: never)",
    ),
    ignored(
        "compressed_cache_size",
        false,
        "RocksDB's old compressed block cache (block_cache_compressed); ShaleDB's compressed \
         tier is --use_compressed_secondary_cache",
    ),
];

/// Looks a flag up.
pub fn spec(name: &str) -> Option<&'static FlagSpec> {
    FLAGS.iter().find(|f| f.name == name)
}

/// Splits argv into `name -> value` (last one wins) and the positional words.
pub fn parse_args<S: AsRef<str>>(
    args: &[S],
) -> Result<(BTreeMap<String, String>, Vec<String>), String> {
    let mut map = BTreeMap::new();
    let mut positional = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_ref();
        i += 1;
        let Some(body) = a.strip_prefix("--").or_else(|| {
            a.strip_prefix('-')
                .filter(|b| !b.is_empty() && !b.starts_with(|c: char| c.is_ascii_digit()))
        }) else {
            positional.push(a.to_string());
            continue;
        };
        let (name, value) = match body.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (body.to_string(), None),
        };
        let name = name.replace('-', "_");
        let Some(sp) = spec(&name) else {
            return Err(format!(
                "unknown flag --{name} (neither db_bench nor shale-bench knows it; see --help)"
            ));
        };
        let value = match value {
            Some(v) => v,
            None if sp.is_bool => "true".to_string(),
            None => {
                let Some(v) = args.get(i) else {
                    return Err(format!("flag --{name} needs a value"));
                };
                i += 1;
                v.as_ref().to_string()
            }
        };
        if sp.is_bool {
            parse_bool(&name, &value)?;
        }
        map.insert(name, value);
    }
    Ok((map, positional))
}

fn parse_bool(name: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" | "" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "flag --{name}: {v:?} is not a bool (1/0/true/false)"
        )),
    }
}

/// The typed db_bench flags.
#[derive(Debug, Clone)]
pub struct Flags {
    /// Benchmarks in order.
    pub benchmarks: Vec<String>,
    /// Engine name.
    pub engine: String,
    /// JSON output path.
    pub json: Option<String>,
    /// Keys.
    pub num: u64,
    /// Reads per thread (-1: num).
    pub reads: i64,
    /// Writes per thread (-1: num).
    pub writes: i64,
    /// Deletes per thread (-1: num).
    pub deletes: i64,
    /// Seconds per benchmark (0: count ops).
    pub duration: u64,
    /// Threads.
    pub threads: usize,
    /// Key bytes.
    pub key_size: usize,
    /// Value bytes.
    pub value_size: usize,
    /// Writes per batch.
    pub batch_size: usize,
    /// Compressibility.
    pub compression_ratio: f64,
    /// Database directory; None = temp dir.
    pub db: Option<String>,
    /// Seed base.
    pub seed: u64,
    /// Print histograms.
    pub histogram: bool,
    /// Progress period.
    pub stats_interval_seconds: f64,
    /// Progress every N ops (0: by time).
    pub stats_interval: u64,
    /// Nexts per seek.
    pub seek_nexts: usize,
    /// Read percent.
    pub readwritepercent: u32,
    /// Read percent of readrandommergerandom.
    pub mergereadpercent: u32,
    /// Range tombstones in write benchmarks: (every N writes, width in keys, at most this
    /// many per thread (0: no limit), writes before the first); N = 0 disables them.
    pub range_tombstones: RangeTombstoneFlags,
    /// Write bytes/s cap.
    pub write_rate_limit: u64,
    /// Fills build sorted external files and ingest them instead of writing (ShaleDB).
    pub fill_by_ingestion: bool,
    /// Engine options.
    pub opts: CommonOptions,
    /// Ignored flags that were given, with reasons.
    pub ignored: Vec<(String, &'static str)>,
}

/// The suite `shale-bench` runs with no arguments (finishes in well under a minute here).
pub const DEFAULT_BENCHMARKS: &str = "fillseq,fillrandom,overwrite,readrandom,readseq";

fn get<T: std::str::FromStr>(
    m: &BTreeMap<String, String>,
    name: &str,
    default: T,
) -> Result<T, String> {
    match m.get(name) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse::<T>()
            .map_err(|_| format!("flag --{name}: cannot parse {v:?}")),
    }
}

/// `--merge_operator`: only db_bench's `uint64add` (or none) is known.
fn merge_operator_flag(m: &BTreeMap<String, String>) -> Result<String, String> {
    let v = m.get("merge_operator").map_or("", |s| s.trim());
    match v.to_ascii_lowercase().as_str() {
        "" | "none" => Ok(String::new()),
        "uint64add" | "uint64addoperator" => Ok("uint64add".to_string()),
        other => Err(format!(
            "flag --merge_operator: {other:?} is not known (use uint64add)"
        )),
    }
}

/// db_bench's two flags of the compressed secondary cache as one size (0: none): the size
/// (default 32 MiB) counts only with `--use_compressed_secondary_cache`, as in db_bench; a
/// size given without it is refused, since db_bench would quietly run without the tier.
fn compressed_secondary_cache_size(m: &BTreeMap<String, String>) -> Result<u64, String> {
    let size: u64 = get(m, "compressed_secondary_cache_size", 32 << 20)?;
    match get_bool(m, "use_compressed_secondary_cache", false)? {
        true => Ok(size),
        false if m.contains_key("compressed_secondary_cache_size") => Err(
            "flag --compressed_secondary_cache_size: give --use_compressed_secondary_cache=1 too \
             (db_bench ignores the size without it)"
                .to_string(),
        ),
        false => Ok(0),
    }
}

fn get_bool(m: &BTreeMap<String, String>, name: &str, default: bool) -> Result<bool, String> {
    m.get(name).map_or(Ok(default), |v| parse_bool(name, v))
}

/// The codecs shale-bench names (every engine maps them, or refuses the ones it lacks).
const CODECS: [&str; 5] = ["none", "snappy", "lz4", "zstd", "zlib"];

/// A codec flag (`--compression_type`, `--blob_compression_type`), lower-cased.
fn codec_flag(m: &BTreeMap<String, String>, name: &str, default: &str) -> Result<String, String> {
    let codec = get(m, name, default.to_string())?.to_ascii_lowercase();
    if !CODECS.contains(&codec.as_str()) {
        return Err(format!(
            "flag --{name}: {codec:?} is not one of {}",
            CODECS.join(", ")
        ));
    }
    Ok(codec)
}

/// A fraction flag: a number from 0 to 1.
fn fraction_flag(m: &BTreeMap<String, String>, name: &str, default: f64) -> Result<f64, String> {
    let v: f64 = get(m, name, default)?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("flag --{name}: {v} is not between 0 and 1"));
    }
    Ok(v)
}

/// db_bench's integrated-BlobDB flags, with its defaults.
fn blob_flags(m: &BTreeMap<String, String>) -> Result<BlobOptions, String> {
    let d = BlobOptions::default();
    let file_size: u64 = get(m, "blob_file_size", d.file_size)?;
    if file_size == 0 {
        return Err("flag --blob_file_size must be at least 1 (bytes of a blob file)".into());
    }
    Ok(BlobOptions {
        enabled: get_bool(m, "enable_blob_files", d.enabled)?,
        min_size: get(m, "min_blob_size", d.min_size)?,
        file_size,
        compression: codec_flag(m, "blob_compression_type", &d.compression)?,
        gc: get_bool(m, "enable_blob_garbage_collection", d.gc)?,
        gc_age_cutoff: fraction_flag(m, "blob_garbage_collection_age_cutoff", d.gc_age_cutoff)?,
        gc_force_threshold: fraction_flag(
            m,
            "blob_garbage_collection_force_threshold",
            d.gc_force_threshold,
        )?,
        cache: blob_cache_flag(m)?,
        separate_at_write: get_bool(m, "separate_blobs_at_write", d.separate_at_write)?,
    })
}

/// `--use_blob_cache`, which this benchmark supports as db_bench's default shared form only.
fn blob_cache_flag(m: &BTreeMap<String, String>) -> Result<bool, String> {
    let cache = get_bool(m, "use_blob_cache", false)?;
    if cache && !get_bool(m, "use_shared_block_and_blob_cache", true)? {
        return Err(
            "flag --use_shared_block_and_blob_cache=0: a blob cache apart from the block cache \
             is not supported here (ShaleDB caches blobs in its block cache); leave it at 1"
                .into(),
        );
    }
    Ok(cache)
}

impl Flags {
    /// The database directory: `--db`, or `db` in a new temporary directory named `prefix...`
    /// (returned too: the directory is deleted when it drops).
    pub fn db_dir(
        &self,
        prefix: &str,
    ) -> Result<(std::path::PathBuf, Option<tempfile::TempDir>), String> {
        match &self.db {
            Some(p) => Ok((p.into(), None)),
            None => {
                let t = tempfile::Builder::new()
                    .prefix(prefix)
                    .tempdir()
                    .map_err(|e| format!("temp dir: {e}"))?;
                Ok((t.path().join("db"), Some(t)))
            }
        }
    }

    /// Parses db_bench flags (no positional words allowed).
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Flags, String> {
        let (m, pos) = parse_args(args)?;
        if let Some(p) = pos.first() {
            return Err(format!(
                "unexpected argument {p:?} (flags look like --name=value)"
            ));
        }
        Flags::from_map(&m)
    }

    /// Builds typed flags from a parsed map.
    pub fn from_map(m: &BTreeMap<String, String>) -> Result<Flags, String> {
        let d = CommonOptions::default();
        let benchmarks: Vec<String> = m
            .get("benchmarks")
            .map_or(DEFAULT_BENCHMARKS, |s| s.as_str())
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        let bloom: i64 = get(m, "bloom_bits", d.bloom_bits as i64)?;
        let compression = codec_flag(m, "compression_type", &d.compression)?;
        let mbc: u32 = get(m, "max_background_compactions", 0)?;
        let mbj: u32 = get(m, "max_background_jobs", d.max_background_jobs)?;
        // db_bench: --partition_index_and_filters partitions the index and the filters,
        // --partition_index the index only; either overrides --index_type.
        let partition_index_and_filters = get_bool(m, "partition_index_and_filters", false)?;
        let two_level_index = match get::<i64>(m, "index_type", 0)? {
            0 => false,
            2 => true,
            other => {
                return Err(format!(
                    "flag --index_type: {other} is not 0 (kBinarySearch) or 2 \
                     (kTwoLevelIndexSearch), the index types ShaleDB has"
                ))
            }
        } || partition_index_and_filters
            || get_bool(m, "partition_index", false)?;
        let opts = CommonOptions {
            cache_size: get(m, "cache_size", d.cache_size)?,
            write_buffer_size: get(m, "write_buffer_size", d.write_buffer_size)?,
            max_write_buffer_number: get(m, "max_write_buffer_number", d.max_write_buffer_number)?,
            bloom_bits: bloom.max(0) as u32,
            compression,
            bytes_per_sync: match m.contains_key("bytes_per_sync") {
                true => Some(get(m, "bytes_per_sync", 0u64)?),
                false => None,
            },
            wal_bytes_per_sync: match m.contains_key("wal_bytes_per_sync") {
                true => Some(get(m, "wal_bytes_per_sync", 0u64)?),
                false => None,
            },
            compression_level: match get::<i32>(m, "compression_level", 32767)? {
                32767 | -1 => None,
                level => Some(level),
            },
            min_level_to_compress: match get::<i64>(m, "min_level_to_compress", -1)? {
                -1 => None,
                level => Some(u32::try_from(level).map_err(|_| {
                    format!(
                        "--min_level_to_compress={level}: a level from 0, or -1 for every level"
                    )
                })?),
            },
            max_dict_bytes: get(m, "compression_max_dict_bytes", d.max_dict_bytes)?,
            zstd_max_train_bytes: get(
                m,
                "compression_zstd_max_train_bytes",
                d.zstd_max_train_bytes,
            )?,
            block_size: get(m, "block_size", d.block_size)?,
            open_files: get(m, "open_files", d.open_files)?,
            target_file_size_base: get(m, "target_file_size_base", d.target_file_size_base)?,
            target_file_size_multiplier: get(
                m,
                "target_file_size_multiplier",
                d.target_file_size_multiplier,
            )?,
            max_bytes_for_level_base: get(
                m,
                "max_bytes_for_level_base",
                d.max_bytes_for_level_base,
            )?,
            max_bytes_for_level_multiplier: get(
                m,
                "max_bytes_for_level_multiplier",
                d.max_bytes_for_level_multiplier,
            )?,
            num_levels: get(m, "num_levels", d.num_levels)?,
            level0_file_num_compaction_trigger: get(
                m,
                "level0_file_num_compaction_trigger",
                d.level0_file_num_compaction_trigger,
            )?,
            level0_slowdown_writes_trigger: get(
                m,
                "level0_slowdown_writes_trigger",
                d.level0_slowdown_writes_trigger,
            )?,
            level0_stop_writes_trigger: get(
                m,
                "level0_stop_writes_trigger",
                d.level0_stop_writes_trigger,
            )?,
            max_background_jobs: mbj.max(mbc),
            subcompactions: get(m, "subcompactions", d.subcompactions)?,
            background_cpu_priority: match m.get("background_cpu_priority").map(String::as_str) {
                None => None,
                Some("normal") => Some(shaledb::CpuPriority::Normal),
                Some("low") => Some(shaledb::CpuPriority::Low),
                Some("idle") => Some(shaledb::CpuPriority::Idle),
                Some(other) => {
                    return Err(format!(
                        "flag --background_cpu_priority: {other} is not normal, low or idle"
                    ))
                }
            },
            disable_auto_compactions: get_bool(
                m,
                "disable_auto_compactions",
                d.disable_auto_compactions,
            )?,
            disable_wal: get_bool(m, "disable_wal", d.disable_wal)?,
            sync: get_bool(m, "sync", d.sync)?,
            verify_checksums: get_bool(m, "verify_checksum", d.verify_checksums)?,
            use_direct_reads: get_bool(m, "use_direct_reads", d.use_direct_reads)?,
            mmap_read: get_bool(m, "mmap_read", d.mmap_read)?,
            mmap_write: m
                .get("mmap_write")
                .map(|v| parse_bool("mmap_write", v))
                .transpose()?,
            level_compaction_dynamic_level_bytes: get_bool(
                m,
                "level_compaction_dynamic_level_bytes",
                d.level_compaction_dynamic_level_bytes,
            )?,
            use_direct_io_for_flush_and_compaction: get_bool(
                m,
                "use_direct_io_for_flush_and_compaction",
                d.use_direct_io_for_flush_and_compaction,
            )?,
            cache_index_and_filter_blocks: get_bool(
                m,
                "cache_index_and_filter_blocks",
                d.cache_index_and_filter_blocks,
            )?,
            prepopulate_block_cache: match get::<u32>(m, "prepopulate_block_cache", 0)? {
                0 => false,
                1 => true,
                other => {
                    return Err(format!(
                        "flag --prepopulate_block_cache: {other} is not 0 (off) or 1 (flush only)"
                    ))
                }
            },
            two_level_index,
            partition_filters: partition_index_and_filters,
            metadata_block_size: get(m, "metadata_block_size", d.metadata_block_size)?,
            index_block_restart_interval: get(
                m,
                "index_block_restart_interval",
                d.index_block_restart_interval,
            )?,
            data_block_hash_index: match m.get("data_block_index_type").map(|v| v.trim()) {
                None => None,
                Some("0") => Some(false),
                Some("1") => Some(true),
                Some(other) => {
                    return Err(format!(
                        "flag --data_block_index_type: {other:?} is not 0 (binary search) or 1 \
                         (binary search and hash)"
                    ))
                }
            },
            data_block_hash_table_util_ratio: get(
                m,
                "data_block_hash_table_util_ratio",
                d.data_block_hash_table_util_ratio,
            )?,
            memory_budget: get(m, "memory_budget", d.memory_budget)?,
            compressed_secondary_cache_size: compressed_secondary_cache_size(m)?,
            num_column_families: match get(m, "num_column_families", d.num_column_families)? {
                0 => return Err("flag --num_column_families: at least 1".to_string()),
                n => n,
            },
            use_existing_db: get_bool(m, "use_existing_db", d.use_existing_db)?,
            merge_operator: merge_operator_flag(m)?,
            prefix_size: get(m, "prefix_size", d.prefix_size)?,
            prefix_same_as_start: get_bool(m, "prefix_same_as_start", d.prefix_same_as_start)?,
            memtable_bloom_size_ratio: m
                .contains_key("memtable_bloom_size_ratio")
                .then(|| get(m, "memtable_bloom_size_ratio", 0.0))
                .transpose()?,
            memtable_whole_key_filtering: m
                .contains_key("memtable_whole_key_filtering")
                .then(|| get_bool(m, "memtable_whole_key_filtering", false))
                .transpose()?,
            memtable_hash_index: m
                .contains_key("memtable_hash_index")
                .then(|| get_bool(m, "memtable_hash_index", true))
                .transpose()?,
            allow_concurrent_memtable_write: m
                .contains_key("allow_concurrent_memtable_write")
                .then(|| get_bool(m, "allow_concurrent_memtable_write", true))
                .transpose()?,
            wal_preallocate_size: m
                .contains_key("wal_preallocate_size")
                .then(|| get(m, "wal_preallocate_size", 0u64))
                .transpose()?,
            blob: blob_flags(m)?,
        };
        let threads: usize = get(m, "threads", 1)?;
        let ignored = m
            .keys()
            .filter_map(|k| match spec(k).map(|s| s.usage) {
                Some(FlagUse::Ignored(why)) => Some((k.clone(), why)),
                _ => None,
            })
            .collect();
        let seed: u64 = get(m, "seed", 0)?;
        let f = Flags {
            benchmarks,
            engine: get(m, "engine", "shaledb".to_string())?,
            json: m.get("json").cloned(),
            num: get(m, "num", 1_000_000)?,
            reads: get(m, "reads", -1)?,
            writes: get(m, "writes", -1)?,
            deletes: get(m, "deletes", -1)?,
            duration: get(m, "duration", 0)?,
            threads: threads.max(1),
            key_size: get(m, "key_size", 16)?,
            value_size: get(m, "value_size", 100)?,
            batch_size: get::<usize>(m, "batch_size", 1)?.max(1),
            compression_ratio: get(m, "compression_ratio", 0.5)?,
            db: m.get("db").cloned(),
            seed: if seed == 0 { 1000 } else { seed },
            histogram: get_bool(m, "histogram", false)?,
            stats_interval_seconds: get(m, "stats_interval_seconds", 5.0)?,
            stats_interval: get(m, "stats_interval", 0)?,
            seek_nexts: get(m, "seek_nexts", 0)?,
            readwritepercent: get::<u32>(m, "readwritepercent", 90)?.min(100),
            mergereadpercent: get::<u32>(m, "mergereadpercent", 70)?.min(100),
            range_tombstones: RangeTombstoneFlags {
                every: get(m, "writes_per_range_tombstone", 0)?,
                width: get(m, "range_tombstone_width", 100)?,
                max: get(m, "max_num_range_tombstones", 0)?,
                after: get(m, "writes_before_delete_range", 0)?,
            },
            write_rate_limit: get(m, "benchmark_write_rate_limit", 0)?,
            fill_by_ingestion: get_bool(m, "fill_by_ingestion", false)?,
            opts,
            ignored,
        };
        if f.key_size == 0 {
            return Err("flag --key_size must be at least 1".into());
        }
        if !(f.compression_ratio > 0.0 && f.compression_ratio.is_finite()) {
            return Err("flag --compression_ratio must be > 0".into());
        }
        Ok(f)
    }

    /// The "ignored flags" lines printed once at start.
    pub fn ignored_report(&self) -> Vec<String> {
        self.ignored
            .iter()
            .map(|(n, why)| format!("Ignored flag --{n}: {why}"))
            .collect()
    }
}

/// Help text listing every flag.
pub fn help() -> String {
    let mut s = String::from(
        "shale-bench: db_bench-compatible benchmarks for ShaleDB and its peers\n\n\
         usage: shale-bench [--flag=value ...]            db_bench mode\n       \
         shale-bench ycsb --workload=a --phase=load,run ...\n       \
         shale-bench compare --suite=seed-small --engines=shaledb,rocksdb\n       \
         shale-bench tpch --rows=N ...                     T1 lineitem workload\n\n\
         db_bench flags:\n",
    );
    for f in FLAGS {
        let tag = match f.usage {
            FlagUse::Used => "",
            FlagUse::Ignored(_) => "(ignored) ",
        };
        s.push_str(&format!("  --{:<40} {tag}{}\n", f.name, f.help));
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn db_dir_is_the_flag_or_db_in_a_temporary_directory() {
        let f = Flags::parse(&["--db=/some/where"]).unwrap();
        let (path, tmp) = f.db_dir("shale-x-").unwrap();
        assert_eq!((path, tmp.is_none()), ("/some/where".into(), true));
        let f = Flags::parse::<&str>(&[]).unwrap();
        let (path, tmp) = f.db_dir("shale-x-").unwrap();
        let tmp = tmp.unwrap();
        assert_eq!(path, tmp.path().join("db"));
        assert!(tmp.path().is_dir());
        let name = tmp
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert!(name.starts_with("shale-x-"), "{name}");
    }

    #[test]
    fn partitioned_index_flags_parse_as_db_bench_sets_them() {
        let parts = |args: &[&str]| {
            let o = Flags::parse(args).unwrap().opts;
            (
                o.two_level_index,
                o.partition_filters,
                o.metadata_block_size,
            )
        };
        assert_eq!(parts(&[]), (false, false, 4096));
        assert_eq!(parts(&["--index_type=0"]), (false, false, 4096));
        assert_eq!(
            parts(&["--index_type=2", "--metadata_block_size=8192"]),
            (true, false, 8192)
        );
        assert_eq!(parts(&["--partition_index"]), (true, false, 4096));
        assert_eq!(
            parts(&["--partition_index_and_filters"]),
            (true, true, 4096)
        );
        // As in db_bench, the partition flags override --index_type.
        assert_eq!(
            parts(&["--index_type=0", "--partition_index_and_filters=1"]),
            (true, true, 4096)
        );
        assert_eq!(
            parts(&["--partition_index_and_filters=0", "--partition_index=false"]),
            (false, false, 4096)
        );
        // Used, not ignored.
        let f = Flags::parse(&["--partition_index", "--metadata_block_size=2048"]).unwrap();
        assert!(f.ignored.is_empty(), "{:?}", f.ignored);
        // kHashSearch (1), kBinarySearchWithFirstKey (3) and nonsense are refused by name.
        for bad in ["1", "3", "-1"] {
            let e = Flags::parse(&[format!("--index_type={bad}")]).unwrap_err();
            assert!(e.starts_with(&format!("flag --index_type: {bad} ")), "{e}");
        }
        assert!(Flags::parse(&["--index_type=two"]).is_err());
        assert!(Flags::parse(&["--metadata_block_size=-1"]).is_err());
        assert!(Flags::parse(&["--partition_index=maybe"]).is_err());
    }

    #[test]
    fn compressed_secondary_cache_flags_are_used_as_db_bench_reads_them() {
        let f = Flags::parse(&[
            "--use_compressed_secondary_cache=1",
            "--compressed_secondary_cache_size=1048576",
        ])
        .unwrap();
        assert!(f.ignored.is_empty(), "{:?}", f.ignored);
        assert_eq!(f.opts.compressed_secondary_cache_size, 1 << 20);
        let f = Flags::parse(&["--use_compressed_secondary_cache"]).unwrap();
        assert_eq!(f.opts.compressed_secondary_cache_size, 32 << 20);
        let d = Flags::parse::<&str>(&[]).unwrap();
        assert_eq!(d.opts.compressed_secondary_cache_size, 0);
        let e = Flags::parse(&["--compressed_secondary_cache_size=1048576"]).unwrap_err();
        assert!(e.contains("--use_compressed_secondary_cache=1"), "{e}");
        assert!(Flags::parse(&[
            "--use_compressed_secondary_cache",
            "--compressed_secondary_cache_size=-1"
        ])
        .is_err());
    }

    #[test]
    fn memory_budget_and_column_families_are_used() {
        let f = Flags::parse(&["--memory_budget=268435456", "--num_column_families=4"]).unwrap();
        assert_eq!(f.opts.memory_budget, 256 << 20);
        assert_eq!(f.opts.num_column_families, 4);
        let d = Flags::parse::<&str>(&[]).unwrap();
        assert_eq!((d.opts.memory_budget, d.opts.num_column_families), (0, 1));
        assert!(Flags::parse(&["--num_column_families=0"]).is_err());
    }

    #[test]
    fn index_block_restart_interval_is_used() {
        let f = Flags::parse(&["--index_block_restart_interval=16"]).unwrap();
        assert!(f.ignored.is_empty(), "{:?}", f.ignored);
        assert_eq!(f.opts.index_block_restart_interval, 16);
        let default = Flags::parse::<&str>(&[]).unwrap();
        assert_eq!(default.opts.index_block_restart_interval, 1);
        assert!(Flags::parse(&["--index_block_restart_interval=-1"]).is_err());
    }

    #[test]
    fn data_block_index_flags_are_used() {
        let f = Flags::parse(&[
            "--data_block_index_type=1",
            "--data_block_hash_table_util_ratio=0.5",
        ])
        .unwrap();
        assert!(f.ignored.is_empty(), "{:?}", f.ignored);
        assert_eq!(f.opts.data_block_hash_index, Some(true));
        assert_eq!(f.opts.data_block_hash_table_util_ratio, 0.5);
        let off = Flags::parse(&["--data_block_index_type=0"]).unwrap();
        assert_eq!(off.opts.data_block_hash_index, Some(false));
        let default = Flags::parse::<&str>(&[]).unwrap();
        assert_eq!(default.opts.data_block_hash_index, None);
        assert_eq!(default.opts.data_block_hash_table_util_ratio, 0.75);
        let e = Flags::parse(&["--data_block_index_type=2"]).unwrap_err();
        assert!(e.contains("is not 0 (binary search) or 1"), "{e}");
    }

    #[test]
    fn blob_flags_parse_with_db_bench_defaults_and_checked_ranges() {
        let blob = |args: &[&str]| Flags::parse(args).unwrap().opts.blob;
        assert_eq!(
            blob(&[]),
            BlobOptions {
                enabled: false,
                min_size: 0,
                file_size: 268_435_456,
                compression: "none".into(),
                gc: false,
                gc_age_cutoff: 0.25,
                gc_force_threshold: 1.0,
                cache: false,
                separate_at_write: false,
            }
        );
        let all = [
            "--enable_blob_files",
            "--min_blob_size=4096",
            "--blob_file_size=1048576",
            "--blob_compression_type=ZSTD",
            "--enable_blob_garbage_collection=1",
            "--blob_garbage_collection_age_cutoff=0.5",
            "--blob_garbage_collection_force_threshold=0",
            "--use_blob_cache",
            "--use_shared_block_and_blob_cache=1",
            "--separate_blobs_at_write",
        ];
        assert_eq!(
            blob(&all),
            BlobOptions {
                enabled: true,
                min_size: 4096,
                file_size: 1 << 20,
                compression: "zstd".into(),
                gc: true,
                gc_age_cutoff: 0.5,
                gc_force_threshold: 0.0,
                cache: true,
                separate_at_write: true,
            }
        );
        // A blob cache apart from the block cache: refused, naming the flag.
        let e =
            Flags::parse(&["--use_blob_cache", "--use_shared_block_and_blob_cache=0"]).unwrap_err();
        assert!(
            e.starts_with("flag --use_shared_block_and_blob_cache=0"),
            "{e}"
        );
        // Without --use_blob_cache the sharing flag changes nothing.
        assert!(!blob(&["--use_shared_block_and_blob_cache=0"]).cache);
        // Used, not ignored.
        assert!(Flags::parse(&all).unwrap().ignored.is_empty());
        assert!(!blob(&["--enable_blob_files=false"]).enabled);
        for (bad, flag) in [
            ("--blob_compression_type=bzip2", "blob_compression_type"),
            ("--blob_file_size=0", "blob_file_size"),
            ("--min_blob_size=-1", "min_blob_size"),
            (
                "--blob_garbage_collection_age_cutoff=1.5",
                "blob_garbage_collection_age_cutoff",
            ),
            (
                "--blob_garbage_collection_age_cutoff=-0.1",
                "blob_garbage_collection_age_cutoff",
            ),
            (
                "--blob_garbage_collection_force_threshold=2",
                "blob_garbage_collection_force_threshold",
            ),
            (
                "--blob_garbage_collection_force_threshold=nan",
                "blob_garbage_collection_force_threshold",
            ),
            ("--enable_blob_files=maybe", "enable_blob_files"),
        ] {
            let e = Flags::parse(&[bad]).unwrap_err();
            assert!(e.starts_with(&format!("flag --{flag}")), "{bad}: {e}");
        }
        // --compression_type keeps its message.
        let e = Flags::parse(&["--compression_type=bzip2"]).unwrap_err();
        assert_eq!(
            e,
            "flag --compression_type: \"bzip2\" is not one of none, snappy, lz4, zstd, zlib"
        );
    }
}

/// db_bench's range-tombstone flags for write benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RangeTombstoneFlags {
    /// A range delete after every this many writes (0: none).
    pub every: u64,
    /// Keys each range delete covers, from a random key.
    pub width: u64,
    /// Range deletes per thread at most (0: no limit).
    pub max: u64,
    /// Writes before the first range delete.
    pub after: u64,
}

impl RangeTombstoneFlags {
    /// Whether write benchmarks issue range deletes at all.
    pub fn enabled(&self) -> bool {
        self.every > 0
    }

    /// True if a range delete follows write number `written` (1-based) of a thread that has
    /// issued `issued` so far (db_bench's rule).
    pub fn due(&self, written: u64, issued: u64) -> bool {
        self.every > 0
            && written > self.after
            && (written - self.after).is_multiple_of(self.every)
            && (self.max == 0 || issued < self.max)
    }
}

#[cfg(test)]
mod range_tombstone_tests {
    use super::RangeTombstoneFlags;

    #[test]
    fn range_deletes_come_every_n_writes_after_the_first_ones_up_to_the_limit() {
        let f = RangeTombstoneFlags {
            every: 10,
            width: 100,
            max: 2,
            after: 5,
        };
        let due: Vec<u64> = (1..=60)
            .filter(|&w| f.due(w, (w.saturating_sub(6)) / 10))
            .collect();
        assert_eq!(due, vec![15, 25]);
        assert!(!RangeTombstoneFlags::default().due(10, 0));
    }
}
