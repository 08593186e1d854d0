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

pub mod cache;
pub mod checksum;
pub mod coding;
pub mod compaction;
pub mod compression;
pub mod db;
pub mod error;
pub mod fs;
pub mod iter;
pub mod key;
pub mod log;
pub mod memtable;
pub mod options;
mod snapshot;
pub mod sst;
pub mod value;
pub mod version;
pub mod write_batch;

pub use compression::CompressionType;
pub use db::{Db, DbIterator, KeyRange, RangeIter};
pub use error::{Error, Result};
pub use options::{Options, ReadOptions, WalRecoveryMode, WriteOptions};
pub use snapshot::Snapshot;
pub use value::Value;
pub use write_batch::WriteBatch;
