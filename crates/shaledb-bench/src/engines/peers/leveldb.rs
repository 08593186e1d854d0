//! LevelDB (Debian `libleveldb-dev` 1.23) through its C API, `leveldb/c.h`.

use super::{c_path, clamp_int, clamp_size, prepare_dir, take_err};
use crate::engine::{BatchOp, CommonOptions, Engine, EngineIterator, EngineResult};
use std::ffi::{c_char, c_void, CStr, CString};
use std::path::Path;
use std::time::Duration;

/// Opaque C handles and the declarations of the functions used, from `leveldb/c.h` 1.23.
#[allow(non_camel_case_types)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};

    macro_rules! opaque {
        ($($name:ident),*) => {$(
            #[repr(C)]
            pub struct $name {
                _private: [u8; 0],
            }
        )*};
    }
    opaque!(
        leveldb_t,
        leveldb_options_t,
        leveldb_cache_t,
        leveldb_filterpolicy_t,
        leveldb_readoptions_t,
        leveldb_writeoptions_t,
        leveldb_writebatch_t,
        leveldb_iterator_t
    );

    pub const NO_COMPRESSION: c_int = 0;
    pub const SNAPPY_COMPRESSION: c_int = 1;

    extern "C" {
        pub fn leveldb_open(
            options: *const leveldb_options_t,
            name: *const c_char,
            errptr: *mut *mut c_char,
        ) -> *mut leveldb_t;
        pub fn leveldb_close(db: *mut leveldb_t);
        pub fn leveldb_put(
            db: *mut leveldb_t,
            options: *const leveldb_writeoptions_t,
            key: *const c_char,
            keylen: usize,
            val: *const c_char,
            vallen: usize,
            errptr: *mut *mut c_char,
        );
        pub fn leveldb_delete(
            db: *mut leveldb_t,
            options: *const leveldb_writeoptions_t,
            key: *const c_char,
            keylen: usize,
            errptr: *mut *mut c_char,
        );
        pub fn leveldb_write(
            db: *mut leveldb_t,
            options: *const leveldb_writeoptions_t,
            batch: *mut leveldb_writebatch_t,
            errptr: *mut *mut c_char,
        );
        pub fn leveldb_get(
            db: *mut leveldb_t,
            options: *const leveldb_readoptions_t,
            key: *const c_char,
            keylen: usize,
            vallen: *mut usize,
            errptr: *mut *mut c_char,
        ) -> *mut c_char;
        pub fn leveldb_create_iterator(
            db: *mut leveldb_t,
            options: *const leveldb_readoptions_t,
        ) -> *mut leveldb_iterator_t;
        pub fn leveldb_property_value(db: *mut leveldb_t, propname: *const c_char) -> *mut c_char;
        pub fn leveldb_compact_range(
            db: *mut leveldb_t,
            start_key: *const c_char,
            start_key_len: usize,
            limit_key: *const c_char,
            limit_key_len: usize,
        );
        pub fn leveldb_free(ptr: *mut c_void);

        pub fn leveldb_iter_destroy(it: *mut leveldb_iterator_t);
        pub fn leveldb_iter_valid(it: *const leveldb_iterator_t) -> u8;
        pub fn leveldb_iter_seek_to_first(it: *mut leveldb_iterator_t);
        pub fn leveldb_iter_seek_to_last(it: *mut leveldb_iterator_t);
        pub fn leveldb_iter_seek(it: *mut leveldb_iterator_t, k: *const c_char, klen: usize);
        pub fn leveldb_iter_next(it: *mut leveldb_iterator_t);
        pub fn leveldb_iter_prev(it: *mut leveldb_iterator_t);
        pub fn leveldb_iter_key(it: *const leveldb_iterator_t, klen: *mut usize) -> *const c_char;
        pub fn leveldb_iter_value(it: *const leveldb_iterator_t, vlen: *mut usize)
            -> *const c_char;
        pub fn leveldb_iter_get_error(it: *const leveldb_iterator_t, errptr: *mut *mut c_char);

        pub fn leveldb_writebatch_create() -> *mut leveldb_writebatch_t;
        pub fn leveldb_writebatch_destroy(b: *mut leveldb_writebatch_t);
        pub fn leveldb_writebatch_put(
            b: *mut leveldb_writebatch_t,
            key: *const c_char,
            klen: usize,
            val: *const c_char,
            vlen: usize,
        );
        pub fn leveldb_writebatch_delete(
            b: *mut leveldb_writebatch_t,
            key: *const c_char,
            klen: usize,
        );

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
        pub fn leveldb_readoptions_destroy(o: *mut leveldb_readoptions_t);
        pub fn leveldb_readoptions_set_verify_checksums(o: *mut leveldb_readoptions_t, v: u8);
        pub fn leveldb_writeoptions_create() -> *mut leveldb_writeoptions_t;
        pub fn leveldb_writeoptions_destroy(o: *mut leveldb_writeoptions_t);
        pub fn leveldb_writeoptions_set_sync(o: *mut leveldb_writeoptions_t, v: u8);
    }
}

