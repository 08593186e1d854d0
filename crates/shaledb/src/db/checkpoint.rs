//! `Db::checkpoint`: an openable copy of the database made while writes go on.
//!
//! Under the state mutex: pin every family's current version (its tables and blob files then
//! stay on disk), note the live WALs, take a new MANIFEST number and the edits that recreate
//! the state, and pause file deletion (so no WAL the copy needs is unlinked). Then, without
//! the mutex: into `<dir>.tmp`, hard-link (or copy) the tables and blob files, copy the WALs as
//! far as they are written (a record cut at the end is a torn tail, which recovery drops),
//! write the MANIFEST and CURRENT, sync everything; then rename `<dir>.tmp` to `dir`, sync its
//! parent, and resume deletions. A crash leaves either the whole checkpoint or no `dir`.
//!
//! `Db::checkpoint_opt` may flush every family first (RocksDB's `log_size_for_flush`). When
//! no family holds unflushed data at the moment the state is taken, the WALs hold nothing the
//! tables lack, and the copy carries none.

use super::{Db, DbInner};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};
use crate::log::LogWriter;
use crate::version::{filename, set::set_current_file, Version, VersionEdit};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What a checkpoint copies, taken at one moment under the state mutex.
struct CheckpointState {
    /// Every family's version, pinned: their files are not deleted while held.
    versions: Vec<Arc<Version>>,
    /// The WALs recovery of the copy replays (those at or above the oldest log number).
    wals: Vec<u64>,
    /// The WAL being written and how far its records reached when the state was taken:
    /// copied that far, since past it lie preallocated zeros that later records may fill
    /// while the copy reads (the other WALs were cut back to their records and are done).
    live_wal: Option<(u64, u64)>,
    /// The blob files the memtables wrote with their values (`separate_blobs_at_write`),
    /// which the WALs' references point into.
    wal_blobs: Vec<u64>,
    manifest_number: u64,
    edits: Vec<VersionEdit>,
}

/// How [`Db::checkpoint_opt`] makes a checkpoint (RocksDB's `CreateCheckpoint` arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointOptions {
    /// Flush every column family first when the live write-ahead logs total at least this many
    /// bytes: 0 always flushes, `u64::MAX` (the default) never does. A checkpoint made right
    /// after a flush carries the data in tables, which are linked rather than copied, and no
    /// write-ahead log unless writes arrived between the flush and the copy.
    pub log_size_for_flush: u64,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions {
            log_size_for_flush: u64::MAX,
        }
    }
}

impl Db {
    /// Makes an openable, consistent copy of the database in `dir`, which must not exist:
    /// tables and blob files are hard links where the file system allows them (copies
    /// otherwise, e.g. across file systems), the write-ahead logs are copied as far as they
    /// are written (none when no family holds unflushed writes), and a new MANIFEST and
    /// CURRENT describe the state at the moment the checkpoint began. Writes, flushes and
    /// compactions go on meanwhile; file deletion waits until the copy is done. Opening `dir`
    /// gives every write acknowledged before the call, and possibly some made during it
    /// (RocksDB's `Checkpoint::CreateCheckpoint`). As in RocksDB the copy is built in `dir`
    /// with `.tmp` appended and renamed to `dir` when complete: a checkpoint cut short by a
    /// crash leaves no `dir`, only the `.tmp` directory, which the next checkpoint into `dir`
    /// removes.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// db.checkpoint(dir.path().join("copy")).unwrap();
    /// drop(db);
    /// let copy = Db::open(dir.path().join("copy"), Options::default()).unwrap();
    /// assert_eq!(copy.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    /// ```
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<()> {
        self.checkpoint_opt(dir, &CheckpointOptions::default())
    }

