//! Write batches: a group of puts and deletes applied atomically. See docs/format/wal.md.

/// A group of puts and deletes applied atomically by `Db::write`.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {}
