//! The one filesystem trait all engine IO goes through.
//!
//! [`PosixFileSystem`] is the real one. [`MemFileSystem`] keeps files in memory and can simulate
//! a power loss (drop everything not yet synced, including directory entries not yet made
//! durable by a directory sync), which is what lets the tests check the durability contract.
//!
//! Contract for implementations:
//! - `WritableFile::append` may buffer in user space; `flush` hands the bytes to the OS (they
//!   survive a process crash); `sync` makes them durable (they survive a power loss).
//! - Creating, renaming or removing a file is durable only after `sync_dir` on its directory.
//! - `RandomAccessFile::read_exact_at` fails with `UnexpectedEof` when the file is too short.
//! - The `_direct` variants bypass the OS page cache (`O_DIRECT`) with the same contract;
//!   a filesystem that cannot do that returns an error of kind `Unsupported`.

mod direct;
mod hooked;
mod mem;
mod mmap;
mod mmap_write;
mod posix;

pub use direct::DIRECT_IO_ALIGNMENT;
pub use hooked::{FsCall, FsHook, HookedFileSystem};
pub use mem::MemFileSystem;
pub use mmap::MappedFile;
pub use posix::PosixFileSystem;

use std::io;
use std::path::Path;
use std::sync::Arc;

/// A file opened for appending. Dropping it without `sync` may lose the unsynced tail.
pub trait WritableFile: Send {
    /// Appends bytes (possibly buffered in user space). After a failed `append` or `flush`
    /// the bytes not yet handed to the OS are dropped, never written later (not by a later
    /// call, nor on drop): the engine gives up a WAL whose write failed (db/recovery.rs), and
    /// the failed record must stay torn.
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Hands buffered bytes to the operating system.
    fn flush(&mut self) -> io::Result<()>;
    /// Flushes and makes the file's data durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Bytes appended so far, buffered or not.
    fn len(&self) -> u64;
    /// A hint, not a promise: start writing the file's data back to the device in the
    /// background every `bytes` appended (0: never), so that a later [`sync`](Self::sync)
    /// has little left to wait for. Durability is unchanged: only `sync` makes data durable.
    /// The default ignores the hint.
    fn set_writeback_interval(&mut self, bytes: u64) {
        let _ = bytes;
    }
    /// Makes the file at least `len` bytes long, the bytes past those appended reading as
    /// zeros, without moving where appends go (`ftruncate`, never shrinking). Appends inside
    /// that space do not change the file's size, so a later [`sync`](Self::sync) has no size
    /// to make durable: the WAL preallocates this way (`Options::wal_preallocate_size`). The
    /// default does nothing (a file system without it just appends).
    fn preallocate(&mut self, len: u64) -> io::Result<()> {
        let _ = len;
        Ok(())
    }
    /// Cuts space [`preallocate`](Self::preallocate) added and appends did not fill, so the
    /// file is exactly its appended bytes again (a WAL when the next one takes over; the next
    /// [`sync`](Self::sync) makes the size durable). The default does nothing.
    fn trim_preallocated(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// True if nothing was appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read at arbitrary offsets by many threads at once.
#[allow(clippy::len_without_is_empty)] // `len` can fail, so `is_empty` would add little
pub trait RandomAccessFile: Send + Sync {
    /// Fills `buf` from `offset`; fails with `UnexpectedEof` if the file ends first.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Appends the `len` bytes at `offset` to `buf`; fails with `UnexpectedEof` if the file
    /// ends first, leaving `buf`'s length as it was. The default zeroes the new space and
    /// calls [`read_exact_at`](Self::read_exact_at); a file that can read into uninitialized
    /// memory spares large reads that pass over their buffer.
    fn read_exact_at_into(&self, offset: u64, len: usize, buf: &mut Vec<u8>) -> io::Result<()> {
        let start = buf.len();
        buf.resize(start + len, 0);
        let read = self.read_exact_at(offset, &mut buf[start..]);
        if read.is_err() {
            buf.truncate(start);
        }
        read
    }
    /// The file's size in bytes.
    fn len(&self) -> io::Result<u64>;
    /// The file's bytes mapped into memory, when it was opened with
    /// [`FileSystem::open_random_access_mapped`] and the filesystem maps files. The default
    /// is `None`: reads go through `read_exact_at`.
    fn mapping(&self) -> Option<&Arc<MappedFile>> {
        None
    }
}

/// A file read from start to end.
pub trait SequentialFile: Send {
    /// Reads up to `buf.len()` bytes; 0 means end of file.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
}

/// An exclusive lock on a database directory; released on drop.
pub trait FileLock: Send + Sync {}

/// Every filesystem operation the engine performs.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates (or truncates) a file for appending. Mode 0644, close-on-exec.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens a file for positional reads.
    fn open_random_access(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>>;
    /// Opens a file for reading from the start.
    fn open_sequential(&self, path: &Path) -> io::Result<Box<dyn SequentialFile>>;
    /// True if the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Size of a file in bytes.
    fn file_size(&self, path: &Path) -> io::Result<u64>;
    /// Names (not paths) of the entries of a directory.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, dir: &Path) -> io::Result<()>;
    /// Atomically renames `from` over `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (creating it if needed); fails with `WouldBlock` if it
    /// is held by anyone else, including another handle in this process.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>>;

    /// Like [`create`](Self::create), but the data bypasses the OS page cache (`O_DIRECT`).
    /// Used for table files when `Options::use_direct_io_for_flush_and_compaction` is set.
    /// The default refuses with `Unsupported`.
    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Err(direct_io_unsupported(self.name(), path))
    }

    /// Like [`create`](Self::create), but appends inside the space
    /// [`WritableFile::preallocate`] set ahead may be stores into a shared memory map of the
    /// file instead of `write(2)` calls, with the same contract. Used for WAL files when
    /// `Options::allow_mmap_writes` is set. The default creates an ordinary file, so a
    /// filesystem that cannot map (the in-memory and fault-injecting ones) sees every append.
    fn create_mapped(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        self.create(path)
    }

    /// Like [`open_random_access`](Self::open_random_access), but reads bypass the OS page
    /// cache (`O_DIRECT`). Used for table files when `Options::use_direct_reads` is set. The
    /// default refuses with `Unsupported`.
    fn open_random_access_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        Err(direct_io_unsupported(self.name(), path))
    }

