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
    /// The one index block of a table without index partitions (formats 1, 2 and 4).
    Index,
    /// The top-level index of a two-level index (format 3, or 4 with
    /// `shaledb.index.two_level`).
    TopLevelIndex,
    /// An index partition (of a two-level index).
    IndexPartition,
    /// The whole-table bloom filter.
    Filter,
    /// The filter partition index (`partitionedfilter.shaledb.bloom`).
    FilterPartitionIndex,
    /// A filter partition.
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
    /// The index has two levels (format 3; format 4 with `shaledb.index.two_level`).
    pub two_level: bool,
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
        // Format 4's index blocks delta-encode their handles.
        let delta = format_version >= 4;
        let mut blocks = vec![
            (Region::Footer, footer_at, bytes.len()),
            block(Region::Metaindex, metaindex),
        ];
        let mut two_level = format_version == 3;
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
                for p in index_handles(bytes, handle, delta)? {
                    blocks.push(block(Region::FilterPartition, p));
                }
            }
            if region == Region::Properties && format_version >= 4 {
                two_level = entries(bytes, handle)?
                    .iter()
                    .any(|(k, v)| k == b"shaledb.index.two_level" && v == &[1]);
            }
        }
        let data_handles = if two_level {
            blocks.push(block(Region::TopLevelIndex, index));
            let mut data = Vec::new();
            for p in index_handles(bytes, index, delta)? {
                blocks.push(block(Region::IndexPartition, p));
                data.extend(index_handles(bytes, p, delta)?);
            }
            data
        } else {
            blocks.push(block(Region::Index, index));
            index_handles(bytes, index, delta)?
        };
        for h in data_handles {
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
            two_level,
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

/// Makes `o` write compaction outputs below L0 with zstd and a 512-byte dictionary; L0 tables
/// stay uncompressed.
pub fn write_dictionary_tables(o: &mut shaledb::Options) {
    o.compression_per_level = vec![
        shaledb::CompressionType::None,
        shaledb::CompressionType::Zstd,
    ];
    o.max_dict_bytes = 512;
}

/// Makes `o` write tables with a two-level index of about `partition_bytes` per partition,
/// with bloom filter partitions if `filters`.
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

/// The contents of the block at `handle`, which must be stored raw.
fn raw_contents(bytes: &[u8], (offset, size): (u64, u64)) -> Result<&[u8], String> {
    let (start, len) = (offset as usize, size as usize);
    let contents = bytes
        .get(start..start + len)
        .ok_or_else(|| format!("block at {start} past the end"))?;
    match bytes.get(start + len) {
        Some(0) => Ok(contents),
        other => Err(format!(
            "block at {start} is not stored raw (type {other:?})"
        )),
    }
}

/// The handles of an index block (an index, a partition or top level of one, a filter
/// partition index) at `handle`: each entry's whole value in formats 1 to 3; in format 4
/// (`delta`), decoded here from sstable.md rather than by the engine's reader, so the two
/// check each other.
fn index_handles(bytes: &[u8], handle: (u64, u64), delta: bool) -> Result<Vec<(u64, u64)>, String> {
    if !delta {
        return entries(bytes, handle)?
            .into_iter()
            .map(|(_, v)| decode_whole_handle(&v).ok_or_else(|| "bad block handle".to_string()))
            .collect();
    }
    let contents = raw_contents(bytes, handle)?;
    let word = |at: usize| -> Option<usize> {
        Some(u32::from_le_bytes(contents.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let bad = || format!("index block at {} does not decode", handle.0);
    let count_at = contents.len().checked_sub(4).ok_or_else(bad)?;
    let restarts_at = count_at
        .checked_sub(4 * word(count_at).ok_or_else(bad)?)
        .ok_or_else(bad)?;
    let restarts: Vec<usize> = (restarts_at..count_at)
        .step_by(4)
        .map(word)
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let entries = &contents[..restarts_at];
    let (mut pos, mut out) = (0, Vec::<(u64, u64)>::new());
    while pos < entries.len() {
        let at_restart = restarts.contains(&pos);
        let _shared = decode_varint(entries, &mut pos).ok_or_else(bad)?;
        pos += decode_varint(entries, &mut pos).ok_or_else(bad)? as usize;
        let h = match (at_restart, out.last()) {
            (true, _) => decode_handle(entries, &mut pos).ok_or_else(bad)?,
            (false, Some(&(offset, size))) => {
                let next = decode_varint(entries, &mut pos).ok_or_else(bad)?;
                let follows = offset.checked_add(size + TRAILER_LEN as u64);
                (follows.ok_or_else(bad)?, next)
            }
            (false, None) => return Err(bad()),
        };
        out.push(h);
    }
    Ok(out)
}

/// The entries of the block at `handle`, which must be stored raw.
fn entries(bytes: &[u8], handle: (u64, u64)) -> Result<Entries, String> {
    let start = handle.0 as usize;
    let contents = raw_contents(bytes, handle)?;
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
