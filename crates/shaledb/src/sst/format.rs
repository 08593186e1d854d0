//! Pieces of the table format shared by the builder and the reader: block handles, the block
//! trailer, the footer, and reading a block from a file. See docs/format/sstable.md.

use super::block::Block;
use super::index_block::IndexForm;
use super::readahead::Readahead;
use super::BlockHandle;
use crate::cache::StoredBlock;
use crate::checksum;
use crate::coding::{get_varint64, put_fixed32, put_fixed64, put_varint64};
use crate::compression::{self, CompressionType, Compressor, ZstdDictionary};
use crate::error::{Error, Result};
use crate::fs::{MappedFile, RandomAccessFile};
use std::path::Path;
use std::sync::Arc;

/// Bytes after every block: 1 byte compression type + fixed32 masked CRC32C.
pub(crate) const BLOCK_TRAILER_LEN: usize = 5;

/// Bytes of the footer at the end of every table.
pub(crate) const FOOTER_LEN: usize = 64;

/// Bytes of the footer holding the two zero-padded block handles.
const FOOTER_HANDLES_LEN: usize = 40;

/// The footer's last 8 bytes.
pub(crate) const TABLE_MAGIC: [u8; 8] = *b"shaleSST";

/// The table format version of tables without a zstd dictionary.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// The version of tables with a zstd dictionary block (docs/format/sstable.md); otherwise
/// the same layout.
pub(crate) const FORMAT_VERSION_DICTIONARY: u32 = 2;
/// The version of tables with a two-level index (and perhaps filter partitions and a
/// dictionary).
pub(crate) const FORMAT_VERSION_PARTITIONED: u32 = 3;
/// The version of tables whose index blocks have delta-encoded handles and perhaps user-key
/// separators (`shaledb.index.user_keys`), with any of the features of versions 2 and 3.
pub(crate) const FORMAT_VERSION_SMALL_INDEX: u32 = 4;
/// Format 4 whose data blocks may carry a hash index (docs/format/block.md).
pub(crate) const FORMAT_VERSION_DATA_HASH: u32 = 5;

/// Upper bound on a decoded block. A block is cut once it reaches `block_size` (at most 256 MiB),
/// so it holds at most that plus one entry: an 8 MiB key and a value under 4 GiB
/// (`max_value_size` fits in 32 bits). A block claiming more is corrupt.
pub(crate) const MAX_DECODED_BLOCK: u64 = (4 << 30) + (512 << 20);

impl BlockHandle {
    /// Most bytes an encoded handle takes (two varint64s).
    pub(crate) const MAX_ENCODED_LEN: usize = 20;

    /// Appends the handle as varint64 offset, varint64 size.
    pub(crate) fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Decodes a handle from the start of `src`; returns it and the bytes consumed.
    pub(crate) fn decode_from(src: &[u8]) -> Option<(BlockHandle, usize)> {
        let (offset, n1) = get_varint64(src)?;
        let (size, n2) = get_varint64(src.get(n1..)?)?;
        Some((BlockHandle { offset, size }, n1 + n2))
    }
}

/// Appends the trailer of a block whose (possibly compressed) contents are `contents`, written
/// at file offset `offset`. The CRC covers contents, type byte and offset, so a valid block
/// copied to the wrong place fails verification.
pub(crate) fn append_block_trailer(
    dst: &mut Vec<u8>,
    contents: &[u8],
    kind: CompressionType,
    offset: u64,
) {
    dst.push(kind as u8);
    put_fixed32(dst, checksum::mask(block_crc(contents, kind as u8, offset)));
}

/// Recomputes the trailer checksum of the block at `handle` in the table bytes `file`, so a
/// test can plant damage that checksums do not catch.
#[cfg(test)]
pub(crate) fn reseal_block_for_tests(file: &mut [u8], handle: BlockHandle) {
    let (start, len) = (handle.offset as usize, handle.size as usize);
    let kind = file[start + len];
    let crc = checksum::mask(block_crc(&file[start..start + len], kind, handle.offset));
    file[start + len + 1..start + len + 5].copy_from_slice(&crc.to_le_bytes());
}

