//! The block layout of a table file, read from its bytes as docs/format/sstable.md describes
//! it: which byte ranges hold data blocks, the index (one block, or the top-level index and
//! its partitions), the filter (one block, or the filter partitions and their index) and the
//! other metadata blocks. Tests that damage tables use it to name what a damaged byte belongs
//! to and to check that a table holds the structures they mean to damage.
//!
//! Only blocks stored raw can be looked into: a table whose index (or top-level index) was
//! compressed is refused, so tests that need the layout write their tables uncompressed.

use shaledb::fs::MemFileSystem;
use shaledb::internals::{Block, BlockIter, InternalIterator};
use std::sync::Arc;

/// Bytes of the footer at the end of every table.
pub const FOOTER_LEN: usize = 64;
/// Bytes of the trailer after every block (compression type and checksum).
pub const TRAILER_LEN: usize = 5;

/// What a byte range of a table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Region {
    /// A data block.
    Data,
    /// The one index block of a format 1 or 2 table.
    Index,
    /// The top-level index of a two-level index (format 3).
    TopLevelIndex,
    /// An index partition (format 3).
    IndexPartition,
    /// The whole-table bloom filter.
    Filter,
    /// The filter partition index (format 3, `partitionedfilter.shaledb.bloom`).
    FilterPartitionIndex,
    /// A filter partition (format 3).
    FilterPartition,
    /// The compression-dictionary block.
    Dictionary,
    /// The range-deletion block.
    RangeDeletion,
    /// The properties block.
    Properties,
    /// The metaindex block.
    Metaindex,
    /// The footer.
    Footer,
}

/// A table's blocks and footer, in file order, covering the file exactly.
#[derive(Debug, Clone)]
pub struct TableLayout {
    /// The footer's format version.
    pub format_version: u32,
    /// `(what, first byte, end)` of every block (its trailer included) and of the footer.
    pub blocks: Vec<(Region, usize, usize)>,
}

impl TableLayout {
    /// Reads the layout of an intact table; an error says what did not fit the format.
    pub fn parse(bytes: &[u8]) -> Result<TableLayout, String> {
        let footer_at = bytes
            .len()
            .checked_sub(FOOTER_LEN)
            .ok_or("shorter than a footer")?;
        let footer = &bytes[footer_at..];
        let mut pos = 0;
        let metaindex = decode_handle(footer, &mut pos).ok_or("metaindex handle")?;
        let index = decode_handle(footer, &mut pos).ok_or("index handle")?;
        let format_version = format_version(bytes).ok_or("footer")?;
        let mut blocks = vec![
            (Region::Footer, footer_at, bytes.len()),
            block(Region::Metaindex, metaindex),
        ];
        for (name, h) in entries(bytes, metaindex)? {
            let handle = decode_whole_handle(&h).ok_or("metaindex value is not a handle")?;
            let region = match name.as_slice() {
                b"filter.shaledb.bloom" => Region::Filter,
                b"partitionedfilter.shaledb.bloom" => Region::FilterPartitionIndex,
                b"rocksdb.compression_dict" => Region::Dictionary,
                b"rocksdb.range_del" => Region::RangeDeletion,
                b"shaledb.properties" => Region::Properties,
                other => {
                    return Err(format!(
                        "unknown metaindex name {:?}",
                        String::from_utf8_lossy(other)
                    ))
                }
            };
            blocks.push(block(region, handle));
            if region == Region::FilterPartitionIndex {
                for (_, v) in entries(bytes, handle)? {
                    let p = decode_whole_handle(&v).ok_or("filter partition handle")?;
                    blocks.push(block(Region::FilterPartition, p));
                }
            }
        }
        let data_handles = if format_version == 3 {
            blocks.push(block(Region::TopLevelIndex, index));
            let mut data = Vec::new();
            for (_, v) in entries(bytes, index)? {
                let p = decode_whole_handle(&v).ok_or("index partition handle")?;
                blocks.push(block(Region::IndexPartition, p));
                data.extend(entries(bytes, p)?.into_iter().map(|(_, v)| v));
            }
            data
        } else {
            blocks.push(block(Region::Index, index));
            entries(bytes, index)?.into_iter().map(|(_, v)| v).collect()
        };
        for v in data_handles {
            let h = decode_whole_handle(&v).ok_or("data block handle")?;
            blocks.push(block(Region::Data, h));
        }
        blocks.sort_by_key(|&(_, start, _)| start);
        let mut end = 0;
        for &(what, start, stop) in &blocks {
            if start != end {
                return Err(format!(
                    "{what:?} at {start}: the blocks before end at {end}"
                ));
            }
            end = stop;
        }
        if end != bytes.len() {
            return Err(format!("blocks end at {end} of {}", bytes.len()));
        }
        Ok(TableLayout {
            format_version,
            blocks,
        })
    }

