//! Writing one blob file.

use super::{BlobFileMeta, BlobRef};
use crate::compression::CompressionType;
use crate::error::Result;
use crate::fs::FileSystem;
use std::path::Path;
use std::sync::Arc;

/// Writes the records of one blob file, then its footer.
pub(crate) struct BlobFileBuilder {
    _private: (),
}

impl BlobFileBuilder {
    /// Creates blob file `number` in `dir` (for column family `cf_id`) and writes its header.
    /// `compression_level`: the codec's level (`None`: its default).
    pub(crate) fn create(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        number: u64,
        cf_id: u32,
        compression: CompressionType,
        compression_level: Option<i32>,
    ) -> Result<BlobFileBuilder> {
        let _ = (fs, dir, number, cf_id, compression, compression_level);
        unimplemented!("blob file builder")
    }

    /// Appends `value` stored under `user_key`; returns the reference to it.
    pub(crate) fn add(&mut self, user_key: &[u8], value: &[u8]) -> Result<BlobRef> {
        let _ = (user_key, value);
        unimplemented!("blob file add")
    }

    /// The file's number.
    pub(crate) fn number(&self) -> u64 {
        unimplemented!("blob file number")
    }

    /// Bytes written so far.
    pub(crate) fn file_size(&self) -> u64 {
        unimplemented!("blob file size")
    }

    /// Writes the footer and syncs the file (not its directory). The file is complete.
    pub(crate) fn finish(self) -> Result<BlobFileMeta> {
        unimplemented!("blob file finish")
    }
}
