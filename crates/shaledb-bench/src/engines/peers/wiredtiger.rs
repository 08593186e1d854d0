//! WiredTiger (Debian `libwiredtiger-dev` 3.2.1) through its C API, a btree table.
//!
//! WiredTiger's API is structs of function pointers (`WT_CONNECTION`, `WT_SESSION`,
//! `WT_CURSOR`); the calls go through a small C shim (`csrc/wt_shim.c`, compiled by build.rs
//! against the installed `wiredtiger.h`) so that no struct layout is re-declared in Rust: here
//! the handles are opaque pointers.
//!
//! A `WT_SESSION` (and its cursors) may be used by one thread at a time, so the engine keeps a
//! pool of sessions, each with a cursor on `table:bench`; an operation takes one out of the pool
//! for its duration (opening a new one when the pool is empty) and puts it back.

use super::{c_path, prepare_dir};
use crate::engine::{BatchOp, CommonOptions, Engine, EngineIterator, EngineResult};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// Opaque handles and the shim's functions (csrc/wt_shim.c).
#[allow(non_camel_case_types)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};
    opaque!(WT_CONNECTION, WT_SESSION, WT_CURSOR);

    extern "C" {
        pub fn shwt_notfound() -> c_int;
        pub fn shwt_rollback() -> c_int;
        pub fn shwt_strerror(err: c_int) -> *const c_char;
        pub fn shwt_open(
            home: *const c_char,
            config: *const c_char,
            connp: *mut *mut WT_CONNECTION,
        ) -> c_int;
        pub fn shwt_conn_close(conn: *mut WT_CONNECTION) -> c_int;
        pub fn shwt_open_session(conn: *mut WT_CONNECTION, sessionp: *mut *mut WT_SESSION)
            -> c_int;
        pub fn shwt_session_close(session: *mut WT_SESSION) -> c_int;
        pub fn shwt_create(
            session: *mut WT_SESSION,
            uri: *const c_char,
            config: *const c_char,
        ) -> c_int;
        pub fn shwt_open_cursor(
            session: *mut WT_SESSION,
            uri: *const c_char,
            config: *const c_char,
            cursorp: *mut *mut WT_CURSOR,
        ) -> c_int;
        pub fn shwt_cursor_close(cursor: *mut WT_CURSOR) -> c_int;
        pub fn shwt_cursor_reset(cursor: *mut WT_CURSOR) -> c_int;
        pub fn shwt_begin(session: *mut WT_SESSION, config: *const c_char) -> c_int;
        pub fn shwt_commit(session: *mut WT_SESSION, config: *const c_char) -> c_int;
        pub fn shwt_rollback_txn(session: *mut WT_SESSION) -> c_int;
        pub fn shwt_checkpoint(session: *mut WT_SESSION, config: *const c_char) -> c_int;
        pub fn shwt_compact(
            session: *mut WT_SESSION,
            uri: *const c_char,
            config: *const c_char,
        ) -> c_int;
        pub fn shwt_put(
            cursor: *mut WT_CURSOR,
            key: *const c_void,
            klen: usize,
            val: *const c_void,
            vlen: usize,
        ) -> c_int;
        pub fn shwt_remove(cursor: *mut WT_CURSOR, key: *const c_void, klen: usize) -> c_int;
        pub fn shwt_search(
            cursor: *mut WT_CURSOR,
            key: *const c_void,
            klen: usize,
            valp: *mut *const c_void,
            vlenp: *mut usize,
        ) -> c_int;
        pub fn shwt_search_near(
            cursor: *mut WT_CURSOR,
            key: *const c_void,
            klen: usize,
            exactp: *mut c_int,
        ) -> c_int;
        pub fn shwt_next(cursor: *mut WT_CURSOR) -> c_int;
        pub fn shwt_prev(cursor: *mut WT_CURSOR) -> c_int;
        pub fn shwt_current(
            cursor: *mut WT_CURSOR,
            keyp: *mut *const c_void,
            klenp: *mut usize,
            valp: *mut *const c_void,
            vlenp: *mut usize,
        ) -> c_int;
        pub fn shwt_stat_next(
            cursor: *mut WT_CURSOR,
            descp: *mut *const c_char,
            valuep: *mut i64,
        ) -> c_int;
    }
}

