//! `SstFileWriter`: writes a table outside any database, for `Db::ingest` (RocksDB's
//! `SstFileWriter`).
//!
//! The file is an ordinary table (docs/format/sstable.md) with three marks of an external
//! file: every key carries sequence number 0 (ingestion gives them their sequence number),
//! the footer names file number 0 (the file has no number yet), and the properties block
//! holds `shaledb.external_sst_file.version` = 1.

use crate::error::{Error, Result};
use crate::key::{append_internal_key, ValueKind};
use crate::options::Options;
use crate::sst::{TableBuilder, TableBuilderOptions};
use crate::CfOptions;
use std::path::{Path, PathBuf};

/// The external file format version `SstFileWriter` writes and `Db::ingest` reads.
pub(crate) const EXTERNAL_FILE_VERSION: u64 = 1;

/// What a finished [`SstFileWriter`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalFileInfo {
    /// The file written.
    pub path: PathBuf,
    /// The first user key in the file.
    pub smallest_key: Vec<u8>,
    /// The last user key in the file.
    pub largest_key: Vec<u8>,
    /// Entries (puts, merges and deletions).
    pub num_entries: u64,
    /// The file's length in bytes.
    pub file_size: u64,
}

/// Writes a sorted table file that [`Db::ingest`](crate::Db::ingest) adds to a database,
/// with the layout and codec of the options it is created with. Keys must be added in
/// strictly ascending order (bytewise, as the database sorts them), each at most once.
///
/// ```
/// use shaledb::{Db, IngestOptions, Options, SstFileWriter};
/// let dir = tempfile::tempdir().unwrap();
/// let opts = Options::default();
/// let mut w = SstFileWriter::create(&opts, dir.path().join("bulk.sst")).unwrap();
/// w.put(b"a", b"1").unwrap();
/// w.put(b"b", b"2").unwrap();
/// let info = w.finish().unwrap();
/// assert_eq!((info.smallest_key.as_slice(), info.num_entries), (&b"a"[..], 2));
///
/// let db = Db::open(dir.path().join("db"), opts).unwrap();
/// db.ingest(&[&info.path], &IngestOptions::default()).unwrap();
/// assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
/// ```
pub struct SstFileWriter {
    /// `None` once finished or failed.
    builder: Option<TableBuilder>,
    opts: Options,
    path: PathBuf,
    smallest: Vec<u8>,
    last: Vec<u8>,
    entries: u64,
    /// Reused internal-key buffer.
    ikey: Vec<u8>,
}

impl SstFileWriter {
    /// Creates (or truncates) the file at `path` through `opts.fs`, written as the default
    /// column family's tables are (block size, filter, index, compression).
    pub fn create(opts: &Options, path: impl AsRef<Path>) -> Result<SstFileWriter> {
        Self::create_inner(opts.clone(), path.as_ref())
    }

    /// [`create`](Self::create) with a column family's options, for
    /// [`Db::ingest_cf`](crate::Db::ingest_cf) into that family.
    pub fn create_cf(
        opts: &Options,
        cf: &CfOptions,
        path: impl AsRef<Path>,
    ) -> Result<SstFileWriter> {
        Self::create_inner(opts.for_family(cf), path.as_ref())
    }

    fn create_inner(opts: Options, path: &Path) -> Result<SstFileWriter> {
        let file = opts
            .fs
            .create(path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let table_opts = TableBuilderOptions {
            block_size: opts.block_size,
            restart_interval: opts.block_restart_interval,
            bloom_bits_per_key: opts.bloom_bits_per_key,
            // Ingested files usually land at the bottom of the tree.
            compression: opts.codec_for_output(opts.num_levels.saturating_sub(1), 1, true),
            compression_level: opts.compression_level,
            compress_blob_reference_blocks: opts.compress_blob_reference_blocks,
            prefix_extractor: opts.prefix_extractor.clone(),
            partition_index: opts.index_type == crate::IndexType::TwoLevel,
            partition_filters: opts.partition_filters,
            metadata_block_size: opts.metadata_block_size,
            index_restart_interval: opts.index_block_restart_interval,
            legacy_format: false,
            data_block_hash_ratio: opts.data_block_hash_ratio(),
        };
        let mut builder = TableBuilder::new(table_opts, file, path.to_path_buf(), 0);
        builder.set_external_file_version(EXTERNAL_FILE_VERSION);
        Ok(SstFileWriter {
            builder: Some(builder),
            opts,
            path: path.to_path_buf(),
            smallest: Vec::new(),
            last: Vec::new(),
            entries: 0,
            ikey: Vec::new(),
        })
    }

    /// Adds `key` with `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.add(ValueKind::Put, key.as_ref(), value.as_ref())
    }

    /// Adds a merge operand for `key` (merged with what the database holds for it, by the
    /// family's merge operator, when read).
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.add(ValueKind::Merge, key.as_ref(), operand.as_ref())
    }

    /// Adds a deletion of `key` (it hides what the database holds for it).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.add(ValueKind::Delete, key.as_ref(), &[])
    }

    fn add(&mut self, kind: ValueKind, key: &[u8], value: &[u8]) -> Result<()> {
        let Some(builder) = self.builder.as_mut() else {
            return Err(Error::InvalidArgument(format!(
                "the SST file writer for {} is finished or failed; create a new one",
                self.path.display()
            )));
        };
        if self.entries > 0 && key <= self.last.as_slice() {
            let what = if key == self.last.as_slice() {
                "repeats the previous key"
            } else {
                "sorts before the previous key"
            };
            return Err(Error::InvalidArgument(format!(
                "SstFileWriter for {}: key {:?} {what}; keys must be added in strictly \
                 ascending order",
                self.path.display(),
                String::from_utf8_lossy(key)
            )));
        }
        if key.len() > self.opts.max_key_size || value.len() > self.opts.max_value_size {
            return Err(Error::InvalidArgument(format!(
                "SstFileWriter for {}: a key of {} bytes or value of {} bytes exceeds \
                 max_key_size {} or max_value_size {}",
                self.path.display(),
                key.len(),
                value.len(),
                self.opts.max_key_size,
                self.opts.max_value_size
            )));
        }
        self.ikey.clear();
        append_internal_key(&mut self.ikey, key, 0, kind);
        if let Err(e) = builder.add(&self.ikey, value) {
            self.builder = None;
            return Err(e);
        }
        if self.entries == 0 {
            self.smallest = key.to_vec();
        }
        self.last.clear();
        self.last.extend_from_slice(key);
        self.entries += 1;
        Ok(())
    }

    /// Writes the rest of the file and syncs it. A writer with no entries is refused with
    /// `InvalidArgument` (and its file removed): an empty table cannot be ingested.
    pub fn finish(mut self) -> Result<ExternalFileInfo> {
        let Some(builder) = self.builder.take() else {
            return Err(Error::InvalidArgument(format!(
                "the SST file writer for {} failed earlier; its file is incomplete",
                self.path.display()
            )));
        };
        if self.entries == 0 {
            builder.abandon();
            let _ = self.opts.fs.remove_file(&self.path);
            return Err(Error::InvalidArgument(format!(
                "SstFileWriter for {}: no entries were added; an empty file cannot be ingested",
                self.path.display()
            )));
        }
        let props = builder.finish()?;
        Ok(ExternalFileInfo {
            path: std::mem::take(&mut self.path),
            smallest_key: std::mem::take(&mut self.smallest),
            largest_key: std::mem::take(&mut self.last),
            num_entries: props.num_entries,
            file_size: props.file_size,
        })
    }
}

impl std::fmt::Debug for SstFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstFileWriter")
            .field("path", &self.path)
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}
