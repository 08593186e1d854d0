//! Writing one blob file: the header at `create`, one record per `add`, the footer at
//! `finish` (docs/format/blob.md).

use super::format::{FileHeader, Footer, RecordHeader, FOOTER_LEN, HEADER_LEN};
use super::{BlobFileMeta, BlobRef};
use crate::compression::{CompressionType, Compressor};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};
use crate::version::filename;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A value at least this long is handed to the file in its own `append`, straight from the
/// caller's (or the compressor's) buffer; shorter ones are copied after their header so a
/// record is one `append`.
const COPY_LIMIT: usize = 64 << 10;

/// Scratch buffers above this capacity are freed after the record that needed them.
const KEEP_LIMIT: usize = 4 << 20;

/// A blob file whose footer is written and handed to the OS, not yet synced.
pub(crate) struct UnsyncedBlobFile {
    file: Box<dyn WritableFile>,
    path: PathBuf,
}

impl UnsyncedBlobFile {
    /// Makes the file durable (not its directory entry).
    pub(crate) fn sync(&mut self) -> Result<()> {
        let path = &self.path;
        self.file
            .sync()
            .map_err(|e| Error::io(format!("syncing blob file {}", path.display()), e))
    }
}

/// Writes the records of one blob file, then its footer.
pub struct BlobFileBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    number: u64,
    compressor: Compressor,
    /// The compressor's output for the value being added.
    compressed: Vec<u8>,
    /// The record being added: header and key (and a short value).
    record: Vec<u8>,
    /// Bytes written so far: where the next record starts.
    offset: u64,
    /// CRC-32C of the bytes written so far (the whole file's once finished).
    crc: u32,
    blob_count: u64,
    blob_bytes: u64,
    /// An append failed: the file's tail is unknown, so nothing more may be written.
    failed: bool,
}

impl BlobFileBuilder {
    /// Creates blob file `number` in `dir` (for column family `cf_id`) and writes its header.
    /// `compression_level`: the codec's level (`None`: its default).
    pub fn create(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        number: u64,
        cf_id: u32,
        compression: CompressionType,
        compression_level: Option<i32>,
    ) -> Result<BlobFileBuilder> {
        let path = filename::blob_file(dir, number);
        let file = fs
            .create(&path)
            .map_err(|e| Error::io(format!("creating blob file {}", path.display()), e))?;
        let mut b = BlobFileBuilder {
            file,
            path,
            number,
            compressor: Compressor::new(compression, compression_level),
            compressed: Vec::new(),
            record: Vec::new(),
            offset: 0,
            crc: 0,
            blob_count: 0,
            blob_bytes: 0,
            failed: false,
        };
        let header = FileHeader {
            file_number: number,
            cf_id,
            compression,
        };
        b.append(&header.encode())?;
        Ok(b)
    }

    /// Asks the OS to start writing the file back every `bytes` appended (0: never), so the
    /// sync at `finish` has little left to wait for (`Options::bytes_per_sync`).
    pub fn set_writeback_interval(&mut self, bytes: u64) {
        self.file.set_writeback_interval(bytes);
    }

    /// Appends `value` stored under `user_key`; returns the reference to it. The value is
    /// compressed with the file's codec if that saves at least 12.5%, else stored raw.
    pub fn add(&mut self, user_key: &[u8], value: &[u8]) -> Result<BlobRef> {
        self.check_ok()?;
        let too_long = |what: &str, n: usize| {
            Error::InvalidArgument(format!(
                "a blob file {what} of {n} bytes does not fit the 32-bit length of its record"
            ))
        };
        let key_len = u32::try_from(user_key.len()).map_err(|_| too_long("key", user_key.len()))?;
        let value_len = u32::try_from(value.len()).map_err(|_| too_long("value", value.len()))?;
        let compression = self.compress(value);
        let stored = match compression {
            CompressionType::None => value,
            _ => &self.compressed[..],
        };
        // No larger than the value (raw) or 7/8 of it (compressed), so it fits 32 bits.
        let stored_len = stored.len() as u32;
        let header = RecordHeader {
            key_len,
            stored_len,
            value_len,
            codec: compression as u8,
        };
        let offset = self.offset;
        self.record.clear();
        header.encode(offset, user_key, stored, &mut self.record);
        self.record.extend_from_slice(user_key);
        let inline = stored.len() < COPY_LIMIT;
        if inline {
            self.record.extend_from_slice(stored);
        }
        let record = std::mem::take(&mut self.record);
        let written = self.append(&record).and_then(|()| {
            if inline {
                Ok(())
            } else {
                self.append_stored(compression, value)
            }
        });
        self.record = record;
        self.release_large_buffers();
        written?;
        self.blob_count += 1;
        self.blob_bytes += header.record_len();
        Ok(BlobRef {
            file_number: self.number,
            offset,
            size: u64::from(stored_len),
            compression,
        })
    }

