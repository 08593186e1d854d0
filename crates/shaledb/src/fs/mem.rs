//! In-memory filesystem with power-loss simulation.
//!
//! The model, kept deliberately small:
//! - A file is an *inode* (`Arc<Mutex<FileData>>`); the *namespace* maps paths to inodes.
//!   Renames move the inode, so open handles follow the file like on a real filesystem.
//! - Each inode knows its *durable contents*: what `sync` last made durable. Appends land in
//!   the inode at once (there is no user-space buffer, so `flush` has nothing to do).
//! - Besides the live namespace there is a *durable namespace*. `sync_dir(d)` copies the live
//!   entries of `d` into it, replacing d's old durable entries; so creations, renames and
//!   removals in `d` survive a crash only once `d` has been synced.
//! - [`MemFileSystem::crash`] replaces the live namespace by the durable one and each surviving
//!   file's contents by its durable contents, then invalidates every open handle.
//! - Directories are simplified: they are durable as soon as they are created, and a crash
//!   re-creates the parents of surviving files. The engine creates its directory once, before
//!   anything that matters, so this does not hide the bugs these tests are after.
//!
//! One mutex guards the whole state and is held for every operation, handles included; inode
//! mutexes are only ever taken while holding it. That makes each operation atomic with respect
//! to `crash`, which is what lets a stale handle be refused reliably.

use super::direct::{check_alignment, DirectReader, DirectWriter};
use super::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file's identity, shared by every path naming it and every handle open on it.
type Inode = Arc<Mutex<FileData>>;

/// What survives of a file's data on power loss.
enum Durable {
    /// The durable contents are `data[..written]` followed by zeros up to `len` bytes (space
    /// `set_len` added before the last sync): everything written past `written` came since
    /// the last sync. This avoids copying the file on every sync (a WAL syncs after every
    /// write, also into space it preallocated).
    Prefix { written: usize, len: usize },
    /// The file's synced bytes were changed or cut since its last sync; these are the
    /// durable contents.
    Snapshot(Vec<u8>),
}

struct FileData {
    /// Current contents, as readers see them.
    data: Vec<u8>,
    /// `data[written..]` are zeros `set_len` added, never written.
    written: usize,
    durable: Durable,
}

impl FileData {
    fn new(data: Vec<u8>) -> Inode {
        let len = data.len();
        Arc::new(Mutex::new(FileData {
            data,
            written: len,
            durable: Durable::Prefix { written: len, len },
        }))
    }

    fn durable_contents(&self) -> Vec<u8> {
        match &self.durable {
            Durable::Prefix { written, len } => {
                let mut contents = self.data[..*written].to_vec();
                contents.resize(*len, 0);
                contents
            }
            Durable::Snapshot(s) => s.clone(),
        }
    }

    /// What a power loss leaves: the durable contents, with `keep(n)` of the `n` bytes
    /// written since the last sync past the durable ones (a torn tail) when nothing synced
    /// was changed since.
    fn after_crash(&self, keep: &mut impl FnMut(usize) -> usize) -> Vec<u8> {
        let Durable::Prefix { written, len } = self.durable else {
            return self.durable_contents();
        };
        let unsynced = self.written.saturating_sub(written);
        let kept = keep(unsynced).min(unsynced);
        let mut data = self.data[..written + kept].to_vec();
        if data.len() < len {
            data.resize(len, 0);
        }
        data
    }

    /// Empties the file (`O_TRUNC`) without losing what a crash would bring back.
    fn truncate(&mut self) {
        self.preserve_durable_from(0);
        self.data.clear();
        self.written = 0;
    }

    fn sync(&mut self) {
        self.durable = Durable::Prefix {
            written: self.written,
            len: self.data.len(),
        };
    }

    /// Keeps the durable contents aside before `data[from..]` changes in place (an append,
    /// or a write into zeros added since the last sync, needs no copy: it leaves the durable
    /// bytes as they are).
    fn preserve_durable_from(&mut self, from: usize) {
        if let Durable::Prefix { written, .. } = self.durable {
            if from < written {
                self.durable = Durable::Snapshot(self.durable_contents());
            }
        }
    }

    /// A positional write (direct IO), extending the file with zeros if `offset` is past
    /// its end.
    fn write_at(&mut self, offset: usize, buf: &[u8]) {
        let end = offset + buf.len();
        let overlap_end = end.min(self.data.len());
        // Rewriting bytes with the same bytes (a direct writer's padded last block) leaves
        // the durable contents alone, so no copy is needed.
        if offset < overlap_end && self.data[offset..overlap_end] != buf[..overlap_end - offset] {
            self.preserve_durable_from(offset);
        }
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[offset..end].copy_from_slice(buf);
        self.written = self.written.max(end);
    }

    /// `ftruncate`: cuts the file to `len` bytes or extends it with zeros.
    fn set_len(&mut self, len: usize) {
        if len < self.data.len() {
            self.preserve_durable_from(len);
        }
        self.data.resize(len, 0);
        self.written = self.written.min(len);
    }
}

#[derive(Default)]
struct State {
    /// Bumped by every crash; handles remember the epoch they were opened in.
    epoch: u64,
    /// The live namespace: normalized path → inode.
    files: BTreeMap<PathBuf, Inode>,
    /// The namespace as it would be found after a power loss.
    durable_files: BTreeMap<PathBuf, Inode>,
    /// Existing directories (the root and "" always exist and are not listed).
    dirs: BTreeSet<PathBuf>,
    /// Paths locked through [`FileSystem::lock`].
    locks: HashSet<PathBuf>,
    /// Directory renames (from, to) not yet made durable by syncing the directory holding
    /// `to`: until then a crash finds the files under `from`.
    pending_dir_renames: Vec<(PathBuf, PathBuf)>,
}

