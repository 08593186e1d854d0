//! ShaleDB behind the benchmark [`Engine`] trait.

use crate::engine::{
    family_names, family_of, BatchOp, BlobOptions, CommonOptions, Engine, EngineIterator,
    EngineResult,
};
use shaledb::{
    ColumnFamily, CompressionType, Db, DbIterator, IngestOptions, Options, ReadOptions,
    SstFileWriter, WriteBatch, WriteOptions,
};
use std::path::Path;

/// An open ShaleDB database.
pub struct ShaleEngine {
    db: Db,
    /// The families keys are spread over (`--num_column_families`), the default first.
    cfs: Vec<ColumnFamily>,
    /// What the database was opened with (external files are written with it).
    opts: Options,
    wo: WriteOptions,
    ro: ReadOptions,
}

/// Maps the common options onto ShaleDB's.
#[allow(clippy::field_reassign_with_default)] // one mapping per line reads best
pub fn shale_options(c: &CommonOptions) -> EngineResult<Options> {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.block_cache_size = c.cache_size as usize;
    o.compressed_secondary_cache_size =
        usize::try_from(c.compressed_secondary_cache_size).unwrap_or(usize::MAX);
    o.write_buffer_size = c.write_buffer_size as usize;
    o.max_write_buffer_number = c.max_write_buffer_number.max(2) as usize;
    o.bloom_bits_per_key = c.bloom_bits as usize;
    let codec = CompressionType::from_name(&c.compression)
        .ok_or_else(|| format!("unknown compression type {:?}", c.compression))?;
    o.set_compression(codec);
    if let Some(first) = c.min_level_to_compress {
        // Levels past the list's end take its last entry, so one codec entry covers the rest;
        // a level past the last one leaves every level uncompressed (and bounds the list).
        let uncompressed = (first as usize).min(c.num_levels as usize);
        o.compression_per_level = vec![CompressionType::None; uncompressed];
        o.compression_per_level.push(codec);
    }
    o.compression_level = c.compression_level;
    if let Some(bytes) = c.bytes_per_sync {
        o.bytes_per_sync = bytes;
    }
    if let Some(bytes) = c.wal_bytes_per_sync {
        o.wal_bytes_per_sync = bytes;
    }
    o.max_dict_bytes = usize::try_from(c.max_dict_bytes).unwrap_or(usize::MAX);
    o.zstd_max_train_bytes = usize::try_from(c.zstd_max_train_bytes).unwrap_or(usize::MAX);
    o.block_size = c.block_size as usize;
    if c.open_files > 0 {
        o.max_open_files = c.open_files as usize;
    }
    o.target_file_size_base = c.target_file_size_base;
    o.target_file_size_multiplier = c.target_file_size_multiplier;
    o.max_bytes_for_level_base = c.max_bytes_for_level_base;
    o.max_bytes_for_level_multiplier = c.max_bytes_for_level_multiplier;
    o.num_levels = c.num_levels as usize;
    o.level0_file_num_compaction_trigger = c.level0_file_num_compaction_trigger as usize;
    o.level0_slowdown_writes_trigger = c.level0_slowdown_writes_trigger as usize;
    o.level0_stop_writes_trigger = c.level0_stop_writes_trigger as usize;
    o.max_background_jobs = c.max_background_jobs.max(1) as usize;
    o.max_subcompactions = c.subcompactions.max(1);
    if let Some(priority) = c.background_cpu_priority {
        o.background_cpu_priority = priority;
    }
    o.disable_auto_compactions = c.disable_auto_compactions;
    if c.merge_operator == "uint64add" {
        o.merge_operator = Some(std::sync::Arc::new(shaledb::merge_operators::UInt64Add));
    }
    if c.prefix_size > 0 {
        o.prefix_extractor = Some(std::sync::Arc::new(shaledb::FixedPrefix(c.prefix_size)));
    }
    if let Some(ratio) = c.memtable_bloom_size_ratio {
        o.memtable_prefix_bloom_size_ratio = ratio;
    }
    if let Some(whole_key) = c.memtable_whole_key_filtering {
        o.memtable_whole_key_filtering = whole_key;
    }
    if let Some(concurrent) = c.allow_concurrent_memtable_write {
        o.allow_concurrent_memtable_write = concurrent;
    }
    if let Some(index) = c.memtable_hash_index {
        o.memtable_hash_index = index;
    }
    if let Some(bytes) = c.wal_preallocate_size {
        o.wal_preallocate_size = bytes;
    }
    o.use_direct_reads = c.use_direct_reads;
    o.allow_mmap_reads = c.mmap_read;
    if let Some(mapped) = c.mmap_write {
        o.allow_mmap_writes = mapped;
    }
    o.level_compaction_dynamic_level_bytes = c.level_compaction_dynamic_level_bytes;
    o.cache_index_and_filter_blocks = c.cache_index_and_filter_blocks;
    if c.prepopulate_block_cache {
        o.prepopulate_block_cache = shaledb::PrepopulateBlockCache::FlushOnly;
    }
    if c.two_level_index {
        o.index_type = shaledb::IndexType::TwoLevel;
    }
    o.partition_filters = c.partition_filters;
    o.metadata_block_size = usize::try_from(c.metadata_block_size).unwrap_or(usize::MAX);
    // 0 is refused by `Options::validate` with a sentence, as RocksDB's db_bench would.
    o.index_block_restart_interval =
        usize::try_from(c.index_block_restart_interval).unwrap_or(usize::MAX);
    match c.data_block_hash_index {
        Some(true) => o.data_block_index_type = shaledb::DataBlockIndexType::BinaryAndHash,
        Some(false) => o.data_block_index_type = shaledb::DataBlockIndexType::BinarySearch,
        None => {}
    }
    // Out of range is refused by `Options::validate` with a sentence.
    o.data_block_hash_table_util_ratio = c.data_block_hash_table_util_ratio;
    o.use_direct_io_for_flush_and_compaction = c.use_direct_io_for_flush_and_compaction;
    set_blob_options(&mut o, &c.blob)?;
    if c.memory_budget > 0 {
        o.memory_budget = Some(usize::try_from(c.memory_budget).unwrap_or(usize::MAX));
    }
    Ok(o)
}

