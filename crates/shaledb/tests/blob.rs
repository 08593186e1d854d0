//! Blob files (`enable_blob_files`): large values stored apart from the tables and read back
//! through every read path, merges and compaction filters over blob values, single deletes of
//! blob puts, obsolete blob files deleted, and the options refused; open blob files bounded by
//! `max_open_files`, and the garbage of tables dropped whole (range delete, TTL) counted.

mod common;

use shaledb::fs::{FileSystem, FsHook, HookedFileSystem, MemFileSystem, RandomAccessFile};
use shaledb::merge_operators::StringAppend;
use shaledb::{CompactionFilter, Db, Decision, Options, ReadOptions};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

fn blob_options() -> Options {
    Options {
        enable_blob_files: true,
        min_blob_size: 100,
        blob_file_size: 64 << 10,
        write_buffer_size: 64 << 10,
        ..Default::default()
    }
}

fn big(i: u32, version: u32) -> Vec<u8> {
    let mut v = format!("value-{i:04}-{version}-").into_bytes();
    v.resize(300 + (i as usize % 7) * 50, b'a' + (i % 26) as u8);
    v
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn blob_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".blob"))
        .collect();
    names.sort();
    names
}

fn scan(db: &Db, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    common::scan(db, &ReadOptions::default(), reverse)
}

#[test]
fn large_values_live_in_blob_files_and_read_back_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), blob_options()).expect("open");
    let mut want = Vec::new();
    for i in 0..200 {
        // Every fifth value is short and stays in the table.
        let v = if i % 5 == 0 {
            b"short".to_vec()
        } else {
            big(i, 0)
        };
        db.put(key(i), &v).expect("put");
        want.push((key(i), v));
    }
    db.flush().expect("flush");
    assert!(
        !blob_files(dir.path()).is_empty(),
        "the flush wrote no blob file"
    );
    for (k, v) in &want {
        assert_eq!(db.get(k).expect("get").as_deref(), Some(&v[..]));
    }
    let keys: Vec<&[u8]> = want.iter().map(|(k, _)| k.as_slice()).collect();
    for (r, (_, v)) in db.multi_get(&keys).into_iter().zip(&want) {
        assert_eq!(r.expect("multi_get").as_deref(), Some(&v[..]));
    }
    assert_eq!(scan(&db, false), want);
    assert_eq!(scan(&db, true), want);
    drop(db);
    let db = Db::open(dir.path(), blob_options()).expect("reopen");
    assert_eq!(scan(&db, false), want);
    db.compact_range(None, None).expect("compact");
    assert_eq!(scan(&db, true), want);
}

