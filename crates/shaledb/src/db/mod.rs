//! The database handle: the public API, and the shared state behind it.
//!
//! Readers never take the state mutex: they load the current [`SuperVersion`] (memtables plus
//! table version) from an `ArcSwap` and the last published sequence number from an atomic.
//! Writers queue up and one leader at a time writes a whole group (`write.rs`). Flushes and
//! compactions run on background threads (`background.rs`) and take the mutex only to pick
//! work and install results. Opening and recovery live in `open.rs`.

mod background;
mod checkpoint;
mod closed_wals;
pub(crate) use checkpoint::{ImmutableFile, LiveFiles};
#[cfg(test)]
mod corrupt_key_tests;
mod events;
mod families;
mod group_insert;
mod ingest;
mod open;
#[cfg(test)]
mod paranoid_tests;
mod properties;
mod range;
mod read_only;
mod recovery;
mod repair;
mod verify;
mod write;
pub(crate) mod write_delay;

pub use crate::iter::db_iter::DbIterator;
use crate::options::CompactRangeOptions;
pub(crate) use crate::snapshot::Snapshot;
pub use checkpoint::CheckpointOptions;
pub use ingest::IngestOptions;
pub use range::{KeyRange, RangeIter};
pub use repair::{repair, repair_cf, LostFile, RepairReport, WalSalvage};
pub use verify::LiveFileChecksum;

use crate::cache::BlockCache;
use crate::cache::TableCache;
use crate::column_family::{CfData, CfOptions, ColumnFamily, DEFAULT_FAMILY};
use crate::compaction::picker::Busy;
use crate::compaction::LevelStats;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::iter::merging::MergingIterator;
use crate::iter::InternalIterator;
use crate::key::{LookupKey, SequenceNumber, ValueKind};
use crate::log::LogWriter;
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::range_del::FragmentedRangeTombstones;
use crate::snapshot::SnapshotList;
use crate::sst::BlockReadOptions;
use crate::statistics::{HistogramKind, Ticker};
use crate::value::{LookupResult, Value};
use crate::version::{DeletionQueue, Version, VersionSet};
use crate::write_batch::WriteBatch;
use parking_lot::{Condvar, Mutex};
use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
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
    /// The range tombstones of `imms` and `version`, fragmented together on first use (they
    /// never change; the active memtable's do, and are added per read).
    pub(crate) older_range_dels: parking_lot::Mutex<Option<Option<Arc<FragmentedRangeTombstones>>>>,
}

impl SuperVersion {
    /// The memtables, newest first.
    fn memtables(&self) -> impl Iterator<Item = &Arc<MemTable>> {
        std::iter::once(&self.mem).chain(self.imms.iter())
    }

    /// True if a memtable of this view has blob files written with its values.
    pub(crate) fn has_write_time_blobs(&self) -> bool {
        self.memtables().any(|m| m.write_time_blobs().is_some())
    }

    /// The reader of blob file `number` if a memtable of this view wrote it with its values
    /// (`Options::separate_blobs_at_write`).
    pub(crate) fn write_time_reader(
        &self,
        number: u64,
    ) -> Option<Arc<crate::blob::BlobFileReader>> {
        self.memtables()
            .filter_map(|m| m.write_time_blobs())
            .find_map(|b| b.reader(number))
    }

    /// Every range tombstone this view holds, fragmented; `None` if there are none (the
    /// common case, decided without a lock when no table and no memtable has any).
    pub(crate) fn range_tombstones(
        &self,
        tables: &TableCache,
    ) -> Result<Option<Arc<FragmentedRangeTombstones>>> {
        let older = self.older_range_tombstones(tables)?;
        Ok(match (older, self.mem.range_tombstones()) {
            (None, m) => m,
            (o, None) => o,
            (Some(o), Some(m)) => Some(Arc::new(FragmentedRangeTombstones::merge([&*o, &*m]))),
        })
    }

    fn older_range_tombstones(
        &self,
        tables: &TableCache,
    ) -> Result<Option<Arc<FragmentedRangeTombstones>>> {
        if !self.version.has_range_tombstones()
            && self.imms.iter().all(|m| m.range_tombstones().is_none())
        {
            return Ok(None);
        }
        let mut cached = self.older_range_dels.lock();
        if let Some(c) = &*cached {
            return Ok(c.clone());
        }
        let mut sources: Vec<Arc<FragmentedRangeTombstones>> = self
            .imms
            .iter()
            .filter_map(|m| m.range_tombstones())
            .collect();
        sources.extend(self.version.range_tombstones(tables)?);
        let all = FragmentedRangeTombstones::merge(sources.iter().map(|s| &**s));
        let all = (!all.is_empty()).then(|| Arc::new(all));
        *cached = Some(all.clone());
        Ok(all)
    }
}

/// A queued write (see write.rs).
pub(crate) struct Writer {
    /// Taken (not cloned) by the leader that writes it: its own, or one it appends to its group.
    /// `None` once taken, and for a flush request or a write barrier (which lead alone).
    batch: Mutex<Option<WriteBatch>>,
    sync: bool,
    disable_wal: bool,
    /// Set (under the state mutex) by the leader that wrote this writer's batch. "Done" and
    /// "has a result" are one fact, so a member can never be acknowledged without its result.
    result: Mutex<Option<Result<()>>>,
    cv: Condvar,
    /// Set (under the state mutex) with every wake-up of `cv`, so a writer yielding for a
    /// while before it sleeps (`write::wait_for_turn`) sees it too.
    woken: std::sync::atomic::AtomicBool,
    /// Its group's memtable inserts, posted by the leader for the members to help with
    /// (`group_insert.rs`); `inserts_posted` says one is there without taking the lock.
    inserts: Mutex<Option<Arc<group_insert::GroupInserts>>>,
    inserts_posted: std::sync::atomic::AtomicBool,
}

/// One column family's state guarded by the database mutex.
pub(crate) struct CfState {
    pub(crate) data: Arc<CfData>,
    pub(crate) mem: Arc<MemTable>,
    /// Frozen memtables, oldest first.
    pub(crate) imms: VecDeque<Arc<MemTable>>,
    pub(crate) flush_running: bool,
    pub(crate) busy: Busy,
    /// Set while `compact_range` runs its own compactions; automatic ones pause.
    pub(crate) manual_compaction: bool,
    pub(crate) level_stats: Vec<LevelStats>,
}

impl CfState {
    /// The state of a family whose memtable starts in WAL `wal_number`.
    pub(crate) fn new(data: Arc<CfData>, wal_number: u64) -> CfState {
        let levels = data.opts.num_levels;
        CfState {
            mem: Arc::new(MemTable::for_family(wal_number, &data.opts)),
            data,
            imms: VecDeque::new(),
            flush_running: false,
            busy: Busy::default(),
            manual_compaction: false,
            level_stats: vec![LevelStats::default(); levels],
        }
    }

    /// Publishes the family's memtables and current version to readers.
    pub(crate) fn install_super_version(&self, versions: &VersionSet) {
        self.data.super_version.store(Arc::new(SuperVersion {
            mem: self.mem.clone(),
            imms: self.imms.iter().rev().cloned().collect(),
            version: versions.current(self.data.id),
            older_range_dels: Default::default(),
        }));
    }

    /// The oldest WAL holding data of this family that is not in its tables.
    pub(crate) fn oldest_log(&self) -> u64 {
        self.imms
            .front()
            .map_or(self.mem.log_number(), |m| m.log_number())
    }
}