const NAME: &str = "wiredtiger";
const URI: &str = "table:bench";
/// How often an operation that lost a write conflict (WT_ROLLBACK) is retried.
const MAX_RETRIES: u32 = 10_000;

/// Directories searched for WiredTiger's compression extensions (Debian `libwiredtiger0`).
const EXTENSION_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib",
    "/usr/local/lib",
];

/// WiredTiger's text for an error code.
fn wt_err(what: &str, rc: c_int) -> String {
    // SAFETY: wiredtiger_strerror accepts any code and returns a static (or thread-local)
    // NUL-terminated string, copied at once.
    let msg = unsafe {
        let p = ffi::shwt_strerror(rc);
        if p.is_null() {
            String::from("unknown error")
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    format!("wiredtiger: {what}: {msg} ({rc})")
}

fn notfound() -> c_int {
    // SAFETY: returns a constant.
    unsafe { ffi::shwt_notfound() }
}

fn rollback() -> c_int {
    // SAFETY: returns a constant.
    unsafe { ffi::shwt_rollback() }
}

/// One session and its cursor on the bench table, used by one thread at a time.
struct Sess {
    session: *mut ffi::WT_SESSION,
    cursor: *mut ffi::WT_CURSOR,
}

// SAFETY: a WT_SESSION and its cursors may move between threads as long as only one thread uses
// them at a time; the pool hands each Sess to exactly one user.
unsafe impl Send for Sess {}

/// The extension library for a codec, if WiredTiger needs one.
fn compressor(name: &str) -> EngineResult<Option<(&'static str, String)>> {
    let lib = match name {
        "none" => return Ok(None),
        "snappy" => "libwiredtiger_snappy.so",
        "zlib" => "libwiredtiger_zlib.so",
        other => {
            return Err(format!(
                "wiredtiger: compression type {other:?} is not available (the Debian build ships \
                 the snappy and zlib extensions only)"
            ))
        }
    };
    let path = EXTENSION_DIRS
        .iter()
        .map(|d| Path::new(d).join(lib))
        .find(|p| p.exists())
        .ok_or_else(|| format!("wiredtiger: compression extension {lib} not found"))?;
    let name = if name == "snappy" { "snappy" } else { "zlib" };
    Ok(Some((name, path.to_string_lossy().into_owned())))
}

/// The `wiredtiger_open` and table configuration strings for the common options.
pub fn configs(c: &CommonOptions) -> EngineResult<(String, String)> {
    let codec = compressor(&c.compression)?;
    if c.compression_level.is_some() {
        return Err("wiredtiger: the benchmark does not set WiredTiger compression levels".into());
    }
    if c.min_level_to_compress.is_some() {
        return Err("wiredtiger: WiredTiger has no levels (--min_level_to_compress)".into());
    }
    if c.max_dict_bytes > 0 {
        return Err(
            "wiredtiger: the benchmark does not set WiredTiger compression dictionaries".into(),
        );
    }
    if c.cache_index_and_filter_blocks {
        return Err("wiredtiger: WiredTiger has no index and filter blocks to cache".into());
    }
    if c.prepopulate_block_cache {
        return Err(
            "wiredtiger: WiredTiger has no prepopulate_block_cache (its cache keeps the pages it \
             writes anyway)"
                .into(),
        );
    }
    if c.background_cpu_priority
        .is_some_and(|p| p != shaledb::CpuPriority::Normal)
    {
        return Err(
            "wiredtiger: the benchmark does not set the priority of WiredTiger's eviction and \
             checkpoint threads (--background_cpu_priority)"
                .into(),
        );
    }
    if c.two_level_index || c.partition_filters {
        return Err(
            "wiredtiger: WiredTiger has no index or filter blocks to partition (--index_type=2, \
             --partition_index, --partition_index_and_filters)"
                .into(),
        );
    }
    if c.data_block_hash_index == Some(true) {
        return Err(
            "wiredtiger: WiredTiger has no hash index in its pages (--data_block_index_type=1)"
                .into(),
        );
    }
    if c.mmap_write == Some(true) {
        return Err(
            "wiredtiger: the benchmark does not map WiredTiger's log for writing (--mmap_write=1)"
                .into(),
        );
    }
    if c.index_block_restart_interval != 1 {
        return Err(
            "wiredtiger: WiredTiger has no index blocks with restart points \
             (--index_block_restart_interval)"
                .into(),
        );
    }
    if c.blob.enabled {
        return Err(
            "wiredtiger: WiredTiger has no blob files (key-value separation; \
             --enable_blob_files)"
                .into(),
        );
    }
    if c.disable_wal && c.sync {
        return Err("wiredtiger: sync writes need the log; --sync=1 with --disable_wal=1".into());
    }
    // WiredTiger's cache holds both clean and dirty pages: it gets the LSMs' block cache plus
    // their write buffers, with WiredTiger's 1 MB minimum.
    let memtables = c
        .write_buffer_size
        .saturating_mul(u64::from(c.max_write_buffer_number.max(1)));
    let cache = c.cache_size.saturating_add(memtables).max(1 << 20);
    let mut conn = format!(
        "cache_size={cache},session_max=1000,statistics=(fast),checkpoint=(wait=60),\
         log=(enabled={}),transaction_sync=(enabled=true,method={})",
        !c.disable_wal,
        if c.sync { "fsync" } else { "none" }
    );
    if !c.use_existing_db {
        conn.push_str(",create");
    }
    // WiredTiger has one switch for all IO on data files.
    if c.use_direct_reads || c.use_direct_io_for_flush_and_compaction {
        conn.push_str(",direct_io=[data]");
    }
    if let Some((_, lib)) = &codec {
        conn.push_str(&format!(",extensions=[{lib}]"));
    }
    // The leaf page is WiredTiger's unit of reading; it must be a multiple of the 4 KB
    // allocation size.
    let leaf = c.block_size.max(1).div_ceil(4096) * 4096;
    let table = format!(
        "key_format=u,value_format=u,leaf_page_max={leaf},block_compressor={},checksum={}",
        codec.map(|(n, _)| n).unwrap_or("none"),
        if c.verify_checksums { "on" } else { "off" }
    );
    Ok((conn, table))
}

/// An open WiredTiger connection with a pool of sessions.
pub struct WtEngine {
    conn: *mut ffi::WT_CONNECTION,
    uri: CString,
    pool: Mutex<Vec<Sess>>,
}

// SAFETY: WT_CONNECTION is thread-safe; sessions are handed to one thread at a time by the pool.
unsafe impl Send for WtEngine {}
// SAFETY: as for Send: `&self` methods only call the thread-safe connection or an exclusively
// held session.
unsafe impl Sync for WtEngine {}

/// A session checked out of the pool; returned on drop.
struct Lease<'a> {
    engine: &'a WtEngine,
    sess: Option<Sess>,
}

impl Lease<'_> {
    fn session(&self) -> *mut ffi::WT_SESSION {
        self.sess
            .as_ref()
            .map_or(std::ptr::null_mut(), |s| s.session)
    }
    fn cursor(&self) -> *mut ffi::WT_CURSOR {
        self.sess
            .as_ref()
            .map_or(std::ptr::null_mut(), |s| s.cursor)
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.sess.take() {
            self.engine
                .pool
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(s);
        }
    }
}

