//! The table cache: open table files (their index and filter in memory), bounded by
//! `max_open_files`, so a read does not reopen and re-parse a file every time.

use super::ShardedCache;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::sst::{BlockCache, Table};
use crate::version::filename;
use std::path::PathBuf;
use std::sync::Arc;

/// Open tables by file number.
pub struct TableCache {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    tables: ShardedCache<u64, Table>,
    block_cache: Arc<BlockCache>,
}

impl TableCache {
    /// A cache keeping at most `capacity` tables open.
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        capacity: usize,
        block_cache: Arc<BlockCache>,
    ) -> Self {
        TableCache {
            fs,
            dir,
            tables: ShardedCache::new(capacity, 4),
            block_cache,
        }
    }

    /// The table for file `number` of `file_size` bytes, opened if needed.
    pub fn get(&self, number: u64, file_size: u64) -> Result<Arc<Table>> {
        if let Some(t) = self.tables.get(&number) {
            return Ok(t);
        }
        let path = filename::table_file(&self.dir, number);
        let file = self
            .fs
            .open_random_access(&path)
            .map_err(|e| Error::io(format!("opening table {}", path.display()), e))?;
        let table = Arc::new(Table::open(
            file,
            path,
            number,
            file_size,
            Some(self.block_cache.clone()),
        )?);
        self.tables.insert(number, table.clone(), 1);
        Ok(table)
    }

    /// Forgets a table (its file is being deleted).
    pub fn evict(&self, number: u64) {
        self.tables.erase(&number);
    }
}
