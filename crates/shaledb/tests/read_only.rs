//! Read-only and secondary instances: they see the state at open (tables, blob files and
//! writes still in the WAL, every family), refuse every change with `NotSupported`, never
//! change the directory, keep reading their state while the primary compacts and deletes
//! files, and a secondary catches up with the primary, also when the primary is another
//! process writing and compacting.

mod common;

use shaledb::fs::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use shaledb::{CfOptions, Db, Error, Options, ReadOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

fn options() -> Options {
    common::small_tree_options()
}

fn families() -> Vec<(&'static str, CfOptions)> {
    common::default_and_blob_families(options().cf_options())
}

use common::round_value as value;

type Contents = BTreeMap<String, Vec<(Vec<u8>, Vec<u8>)>>;

fn contents(db: &Db, names: &[&str]) -> Contents {
    let names_owned = names.iter().map(|n| n.to_string());
    names_owned
        .zip(common::family_contents(db, names))
        .collect()
}

/// Both families with flushed tables, blob files, compacted levels and unflushed writes.
fn load(db: &Db, rounds: std::ops::Range<u32>) {
    for round in rounds {
        for (name, _) in families() {
            let cf = db.cf(name).expect("family");
            for i in 0..400 {
                db.put_cf(&cf, format!("k{i:04}"), value(i, round))
                    .expect("put");
            }
            if round % 3 != 2 {
                db.flush_cf(&cf).expect("flush");
            }
        }
    }
    db.delete(b"k0007").expect("delete");
}

/// Every file in `dir` with its size and bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("list")
        .map(|e| {
            let e = e.expect("entry");
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).expect("read"))
        })
        .collect()
}

fn assert_not_supported<T: std::fmt::Debug>(r: shaledb::Result<T>, what: &str) {
    match r {
        Err(Error::NotSupported(m)) => assert!(m.contains(what), "{m:?} should name {what:?}"),
        other => panic!("expected NotSupported for {what}, got {other:?}"),
    }
}

#[test]
fn read_only_sees_everything_refuses_changes_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let names = ["default", "blobs"];
    let want = {
        let db = Db::open_cf(dir.path(), options(), families()).expect("families");
        load(&db, 0..3);
        contents(&db, &names)
    };
    let before = files(dir.path());
    let ro = Db::open_read_only_cf(dir.path(), options(), families()).expect("families");
    assert_eq!(contents(&ro, &names), want);
    assert_eq!(ro.get(b"k0007").expect("get"), None);
    assert_eq!(
        ro.get(b"k0008").expect("get").as_deref(),
        Some(&value(8, 2)[..])
    );
    let blobs = ro.cf("blobs").expect("cf");
    assert_eq!(
        ro.get_cf(&blobs, b"k0004").expect("get cf").as_deref(),
        Some(&value(4, 2)[..])
    );
    assert_not_supported(ro.put(b"a", b"b"), "a write");
    assert_not_supported(ro.delete(b"a"), "a write");
    assert_not_supported(ro.flush(), "a flush");
    assert_not_supported(ro.compact_range(None, None), "a flush or compaction");
    assert_not_supported(ro.create_cf("new", CfOptions::default()), "column family");
    assert_not_supported(ro.drop_cf("blobs"), "column family");
    assert_not_supported(ro.checkpoint(dir.path().join("cp")), "a checkpoint");
    let ingest = shaledb::IngestOptions::default();
    assert_not_supported(ro.ingest(&[dir.path().join("x.sst")], &ingest), "ingesting");
    assert_not_supported(ro.resume(), "resume");
    assert_not_supported(ro.try_catch_up_with_primary(), "open_secondary");
    ro.wait_for_compactions().expect("wait for compactions");
    ro.verify_checksums().expect("verify checksums");
    drop(ro);
    assert_eq!(
        files(dir.path()),
        before,
        "a read-only instance changed the directory"
    );
    // Still a normal database afterwards.
    let db = Db::open_cf(dir.path(), options(), families()).expect("families");
    assert_eq!(contents(&db, &names), want);
}

#[test]
fn a_missing_database_is_not_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nothing");
    assert!(matches!(
        Db::open_read_only(&path, options()),
        Err(Error::NotFound(_))
    ));
    assert!(!path.exists());
}