impl WtEngine {
    /// Opens (creating unless `use_existing_db`) a database at `path`.
    pub fn open(path: &Path, c: &CommonOptions) -> EngineResult<Self> {
        let (conn_cfg, table_cfg) = configs(c)?;
        prepare_dir(NAME, path, c)?;
        let home = c_path(NAME, path)?;
        let conn_cfg = CString::new(conn_cfg).map_err(|e| e.to_string())?;
        let mut conn: *mut ffi::WT_CONNECTION = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings alive for the call and a valid out-pointer.
        let rc = unsafe { ffi::shwt_open(home.as_ptr(), conn_cfg.as_ptr(), &mut conn) };
        if rc != 0 || conn.is_null() {
            return Err(wt_err("wiredtiger_open", rc));
        }
        let engine = WtEngine {
            conn,
            uri: CString::new(URI).map_err(|e| e.to_string())?,
            pool: Mutex::new(Vec::new()),
        };
        if !c.use_existing_db {
            let mut session: *mut ffi::WT_SESSION = std::ptr::null_mut();
            let table_cfg = CString::new(table_cfg).map_err(|e| e.to_string())?;
            // SAFETY: open connection; the session is opened, used once and closed (the
            // connection would close it anyway on drop if an error path returned early).
            let rc = unsafe {
                let rc = ffi::shwt_open_session(engine.conn, &mut session);
                if rc != 0 {
                    rc
                } else {
                    let rc = ffi::shwt_create(session, engine.uri.as_ptr(), table_cfg.as_ptr());
                    ffi::shwt_session_close(session);
                    rc
                }
            };
            if rc != 0 {
                return Err(wt_err("create table:bench", rc));
            }
        }
        Ok(engine)
    }

