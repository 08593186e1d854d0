//! What the LevelDB and RocksDB adapters share: RocksDB's `c.h` began as a copy of LevelDB's,
//! so put/get/delete, write batches, iterators, properties and errors have the same shapes in
//! both. [`CApi`] names one library's functions for those shapes; [`CDb`] and [`CIter`] wrap
//! them once for both libraries, and [`Handle`] owns any other C object with its destroy
//! function. Each adapter keeps only its options and its engine-specific calls.
//!
//! The generic code calls through associated constants, which are known at compile time, so
//! every call is still a direct call into the library (no indirection on the measured path).
//! The shared C declarations differ between the two headers only in their `leveldb_` /
//! `rocksdb_` prefix, so [`shared_c_api!`] writes them, and the `CApi` implementation, once.

use super::take_err;
use crate::engine::{BatchOp, EngineIterator, EngineResult};
use std::ffi::{c_char, c_uchar, c_void, CStr, CString};
use std::marker::PhantomData;
opaque!(
    /// `leveldb_t` / `rocksdb_t`.
    Db,
    /// `leveldb_readoptions_t` / `rocksdb_readoptions_t`.
    ReadOptions,
    /// `leveldb_writeoptions_t` / `rocksdb_writeoptions_t`.
    WriteOptions,
    /// `leveldb_writebatch_t` / `rocksdb_writebatch_t`.
    WriteBatch,
    /// `leveldb_iterator_t` / `rocksdb_iterator_t`.
    Iterator
);

/// The `char** errptr` out-parameter: left NULL, or set to a message the library malloc'ed.
pub type ErrPtr = *mut *mut c_char;

/// One library's functions for the shapes LevelDB and RocksDB share, each the library's
/// function of the same name (`leveldb_put` / `rocksdb_put`, ...).
///
/// # Safety
/// Each constant must be the library's function with the documented `c.h` contract: handles
/// are the library's own, `errptr` is set as [`ErrPtr`] says, `get` and `property_value`
/// return buffers that [`CApi::FREE`] releases, and iterator key/value pointers stay valid until
/// the iterator moves or is destroyed.
pub unsafe trait CApi: 'static {
    /// The engine name errors start with.
    const NAME: &'static str;
    /// The library's options object.
    type Options;
    /// `*_open`.
    const OPEN: unsafe extern "C" fn(*const Self::Options, *const c_char, ErrPtr) -> *mut Db;
    /// `*_close`.
    const CLOSE: unsafe extern "C" fn(*mut Db);
    /// `*_free`: releases buffers the library returned.
    const FREE: unsafe extern "C" fn(*mut c_void);
    /// `*_put`.
    const PUT: PutFn;
    /// `*_delete`.
    const DELETE: DeleteFn;
    /// `*_write`.
    const WRITE: WriteFn;
    /// `*_get`.
    const GET: GetFn;
    /// `*_property_value`.
    const PROPERTY_VALUE: PropertyFn;
    /// `*_compact_range`.
    const COMPACT_RANGE: CompactRangeFn;
    /// `*_readoptions_destroy`.
    const READOPTIONS_DESTROY: unsafe extern "C" fn(*mut ReadOptions);
    /// `*_writeoptions_destroy`.
    const WRITEOPTIONS_DESTROY: unsafe extern "C" fn(*mut WriteOptions);
    /// `*_writebatch_create`.
    const WRITEBATCH_CREATE: unsafe extern "C" fn() -> *mut WriteBatch;
    /// `*_writebatch_destroy`.
    const WRITEBATCH_DESTROY: unsafe extern "C" fn(*mut WriteBatch);
    /// `*_writebatch_put`.
    const WRITEBATCH_PUT: BatchPutFn;
    /// `*_writebatch_delete`.
    const WRITEBATCH_DELETE: BatchDeleteFn;
    /// `*_create_iterator`.
    const CREATE_ITERATOR: CreateIterFn;
    /// `*_iter_destroy`.
    const ITER_DESTROY: IterFn;
    /// `*_iter_valid`.
    const ITER_VALID: unsafe extern "C" fn(*const Iterator) -> c_uchar;
    /// `*_iter_seek_to_first`.
    const ITER_SEEK_TO_FIRST: IterFn;
    /// `*_iter_seek_to_last`.
    const ITER_SEEK_TO_LAST: IterFn;
    /// `*_iter_seek`.
    const ITER_SEEK: IterSeekFn;
    /// `*_iter_next`.
    const ITER_NEXT: IterFn;
    /// `*_iter_prev`.
    const ITER_PREV: IterFn;
    /// `*_iter_key`.
    const ITER_KEY: IterSliceFn;
    /// `*_iter_value`.
    const ITER_VALUE: IterSliceFn;
    /// `*_iter_get_error`.
    const ITER_GET_ERROR: unsafe extern "C" fn(*const Iterator, ErrPtr);
}