/// State guarded by the database mutex.
pub(crate) struct DbState {
    pub(crate) versions: VersionSet,
    /// The live column families by id.
    pub(crate) families: BTreeMap<u32, CfState>,
    pub(crate) writers: VecDeque<Arc<Writer>>,
    /// Write groups that handed the queue on after their WAL append and are not yet
    /// published, oldest first (write.rs, "Pipelined groups"). No memtable is frozen, and no
    /// write barrier begins, while there is one.
    pub(crate) inflight: VecDeque<write::InflightGroup>,
    /// An empty vector a write leader lists the active memtables in, put back after its
    /// group (`write::active_mems`).
    pub(crate) spare_mems: Vec<(u32, Arc<MemTable>)>,
    /// The first failure that makes writes unsafe; reads keep working. `Error::Suspended`
    /// while `flush_retry` waits to retry a failed flush.
    pub(crate) bg_error: Option<Error>,
    /// A flush that failed with an IO error and is to be retried (see recovery.rs).
    pub(crate) flush_retry: Option<recovery::Retry>,
    /// A WAL whose write failed for lack of space: writes stay suspended until every family's
    /// log number is past it (see recovery.rs).
    pub(crate) failed_wal: Option<recovery::FailedWal>,
    /// Compactions that failed with an IO error: none is picked before the retry time.
    pub(crate) compaction_retry: Option<recovery::Retry>,
    pub(crate) running_compactions: usize,
    /// Ingestions deciding where their files go (`Db::ingest`): no compaction starts
    /// meanwhile, so none is picked from a version about to change under it.
    pub(crate) ingesting: usize,
    /// WALs not yet known to be obsolete; those below the MANIFEST's log number move to the
    /// deletion queue when the edit that moved it is durable.
    /// Each as (number, bytes written to it), oldest first; the last is the one being written.
    pub(crate) live_wals: Vec<(u64, u64)>,
    /// A MANIFEST write is in progress (with this mutex released); others wait on
    /// `manifest_cv` for their turn.
    pub(crate) manifest_writing: bool,
    pub(crate) stall_count: u64,
    pub(crate) stall_micros: u64,
    /// Paces writes in the slowdown state (`Options::delayed_write_rate`).
    pub(crate) write_delay: write_delay::WriteDelay,
    /// Paces low-priority writes while compaction falls behind (`WriteOptions::low_pri`).
    pub(crate) low_pri_delay: write_delay::WriteDelay,
    pub(crate) closed: bool,
    /// When idle background threads last looked for expired files (TTL families).
    pub(crate) ttl_swept_at: Option<std::time::Instant>,
    /// Events for the listeners, delivered once the mutex is released (`events.rs`).
    pub(crate) pending_events: Vec<crate::listener::Event>,
    /// A thread is delivering events; others leave new ones to it, so order is kept.
    pub(crate) delivering_events: bool,
    /// Whether writes were last found normal, slowed or stopped.
    pub(crate) stall_condition: crate::listener::WriteStallCondition,
}

