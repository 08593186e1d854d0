//! Differential test against RocksDB itself (linked for the benchmarks): one random sequence of
//! puts, deletes, single deletes, uint64add merges and cross-family batches over three column
//! families, with flushes and compactions, runs on ShaleDB and on RocksDB, and every read must
//! be equal. RocksDB's column-family and merge-operator C API is declared here, for this test
//! only.

use shaledb::merge_operators::UInt64Add;
use shaledb::{CfOptions, ColumnFamily, Db, Options, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, CString};
use std::path::Path;
use std::sync::Arc;

#[allow(non_camel_case_types)]
mod ffi {
    use std::ffi::{c_char, c_int, c_uchar, c_void};
    opaque!(
        rocksdb_t,
        rocksdb_options_t,
        rocksdb_column_family_handle_t,
        rocksdb_readoptions_t,
        rocksdb_writeoptions_t,
        rocksdb_flushoptions_t,
        rocksdb_writebatch_t,
        rocksdb_iterator_t,
        rocksdb_snapshot_t
    );
    pub type ErrPtr = *mut *mut c_char;

    extern "C" {
        pub fn rocksdb_options_create() -> *mut rocksdb_options_t;
        pub fn rocksdb_options_destroy(o: *mut rocksdb_options_t);
        pub fn rocksdb_options_set_create_if_missing(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_create_missing_column_families(
            o: *mut rocksdb_options_t,
            v: c_uchar,
        );
        pub fn rocksdb_options_set_write_buffer_size(o: *mut rocksdb_options_t, v: usize);
        pub fn rocksdb_open_column_families(
            options: *const rocksdb_options_t,
            name: *const c_char,
            num_column_families: c_int,
            column_family_names: *const *const c_char,
            column_family_options: *const *const rocksdb_options_t,
            column_family_handles: *mut *mut rocksdb_column_family_handle_t,
            errptr: ErrPtr,
        ) -> *mut rocksdb_t;
        pub fn rocksdb_column_family_handle_destroy(h: *mut rocksdb_column_family_handle_t);
        pub fn rocksdb_close(db: *mut rocksdb_t);
        pub fn rocksdb_free(p: *mut c_void);
        pub fn rocksdb_readoptions_create() -> *mut rocksdb_readoptions_t;
        pub fn rocksdb_readoptions_destroy(o: *mut rocksdb_readoptions_t);
        pub fn rocksdb_writeoptions_create() -> *mut rocksdb_writeoptions_t;
        pub fn rocksdb_writeoptions_destroy(o: *mut rocksdb_writeoptions_t);
        pub fn rocksdb_flushoptions_create() -> *mut rocksdb_flushoptions_t;
        pub fn rocksdb_flushoptions_destroy(o: *mut rocksdb_flushoptions_t);
        pub fn rocksdb_flushoptions_set_wait(o: *mut rocksdb_flushoptions_t, v: c_uchar);
        pub fn rocksdb_flush_cf(
            db: *mut rocksdb_t,
            o: *const rocksdb_flushoptions_t,
            cf: *mut rocksdb_column_family_handle_t,
            errptr: ErrPtr,
        );
        pub fn rocksdb_compact_range_cf(
            db: *mut rocksdb_t,
            cf: *mut rocksdb_column_family_handle_t,
            start: *const c_char,
            start_len: usize,
            limit: *const c_char,
            limit_len: usize,
        );
        pub fn rocksdb_writebatch_create() -> *mut rocksdb_writebatch_t;
        pub fn rocksdb_writebatch_destroy(b: *mut rocksdb_writebatch_t);
        pub fn rocksdb_writebatch_put_cf(
            b: *mut rocksdb_writebatch_t,
            cf: *mut rocksdb_column_family_handle_t,
            k: *const c_char,
            klen: usize,
            v: *const c_char,
            vlen: usize,
        );
        pub fn rocksdb_writebatch_delete_cf(
            b: *mut rocksdb_writebatch_t,
            cf: *mut rocksdb_column_family_handle_t,
            k: *const c_char,
            klen: usize,
        );
        pub fn rocksdb_writebatch_singledelete_cf(
            b: *mut rocksdb_writebatch_t,
            cf: *mut rocksdb_column_family_handle_t,
            k: *const c_char,
            klen: usize,
        );
        pub fn rocksdb_writebatch_delete_range_cf(
            b: *mut rocksdb_writebatch_t,
            cf: *mut rocksdb_column_family_handle_t,
            start: *const c_char,
            start_len: usize,
            end: *const c_char,
            end_len: usize,
        );
        pub fn rocksdb_writebatch_merge_cf(
            b: *mut rocksdb_writebatch_t,
            cf: *mut rocksdb_column_family_handle_t,
            k: *const c_char,
            klen: usize,
            v: *const c_char,
            vlen: usize,
        );
        pub fn rocksdb_write(
            db: *mut rocksdb_t,
            o: *const rocksdb_writeoptions_t,
            b: *mut rocksdb_writebatch_t,
            errptr: ErrPtr,
        );
        pub fn rocksdb_get_cf(
            db: *mut rocksdb_t,
            o: *const rocksdb_readoptions_t,
            cf: *mut rocksdb_column_family_handle_t,
            k: *const c_char,
            klen: usize,
            vlen: *mut usize,
            errptr: ErrPtr,
        ) -> *mut c_char;
        pub fn rocksdb_create_iterator_cf(
            db: *mut rocksdb_t,
            o: *const rocksdb_readoptions_t,
            cf: *mut rocksdb_column_family_handle_t,
        ) -> *mut rocksdb_iterator_t;
        pub fn rocksdb_iter_destroy(it: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_seek_to_first(it: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_seek_to_last(it: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_prev(it: *mut rocksdb_iterator_t);
        pub fn rocksdb_create_snapshot(db: *mut rocksdb_t) -> *const rocksdb_snapshot_t;
        pub fn rocksdb_release_snapshot(db: *mut rocksdb_t, s: *const rocksdb_snapshot_t);
        pub fn rocksdb_readoptions_set_snapshot(
            o: *mut rocksdb_readoptions_t,
            s: *const rocksdb_snapshot_t,
        );
        pub fn rocksdb_iter_valid(it: *const rocksdb_iterator_t) -> c_uchar;
        pub fn rocksdb_iter_next(it: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_key(it: *const rocksdb_iterator_t, len: *mut usize) -> *const c_char;
        pub fn rocksdb_iter_value(it: *const rocksdb_iterator_t, len: *mut usize) -> *const c_char;
        pub fn rocksdb_iter_get_error(it: *const rocksdb_iterator_t, errptr: ErrPtr);
    }
}

/// The families of the test, in RocksDB's handle order: "counters" merges with uint64add,
/// "log" with string append (',').
const FAMILIES: [&str; 4] = ["default", "counters", "plain", "log"];

/// RocksDB opened with the three families.
struct Rocks {
    db: *mut ffi::rocksdb_t,
    cfs: Vec<*mut ffi::rocksdb_column_family_handle_t>,
    options: Vec<*mut ffi::rocksdb_options_t>,
    ro: *mut ffi::rocksdb_readoptions_t,
    wo: *mut ffi::rocksdb_writeoptions_t,
}

fn check_err(err: *mut c_char, what: &str) {
    if !err.is_null() {
        // SAFETY: RocksDB's error strings are NUL-terminated and freed with rocksdb_free.
        let msg = unsafe { std::ffi::CStr::from_ptr(err) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: as above.
        unsafe { ffi::rocksdb_free(err.cast()) };
        panic!("RocksDB {what}: {msg}");
    }
}

impl Rocks {
    fn open(dir: &Path) -> Rocks {
        let path = CString::new(dir.to_string_lossy().as_bytes()).expect("path");
        let names: Vec<CString> = FAMILIES
            .iter()
            .map(|n| CString::new(*n).expect("name"))
            .collect();
        let name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        // SAFETY: every object created here is destroyed once in Drop; the merge operator's
        // ownership passes to the options it is set on.
        unsafe {
            let options: Vec<*mut ffi::rocksdb_options_t> = FAMILIES
                .iter()
                .map(|name| {
                    let o = ffi::rocksdb_options_create();
                    ffi::rocksdb_options_set_create_if_missing(o, 1);
                    ffi::rocksdb_options_set_create_missing_column_families(o, 1);
                    ffi::rocksdb_options_set_write_buffer_size(o, 64 << 10);
                    if *name == "counters" {
                        super::uint64add::set_on(o.cast());
                    }
                    if *name == "log" {
                        super::uint64add::set_string_append_on(o.cast());
                    }
                    o
                })
                .collect();
            let option_ptrs: Vec<*const ffi::rocksdb_options_t> =
                options.iter().map(|o| o.cast_const()).collect();
            let mut cfs = vec![std::ptr::null_mut(); FAMILIES.len()];
            let mut err = std::ptr::null_mut();
            let db = ffi::rocksdb_open_column_families(
                options[0],
                path.as_ptr(),
                FAMILIES.len() as c_int,
                name_ptrs.as_ptr(),
                option_ptrs.as_ptr(),
                cfs.as_mut_ptr(),
                &mut err,
            );
            check_err(err, "open");
            Rocks {
                db,
                cfs,
                options,
                ro: ffi::rocksdb_readoptions_create(),
                wo: ffi::rocksdb_writeoptions_create(),
            }
        }
    }

    fn write(&self, ops: &[Op]) {
        // SAFETY: the batch is created and destroyed here; key and value slices outlive the
        // calls that copy them; the handles belong to the open database.
        unsafe {
            let b = ffi::rocksdb_writebatch_create();
            for op in ops {
                let cf = self.cfs[op.family];
                let (k, kl) = (op.key.as_ptr().cast::<c_char>(), op.key.len());
                match &op.kind {
                    Kind::Put(v) => {
                        ffi::rocksdb_writebatch_put_cf(b, cf, k, kl, v.as_ptr().cast(), v.len())
                    }
                    Kind::Merge(v) => {
                        ffi::rocksdb_writebatch_merge_cf(b, cf, k, kl, v.as_ptr().cast(), v.len())
                    }
                    Kind::Delete => ffi::rocksdb_writebatch_delete_cf(b, cf, k, kl),
                    Kind::SingleDelete => ffi::rocksdb_writebatch_singledelete_cf(b, cf, k, kl),
                    Kind::DeleteRange(end) => ffi::rocksdb_writebatch_delete_range_cf(
                        b,
                        cf,
                        k,
                        kl,
                        end.as_ptr().cast(),
                        end.len(),
                    ),
                }
            }
            let mut err = std::ptr::null_mut();
            ffi::rocksdb_write(self.db, self.wo, b, &mut err);
            ffi::rocksdb_writebatch_destroy(b);
            check_err(err, "write");
        }
    }

    fn get(&self, family: usize, key: &[u8]) -> Option<Vec<u8>> {
        let mut len = 0usize;
        let mut err = std::ptr::null_mut();
        // SAFETY: the returned buffer is copied, then freed with rocksdb_free.
        unsafe {
            let v = ffi::rocksdb_get_cf(
                self.db,
                self.ro,
                self.cfs[family],
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            );
            check_err(err, "get");
            if v.is_null() {
                return None;
            }
            let out = std::slice::from_raw_parts(v.cast::<u8>(), len).to_vec();
            ffi::rocksdb_free(v.cast());
            Some(out)
        }
    }

    /// Every entry of `family`, forward (or backward, returned in forward order), read at
    /// `snapshot` when given.
    fn scan(
        &self,
        family: usize,
        reverse: bool,
        snapshot: Option<*const ffi::rocksdb_snapshot_t>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        // SAFETY: the read options and iterator are created and destroyed here; a snapshot
        // passed in is live (released only by `release`); key/value slices are copied before
        // the iterator moves.
        unsafe {
            let ro = ffi::rocksdb_readoptions_create();
            if let Some(s) = snapshot {
                ffi::rocksdb_readoptions_set_snapshot(ro, s);
            }
            let it = ffi::rocksdb_create_iterator_cf(self.db, ro, self.cfs[family]);
            if reverse {
                ffi::rocksdb_iter_seek_to_last(it);
            } else {
                ffi::rocksdb_iter_seek_to_first(it);
            }
            while ffi::rocksdb_iter_valid(it) != 0 {
                let (mut kl, mut vl) = (0usize, 0usize);
                let k = ffi::rocksdb_iter_key(it, &mut kl);
                let v = ffi::rocksdb_iter_value(it, &mut vl);
                out.push((
                    std::slice::from_raw_parts(k.cast::<u8>(), kl).to_vec(),
                    std::slice::from_raw_parts(v.cast::<u8>(), vl).to_vec(),
                ));
                if reverse {
                    ffi::rocksdb_iter_prev(it);
                } else {
                    ffi::rocksdb_iter_next(it);
                }
            }
            let mut err = std::ptr::null_mut();
            ffi::rocksdb_iter_get_error(it, &mut err);
            ffi::rocksdb_iter_destroy(it);
            ffi::rocksdb_readoptions_destroy(ro);
            check_err(err, "iterate");
        }
        if reverse {
            out.reverse();
        }
        out
    }

    fn snapshot(&self) -> *const ffi::rocksdb_snapshot_t {
        // SAFETY: the database is open; the snapshot is released with `release`.
        unsafe { ffi::rocksdb_create_snapshot(self.db) }
    }

    fn release(&self, s: *const ffi::rocksdb_snapshot_t) {
        // SAFETY: `s` came from `snapshot` on this database and is released once.
        unsafe { ffi::rocksdb_release_snapshot(self.db, s) }
    }

    fn flush(&self, family: usize) {
        // SAFETY: the flush options are created and destroyed here.
        unsafe {
            let fo = ffi::rocksdb_flushoptions_create();
            ffi::rocksdb_flushoptions_set_wait(fo, 1);
            let mut err = std::ptr::null_mut();
            ffi::rocksdb_flush_cf(self.db, fo, self.cfs[family], &mut err);
            ffi::rocksdb_flushoptions_destroy(fo);
            check_err(err, "flush");
        }
    }

    fn compact(&self, family: usize) {
        // SAFETY: null bounds mean the whole key space.
        unsafe {
            ffi::rocksdb_compact_range_cf(
                self.db,
                self.cfs[family],
                std::ptr::null(),
                0,
                std::ptr::null(),
                0,
            );
        }
    }
}

impl Drop for Rocks {
    fn drop(&mut self) {
        // SAFETY: handles are destroyed before the database is closed, the database before
        // its options, each exactly once.
        unsafe {
            for cf in self.cfs.drain(..) {
                ffi::rocksdb_column_family_handle_destroy(cf);
            }
            ffi::rocksdb_close(self.db);
            ffi::rocksdb_readoptions_destroy(self.ro);
            ffi::rocksdb_writeoptions_destroy(self.wo);
            for o in self.options.drain(..) {
                ffi::rocksdb_options_destroy(o);
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Kind {
    Put(Vec<u8>),
    Merge(Vec<u8>),
    Delete,
    SingleDelete,
    /// Deletes `[key, end)`.
    DeleteRange(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Op {
    family: usize,
    key: Vec<u8>,
    kind: Kind,
}

fn shale_open(dir: &Path) -> (Db, Vec<ColumnFamily>) {
    let opts = Options {
        create_missing_column_families: true,
        write_buffer_size: 64 << 10,
        ..Default::default()
    };
    let counters = CfOptions {
        write_buffer_size: 64 << 10,
        merge_operator: Some(Arc::new(UInt64Add)),
        ..Default::default()
    };
    let plain = CfOptions {
        write_buffer_size: 64 << 10,
        ..Default::default()
    };
    let log = CfOptions {
        write_buffer_size: 64 << 10,
        merge_operator: Some(Arc::new(shaledb::merge_operators::StringAppend::new(","))),
        ..Default::default()
    };
    let db = Db::open_cf(
        dir,
        opts,
        [("counters", counters), ("plain", plain), ("log", log)],
    )
    .expect("open");
    let cfs = FAMILIES.iter().map(|n| db.cf(n).expect("family")).collect();
    (db, cfs)
}

fn shale_write(db: &Db, cfs: &[ColumnFamily], ops: &[Op]) {
    let mut b = WriteBatch::new();
    for op in ops {
        let cf = &cfs[op.family];
        match &op.kind {
            Kind::Put(v) => b.put_cf(cf, &op.key, v),
            Kind::Merge(v) => b.merge_cf(cf, &op.key, v),
            Kind::Delete => b.delete_cf(cf, &op.key),
            Kind::SingleDelete => b.single_delete_cf(cf, &op.key),
            Kind::DeleteRange(end) => b.delete_range_cf(cf, &op.key, end),
        }
    }
    db.write(&WriteOptions::default(), &b).expect("write");
}

fn shale_scan(
    db: &Db,
    cf: &ColumnFamily,
    reverse: bool,
    snapshot: Option<&shaledb::Snapshot>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let ro = ReadOptions {
        snapshot: snapshot.cloned(),
        ..Default::default()
    };
    let mut it = db.iter_cf(cf, &ro).expect("iter");
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().expect("status");
    if reverse {
        out.reverse();
    }
    out
}

/// Generates one operation. Single deletes follow RocksDB's contract: keys k060..k119 are
/// only ever put and single-deleted, alternately (one put since the previous single delete;
/// never deleted or merged: RocksDB refuses a single delete mixed with a delete), tracked in
/// `puts`; keys k000..k059 get puts, deletes, range deletes (of up to 15 keys, never reaching
/// k060) and (in "counters") merges.
fn gen_op(rng: &mut u64, puts: &mut BTreeMap<(usize, Vec<u8>), u32>) -> Op {
    let mut next = |n: u64| {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng % n
    };
    let family = next(FAMILIES.len() as u64) as usize;
    let index = next(120);
    let key = format!("k{index:03}").into_bytes();
    let roll = next(100);
    let value = |next: &mut dyn FnMut(u64) -> u64| {
        if family == 1 {
            next(1000).to_le_bytes().to_vec()
        } else {
            format!("v{}", next(1_000_000)).into_bytes()
        }
    };
    let kind = if index >= 60 {
        let count = puts.entry((family, key.clone())).or_insert(0);
        if *count == 0 {
            *count = 1;
            Kind::Put(value(&mut next))
        } else {
            *count = 0;
            Kind::SingleDelete
        }
    } else if roll >= 94 {
        let end = (index + 1 + next(15)).min(60);
        Kind::DeleteRange(format!("k{end:03}").into_bytes())
    } else if family == 1 && roll < 45 {
        Kind::Merge(next(1000).to_le_bytes().to_vec())
    } else if family == 3 && roll < 45 {
        Kind::Merge(format!("m{}", next(1000)).into_bytes())
    } else if roll < 75 {
        Kind::Put(value(&mut next))
    } else {
        Kind::Delete
    };
    Op { family, key, kind }
}

static LOG: std::sync::Mutex<Vec<Op>> = std::sync::Mutex::new(Vec::new());

#[test]
fn shaledb_and_rocksdb_agree_on_families_merges_single_deletes_and_range_deletes() {
    let rocks_dir = tempfile::tempdir().expect("tempdir");
    let shale_dir = tempfile::tempdir().expect("tempdir");
    let rocks = Rocks::open(rocks_dir.path());
    let (db, cfs) = shale_open(shale_dir.path());
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut history = BTreeMap::new();
    let mut step = 0u64;
    // A snapshot taken every 10 rounds, compared (in both engines) in later rounds.
    let mut snapshots: Vec<(*const ffi::rocksdb_snapshot_t, shaledb::Snapshot)> = Vec::new();
    for round in 0..40 {
        if round % 10 == 5 {
            snapshots.push((rocks.snapshot(), db.snapshot()));
        }
        for _ in 0..150 {
            step += 1;
            let n = 1 + (step % 4) as usize;
            let ops: Vec<Op> = (0..n).map(|_| gen_op(&mut rng, &mut history)).collect();
            rocks.write(&ops);
            shale_write(&db, &cfs, &ops);
            LOG.lock().expect("log").extend(ops.iter().cloned());
        }
        let family = round % FAMILIES.len();
        match round % 5 {
            1 => {
                rocks.flush(family);
                db.flush_cf(&cfs[family]).expect("flush");
            }
            3 => {
                rocks.compact(family);
                db.compact_range_cf(&cfs[family], None, None)
                    .expect("compact");
            }
            _ => {}
        }
        for (i, cf) in cfs.iter().enumerate() {
            for (rs, ss) in &snapshots {
                let reverse = round % 2 == 1;
                let want = rocks.scan(i, reverse, Some(*rs));
                let got = shale_scan(&db, cf, reverse, Some(ss));
                assert!(
                    want == got,
                    "round {round}: snapshot scan of {}",
                    FAMILIES[i]
                );
            }
            let want_rev = rocks.scan(i, true, None);
            let got_rev = shale_scan(&db, cf, true, None);
            assert!(
                want_rev == got_rev,
                "round {round}: reverse scan of {}",
                FAMILIES[i]
            );
            let want = rocks.scan(i, false, None);
            let got = shale_scan(&db, cf, false, None);
            if want != got {
                let only_rocks: Vec<_> = want.iter().filter(|e| !got.contains(e)).collect();
                let only_shale: Vec<_> = got.iter().filter(|e| !want.contains(e)).collect();
                eprintln!("only in RocksDB: {only_rocks:?}\nonly in ShaleDB: {only_shale:?}");
                if let Some((k, _)) = only_rocks.first().or(only_shale.first()) {
                    let fam = i;
                    eprintln!("history of {:?}:", String::from_utf8_lossy(k));
                    for (n, op) in LOG.lock().expect("log").iter().enumerate() {
                        if op.family == fam && &op.key == k {
                            eprintln!("  #{n} {:?}", op.kind);
                        }
                    }
                }
            }
            assert!(
                want == got,
                "round {round}, family {}: RocksDB has {} entries, ShaleDB {}; first \
                 difference at {:?}",
                FAMILIES[i],
                want.len(),
                got.len(),
                want.iter().zip(&got).position(|(a, b)| a != b)
            );
            for k in 0..120 {
                let key = format!("k{k:03}").into_bytes();
                let got = db.get_cf(cf, &key).expect("get").map(|v| v.to_vec());
                assert_eq!(
                    got,
                    rocks.get(i, &key),
                    "round {round}: get {}",
                    FAMILIES[i]
                );
            }
        }
    }
    for (rs, _) in snapshots {
        rocks.release(rs);
    }
}
