//! Compaction filters: user code that drops or rewrites values while compaction rewrites them
//! (RocksDB's `CompactionFilter`).

/// What a [`CompactionFilter`] decides for one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Keep the value as it is.
    Keep,
    /// Remove the key (it reads as deleted from then on).
    Remove,
    /// Replace the value.
    Change(Vec<u8>),
}

/// Called by compaction for each key's newest value that no snapshot can see (RocksDB's rule:
/// a value a live snapshot still reads is left alone). Set one per column family
/// (`Options::compaction_filter`, `CfOptions::compaction_filter`). It runs on background
/// threads and must not call into the database.
///
/// The filter sees values as compaction reaches them, so a key it would remove stays readable
/// until a compaction rewrites the file holding it; snapshots taken while a compaction runs are
/// not protected from it (as in RocksDB).
///
/// ```
/// use shaledb::{CompactionFilter, Db, Decision, Options};
/// use std::sync::Arc;
///
/// /// Drops every key under "tmp/".
/// struct DropTemp;
/// impl CompactionFilter for DropTemp {
///     fn name(&self) -> &str { "drop-temp" }
///     fn filter(&self, _level: usize, key: &[u8], _value: &[u8]) -> Decision {
///         if key.starts_with(b"tmp/") { Decision::Remove } else { Decision::Keep }
///     }
/// }
///
/// let dir = tempfile::tempdir().unwrap();
/// let opts = Options { compaction_filter: Some(Arc::new(DropTemp)), ..Default::default() };
/// let db = Db::open(dir.path(), opts).unwrap();
/// db.put(b"tmp/x", b"1").unwrap();
/// db.put(b"keep", b"2").unwrap();
/// db.compact_range(None, None).unwrap();
/// assert_eq!(db.get(b"tmp/x").unwrap(), None);
/// assert!(db.get(b"keep").unwrap().is_some());
/// ```
pub trait CompactionFilter: Send + Sync {
    /// The filter's name (for logs and errors).
    fn name(&self) -> &str;

    /// Decides what happens to `value`, the newest value of `key`, while compacting files of
    /// `level` (the compaction's input level).
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> Decision;
}

impl std::fmt::Debug for dyn CompactionFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompactionFilter({})", self.name())
    }
}
