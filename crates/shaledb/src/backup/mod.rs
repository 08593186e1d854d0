//! `BackupEngine`: incremental backups of a database into a backup directory (RocksDB's
//! `BackupEngine`), on any [`FileSystem`].
//!
//! Layout of a backup directory:
//!
//! - `LOCK`: held while a `BackupEngine` has the directory open.
//! - `shared/<number>_<crc32c>_<size>.<sst|blob>`: tables and blob files, each stored once
//!   for every backup that has it (same name, size and checksum).
//! - `private/<id>/`: the WALs and the MANIFEST of backup `id`.
//! - `meta/<id>`: the list of backup `id`'s files with sizes and checksums (meta.rs,
//!   docs/format/backup.md), written last and atomically: a backup exists exactly when its
//!   meta file does. Anything else found (an interrupted backup, delete or purge) is removed
//!   when the engine opens and after each change.

pub(crate) mod copy;
mod create;
pub(crate) mod meta;

use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::rate_limiter::RateLimiter;
use crate::version::filename;
use meta::{BackupMeta, MAX_META_SIZE};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Incremental backups of ShaleDB databases in one directory.
///
/// Each backup is a complete, verifiable copy of a database at one moment; tables and blob
/// files already in the directory (same name, size and CRC32C) are not copied again. A backup
/// interrupted at any point (error, crash, power loss) is not listed and leaves earlier
/// backups intact; its leftovers are removed when the engine is next opened.
///
/// ```
/// use shaledb::{BackupEngine, Db, Options};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
/// db.put(b"k", b"v1").unwrap();
/// let backups = BackupEngine::open(dir.path().join("backups")).unwrap();
/// let first = backups.create_backup(&db).unwrap();
/// db.put(b"k", b"v2").unwrap();
/// backups.create_backup(&db).unwrap();
/// assert_eq!(backups.list().unwrap().len(), 2);
///
/// backups.verify(first).unwrap();
/// backups.restore(first, dir.path().join("restored")).unwrap();
/// let old = Db::open(dir.path().join("restored"), Options::default()).unwrap();
/// assert_eq!(old.get(b"k").unwrap().as_deref(), Some(&b"v1"[..]));
/// backups.purge_old(1).unwrap(); // keeps only the newest
/// ```
pub struct BackupEngine {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    /// Paces the reads of a backup (`BackupEngineOptions::backup_rate_limit`).
    backup_limiter: Option<RateLimiter>,
    /// Paces the copies of a restore (`BackupEngineOptions::restore_rate_limit`).
    restore_limiter: Option<RateLimiter>,
    /// One operation at a time: they all change the same directories.
    op: Mutex<()>,
    _lock: Box<dyn FileLock>,
}

/// How [`BackupEngine::open_opt`] opens a backup directory: the fields RocksDB's
/// `BackupEngineOptions` has that apply here.
///
/// The rate limits follow RocksDB's `backup_rate_limit` and `restore_rate_limit` (bytes per
/// second, 0 for none): a backup paces the bytes it reads from the database's tables, blob
/// files and WALs (copies, and the checksum reads of files already in the directory), a
/// restore the bytes it copies; `verify` and the small MANIFEST and meta files are not
/// paced. Unlike RocksDB, each engine has its own limiter (no `backup_rate_limiter` object
/// shared with other work), and the database's own flush and compaction limit
/// (`Options::rate_limit_bytes_per_sec`) is separate from both.
///
/// ```
/// use shaledb::{BackupEngine, BackupEngineOptions, Db, Options};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
/// db.put(b"k", b"v").unwrap();
/// let opts = BackupEngineOptions {
///     backup_rate_limit: 64 << 20,  // 64 MiB/s
///     restore_rate_limit: 64 << 20,
///     ..Default::default()
/// };
/// let backups = BackupEngine::open_opt(dir.path().join("backups"), opts).unwrap();
/// let id = backups.create_backup(&db).unwrap();
/// backups.restore(id, dir.path().join("restored")).unwrap();
/// ```
#[derive(Clone)]
pub struct BackupEngineOptions {
    /// The file system the backup directory is on (default: the real one). It need not be
    /// the database's: a database's files are read through its own file system.
    pub fs: Arc<dyn FileSystem>,
    /// Bytes per second a backup may read from the database; 0 (the default): no limit.
    pub backup_rate_limit: u64,
    /// Bytes per second a restore may copy; 0 (the default): no limit.
    pub restore_rate_limit: u64,
}

impl Default for BackupEngineOptions {
    fn default() -> Self {
        BackupEngineOptions {
            fs: crate::fs::default_fs(),
            backup_rate_limit: 0,
            restore_rate_limit: 0,
        }
    }
}

