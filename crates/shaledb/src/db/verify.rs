//! `Db::verify_checksums`: re-read every table and blob file of the current version and check
//! every block and record. `Db::verify_file_checksums`: re-read each of them whole and compare
//! its CRC-32C with the one the MANIFEST recorded when the file was written.

use super::checkpoint::{check_file_checksum, immutable_files_of};
use super::Db;
use crate::error::{Error, Result};
use crate::sst::Table;
use crate::version::{filename, Version};
use std::path::PathBuf;
use std::sync::Arc;

/// A live table or blob file and the whole-file checksum the MANIFEST records for it
/// ([`Db::live_file_checksums`]; RocksDB's `GetLiveFilesChecksumInfo`, whose method name is
/// always CRC-32C here).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveFileChecksum {
    /// The file: `NNNNNN.sst` (a table) or `NNNNNN.blob` in the database directory.
    pub path: PathBuf,
    /// Its size in bytes, as recorded.
    pub size: u64,
    /// CRC-32C of all of its bytes, computed as it was written; `None` for a file written by
    /// an engine that recorded none (checks skip it).
    pub crc32c: Option<u32>,
}

impl Db {
    /// Re-reads every table and blob file of every column family's current version from
    /// disk, bypassing the table and block caches, and checks it: the file size recorded in
    /// the MANIFEST, the footer, the index, metaindex, filter and properties blocks, every
    /// data block's checksum and decoding, key order, and the entry count recorded in the
    /// MANIFEST; for blob files, the header, footer, every record's checksum and value, and
    /// the record count. Returns the first problem found, as `Error::Corruption` naming the
    /// file and offset (or `Error::Io` if a file cannot be read). Files are checked one at a
    /// time; reads and writes go on meanwhile.
    ///
    /// Checking that the files are the bytes that were written, whatever they hold, is
    /// [`Db::verify_file_checksums`]: it reads each file once, in order, and compares one
    /// checksum, where this method decodes every block and record.
    pub fn verify_checksums(&self) -> Result<()> {
        let inner = &self.inner;
        let versions = self.current_versions();
        for f in versions.iter().flat_map(|v| v.files.iter().flatten()) {
            let path = filename::table_file(&inner.dir, f.number);
            super::open::check_file_size(&*inner.fs, &path, f.file_size, "table")?;
            let file = inner
                .fs
                .open_random_access(&path)
                .map_err(|e| Error::io(format!("opening table {}", path.display()), e))?;
            let table = Table::open(file, path.clone(), f.footer_number(), f.file_size, None)?;
            table.verify_checksums()?;
            let entries = table.properties().num_entries;
            if entries != f.num_entries {
                return Err(Error::corruption(
                    &path,
                    0,
                    format!(
                        "table holds {entries} entries but the MANIFEST records {}",
                        f.num_entries
                    ),
                ));
            }
        }
        for v in &versions {
            for b in &v.blob_files {
                verify_blob_file(inner, &b.meta.addition)?;
            }
        }
        Ok(())
    }

    /// Reads every live table and blob file of every column family whole, from disk through
    /// the database's file system (not the caches), and compares the CRC-32C of its bytes
    /// with the one the MANIFEST recorded when the file was written (flush, compaction, blob
    /// garbage collection, repair) or ingested. A file of another size, or whose checksum
    /// differs, is `Error::Corruption` naming the file (offset 0) and, for a mismatch, both
    /// checksums; a file that cannot be read is `Error::Io`. Files with no recorded checksum
    /// (written by an engine before file checksums) are skipped.
    ///
    /// Unlike [`Db::verify_checksums`], which decodes each file and checks each block's and
    /// record's own checksum, this only asks whether a file is still the bytes written, so it
    /// also catches damage in bytes no block checksum covers, at the cost of one sequential
    /// read per file. RocksDB's `DB::VerifyFileChecksums` is the same check; its checksum
    /// function is configurable (`file_checksum_gen_factory`, off by default), ours is always
    /// CRC-32C.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// db.flush().unwrap();
    /// db.verify_file_checksums().unwrap();
    /// ```
    pub fn verify_file_checksums(&self) -> Result<()> {
        let versions = self.current_versions();
        let fs = &*self.inner.fs;
        for f in immutable_files_of(&self.inner.dir, &versions) {
            if f.checksum.is_none() {
                continue;
            }
            let actual = crate::backup::copy::checksum(fs, &f.path, f.size, None)?;
            check_file_checksum(&f.path, f.checksum, actual)?;
        }
        Ok(())
    }

    /// Every live table and blob file of every column family, ascending by path, with the
    /// whole-file CRC-32C the MANIFEST records for it (what [`Db::verify_file_checksums`]
    /// compares against). Nothing is read from the files.
    ///
    /// ```
    /// use shaledb::{Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// db.flush().unwrap();
    /// let files = db.live_file_checksums();
    /// assert_eq!(files.len(), 1);
    /// let bytes = std::fs::read(&files[0].path).unwrap();
    /// assert_eq!(files[0].size, bytes.len() as u64);
    /// assert!(files[0].crc32c.is_some());
    /// ```
    pub fn live_file_checksums(&self) -> Vec<LiveFileChecksum> {
        immutable_files_of(&self.inner.dir, &self.current_versions())
            .into_iter()
            .map(|f| LiveFileChecksum {
                path: f.path,
                size: f.size,
                crc32c: f.checksum,
            })
            .collect()
    }

    /// Every column family's current version (pinned, with its files, while held).
    fn current_versions(&self) -> Vec<Arc<Version>> {
        let st = self.inner.state.lock();
        st.families
            .values()
            .map(|f| f.data.super_version.load().version.clone())
            .collect()
    }
}

/// Re-reads blob file `a` from disk: its size, header and footer, every record's checksum,
/// every value's decompression, and the record count the MANIFEST recorded.
fn verify_blob_file(inner: &super::DbInner, a: &crate::version::BlobFileAddition) -> Result<()> {
    let path = filename::blob_file(&inner.dir, a.number);
    super::open::check_file_size(&*inner.fs, &path, a.file_size, "blob file")?;
    let file = inner
        .fs
        .open_random_access(&path)
        .map_err(|e| Error::io(format!("opening blob file {}", path.display()), e))?;
    let reader = crate::blob::BlobFileReader::open(file, path.clone(), a.number, a.file_size)?;
    let mut records = 0u64;
    for record in reader.records() {
        let (key, r) = record?;
        reader.read(&key, &r, true)?;
        records += 1;
    }
    if records != a.blob_count {
        return Err(Error::corruption(
            &path,
            0,
            format!(
                "blob file holds {records} records but the MANIFEST records {}",
                a.blob_count
            ),
        ));
    }
    Ok(())
}
