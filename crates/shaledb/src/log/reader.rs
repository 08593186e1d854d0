//! Reads logical records back from a log file, reporting damage instead of failing on it.

use super::{record_type, BLOCK_SIZE, HEADER_SIZE};
use crate::checksum;
use crate::fs::SequentialFile;
use std::path::{Path, PathBuf};

/// Largest logical record the reader will reassemble. Larger fragment chains are reported as
/// damage, which bounds memory use on arbitrary input.
pub(super) const MAX_RECORD_SIZE: usize = 3 << 29; // 1.5 GiB

/// One result of [`LogReader::read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRead {
    /// A complete, checksum-verified logical record.
    Record {
        /// The record's bytes.
        data: Vec<u8>,
        /// File offset of the header of the record's first fragment.
        offset: u64,
    },
    /// Bytes that do not form valid records. `offset` is where the damage starts: the first
    /// fragment of a logical record that was lost, or the bad fragment itself. After this the
    /// reader has skipped ahead; consecutive damage is reported once, so the next result tells
    /// a torn tail ([`LogRead::Eof`] next) from mid-log corruption (a `Record` next).
    Damaged {
        /// File offset where the damaged region starts.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// End of the file. Repeats on further calls.
    Eof,
}

/// A fragment read from the current block, or why none could be.
enum Physical {
    Fragment {
        typ: u8,
        start: usize,
        len: usize,
        offset: u64,
    },
    Bad {
        offset: u64,
        detail: String,
    },
    Eof,
}

/// Reads records in the log format (docs/format/wal.md) from a [`SequentialFile`].
///
/// Never panics on arbitrary bytes; memory is bounded by one block plus one record of at most
/// `MAX_RECORD_SIZE`.
pub struct LogReader {
    file: Box<dyn SequentialFile>,
    path: PathBuf,
    /// The current block; `block[..block_len]` holds file bytes.
    block: Box<[u8]>,
    block_len: usize,
    /// Next unread byte in `block`.
    pos: usize,
    /// File offset of `block[0]`.
    block_file_offset: u64,
    /// The last fill returned a short block: the file ends inside (or at) this block.
    eof: bool,
    /// Fragments of the logical record being reassembled.
    scratch: Vec<u8>,
    in_fragmented: bool,
    /// Offset of the First fragment of the record in `scratch`.
    record_start: u64,
    /// Damage was reported and no Full/First fragment has been seen since: further damage and
    /// orphan Middle/Last fragments are skipped silently (they belong to the same damage).
    resyncing: bool,
    /// A record found while reporting damage, returned by the next call.
    pending: Option<LogRead>,
    /// Bytes of the first block to pass over (`new_at`: reading starts mid-block).
    skip: usize,
    /// Where the zeros that end the file begin, once read (a preallocated log's unwritten
    /// space): the log's end, and where a reader made later goes on.
    zero_tail: Option<u64>,
}

impl LogReader {
    /// Reads `file` from its start. `path` is only used for error reporting.
    pub fn new(file: Box<dyn SequentialFile>, path: PathBuf) -> Self {
        LogReader {
            file,
            path,
            block: vec![0u8; BLOCK_SIZE].into_boxed_slice(),
            block_len: 0,
            pos: 0,
            block_file_offset: 0,
            eof: false,
            scratch: Vec::new(),
            in_fragmented: false,
            record_start: 0,
            resyncing: false,
            pending: None,
            skip: 0,
            zero_tail: None,
        }
    }

    /// Reads from `offset`, which must be where a record starts (or the end of the file):
    /// [`position`](Self::position) after an earlier reader's last record, or the start of a
    /// torn tail it reported. `file` must be positioned at the start of `offset`'s block
    /// (`offset` rounded down to the block size), so fragment offsets stay file offsets.
    pub fn new_at(file: Box<dyn SequentialFile>, path: PathBuf, offset: u64) -> Self {
        let block = offset - offset % super::BLOCK_SIZE as u64;
        let mut reader = Self::new(file, path);
        reader.block_file_offset = block;
        reader.skip = (offset - block) as usize;
        reader
    }

    /// The file offset just past the last fragment read: after a record, where the next one
    /// starts (a reader made later with [`new_at`](Self::new_at) there continues the log).
    pub fn position(&self) -> u64 {
        self.zero_tail
            .unwrap_or(self.block_file_offset + self.pos as u64)
    }

