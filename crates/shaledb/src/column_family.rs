//! Column families: named key spaces in one database, each with its own memtables, table
//! files, compaction and options, sharing one WAL (so a batch spanning families is atomic),
//! one MANIFEST, the block cache and the background threads.
//!
//! A [`ColumnFamily`] is a handle on a family's shared part ([`CfData`]): its id, name,
//! effective options and the super version readers load. What changes under the database
//! mutex (memtables, compaction bookkeeping) lives in the database state (`db::CfState`).

use crate::compression::CompressionType;
use crate::db::{DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::merge::MergeOperator;
use crate::options::Options;
use crate::version::edit::MAX_COLUMN_FAMILY_NAME;
use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

pub(crate) use crate::version::set::{DEFAULT_FAMILY, DEFAULT_FAMILY_NAME};

/// Declares [`CfOptions`] and the conversions between it and [`Options`] from one list, so a
/// per-family option cannot be added to one and forgotten in the other.
macro_rules! family_options {
    ($($field:ident: $ty:ty),* $(,)?) => {
        /// The options of one column family (RocksDB's `ColumnFamilyOptions`). Each field means
        /// what the [`Options`] field of the same name means, for this family alone; `Options`
        /// holds the default family's values, and `CfOptions::default()` equals them for
        /// `Options::default()`.
        ///
        /// ```
        /// use shaledb::{CfOptions, Options};
        /// let cf = CfOptions { write_buffer_size: 8 << 20, ..Default::default() };
        /// assert_eq!(cf.num_levels, Options::default().num_levels);
        /// ```
        #[derive(Clone, Debug)]
        #[allow(missing_docs)] // each field is documented on `Options`
        pub struct CfOptions {
            $(pub $field: $ty,)*
        }

        impl Options {
            /// The default family's options, as `CfOptions`.
            pub fn cf_options(&self) -> CfOptions {
                CfOptions { $($field: self.$field.clone(),)* }
            }

            /// These database-wide options with `cf`'s per-family options: what every part
            /// of the engine that works on one family reads.
            pub(crate) fn for_family(&self, cf: &CfOptions) -> Options {
                let mut o = self.clone();
                $(o.$field = cf.$field.clone();)*
                o
            }
        }
    };
}

family_options! {
    write_buffer_size: usize,
    max_write_buffer_number: usize,
    memtable_prefix_bloom_size_ratio: f64,
    memtable_whole_key_filtering: bool,
    memtable_hash_index: bool,
    block_size: usize,
    block_restart_interval: usize,
    bloom_bits_per_key: usize,
    compression_per_level: Vec<CompressionType>,
    bottommost_compression: Option<CompressionType>,
    compression_level: Option<i32>,
    max_dict_bytes: usize,
    zstd_max_train_bytes: usize,
    prepopulate_block_cache: crate::options::PrepopulateBlockCache,
    index_type: crate::options::IndexType,
    partition_filters: bool,
    metadata_block_size: usize,
    index_block_restart_interval: usize,
    data_block_index_type: crate::options::DataBlockIndexType,
    data_block_hash_table_util_ratio: f64,
    num_levels: usize,
    level0_file_num_compaction_trigger: usize,
    level0_slowdown_writes_trigger: usize,
    level0_stop_writes_trigger: usize,
    max_bytes_for_level_base: u64,
    max_bytes_for_level_multiplier: f64,
    level_compaction_dynamic_level_bytes: bool,
    target_file_size_base: u64,
    target_file_size_multiplier: u64,
    soft_pending_compaction_bytes_limit: u64,
    hard_pending_compaction_bytes_limit: u64,
    disable_auto_compactions: bool,
    merge_operator: Option<Arc<dyn MergeOperator>>,
    compaction_filter: Option<Arc<dyn crate::CompactionFilter>>,
    prefix_extractor: Option<Arc<dyn crate::PrefixExtractor>>,
    ttl: Option<std::time::Duration>,
    enable_blob_files: bool,
    min_blob_size: u64,
    blob_file_size: u64,
    blob_compression: CompressionType,
    blob_cache: bool,
    compress_blob_reference_blocks: bool,
    enable_blob_garbage_collection: bool,
    blob_garbage_collection_age_cutoff: f64,
    blob_garbage_collection_force_threshold: f64,
    separate_blobs_at_write: bool,
}

impl Default for CfOptions {
    fn default() -> Self {
        Options::default().cf_options()
    }
}

/// Checks a family name given by a caller.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_COLUMN_FAMILY_NAME {
        return Err(Error::InvalidArgument(format!(
            "column family name {name:?} must be 1 to {MAX_COLUMN_FAMILY_NAME} bytes long"
        )));
    }
    Ok(())
}

/// The part of a column family that handles, readers and background jobs share.
pub(crate) struct CfData {
    pub(crate) id: u32,
    pub(crate) name: String,
    /// The database's options with this family's (`Options::for_family`).
    pub(crate) opts: Arc<Options>,
    /// What readers of this family load: memtables plus table version.
    pub(crate) super_version: ArcSwap<SuperVersion>,
    /// Set when the family is dropped: writes to it are refused, reads go on from the last
    /// super version until the last handle and iterator are gone.
    pub(crate) dropped: AtomicBool,
    /// The database the family belongs to (to refuse another database's handle).
    pub(crate) db: Weak<DbInner>,
    /// The table gets found worth compacting (read-triggered compaction; version/seeks.rs).
    pub(crate) seeks: crate::version::SeekCandidate,
}

impl CfData {
    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }
}

/// A handle on a column family: cheap to clone, `Send + Sync`. Get one from
/// [`Db::cf`](crate::Db::cf), [`Db::create_cf`](crate::Db::create_cf) or
/// [`Db::default_cf`](crate::Db::default_cf).
///
/// A handle keeps its family readable after [`Db::drop_cf`](crate::Db::drop_cf): the
/// family's files are deleted when the last handle and iterator are dropped.
///
/// ```
/// use shaledb::{CfOptions, Db, Options};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// let users = db.create_cf("users", CfOptions::default()).unwrap();
/// db.put_cf(&users, b"1", b"ada").unwrap();
/// assert_eq!(db.get_cf(&users, b"1").unwrap().as_deref(), Some(&b"ada"[..]));
/// assert_eq!(db.get(b"1").unwrap(), None); // the default family is another key space
/// ```
#[derive(Clone)]
pub struct ColumnFamily {
    pub(crate) data: Arc<CfData>,
}

impl ColumnFamily {
    /// The family's name.
    pub fn name(&self) -> &str {
        &self.data.name
    }

    /// The family's id in the database (0 is the default family). Ids are not reused.
    pub fn id(&self) -> u32 {
        self.data.id
    }
}

impl std::fmt::Debug for ColumnFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnFamily")
            .field("name", &self.data.name)
            .field("id", &self.data.id)
            .field("dropped", &self.data.is_dropped())
            .finish()
    }
}
