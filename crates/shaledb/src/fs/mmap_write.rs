//! WAL files written through a shared memory map (`Options::allow_mmap_writes`): an append
//! inside the space the log preallocated is a copy into the page cache, with no system call,
//! where a buffered file pays a `write(2)` for every write group it flushes.
//!
//! The durability contract is the one of [`WritableFile`]: the mapped bytes are the page
//! cache's pages, so an append survives a process crash as soon as it returns (`flush` has
//! nothing left to do), and `sync` (`fdatasync`) makes them durable, as it does for bytes
//! written with `write(2)`: on Linux a store through a shared mapping marks its page dirty
//! (the first store after writeback faults), and `fdatasync` writes back every dirty page of
//! the file, mapped or not.
//!
//! Only preallocated space is mapped ([`WritableFile::preallocate`]), and it is first written
//! with zeros (`pwrite`): a store into a hole the file system could not fill (a full device)
//! would be a `SIGBUS` that ends the process, whereas a failed `pwrite` is an ordinary
//! `Error::Io` (no space) before anything is copied; and the pages are then in the page cache,
//! so a store reads nothing. The map is faulted in for writing in one call where the kernel
//! can (`MADV_POPULATE_WRITE`). Appends outside the preallocated space (a log's markers,
//! anything after the space is trimmed) are buffered and written with `pwrite`, as a buffered
//! file's are.

use super::WritableFile;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;

/// Pages are mapped from a multiple of this (the common page size; where pages are larger,
/// `mmap` refuses the offset, and the file goes on with `pwrite`: `MappedWritableFile::mappable`).
const MAP_ALIGN: u64 = 4096;

/// A writable shared mapping of `len` bytes of a file from `offset`; unmapped on drop.
struct WritableMapping {
    ptr: NonNull<u8>,
    offset: u64,
    len: usize,
}

impl WritableMapping {
    fn map(file: &File, offset: u64, len: usize) -> io::Result<WritableMapping> {
        let file_offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // SAFETY: a fresh shared read-write mapping chosen by the kernel (no fixed address, so
        // no existing memory is replaced) of a descriptor `file` keeps open for the call; the
        // file is at least `offset + len` bytes long (the caller reserved the space), and the
        // result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                file_offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        populate_for_writing(ptr, len);
        Ok(WritableMapping { ptr, offset, len })
    }

    /// True if the file range `[at, at + len)` lies inside the mapping.
    fn covers(&self, at: u64, len: usize) -> bool {
        at >= self.offset && at - self.offset + len as u64 <= self.len as u64
    }

    /// Copies `data` to file offset `at`, which [`covers`](Self::covers) must have accepted.
    fn write_at(&mut self, at: u64, data: &[u8]) {
        assert!(self.covers(at, data.len()), "write outside the mapping");
        let start = (at - self.offset) as usize;
        // SAFETY: `start + data.len() <= self.len` (asserted above), so the destination lies
        // inside the live mapping `ptr..ptr + len`, which only this value writes (the writer
        // is `&mut`); `data` is caller memory, which cannot overlap a mapping made here.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(start), data.len());
        }
    }
}

impl Drop for WritableMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `map` with this address and length and is unmapped
        // once, here; no reference into it outlives `self` (writes copy into it and return).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

// SAFETY: the mapping is memory owned by this value alone (made in `map`, unmapped once in
// `drop`), written only through `&mut self`; moving it to another thread moves that ownership.
unsafe impl Send for WritableMapping {}

/// Unmapped appends (before the first preallocation, past it, after a trim) are gathered up
/// to this many bytes before a `pwrite`, like a buffered file's.
const PENDING_LIMIT: usize = 64 * 1024;

/// A WAL file whose preallocated space is written through a shared mapping.
pub(crate) struct MappedWritableFile {
    file: File,
    /// The mapping of the preallocated space the next appends go to, if any.
    mapping: Option<WritableMapping>,
    /// Appended bytes outside the preallocated space not yet handed to the OS; they end at
    /// `len`.
    pending: Vec<u8>,
    /// Bytes appended.
    len: u64,
    /// The file's size as `preallocate` last set it, at least `len` while space is
    /// preallocated; appends up to here are copies into the mapping.
    reserved: u64,
    /// False once a mapping failed (an `mmap` refused: a page size above 4 KiB, no address
    /// space): the file is then written with `pwrite` only, as a buffered file.
    mappable: bool,
    writeback: super::posix::Writeback,
}

impl MappedWritableFile {
    pub(crate) fn new(file: File) -> Self {
        MappedWritableFile {
            file,
            mapping: None,
            pending: Vec::new(),
            len: 0,
            reserved: 0,
            mappable: true,
            writeback: super::posix::Writeback::default(),
        }
    }