/// Declares, in a module `shared_ffi`, the functions of the C API whose names start with
/// `$prefix` (`"leveldb"`, `"rocksdb"`) that [`CApi`] lists, with the signatures both headers
/// give them, and implements [`CApi`] for a new unit struct `$api` with them. `$options` is the
/// library's options type (the only handle type `open` takes that the two do not share).
macro_rules! shared_c_api {
    ($(#[$doc:meta])* $api:ident, $prefix:literal, $options:ty) => {
        /// The C declarations [`CApi`] needs, under the library's names.
        mod shared_ffi {
            // `$options` is written as the invoking module sees it.
            #[allow(unused_imports)]
            use super::*;
            use $crate::engines::peers::capi::{
                Db, ErrPtr, Iterator, ReadOptions, WriteBatch, WriteOptions,
            };
            use std::ffi::{c_char, c_uchar, c_void};

            extern "C" {
                #[link_name = concat!($prefix, "_open")]
                pub fn open(options: *const $options, name: *const c_char, err: ErrPtr) -> *mut Db;
                #[link_name = concat!($prefix, "_close")]
                pub fn close(db: *mut Db);
                #[link_name = concat!($prefix, "_free")]
                pub fn free(ptr: *mut c_void);
                #[link_name = concat!($prefix, "_put")]
                pub fn put(
                    db: *mut Db,
                    options: *const WriteOptions,
                    key: *const c_char,
                    keylen: usize,
                    val: *const c_char,
                    vallen: usize,
                    err: ErrPtr,
                );
                #[link_name = concat!($prefix, "_delete")]
                pub fn delete(
                    db: *mut Db,
                    options: *const WriteOptions,
                    key: *const c_char,
                    keylen: usize,
                    err: ErrPtr,
                );
                #[link_name = concat!($prefix, "_write")]
                pub fn write(
                    db: *mut Db,
                    options: *const WriteOptions,
                    batch: *mut WriteBatch,
                    err: ErrPtr,
                );
                #[link_name = concat!($prefix, "_get")]
                pub fn get(
                    db: *mut Db,
                    options: *const ReadOptions,
                    key: *const c_char,
                    keylen: usize,
                    vallen: *mut usize,
                    err: ErrPtr,
                ) -> *mut c_char;
                #[link_name = concat!($prefix, "_property_value")]
                pub fn property_value(db: *mut Db, propname: *const c_char) -> *mut c_char;
                #[link_name = concat!($prefix, "_compact_range")]
                pub fn compact_range(
                    db: *mut Db,
                    start_key: *const c_char,
                    start_key_len: usize,
                    limit_key: *const c_char,
                    limit_key_len: usize,
                );
                #[link_name = concat!($prefix, "_readoptions_destroy")]
                pub fn readoptions_destroy(o: *mut ReadOptions);
                #[link_name = concat!($prefix, "_writeoptions_destroy")]
                pub fn writeoptions_destroy(o: *mut WriteOptions);
                #[link_name = concat!($prefix, "_writebatch_create")]
                pub fn writebatch_create() -> *mut WriteBatch;
                #[link_name = concat!($prefix, "_writebatch_destroy")]
                pub fn writebatch_destroy(b: *mut WriteBatch);
                #[link_name = concat!($prefix, "_writebatch_put")]
                pub fn writebatch_put(
                    b: *mut WriteBatch,
                    key: *const c_char,
                    klen: usize,
                    val: *const c_char,
                    vlen: usize,
                );
                #[link_name = concat!($prefix, "_writebatch_delete")]
                pub fn writebatch_delete(b: *mut WriteBatch, key: *const c_char, klen: usize);
                #[link_name = concat!($prefix, "_create_iterator")]
                pub fn create_iterator(db: *mut Db, options: *const ReadOptions) -> *mut Iterator;
                #[link_name = concat!($prefix, "_iter_destroy")]
                pub fn iter_destroy(it: *mut Iterator);
                #[link_name = concat!($prefix, "_iter_valid")]
                pub fn iter_valid(it: *const Iterator) -> c_uchar;
                #[link_name = concat!($prefix, "_iter_seek_to_first")]
                pub fn iter_seek_to_first(it: *mut Iterator);
                #[link_name = concat!($prefix, "_iter_seek_to_last")]
                pub fn iter_seek_to_last(it: *mut Iterator);
                #[link_name = concat!($prefix, "_iter_seek")]
                pub fn iter_seek(it: *mut Iterator, k: *const c_char, klen: usize);
                #[link_name = concat!($prefix, "_iter_next")]
                pub fn iter_next(it: *mut Iterator);
                #[link_name = concat!($prefix, "_iter_prev")]
                pub fn iter_prev(it: *mut Iterator);
                #[link_name = concat!($prefix, "_iter_key")]
                pub fn iter_key(it: *const Iterator, klen: *mut usize) -> *const c_char;
                #[link_name = concat!($prefix, "_iter_value")]
                pub fn iter_value(it: *const Iterator, vlen: *mut usize) -> *const c_char;
                #[link_name = concat!($prefix, "_iter_get_error")]
                pub fn iter_get_error(it: *const Iterator, err: ErrPtr);
            }
        }

        $(#[$doc])*
        pub struct $api;

        // SAFETY: every constant is the library's function of the same name, declared just
        // above with the signature its `c.h` gives; their contracts are the ones `CApi`
        // documents.
        unsafe impl $crate::engines::peers::capi::CApi for $api {
            const NAME: &'static str = $prefix;
            type Options = $options;
            const OPEN: unsafe extern "C" fn(
                *const $options,
                *const std::ffi::c_char,
                $crate::engines::peers::capi::ErrPtr,
            ) -> *mut $crate::engines::peers::capi::Db = shared_ffi::open;
            const CLOSE: unsafe extern "C" fn(*mut $crate::engines::peers::capi::Db) =
                shared_ffi::close;
            const FREE: unsafe extern "C" fn(*mut std::ffi::c_void) = shared_ffi::free;
            const PUT: $crate::engines::peers::capi::PutFn = shared_ffi::put;
            const DELETE: $crate::engines::peers::capi::DeleteFn = shared_ffi::delete;
            const WRITE: $crate::engines::peers::capi::WriteFn = shared_ffi::write;
            const GET: $crate::engines::peers::capi::GetFn = shared_ffi::get;
            const PROPERTY_VALUE: $crate::engines::peers::capi::PropertyFn =
                shared_ffi::property_value;
            const COMPACT_RANGE: $crate::engines::peers::capi::CompactRangeFn =
                shared_ffi::compact_range;
            const READOPTIONS_DESTROY: unsafe extern "C" fn(
                *mut $crate::engines::peers::capi::ReadOptions,
            ) = shared_ffi::readoptions_destroy;
            const WRITEOPTIONS_DESTROY: unsafe extern "C" fn(
                *mut $crate::engines::peers::capi::WriteOptions,
            ) = shared_ffi::writeoptions_destroy;
            const WRITEBATCH_CREATE: unsafe extern "C" fn(
            ) -> *mut $crate::engines::peers::capi::WriteBatch = shared_ffi::writebatch_create;
            const WRITEBATCH_DESTROY: unsafe extern "C" fn(
                *mut $crate::engines::peers::capi::WriteBatch,
            ) = shared_ffi::writebatch_destroy;
            const WRITEBATCH_PUT: $crate::engines::peers::capi::BatchPutFn =
                shared_ffi::writebatch_put;
            const WRITEBATCH_DELETE: $crate::engines::peers::capi::BatchDeleteFn =
                shared_ffi::writebatch_delete;
            const CREATE_ITERATOR: $crate::engines::peers::capi::CreateIterFn =
                shared_ffi::create_iterator;
            const ITER_DESTROY: $crate::engines::peers::capi::IterFn = shared_ffi::iter_destroy;
            const ITER_VALID: unsafe extern "C" fn(
                *const $crate::engines::peers::capi::Iterator,
            ) -> std::ffi::c_uchar = shared_ffi::iter_valid;
            const ITER_SEEK_TO_FIRST: $crate::engines::peers::capi::IterFn =
                shared_ffi::iter_seek_to_first;
            const ITER_SEEK_TO_LAST: $crate::engines::peers::capi::IterFn =
                shared_ffi::iter_seek_to_last;
            const ITER_SEEK: $crate::engines::peers::capi::IterSeekFn = shared_ffi::iter_seek;
            const ITER_NEXT: $crate::engines::peers::capi::IterFn = shared_ffi::iter_next;
            const ITER_PREV: $crate::engines::peers::capi::IterFn = shared_ffi::iter_prev;
            const ITER_KEY: $crate::engines::peers::capi::IterSliceFn = shared_ffi::iter_key;
            const ITER_VALUE: $crate::engines::peers::capi::IterSliceFn = shared_ffi::iter_value;
            const ITER_GET_ERROR: unsafe extern "C" fn(
                *const $crate::engines::peers::capi::Iterator,
                $crate::engines::peers::capi::ErrPtr,
            ) = shared_ffi::iter_get_error;
        }
    };
}
pub(crate) use shared_c_api;

/// `*_put`.
pub type PutFn = unsafe extern "C" fn(
    *mut Db,
    *const WriteOptions,
    *const c_char,
    usize,
    *const c_char,
    usize,
    ErrPtr,
);
/// `*_delete`.
pub type DeleteFn =
    unsafe extern "C" fn(*mut Db, *const WriteOptions, *const c_char, usize, ErrPtr);
/// `*_write`.
pub type WriteFn = unsafe extern "C" fn(*mut Db, *const WriteOptions, *mut WriteBatch, ErrPtr);
/// `*_get`.
pub type GetFn = unsafe extern "C" fn(
    *mut Db,
    *const ReadOptions,
    *const c_char,
    usize,
    *mut usize,
    ErrPtr,
) -> *mut c_char;
/// `*_property_value`.
pub type PropertyFn = unsafe extern "C" fn(*mut Db, *const c_char) -> *mut c_char;
/// `*_compact_range`.
pub type CompactRangeFn = unsafe extern "C" fn(*mut Db, *const c_char, usize, *const c_char, usize);
/// `*_writebatch_put`.
pub type BatchPutFn =
    unsafe extern "C" fn(*mut WriteBatch, *const c_char, usize, *const c_char, usize);
/// `*_writebatch_delete`.
pub type BatchDeleteFn = unsafe extern "C" fn(*mut WriteBatch, *const c_char, usize);
/// `*_create_iterator`.
pub type CreateIterFn = unsafe extern "C" fn(*mut Db, *const ReadOptions) -> *mut Iterator;
/// An iterator call with no other argument (`*_iter_next`, `*_iter_destroy`, ...).
pub type IterFn = unsafe extern "C" fn(*mut Iterator);
/// `*_iter_seek`.
pub type IterSeekFn = unsafe extern "C" fn(*mut Iterator, *const c_char, usize);
/// `*_iter_key`, `*_iter_value`.
pub type IterSliceFn = unsafe extern "C" fn(*const Iterator, *mut usize) -> *const c_char;

/// An owned C object, destroyed once (if not NULL) with its library's destroy function.
pub struct Handle<T> {
    ptr: *mut T,
    destroy: unsafe extern "C" fn(*mut T),
}

impl<T> Handle<T> {
    /// Takes ownership of `ptr` (NULL allowed: nothing to destroy).
    ///
    /// # Safety
    /// `ptr` must be NULL or a live object that `destroy` releases, owned by nobody else.
    pub unsafe fn new(ptr: *mut T, destroy: unsafe extern "C" fn(*mut T)) -> Self {
        Handle { ptr, destroy }
    }

    /// The raw pointer, for calls into the library.
    pub fn ptr(&self) -> *mut T {
        self.ptr
    }
}

impl<T> Drop for Handle<T> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: per `new`, a live object we own, destroyed exactly once, here.
            unsafe { (self.destroy)(self.ptr) }
        }
    }
}