fn block_crc(contents: &[u8], kind: u8, offset: u64) -> u32 {
    let crc = checksum::crc32c(contents);
    let crc = checksum::crc32c_extend(crc, &[kind]);
    checksum::crc32c_extend(crc, &offset.to_le_bytes())
}

/// Produces the stored form of a block: compressed (with a varint64 uncompressed-length
/// prefix) if that saves at least 12.5%, else the raw bytes. Returns the type actually used.
pub(crate) fn maybe_compress(
    raw: &[u8],
    compressor: &mut Compressor,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> CompressionType {
    out.clear();
    let kind = compressor.kind();
    if kind != CompressionType::None && compressor.compress(raw, scratch) {
        put_varint64(out, raw.len() as u64);
        out.extend_from_slice(scratch);
        if out.len() <= raw.len() - raw.len() / 8 {
            return kind;
        }
        out.clear();
    }
    out.extend_from_slice(raw);
    CompressionType::None
}

/// Reads `buf.len()` bytes at `offset`, mapping a short read to corruption (truncated file).
pub(crate) fn read_at(
    file: &dyn RandomAccessFile,
    path: &Path,
    offset: u64,
    buf: &mut [u8],
    what: &str,
) -> Result<()> {
    file.read_exact_at(offset, buf)
        .map_err(|e| read_error(e, path, offset, what))
}

/// [`read_at`] of `len` bytes into a new buffer, not zeroed first where the file allows
/// (`RandomAccessFile::read_exact_at_into`).
pub(crate) fn read_new_at(
    file: &dyn RandomAccessFile,
    path: &Path,
    offset: u64,
    len: usize,
    what: &str,
) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    file.read_exact_at_into(offset, len, &mut buf)
        .map_err(|e| read_error(e, path, offset, what))?;
    Ok(buf)
}

/// A failed read as the engine reports it: a file that ends early is corruption.
fn read_error(e: std::io::Error, path: &Path, offset: u64, what: &str) -> Error {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        Error::corruption(path, offset, format!("file truncated while reading {what}"))
    } else {
        Error::io(format!("reading {what} of {}", path.display()), e)
    }
}

/// Where a table's blocks are read from: the file, its path (named in errors), where the
/// footer starts (every block must end before it) and the table's zstd dictionary, if any.
#[derive(Clone, Copy)]
pub(crate) struct BlockSource<'a> {
    pub(crate) file: &'a dyn RandomAccessFile,
    pub(crate) path: &'a Path,
    pub(crate) data_end: u64,
    pub(crate) dict: Option<&'a ZstdDictionary>,
    /// The file's memory map, if it was opened mapped: key/value blocks stored uncompressed
    /// are then slices of it, not copies.
    mapped: Option<&'a Arc<MappedFile>>,
}

impl<'a> BlockSource<'a> {
    /// Blocks of `file` (at `path`) ending before `data_end`, with no dictionary.
    pub(crate) fn new(file: &'a dyn RandomAccessFile, path: &'a Path, data_end: u64) -> Self {
        BlockSource {
            file,
            path,
            data_end,
            dict: None,
            mapped: file.mapping(),
        }
    }

    /// The same blocks, zstd ones decompressed with `dict`.
    pub(crate) fn with_dictionary(self, dict: Option<&'a ZstdDictionary>) -> Self {
        BlockSource { dict, ..self }
    }

    /// Reads, verifies (if asked) and decodes the key/value block at `handle`, through
    /// `readahead` if given.
    pub(crate) fn block(
        &self,
        handle: BlockHandle,
        verify_checksum: bool,
        what: &str,
        readahead: Option<&mut Readahead>,
    ) -> Result<Block> {
        if let Some(map) = self.mapped {
            return self.mapped_block(map, handle, verify_checksum, what);
        }
        let (data, _) = read_contents(*self, handle, verify_checksum, what, readahead, false)?;
        self.decoded(data, handle, what)
    }

