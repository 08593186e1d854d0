//! Direct IO (`O_DIRECT`): reads and writes that bypass the operating system's page cache, so
//! the block cache is the only cache and data larger than memory is read from the device.
//!
//! The kernel accepts a direct transfer only if its file offset, its length and its buffer's
//! address are multiples of the device's logical block size; [`DIRECT_IO_ALIGNMENT`] (4 KiB)
//! is a multiple of every common one. The engine reads and appends at arbitrary offsets and
//! lengths, so two adapters turn its requests into aligned transfers on an [`AlignedFile`]:
//! - [`DirectReader`] reads the span around the requested bytes, aligned to the file's
//!   [`read_unit`](AlignedFile::read_unit) (the device's logical block size where the system
//!   tells it, often 512 bytes: a 4 KiB block read from a random offset then moves about
//!   4.5 KiB instead of 8 KiB), into a 4 KiB-aligned buffer and copies the requested bytes out;
//! - [`DirectWriter`] gathers appends in an aligned buffer and writes it in whole aligned
//!   chunks. `flush` and `sync` write the partial last block padded with zeros and cut the file
//!   back to its true length; the next write rewrites that block.
//!
//! [`crate::fs::MemFileSystem`] implements [`AlignedFile`] with the kernel's rules enforced
//! ([`check_alignment`]), so a test run in direct mode fails on a misaligned transfer.

use super::{RandomAccessFile, WritableFile};
use std::cell::RefCell;
use std::io;

/// Alignment of offsets, lengths and buffer addresses of every direct transfer.
pub const DIRECT_IO_ALIGNMENT: usize = 4096;

/// Size of a [`DirectWriter`]'s buffer: appends reach the file in writes of this size.
const WRITE_CHUNK: usize = 1 << 20;

/// A reader's aligned buffer is kept for the next read on the same thread up to this size
/// (compaction readahead reads 2 MiB at a time); larger ones are freed after the read.
const KEPT_READ_BUFFER: usize = 8 << 20;

/// A file opened for direct IO: every transfer must be aligned (see [`check_alignment`]).
pub(crate) trait AlignedFile: Send + Sync {
    /// Reads into `buf` from `offset`; returns the bytes read, fewer than asked (possibly 0)
    /// only at the end of the file.
    fn read_aligned(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_aligned(&self, offset: u64, buf: &[u8]) -> io::Result<()>;
    /// Sets the file's length (cuts off the padding of the last block).
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the file's data and length durable.
    fn sync_data(&self) -> io::Result<()>;
    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// What read offsets and lengths must be multiples of: a power of two dividing
    /// [`DIRECT_IO_ALIGNMENT`] (buffers are always aligned to that). Writes keep to
    /// [`DIRECT_IO_ALIGNMENT`].
    fn read_unit(&self) -> usize {
        DIRECT_IO_ALIGNMENT
    }
}

/// The smallest read unit used: the smallest logical block size of a block device.
const MIN_READ_UNIT: usize = 512;

/// `unit` if it is a read unit [`DirectReader`] can use, else [`DIRECT_IO_ALIGNMENT`].
pub(crate) fn usable_read_unit(unit: usize) -> usize {
    if unit.is_power_of_two() && (MIN_READ_UNIT..=DIRECT_IO_ALIGNMENT).contains(&unit) {
        unit
    } else {
        DIRECT_IO_ALIGNMENT
    }
}

/// The kernel's rule for a direct transfer of `len` bytes at `offset` from or to memory at
/// `addr` on a device of `unit`-byte logical blocks: all three multiples of `unit`; else
/// `EINVAL`, as `pread` gives.
pub(crate) fn check_alignment(offset: u64, len: usize, addr: usize, unit: usize) -> io::Result<()> {
    if offset.is_multiple_of(unit as u64) && len.is_multiple_of(unit) && addr.is_multiple_of(unit) {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "misaligned direct IO: {len} bytes at offset {offset}, buffer address {addr:#x} \
             (all must be multiples of {unit})"
        ),
    ))
}