/// Runs `call` with a fresh `errptr` and turns what it left there into the result.
fn with_err<A: CApi>(call: impl FnOnce(ErrPtr)) -> EngineResult<()> {
    let mut err: *mut c_char = std::ptr::null_mut();
    call(&mut err);
    // SAFETY: `err` is NULL or the malloc'ed message a call of library `A` left, which nothing
    // else frees.
    unsafe { take_err(A::NAME, err, A::FREE) }
}

/// An open database of library `A` with the read and write options every call uses. Dropping
/// it closes the database, then destroys the options. Objects the library's options point to
/// (cache, filter policy) belong in fields declared after this one, so they outlive it.
pub struct CDb<A: CApi> {
    db: *mut Db,
    ro: Handle<ReadOptions>,
    wo: Handle<WriteOptions>,
    _api: PhantomData<A>,
}

// SAFETY: LevelDB's and RocksDB's `DB` are documented safe for concurrent use from many threads
// without external synchronisation; the read and write options are only read after open.
unsafe impl<A: CApi> Send for CDb<A> {}
// SAFETY: as for Send: every `&self` method calls thread-safe entry points of the library.
unsafe impl<A: CApi> Sync for CDb<A> {}

impl<A: CApi> CDb<A> {
    /// The read options every read uses (for calls the shared API does not wrap).
    pub fn read_options(&self) -> *const ReadOptions {
        self.ro.ptr()
    }

