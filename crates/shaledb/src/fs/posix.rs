//! The real filesystem, on top of `std::fs` (locks via `File::try_lock`, which is flock on Linux).

use super::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// Size of the user-space write buffer of a [`WritableFile`]. Appends smaller than this are
/// coalesced so that many small WAL records cost one `write(2)`.
const WRITE_BUFFER_SIZE: usize = 64 * 1024;

/// Writeback hints cover whole pages of this size (the common page size; on a system with
/// larger pages a hint may still include a page's head, which is only slower).
const WRITEBACK_PAGE: u64 = 4096;

/// Permission bits of every file the engine creates (before the umask).
const FILE_MODE: u32 = 0o644;

/// Canonical paths locked by this process. `flock` locks belong to the open file description,
/// so two opens in one process already conflict on Linux, but not on every platform or
/// filesystem (e.g. some NFS setups emulate `flock` with `fcntl` locks, which are per process);
/// this table makes "already open in this process" fail reliably everywhere.
static LOCKED_PATHS: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

fn locked_paths() -> MutexGuard<'static, BTreeSet<PathBuf>> {
    // A panic while holding this lock cannot leave the set inconsistent (each operation is a
    // single insert or remove), so a poisoned lock is safe to keep using.
    LOCKED_PATHS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The operating system's filesystem.
#[derive(Debug, Clone, Copy)]
pub struct PosixFileSystem {}

impl PosixFileSystem {
    /// A handle to the real filesystem.
    pub fn new() -> Self {
        PosixFileSystem {}
    }
}

impl Default for PosixFileSystem {
    fn default() -> Self {
        Self::new()
    }
}

/// A file being appended to, with a user-space buffer in front of `write(2)`.
struct PosixWritableFile {
    file: File,
    /// Appended bytes not yet handed to the OS.
    buf: Vec<u8>,
    /// All bytes appended, buffered or written.
    len: u64,
    /// Writeback hints for the bytes handed to the OS.
    writeback: Writeback,
    /// The file's size as `preallocate` last set it (0: never called).
    preallocated: u64,
}

impl PosixWritableFile {
    fn flush_buffer(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            // `File` writes go straight to the fd; `write_all` retries short writes and EINTR.
            let res = self.file.write_all(&self.buf);
            // After a failed write we cannot tell how much reached the file, so retrying the
            // same bytes could duplicate them; drop them and let the caller treat the file as
            // failed (the engine poisons itself on WAL/MANIFEST write errors).
            self.buf.clear();
            res?;
        }
        self.maybe_start_writeback();
        Ok(())
    }

    fn maybe_start_writeback(&mut self) {
        let written = self.len - self.buf.len() as u64;
        self.writeback.after(&self.file, written);
    }
}

/// Writeback hints (RocksDB's `bytes_per_sync`): the kernel is asked to start writing back
/// what was written since the last hint, once that is at least `interval` bytes. The WAL's
/// `fdatasync` at rotation then waits for the last stretch only, not the whole file.
#[derive(Default)]
pub(super) struct Writeback {
    /// Writeback was started for the bytes before this offset.
    pub(super) start: u64,
    /// Start writeback every this many bytes written; 0: never.
    pub(super) interval: u64,
}

impl Writeback {
    /// Called with the offset the file's written bytes reach.
    pub(super) fn after(&mut self, file: &File, written: u64) {
        // Whole pages only: the page still being appended to, sent now, would be dirtied again
        // by the next append and written twice (RocksDB leaves it out too).
        let end = written - written % WRITEBACK_PAGE;
        if self.interval == 0 || end.saturating_sub(self.start) < self.interval {
            return;
        }
        if start_writeback(file, self.start, end - self.start) {
            self.start = end;
        } else {
            // Not supported here (or failed): it was only a hint, so stop asking.
            self.interval = 0;
        }
    }
}