    /// [`BlockSource::block`] from the file's map: the trailer checked as for a read, an
    /// uncompressed block served as a slice of the map (no copy, no allocation of its
    /// bytes), a compressed one decompressed from the map.
    fn mapped_block(
        &self,
        map: &Arc<MappedFile>,
        handle: BlockHandle,
        verify_checksum: bool,
        what: &str,
    ) -> Result<Block> {
        let corrupt = |detail: String| Error::corruption(self.path, handle.offset, detail);
        let len = stored_len(handle, self.data_end, what, &corrupt)?;
        let start =
            usize::try_from(handle.offset).map_err(|_| corrupt(format!("{what} too far")))?;
        let stored = start
            .checked_add(len + BLOCK_TRAILER_LEN)
            .and_then(|end| map.bytes().get(start..end))
            .ok_or_else(|| corrupt(format!("{what} extends past the end of the mapped file")))?;
        match check_trailer(stored, len, handle.offset, verify_checksum, &corrupt, what)? {
            CompressionType::None => Block::mapped(map.clone(), start, start + len)
                .map_err(|e| corrupt(format!("{what}: {e}"))),
            kind => {
                let out = decompress_block(&stored[..len], kind, self.dict, &corrupt, what)?;
                self.decoded(out, handle, what)
            }
        }
    }

    /// [`BlockSource::block`] that also returns a copy of the block's stored form when it is
    /// compressed and its checksum holds (checked here if `verify_checksum` did not ask): what
    /// the compressed secondary cache admits. A block that fails to decode returns an error
    /// and no copy.
    pub(crate) fn block_and_stored(
        &self,
        handle: BlockHandle,
        verify_checksum: bool,
        what: &str,
        readahead: Option<&mut Readahead>,
    ) -> Result<(Block, Option<StoredBlock>)> {
        let (data, stored) = read_contents(*self, handle, verify_checksum, what, readahead, true)?;
        Ok((self.decoded(data, handle, what)?, stored))
    }

    /// Decodes a block from a stored form kept by the compressed secondary cache (which was
    /// read from `handle` and decoded once already, so an error here means memory damage or
    /// a bug; it is still reported as corruption of the block, never served).
    pub(crate) fn block_from_stored(
        &self,
        stored: &StoredBlock,
        handle: BlockHandle,
        what: &str,
    ) -> Result<Block> {
        let corrupt = |detail: String| Error::corruption(self.path, handle.offset, detail);
        let data = decompress_block(&stored.contents, stored.kind, self.dict, &corrupt, what)?;
        self.decoded(data, handle, what)
    }

    fn decoded(&self, data: Vec<u8>, handle: BlockHandle, what: &str) -> Result<Block> {
        Block::new(data)
            .map_err(|e| Error::corruption(self.path, handle.offset, format!("{what}: {e}")))
    }

    /// Reads, verifies (if asked) and decompresses the stored contents at `handle`, without
    /// interpreting them (the filter block is not a key/value block), through `readahead` if
    /// given (the checks are the same either way).
    pub(crate) fn contents(
        &self,
        handle: BlockHandle,
        verify_checksum: bool,
        what: &str,
        readahead: Option<&mut Readahead>,
    ) -> Result<Vec<u8>> {
        read_contents(*self, handle, verify_checksum, what, readahead, false).map(|(c, _)| c)
    }
}

/// A block's decoded contents and, with `keep_stored`, a copy of its stored form if it is
/// compressed and its checksum holds (see [`BlockSource::block_and_stored`]).
type Contents = (Vec<u8>, Option<StoredBlock>);