    /// The write options every write uses (for calls the shared API does not wrap).
    pub fn write_options(&self) -> *const WriteOptions {
        self.wo.ptr()
    }

    /// Opens the database at `path` with `options`; `ro` and `wo` are used by every call.
    pub fn open(
        options: &Handle<A::Options>,
        path: &CStr,
        ro: Handle<ReadOptions>,
        wo: Handle<WriteOptions>,
    ) -> EngineResult<Self> {
        let mut db = std::ptr::null_mut();
        // SAFETY: live options, a NUL-terminated path alive for the call, a valid errptr.
        with_err::<A>(|err| db = unsafe { (A::OPEN)(options.ptr(), path.as_ptr(), err) })?;
        if db.is_null() {
            return Err(format!("{}: open returned no database", A::NAME));
        }
        Ok(CDb {
            db,
            ro,
            wo,
            _api: PhantomData,
        })
    }

    /// The raw database, for the adapter's engine-specific calls.
    pub fn raw(&self) -> *mut Db {
        self.db
    }

    /// Stores a value.
    pub fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        // SAFETY: open database, live write options; the slices are valid for their lengths
        // during the call (the library copies them); a valid errptr.
        with_err::<A>(|err| unsafe {
            (A::PUT)(
                self.db,
                self.wo.ptr(),
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                err,
            )
        })
    }

    /// Reads a value (copied out of the library's buffer, which is then freed).
    pub fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        let mut len = 0usize;
        let mut p: *mut c_char = std::ptr::null_mut();
        let res = with_err::<A>(|err| {
            // SAFETY: open database, live read options, `key` valid during the call, valid
            // out-pointers.
            p = unsafe {
                (A::GET)(
                    self.db,
                    self.ro.ptr(),
                    key.as_ptr().cast(),
                    key.len(),
                    &mut len,
                    err,
                )
            }
        });
        if p.is_null() {
            return res.map(|()| None);
        }
        // SAFETY: a non-NULL result addresses `len` malloc'ed bytes that we own: copied (unless
        // the call failed), then freed once with the library's free.
        let v = unsafe {
            let v = res
                .as_ref()
                .ok()
                .map(|()| std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec());
            (A::FREE)(p.cast());
            v
        };
        res.map(|()| v)
    }

    /// Deletes a key.
    pub fn delete(&self, key: &[u8]) -> EngineResult<()> {
        // SAFETY: open database, live write options, `key` valid during the call, a valid errptr.
        with_err::<A>(|err| unsafe {
            (A::DELETE)(self.db, self.wo.ptr(), key.as_ptr().cast(), key.len(), err)
        })
    }

    /// Applies `ops` atomically through one write batch.
    pub fn write_batch(&self, ops: &[BatchOp]) -> EngineResult<()> {
        // SAFETY: a fresh batch, owned here and destroyed once when `batch` drops.
        let batch = unsafe { Handle::new((A::WRITEBATCH_CREATE)(), A::WRITEBATCH_DESTROY) };
        for op in ops {
            // SAFETY: a live batch; the slices are valid during each call (the batch copies).
            unsafe {
                match op {
                    BatchOp::Put(k, v) => (A::WRITEBATCH_PUT)(
                        batch.ptr(),
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    ),
                    BatchOp::Delete(k) => {
                        (A::WRITEBATCH_DELETE)(batch.ptr(), k.as_ptr().cast(), k.len())
                    }
                }
            }
        }
        // SAFETY: open database, live write options and batch, a valid errptr.
        with_err::<A>(|err| unsafe { (A::WRITE)(self.db, self.wo.ptr(), batch.ptr(), err) })
    }

    /// A new iterator (an implicit snapshot); it borrows the database.
    pub fn iter(&self) -> CIter<'_, A> {
        // SAFETY: open database and live read options; the iterator is destroyed by CIter's Drop,
        // which the borrow of `self` orders before the database can close.
        let it = unsafe { (A::CREATE_ITERATOR)(self.db, self.ro.ptr()) };
        CIter { it, _db: self }
    }

    /// A string property of the database, if the library knows it.
    pub fn property(&self, name: &str) -> Option<String> {
        let cname = CString::new(name).ok()?;
        // SAFETY: open database; `cname` is NUL-terminated and alive for the call.
        let p = unsafe { (A::PROPERTY_VALUE)(self.db, cname.as_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-NULL result is a malloc'ed NUL-terminated string that we own: copied,
        // then freed once with the library's free.
        unsafe {
            let s = CStr::from_ptr(p).to_string_lossy().into_owned();
            (A::FREE)(p.cast());
            Some(s)
        }
    }

    /// Compacts the key range `[start, limit]`; `None` is an open end. Blocks until done.
    pub fn compact_range(&self, start: Option<&[u8]>, limit: Option<&[u8]>) {
        let raw =
            |k: Option<&[u8]>| k.map_or((std::ptr::null(), 0), |k| (k.as_ptr().cast(), k.len()));
        let ((s, sl), (l, ll)) = (raw(start), raw(limit));
        // SAFETY: open database; each bound is NULL (open end) or valid for its length during
        // the call.
        unsafe { (A::COMPACT_RANGE)(self.db, s, sl, l, ll) }
    }
}

impl<A: CApi> Drop for CDb<A> {
    fn drop(&mut self) {
        // SAFETY: the database is closed once; no iterator is alive (each borrows `self`). The
        // read and write options drop after this, and other objects the options point to are
        // fields of the adapter declared after this one.
        unsafe { (A::CLOSE)(self.db) }
    }
}

/// An iterator of library `A`; it borrows the database so it cannot outlive it.
pub struct CIter<'a, A: CApi> {
    it: *mut Iterator,
    _db: &'a CDb<A>,
}