/// Creates (or truncates) `path` for appending.
fn create_writable(path: &Path) -> io::Result<PosixWritableFile> {
    let file = create_truncated(path, false)?;
    Ok(PosixWritableFile {
        file,
        buf: Vec::with_capacity(WRITE_BUFFER_SIZE),
        len: 0,
        writeback: Writeback::default(),
        preallocated: 0,
    })
}

/// Creates (or truncates) `path` open for writing, and for reading too if `readable`.
fn create_truncated(path: &Path, readable: bool) -> io::Result<File> {
    // std sets O_CLOEXEC on every open, so fds never leak into child processes.
    OpenOptions::new()
        .read(readable)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(|e| with_path(e, "creating", path))
}

/// `sync_file_range(SYNC_FILE_RANGE_WRITE)`: starts writeback of the range without waiting
/// and without any durability promise. Returns false if the call failed.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: u64) -> bool {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return false;
    };
    // SAFETY: a plain system call on a file descriptor `file` owns and keeps open for the
    // call's duration; no memory is passed to the kernel.
    let rc = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
    rc == 0
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _offset: u64, _len: u64) -> bool {
    false
}

impl WritableFile for PosixWritableFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        if self.buf.len() + data.len() > WRITE_BUFFER_SIZE {
            self.flush_buffer()?;
        }
        if data.len() >= WRITE_BUFFER_SIZE {
            // Large writes skip the buffer: copying them would only cost time.
            self.file.write_all(data)?;
            self.len += data.len() as u64;
            self.maybe_start_writeback();
            return Ok(());
        }
        self.buf.extend_from_slice(data);
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_buffer()
    }

    fn sync(&mut self) -> io::Result<()> {
        self.flush_buffer()?;
        // fdatasync: the data plus the metadata needed to read it back (the size), not mtime.
        self.file.sync_data()
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn set_writeback_interval(&mut self, bytes: u64) {
        self.writeback.interval = bytes;
    }

    fn preallocate(&mut self, len: u64) -> io::Result<()> {
        if len <= self.preallocated.max(self.len) {
            return Ok(());
        }
        // Writes go to the fd's position, which `set_len` leaves alone (the file is not
        // opened with O_APPEND), so buffered bytes still land right after the last ones.
        self.file.set_len(len)?;
        self.preallocated = len;
        Ok(())
    }

    fn trim_preallocated(&mut self) -> io::Result<()> {
        if self.preallocated <= self.len {
            return Ok(());
        }
        self.flush_buffer()?;
        self.file.set_len(self.len)?;
        self.preallocated = 0;
        Ok(())
    }
}

impl Drop for PosixWritableFile {
    fn drop(&mut self) {
        // Best effort, like closing a buffered stream: the bytes reach the OS so they survive
        // a process exit. Errors have nowhere to go; callers needing certainty call `sync`.
        let _ = self.flush_buffer();
    }
}

/// A file read with `pread`, which needs no shared cursor and so is safe from many threads.
struct PosixRandomAccessFile {
    file: File,
}

impl RandomAccessFile for PosixRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        // std's `read_exact_at` retries short reads and EINTR and reports `UnexpectedEof`.
        self.file.read_exact_at(buf, offset)
    }

    fn read_exact_at_into(&self, offset: u64, len: usize, buf: &mut Vec<u8>) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let start = buf.len();
        buf.reserve_exact(len);
        let mut done = 0;
        while done < len {
            let at = offset
                .checked_add(done as u64)
                .and_then(|at| libc::off_t::try_from(at).ok())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
            let spare = &mut buf.spare_capacity_mut()[done..len];
            // SAFETY: the pointer and length describe `spare`, memory this Vec owns and nothing
            // else refers to while the call runs; the kernel only writes into it. The
            // descriptor belongs to `self.file`, open for the call.
            let n = unsafe {
                libc::pread(
                    self.file.as_raw_fd(),
                    spare.as_mut_ptr().cast(),
                    spare.len(),
                    at,
                )
            };
            match n {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n if n < 0 => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
                n => done += n as usize,
            }
        }
        // SAFETY: the loop ended with all `len` bytes after `start` written by `pread` (each
        // call wrote the `n` bytes it reported, contiguously), within the reserved capacity.
        unsafe { buf.set_len(start + len) };
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
}