    /// Where the zeros that end the file start, if the log ended that way (a preallocated
    /// log's unwritten space, or zeros where records were lost).
    pub fn zero_tail(&self) -> Option<u64> {
        self.zero_tail
    }

    /// The file being read, as given to [`new`](Self::new).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns the next record, a damage report, or end of file. IO errors are `Err`.
    pub fn read(&mut self) -> std::io::Result<LogRead> {
        if let Some(p) = self.pending.take() {
            return Ok(p);
        }
        loop {
            match self.read_physical()? {
                Physical::Eof => {
                    if self.in_fragmented {
                        self.in_fragmented = false;
                        self.scratch = Vec::new();
                        self.resyncing = true;
                        return Ok(LogRead::Damaged {
                            offset: self.record_start,
                            detail: "truncated record at end of file: last fragment missing"
                                .to_string(),
                        });
                    }
                    return Ok(LogRead::Eof);
                }
                Physical::Bad { offset, detail } => {
                    if let Some(d) = self.enter_damage(offset, detail) {
                        return Ok(d);
                    }
                }
                Physical::Fragment {
                    typ,
                    start,
                    len,
                    offset,
                } => {
                    let payload = start..start + len;
                    match typ {
                        record_type::FULL => {
                            let rec = LogRead::Record {
                                data: self.block[payload].to_vec(),
                                offset,
                            };
                            self.resyncing = false;
                            if let Some(d) = self.drop_partial("a full record") {
                                self.pending = Some(rec);
                                return Ok(d);
                            }
                            return Ok(rec);
                        }
                        record_type::FIRST => {
                            self.resyncing = false;
                            let dropped = self.drop_partial("a new first fragment");
                            self.scratch.clear();
                            self.scratch.extend_from_slice(&self.block[payload]);
                            self.in_fragmented = true;
                            self.record_start = offset;
                            if let Some(d) = dropped {
                                return Ok(d);
                            }
                        }
                        _ => {
                            // Middle or Last (read_physical rejects other types).
                            if !self.in_fragmented {
                                let detail = format!(
                                    "{} fragment without a first fragment",
                                    if typ == record_type::LAST {
                                        "last"
                                    } else {
                                        "middle"
                                    }
                                );
                                if let Some(d) = self.enter_damage(offset, detail) {
                                    return Ok(d);
                                }
                                continue;
                            }
                            if self.scratch.len() + len > MAX_RECORD_SIZE {
                                let start = self.record_start;
                                self.in_fragmented = false;
                                self.scratch = Vec::new();
                                let detail = format!(
                                    "record exceeds the maximum size of {MAX_RECORD_SIZE} bytes"
                                );
                                if let Some(d) = self.enter_damage(start, detail) {
                                    return Ok(d);
                                }
                                continue;
                            }
                            self.scratch.extend_from_slice(&self.block[payload]);
                            if typ == record_type::LAST {
                                self.in_fragmented = false;
                                return Ok(LogRead::Record {
                                    data: std::mem::take(&mut self.scratch),
                                    offset: self.record_start,
                                });
                            }
                        }
                    }
                }
            }
        }
    }

    /// Records damage at `offset`: drops any partial record (the damage then starts at its
    /// first fragment) and returns the report unless this continues already-reported damage.
    fn enter_damage(&mut self, offset: u64, detail: String) -> Option<LogRead> {
        let (offset, detail) = if self.in_fragmented {
            self.in_fragmented = false;
            self.scratch = Vec::new();
            (
                self.record_start,
                format!("{detail} (at offset {offset}; dropped the partial record starting here)"),
            )
        } else {
            (offset, detail)
        };
        if self.resyncing {
            return None;
        }
        self.resyncing = true;
        Some(LogRead::Damaged { offset, detail })
    }

    /// Drops an unfinished fragmented record interrupted by `what`; returns the damage report.
    fn drop_partial(&mut self, what: &str) -> Option<LogRead> {
        if !self.in_fragmented {
            return None;
        }
        self.in_fragmented = false;
        self.scratch = Vec::new();
        Some(LogRead::Damaged {
            offset: self.record_start,
            detail: format!("fragmented record not finished before {what}"),
        })
    }

