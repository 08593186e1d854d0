//! Reading values from one blob file (docs/format/blob.md). Every byte read is untrusted: a
//! length is checked against the records area before anything is allocated for it, and every
//! mismatch is `Error::Corruption` naming the file and the offset of the field concerned.

use super::format::{
    max_value_len, record_checksum_matches, FileHeader, Footer, RecordHeader, FOOTER_LEN,
    HEADER_LEN, RECORD_HEADER_LEN,
};
use super::readahead::{BlobReadahead, ReadBytes};
use super::BlobRef;
use crate::compression::{decompress_with, CompressionType};
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::sst::{read_at, read_new_at};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A raw value of at least this many bytes is read apart from its record's header and key
/// (`BlobFileReader::read_split`): below it, shifting the value in memory costs less than a
/// second read.
const SPLIT_READ_MIN: u64 = 64 << 10;

/// Reads and checks the header of blob file `number` (at `path`).
fn read_header(file: &dyn RandomAccessFile, path: &Path, number: u64) -> Result<FileHeader> {
    let mut h = [0u8; HEADER_LEN];
    read_at(file, path, 0, &mut h, "blob file header")?;
    FileHeader::decode(&h, path, number)
}

/// Offsets of record header fields, from the record's start (for errors).
const VALUE_LEN_AT: u64 = 8;
const CODEC_AT: u64 = 12;

/// An open blob file.
pub struct BlobFileReader {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    header: FileHeader,
    footer: Footer,
    /// Where the footer starts: every record ends at or before it.
    records_end: u64,
}