impl<A: CApi> CIter<'_, A> {
    fn slice(&self, key: bool) -> &[u8] {
        if !self.valid() {
            return &[];
        }
        let mut len = 0usize;
        // SAFETY: the iterator is live and valid; the returned pointer addresses `len` bytes
        // that stay valid until the iterator moves, which needs `&mut self` and so cannot happen
        // while the returned borrow of `self` lives.
        unsafe {
            let p = if key {
                (A::ITER_KEY)(self.it, &mut len)
            } else {
                (A::ITER_VALUE)(self.it, &mut len)
            };
            if p.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(p.cast::<u8>(), len)
            }
        }
    }
}

impl<A: CApi> EngineIterator for CIter<'_, A> {
    fn seek(&mut self, key: &[u8]) {
        // SAFETY: live iterator; `key` is valid for `key.len()` bytes during the call.
        unsafe { (A::ITER_SEEK)(self.it, key.as_ptr().cast(), key.len()) }
    }
    fn seek_to_first(&mut self) {
        // SAFETY: live iterator.
        unsafe { (A::ITER_SEEK_TO_FIRST)(self.it) }
    }
    fn seek_to_last(&mut self) {
        // SAFETY: live iterator.
        unsafe { (A::ITER_SEEK_TO_LAST)(self.it) }
    }
    fn valid(&self) -> bool {
        // SAFETY: live iterator.
        unsafe { (A::ITER_VALID)(self.it) != 0 }
    }
    fn next(&mut self) {
        if self.valid() {
            // SAFETY: live iterator positioned on an entry (both libraries require Valid()).
            unsafe { (A::ITER_NEXT)(self.it) }
        }
    }
    fn prev(&mut self) {
        if self.valid() {
            // SAFETY: live iterator positioned on an entry (both libraries require Valid()).
            unsafe { (A::ITER_PREV)(self.it) }
        }
    }
    fn key(&self) -> &[u8] {
        self.slice(true)
    }
    fn value(&self) -> &[u8] {
        self.slice(false)
    }
    fn status(&self) -> EngineResult<()> {
        // SAFETY: live iterator and a valid errptr.
        with_err::<A>(|err| unsafe { (A::ITER_GET_ERROR)(self.it, err) })
    }
}