    /// What byte `offset` belongs to.
    pub fn region_of(&self, offset: usize) -> Option<Region> {
        self.blocks
            .iter()
            .find(|&&(_, start, end)| (start..end).contains(&offset))
            .map(|&(what, ..)| what)
    }

    /// How many blocks of kind `what` the table has.
    pub fn count(&self, what: Region) -> usize {
        self.blocks.iter().filter(|&&(w, ..)| w == what).count()
    }
}

/// Makes `o` write compaction outputs below L0 with zstd and a 512-byte dictionary (table
/// format 2); L0 tables stay uncompressed (format 1).
pub fn write_dictionary_tables(o: &mut shaledb::Options) {
    o.compression_per_level = vec![
        shaledb::CompressionType::None,
        shaledb::CompressionType::Zstd,
    ];
    o.max_dict_bytes = 512;
}

/// Makes `o` write tables with a two-level index of about `partition_bytes` per partition
/// (table format 3), with bloom filter partitions if `filters`.
pub fn write_partitioned_tables(o: &mut shaledb::Options, filters: bool, partition_bytes: usize) {
    o.index_type = shaledb::IndexType::TwoLevel;
    o.partition_filters = filters;
    o.metadata_block_size = partition_bytes;
}

/// The format version in a table's footer (`None` if the file is shorter than a footer).
pub fn format_version(bytes: &[u8]) -> Option<u32> {
    let at = bytes.len().checked_sub(FOOTER_LEN)? + 48;
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// The format versions of the tables (`*.sst`) in `fs`, each once, ascending.
pub fn table_formats(fs: &MemFileSystem) -> Vec<u32> {
    let mut formats: Vec<u32> = fs
        .file_names()
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .filter_map(|p| format_version(&fs.read_file_bytes(p)?))
        .collect();
    formats.sort_unstable();
    formats.dedup();
    formats
}

/// A block's range in the file, trailer included.
fn block(what: Region, (offset, size): (u64, u64)) -> (Region, usize, usize) {
    let start = offset as usize;
    (what, start, start + size as usize + TRAILER_LEN)
}

/// A block's entries: (key, value).
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// The entries of the block at `handle`, which must be stored raw.
fn entries(bytes: &[u8], (offset, size): (u64, u64)) -> Result<Entries, String> {
    let (start, len) = (offset as usize, size as usize);
    let contents = bytes
        .get(start..start + len)
        .ok_or_else(|| format!("block at {start} past the end"))?;
    match bytes.get(start + len) {
        Some(0) => {}
        other => {
            return Err(format!(
                "block at {start} is not stored raw (type {other:?})"
            ))
        }
    }
    let block = Block::new(contents.to_vec()).map_err(|e| format!("block at {start}: {e}"))?;
    let mut it = BlockIter::new_bytewise(Arc::new(block));
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().map_err(|e| format!("block at {start}: {e}"))?;
    Ok(out)
}

fn decode_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn decode_handle(bytes: &[u8], pos: &mut usize) -> Option<(u64, u64)> {
    Some((decode_varint(bytes, pos)?, decode_varint(bytes, pos)?))
}

/// A handle that spans all of `bytes`.
fn decode_whole_handle(bytes: &[u8]) -> Option<(u64, u64)> {
    let mut pos = 0;
    let h = decode_handle(bytes, &mut pos)?;
    (pos == bytes.len()).then_some(h)
}
