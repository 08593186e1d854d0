//! Iterators over internal keys, and the user-facing iterator built from them.
//!
//! Every source of entries (memtable, block, table, level, merge) implements
//! [`InternalIterator`]. Keys are encoded internal keys (see `key.rs`).

pub(crate) mod db_iter;
pub(crate) mod merging;

use crate::error::Result;

/// A cursor over internal-key-ordered entries, movable both ways.
///
/// When an IO or corruption error occurs the iterator becomes invalid and `status` returns the
/// error; it never looks like a normal end.
pub trait InternalIterator: Send {
    /// True if positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry whose internal key is >= `target`.
    fn seek(&mut self, target: &[u8]);
    /// Moves to the next entry. REQUIRES: `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. REQUIRES: `valid()`.
    fn prev(&mut self);
    /// The current internal key. REQUIRES: `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. REQUIRES: `valid()`.
    fn value(&self) -> &[u8];
    /// The current value as a [`Value`](crate::Value) sharing the block it lies in, where
    /// the iterator reads from a shared block; `None` (the default) means "copy `value()`".
    /// REQUIRES: `valid()`.
    fn pinned_value(&self) -> Option<crate::Value> {
        None
    }
    /// The first error met, if any.
    fn status(&self) -> Result<()>;
}

/// An iterator over nothing, or over an error.
pub(crate) struct EmptyIterator {
    error: Option<crate::error::Error>,
}

impl EmptyIterator {
    /// An iterator with no entries and no error.
    pub(crate) fn new() -> Self {
        EmptyIterator { error: None }
    }
    /// An iterator with no entries whose status is `err`.
    pub(crate) fn with_error(err: crate::error::Error) -> Self {
        EmptyIterator { error: Some(err) }
    }
}

impl Default for EmptyIterator {
    fn default() -> Self {
        Self::new()
    }
}

impl InternalIterator for EmptyIterator {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _target: &[u8]) {}
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}