/// A table file opened with `O_DIRECT`: every transfer aligned (the adapters in `direct.rs`
/// see to it).
struct PosixDirectFile {
    file: File,
    /// The device's direct-IO offset alignment, as `statx` reported it at open.
    read_unit: usize,
}

impl super::direct::AlignedFile for PosixDirectFile {
    fn read_aligned(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }

    fn write_aligned(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_unit(&self) -> usize {
        self.read_unit
    }
}

/// What direct-IO offsets on `file` must be multiples of, as `statx` reports it (Linux 6.1
/// and later; the logical block size of the device under most filesystems); the 4 KiB
/// default where the kernel or filesystem does not say.
#[cfg(target_os = "linux")]
fn direct_io_read_unit(file: &File) -> usize {
    use std::os::fd::AsRawFd;
    let default = super::DIRECT_IO_ALIGNMENT;
    // SAFETY: an all-zero `statx` is a valid value of the plain C struct (integers only).
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a live descriptor, an empty NUL-terminated path with AT_EMPTY_PATH (so the
    // descriptor itself is described), and a pointer to a `statx` the call fills.
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return default;
    }
    let memory = stx.stx_dio_mem_align as usize;
    let offset = stx.stx_dio_offset_align as usize;
    // Buffers are aligned to 4 KiB: a device wanting more keeps the default.
    if memory == 0 || memory > default {
        return default;
    }
    super::direct::usable_read_unit(offset)
}

/// Opens `path` with `O_DIRECT` added to `opts`. A filesystem that refuses the flag (tmpfs
/// does, with `EINVAL`) gives an `Unsupported` error saying so.
#[cfg(target_os = "linux")]
fn open_direct(opts: &mut OpenOptions, what: &str, path: &Path) -> io::Result<PosixDirectFile> {
    match opts.custom_flags(libc::O_DIRECT).open(path) {
        Ok(file) => {
            let read_unit = direct_io_read_unit(&file);
            Ok(PosixDirectFile { file, read_unit })
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{what} {} with O_DIRECT: the filesystem refuses direct IO (tmpfs does)",
                path.display()
            ),
        )),
        Err(e) => Err(with_path(e, what, path)),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_opts: &mut OpenOptions, what: &str, path: &Path) -> io::Result<PosixDirectFile> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "{what} {}: direct IO is only supported on Linux",
            path.display()
        ),
    ))
}

/// A file read front to back.
struct PosixSequentialFile {
    file: File,
}

impl SequentialFile for PosixSequentialFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.file.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                res => return res,
            }
        }
    }
}

/// Holds an `flock` on an open file plus this process's table entry for it.
struct PosixFileLock {
    file: File,
    /// Canonical path: the key in [`LOCKED_PATHS`].
    path: PathBuf,
}

impl FileLock for PosixFileLock {}

impl Drop for PosixFileLock {
    fn drop(&mut self) {
        // Unlock before leaving the table so that a thread which sees the entry gone and then
        // takes the lock never collides with our still-held flock. (Closing the file would also
        // release the flock; doing it explicitly makes the order certain.)
        let _ = self.file.unlock();
        locked_paths().remove(&self.path);
    }
}