fn read_contents(
    src: BlockSource<'_>,
    handle: BlockHandle,
    verify_checksum: bool,
    what: &str,
    readahead: Option<&mut Readahead>,
    keep_stored: bool,
) -> Result<Contents> {
    let BlockSource {
        file,
        path,
        data_end,
        dict,
        ..
    } = src;
    let corrupt = |detail: String| Error::corruption(path, handle.offset, detail);
    let len = stored_len(handle, data_end, what, &corrupt)?;
    let stored_len = len + BLOCK_TRAILER_LEN;
    let decode = |stored: &[u8], kind| -> Result<Contents> {
        let out = decompress_block(&stored[..len], kind, dict, &corrupt, what)?;
        let keep = keep_stored && (verify_checksum || checksum_holds(stored, len, handle.offset));
        Ok((out, keep.then(|| stored_copy(kind, &stored[..len]))))
    };
    if let Some(ra) = readahead {
        let mut buf = ra.read(file, path, handle.offset, stored_len, data_end, what)?;
        return match check_trailer(&buf, len, handle.offset, verify_checksum, &corrupt, what)? {
            CompressionType::None => {
                buf.truncate(len);
                Ok((buf, None))
            }
            kind => decode(&buf, kind),
        };
    }
    STORED_BLOCK.with(|cell| {
        let mut buf = cell.borrow_mut();
        // Zeroed only when it grows, which a block taken by the cache always leaves it to do.
        // Reading into the spare room instead saved the memset on a churning cache but lost
        // 3-10% on a cold one, whose fresh pages were faulted in by the kernel's copy
        // (bench/results/2026-12-08-mapped-blob-files).
        if buf.len() < stored_len {
            buf.resize(stored_len, 0);
        }
        read_at(file, path, handle.offset, &mut buf[..stored_len], what)?;
        let stored = &buf[..stored_len];
        match check_trailer(stored, len, handle.offset, verify_checksum, &corrupt, what)? {
            CompressionType::None => {
                // The block keeps the buffer; the next read starts a new one.
                let mut owned = std::mem::take(&mut *buf);
                owned.truncate(len);
                Ok((owned, None))
            }
            kind => {
                let out = decode(stored, kind);
                if buf.capacity() > KEPT_STORED_BLOCK {
                    *buf = Vec::new();
                }
                out
            }
        }
    })
}

/// The length of the block at `handle` (its trailer not counted), after checking that the
/// block and its trailer end within the data area (which ends at or before the file's end, so
/// a buffer of this size is never larger than the file).
fn stored_len(
    handle: BlockHandle,
    data_end: u64,
    what: &str,
    corrupt: &dyn Fn(String) -> Error,
) -> Result<usize> {
    let end = handle
        .offset
        .checked_add(handle.size)
        .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64));
    match end {
        Some(e) if e <= data_end => {}
        _ => {
            return Err(corrupt(format!(
                "{what} handle (offset {}, size {}) points past the data area ending at {data_end}",
                handle.offset, handle.size
            )))
        }
    }
    usize::try_from(handle.size).map_err(|_| corrupt(format!("{what} too large")))
}

/// Whether the trailer's checksum matches `stored[..len]` (a read that did not verify it
/// checks it before the block may enter the compressed secondary cache).
fn checksum_holds(stored: &[u8], len: usize, offset: u64) -> bool {
    let (Some(&kind), Some(crc)) = (
        stored.get(len),
        stored
            .get(len + 1..)
            .and_then(crate::coding::decode_fixed32),
    ) else {
        return false;
    };
    stored
        .get(..len)
        .is_some_and(|c| checksum::unmask(crc) == block_crc(c, kind, offset))
}

fn stored_copy(kind: CompressionType, contents: &[u8]) -> StoredBlock {
    StoredBlock {
        kind,
        contents: contents.into(),
    }
}

/// A read buffer larger than this is not kept for the thread's next read.
const KEPT_STORED_BLOCK: usize = 4 << 20;