    /// Fills the block buffer with the next block of the file.
    fn fill_block(&mut self) -> std::io::Result<()> {
        self.block_file_offset += self.block_len as u64;
        self.block_len = 0;
        self.pos = 0;
        // SequentialFile::read may return short counts; only 0 means end of file.
        while self.block_len < BLOCK_SIZE {
            let n = match self.file.read(&mut self.block[self.block_len..]) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                self.eof = true;
                break;
            }
            self.block_len += n.min(BLOCK_SIZE - self.block_len);
        }
        self.pos = std::mem::take(&mut self.skip).min(self.block_len);
        Ok(())
    }

    /// At zeros starting at file offset `at`: true if only zeros follow to the end of the
    /// file (a preallocated log's unwritten space: the end of the log, docs/format/wal.md),
    /// read to that end and remembered as the log's end. Otherwise the reader stays where it
    /// is if the current block holds more than zeros, or moves to the start of the first
    /// later block that does.
    fn zeros_to_end(&mut self, at: u64) -> std::io::Result<bool> {
        loop {
            if self.block[self.pos..self.block_len].iter().any(|&b| b != 0) {
                return Ok(false);
            }
            if self.eof {
                self.pos = self.block_len;
                self.zero_tail = Some(at);
                return Ok(true);
            }
            self.fill_block()?;
        }
    }

    /// Reads the next fragment. After damage (bad checksum, length, type, or a zeroed header)
    /// the reader scans forward one byte at a time for the next intact fragment, so damage is
    /// reported once and any intact record after it is still found.
    fn read_physical(&mut self) -> std::io::Result<Physical> {
        loop {
            let remaining = self.block_len - self.pos;
            if remaining < HEADER_SIZE {
                if !self.eof {
                    // A full block's last < 7 bytes are trailer padding: skip to the next block.
                    self.fill_block()?;
                    continue;
                }
                if remaining == 0 {
                    return Ok(Physical::Eof);
                }
                let offset = self.block_file_offset + self.pos as u64;
                if self.zeros_to_end(offset)? {
                    return Ok(Physical::Eof);
                }
                self.pos = self.block_len;
                return Ok(Physical::Bad {
                    offset,
                    detail: format!("truncated fragment header at end of file ({remaining} bytes)"),
                });
            }
            let offset = self.block_file_offset + self.pos as u64;
            let header = &self.block[self.pos..self.pos + HEADER_SIZE];
            let masked_crc = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
            let len = usize::from(u16::from_le_bytes([header[4], header[5]]));
            let typ = header[6];
            let start = self.pos + HEADER_SIZE;
            if header.iter().all(|&b| b == 0) {
                let block = self.block_file_offset;
                if self.zeros_to_end(offset)? {
                    return Ok(Physical::Eof);
                }
                if self.block_file_offset == block {
                    self.pos += 1;
                }
                // Otherwise the reader moved to the first later block holding anything but
                // zeros: a fragment may start at its first byte.
                if self.resyncing {
                    continue;
                }
                return Ok(Physical::Bad {
                    offset,
                    detail: "zeroed fragment header followed by data (unwritten space)".to_string(),
                });
            }
            let problem = if start + len > self.block_len {
                Some(if self.eof {
                    format!("truncated fragment at end of file (length {len})")
                } else {
                    format!("fragment length {len} runs past the end of its block")
                })
            } else if !(record_type::FULL..=record_type::LAST).contains(&typ) {
                Some(if typ == record_type::ZERO {
                    "fragment of reserved type 0".to_string()
                } else {
                    format!("unknown fragment type {typ}")
                })
            } else {
                let crc = checksum::crc32c_extend(
                    checksum::crc32c(&[typ]),
                    &self.block[start..start + len],
                );
                (checksum::unmask(masked_crc) != crc)
                    .then(|| "fragment checksum mismatch".to_string())
            };
            if let Some(detail) = problem {
                // Scan on from the next byte rather than skipping the block: any intact fragment
                // after the damage (even in the same block, even if the damaged header's length
                // was wrong) is then found, which tells mid-log corruption from a torn tail.
                // Only the first bad position of a damaged stretch is reported.
                self.pos += 1;
                if self.resyncing {
                    continue;
                }
                return Ok(Physical::Bad { offset, detail });
            }
            self.pos = start + len;
            return Ok(Physical::Fragment {
                typ,
                start,
                len,
                offset,
            });
        }
    }
}