    /// The file's number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Bytes written so far.
    pub fn file_size(&self) -> u64 {
        self.offset
    }

    /// Hands the bytes appended so far to the OS (out of any buffer of ours), so a reader of
    /// the file sees them and a process crash keeps them.
    pub fn hand_to_os(&mut self) -> Result<()> {
        self.check_ok()?;
        let path = &self.path;
        self.file
            .flush()
            .map_err(|e| Error::io(format!("writing blob file {}", path.display()), e))
    }

    /// Makes the bytes appended so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.hand_to_os()?;
        let path = &self.path;
        self.file
            .sync()
            .map_err(|e| Error::io(format!("syncing blob file {}", path.display()), e))
    }

    /// Writes the footer and syncs the file (not its directory). The file is complete.
    pub fn finish(self) -> Result<BlobFileMeta> {
        let (meta, mut file) = self.close()?;
        file.sync()?;
        Ok(meta)
    }

    /// Writes the footer and hands the file to the OS without syncing it: complete once
    /// [`UnsyncedBlobFile::sync`] returns (before anything durable refers to it).
    pub(crate) fn close(mut self) -> Result<(BlobFileMeta, UnsyncedBlobFile)> {
        self.check_ok()?;
        let footer = Footer {
            record_count: self.blob_count,
            record_bytes: self.blob_bytes,
        };
        self.append(&footer.encode())?;
        let path = &self.path;
        self.file
            .flush()
            .map_err(|e| Error::io(format!("writing blob file {}", path.display()), e))?;
        debug_assert_eq!(
            self.offset,
            (HEADER_LEN + FOOTER_LEN) as u64 + self.blob_bytes
        );
        let meta = BlobFileMeta {
            number: self.number,
            blob_count: self.blob_count,
            blob_bytes: self.blob_bytes,
            file_size: self.offset,
            file_checksum: self.crc,
        };
        let file = UnsyncedBlobFile {
            file: self.file,
            path: self.path,
        };
        Ok((meta, file))
    }

    /// Compresses `value` into `self.compressed` and returns the codec to store it with:
    /// the file's, if that saves at least 12.5% (as table blocks do), else `None` (raw).
    fn compress(&mut self, value: &[u8]) -> CompressionType {
        let kind = self.compressor.kind();
        if kind == CompressionType::None || value.is_empty() {
            return CompressionType::None;
        }
        if self.compressor.compress(value, &mut self.compressed)
            && self.compressed.len() <= value.len() - value.len() / 8
        {
            return kind;
        }
        CompressionType::None
    }

    /// Appends a long stored value on its own (the raw `value` or the compressed copy).
    fn append_stored(&mut self, compression: CompressionType, value: &[u8]) -> Result<()> {
        let stored = std::mem::take(&mut self.compressed);
        let r = match compression {
            CompressionType::None => self.append(value),
            _ => self.append(&stored),
        };
        self.compressed = stored;
        r
    }

    /// Frees a scratch buffer that one large value or key grew, so it is not kept for the
    /// rest of the file.
    fn release_large_buffers(&mut self) {
        for buf in [&mut self.compressed, &mut self.record] {
            if buf.capacity() > KEEP_LIMIT {
                *buf = Vec::new();
            }
        }
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        if let Err(e) = self.file.append(data) {
            self.failed = true;
            return Err(Error::io(
                format!("writing blob file {}", self.path.display()),
                e,
            ));
        }
        self.offset += data.len() as u64;
        self.crc = crate::checksum::crc32c_extend(self.crc, data);
        Ok(())
    }

    /// Refuses to write after a failed append (the file's tail is unknown).
    fn check_ok(&self) -> Result<()> {
        if self.failed {
            return Err(Error::io(
                format!("building blob file {}", self.path.display()),
                std::io::Error::other("an earlier write to this blob file failed"),
            ));
        }
        Ok(())
    }
}

impl std::fmt::Debug for BlobFileBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobFileBuilder")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .field("blob_count", &self.blob_count)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}