/// An in-memory filesystem that can simulate a power loss. Clones share the same files.
#[derive(Clone, Default)]
pub struct MemFileSystem {
    inner: Arc<Mutex<State>>,
}

/// Collapses `a//b`, `./a/./b` and trailing slashes so each file has one key (`.` alone
/// becomes "", the parent of bare relative names). `..` is kept as is: the engine never
/// produces it.
fn normalize(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// The directory holding `path` ("" for a bare relative name).
fn parent_of(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

/// An error of the kind the OS would give for `errno`, naming the path.
fn os_err(errno: i32, what: &str, path: &Path) -> io::Error {
    let os = io::Error::from_raw_os_error(errno);
    io::Error::new(os.kind(), format!("{what} {}: {os}", path.display()))
}

fn stale_handle() -> io::Error {
    io::Error::other("file handle opened before a simulated crash")
}

impl State {
    fn dir_exists(&self, dir: &Path) -> bool {
        dir.parent().is_none() || self.dirs.contains(dir)
    }

    /// Fails like the OS when `path`'s directory is missing or is a file.
    fn check_parent(&self, what: &str, path: &Path) -> io::Result<()> {
        let parent = parent_of(path);
        if self.files.contains_key(parent) {
            Err(os_err(libc::ENOTDIR, what, path))
        } else if !self.dir_exists(parent) {
            Err(os_err(libc::ENOENT, what, path))
        } else {
            Ok(())
        }
    }

    fn file(&self, what: &str, path: &Path) -> io::Result<Inode> {
        match self.files.get(path) {
            Some(inode) => Ok(inode.clone()),
            None if self.dirs.contains(path) => Err(os_err(libc::EISDIR, what, path)),
            None => Err(os_err(libc::ENOENT, what, path)),
        }
    }

    /// True if some file or directory lives directly in `dir`.
    fn has_children(&self, dir: &Path) -> bool {
        self.children(dir).next().is_some()
    }

    /// Direct children of `dir`, files and directories.
    fn children<'a>(&'a self, dir: &'a Path) -> impl Iterator<Item = &'a Path> + 'a {
        let files = self.files.keys().map(PathBuf::as_path);
        let dirs = self.dirs.iter().map(PathBuf::as_path);
        files.chain(dirs).filter(move |p| p.parent() == Some(dir))
    }

    /// Renames directory `from` (with everything under it) to `to`, which must not exist
    /// or be an empty directory, as rename(2) allows. Durable once `to`'s parent is synced.
    fn rename_dir(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        if from == to {
            return Ok(());
        }
        if to.starts_with(from) {
            return Err(os_err(libc::EINVAL, "renaming a directory into itself", to));
        }
        if self.files.contains_key(to) {
            return Err(os_err(libc::ENOTDIR, "renaming onto", to));
        }
        if self.dirs.contains(to) && self.has_children(to) {
            return Err(os_err(libc::ENOTEMPTY, "renaming onto", to));
        }
        self.check_parent("renaming onto", to)?;
        let files: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| p.starts_with(from))
            .cloned()
            .collect();
        for p in files {
            if let Some(inode) = self.files.remove(&p) {
                self.files.insert(rebase(&p, from, to), inode);
            }
        }
        let dirs: Vec<PathBuf> = self
            .dirs
            .iter()
            .filter(|d| d.starts_with(from))
            .cloned()
            .collect();
        for d in dirs {
            self.dirs.remove(&d);
            self.dirs.insert(rebase(&d, from, to));
        }
        self.pending_dir_renames
            .push((from.to_path_buf(), to.to_path_buf()));
        Ok(())
    }

    fn add_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        for d in dir.ancestors() {
            if d.parent().is_none() {
                break;
            }
            if self.files.contains_key(d) {
                return Err(os_err(libc::EEXIST, "creating directory", d));
            }
        }
        for d in dir.ancestors() {
            if d.parent().is_none() {
                break;
            }
            self.dirs.insert(d.to_path_buf());
        }
        Ok(())
    }
}