    /// Looks `key` up and applies `read` to its value while the cursor still holds it (the
    /// value lives in WiredTiger's page until the cursor is reset).
    fn search<T>(&self, key: &[u8], read: impl Fn(&[u8]) -> T) -> EngineResult<Option<T>> {
        let lease = self.lease()?;
        let mut tries = 0;
        loop {
            let mut v: *const c_void = std::ptr::null();
            let mut vl = 0usize;
            // SAFETY: exclusively held cursor; `key` valid during the call; the value pointer
            // addresses cursor-owned memory, read before the cursor is reset.
            let (rc, out) = unsafe {
                let rc = ffi::shwt_search(
                    lease.cursor(),
                    key.as_ptr().cast(),
                    key.len(),
                    &mut v,
                    &mut vl,
                );
                let out = match rc {
                    0 if v.is_null() => Some(read(&[])),
                    0 => Some(read(std::slice::from_raw_parts(v.cast::<u8>(), vl))),
                    _ => None,
                };
                ffi::shwt_cursor_reset(lease.cursor());
                (rc, out)
            };
            if out.is_some() {
                return Ok(out);
            }
            if rc == notfound() {
                return Ok(None);
            }
            if rc == rollback() && tries < MAX_RETRIES {
                tries += 1;
                std::thread::yield_now();
                continue;
            }
            return Err(wt_err("search", rc));
        }
    }

