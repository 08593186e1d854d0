//! The database handle: the public API, and the shared state behind it.
//!
//! Readers never take the state mutex: they load the current [`SuperVersion`] (memtables plus
//! table version) from an `ArcSwap` and the last published sequence number from an atomic.
//! Writers queue up and one leader at a time writes a whole group (`write.rs`). Flushes and
//! compactions run on background threads (`background.rs`) and take the mutex only to pick
//! work and install results. Opening and recovery live in `open.rs`.

mod background;
mod open;
mod properties;
mod snapshot;
mod verify;
mod write;

pub use crate::iter::db_iter::DbIterator;
pub use snapshot::Snapshot;

use crate::cache::TableCache;
use crate::compaction::picker::Busy;
use crate::compaction::LevelStats;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::iter::merging::MergingIterator;
use crate::iter::InternalIterator;
use crate::key::{self, SequenceNumber};
use crate::log::LogWriter;
use crate::memtable::{LookupResult, MemTable};
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::sst::BlockCache;
use crate::version::{FileMetaData, GetResult, Version, VersionSet};
use crate::write_batch::WriteBatch;
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use snapshot::SnapshotList;
use std::collections::VecDeque;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What a reader needs, swapped atomically as a whole: the active memtable, the frozen ones
/// waiting for flush (newest first) and the table version.
pub(crate) struct SuperVersion {
    pub(crate) mem: Arc<MemTable>,
    pub(crate) imms: Vec<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
}

/// A queued write (see write.rs).
pub(crate) struct Writer {
    batch: WriteBatch,
    sync: bool,
    disable_wal: bool,
    done: AtomicBool,
    result: Mutex<Option<Result<()>>>,
    cv: Condvar,
}

/// State guarded by the database mutex.
pub(crate) struct DbState {
    pub(crate) versions: VersionSet,
    pub(crate) mem: Arc<MemTable>,
    /// Frozen memtables, oldest first.
    pub(crate) imms: VecDeque<Arc<MemTable>>,
    pub(crate) writers: VecDeque<Arc<Writer>>,
    /// The first failure that makes writes unsafe; reads keep working.
    pub(crate) bg_error: Option<Error>,
    pub(crate) flush_running: bool,
    pub(crate) busy: Busy,
    pub(crate) running_compactions: usize,
    /// Set while `compact_range` runs its own compactions; automatic ones pause.
    pub(crate) manual_compaction: bool,
    /// Table files dropped from the current version, deleted once no reader holds them.
    pub(crate) obsolete_tables: Vec<Arc<FileMetaData>>,
    /// Threads now unlinking files taken from `obsolete_tables` or `live_wals` (with the mutex
    /// released), so `wait_for_compactions` can wait until the disk holds live files only.
    pub(crate) deletions_running: usize,
    /// WALs whose contents are all in tables, deleted once that is durable.
    pub(crate) live_wals: Vec<u64>,
    pub(crate) level_stats: Vec<LevelStats>,
    pub(crate) stall_count: u64,
    pub(crate) stall_micros: u64,
    pub(crate) closed: bool,
}

pub(crate) struct DbInner {
    pub(crate) opts: Options,
    pub(crate) dir: PathBuf,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) state: Mutex<DbState>,
    /// Signalled whenever background work may be available or has finished.
    pub(crate) bg_cv: Condvar,
    pub(crate) super_version: ArcSwap<SuperVersion>,
    /// The newest sequence number visible to readers.
    pub(crate) last_sequence: AtomicU64,
    pub(crate) wal: Mutex<Option<LogWriter>>,
    pub(crate) wal_number: AtomicU64,
    pub(crate) tables: Arc<TableCache>,
    pub(crate) block_cache: Arc<BlockCache>,
    pub(crate) snapshots: Arc<SnapshotList>,
    pub(crate) shutting_down: AtomicBool,
    pub(crate) user_bytes_written: AtomicU64,
    pub(crate) lock: Mutex<Option<Box<dyn FileLock>>>,
}

/// An open database. `Send + Sync`: share it with `Arc` and use it from many threads.
///
/// ```
/// use shaledb::{Db, Options, WriteBatch, WriteOptions};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// let mut batch = WriteBatch::new();
/// batch.put(b"a", b"1");
/// batch.delete(b"b");
/// db.write(&WriteOptions { sync: true, ..Default::default() }, &batch).unwrap();
/// let items: Vec<_> = db.range(..).collect::<Result<_, _>>().unwrap();
/// assert_eq!(items, vec![(b"a".to_vec(), b"1".to_vec())]);
/// ```
pub struct Db {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Db {
    /// Opens (or creates, with `create_if_missing`) the database at `path`, replaying its
    /// write-ahead logs. Fails with `Error::Locked` if it is already open.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        open::open(path.as_ref(), opts)
    }

