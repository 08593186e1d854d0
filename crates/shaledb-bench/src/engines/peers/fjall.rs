//! fjall 3.x (crates.io), the pure-Rust LSM: one database with one keyspace, `bench`.

use super::prepare_dir;
use crate::engine::{BatchOp, BlobOptions, CommonOptions, Engine, EngineIterator, EngineResult};
use fjall::compaction::Leveled;
use fjall::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
};
use fjall::{
    CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode,
    Readable, Slice, Snapshot,
};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const NAME: &str = "fjall";
const KEYSPACE: &str = "bench";

fn err(e: impl std::fmt::Display) -> String {
    format!("{NAME}: {e}")
}

/// An open fjall database and its keyspace.
pub struct FjallEngine {
    db: Database,
    ks: Keyspace,
    sync: bool,
}

/// fjall's codec of that name; `what` names the option in the error.
fn codec(name: &str, what: &str) -> EngineResult<CompressionType> {
    match name {
        "none" => Ok(CompressionType::None),
        "lz4" => Ok(CompressionType::Lz4),
        other => Err(format!(
            "fjall: {what} {other:?} is not available (fjall 3 has lz4 and none)"
        )),
    }
}

/// db_bench's blob flags onto fjall's key-value separation (its blob files); `None` without
/// `--enable_blob_files`.
fn kv_separation(b: &BlobOptions) -> EngineResult<Option<KvSeparationOptions>> {
    if !b.enabled {
        return Ok(None);
    }
    if b.gc && b.gc_force_threshold < 1.0 {
        return Err(
            "fjall: --blob_garbage_collection_force_threshold below 1: fjall has no forced blob \
             garbage collection"
                .into(),
        );
    }
    // fjall collects blob garbage in its compactions, always: of the blob files an input table
    // references, the oldest `age_cutoff` fraction with at least `staleness_threshold` garbage
    // is rewritten. Without --enable_blob_garbage_collection (db_bench's default) the cutoff is
    // 0, so that, as in RocksDB and ShaleDB, only blob files left wholly garbage go away. With
    // it, RocksDB's cutoff and no staleness bar: RocksDB relocates the oldest files' blobs
    // whatever their garbage.
    let age_cutoff = if b.gc { b.gc_age_cutoff as f32 } else { 0.0 };
    Ok(Some(
        KvSeparationOptions::default()
            .compression(codec(&b.compression, "blob compression type")?)
            // fjall's values are at most u32::MAX bytes: a larger threshold separates none.
            .separation_threshold(u32::try_from(b.min_size).unwrap_or(u32::MAX))
            .file_target_size(b.file_size)
            .age_cutoff(age_cutoff)
            .staleness_threshold(0.0),
    ))
}

/// The keyspace options for the common options.
fn keyspace_options(c: &CommonOptions) -> EngineResult<KeyspaceCreateOptions> {
    let codec = codec(&c.compression, "compression type")?;
    let filter = if c.bloom_bits > 0 {
        FilterPolicy::all(FilterPolicyEntry::Bloom(
            BloomConstructionPolicy::BitsPerKey(c.bloom_bits as f32),
        ))
    } else {
        FilterPolicy::disabled()
    };
    let block = u32::try_from(c.block_size.max(1)).unwrap_or(u32::MAX);
    let l0 = u8::try_from(c.level0_file_num_compaction_trigger.max(1)).unwrap_or(u8::MAX);
    let strategy = Leveled::default()
        .with_l0_threshold(l0)
        .with_table_target_size(c.target_file_size_base.max(1))
        .with_level_ratio_policy(vec![c.max_bytes_for_level_multiplier as f32]);
    Ok(KeyspaceCreateOptions::default()
        .max_memtable_size(c.write_buffer_size.max(1))
        .data_block_size_policy(BlockSizePolicy::all(block))
        .filter_policy(filter)
        .data_block_compression_policy(CompressionPolicy::all(codec))
        .compaction_strategy(Arc::new(strategy))
        .with_kv_separation(kv_separation(&c.blob)?))
}