/// `path`, which lies under `from`, moved under `to`.
fn rebase(path: &Path, from: &Path, to: &Path) -> PathBuf {
    match path.strip_prefix(from) {
        Ok(rest) if rest.as_os_str().is_empty() => to.to_path_buf(),
        Ok(rest) => to.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

/// Makes durable the pending directory renames into `synced` (the directory whose entries
/// are being synced): the durable files under each old name move under the new one.
fn apply_dir_renames(
    pending: &mut Vec<(PathBuf, PathBuf)>,
    durable_files: &mut BTreeMap<PathBuf, Inode>,
    synced: &Path,
) {
    let (done, rest): (Vec<_>, Vec<_>) = std::mem::take(pending)
        .into_iter()
        .partition(|(_, to)| parent_of(to) == synced);
    *pending = rest;
    for (from, to) in done {
        let moved: Vec<PathBuf> = durable_files
            .keys()
            .filter(|p| p.starts_with(&from))
            .cloned()
            .collect();
        for p in moved {
            if let Some(inode) = durable_files.remove(&p) {
                durable_files.insert(rebase(&p, &from, &to), inode);
            }
        }
    }
}

/// A small deterministic PRNG (splitmix64); `rand` is only a dev-dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform-ish in `0..=max`.
    fn up_to(&mut self, max: usize) -> usize {
        (self.next() % (max as u64 + 1)) as usize
    }
}

impl MemFileSystem {
    /// An empty filesystem.
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulates a power loss: only durable directory entries survive, each with only its
    /// synced contents (a file whose entry is durable but whose data was never synced comes back
    /// empty). Every handle opened before the crash fails from now on, and all locks are freed.
    pub fn crash(&self) {
        self.crash_with(|_| 0);
    }

    /// Like [`crash`](Self::crash), but each surviving file whose unsynced data was only
    /// appended also keeps a random-length prefix of those appended bytes: a torn tail, as when
    /// some of the OS's dirty pages reached the disk. The same seed gives the same outcome.
    pub fn crash_keep_unsynced_prefix(&self, rng_seed: u64) {
        let mut rng = SplitMix64(rng_seed);
        self.crash_with(|unsynced| rng.up_to(unsynced));
    }

    /// `keep(n)` says how many of a file's `n` unsynced appended bytes survive.
    fn crash_with(&self, mut keep: impl FnMut(usize) -> usize) {
        let mut st = self.inner.lock();
        st.epoch += 1;
        st.locks.clear();
        // Renamed directories whose rename never became durable are back under their old
        // names (their files come back there from the durable namespace).
        for (from, to) in std::mem::take(&mut st.pending_dir_renames)
            .into_iter()
            .rev()
        {
            let moved: Vec<PathBuf> = st
                .dirs
                .iter()
                .filter(|d| d.starts_with(&to))
                .cloned()
                .collect();
            for d in moved {
                st.dirs.remove(&d);
                st.dirs.insert(rebase(&d, &to, &from));
            }
        }
        // Fresh inodes, so nothing a stale handle holds is part of the new state. Paths that
        // named one inode still share one (keyed by the old inode's address, alive meanwhile).
        let mut renewed: HashMap<usize, Inode> = HashMap::new();
        let mut files = BTreeMap::new();
        // BTreeMap order keeps the random draws deterministic for a given seed.
        for (path, inode) in &st.durable_files {
            let new = renewed
                .entry(Arc::as_ptr(inode) as usize)
                .or_insert_with(|| FileData::new(inode.lock().after_crash(&mut keep)))
                .clone();
            files.insert(path.clone(), new);
        }
        st.durable_files = files.clone();
        st.files = files;
        // A file that came back wins over a directory made at its path (or above it) since.
        let State { files, dirs, .. } = &mut *st;
        dirs.retain(|d| !d.ancestors().any(|a| files.contains_key(a)));
        let parents: Vec<PathBuf> = files.keys().map(|p| parent_of(p).to_path_buf()).collect();
        for dir in parents {
            // Fails only if a durable file sits where this file's parent directory goes (a
            // pathological remove/mkdir sequence); the file then simply has no listed parent.
            let _ = st.add_dir_all(&dir);
        }
    }

    /// Paths of all files in the live namespace, sorted.
    pub fn file_names(&self) -> Vec<PathBuf> {
        self.inner.lock().files.keys().cloned().collect()
    }

    /// Test helper: replaces (or creates) a file's contents, durably at once (data and
    /// directory entry), creating missing parent directories. Open handles see the new bytes.
    ///
    /// # Panics
    /// If `path` or one of its parents is an existing directory/file in the way.
    pub fn write_file_bytes(&self, path: impl AsRef<Path>, bytes: &[u8]) {
        let path = normalize(path.as_ref());
        let mut st = self.inner.lock();
        assert!(
            !st.dirs.contains(&path),
            "write_file_bytes: {} is a directory",
            path.display()
        );
        if let Err(e) = st.add_dir_all(parent_of(&path)) {
            panic!("write_file_bytes: {e}");
        }
        let inode = match st.files.get(&path) {
            Some(inode) => {
                let mut d = inode.lock();
                d.data = bytes.to_vec();
                d.written = bytes.len();
                d.sync();
                inode.clone()
            }
            None => FileData::new(bytes.to_vec()),
        };
        st.files.insert(path.clone(), inode.clone());
        st.durable_files.insert(path, inode);
    }

    /// Test helper: a file's current contents, or `None` if there is no such file.
    pub fn read_file_bytes(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        let path = normalize(path.as_ref());
        let st = self.inner.lock();
        let inode = st.files.get(&path)?;
        let data = inode.lock().data.clone();
        Some(data)
    }

    /// Creates or truncates `path` (`O_CREAT | O_TRUNC`) and opens it for writing.
    fn create_handle(&self, path: &Path) -> io::Result<Handle> {
        let path = normalize(path);
        let mut st = self.inner.lock();
        if st.dirs.contains(&path) || path.parent().is_none() {
            return Err(os_err(libc::EISDIR, "creating", &path));
        }
        st.check_parent("creating", &path)?;
        let inode = match st.files.get(&path) {
            Some(inode) => {
                // Like O_TRUNC: same inode, emptied; readers already open see it shrink.
                inode.lock().truncate();
                inode.clone()
            }
            None => {
                let inode = FileData::new(Vec::new());
                st.files.insert(path, inode.clone());
                inode
            }
        };
        Ok(self.handle(&st, inode))
    }

    fn handle(&self, st: &State, inode: Inode) -> Handle {
        Handle {
            fs: self.inner.clone(),
            inode,
            epoch: st.epoch,
        }
    }
}

/// What every open file holds: its inode and the epoch it was opened in.
struct Handle {
    fs: Arc<Mutex<State>>,
    inode: Inode,
    epoch: u64,
}

impl Handle {
    /// Runs `f` on the file's data unless a crash happened since the handle was opened. The
    /// state lock is held throughout, so a crash cannot slip in between check and access.
    fn with<R>(&self, f: impl FnOnce(&mut FileData) -> R) -> io::Result<R> {
        let st = self.fs.lock();
        if st.epoch != self.epoch {
            return Err(stale_handle());
        }
        let mut d = self.inode.lock();
        Ok(f(&mut d))
    }
}

struct MemWritableFile {
    h: Handle,
    len: u64,
}

impl WritableFile for MemWritableFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let at = usize::try_from(self.len).map_err(|_| os_err_plain(libc::EFBIG))?;
        // At the end of what was appended, which is before the file's end if space was
        // preallocated.
        self.h.with(|d| d.write_at(at, data))?;
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        // Appends already reached the "OS"; still refuse stale handles, like every call.
        self.h.with(|_| ())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.h.with(FileData::sync)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn preallocate(&mut self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| os_err_plain(libc::EFBIG))?;
        self.h.with(|d| {
            if d.data.len() < len {
                d.set_len(len);
            }
        })
    }

    fn trim_preallocated(&mut self) -> io::Result<()> {
        let len = usize::try_from(self.len).map_err(|_| os_err_plain(libc::EFBIG))?;
        self.h.with(|d| {
            if d.data.len() > len {
                d.set_len(len);
            }
        })
    }
}