    /// [`Db::checkpoint`] with options: with [`CheckpointOptions::log_size_for_flush`] it
    /// flushes every column family first when the write-ahead logs have grown that large, so
    /// the copy holds its data in (linked) tables instead of copied logs.
    ///
    /// ```
    /// use shaledb::{CheckpointOptions, Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// // Flush first whatever the logs' size: the copy carries no write-ahead log.
    /// let always = CheckpointOptions { log_size_for_flush: 0 };
    /// db.checkpoint_opt(dir.path().join("copy"), &always).unwrap();
    /// let names = std::fs::read_dir(dir.path().join("copy")).unwrap();
    /// assert!(names.flatten().all(|e| !e.file_name().to_string_lossy().ends_with(".log")));
    /// drop(db);
    /// let copy = Db::open(dir.path().join("copy"), Options::default()).unwrap();
    /// assert_eq!(copy.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    /// ```
    pub fn checkpoint_opt(&self, dir: impl AsRef<Path>, opts: &CheckpointOptions) -> Result<()> {
        let inner = &self.inner;
        let dir = dir.as_ref();
        // A copy of an instance that pins nothing on the primary's side could miss files.
        inner.check_writable("a checkpoint")?;
        if inner.fs.exists(dir) {
            return Err(Error::InvalidArgument(format!(
                "the checkpoint directory {} already exists; give one that does not",
                dir.display()
            )));
        }
        if inner.live_wal_bytes() >= opts.log_size_for_flush {
            inner.flush_every_family()?;
        }
        let staging = staging_dir(dir);
        if inner.fs.exists(&staging) {
            // Left by a checkpoint to the same directory that a crash cut short.
            remove_dir_contents(&*inner.fs, &staging)
                .map_err(|e| Error::io(format!("removing {}", staging.display()), e))?;
        }
        let live = self.live_files()?;
        let res = write_checkpoint(&live, &staging, dir);
        drop(live);
        if res.is_err() {
            // A half-made checkpoint is not a checkpoint.
            let _ = remove_dir_contents(&*inner.fs, &staging);
            let _ = remove_dir_contents(&*inner.fs, dir);
        }
        res
    }

    /// The files of the database's current state, pinned until the result is dropped (see
    /// [`LiveFiles`]): what checkpoints and backups copy.
    pub(crate) fn live_files(&self) -> Result<LiveFiles<'_>> {
        let state = take_state(&self.inner)?;
        Ok(LiveFiles {
            inner: &self.inner,
            state,
        })
    }
}

impl DbInner {
    /// Bytes written to the WALs not yet known to be obsolete.
    fn live_wal_bytes(&self) -> u64 {
        let st = self.state.lock();
        st.live_wals.iter().map(|&(_, bytes)| bytes).sum()
    }

    /// Flushes every column family's memtables and waits (families dropped meanwhile are
    /// skipped).
    fn flush_every_family(&self) -> Result<()> {
        let ids: Vec<u32> = self.state.lock().families.keys().copied().collect();
        for id in ids {
            self.flush_and_wait(id)?;
        }
        Ok(())
    }
}

/// A consistent set of the database's files, taken at one moment: every family's tables and
/// blob files (their versions pinned, so they stay on disk), the WALs recovery of a copy
/// replays, and the MANIFEST records that describe it. File deletion is paused while this
/// lives (so no listed WAL is unlinked) and resumes when it is dropped.
pub(crate) struct LiveFiles<'a> {
    inner: &'a DbInner,
    state: CheckpointState,
}

impl LiveFiles<'_> {
    /// The database's file system (to read the files with).
    pub(crate) fn fs(&self) -> &dyn FileSystem {
        &*self.inner.fs
    }

    /// The database's clock, in seconds since the Unix epoch.
    pub(crate) fn now_secs(&self) -> u64 {
        self.inner.opts.clock.now_secs()
    }

    /// Every table and blob file with the size and checksum its version records, ascending
    /// by path.
    pub(crate) fn immutable_files(&self) -> Vec<ImmutableFile> {
        immutable_files_of(&self.inner.dir, &self.state.versions)
    }

    /// How much of `path`, one of [`wals`](Self::wals), a copy takes.
    pub(crate) fn wal_extent(&self, path: &Path) -> crate::backup::copy::Extent {
        use crate::backup::copy::Extent;
        match self.state.live_wal {
            Some((n, len)) if *path == filename::log_file(&self.inner.dir, n) => {
                Extent::Prefix(len)
            }
            _ => Extent::AsWritten,
        }
    }

    /// The WALs a copy needs, oldest first, then the blob files their records refer to
    /// (`Options::separate_blobs_at_write`): copied in this order, the WAL being written as
    /// far as its records reached when the state was taken ([`wal_extent`](Self::wal_extent)),
    /// the others as far as they are written when read (a blob record cut at the end is never
    /// referenced by a copied WAL record), so every reference a copied record holds points
    /// into copied bytes.
    pub(crate) fn wals(&self) -> Vec<PathBuf> {
        let dir = &self.inner.dir;
        let wals = self.state.wals.iter().map(|&n| filename::log_file(dir, n));
        let blobs = self
            .state
            .wal_blobs
            .iter()
            .map(|&n| filename::blob_file(dir, n));
        wals.chain(blobs).collect()
    }

    /// The number of the copy's MANIFEST (taken from the database's counter).
    pub(crate) fn manifest_number(&self) -> u64 {
        self.state.manifest_number
    }

    /// The copy's MANIFEST: log records of the edits that recreate the state.
    pub(crate) fn manifest_bytes(&self) -> Vec<u8> {
        let bytes = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let mut w = LogWriter::new(Box::new(VecFile(bytes.clone())));
        for e in &self.state.edits {
            let mut record = Vec::new();
            e.encode(&mut record);
            // Appending to memory cannot fail.
            let _ = w.add_record(&record);
        }
        let _ = w.flush();
        drop(w);
        let out = std::mem::take(&mut *bytes.lock());
        out
    }
}