const NAME: &str = "leveldb";

/// LevelDB's L0 compaction trigger (`config::kL0_CompactionTrigger`, not configurable).
const L0_COMPACTION_TRIGGER: u64 = 4;

/// An open LevelDB database and the objects its options point to (they must outlive it).
pub struct LevelEngine {
    db: *mut ffi::leveldb_t,
    options: *mut ffi::leveldb_options_t,
    cache: *mut ffi::leveldb_cache_t,
    filter: *mut ffi::leveldb_filterpolicy_t,
    ro: *mut ffi::leveldb_readoptions_t,
    wo: *mut ffi::leveldb_writeoptions_t,
}

// SAFETY: leveldb::DB is safe for concurrent use from many threads without external
// synchronisation; the option objects are only read after open; the cache and filter policy are
// thread-safe.
unsafe impl Send for LevelEngine {}
// SAFETY: as for Send.
unsafe impl Sync for LevelEngine {}

fn check(err: *mut c_char) -> EngineResult<()> {
    // SAFETY: callers pass the `errptr` out-value of a LevelDB call: NULL or a malloc'ed message
    // that nothing else frees.
    unsafe { take_err(NAME, err, ffi::leveldb_free) }
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
        if c.use_direct_reads {
            return Err("leveldb: LevelDB has no direct (O_DIRECT) reads".into());
        }
        prepare_dir(NAME, path, c)?;
        let cpath = c_path(NAME, path)?;
        // SAFETY: every create function returns a fresh owned object; setters get live objects.
        // The options keep raw pointers to the cache and filter policy, so both are kept in the
        // engine and destroyed only after the database is closed.
        let (options, cache, filter, ro, wo) = unsafe {
            let o = ffi::leveldb_options_create();
            ffi::leveldb_options_set_create_if_missing(o, u8::from(!c.use_existing_db));
            ffi::leveldb_options_set_write_buffer_size(o, clamp_size(c.write_buffer_size));
            // LevelDB clips max_open_files to [74, 50000]; "unlimited" (<= 0) becomes 50000.
            let files = if c.open_files <= 0 {
                50_000
            } else {
                clamp_int(c.open_files as u64)
            };
            ffi::leveldb_options_set_max_open_files(o, files);
            let cache = ffi::leveldb_cache_create_lru(clamp_size(c.cache_size));
            ffi::leveldb_options_set_cache(o, cache);
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
            let ro = ffi::leveldb_readoptions_create();
            ffi::leveldb_readoptions_set_verify_checksums(ro, u8::from(c.verify_checksums));
            let wo = ffi::leveldb_writeoptions_create();
            ffi::leveldb_writeoptions_set_sync(wo, u8::from(c.sync));
            (o, cache, filter, ro, wo)
        };
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: live options, NUL-terminated path alive for the call, valid out-pointer.
        let db = unsafe { ffi::leveldb_open(options, cpath.as_ptr(), &mut err) };
        let opened = check(err).and_then(|()| {
            if db.is_null() {
                Err("leveldb: open returned no database".to_string())
            } else {
                Ok(())
            }
        });
        let engine = LevelEngine {
            db,
            options,
            cache,
            filter,
            ro,
            wo,
        };
        match opened {
            Ok(()) => Ok(engine),
            Err(e) => {
                let mut engine = engine;
                engine.db = std::ptr::null_mut();
                drop(engine);
                Err(e)
            }
        }
    }

    /// A string property of the database (`leveldb.stats`, `leveldb.num-files-at-levelN`, ...).
    pub fn property(&self, name: &str) -> Option<String> {
        let cname = CString::new(name).ok()?;
        // SAFETY: open database; `cname` is NUL-terminated and alive for the call.
        let p = unsafe { ffi::leveldb_property_value(self.db, cname.as_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-NULL result is a malloc'ed NUL-terminated string that we own.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        // SAFETY: freed exactly once, with LevelDB's free.
        unsafe { ffi::leveldb_free(p.cast::<c_void>()) };
        Some(s)
    }
}

impl Drop for LevelEngine {
    fn drop(&mut self) {
        // SAFETY: the database (if open) is closed once, before the objects its options point
        // to; each object is destroyed once (the filter policy only if one was created).
        unsafe {
            if !self.db.is_null() {
                ffi::leveldb_close(self.db);
            }
            ffi::leveldb_readoptions_destroy(self.ro);
            ffi::leveldb_writeoptions_destroy(self.wo);
            ffi::leveldb_options_destroy(self.options);
            ffi::leveldb_cache_destroy(self.cache);
            if !self.filter.is_null() {
                ffi::leveldb_filterpolicy_destroy(self.filter);
            }
        }
    }
}

/// A LevelDB iterator; it borrows the engine so it cannot outlive the database.
pub struct LevelIter<'a> {
    it: *mut ffi::leveldb_iterator_t,
    _db: &'a LevelEngine,
}