    /// Hands the pending bytes to the OS. After a failure they are dropped, never written
    /// later (the contract of [`WritableFile::append`]).
    fn write_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let at = self.len - self.pending.len() as u64;
        let written = self.file.write_all_at(&self.pending, at);
        self.pending.clear();
        written
    }

    /// The mapping covering `len` bytes at the current end, mapping the preallocated space
    /// from the end's page to the reserved size if the current one does not reach.
    fn mapping_for(&mut self, len: usize) -> io::Result<&mut WritableMapping> {
        let at = self.len;
        let mapping = match self.mapping.take() {
            Some(m) if m.covers(at, len) => m,
            // The old mapping (if any) is unmapped here, before the next one is made.
            _ => {
                let start = at - at % MAP_ALIGN;
                let map_len = usize::try_from(self.reserved - start).map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, "mapping too large")
                })?;
                WritableMapping::map(&self.file, start, map_len)?
            }
        };
        Ok(self.mapping.insert(mapping))
    }
}

impl WritableFile for MappedWritableFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = self.len + data.len() as u64;
        let mut copied = false;
        if self.mappable && end <= self.reserved {
            // The pending bytes come first in the file.
            self.write_pending()?;
            let at = self.len;
            match self.mapping_for(data.len()) {
                Ok(mapping) => {
                    mapping.write_at(at, data);
                    copied = true;
                }
                // Nothing was written: the bytes go the unmapped way, now and from now on.
                Err(_) => self.mappable = false,
            }
        }
        if !copied {
            self.pending.extend_from_slice(data);
        }
        self.len = end;
        if self.pending.len() >= PENDING_LIMIT {
            self.write_pending()?;
        }
        if self.pending.is_empty() {
            self.writeback.after(&self.file, self.len);
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        // Mapped stores reach the page cache at once; only unmapped appends wait here.
        self.write_pending()
    }

    fn sync(&mut self) -> io::Result<()> {
        self.write_pending()?;
        self.file.sync_data()
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn set_writeback_interval(&mut self, bytes: u64) {
        self.writeback.interval = bytes;
    }

    fn preallocate(&mut self, len: u64) -> io::Result<()> {
        let from = self.reserved.max(self.len);
        if len <= from {
            return Ok(());
        }
        // The file must reach `from` before space is added after it.
        self.write_pending()?;
        reserve(&self.file, from, len - from)?;
        self.reserved = len;
        Ok(())
    }

    fn trim_preallocated(&mut self) -> io::Result<()> {
        self.write_pending()?;
        if self.reserved <= self.len {
            return Ok(());
        }
        self.mapping = None;
        self.file.set_len(self.len)?;
        self.reserved = 0;
        Ok(())
    }
}

impl Drop for MappedWritableFile {
    fn drop(&mut self) {
        // Best effort, as a buffered file's: mapped bytes are in the page cache already.
        let _ = self.write_pending();
    }
}

