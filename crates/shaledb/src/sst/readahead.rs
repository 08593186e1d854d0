//! Readahead for sequential block reads: one larger positional read fills a buffer, and the
//! following blocks are served from it instead of one `read_exact_at` each.
//!
//! Two policies, after RocksDB's:
//! - automatic (user iterators): after two block reads that each start where the previous one
//!   ended, read ahead 8 KiB, doubling on every refill up to 256 KiB; a non-sequential read
//!   starts over;
//! - fixed (compaction inputs, which always read a whole file in order): 2 MiB from the first
//!   read.
//!
//! Only the bytes are buffered: every block is still checked (trailer, checksum,
//! decompression) by the caller exactly as a direct read. If the larger read fails (say the
//! file is shorter than its recorded size), the block is read on its own, so the error is the
//! one a direct read gives.

use super::format::read_at;
use crate::error::Result;
use crate::fs::RandomAccessFile;
use std::path::Path;

/// First readahead size of the automatic policy.
pub(crate) const AUTO_READAHEAD_INITIAL: usize = 8 << 10;
/// Largest readahead size of the automatic policy.
pub(crate) const AUTO_READAHEAD_MAX: usize = 256 << 10;
/// Sequential reads the automatic policy waits for before reading ahead.
const AUTO_READAHEAD_AFTER: u32 = 2;
/// Readahead of compaction inputs (RocksDB's `compaction_readahead_size` default).
pub(crate) const COMPACTION_READAHEAD: usize = 2 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Auto,
    Fixed(usize),
}

/// The readahead state of one reader of one file.
#[derive(Debug)]
pub(super) struct Readahead {
    policy: Policy,
    /// Bytes of the file from `buf_offset`.
    buf: Vec<u8>,
    buf_offset: u64,
    /// Where the previous read ended (automatic policy).
    last_end: Option<u64>,
    /// Reads in a row that started where the previous one ended (automatic policy).
    sequential: u32,
    /// Size of the next refill (automatic policy).
    next_size: usize,
}

impl Readahead {
    /// The automatic policy: starts reading ahead once reads turn out sequential.
    pub(super) fn auto() -> Self {
        Self::with_policy(Policy::Auto)
    }

    /// Reads `size` bytes ahead from the first read on (at least the block asked for).
    pub(super) fn fixed(size: usize) -> Self {
        Self::with_policy(Policy::Fixed(size))
    }

    fn with_policy(policy: Policy) -> Self {
        Readahead {
            policy,
            buf: Vec::new(),
            buf_offset: 0,
            last_end: None,
            sequential: 0,
            next_size: AUTO_READAHEAD_INITIAL,
        }
    }

    /// Bytes the buffer can hold after the next refill, for tests.
    #[cfg(test)]
    pub(crate) fn buffered_len(&self) -> usize {
        self.buf.len()
    }

    /// Reads `len` bytes at `offset` of `file` (`limit`: where readable data ends, never past
    /// the file's recorded size), from the buffer if it holds them. Errors are those of a
    /// direct `read_at` of exactly these bytes.
    pub(crate) fn read(
        &mut self,
        file: &dyn RandomAccessFile,
        path: &Path,
        offset: u64,
        len: usize,
        limit: u64,
        what: &str,
    ) -> Result<Vec<u8>> {
        if let Some(bytes) = self.buffered(offset, len) {
            let out = bytes.to_vec();
            self.note_read(offset, len);
            return Ok(out);
        }
        let span = self.span_for(offset, len);
        self.note_read(offset, len);
        if let Some(span) = span {
            let end = offset.saturating_add(span as u64).min(limit);
            let span = usize::try_from(end.saturating_sub(offset)).unwrap_or(0);
            if span > len && self.fill(file, offset, span) {
                if let Some(bytes) = self.buffered(offset, len) {
                    return Ok(bytes.to_vec());
                }
            }
        }
        let mut out = vec![0u8; len];
        read_at(file, path, offset, &mut out, what)?;
        Ok(out)
    }

    /// The buffered bytes [offset, offset + len), if all there.
    fn buffered(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(offset.checked_sub(self.buf_offset)?).ok()?;
        self.buf.get(start..start.checked_add(len)?)
    }