impl FjallEngine {
    /// Opens (creating unless `use_existing_db`) a database at `path`.
    pub fn open(path: &Path, c: &CommonOptions) -> EngineResult<Self> {
        if c.disable_wal {
            return Err(
                "fjall: fjall cannot disable its journal; run it with --disable_wal=0 \
                        (WAL on, sync off)"
                    .into(),
            );
        }
        if c.use_direct_reads || c.use_direct_io_for_flush_and_compaction {
            return Err("fjall: fjall has no direct (O_DIRECT) IO".into());
        }
        if c.mmap_read {
            return Err("fjall: fjall does not map its files (--mmap_read=1)".into());
        }
        if c.mmap_write == Some(true) {
            return Err("fjall: fjall does not map its files (--mmap_write=1)".into());
        }
        if c.compression_level.is_some() {
            return Err("fjall: the benchmark does not set fjall compression levels".into());
        }
        if c.min_level_to_compress.is_some() {
            return Err("fjall: the benchmark does not set fjall per-level compression (--min_level_to_compress)".into());
        }
        if c.max_dict_bytes > 0 {
            return Err("fjall: fjall has no compression dictionaries".into());
        }
        if c.cache_index_and_filter_blocks {
            return Err(
                "fjall: the benchmark does not set fjall's index and filter caching".into(),
            );
        }
        if c.prepopulate_block_cache {
            return Err("fjall: fjall cannot put flushed blocks into its cache".into());
        }
        if c.background_cpu_priority
            .is_some_and(|p| p != shaledb::CpuPriority::Normal)
        {
            return Err("fjall: the benchmark does not set the priority of fjall's background threads (--background_cpu_priority)".into());
        }
        if c.two_level_index || c.partition_filters {
            return Err(
                "fjall: the benchmark does not set fjall's index and filter partitioning \
                 (--index_type=2, --partition_index, --partition_index_and_filters)"
                    .into(),
            );
        }
        if c.data_block_hash_index == Some(true) {
            return Err(
                "fjall: fjall has no hash index in its data blocks (--data_block_index_type=1)"
                    .into(),
            );
        }
        if c.index_block_restart_interval != 1 {
            return Err(
                "fjall: the benchmark does not set fjall's index block restart interval \
                 (--index_block_restart_interval)"
                    .into(),
            );
        }
        if c.level_compaction_dynamic_level_bytes {
            return Err("fjall: fjall has no dynamic level sizes".into());
        }
        let ks_opts = keyspace_options(c)?;
        prepare_dir(NAME, path, c)?;
        let files = (c.open_files > 0).then(|| usize::try_from(c.open_files).unwrap_or(usize::MAX));
        let db = Database::builder(path)
            .cache_size(c.cache_size)
            .worker_threads(usize::try_from(c.max_background_jobs.max(1)).unwrap_or(1))
            .max_cached_files(files)
            .open()
            .map_err(err)?;
        if c.use_existing_db && !db.keyspace_exists(KEYSPACE) {
            return Err(format!(
                "fjall: --use_existing_db is set but {} has no keyspace {KEYSPACE:?}",
                path.display()
            ));
        }
        let ks = db.keyspace(KEYSPACE, || ks_opts).map_err(err)?;
        Ok(FjallEngine {
            db,
            ks,
            sync: c.sync,
        })
    }