#[test]
fn read_only_keeps_its_state_while_the_primary_compacts_files_away() {
    let dir = tempfile::tempdir().expect("tempdir");
    let names = ["default", "blobs"];
    let db = Db::open_cf(dir.path(), options(), families()).expect("families");
    load(&db, 0..3);
    let want = contents(&db, &names);
    // Opens while the primary holds the lock.
    let ro = Db::open_read_only_cf(dir.path(), options(), families()).expect("families");
    let sec = Db::open_secondary_cf(dir.path(), dir.path().join("sec"), options(), families())
        .expect("families");
    // The primary rewrites everything: every table and blob file the instances opened is
    // compacted away and deleted.
    load(&db, 3..6);
    for name in names {
        db.compact_range_cf(&db.cf(name).expect("cf"), None, None)
            .expect("compact range");
    }
    db.wait_for_compactions().expect("wait for compactions");
    assert_eq!(contents(&ro, &names), want);
    assert_eq!(contents(&sec, &names), want);
    sec.try_catch_up_with_primary()
        .expect("try catch up with primary");
    assert_eq!(contents(&sec, &names), contents(&db, &names));
    assert_eq!(contents(&ro, &names), want);
}

#[test]
fn secondary_catches_up_with_writes_flushes_families_and_iterators_keep_their_view() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open_cf(dir.path(), options(), families()).expect("families");
    let sec = Db::open_secondary_cf(dir.path(), dir.path().join("sec"), options(), families())
        .expect("families");
    assert!(dir.path().join("sec").is_dir());
    assert_eq!(sec.get(b"k0001").expect("get"), None);
    // Unflushed writes reach the secondary through the WAL.
    db.put(b"k0001", b"one").expect("put");
    sec.try_catch_up_with_primary()
        .expect("try catch up with primary");
    assert_eq!(
        sec.get(b"k0001").expect("get").as_deref(),
        Some(&b"one"[..])
    );
    // An iterator made now keeps this view across later catch-ups.
    let mut it = sec.iter(&ReadOptions::default());
    load(&db, 0..2);
    db.create_cf("later", CfOptions::default())
        .expect("default");
    db.put_cf(&db.cf("later").expect("cf"), b"x", b"y")
        .expect("expect");
    sec.try_catch_up_with_primary()
        .expect("try catch up with primary");
    // Nothing new: a cheap no-op.
    sec.try_catch_up_with_primary()
        .expect("try catch up with primary");
    it.seek_to_first();
    assert!(it.valid());
    assert_eq!((it.key(), it.value()), (&b"k0001"[..], &b"one"[..]));
    it.next();
    assert!(!it.valid());
    it.status().expect("status");
    let names = ["default", "blobs"];
    assert_eq!(contents(&sec, &names), contents(&db, &names));
    let later = sec
        .cf("later")
        .expect("a family the primary created appears");
    assert_eq!(
        sec.get_cf(&later, b"x").expect("get cf").as_deref(),
        Some(&b"y"[..])
    );
    db.drop_cf("later").expect("drop cf");
    sec.try_catch_up_with_primary()
        .expect("try catch up with primary");
    assert!(sec.cf("later").is_none(), "a dropped family disappears");
    // As on the primary, a handle taken before the drop still reads the family's last state.
    assert_eq!(
        sec.get_cf(&later, b"x").expect("get cf").as_deref(),
        Some(&b"y"[..])
    );
    assert_not_supported(sec.put(b"a", b"b"), "secondary");
}

/// The default filesystem, except that the next directory listing first runs a hook: it lets a
/// test make the primary act at one exact point of the secondary's reading.
/// It also counts the bytes read from MANIFEST files.
struct HookedFs {
    inner: Arc<dyn FileSystem>,
    before_next_listing: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    manifest_bytes_read: Arc<AtomicU64>,
}

impl HookedFs {
    fn new() -> Arc<HookedFs> {
        Arc::new(HookedFs {
            inner: shaledb::fs::default_fs(),
            before_next_listing: Mutex::new(None),
            manifest_bytes_read: Arc::new(AtomicU64::new(0)),
        })
    }
}

/// A sequential file whose reads are counted.
struct Counted {
    inner: Box<dyn SequentialFile>,
    bytes: Arc<AtomicU64>,
}