impl<A: CApi> Drop for CIter<'_, A> {
    fn drop(&mut self) {
        // SAFETY: destroyed once, before the database (the iterator borrows it).
        unsafe { (A::ITER_DESTROY)(self.it) }
    }
}

/// RocksDB's calls for read-only and secondary instances, checkpoints and backup engines
/// (`rocksdb/c.h` 7.8; LevelDB has none of them), for the differential tests of those
/// capabilities (`differential_ops.rs`). The opens are the column-family variants
/// (`rocksdb_open_for_read_only_column_families`, `rocksdb_open_as_secondary_column_families`):
/// RocksDB refuses to open a database with families without naming them all.
///
/// Callers pass their own handle types (each module declares its own opaque `rocksdb_t`),
/// cast to these; the contracts are those of the header.
#[cfg(test)]
pub mod rocksdb_ops {
    use super::super::take_err;
    use super::{Db, ErrPtr, Handle};
    use crate::engine::EngineResult;
    use std::ffi::{c_char, c_int, c_uchar, c_void, CString};

    opaque!(
        /// `rocksdb_options_t`.
        Options,
        /// `rocksdb_column_family_handle_t`.
        ColumnFamilyHandle,
        /// `rocksdb_checkpoint_t`.
        Checkpoint,
        /// `rocksdb_backup_engine_t`.
        BackupEngineHandle,
        /// `rocksdb_backup_engine_info_t`.
        BackupEngineInfo,
        /// `rocksdb_restore_options_t`.
        RestoreOptions
    );

    extern "C" {
        fn rocksdb_free(p: *mut c_void);
        fn rocksdb_options_create() -> *mut Options;
        fn rocksdb_options_destroy(o: *mut Options);
        fn rocksdb_open_for_read_only_column_families(
            options: *const Options,
            name: *const c_char,
            num_column_families: c_int,
            column_family_names: *const *const c_char,
            column_family_options: *const *const Options,
            column_family_handles: *mut *mut ColumnFamilyHandle,
            error_if_wal_file_exists: c_uchar,
            errptr: ErrPtr,
        ) -> *mut Db;
        fn rocksdb_open_as_secondary_column_families(
            options: *const Options,
            name: *const c_char,
            secondary_path: *const c_char,
            num_column_families: c_int,
            column_family_names: *const *const c_char,
            column_family_options: *const *const Options,
            column_family_handles: *mut *mut ColumnFamilyHandle,
            errptr: ErrPtr,
        ) -> *mut Db;
        fn rocksdb_try_catch_up_with_primary(db: *mut Db, errptr: ErrPtr);
        fn rocksdb_checkpoint_object_create(db: *mut Db, errptr: ErrPtr) -> *mut Checkpoint;
        fn rocksdb_checkpoint_create(
            checkpoint: *mut Checkpoint,
            checkpoint_dir: *const c_char,
            log_size_for_flush: u64,
            errptr: ErrPtr,
        );
        fn rocksdb_checkpoint_object_destroy(checkpoint: *mut Checkpoint);
        fn rocksdb_backup_engine_open(
            options: *const Options,
            path: *const c_char,
            errptr: ErrPtr,
        ) -> *mut BackupEngineHandle;
        fn rocksdb_backup_engine_create_new_backup_flush(
            be: *mut BackupEngineHandle,
            db: *mut Db,
            flush_before_backup: c_uchar,
            errptr: ErrPtr,
        );
        fn rocksdb_backup_engine_purge_old_backups(
            be: *mut BackupEngineHandle,
            num_backups_to_keep: u32,
            errptr: ErrPtr,
        );
        fn rocksdb_backup_engine_verify_backup(
            be: *mut BackupEngineHandle,
            backup_id: u32,
            errptr: ErrPtr,
        );
        fn rocksdb_restore_options_create() -> *mut RestoreOptions;
        fn rocksdb_restore_options_destroy(o: *mut RestoreOptions);
        fn rocksdb_backup_engine_restore_db_from_latest_backup(
            be: *mut BackupEngineHandle,
            db_dir: *const c_char,
            wal_dir: *const c_char,
            restore_options: *const RestoreOptions,
            errptr: ErrPtr,
        );
        fn rocksdb_backup_engine_restore_db_from_backup(
            be: *mut BackupEngineHandle,
            db_dir: *const c_char,
            wal_dir: *const c_char,
            restore_options: *const RestoreOptions,
            backup_id: u32,
            errptr: ErrPtr,
        );
        fn rocksdb_backup_engine_get_backup_info(
            be: *mut BackupEngineHandle,
        ) -> *const BackupEngineInfo;
        fn rocksdb_backup_engine_info_count(info: *const BackupEngineInfo) -> c_int;
        fn rocksdb_backup_engine_info_timestamp(info: *const BackupEngineInfo, index: c_int)
            -> i64;
        fn rocksdb_backup_engine_info_backup_id(info: *const BackupEngineInfo, index: c_int)
            -> u32;
        fn rocksdb_backup_engine_info_size(info: *const BackupEngineInfo, index: c_int) -> u64;
        fn rocksdb_backup_engine_info_number_files(
            info: *const BackupEngineInfo,
            index: c_int,
        ) -> u32;
        fn rocksdb_backup_engine_info_destroy(info: *const BackupEngineInfo);
        fn rocksdb_backup_engine_close(be: *mut BackupEngineHandle);
    }