/// Extends `file` by `len` bytes of zeros written at `from` (its current size). Written, not
/// a hole and not `fallocate`: the pages are then in the page cache, dirty and with their
/// space reserved by the file system (a full device fails this `pwrite` with `ENOSPC`), so
/// stores into them through a mapping neither read nor allocate anything. `fallocate` left
/// every first store a page fault that read the (unwritten) page in and converted its
/// extent: a quarter of a K1-1KB fill's time.
fn reserve(file: &File, from: u64, len: u64) -> io::Result<()> {
    static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
    let mut at = from;
    let end = from.saturating_add(len);
    while at < end {
        let n = (end - at).min(ZEROS.len() as u64) as usize;
        file.write_all_at(&ZEROS[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// Asks the kernel to fault the whole mapping in for writing now (`MADV_POPULATE_WRITE`,
/// Linux 5.14), one call instead of a trap at each page's first store. Only a hint: where it
/// is refused, the stores fault page by page.
#[cfg(target_os = "linux")]
fn populate_for_writing(ptr: NonNull<u8>, len: usize) {
    // SAFETY: `ptr..ptr + len` is a live shared mapping just made by `WritableMapping::map`
    // over file pages that exist (the file reaches its end); the call only faults those pages
    // in, changing no byte, and its failure is ignored.
    unsafe {
        libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_POPULATE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn populate_for_writing(_ptr: NonNull<u8>, _len: usize) {}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::fs::{FileSystem, PosixFileSystem};
    use rand::{Rng, SeedableRng};

    /// Creates `path` for writing, and for reading too if `readable` (which a shared
    /// writable map needs).
    fn create(path: &std::path::Path, readable: bool) -> File {
        std::fs::OpenOptions::new()
            .read(readable)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .unwrap()
    }

    fn bytes(seed: u64, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (seed as usize * 131 + i * 7) as u8)
            .collect()
    }

    /// Random appends (empty, small, larger than the pending limit), preallocations,
    /// flushes, syncs and trims, against a model of the bytes appended: after every flush the
    /// file holds exactly those bytes, then zeros up to the preallocated size; after a trim,
    /// exactly those bytes. Some appends must have gone through the mapping, some not.
    #[test]
    fn appends_in_and_out_of_mapped_space_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let mut rng = rand::rngs::StdRng::seed_from_u64(20261207);
        let (mut mapped_appends, mut unmapped_appends) = (0, 0);
        for round in 0..6u64 {
            let mut f = match PosixFileSystem::new().create_mapped(&path) {
                Ok(f) => f,
                Err(e) => panic!("create_mapped: {e}"),
            };
            let mut model: Vec<u8> = Vec::new();
            let mut reserved = 0u64;
            for op in 0..300u64 {
                match rng.gen_range(0..10) {
                    0 => {
                        let ahead = rng.gen_range(1..200_000);
                        reserved = reserved.max(model.len() as u64 + ahead);
                        f.preallocate(model.len() as u64 + ahead).unwrap();
                    }
                    1 => f.flush().unwrap(),
                    2 => f.sync().unwrap(),
                    3 if round % 2 == 1 => {
                        f.trim_preallocated().unwrap();
                        reserved = 0;
                    }
                    _ => {
                        let len = match rng.gen_range(0..20) {
                            0 => 0,
                            1 => PENDING_LIMIT + rng.gen_range(1..5000),
                            _ => rng.gen_range(1..3000),
                        };
                        let data = bytes(round * 1000 + op, len);
                        if len > 0 && model.len() as u64 + len as u64 <= reserved {
                            mapped_appends += 1;
                        } else if len > 0 {
                            unmapped_appends += 1;
                        }
                        f.append(&data).unwrap();
                        model.extend_from_slice(&data);
                    }
                }
                assert_eq!(f.len(), model.len() as u64);
            }
            f.flush().unwrap();
            let on_disk = std::fs::read(&path).unwrap();
            assert_eq!(on_disk.len() as u64, reserved.max(model.len() as u64));
            assert!(on_disk[..model.len()] == model[..], "round {round}");
            assert!(on_disk[model.len()..].iter().all(|&b| b == 0));
            f.trim_preallocated().unwrap();
            assert!(std::fs::read(&path).unwrap() == model, "round {round}");
        }
        assert!(mapped_appends > 100 && unmapped_appends > 100);
    }

    /// What a process crash keeps: a mapped append is in the page cache as soon as it
    /// returns, so another reader of the file (here: this process, through `read(2)`) sees it
    /// with no flush or sync, and dropping the writer without either loses nothing.
    #[test]
    fn mapped_appends_are_visible_before_any_flush() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let file = create(&path, true);
        let mut f = MappedWritableFile::new(file);
        f.preallocate(1 << 20).unwrap();
        let data = bytes(3, 10_000);
        f.append(&data).unwrap();
        assert!(
            f.mapping.is_some(),
            "the append did not go through the mapping"
        );
        assert!(f.pending.is_empty());
        assert!(std::fs::read(&path).unwrap()[..data.len()] == data[..]);
        drop(f);
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(on_disk.len(), 1 << 20);
        assert!(on_disk[..data.len()] == data[..]);
    }

    /// A file that cannot be mapped (here: opened write-only, which a shared writable map
    /// refuses with `EACCES`) is written with `pwrite` instead, every byte in place.
    #[test]
    fn a_refused_mapping_falls_back_to_pwrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let file = create(&path, false);
        let mut f = MappedWritableFile::new(file);
        f.preallocate(64 * 1024).unwrap();
        let (first, second) = (bytes(1, 5000), bytes(2, 70_000));
        f.append(&first).unwrap();
        assert!(
            !f.mappable && f.mapping.is_none(),
            "the map was not refused"
        );
        f.append(&second).unwrap();
        f.flush().unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(on_disk.len(), first.len() + second.len());
        assert!(on_disk[..first.len()] == first[..] && on_disk[first.len()..] == second[..]);
    }

    /// Writeback hints are given for mapped bytes too, in whole pages.
    #[test]
    fn writeback_hints_cover_mapped_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let file = create(&path, true);
        let mut f = MappedWritableFile::new(file);
        f.set_writeback_interval(8192);
        f.preallocate(1 << 20).unwrap();
        for i in 0..100 {
            f.append(&bytes(i, 1000)).unwrap();
        }
        assert!(f.mapping.is_some());
        assert_eq!(f.writeback.start, 98304, "hints end at the last whole page");
        assert!(
            f.writeback.interval > 0,
            "the hint was refused on a real file"
        );
    }
}
