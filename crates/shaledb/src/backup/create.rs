//! `BackupEngine::create_backup`: pin the database's files (`Db::live_files`, shared with
//! checkpoints), store each table and blob file in `shared/` unless an identical one is
//! there, copy the WALs and write the MANIFEST into `private/<id>/`, sync all of it, and
//! only then write the meta file that makes the backup exist.

use super::meta::{self, BackupFile, BackupMeta};
use super::{copy, BackupEngine, PRIVATE, SHARED, TEMP_SUFFIX};
use crate::checksum::crc32c;
use crate::db::{Db, ImmutableFile, LiveFiles};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::version::filename;
use std::collections::HashSet;
use std::path::Path;

impl BackupEngine {
    /// Backs up `db` and returns the new backup's id. Tables and blob files the directory
    /// already holds (same name, size and CRC32C) are not copied again; the WALs are copied
    /// as far as they are written and a new MANIFEST describes the state when the call
    /// began, so restoring gives every write acknowledged before the call (and possibly some
    /// made during it: a prefix of the writes, never a hole). Writes, flushes and
    /// compactions go on meanwhile; the database deletes no file until the copy is done.
    /// A backup that fails, or is cut short by a crash, is not listed and leaves the
    /// earlier backups intact.
    ///
    /// Writes made with `WriteOptions::disable_wal` are in a backup only once flushed.
    pub fn create_backup(&self, db: &Db) -> Result<u64> {
        let _g = self.op.lock();
        let id = self.backup_ids()?.last().map_or(1, |&n| n + 1);
        let res = self.write_backup(db, id);
        if res.is_err() {
            // Not a backup: its meta file (if renamed in before a failed directory sync)
            // goes, then whatever it wrote.
            if self.fs.remove_file(&self.meta_path(id)).is_ok() {
                let _ = self.fs.sync_dir(&self.dir.join(super::META));
            }
            let _ = self.collect_garbage();
        }
        res.map(|()| id)
    }

    fn write_backup(&self, db: &Db, id: u64) -> Result<()> {
        let private = self.private_dir(id);
        if self.fs.exists(&private) {
            // Left by a failed backup whose clean-up failed too.
            self.remove_dir_all(&private)?;
        }
        self.fs
            .create_dir_all(&private)
            .map_err(|e| Error::io(format!("creating {}", private.display()), e))?;
        let live = db.live_files()?;
        let timestamp = live.now_secs();
        let mut files = self.share_files(&live)?;
        files.extend(self.copy_private(&live, &private)?);
        // Everything is copied: the database may delete files again.
        drop(live);
        self.sync_dir(&private)?;
        self.sync_dir(&self.dir.join(PRIVATE))?;
        self.sync_dir(&self.dir.join(SHARED))?;
        self.write_meta(&BackupMeta {
            id,
            timestamp,
            files,
        })
    }

    /// Stores every table and blob file of `live` in `shared/` (unless there already).
    fn share_files(&self, live: &LiveFiles<'_>) -> Result<Vec<BackupFile>> {
        let mut present: HashSet<String> = self
            .list_names(&self.dir.join(SHARED))?
            .into_iter()
            .collect();
        live.immutable_files()
            .into_iter()
            .map(|f| self.share(live.fs(), &f, &mut present))
            .collect()
    }

    /// Stores one table or blob file in `shared/`. Only a file with the same number and size
    /// already there costs a read (for its checksum); a new one is copied once, computing the
    /// checksum as it goes, into a temporary name renamed when synced. A file whose
    /// checksum is not the one the MANIFEST records is damaged: the backup fails with
    /// `Corruption` naming it, rather than keep the damage.
    fn share(
        &self,
        src: &dyn FileSystem,
        file: &ImmutableFile,
        present: &mut HashSet<String>,
    ) -> Result<BackupFile> {
        let (path, size) = (&file.path, file.size);
        let name = db_file_name(path)?;
        let shared = self.dir.join(SHARED);
        let (stem, ext) = name.split_once('.').unwrap_or((&name, ""));
        let (prefix, suffix) = (format!("{stem}_"), format!("_{size}.{ext}"));
        if present
            .iter()
            .any(|n| n.starts_with(&prefix) && n.ends_with(&suffix))
        {
            let crc32c = copy::checksum(src, path, size, self.backup_limiter.as_ref())?;
            file.check_checksum(crc32c)?;
            let f = BackupFile {
                name: name.clone(),
                size,
                crc32c,
            };
            let stored = shared.join(f.shared_name());
            // A stored file of another size is damaged: it is replaced below.
            if present.contains(&f.shared_name()) && self.fs.file_size(&stored).ok() == Some(size) {
                return Ok(f);
            }
        }
        let tmp = shared.join(format!("{name}{TEMP_SUFFIX}"));
        let limiter = self.backup_limiter.as_ref();
        let exact = copy::Extent::Exact(size);
        let (_, crc32c) = copy::copy(src, path, exact, &*self.fs, &tmp, limiter)?;
        // The damaged copy stays under its temporary name, which the clean-up removes.
        file.check_checksum(crc32c)?;
        let f = BackupFile { name, size, crc32c };
        let to = shared.join(f.shared_name());
        self.fs
            .rename(&tmp, &to)
            .map_err(|e| Error::io(format!("renaming {} to {}", tmp.display(), to.display()), e))?;
        present.insert(f.shared_name());
        Ok(f)
    }