    /// Takes a session (with its cursor) out of the pool, opening one if the pool is empty.
    fn lease(&self) -> EngineResult<Lease<'_>> {
        let pooled = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let sess = match pooled {
            Some(s) => s,
            None => {
                let mut session: *mut ffi::WT_SESSION = std::ptr::null_mut();
                let mut cursor: *mut ffi::WT_CURSOR = std::ptr::null_mut();
                // SAFETY: open connection; valid out-pointers; the cursor is opened on the new
                // session, which is closed again if that fails.
                unsafe {
                    let rc = ffi::shwt_open_session(self.conn, &mut session);
                    if rc != 0 {
                        return Err(wt_err("open_session", rc));
                    }
                    let rc = ffi::shwt_open_cursor(
                        session,
                        self.uri.as_ptr(),
                        std::ptr::null(),
                        &mut cursor,
                    );
                    if rc != 0 {
                        ffi::shwt_session_close(session);
                        return Err(wt_err("open_cursor", rc));
                    }
                }
                Sess { session, cursor }
            }
        };
        Ok(Lease {
            engine: self,
            sess: Some(sess),
        })
    }

    /// Runs `op` on the leased cursor, retrying while it loses write conflicts (WT_ROLLBACK).
    fn with_retry(
        &self,
        what: &str,
        mut op: impl FnMut(*mut ffi::WT_SESSION, *mut ffi::WT_CURSOR) -> c_int,
    ) -> EngineResult<()> {
        let lease = self.lease()?;
        let mut tries = 0;
        loop {
            let rc = op(lease.session(), lease.cursor());
            if rc == 0 {
                return Ok(());
            }
            // SAFETY: exclusively held cursor; a failed operation leaves it unpositioned or
            // positioned, and reset releases whatever it holds before a retry.
            unsafe { ffi::shwt_cursor_reset(lease.cursor()) };
            if rc == rollback() && tries < MAX_RETRIES {
                tries += 1;
                std::thread::yield_now();
                continue;
            }
            return Err(wt_err(what, rc));
        }
    }

    /// Connection statistics as (description, value) pairs.
    fn statistics(&self) -> EngineResult<Vec<(String, i64)>> {
        let lease = self.lease()?;
        let uri = CString::new("statistics:").map_err(|e| e.to_string())?;
        let mut cursor: *mut ffi::WT_CURSOR = std::ptr::null_mut();
        // SAFETY: exclusively held session; valid strings and out-pointer.
        let rc = unsafe {
            ffi::shwt_open_cursor(lease.session(), uri.as_ptr(), std::ptr::null(), &mut cursor)
        };
        if rc != 0 {
            return Err(wt_err("open statistics cursor", rc));
        }
        let mut out = Vec::new();
        let result = loop {
            let mut desc: *const c_char = std::ptr::null();
            let mut value = 0i64;
            // SAFETY: live statistics cursor; valid out-pointers; `desc` is copied before the
            // next step.
            let rc = unsafe { ffi::shwt_stat_next(cursor, &mut desc, &mut value) };
            if rc == notfound() {
                break Ok(out);
            }
            if rc != 0 {
                break Err(wt_err("read statistics", rc));
            }
            if !desc.is_null() {
                // SAFETY: a NUL-terminated string owned by the cursor, valid until its next step.
                let d = unsafe { CStr::from_ptr(desc) }
                    .to_string_lossy()
                    .into_owned();
                out.push((d, value));
            }
        };
        // SAFETY: closes the statistics cursor opened above, once.
        unsafe { ffi::shwt_cursor_close(cursor) };
        result
    }

    fn checkpoint(&self) -> EngineResult<()> {
        self.with_retry("checkpoint", |s, _| {
            // SAFETY: exclusively held session; NULL config = defaults.
            unsafe { ffi::shwt_checkpoint(s, std::ptr::null()) }
        })
    }
}

impl Drop for WtEngine {
    fn drop(&mut self) {
        // SAFETY: closing the connection closes every session and cursor (pooled ones included;
        // no lease or iterator can outlive `&self`) and checkpoints; done once.
        unsafe { ffi::shwt_conn_close(self.conn) };
    }
}

/// A cursor over a snapshot: a leased session inside a read transaction.
pub struct WtIter<'a> {
    lease: Lease<'a>,
    in_txn: bool,
    valid: bool,
    key: Vec<u8>,
    value: Vec<u8>,
    err: Option<String>,
}

