//! Table (SST) files: blocks, filters, index, properties, footer. See docs/format/sstable.md.
//!
//! A table is written once by [`TableBuilder`] from entries in internal-key order and then read
//! by many threads through [`Table`]. Everything read from disk is treated as untrusted: any
//! inconsistency is reported as `Error::Corruption` naming the file and byte offset.

mod block;
mod builder;
pub(crate) mod filter;
mod format;
mod index_block;
mod index_iter;
pub(crate) mod properties;
mod readahead;
mod table;

#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use block::BlockBuilder;
pub use block::{Block, BlockIter};
pub(crate) use builder::TableBuilder;
pub(crate) use format::{read_at, read_new_at};
pub use index_block::{IndexBlockIter, IndexForm};
pub(crate) use readahead::COMPACTION_READAHEAD;
pub use table::Table;
pub(crate) use table::TableIterator;

#[cfg(test)]
pub(crate) use format::reseal_block_for_tests;

use crate::compression::CompressionType;

/// How a read treats the blocks it loads: the part of [`crate::ReadOptions`] that matters
/// below the database layer (versions, level iterators, tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockReadOptions {
    /// Verify each block's checksum when it is read from disk.
    pub verify_checksums: bool,
    /// Insert blocks read from disk into the block cache.
    pub fill_cache: bool,
}

impl Default for BlockReadOptions {
    fn default() -> Self {
        BlockReadOptions {
            verify_checksums: true,
            fill_cache: true,
        }
    }
}

/// Where a block lives in a table file: its offset and the size of its stored contents,
/// excluding the 5-byte trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlockHandle {
    /// Byte offset of the block in the file.
    pub offset: u64,
    /// Bytes of stored (possibly compressed) contents, trailer not included.
    pub size: u64,
}

/// How a [`TableBuilder`] lays out a table.
#[derive(Debug, Clone)]
pub(crate) struct TableBuilderOptions {
    /// Approximate uncompressed size at which a data block is cut.
    pub block_size: usize,
    /// Entries between restart points in data blocks (index blocks: `index_restart_interval`).
    pub restart_interval: usize,
    /// Bloom filter bits per key; 0 writes no filter.
    pub bloom_bits_per_key: usize,
    /// Codec for data and index blocks (a block is stored raw if compression saves < 12.5%).
    pub compression: CompressionType,
    /// The codec's level; `None`: its default.
    pub compression_level: Option<i32>,
    /// Compress data blocks that hold blob references and no value too
    /// (`Options::compress_blob_reference_blocks`).
    pub compress_blob_reference_blocks: bool,
    /// The family's prefix extractor: the bloom filter also holds every key's prefix.
    pub prefix_extractor: Option<std::sync::Arc<dyn crate::PrefixExtractor>>,
    /// Write a two-level index: partitions of about `metadata_block_size` bytes under a
    /// top-level index (format 3, or 4 with `shaledb.index.two_level`).
    pub partition_index: bool,
    /// Cut the bloom filter into partitions aligned with the index partitions (requires
    /// `partition_index`).
    pub partition_filters: bool,
    /// Approximate size at which an index partition is cut.
    pub metadata_block_size: usize,
    /// Entries between restart points in index blocks (format 4; formats 1 to 3 use 1).
    pub index_restart_interval: usize,
    /// Write the index of formats 1 to 3 (internal keys, whole handles) instead of format
    /// 4's, as tables before 2026-11-25 were: what tests of the older readers build.
    pub legacy_format: bool,
    /// Give data blocks a hash index of about this many user keys per bucket (format 5;
    /// `Options::data_block_index_type`); `None`: binary search only.
    pub data_block_hash_ratio: Option<f64>,
}

/// Facts about a table, recorded in its properties block when it is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableProperties {
    /// Entries (puts and deletions).
    pub num_entries: u64,
    /// Entries that are deletion tombstones.
    pub num_deletions: u64,
    /// Sum of internal key lengths (user key + 8-byte trailer).
    pub raw_key_size: u64,
    /// Sum of value lengths.
    pub raw_value_size: u64,
    /// Bytes of data blocks on disk, trailers included.
    pub data_size: u64,
    /// Bytes of the index on disk, trailers included (with a two-level index: the partitions
    /// and the top level).
    pub index_size: u64,
    /// Bytes of the filter on disk, trailers included (0 if none; partitioned: the partitions
    /// and their top-level index).
    pub filter_size: u64,
    /// Index partitions of a two-level index (0: one index block).
    pub index_partitions: u64,
    /// Filter partitions (0: one filter block for the whole table, or none).
    pub filter_partitions: u64,
    /// Format 4: the index is keyed by user keys (no user key's versions span two data
    /// blocks), not internal keys.
    pub index_user_keys: bool,
    /// Format 4: the index has two levels (format 3 always does, formats 1 and 2 never).
    pub index_two_level: bool,
    /// Number of data blocks.
    pub num_data_blocks: u64,
    /// Name of the codec the table was written with (blocks that did not shrink are raw).
    pub compression: String,
    /// Smallest sequence number of any entry (0 if the table is empty).
    pub smallest_seqno: u64,
    /// Largest sequence number of any entry.
    pub largest_seqno: u64,
    /// The id of the prefix extractor whose prefixes the filter holds (empty: none).
    pub prefix_extractor: String,
    /// In a family with a TTL, the newest write time of any value (0: none recorded).
    pub newest_write_time: u64,
    /// The id of the column family the table was written for (`None`: tables written before
    /// the property existed; repair puts them in the default family).
    pub column_family_id: Option<u32>,
    /// The name of that column family (empty if not recorded).
    pub column_family_name: String,
    /// Written by `SstFileWriter` for ingestion: the external file format's version (1; 0
    /// for tables the engine wrote itself). Such a table's footer names file number 0 and its
    /// keys all carry sequence number 0.
    pub external_file_version: u64,
    /// The blob references the table holds, per blob file, ascending by file number (property
    /// `shaledb.blob.references`, since 2026-11-26; empty for a table without references or
    /// written before). What becomes garbage when the table is dropped whole.
    pub blob_references: Vec<BlobReferences>,
    /// Total file size. Not stored in the properties block: it is the file's length.
    pub file_size: u64,
}

/// The references one table holds into one blob file: how many, and the bytes of the records
/// they point at (record header, key and stored value: `BlobRef::record_bytes`), the
/// quantities blob garbage is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobReferences {
    /// The blob file's number.
    pub file_number: u64,
    /// References into it (at least 1).
    pub count: u64,
    /// Bytes of the records they point at.
    pub bytes: u64,
}