    /// Like [`open_random_access`](Self::open_random_access), but the file may be mapped into
    /// memory ([`RandomAccessFile::mapping`]); used for table files when
    /// `Options::allow_mmap_reads` is set. The default opens the file for ordinary reads, so
    /// a filesystem that cannot map (the in-memory and fault-injecting ones) reads as usual
    /// and every read still passes through it.
    fn open_random_access_mapped(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.open_random_access(path)
    }

    /// Makes `to` a second name of the file `from` (a hard link), for checkpoints. The default
    /// refuses with `Unsupported`, and callers copy instead.
    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let _ = (from, to);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{} has no hard links", self.name()),
        ))
    }

    /// A short name for this filesystem, shown by `Options`' `Debug`.
    fn name(&self) -> &str {
        "<FileSystem>"
    }

    /// Reads a whole file (used for small files such as CURRENT).
    fn read_to_vec(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut f = self.open_sequential(path)?;
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }
}

fn direct_io_unsupported(fs: &str, path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "{fs} does not support direct IO (opening {})",
            path.display()
        ),
    )
}

/// The default filesystem: the real one.
pub fn default_fs() -> Arc<dyn FileSystem> {
    Arc::new(PosixFileSystem::new())
}

/// `path` read sequentially from the start of the 32 KiB log block holding `offset` (so a
/// `LogReader::new_at(.., offset)` can go on reading a log there) up to the file's size at
/// this call. A positional reader underneath: nothing before the block is read.
pub(crate) fn sequential_from_block_of(
    fs: &dyn FileSystem,
    path: &Path,
    offset: u64,
) -> io::Result<Box<dyn SequentialFile>> {
    let block = crate::log::BLOCK_SIZE as u64;
    let file = fs.open_random_access(path)?;
    let end = file.len()?;
    Ok(Box::new(PositionedReader {
        file,
        pos: (offset - offset % block).min(end),
        end,
    }))
}

/// A [`SequentialFile`] over a [`RandomAccessFile`] from a position.
struct PositionedReader {
    file: Arc<dyn RandomAccessFile>,
    pos: u64,
    end: u64,
}

impl SequentialFile for PositionedReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.end.saturating_sub(self.pos).min(buf.len() as u64) as usize;
            match self.file.read_exact_at(self.pos, &mut buf[..n]) {
                Ok(()) => {
                    self.pos += n as u64;
                    return Ok(n);
                }
                // The file shrank since the reader was made: a live WAL a secondary reads is
                // cut back to its records when the primary moves to the next one. It ends
                // where it ends now.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    let len = self.file.len()?;
                    if len >= self.end {
                        return Err(e);
                    }
                    self.end = len;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A live WAL a secondary reads on from a block may be cut back by the primary meanwhile:
    /// the reader ends where the file ends now, without an error.
    #[test]
    fn a_positioned_reader_ends_where_a_file_that_shrank_ends() {
        let fs = MemFileSystem::new();
        let path = Path::new("/log");
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        fs.write_file_bytes(path, &bytes);
        let mut r = sequential_from_block_of(&fs, path, 40_000).expect("open");
        let mut buf = vec![0u8; 10_000];
        assert_eq!(r.read(&mut buf).expect("read"), 10_000);
        assert_eq!(buf[..], bytes[32_768..42_768]);
        // Cut back to 50,000 bytes (preallocated space given back).
        fs.write_file_bytes(path, &bytes[..50_000]);
        let mut rest = Vec::new();
        loop {
            match r.read(&mut buf).expect("read after the cut") {
                0 => break,
                n => rest.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(rest[..], bytes[42_768..50_000]);
    }
}