/// db_bench's blob flags onto ShaleDB's blob options (the same names and meanings).
fn set_blob_options(o: &mut Options, b: &BlobOptions) -> EngineResult<()> {
    o.enable_blob_files = b.enabled;
    o.min_blob_size = b.min_size;
    o.blob_file_size = b.file_size;
    o.blob_compression = CompressionType::from_name(&b.compression)
        .ok_or_else(|| format!("shaledb: unknown blob compression type {:?}", b.compression))?;
    o.enable_blob_garbage_collection = b.gc;
    o.blob_garbage_collection_age_cutoff = b.gc_age_cutoff;
    o.blob_garbage_collection_force_threshold = b.gc_force_threshold;
    o.blob_cache = b.cache;
    o.separate_blobs_at_write = b.enabled && b.separate_at_write;
    Ok(())
}

impl ShaleEngine {
    /// Opens (creating) a database at `path`.
    pub fn open(path: &Path, c: &CommonOptions) -> EngineResult<Self> {
        let opts = shale_options(c)?;
        let names = family_names(c.num_column_families);
        let db = match names.is_empty() {
            true => Db::open(path, opts.clone()),
            false => Db::open_cf(
                path,
                opts.clone().with_create_missing_column_families(true),
                names.iter().map(|n| (n.clone(), opts.cf_options())),
            ),
        }
        .map_err(|e| e.to_string())?;
        let mut cfs = vec![db.default_cf()];
        for n in &names {
            cfs.push(
                db.cf(n)
                    .ok_or_else(|| format!("family {n} missing after open"))?,
            );
        }
        Ok(ShaleEngine {
            db,
            cfs,
            opts,
            wo: WriteOptions {
                sync: c.sync,
                disable_wal: c.disable_wal,
                ..Default::default()
            },
            ro: ReadOptions {
                verify_checksums: c.verify_checksums,
                prefix_same_as_start: c.prefix_same_as_start,
                ..Default::default()
            },
        })
    }

