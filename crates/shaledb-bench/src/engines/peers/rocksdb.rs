//! RocksDB (Debian `librocksdb-dev` 7.8) through its C API, `rocksdb/c.h`.

use super::{c_path, clamp_int, clamp_size, prepare_dir, take_err};
use crate::engine::{BatchOp, CommonOptions, Engine, EngineIterator, EngineResult};
use std::ffi::{c_char, c_int, c_uchar, c_void, CStr, CString};
use std::path::Path;
use std::time::Duration;

/// Opaque C handles and the declarations of the functions used, from `rocksdb/c.h` 7.8.
#[allow(non_camel_case_types)]
mod ffi {
    use std::ffi::{c_char, c_double, c_int, c_uchar, c_void};

    macro_rules! opaque {
        ($($name:ident),*) => {$(
            #[repr(C)]
            pub struct $name {
                _private: [u8; 0],
            }
        )*};
    }
    opaque!(
        rocksdb_t,
        rocksdb_options_t,
        rocksdb_block_based_table_options_t,
        rocksdb_cache_t,
        rocksdb_filterpolicy_t,
        rocksdb_readoptions_t,
        rocksdb_writeoptions_t,
        rocksdb_flushoptions_t,
        rocksdb_writebatch_t,
        rocksdb_iterator_t
    );

    pub const NO_COMPRESSION: c_int = 0;
    pub const SNAPPY_COMPRESSION: c_int = 1;
    pub const ZLIB_COMPRESSION: c_int = 2;
    pub const LZ4_COMPRESSION: c_int = 4;
    pub const ZSTD_COMPRESSION: c_int = 7;