    /// Copies the WALs and writes the MANIFEST of `live` into `private`; the MANIFEST last.
    /// The blob files the WALs refer to (`Options::separate_blobs_at_write`), listed after
    /// them, are copied after them into `shared/` (under their contents' checksum, as
    /// tables are), since a restore looks for every blob file there.
    fn copy_private(&self, live: &LiveFiles<'_>, private: &Path) -> Result<Vec<BackupFile>> {
        let mut out = Vec::new();
        for wal in live.wals() {
            if filename::parse_file_name(&db_file_name(&wal)?)
                .is_some_and(|(kind, _)| kind == filename::FileKind::Blob)
            {
                out.push(self.share_unfinished(live.fs(), &wal)?);
                continue;
            }
            let name = db_file_name(&wal)?;
            let to = private.join(&name);
            let limiter = self.backup_limiter.as_ref();
            let extent = live.wal_extent(&wal);
            let (size, crc32c) = copy::copy(live.fs(), &wal, extent, &*self.fs, &to, limiter)?;
            out.push(BackupFile { name, size, crc32c });
        }
        let name = filename::manifest_name(live.manifest_number());
        let bytes = live.manifest_bytes();
        copy::write_file(&*self.fs, &private.join(&name), &bytes)?;
        out.push(BackupFile {
            name,
            size: bytes.len() as u64,
            crc32c: crc32c(&bytes),
        });
        Ok(out)
    }

    /// Stores in `shared/` what is written so far of a blob file still being written (no
    /// checksum is recorded for it: the one of the bytes copied names the copy).
    fn share_unfinished(&self, src: &dyn FileSystem, path: &Path) -> Result<BackupFile> {
        let name = db_file_name(path)?;
        let tmp = self.dir.join(SHARED).join(format!("{name}{TEMP_SUFFIX}"));
        let limiter = self.backup_limiter.as_ref();
        let written = copy::Extent::AsWritten;
        let (size, crc32c) = copy::copy(src, path, written, &*self.fs, &tmp, limiter)?;
        let f = BackupFile { name, size, crc32c };
        let to = self.dir.join(SHARED).join(f.shared_name());
        self.fs
            .rename(&tmp, &to)
            .map_err(|e| Error::io(format!("renaming {} to {}", tmp.display(), to.display()), e))?;
        Ok(f)
    }

    /// Writes the meta file atomically (temporary name, sync, rename, directory sync): the
    /// backup exists from the rename on.
    fn write_meta(&self, meta: &BackupMeta) -> Result<()> {
        let meta_dir = self.dir.join(super::META);
        let tmp = meta_dir.join(format!("{}{TEMP_SUFFIX}", meta.id));
        copy::write_file(&*self.fs, &tmp, &meta.encode())?;
        let to = self.meta_path(meta.id);
        self.fs
            .rename(&tmp, &to)
            .map_err(|e| Error::io(format!("renaming {} to {}", tmp.display(), to.display()), e))?;
        self.sync_dir(&meta_dir)
    }
}

/// The name of a database file, as a meta file entry holds it.
fn db_file_name(path: &Path) -> Result<String> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    if !meta::valid_name(&name) {
        return Err(Error::InvalidArgument(format!(
            "cannot back up {}: not a database file name",
            path.display()
        )));
    }
    Ok(name)
}
