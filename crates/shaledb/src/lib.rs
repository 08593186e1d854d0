//! ShaleDB: an embedded, persistent, ordered key-value store built as a log-structured merge
//! tree, in the class of RocksDB and LevelDB.
//!
//! ```
//! use shaledb::{Db, Options};
//! let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path(), Options::default()).unwrap();
//! db.put(b"hello", b"world").unwrap();
//! assert_eq!(db.get(b"hello").unwrap().as_deref(), Some(&b"world"[..]));
//! ```

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub(crate) mod backup;
pub(crate) mod blob;
pub(crate) mod cache;
pub(crate) mod checksum;
mod clock;
pub(crate) mod coding;
pub(crate) mod column_family;
pub(crate) mod compaction;
mod compaction_filter;
pub(crate) mod compression;
pub(crate) mod db;
pub(crate) mod error;
pub mod fs;
pub(crate) mod head_index;
mod info_log;
mod io_pool;
pub(crate) mod iter;
pub(crate) mod key;
mod listener;
pub(crate) mod log;
pub(crate) mod memory;
pub(crate) mod memtable;
mod merge;
pub(crate) mod options;
mod prefix;
pub(crate) mod range_del;
mod rate_limiter;
mod snapshot;
pub(crate) mod sst;
mod sst_file_writer;
mod statistics;
mod thread_priority;
mod value;
pub(crate) mod version;
pub(crate) mod write_batch;

pub use backup::{BackupEngine, BackupEngineOptions, BackupInfo};
pub use clock::{Clock, SystemClock};
pub use column_family::{CfOptions, ColumnFamily};
pub use compaction_filter::{CompactionFilter, Decision};
pub use compression::CompressionType;
pub use db::{
    repair, repair_cf, CheckpointOptions, Db, DbIterator, IngestOptions, KeyRange,
    LiveFileChecksum, LostFile, RangeIter, RepairReport, WalSalvage,
};
pub use error::{Error, Result};
pub use info_log::InfoLogLevel;
pub use listener::{
    BackgroundErrorInfo, BackgroundErrorReason, CompactionJobInfo, CompactionReason, EventListener,
    FlushJobInfo, TableFileDeletionInfo, WriteStallCondition, WriteStallInfo,
};
pub use memory::{Cache, WriteBufferManager};
pub use merge::{merge_operators, MergeOperator};
pub use options::{
    BottommostLevelCompaction, CompactRangeOptions, CpuPriority, DataBlockIndexType, IndexType,
    Options, PrepopulateBlockCache, ReadOptions, WalRecoveryMode, WriteOptions,
};
pub use prefix::{FixedPrefix, PrefixExtractor};
pub use snapshot::Snapshot;
pub use sst_file_writer::{ExternalFileInfo, SstFileWriter};
pub use statistics::{HistogramData, HistogramKind, Statistics, StatisticsSnapshot, Ticker};
pub use value::Value;
pub use write_batch::{BatchEntry, BatchIter, WriteBatch};

/// Engine internals for ShaleDB's own test kit, fuzz targets, benchmarks and examples.
///
/// Not part of the public API: anything here may change or disappear in any release.
#[doc(hidden)]
pub mod internals {
    pub use crate::backup::meta::{BackupFile, BackupMeta, MAX_META_SIZE};
    pub use crate::blob::{BlobFileBuilder, BlobFileMeta, BlobFileReader, BlobRef};
    pub use crate::db::internal_entries;
    pub use crate::iter::InternalIterator;
    pub use crate::key::{
        make_internal_key, parse_internal_key, LookupKey, ValueKind, MAX_SEQUENCE,
    };
    pub use crate::log::{LogRead, LogReader, WalMarker};
    pub use crate::memtable::MemTable;
    pub use crate::range_del::RangeTombstone;
    pub use crate::sst::properties::{decode_blob_references, encode_blob_references};
    pub use crate::sst::{BlobReferences, TableProperties};
    pub use crate::sst::{Block, BlockIter, BlockReadOptions, IndexBlockIter, IndexForm, Table};
    pub use crate::value::LookupResult;
    pub use crate::version::VersionEdit;
    pub use crate::write_batch::write_batch_sequence;
    pub use crate::write_batch::{write_batch_data, write_batch_from_data};
}