impl SequentialFile for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl FileSystem for HookedFs {
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn WritableFile>> {
        self.inner.create(path)
    }
    fn open_random_access(&self, path: &Path) -> std::io::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_random_access(path)
    }
    fn open_sequential(&self, path: &Path) -> std::io::Result<Box<dyn SequentialFile>> {
        let file = self.inner.open_sequential(path)?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if !name.starts_with("MANIFEST") {
            return Ok(file);
        }
        Ok(Box::new(Counted {
            inner: file,
            bytes: self.manifest_bytes_read.clone(),
        }))
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> std::io::Result<u64> {
        self.inner.file_size(path)
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        let hook = self.before_next_listing.lock().expect("hook").take();
        if let Some(hook) = hook {
            hook();
        }
        self.inner.list_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.remove_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> std::io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

fn wal_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("list")
        .filter(|e| {
            let name = e.as_ref().expect("entry").file_name();
            name.to_string_lossy().ends_with(".log")
        })
        .count()
}

/// The primary flushes (and deletes the WAL holding writes the secondary has not read yet)
/// between the secondary's look at the MANIFEST and its listing of the WALs: the catch-up must
/// notice the MANIFEST moved on, not tail the WALs that are left and lose those writes.
#[test]
fn a_flush_during_the_catch_up_listing_loses_no_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = Options::default();
    let db = Arc::new(Db::open(dir.path(), o.clone()).expect("open"));
    let hooked = HookedFs::new();
    let mut so = o.clone();
    so.fs = hooked.clone();
    let sec = Db::open_secondary(dir.path(), dir.path().join("sec"), so).expect("secondary");
    for i in 0..100u32 {
        db.put(format!("a{i:03}"), value(i, 0)).expect("put");
    }
    sec.try_catch_up_with_primary().expect("catch up");
    // Read by the secondary's next catch-up only through the WAL the hook's flush deletes.
    for i in 0..100u32 {
        db.put(format!("b{i:03}"), value(i, 1)).expect("put");
    }
    let primary = db.clone();
    let path = dir.path().to_path_buf();
    *hooked.before_next_listing.lock().expect("hook") = Some(Box::new(move || {
        primary.flush().expect("flush");
        common::wait_until("the flushed WAL is deleted", || wal_count(&path) == 1);
    }));
    sec.try_catch_up_with_primary().expect("catch up");
    assert!(hooked.before_next_listing.lock().expect("hook").is_none());
    let names = ["default"];
    assert_eq!(contents(&sec, &names), contents(&db, &names));
    assert_eq!(sec.get(b"b099").expect("get"), Some(value(99, 1).into()));
}

/// A secondary reads the MANIFEST on from where its last catch-up stopped (RocksDB's
/// secondaries tail it too), not again from the start: after one more flush of a primary with
/// a long MANIFEST, the catch-up reads a small part of it and sees the same data.
#[test]
fn a_catch_up_reads_only_the_new_part_of_the_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = Options::default();
    let db = Db::open(dir.path(), o.clone()).expect("open");
    // Long keys make long edits: every flush and compaction records its files' bounds.
    let key = |i: u32| format!("{i:04}{}", "k".repeat(2000));
    for i in 0..60 {
        db.put(key(i), value(i, 0)).expect("put");
        db.flush().expect("flush");
    }
    db.wait_for_compactions().expect("settle");
    let hooked = HookedFs::new();
    let mut so = o.clone();
    so.fs = hooked.clone();
    let sec = Db::open_secondary(dir.path(), dir.path().join("sec"), so).expect("secondary");
    let at_open = hooked.manifest_bytes_read.swap(0, Ordering::Relaxed);
    assert!(
        at_open > 96 << 10,
        "a MANIFEST of {at_open} bytes is too short to tell"
    );
    for round in 1..4u32 {
        db.put(key(1000 + round), value(round, round)).expect("put");
        db.delete(key(round)).expect("delete");
        db.flush().expect("flush");
        sec.try_catch_up_with_primary().expect("catch up");
        let read = hooked.manifest_bytes_read.swap(0, Ordering::Relaxed);
        // From the start of the 32 KiB block where the last catch-up stopped to the end.
        assert!(
            read < 40 << 10,
            "round {round}: read {read} of {at_open} MANIFEST bytes"
        );
        assert_eq!(
            contents(&sec, &["default"]),
            contents(&db, &["default"]),
            "round {round}"
        );
    }
}

/// The environment variable that makes `child_primary` act as the primary process.
const CHILD_DIR: &str = "SHALEDB_TEST_PRIMARY_DIR";
/// "true": the primary writes values to blob files with each write (`child_options`).
const CHILD_BLOBS_AT_WRITE: &str = "SHALEDB_TEST_PRIMARY_BLOBS_AT_WRITE";
const CHILD_KEYS: u32 = 6000;

fn child_key(i: u32) -> String {
    format!("key{i:06}")
}

