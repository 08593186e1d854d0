//! [`EventListener`]: callbacks on background events (RocksDB's `EventListener`), and the
//! information each one receives.

use crate::error::Error;
use std::path::PathBuf;
use std::time::Duration;

/// Callbacks on background events, set with
/// [`Options::listeners`](crate::Options::listeners). Every method has a default that does
/// nothing, so a listener implements only what it needs.
///
/// Callbacks run on the database's own threads (a background thread, the cleaner, or the
/// writer that saw a stall change), never with the database's internal mutex held: a callback
/// may read from the database. They should return quickly, since the thread that runs them
/// waits (a slow `on_stall_conditions_changed` delays that write and those queued behind
/// it). A callback must not write to the database or wait for background work (`flush`,
/// `compact_range`, `wait_for_compactions`): the write queue or the job it waits for may be
/// waiting for the callback. Events other than table deletions arrive in the order they
/// happened; a flush's and a manual compaction's are delivered before `flush` or
/// `compact_range` returns. A callback that panics is caught: the panic is counted
/// ([`Ticker::ListenerPanics`](crate::Ticker::ListenerPanics)) and noted in the `LOG`, and the
/// database goes on.
///
/// ```
/// use shaledb::{Db, EventListener, FlushJobInfo, Options};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// #[derive(Default)]
/// struct CountFlushes(AtomicU64);
/// impl EventListener for CountFlushes {
///     fn on_flush_completed(&self, info: &FlushJobInfo) {
///         assert!(info.file_size > 0);
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// let dir = tempfile::tempdir().unwrap();
/// let flushes = Arc::new(CountFlushes::default());
/// let db = Db::open(dir.path(), Options::default().with_listener(flushes.clone())).unwrap();
/// db.put(b"k", b"v").unwrap();
/// db.flush().unwrap();
/// assert_eq!(flushes.0.load(Ordering::Relaxed), 1);
/// ```
pub trait EventListener: Send + Sync {
    /// A flush wrote a table and installed it. A flush that writes no table (every entry it
    /// held was deleted) is only logged.
    fn on_flush_completed(&self, info: &FlushJobInfo) {
        let _ = info;
    }

    /// A compaction (or a trivial move of files to a lower level) was installed.
    fn on_compaction_completed(&self, info: &CompactionJobInfo) {
        let _ = info;
    }

    /// Writes went from normal to slowed down or stopped, or back. Seen by the next write
    /// after the change.
    fn on_stall_conditions_changed(&self, info: &WriteStallInfo) {
        let _ = info;
    }

    /// A failure stopped writes (see [`crate::Db::background_error`]).
    fn on_background_error(&self, info: &BackgroundErrorInfo) {
        let _ = info;
    }

    /// An obsolete table file was deleted (or its deletion failed; the next open retries).
    fn on_table_file_deleted(&self, info: &TableFileDeletionInfo) {
        let _ = info;
    }
}

/// What [`EventListener::on_flush_completed`] receives.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FlushJobInfo {
    /// The column family flushed.
    pub cf_name: String,
    /// The number of the table written (`NNNNNN.sst`).
    pub file_number: u64,
    /// Its path.
    pub file_path: PathBuf,
    /// Its size in bytes.
    pub file_size: u64,
    /// Entries in it.
    pub num_entries: u64,
    /// Numbers of the blob files the flush wrote (`enable_blob_files`).
    pub blob_file_numbers: Vec<u64>,
    /// How long the flush took, from picking the memtable to installing the table.
    pub duration: Duration,
}

/// What [`EventListener::on_compaction_completed`] receives.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CompactionJobInfo {
    /// The column family compacted.
    pub cf_name: String,
    /// The level the compaction read from (its inputs at `output_level` too).
    pub base_input_level: usize,
    /// The level it wrote to.
    pub output_level: usize,
    /// Numbers of the input tables (now deleted from the version).
    pub input_files: Vec<u64>,
    /// Numbers of the tables written (for a trivial move, the input files themselves).
    pub output_files: Vec<u64>,
    /// Numbers of the blob files written.
    pub output_blob_files: Vec<u64>,
    /// Bytes of the input tables.
    pub bytes_read: u64,
    /// Bytes of the tables and blob files written (0 for a trivial move).
    pub bytes_written: u64,
    /// The files were moved to the output level without being rewritten.
    pub trivial_move: bool,
    /// How long the compaction took.
    pub duration: Duration,
    /// Why it ran.
    pub reason: CompactionReason,
}

/// Why a compaction ran ([`CompactionJobInfo::reason`]; RocksDB's `CompactionReason`, with
/// ShaleDB's names for the ones it has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CompactionReason {
    /// Not recorded.
    #[default]
    Unknown,
    /// L0 held enough tables (or bytes) to be compacted into the base level (RocksDB's
    /// `kLevelL0FilesNum`).
    Level0FilesNum,
    /// A level below L0 was over its size target (`kLevelMaxLevelSize`).
    LevelMaxLevelSize,
    /// `Db::compact_range` (`kManualCompaction`).
    Manual,
    /// Blob garbage collection's forced compaction (`kForcedBlobGC`).
    ForcedBlobGc,
    /// Gets kept searching a table without a filter in vain (`Options::seek_compaction`,
    /// LevelDB's seek compaction; RocksDB has none).
    ReadTriggered,
}

/// Whether writes are slowed or stopped ([`WriteStallInfo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteStallCondition {
    /// Writes go at full speed.
    #[default]
    Normal,
    /// Writes are paced to `Options::delayed_write_rate` (L0 files or pending compaction
    /// bytes at the slowdown limits).
    Delayed,
    /// Writes wait for flushes or compactions (memtables, L0 files or pending compaction
    /// bytes at the stop limits).
    Stopped,
}

/// What [`EventListener::on_stall_conditions_changed`] receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteStallInfo {
    /// The condition before.
    pub previous: WriteStallCondition,
    /// The condition now.
    pub current: WriteStallCondition,
}

/// What failed, in a [`BackgroundErrorInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackgroundErrorReason {
    /// A flush.
    Flush,
    /// A compaction.
    Compaction,
    /// A write or sync of the WAL (the write that saw it failed too).
    WriteWal,
    /// A write or sync of the MANIFEST.
    Manifest,
}

/// What [`EventListener::on_background_error`] receives.
#[derive(Debug)]
#[non_exhaustive]
pub struct BackgroundErrorInfo {
    /// What was being done.
    pub reason: BackgroundErrorReason,
    /// The error (as `Db::background_error` returns it).
    pub error: Error,
}

/// What [`EventListener::on_table_file_deleted`] receives.
#[derive(Debug)]
#[non_exhaustive]
pub struct TableFileDeletionInfo {
    /// The table's number.
    pub file_number: u64,
    /// Its path.
    pub file_path: PathBuf,
    /// `None` if it was deleted, else why not.
    pub error: Option<Error>,
}

/// One event, queued under the state mutex and delivered after it is released.
#[derive(Debug)]
pub(crate) enum Event {
    Flush(FlushJobInfo),
    Compaction(CompactionJobInfo),
    Stall(WriteStallInfo),
    BackgroundError(BackgroundErrorInfo),
}

impl Event {
    /// Calls `l`'s method for this event.
    pub(crate) fn deliver(&self, l: &dyn EventListener) {
        match self {
            Event::Flush(i) => l.on_flush_completed(i),
            Event::Compaction(i) => l.on_compaction_completed(i),
            Event::Stall(i) => l.on_stall_conditions_changed(i),
            Event::BackgroundError(i) => l.on_background_error(i),
        }
    }
}
