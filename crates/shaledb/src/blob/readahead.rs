//! Adaptive readahead for the blob reads of one iterator.
//!
//! A scan over keys whose values sit in blob files reads one record per key. Records written
//! by one flush or compaction lie in key order in their file, so a scan reads each file
//! forward, record after record, but the files interleave: after random-order writes,
//! consecutive keys' records are in different files. One window per iterator would be
//! refilled at every file switch (most of it wasted), so the state is kept per file:
//!
//! - a file's reads count as sequential when each starts at or a little after (a skipped
//!   record or two: garbage, an overwritten key) where the previous one ended;
//! - after [`READAHEAD_AFTER`] sequential reads, a read that misses the window fills it with
//!   [`INITIAL_WINDOW`] bytes from the record on, doubling on every refill up to
//!   [`MAX_WINDOW`]; a read that is not sequential frees the file's window and starts over;
//! - at most [`MAX_FILES`] files are tracked (the least recently read is forgotten), and their
//!   windows together hold at most [`BUDGET`] bytes, each at most its fair share of it.
//!
//! So a scan of scattered records never reads ahead (each read is exactly one record, as
//! without readahead), and memory stays bounded however many files a scan touches. Gets and
//! multi-gets do not use it. Only bytes are buffered: every record is still checked (length,
//! checksum, key, codec) by [`BlobFileReader`](super::BlobFileReader) as a direct read is.
//!
//! RocksDB reads blob values of an iterator without readahead (its `FilePrefetchBuffer`
//! readahead serves table blocks and compaction); the policy here follows its automatic table
//! readahead (8 KiB doubling to 256 KiB after two sequential reads), kept per blob file.
//!
//! Blob files are never opened for direct IO (`Options::use_direct_reads` covers table files),
//! so windows need no alignment.

use crate::error::Result;
use crate::fs::RandomAccessFile;
use crate::sst::read_new_at;
use std::path::Path;

/// First window of a file once its reads turn out sequential.
pub(crate) const INITIAL_WINDOW: usize = 8 << 10;
/// Largest window of one file.
pub(crate) const MAX_WINDOW: usize = 256 << 10;
/// Most bytes all windows of one iterator hold together.
pub(crate) const BUDGET: usize = 1 << 20;
/// Most files whose reads one iterator follows. A file followed costs a few words until it
/// has a window (the budget bounds those); a key-order scan after random writes reads from
/// every blob file its keys' values are in, round robin: K1-1KB's 52 MB of 1 KB values had 28,
/// and with 16 followed every file was forgotten before its next read (a `pread` per value).
pub(crate) const MAX_FILES: usize = 64;
/// Sequential reads of a file before its reads fill a window.
pub(crate) const READAHEAD_AFTER: u32 = 2;
/// A read starting at most this far past the previous one's end (or one record length, if
/// more) still counts as sequential: the records between are skipped garbage.
const SKIP_ALLOWANCE: u64 = 4 << 10;

/// One file's read pattern and window.
#[derive(Debug)]
struct Window {
    /// Bytes of the file from `buf_offset` (empty: no window).
    buf: Vec<u8>,
    buf_offset: u64,
    /// Where the previous read of the file ended (`None`: not read yet).
    last_end: Option<u64>,
    /// Sequential reads in a row.
    sequential: u32,
    /// Size of the next fill.
    next_size: usize,
    /// When the file was last read (the iterator's read count).
    last_use: u64,
}

impl Window {
    /// Where the `len` bytes at `offset` are in `buf`, if it holds them all.
    fn buffered(&self, offset: u64, len: usize) -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(offset.checked_sub(self.buf_offset)?).ok()?;
        let end = start.checked_add(len)?;
        (end <= self.buf.len()).then_some(start..end)
    }

    fn is_sequential(&self, offset: u64, len: usize) -> bool {
        self.last_end
            .and_then(|end| offset.checked_sub(end))
            .is_some_and(|skip| skip <= SKIP_ALLOWANCE.max(len as u64))
    }
}

/// The readahead state of one iterator over the blob files it reads (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct BlobReadahead {
    windows: Vec<Window>,
    /// The blob file number of `windows[i]` at `i`: a scan alternating between many files
    /// looks its file up at every read, and these fit in a few cache lines where the windows
    /// do not.
    file_numbers: Vec<u64>,
    /// Reads so far (orders `Window::last_use`).
    reads: u64,
}

