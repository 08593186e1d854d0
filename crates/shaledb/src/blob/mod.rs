//! Blob files: values of at least `min_blob_size` bytes stored outside the tables (key-value
//! separation, RocksDB's integrated BlobDB), so compactions move a small reference instead of
//! rewriting the value. Format: docs/format/blob.md.
//!
//! - [`BlobRef`]: the reference a table holds (entry kind `ValueKind::BlobIndex`).
//! - [`BlobFileBuilder`]: writes one blob file (flush and compaction outputs).
//! - [`BlobFileReader`]: reads a referenced value, checking it belongs to the key.
//!
//! The types are `pub` only so that `crate::internals` can hand them to the test kit and the
//! fuzz targets; the module itself is private to the crate.

mod builder;
mod format;
mod readahead;
mod reader;
mod write_time;

#[cfg(test)]
mod tests;

pub use builder::BlobFileBuilder;
pub(crate) use builder::UnsyncedBlobFile;
pub(crate) use readahead::BlobReadahead;
pub use reader::BlobFileReader;
pub(crate) use write_time::{BlobFileEnv, WalBlobFailure, WalBlobReaders, WriteTimeBlobs};

use crate::coding::{put_varint64, varint_length, Decoder};
use crate::compression::CompressionType;

// Checked at compile time: readers are shared between threads (a cache of open files) and
// builders run on background threads.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    const fn movable<T: Send>() {}
    shareable::<BlobFileReader>();
    movable::<BlobFileBuilder>();
};

/// Where a value lives in a blob file: what a table stores for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobRef {
    /// The blob file's number.
    pub file_number: u64,
    /// File offset of the value's record (its header).
    pub offset: u64,
    /// Bytes of the value as stored (compressed if `compression` is not `None`).
    pub size: u64,
    /// The codec the value is stored with.
    pub compression: CompressionType,
}

/// What a finished blob file holds, recorded in the MANIFEST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFileMeta {
    /// The file's number.
    pub number: u64,
    /// Records in the file.
    pub blob_count: u64,
    /// Bytes of all records (headers, keys and stored values): the quantity garbage is
    /// counted in.
    pub blob_bytes: u64,
    /// The file's length.
    pub file_size: u64,
    /// CRC-32C of every byte of the file, computed as it was written (recorded in the
    /// MANIFEST for `Db::verify_file_checksums`).
    pub file_checksum: u32,
}

impl BlobRef {
    /// Most bytes an encoded reference takes (three varint64s and the codec byte).
    pub const MAX_ENCODED_LEN: usize = 31;

    /// Appends the encoded reference to `out`: varint64 file number, varint64 offset, varint64
    /// size, one codec byte (blob.md, "References").
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        put_varint64(out, self.file_number);
        put_varint64(out, self.offset);
        put_varint64(out, self.size);
        out.push(self.compression as u8);
    }

    /// Decodes a reference that spans all of `bytes`; `None` if it does not decode (the
    /// caller reports corruption with its file and offset). Varints must be in their shortest
    /// form, so a reference has exactly one encoding.
    pub fn decode(bytes: &[u8]) -> Option<BlobRef> {
        let (r, len) = Self::decode_prefix(bytes)?;
        (len == bytes.len()).then_some(r)
    }

    /// Decodes the value of a `BlobIndex` entry: a reference, followed in a family with a TTL
    /// by the value's write time (8 bytes, little-endian, as a put's value ends with it;
    /// blob.md, "References"). A reference is self-delimiting, so the two forms differ by
    /// length alone: exactly 0 or 8 bytes may follow it. `None` if neither decodes.
    pub fn decode_entry(bytes: &[u8]) -> Option<(BlobRef, Option<u64>)> {
        let (r, len) = Self::decode_prefix(bytes)?;
        match bytes.get(len..)? {
            [] => Some((r, None)),
            rest => Some((r, Some(u64::from_le_bytes(rest.try_into().ok()?)))),
        }
    }

    /// Appends the value of a `BlobIndex` entry: the reference, then the write time if the
    /// family has a TTL ([`BlobRef::decode_entry`]).
    pub fn encode_entry_to(&self, write_time: Option<u64>, out: &mut Vec<u8>) {
        self.encode_to(out);
        if let Some(t) = write_time {
            out.extend_from_slice(&t.to_le_bytes());
        }
    }

    /// Decodes the reference at the start of `bytes`; returns it and its length.
    fn decode_prefix(bytes: &[u8]) -> Option<(BlobRef, usize)> {
        let mut d = Decoder::new(bytes);
        let mut canonical_varint = || {
            let start = d.position();
            let v = d.varint64()?;
            (d.position() - start == varint_length(v)).then_some(v)
        };
        let file_number = canonical_varint()?;
        let offset = canonical_varint()?;
        let size = canonical_varint()?;
        let compression = CompressionType::from_u8(d.u8()?)?;
        let r = BlobRef {
            file_number,
            offset,
            size,
            compression,
        };
        Some((r, d.position()))
    }

    /// Bytes the referenced record occupies in its file (header, key and stored value), for
    /// garbage accounting; `user_key` is the key the reference is stored under.
    pub fn record_bytes(&self, user_key: &[u8]) -> u64 {
        (format::RECORD_HEADER_LEN as u64)
            .saturating_add(user_key.len() as u64)
            .saturating_add(self.size)
    }
}
