//! Read-only memory maps of whole files (`Options::allow_mmap_reads`): a table's blocks are
//! then read as slices of the map, with no system call, no copy and no new memory (the pages
//! are the OS page cache's), as LevelDB reads its tables; a finished blob file's records are
//! copied out of its map.
//!
//! The price, and why this is off by default (as in RocksDB): a read of a mapped page that the
//! device cannot deliver, or past the end of a file truncated under the engine, is a `SIGBUS`
//! that ends the process instead of an `Error::Io`. The engine never truncates or rewrites a
//! table or blob file it has finished, and checks each one's size against the MANIFEST before
//! it opens it.

use super::RandomAccessFile;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::Arc;

/// A whole file mapped read-only and shared (`PROT_READ`, `MAP_SHARED`); unmapped on drop.
pub struct MappedFile {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only memory that nothing in this process writes, owned by this
// value alone (unmapped once, in `drop`); sharing `&[u8]` views of it between threads is as
// sound as sharing any immutable byte slice.
unsafe impl Send for MappedFile {}
// SAFETY: as for `Send`: every access is a read of immutable bytes.
unsafe impl Sync for MappedFile {}

impl MappedFile {
    /// Maps the first `len` bytes of `file` (its whole size; `len` must be above 0: an empty
    /// file cannot be mapped, and is refused with `InvalidInput`).
    pub(crate) fn map(file: &File, len: u64) -> io::Result<MappedFile> {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l > 0)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("cannot map {len} bytes"),
                )
            })?;
        // SAFETY: a fresh read-only shared mapping chosen by the kernel (no fixed address, so
        // no existing memory is replaced) of a descriptor `file` keeps open for the call; the
        // mapping stays valid after the descriptor is closed. The result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(MappedFile { ptr, len })
    }

    /// The mapped bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is the start of a live read-only mapping of `len` bytes, unmapped only
        // when `self` drops, so the slice cannot outlive it. The bytes are not changed by this
        // process: the engine never writes a file it maps (tables are immutable once
        // finished). A change by another process is outside the engine's contract (as for
        // every file in a database directory) and could only change the bytes read, which the
        // block checksums and decoders validate like any bytes read from disk.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `map` with this address and length and is unmapped
        // once, here; no slice of it outlives `self` (see `bytes`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("len", &self.len)
            .finish()
    }
}

/// A [`RandomAccessFile`] served from a [`MappedFile`]: `read_exact_at` copies out of the map
/// (the metadata reads at open), and [`RandomAccessFile::mapping`] hands the map to the table
/// reader, which slices data blocks out of it.
pub(crate) struct MappedRandomAccessFile {
    map: Arc<MappedFile>,
}

impl MappedRandomAccessFile {
    pub(crate) fn new(map: MappedFile) -> Self {
        MappedRandomAccessFile { map: Arc::new(map) }
    }
}

impl RandomAccessFile for MappedRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let bytes = self.map.bytes();
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| bytes.get(start..start.checked_add(buf.len())?))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "read of {} bytes at {offset} past the end of a {}-byte mapped file",
                        buf.len(),
                        bytes.len()
                    ),
                )
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.map.bytes().len() as u64)
    }

    fn mapping(&self) -> Option<&Arc<MappedFile>> {
        Some(&self.map)
    }
}

#[cfg(test)]
mod tests {
    use crate::fs::{FileSystem, MemFileSystem, PosixFileSystem};
    use std::io::ErrorKind;

    #[test]
    fn a_mapped_file_reads_as_the_file_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.sst");
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&path, &bytes).expect("write");
        let fs = PosixFileSystem::new();
        let mapped = fs.open_random_access_mapped(&path).expect("map");
        let map = mapped.mapping().expect("posix files are mapped");
        assert_eq!(map.bytes(), &bytes[..]);
        assert_eq!(mapped.len().expect("len"), 10_000);
        let mut buf = [0u8; 100];
        mapped.read_exact_at(9_900, &mut buf).expect("read the end");
        assert_eq!(&buf[..], &bytes[9_900..]);
        let past = mapped
            .read_exact_at(9_901, &mut buf)
            .expect_err("past the end");
        assert_eq!(past.kind(), ErrorKind::UnexpectedEof);
        // Plain opens are not mapped.
        assert!(fs
            .open_random_access(&path)
            .expect("open")
            .mapping()
            .is_none());
    }

    #[test]
    fn files_that_cannot_be_mapped_open_for_ordinary_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").expect("write");
        let f = PosixFileSystem::new()
            .open_random_access_mapped(&empty)
            .expect("open");
        assert!(f.mapping().is_none());
        assert_eq!(f.len().expect("len"), 0);
        // The in-memory filesystem has no maps: the default falls back to reads.
        let mem = MemFileSystem::new();
        let p = std::path::Path::new("/m");
        let mut w = mem.create(p).expect("create");
        w.append(b"abc").expect("append");
        w.sync().expect("sync");
        drop(w);
        let f = mem.open_random_access_mapped(p).expect("open");
        assert!(f.mapping().is_none());
        let mut buf = [0u8; 3];
        f.read_exact_at(0, &mut buf).expect("read");
        assert_eq!(&buf, b"abc");
    }
}