impl WtIter<'_> {
    /// Records the cursor's position after a move that returned `rc`.
    fn settle(&mut self, rc: c_int, what: &str) {
        self.valid = false;
        if rc == notfound() {
            return;
        }
        if rc != 0 {
            self.err = Some(wt_err(what, rc));
            return;
        }
        let (mut k, mut kl, mut v, mut vl) = (std::ptr::null(), 0usize, std::ptr::null(), 0usize);
        // SAFETY: the cursor is positioned; the returned pointers address cursor-owned memory
        // valid until the cursor moves, and are copied at once.
        let rc =
            unsafe { ffi::shwt_current(self.lease.cursor(), &mut k, &mut kl, &mut v, &mut vl) };
        if rc != 0 {
            self.err = Some(wt_err("cursor get", rc));
            return;
        }
        self.key.clear();
        self.value.clear();
        // SAFETY: as above; non-NULL pointers address `kl` / `vl` readable bytes.
        unsafe {
            if !k.is_null() {
                self.key
                    .extend_from_slice(std::slice::from_raw_parts(k.cast::<u8>(), kl));
            }
            if !v.is_null() {
                self.value
                    .extend_from_slice(std::slice::from_raw_parts(v.cast::<u8>(), vl));
            }
        }
        self.valid = true;
    }

    fn reset(&mut self) {
        // SAFETY: the leased cursor is exclusively ours.
        unsafe { ffi::shwt_cursor_reset(self.lease.cursor()) };
        self.valid = false;
    }
}

impl EngineIterator for WtIter<'_> {
    fn seek(&mut self, key: &[u8]) {
        let mut exact: c_int = 0;
        // SAFETY: exclusively held cursor; `key` valid during the call.
        let rc = unsafe {
            ffi::shwt_search_near(
                self.lease.cursor(),
                key.as_ptr().cast::<c_void>(),
                key.len(),
                &mut exact,
            )
        };
        if rc == 0 && exact < 0 {
            // Landed on the largest key below `key`: step to the next one.
            // SAFETY: exclusively held, positioned cursor.
            let rc = unsafe { ffi::shwt_next(self.lease.cursor()) };
            self.settle(rc, "cursor next");
        } else {
            self.settle(rc, "cursor search_near");
        }
    }
    fn seek_to_first(&mut self) {
        self.reset();
        // SAFETY: a reset cursor's next() moves to the first record.
        let rc = unsafe { ffi::shwt_next(self.lease.cursor()) };
        self.settle(rc, "cursor next");
    }
    fn seek_to_last(&mut self) {
        self.reset();
        // SAFETY: a reset cursor's prev() moves to the last record.
        let rc = unsafe { ffi::shwt_prev(self.lease.cursor()) };
        self.settle(rc, "cursor prev");
    }
    fn valid(&self) -> bool {
        self.valid
    }
    fn next(&mut self) {
        if !self.valid {
            return;
        }
        // SAFETY: exclusively held, positioned cursor.
        let rc = unsafe { ffi::shwt_next(self.lease.cursor()) };
        self.settle(rc, "cursor next");
    }
    fn prev(&mut self) {
        if !self.valid {
            return;
        }
        // SAFETY: exclusively held, positioned cursor.
        let rc = unsafe { ffi::shwt_prev(self.lease.cursor()) };
        self.settle(rc, "cursor prev");
    }
    fn key(&self) -> &[u8] {
        if self.valid {
            &self.key
        } else {
            &[]
        }
    }
    fn value(&self) -> &[u8] {
        if self.valid {
            &self.value
        } else {
            &[]
        }
    }
    fn status(&self) -> EngineResult<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

impl Drop for WtIter<'_> {
    fn drop(&mut self) {
        self.reset();
        if self.in_txn {
            // SAFETY: ends the read transaction begun in `iter` on this exclusively held
            // session, before the session goes back to the pool.
            unsafe { ffi::shwt_rollback_txn(self.lease.session()) };
        }
    }
}

/// An iterator that only reports an error (the trait's `iter` cannot fail).
struct FailedIter(String);

impl EngineIterator for FailedIter {
    fn seek(&mut self, _key: &[u8]) {}
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn valid(&self) -> bool {
        false
    }
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> EngineResult<()> {
        Err(self.0.clone())
    }
}

