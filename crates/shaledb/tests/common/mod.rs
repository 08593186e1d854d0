//! Helpers shared by integration tests (each test file that uses them declares `mod common;`).

/// `len` pseudo-random bytes (xorshift), the same for the same `seed`: values no codec
/// shrinks, so sizes measured in tests are data whatever codec a level uses.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn incompressible(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Checks `db` against `model`: a get of every key `key{i:05}` for i below `keys` (present
/// or not), then a full scan.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn check_keys_and_scan(
    db: &shaledb::Db,
    model: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    keys: u32,
) {
    for i in 0..keys {
        let key = format!("key{i:05}").into_bytes();
        let got = db.get(&key).expect("get").map(|v| v.to_vec());
        assert_eq!(got.as_ref(), model.get(&key), "key {i}");
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = db
        .range(..)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .expect("iterate");
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, expected);
}

/// What a table file says of its index and filter layout (read with the engine's table
/// reader from its footer and properties).
#[allow(dead_code)] // not every test file that declares `mod common` uses it
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    /// The file.
    pub path: std::path::PathBuf,
    /// The footer's table format version.
    pub format_version: u32,
    /// The index has two levels (format 3, or 4 with `shaledb.index.two_level`).
    pub two_level: bool,
    /// Format 4: the index is keyed by user keys (`shaledb.index.user_keys`).
    pub index_user_keys: bool,
    /// Index partitions (0: one index block).
    pub index_partitions: u64,
    /// Filter partitions (0: one filter block, or none).
    pub filter_partitions: u64,
}

/// The shape of every table file (`*.sst`) in `dir`, in file name order.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn table_shapes(dir: &std::path::Path) -> Vec<TableShape> {
    let fs = shaledb::fs::default_fs();
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("list the database")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).expect("read table");
            // The footer's format version: 16 bytes before the end (docs/format/sstable.md).
            let at = bytes.len() - 16;
            let format_version = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4"));
            let number: u64 = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse().ok())
                .expect("table number");
            let file = fs.open_random_access(&path).expect("open table file");
            let table = shaledb::internals::Table::open(
                file,
                path.clone(),
                number,
                bytes.len() as u64,
                None,
            )
            .expect("open table");
            let props = table.properties();
            TableShape {
                format_version,
                two_level: format_version == 3 || props.index_two_level,
                index_user_keys: props.index_user_keys,
                index_partitions: props.index_partitions,
                filter_partitions: props.filter_partitions,
                path,
            }
        })
        .collect()
}

/// Checks that every table in `dir` has a two-level index with filter partitions (format
/// version 3, 4 or 5), one filter partition per index partition, and that some table has at least
/// `min_partitions` of them. Returns the shapes.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn assert_partitioned_tables(dir: &std::path::Path, min_partitions: u64) -> Vec<TableShape> {
    let shapes = table_shapes(dir);
    assert!(!shapes.is_empty(), "no tables in {}", dir.display());
    for s in &shapes {
        assert!(
            s.two_level && [3, 4, 5].contains(&s.format_version),
            "{s:?}"
        );
        assert!(s.index_partitions >= 1, "{s:?}");
        assert_eq!(s.filter_partitions, s.index_partitions, "{s:?}");
    }
    let most = shapes.iter().map(|s| s.index_partitions).max();
    assert!(
        most >= Some(min_partitions),
        "at most {most:?} index partitions per table: {shapes:?}"
    );
    shapes
}

/// A copy of the committed fixture database `fixture` (a path under the crate, e.g.
/// `tests/data/format-v1`) in a fresh temporary directory, without its README: tests write to
/// the copy. Returns the directory's guard and the database path.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn copy_fixture(fixture: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for entry in std::fs::read_dir(&from).expect("fixture") {
        let entry = entry.expect("entry");
        if entry.file_name() != "README.md" {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy fixture file");
        }
    }
    (tmp, dir)
}

/// Every entry `ro` sees, walked with a raw iterator forward, or backward (then returned in
/// key order); panics on an iterator error.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn scan(db: &shaledb::Db, ro: &shaledb::ReadOptions, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(ro);
    let mut out = Vec::new();
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().expect("scan");
    if reverse {
        out.reverse();
    }
    out
}

