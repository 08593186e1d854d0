//! RocksDB (Debian `librocksdb-dev` 7.8) through its C API, `rocksdb/c.h`.

use super::capi::{shared_c_api, CApi, CDb, Handle, ReadOptions, WriteOptions};
use super::{c_path, clamp_int, clamp_size, prepare_dir, take_err};
use crate::engine::{BatchOp, BlobOptions, CommonOptions, Engine, EngineIterator, EngineResult};
use std::ffi::{c_char, c_int, c_uchar};
use std::path::Path;
use std::time::Duration;

/// Opaque C handles and the declarations of the functions used, from `rocksdb/c.h` 7.8.
#[allow(non_camel_case_types)]
mod ffi {
    pub use super::super::capi::{
        Db as rocksdb_t, ReadOptions as rocksdb_readoptions_t, WriteBatch as rocksdb_writebatch_t,
        WriteOptions as rocksdb_writeoptions_t,
    };
    use std::ffi::{c_char, c_double, c_int, c_uchar};
    opaque!(
        rocksdb_options_t,
        rocksdb_block_based_table_options_t,
        rocksdb_cache_t,
        rocksdb_filterpolicy_t,
        rocksdb_flushoptions_t,
        rocksdb_compactoptions_t,
        rocksdb_slicetransform_t,
        rocksdb_column_family_handle_t,
        rocksdb_env_t,
        rocksdb_pinnableslice_t
    );

    /// `BottommostLevelCompaction::kForceOptimized` (rocksdb/options.h).
    pub const FORCE_OPTIMIZED: c_uchar = 3;

    pub const NO_COMPRESSION: c_int = 0;
    pub const SNAPPY_COMPRESSION: c_int = 1;
    pub const ZLIB_COMPRESSION: c_int = 2;
    pub const LZ4_COMPRESSION: c_int = 4;
    pub const ZSTD_COMPRESSION: c_int = 7;

    /// `rocksdb_block_based_table_index_type_two_level_index_search` (`kTwoLevelIndexSearch`).
    pub const TWO_LEVEL_INDEX_SEARCH: c_int = 2;