impl BlobFileReader {
    /// Opens blob file `number` (`file_size` bytes, as the MANIFEST records), checking its
    /// header and footer.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        number: u64,
        file_size: u64,
    ) -> Result<BlobFileReader> {
        let least = (HEADER_LEN + FOOTER_LEN) as u64;
        if file_size < least {
            return Err(Error::corruption(
                &path,
                0,
                format!("file of {file_size} bytes is too short to be a blob file ({least})"),
            ));
        }
        let header = read_header(&*file, &path, number)?;
        let records_end = file_size - FOOTER_LEN as u64;
        let mut f = [0u8; FOOTER_LEN];
        read_at(&*file, &path, records_end, &mut f, "blob file footer")?;
        let footer = Footer::decode(&f, &path, records_end)?;
        Ok(BlobFileReader {
            file,
            path,
            header,
            footer,
            records_end,
        })
    }

    /// Opens blob file `number` while it may still be written (`Options::
    /// separate_blobs_at_write`: the file of an unflushed memtable, or one a crash left
    /// without its footer): only the header is checked, and records are read up to
    /// `records_end` (the file's length when it is no longer written; `u64::MAX` while the
    /// writer's own references are read). The footer's counts read as zero.
    pub fn open_unfinished(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        number: u64,
        records_end: u64,
    ) -> Result<BlobFileReader> {
        let header = read_header(&*file, &path, number)?;
        Ok(BlobFileReader {
            file,
            path,
            header,
            footer: Footer {
                record_count: 0,
                record_bytes: 0,
            },
            records_end,
        })
    }

    /// The file's number.
    pub fn number(&self) -> u64 {
        self.header.file_number
    }

    /// The column family the file was written for.
    pub fn cf_id(&self) -> u32 {
        self.header.cf_id
    }

    /// The file's codec (each record is stored with it or raw).
    pub fn compression(&self) -> CompressionType {
        self.header.compression
    }

    /// Records in the file, as its footer counts them.
    pub fn blob_count(&self) -> u64 {
        self.footer.record_count
    }

    /// Bytes of all records, as its footer counts them.
    pub fn blob_bytes(&self) -> u64 {
        self.footer.record_bytes
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the value `r` points at, stored under `user_key`: one read of the record, its
    /// checksum verified if `verify_checksums`, its key compared with `user_key` always, and
    /// decompressed. Any mismatch is `Error::Corruption` naming the file and offset.
    pub fn read(&self, user_key: &[u8], r: &BlobRef, verify_checksums: bool) -> Result<Vec<u8>> {
        let len = self.record_extent(user_key.len(), r)?;
        if r.compression == CompressionType::None && r.size >= SPLIT_READ_MIN {
            return self.read_split(user_key, r, verify_checksums);
        }
        let buf = read_new_at(&*self.file, &self.path, r.offset, len, "blob record")?;
        self.check_record(user_key, r, verify_checksums, buf)
    }

    /// [`read`](Self::read) of a large raw value: the record's header and key in one read and
    /// the value straight into its own buffer in a second, so the value is not shifted past
    /// the header afterwards (a copy of the whole value; a second read costs less from
    /// `SPLIT_READ_MIN` on). Checked exactly as one read would be.
    fn read_split(&self, user_key: &[u8], r: &BlobRef, verify_checksums: bool) -> Result<Vec<u8>> {
        let head_len = RECORD_HEADER_LEN + user_key.len();
        let mut head = vec![0u8; head_len];
        read_at(&*self.file, &self.path, r.offset, &mut head, "blob record")?;
        let size =
            usize::try_from(r.size).map_err(|_| self.corrupt(r.offset, "blob record too large"))?;
        let value_at = r.offset + head_len as u64;
        // Not zeroed first: a megabyte value's memset was a tenth of its get.
        let value = read_new_at(&*self.file, &self.path, value_at, size, "blob record")?;
        let (fields, key) = head.split_at(RECORD_HEADER_LEN);
        self.check_head(user_key, r, verify_checksums, fields, &[key, &value])?;
        Ok(value)
    }

    /// [`read`](Self::read) through an iterator's readahead: the record's bytes may come from
    /// a window of this file read earlier (see `readahead.rs`); they are checked the same way.
    pub(crate) fn read_ahead(
        &self,
        user_key: &[u8],
        r: &BlobRef,
        verify_checksums: bool,
        ra: &mut BlobReadahead,
    ) -> Result<Vec<u8>> {
        let len = self.record_extent(user_key.len(), r)?;
        if r.compression == CompressionType::None && len > super::readahead::MAX_WINDOW {
            // No window ever holds it: read as a get does, the value straight into its own
            // buffer (not shifted past the header afterwards).
            return self.read_split(user_key, r, verify_checksums);
        }
        let read = ra.read(
            self.number(),
            &*self.file,
            &self.path,
            r.offset,
            len,
            self.records_end,
        )?;
        match read {
            ReadBytes::Alone(buf) => self.check_record(user_key, r, verify_checksums, buf),
            ReadBytes::Window(bytes) => {
                // Checked in the window; only the value is copied out of it.
                let (head, body) = bytes.split_at(RECORD_HEADER_LEN.min(bytes.len()));
                let header = self.check_head(user_key, r, verify_checksums, head, &[body])?;
                let stored = body.get(user_key.len()..).unwrap_or_default();
                self.decode_stored(stored, &header, r.offset)
            }
        }
    }

    /// Checks the bytes `buf` of the record `r` points at (read for `user_key`) and returns
    /// its value.
    fn check_record(
        &self,
        user_key: &[u8],
        r: &BlobRef,
        verify_checksums: bool,
        mut buf: Vec<u8>,
    ) -> Result<Vec<u8>> {
        let len = buf.len();
        let (head, body) = buf.split_at(RECORD_HEADER_LEN.min(len));
        let header = self.check_head(user_key, r, verify_checksums, head, &[body])?;
        buf.drain(..RECORD_HEADER_LEN + user_key.len());
        self.decode_value(buf, &header, r.offset)
    }

    /// Checks a record `r` points at (read for `user_key`): its header bytes `head` and its
    /// body (key, then stored value) as the consecutive pieces `body`: the checksum if
    /// `verify_checksums`, the header against the reference, and the key, always. Returns the
    /// decoded header.
    fn check_head(
        &self,
        user_key: &[u8],
        r: &BlobRef,
        verify_checksums: bool,
        head: &[u8],
        body: &[&[u8]],
    ) -> Result<RecordHeader> {
        if verify_checksums && !record_checksum_matches(head, body, r.offset) {
            return Err(self.corrupt(r.offset, "blob record checksum mismatch"));
        }
        let header = RecordHeader::decode(head)
            .ok_or_else(|| self.corrupt(r.offset, "blob record header too short"))?;
        let compression = self.check_record_header(&header, r.offset)?;
        if usize::try_from(header.key_len) != Ok(user_key.len())
            || u64::from(header.stored_len) != r.size
            || compression != r.compression
        {
            return Err(self.corrupt(
                r.offset,
                format!(
                    "blob record ({} key bytes, {} stored bytes, {}) does not match its \
                     reference ({} key bytes, {} stored bytes, {})",
                    header.key_len,
                    header.stored_len,
                    compression.name(),
                    user_key.len(),
                    r.size,
                    r.compression.name()
                ),
            ));
        }
        // Always: a reference must never return another key's value, checksums or not.
        let key = body.first().and_then(|b| b.get(..user_key.len()));
        if key != Some(user_key) {
            return Err(self.corrupt(
                r.offset + RECORD_HEADER_LEN as u64,
                "blob record holds another key than the one referring to it",
            ));
        }
        Ok(header)
    }

    /// The user key and reference of every record, in file order, checksums verified (values
    /// are not decompressed: [`BlobFileReader::read`] does that). For verification, garbage
    /// collection and repair. After an error the iterator ends.
    pub fn records(&self) -> impl Iterator<Item = Result<(Vec<u8>, BlobRef)>> + '_ {
        Records {
            reader: self,
            pos: HEADER_LEN as u64,
            seen: 0,
            done: false,
        }
    }

    /// Bytes of the record `r` points at under a key of `key_len` bytes, after checking that
    /// it lies inside the records area (so the read buffer is bounded by the file's size).
    fn record_extent(&self, key_len: usize, r: &BlobRef) -> Result<usize> {
        if r.file_number != self.number() {
            return Err(self.corrupt(
                r.offset,
                format!("reference names blob file {}", r.file_number),
            ));
        }
        let len = (RECORD_HEADER_LEN as u64)
            .checked_add(key_len as u64)
            .and_then(|n| n.checked_add(r.size));
        let end = len.and_then(|n| n.checked_add(r.offset));
        match (len, end) {
            (Some(len), Some(end)) if r.offset >= HEADER_LEN as u64 && end <= self.records_end => {
                usize::try_from(len).map_err(|_| self.corrupt(r.offset, "blob record too large"))
            }
            _ => Err(self.corrupt(
                r.offset,
                format!(
                    "blob record of {key_len} key and {} value bytes at offset {} lies outside \
                     the records area [{HEADER_LEN}, {})",
                    r.size, r.offset, self.records_end
                ),
            )),
        }
    }

    /// Checks what a record header says about its value by itself: a known codec, either
    /// none or the file's, and a decoded length the stored bytes can produce. Returns the
    /// codec.
    fn check_record_header(&self, h: &RecordHeader, offset: u64) -> Result<CompressionType> {
        let codec = match h.compression() {
            Some(c) if c == CompressionType::None || c == self.header.compression => c,
            _ => {
                return Err(self.corrupt(
                    offset + CODEC_AT,
                    format!(
                        "blob record codec {} in a {} blob file",
                        h.codec,
                        self.header.compression.name()
                    ),
                ))
            }
        };
        let stored = u64::from(h.stored_len);
        let plausible = match codec {
            CompressionType::None => u64::from(h.value_len) == stored,
            c => u64::from(h.value_len) <= max_value_len(c, stored),
        };
        if !plausible {
            return Err(self.corrupt(
                offset + VALUE_LEN_AT,
                format!(
                    "blob record of {stored} stored bytes ({}) claims {} value bytes",
                    codec.name(),
                    h.value_len
                ),
            ));
        }
        Ok(codec)
    }

    /// The value of the record at `offset` from its `stored` bytes, decompressed to exactly
    /// the header's length.
    fn decode_value(&self, stored: Vec<u8>, h: &RecordHeader, offset: u64) -> Result<Vec<u8>> {
        match h.compression().unwrap_or(CompressionType::None) {
            CompressionType::None => Ok(stored),
            _ => self.decode_stored(&stored, h, offset),
        }
    }

    /// [`decode_value`](Self::decode_value) from borrowed bytes: a raw value is copied.
    fn decode_stored(&self, stored: &[u8], h: &RecordHeader, offset: u64) -> Result<Vec<u8>> {
        let codec = h.compression().unwrap_or(CompressionType::None);
        if codec == CompressionType::None {
            return Ok(stored.to_vec());
        }
        let at = offset + (RECORD_HEADER_LEN as u64) + u64::from(h.key_len);
        let want = h.value_len as usize;
        let value = decompress_with(codec, stored, want, None)
            .map_err(|e| self.corrupt(at, format!("blob value does not decompress: {e}")))?;
        if value.len() != want {
            return Err(self.corrupt(
                at,
                format!(
                    "blob value decompresses to {} bytes, its record says {want}",
                    value.len()
                ),
            ));
        }
        Ok(value)
    }

    /// Reads, checks and returns the record at `pos` (user key, reference, record bytes).
    fn record_at(&self, pos: u64) -> Result<(Vec<u8>, BlobRef, u64)> {
        let header_end = pos + RECORD_HEADER_LEN as u64;
        if header_end > self.records_end {
            return Err(self.corrupt(pos, "blob record header crosses the footer"));
        }
        let mut head = [0u8; RECORD_HEADER_LEN];
        read_at(
            &*self.file,
            &self.path,
            pos,
            &mut head,
            "blob record header",
        )?;
        let h = RecordHeader::decode(&head)
            .ok_or_else(|| self.corrupt(pos, "blob record header too short"))?;
        let compression = self.check_record_header(&h, pos)?;
        let len = h.record_len();
        if len > self.records_end - pos {
            return Err(self.corrupt(
                pos,
                format!("blob record of {len} bytes crosses the footer"),
            ));
        }
        let body_len = usize::try_from(len - RECORD_HEADER_LEN as u64)
            .map_err(|_| self.corrupt(pos, "blob record too large"))?;
        let mut body = vec![0u8; body_len];
        read_at(
            &*self.file,
            &self.path,
            header_end,
            &mut body,
            "blob record",
        )?;
        if !record_checksum_matches(&head, &[&body], pos) {
            return Err(self.corrupt(pos, "blob record checksum mismatch"));
        }
        body.truncate(h.key_len as usize);
        let r = BlobRef {
            file_number: self.number(),
            offset: pos,
            size: u64::from(h.stored_len),
            compression,
        };
        Ok((body, r, len))
    }

    fn corrupt(&self, offset: u64, detail: impl std::fmt::Display) -> Error {
        Error::corruption(&self.path, offset, detail)
    }
}

impl std::fmt::Debug for BlobFileReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobFileReader")
            .field("path", &self.path)
            .field("header", &self.header)
            .field("footer", &self.footer)
            .finish_non_exhaustive()
    }
}

/// The records of a blob file in order ([`BlobFileReader::records`]).
struct Records<'a> {
    reader: &'a BlobFileReader,
    /// Where the next record starts.
    pos: u64,
    /// Records returned so far.
    seen: u64,
    /// An error was returned, or the records area ended.
    done: bool,
}

impl Iterator for Records<'_> {
    type Item = Result<(Vec<u8>, BlobRef)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.reader;
        let count = r.footer.record_count;
        let at_end = self.pos >= r.records_end;
        if at_end || self.seen >= count {
            self.done = true;
            // The footer's count must match the records that fill the area exactly.
            return (!at_end || self.seen != count).then(|| {
                Err(r.corrupt(
                    r.records_end,
                    format!(
                        "footer counts {count} records; the records area holds {}",
                        if at_end { "fewer" } else { "more" }
                    ),
                ))
            });
        }
        match r.record_at(self.pos) {
            Ok((key, blob_ref, len)) => {
                self.pos += len;
                self.seen += 1;
                Some(Ok((key, blob_ref)))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
