//! `Db::verify_checksums`: re-read every table of the current version and check every block.

use super::Db;
use crate::error::{Error, Result};
use crate::sst::Table;
use crate::version::filename;

impl Db {
    /// Re-reads every table of every column family's current version from disk, bypassing the table and block
    /// caches, and checks it: the file size recorded in the MANIFEST, the footer, the index,
    /// metaindex, filter and properties blocks, every data block's checksum and decoding, key
    /// order, and the entry count recorded in the MANIFEST. Returns the first problem found,
    /// as `Error::Corruption` naming the file and offset (or `Error::Io` if a file cannot be
    /// read). Tables are checked one at a time; reads and writes go on meanwhile.
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
            let size = inner
                .fs
                .file_size(&path)
                .map_err(|e| Error::io(format!("reading the size of {}", path.display()), e))?;
            if size != f.file_size {
                return Err(Error::corruption(
                    &path,
                    size.min(f.file_size),
                    format!(
                        "table is {size} bytes but the MANIFEST records {}",
                        f.file_size
                    ),
                ));
            }
            let file = inner
                .fs
                .open_random_access(&path)
                .map_err(|e| Error::io(format!("opening table {}", path.display()), e))?;
            let table = Table::open(file, path.clone(), f.number, f.file_size, None)?;
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
        Ok(())
    }
}