impl std::fmt::Debug for BackupEngineOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupEngineOptions")
            .field("fs", &self.fs.name())
            .field("backup_rate_limit", &self.backup_rate_limit)
            .field("restore_rate_limit", &self.restore_rate_limit)
            .finish()
    }
}

/// What [`BackupEngine::list`] says of one backup.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupInfo {
    /// The backup's id, for [`BackupEngine::verify`], [`restore`](BackupEngine::restore) and
    /// [`delete`](BackupEngine::delete). A new backup's id is one above the highest
    /// existing one.
    pub id: u64,
    /// When the backup was taken, in seconds since the Unix epoch (the database's
    /// [`Options::clock`](crate::Options::clock)).
    pub timestamp: u64,
    /// Files the backup consists of (tables, blob files, WALs, MANIFEST).
    pub file_count: usize,
    /// Their total size in bytes (shared files counted in full by every backup having them).
    pub size: u64,
}

impl std::fmt::Debug for BackupEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupEngine")
            .field("dir", &self.dir)
            .field("fs", &self.fs.name())
            .finish_non_exhaustive()
    }
}

impl BackupEngine {
    /// Opens (creating it if needed) the backup directory `dir` on the real file system.
    /// Fails with [`Error::Locked`] while another `BackupEngine` has it open.
    pub fn open(dir: impl AsRef<Path>) -> Result<BackupEngine> {
        Self::open_with_fs(dir, crate::fs::default_fs())
    }

    /// Like [`open`](Self::open), with `dir` on the file system `fs` (which need not be the
    /// database's: files are read through the database's own file system).
    pub fn open_with_fs(dir: impl AsRef<Path>, fs: Arc<dyn FileSystem>) -> Result<BackupEngine> {
        let opts = BackupEngineOptions {
            fs,
            ..Default::default()
        };
        Self::open_opt(dir, opts)
    }