    /// The underlying database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The family `key` goes to.
    fn cf(&self, key: &[u8]) -> &ColumnFamily {
        &self.cfs[family_of(key, self.cfs.len())]
    }
}

struct ShaleIter(DbIterator);

impl EngineIterator for ShaleIter {
    fn seek(&mut self, key: &[u8]) {
        self.0.seek(key)
    }
    fn seek_to_first(&mut self) {
        self.0.seek_to_first()
    }
    fn seek_to_last(&mut self) {
        self.0.seek_to_last()
    }
    fn valid(&self) -> bool {
        self.0.valid()
    }
    fn next(&mut self) {
        self.0.next()
    }
    fn prev(&mut self) {
        self.0.prev()
    }
    fn key(&self) -> &[u8] {
        self.0.key()
    }
    fn value(&self) -> &[u8] {
        self.0.value()
    }
    fn status(&self) -> EngineResult<()> {
        self.0.status().map_err(|e| e.to_string())
    }
}

impl Engine for ShaleEngine {
    fn name(&self) -> &'static str {
        "shaledb"
    }
    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.db
            .put_cf_opt(&self.wo, self.cf(key), key, value)
            .map_err(|e| e.to_string())
    }
    fn get(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        // The harness wants owned bytes (as from every engine); the copy happens here.
        self.db
            .get_cf_opt(&self.ro, self.cf(key), key)
            .map(|v| v.map(shaledb::Value::into_vec))
            .map_err(|e| e.to_string())
    }
    fn get_len(&self, key: &[u8]) -> EngineResult<Option<usize>> {
        // The value stays pinned in its cached block (or its own buffer) until dropped here.
        self.db
            .get_cf_opt(&self.ro, self.cf(key), key)
            .map(|v| v.map(|v| v.len()))
            .map_err(|e| e.to_string())
    }
    fn merge(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.db
            .merge_cf_opt(&self.wo, self.cf(key), key, value)
            .map_err(|e| e.to_string())
    }
    fn delete_range(&self, begin: &[u8], end: &[u8]) -> EngineResult<()> {
        self.db
            .delete_range_opt(&self.wo, begin, end)
            .map_err(|e| e.to_string())
    }
    fn multi_get(&self, keys: &[&[u8]]) -> EngineResult<Vec<Option<Vec<u8>>>> {
        if self.cfs.len() > 1 {
            // Keys of several families: one lookup each.
            return keys.iter().map(|k| self.get(k)).collect();
        }
        let cf = self.db.default_cf();
        self.db
            .multi_get_cf(&self.ro, &cf, keys.iter().copied())
            .into_iter()
            .map(|r| {
                r.map(|v| v.map(shaledb::Value::into_vec))
                    .map_err(|e| e.to_string())
            })
            .collect()
    }
    fn delete(&self, key: &[u8]) -> EngineResult<()> {
        self.db
            .delete_cf_opt(&self.wo, self.cf(key), key)
            .map_err(|e| e.to_string())
    }
    fn write_batch(&self, ops: &[BatchOp]) -> EngineResult<()> {
        let mut b = WriteBatch::new();
        for op in ops {
            match op {
                BatchOp::Put(k, v) => b.put_cf(self.cf(k), k, v),
                BatchOp::Delete(k) => b.delete_cf(self.cf(k), k),
            }
        }
        self.db.write(&self.wo, b).map_err(|e| e.to_string())
    }
    fn ingest_sorted(&self, entries: &[(Vec<u8>, Vec<u8>)]) -> EngineResult<()> {
        ingest_sorted(&self.db, &self.opts, entries).map_err(|e| e.to_string())
    }
    fn iter(&self) -> Box<dyn EngineIterator + '_> {
        Box::new(ShaleIter(self.db.iter(&self.ro)))
    }
    fn flush(&self) -> EngineResult<()> {
        for cf in &self.cfs {
            self.db.flush_cf(cf).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
    fn compact(&self) -> EngineResult<()> {
        self.db.compact_range(None, None).map_err(|e| e.to_string())
    }
    fn wait_for_compactions(&self) -> EngineResult<()> {
        self.db.wait_for_compactions().map_err(|e| e.to_string())
    }
    fn stats(&self) -> Option<String> {
        self.db.property("shaledb.stats")
    }
    fn compaction_bytes_written(&self) -> Option<u64> {
        self.db
            .property("shaledb.compaction-bytes-written")
            .and_then(|s| s.parse().ok())
    }
    fn property(&self, name: &str) -> Option<String> {
        self.db.property(&format!("shaledb.{name}"))
    }
}

#[cfg(test)]
/// Each table file of the database at `dir`: its footer's format version, and whether its
/// properties block (stored raw) names index and filter partitions
/// (docs/format/sstable.md: format 3 is a table with a two-level index).
pub(crate) fn table_shapes(dir: &std::path::Path) -> Vec<(u32, bool, bool)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "sst") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read table");
        let at = bytes.len() - 16;
        let version = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let names = |name: &[u8]| bytes.windows(name.len()).any(|w| w == name);
        out.push((
            version,
            names(b"shaledb.index.partitions"),
            names(b"shaledb.filter.partitions"),
        ));
    }
    out
}