impl Engine for WtEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.with_retry("insert", |_, c| {
            // SAFETY: exclusively held cursor; slices valid during the call (WiredTiger copies
            // them into the update).
            unsafe {
                ffi::shwt_put(
                    c,
                    key.as_ptr().cast(),
                    key.len(),
                    value.as_ptr().cast(),
                    value.len(),
                )
            }
        })
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        self.search(key, <[u8]>::to_vec)
    }

    fn get_len(&self, key: &[u8]) -> EngineResult<Option<usize>> {
        self.search(key, <[u8]>::len)
    }

    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        self.with_retry("remove", |_, c| {
            // SAFETY: exclusively held cursor (overwrite=true: a missing key is not an error).
            let rc = unsafe { ffi::shwt_remove(c, key.as_ptr().cast(), key.len()) };
            if rc == notfound() {
                0
            } else {
                rc
            }
        })
    }

    fn write_batch(&self, ops: &[BatchOp]) -> EngineResult<()> {
        self.with_retry("batch", |s, c| {
            // SAFETY: exclusively held session and cursor; the transaction is begun here and
            // always committed or rolled back before returning; slices are valid during each
            // call.
            unsafe {
                let rc = ffi::shwt_begin(s, std::ptr::null());
                if rc != 0 {
                    return rc;
                }
                for op in ops {
                    let rc = match op {
                        BatchOp::Put(k, v) => {
                            ffi::shwt_put(c, k.as_ptr().cast(), k.len(), v.as_ptr().cast(), v.len())
                        }
                        BatchOp::Delete(k) => {
                            let rc = ffi::shwt_remove(c, k.as_ptr().cast(), k.len());
                            if rc == notfound() {
                                0
                            } else {
                                rc
                            }
                        }
                    };
                    if rc != 0 {
                        ffi::shwt_rollback_txn(s);
                        return rc;
                    }
                }
                ffi::shwt_commit(s, std::ptr::null())
            }
        })
    }

    fn iter(&self) -> Box<dyn EngineIterator + '_> {
        let lease = match self.lease() {
            Ok(l) => l,
            Err(e) => return Box::new(FailedIter(e)),
        };
        let Ok(cfg) = CString::new("isolation=snapshot") else {
            return Box::new(FailedIter("wiredtiger: bad config".into()));
        };
        // SAFETY: exclusively held session with no transaction running (every pooled session
        // is returned with its transaction ended); WtIter's Drop ends this one.
        let rc = unsafe { ffi::shwt_begin(lease.session(), cfg.as_ptr()) };
        if rc != 0 {
            return Box::new(FailedIter(wt_err("begin_transaction", rc)));
        }
        Box::new(WtIter {
            lease,
            in_txn: true,
            valid: false,
            key: Vec::new(),
            value: Vec::new(),
            err: None,
        })
    }

    fn flush(&self) -> EngineResult<()> {
        self.checkpoint()
    }

    fn compact(&self) -> EngineResult<()> {
        // A btree has no LSM compaction: write everything out (checkpoint), then let
        // WT_SESSION::compact give free space in the file back to the file system.
        self.checkpoint()?;
        let uri = self.uri.as_ptr();
        self.with_retry("compact", |s, _| {
            // SAFETY: exclusively held session; NUL-terminated URI owned by the engine.
            unsafe { ffi::shwt_compact(s, uri, std::ptr::null()) }
        })?;
        self.checkpoint()
    }

    fn wait_for_compactions(&self) -> EngineResult<()> {
        // No background compaction in a btree; eviction runs continuously.
        Ok(())
    }

    fn stats(&self) -> Option<String> {
        let stats = self.statistics().ok()?;
        let mut out = String::new();
        for (desc, value) in stats {
            out.push_str(&format!("{desc}: {value}\n"));
        }
        Some(out)
    }

    fn compaction_bytes_written(&self) -> Option<u64> {
        // The block manager's bytes written: every page write to the table and metadata files
        // (eviction and checkpoints), not the log, as RocksDB's figure excludes its WAL.
        self.statistics()
            .ok()?
            .into_iter()
            .find(|(d, _)| d == "block-manager: bytes written")
            .and_then(|(_, v)| u64::try_from(v).ok())
    }
}