    /// Like [`open`](Self::open), with options: the file system and rate limits (see
    /// [`BackupEngineOptions`]).
    pub fn open_opt(dir: impl AsRef<Path>, opts: BackupEngineOptions) -> Result<BackupEngine> {
        let BackupEngineOptions {
            fs,
            backup_rate_limit,
            restore_rate_limit,
        } = opts;
        let limiter = |rate: u64| (rate > 0).then(|| RateLimiter::new(rate, None));
        let dir = dir.as_ref().to_path_buf();
        let ctx = |what: &str, e| Error::io(format!("{what} {}", dir.display()), e);
        for sub in [META, SHARED, PRIVATE] {
            fs.create_dir_all(&dir.join(sub))
                .map_err(|e| ctx("creating", e))?;
        }
        fs.sync_dir(&dir).map_err(|e| ctx("syncing", e))?;
        let lock = fs.lock(&dir.join("LOCK")).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::Locked(dir.clone())
            } else {
                ctx("locking", e)
            }
        })?;
        let engine = BackupEngine {
            dir,
            fs,
            backup_limiter: limiter(backup_rate_limit),
            restore_limiter: limiter(restore_rate_limit),
            op: Mutex::new(()),
            _lock: lock,
        };
        engine.collect_garbage()?;
        Ok(engine)
    }

    /// Every backup, oldest first. A damaged meta file is `Corruption` naming it (remove that
    /// backup with [`delete`](Self::delete)).
    pub fn list(&self) -> Result<Vec<BackupInfo>> {
        let _g = self.op.lock();
        self.backup_ids()?
            .into_iter()
            .map(|id| {
                let m = self.read_meta(id)?;
                Ok(BackupInfo {
                    id,
                    timestamp: m.timestamp,
                    file_count: m.files.len(),
                    size: m.files.iter().map(|f| f.size).sum(),
                })
            })
            .collect()
    }

    /// Checks backup `id`: its meta file, and the presence, size and CRC32C of every file it
    /// lists (each file is read in full). Damage is `Corruption` naming the file.
    pub fn verify(&self, id: u64) -> Result<()> {
        let _g = self.op.lock();
        let meta = self.existing_meta(id)?;
        self.check_sizes(&meta)?;
        for f in &meta.files {
            let path = self.stored_path(id, f);
            let crc = copy::checksum(&*self.fs, &path, f.size, None)?;
            check_crc(&path, crc, f.crc32c)?;
        }
        Ok(())
    }

    /// Restores backup `id` into `db_dir`, which must not exist or be empty; then
    /// `Db::open(db_dir, ..)` opens the database as it was backed up. Every file's checksum
    /// is checked as it is copied: a damaged backup is `Corruption` naming the file, and
    /// nothing is left in `db_dir`. CURRENT is written last, so a restore cut short by a
    /// crash is never taken for a database with data missing (`Db::open` refuses tables or
    /// WALs without CURRENT); remove the directory and restore again.
    pub fn restore(&self, id: u64, db_dir: impl AsRef<Path>) -> Result<()> {
        let _g = self.op.lock();
        let db_dir = db_dir.as_ref();
        let meta = self.existing_meta(id)?;
        let existed = self.fs.exists(db_dir);
        if existed {
            let names = self
                .fs
                .list_dir(db_dir)
                .map_err(|e| Error::io(format!("listing {}", db_dir.display()), e))?;
            if !names.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "cannot restore into {}: the directory is not empty",
                    db_dir.display()
                )));
            }
        }
        self.check_sizes(&meta)?;
        let res = self.restore_files(id, &meta, db_dir);
        if res.is_err() {
            // Leave nothing half restored; the caller's empty directory stays.
            for f in &meta.files {
                let _ = self.fs.remove_file(&db_dir.join(&f.name));
            }
            let _ = self.fs.remove_file(&filename::current_file(db_dir));
            if !existed {
                let _ = self.fs.remove_dir(db_dir);
            }
        }
        res
    }

    /// Deletes backup `id` (even one whose meta file is damaged), and the shared files no
    /// other backup has.
    pub fn delete(&self, id: u64) -> Result<()> {
        let _g = self.op.lock();
        if !self.fs.exists(&self.meta_path(id)) {
            return Err(no_backup(id, &self.dir));
        }
        self.remove_metas(&[id])?;
        self.collect_garbage()
    }

    /// Deletes all but the `keep` newest backups, and the shared files no remaining backup
    /// has. A backup goes at once (its meta file first), so an interrupted purge leaves every
    /// backup it did not reach intact, and the next purge (or open) removes the rest.
    pub fn purge_old(&self, keep: usize) -> Result<()> {
        let _g = self.op.lock();
        let ids = self.backup_ids()?;
        let old = &ids[..ids.len().saturating_sub(keep)];
        if !old.is_empty() {
            self.remove_metas(old)?;
        }
        // Also when nothing is old: finishes an earlier purge that failed midway.
        self.collect_garbage()
    }

    fn restore_files(&self, id: u64, meta: &BackupMeta, db_dir: &Path) -> Result<()> {
        let manifest = meta.manifest_number().ok_or_else(|| {
            Error::corruption(self.meta_path(id), 0, "the backup lists no MANIFEST")
        })?;
        self.fs
            .create_dir_all(db_dir)
            .map_err(|e| Error::io(format!("creating {}", db_dir.display()), e))?;
        // Tables and blob files first (the meta file lists them first), so a restore cut short
        // leaves files that make `Db::open` refuse the directory rather than start empty.
        for f in &meta.files {
            let from = self.stored_path(id, f);
            let fs = &*self.fs;
            let to = db_dir.join(&f.name);
            let limiter = self.restore_limiter.as_ref();
            let (_, crc) = copy::copy(fs, &from, copy::Extent::Exact(f.size), fs, &to, limiter)?;
            check_crc(&from, crc, f.crc32c)?;
        }
        // Syncs the directory too, making every copied file's name durable.
        crate::version::set::set_current_file(&self.fs, db_dir, manifest)
    }

    /// Every file of `meta` is there with the size it records (cheap, before any copying).
    fn check_sizes(&self, meta: &BackupMeta) -> Result<()> {
        for f in &meta.files {
            let path = self.stored_path(meta.id, f);
            if !self.fs.exists(&path) {
                return Err(Error::corruption(path, 0, "file of the backup is missing"));
            }
            let size = self
                .fs
                .file_size(&path)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            if size != f.size {
                return Err(Error::corruption(
                    path,
                    size.min(f.size),
                    format!("file is {size} bytes, the backup recorded {}", f.size),
                ));
            }
        }
        Ok(())
    }

    /// Removes the meta files of `ids`, durably: the backups are gone once this returns.
    fn remove_metas(&self, ids: &[u64]) -> Result<()> {
        for &id in ids {
            let path = self.meta_path(id);
            self.fs
                .remove_file(&path)
                .map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
        }
        self.sync_dir(&self.dir.join(META))
    }

    /// Removes what no backup refers to: meta files being written, private directories of
    /// backups without a meta file, and shared files no meta file lists (none if a meta file
    /// cannot be read, since it may list them).
    fn collect_garbage(&self) -> Result<()> {
        let meta_dir = self.dir.join(META);
        let mut ids = HashSet::new();
        let mut removed = false;
        for name in self.list_names(&meta_dir)? {
            match parse_id(&name) {
                Some(id) => {
                    ids.insert(id);
                }
                None => removed |= self.remove(&meta_dir.join(name))?,
            }
        }
        if removed {
            self.sync_dir(&meta_dir)?;
        }
        let private_dir = self.dir.join(PRIVATE);
        let mut removed = false;
        for name in self.list_names(&private_dir)? {
            if !parse_id(&name).is_some_and(|id| ids.contains(&id)) {
                self.remove_dir_all(&private_dir.join(name))?;
                removed = true;
            }
        }
        if removed {
            self.sync_dir(&private_dir)?;
        }
        let mut referenced = HashSet::new();
        let mut all_readable = true;
        for &id in &ids {
            match self.read_meta(id) {
                Ok(m) => referenced.extend(
                    m.files
                        .iter()
                        .filter(|f| f.is_shared())
                        .map(|f| f.shared_name()),
                ),
                Err(_) => all_readable = false,
            }
        }
        let shared_dir = self.dir.join(SHARED);
        let mut removed = false;
        for name in self.list_names(&shared_dir)? {
            let temp = name.ends_with(TEMP_SUFFIX);
            if temp || (all_readable && !referenced.contains(&name)) {
                removed |= self.remove(&shared_dir.join(name))?;
            }
        }
        if removed {
            self.sync_dir(&shared_dir)?;
        }
        Ok(())
    }

    /// Ids of the backups (meta files present), ascending.
    fn backup_ids(&self) -> Result<Vec<u64>> {
        let mut ids: Vec<u64> = self
            .list_names(&self.dir.join(META))?
            .iter()
            .filter_map(|n| parse_id(n))
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// The meta file of backup `id`, which must exist (else `InvalidArgument`).
    fn existing_meta(&self, id: u64) -> Result<BackupMeta> {
        if !self.fs.exists(&self.meta_path(id)) {
            return Err(no_backup(id, &self.dir));
        }
        self.read_meta(id)
    }

    fn read_meta(&self, id: u64) -> Result<BackupMeta> {
        let path = self.meta_path(id);
        let reading = |e| Error::io(format!("reading {}", path.display()), e);
        let size = self.fs.file_size(&path).map_err(reading)?;
        if size > MAX_META_SIZE {
            return Err(Error::corruption(
                &path,
                0,
                format!("backup meta file of {size} bytes (at most {MAX_META_SIZE})"),
            ));
        }
        let data = self.fs.read_to_vec(&path).map_err(reading)?;
        let meta = BackupMeta::decode(&data, &path)?;
        if meta.id != id {
            return Err(Error::corruption(
                &path,
                12,
                format!("meta file of backup {id} names backup {}", meta.id),
            ));
        }
        Ok(meta)
    }

    /// Where file `f` of backup `id` is kept.
    fn stored_path(&self, id: u64, f: &meta::BackupFile) -> PathBuf {
        if f.is_shared() {
            self.dir.join(SHARED).join(f.shared_name())
        } else {
            self.private_dir(id).join(&f.name)
        }
    }

    fn meta_path(&self, id: u64) -> PathBuf {
        self.dir.join(META).join(id.to_string())
    }

    fn private_dir(&self, id: u64) -> PathBuf {
        self.dir.join(PRIVATE).join(id.to_string())
    }

    fn list_names(&self, dir: &Path) -> Result<Vec<String>> {
        self.fs
            .list_dir(dir)
            .map_err(|e| Error::io(format!("listing {}", dir.display()), e))
    }

    /// Removes a file; true if it was there.
    fn remove(&self, path: &Path) -> Result<bool> {
        match self.fs.remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(format!("removing {}", path.display()), e)),
        }
    }

    /// Removes a directory of files (a backup's private directory) and its files; a file
    /// where such a directory belongs is removed too.
    fn remove_dir_all(&self, dir: &Path) -> Result<()> {
        let names = match self.fs.list_dir(dir) {
            Ok(names) => names,
            Err(_) if self.fs.remove_file(dir).is_ok() => return Ok(()),
            Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
        };
        for name in names {
            self.remove(&dir.join(name))?;
        }
        self.fs
            .remove_dir(dir)
            .map_err(|e| Error::io(format!("removing {}", dir.display()), e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.fs
            .sync_dir(dir)
            .map_err(|e| Error::io(format!("syncing {}", dir.display()), e))
    }
}

const META: &str = "meta";
const SHARED: &str = "shared";
const PRIVATE: &str = "private";
/// The suffix of a file being written (a meta file or a shared file), renamed when complete.
const TEMP_SUFFIX: &str = ".tmp";

/// A backup id from a meta file's or private directory's name (decimal digits only).
fn parse_id(name: &str) -> Option<u64> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

fn no_backup(id: u64, dir: &Path) -> Error {
    Error::InvalidArgument(format!(
        "there is no backup {id} in {} (list() shows the backups)",
        dir.display()
    ))
}

fn check_crc(path: &Path, crc: u32, want: u32) -> Result<()> {
    if crc == want {
        return Ok(());
    }
    Err(Error::corruption(
        path,
        0,
        format!(
            "checksum mismatch: the file's CRC32C is {crc:08x}, the backup recorded {want:08x}"
        ),
    ))
}