pub(crate) struct DbInner {
    pub(crate) opts: Options,
    pub(crate) dir: PathBuf,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) state: Mutex<DbState>,
    /// Background work may be available (a frozen memtable, a new version, a finished
    /// manual compaction, close). Background threads wait on it.
    pub(crate) work_cv: Condvar,
    /// A flush or compaction finished or failed (or close began): `flush`, `compact_range`
    /// and `wait_for_compactions` wait on it.
    pub(crate) done_cv: Condvar,
    /// What a stalled writer waits for may have changed: a memtable was flushed, L0 or the
    /// pending compaction bytes shrank, an error or close.
    pub(crate) stall_cv: Condvar,
    /// `DbState::inflight` became empty.
    pub(crate) inflight_cv: Condvar,
    /// Writers queued since open (changed under the state mutex): a leader compares it
    /// before and after its WAL append to see whether one came meanwhile.
    pub(crate) writers_enqueued: AtomicU64,
    /// The MANIFEST writer finished: the next may start.
    pub(crate) manifest_cv: Condvar,
    /// Obsolete files waiting for the purge (see version/lifecycle.rs).
    pub(crate) obsolete: Arc<DeletionQueue>,
    /// The default column family (also in `DbState::families`), for the paths without `_cf`.
    pub(crate) default_cf: Arc<CfData>,
    /// The newest sequence number visible to readers.
    pub(crate) last_sequence: AtomicU64,
    pub(crate) wal: Mutex<Option<LogWriter>>,
    pub(crate) wal_number: AtomicU64,
    /// WALs a newer one took over from, not yet synced (closed_wals.rs).
    pub(crate) closed_wals: closed_wals::ClosedWals,
    pub(crate) tables: Arc<TableCache>,
    pub(crate) block_cache: Arc<BlockCache>,
    pub(crate) snapshots: Arc<SnapshotList>,
    /// Taken shared by `Db::snapshot`; an ingestion that keeps sequence number 0 for a file
    /// (no snapshot exists) holds it exclusively until the file is visible, so no snapshot
    /// taken meanwhile would see the file appear.
    pub(crate) snapshot_gate: parking_lot::RwLock<()>,
    pub(crate) shutting_down: AtomicBool,
    pub(crate) user_bytes_written: AtomicU64,
    pub(crate) lock: Mutex<Option<Box<dyn FileLock>>>,
    /// Primary, read-only or secondary (read_only.rs).
    pub(crate) role: read_only::Role,
    /// The `LOG` file (`info_log.rs`).
    pub(crate) info_log: crate::info_log::InfoLog,
    /// `Options::statistics`, copied here so the read path reaches it in one load.
    pub(crate) stats: Option<Arc<crate::statistics::Statistics>>,
    /// Paces flush and compaction writes (`Options::rate_limit_bytes_per_sec`).
    pub(crate) rate_limiter: Option<Arc<crate::rate_limiter::RateLimiter>>,
    /// The filesystem flushes and compactions write their outputs through: `fs`, through
    /// the rate limiter when there is one.
    pub(crate) output_fs: Arc<dyn FileSystem>,
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
/// assert_eq!(items, vec![(b"a".to_vec(), b"1".into())]);
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

    /// Opens the database at `path` with its column families: each `(name, CfOptions)` in
    /// `families` gives a family's options (the default family's come from `opts` unless
    /// listed). Families that exist but are not listed open with default options; a listed
    /// family that does not exist is created if `opts.create_missing_column_families` is set,
    /// else open fails with `InvalidArgument`.
    ///
    /// ```
    /// use shaledb::{CfOptions, Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let opts = Options { create_missing_column_families: true, ..Default::default() };
    /// let db = Db::open_cf(dir.path(), opts, [("logs", CfOptions::default())]).unwrap();
    /// let logs = db.cf("logs").unwrap();
    /// db.put_cf(&logs, b"k", b"v").unwrap();
    /// drop(db);
    /// assert_eq!(Db::list_cf(dir.path(), &Options::default()).unwrap(), ["default", "logs"]);
    /// ```
    pub fn open_cf<I, N>(path: impl AsRef<Path>, opts: Options, families: I) -> Result<Db>
    where
        I: IntoIterator<Item = (N, CfOptions)>,
        N: Into<String>,
    {
        let families = families.into_iter().map(|(n, o)| (n.into(), o)).collect();
        open::open_with_families(path.as_ref(), opts, families)
    }

    /// The names of the column families of the (closed or open) database at `path`, the
    /// default family first.
    pub fn list_cf(path: impl AsRef<Path>, opts: &Options) -> Result<Vec<String>> {
        open::list_families(path.as_ref(), opts)
    }

    /// Creates a column family. Fails with `InvalidArgument` if one of that name exists.
    pub fn create_cf(&self, name: impl Into<String>, opts: CfOptions) -> Result<ColumnFamily> {
        self.inner.create_cf(name.into(), opts)
    }

    /// Drops a column family: it is gone from the database (durably) when this returns. Handles
    /// and iterators on it still read its data until they are dropped; then its files are
    /// deleted. The default family cannot be dropped.
    pub fn drop_cf(&self, name: &str) -> Result<()> {
        self.inner.drop_cf(name)
    }

    /// A handle on the live column family `name`.
    pub fn cf(&self, name: &str) -> Option<ColumnFamily> {
        let st = self.inner.state.lock();
        st.families
            .values()
            .find(|f| f.data.name == name)
            .map(|f| ColumnFamily {
                data: f.data.clone(),
            })
    }

    /// A handle on the default column family, `"default"`.
    pub fn default_cf(&self) -> ColumnFamily {
        ColumnFamily {
            data: self.inner.default_cf.clone(),
        }
    }

    /// Stores `value` under `key` (not synced; see [`WriteOptions`]).
    ///
    /// Keys and values are anything that is `AsRef<[u8]>`: `b"k"`, `&[u8]`, `Vec<u8>`, `&str`...
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_slices(
            &WriteOptions::default(),
            DEFAULT_FAMILY,
            key.as_ref(),
            value.as_ref(),
        )
    }

    /// Stores `value` under `key` with the given write options.
    pub fn put_opt(
        &self,
        wo: &WriteOptions,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.put_slices(wo, DEFAULT_FAMILY, key.as_ref(), value.as_ref())
    }

    /// Stores `value` under `key` in column family `cf`.
    pub fn put_cf(
        &self,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.put_cf_opt(&WriteOptions::default(), cf, key, value)
    }

    /// Stores `value` under `key` in column family `cf` with the given write options.
    pub fn put_cf_opt(
        &self,
        wo: &WriteOptions,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let id = self.inner.check_handle(cf)?.id;
        self.put_slices(wo, id, key.as_ref(), value.as_ref())
    }

    // The generic entry points above convert and call these, so the write path is compiled
    // once, not once per caller's key type.
    fn put_slices(&self, wo: &WriteOptions, cf: u32, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::for_one_entry(key.len() + value.len());
        b.put_in(cf, key, value);
        self.inner.write_owned(wo, b)
    }

    /// Deletes `key` (absent keys are fine).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_slice(&WriteOptions::default(), DEFAULT_FAMILY, key.as_ref())
    }

    /// Deletes `key` with the given write options.
    pub fn delete_opt(&self, wo: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_slice(wo, DEFAULT_FAMILY, key.as_ref())
    }

    /// Deletes `key` from column family `cf`.
    pub fn delete_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_cf_opt(&WriteOptions::default(), cf, key)
    }

    /// Deletes `key` from column family `cf` with the given write options.
    pub fn delete_cf_opt(
        &self,
        wo: &WriteOptions,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
    ) -> Result<()> {
        let id = self.inner.check_handle(cf)?.id;
        self.delete_slice(wo, id, key.as_ref())
    }

    fn delete_slice(&self, wo: &WriteOptions, cf: u32, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::for_one_entry(key.len());
        b.delete_in(cf, key);
        self.inner.write_owned(wo, b)
    }

    /// Deletes every key in `[begin, end)` with one range tombstone (RocksDB's `DeleteRange`),
    /// however many keys the range holds: reads stop seeing them at once, and compaction
    /// reclaims their space, dropping whole files the range covers when no snapshot needs
    /// them. `begin == end` deletes nothing; `begin > end` is `InvalidArgument`.
    ///
    /// ```
    /// # use shaledb::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = Db::open(dir.path(), Options::default()).unwrap();
    /// for tenant in [b"t1", b"t2"] {
    ///     for i in 0..100u32 {
    ///         db.put([&tenant[..], b"/", &i.to_be_bytes()].concat(), b"row").unwrap();
    ///     }
    /// }
    /// db.delete_range(b"t1/", b"t10").unwrap(); // all of tenant t1 ('0' follows '/')
    /// assert!(db.get([&b"t1/"[..], &5u32.to_be_bytes()].concat()).unwrap().is_none());
    /// assert!(db.get([&b"t2/"[..], &5u32.to_be_bytes()].concat()).unwrap().is_some());
    /// ```
    pub fn delete_range(&self, begin: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let wo = WriteOptions::default();
        self.delete_range_slices(&wo, DEFAULT_FAMILY, begin.as_ref(), end.as_ref())
    }

    /// [`delete_range`](Self::delete_range) with the given write options.
    pub fn delete_range_opt(
        &self,
        wo: &WriteOptions,
        begin: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.delete_range_slices(wo, DEFAULT_FAMILY, begin.as_ref(), end.as_ref())
    }

    /// [`delete_range`](Self::delete_range) in column family `cf`.
    pub fn delete_range_cf(
        &self,
        cf: &ColumnFamily,
        begin: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.delete_range_cf_opt(&WriteOptions::default(), cf, begin, end)
    }

    /// [`delete_range`](Self::delete_range) in column family `cf` with the given options.
    pub fn delete_range_cf_opt(
        &self,
        wo: &WriteOptions,
        cf: &ColumnFamily,
        begin: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<()> {
        let id = self.inner.check_handle(cf)?.id;
        self.delete_range_slices(wo, id, begin.as_ref(), end.as_ref())
    }

    fn delete_range_slices(
        &self,
        wo: &WriteOptions,
        cf: u32,
        begin: &[u8],
        end: &[u8],
    ) -> Result<()> {
        if begin > end {
            return Err(Error::InvalidArgument(
                "delete_range: the end key sorts before the begin key".to_string(),
            ));
        }
        if begin == end {
            return Ok(());
        }
        let mut b = WriteBatch::new();
        b.delete_range_in(cf, begin, end);
        self.inner.write_owned(wo, b)
    }

    /// Single-deletes `key`: RocksDB's `SingleDelete`, for a key written by exactly one put
    /// since it was last deleted. Reads see it as a delete; in compaction the put and the
    /// single delete vanish together instead of leaving a tombstone. Mixing it with several
    /// puts, merges or deletes of one key has undefined results, as in RocksDB (an older
    /// value may reappear).
    pub fn single_delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.single_delete_slice(&WriteOptions::default(), DEFAULT_FAMILY, key.as_ref())
    }

    /// [`single_delete`](Self::single_delete) with the given write options.
    pub fn single_delete_opt(&self, wo: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> {
        self.single_delete_slice(wo, DEFAULT_FAMILY, key.as_ref())
    }

    /// [`single_delete`](Self::single_delete) in column family `cf`.
    pub fn single_delete_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<()> {
        self.single_delete_cf_opt(&WriteOptions::default(), cf, key)
    }

    /// [`single_delete`](Self::single_delete) in column family `cf` with the given options.
    pub fn single_delete_cf_opt(
        &self,
        wo: &WriteOptions,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
    ) -> Result<()> {
        let id = self.inner.check_handle(cf)?.id;
        self.single_delete_slice(wo, id, key.as_ref())
    }

    fn single_delete_slice(&self, wo: &WriteOptions, cf: u32, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::for_one_entry(key.len());
        b.single_delete_in(cf, key);
        self.inner.write_owned(wo, b)
    }

    /// Merges `value` into `key` (see [`MergeOperator`](crate::MergeOperator)): the value read later is the family's
    /// merge operator applied to the key's value and the operands merged since. Refused with
    /// `InvalidArgument` if the family has no merge operator.
    pub fn merge(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.merge_slices(
            &WriteOptions::default(),
            DEFAULT_FAMILY,
            key.as_ref(),
            value.as_ref(),
        )
    }

    /// [`merge`](Self::merge) with the given write options.
    pub fn merge_opt(
        &self,
        wo: &WriteOptions,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.merge_slices(wo, DEFAULT_FAMILY, key.as_ref(), value.as_ref())
    }

    /// [`merge`](Self::merge) in column family `cf`.
    pub fn merge_cf(
        &self,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.merge_cf_opt(&WriteOptions::default(), cf, key, value)
    }

    /// [`merge`](Self::merge) in column family `cf` with the given write options.
    pub fn merge_cf_opt(
        &self,
        wo: &WriteOptions,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let id = self.inner.check_handle(cf)?.id;
        self.merge_slices(wo, id, key.as_ref(), value.as_ref())
    }

    fn merge_slices(&self, wo: &WriteOptions, cf: u32, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::for_one_entry(key.len() + value.len());
        b.merge_in(cf, key, value);
        self.inner.write_owned(wo, b)
    }

    /// Applies every operation of `batch` atomically: after a crash either all or none are
    /// there, in every column family the batch touches.
    ///
    /// Pass the batch by value to hand it over without a copy, or by reference to keep it:
    ///
    /// ```
    /// # fn main() -> shaledb::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use shaledb::{Db, Options, WriteBatch, WriteOptions};
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let mut batch = WriteBatch::new();
    /// batch.put(b"a", b"1");
    /// db.write(&WriteOptions::default(), &batch)?; // copied; `batch` can be written again
    /// db.write(&WriteOptions::default(), batch)?; // moved, no copy
    /// assert_eq!(db.get(b"a")?.as_deref(), Some(&b"1"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn write<'b>(
        &self,
        wo: &WriteOptions,
        batch: impl Into<Cow<'b, WriteBatch>>,
    ) -> Result<()> {
        let batch = batch.into();
        if batch.is_empty() {
            // Nothing to write, but the options are refused as for any other write.
            return write::check_write_options(wo);
        }
        self.inner.write_owned(wo, batch.into_owned())
    }

    /// The value stored under `key`, or `None`. A value found in a cached block shares that
    /// block instead of being copied (see [`Value`]).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        self.inner.get(
            &ReadOptions::default(),
            &self.inner.default_cf,
            key.as_ref(),
        )
    }

    /// The value stored under `key` as of `ro.snapshot` (or now).
    pub fn get_opt(&self, ro: &ReadOptions, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        self.inner.get(ro, &self.inner.default_cf, key.as_ref())
    }

    /// The value stored under `key` in column family `cf`, or `None`.
    pub fn get_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        self.get_cf_opt(&ReadOptions::default(), cf, key)
    }

    /// The value stored under `key` in column family `cf` as of `ro.snapshot` (or now).
    pub fn get_cf_opt(
        &self,
        ro: &ReadOptions,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Value>> {
        let data = self.inner.check_handle(cf)?;
        self.inner.get(ro, data, key.as_ref())
    }

    /// The values of several keys, one result per key in the order given, all read from one
    /// view of the database (as if by one snapshot). Keys are looked up in sorted order, so
    /// keys in one table block find it in the block cache after the first read.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.put(b"a", b"1").unwrap();
    /// db.put(b"c", b"3").unwrap();
    /// let got: Vec<_> = db.multi_get([&b"c"[..], b"b", b"a"]).into_iter().map(|r| r.unwrap()).collect();
    /// assert_eq!(got, vec![Some(b"3".into()), None, Some(b"1".into())]);
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Result<Option<Value>>> {
        let keys: Vec<K> = keys.into_iter().collect();
        let slices: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.inner
            .multi_get(&ReadOptions::default(), &self.inner.default_cf, &slices)
    }

    /// [`multi_get`](Self::multi_get) in column family `cf` as of `ro.snapshot` (or now).
    pub fn multi_get_cf<K: AsRef<[u8]>>(
        &self,
        ro: &ReadOptions,
        cf: &ColumnFamily,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Result<Option<Value>>> {
        let keys: Vec<K> = keys.into_iter().collect();
        let slices: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        match self.inner.check_handle(cf) {
            Ok(data) => self.inner.multi_get(ro, data, &slices),
            Err(e) => slices.iter().map(|_| Err(e.duplicate())).collect(),
        }
    }

    /// About how many bytes of table files hold the keys in `range`, computed from file sizes
    /// and index blocks only (no data block is read; RocksDB's `GetApproximateSizes`). Data
    /// still in memtables is not counted.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// for i in 0..10_000u32 {
    ///     db.put(i.to_be_bytes(), [7u8; 100]).unwrap();
    /// }
    /// db.flush().unwrap();
    /// let all = db.approximate_size(..).unwrap();
    /// let half = db.approximate_size(0u32.to_be_bytes()..5_000u32.to_be_bytes()).unwrap();
    /// let tables: u64 = db.property("shaledb.total-sst-files-size").unwrap().parse().unwrap();
    /// assert!(all > tables / 2 && all <= tables);
    /// assert!(half > all / 3 && half < all * 2 / 3);
    /// ```
    pub fn approximate_size<R: KeyRange>(&self, range: R) -> Result<u64> {
        self.inner.approximate_size(&self.inner.default_cf, &range)
    }

    /// [`approximate_size`](Self::approximate_size) in column family `cf`.
    pub fn approximate_size_cf<R: KeyRange>(&self, cf: &ColumnFamily, range: R) -> Result<u64> {
        let data = self.inner.check_handle(cf)?;
        self.inner.approximate_size(data, &range)
    }

    /// An iterator over the database as of `ro.snapshot` (or now), within `ro`'s bounds. It
    /// starts unpositioned: call a `seek*` method first.
    ///
    /// With `ro.tailing` each seek first moves the iterator to the latest state; without a
    /// snapshot, [`DbIterator::refresh`] does the same on demand.
    pub fn iter(&self, ro: &ReadOptions) -> DbIterator {
        new_iterator(&self.inner, ro, &self.inner.default_cf)
    }

    /// An iterator over column family `cf` (see [`Db::iter`]).
    pub fn iter_cf(&self, cf: &ColumnFamily, ro: &ReadOptions) -> Result<DbIterator> {
        let data = self.inner.check_handle(cf)?;
        Ok(new_iterator(&self.inner, ro, data))
    }

    /// A consistent point-in-time view until dropped.
    pub fn snapshot(&self) -> Snapshot {
        let _gate = self.inner.snapshot_gate.read();
        Snapshot::new(&self.inner.snapshots, || {
            self.inner.last_sequence.load(Ordering::Acquire)
        })
    }

    /// Makes every write acknowledged so far durable, as if each had been written with
    /// [`WriteOptions::sync`] (RocksDB's `SyncWAL`): one sync for any number of unsynced
    /// writes. Writes made with `disable_wal` are not covered (flush them). A failed sync
    /// leaves the database refusing writes (`Error::Poisoned`), as a failed synced write
    /// does; a database refusing writes refuses this with the same error.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// for i in 0..100u32 {
    ///     db.put(i.to_be_bytes(), b"unsynced").unwrap();
    /// }
    /// db.sync_wal().unwrap(); // all 100 now survive a power loss
    /// ```
    pub fn sync_wal(&self) -> Result<()> {
        self.inner.check_writable("syncing the WAL")?;
        if let Some(e) = &self.inner.state.lock().bg_error {
            return Err(e.duplicate());
        }
        self.inner.sync_wals().map_err(|e| {
            let mut st = self.inner.state.lock();
            self.inner.poison_for_wal(&mut st, e)
        })
    }

    /// Writes the default family's active memtable to a table file and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_and_wait(DEFAULT_FAMILY)
    }

    /// Writes column family `cf`'s active memtable to a table file and waits for it.
    pub fn flush_cf(&self, cf: &ColumnFamily) -> Result<()> {
        let id = self.inner.check_handle(cf)?.id;
        self.inner.flush_and_wait(id)
    }

    /// Compacts every level's files overlapping [`begin`, `end`] (`None` = unbounded) down
    /// the tree and waits, so that afterwards the range holds no overwritten versions or
    /// tombstones that no snapshot needs.
    ///
    /// The bounds stay `Option<&[u8]>` (not generic) so that `compact_range(None, None)` needs
    /// no type annotation; pass `Some(key.as_ref())` for a `Vec<u8>`.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.compact_range_opt(&CompactRangeOptions::default(), begin, end)
    }

    /// [`compact_range`](Self::compact_range) with options: what happens to the deepest
    /// level (see [`BottommostLevelCompaction`](crate::BottommostLevelCompaction)).
    ///
    /// ```
    /// use shaledb::{BottommostLevelCompaction, CompactRangeOptions, Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// let skip = CompactRangeOptions {
    ///     bottommost_level_compaction: BottommostLevelCompaction::Skip,
    /// };
    /// db.compact_range_opt(&skip, None, None).unwrap();
    /// assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    /// ```
    pub fn compact_range_opt(
        &self,
        opts: &CompactRangeOptions,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        self.inner.compact_range(DEFAULT_FAMILY, opts, begin, end)
    }

    /// [`compact_range`](Self::compact_range) in column family `cf`.
    pub fn compact_range_cf(
        &self,
        cf: &ColumnFamily,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        self.compact_range_cf_opt(&CompactRangeOptions::default(), cf, begin, end)
    }

    /// [`compact_range_opt`](Self::compact_range_opt) in column family `cf`.
    pub fn compact_range_cf_opt(
        &self,
        opts: &CompactRangeOptions,
        cf: &ColumnFamily,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        let id = self.inner.check_handle(cf)?.id;
        self.inner.compact_range(id, opts, begin, end)
    }

    /// Waits until no flush or compaction is pending or running, and the files they replaced
    /// are deleted (those no iterator or snapshot still reads), so the directory's size is
    /// the live data's.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.inner.wait_for_compactions()
    }

    /// A named property: `shaledb.stats`,
    /// `shaledb.num-files-at-level<N>`, `shaledb.estimate-num-keys`,
    /// `shaledb.total-sst-files-size`, `shaledb.estimate-live-data-size` (their ratio is the
    /// space amplification), `shaledb.base-level`, `shaledb.block-cache-usage`,
    /// `shaledb.cur-size-all-mem-tables`, and more (`rocksdb.` works as the prefix too).
    pub fn property(&self, name: &str) -> Option<String> {
        self.inner.property(&self.inner.default_cf, name)
    }

    /// A named property of column family `cf` (the names of [`Db::property`]; the
    /// database-wide ones, such as the block cache's, are the same for every family).
    pub fn property_cf(&self, cf: &ColumnFamily, name: &str) -> Option<String> {
        let data = self.inner.check_handle(cf).ok()?;
        self.inner.property(data, name)
    }

    /// The statistics as of now (counters and latency histograms; see
    /// [`crate::Statistics`]); `None` unless [`Options::statistics`] is set. Its `Display`
    /// is the text form.
    ///
    /// ```
    /// use shaledb::{Db, HistogramKind, Options, Statistics, Ticker};
    /// let dir = tempfile::tempdir().unwrap();
    /// let opts = Options::default().with_statistics(std::sync::Arc::new(Statistics::new()));
    /// let db = Db::open(dir.path(), opts).unwrap();
    /// db.put(b"a", b"1").unwrap();
    /// assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    /// let s = db.statistics().unwrap();
    /// assert_eq!(s.ticker(Ticker::KeysRead), 1);
    /// assert_eq!(s.histogram(HistogramKind::GetMicros).count, 1);
    /// assert!(s.to_string().contains("shaledb.number.keys.written COUNT : 1"));
    /// ```
    pub fn statistics(&self) -> Option<crate::StatisticsSnapshot> {
        self.inner.stats.as_ref().map(|s| s.snapshot())
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
        if let Some(l) = &self.inner.rate_limiter {
            l.close();
        }
        {
            // Under the mutex, so no waiter is between checking `shutting_down` and sleeping.
            let _st = self.inner.state.lock();
            self.inner.notify_state_changed();
        }
        self.inner.obsolete.close();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        // Every write appended so far, durable (a synced write's promise for all of them).
        let res = self.inner.sync_wals();
        // Delete what is obsolete now; files readers still hold stay for the next open.
        self.inner.purge_obsolete_files();
        // And make every deletion durable: a WAL a flush retired unsynced (closed_wals.rs)
        // must not come back empty after a power loss, where a MANIFEST that lost its last
        // edit would replay it instead of reporting it missing.
        let res = match self.inner.owns_files() {
            true => res.and_then(|()| {
                let dir = &self.inner.dir;
                self.inner.fs.sync_dir(dir).map_err(|e| {
                    Error::io(
                        format!("syncing the directory {} at close", dir.display()),
                        e,
                    )
                })
            }),
            false => res,
        };
        {
            // Events the stopped threads queued last.
            let mut st = self.inner.state.lock();
            self.inner.deliver_events(&mut st);
        }
        crate::info_log::info_log!(self.inner.info_log, Info, "closed");
        *self.inner.lock.lock() = None;
        res
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl DbState {
    /// A live family's state.
    pub(crate) fn family(&self, id: u32) -> Option<&CfState> {
        self.families.get(&id)
    }

    /// Publishes family `id`'s memtables and current version to readers.
    pub(crate) fn install_super_version(&self, id: u32) {
        if let Some(cf) = self.families.get(&id) {
            cf.install_super_version(&self.versions);
        }
    }
}

impl DbInner {
    /// A weak handle on this database (for the family handles it gives out).
    pub(crate) fn self_weak(&self) -> std::sync::Weak<DbInner> {
        self.default_cf.db.clone()
    }

    /// The family data behind `cf`, if the handle belongs to this database.
    pub(crate) fn check_handle<'a>(&self, cf: &'a ColumnFamily) -> Result<&'a Arc<CfData>> {
        if std::ptr::eq(cf.data.db.as_ptr(), self) {
            Ok(&cf.data)
        } else {
            Err(Error::InvalidArgument(format!(
                "column family handle {:?} belongs to another database",
                cf.data.name
            )))
        }
    }

    fn read_sequence(&self, ro: &ReadOptions) -> SequenceNumber {
        match &ro.snapshot {
            Some(s) => s.sequence(),
            None => self.last_sequence.load(Ordering::Acquire),
        }
    }

    fn get(&self, ro: &ReadOptions, cf: &CfData, user_key: &[u8]) -> Result<Option<Value>> {
        // One branch when statistics are off: no clock read.
        let Some(stats) = &self.stats else {
            return self.get_untimed(ro, cf, user_key);
        };
        let start = std::time::Instant::now();
        let res = self.get_untimed(ro, cf, user_key);
        stats.add(Ticker::KeysRead, 1);
        if let Ok(Some(v)) = &res {
            stats.add(Ticker::BytesRead, v.len() as u64);
        }
        stats.record_since(HistogramKind::GetMicros, start);
        res
    }

    fn get_untimed(&self, ro: &ReadOptions, cf: &CfData, user_key: &[u8]) -> Result<Option<Value>> {
        // Super version first, then the sequence: a compaction that dropped versions hidden
        // below some sequence installed its version before we loaded it, so our sequence is
        // at least that high.
        let sv = cf.super_version.load();
        let seq = self.read_sequence(ro);
        self.get_at(ro, cf, &sv, seq, user_key)
    }

    /// Adds `n` to ticker `t` if statistics are kept.
    #[inline]
    pub(crate) fn count(&self, t: Ticker, n: u64) {
        if let Some(s) = &self.stats {
            s.add(t, n);
        }
    }

    /// `get` in one super version at one sequence number.
    fn get_at(
        &self,
        ro: &ReadOptions,
        cf: &CfData,
        sv: &Arc<SuperVersion>,
        seq: SequenceNumber,
        user_key: &[u8],
    ) -> Result<Option<Value>> {
        let found = self.get_newest(ro, cf, sv, seq, user_key)?;
        self.user_value(cf, found)
    }

    /// The value a reader sees from a stored value: in a family with a TTL, the value
    /// without its write time, or nothing once it has expired.
    fn user_value(&self, cf: &CfData, found: Option<Value>) -> Result<Option<Value>> {
        match (self.expiry(cf), found) {
            (Some(expiry), Some(stored)) => {
                let Some((value, write_time)) = crate::clock::split_stamp(&stored) else {
                    return Err(Error::corruption(
                        format!("<column family {:?}>", cf.name),
                        0,
                        "a value of a family with a ttl lacks its write time",
                    ));
                };
                if expiry.expired(write_time) {
                    return Ok(None);
                }
                let len = value.len();
                Ok(Some(stored.truncated(len)))
            }
            (_, found) => Ok(found),
        }
    }

    /// When family `cf`'s entries expire, as of now; `None` without a TTL.
    pub(crate) fn expiry(&self, cf: &CfData) -> Option<crate::clock::Expiry> {
        cf.opts.ttl.map(|ttl| crate::clock::Expiry {
            ttl_secs: ttl.as_secs().max(1),
            now: self.opts.clock.now_secs(),
        })
    }

    /// The newest version of `user_key` visible at `seq` (stored form, write time included).
    fn get_newest(
        &self,
        ro: &ReadOptions,
        cf: &CfData,
        sv: &Arc<SuperVersion>,
        seq: SequenceNumber,
        user_key: &[u8],
    ) -> Result<Option<Value>> {
        let mut covering = match Self::get_from_memtables(sv, seq, user_key) {
            MemtableLookup::Found(found) => {
                self.count(Ticker::MemtableHit, 1);
                return Ok(found);
            }
            MemtableLookup::Merge => {
                self.count(Ticker::MemtableHit, 1);
                return self.get_merged(ro, cf, sv, seq, user_key);
            }
            MemtableLookup::Blob(reference) => {
                self.count(Ticker::MemtableHit, 1);
                return self.read_stored_blob(ro, cf, sv, user_key, &reference);
            }
            MemtableLookup::NotThere { covering } => {
                self.count(Ticker::MemtableMiss, 1);
                covering
            }
        };
        let lookup = LookupKey::new(user_key, seq);
        let seeks = self.counts_seeks(cf).then_some(&cf.seeks);
        let found = sv.version.get(
            &self.tables,
            block_read_options(ro),
            &lookup,
            &mut covering,
            seeks,
        )?;
        if cf.seeks.take_fresh() {
            self.wake_for_seek_compaction();
        }
        self.resolve_table_result(ro, cf, sv, seq, user_key, found)
    }

    /// Whether gets in family `cf` count searches in vain for read-triggered compaction: only
    /// where automatic compactions run.
    #[inline]
    fn counts_seeks(&self, cf: &CfData) -> bool {
        cf.opts.seek_compaction
            && !cf.opts.disable_auto_compactions
            && matches!(self.role, read_only::Role::Primary)
    }

    /// Wakes a background thread for a new seek candidate. Taking the state lock first means
    /// the wakeup cannot fall between a thread's finding nothing to do and its waiting.
    #[cold]
    fn wake_for_seek_compaction(&self) {
        drop(self.state.lock());
        self.work_cv.notify_one();
    }

    /// Looks `user_key` up in the memtables of `sv`, newest first.
    fn get_from_memtables(
        sv: &SuperVersion,
        seq: SequenceNumber,
        user_key: &[u8],
    ) -> MemtableLookup {
        // The newest range tombstone over the key seen so far: older entries are deleted.
        let mut covering = 0;
        for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            covering = covering.max(mem.max_covering_tombstone_seq(user_key, seq));
            let (found, found_seq) = mem.get_entry(user_key, seq);
            match found {
                // Older sources hold only older versions (see `Version::get`).
                LookupResult::NotPresent if covering > 0 => return MemtableLookup::Found(None),
                LookupResult::NotPresent => {}
                _ if found_seq < covering => return MemtableLookup::Found(None),
                LookupResult::Found(v) => return MemtableLookup::Found(Some(v)),
                LookupResult::Deleted => return MemtableLookup::Found(None),
                LookupResult::Merge => return MemtableLookup::Merge,
                LookupResult::Blob(reference) => return MemtableLookup::Blob(reference),
            }
        }
        MemtableLookup::NotThere { covering }
    }

    /// What the tables of `sv` said about `user_key`, as a stored value (merging when the
    /// newest version is an operand).
    fn resolve_table_result(
        &self,
        ro: &ReadOptions,
        cf: &CfData,
        sv: &Arc<SuperVersion>,
        seq: SequenceNumber,
        user_key: &[u8],
        found: LookupResult,
    ) -> Result<Option<Value>> {
        match found {
            LookupResult::Found(v) => Ok(Some(v)),
            LookupResult::Deleted | LookupResult::NotPresent => Ok(None),
            LookupResult::Merge => self.get_merged(ro, cf, sv, seq, user_key),
            LookupResult::Blob(reference) => {
                self.read_stored_blob(ro, cf, sv, user_key, &reference)
            }
        }
    }

    /// The stored form of the value a `BlobIndex` entry refers to: the blob's value, with
    /// the entry's write time appended in a family with a TTL (nothing, without reading the
    /// blob, if that time says it expired).
    fn read_stored_blob(
        &self,
        ro: &ReadOptions,
        cf: &CfData,
        sv: &Arc<SuperVersion>,
        user_key: &[u8],
        entry: &[u8],
    ) -> Result<Option<Value>> {
        let Some(expiry) = self.expiry(cf) else {
            let value = self.read_blob(ro, cf, sv, user_key, entry)?;
            return Ok(Some(Value::from_vec(value)));
        };
        let Some((_, Some(write_time))) = crate::blob::BlobRef::decode_entry(entry) else {
            return Err(Error::corruption(
                &self.dir,
                0,
                format!(
                    "the blob reference of key {:?} in a family with a ttl lacks its write time",
                    String::from_utf8_lossy(user_key)
                ),
            ));
        };
        if expiry.expired(write_time) {
            return Ok(None);
        }
        let value = self.read_blob(ro, cf, sv, user_key, entry)?;
        Ok(Some(Value::from_vec(crate::clock::stamp(
            &value, write_time,
        ))))
    }

    /// The value a blob reference (the value of a `BlobIndex` entry of `user_key`) points at,
    /// from the blob files of `sv`'s version or of its memtables.
    pub(crate) fn read_blob(
        &self,
        ro: &ReadOptions,
        cf: &CfData,
        sv: &SuperVersion,
        user_key: &[u8],
        reference: &[u8],
    ) -> Result<Vec<u8>> {
        let r = decode_blob_ref(&self.dir, user_key, reference)?;
        if sv.version.blob_file(r.file_number).is_none() {
            if let Some(reader) = sv.write_time_reader(r.file_number) {
                return reader.read(user_key, &r, ro.verify_checksums);
            }
        }
        let opts = crate::version::BlobReadOptions {
            verify_checksums: ro.verify_checksums,
            cache: cf.opts.blob_cache.then_some(&*self.block_cache),
            fill_cache: ro.fill_cache,
        };
        sv.version.read_blob(&self.tables, user_key, &r, opts, None)
    }

    /// `Db::approximate_size`: an inclusive end bound becomes the exclusive bound just past it.
    fn approximate_size(&self, cf: &CfData, range: &dyn KeyRange) -> Result<u64> {
        use std::ops::Bound;
        let (start, end) = range.key_bounds();
        let start = match start {
            Bound::Included(s) | Bound::Excluded(s) => Some(s),
            Bound::Unbounded => None,
        };
        let past_end;
        let end = match end {
            Bound::Excluded(e) => Some(e),
            Bound::Included(e) => {
                past_end = [e, &[0u8][..]].concat();
                Some(past_end.as_slice())
            }
            Bound::Unbounded => None,
        };
        let version = cf.super_version.load().version.clone();
        version.approximate_size(&self.tables, start, end)
    }

    /// `Db::multi_get`: every key read from one super version at one sequence number. Keys
    /// are sorted, looked up in the memtables one by one, then in the tables as one batch, so
    /// each table is searched once for all its keys and keys sharing a data block read it once.
    fn multi_get(
        &self,
        ro: &ReadOptions,
        cf: &CfData,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Value>>> {
        // One branch when statistics are off: no clock read.
        let Some(stats) = &self.stats else {
            return self.multi_get_untimed(ro, cf, keys);
        };
        let start = std::time::Instant::now();
        let out = self.multi_get_untimed(ro, cf, keys);
        stats.record_since(HistogramKind::MultiGetMicros, start);
        out
    }

    fn multi_get_untimed(
        &self,
        ro: &ReadOptions,
        cf: &CfData,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Value>>> {
        let sv = cf.super_version.load_full();
        let seq = self.read_sequence(ro);
        self.count(Ticker::KeysRead, keys.len() as u64);
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by_key(|&i| keys[i]);
        let mut out: Vec<Option<Result<Option<Value>>>> = (0..keys.len()).map(|_| None).collect();
        // Keys the memtables do not settle, in key order, with their covering tombstones.
        let mut pending: Vec<usize> = Vec::with_capacity(keys.len());
        let mut covering: Vec<SequenceNumber> = Vec::with_capacity(keys.len());
        for i in order {
            let stored = match Self::get_from_memtables(&sv, seq, keys[i]) {
                MemtableLookup::Found(found) => {
                    self.count(Ticker::MemtableHit, 1);
                    Ok(found)
                }
                MemtableLookup::Merge => {
                    self.count(Ticker::MemtableHit, 1);
                    self.get_merged(ro, cf, &sv, seq, keys[i])
                }
                MemtableLookup::Blob(reference) => {
                    self.count(Ticker::MemtableHit, 1);
                    self.read_stored_blob(ro, cf, &sv, keys[i], &reference)
                }
                MemtableLookup::NotThere { covering: c } => {
                    self.count(Ticker::MemtableMiss, 1);
                    pending.push(i);
                    covering.push(c);
                    continue;
                }
            };
            out[i] = Some(stored.and_then(|v| self.user_value(cf, v)));
        }
        if !pending.is_empty() {
            let lookups: Vec<LookupKey> = pending
                .iter()
                .map(|&i| LookupKey::new(keys[i], seq))
                .collect();
            let refs: Vec<&LookupKey> = lookups.iter().collect();
            let mut found: Vec<Option<Result<LookupResult>>> =
                (0..pending.len()).map(|_| None).collect();
            sv.version.multi_get(
                &self.tables,
                block_read_options(ro),
                &refs,
                &mut covering,
                &mut found,
            );
            for (&i, r) in pending.iter().zip(found) {
                let stored = r
                    .unwrap_or(Ok(LookupResult::NotPresent))
                    .and_then(|r| self.resolve_table_result(ro, cf, &sv, seq, keys[i], r));
                out[i] = Some(stored.and_then(|v| self.user_value(cf, v)));
            }
        }
        let out: Vec<Result<Option<Value>>> =
            out.into_iter().map(|r| r.unwrap_or(Ok(None))).collect();
        if let Some(s) = &self.stats {
            let bytes = out
                .iter()
                .map(|r| r.as_ref().map_or(0, |v| v.as_ref().map_or(0, |v| v.len())))
                .sum::<usize>();
            s.add(Ticker::BytesRead, bytes as u64);
        }
        out
    }

    /// The slow path of `get` for a key whose newest visible version is a merge operand:
    /// reads every version of the key down to its base with one merged iterator over the
    /// same super version, and merges.
    fn get_merged(
        &self,
        ro: &ReadOptions,
        cf: &CfData,
        sv: &Arc<SuperVersion>,
        seq: SequenceNumber,
        user_key: &[u8],
    ) -> Result<Option<Value>> {
        let covering = match sv.range_tombstones(&self.tables)? {
            Some(t) => t.max_covering_seq(user_key, seq),
            None => 0,
        };
        let mut it = self.internal_iterator(sv, ro);
        it.seek(LookupKey::new(user_key, seq).internal_key());
        let mut operands: Vec<Vec<u8>> = Vec::new();
        let mut base: Option<Vec<u8>> = None;
        while it.valid() {
            let Some(p) = crate::key::parse_internal_key(it.key()) else {
                return Err(Error::corruption(
                    "<merged iterator input>",
                    0,
                    "an entry's key is not an internal key",
                ));
            };
            if p.user_key != user_key || p.sequence < covering {
                // Past the key, or deleted by a range tombstone: no base.
                break;
            }
            match p.kind {
                ValueKind::Merge => operands.push(it.value().to_vec()),
                ValueKind::Put => {
                    base = Some(it.value().to_vec());
                    break;
                }
                ValueKind::BlobIndex => {
                    base = Some(self.read_blob(ro, cf, sv, user_key, it.value())?);
                    break;
                }
                ValueKind::Delete | ValueKind::SingleDelete => break,
                ValueKind::RangeDeletion => {
                    return Err(Error::corruption(
                        "<merged iterator input>",
                        0,
                        "a range deletion among point entries",
                    ))
                }
            }
            it.next();
        }
        it.status()?;
        let op = cf.opts.merge_operator.as_deref();
        crate::merge::merge_newest_first(op, user_key, base.as_deref(), &operands)
            .map(|v| Some(Value::from_vec(v)))
    }

    /// A merged iterator over every entry of a super version (memtables and tables).
    fn internal_iterator(&self, sv: &SuperVersion, ro: &ReadOptions) -> MergingIterator {
        let mut children: Vec<Box<dyn InternalIterator>> =
            Vec::with_capacity(1 + sv.imms.len() + sv.version.iterator_count());
        children.push(Box::new(sv.mem.iter()));
        for m in &sv.imms {
            children.push(Box::new(m.iter()));
        }
        sv.version
            .add_iterators(&self.tables, block_read_options(ro), &mut children);
        MergingIterator::new(children)
    }

    /// A merged iterator over a view's memtables and the tables that may hold keys starting
    /// with `prefix` (see `Version::add_prefix_iterators`).
    fn prefix_iterator(
        &self,
        sv: &SuperVersion,
        ro: &ReadOptions,
        prefix: &[u8],
        extractor_id: &str,
    ) -> MergingIterator {
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::with_capacity(1 + sv.imms.len());
        // Memtables whose prefix bloom rules the prefix out are left out like such tables.
        for m in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            if m.may_contain_prefix(prefix) {
                children.push(Box::new(m.iter()));
            }
        }
        sv.version.add_prefix_iterators(
            &self.tables,
            block_read_options(ro),
            prefix,
            extractor_id,
            &mut children,
        );
        MergingIterator::new(children)
    }

    /// The merged entries of a view and its range tombstones; if the tombstones cannot be
    /// read (a table fails to open), an iterator that reports the error.
    fn view_iterator(
        &self,
        sv: &SuperVersion,
        ro: &ReadOptions,
    ) -> (
        Box<dyn InternalIterator>,
        Option<Arc<FragmentedRangeTombstones>>,
    ) {
        match sv.range_tombstones(&self.tables) {
            Ok(t) => (Box::new(self.internal_iterator(sv, ro)), t),
            Err(e) => (Box::new(crate::iter::EmptyIterator::with_error(e)), None),
        }
    }

    /// What a read sees: the super version, then the sequence (same order as `get`).
    pub(crate) fn read_view(
        &self,
        ro: &ReadOptions,
        cf: &CfData,
    ) -> (Arc<SuperVersion>, SequenceNumber) {
        let sv = cf.super_version.load_full();
        let seq = self.read_sequence(ro);
        (sv, seq)
    }

    /// An iterator over one read view (several iterators over one view see the same data).
    pub(crate) fn iterator_at(
        &self,
        sv: Arc<SuperVersion>,
        seq: SequenceNumber,
        ro: &ReadOptions,
        cf: &CfData,
    ) -> DbIterator {
        let (inner, range_dels) = self.view_iterator(&sv, ro);
        let blobs = self.blob_resolver(&sv, ro, cf);
        let pin: Arc<dyn std::any::Any + Send + Sync> = Arc::new((sv, ro.snapshot.clone()));
        DbIterator::new(
            inner,
            seq,
            ro.iterate_lower_bound.clone(),
            ro.iterate_upper_bound.clone(),
            Some(pin),
        )
        .with_merge_operator(cf.opts.merge_operator.clone())
        .with_range_tombstones(range_dels)
        .with_ttl(
            cf.opts
                .ttl
                .map(|t| (t.as_secs().max(1), self.opts.clock.clone())),
        )
        .with_blobs(blobs)
    }

    /// Reads blob references against the blob files of `sv`'s version and memtables (`None`
    /// if there are none).
    pub(crate) fn blob_resolver(
        &self,
        sv: &Arc<SuperVersion>,
        ro: &ReadOptions,
        cf: &CfData,
    ) -> Option<crate::iter::db_iter::BlobResolver> {
        if sv.version.blob_files.is_empty() && !sv.has_write_time_blobs() {
            return None;
        }
        let (sv, tables, dir) = (sv.clone(), self.tables.clone(), self.dir.clone());
        let cache = cf.opts.blob_cache.then(|| self.block_cache.clone());
        let (verify_checksums, fill_cache) = (ro.verify_checksums, ro.fill_cache);
        Some(Arc::new(
            move |user_key: &[u8], reference: &[u8], readahead| {
                let r = decode_blob_ref(&dir, user_key, reference)?;
                let opts = crate::version::BlobReadOptions {
                    verify_checksums,
                    cache: cache.as_deref(),
                    fill_cache,
                };
                if sv.version.blob_file(r.file_number).is_none() {
                    if let Some(reader) = sv.write_time_reader(r.file_number) {
                        return reader.read(user_key, &r, verify_checksums);
                    }
                }
                sv.version
                    .read_blob(&tables, user_key, &r, opts, Some(readahead))
            },
        ))
    }
}