    /// How much to read at `offset` for a `len`-byte request: `None` for just the request.
    fn span_for(&mut self, offset: u64, len: usize) -> Option<usize> {
        match self.policy {
            Policy::Fixed(size) => Some(size.max(len)),
            Policy::Auto => {
                let sequential = self.last_end == Some(offset);
                if !sequential {
                    self.sequential = 0;
                    self.next_size = AUTO_READAHEAD_INITIAL;
                    return None;
                }
                self.sequential += 1;
                if self.sequential < AUTO_READAHEAD_AFTER {
                    return None;
                }
                let size = self.next_size;
                self.next_size = (size * 2).min(AUTO_READAHEAD_MAX);
                Some(size.max(len))
            }
        }
    }

    fn note_read(&mut self, offset: u64, len: usize) {
        self.last_end = offset.checked_add(len as u64);
    }

    /// Refills the buffer with `span` bytes at `offset`; false (buffer emptied) if that fails.
    fn fill(&mut self, file: &dyn RandomAccessFile, offset: u64, span: usize) -> bool {
        self.buf.resize(span, 0);
        if file.read_exact_at(offset, &mut self.buf).is_ok() {
            self.buf_offset = offset;
            true
        } else {
            self.buf.clear();
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A file of `len` patterned bytes whose readable part may be cut short (`readable`), and
    /// which counts its reads.
    struct PatternFile {
        readable: usize,
        reads: AtomicUsize,
    }

    fn byte(i: usize) -> u8 {
        (i.wrapping_mul(31) ^ (i >> 8)) as u8
    }

    impl RandomAccessFile for PatternFile {
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            let start = offset as usize;
            if start + buf.len() > self.readable {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            for (k, b) in buf.iter_mut().enumerate() {
                *b = byte(start + k);
            }
            Ok(())
        }
        fn len(&self) -> io::Result<u64> {
            Ok(self.readable as u64)
        }
    }

    fn expected(offset: usize, len: usize) -> Vec<u8> {
        (offset..offset + len).map(byte).collect()
    }

    /// Reads consecutive spans of the given lengths from 0 up to `limit` bytes.
    fn read_spans(ra: &mut Readahead, file: &PatternFile, lens: &[usize], limit: usize) {
        let mut off = 0;
        for &len in lens.iter().cycle() {
            if off + len > limit {
                break;
            }
            let got = ra
                .read(
                    file,
                    Path::new("t.sst"),
                    off as u64,
                    len,
                    limit as u64,
                    "data block",
                )
                .expect("read");
            assert_eq!(got, expected(off, len), "at {off} len {len}");
            off += len;
        }
    }

    #[test]
    fn readahead_returns_the_same_bytes_as_direct_reads() {
        let limit = 3 << 20;
        for ra in [Readahead::auto(), Readahead::fixed(COMPACTION_READAHEAD)] {
            let mut ra = ra;
            let file = PatternFile {
                readable: limit,
                reads: AtomicUsize::new(0),
            };
            // Odd sizes so that blocks straddle every buffer boundary; the last reads run up
            // to the limit.
            read_spans(&mut ra, &file, &[4101, 17, 9000, 4096, 300_001], limit);
        }
    }

    #[test]
    fn auto_readahead_starts_after_two_sequential_reads_and_doubles() {
        let file = PatternFile {
            readable: 8 << 20,
            reads: AtomicUsize::new(0),
        };
        let mut ra = Readahead::auto();
        let path = Path::new("t.sst");
        let limit = 8 << 20;
        let read = |ra: &mut Readahead, off: usize| {
            let got = ra
                .read(&file, path, off as u64, 1000, limit, "data block")
                .expect("read");
            assert_eq!(got, expected(off, 1000));
        };
        read(&mut ra, 0);
        read(&mut ra, 1000);
        assert_eq!(ra.buffered_len(), 0, "two reads are not yet a pattern");
        read(&mut ra, 2000);
        assert_eq!(ra.buffered_len(), AUTO_READAHEAD_INITIAL);
        // Served from the buffer up to 2000 + 8 KiB, then a 16 KiB refill.
        let mut off = 3000;
        while off + 1000 <= 2000 + AUTO_READAHEAD_INITIAL {
            read(&mut ra, off);
            off += 1000;
        }
        assert_eq!(file.reads.load(Ordering::Relaxed), 3);
        read(&mut ra, off);
        assert_eq!(ra.buffered_len(), 2 * AUTO_READAHEAD_INITIAL);
        // Growth stops at the maximum.
        for _ in 0..2000 {
            off += 1000;
            read(&mut ra, off);
        }
        assert_eq!(ra.buffered_len(), AUTO_READAHEAD_MAX);
        // A jump backwards starts over: no readahead until reads are sequential again.
        let reads = file.reads.load(Ordering::Relaxed);
        read(&mut ra, 10);
        read(&mut ra, 1010);
        assert_eq!(file.reads.load(Ordering::Relaxed), reads + 2);
    }

    #[test]
    fn readahead_stops_at_the_limit_and_falls_back_on_short_files() {
        let path = Path::new("t.sst");
        // The limit is respected: never asks for bytes past it.
        let file = PatternFile {
            readable: 10_000,
            reads: AtomicUsize::new(0),
        };
        let mut ra = Readahead::fixed(COMPACTION_READAHEAD);
        let got = ra
            .read(&file, path, 100, 50, 10_000, "data block")
            .expect("read");
        assert_eq!(got, expected(100, 50));
        assert_eq!(ra.buffered_len(), 9_900);
        // The file is shorter than the limit says: the big read fails, the block alone is
        // still read, and a block past the end gives the direct read's error.
        let file = PatternFile {
            readable: 5_000,
            reads: AtomicUsize::new(0),
        };
        let mut ra = Readahead::fixed(COMPACTION_READAHEAD);
        let got = ra
            .read(&file, path, 100, 50, 10_000, "data block")
            .expect("read");
        assert_eq!(got, expected(100, 50));
        let err = ra
            .read(&file, path, 4_990, 50, 10_000, "data block")
            .expect_err("past the end");
        let direct =
            read_at(&file, path, 4_990, &mut [0u8; 50], "data block").expect_err("past the end");
        assert_eq!(err.to_string(), direct.to_string());
        assert!(err.to_string().contains("t.sst"), "{err}");
        assert!(matches!(err, crate::Error::Corruption { .. }), "{err:?}");
    }

    mod through_a_table {
        use super::*;
        use crate::fs::{FileSystem, MemFileSystem};
        use crate::iter::InternalIterator;
        use crate::key::{make_internal_key, ValueKind};
        use crate::sst::{Table, TableBuilder, TableBuilderOptions, TableIterator};
        use crate::CompressionType;
        use std::sync::Arc;

        /// Table bytes in memory behind a read counter.
        struct CountingFile {
            bytes: Vec<u8>,
            reads: AtomicUsize,
        }

        impl RandomAccessFile for CountingFile {
            fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
                self.reads.fetch_add(1, Ordering::Relaxed);
                let start = offset as usize;
                let src = self
                    .bytes
                    .get(start..start + buf.len())
                    .ok_or(io::ErrorKind::UnexpectedEof)?;
                buf.copy_from_slice(src);
                Ok(())
            }
            fn len(&self) -> io::Result<u64> {
                Ok(self.bytes.len() as u64)
            }
        }

        type Entries = Vec<(Vec<u8>, Vec<u8>)>;

        /// Builds a table of `n` entries in ~1 KiB blocks; returns its bytes and entries.
        fn table_bytes(n: usize) -> (Vec<u8>, Entries) {
            let fs = MemFileSystem::new();
            let path = Path::new("/t/000007.sst");
            fs.create_dir_all(Path::new("/t")).expect("mkdir");
            let file = fs.create(path).expect("create");
            let opts = TableBuilderOptions {
                block_size: 1024,
                restart_interval: 16,
                bloom_bits_per_key: 10,
                compression: CompressionType::None,
                compression_level: None,
                compress_blob_reference_blocks: false,
                prefix_extractor: None,
                partition_index: false,
                partition_filters: false,
                metadata_block_size: 4096,
                index_restart_interval: 1,
                legacy_format: false,
                data_block_hash_ratio: None,
            };
            let mut b = TableBuilder::new(opts, file, path.to_path_buf(), 7);
            let entries: Entries = (0..n)
                .map(|i| {
                    (
                        make_internal_key(format!("key{i:06}").as_bytes(), 5, ValueKind::Put),
                        format!("value-{i}-{}", "x".repeat(i % 37)).into_bytes(),
                    )
                })
                .collect();
            for (k, v) in &entries {
                b.add(k, v).expect("add");
            }
            b.finish().expect("finish");
            (fs.read_to_vec(path).expect("read"), entries)
        }

        fn open(bytes: Vec<u8>) -> (Arc<Table>, Arc<CountingFile>) {
            let size = bytes.len() as u64;
            let file = Arc::new(CountingFile {
                bytes,
                reads: AtomicUsize::new(0),
            });
            let table = Table::open(file.clone(), "/t/000007.sst".into(), 7, size, None)
                .expect("open table");
            (Arc::new(table), file)
        }

        fn scan(it: &mut TableIterator, forward: bool) -> Entries {
            let mut out = Vec::new();
            if forward {
                it.seek_to_first();
            } else {
                it.seek_to_last();
            }
            while it.valid() {
                out.push((it.key().to_vec(), it.value().to_vec()));
                if forward {
                    it.next();
                } else {
                    it.prev();
                }
            }
            it.status().expect("scan");
            if !forward {
                out.reverse();
            }
            out
        }

        #[test]
        fn scans_read_the_same_entries_with_fewer_reads() {
            let (bytes, entries) = table_bytes(5000);
            let (table, file) = open(bytes);
            let blocks = table.properties().num_data_blocks as usize;
            assert!(blocks > 100, "{blocks} blocks");

            let before = file.reads.load(Ordering::Relaxed);
            assert_eq!(
                scan(
                    &mut table.iter(crate::sst::BlockReadOptions {
                        verify_checksums: true,
                        fill_cache: false
                    }),
                    true
                ),
                entries
            );
            let auto_reads = file.reads.load(Ordering::Relaxed) - before;
            // Two single-block reads, then 8, 16, ... 256 KiB spans.
            assert!(
                auto_reads < blocks / 4,
                "{auto_reads} reads for {blocks} blocks"
            );

            let before = file.reads.load(Ordering::Relaxed);
            let mut it = table
                .iter(crate::sst::BlockReadOptions {
                    verify_checksums: true,
                    fill_cache: false,
                })
                .with_compaction_readahead(COMPACTION_READAHEAD);
            assert_eq!(scan(&mut it, true), entries);
            // The whole data area (< 2 MiB) in one read.
            assert_eq!(file.reads.load(Ordering::Relaxed) - before, 1);

            // Backward: no sequential pattern, one read per block, same entries.
            let before = file.reads.load(Ordering::Relaxed);
            assert_eq!(
                scan(
                    &mut table.iter(crate::sst::BlockReadOptions {
                        verify_checksums: true,
                        fill_cache: false
                    }),
                    false
                ),
                entries
            );
            assert_eq!(file.reads.load(Ordering::Relaxed) - before, blocks);
        }

        #[test]
        fn corruption_inside_the_window_names_the_block() {
            let (mut bytes, _) = table_bytes(5000);
            let (clean, _) = open(bytes.clone());
            // Damage a byte in the middle of the data area, well inside any readahead window.
            let at = clean.properties().data_size as usize / 2;
            bytes[at] ^= 0x40;
            let (table, _) = open(bytes);
            let direct = table.verify_checksums().expect_err("damaged");
            let crate::Error::Corruption { offset, .. } = &direct else {
                panic!("{direct:?}")
            };
            assert!(
                *offset <= at as u64 && at as u64 - offset < 2048,
                "{direct}"
            );
            assert!(direct.to_string().contains("000007.sst"), "{direct}");
            assert!(direct.to_string().contains("checksum mismatch"), "{direct}");
            for compaction in [false, true] {
                let mut it = table.iter(crate::sst::BlockReadOptions {
                    verify_checksums: true,
                    fill_cache: false,
                });
                if compaction {
                    it = it.with_compaction_readahead(COMPACTION_READAHEAD);
                }
                it.seek_to_first();
                let mut n = 0;
                while it.valid() {
                    n += 1;
                    it.next();
                }
                assert!(n > 0);
                let err = it.status().expect_err("damaged");
                assert_eq!(err.to_string(), direct.to_string());
            }
        }
    }
}