    extern "C" {
        pub fn rocksdb_options_set_db_write_buffer_size(o: *mut rocksdb_options_t, v: usize);
        pub fn rocksdb_create_column_family(
            db: *mut rocksdb_t,
            o: *const rocksdb_options_t,
            name: *const c_char,
            errptr: *mut *mut c_char,
        ) -> *mut rocksdb_column_family_handle_t;
        pub fn rocksdb_column_family_handle_destroy(h: *mut rocksdb_column_family_handle_t);
        pub fn rocksdb_put_cf(
            db: *mut rocksdb_t,
            o: *const rocksdb_writeoptions_t,
            cf: *mut rocksdb_column_family_handle_t,
            k: *const c_char,
            klen: usize,
            v: *const c_char,
            vlen: usize,
            errptr: *mut *mut c_char,
        );
        pub fn rocksdb_delete_cf(
            db: *mut rocksdb_t,
            o: *const rocksdb_writeoptions_t,
            cf: *mut rocksdb_column_family_handle_t,
            k: *const c_char,
            klen: usize,
            errptr: *mut *mut c_char,
        );
        pub fn rocksdb_get_pinned(
            db: *mut rocksdb_t,
            o: *const rocksdb_readoptions_t,
            k: *const c_char,
            klen: usize,
            errptr: *mut *mut c_char,
        ) -> *mut rocksdb_pinnableslice_t;
        pub fn rocksdb_get_pinned_cf(
            db: *mut rocksdb_t,
            o: *const rocksdb_readoptions_t,
            cf: *mut rocksdb_column_family_handle_t,
            k: *const c_char,
            klen: usize,
            errptr: *mut *mut c_char,
        ) -> *mut rocksdb_pinnableslice_t;
        pub fn rocksdb_pinnableslice_value(
            v: *const rocksdb_pinnableslice_t,
            vlen: *mut usize,
        ) -> *const c_char;
        pub fn rocksdb_pinnableslice_destroy(v: *mut rocksdb_pinnableslice_t);
        pub fn rocksdb_get_cf(
            db: *mut rocksdb_t,
            o: *const rocksdb_readoptions_t,
            cf: *mut rocksdb_column_family_handle_t,
            k: *const c_char,
            klen: usize,
            vlen: *mut usize,
            errptr: *mut *mut c_char,
        ) -> *mut c_char;
        pub fn rocksdb_flush_cf(
            db: *mut rocksdb_t,
            o: *const rocksdb_flushoptions_t,
            cf: *mut rocksdb_column_family_handle_t,
            errptr: *mut *mut c_char,
        );
        pub fn rocksdb_writebatch_create() -> *mut rocksdb_writebatch_t;
        pub fn rocksdb_writebatch_destroy(b: *mut rocksdb_writebatch_t);
        pub fn rocksdb_writebatch_delete_range(
            b: *mut rocksdb_writebatch_t,
            start_key: *const c_char,
            start_key_len: usize,
            end_key: *const c_char,
            end_key_len: usize,
        );
        pub fn rocksdb_write(
            db: *mut rocksdb_t,
            options: *const rocksdb_writeoptions_t,
            batch: *mut rocksdb_writebatch_t,
            errptr: *mut *mut c_char,
        );
        pub fn rocksdb_multi_get(
            db: *mut rocksdb_t,
            options: *const rocksdb_readoptions_t,
            num_keys: usize,
            keys_list: *const *const c_char,
            keys_list_sizes: *const usize,
            values_list: *mut *mut c_char,
            values_list_sizes: *mut usize,
            errs: *mut *mut c_char,
        );
        pub fn rocksdb_merge(
            db: *mut rocksdb_t,
            options: *const rocksdb_writeoptions_t,
            key: *const c_char,
            keylen: usize,
            val: *const c_char,
            vallen: usize,
            errptr: *mut *mut c_char,
        );
        pub fn rocksdb_flush(
            db: *mut rocksdb_t,
            options: *const rocksdb_flushoptions_t,
            errptr: *mut *mut c_char,
        );

        pub fn rocksdb_options_create() -> *mut rocksdb_options_t;
        pub fn rocksdb_options_destroy(o: *mut rocksdb_options_t);
        pub fn rocksdb_options_set_create_if_missing(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_paranoid_checks(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_write_buffer_size(o: *mut rocksdb_options_t, v: usize);
        pub fn rocksdb_options_set_max_write_buffer_number(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_max_open_files(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_compression(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_compression_per_level(
            o: *mut rocksdb_options_t,
            levels: *const c_int,
            num_levels: usize,
        );
        pub fn rocksdb_options_set_compression_options(
            o: *mut rocksdb_options_t,
            w_bits: c_int,
            level: c_int,
            strategy: c_int,
            max_dict_bytes: c_int,
        );
        pub fn rocksdb_options_set_compression_options_zstd_max_train_bytes(
            o: *mut rocksdb_options_t,
            v: c_int,
        );
        pub fn rocksdb_options_set_num_levels(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_level0_file_num_compaction_trigger(
            o: *mut rocksdb_options_t,
            v: c_int,
        );
        pub fn rocksdb_options_set_level0_slowdown_writes_trigger(
            o: *mut rocksdb_options_t,
            v: c_int,
        );
        pub fn rocksdb_options_set_level0_stop_writes_trigger(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_target_file_size_base(o: *mut rocksdb_options_t, v: u64);
        pub fn rocksdb_options_set_target_file_size_multiplier(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_max_bytes_for_level_base(o: *mut rocksdb_options_t, v: u64);
        pub fn rocksdb_options_set_max_bytes_for_level_multiplier(
            o: *mut rocksdb_options_t,
            v: c_double,
        );
        pub fn rocksdb_options_set_max_background_jobs(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_max_subcompactions(o: *mut rocksdb_options_t, v: u32);
        pub fn rocksdb_create_default_env() -> *mut rocksdb_env_t;
        pub fn rocksdb_env_lower_thread_pool_cpu_priority(env: *mut rocksdb_env_t);
        pub fn rocksdb_env_destroy(env: *mut rocksdb_env_t);
        pub fn rocksdb_options_set_disable_auto_compactions(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_use_direct_reads(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_allow_mmap_reads(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_allow_mmap_writes(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_bytes_per_sync(o: *mut rocksdb_options_t, v: u64);
        pub fn rocksdb_options_set_wal_bytes_per_sync(o: *mut rocksdb_options_t, v: u64);
        pub fn rocksdb_options_set_level_compaction_dynamic_level_bytes(
            o: *mut rocksdb_options_t,
            v: c_uchar,
        );
        pub fn rocksdb_options_set_allow_concurrent_memtable_write(
            o: *mut rocksdb_options_t,
            v: c_uchar,
        );
        pub fn rocksdb_options_set_use_direct_io_for_flush_and_compaction(
            o: *mut rocksdb_options_t,
            v: c_uchar,
        );
        pub fn rocksdb_options_set_enable_blob_files(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_min_blob_size(o: *mut rocksdb_options_t, v: u64);
        pub fn rocksdb_options_set_blob_file_size(o: *mut rocksdb_options_t, v: u64);
        pub fn rocksdb_options_set_blob_compression_type(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_enable_blob_gc(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_blob_gc_age_cutoff(o: *mut rocksdb_options_t, v: c_double);
        pub fn rocksdb_options_set_blob_gc_force_threshold(o: *mut rocksdb_options_t, v: c_double);
        pub fn rocksdb_options_set_blob_cache(
            o: *mut rocksdb_options_t,
            cache: *mut rocksdb_cache_t,
        );
        pub fn rocksdb_options_set_block_based_table_factory(
            o: *mut rocksdb_options_t,
            t: *mut rocksdb_block_based_table_options_t,
        );
        pub fn rocksdb_get_options_from_string(
            base: *const rocksdb_options_t,
            opts: *const c_char,
            new_options: *mut rocksdb_options_t,
            errptr: *mut *mut c_char,
        );

        pub fn rocksdb_block_based_options_create() -> *mut rocksdb_block_based_table_options_t;
        pub fn rocksdb_block_based_options_destroy(t: *mut rocksdb_block_based_table_options_t);
        pub fn rocksdb_block_based_options_set_block_size(
            t: *mut rocksdb_block_based_table_options_t,
            v: usize,
        );
        /// Takes ownership of `policy`.
        pub fn rocksdb_block_based_options_set_filter_policy(
            t: *mut rocksdb_block_based_table_options_t,
            policy: *mut rocksdb_filterpolicy_t,
        );
        /// Shares `cache` (a shared_ptr copy); the handle is still ours to destroy.
        pub fn rocksdb_block_based_options_set_block_cache(
            t: *mut rocksdb_block_based_table_options_t,
            cache: *mut rocksdb_cache_t,
        );
        pub fn rocksdb_block_based_options_set_cache_index_and_filter_blocks(
            t: *mut rocksdb_block_based_table_options_t,
            v: c_uchar,
        );
        pub fn rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(
            t: *mut rocksdb_block_based_table_options_t,
            v: c_uchar,
        );
        /// `index_type`: 0 binary search, 1 hash search, 2 two-level index search.
        pub fn rocksdb_block_based_options_set_index_type(
            t: *mut rocksdb_block_based_table_options_t,
            v: c_int,
        );
        pub fn rocksdb_block_based_options_set_partition_filters(
            t: *mut rocksdb_block_based_table_options_t,
            v: c_uchar,
        );
        pub fn rocksdb_block_based_options_set_metadata_block_size(
            t: *mut rocksdb_block_based_table_options_t,
            v: u64,
        );
        pub fn rocksdb_block_based_options_set_index_block_restart_interval(
            t: *mut rocksdb_block_based_table_options_t,
            v: c_int,
        );
        pub fn rocksdb_block_based_options_set_data_block_index_type(
            t: *mut rocksdb_block_based_table_options_t,
            v: c_int,
        );
        pub fn rocksdb_block_based_options_set_data_block_hash_ratio(
            t: *mut rocksdb_block_based_table_options_t,
            v: f64,
        );
        pub fn rocksdb_block_based_options_set_pin_top_level_index_and_filter(
            t: *mut rocksdb_block_based_table_options_t,
            v: c_uchar,
        );
        pub fn rocksdb_filterpolicy_create_bloom_full(
            bits_per_key: c_double,
        ) -> *mut rocksdb_filterpolicy_t;
        pub fn rocksdb_cache_create_lru(capacity: usize) -> *mut rocksdb_cache_t;
        pub fn rocksdb_cache_destroy(cache: *mut rocksdb_cache_t);

        pub fn rocksdb_readoptions_create() -> *mut rocksdb_readoptions_t;
        pub fn rocksdb_readoptions_set_verify_checksums(o: *mut rocksdb_readoptions_t, v: c_uchar);
        pub fn rocksdb_readoptions_set_prefix_same_as_start(
            o: *mut rocksdb_readoptions_t,
            v: c_uchar,
        );
        pub fn rocksdb_slicetransform_create_fixed_prefix(
            n: usize,
        ) -> *mut rocksdb_slicetransform_t;
        pub fn rocksdb_options_set_prefix_extractor(
            o: *mut rocksdb_options_t,
            t: *mut rocksdb_slicetransform_t,
        );
        pub fn rocksdb_options_set_memtable_prefix_bloom_size_ratio(
            o: *mut rocksdb_options_t,
            ratio: f64,
        );
        pub fn rocksdb_options_set_memtable_whole_key_filtering(
            o: *mut rocksdb_options_t,
            v: c_uchar,
        );
        pub fn rocksdb_writeoptions_create() -> *mut rocksdb_writeoptions_t;
        pub fn rocksdb_writeoptions_set_sync(o: *mut rocksdb_writeoptions_t, v: c_uchar);
        pub fn rocksdb_writeoptions_disable_WAL(o: *mut rocksdb_writeoptions_t, disable: c_int);
        pub fn rocksdb_flushoptions_create() -> *mut rocksdb_flushoptions_t;
        pub fn rocksdb_flushoptions_destroy(o: *mut rocksdb_flushoptions_t);
        pub fn rocksdb_flushoptions_set_wait(o: *mut rocksdb_flushoptions_t, v: c_uchar);
        pub fn rocksdb_compactoptions_create() -> *mut rocksdb_compactoptions_t;
        pub fn rocksdb_compactoptions_destroy(o: *mut rocksdb_compactoptions_t);
        pub fn rocksdb_compactoptions_set_bottommost_level_compaction(
            o: *mut rocksdb_compactoptions_t,
            v: c_uchar,
        );
        pub fn rocksdb_compact_range_opt(
            db: *mut rocksdb_t,
            o: *mut rocksdb_compactoptions_t,
            start_key: *const c_char,
            start_key_len: usize,
            limit_key: *const c_char,
            limit_key_len: usize,
        );
    }
}

const NAME: &str = "rocksdb";

/// RocksDB's `compression_per_level` for `--min_level_to_compress=first`: none on the levels
/// above `first`, `compression` from it down, one entry for each of `num_levels`.
fn codecs_from_level(first: u32, compression: c_int, num_levels: u32) -> Vec<c_int> {
    (0..num_levels)
        .map(|level| {
            if level < first {
                ffi::NO_COMPRESSION
            } else {
                compression
            }
        })
        .collect()
}

/// Maps a codec name onto RocksDB's compression constant.
fn codec(name: &str) -> EngineResult<c_int> {
    Ok(match name {
        "none" => ffi::NO_COMPRESSION,
        "snappy" => ffi::SNAPPY_COMPRESSION,
        "zlib" => ffi::ZLIB_COMPRESSION,
        "lz4" => ffi::LZ4_COMPRESSION,
        "zstd" => ffi::ZSTD_COMPRESSION,
        other => {
            return Err(format!(
                "rocksdb: unsupported compression type {other:?} (none, snappy, lz4, zstd, zlib)"
            ))
        }
    })
}

/// db_bench's blob flags onto RocksDB's integrated BlobDB options, one to one.
fn set_blob_options(options: &Handle<ffi::rocksdb_options_t>, b: &BlobOptions) -> EngineResult<()> {
    let compression = codec(&b.compression).map_err(|_| {
        format!(
            "rocksdb: unsupported blob compression type {:?}",
            b.compression
        )
    })?;
    let o = options.ptr();
    // SAFETY: setters of plain fields on a live options object the Handle owns.
    unsafe {
        ffi::rocksdb_options_set_enable_blob_files(o, c_uchar::from(b.enabled));
        ffi::rocksdb_options_set_min_blob_size(o, b.min_size);
        ffi::rocksdb_options_set_blob_file_size(o, b.file_size);
        ffi::rocksdb_options_set_blob_compression_type(o, compression);
        ffi::rocksdb_options_set_enable_blob_gc(o, c_uchar::from(b.gc));
        ffi::rocksdb_options_set_blob_gc_age_cutoff(o, b.gc_age_cutoff);
        ffi::rocksdb_options_set_blob_gc_force_threshold(o, b.gc_force_threshold);
    }
    Ok(())
}

shared_c_api!(
    /// `rocksdb/c.h`'s functions for the shapes it shares with LevelDB's C API.
    RocksApi,
    "rocksdb",
    ffi::rocksdb_options_t
);

/// An open RocksDB database and the option objects it was opened with. Field order matters:
/// the database closes first, then the options and the cache handle are destroyed.
pub struct RocksEngine {
    /// The families beside the default one (`--num_column_families`); destroyed before the
    /// database closes (fields drop in order).
    cfs: Families,
    db: CDb<RocksApi>,
    _options: Handle<ffi::rocksdb_options_t>,
    _cache: Handle<ffi::rocksdb_cache_t>,
    auto_compactions: bool,
}

// SAFETY: the database is Send and Sync (see CDb); after open the options are never touched
// again, and the block cache is internally synchronised.
unsafe impl Send for RocksEngine {}
// SAFETY: as for Send; all shared-reference methods call thread-safe RocksDB entry points.
unsafe impl Sync for RocksEngine {}

/// RocksDB's options for `c` and the block cache their table factory shares.
fn db_options(
    c: &CommonOptions,
    compression: c_int,
) -> EngineResult<(Handle<ffi::rocksdb_options_t>, Handle<ffi::rocksdb_cache_t>)> {
    if c.partition_filters && !c.two_level_index {
        // RocksDB would quietly drop them; ShaleDB refuses, and so does the benchmark.
        return Err("rocksdb: partition_filters needs a two-level index (--index_type=2)".into());
    }
    // SAFETY: every create function returns a fresh, owned object (never NULL: they abort on
    // allocation failure), handed to a Handle where the engine keeps it; every setter gets a
    // live object from just above. The filter policy's ownership passes to the table options;
    // the table options are copied by set_block_based_table_factory and destroyed right after;
    // the cache handle is shared and we keep ours until the database closed.
    unsafe {
        let options = Handle::new(ffi::rocksdb_options_create(), ffi::rocksdb_options_destroy);
        let o = options.ptr();
        ffi::rocksdb_options_set_create_if_missing(o, c_uchar::from(!c.use_existing_db));
        ffi::rocksdb_options_set_paranoid_checks(o, 1);
        ffi::rocksdb_options_set_write_buffer_size(o, clamp_size(c.write_buffer_size));
        ffi::rocksdb_options_set_max_write_buffer_number(
            o,
            clamp_int(u64::from(c.max_write_buffer_number.max(1))),
        );
        ffi::rocksdb_options_set_max_open_files(
            o,
            if c.open_files <= 0 {
                -1
            } else {
                clamp_int(c.open_files as u64)
            },
        );
        ffi::rocksdb_options_set_compression(o, compression);
        if c.compression_level.is_some() || c.max_dict_bytes > 0 {
            // RocksDB's defaults for the other fields (window bits -14, strategy 0); 32767 is
            // its "the codec's default level".
            let level = c.compression_level.unwrap_or(32767);
            let dict = clamp_int(c.max_dict_bytes);
            ffi::rocksdb_options_set_compression_options(o, -14, level, 0, dict);
            ffi::rocksdb_options_set_compression_options_zstd_max_train_bytes(
                o,
                clamp_int(c.zstd_max_train_bytes),
            );
        }
        ffi::rocksdb_options_set_num_levels(o, clamp_int(u64::from(c.num_levels.max(1))));
        if let Some(first) = c.min_level_to_compress {
            // db_bench's mapping: one entry per level, none above `first`.
            let per_level = codecs_from_level(first, compression, c.num_levels.max(1));
            ffi::rocksdb_options_set_compression_per_level(o, per_level.as_ptr(), per_level.len());
        }
        ffi::rocksdb_options_set_level0_file_num_compaction_trigger(
            o,
            clamp_int(u64::from(c.level0_file_num_compaction_trigger)),
        );
        ffi::rocksdb_options_set_level0_slowdown_writes_trigger(
            o,
            clamp_int(u64::from(c.level0_slowdown_writes_trigger)),
        );
        ffi::rocksdb_options_set_level0_stop_writes_trigger(
            o,
            clamp_int(u64::from(c.level0_stop_writes_trigger)),
        );
        ffi::rocksdb_options_set_target_file_size_base(o, c.target_file_size_base);
        ffi::rocksdb_options_set_target_file_size_multiplier(
            o,
            clamp_int(c.target_file_size_multiplier.max(1)),
        );
        ffi::rocksdb_options_set_max_bytes_for_level_base(o, c.max_bytes_for_level_base);
        ffi::rocksdb_options_set_max_bytes_for_level_multiplier(
            o,
            c.max_bytes_for_level_multiplier,
        );
        ffi::rocksdb_options_set_max_background_jobs(
            o,
            clamp_int(u64::from(c.max_background_jobs.max(1))),
        );
        ffi::rocksdb_options_set_max_subcompactions(o, c.subcompactions.max(1));
        match c.background_cpu_priority {
            None | Some(shaledb::CpuPriority::Normal) => {}
            Some(shaledb::CpuPriority::Low) => {
                // The default environment's compaction pool at nice 19; its flush pool keeps
                // normal priority, as ShaleDB's flush thread does. The environment is the
                // process's default one, which the handle only wraps (destroying it leaves
                // the environment alone).
                let env = ffi::rocksdb_create_default_env();
                ffi::rocksdb_env_lower_thread_pool_cpu_priority(env);
                ffi::rocksdb_env_destroy(env);
            }
            Some(shaledb::CpuPriority::Idle) => {
                return Err(
                    "rocksdb: RocksDB's C API lowers a pool's priority to low only, \
                            not idle (--background_cpu_priority=idle)"
                        .into(),
                );
            }
        }
        ffi::rocksdb_options_set_disable_auto_compactions(
            o,
            c_int::from(c.disable_auto_compactions),
        );
        ffi::rocksdb_options_set_use_direct_reads(o, c_uchar::from(c.use_direct_reads));
        ffi::rocksdb_options_set_allow_mmap_reads(o, c_uchar::from(c.mmap_read));
        if let Some(mapped) = c.mmap_write {
            ffi::rocksdb_options_set_allow_mmap_writes(o, c_uchar::from(mapped));
        }
        if let Some(bytes) = c.bytes_per_sync {
            ffi::rocksdb_options_set_bytes_per_sync(o, bytes);
        }
        if let Some(bytes) = c.wal_bytes_per_sync {
            ffi::rocksdb_options_set_wal_bytes_per_sync(o, bytes);
        }
        ffi::rocksdb_options_set_level_compaction_dynamic_level_bytes(
            o,
            c_uchar::from(c.level_compaction_dynamic_level_bytes),
        );
        if let Some(concurrent) = c.allow_concurrent_memtable_write {
            ffi::rocksdb_options_set_allow_concurrent_memtable_write(o, c_uchar::from(concurrent));
        }
        ffi::rocksdb_options_set_use_direct_io_for_flush_and_compaction(
            o,
            c_uchar::from(c.use_direct_io_for_flush_and_compaction),
        );
        if c.merge_operator == "uint64add" {
            super::uint64add::set_on(o.cast());
        }
        if c.prefix_size > 0 {
            // The options take ownership of the transform.
            let t = ffi::rocksdb_slicetransform_create_fixed_prefix(c.prefix_size);
            ffi::rocksdb_options_set_prefix_extractor(o, t);
        }
        if let Some(ratio) = c.memtable_bloom_size_ratio {
            ffi::rocksdb_options_set_memtable_prefix_bloom_size_ratio(o, ratio);
        }
        if let Some(whole_key) = c.memtable_whole_key_filtering {
            ffi::rocksdb_options_set_memtable_whole_key_filtering(o, c_uchar::from(whole_key));
        }
        set_blob_options(&options, &c.blob)?;

        let mut cache_size = c.cache_size;
        if c.memory_budget > 0 {
            // The C API of 7.8 cannot charge memtables to the cache (no WriteBufferManager):
            // the same total, split as ShaleDB's default split of a budget.
            cache_size = c.memory_budget - c.memory_budget / 4;
            ffi::rocksdb_options_set_db_write_buffer_size(o, clamp_size(c.memory_budget / 4));
        }
        let t = ffi::rocksdb_block_based_options_create();
        ffi::rocksdb_block_based_options_set_block_size(t, clamp_size(c.block_size.max(1)));
        let cache = Handle::new(
            ffi::rocksdb_cache_create_lru(clamp_size(cache_size)),
            ffi::rocksdb_cache_destroy,
        );
        ffi::rocksdb_block_based_options_set_block_cache(t, cache.ptr());
        if c.blob.cache {
            // db_bench's --use_shared_block_and_blob_cache (its default): one cache for both.
            ffi::rocksdb_options_set_blob_cache(o, cache.ptr());
        }
        if c.cache_index_and_filter_blocks {
            ffi::rocksdb_block_based_options_set_cache_index_and_filter_blocks(t, 1);
            ffi::rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(
                t, 1,
            );
        }
        if c.two_level_index {
            // As ShaleDB: partitions through the block cache, the top level pinned.
            ffi::rocksdb_block_based_options_set_index_type(t, ffi::TWO_LEVEL_INDEX_SEARCH);
            ffi::rocksdb_block_based_options_set_partition_filters(
                t,
                c_uchar::from(c.partition_filters),
            );
            ffi::rocksdb_block_based_options_set_metadata_block_size(t, c.metadata_block_size);
            ffi::rocksdb_block_based_options_set_pin_top_level_index_and_filter(t, 1);
        }
        let interval = c_int::try_from(c.index_block_restart_interval).unwrap_or(c_int::MAX);
        ffi::rocksdb_block_based_options_set_index_block_restart_interval(t, interval);
        if c.data_block_hash_index == Some(true) {
            // rocksdb_block_based_table_data_block_index_type_binary_search_and_hash
            ffi::rocksdb_block_based_options_set_data_block_index_type(t, 1);
            ffi::rocksdb_block_based_options_set_data_block_hash_ratio(
                t,
                c.data_block_hash_table_util_ratio,
            );
        }
        if c.bloom_bits > 0 {
            let policy = ffi::rocksdb_filterpolicy_create_bloom_full(f64::from(c.bloom_bits));
            ffi::rocksdb_block_based_options_set_filter_policy(t, policy);
        }
        ffi::rocksdb_options_set_block_based_table_factory(o, t);
        ffi::rocksdb_block_based_options_destroy(t);
        if c.prepopulate_block_cache {
            return Ok((with_prepopulated_block_cache(&options)?, cache));
        }
        Ok((options, cache))
    }
}

/// `options` with `prepopulate_block_cache=kFlushOnly`, which RocksDB's C API has no setter for:
/// set through an options string, which copies the table factory's other options (the block
/// cache included) into the new factory.
fn with_prepopulated_block_cache(
    options: &Handle<ffi::rocksdb_options_t>,
) -> EngineResult<Handle<ffi::rocksdb_options_t>> {
    let setting = c"block_based_table_factory={prepopulate_block_cache=kFlushOnly}";
    // SAFETY: a fresh owned options object handed to a Handle; the call reads live `options`
    // and a NUL-terminated string and writes only `new` and `err`; `err` is NULL or a message
    // the library allocated, freed by take_err.
    unsafe {
        let new = Handle::new(ffi::rocksdb_options_create(), ffi::rocksdb_options_destroy);
        let mut err: *mut c_char = std::ptr::null_mut();
        ffi::rocksdb_get_options_from_string(options.ptr(), setting.as_ptr(), new.ptr(), &mut err);
        take_err(NAME, err, RocksApi::FREE)?;
        Ok(new)
    }
}

/// The read and write options every call uses.
fn read_write_options(c: &CommonOptions) -> (Handle<ReadOptions>, Handle<WriteOptions>) {
    // SAFETY: fresh owned objects handed to Handles that destroy them once; setters get live
    // objects.
    unsafe {
        let ro = Handle::new(
            ffi::rocksdb_readoptions_create(),
            RocksApi::READOPTIONS_DESTROY,
        );
        ffi::rocksdb_readoptions_set_verify_checksums(ro.ptr(), c_uchar::from(c.verify_checksums));
        ffi::rocksdb_readoptions_set_prefix_same_as_start(
            ro.ptr(),
            c_uchar::from(c.prefix_same_as_start),
        );
        let wo = Handle::new(
            ffi::rocksdb_writeoptions_create(),
            RocksApi::WRITEOPTIONS_DESTROY,
        );
        ffi::rocksdb_writeoptions_set_sync(wo.ptr(), c_uchar::from(c.sync));
        ffi::rocksdb_writeoptions_disable_WAL(wo.ptr(), c_int::from(c.disable_wal));
        (ro, wo)
    }
}

impl RocksEngine {
    /// Opens (creating unless `use_existing_db`) a database at `path`.
    pub fn open(path: &Path, c: &CommonOptions) -> EngineResult<Self> {
        let compression = codec(&c.compression)?;
        prepare_dir(NAME, path, c)?;
        let cpath = c_path(NAME, path)?;
        let (options, cache) = db_options(c, compression)?;
        let (ro, wo) = read_write_options(c);
        let db = CDb::open(&options, &cpath, ro, wo)?;
        let cfs = Families::create(&db, &options, c)?;
        Ok(RocksEngine {
            cfs,
            db,
            _options: options,
            _cache: cache,
            auto_compactions: !c.disable_auto_compactions,
        })
    }

    /// A string property of the database, if RocksDB knows it.
    pub fn property(&self, name: &str) -> Option<String> {
        self.db.property(name)
    }

    fn int_property(&self, name: &str) -> u64 {
        self.property(name)
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Engine for RocksEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        match self.cfs.of(key) {
            None => self.db.put(key, value),
            Some(cf) => {
                let mut err: *mut c_char = std::ptr::null_mut();
                // SAFETY: open database, live write options and family handle; the slices
                // are valid during the call (copied by the library); a valid errptr.
                unsafe {
                    ffi::rocksdb_put_cf(
                        self.db.raw(),
                        self.db.write_options(),
                        cf,
                        key.as_ptr().cast(),
                        key.len(),
                        value.as_ptr().cast(),
                        value.len(),
                        &mut err,
                    );
                    take_err(NAME, err, RocksApi::FREE)
                }
            }
        }
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        let Some(cf) = self.cfs.of(key) else {
            return self.db.get(key);
        };
        let mut err: *mut c_char = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: open database, live read options and family handle, `key` valid during the
        // call; a non-NULL result addresses `len` malloc'ed bytes we own: copied, then freed
        // once; `err` is NULL or a message freed by take_err.
        unsafe {
            let p = ffi::rocksdb_get_cf(
                self.db.raw(),
                self.db.read_options(),
                cf,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            );
            let v =
                (!p.is_null()).then(|| std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec());
            if !p.is_null() {
                (RocksApi::FREE)(p.cast());
            }
            take_err(NAME, err, RocksApi::FREE).map(|()| v)
        }
    }

    fn get_len(&self, key: &[u8]) -> EngineResult<Option<usize>> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: open database, live read options and family handle, `key` valid during the
        // call; a non-NULL result is a pinnable slice we own, read once and destroyed once
        // (NULL means not found or an error); `err` is NULL or a message freed by take_err.
        unsafe {
            let (db, ro, k) = (self.db.raw(), self.db.read_options(), key.as_ptr().cast());
            let pinned = match self.cfs.of(key) {
                Some(cf) => ffi::rocksdb_get_pinned_cf(db, ro, cf, k, key.len(), &mut err),
                None => ffi::rocksdb_get_pinned(db, ro, k, key.len(), &mut err),
            };
            let len = (!pinned.is_null()).then(|| {
                let mut len = 0usize;
                ffi::rocksdb_pinnableslice_value(pinned, &mut len);
                ffi::rocksdb_pinnableslice_destroy(pinned);
                len
            });
            take_err(NAME, err, RocksApi::FREE).map(|()| len)
        }
    }

    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        let Some(cf) = self.cfs.of(key) else {
            return self.db.delete(key);
        };
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: open database, live write options and family handle, `key` valid during
        // the call, a valid errptr.
        unsafe {
            ffi::rocksdb_delete_cf(
                self.db.raw(),
                self.db.write_options(),
                cf,
                key.as_ptr().cast(),
                key.len(),
                &mut err,
            );
            take_err(NAME, err, RocksApi::FREE)
        }
    }

    fn multi_get(&self, keys: &[&[u8]]) -> EngineResult<Vec<Option<Vec<u8>>>> {
        if self.cfs.count() > 1 {
            // Keys of several families: one lookup each.
            return keys.iter().map(|k| self.get(k)).collect();
        }
        let n = keys.len();
        let ptrs: Vec<*const c_char> = keys.iter().map(|k| k.as_ptr().cast()).collect();
        let lens: Vec<usize> = keys.iter().map(|k| k.len()).collect();
        let mut values: Vec<*mut c_char> = vec![std::ptr::null_mut(); n];
        let mut value_lens: Vec<usize> = vec![0; n];
        let mut errs: Vec<*mut c_char> = vec![std::ptr::null_mut(); n];
        // SAFETY: the open database and its live read options; the key arrays hold `n` valid
        // slices during the call; the output arrays have room for `n` results each.
        unsafe {
            ffi::rocksdb_multi_get(
                self.db.raw(),
                self.db.read_options(),
                n,
                ptrs.as_ptr(),
                lens.as_ptr(),
                values.as_mut_ptr(),
                value_lens.as_mut_ptr(),
                errs.as_mut_ptr(),
            );
        }
        let mut out = Vec::with_capacity(n);
        let mut first_err = Ok(());
        for ((v, len), err) in values.into_iter().zip(value_lens).zip(errs) {
            // SAFETY: `err` is NULL or a malloc'ed message nothing else frees.
            let res = unsafe { take_err(NAME, err, RocksApi::FREE) };
            if first_err.is_ok() {
                first_err = res;
            }
            if v.is_null() {
                out.push(None);
            } else {
                // SAFETY: a non-NULL value is a malloc'ed buffer of `len` bytes that we copy
                // and then free once with RocksDB's free.
                unsafe {
                    out.push(Some(
                        std::slice::from_raw_parts(v.cast::<u8>(), len).to_vec(),
                    ));
                    (RocksApi::FREE)(v.cast());
                }
            }
        }
        first_err.map(|()| out)
    }

    fn merge(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: open database and its live write options; the slices are valid for their
        // lengths during the call (RocksDB copies them); `err` is a valid out-pointer.
        unsafe {
            ffi::rocksdb_merge(
                self.db.raw(),
                self.db.write_options(),
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            );
        }
        // SAFETY: `err` is NULL or a malloc'ed message from RocksDB that nothing else frees.
        unsafe { take_err(NAME, err, RocksApi::FREE) }
    }

    fn delete_range(&self, begin: &[u8], end: &[u8]) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: a batch created and destroyed here; the slices are valid for their lengths
        // during the calls (the batch copies them); open database and its live write options;
        // `err` is a valid out-pointer.
        unsafe {
            let b = ffi::rocksdb_writebatch_create();
            ffi::rocksdb_writebatch_delete_range(
                b,
                begin.as_ptr().cast(),
                begin.len(),
                end.as_ptr().cast(),
                end.len(),
            );
            ffi::rocksdb_write(self.db.raw(), self.db.write_options(), b, &mut err);
            ffi::rocksdb_writebatch_destroy(b);
        }
        // SAFETY: `err` is NULL or a malloc'ed message from RocksDB that nothing else frees.
        unsafe { take_err(NAME, err, RocksApi::FREE) }
    }

    fn write_batch(&self, ops: &[BatchOp]) -> EngineResult<()> {
        if self.cfs.count() > 1 {
            return Err(
                "rocksdb: write batches with --num_column_families are not supported \
                        (use --batch_size=1)"
                    .into(),
            );
        }
        self.db.write_batch(ops)
    }

    fn iter(&self) -> Box<dyn EngineIterator + '_> {
        Box::new(self.db.iter())
    }

    fn flush(&self) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: flush options are created, used for one blocking flush of the open database
        // and destroyed once; `err` is a valid out-pointer.
        unsafe {
            let fo = ffi::rocksdb_flushoptions_create();
            ffi::rocksdb_flushoptions_set_wait(fo, 1);
            ffi::rocksdb_flush(self.db.raw(), fo, &mut err);
            for &cf in &self.cfs.handles {
                if err.is_null() {
                    ffi::rocksdb_flush_cf(self.db.raw(), fo, cf, &mut err);
                }
            }
            ffi::rocksdb_flushoptions_destroy(fo);
        }
        // SAFETY: `err` is NULL or a malloc'ed message from RocksDB that nothing else frees.
        unsafe { take_err(NAME, err, RocksApi::FREE) }
    }

    fn compact(&self) -> EngineResult<()> {
        self.flush()?;
        // The whole key range, the last level rewritten except files this call just wrote
        // (kForceOptimized, ShaleDB's default): both engines end a full compaction with no
        // garbage left. Blocks until done; the C API reports no error for this call.
        // SAFETY: compact options are created, used for one blocking call on the open
        // database with NULL (open) bounds, and destroyed once.
        unsafe {
            let co = ffi::rocksdb_compactoptions_create();
            ffi::rocksdb_compactoptions_set_bottommost_level_compaction(co, ffi::FORCE_OPTIMIZED);
            ffi::rocksdb_compact_range_opt(
                self.db.raw(),
                co,
                std::ptr::null(),
                0,
                std::ptr::null(),
                0,
            );
            ffi::rocksdb_compactoptions_destroy(co);
        }
        Ok(())
    }

    fn wait_for_compactions(&self) -> EngineResult<()> {
        // RocksDB 7.8's C API has no WaitForCompact: poll its properties until no flush or
        // compaction is pending or running (pending compactions are ignored when automatic
        // compactions are off, since nothing would ever run them).
        loop {
            let busy = self.int_property("rocksdb.num-running-flushes")
                + self.int_property("rocksdb.num-running-compactions")
                + self.int_property("rocksdb.mem-table-flush-pending")
                + if self.auto_compactions {
                    self.int_property("rocksdb.compaction-pending")
                } else {
                    0
                };
            if busy == 0 {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stats(&self) -> Option<String> {
        self.property("rocksdb.stats")
    }

    fn compaction_bytes_written(&self) -> Option<u64> {
        // "Cumulative compaction: X GB write" in rocksdb.stats counts the bytes written by
        // flushes and compactions (the Sum row of the compaction table), in units of 0.01 GB.
        let stats = self.property("rocksdb.stats")?;
        super::parse_gb_after(&stats, "Cumulative compaction:")
    }
}

/// The column families beside the default one, created in a fresh database with the
/// database's options (`--num_column_families`); keys go to them by [`family_of`].
struct Families {
    handles: Vec<*mut ffi::rocksdb_column_family_handle_t>,
}

impl Families {
    fn create(
        db: &CDb<RocksApi>,
        options: &Handle<ffi::rocksdb_options_t>,
        c: &CommonOptions,
    ) -> EngineResult<Families> {
        let mut families = Families {
            handles: Vec::new(),
        };
        let names = crate::engine::family_names(c.num_column_families);
        if !names.is_empty() && c.use_existing_db {
            return Err(
                "rocksdb: --num_column_families with --use_existing_db is not supported \
                        (families are created in a fresh database)"
                    .into(),
            );
        }
        for name in names {
            let cname = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
            let mut err: *mut c_char = std::ptr::null_mut();
            // SAFETY: the open database, live options (copied by the call) and a
            // NUL-terminated name; the handle returned is ours, destroyed once in Drop.
            let h = unsafe {
                ffi::rocksdb_create_column_family(db.raw(), options.ptr(), cname.as_ptr(), &mut err)
            };
            // SAFETY: `err` is NULL or a malloc'ed message freed by take_err.
            unsafe { take_err(NAME, err, RocksApi::FREE)? };
            families.handles.push(h);
        }
        Ok(families)
    }

    /// How many families keys are spread over (the default one included).
    fn count(&self) -> usize {
        self.handles.len() + 1
    }

    /// The handle of the family `key` goes to; `None`: the default family.
    fn of(&self, key: &[u8]) -> Option<*mut ffi::rocksdb_column_family_handle_t> {
        match crate::engine::family_of(key, self.count()) {
            0 => None,
            i => self.handles.get(i - 1).copied(),
        }
    }
}

impl Drop for Families {
    fn drop(&mut self) {
        for &h in &self.handles {
            // SAFETY: each handle was returned by create_column_family and is destroyed once,
            // before the database closes (RocksEngine's field order).
            unsafe { ffi::rocksdb_column_family_handle_destroy(h) };
        }
    }
}
