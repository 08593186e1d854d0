//! The byte layout of a blob file (docs/format/blob.md): the 32-byte file header, the 17-byte
//! record header and the 28-byte footer, with their checksums. Everything here decodes
//! untrusted bytes: a failure is a corruption error naming the field's file offset.
//!
//! ```text
//! header   magic[8] format_version:u32 file_number:u64 cf_id:u32 codec:u8 zero[3] crc:u32
//! record   key_len:u32 stored_len:u32 value_len:u32 codec:u8 crc:u32 | key | stored value
//! footer   record_count:u64 record_bytes:u64 crc:u32 magic[8]
//! ```

use crate::checksum::{crc32c, crc32c_extend, mask, unmask};
use crate::coding::{decode_fixed32, decode_fixed64, put_fixed32, put_fixed64};
use crate::compression::CompressionType;
use crate::error::{Error, Result};
use std::path::Path;

/// First and last 8 bytes of every blob file: ASCII `shaleBLB`.
pub(super) const MAGIC: [u8; 8] = *b"shaleBLB";
/// The one format version so far.
pub(super) const FORMAT_VERSION: u32 = 1;
/// Bytes of the file header.
pub(super) const HEADER_LEN: usize = 32;
/// Bytes of a record's header (before its key).
pub(super) const RECORD_HEADER_LEN: usize = 17;
/// Bytes of the footer.
pub(super) const FOOTER_LEN: usize = 28;

/// Bytes of a record header the checksum covers directly (all but the checksum itself).
const RECORD_FIELDS_LEN: usize = 13;
/// Offsets of the header fields (for errors).
const HEADER_VERSION_AT: u64 = 8;
const HEADER_NUMBER_AT: u64 = 12;
const HEADER_CODEC_AT: u64 = 24;
const HEADER_CF_AT: u64 = 20;
const HEADER_RESERVED_AT: u64 = 25;
const HEADER_CRC_AT: usize = 28;
/// Offsets of the footer fields, from the footer's start.
pub(super) const FOOTER_BYTES_AT: u64 = 8;
const FOOTER_CRC_AT: usize = 16;
const FOOTER_MAGIC_AT: usize = 20;

/// The file header: what the whole file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileHeader {
    pub(super) file_number: u64,
    pub(super) cf_id: u32,
    /// The file's codec: every record is stored raw or with this codec.
    pub(super) compression: CompressionType,
}

impl FileHeader {
    pub(super) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = Vec::with_capacity(HEADER_LEN);
        b.extend_from_slice(&MAGIC);
        put_fixed32(&mut b, FORMAT_VERSION);
        put_fixed64(&mut b, self.file_number);
        put_fixed32(&mut b, self.cf_id);
        b.push(self.compression as u8);
        b.extend_from_slice(&[0; 3]);
        let crc = mask(crc32c(&b));
        put_fixed32(&mut b, crc);
        let mut out = [0u8; HEADER_LEN];
        out.copy_from_slice(&b);
        out
    }

    /// Decodes and checks the header of file `path`, which must be file `number`. Checks, in
    /// order: magic, checksum, format version, file number, codec, reserved bytes.
    pub(super) fn decode(b: &[u8; HEADER_LEN], path: &Path, number: u64) -> Result<FileHeader> {
        let bad = |at: u64, detail: String| Err(Error::corruption(path, at, detail));
        let (fields, crc) = b.split_at(HEADER_CRC_AT);
        if fields.get(..8) != Some(&MAGIC[..]) {
            return bad(0, "bad blob file magic in header".into());
        }
        let stored = decode_fixed32(crc).map(unmask);
        if stored != Some(crc32c(fields)) {
            return bad(
                HEADER_CRC_AT as u64,
                "blob file header checksum mismatch".into(),
            );
        }
        let field32 = |at: u64| decode_fixed32(b.get(at as usize..).unwrap_or_default());
        // The fields lie inside the 32-byte array: the defaults are never used.
        let version = field32(HEADER_VERSION_AT).unwrap_or_default();
        if version != FORMAT_VERSION {
            return bad(
                HEADER_VERSION_AT,
                format!("unsupported blob file format version {version}"),
            );
        }
        let file_number = decode_fixed64(b.get(HEADER_NUMBER_AT as usize..).unwrap_or_default())
            .unwrap_or_default();
        if file_number != number {
            return bad(
                HEADER_NUMBER_AT,
                format!("header names blob file {file_number}, expected {number}"),
            );
        }
        let codec = b.get(HEADER_CODEC_AT as usize).copied().unwrap_or(u8::MAX);
        let Some(compression) = CompressionType::from_u8(codec) else {
            return bad(HEADER_CODEC_AT, format!("unknown blob file codec {codec}"));
        };
        if b.get(HEADER_RESERVED_AT as usize..HEADER_CRC_AT) != Some(&[0u8; 3][..]) {
            return bad(
                HEADER_RESERVED_AT,
                "reserved header bytes are not zero".into(),
            );
        }
        Ok(FileHeader {
            file_number: number,
            cf_id: field32(HEADER_CF_AT).unwrap_or_default(),
            compression,
        })
    }
}

/// The footer: the file's totals, written by `BlobFileBuilder::finish`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Footer {
    pub(super) record_count: u64,
    /// Bytes of all records: exactly the bytes between header and footer.
    pub(super) record_bytes: u64,
}