    extern "C" {
        pub fn rocksdb_open(
            options: *const rocksdb_options_t,
            name: *const c_char,
            errptr: *mut *mut c_char,
        ) -> *mut rocksdb_t;
        pub fn rocksdb_close(db: *mut rocksdb_t);
        pub fn rocksdb_put(
            db: *mut rocksdb_t,
            options: *const rocksdb_writeoptions_t,
            key: *const c_char,
            keylen: usize,
            val: *const c_char,
            vallen: usize,
            errptr: *mut *mut c_char,
        );
        pub fn rocksdb_delete(
            db: *mut rocksdb_t,
            options: *const rocksdb_writeoptions_t,
            key: *const c_char,
            keylen: usize,
            errptr: *mut *mut c_char,
        );
        pub fn rocksdb_write(
            db: *mut rocksdb_t,
            options: *const rocksdb_writeoptions_t,
            batch: *mut rocksdb_writebatch_t,
            errptr: *mut *mut c_char,
        );
        pub fn rocksdb_get(
            db: *mut rocksdb_t,
            options: *const rocksdb_readoptions_t,
            key: *const c_char,
            keylen: usize,
            vallen: *mut usize,
            errptr: *mut *mut c_char,
        ) -> *mut c_char;
        pub fn rocksdb_create_iterator(
            db: *mut rocksdb_t,
            options: *const rocksdb_readoptions_t,
        ) -> *mut rocksdb_iterator_t;
        pub fn rocksdb_property_value(db: *mut rocksdb_t, propname: *const c_char) -> *mut c_char;
        pub fn rocksdb_compact_range(
            db: *mut rocksdb_t,
            start_key: *const c_char,
            start_key_len: usize,
            limit_key: *const c_char,
            limit_key_len: usize,
        );
        pub fn rocksdb_flush(
            db: *mut rocksdb_t,
            options: *const rocksdb_flushoptions_t,
            errptr: *mut *mut c_char,
        );
        pub fn rocksdb_free(ptr: *mut c_void);

        pub fn rocksdb_iter_destroy(it: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_valid(it: *const rocksdb_iterator_t) -> c_uchar;
        pub fn rocksdb_iter_seek_to_first(it: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_seek_to_last(it: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_seek(it: *mut rocksdb_iterator_t, k: *const c_char, klen: usize);
        pub fn rocksdb_iter_next(it: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_prev(it: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_key(it: *const rocksdb_iterator_t, klen: *mut usize) -> *const c_char;
        pub fn rocksdb_iter_value(it: *const rocksdb_iterator_t, vlen: *mut usize)
            -> *const c_char;
        pub fn rocksdb_iter_get_error(it: *const rocksdb_iterator_t, errptr: *mut *mut c_char);

        pub fn rocksdb_writebatch_create() -> *mut rocksdb_writebatch_t;
        pub fn rocksdb_writebatch_destroy(b: *mut rocksdb_writebatch_t);
        pub fn rocksdb_writebatch_put(
            b: *mut rocksdb_writebatch_t,
            key: *const c_char,
            klen: usize,
            val: *const c_char,
            vlen: usize,
        );
        pub fn rocksdb_writebatch_delete(
            b: *mut rocksdb_writebatch_t,
            key: *const c_char,
            klen: usize,
        );

        pub fn rocksdb_options_create() -> *mut rocksdb_options_t;
        pub fn rocksdb_options_destroy(o: *mut rocksdb_options_t);
        pub fn rocksdb_options_set_create_if_missing(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_paranoid_checks(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_write_buffer_size(o: *mut rocksdb_options_t, v: usize);
        pub fn rocksdb_options_set_max_write_buffer_number(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_max_open_files(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_compression(o: *mut rocksdb_options_t, v: c_int);
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
        pub fn rocksdb_options_set_disable_auto_compactions(o: *mut rocksdb_options_t, v: c_int);
        pub fn rocksdb_options_set_use_direct_reads(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_block_based_table_factory(
            o: *mut rocksdb_options_t,
            t: *mut rocksdb_block_based_table_options_t,
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
        pub fn rocksdb_filterpolicy_create_bloom_full(
            bits_per_key: c_double,
        ) -> *mut rocksdb_filterpolicy_t;
        pub fn rocksdb_cache_create_lru(capacity: usize) -> *mut rocksdb_cache_t;
        pub fn rocksdb_cache_destroy(cache: *mut rocksdb_cache_t);

        pub fn rocksdb_readoptions_create() -> *mut rocksdb_readoptions_t;
        pub fn rocksdb_readoptions_destroy(o: *mut rocksdb_readoptions_t);
        pub fn rocksdb_readoptions_set_verify_checksums(o: *mut rocksdb_readoptions_t, v: c_uchar);
        pub fn rocksdb_writeoptions_create() -> *mut rocksdb_writeoptions_t;
        pub fn rocksdb_writeoptions_destroy(o: *mut rocksdb_writeoptions_t);
        pub fn rocksdb_writeoptions_set_sync(o: *mut rocksdb_writeoptions_t, v: c_uchar);
        pub fn rocksdb_writeoptions_disable_WAL(o: *mut rocksdb_writeoptions_t, disable: c_int);
        pub fn rocksdb_flushoptions_create() -> *mut rocksdb_flushoptions_t;
        pub fn rocksdb_flushoptions_destroy(o: *mut rocksdb_flushoptions_t);
        pub fn rocksdb_flushoptions_set_wait(o: *mut rocksdb_flushoptions_t, v: c_uchar);
    }
}

const NAME: &str = "rocksdb";

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

/// An open RocksDB database and the option objects it was opened with.
pub struct RocksEngine {
    db: *mut ffi::rocksdb_t,
    options: *mut ffi::rocksdb_options_t,
    cache: *mut ffi::rocksdb_cache_t,
    ro: *mut ffi::rocksdb_readoptions_t,
    wo: *mut ffi::rocksdb_writeoptions_t,
    auto_compactions: bool,
}

// SAFETY: rocksdb_t is thread-safe (RocksDB's DB is safe for concurrent use from many threads);
// the option objects are only read after open, and the cache is internally synchronised.
unsafe impl Send for RocksEngine {}
// SAFETY: as for Send; all shared-reference methods call thread-safe RocksDB entry points.
unsafe impl Sync for RocksEngine {}

impl RocksEngine {
    /// Opens (creating unless `use_existing_db`) a database at `path`.
    pub fn open(path: &Path, c: &CommonOptions) -> EngineResult<Self> {
        let compression = codec(&c.compression)?;
        prepare_dir(NAME, path, c)?;
        let cpath = c_path(NAME, path)?;
        // SAFETY: every create function returns a fresh, owned object (never NULL: they abort on
        // allocation failure); every setter gets a live object from just above. The filter
        // policy's ownership passes to the table options; the table options are copied by
        // set_block_based_table_factory and destroyed right after; the cache handle is shared
        // and we keep ours until Drop.
        let (options, cache, ro, wo) = unsafe {
            let o = ffi::rocksdb_options_create();
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
            ffi::rocksdb_options_set_num_levels(o, clamp_int(u64::from(c.num_levels.max(1))));
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
            ffi::rocksdb_options_set_disable_auto_compactions(
                o,
                c_int::from(c.disable_auto_compactions),
            );
            ffi::rocksdb_options_set_use_direct_reads(o, c_uchar::from(c.use_direct_reads));

            let t = ffi::rocksdb_block_based_options_create();
            ffi::rocksdb_block_based_options_set_block_size(t, clamp_size(c.block_size.max(1)));
            let cache = ffi::rocksdb_cache_create_lru(clamp_size(c.cache_size));
            ffi::rocksdb_block_based_options_set_block_cache(t, cache);
            if c.bloom_bits > 0 {
                let policy = ffi::rocksdb_filterpolicy_create_bloom_full(f64::from(c.bloom_bits));
                ffi::rocksdb_block_based_options_set_filter_policy(t, policy);
            }
            ffi::rocksdb_options_set_block_based_table_factory(o, t);
            ffi::rocksdb_block_based_options_destroy(t);

            let ro = ffi::rocksdb_readoptions_create();
            ffi::rocksdb_readoptions_set_verify_checksums(ro, c_uchar::from(c.verify_checksums));
            let wo = ffi::rocksdb_writeoptions_create();
            ffi::rocksdb_writeoptions_set_sync(wo, c_uchar::from(c.sync));
            ffi::rocksdb_writeoptions_disable_WAL(wo, c_int::from(c.disable_wal));
            (o, cache, ro, wo)
        };
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: `options` is live, `cpath` is a NUL-terminated string alive for the call, and
        // `err` is a valid out-pointer.
        let db = unsafe { ffi::rocksdb_open(options, cpath.as_ptr(), &mut err) };
        // SAFETY: `err` is NULL or a malloc'ed message from RocksDB, freed by rocksdb_free.
        let opened = unsafe { take_err(NAME, err, ffi::rocksdb_free) };
        if let Err(e) = opened.and_then(|()| {
            if db.is_null() {
                Err("rocksdb: open returned no database".to_string())
            } else {
                Ok(())
            }
        }) {
            // SAFETY: the objects were created above, are not used by any database (open failed)
            // and are destroyed once.
            unsafe {
                ffi::rocksdb_readoptions_destroy(ro);
                ffi::rocksdb_writeoptions_destroy(wo);
                ffi::rocksdb_cache_destroy(cache);
                ffi::rocksdb_options_destroy(options);
            }
            return Err(e);
        }
        Ok(RocksEngine {
            db,
            options,
            cache,
            ro,
            wo,
            auto_compactions: !c.disable_auto_compactions,
        })
    }

    /// A string property of the database, if RocksDB knows it.
    pub fn property(&self, name: &str) -> Option<String> {
        let cname = CString::new(name).ok()?;
        // SAFETY: `self.db` is open; `cname` is NUL-terminated and alive for the call.
        let p = unsafe { ffi::rocksdb_property_value(self.db, cname.as_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-NULL result is a malloc'ed NUL-terminated string that we own.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        // SAFETY: `p` came from RocksDB's malloc and is freed exactly once.
        unsafe { ffi::rocksdb_free(p.cast::<c_void>()) };
        Some(s)
    }

    fn int_property(&self, name: &str) -> u64 {
        self.property(name)
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    fn check(err: *mut c_char) -> EngineResult<()> {
        // SAFETY: callers pass the `errptr` out-value of a RocksDB call: NULL or a malloc'ed
        // message that nothing else frees.
        unsafe { take_err(NAME, err, ffi::rocksdb_free) }
    }
}

impl Drop for RocksEngine {
    fn drop(&mut self) {
        // SAFETY: the database is closed once (no iterator can outlive `&self`), then the option
        // objects it used are destroyed once each.
        unsafe {
            ffi::rocksdb_close(self.db);
            ffi::rocksdb_readoptions_destroy(self.ro);
            ffi::rocksdb_writeoptions_destroy(self.wo);
            ffi::rocksdb_cache_destroy(self.cache);
            ffi::rocksdb_options_destroy(self.options);
        }
    }
}

/// A RocksDB iterator; it borrows the engine so it cannot outlive the database.
pub struct RocksIter<'a> {
    it: *mut ffi::rocksdb_iterator_t,
    _db: &'a RocksEngine,
}

impl RocksIter<'_> {
    fn slice(&self, key: bool) -> &[u8] {
        if !self.valid() {
            return &[];
        }
        let mut len = 0usize;
        // SAFETY: the iterator is live and valid; the returned pointer addresses `len` bytes
        // that stay valid until the iterator is moved, which needs `&mut self` and so cannot
        // happen while the returned borrow of `self` lives.
        unsafe {
            let p = if key {
                ffi::rocksdb_iter_key(self.it, &mut len)
            } else {
                ffi::rocksdb_iter_value(self.it, &mut len)
            };
            if p.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(p.cast::<u8>(), len)
            }
        }
    }
}

impl EngineIterator for RocksIter<'_> {
    fn seek(&mut self, key: &[u8]) {
        // SAFETY: live iterator; `key` is valid for `key.len()` bytes during the call.
        unsafe { ffi::rocksdb_iter_seek(self.it, key.as_ptr().cast(), key.len()) }
    }
    fn seek_to_first(&mut self) {
        // SAFETY: live iterator.
        unsafe { ffi::rocksdb_iter_seek_to_first(self.it) }
    }
    fn seek_to_last(&mut self) {
        // SAFETY: live iterator.
        unsafe { ffi::rocksdb_iter_seek_to_last(self.it) }
    }
    fn valid(&self) -> bool {
        // SAFETY: live iterator.
        unsafe { ffi::rocksdb_iter_valid(self.it) != 0 }
    }
    fn next(&mut self) {
        if self.valid() {
            // SAFETY: live iterator positioned on an entry (RocksDB requires Valid()).
            unsafe { ffi::rocksdb_iter_next(self.it) }
        }
    }
    fn prev(&mut self) {
        if self.valid() {
            // SAFETY: live iterator positioned on an entry (RocksDB requires Valid()).
            unsafe { ffi::rocksdb_iter_prev(self.it) }
        }
    }
    fn key(&self) -> &[u8] {
        self.slice(true)
    }
    fn value(&self) -> &[u8] {
        self.slice(false)
    }
    fn status(&self) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: live iterator and a valid out-pointer.
        unsafe { ffi::rocksdb_iter_get_error(self.it, &mut err) };
        RocksEngine::check(err)
    }
}

impl Drop for RocksIter<'_> {
    fn drop(&mut self) {
        // SAFETY: destroyed once, before the database (the iterator borrows the engine).
        unsafe { ffi::rocksdb_iter_destroy(self.it) }
    }
}

impl Engine for RocksEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: open database and live write options; key/value slices are valid for their
        // lengths during the call (RocksDB copies them); `err` is a valid out-pointer.
        unsafe {
            ffi::rocksdb_put(
                self.db,
                self.wo,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            )
        };
        Self::check(err)
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        let mut err: *mut c_char = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: open database and live read options; `key` is valid during the call; `len` and
        // `err` are valid out-pointers.
        let p = unsafe {
            ffi::rocksdb_get(
                self.db,
                self.ro,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            )
        };
        if !err.is_null() {
            if !p.is_null() {
                // SAFETY: a malloc'ed value we own, freed once.
                unsafe { ffi::rocksdb_free(p.cast()) };
            }
            return Self::check(err).map(|()| None);
        }
        if p.is_null() {
            return Ok(None);
        }
        // SAFETY: a non-NULL result addresses `len` malloc'ed bytes that we own; we copy them
        // and free the buffer once.
        let v = unsafe {
            let v = std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec();
            ffi::rocksdb_free(p.cast());
            v
        };
        Ok(Some(v))
    }

    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: open database, live write options, `key` valid during the call.
        unsafe { ffi::rocksdb_delete(self.db, self.wo, key.as_ptr().cast(), key.len(), &mut err) };
        Self::check(err)
    }

    fn write_batch(&self, ops: &[BatchOp]) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: the batch is created, filled with slices valid during each call (RocksDB
        // copies them), written, and destroyed once.
        unsafe {
            let b = ffi::rocksdb_writebatch_create();
            for op in ops {
                match op {
                    BatchOp::Put(k, v) => ffi::rocksdb_writebatch_put(
                        b,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    ),
                    BatchOp::Delete(k) => {
                        ffi::rocksdb_writebatch_delete(b, k.as_ptr().cast(), k.len())
                    }
                }
            }
            ffi::rocksdb_write(self.db, self.wo, b, &mut err);
            ffi::rocksdb_writebatch_destroy(b);
        }
        Self::check(err)
    }

    fn iter(&self) -> Box<dyn EngineIterator + '_> {
        // SAFETY: open database and live read options; the iterator (an implicit snapshot) is
        // destroyed by RocksIter's Drop before the database can close.
        let it = unsafe { ffi::rocksdb_create_iterator(self.db, self.ro) };
        Box::new(RocksIter { it, _db: self })
    }

    fn flush(&self) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: flush options are created, used for one blocking flush and destroyed once.
        unsafe {
            let fo = ffi::rocksdb_flushoptions_create();
            ffi::rocksdb_flushoptions_set_wait(fo, 1);
            ffi::rocksdb_flush(self.db, fo, &mut err);
            ffi::rocksdb_flushoptions_destroy(fo);
        }
        Self::check(err)
    }

    fn compact(&self) -> EngineResult<()> {
        self.flush()?;
        // SAFETY: NULL start/limit mean the whole key range; the call blocks until done. The C
        // API reports no error for this call.
        unsafe { ffi::rocksdb_compact_range(self.db, std::ptr::null(), 0, std::ptr::null(), 0) };
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