/// Every table and blob file of `versions` (files in `dir`) with the size and checksum its
/// version records, ascending by path, each once.
pub(crate) fn immutable_files_of(dir: &Path, versions: &[Arc<Version>]) -> Vec<ImmutableFile> {
    let mut out = BTreeMap::new();
    for v in versions {
        for f in v.files.iter().flatten() {
            let path = filename::table_file(dir, f.number);
            out.insert(path, (f.file_size, f.file_checksum));
        }
        for b in &v.blob_files {
            let a = &b.meta.addition;
            let path = filename::blob_file(dir, a.number);
            out.insert(path, (a.file_size, a.file_checksum));
        }
    }
    out.into_iter()
        .map(|(path, (size, checksum))| ImmutableFile {
            path,
            size,
            checksum,
        })
        .collect()
}

/// A table or blob file of [`LiveFiles`], as its version records it.
pub(crate) struct ImmutableFile {
    pub path: PathBuf,
    pub size: u64,
    /// The CRC-32C of the whole file the MANIFEST records (`None`: unknown).
    pub checksum: Option<u32>,
}

impl ImmutableFile {
    /// `Corruption` naming the file if `actual` (the CRC-32C of its bytes as just read) is not
    /// the checksum recorded for it; `Ok` when they match or none is recorded.
    pub(crate) fn check_checksum(&self, actual: u32) -> Result<()> {
        check_file_checksum(&self.path, self.checksum, actual)
    }
}

/// `Corruption` naming `path` (offset 0) and both checksums if the CRC-32C of its bytes
/// (`actual`) differs from the one the MANIFEST records (`recorded`; `None`: unknown, so
/// nothing to compare).
pub(crate) fn check_file_checksum(path: &Path, recorded: Option<u32>, actual: u32) -> Result<()> {
    match recorded {
        Some(want) if want != actual => Err(Error::corruption(
            path,
            0,
            format!(
                "whole-file CRC-32C is {actual:#010x} but the MANIFEST records {want:#010x}: \
                 the file changed after it was written"
            ),
        )),
        _ => Ok(()),
    }
}

impl Drop for LiveFiles<'_> {
    fn drop(&mut self) {
        self.inner.obsolete.resume();
    }
}

/// A writable file in memory (the MANIFEST a copy gets, before it is written out).
struct VecFile(Arc<parking_lot::Mutex<Vec<u8>>>);

impl WritableFile for VecFile {
    fn append(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.0.lock().extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0.lock().len() as u64
    }
}