#[test]
fn overwritten_blobs_leave_with_their_files_after_compaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), blob_options()).expect("open");
    for i in 0..200 {
        db.put(key(i), big(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    let first = blob_files(dir.path());
    for i in 0..200 {
        db.put(key(i), big(i, 1)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    // The cleaner thread deletes obsolete files soon after the compaction's edit.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut after = blob_files(dir.path());
    while first.iter().any(|f| after.contains(f)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        after = blob_files(dir.path());
    }
    assert!(
        first.iter().all(|f| !after.contains(f)),
        "blob files {first:?} hold only overwritten values but are still there: {after:?}"
    );
    for i in 0..200 {
        assert_eq!(
            db.get(key(i)).expect("get").as_deref(),
            Some(&big(i, 1)[..])
        );
    }
}

#[test]
fn merge_operands_apply_to_blob_bases_in_reads_and_compactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        merge_operator: Some(Arc::new(StringAppend::new(","))),
        ..blob_options()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    for i in 0..50 {
        db.put(key(i), big(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    for i in 0..50 {
        db.merge(key(i), format!("m{i}")).expect("merge");
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = (0..50)
        .map(|i| {
            let mut v = big(i, 0);
            v.extend_from_slice(format!(",m{i}").as_bytes());
            (key(i), v)
        })
        .collect();
    for (k, v) in &want {
        assert_eq!(db.get(k).expect("get").as_deref(), Some(&v[..]));
    }
    assert_eq!(scan(&db, false), want);
    assert_eq!(scan(&db, true), want);
    db.flush().expect("flush");
    assert_eq!(scan(&db, true), want);
    db.compact_range(None, None).expect("compact");
    assert_eq!(scan(&db, false), want);
    for (k, v) in &want {
        assert_eq!(db.get(k).expect("get").as_deref(), Some(&v[..]));
    }
}

#[test]
fn a_single_delete_takes_its_blob_put_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), blob_options()).expect("open");
    for i in 0..20 {
        db.put(key(i), big(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    for i in (0..20).step_by(2) {
        db.single_delete(key(i)).expect("single delete");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for i in 0..20 {
        let want = (i % 2 == 1).then(|| big(i, 0));
        assert_eq!(db.get(key(i)).expect("get").map(|v| v.to_vec()), want);
    }
}

/// Drops values that start with "drop" and rewrites those starting with "grow" to a short
/// value: it must see blob values, not references.
struct DropOrShrink;

impl CompactionFilter for DropOrShrink {
    fn name(&self) -> &str {
        "drop-or-shrink"
    }

    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> Decision {
        if value.starts_with(b"drop") {
            Decision::Remove
        } else if value.starts_with(b"grow") {
            Decision::Change(b"small".to_vec())
        } else {
            Decision::Keep
        }
    }
}

#[test]
fn the_compaction_filter_sees_blob_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        compaction_filter: Some(Arc::new(DropOrShrink)),
        ..blob_options()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let value = |prefix: &str, i: u32| {
        let mut v = format!("{prefix}{i}").into_bytes();
        v.resize(400, b'x');
        v
    };
    for i in 0..30 {
        let prefix = ["drop", "grow", "keep"][i as usize % 3];
        db.put(key(i), value(prefix, i)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for i in 0..30 {
        let got = db.get(key(i)).expect("get").map(|v| v.to_vec());
        let want = match i % 3 {
            0 => None,
            1 => Some(b"small".to_vec()),
            _ => Some(value("keep", i)),
        };
        assert_eq!(got, want, "key {i}");
    }
}

#[test]
fn garbage_is_counted_until_the_last_reference_goes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        blob_file_size: 1 << 20,
        ..blob_options()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    for i in 0..100 {
        db.put(key(i), big(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    assert_eq!(common::property(&db, "shaledb.num-blob-files"), 1);
    assert_eq!(
        common::property(&db, "shaledb.live-blob-file-garbage-size"),
        0
    );
    let total = common::property(&db, "shaledb.total-blob-file-size");
    // Half the values overwritten with short ones (kept in the tables): after a compaction
    // half of the blob file is garbage, and the file stays for the other half.
    for i in (0..100).step_by(2) {
        db.put(key(i), b"short").expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(common::property(&db, "shaledb.num-blob-files"), 1);
    let garbage = common::property(&db, "shaledb.live-blob-file-garbage-size");
    assert!(
        garbage > total / 3 && garbage < total * 2 / 3,
        "garbage {garbage} of {total}"
    );
    let stats = db.property("shaledb.blob-stats").expect("blob-stats");
    assert!(stats.starts_with("Number of blob files: 1\n"), "{stats}");
    // The rest overwritten: the file leaves.
    for i in (1..100).step_by(2) {
        db.put(key(i), b"short").expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(common::property(&db, "shaledb.num-blob-files"), 0);
    assert_eq!(db.property("shaledb.blob-stats").as_deref(), Some(
        "Number of blob files: 0\nTotal size of blob files: 0\nTotal size of garbage in blob files: 0\nBlob file space amplification: 0.00\n"
    ));
}

#[test]
fn garbage_collection_relocates_the_oldest_blobs_and_their_files_leave() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        blob_file_size: 1 << 20,
        enable_blob_garbage_collection: true,
        blob_garbage_collection_age_cutoff: 0.5,
        disable_auto_compactions: true,
        ..blob_options()
    };
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    // Two blob files of live values, keys interleaved so one compaction reads both.
    for round in 0..2 {
        for i in (round..100).step_by(2) {
            db.put(key(i), big(i, 0)).expect("put");
        }
        db.flush().expect("flush");
    }
    let before = blob_files(dir.path());
    assert_eq!(before.len(), 2, "{before:?}");
    db.compact_range(None, None).expect("compact");
    // The older half (one file) was relocated into a new file and left; the newer stayed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut after = blob_files(dir.path());
    while after.contains(&before[0]) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        after = blob_files(dir.path());
    }
    assert!(!after.contains(&before[0]), "{before:?} -> {after:?}");
    assert!(after.contains(&before[1]), "{before:?} -> {after:?}");
    assert_eq!(after.len(), 2, "{before:?} -> {after:?}");
    let want: Vec<(Vec<u8>, Vec<u8>)> = (0..100).map(|i| (key(i), big(i, 0))).collect();
    assert_eq!(scan(&db, false), want);
    drop(db);
    // Without garbage collection the same compaction moves references only.
    let dir2 = tempfile::tempdir().expect("tempdir");
    let db = Db::open(
        dir2.path(),
        Options {
            enable_blob_garbage_collection: false,
            ..opts
        },
    )
    .expect("open");
    for round in 0..2 {
        for i in (round..100).step_by(2) {
            db.put(key(i), big(i, 0)).expect("put");
        }
        db.flush().expect("flush");
    }
    let before = blob_files(dir2.path());
    db.compact_range(None, None).expect("compact");
    assert_eq!(blob_files(dir2.path()), before);
    assert_eq!(scan(&db, true), want);
}

#[test]
fn the_blob_cache_holds_values_in_the_block_cache_budget() {
    for cached in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options {
            blob_cache: cached,
            block_cache_size: 4 << 20,
            ..blob_options()
        };
        let db = Db::open(dir.path(), opts).expect("open");
        for i in 0..50 {
            db.put(key(i), big(i, 0)).expect("put");
        }
        db.flush().expect("flush");
        let before = common::property(&db, "shaledb.block-cache-usage");
        for i in 0..50 {
            assert_eq!(
                db.get(key(i)).expect("get").as_deref(),
                Some(&big(i, 0)[..])
            );
        }
        let values: u64 = (0..50).map(|i| big(i, 0).len() as u64).sum();
        let grown = common::property(&db, "shaledb.block-cache-usage") - before;
        if cached {
            assert!(
                grown >= values,
                "cache grew {grown} bytes for {values} of values"
            );
        } else {
            assert!(
                grown < values / 4,
                "cache grew {grown} bytes without a blob cache"
            );
        }
        // Cached or not, the values read back the same, also through iterators and with
        // fill_cache off.
        let ro = ReadOptions {
            fill_cache: false,
            ..Default::default()
        };
        let mut it = db.iter(&ro);
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            assert_eq!(it.value(), &big(n, 0)[..]);
            n += 1;
            it.next();
        }
        it.status().expect("scan");
        assert_eq!(n, 50);
    }
}

#[test]
fn a_damaged_blob_is_an_error_in_every_iterator_read_never_a_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), blob_options()).expect("open");
    for i in 0..3 {
        db.put(key(i), big(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    drop(db);
    // Flip a byte inside the first record's value (past the 32-byte header, the 17-byte
    // record header and the 7-byte key).
    let blob = dir.path().join(&blob_files(dir.path())[0]);
    let mut bytes = std::fs::read(&blob).expect("read");
    bytes[32 + 17 + 7 + 10] ^= 0x40;
    std::fs::write(&blob, &bytes).expect("write");
    let db = Db::open(dir.path(), blob_options()).expect("reopen");
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    assert!(it.valid());
    assert_eq!(it.key(), &key(0)[..]);
    let err = it.try_value().expect_err("damaged blob");
    assert!(err.is_corruption(), "{err}");
    assert!(
        !it.valid(),
        "the iterator stays valid after a failed blob read"
    );
    assert!(it.status().is_err());
    // range() yields the error as an item; get reports it too.
    assert!(db.range(..).next().expect("an item").is_err());
    assert!(db.get(key(0)).expect_err("get").is_corruption());
    assert_eq!(
        db.get(key(1)).expect("get").as_deref(),
        Some(&big(1, 0)[..])
    );
}

/// Counts open handles of `*.blob` files (opened through the file system, closed when the
/// last reference to the handle drops): now, the most at once, and per path.
#[derive(Default)]
struct OpenBlobFiles {
    state: Arc<Mutex<OpenState>>,
}

#[derive(Default)]
struct OpenState {
    open: usize,
    most: usize,
    opens: u64,
    by_path: HashMap<PathBuf, usize>,
}

impl OpenBlobFiles {
    fn now(&self) -> (usize, usize, u64) {
        let s = self.state.lock().expect("lock");
        (s.open, s.most, s.opens)
    }

    fn open_handles(&self, path: &Path) -> usize {
        let s = self.state.lock().expect("lock");
        s.by_path.get(path).copied().unwrap_or(0)
    }
}

impl FsHook for OpenBlobFiles {
    fn random_access(
        &self,
        path: &Path,
        file: Arc<dyn RandomAccessFile>,
    ) -> Arc<dyn RandomAccessFile> {
        if path.extension().is_none_or(|e| e != "blob") {
            return file;
        }
        let mut s = self.state.lock().expect("lock");
        s.open += 1;
        s.opens += 1;
        s.most = s.most.max(s.open);
        *s.by_path.entry(path.to_path_buf()).or_default() += 1;
        Arc::new(TrackedFile {
            inner: file,
            path: path.to_path_buf(),
            state: self.state.clone(),
        })
    }
}

struct TrackedFile {
    inner: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    state: Arc<Mutex<OpenState>>,
}

impl RandomAccessFile for TrackedFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_exact_at(offset, buf)
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
}

impl Drop for TrackedFile {
    fn drop(&mut self) {
        let mut s = self.state.lock().expect("lock");
        s.open -= 1;
        if let Some(n) = s.by_path.get_mut(&self.path) {
            *n -= 1;
        }
    }
}

/// Waits (at most 10 s) until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "still not {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// With many more blob files than `max_open_files`, at most `max_open_files` of them are
/// ever open while every value reads back through gets, multi-gets and both iterator
/// directions; blob files deleted after garbage collection are closed.
#[test]
fn open_blob_files_stay_within_max_open_files() {
    const MAX_OPEN: usize = 16;
    let fs = Arc::new(HookedFileSystem::new(
        Arc::new(MemFileSystem::new()),
        OpenBlobFiles::default(),
    ));
    let opts = Options {
        max_open_files: MAX_OPEN,
        blob_file_size: 4 << 10,
        disable_auto_compactions: true,
        fs: fs.clone(),
        ..blob_options()
    };
    let dir = Path::new("/blob-open-files");
    let db = Db::open(dir, opts.clone()).expect("open");
    let n = 600u32;
    for i in 0..n {
        db.put(key(i), big(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    let first: Vec<PathBuf> = blob_paths(&*fs, dir);
    assert!(first.len() >= 4 * MAX_OPEN, "{} blob files", first.len());
    let want: Vec<(Vec<u8>, Vec<u8>)> = (0..n).map(|i| (key(i), big(i, 0))).collect();
    // Gets in an order that walks every file again and again.
    for i in (0..n).map(|i| (i * 7) % n).chain((0..n).rev()) {
        assert_eq!(
            db.get(key(i)).expect("get").as_deref(),
            Some(&big(i, 0)[..])
        );
    }
    let got = db.multi_get((0..n).rev().map(key));
    for (i, g) in (0..n).rev().zip(got) {
        assert_eq!(g.expect("multi_get").as_deref(), Some(&big(i, 0)[..]));
    }
    assert!(scan(&db, false) == want, "forward scan");
    assert!(scan(&db, true) == want, "backward scan");
    let (open, most, opens) = fs.hook().now();
    assert!(most <= MAX_OPEN, "{most} blob files open at once");
    assert!(
        open >= 1 && opens > first.len() as u64,
        "{open} open, {opens} opens"
    );
    drop(db);
    assert_eq!(
        fs.hook().now().0,
        0,
        "closing the database closes every blob file"
    );

    // Garbage collection relocates every blob: the old files are deleted, and closed.
    let db = Db::open(
        dir,
        Options {
            enable_blob_garbage_collection: true,
            blob_garbage_collection_age_cutoff: 1.0,
            ..opts
        },
    )
    .expect("reopen");
    assert_eq!(
        db.get(key(3)).expect("get").as_deref(),
        Some(&big(3, 0)[..])
    );
    db.compact_range(None, None).expect("compact");
    wait_until("deleted", || {
        let now = blob_paths(&*fs, dir);
        first.iter().all(|p| !now.contains(p))
    });
    for p in &first {
        assert_eq!(
            fs.hook().open_handles(p),
            0,
            "{} deleted but open",
            p.display()
        );
    }
    assert!(scan(&db, false) == want, "scan after gc");
    assert!(fs.hook().now().1 <= MAX_OPEN);
}

fn blob_paths(fs: &dyn FileSystem, dir: &Path) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = fs
        .list_dir(dir)
        .expect("list")
        .into_iter()
        .map(|n| dir.join(n))
        .filter(|p| p.extension().is_some_and(|e| e == "blob"))
        .collect();
    names.sort();
    names
}

/// Bytes of a blob record holding `value` under `user_key`, uncompressed: the 17-byte record
/// header, the key and the value (docs/format/blob.md).
fn record_bytes(user_key: &[u8], value: &[u8]) -> u64 {
    (17 + user_key.len() + value.len()) as u64
}

/// The user keys of every live table of `db` (in `dir`), by file name: read once the files
/// of older versions are deleted (the cleaner thread deletes them after the version goes).
fn table_keys(db: &Db, dir: &Path) -> BTreeMap<String, Vec<Vec<u8>>> {
    let live: usize = (0..7)
        .map(|l| common::property(db, &format!("shaledb.num-files-at-level{l}")) as usize)
        .sum();
    let on_disk = || {
        std::fs::read_dir(dir)
            .expect("list")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sst"))
            })
            .count()
    };
    wait_until("purged", || on_disk() == live);
    table_files_keys(dir)
}

/// The user keys of every table file in `dir`, by file name.
fn table_files_keys(dir: &Path) -> BTreeMap<String, Vec<Vec<u8>>> {
    use shaledb::internals::{parse_internal_key, BlockReadOptions, InternalIterator, Table};
    let fs = shaledb::fs::default_fs();
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("list") {
        let path = e.expect("entry").path();
        if path.extension().is_none_or(|e| e != "sst") {
            continue;
        }
        let number: u64 = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse().ok())
            .expect("table number");
        let size = std::fs::metadata(&path).expect("size").len();
        let file = fs.open_random_access(&path).expect("open");
        let table = Arc::new(Table::open(file, path.clone(), number, size, None).expect("table"));
        let mut it = table.iter(BlockReadOptions::default());
        it.seek_to_first();
        let mut keys = Vec::new();
        while it.valid() {
            keys.push(parse_internal_key(it.key()).expect("key").user_key.to_vec());
            it.next();
        }
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        out.insert(name, keys);
    }
    out
}

/// The user keys of the tables listed in `before` and gone from `after`.
fn dropped_keys(
    before: &BTreeMap<String, Vec<Vec<u8>>>,
    after: &BTreeMap<String, Vec<Vec<u8>>>,
) -> Vec<Vec<u8>> {
    before
        .iter()
        .filter(|(name, _)| !after.contains_key(*name))
        .flat_map(|(_, keys)| keys.iter().cloned())
        .collect()
}

/// Tables a range tombstone covers are dropped whole, without a compaction reading them:
/// their blob references count as garbage, exactly, in the MANIFEST (so after a reopen too),
/// and forced blob garbage collection then takes the blob file they shared with live tables.
#[test]
fn garbage_of_tables_dropped_under_a_range_delete_is_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        blob_file_size: 1 << 20,
        write_buffer_size: 1 << 20,
        target_file_size_base: 1 << 10,
        disable_auto_compactions: true,
        ..blob_options()
    };
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    let n = 300u32;
    for i in 0..n {
        db.put(key(i), big(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    // Moved to the last level in tables of about 2 KiB, all referring to the one blob file.
    db.compact_range(None, None).expect("compact");
    let blobs = blob_files(dir.path());
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    let before = table_keys(&db, dir.path());
    assert!(before.len() >= 4, "{} tables", before.len());
    assert_eq!(
        common::property(&db, "shaledb.live-blob-file-garbage-size"),
        0
    );
    db.delete_range(key(0), key(200)).expect("delete_range");
    db.flush().expect("flush");
    let after = table_keys(&db, dir.path());
    let dropped = dropped_keys(&before, &after);
    assert!(
        dropped.len() >= 100 && dropped.len() < 200,
        "{} keys dropped",
        dropped.len()
    );
    let value = |k: &[u8]| big((0..n).find(|&i| key(i) == k).expect("a key written"), 0);
    let want: u64 = dropped.iter().map(|k| record_bytes(k, &value(k))).sum();
    let total: u64 = (0..n).map(|i| record_bytes(&key(i), &big(i, 0))).sum();
    assert_eq!(
        common::property(&db, "shaledb.live-blob-file-garbage-size"),
        want
    );
    let stats = db.property("shaledb.blob-stats").expect("blob-stats");
    assert!(
        stats.contains(&format!("Total size of garbage in blob files: {want}\n")),
        "{stats}"
    );
    drop(db);
    let db = Db::open(dir.path(), opts.clone()).expect("reopen");
    assert_eq!(
        common::property(&db, "shaledb.live-blob-file-garbage-size"),
        want
    );
    drop(db);

    // Forced GC: the old file holds more than a quarter garbage, so tables referring to it
    // are rewritten in place, its live blobs relocated, and it goes.
    assert!(want * 4 > total, "{want} of {total}");
    let db = Db::open(
        dir.path(),
        Options {
            enable_blob_garbage_collection: true,
            blob_garbage_collection_age_cutoff: 1.0,
            blob_garbage_collection_force_threshold: 0.25,
            disable_auto_compactions: false,
            ..opts
        },
    )
    .expect("reopen with gc");
    db.put(b"zz", b"kick").expect("put");
    db.flush().expect("flush");
    wait_until("collected", || !blob_files(dir.path()).contains(&blobs[0]));
    let live: Vec<(Vec<u8>, Vec<u8>)> = (200..n)
        .map(|i| (key(i), big(i, 0)))
        .chain([(b"zz".to_vec(), b"kick".to_vec())])
        .collect();
    assert!(scan(&db, false) == live, "scan after gc");
}

/// A clock the test moves by hand.
struct TestClock(AtomicU64);

impl shaledb::Clock for TestClock {
    fn now_secs(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// In a family with a TTL, tables whose every value expired are dropped whole: their blob
/// references count as garbage, exactly, while the blob file stays for the tables still live.
#[test]
fn garbage_of_expired_tables_dropped_whole_is_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(TestClock(AtomicU64::new(1_000)));
    let opts = Options {
        blob_file_size: 1 << 20,
        write_buffer_size: 1 << 20,
        target_file_size_base: 1 << 10,
        disable_auto_compactions: true,
        ttl: Some(std::time::Duration::from_secs(100)),
        clock: clock.clone(),
        ..blob_options()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    // The first half written 50 s before the second, all flushed into one blob file.
    let n = 300u32;
    for i in 0..n {
        if i == n / 2 {
            clock.0.fetch_add(50, Ordering::SeqCst);
        }
        db.put(key(i), big(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let blobs = blob_files(dir.path());
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    let before = table_keys(&db, dir.path());
    assert_eq!(
        common::property(&db, "shaledb.live-blob-file-garbage-size"),
        0
    );
    // The first half expired, the second not: a flush drops the tables of the first half.
    clock.0.fetch_add(60, Ordering::SeqCst);
    db.put(b"zz", b"kick").expect("put");
    db.flush().expect("flush");
    let after = table_keys(&db, dir.path());
    let dropped = dropped_keys(&before, &after);
    assert!(!dropped.is_empty(), "no table dropped");
    assert!(
        dropped.iter().all(|k| k < &key(n / 2)),
        "a live table dropped"
    );
    let value = |k: &[u8]| big((0..n).find(|&i| key(i) == k).expect("a key written"), 0);
    let want: u64 = dropped.iter().map(|k| record_bytes(k, &value(k))).sum();
    assert_eq!(blob_files(dir.path()), blobs);
    assert_eq!(
        common::property(&db, "shaledb.live-blob-file-garbage-size"),
        want
    );
    for i in n / 2..n {
        assert_eq!(
            db.get(key(i)).expect("get").as_deref(),
            Some(&big(i, 0)[..])
        );
    }
}