impl Footer {
    pub(super) fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut b = Vec::with_capacity(FOOTER_LEN);
        put_fixed64(&mut b, self.record_count);
        put_fixed64(&mut b, self.record_bytes);
        let crc = mask(crc32c(&b));
        put_fixed32(&mut b, crc);
        b.extend_from_slice(&MAGIC);
        let mut out = [0u8; FOOTER_LEN];
        out.copy_from_slice(&b);
        out
    }

    /// Decodes and checks the footer that starts at `at` (so the file is `at + FOOTER_LEN`
    /// bytes). Checks, in order: magic, checksum, that the record bytes fill the space between
    /// header and footer exactly, and that the count fits in them.
    pub(super) fn decode(b: &[u8; FOOTER_LEN], path: &Path, at: u64) -> Result<Footer> {
        let bad = |field: u64, detail: String| Err(Error::corruption(path, at + field, detail));
        if b.get(FOOTER_MAGIC_AT..) != Some(&MAGIC[..]) {
            return bad(
                FOOTER_MAGIC_AT as u64,
                "bad blob file magic in footer".into(),
            );
        }
        let (fields, rest) = b.split_at(FOOTER_CRC_AT);
        if decode_fixed32(rest).map(unmask) != Some(crc32c(fields)) {
            return bad(
                FOOTER_CRC_AT as u64,
                "blob file footer checksum mismatch".into(),
            );
        }
        let record_count = decode_fixed64(fields).unwrap_or_default();
        let record_bytes = decode_fixed64(fields.get(8..).unwrap_or_default()).unwrap_or_default();
        let space = at.saturating_sub(HEADER_LEN as u64);
        if record_bytes != space {
            return bad(
                FOOTER_BYTES_AT,
                format!("footer counts {record_bytes} record bytes; the file holds {space}"),
            );
        }
        let most = record_bytes / RECORD_HEADER_LEN as u64;
        if record_count > most || (record_count == 0) != (record_bytes == 0) {
            return bad(
                0,
                format!("footer counts {record_count} records in {record_bytes} bytes"),
            );
        }
        Ok(Footer {
            record_count,
            record_bytes,
        })
    }
}

/// A record's header: the lengths of what follows and how the value is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RecordHeader {
    pub(super) key_len: u32,
    /// Bytes of the value as stored.
    pub(super) stored_len: u32,
    /// Bytes of the value after decompression (equal to `stored_len` when stored raw).
    pub(super) value_len: u32,
    /// The codec id byte (see [`RecordHeader::compression`]).
    pub(super) codec: u8,
}

impl RecordHeader {
    /// Appends the header of a record at file `offset` with `key` and `stored` value to `out`.
    pub(super) fn encode(&self, offset: u64, key: &[u8], stored: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        put_fixed32(out, self.key_len);
        put_fixed32(out, self.stored_len);
        put_fixed32(out, self.value_len);
        out.push(self.codec);
        let crc = record_crc(out.get(start..).unwrap_or_default(), key, stored, offset);
        put_fixed32(out, crc);
    }

    /// Decodes the first [`RECORD_HEADER_LEN`] bytes of `b`; `None` if `b` is shorter.
    pub(super) fn decode(b: &[u8]) -> Option<RecordHeader> {
        Some(RecordHeader {
            key_len: decode_fixed32(b)?,
            stored_len: decode_fixed32(b.get(4..)?)?,
            value_len: decode_fixed32(b.get(8..)?)?,
            codec: *b.get(12)?,
        })
    }

    /// The codec the value is stored with; `None` if the byte names no codec.
    pub(super) fn compression(&self) -> Option<CompressionType> {
        CompressionType::from_u8(self.codec)
    }

    /// Bytes of the whole record: header, key and stored value.
    pub(super) fn record_len(&self) -> u64 {
        RECORD_HEADER_LEN as u64 + u64::from(self.key_len) + u64::from(self.stored_len)
    }
}

/// The masked CRC32C of a record at `offset`: its header fields (`fields`, the header without
/// the checksum), key, stored value and the offset as fixed64 (not stored: a record read from
/// anywhere but where it was written fails, as blocks do).
pub(super) fn record_crc(fields: &[u8], key: &[u8], stored: &[u8], offset: u64) -> u32 {
    let c = crc32c_extend(crc32c(fields), key);
    let c = crc32c_extend(c, stored);
    mask(crc32c_extend(c, &offset.to_le_bytes()))
}

/// Checks the checksum of a record written at `offset`: `head` is its header, `body` its key
/// and stored value as read, in consecutive pieces.
pub(super) fn record_checksum_matches(head: &[u8], body: &[&[u8]], offset: u64) -> bool {
    let fields = head.get(..RECORD_FIELDS_LEN).unwrap_or_default();
    let stored = head
        .get(RECORD_FIELDS_LEN..RECORD_HEADER_LEN)
        .and_then(decode_fixed32);
    let c = body
        .iter()
        .fold(crc32c(fields), |c, piece| crc32c_extend(c, piece));
    stored == Some(mask(crc32c_extend(c, &offset.to_le_bytes())))
}

/// Most bytes `stored_len` bytes of `codec` output can decode to: the codec format's largest
/// expansion (Snappy under 22x, an LZ4 block under 256x, deflate 1032x, a Zstandard RLE block
/// 32768x), rounded up. A record claiming more is corrupt; this bounds what a reader
/// allocates by the file's size.
pub(super) fn max_value_len(codec: CompressionType, stored_len: u64) -> u64 {
    let ratio = match codec {
        CompressionType::None => 1,
        CompressionType::Snappy => 32,
        CompressionType::Lz4 => 256,
        CompressionType::Zlib => 1032,
        CompressionType::Zstd => 32768,
    };
    stored_len.saturating_mul(ratio)
}