    /// Runs `call` with a fresh `errptr` and turns what it left there into the result.
    fn with_err(call: impl FnOnce(ErrPtr)) -> EngineResult<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        call(&mut err);
        // SAFETY: `err` is NULL or the malloc'ed message a RocksDB call left, which nothing
        // else frees.
        unsafe { take_err("rocksdb", err, rocksdb_free) }
    }

    /// A path or name as a C string.
    fn c_string(s: &str) -> EngineResult<CString> {
        CString::new(s).map_err(|_| format!("rocksdb: {s:?} contains a NUL byte"))
    }

    /// How [`open_families`] opens a database.
    #[derive(Clone, Copy, Debug)]
    pub enum Follower<'a> {
        /// `DB::OpenForReadOnly` (a WAL present is replayed into memory, not an error).
        ReadOnly,
        /// `DB::OpenAsSecondary` with its own directory for its info log.
        Secondary(&'a str),
    }

    /// Opens the database at `path` read-only or as a secondary, with every family of `names`
    /// (the default one among them) and its options. Returns the database and one handle a
    /// family, in the order of `names`; the caller destroys the handles, then closes the
    /// database, each once.
    ///
    /// # Safety
    /// `options` and every `cf_options[i]` must be live `rocksdb_options_t`, one a name.
    pub unsafe fn open_families(
        how: Follower<'_>,
        options: *const Options,
        path: &str,
        names: &[&str],
        cf_options: &[*const Options],
    ) -> EngineResult<(*mut Db, Vec<*mut ColumnFamilyHandle>)> {
        assert_eq!(names.len(), cf_options.len(), "one options object a family");
        let cpath = c_string(path)?;
        let cnames = names
            .iter()
            .map(|n| c_string(n))
            .collect::<EngineResult<Vec<_>>>()?;
        let name_ptrs: Vec<*const c_char> = cnames.iter().map(|n| n.as_ptr()).collect();
        let mut handles = vec![std::ptr::null_mut(); names.len()];
        let n = c_int::try_from(names.len()).map_err(|_| "rocksdb: too many families")?;
        let secondary_dir = match how {
            Follower::ReadOnly => None,
            Follower::Secondary(dir) => Some(c_string(dir)?),
        };
        let mut db = std::ptr::null_mut();
        let res = with_err(|err| {
            // SAFETY: live options (the caller's contract); the C strings and the arrays of
            // `n` names, options and handle slots outlive the call.
            db = unsafe {
                match &secondary_dir {
                    None => rocksdb_open_for_read_only_column_families(
                        options,
                        cpath.as_ptr(),
                        n,
                        name_ptrs.as_ptr(),
                        cf_options.as_ptr(),
                        handles.as_mut_ptr(),
                        0,
                        err,
                    ),
                    Some(dir) => rocksdb_open_as_secondary_column_families(
                        options,
                        cpath.as_ptr(),
                        dir.as_ptr(),
                        n,
                        name_ptrs.as_ptr(),
                        cf_options.as_ptr(),
                        handles.as_mut_ptr(),
                        err,
                    ),
                }
            }
        });
        res?;
        if db.is_null() {
            return Err(format!("rocksdb: opening {path} returned no database"));
        }
        Ok((db, handles))
    }

    /// `DB::TryCatchUpWithPrimary`.
    ///
    /// # Safety
    /// `db` must be a live database opened by [`open_families`] as a secondary.
    pub unsafe fn try_catch_up_with_primary(db: *mut Db) -> EngineResult<()> {
        // SAFETY: a live secondary (the caller's contract) and a valid errptr.
        with_err(|err| unsafe { rocksdb_try_catch_up_with_primary(db, err) })
    }

    /// Makes a checkpoint of `db` in `dir` (which must not exist), flushing first when the
    /// WALs hold `log_size_for_flush` bytes or more (0: always; `u64::MAX`: never).
    ///
    /// # Safety
    /// `db` must be a live, writable database.
    pub unsafe fn checkpoint(db: *mut Db, dir: &str, log_size_for_flush: u64) -> EngineResult<()> {
        let cdir = c_string(dir)?;
        let mut object = std::ptr::null_mut();
        with_err(|err| {
            // SAFETY: a live database (the caller's contract) and a valid errptr.
            object = unsafe { rocksdb_checkpoint_object_create(db, err) }
        })?;
        // SAFETY: a fresh checkpoint object we own, destroyed once when `object` drops (after
        // the call below, before `db` can close: it lives only in this function).
        let object = unsafe { Handle::new(object, rocksdb_checkpoint_object_destroy) };
        // SAFETY: a live checkpoint object, a NUL-terminated path alive for the call, a valid
        // errptr.
        with_err(|err| unsafe {
            rocksdb_checkpoint_create(object.ptr(), cdir.as_ptr(), log_size_for_flush, err)
        })
    }

    /// What `rocksdb_backup_engine_get_backup_info` says of one backup.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct BackupSummary {
        /// The backup's id.
        pub id: u32,
        /// When it was taken (seconds since the epoch).
        pub timestamp: i64,
        /// Its files' total size in bytes.
        pub size: u64,
        /// How many files it has.
        pub files: u32,
    }

    /// An open RocksDB `BackupEngine` on a backup directory, closed on drop.
    pub struct RocksBackups {
        be: Handle<BackupEngineHandle>,
    }

    impl RocksBackups {
        /// Opens (creating it if needed) the backup directory `dir` with the default
        /// `BackupEngineOptions` (tables shared between backups, named by checksum).
        pub fn open(dir: &str) -> EngineResult<RocksBackups> {
            let cdir = c_string(dir)?;
            // SAFETY: fresh default options, owned by the Handle and destroyed when it drops
            // at the end of this function (the engine takes only the options' Env from them,
            // the process-wide default one).
            let options = unsafe { Handle::new(rocksdb_options_create(), rocksdb_options_destroy) };
            let mut be = std::ptr::null_mut();
            with_err(|err| {
                // SAFETY: live options, a NUL-terminated path alive for the call, a valid
                // errptr.
                be = unsafe { rocksdb_backup_engine_open(options.ptr(), cdir.as_ptr(), err) }
            })?;
            if be.is_null() {
                return Err(format!(
                    "rocksdb: opening backups in {dir} returned no engine"
                ));
            }
            // SAFETY: a fresh engine we own, closed once when the Handle drops.
            let be = unsafe { Handle::new(be, rocksdb_backup_engine_close) };
            Ok(RocksBackups { be })
        }

        /// `CreateNewBackup(db, flush_before_backup)`.
        ///
        /// # Safety
        /// `db` must be a live, writable database.
        pub unsafe fn create(&self, db: *mut Db, flush_before_backup: bool) -> EngineResult<()> {
            let flush = c_uchar::from(flush_before_backup);
            // SAFETY: a live engine, a live database (the caller's contract), a valid errptr.
            with_err(|err| unsafe {
                rocksdb_backup_engine_create_new_backup_flush(self.be.ptr(), db, flush, err)
            })
        }

        /// `PurgeOldBackups(keep)`.
        pub fn purge_old(&self, keep: u32) -> EngineResult<()> {
            // SAFETY: a live engine and a valid errptr.
            with_err(|err| unsafe {
                rocksdb_backup_engine_purge_old_backups(self.be.ptr(), keep, err)
            })
        }

        /// `VerifyBackup(id)` (sizes; not checksums, in the C API).
        pub fn verify(&self, id: u32) -> EngineResult<()> {
            // SAFETY: a live engine and a valid errptr.
            with_err(|err| unsafe { rocksdb_backup_engine_verify_backup(self.be.ptr(), id, err) })
        }

        /// Restores backup `id` (the latest with `None`) into `db_dir`, its WALs there too.
        pub fn restore(&self, id: Option<u32>, db_dir: &str) -> EngineResult<()> {
            let cdir = c_string(db_dir)?;
            // SAFETY: fresh restore options, owned by the Handle and destroyed once when it
            // drops at the end of this function, after the call that reads them.
            let ro = unsafe {
                Handle::new(
                    rocksdb_restore_options_create(),
                    rocksdb_restore_options_destroy,
                )
            };
            // SAFETY: a live engine and restore options, NUL-terminated paths alive for the
            // call, a valid errptr.
            with_err(|err| unsafe {
                let (be, dir) = (self.be.ptr(), cdir.as_ptr());
                match id {
                    None => rocksdb_backup_engine_restore_db_from_latest_backup(
                        be,
                        dir,
                        dir,
                        ro.ptr(),
                        err,
                    ),
                    Some(id) => rocksdb_backup_engine_restore_db_from_backup(
                        be,
                        dir,
                        dir,
                        ro.ptr(),
                        id,
                        err,
                    ),
                }
            })
        }

        /// Every backup, as `GetBackupInfo` lists them (oldest first).
        pub fn list(&self) -> Vec<BackupSummary> {
            // SAFETY: a live engine; the info object returned is ours, read only within its
            // count and destroyed once, here.
            unsafe {
                let info = rocksdb_backup_engine_get_backup_info(self.be.ptr());
                let n = rocksdb_backup_engine_info_count(info);
                let out = (0..n)
                    .map(|i| BackupSummary {
                        id: rocksdb_backup_engine_info_backup_id(info, i),
                        timestamp: rocksdb_backup_engine_info_timestamp(info, i),
                        size: rocksdb_backup_engine_info_size(info, i),
                        files: rocksdb_backup_engine_info_number_files(info, i),
                    })
                    .collect();
                rocksdb_backup_engine_info_destroy(info);
                out
            }
        }
    }
}