thread_local! {
    /// Each thread's buffer for a block's stored bytes (no readahead): a compressed block is
    /// decompressed out of it, so a read allocates (and zeroes) only the decompressed block.
    static STORED_BLOCK: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Checks the trailer of a stored block (`stored[..len]` plus trailer): the checksum if
/// asked, and the codec id, which it returns.
fn check_trailer(
    stored: &[u8],
    len: usize,
    offset: u64,
    verify_checksum: bool,
    corrupt: &dyn Fn(String) -> Error,
    what: &str,
) -> Result<CompressionType> {
    let kind_byte = *stored
        .get(len)
        .ok_or_else(|| corrupt(format!("{what} trailer truncated")))?;
    if verify_checksum {
        let stored_crc = stored
            .get(len + 1..)
            .and_then(crate::coding::decode_fixed32)
            .ok_or_else(|| corrupt(format!("{what} trailer truncated")))?;
        let actual = block_crc(&stored[..len], kind_byte, offset);
        if checksum::unmask(stored_crc) != actual {
            return Err(corrupt(format!("{what} checksum mismatch")));
        }
    }
    CompressionType::from_u8(kind_byte)
        .ok_or_else(|| corrupt(format!("{what} has unknown compression type {kind_byte}")))
}

/// Decodes a compressed block's contents (varint decoded length, then the codec's bytes).
fn decompress_block(
    contents: &[u8],
    kind: CompressionType,
    dict: Option<&ZstdDictionary>,
    corrupt: &dyn Fn(String) -> Error,
    what: &str,
) -> Result<Vec<u8>> {
    let (raw_len, n) =
        get_varint64(contents).ok_or_else(|| corrupt(format!("{what} bad length prefix")))?;
    let raw_len = Some(raw_len)
        .filter(|&l| l <= MAX_DECODED_BLOCK)
        .and_then(|l| usize::try_from(l).ok())
        .ok_or_else(|| corrupt(format!("{what} claims {raw_len} decoded bytes")))?;
    let body = contents.get(n..).unwrap_or(&[]);
    let out = compression::decompress_with(kind, body, raw_len, dict)
        .map_err(|e| corrupt(format!("{what} does not decompress: {e}")))?;
    if out.len() != raw_len {
        return Err(corrupt(format!(
            "{what} decompressed to {} bytes, expected {raw_len}",
            out.len()
        )));
    }
    Ok(out)
}

/// The decoded footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    pub(crate) metaindex: BlockHandle,
    pub(crate) index: BlockHandle,
    pub(crate) file_number: u64,
    pub(crate) version: TableFormat,
}

/// A table's format version (docs/format/sstable.md, footer): what a reader must understand
/// to read it. Readers refuse versions newer than theirs rather than misread them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TableFormat {
    /// One index block, no dictionary.
    V1,
    /// One index block; the zstd blocks need the table's dictionary block.
    V2Dictionary,
    /// A two-level index (the footer's index handle is its top level), perhaps a partitioned
    /// filter, a dictionary block if the metaindex lists one.
    V3Partitioned,
    /// Format-4 index blocks (`IndexForm::v4`); one index block or two levels
    /// (`shaledb.index.two_level`), perhaps a partitioned filter, a dictionary block if the
    /// metaindex lists one.
    V4SmallIndex,
    /// Format 4, and data blocks may carry a hash index (the flag in their restart count).
    V5DataHash,
}

impl TableFormat {
    /// The version of a table with these features: 4, 5 with data-block hash indexes, or
    /// with `legacy_index` (tests of the older readers) the oldest of 1 to 3 that can hold it.
    pub(crate) fn for_table(
        has_dictionary: bool,
        two_level_index: bool,
        legacy_index: bool,
        data_block_hash: bool,
    ) -> TableFormat {
        match (legacy_index, two_level_index, has_dictionary) {
            (false, ..) if data_block_hash => TableFormat::V5DataHash,
            (false, ..) => TableFormat::V4SmallIndex,
            (true, true, _) => TableFormat::V3Partitioned,
            (true, false, true) => TableFormat::V2Dictionary,
            (true, false, false) => TableFormat::V1,
        }
    }

    fn number(self) -> u32 {
        match self {
            TableFormat::V1 => FORMAT_VERSION,
            TableFormat::V2Dictionary => FORMAT_VERSION_DICTIONARY,
            TableFormat::V3Partitioned => FORMAT_VERSION_PARTITIONED,
            TableFormat::V4SmallIndex => FORMAT_VERSION_SMALL_INDEX,
            TableFormat::V5DataHash => FORMAT_VERSION_DATA_HASH,
        }
    }

    /// True if the footer's index handle is a top-level index of partitions, given the
    /// table's `shaledb.index.two_level` property (which only format 4 consults).
    pub(crate) fn two_level_index(self, two_level_property: bool) -> bool {
        match self {
            TableFormat::V1 | TableFormat::V2Dictionary => false,
            TableFormat::V3Partitioned => true,
            TableFormat::V4SmallIndex | TableFormat::V5DataHash => two_level_property,
        }
    }