/// Applies `ro.prefix_same_as_start` (and, unless `ro.total_order_seek`, the prefix blooms of
/// the tables of `sv`) to iterator `it` over family `cf`.
pub(crate) fn with_prefix_options(
    inner: &Arc<DbInner>,
    mut it: DbIterator,
    sv: Arc<SuperVersion>,
    ro: &ReadOptions,
    cf: &CfData,
) -> DbIterator {
    if !ro.prefix_same_as_start {
        return it;
    }
    it = it.with_prefix_same_as_start(cf.opts.prefix_extractor.clone());
    if let (Some(ex), false) = (&cf.opts.prefix_extractor, ro.total_order_seek) {
        // Seeks skip the tables whose prefix bloom rules the target's prefix out.
        let (db, ro_view, id) = (inner.clone(), ro.clone(), ex.id());
        let rebuild: crate::iter::db_iter::PrefixRebuild = Arc::new(move |prefix| match prefix {
            Some(p) => Box::new(db.prefix_iterator(&sv, &ro_view, p, &id)),
            None => Box::new(db.internal_iterator(&sv, &ro_view)),
        });
        it = it.with_prefix_rebuild(rebuild);
    }
    it
}

/// A user iterator over family `cf`; one that reads no snapshot can be refreshed (and is
/// refreshed before every seek with `ro.tailing`).
fn new_iterator(inner: &Arc<DbInner>, ro: &ReadOptions, cf: &Arc<CfData>) -> DbIterator {
    let (sv, seq) = inner.read_view(ro, cf);
    let it = inner.iterator_at(sv.clone(), seq, ro, cf);
    let it = with_prefix_options(inner, it, sv, ro, cf).with_statistics(inner.stats.clone());
    if ro.snapshot.is_some() {
        return it;
    }
    let (db, family, ro_latest) = (inner.clone(), cf.clone(), ro.clone());
    let refresher: crate::iter::db_iter::Refresher = Arc::new(move || {
        let (sv, seq) = db.read_view(&ro_latest, &family);
        let (inner, range_dels) = db.view_iterator(&sv, &ro_latest);
        let blobs = db.blob_resolver(&sv, &ro_latest, &family);
        let pin: Arc<dyn std::any::Any + Send + Sync> = Arc::new(sv);
        (inner, seq, pin, range_dels, blobs)
    });
    it.with_refresher(refresher, ro.tailing)
}

