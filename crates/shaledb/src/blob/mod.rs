//! Blob files: values of at least `min_blob_size` bytes stored outside the tables (key-value
//! separation, RocksDB's integrated BlobDB), so compactions move a small reference instead of
//! rewriting the value. Format: docs/format/blob.md.
//!
//! - [`BlobRef`]: the reference a table holds (entry kind `ValueKind::BlobIndex`).
//! - [`BlobFileBuilder`]: writes one blob file (flush and compaction outputs).
//! - [`BlobFileReader`]: reads a referenced value, checking it belongs to the key.

mod builder;
mod reader;

pub(crate) use builder::BlobFileBuilder;
pub(crate) use reader::BlobFileReader;

use crate::compression::CompressionType;

/// Where a value lives in a blob file: what a table stores for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlobRef {
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
pub(crate) struct BlobFileMeta {
    /// The file's number.
    pub number: u64,
    /// Records in the file.
    pub blob_count: u64,
    /// Bytes of all records (headers, keys and stored values): the quantity garbage is
    /// counted in.
    pub blob_bytes: u64,
    /// The file's length.
    pub file_size: u64,
}

impl BlobRef {
    /// Appends the encoded reference to `out`.
    pub(crate) fn encode_to(&self, out: &mut Vec<u8>) {
        let _ = out;
        unimplemented!("blob reference encoding")
    }

    /// Decodes a reference that spans all of `bytes`; `None` if it does not decode (the
    /// caller reports corruption with its file and offset).
    pub(crate) fn decode(bytes: &[u8]) -> Option<BlobRef> {
        let _ = bytes;
        unimplemented!("blob reference decoding")
    }

    /// Bytes the referenced record occupies in its file (header, key and stored value), for
    /// garbage accounting; `user_key` is the key the reference is stored under.
    pub(crate) fn record_bytes(&self, user_key: &[u8]) -> u64 {
        let _ = user_key;
        unimplemented!("blob record size")
    }
}