/// The state to copy; deletions are paused when this returns Ok (the caller resumes them).
fn take_state(inner: &DbInner) -> Result<CheckpointState> {
    let mut st = inner.state.lock();
    if let Some(e) = &st.bg_error {
        return Err(e.duplicate());
    }
    let manifest_number = st.versions.new_file_number();
    let versions: Vec<Arc<Version>> = st
        .families
        .keys()
        .map(|&id| st.versions.current(id))
        .collect();
    let oldest_log = st
        .versions
        .families()
        .values()
        .map(|f| f.log_number())
        .min()
        .unwrap_or(0);
    // With every memtable empty, each WAL record is already in a table: the copy needs no WAL
    // (a write in flight is not acknowledged yet, so leaving it out is allowed).
    let unflushed = st
        .families
        .values()
        .any(|f| !f.mem.is_empty() || !f.imms.is_empty());
    let wals = st
        .live_wals
        .iter()
        .map(|&(n, _)| n)
        .filter(|&n| unflushed && n >= oldest_log)
        .collect();
    let wal_blobs = match unflushed {
        true => st
            .families
            .values()
            .flat_map(|f| std::iter::once(&f.mem).chain(f.imms.iter()))
            .filter_map(|m| m.write_time_blobs())
            .flat_map(|b| b.file_numbers())
            .collect(),
        false => Vec::new(),
    };
    let mut edits = st.versions.checkpoint_edits();
    if !unflushed {
        // Log number 0: the copy replays whatever WALs it has (none) instead of requiring
        // the one a log number names; its first open starts a WAL and records its number.
        for e in &mut edits {
            if e.log_number.is_some() {
                e.log_number = Some(0);
            }
        }
    }
    // Under the state mutex, so no rotation moves on meanwhile; the WAL lock waits for a
    // group being written (its record is not acknowledged yet either way).
    let live_wal = inner
        .wal
        .lock()
        .as_ref()
        .map(|w| (inner.wal_number.load(Ordering::Acquire), w.file_len()));
    inner.obsolete.pause();
    drop(st);
    Ok(CheckpointState {
        versions,
        wals,
        live_wal,
        wal_blobs,
        manifest_number,
        edits,
    })
}

/// Where a checkpoint into `dir` is built: `dir` with `.tmp` appended (as RocksDB names it).
fn staging_dir(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// Builds the copy in `staging`, complete and synced, then renames it to `dir`: a checkpoint
/// cut short leaves no `dir` at all (only `staging`, which the next checkpoint to `dir`
/// removes).
fn write_checkpoint(live: &LiveFiles<'_>, staging: &Path, dir: &Path) -> Result<()> {
    let fs = &live.inner.fs;
    let final_dir = dir;
    let dir = staging;
    fs.create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    for f in live.immutable_files() {
        link_or_copy(&**fs, &f, dir)?;
    }
    for path in live.wals() {
        let to = dir.join(path.file_name().unwrap_or_default());
        crate::backup::copy::copy(&**fs, &path, live.wal_extent(&path), &**fs, &to, None)?;
    }
    let path = filename::manifest_file(dir, live.manifest_number());
    let writing = |e| Error::io(format!("writing {}", path.display()), e);
    let mut file = fs.create(&path).map_err(writing)?;
    file.append(&live.manifest_bytes()).map_err(writing)?;
    file.sync().map_err(writing)?;
    set_current_file(fs, dir, live.manifest_number())?;
    fs.rename(dir, final_dir).map_err(|e| {
        let what = format!("renaming {} to {}", dir.display(), final_dir.display());
        Error::io(what, e)
    })?;
    // The directory's own entry: a checkpoint that returned Ok survives a power loss.
    let parent = match final_dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs.sync_dir(parent).map_err(|e| {
        let what = format!("syncing the directory that holds {}", final_dir.display());
        Error::io(what, e)
    })
}

/// Links `f` into `dir` under its own name, or copies it where links are refused; a copy
/// whose bytes do not match the file's recorded checksum is refused (`Corruption`), so a
/// damaged file never becomes part of a checkpoint that way.
fn link_or_copy(fs: &dyn FileSystem, f: &ImmutableFile, dir: &Path) -> Result<()> {
    let from = &f.path;
    let to = dir.join(from.file_name().unwrap_or_default());
    match fs.link(from, &to) {
        Ok(()) => Ok(()),
        Err(_) => f.check_checksum(copy_file_to(fs, from, &to)?),
    }
}

/// Copies `from` to `to` (as much of it as is written now, `backup::copy::copy`) and syncs
/// the copy; returns the CRC-32C of the bytes copied.
pub(super) fn copy_file_to(fs: &dyn FileSystem, from: &Path, to: &Path) -> Result<u32> {
    let written = crate::backup::copy::Extent::AsWritten;
    crate::backup::copy::copy(fs, from, written, fs, to, None).map(|(_, crc)| crc)
}

/// Removes what a failed checkpoint left in `dir`, and `dir` itself.
fn remove_dir_contents(fs: &dyn FileSystem, dir: &Path) -> std::io::Result<()> {
    for name in fs.list_dir(dir)? {
        fs.remove_file(&dir.join(name))?;
    }
    fs.remove_dir(dir)
}