/// What the memtables of a super version say about a key.
enum MemtableLookup {
    /// Settled there: the newest visible value (stored form), or `None` for deleted.
    Found(Option<Value>),
    /// The newest visible version is a reference to a blob written with it
    /// (`Options::separate_blobs_at_write`).
    Blob(Value),
    /// The newest visible version is a merge operand.
    Merge,
    /// Not there; `covering` is the newest range tombstone over the key they hold.
    NotThere { covering: SequenceNumber },
}

/// Decodes a blob reference stored under `user_key` (the value of its `BlobIndex` entry, which
/// in a family with a TTL ends with the value's write time); corruption (in database `dir`) if
/// it does not decode.
pub(crate) fn decode_blob_ref(
    dir: &std::path::Path,
    user_key: &[u8],
    reference: &[u8],
) -> Result<crate::blob::BlobRef> {
    decode_blob_entry(dir, user_key, reference).map(|(r, _)| r)
}

/// [`decode_blob_ref`], also returning the write time a family with a TTL keeps after the
/// reference.
pub(crate) fn decode_blob_entry(
    dir: &std::path::Path,
    user_key: &[u8],
    reference: &[u8],
) -> Result<(crate::blob::BlobRef, Option<u64>)> {
    crate::blob::BlobRef::decode_entry(reference).ok_or_else(|| {
        Error::corruption(
            dir,
            0,
            format!(
                "the blob reference of key {:?} does not decode",
                String::from_utf8_lossy(user_key)
            ),
        )
    })
}

