//! LevelDB (Debian `libleveldb-dev` 1.23) through its C API, `leveldb/c.h`.

use super::capi::{shared_c_api, CApi, CDb, Handle, ReadOptions, WriteOptions};
use super::{c_path, clamp_int, clamp_size, prepare_dir};
use crate::engine::{BatchOp, CommonOptions, Engine, EngineIterator, EngineResult};
use std::ffi::c_int;
use std::path::Path;
use std::time::Duration;

/// Opaque C handles and the declarations of the functions used, from `leveldb/c.h` 1.23.
#[allow(non_camel_case_types)]
mod ffi {
    pub use super::super::capi::{
        ReadOptions as leveldb_readoptions_t, WriteOptions as leveldb_writeoptions_t,
    };
    use std::ffi::c_int;
    opaque!(leveldb_options_t, leveldb_cache_t, leveldb_filterpolicy_t);

    pub const NO_COMPRESSION: c_int = 0;
    pub const SNAPPY_COMPRESSION: c_int = 1;

    extern "C" {

        pub fn leveldb_options_create() -> *mut leveldb_options_t;
        pub fn leveldb_options_destroy(o: *mut leveldb_options_t);
        pub fn leveldb_options_set_filter_policy(
            o: *mut leveldb_options_t,
            policy: *mut leveldb_filterpolicy_t,
        );
        pub fn leveldb_options_set_create_if_missing(o: *mut leveldb_options_t, v: u8);
        pub fn leveldb_options_set_write_buffer_size(o: *mut leveldb_options_t, v: usize);
        pub fn leveldb_options_set_max_open_files(o: *mut leveldb_options_t, v: c_int);
        pub fn leveldb_options_set_cache(o: *mut leveldb_options_t, cache: *mut leveldb_cache_t);
        pub fn leveldb_options_set_block_size(o: *mut leveldb_options_t, v: usize);
        pub fn leveldb_options_set_max_file_size(o: *mut leveldb_options_t, v: usize);
        pub fn leveldb_options_set_compression(o: *mut leveldb_options_t, v: c_int);

        pub fn leveldb_filterpolicy_create_bloom(
            bits_per_key: c_int,
        ) -> *mut leveldb_filterpolicy_t;
        pub fn leveldb_filterpolicy_destroy(policy: *mut leveldb_filterpolicy_t);
        pub fn leveldb_cache_create_lru(capacity: usize) -> *mut leveldb_cache_t;
        pub fn leveldb_cache_destroy(cache: *mut leveldb_cache_t);

        pub fn leveldb_readoptions_create() -> *mut leveldb_readoptions_t;
        pub fn leveldb_readoptions_set_verify_checksums(o: *mut leveldb_readoptions_t, v: u8);
        pub fn leveldb_writeoptions_create() -> *mut leveldb_writeoptions_t;
        pub fn leveldb_writeoptions_set_sync(o: *mut leveldb_writeoptions_t, v: u8);
    }
}

const NAME: &str = "leveldb";

/// LevelDB's L0 compaction trigger (`config::kL0_CompactionTrigger`, not configurable).
const L0_COMPACTION_TRIGGER: u64 = 4;

shared_c_api!(
    /// `leveldb/c.h`'s functions for the shapes it shares with RocksDB's C API.
    LevelApi,
    "leveldb",
    ffi::leveldb_options_t
);

/// An open LevelDB database and the objects its options point to. Field order matters: the
/// database closes first, then the options, cache and filter policy it used are destroyed.
pub struct LevelEngine {
    db: CDb<LevelApi>,
    _options: Handle<ffi::leveldb_options_t>,
    _cache: Handle<ffi::leveldb_cache_t>,
    _filter: Handle<ffi::leveldb_filterpolicy_t>,
}

// SAFETY: the database is Send and Sync (see CDb); after open the options are never touched
// again, and the cache and filter policy LevelDB uses through them are thread-safe.
unsafe impl Send for LevelEngine {}
// SAFETY: as for Send.
unsafe impl Sync for LevelEngine {}

/// LevelDB's options for `c`, and the cache and filter policy they point to.
struct Options {
    options: Handle<ffi::leveldb_options_t>,
    cache: Handle<ffi::leveldb_cache_t>,
    filter: Handle<ffi::leveldb_filterpolicy_t>,
}