    /// Deletes the database at `path` and everything in it. Fails with `Locked` if it is open.
    pub fn destroy(path: impl AsRef<Path>, opts: &Options) -> Result<()> {
        open::destroy(path.as_ref(), opts)
    }

    /// Stores `value` under `key` (not synced; see [`WriteOptions`]).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_opt(&WriteOptions::default(), key, value)
    }

    /// Stores `value` under `key` with the given write options.
    pub fn put_opt(&self, wo: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.inner.write_owned(wo, b)
    }

    /// Deletes `key` (absent keys are fine).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    /// Deletes `key` with the given write options.
    pub fn delete_opt(&self, wo: &WriteOptions, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.inner.write_owned(wo, b)
    }

    /// Applies every operation of `batch` atomically: after a crash either all or none are
    /// there.
    pub fn write(&self, wo: &WriteOptions, batch: &WriteBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.inner.write_owned(wo, batch.clone())
    }

    /// The value stored under `key`, or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(&ReadOptions::default(), key)
    }

    /// The value stored under `key` as of `ro.snapshot` (or now).
    pub fn get_opt(&self, ro: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(ro, key)
    }

    /// An iterator over the database as of `ro.snapshot` (or now), within `ro`'s bounds. It
    /// starts unpositioned: call a `seek*` method first.
    pub fn iter(&self, ro: &ReadOptions) -> DbIterator {
        self.inner.new_iterator(ro)
    }

    /// The entries with keys in `range`, in order, as `(key, value)` items. Takes any Rust
    /// range of byte strings (`..`, `a..b`, `a..=b`, `a..`, `..b`, with `&[u8]`, `Vec<u8>`,
    /// `&str`, ...). An IO or corruption error appears as an `Err` item and ends the sequence.
    pub fn range<R: KeyRange>(&self, range: R) -> RangeIter {
        let (start, end) = range.key_bounds();
        let mut ro = ReadOptions::default();
        let mut skip_lower_equal = None;
        match start {
            Bound::Included(k) => ro.iterate_lower_bound = Some(k.to_vec()),
            Bound::Excluded(k) => {
                ro.iterate_lower_bound = Some(k.to_vec());
                skip_lower_equal = Some(k.to_vec());
            }
            Bound::Unbounded => {}
        }
        let mut inclusive_upper = None;
        match end {
            Bound::Excluded(k) => ro.iterate_upper_bound = Some(k.to_vec()),
            Bound::Included(k) => inclusive_upper = Some(k.to_vec()),
            Bound::Unbounded => {}
        }
        let mut it = self.iter(&ro);
        it.seek_to_first();
        if let Some(k) = skip_lower_equal {
            if it.valid() && it.key() == k.as_slice() {
                it.next();
            }
        }
        RangeIter {
            it,
            inclusive_upper,
            finished: false,
        }
    }

    /// A consistent point-in-time view until dropped.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(&self.inner.snapshots, || {
            self.inner.last_sequence.load(Ordering::Acquire)
        })
    }

    /// Writes the active memtable to a table file and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_and_wait()
    }

    /// Compacts every level's files overlapping [`begin`, `end`] (`None` = unbounded) down
    /// the tree and waits, so that afterwards the range holds no overwritten versions or
    /// tombstones that no snapshot needs.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.compact_range(begin, end)
    }

    /// Waits until no flush or compaction is pending or running, and the files they replaced
    /// are deleted (those no iterator or snapshot still reads), so the directory's size is
    /// the live data's.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.inner.wait_for_compactions()
    }

    /// A named property (see the `properties` module): `shaledb.stats`,
    /// `shaledb.num-files-at-level<N>`, `shaledb.estimate-num-keys`,
    /// `shaledb.total-sst-files-size`, `shaledb.block-cache-usage`,
    /// `shaledb.cur-size-all-mem-tables`, and more.
    pub fn property(&self, name: &str) -> Option<String> {
        self.inner.property(name)
    }

    /// The error that stopped writes, if any (a failed WAL or MANIFEST write or sync, or a
    /// failed background flush or compaction).
    pub fn background_error(&self) -> Option<Error> {
        self.inner
            .state
            .lock()
            .bg_error
            .as_ref()
            .map(Error::duplicate)
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Stops background work, syncs the WAL and releases the lock. Later calls fail with
    /// `Error::Closed`. Dropping a `Db` closes it too, ignoring errors.
    pub fn close(&self) -> Result<()> {
        let first = {
            let mut st = self.inner.state.lock();
            let first = !st.closed;
            st.closed = true;
            first
        };
        if !first {
            return Ok(());
        }
        self.inner.shutting_down.store(true, Ordering::Release);
        self.inner.bg_cv.notify_all();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        let res = {
            let mut wal = self.inner.wal.lock();
            match wal.as_mut() {
                Some(w) => w
                    .sync()
                    .map_err(|e| Error::io("syncing the WAL on close", e)),
                None => Ok(()),
            }
        };
        self.inner.delete_obsolete_files();
        *self.inner.lock.lock() = None;
        res
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// A range of keys for [`Db::range`]: implemented for every Rust range type over anything that
/// is `AsRef<[u8]>`, and for a pair of `Bound`s.
pub trait KeyRange {
    /// The start and end bounds.
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>);
}

impl KeyRange for std::ops::RangeFull {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::Range<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            Bound::Included(self.start.as_ref()),
            Bound::Excluded(self.end.as_ref()),
        )
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeInclusive<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            Bound::Included(self.start().as_ref()),
            Bound::Included(self.end().as_ref()),
        )
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeFrom<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Included(self.start.as_ref()), Bound::Unbounded)
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeTo<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Excluded(self.end.as_ref()))
    }
}