    fn persist(&self) -> EngineResult<()> {
        if self.sync {
            self.db.persist(PersistMode::SyncData).map_err(err)?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Dir {
    Forward,
    Backward,
}

/// A cursor over a fjall snapshot. fjall iterators are double-ended ranges, not cursors, so a
/// seek or a change of direction opens a new range on the same snapshot.
pub struct FjallIter {
    snap: Snapshot,
    ks: Keyspace,
    iter: Option<fjall::Iter>,
    dir: Dir,
    cur: Option<(Slice, Slice)>,
    err: Option<String>,
}

impl FjallIter {
    fn open(&mut self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, dir: Dir) {
        self.iter = Some(self.snap.range(&self.ks, (lo, hi)));
        self.dir = dir;
        self.step();
    }

    fn step(&mut self) {
        let item = match (&mut self.iter, self.dir) {
            (Some(it), Dir::Forward) => it.next(),
            (Some(it), Dir::Backward) => it.next_back(),
            (None, _) => None,
        };
        self.cur = match item.map(|g| g.into_inner()) {
            Some(Ok((k, v))) => Some((k, v)),
            Some(Err(e)) => {
                self.err = Some(err(e));
                None
            }
            None => None,
        };
    }
}

impl EngineIterator for FjallIter {
    fn seek(&mut self, key: &[u8]) {
        self.open(
            Bound::Included(key.to_vec()),
            Bound::Unbounded,
            Dir::Forward,
        );
    }
    fn seek_to_first(&mut self) {
        self.open(Bound::Unbounded, Bound::Unbounded, Dir::Forward);
    }
    fn seek_to_last(&mut self) {
        self.open(Bound::Unbounded, Bound::Unbounded, Dir::Backward);
    }
    fn valid(&self) -> bool {
        self.cur.is_some()
    }
    fn next(&mut self) {
        let Some((k, _)) = &self.cur else { return };
        if self.dir == Dir::Forward {
            self.step();
        } else {
            let k = k.to_vec();
            self.open(Bound::Excluded(k), Bound::Unbounded, Dir::Forward);
        }
    }
    fn prev(&mut self) {
        let Some((k, _)) = &self.cur else { return };
        if self.dir == Dir::Backward {
            self.step();
        } else {
            let k = k.to_vec();
            self.open(Bound::Unbounded, Bound::Excluded(k), Dir::Backward);
        }
    }
    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |(k, _)| k)
    }
    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |(_, v)| v)
    }
    fn status(&self) -> EngineResult<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

impl Engine for FjallEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.ks.insert(key, value).map_err(err)?;
        self.persist()
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.ks.get(key).map_err(err)?.map(|v| v.to_vec()))
    }

    fn get_len(&self, key: &[u8]) -> EngineResult<Option<usize>> {
        // fjall's value is a shared slice: no copy.
        Ok(self.ks.get(key).map_err(err)?.map(|v| v.len()))
    }

    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        self.ks.remove(key).map_err(err)?;
        self.persist()
    }

    fn write_batch(&self, ops: &[BatchOp]) -> EngineResult<()> {
        let mut batch = self.db.batch();
        if self.sync {
            batch = batch.durability(Some(PersistMode::SyncData));
        }
        for op in ops {
            match op {
                BatchOp::Put(k, v) => batch.insert(&self.ks, k.as_slice(), v.as_slice()),
                BatchOp::Delete(k) => batch.remove(&self.ks, k.as_slice()),
            }
        }
        batch.commit().map_err(err)
    }

    fn iter(&self) -> Box<dyn EngineIterator + '_> {
        Box::new(FjallIter {
            snap: self.db.snapshot(),
            ks: self.ks.clone(),
            iter: None,
            dir: Dir::Forward,
            cur: None,
            err: None,
        })
    }

    fn flush(&self) -> EngineResult<()> {
        self.ks.rotate_memtable_and_wait().map_err(err)
    }

    fn compact(&self) -> EngineResult<()> {
        self.flush()?;
        self.ks.major_compact().map_err(err)
    }

    fn wait_for_compactions(&self) -> EngineResult<()> {
        // fjall has no wait call: poll until no flush is queued and no compaction runs, seen
        // three times in a row (compactions are picked right after flushes finish).
        let mut quiet = 0;
        while quiet < 3 {
            if self.db.outstanding_flushes() == 0 && self.db.active_compactions() == 0 {
                quiet += 1;
            } else {
                quiet = 0;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn stats(&self) -> Option<String> {
        let disk = self.db.disk_space().map_or_else(err, |b| b.to_string());
        Some(format!(
            "fjall: tables {} (L0 {}), disk space {} bytes, journals {}, write buffer {} bytes, \
             cache {} / {} bytes, compactions completed {}, time compacting {:?}",
            self.ks.table_count(),
            self.ks.l0_table_count(),
            disk,
            self.db.journal_count(),
            self.db.write_buffer_size(),
            self.db.cache_size(),
            self.db.cache_capacity(),
            self.db.compactions_completed(),
            self.db.time_compacting(),
        ))
    }

    fn compaction_bytes_written(&self) -> Option<u64> {
        // fjall 3 does not count the bytes its flushes and compactions write.
        None
    }
}
