//! Reading values from one blob file.

use super::BlobRef;
use crate::error::Result;
use crate::fs::RandomAccessFile;
use std::path::PathBuf;
use std::sync::Arc;

/// An open blob file.
pub(crate) struct BlobFileReader {
    _private: (),
}

impl BlobFileReader {
    /// Opens blob file `number` (`file_size` bytes, as the MANIFEST records), checking its
    /// header and footer.
    pub(crate) fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        number: u64,
        file_size: u64,
    ) -> Result<BlobFileReader> {
        let _ = (file, path, number, file_size);
        unimplemented!("blob file open")
    }

    /// Reads the value `r` points at, stored under `user_key`: one read of the record, its
    /// checksum verified if `verify_checksums`, its key compared with `user_key` always, and
    /// decompressed. Any mismatch is `Error::Corruption` naming the file and offset.
    pub(crate) fn read(
        &self,
        user_key: &[u8],
        r: &BlobRef,
        verify_checksums: bool,
    ) -> Result<Vec<u8>> {
        let _ = (user_key, r, verify_checksums);
        unimplemented!("blob read")
    }
}