impl<K: AsRef<[u8]>> KeyRange for std::ops::RangeToInclusive<K> {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Included(self.end.as_ref()))
    }
}

impl<K: AsRef<[u8]>> KeyRange for (Bound<K>, Bound<K>) {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        fn map<K: AsRef<[u8]>>(b: &Bound<K>) -> Bound<&[u8]> {
            match b {
                Bound::Included(k) => Bound::Included(k.as_ref()),
                Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
                Bound::Unbounded => Bound::Unbounded,
            }
        }
        (map(&self.0), map(&self.1))
    }
}

/// Iterator returned by [`Db::range`].
pub struct RangeIter {
    it: DbIterator,
    inclusive_upper: Option<Vec<u8>>,
    finished: bool,
}

impl Iterator for RangeIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        if !self.it.valid() {
            self.finished = true;
            return match self.it.status() {
                Ok(()) => None,
                Err(e) => Some(Err(e)),
            };
        }
        if let Some(u) = &self.inclusive_upper {
            if self.it.key() > u.as_slice() {
                self.finished = true;
                return None;
            }
        }
        let item = (self.it.key().to_vec(), self.it.value().to_vec());
        self.it.next();
        Some(Ok(item))
    }
}

impl DbInner {
    pub(crate) fn install_super_version(&self, st: &DbState) {
        self.super_version.store(Arc::new(SuperVersion {
            mem: st.mem.clone(),
            imms: st.imms.iter().rev().cloned().collect(),
            version: st.versions.current(),
        }));
    }

    fn read_sequence(&self, ro: &ReadOptions) -> SequenceNumber {
        match &ro.snapshot {
            Some(s) => s.sequence(),
            None => self.last_sequence.load(Ordering::Acquire),
        }
    }

    fn get(&self, ro: &ReadOptions, user_key: &[u8]) -> Result<Option<Vec<u8>>> {
        // Super version first, then the sequence: a compaction that dropped versions hidden
        // below some sequence installed its version before we loaded it, so our sequence is
        // at least that high.
        let sv = self.super_version.load();
        let seq = self.read_sequence(ro);
        for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            match mem.get(user_key, seq) {
                LookupResult::Found(v) => return Ok(Some(v)),
                LookupResult::Deleted => return Ok(None),
                LookupResult::NotPresent => {}
            }
        }
        let lookup = key::make_internal_key(user_key, seq, key::KIND_FOR_SEEK);
        match sv.version.get(&self.tables, ro, &lookup, user_key)? {
            GetResult::Found(v) => Ok(Some(v)),
            GetResult::Deleted | GetResult::NotPresent => Ok(None),
        }
    }

    fn new_iterator(&self, ro: &ReadOptions) -> DbIterator {
        // Same order as `get`.
        let sv = self.super_version.load_full();
        let seq = self.read_sequence(ro);
        let mut children: Vec<Box<dyn InternalIterator>> =
            Vec::with_capacity(1 + sv.imms.len() + sv.version.iterator_count());
        children.push(Box::new(sv.mem.iter()));
        for m in &sv.imms {
            children.push(Box::new(m.iter()));
        }
        sv.version.add_iterators(&self.tables, ro, &mut children);
        let pin: Arc<dyn std::any::Any + Send + Sync> = Arc::new((sv, ro.snapshot.clone()));
        DbIterator::new(
            Box::new(MergingIterator::new(children)),
            seq,
            ro.iterate_lower_bound.clone(),
            ro.iterate_upper_bound.clone(),
            Some(pin),
        )
    }
}