/// Writes `entries` (sorted by key) as external files of about `target_file_size_base` bytes,
/// several at once (one thread per core), in a directory beside the database, and ingests
/// them all at once (moved, not copied).
fn ingest_sorted(db: &Db, opts: &Options, entries: &[(Vec<u8>, Vec<u8>)]) -> shaledb::Result<()> {
    let dir = db.path().with_extension("ingest");
    let io = |e| shaledb::Error::InvalidArgument(format!("creating {}: {e}", dir.display()));
    opts.fs.create_dir_all(&dir).map_err(io)?;
    let ranges = file_ranges(entries, opts.target_file_size_base.max(4096));
    if ranges.is_empty() {
        return Ok(());
    }
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(ranges.len());
    let write_file = |i: usize| -> shaledb::Result<std::path::PathBuf> {
        let mut w = SstFileWriter::create(opts, dir.join(format!("{i:06}.sst")))?;
        for (k, v) in &entries[ranges[i].clone()] {
            w.put(k, v)?;
        }
        Ok(w.finish()?.path)
    };
    let written: Vec<shaledb::Result<Vec<(usize, std::path::PathBuf)>>> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|t| {
                    let (write_file, count) = (&write_file, ranges.len());
                    scope.spawn(move || {
                        (t..count)
                            .step_by(workers)
                            .map(|i| write_file(i).map(|p| (i, p)))
                            .collect::<shaledb::Result<Vec<_>>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(shaledb::Error::InvalidArgument(
                            "a file-writing thread panicked".to_string(),
                        ))
                    })
                })
                .collect()
        });
    let mut files = Vec::with_capacity(ranges.len());
    for w in written {
        files.extend(w?);
    }
    files.sort();
    let files: Vec<std::path::PathBuf> = files.into_iter().map(|(_, p)| p).collect();
    let moved = IngestOptions {
        move_files: true,
        ..Default::default()
    };
    db.ingest(&files, &moved)?;
    let _ = opts.fs.remove_dir(&dir);
    Ok(())
}