struct MemRandomAccessFile {
    h: Handle,
}

impl RandomAccessFile for MemRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.h.with(|d| {
            let len = d.data.len() as u64;
            match offset.checked_add(buf.len() as u64) {
                Some(end) if end <= len => {
                    buf.copy_from_slice(&d.data[offset as usize..end as usize]);
                    Ok(())
                }
                _ => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "read of {} bytes at offset {offset} past end of file ({len} bytes)",
                        buf.len()
                    ),
                )),
            }
        })?
    }

    fn len(&self) -> io::Result<u64> {
        self.h.with(|d| d.data.len() as u64)
    }
}

/// A file opened for direct IO: the kernel's alignment rules are enforced, so a misaligned
/// transfer fails in tests as it would on a real device. Reads are checked in 512-byte units
/// (the smallest logical block, which the reader then uses), writes in the 4 KiB blocks the
/// writer promises on any device.
struct MemDirectFile {
    h: Handle,
}

/// The read unit [`MemDirectFile`] reports and checks.
const MEM_DIRECT_READ_UNIT: usize = 512;

impl super::direct::AlignedFile for MemDirectFile {
    fn read_aligned(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let unit = MEM_DIRECT_READ_UNIT;
        check_alignment(offset, buf.len(), buf.as_ptr() as usize, unit)?;
        self.h.with(|d| {
            let start = usize::try_from(offset).map_or(d.data.len(), |o| o.min(d.data.len()));
            let n = buf.len().min(d.data.len() - start);
            buf[..n].copy_from_slice(&d.data[start..start + n]);
            n
        })
    }

    fn write_aligned(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        let unit = super::DIRECT_IO_ALIGNMENT;
        check_alignment(offset, buf.len(), buf.as_ptr() as usize, unit)?;
        let offset = usize::try_from(offset).map_err(|_| os_err_plain(libc::EFBIG))?;
        self.h.with(|d| d.write_at(offset, buf))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| os_err_plain(libc::EFBIG))?;
        self.h.with(|d| d.set_len(len))
    }

    fn sync_data(&self) -> io::Result<()> {
        self.h.with(FileData::sync)
    }

    fn len(&self) -> io::Result<u64> {
        self.h.with(|d| d.data.len() as u64)
    }

    fn read_unit(&self) -> usize {
        MEM_DIRECT_READ_UNIT
    }
}

fn os_err_plain(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

struct MemSequentialFile {
    h: Handle,
    pos: usize,
}

impl SequentialFile for MemSequentialFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let pos = self.pos;
        let n = self.h.with(|d| {
            let start = pos.min(d.data.len());
            let n = buf.len().min(d.data.len() - start);
            buf[..n].copy_from_slice(&d.data[start..start + n]);
            n
        })?;
        self.pos += n;
        Ok(n)
    }
}

struct MemFileLock {
    fs: Arc<Mutex<State>>,
    path: PathBuf,
    epoch: u64,
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        let mut st = self.fs.lock();
        // After a crash the lock was already freed and may belong to someone new.
        if st.epoch == self.epoch {
            st.locks.remove(&self.path);
        }
    }
}

impl FileSystem for MemFileSystem {
    fn name(&self) -> &str {
        "MemFileSystem"
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let h = self.create_handle(path)?;
        Ok(Box::new(MemWritableFile { h, len: 0 }))
    }

