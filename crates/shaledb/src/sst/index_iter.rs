//! Iterating a table's index: one index block, or the two levels of a partitioned index (a
//! top-level block whose entries locate index partitions, each read through the block cache
//! when the iterator reaches it). Either way the iterator yields one entry per data block:
//! its separator and its handle.

use super::index_block::IndexBlockIter;
use super::table::Table;
use super::BlockHandle;
use crate::error::{Error, Result};

/// An iterator over a table's index entries. Positioning calls take the table, which reads
/// the partitions of a two-level index.
// One per table iterator: a few hundred bytes more for a flat index cost less than a boxed
// iterator's allocation on every table iterator.
#[allow(clippy::large_enum_variant)]
pub(super) enum IndexIter {
    Flat(IndexBlockIter),
    TwoLevel(PartitionedIndexIter),
}

/// The two levels of a partitioned index: `top` picks the partition, `partition` walks it.
pub(super) struct PartitionedIndexIter {
    top: IndexBlockIter,
    partition: Option<IndexBlockIter>,
    partition_handle: BlockHandle,
    error: Option<Error>,
}

impl IndexIter {
    pub(super) fn two_level(top: IndexBlockIter) -> IndexIter {
        IndexIter::TwoLevel(PartitionedIndexIter {
            top,
            partition: None,
            partition_handle: BlockHandle::default(),
            error: None,
        })
    }

    pub(super) fn valid(&self) -> bool {
        match self {
            IndexIter::Flat(i) => i.valid(),
            IndexIter::TwoLevel(i) => {
                i.error.is_none() && i.partition.as_ref().is_some_and(|p| p.valid())
            }
        }
    }

    /// The separator of the current data block.
    pub(super) fn key(&self) -> &[u8] {
        match self {
            IndexIter::Flat(i) => i.key(),
            IndexIter::TwoLevel(i) => i.partition.as_ref().map_or(&[], |p| p.key()),
        }
    }

    /// The handle of the current data block. REQUIRES: `valid()`.
    pub(super) fn handle(&self) -> BlockHandle {
        match self {
            IndexIter::Flat(i) => i.handle(),
            IndexIter::TwoLevel(i) => i
                .partition
                .as_ref()
                .map_or_else(BlockHandle::default, |p| p.handle()),
        }
    }

    pub(super) fn status(&self) -> Result<()> {
        match self {
            IndexIter::Flat(i) => i.status(),
            IndexIter::TwoLevel(i) => {
                if let Some(e) = &i.error {
                    return Err(e.duplicate());
                }
                i.top.status()?;
                i.partition.as_ref().map_or(Ok(()), |p| p.status())
            }
        }
    }

    pub(super) fn seek_to_first(&mut self, table: &Table) {
        match self {
            IndexIter::Flat(i) => i.seek_to_first(),
            IndexIter::TwoLevel(i) => {
                i.top.seek_to_first();
                i.load_partition(table);
                if let Some(p) = &mut i.partition {
                    p.seek_to_first();
                }
                i.skip_empty_forward(table);
            }
        }
    }

    pub(super) fn seek_to_last(&mut self, table: &Table) {
        match self {
            IndexIter::Flat(i) => i.seek_to_last(),
            IndexIter::TwoLevel(i) => {
                i.top.seek_to_last();
                i.load_partition(table);
                if let Some(p) = &mut i.partition {
                    p.seek_to_last();
                }
                i.skip_empty_backward(table);
            }
        }
    }

    /// Positions at the first data block whose separator is at or after `target`. The flat
    /// index, or the top level, is the block `table` holds, so the table's heads apply.
    pub(super) fn seek(&mut self, table: &Table, target: &[u8]) {
        match self {
            IndexIter::Flat(i) => i.seek_with_heads(target, table.index_heads()),
            IndexIter::TwoLevel(i) => {
                i.top.seek_with_heads(target, table.index_heads());
                i.load_partition(table);
                if let Some(p) = &mut i.partition {
                    p.seek(target);
                }
                i.skip_empty_forward(table);
            }
        }
    }

    pub(super) fn next(&mut self, table: &Table) {
        match self {
            IndexIter::Flat(i) => i.next(),
            IndexIter::TwoLevel(i) => {
                if let Some(p) = &mut i.partition {
                    p.next();
                }
                i.skip_empty_forward(table);
            }
        }
    }

    pub(super) fn prev(&mut self, table: &Table) {
        match self {
            IndexIter::Flat(i) => i.prev(),
            IndexIter::TwoLevel(i) => {
                if let Some(p) = &mut i.partition {
                    p.prev();
                }
                i.skip_empty_backward(table);
            }
        }
    }
}

impl PartitionedIndexIter {
    /// Loads the partition the top-level iterator points at (keeps the current one if it is
    /// the same); no partition past the end or after an error (which is recorded).
    fn load_partition(&mut self, table: &Table) {
        if !self.top.valid() {
            self.partition = None;
            return;
        }
        let handle = self.top.handle();
        if self.partition.is_some() && handle == self.partition_handle {
            return;
        }
        match table.index_partition(handle) {
            Ok(block) => {
                self.partition = Some(table.index_block_iter(block, handle.offset));
                self.partition_handle = handle;
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.partition = None;
    }

    /// True if the partition iterator stopped on an error (now recorded).
    fn partition_failed(&mut self) -> bool {
        if let Some(Err(e)) = self.partition.as_ref().map(|p| p.status()) {
            self.fail(e);
        }
        self.error.is_some()
    }

    /// Moves to the first entry of the following partitions while the current one is done.
    fn skip_empty_forward(&mut self, table: &Table) {
        while !self.partition.as_ref().is_some_and(|p| p.valid()) {
            if self.partition_failed() || !self.top.valid() {
                self.partition = None;
                return;
            }
            self.top.next();
            self.load_partition(table);
            if let Some(p) = &mut self.partition {
                p.seek_to_first();
            }
        }
    }

    fn skip_empty_backward(&mut self, table: &Table) {
        while !self.partition.as_ref().is_some_and(|p| p.valid()) {
            if self.partition_failed() || !self.top.valid() {
                self.partition = None;
                return;
            }
            self.top.prev();
            self.load_partition(table);
            if let Some(p) = &mut self.partition {
                p.seek_to_last();
            }
        }
    }
}