impl Options {
    fn new(c: &CommonOptions, compression: c_int) -> Options {
        // LevelDB clips max_open_files to [74, 50000]; "unlimited" (<= 0) becomes 50000.
        let files = if c.open_files <= 0 {
            50_000
        } else {
            clamp_int(c.open_files as u64)
        };
        // SAFETY: every create function returns a fresh owned object, handed to a Handle that
        // destroys it once; setters get live objects. The options keep raw pointers to the cache
        // and filter policy, which is why the engine keeps all three until the database closed.
        unsafe {
            let options = Handle::new(ffi::leveldb_options_create(), ffi::leveldb_options_destroy);
            let o = options.ptr();
            ffi::leveldb_options_set_create_if_missing(o, u8::from(!c.use_existing_db));
            ffi::leveldb_options_set_write_buffer_size(o, clamp_size(c.write_buffer_size));
            ffi::leveldb_options_set_max_open_files(o, files);
            let cache = Handle::new(
                ffi::leveldb_cache_create_lru(clamp_size(c.cache_size)),
                ffi::leveldb_cache_destroy,
            );
            ffi::leveldb_options_set_cache(o, cache.ptr());
            ffi::leveldb_options_set_block_size(o, clamp_size(c.block_size.max(1)));
            ffi::leveldb_options_set_max_file_size(o, clamp_size(c.target_file_size_base));
            ffi::leveldb_options_set_compression(o, compression);
            let filter = if c.bloom_bits > 0 {
                let f = ffi::leveldb_filterpolicy_create_bloom(clamp_int(u64::from(c.bloom_bits)));
                ffi::leveldb_options_set_filter_policy(o, f);
                f
            } else {
                std::ptr::null_mut()
            };
            let filter = Handle::new(filter, ffi::leveldb_filterpolicy_destroy);
            Options {
                options,
                cache,
                filter,
            }
        }
    }
}

/// The read and write options every call uses.
fn read_write_options(c: &CommonOptions) -> (Handle<ReadOptions>, Handle<WriteOptions>) {
    // SAFETY: fresh owned objects handed to Handles that destroy them once; setters get live
    // objects.
    unsafe {
        let ro = Handle::new(
            ffi::leveldb_readoptions_create(),
            LevelApi::READOPTIONS_DESTROY,
        );
        ffi::leveldb_readoptions_set_verify_checksums(ro.ptr(), u8::from(c.verify_checksums));
        let wo = Handle::new(
            ffi::leveldb_writeoptions_create(),
            LevelApi::WRITEOPTIONS_DESTROY,
        );
        ffi::leveldb_writeoptions_set_sync(wo.ptr(), u8::from(c.sync));
        (ro, wo)
    }
}