impl LevelIter<'_> {
    fn slice(&self, key: bool) -> &[u8] {
        if !self.valid() {
            return &[];
        }
        let mut len = 0usize;
        // SAFETY: the iterator is live and valid; the returned bytes stay valid until the
        // iterator moves, which needs `&mut self`, so not while the borrow of `self` lives.
        unsafe {
            let p = if key {
                ffi::leveldb_iter_key(self.it, &mut len)
            } else {
                ffi::leveldb_iter_value(self.it, &mut len)
            };
            if p.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(p.cast::<u8>(), len)
            }
        }
    }
}

impl EngineIterator for LevelIter<'_> {
    fn seek(&mut self, key: &[u8]) {
        // SAFETY: live iterator; `key` valid during the call.
        unsafe { ffi::leveldb_iter_seek(self.it, key.as_ptr().cast(), key.len()) }
    }
    fn seek_to_first(&mut self) {
        // SAFETY: live iterator.
        unsafe { ffi::leveldb_iter_seek_to_first(self.it) }
    }
    fn seek_to_last(&mut self) {
        // SAFETY: live iterator.
        unsafe { ffi::leveldb_iter_seek_to_last(self.it) }
    }
    fn valid(&self) -> bool {
        // SAFETY: live iterator.
        unsafe { ffi::leveldb_iter_valid(self.it) != 0 }
    }
    fn next(&mut self) {
        if self.valid() {
            // SAFETY: live iterator positioned on an entry (LevelDB requires Valid()).
            unsafe { ffi::leveldb_iter_next(self.it) }
        }
    }
    fn prev(&mut self) {
        if self.valid() {
            // SAFETY: live iterator positioned on an entry (LevelDB requires Valid()).
            unsafe { ffi::leveldb_iter_prev(self.it) }
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
        unsafe { ffi::leveldb_iter_get_error(self.it, &mut err) };
        check(err)
    }
}

impl Drop for LevelIter<'_> {
    fn drop(&mut self) {
        // SAFETY: destroyed once, before the database (the iterator borrows the engine).
        unsafe { ffi::leveldb_iter_destroy(self.it) }
    }
}

impl Engine for LevelEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: open database, live write options, slices valid during the call (copied by
        // LevelDB), valid out-pointer.
        unsafe {
            ffi::leveldb_put(
                self.db,
                self.wo,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            )
        };
        check(err)
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        let mut err: *mut c_char = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: open database, live read options, `key` valid during the call, valid
        // out-pointers.
        let p = unsafe {
            ffi::leveldb_get(
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
                unsafe { ffi::leveldb_free(p.cast()) };
            }
            return check(err).map(|()| None);
        }
        if p.is_null() {
            return Ok(None);
        }
        // SAFETY: a non-NULL result addresses `len` malloc'ed bytes that we own; copied, then
        // freed once.
        let v = unsafe {
            let v = std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec();
            ffi::leveldb_free(p.cast());
            v
        };
        Ok(Some(v))
    }

    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: open database, live write options, `key` valid during the call.
        unsafe { ffi::leveldb_delete(self.db, self.wo, key.as_ptr().cast(), key.len(), &mut err) };
        check(err)
    }

    fn write_batch(&self, ops: &[BatchOp]) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: the batch is created, filled with slices valid during each call (LevelDB
        // copies them), written, and destroyed once.
        unsafe {
            let b = ffi::leveldb_writebatch_create();
            for op in ops {
                match op {
                    BatchOp::Put(k, v) => ffi::leveldb_writebatch_put(
                        b,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    ),
                    BatchOp::Delete(k) => {
                        ffi::leveldb_writebatch_delete(b, k.as_ptr().cast(), k.len())
                    }
                }
            }
            ffi::leveldb_write(self.db, self.wo, b, &mut err);
            ffi::leveldb_writebatch_destroy(b);
        }
        check(err)
    }

    fn iter(&self) -> Box<dyn EngineIterator + '_> {
        // SAFETY: open database and live read options; the iterator (an implicit snapshot) is
        // destroyed by LevelIter's Drop before the database can close.
        let it = unsafe { ffi::leveldb_create_iterator(self.db, self.ro) };
        Box::new(LevelIter { it, _db: self })
    }

    fn flush(&self) -> EngineResult<()> {
        // LevelDB has no flush call. CompactRange always writes the memtable out first; an empty
        // range ["", ""] then compacts only files holding the empty key (normally none).
        let empty = b"";
        // SAFETY: open database; the two zero-length keys are valid pointers.
        unsafe {
            ffi::leveldb_compact_range(self.db, empty.as_ptr().cast(), 0, empty.as_ptr().cast(), 0)
        };
        Ok(())
    }

    fn compact(&self) -> EngineResult<()> {
        // SAFETY: NULL start/limit = the whole key range; blocks until done (memtable first).
        unsafe { ffi::leveldb_compact_range(self.db, std::ptr::null(), 0, std::ptr::null(), 0) };
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