/// A zeroed buffer whose first byte sits at an address that is a multiple of
/// [`DIRECT_IO_ALIGNMENT`]: a `Vec` over-allocated by one alignment unit, used from the first
/// aligned byte on (the heap block never moves, so neither does the alignment).
pub(crate) struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// A buffer of at least `len` bytes, rounded up to a multiple of the alignment.
    pub(crate) fn new(len: usize) -> io::Result<AlignedBuf> {
        let a = DIRECT_IO_ALIGNMENT;
        let len = len.div_ceil(a) * a;
        let storage = vec![0u8; len + a];
        let start = storage.as_ptr().align_offset(a);
        if start >= a {
            return Err(io::Error::other("cannot align a direct IO buffer"));
        }
        Ok(AlignedBuf {
            storage,
            start,
            len,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

thread_local! {
    /// Each thread's aligned buffer for direct reads, reused from read to read.
    static READ_BUFFER: RefCell<Option<AlignedBuf>> = const { RefCell::new(None) };
}

/// Positional reads at any offset and length over an [`AlignedFile`].
pub(crate) struct DirectReader<F> {
    file: F,
    /// The file's read unit (checked once).
    unit: usize,
}

impl<F: AlignedFile> DirectReader<F> {
    pub(crate) fn new(file: F) -> Self {
        let unit = usable_read_unit(file.read_unit());
        DirectReader { file, unit }
    }

    /// Fills `span` (aligned, starting at the aligned `start`) until it is full or the file
    /// ends; returns the bytes read.
    fn read_span(&self, start: u64, span: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        while filled < span.len() {
            match self
                .file
                .read_aligned(start + filled as u64, &mut span[filled..])
            {
                Ok(0) => break,
                // A transfer ending off the read unit can only be the file's end.
                Ok(n) if n % self.unit != 0 => return Ok(filled + n),
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }
}

impl<F: AlignedFile> RandomAccessFile for DirectReader<F> {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let len = buf.len();
        let past_end = || {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("read of {len} bytes at offset {offset} past end of file"),
            )
        };
        let start = offset - offset % self.unit as u64;
        let skip = (offset - start) as usize;
        let need = skip + len;
        let span_len = need.div_ceil(self.unit) * self.unit;
        offset.checked_add(span_len as u64).ok_or_else(past_end)?;
        READ_BUFFER.with(|cell| {
            let mut kept = cell.borrow_mut();
            let mut aligned = match kept.take() {
                Some(b) if b.len() >= span_len => b,
                _ => AlignedBuf::new(span_len)?,
            };
            let res = self.read_span(start, &mut aligned.as_mut_slice()[..span_len]);
            let got = match res {
                Ok(got) if got >= need => {
                    buf.copy_from_slice(&aligned.as_slice()[skip..need]);
                    Ok(())
                }
                Ok(_) => Err(past_end()),
                Err(e) => Err(e),
            };
            if aligned.len() <= KEPT_READ_BUFFER {
                *kept = Some(aligned);
            }
            got
        })
    }

    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
}

/// Appends over an [`AlignedFile`], written in aligned chunks.
pub(crate) struct DirectWriter<F: AlignedFile> {
    file: F,
    buf: AlignedBuf,
    /// Bytes of `buf` holding appended data.
    filled: usize,
    /// File offset of `buf`'s first byte (aligned).
    buf_offset: u64,
    /// Bytes appended in all.
    len: u64,
    /// Set by a failed write: what reached the file is unknown, so nothing more is written.
    failed: bool,
}

impl<F: AlignedFile> DirectWriter<F> {
    pub(crate) fn new(file: F) -> io::Result<Self> {
        Ok(DirectWriter {
            file,
            buf: AlignedBuf::new(WRITE_CHUNK)?,
            filled: 0,
            buf_offset: 0,
            len: 0,
            failed: false,
        })
    }

    fn check(&self) -> io::Result<()> {
        match self.failed {
            true => Err(io::Error::other(
                "an earlier direct write to this file failed",
            )),
            false => Ok(()),
        }
    }

    /// Writes `buf[..n]` (aligned) at `buf_offset`, marking the writer failed on error.
    fn write_buffered(&mut self, n: usize) -> io::Result<()> {
        let res = self
            .file
            .write_aligned(self.buf_offset, &self.buf.as_slice()[..n]);
        self.failed |= res.is_err();
        res
    }

    /// Writes every buffered byte: whole blocks, then the last partial block padded with
    /// zeros (kept in the buffer, to be rewritten when it fills), then cuts the padding off.
    fn write_out(&mut self) -> io::Result<()> {
        self.check()?;
        let whole = self.filled - self.filled % DIRECT_IO_ALIGNMENT;
        if whole > 0 {
            self.write_buffered(whole)?;
            self.buf.as_mut_slice().copy_within(whole..self.filled, 0);
            self.buf_offset += whole as u64;
            self.filled -= whole;
        }
        if self.filled > 0 {
            self.buf.as_mut_slice()[self.filled..DIRECT_IO_ALIGNMENT].fill(0);
            self.write_buffered(DIRECT_IO_ALIGNMENT)?;
            let res = self.file.set_len(self.len);
            self.failed |= res.is_err();
            res?;
        }
        Ok(())
    }
}

impl<F: AlignedFile> WritableFile for DirectWriter<F> {
    fn append(&mut self, mut data: &[u8]) -> io::Result<()> {
        self.check()?;
        while !data.is_empty() {
            let n = (self.buf.len() - self.filled).min(data.len());
            self.buf.as_mut_slice()[self.filled..self.filled + n].copy_from_slice(&data[..n]);
            self.filled += n;
            self.len += n as u64;
            data = &data[n..];
            if self.filled == self.buf.len() {
                self.write_buffered(self.filled)?;
                self.buf_offset += self.filled as u64;
                self.filled = 0;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_out()
    }

    fn sync(&mut self) -> io::Result<()> {
        self.write_out()?;
        self.file.sync_data()
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl<F: AlignedFile> Drop for DirectWriter<F> {
    fn drop(&mut self) {
        // Best effort, like a buffered file's close: callers needing certainty call `sync`.
        let _ = self.write_out();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    /// An aligned file in memory that enforces the kernel's rules and counts transfers: reads
    /// in units of `unit` (0: [`DIRECT_IO_ALIGNMENT`]), writes of whole 4 KiB blocks.
    #[derive(Default)]
    struct Strict {
        data: Mutex<Vec<u8>>,
        writes: Mutex<Vec<(u64, usize)>>,
        reads: Mutex<Vec<(u64, usize)>>,
        unit: std::sync::atomic::AtomicUsize,
    }

    impl AlignedFile for &Strict {
        fn read_aligned(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
            check_alignment(offset, buf.len(), buf.as_ptr() as usize, self.read_unit())?;
            self.reads.lock().push((offset, buf.len()));
            let data = self.data.lock();
            let start = (offset as usize).min(data.len());
            let n = buf.len().min(data.len() - start);
            buf[..n].copy_from_slice(&data[start..start + n]);
            Ok(n)
        }
        fn write_aligned(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
            let a = DIRECT_IO_ALIGNMENT;
            check_alignment(offset, buf.len(), buf.as_ptr() as usize, a)?;
            self.writes.lock().push((offset, buf.len()));
            let mut data = self.data.lock();
            let end = offset as usize + buf.len();
            if data.len() < end {
                data.resize(end, 0);
            }
            data[offset as usize..end].copy_from_slice(buf);
            Ok(())
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.data.lock().resize(len as usize, 0);
            Ok(())
        }
        fn sync_data(&self) -> io::Result<()> {
            Ok(())
        }
        fn len(&self) -> io::Result<u64> {
            Ok(self.data.lock().len() as u64)
        }
        fn read_unit(&self) -> usize {
            match self.unit.load(std::sync::atomic::Ordering::Relaxed) {
                0 => DIRECT_IO_ALIGNMENT,
                unit => unit,
            }
        }
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn misaligned_transfers_are_refused() {
        let buf = AlignedBuf::new(8192).expect("buffer");
        let addr = buf.as_slice().as_ptr() as usize;
        assert!(check_alignment(4096, 8192, addr, 4096).is_ok());
        for (offset, len, addr) in [(1, 4096, addr), (0, 4095, addr), (0, 4096, addr + 512)] {
            let e = check_alignment(offset, len, addr, 4096).expect_err("misaligned");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
        assert!(check_alignment(512, 1024, addr + 512, 512).is_ok());
        assert!(check_alignment(256, 512, addr, 512).is_err());
    }

    #[test]
    fn writes_in_aligned_chunks_and_reads_back_any_range() {
        let file = Strict::default();
        let data = pattern(WRITE_CHUNK * 2 + 10_000);
        let mut w = DirectWriter::new(&file).expect("writer");
        // Odd-sized appends, a flush in the middle (writes and rewrites a padded tail block).
        w.append(&data[..5]).expect("append");
        w.flush().expect("flush");
        assert_eq!(*file.data.lock(), data[..5]);
        for piece in data[5..].chunks(3001) {
            w.append(piece).expect("append");
        }
        w.sync().expect("sync");
        assert_eq!(w.len(), data.len() as u64);
        assert_eq!(*file.data.lock(), data);
        let writes = file.writes.lock().clone();
        assert_eq!(writes[0], (0, 4096), "the padded first tail");
        assert_eq!(
            writes[1],
            (0, WRITE_CHUNK),
            "the rewritten block, then whole chunks"
        );
        drop(w);

        for unit in [4096, 512] {
            file.unit.store(unit, std::sync::atomic::Ordering::Relaxed);
            reads_back_any_range(&file, &data);
        }
    }

    fn reads_back_any_range(file: &Strict, data: &[u8]) {
        let r = DirectReader::new(file);
        assert_eq!(r.len().expect("len"), data.len() as u64);
        for (offset, len) in [
            (0, 1),
            (1, 4096),
            (4095, 2),
            (4096, 4096),
            (12_345, 700_000),
        ] {
            let mut buf = vec![0u8; len];
            r.read_exact_at(offset, &mut buf).expect("read");
            assert_eq!(
                buf,
                data[offset as usize..offset as usize + len],
                "at {offset}"
            );
        }
        // The last byte, then one past it.
        let end = data.len() as u64;
        let mut one = [0u8; 1];
        r.read_exact_at(end - 1, &mut one).expect("last byte");
        assert_eq!(one[0], data[data.len() - 1]);
        let e = r
            .read_exact_at(end - 1, &mut [0u8; 2])
            .expect_err("past end");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let e = r.read_exact_at(u64::MAX - 10, &mut [0u8; 20]);
        assert_eq!(
            e.expect_err("overflow").kind(),
            io::ErrorKind::UnexpectedEof
        );
    }

    /// A 4 KiB block at an offset off every boundary: two 4 KiB pages, or nine sectors.
    #[test]
    fn reads_move_whole_read_units_around_the_bytes_asked() {
        let file = Strict::default();
        *file.data.lock() = pattern(64 << 10);
        for (unit, transfer) in [(0, (0, 8192)), (4096, (0, 8192)), (512, (512, 4608))] {
            file.unit.store(unit, std::sync::atomic::Ordering::Relaxed);
            file.reads.lock().clear();
            let mut buf = vec![0u8; 4096];
            DirectReader::new(&file)
                .read_exact_at(1000, &mut buf)
                .expect("read");
            assert_eq!(buf, pattern(64 << 10)[1000..5096]);
            assert_eq!(*file.reads.lock(), [transfer], "unit {unit}");
        }
        // Units the reader cannot use fall back to 4 KiB.
        for unit in [256, 768, 8192] {
            assert_eq!(usable_read_unit(unit), DIRECT_IO_ALIGNMENT);
        }
    }

    #[test]
    fn a_failed_write_fails_every_later_call() {
        struct Failing;
        impl AlignedFile for Failing {
            fn read_aligned(&self, _: u64, _: &mut [u8]) -> io::Result<usize> {
                Ok(0)
            }
            fn write_aligned(&self, _: u64, _: &[u8]) -> io::Result<()> {
                Err(io::Error::other("device gone"))
            }
            fn set_len(&self, _: u64) -> io::Result<()> {
                Ok(())
            }
            fn sync_data(&self) -> io::Result<()> {
                Ok(())
            }
            fn len(&self) -> io::Result<u64> {
                Ok(0)
            }
        }
        let mut w = DirectWriter::new(Failing).expect("writer");
        w.append(b"abc").expect("buffered");
        assert!(w.sync().is_err());
        assert!(w.append(b"d").is_err());
        assert!(w.flush().is_err());
    }
}