/// Splits `entries` into consecutive runs of about `target` bytes of keys and values.
fn file_ranges(entries: &[(Vec<u8>, Vec<u8>)], target: u64) -> Vec<std::ops::Range<usize>> {
    let (mut ranges, mut start, mut bytes) = (Vec::new(), 0, 0u64);
    for (i, (k, v)) in entries.iter().enumerate() {
        bytes += (k.len() + v.len()) as u64;
        if bytes >= target {
            ranges.push(start..i + 1);
            (start, bytes) = (i + 1, 0);
        }
    }
    if start < entries.len() {
        ranges.push(start..entries.len());
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_ranges_cover_every_entry_once_in_order() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..100u32)
            .map(|i| (format!("k{i:03}").into_bytes(), vec![b'v'; 6]))
            .collect();
        // 10 bytes an entry: files of 3 entries (30 bytes), the last one of 1.
        let ranges = file_ranges(&entries, 25);
        assert_eq!(ranges.len(), 34);
        assert_eq!(ranges[0], 0..3);
        assert_eq!(ranges[33], 99..100);
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        assert!(file_ranges(&[], 25).is_empty());
    }

    /// The shaledb options of a db_bench command line.
    fn options_of(args: &[&str]) -> Options {
        let flags = crate::dbbench::Flags::parse(args).expect("flags");
        shale_options(&flags.opts).expect("options")
    }

    #[test]
    fn min_level_to_compress_leaves_the_levels_above_it_uncompressed() {
        use CompressionType::{None as Plain, Snappy, Zstd};
        let codecs = |o: &Options| {
            (0..7)
                .map(|l| o.compression_for_level(l))
                .collect::<Vec<_>>()
        };
        assert_eq!(codecs(&options_of(&[])), [Snappy; 7]);
        assert_eq!(
            codecs(&options_of(&["--min_level_to_compress=-1"])),
            [Snappy; 7]
        );
        assert_eq!(
            codecs(&options_of(&[
                "--compression_type=zstd",
                "--min_level_to_compress=2"
            ])),
            [Plain, Plain, Zstd, Zstd, Zstd, Zstd, Zstd]
        );
        assert_eq!(
            codecs(&options_of(&["--min_level_to_compress=0"])),
            [Snappy; 7]
        );
        let all_plain = options_of(&["--min_level_to_compress=4000000000"]);
        assert_eq!(codecs(&all_plain), [Plain; 7]);
        assert_eq!(all_plain.compression_per_level.len(), 8);
        let refused = crate::dbbench::Flags::parse(&["--min_level_to_compress=-2"]);
        assert!(refused.is_err_and(|e| e.contains("a level from 0, or -1")));
    }

    #[test]
    fn partitioned_index_flags_map_to_shaledb_options() {
        let parts = |o: &Options| (o.index_type, o.partition_filters, o.metadata_block_size);
        assert_eq!(
            parts(&options_of(&[])),
            (shaledb::IndexType::BinarySearch, false, 4096)
        );
        assert_eq!(
            parts(&options_of(&[
                "--index_type=2",
                "--metadata_block_size=8192"
            ])),
            (shaledb::IndexType::TwoLevel, false, 8192)
        );
        assert_eq!(
            parts(&options_of(&["--partition_index"])),
            (shaledb::IndexType::TwoLevel, false, 4096)
        );
        assert_eq!(
            parts(&options_of(&[
                "--partition_index_and_filters",
                "--metadata_block_size=1024"
            ])),
            (shaledb::IndexType::TwoLevel, true, 1024)
        );
    }

    #[test]
    fn blob_flags_map_to_shaledb_options() {
        let blob = |o: &Options| {
            (
                o.enable_blob_files,
                o.min_blob_size,
                o.blob_file_size,
                o.blob_compression,
            )
        };
        assert_eq!(
            blob(&options_of(&[])),
            (false, 0, 256 << 20, CompressionType::None)
        );
        assert_eq!(
            blob(&options_of(&[
                "--enable_blob_files",
                "--min_blob_size=512",
                "--blob_file_size=1048576",
                "--blob_compression_type=lz4",
                // Inert without garbage collection, as in RocksDB.
                "--blob_garbage_collection_age_cutoff=0.5",
            ])),
            (true, 512, 1 << 20, CompressionType::Lz4)
        );
        let gc = |o: &Options| {
            (
                o.enable_blob_garbage_collection,
                o.blob_garbage_collection_age_cutoff,
                o.blob_garbage_collection_force_threshold,
            )
        };
        assert_eq!(gc(&options_of(&[])), (false, 0.25, 1.0));
        assert!(!options_of(&[]).blob_cache);
        assert!(options_of(&["--use_blob_cache"]).blob_cache);
        assert_eq!(
            gc(&options_of(&[
                "--enable_blob_garbage_collection",
                "--blob_garbage_collection_age_cutoff=0.5",
                "--blob_garbage_collection_force_threshold=0.8",
            ])),
            (true, 0.5, 0.8)
        );
    }

    #[test]
    fn values_of_at_least_min_blob_size_go_to_blob_files_and_read_back() {
        for (args, blobs) in [
            (&[][..], false),
            (&["--enable_blob_files", "--min_blob_size=100"][..], true),
            (&["--enable_blob_files", "--min_blob_size=1000"][..], false),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("db");
            let flags = crate::dbbench::Flags::parse(args).expect("flags");
            let engine = ShaleEngine::open(&path, &flags.opts).expect("open");
            let value = |i: u32| format!("{i:0>200}");
            for i in 0..500u32 {
                engine
                    .put(format!("key{i:08}").as_bytes(), value(i).as_bytes())
                    .expect("put");
            }
            engine.flush().expect("flush");
            let has_blob = std::fs::read_dir(&path).expect("read_dir").any(|e| {
                e.expect("entry")
                    .path()
                    .extension()
                    .is_some_and(|x| x == "blob")
            });
            assert_eq!(has_blob, blobs, "{args:?}: a .blob file");
            for i in (0..500u32).step_by(7) {
                let got = engine.get(format!("key{i:08}").as_bytes()).expect("get");
                assert_eq!(got, Some(value(i).into_bytes()), "{args:?}: key {i}");
            }
            let mut it = engine.iter();
            it.seek(b"key00000250");
            assert!(
                it.valid() && it.value() == value(250).as_bytes(),
                "{args:?}: seek"
            );
        }
    }

    #[test]
    fn flushed_tables_have_the_index_and_filters_the_flags_ask_for() {
        for (args, want) in [
            (&[][..], (4, false, false)),
            (&["--partition_index"][..], (4, true, false)),
            (&["--index_type=2"][..], (4, true, false)),
            (&["--partition_index_and_filters"][..], (4, true, true)),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("db");
            let mut all = vec!["--block_size=256", "--metadata_block_size=128"];
            all.extend_from_slice(args);
            let flags = crate::dbbench::Flags::parse(&all).expect("flags");
            let engine = ShaleEngine::open(&path, &flags.opts).expect("open");
            for i in 0..2000u32 {
                let (k, v) = (format!("key{i:08}"), format!("value{i}"));
                engine.put(k.as_bytes(), v.as_bytes()).expect("put");
            }
            engine.flush().expect("flush");
            for i in (0..2000u32).step_by(7) {
                let (k, v) = (format!("key{i:08}"), format!("value{i}"));
                let got = engine.get(k.as_bytes()).expect("get");
                assert_eq!(got.as_deref(), Some(v.as_bytes()), "{args:?}: {k}");
            }
            assert_eq!(engine.get(b"key-missing").expect("get"), None, "{args:?}");
            let tables = table_shapes(&path);
            assert!(!tables.is_empty(), "{args:?}: no table");
            for t in tables {
                assert_eq!(
                    t, want,
                    "{args:?}: (format version, index partitions, filter partitions)"
                );
            }
        }
    }
}