/// Adds the path to an OS error's message, which otherwise says only "No such file".
fn with_path(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

impl FileSystem for PosixFileSystem {
    fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::hard_link(from, to)
    }

    fn name(&self) -> &str {
        "PosixFileSystem"
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(create_writable(path)?))
    }

    fn open_random_access(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| with_path(e, "opening", path))?;
        Ok(Arc::new(PosixRandomAccessFile { file }))
    }

    fn create_mapped(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        // Read access too: a shared writable mapping needs a descriptor open for both.
        let file = create_truncated(path, true)?;
        Ok(Box::new(super::mmap_write::MappedWritableFile::new(file)))
    }

    fn open_random_access_mapped(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| with_path(e, "opening", path))?;
        let len = file
            .metadata()
            .map_err(|e| with_path(e, "sizing", path))?
            .len();
        if len == 0 {
            // Nothing to map; an empty file reads (and fails) as an ordinary one.
            return Ok(Arc::new(PosixRandomAccessFile { file }));
        }
        let map =
            super::mmap::MappedFile::map(&file, len).map_err(|e| with_path(e, "mapping", path))?;
        Ok(Arc::new(super::mmap::MappedRandomAccessFile::new(map)))
    }

    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let mut opts = OpenOptions::new();
        opts.write(true).create(true).truncate(true).mode(FILE_MODE);
        let file = open_direct(&mut opts, "creating", path)?;
        Ok(Box::new(super::direct::DirectWriter::new(file)?))
    }

    fn open_random_access_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let file = open_direct(OpenOptions::new().read(true), "opening", path)?;
        Ok(Arc::new(super::direct::DirectReader::new(file)))
    }

    fn open_sequential(&self, path: &Path) -> io::Result<Box<dyn SequentialFile>> {
        let file = File::open(path).map_err(|e| with_path(e, "opening", path))?;
        Ok(Box::new(PosixSequentialFile { file }))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        Ok(fs::metadata(path)
            .map_err(|e| with_path(e, "reading metadata of", path))?
            .len())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| with_path(e, "listing", dir))? {
            let name = entry?.file_name();
            // The engine only names files in ASCII; anything else is not ours, so it is
            // reported lossily rather than failing the whole listing.
            names.push(name.to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir).map_err(|e| with_path(e, "creating directory", dir))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path).map_err(|e| with_path(e, "removing", path))
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        fs::remove_dir(dir).map_err(|e| with_path(e, "removing directory", dir))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        // rename(2) replaces `to` atomically.
        fs::rename(from, to).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("renaming {} to {}: {e}", from.display(), to.display()),
            )
        })
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        // fsync on a directory fd persists its entries (creations, renames, removals).
        let d = File::open(dir).map_err(|e| with_path(e, "opening directory", dir))?;
        d.sync_all()
            .map_err(|e| with_path(e, "syncing directory", dir))
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(FILE_MODE)
            .open(path)
            .map_err(|e| with_path(e, "opening lock file", path))?;
        // Canonicalize after creating it: the file must exist, and then "db/LOCK",
        // "./db/LOCK" and a symlinked path all map to the same key.
        let canonical = fs::canonicalize(path).map_err(|e| with_path(e, "resolving", path))?;
        if !locked_paths().insert(canonical.clone()) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is already locked by this process", path.display()),
            ));
        }
        // std's try_lock is flock(LOCK_EX | LOCK_NB) on Linux: held per open file description,
        // released when `file` closes.
        match file.try_lock() {
            Ok(()) => Ok(Box::new(PosixFileLock {
                file,
                path: canonical,
            })),
            Err(fs::TryLockError::WouldBlock) => {
                locked_paths().remove(&canonical);
                Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!("{} is locked by another process", path.display()),
                ))
            }
            Err(fs::TryLockError::Error(e)) => {
                locked_paths().remove(&canonical);
                Err(with_path(e, "locking", path))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write_file(fs: &PosixFileSystem, path: &Path, data: &[u8]) {
        let mut f = fs.create(path).unwrap();
        f.append(data).unwrap();
        f.sync().unwrap();
    }

    #[test]
    fn reads_into_new_space_append_exactly_and_fail_whole_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let posix = PosixFileSystem::new();
        let mem = crate::fs::MemFileSystem::new();
        let filesystems: [&dyn FileSystem; 2] = [&posix, &mem];
        for fs in filesystems {
            let path = dir.path().join(format!("{}.blob", fs.name()));
            fs.create_dir_all(dir.path()).unwrap();
            let mut w = fs.create(&path).unwrap();
            w.append(&data).unwrap();
            w.sync().unwrap();
            drop(w);
            let f = fs.open_random_access(&path).unwrap();
            let mut buf = b"kept".to_vec();
            f.read_exact_at_into(1000, 200_000, &mut buf).unwrap();
            assert_eq!(&buf[..4], b"kept");
            assert_eq!(&buf[4..], &data[1000..201_000], "{}", fs.name());
            // Past the end: an error, and the buffer as it was.
            let e = f
                .read_exact_at_into(200_000, 100_001, &mut buf)
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{}", fs.name());
            assert_eq!(buf.len(), 200_004);
            f.read_exact_at_into(299_999, 1, &mut buf).unwrap();
            assert_eq!(buf.last(), Some(&data[299_999]));
        }
    }

    #[test]
    fn direct_files_round_trip_where_the_filesystem_allows_o_direct() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("000001.sst");
        let mut f = match fs.create_direct(&path) {
            Ok(f) => f,
            // The temporary directory is on tmpfs: nothing to test here but the error.
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
                return;
            }
        };
        let data: Vec<u8> = (0..3 * 1024 * 1024 + 123)
            .map(|i| (i % 253) as u8)
            .collect();
        for piece in data.chunks(10_007) {
            f.append(piece).unwrap();
        }
        f.sync().unwrap();
        drop(f);
        assert_eq!(fs::read(&path).unwrap(), data);
        let r = fs.open_random_access_direct(&path).unwrap();
        assert_eq!(r.len().unwrap(), data.len() as u64);
        let mut buf = vec![0u8; 70_000];
        r.read_exact_at(1_000_001, &mut buf).unwrap();
        assert_eq!(buf, data[1_000_001..1_070_001]);
        let e = r
            .read_exact_at(data.len() as u64 - 5, &mut [0u8; 6])
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    /// tmpfs refuses `O_DIRECT` before Linux 6.6 and accepts it since: either way the
    /// outcome is a working file or an `Unsupported` error that says why.
    #[cfg(target_os = "linux")]
    #[test]
    fn tmpfs_gives_direct_io_or_a_clear_error() {
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            return;
        }
        // A container may give no writable /dev/shm: nothing to test then.
        let Ok(dir) = tempfile::tempdir_in(shm) else {
            return;
        };
        let path = dir.path().join("000001.sst");
        match PosixFileSystem::new().create_direct(&path) {
            Ok(mut f) => {
                f.append(b"tmpfs").unwrap();
                f.sync().unwrap();
                assert_eq!(fs::read(&path).unwrap(), b"tmpfs");
            }
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::Unsupported);
                assert!(e.to_string().contains("refuses direct IO"), "{e}");
            }
        }
    }

    /// Where the test directory's filesystem takes direct IO, the read unit `statx` gives is
    /// one the reader uses (a power of two from 512 to 4096), and reads at odd offsets work.
    #[cfg(target_os = "linux")]
    #[test]
    fn direct_reads_use_the_alignment_statx_reports() {
        use crate::fs::direct::{usable_read_unit, AlignedFile};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.sst");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(&path, &data).unwrap();
        let Ok(file) = open_direct(OpenOptions::new().read(true), "opening", &path) else {
            return; // no direct IO here (tmpfs before Linux 6.6)
        };
        let unit = file.read_unit();
        assert_eq!(usable_read_unit(unit), unit, "statx gave {unit}");
        let reader = super::super::direct::DirectReader::new(file);
        let mut buf = vec![0u8; 4096];
        reader.read_exact_at(1000, &mut buf).unwrap();
        assert_eq!(buf, data[1000..5096]);
    }

    #[test]
    fn writeback_hints_keep_every_byte_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("wal");
        let mut f = create_writable(&path).unwrap();
        f.set_writeback_interval(4096);
        let mut expected = Vec::new();
        // Small buffered appends and large direct ones, so both paths start writeback.
        for i in 0..200u32 {
            let len = if i % 50 == 0 {
                WRITE_BUFFER_SIZE + 17
            } else {
                1000 + i as usize
            };
            let chunk: Vec<u8> = (0..len).map(|j| (i as usize * 31 + j) as u8).collect();
            f.append(&chunk).unwrap();
            expected.extend_from_slice(&chunk);
            if i % 7 == 0 {
                f.flush().unwrap();
            }
        }
        f.sync().unwrap();
        assert!(f.writeback.start > 0, "writeback was never started");
        assert_eq!(
            f.writeback.start % WRITEBACK_PAGE,
            0,
            "a hint ended inside a page"
        );
        assert!(
            f.writeback.interval > 0,
            "the hint was refused on a real file"
        );
        assert_eq!(f.len(), expected.len() as u64);
        assert_eq!(fs.read_to_vec(&path).unwrap(), expected);
    }

    /// `preallocate` sets the size ahead (never shrinking it); appends land after the
    /// appended bytes, buffered or not, and `len` counts only them.
    #[test]
    fn preallocated_space_is_filled_from_the_front() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("a");
        let mut f = fs.create(&path).unwrap();
        f.append(b"head").unwrap();
        f.preallocate(1000).unwrap();
        assert_eq!(fs.file_size(&path).unwrap(), 1000);
        f.preallocate(10).unwrap();
        assert_eq!(fs.file_size(&path).unwrap(), 1000);
        let big = vec![9u8; WRITE_BUFFER_SIZE + 1];
        f.append(b"-tail").unwrap();
        f.append(&big).unwrap();
        f.sync().unwrap();
        assert_eq!(f.len(), 9 + big.len() as u64);
        let mut expected = b"head-tail".to_vec();
        expected.extend_from_slice(&big);
        assert_eq!(fs.read_to_vec(&path).unwrap(), expected);
        f.preallocate(expected.len() as u64 + 100).unwrap();
        f.append(b"end").unwrap();
        f.flush().unwrap();
        expected.extend_from_slice(b"end");
        expected.resize(expected.len() + 97, 0);
        assert_eq!(fs.read_to_vec(&path).unwrap(), expected);
    }

    #[test]
    fn write_flush_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("a");
        let mut f = fs.create(&path).unwrap();
        assert!(f.is_empty());
        f.append(b"hello ").unwrap();
        f.append(b"world").unwrap();
        assert_eq!(f.len(), 11);
        // Still buffered in user space.
        assert_eq!(fs.file_size(&path).unwrap(), 0);
        f.flush().unwrap();
        assert_eq!(fs.file_size(&path).unwrap(), 11);
        assert_eq!(fs.read_to_vec(&path).unwrap(), b"hello world");

        // A write larger than the buffer, around buffered bytes, keeps the order.
        let big = vec![7u8; WRITE_BUFFER_SIZE * 2 + 3];
        f.append(b"x").unwrap();
        f.append(&big).unwrap();
        f.append(b"y").unwrap();
        f.sync().unwrap();
        assert_eq!(f.len(), 11 + 1 + big.len() as u64 + 1);
        let mut expected = b"hello worldx".to_vec();
        expected.extend_from_slice(&big);
        expected.push(b'y');
        assert_eq!(fs.read_to_vec(&path).unwrap(), expected);

        let r = fs.open_random_access(&path).unwrap();
        assert_eq!(r.len().unwrap(), expected.len() as u64);
        let mut buf = [0u8; 5];
        r.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"world");
    }

    #[test]
    fn drop_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("a");
        let mut f = fs.create(&path).unwrap();
        f.append(b"abc").unwrap();
        drop(f);
        assert_eq!(fs.read_to_vec(&path).unwrap(), b"abc");
    }

    #[test]
    fn read_past_eof() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("a");
        write_file(&fs, &path, b"0123456789");
        let r = fs.open_random_access(&path).unwrap();
        let mut buf = [0u8; 4];
        let err = r.read_exact_at(8, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let err = r.read_exact_at(100, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        r.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"6789");
    }

    #[test]
    fn missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("nope");
        assert!(!fs.exists(&path));
        for err in [
            fs.open_random_access(&path).err().unwrap(),
            fs.open_sequential(&path).err().unwrap(),
            fs.file_size(&path).unwrap_err(),
            fs.remove_file(&path).unwrap_err(),
            fs.list_dir(&path).unwrap_err(),
        ] {
            assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
            assert!(err.to_string().contains("nope"), "{err}");
        }
    }

    #[test]
    fn rename_over_existing() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        write_file(&fs, &a, b"new");
        write_file(&fs, &b, b"old contents");
        fs.rename(&a, &b).unwrap();
        fs.sync_dir(dir.path()).unwrap();
        assert!(!fs.exists(&a));
        assert_eq!(fs.read_to_vec(&b).unwrap(), b"new");
    }

    #[test]
    fn list_remove_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let sub = dir.path().join("x/y");
        fs.create_dir_all(&sub).unwrap();
        fs.create_dir_all(&sub).unwrap(); // idempotent
        write_file(&fs, &sub.join("f1"), b"1");
        write_file(&fs, &sub.join("f2"), b"2");
        let mut names = fs.list_dir(&sub).unwrap();
        names.sort();
        assert_eq!(names, ["f1", "f2"]);
        assert_eq!(fs.list_dir(&dir.path().join("x")).unwrap(), ["y"]);
        assert!(fs.remove_dir(&sub).is_err(), "not empty");
        fs.remove_file(&sub.join("f1")).unwrap();
        fs.remove_file(&sub.join("f2")).unwrap();
        assert!(fs.list_dir(&sub).unwrap().is_empty());
        fs.remove_dir(&sub).unwrap();
        assert!(!fs.exists(&sub));
    }

    #[test]
    fn lock_twice_would_block_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("LOCK");
        let guard = fs.lock(&path).unwrap();
        assert!(fs.exists(&path));
        let err = fs.lock(&path).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        // A different spelling of the same path is the same lock.
        let alias = dir.path().join(".").join("LOCK");
        let err = fs.lock(&alias).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        drop(guard);
        let again = fs.lock(&alias).unwrap();
        drop(again);
    }

    #[test]
    fn lock_conflicts_across_open_file_descriptions() {
        // Another holder (as another process would be) makes lock() fail with WouldBlock.
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("LOCK");
        let other = File::create(&path).unwrap();
        other.try_lock().unwrap();
        let err = fs.lock(&path).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        drop(other);
        drop(fs.lock(&path).unwrap());
    }

    #[test]
    fn files_are_created_0644() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("a");
        write_file(&fs, &path, b"x");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        // The umask can only clear bits; 0644 must never gain group/other write.
        assert_eq!(mode & !FILE_MODE, 0, "mode {mode:o}");
        assert_eq!(mode & 0o600, 0o600, "mode {mode:o}");
        let lock_path = dir.path().join("LOCK");
        drop(fs.lock(&lock_path).unwrap());
        let mode = fs::metadata(&lock_path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !FILE_MODE, 0, "mode {mode:o}");
    }

    #[test]
    fn create_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("a");
        write_file(&fs, &path, b"long old contents");
        write_file(&fs, &path, b"new");
        assert_eq!(fs.read_to_vec(&path).unwrap(), b"new");
    }

    #[test]
    fn concurrent_positional_reads() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::new();
        let path = dir.path().join("a");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        write_file(&fs, &path, &data);
        let r = fs.open_random_access(&path).unwrap();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let r = &r;
                let data = &data;
                s.spawn(move || {
                    for i in 0..200u64 {
                        let off = ((i * 37 + t * 101) % 9_000) as usize;
                        let mut buf = [0u8; 100];
                        r.read_exact_at(off as u64, &mut buf).unwrap();
                        assert_eq!(&buf[..], &data[off..off + 100]);
                    }
                });
            }
        });
    }
}