impl LevelEngine {
    /// Opens (creating unless `use_existing_db`) a database at `path`.
    pub fn open(path: &Path, c: &CommonOptions) -> EngineResult<Self> {
        let compression = match c.compression.as_str() {
            "none" => ffi::NO_COMPRESSION,
            "snappy" => ffi::SNAPPY_COMPRESSION,
            other => {
                return Err(format!(
                    "leveldb: compression type {other:?} is not available in LevelDB 1.23 \
                     (it has snappy and none)"
                ))
            }
        };
        if c.disable_wal {
            return Err(
                "leveldb: LevelDB cannot disable its write-ahead log; run it with \
                        --disable_wal=0 (WAL on, sync off)"
                    .into(),
            );
        }
        if c.use_direct_reads || c.use_direct_io_for_flush_and_compaction {
            return Err("leveldb: LevelDB has no direct (O_DIRECT) IO".into());
        }
        if c.mmap_write == Some(true) {
            return Err("leveldb: LevelDB cannot map its log for writing (--mmap_write=1)".into());
        }
        if c.compression_level.is_some() {
            return Err("leveldb: LevelDB has no compression levels".into());
        }
        if c.min_level_to_compress.is_some() {
            return Err(
                "leveldb: LevelDB has no per-level compression (--min_level_to_compress)".into(),
            );
        }
        if c.max_dict_bytes > 0 {
            return Err("leveldb: LevelDB has no compression dictionaries".into());
        }
        if c.cache_index_and_filter_blocks {
            return Err(
                "leveldb: the benchmark does not set LevelDB's index and filter caching".into(),
            );
        }
        if c.prepopulate_block_cache {
            return Err("leveldb: LevelDB cannot put flushed blocks into its cache".into());
        }
        if c.background_cpu_priority
            .is_some_and(|p| p != shaledb::CpuPriority::Normal)
        {
            return Err("leveldb: the benchmark does not set the priority of LevelDB's background threads (--background_cpu_priority)".into());
        }
        if c.two_level_index || c.partition_filters {
            return Err(
                "leveldb: LevelDB has no two-level (partitioned) index or filters (--index_type=2, \
                 --partition_index, --partition_index_and_filters)"
                    .into(),
            );
        }
        if c.data_block_hash_index == Some(true) {
            return Err(
                "leveldb: LevelDB has no hash index in its data blocks (--data_block_index_type=1)"
                    .into(),
            );
        }
        if c.index_block_restart_interval != 1 {
            return Err(
                "leveldb: LevelDB's index blocks always have restart interval 1 \
                 (--index_block_restart_interval)"
                    .into(),
            );
        }
        if c.level_compaction_dynamic_level_bytes {
            return Err("leveldb: LevelDB has no dynamic level sizes".into());
        }
        if c.blob.enabled {
            return Err(
                "leveldb: LevelDB has no blob files (key-value separation; --enable_blob_files)"
                    .into(),
            );
        }
        prepare_dir(NAME, path, c)?;
        let cpath = c_path(NAME, path)?;
        let o = Options::new(c, compression);
        let (ro, wo) = read_write_options(c);
        let db = CDb::open(&o.options, &cpath, ro, wo)?;
        Ok(LevelEngine {
            db,
            _options: o.options,
            _cache: o.cache,
            _filter: o.filter,
        })
    }

    /// A string property of the database (`leveldb.stats`, `leveldb.num-files-at-levelN`, ...).
    pub fn property(&self, name: &str) -> Option<String> {
        self.db.property(name)
    }
}

impl Engine for LevelEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.db.put(key, value)
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        self.db.get(key)
    }

    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        self.db.delete(key)
    }

    fn write_batch(&self, ops: &[BatchOp]) -> EngineResult<()> {
        self.db.write_batch(ops)
    }

    fn iter(&self) -> Box<dyn EngineIterator + '_> {
        Box::new(self.db.iter())
    }

    fn flush(&self) -> EngineResult<()> {
        // LevelDB has no flush call. CompactRange always writes the memtable out first; an empty
        // range ["", ""] then compacts only files holding the empty key (normally none).
        self.db.compact_range(Some(b""), Some(b""));
        Ok(())
    }

    fn compact(&self) -> EngineResult<()> {
        // The whole key range; blocks until done (memtable first).
        self.db.compact_range(None, None);
        Ok(())
    }

    fn wait_for_compactions(&self) -> EngineResult<()> {
        // Best effort: LevelDB exposes no pending-compaction state. Wait (up to 10 minutes)
        // until level 0 is below its compaction trigger.
        let deadline = std::time::Instant::now() + Duration::from_secs(600);
        while std::time::Instant::now() < deadline {
            let l0: u64 = self
                .property("leveldb.num-files-at-level0")
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            if l0 < L0_COMPACTION_TRIGGER {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err("leveldb: level 0 still at its compaction trigger after 10 minutes".into())
    }

    fn stats(&self) -> Option<String> {
        self.property("leveldb.stats")
    }

    fn compaction_bytes_written(&self) -> Option<u64> {
        // leveldb.stats: per level "Level Files Size(MB) Time(sec) Read(MB) Write(MB)"; the
        // Write column counts memtable flushes and compaction output, in whole MB.
        let stats = self.property("leveldb.stats")?;
        parse_leveldb_write_mb(&stats).map(|mb| mb << 20)
    }
}

/// Sums the Write(MB) column of `leveldb.stats`.
fn parse_leveldb_write_mb(stats: &str) -> Option<u64> {
    let mut total = 0u64;
    let mut rows = 0;
    for line in stats.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() == 6 && cols.iter().all(|c| c.parse::<f64>().is_ok()) {
            total += cols[5].parse::<f64>().ok()? as u64;
            rows += 1;
        }
    }
    (rows > 0 || stats.contains("Compactions")).then_some(total)
}