    /// How the table's index blocks are encoded, given its `shaledb.index.user_keys`
    /// property (which only format 4 consults).
    pub(crate) fn index_form(self, user_keys_property: bool) -> IndexForm {
        match self {
            TableFormat::V4SmallIndex | TableFormat::V5DataHash => {
                IndexForm::v4(user_keys_property)
            }
            _ => IndexForm::LEGACY,
        }
    }
}

impl Footer {
    /// Encodes the 64-byte footer.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        self.metaindex.encode_to(&mut out);
        self.index.encode_to(&mut out);
        out.resize(FOOTER_HANDLES_LEN, 0);
        put_fixed64(&mut out, self.file_number);
        put_fixed32(&mut out, self.version.number());
        let crc = checksum::mask(checksum::crc32c(&out));
        put_fixed32(&mut out, crc);
        out.extend_from_slice(&TABLE_MAGIC);
        debug_assert_eq!(out.len(), FOOTER_LEN);
        out
    }

    /// Decodes and validates a footer read from `offset`.
    pub(crate) fn decode(
        buf: &[u8],
        path: &Path,
        offset: u64,
        expected_file_number: u64,
    ) -> Result<Footer> {
        let corrupt = |at: usize, d: String| Error::corruption(path, offset + at as u64, d);
        if buf.len() != FOOTER_LEN {
            return Err(corrupt(0, "short footer".into()));
        }
        if buf.get(56..64) != Some(&TABLE_MAGIC[..]) {
            return Err(corrupt(
                56,
                "bad table magic: not a ShaleDB table, or truncated".into(),
            ));
        }
        let stored = buf.get(52..).and_then(crate::coding::decode_fixed32);
        let actual = checksum::crc32c(buf.get(..52).unwrap_or(&[]));
        if stored.map(checksum::unmask) != Some(actual) {
            return Err(corrupt(52, "footer checksum mismatch".into()));
        }
        let version = buf.get(48..).and_then(crate::coding::decode_fixed32);
        let version = match version {
            Some(FORMAT_VERSION) => TableFormat::V1,
            Some(FORMAT_VERSION_DICTIONARY) => TableFormat::V2Dictionary,
            Some(FORMAT_VERSION_PARTITIONED) => TableFormat::V3Partitioned,
            Some(FORMAT_VERSION_SMALL_INDEX) => TableFormat::V4SmallIndex,
            Some(FORMAT_VERSION_DATA_HASH) => TableFormat::V5DataHash,
            _ => {
                return Err(corrupt(
                    48,
                    format!("unsupported table format version {version:?}"),
                ))
            }
        };
        let file_number = buf
            .get(40..)
            .and_then(crate::coding::decode_fixed64)
            .ok_or_else(|| corrupt(40, "short footer".into()))?;
        if file_number != expected_file_number {
            return Err(corrupt(
                40,
                format!("footer names file number {file_number}, expected {expected_file_number}"),
            ));
        }
        let handles = buf.get(..FOOTER_HANDLES_LEN).unwrap_or(&[]);
        let (metaindex, n1) = BlockHandle::decode_from(handles)
            .ok_or_else(|| corrupt(0, "bad metaindex handle".into()))?;
        let (index, n2) = BlockHandle::decode_from(handles.get(n1..).unwrap_or(&[]))
            .ok_or_else(|| corrupt(n1, "bad index handle".into()))?;
        if handles
            .get(n1 + n2..)
            .is_some_and(|p| p.iter().any(|&b| b != 0))
        {
            return Err(corrupt(n1 + n2, "footer padding is not zero".into()));
        }
        Ok(Footer {
            metaindex,
            index,
            file_number,
            version,
        })
    }
}

/// Decodes a block handle stored as a block entry's value.
pub(crate) fn decode_handle_value(v: &[u8]) -> Option<BlockHandle> {
    match BlockHandle::decode_from(v) {
        Some((h, n)) if n == v.len() => Some(h),
        _ => None,
    }
}