fn child_value(i: u32) -> Vec<u8> {
    let mut v = format!("value{i}-").into_bytes();
    v.resize(40 + (i as usize % 7) * 40, b'v');
    v
}

/// The primary process of `secondary_follows_a_primary_in_another_process` (does nothing
/// when run as an ordinary test): writes keys in order, flushing and compacting as it goes.
#[test]
fn child_primary() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let blobs_at_write = std::env::var(CHILD_BLOBS_AT_WRITE).is_ok_and(|v| v == "true");
    let db = Db::open(&dir, child_options(blobs_at_write)).expect("open secondary");
    for i in 0..CHILD_KEYS {
        db.put(child_key(i), child_value(i)).expect("child value");
        if i % 1500 == 1499 {
            db.compact_range(None, None).expect("compact range");
        }
    }
    db.close().expect("close");
}

/// What the instance shows must be the first `n` keys with their values, for some `n`: the
/// primary wrote them in order, so anything else is an inconsistent view. Returns `n`.
fn check_prefix(db: &Db) -> u32 {
    let mut n = 0;
    for (k, v) in common::scan(db, &ReadOptions::default(), false) {
        assert_eq!(k, child_key(n).into_bytes(), "a gap before key {n}");
        assert_eq!(v, child_value(n), "the value of key {n}");
        n += 1;
    }
    n
}

/// Also with the values of 100 bytes or more written to blob files with each write: the
/// secondary and read-only instances read the WAL's references into files the primary is
/// still appending to.
#[test]
fn secondary_follows_a_primary_in_another_process() {
    for blobs_at_write in [false, true] {
        follow_a_primary_in_another_process(blobs_at_write);
    }
}

/// The options of the primary process and its followers: `options()`, or with values of 100
/// bytes or more written to blob files with each write.
fn child_options(blobs_at_write: bool) -> Options {
    let mut o = options();
    if blobs_at_write {
        o.enable_blob_files = true;
        o.separate_blobs_at_write = true;
        o.min_blob_size = 100;
        o.blob_file_size = 16 << 10;
    }
    o
}

fn follow_a_primary_in_another_process(blobs_at_write: bool) {
    let options = || child_options(blobs_at_write);
    let dir = tempfile::tempdir().expect("tempdir");
    drop(Db::open(dir.path(), options()).expect("open secondary"));
    let mut child = std::process::Command::new(std::env::current_exe().expect("current exe"))
        .args([
            "--exact",
            "child_primary",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir.path())
        .env(CHILD_BLOBS_AT_WRITE, blobs_at_write.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the primary process");
    let sec =
        Db::open_secondary(dir.path(), dir.path().join("sec"), options()).expect("open secondary");
    let mut seen = 0;
    let mut views = 0;
    loop {
        let done = child.try_wait().expect("try wait");
        sec.try_catch_up_with_primary()
            .expect("try catch up with primary");
        let n = check_prefix(&sec);
        assert!(n >= seen, "the secondary went back from {seen} to {n} keys");
        seen = n;
        // A read-only instance opened at any moment sees a consistent prefix too.
        let ro = Db::open_read_only(dir.path(), options()).expect("open secondary");
        check_prefix(&ro);
        views += 1;
        if let Some(status) = done {
            assert!(status.success(), "the primary process failed");
            break;
        }
    }
    assert_eq!(
        seen, CHILD_KEYS,
        "after the primary closed, the secondary has everything"
    );
    assert!(views > 1);
    if blobs_at_write {
        let blobs = common::blob_files_in(dir.path());
        assert!(blobs > 0, "the primary wrote no blob file");
    }
}

/// A read-only instance counts its block reads into `Options::statistics` like a primary.
#[test]
fn a_read_only_instance_counts_block_cache_statistics() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), options()).expect("open");
        for i in 0..500u32 {
            db.put(format!("key{i:05}"), value(i, 0)).expect("put");
        }
        db.flush().expect("flush");
    }
    let stats = Arc::new(shaledb::Statistics::new());
    let mut o = options();
    o.statistics = Some(stats.clone());
    let ro = Db::open_read_only(dir.path(), o).expect("open read-only");
    for i in 0..500u32 {
        let got = ro.get(format!("key{i:05}")).expect("get");
        assert_eq!(got.as_deref(), Some(&value(i, 0)[..]));
    }
    let data = stats.ticker(shaledb::Ticker::BlockCacheDataMiss)
        + stats.ticker(shaledb::Ticker::BlockCacheDataHit);
    assert!(
        data >= 500,
        "{data} data block lookups counted for 500 gets"
    );
}