    fn open_random_access(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let path = normalize(path);
        let st = self.inner.lock();
        let inode = st.file("opening", &path)?;
        let h = self.handle(&st, inode);
        Ok(Arc::new(MemRandomAccessFile { h }))
    }

    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let h = self.create_handle(path)?;
        Ok(Box::new(DirectWriter::new(MemDirectFile { h })?))
    }

    fn open_random_access_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let path = normalize(path);
        let st = self.inner.lock();
        let inode = st.file("opening", &path)?;
        let h = self.handle(&st, inode);
        Ok(Arc::new(DirectReader::new(MemDirectFile { h })))
    }

    fn open_sequential(&self, path: &Path) -> io::Result<Box<dyn SequentialFile>> {
        let path = normalize(path);
        let st = self.inner.lock();
        let inode = st.file("opening", &path)?;
        let h = self.handle(&st, inode);
        Ok(Box::new(MemSequentialFile { h, pos: 0 }))
    }

    fn exists(&self, path: &Path) -> bool {
        let path = normalize(path);
        let st = self.inner.lock();
        st.files.contains_key(&path) || st.dir_exists(&path)
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        let path = normalize(path);
        let st = self.inner.lock();
        let inode = st.file("reading metadata of", &path)?;
        let len = inode.lock().data.len() as u64;
        Ok(len)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let dir = normalize(dir);
        let st = self.inner.lock();
        if st.files.contains_key(&dir) {
            return Err(os_err(libc::ENOTDIR, "listing", &dir));
        }
        if !st.dir_exists(&dir) {
            return Err(os_err(libc::ENOENT, "listing", &dir));
        }
        Ok(st
            .children(&dir)
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let dir = normalize(dir);
        self.inner.lock().add_dir_all(&dir)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut st = self.inner.lock();
        st.file("removing", &path)?;
        st.files.remove(&path);
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        let dir = normalize(dir);
        let mut st = self.inner.lock();
        if st.files.contains_key(&dir) {
            return Err(os_err(libc::ENOTDIR, "removing directory", &dir));
        }
        if !st.dirs.contains(&dir) {
            let errno = if dir.parent().is_none() {
                libc::EBUSY
            } else {
                libc::ENOENT
            };
            return Err(os_err(errno, "removing directory", &dir));
        }
        if st.has_children(&dir) {
            return Err(os_err(libc::ENOTEMPTY, "removing directory", &dir));
        }
        st.dirs.remove(&dir);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        let mut st = self.inner.lock();
        if st.dirs.contains(&from) {
            return st.rename_dir(&from, &to);
        }
        let inode = st.file("renaming", &from)?;
        if st.dirs.contains(&to) || to.parent().is_none() {
            return Err(os_err(libc::EISDIR, "renaming onto", &to));
        }
        st.check_parent("renaming onto", &to)?;
        if from != to {
            st.files.remove(&from);
            st.files.insert(to, inode);
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let dir = normalize(dir);
        let mut st = self.inner.lock();
        if st.files.contains_key(&dir) {
            return Err(os_err(libc::ENOTDIR, "syncing directory", &dir));
        }
        if !st.dir_exists(&dir) {
            return Err(os_err(libc::ENOENT, "syncing directory", &dir));
        }
        let State {
            files,
            durable_files,
            pending_dir_renames,
            ..
        } = &mut *st;
        apply_dir_renames(pending_dir_renames, durable_files, &dir);
        durable_files.retain(|p, _| parent_of(p) != dir);
        for (p, inode) in files.iter() {
            if parent_of(p) == dir {
                durable_files.insert(p.clone(), inode.clone());
            }
        }
        Ok(())
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let path = normalize(path);
        let mut st = self.inner.lock();
        // Like open(O_CREAT) without O_TRUNC: make sure the file exists, keep its contents.
        if !st.files.contains_key(&path) {
            if st.dirs.contains(&path) || path.parent().is_none() {
                return Err(os_err(libc::EISDIR, "opening lock file", &path));
            }
            st.check_parent("opening lock file", &path)?;
            st.files.insert(path.clone(), FileData::new(Vec::new()));
        }
        if !st.locks.insert(path.clone()) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is already locked", path.display()),
            ));
        }
        Ok(Box::new(MemFileLock {
            fs: self.inner.clone(),
            path,
            epoch: st.epoch,
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    /// A filesystem with directory `/db`, made durable.
    fn fs_with_db() -> MemFileSystem {
        let fs = MemFileSystem::new();
        fs.create_dir_all(&p("/db")).unwrap();
        fs
    }

    fn write(fs: &MemFileSystem, path: &str, data: &[u8], sync: bool) {
        let mut f = fs.create(&p(path)).unwrap();
        f.append(data).unwrap();
        if sync {
            f.sync().unwrap();
        }
    }

    #[test]
    fn write_flush_read_back() {
        let fs = fs_with_db();
        let mut f = fs.create(&p("/db/a")).unwrap();
        assert!(f.is_empty());
        f.append(b"hello ").unwrap();
        f.append(b"world").unwrap();
        f.flush().unwrap();
        assert_eq!(f.len(), 11);
        assert_eq!(fs.file_size(&p("/db/a")).unwrap(), 11);
        assert_eq!(fs.read_to_vec(&p("/db/a")).unwrap(), b"hello world");
        let r = fs.open_random_access(&p("/db/a")).unwrap();
        let mut buf = [0u8; 5];
        r.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"world");
        // Readers see later appends (same inode).
        f.append(b"!").unwrap();
        assert_eq!(r.len().unwrap(), 12);
        // Paths are normalized.
        assert!(fs.exists(&p("/db//./a")));
        assert_eq!(fs.read_file_bytes("/db/a").unwrap(), b"hello world!");
    }

    #[test]
    fn direct_files_keep_synced_bytes_through_a_crash_and_refuse_misaligned_io() {
        let fs = fs_with_db();
        let mut f = fs.create_direct(&p("/db/t")).unwrap();
        f.append(b"synced").unwrap();
        f.sync().unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        // The padded last block is rewritten with new bytes after the sync: the durable
        // contents must not change with it.
        f.append(b"-not-synced").unwrap();
        f.flush().unwrap();
        assert_eq!(fs.read_file_bytes("/db/t").unwrap(), b"synced-not-synced");
        fs.crash();
        assert_eq!(fs.read_file_bytes("/db/t").unwrap(), b"synced");

        let r = fs.open_random_access_direct(&p("/db/t")).unwrap();
        let mut buf = [0u8; 3];
        r.read_exact_at(2, &mut buf).unwrap();
        assert_eq!(&buf, b"nce");
        // Underneath, the reader's transfers follow the kernel's rules, which are enforced:
        let raw = {
            let st = fs.inner.lock();
            let inode = st.files[&p("/db/t")].clone();
            MemDirectFile {
                h: fs.handle(&st, inode),
            }
        };
        let mut unaligned = vec![0u8; 100];
        let e = super::super::direct::AlignedFile::read_aligned(&raw, 0, &mut unaligned);
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn read_past_eof() {
        let fs = fs_with_db();
        write(&fs, "/db/a", b"0123456789", true);
        let r = fs.open_random_access(&p("/db/a")).unwrap();
        let mut buf = [0u8; 4];
        for off in [7, 11, u64::MAX - 1] {
            let err = r.read_exact_at(off, &mut buf).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        }
        r.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"6789");
        let mut s = fs.open_sequential(&p("/db/a")).unwrap();
        let mut out = Vec::new();
        loop {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, b"0123456789");
    }

    #[test]
    fn errors_like_the_os() {
        let fs = fs_with_db();
        let missing = p("/db/nope");
        assert!(!fs.exists(&missing));
        for err in [
            fs.open_random_access(&missing).err().unwrap(),
            fs.open_sequential(&missing).err().unwrap(),
            fs.file_size(&missing).unwrap_err(),
            fs.remove_file(&missing).unwrap_err(),
            fs.list_dir(&missing).unwrap_err(),
            fs.rename(&missing, &p("/db/x")).unwrap_err(),
            fs.create(&p("/nodir/a")).err().unwrap(),
            fs.sync_dir(&p("/nodir")).unwrap_err(),
        ] {
            assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        }
        write(&fs, "/db/f", b"x", false);
        assert!(fs.create_dir_all(&p("/db/f/sub")).is_err());
        assert!(fs.create(&p("/db/f/sub")).is_err());
        assert!(fs.list_dir(&p("/db/f")).is_err());
        assert!(fs.create(&p("/db")).is_err());
        assert!(fs.remove_file(&p("/db")).is_err());
    }

    #[test]
    fn rename_over_existing() {
        let fs = fs_with_db();
        write(&fs, "/db/a", b"new", true);
        write(&fs, "/db/b", b"old contents", true);
        let r = fs.open_random_access(&p("/db/a")).unwrap();
        fs.rename(&p("/db/a"), &p("/db/b")).unwrap();
        assert!(!fs.exists(&p("/db/a")));
        assert_eq!(fs.read_to_vec(&p("/db/b")).unwrap(), b"new");
        assert_eq!(fs.file_names(), [p("/db/b")]);
        // The handle follows the inode.
        assert_eq!(r.len().unwrap(), 3);
    }

    #[test]
    fn list_dir_and_remove() {
        let fs = MemFileSystem::new();
        fs.create_dir_all(&p("/x/y")).unwrap();
        fs.create_dir_all(&p("/x/y")).unwrap();
        write(&fs, "/x/y/f1", b"1", false);
        write(&fs, "/x/y/f2", b"2", false);
        write(&fs, "/x/top", b"3", false);
        let mut names = fs.list_dir(&p("/x/y")).unwrap();
        names.sort();
        assert_eq!(names, ["f1", "f2"]);
        let mut names = fs.list_dir(&p("/x")).unwrap();
        names.sort();
        assert_eq!(names, ["top", "y"]);
        assert_eq!(fs.list_dir(&p("/")).unwrap(), ["x"]);
        let err = fs.remove_dir(&p("/x/y")).unwrap_err();
        assert_eq!(
            err.kind(),
            io::Error::from_raw_os_error(libc::ENOTEMPTY).kind()
        );
        fs.remove_file(&p("/x/y/f1")).unwrap();
        fs.remove_file(&p("/x/y/f2")).unwrap();
        assert!(fs.list_dir(&p("/x/y")).unwrap().is_empty());
        fs.remove_dir(&p("/x/y")).unwrap();
        assert!(!fs.exists(&p("/x/y")));
        assert_eq!(fs.list_dir(&p("/x")).unwrap(), ["top"]);
    }

    #[test]
    fn lock_twice_would_block_until_dropped() {
        let fs = fs_with_db();
        let guard = fs.lock(&p("/db/LOCK")).unwrap();
        assert!(fs.exists(&p("/db/LOCK")));
        let err = fs.lock(&p("/db/LOCK")).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        // A clone is the same filesystem, so the same lock.
        let err = fs.clone().lock(&p("/db/./LOCK")).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        drop(guard);
        drop(fs.lock(&p("/db/LOCK")).unwrap());
    }

    #[test]
    fn crash_releases_locks_and_old_guards_do_not_free_new_ones() {
        let fs = fs_with_db();
        let old = fs.lock(&p("/db/LOCK")).unwrap();
        fs.crash();
        let new = fs.lock(&p("/db/LOCK")).unwrap();
        drop(old);
        let err = fs.lock(&p("/db/LOCK")).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        drop(new);
    }

    #[test]
    fn crash_drops_unsynced_data() {
        let fs = fs_with_db();
        let mut f = fs.create(&p("/db/wal")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        f.append(b"synced").unwrap();
        f.sync().unwrap();
        f.append(b" unsynced").unwrap();
        f.flush().unwrap();
        write(&fs, "/db/never_synced", b"data", false);
        fs.sync_dir(&p("/db")).unwrap();
        fs.crash();
        assert_eq!(fs.read_file_bytes("/db/wal").unwrap(), b"synced");
        // Entry durable, data never synced: the file is there but empty.
        assert_eq!(fs.read_file_bytes("/db/never_synced").unwrap(), b"");
    }

    /// A file written with preallocated space: "abc", 10 bytes preallocated, "def"; then, if
    /// `synced`, a sync, "gh", 16 bytes preallocated and "ijklmn" (all unsynced).
    fn preallocated_file(synced: bool) -> (MemFileSystem, Box<dyn WritableFile>) {
        let fs = fs_with_db();
        let mut f = fs.create(&p("/db/wal")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        f.append(b"abc").unwrap();
        f.preallocate(10).unwrap();
        f.preallocate(4).unwrap(); // never shrinks
        f.append(b"def").unwrap();
        if synced {
            f.sync().unwrap();
            f.append(b"gh").unwrap();
            f.preallocate(16).unwrap();
            f.append(b"ijklmn").unwrap();
        }
        (fs, f)
    }

    /// Preallocated space: appends go after the appended bytes, not after the zeros; a crash
    /// keeps the size a sync made durable, zeros where nothing synced was written, and any
    /// torn prefix of the writes since.
    #[test]
    fn preallocated_space_is_written_in_place_and_survives_a_crash_as_zeros() {
        let (fs, f) = preallocated_file(false);
        assert_eq!(f.len(), 6);
        assert_eq!(fs.read_file_bytes("/db/wal").unwrap(), b"abcdef\0\0\0\0");
        // Neither the size nor "def" is durable yet.
        fs.crash();
        assert_eq!(fs.read_file_bytes("/db/wal").unwrap(), b"");
        let kept: [fn(usize) -> usize; 3] = [|_| 0, |_| 2, |unsynced| unsynced];
        let wants: [&[u8]; 3] = [b"abcdef\0\0\0\0", b"abcdefgh\0\0", b"abcdefghijklmn"];
        for (keep, want) in kept.into_iter().zip(wants) {
            let (fs, f) = preallocated_file(true);
            assert_eq!(f.len(), 14);
            fs.crash_with(keep);
            assert_eq!(fs.read_file_bytes("/db/wal").unwrap(), want);
        }
        let (fs, mut f) = preallocated_file(true);
        f.sync().unwrap();
        fs.crash();
        assert_eq!(
            fs.read_file_bytes("/db/wal").unwrap(),
            b"abcdefghijklmn\0\0"
        );
    }

    #[test]
    fn crash_drops_file_whose_dir_was_not_synced() {
        let fs = fs_with_db();
        write(&fs, "/db/a", b"data", true);
        fs.crash();
        assert!(!fs.exists(&p("/db/a")));
        assert!(fs.file_names().is_empty());
        // The directory itself survives (directories are durable when created).
        assert!(fs.list_dir(&p("/db")).unwrap().is_empty());
    }

    #[test]
    fn crash_keeps_file_after_sync_and_sync_dir() {
        let fs = fs_with_db();
        write(&fs, "/db/a", b"data", true);
        fs.sync_dir(&p("/db")).unwrap();
        fs.crash();
        assert_eq!(fs.read_file_bytes("/db/a").unwrap(), b"data");
        assert_eq!(fs.file_names(), [p("/db/a")]);
        // After a crash everything present is durable: a second crash changes nothing.
        fs.crash();
        assert_eq!(fs.read_file_bytes("/db/a").unwrap(), b"data");
    }

    #[test]
    fn crash_undoes_rename_without_sync_dir() {
        let fs = fs_with_db();
        write(&fs, "/db/CURRENT", b"MANIFEST-1\n", true);
        write(&fs, "/db/CURRENT.tmp", b"MANIFEST-2\n", true);
        fs.sync_dir(&p("/db")).unwrap();
        fs.rename(&p("/db/CURRENT.tmp"), &p("/db/CURRENT")).unwrap();
        assert_eq!(fs.read_file_bytes("/db/CURRENT").unwrap(), b"MANIFEST-2\n");
        fs.crash();
        assert_eq!(fs.read_file_bytes("/db/CURRENT").unwrap(), b"MANIFEST-1\n");
        assert_eq!(
            fs.read_file_bytes("/db/CURRENT.tmp").unwrap(),
            b"MANIFEST-2\n"
        );
        // With the directory sync the rename sticks.
        fs.rename(&p("/db/CURRENT.tmp"), &p("/db/CURRENT")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        fs.crash();
        assert_eq!(fs.read_file_bytes("/db/CURRENT").unwrap(), b"MANIFEST-2\n");
        assert_eq!(fs.file_names(), [p("/db/CURRENT")]);
    }

    #[test]
    fn directory_rename_is_durable_once_its_parent_is_synced() {
        let fs = fs_with_db();
        fs.create_dir_all(&p("/db/copy.tmp/sub")).unwrap();
        write(&fs, "/db/copy.tmp/a", b"aa", true);
        write(&fs, "/db/copy.tmp/sub/b", b"bb", true);
        fs.sync_dir(&p("/db/copy.tmp")).unwrap();
        fs.sync_dir(&p("/db/copy.tmp/sub")).unwrap();
        fs.rename(&p("/db/copy.tmp"), &p("/db/copy")).unwrap();
        assert!(!fs.exists(&p("/db/copy.tmp")));
        assert_eq!(fs.read_file_bytes("/db/copy/sub/b").unwrap(), b"bb");
        let mut names = fs.list_dir(&p("/db/copy")).unwrap();
        names.sort();
        assert_eq!(names, ["a", "sub"]);
        // Without syncing /db the rename is lost: the files are back under the old name.
        fs.crash();
        assert!(!fs.exists(&p("/db/copy")));
        assert_eq!(fs.read_file_bytes("/db/copy.tmp/a").unwrap(), b"aa");
        assert_eq!(fs.read_file_bytes("/db/copy.tmp/sub/b").unwrap(), b"bb");
        fs.rename(&p("/db/copy.tmp"), &p("/db/copy")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        fs.crash();
        assert!(!fs.exists(&p("/db/copy.tmp")));
        assert_eq!(fs.file_names(), [p("/db/copy/a"), p("/db/copy/sub/b")]);
    }

    #[test]
    fn directory_rename_refuses_a_nonempty_target_and_moving_into_itself() {
        let fs = fs_with_db();
        fs.create_dir_all(&p("/db/x")).unwrap();
        fs.create_dir_all(&p("/db/y")).unwrap();
        write(&fs, "/db/y/f", b"", false);
        let full = fs.rename(&p("/db/x"), &p("/db/y")).unwrap_err();
        assert!(full.to_string().contains("not empty"), "{full}");
        let into = fs.rename(&p("/db/x"), &p("/db/x/inner")).unwrap_err();
        assert!(into.to_string().contains("into itself"), "{into}");
        // An empty target directory is replaced.
        fs.remove_file(&p("/db/y/f")).unwrap();
        fs.rename(&p("/db/x"), &p("/db/y")).unwrap();
        assert!(!fs.exists(&p("/db/x")));
        assert!(fs.exists(&p("/db/y")));
    }

    #[test]
    fn crash_undoes_remove_without_sync_dir() {
        let fs = fs_with_db();
        write(&fs, "/db/a", b"data", true);
        fs.sync_dir(&p("/db")).unwrap();
        fs.remove_file(&p("/db/a")).unwrap();
        fs.crash();
        assert_eq!(fs.read_file_bytes("/db/a").unwrap(), b"data");
        fs.remove_file(&p("/db/a")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        fs.crash();
        assert!(!fs.exists(&p("/db/a")));
    }

    #[test]
    fn crash_undoes_unsynced_truncation() {
        let fs = fs_with_db();
        write(&fs, "/db/a", b"old", true);
        fs.sync_dir(&p("/db")).unwrap();
        write(&fs, "/db/a", b"new but not synced", false);
        fs.crash();
        assert_eq!(fs.read_file_bytes("/db/a").unwrap(), b"old");
        write(&fs, "/db/a", b"new", true);
        fs.crash_keep_unsynced_prefix(7);
        assert_eq!(fs.read_file_bytes("/db/a").unwrap(), b"new");
    }

    #[test]
    fn stale_handles_cannot_change_files() {
        let fs = fs_with_db();
        let mut w = fs.create(&p("/db/a")).unwrap();
        w.append(b"before").unwrap();
        w.sync().unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        let r = fs.open_random_access(&p("/db/a")).unwrap();
        let mut s = fs.open_sequential(&p("/db/a")).unwrap();
        fs.crash();
        assert!(w.append(b" after").is_err());
        assert!(w.flush().is_err());
        assert!(w.sync().is_err());
        drop(w);
        let mut buf = [0u8; 1];
        assert!(r.read_exact_at(0, &mut buf).is_err());
        assert!(r.len().is_err());
        assert!(s.read(&mut buf).is_err());
        assert_eq!(fs.read_file_bytes("/db/a").unwrap(), b"before");
        // A new handle works.
        let mut w = fs.create(&p("/db/b")).unwrap();
        w.append(b"x").unwrap();
        let r = fs.open_random_access(&p("/db/a")).unwrap();
        assert_eq!(r.len().unwrap(), 6);
    }

    #[test]
    fn crash_keep_unsynced_prefix_keeps_synced_data_and_a_prefix() {
        let mut lens = BTreeSet::new();
        for seed in 0..40 {
            let fs = fs_with_db();
            let mut w = fs.create(&p("/db/wal")).unwrap();
            fs.sync_dir(&p("/db")).unwrap();
            w.append(b"synced|").unwrap();
            w.sync().unwrap();
            w.append(b"0123456789").unwrap();
            fs.crash_keep_unsynced_prefix(seed);
            let got = fs.read_file_bytes("/db/wal").unwrap();
            let full = b"synced|0123456789";
            assert!(
                got.len() >= 7 && full.starts_with(&got),
                "seed {seed}: {got:?}"
            );
            lens.insert(got.len());

            // Same seed, same outcome.
            let fs2 = fs_with_db();
            let mut w = fs2.create(&p("/db/wal")).unwrap();
            fs2.sync_dir(&p("/db")).unwrap();
            w.append(b"synced|").unwrap();
            w.sync().unwrap();
            w.append(b"0123456789").unwrap();
            fs2.crash_keep_unsynced_prefix(seed);
            assert_eq!(fs2.read_file_bytes("/db/wal").unwrap(), got);
        }
        assert!(lens.len() > 3, "tails should vary: {lens:?}");
    }

    #[test]
    fn renamed_file_shared_by_two_durable_names_stays_one_file() {
        // Rename across directories with only the target dir synced: both names survive (the
        // source dir's removal was not durable) and they still name one file.
        let fs = MemFileSystem::new();
        fs.create_dir_all(&p("/a")).unwrap();
        fs.create_dir_all(&p("/b")).unwrap();
        write(&fs, "/a/f", b"data", true);
        fs.sync_dir(&p("/a")).unwrap();
        fs.rename(&p("/a/f"), &p("/b/f")).unwrap();
        fs.sync_dir(&p("/b")).unwrap();
        fs.crash();
        assert_eq!(fs.file_names(), [p("/a/f"), p("/b/f")]);
        let mut w = fs.create(&p("/a/f")).unwrap();
        w.append(b"z").unwrap();
        assert_eq!(fs.read_file_bytes("/b/f").unwrap(), b"z");
    }

    #[test]
    fn relative_paths_and_current_dir() {
        let fs = MemFileSystem::new();
        write(&fs, "a", b"x", true);
        assert!(fs.exists(&p("./a")));
        assert_eq!(fs.list_dir(&p(".")).unwrap(), ["a"]);
        fs.sync_dir(&p(".")).unwrap();
        fs.crash();
        assert_eq!(fs.read_file_bytes("./a").unwrap(), b"x");
    }

    #[test]
    fn test_helpers_are_durable_and_visible_to_open_handles() {
        let fs = MemFileSystem::new();
        fs.write_file_bytes("/d/e/f", b"abc");
        let r = fs.open_random_access(&p("/d/e/f")).unwrap();
        fs.write_file_bytes("/d/e/f", b"xyz!");
        let mut buf = [0u8; 4];
        r.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"xyz!");
        fs.crash();
        assert_eq!(fs.read_file_bytes("/d/e/f").unwrap(), b"xyz!");
        assert_eq!(fs.read_file_bytes("/d/e/g"), None);
        assert_eq!(fs.list_dir(&p("/d")).unwrap(), ["e"]);
    }

    #[test]
    fn usable_as_shared_dyn_filesystem_across_threads() {
        let mem = MemFileSystem::new();
        let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
        fs.create_dir_all(&p("/db")).unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let fs = fs.clone();
                s.spawn(move || {
                    let path = PathBuf::from(format!("/db/{t}"));
                    let mut w = fs.create(&path).unwrap();
                    for _ in 0..1000 {
                        w.append(&[t as u8; 10]).unwrap();
                    }
                    w.sync().unwrap();
                });
            }
        });
        fs.sync_dir(&p("/db")).unwrap();
        mem.crash();
        assert_eq!(mem.file_names().len(), 4);
        assert_eq!(fs.file_size(&p("/db/3")).unwrap(), 10_000);
    }
}