/// The part of `ro` the layers below the database read.
pub(crate) fn block_read_options(ro: &ReadOptions) -> BlockReadOptions {
    BlockReadOptions {
        verify_checksums: ro.verify_checksums,
        fill_cache: ro.fill_cache,
    }
}

/// Every entry of column family `cf` as stored, all versions (internal keys, values as
/// stored: a blob reference for a value kept in a blob file), memtables and tables merged in
/// internal-key order, plus the family's range tombstones (fragmented), as of this call; for
/// `shale dump` (through `internals`). Blocks are read with checksums verified and not
/// cached; the iterator's `status` reports any error.
pub fn internal_entries(
    db: &Db,
    cf: &ColumnFamily,
) -> Result<(
    Box<dyn InternalIterator>,
    Vec<crate::range_del::RangeTombstone>,
)> {
    let inner = &db.inner;
    let data = inner.check_handle(cf)?;
    let sv = data.super_version.load_full();
    let ro = ReadOptions {
        fill_cache: false,
        ..ReadOptions::default()
    };
    let tombstones = sv
        .range_tombstones(&inner.tables)?
        .map(|t| t.tombstones().collect())
        .unwrap_or_default();
    // The children hold their memtables and tables (and the level iterators the version).
    Ok((Box::new(inner.internal_iterator(&sv, &ro)), tombstones))
}

/// Creates (or truncates) the WAL file `path`, its preallocated space mapped for writing if
/// `Options::allow_mmap_writes` is set.
pub(super) fn create_wal_file(
    opts: &Options,
    path: &std::path::Path,
) -> std::io::Result<Box<dyn crate::fs::WritableFile>> {
    // Only preallocated space is mapped: without it there would be nothing to map.
    if opts.allow_mmap_writes && opts.wal_preallocate_size > 0 {
        opts.fs.create_mapped(path)
    } else {
        opts.fs.create(path)
    }
}

/// The writer of a new WAL `file`: writeback every `wal_bytes_per_sync` bytes, space
/// preallocated `wal_preallocate_size` bytes at a time.
pub(super) fn new_wal_writer(
    mut file: Box<dyn crate::fs::WritableFile>,
    opts: &Options,
) -> LogWriter {
    file.set_writeback_interval(opts.wal_bytes_per_sync);
    LogWriter::preallocating(file, opts.wal_preallocate_size)
}