/// Waits (up to 10 s) until `done` holds; panics naming `what` if it never does.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Options of a small tree (64 KiB memtables, 32 KiB tables, compactions after two L0 files),
/// creating missing families: the setup of the checkpoint, backup and read-only tests.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn small_tree_options() -> shaledb::Options {
    shaledb::Options {
        create_missing_column_families: true,
        write_buffer_size: 64 << 10,
        target_file_size_base: 32 << 10,
        max_bytes_for_level_base: 128 << 10,
        level0_file_num_compaction_trigger: 2,
        ..Default::default()
    }
}

/// Two families: "default" with `base`, and "blobs", the same with values of 100 bytes or
/// more in blob files.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn default_and_blob_families(
    base: shaledb::CfOptions,
) -> Vec<(&'static str, shaledb::CfOptions)> {
    let blobs = shaledb::CfOptions {
        enable_blob_files: true,
        min_blob_size: 100,
        ..base.clone()
    };
    vec![("default", base), ("blobs", blobs)]
}

/// How many blob files `dir` holds.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn blob_files_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .expect("list the database directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".blob"))
        .count()
}

/// The value key `i` gets in write round `round`: 20 to 260 bytes, so some go to blob files.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn round_value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("v{i}-{round}-").into_bytes();
    v.resize(20 + (i as usize % 5) * 60, b'x');
    v
}

/// Every key and value of each family in `names`, in order (a scan of each).
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn family_contents(db: &shaledb::Db, names: &[&str]) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    names
        .iter()
        .map(|name| {
            let cf = db.cf(name).expect("family");
            let mut it = db
                .iter_cf(&cf, &shaledb::ReadOptions::default())
                .expect("iterator");
            let mut out = Vec::new();
            it.seek_to_first();
            while it.valid() {
                out.push((it.key().to_vec(), it.value().to_vec()));
                it.next();
            }
            it.status().expect("scan");
            out
        })
        .collect()
}

/// A file-system hook (`shaledb::fs::HookedFileSystem`) counting the positional reads of
/// files with one extension and the bytes they return; with `fail_every` above 0, every such
/// read whose count is a multiple of it fails with an injected EIO instead (and is not
/// counted).
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub struct CountReads {
    extension: &'static str,
    pub reads: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub fail_every: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

#[allow(dead_code)]
impl CountReads {
    /// Counts reads of files named `*.{extension}` ("sst", "blob").
    pub fn of(extension: &'static str) -> CountReads {
        CountReads {
            extension,
            reads: Default::default(),
            bytes: Default::default(),
            fail_every: Default::default(),
        }
    }

    /// Reads so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Reads and bytes so far.
    pub fn now(&self) -> (u64, u64) {
        let bytes = self.bytes.load(std::sync::atomic::Ordering::SeqCst);
        (self.reads(), bytes)
    }
}

impl shaledb::fs::FsHook for CountReads {
    fn random_access(
        &self,
        path: &std::path::Path,
        file: std::sync::Arc<dyn shaledb::fs::RandomAccessFile>,
    ) -> std::sync::Arc<dyn shaledb::fs::RandomAccessFile> {
        if path.extension().is_none_or(|e| e != self.extension) {
            return file;
        }
        std::sync::Arc::new(CountedFile {
            inner: file,
            reads: self.reads.clone(),
            bytes: self.bytes.clone(),
            fail_every: self.fail_every.clone(),
        })
    }
}

/// A file whose reads [`CountReads`] counts.
struct CountedFile {
    inner: std::sync::Arc<dyn shaledb::fs::RandomAccessFile>,
    reads: std::sync::Arc<std::sync::atomic::AtomicU64>,
    bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
    fail_every: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl shaledb::fs::RandomAccessFile for CountedFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        let n = self.reads.fetch_add(1, SeqCst);
        let every = self.fail_every.load(SeqCst);
        if every > 0 && n.is_multiple_of(every) {
            self.reads.fetch_sub(1, SeqCst);
            return Err(std::io::Error::other("injected EIO"));
        }
        self.bytes.fetch_add(buf.len() as u64, SeqCst);
        self.inner.read_exact_at(offset, buf)
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
}

/// A numeric property of `db` (`Db::property`), parsed; panics naming it if absent.
#[allow(dead_code)] // not every test file that declares `mod common` uses it
pub fn property(db: &shaledb::Db, name: &str) -> u64 {
    db.property(name)
        .unwrap_or_else(|| panic!("no property {name}"))
        .parse()
        .expect("a number")
}