/// The bytes of one [`BlobReadahead::read`]: borrowed from a window, or read alone.
#[derive(Debug)]
pub(crate) enum ReadBytes<'a> {
    /// Inside a window: the caller copies out only what it keeps (the value, not the header).
    Window(&'a [u8]),
    /// Read alone into a buffer of their own.
    Alone(Vec<u8>),
}

#[cfg(test)]
impl ReadBytes<'_> {
    /// The bytes read.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            ReadBytes::Window(b) => b,
            ReadBytes::Alone(v) => v,
        }
    }
}

impl BlobReadahead {
    /// Reads `len` bytes at `offset` of blob file `file_number` (`file`, at `path`), from its
    /// window if it holds them; `limit`: where the file's records end (a window never reaches
    /// past it). Errors are those of a direct read of exactly these bytes.
    pub(crate) fn read(
        &mut self,
        file_number: u64,
        file: &dyn RandomAccessFile,
        path: &Path,
        offset: u64,
        len: usize,
        limit: u64,
    ) -> Result<ReadBytes<'_>> {
        self.reads += 1;
        let i = self.window_index(file_number);
        let reads = self.reads;
        let end = offset.saturating_add(len as u64);
        let w = &mut self.windows[i];
        w.last_use = reads;
        if let Some(range) = w.buffered(offset, len) {
            w.last_end = Some(end);
            return Ok(ReadBytes::Window(&self.windows[i].buf[range]));
        }
        let sequential = w.is_sequential(offset, len);
        w.last_end = Some(end);
        if !sequential {
            // Random again: free the window; the pattern must be seen anew.
            w.sequential = 0;
            w.next_size = INITIAL_WINDOW;
            w.buf = Vec::new();
        } else {
            w.sequential = w.sequential.saturating_add(1);
            if w.sequential >= READAHEAD_AFTER {
                let size = w.next_size.min(self.window_cap(i));
                let span = offset.saturating_add(size as u64).min(limit);
                let span = usize::try_from(span.saturating_sub(offset)).unwrap_or(0);
                let w = &mut self.windows[i];
                if span > len && Self::fill(w, file, offset, span) {
                    w.next_size = (size * 2).min(MAX_WINDOW);
                    if let Some(range) = w.buffered(offset, len) {
                        return Ok(ReadBytes::Window(&self.windows[i].buf[range]));
                    }
                }
            }
        }
        // Alone: a record larger than any window (values of 256 KiB and more) or a scattered
        // one, read without zeroing its buffer first.
        read_new_at(file, path, offset, len, "blob record").map(ReadBytes::Alone)
    }

    /// The index of `file_number`'s window, added (forgetting the least recently read file
    /// if [`MAX_FILES`] are followed) if it has none.
    fn window_index(&mut self, file_number: u64) -> usize {
        if let Some(i) = self.file_numbers.iter().position(|&n| n == file_number) {
            return i;
        }
        if self.windows.len() >= MAX_FILES {
            if let Some(lru) = (0..self.windows.len()).min_by_key(|&i| self.windows[i].last_use) {
                self.windows.swap_remove(lru);
                self.file_numbers.swap_remove(lru);
            }
        }
        self.file_numbers.push(file_number);
        self.windows.push(Window {
            buf: Vec::new(),
            buf_offset: 0,
            last_end: None,
            sequential: 0,
            next_size: INITIAL_WINDOW,
            last_use: 0,
        });
        self.windows.len() - 1
    }

    /// The largest window file `i` may fill now: its share of the budget, and no more than the
    /// other windows leave of it.
    fn window_cap(&self, i: usize) -> usize {
        let others: usize = self
            .windows
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, w)| w.buf.capacity())
            .sum();
        let share = BUDGET / self.windows.len().max(1);
        MAX_WINDOW.min(share).min(BUDGET.saturating_sub(others))
    }

    /// Fills `w` with `span` bytes at `offset`; false (window freed) if that read fails, so
    /// that the record alone is read and its error is a direct read's.
    fn fill(w: &mut Window, file: &dyn RandomAccessFile, offset: u64, span: usize) -> bool {
        // A smaller window than the last gives memory back (the budget counts capacity).
        w.buf.clear();
        w.buf.shrink_to(span);
        // Exactly `span`: a growing Vec would double its capacity past the window's share.
        w.buf.reserve_exact(span);
        // Read into the buffer's spare capacity: no zeroing of bytes about to be overwritten.
        if file.read_exact_at_into(offset, span, &mut w.buf).is_ok() {
            w.buf_offset = offset;
            true
        } else {
            w.buf = Vec::new();
            false
        }
    }

    /// Bytes the windows hold, for tests.
    #[cfg(test)]
    pub(crate) fn buffered_bytes(&self) -> usize {
        self.windows.iter().map(|w| w.buf.len()).sum()
    }

    /// Bytes the windows have allocated, for tests.
    #[cfg(test)]
    fn allocated_bytes(&self) -> usize {
        self.windows.iter().map(|w| w.buf.capacity()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::read_at;
    use std::io;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `len` patterned bytes that count the reads and bytes read from them.
    struct PatternFile {
        len: usize,
        reads: AtomicUsize,
        bytes: AtomicUsize,
    }

    impl PatternFile {
        fn new(len: usize) -> Self {
            PatternFile {
                len,
                reads: AtomicUsize::new(0),
                bytes: AtomicUsize::new(0),
            }
        }
        fn reads(&self) -> usize {
            self.reads.load(Ordering::Relaxed)
        }
        fn bytes(&self) -> usize {
            self.bytes.load(Ordering::Relaxed)
        }
    }

    fn byte(i: usize) -> u8 {
        (i.wrapping_mul(131) ^ (i >> 9)) as u8
    }

    impl RandomAccessFile for PatternFile {
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(buf.len(), Ordering::Relaxed);
            let start = offset as usize;
            if start + buf.len() > self.len {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            for (k, b) in buf.iter_mut().enumerate() {
                *b = byte(start + k);
            }
            Ok(())
        }
        fn len(&self) -> io::Result<u64> {
            Ok(self.len as u64)
        }
    }

    fn read(ra: &mut BlobReadahead, number: u64, f: &PatternFile, off: usize, len: usize) {
        let got = ra
            .read(
                number,
                f,
                Path::new("x.blob"),
                off as u64,
                len,
                f.len as u64,
            )
            .expect("read");
        let want: Vec<u8> = (off..off + len).map(byte).collect();
        assert_eq!(got.bytes(), want, "file {number} at {off}");
    }

    #[test]
    fn windows_start_after_two_sequential_reads_and_double_to_the_maximum() {
        let f = PatternFile::new(8 << 20);
        let mut ra = BlobReadahead::default();
        read(&mut ra, 1, &f, 100, 1000);
        read(&mut ra, 1, &f, 1100, 1000);
        assert_eq!(
            (f.reads(), ra.buffered_bytes()),
            (2, 0),
            "not yet a pattern"
        );
        read(&mut ra, 1, &f, 2100, 1000);
        assert_eq!((f.reads(), ra.buffered_bytes()), (3, INITIAL_WINDOW));
        let mut off = 3100;
        while off + 1000 <= 2100 + INITIAL_WINDOW {
            read(&mut ra, 1, &f, off, 1000);
            off += 1000;
        }
        assert_eq!(f.reads(), 3, "served from the window");
        read(&mut ra, 1, &f, off, 1000);
        assert_eq!(ra.buffered_bytes(), 2 * INITIAL_WINDOW);
        for _ in 0..2000 {
            off += 1000;
            read(&mut ra, 1, &f, off, 1000);
        }
        assert_eq!(ra.buffered_bytes(), MAX_WINDOW);
        // ~2 MB in reads of at most 256 KiB.
        assert!(f.reads() < 20, "{}", f.reads());
        // A jump back frees the window and starts over.
        let reads = f.reads();
        read(&mut ra, 1, &f, 10, 1000);
        assert_eq!(ra.buffered_bytes(), 0);
        read(&mut ra, 1, &f, 1010, 1000);
        assert_eq!(f.reads(), reads + 2);
    }

    #[test]
    fn small_skips_stay_sequential_and_large_ones_do_not() {
        let f = PatternFile::new(1 << 20);
        let mut ra = BlobReadahead::default();
        // Records of 1000 bytes with one of every three skipped: still a pattern.
        read(&mut ra, 1, &f, 0, 1000);
        read(&mut ra, 1, &f, 2000, 1000);
        read(&mut ra, 1, &f, 3000, 1000);
        assert_eq!(ra.buffered_bytes(), INITIAL_WINDOW);
        // Far ahead: not sequential.
        read(&mut ra, 1, &f, 500_000, 1000);
        assert_eq!(ra.buffered_bytes(), 0);
    }

    #[test]
    fn interleaved_sequential_files_each_get_a_window() {
        let files: Vec<PatternFile> = (0..6).map(|_| PatternFile::new(1 << 20)).collect();
        let mut ra = BlobReadahead::default();
        for k in 0..400 {
            for (n, f) in files.iter().enumerate() {
                read(&mut ra, n as u64, f, k * 700, 700);
            }
        }
        for f in &files {
            assert!(f.reads() < 20, "{}", f.reads());
            // Nothing wasted beyond the last window.
            assert!(f.bytes() <= 400 * 700 + MAX_WINDOW, "{}", f.bytes());
        }
        assert!(ra.allocated_bytes() <= BUDGET);
    }

    #[test]
    fn forty_interleaved_sequential_files_each_get_a_window() {
        // A key-order scan after random writes: every value in another file, round robin.
        let files: Vec<PatternFile> = (0..40).map(|_| PatternFile::new(1 << 20)).collect();
        let mut ra = BlobReadahead::default();
        for k in 0..200 {
            for (n, f) in files.iter().enumerate() {
                read(&mut ra, n as u64, f, k * 1000, 1000);
            }
        }
        for f in &files {
            // 200 records of 1000 bytes in windows of 8 KiB, then the share of 1 MiB / 40.
            assert!(f.reads() <= 12, "{}", f.reads());
        }
        assert!(ra.allocated_bytes() <= BUDGET);
    }

    #[test]
    fn many_files_stay_within_the_budget_and_the_file_limit() {
        let many = MAX_FILES + 16;
        let files: Vec<PatternFile> = (0..many).map(|_| PatternFile::new(1 << 20)).collect();
        let mut ra = BlobReadahead::default();
        // Sequential within each of many interleaved files: more than are followed, so no file
        // stays followed long enough for a window, and every read is exactly one record.
        for k in 0..50 {
            for (n, f) in files.iter().enumerate() {
                read(&mut ra, n as u64, f, k * 500, 500);
                assert!(ra.buffered_bytes() <= BUDGET);
            }
        }
        assert!(ra.windows.len() <= MAX_FILES);
        for f in &files {
            assert_eq!((f.reads(), f.bytes()), (50, 50 * 500));
        }
        // As many files as are followed at once: every window within its share.
        let mut ra = BlobReadahead::default();
        for k in 0..200 {
            for (n, f) in files.iter().take(MAX_FILES).enumerate() {
                read(&mut ra, n as u64, f, 100_000 + k * 500, 500);
                assert!(ra.allocated_bytes() <= BUDGET);
            }
        }
        assert!(ra.windows.iter().all(|w| w.buf.len() <= BUDGET / MAX_FILES));
    }

    #[test]
    fn random_reads_never_fill_a_window() {
        let f = PatternFile::new(4 << 20);
        let mut ra = BlobReadahead::default();
        let mut x: u64 = 12345;
        for _ in 0..1000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (x >> 33) as usize % ((4 << 20) - 2000);
            read(&mut ra, 3, &f, off, 1500);
        }
        assert_eq!((f.reads(), f.bytes()), (1000, 1000 * 1500));
    }

    #[test]
    fn windows_stop_at_the_limit_and_a_failed_fill_reads_the_record_alone() {
        let path = Path::new("x.blob");
        let f = PatternFile::new(10_000);
        let mut ra = BlobReadahead::default();
        for off in [0, 100, 200] {
            ra.read(7, &f, path, off, 100, 5_000).expect("read");
        }
        assert_eq!(ra.buffered_bytes(), 4_800, "up to the limit, not past it");
        // The file is shorter than the limit claims: the fill fails, the record is read.
        let short = PatternFile::new(1_000);
        let mut ra = BlobReadahead::default();
        for off in [0, 100, 200] {
            ra.read(7, &short, path, off, 100, 5_000).expect("read");
        }
        assert_eq!(ra.buffered_bytes(), 0);
        let err = ra
            .read(7, &short, path, 950, 100, 5_000)
            .expect_err("past the end");
        let direct = read_at(&short, path, 950, &mut [0u8; 100], "blob record").expect_err("");
        assert_eq!(err.to_string(), direct.to_string());
        assert!(matches!(err, crate::Error::Corruption { .. }), "{err:?}");
    }
}
