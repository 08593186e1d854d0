//! Appends logical records to a log file, fragmenting them across 32 KiB blocks.

use super::{record_type, BLOCK_SIZE, HEADER_SIZE};
use crate::checksum;
use crate::fs::WritableFile;

/// Writes records in the log format (docs/format/wal.md) to a [`WritableFile`].
///
/// If any call returns an error the file's tail is in an unknown state (a record may be partly
/// written); the caller must stop using this writer (the engine poisons itself). Readers treat
/// such a partial tail as damage, never as a wrong record.
pub(crate) struct LogWriter {
    file: Box<dyn WritableFile>,
    /// Offset of the next write inside the current block.
    block_offset: usize,
    /// Precomputed CRC32C of each type byte, the prefix of every fragment's checksum.
    type_crc: [u32; 5],
    /// Space set ahead of the appends, if the log preallocates.
    preallocation: Option<Preallocation>,
    /// An append or flush failed: the tail may hold part of a record, so nothing more is
    /// appended (a record after it would turn a torn tail into damage in mid-log).
    failed: bool,
}

/// A log file's size is set ahead of its appends in steps (`WritableFile::preallocate`), so
/// that a sync after each record has no new size to make durable (docs/format/wal.md: a log
/// may end in zeros).
struct Preallocation {
    /// Bytes added at a time, a multiple of the block size (so the zeros past the last
    /// record always reach a block boundary).
    step: u64,
    /// The file's size as last preallocated.
    end: u64,
}

impl LogWriter {
    /// Starts writing at the current end of `file`. A non-empty file is continued at its
    /// current position within the block layout (the length is taken from `file.len()`).
    pub(crate) fn new(file: Box<dyn WritableFile>) -> Self {
        let block_offset = (file.len() % BLOCK_SIZE as u64) as usize;
        let mut type_crc = [0u32; 5];
        for (t, c) in type_crc.iter_mut().enumerate() {
            *c = checksum::crc32c(&[t as u8]);
        }
        LogWriter {
            file,
            block_offset,
            type_crc,
            preallocation: None,
            failed: false,
        }
    }

    /// Like [`new`](Self::new), but the file's size is set `step` bytes (rounded up to whole
    /// blocks) at a time ahead of the appends; 0 preallocates nothing.
    pub(crate) fn preallocating(file: Box<dyn WritableFile>, step: u64) -> Self {
        let mut writer = Self::new(file);
        if step > 0 {
            let block = BLOCK_SIZE as u64;
            writer.preallocation = Some(Preallocation {
                step: step.div_ceil(block).saturating_mul(block),
                end: 0,
            });
        }
        writer
    }

    /// Makes room for a record of `len` bytes in the preallocated space, if any.
    fn preallocate_for(&mut self, len: usize) -> std::io::Result<()> {
        let Some(p) = &mut self.preallocation else {
            return Ok(());
        };
        // Every fragment costs a header and at most a block trailer before it.
        let fragments = len / (BLOCK_SIZE - HEADER_SIZE) + 2;
        let most = (len + fragments * (2 * HEADER_SIZE - 1)) as u64;
        let end = self.file.len().saturating_add(most);
        if end > p.end {
            let new_end = end.div_ceil(p.step).saturating_mul(p.step);
            self.file.preallocate(new_end)?;
            p.end = new_end;
        }
        Ok(())
    }

    /// Appends one logical record (possibly empty), fragmenting it as needed. The bytes may
    /// stay buffered in user space until [`flush`](Self::flush) or [`sync`](Self::sync).
    pub(crate) fn add_record(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.add(data, true)
    }

    /// Appends a record the engine writes for itself (a WAL's markers), like
    /// [`add_record`](Self::add_record) but without setting space ahead: a log holding only
    /// markers stays the markers' size (a database at rest does not claim a step of
    /// preallocated space per WAL); the first record with data preallocates.
    pub(crate) fn add_marker(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.add(data, false)
    }

    fn add(&mut self, data: &[u8], preallocate: bool) -> std::io::Result<()> {
        if self.failed {
            return Err(std::io::Error::other(
                "an earlier append to this log failed; it takes no more records",
            ));
        }
        let room = if preallocate {
            self.preallocate_for(data.len())
        } else {
            Ok(())
        };
        let appended = room.and_then(|()| self.append_record(data));
        self.failed |= appended.is_err();
        appended
    }

    /// True if an append or flush failed (see [`add_record`](Self::add_record)).
    pub(crate) fn has_failed(&self) -> bool {
        self.failed
    }

    fn append_record(&mut self, data: &[u8]) -> std::io::Result<()> {
        let mut left = data;
        let mut begin = true;
        // Loop at least once so an empty record still emits a (zero-length) Full fragment.
        loop {
            let leftover = BLOCK_SIZE - self.block_offset;
            if leftover < HEADER_SIZE {
                // Too small for a header: zero-fill the trailer and start a new block.
                if leftover > 0 {
                    const ZEROS: [u8; HEADER_SIZE] = [0; HEADER_SIZE];
                    self.file.append(&ZEROS[..leftover])?;
                }
                self.block_offset = 0;
            }
            let avail = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let frag_len = left.len().min(avail);
            let end = frag_len == left.len();
            let typ = match (begin, end) {
                (true, true) => record_type::FULL,
                (true, false) => record_type::FIRST,
                (false, false) => record_type::MIDDLE,
                (false, true) => record_type::LAST,
            };
            let (frag, rest) = left.split_at(frag_len);
            self.emit_fragment(typ, frag)?;
            left = rest;
            begin = false;
            if end {
                return Ok(());
            }
        }
    }

    fn emit_fragment(&mut self, typ: u8, payload: &[u8]) -> std::io::Result<()> {
        debug_assert!(payload.len() <= BLOCK_SIZE - HEADER_SIZE);
        debug_assert!(self.block_offset + HEADER_SIZE + payload.len() <= BLOCK_SIZE);
        // The CRC covers the type byte and the payload, so a fragment whose type byte was
        // corrupted into another valid type is still detected.
        let crc = checksum::crc32c_extend(self.type_crc[usize::from(typ)], payload);
        let mut header = [0u8; HEADER_SIZE];
        header[..4].copy_from_slice(&checksum::mask(crc).to_le_bytes());
        header[4..6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
        header[6] = typ;
        self.file.append(&header)?;
        self.file.append(payload)?;
        self.block_offset += HEADER_SIZE + payload.len();
        Ok(())
    }

    /// Hands buffered bytes to the operating system (survives a process crash).
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        let flushed = self.file.flush();
        self.failed |= flushed.is_err();
        flushed
    }

    /// Makes everything appended so far durable (survives a power loss).
    pub(crate) fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync()
    }

    /// Ends the log when a newer one takes over: hands buffered bytes to the OS and cuts the
    /// preallocated space past the last record, so the log ends at its last record; not
    /// synced (the engine syncs closed logs later: db/closed_wals.rs). Returns the log's
    /// length, which the next log records (`WalMarker::TakesOver`). Appends after this
    /// preallocate nothing.
    pub(crate) fn finish(&mut self) -> std::io::Result<u64> {
        self.flush()?;
        if self.preallocation.take().is_some() {
            self.file.trim_preallocated()?;
        }
        Ok(self.file.len())
    }

    /// Bytes appended to the file so far, including headers and block padding.
    pub(crate) fn file_len(&self) -> u64 {
        self.file.len()
    }
}
