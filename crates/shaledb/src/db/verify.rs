//! `Db::verify_checksums`: re-read every table and blob file of the current version and check
//! every block and record.

use super::Db;
use crate::error::{Error, Result};
use crate::sst::Table;
use crate::version::filename;

impl Db {
    /// Re-reads every table and blob file of every column family's current version from
    /// disk, bypassing the table and block caches, and checks it: the file size recorded in
    /// the MANIFEST, the footer, the index, metaindex, filter and properties blocks, every
    /// data block's checksum and decoding, key order, and the entry count recorded in the
    /// MANIFEST; for blob files, the header, footer, every record's checksum and value, and
    /// the record count. Returns the first problem found, as `Error::Corruption` naming the
    /// file and offset (or `Error::Io` if a file cannot be read). Files are checked one at a
    /// time; reads and writes go on meanwhile.
    pub fn verify_checksums(&self) -> Result<()> {
        let inner = &self.inner;
        // The versions are pinned (and their files kept) while we hold them.
        let versions: Vec<_> = {
            let st = inner.state.lock();
            st.families
                .values()
                .map(|f| f.data.super_version.load().version.clone())
                .collect()
        };
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
