//! Model-based randomized test: thousands of mixed operations against ShaleDB and a BTreeMap,
//! with tiny memtables and files so flushes and compactions run constantly, over several
//! option sets. Every answer must match the model exactly.
#![allow(clippy::field_reassign_with_default)] // options are built field by field for readability

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::{
    CompressionType, Db, FixedPrefix, IndexType, Options, PrefixExtractor, ReadOptions, Snapshot,
    WriteBatch, WriteOptions,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn small_options(compression: CompressionType, bloom: usize, block_size: usize) -> Options {
    let mut o = Options::default();
    o.write_buffer_size = 16 << 10;
    o.max_write_buffer_number = 3;
    o.target_file_size_base = 8 << 10;
    o.max_bytes_for_level_base = 32 << 10;
    o.max_bytes_for_level_multiplier = 4.0;
    o.level0_file_num_compaction_trigger = 2;
    o.block_size = block_size;
    o.bloom_bits_per_key = bloom;
    o.set_compression(compression);
    o.max_background_jobs = 2;
    o.block_cache_size = 64 << 10;
    o
}

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    // A small key space so keys are overwritten and deleted often; sometimes empty.
    let n: u32 = rng.gen_range(0..400);
    if n == 0 {
        return Vec::new();
    }
    format!("key{n:05}").into_bytes()
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => 0,
        1 => rng.gen_range(500..3000),
        _ => rng.gen_range(1..60),
    };
    (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

fn check_full_scan(db: &Db, ro: &ReadOptions, model: &Model) {
    let mut it = db.iter(ro);
    it.seek_to_first();
    let mut got = Vec::new();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("forward scan status");
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "forward scan length");
    assert!(got == want, "forward scan differs from the model");

    it.seek_to_last();
    let mut back = Vec::new();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().expect("backward scan status");
    back.reverse();
    assert!(back == want, "backward scan differs from the model");
}

/// `get` of every key `random_key` can draw answers as the model does.
fn check_every_key(db: &Db, model: &Model, seed: u64, step: usize) {
    for n in 1..400u32 {
        let k = format!("key{n:05}").into_bytes();
        assert_eq!(
            db.get(&k).expect("get").as_deref(),
            model.get(&k).map(|v| v.as_slice()),
            "seed {seed} step {step}: sweep get {n}"
        );
    }
}

fn check_seek(db: &Db, ro: &ReadOptions, model: &Model, target: &[u8], rng: &mut StdRng) {
    let mut it = db.iter(ro);
    it.seek(target);
    let mut expect = model.range(target.to_vec()..);
    // Walk a few steps forward, then back.
    let steps = rng.gen_range(0..5);
    let mut seen = Vec::new();
    for _ in 0..steps {
        match expect.next() {
            Some((k, v)) => {
                assert!(it.valid(), "iterator ended early after seek");
                assert_eq!(it.key(), k.as_slice());
                assert_eq!(it.value(), v.as_slice());
                seen.push(k.clone());
                it.next();
            }
            None => {
                assert!(!it.valid(), "iterator has extra keys after seek");
                break;
            }
        }
    }
    it.status().expect("seek status");
    // seek_for_prev
    let mut it = db.iter(ro);
    it.seek_for_prev(target);
    match model.range(..=target.to_vec()).next_back() {
        Some((k, v)) => {
            assert!(it.valid(), "seek_for_prev found nothing");
            assert_eq!(it.key(), k.as_slice());
            assert_eq!(it.value(), v.as_slice());
            it.prev();
            match model.range(..k.clone()).next_back() {
                Some((k2, _)) => assert_eq!(it.key(), k2.as_slice()),
                None => assert!(!it.valid()),
            }
        }
        None => assert!(!it.valid()),
    }
}

/// With a prefix extractor: walks of the prefix of `k` must give exactly the model's keys
/// with that prefix: a seek to `k` with `prefix_same_as_start`, `Db::prefix` both ways (which
/// leave out tables whose prefix bloom rules the prefix out), and the same for a prefix no
/// key has ("key9..."; keys are key00000 to key00399).
fn check_prefix_walks(
    db: &Db,
    ro: &ReadOptions,
    model: &Model,
    k: &[u8],
    ex: &dyn PrefixExtractor,
) {
    let Some(prefix) = ex.prefix(k) else {
        return;
    };
    let mut absent = prefix.to_vec();
    absent[3] = b'9';
    for (prefix, target) in [(prefix, k), (&absent[..], &absent[..])] {
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .range(prefix.to_vec()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, v)| (key.clone(), v.clone()))
            .collect();
        let what = String::from_utf8_lossy(prefix);
        let pro = ReadOptions {
            prefix_same_as_start: true,
            ..ro.clone()
        };
        let mut it = db.iter(&pro);
        it.seek(target);
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status().expect("prefix seek status");
        let from_target: Vec<_> = want
            .iter()
            .filter(|(key, _)| key.as_slice() >= target)
            .cloned()
            .collect();
        assert!(
            got == from_target,
            "prefix seek to {:?} differs from the model",
            String::from_utf8_lossy(target)
        );
        let walk = |rev: bool| -> Vec<(Vec<u8>, Vec<u8>)> {
            let it = db.prefix_opt(ro, prefix);
            let items: Vec<_> = match rev {
                false => it.collect::<Result<_, _>>(),
                true => it.rev().collect::<Result<_, _>>(),
            }
            .expect("prefix walk");
            items
                .into_iter()
                .map(|(key, v)| (key, v.to_vec()))
                .collect()
        };
        assert!(
            walk(false) == want,
            "prefix walk of {what} differs from the model"
        );
        let mut back = walk(true);
        back.reverse();
        assert!(
            back == want,
            "backward prefix walk of {what} differs from the model"
        );
    }
}

/// A multi-get of 1-40 random keys (duplicates possible) must give the model's answer for
/// each key, in the order asked.
fn check_multi_get(db: &Db, ro: &ReadOptions, model: &Model, rng: &mut StdRng) {
    let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..40)).map(|_| random_key(rng)).collect();
    let got: Vec<Option<Vec<u8>>> = db
        .multi_get_cf(ro, &db.default_cf(), &keys)
        .into_iter()
        .map(|r| r.expect("multi_get").map(|v| v.to_vec()))
        .collect();
    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
    assert_eq!(
        got,
        want,
        "multi_get of {} keys differs from the model",
        keys.len()
    );
}

fn run_model(seed: u64, opts: Options, ops: usize, dir: &Path) {
    run_model_with(seed, opts, ops, dir, false);
}

/// Ingests one or two external files (`SstFileWriter`, `Db::ingest`) of random puts and
/// deletions of random keys, files not overlapping each other, and applies them to the model.
fn ingest_random_files(db: &Db, opts: &Options, model: &mut Model, rng: &mut StdRng, at: &Path) {
    let mut entries: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    for _ in 0..rng.gen_range(1..60) {
        let k = random_key(rng);
        let v = rng.gen_bool(0.8).then(|| random_value(rng));
        entries.insert(k, v);
    }
    let entries: Vec<_> = entries.into_iter().collect();
    let cut = rng.gen_range(0..entries.len());
    let mut files = Vec::new();
    for (i, part) in [&entries[..cut], &entries[cut..]].into_iter().enumerate() {
        if part.is_empty() {
            continue;
        }
        let path = at.with_extension(format!("{i}.sst"));
        let mut w = shaledb::SstFileWriter::create(opts, &path).expect("writer");
        for (k, v) in part {
            match v {
                Some(v) => w.put(k, v).expect("put"),
                None => w.delete(k).expect("delete"),
            }
        }
        w.finish().expect("finish");
        files.push(path);
    }
    let io = shaledb::IngestOptions {
        move_files: rng.gen_bool(0.5),
        ..Default::default()
    };
    db.ingest(&files, &io).expect("ingest");
    for (k, v) in entries {
        match v {
            Some(v) => model.insert(k, v),
            None => model.remove(&k),
        };
    }
}

/// `run_model`; with `ingest`, 1% of the operations ingest external files (in place of a
/// reopen).
fn run_model_with(seed: u64, opts: Options, ops: usize, dir: &Path, ingest: bool) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut db = Some(Db::open(dir, opts.clone()).expect("open"));
    // Follows the primary for the whole run (checked at every reopen step).
    let secondary = Db::open_secondary(dir, dir.with_extension("secondary"), opts.clone())
        .expect("open a secondary");
    let mut model: Model = BTreeMap::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    for step in 0..ops {
        let d = db.as_ref().expect("db open");
        let op = rng.gen_range(0..100);
        match op {
            0..=39 => {
                let k = random_key(&mut rng);
                let v = random_value(&mut rng);
                d.put(&k, &v).expect("put");
                model.insert(k, v);
            }
            40..=49 => {
                let k = random_key(&mut rng);
                d.delete(&k).expect("delete");
                model.remove(&k);
            }
            50..=56 => {
                let mut b = WriteBatch::new();
                let mut staged = Vec::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = random_key(&mut rng);
                    if rng.gen_bool(0.3) {
                        b.delete(&k);
                        staged.push((k, None));
                    } else {
                        let v = random_value(&mut rng);
                        b.put(&k, &v);
                        staged.push((k, Some(v)));
                    }
                }
                let wo = WriteOptions {
                    sync: rng.gen_bool(0.1),
                    disable_wal: false,
                    ..Default::default()
                };
                d.write(&wo, &b).expect("write batch");
                for (k, v) in staged {
                    match v {
                        Some(v) => {
                            model.insert(k, v);
                        }
                        None => {
                            model.remove(&k);
                        }
                    }
                }
            }
            57..=64 => check_multi_get(d, &ReadOptions::default(), &model, &mut rng),
            65..=74 => {
                let k = random_key(&mut rng);
                let got = d.get(&k).expect("get");
                assert_eq!(
                    got.as_deref(),
                    model.get(&k).map(|v| v.as_slice()),
                    "seed {seed} step {step}: get {:?}",
                    String::from_utf8_lossy(&k)
                );
                if opts.bloom_bits_per_key == 0 && step % 4 == 0 {
                    // Sweeps of gets that search filterless tables in vain: read-triggered
                    // (seek) compactions run between the other steps. No rng drawn.
                    check_every_key(d, &model, seed, step);
                }
            }
            75..=79 => {
                let k = random_key(&mut rng);
                check_seek(d, &ReadOptions::default(), &model, &k, &mut rng);
                // Takes nothing from `rng`: runs without an extractor are unchanged.
                if let Some(ex) = &opts.prefix_extractor {
                    check_prefix_walks(d, &ReadOptions::default(), &model, &k, ex.as_ref());
                }
            }
            80..=82 => check_full_scan(d, &ReadOptions::default(), &model),
            83..=85 => {
                if snapshots.len() < 4 {
                    snapshots.push((d.snapshot(), model.clone()));
                } else {
                    let i = rng.gen_range(0..snapshots.len());
                    snapshots.swap_remove(i);
                }
            }
            86..=89 => {
                if let Some((s, m)) = snapshots.get(rng.gen_range(0..snapshots.len().max(1))) {
                    let ro = ReadOptions {
                        snapshot: Some(s.clone()),
                        ..Default::default()
                    };
                    let k = random_key(&mut rng);
                    assert_eq!(
                        d.get_opt(&ro, &k).expect("snapshot get").as_deref(),
                        m.get(&k).map(|v| v.as_slice()),
                        "seed {seed} step {step}: snapshot get"
                    );
                    if rng.gen_bool(0.2) {
                        check_full_scan(d, &ro, m);
                    }
                    if rng.gen_bool(0.3) {
                        check_multi_get(d, &ro, m, &mut rng);
                    }
                    if let Some(ex) = &opts.prefix_extractor {
                        check_prefix_walks(d, &ro, m, &k, ex.as_ref());
                    }
                }
            }
            90..=92 => d.flush().expect("flush"),
            93..=94 => {
                let a = random_key(&mut rng);
                let b = random_key(&mut rng);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                if rng.gen_bool(0.5) {
                    d.compact_range(Some(&lo), Some(&hi))
                        .expect("compact range");
                } else {
                    d.compact_range(None, None).expect("compact all");
                }
            }
            95..=96 => {
                // Bounded iteration.
                let a = random_key(&mut rng);
                let b = random_key(&mut rng);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let got: Vec<_> = d
                    .range(lo.clone()..hi.clone())
                    .collect::<Result<_, _>>()
                    .expect("range");
                let want: Vec<_> = model
                    .range(lo..hi)
                    .map(|(k, v)| (k.clone(), shaledb::Value::from(v.clone())))
                    .collect();
                assert!(got == want, "seed {seed} step {step}: range differs");
            }
            97 if ingest => {
                let at = dir.with_extension(format!("ext{step}"));
                ingest_random_files(d, &opts, &mut model, &mut rng, &at);
            }
            _ => {
                // Other instances see exactly the primary's state (no rng drawn, so the
                // runs are otherwise unchanged).
                check_other_instances(dir, &opts, d, &secondary, &model);
                // Close and reopen; snapshots do not survive a reopen.
                snapshots.clear();
                let old = db.take().expect("db");
                old.close().expect("close");
                drop(old);
                db = Some(Db::open(dir, opts.clone()).expect("reopen"));
            }
        }
    }
    let d = db.as_ref().expect("db");
    check_full_scan(d, &ReadOptions::default(), &model);
    check_other_instances(dir, &opts, d, &secondary, &model);
    d.close().expect("final close");
}

/// A read-only instance opened now, and the secondary after catching up, hold the model.
fn check_other_instances(dir: &Path, opts: &Options, primary: &Db, secondary: &Db, model: &Model) {
    let ro = Db::open_read_only(dir, opts.clone()).expect("open read-only");
    explain_difference("read-only", primary, &ro, model);
    check_full_scan(&ro, &ReadOptions::default(), model);
    secondary
        .try_catch_up_with_primary()
        .expect("catch up with the primary");
    explain_difference("secondary", primary, secondary, model);
    check_full_scan(secondary, &ReadOptions::default(), model);
}

/// Every internal entry of `key` in `db`'s default family: (sequence, kind, value length).
fn entries_of(db: &Db, key: &[u8]) -> Vec<String> {
    let (mut it, tombstones) =
        shaledb::internals::internal_entries(db, &db.default_cf()).expect("internal entries");
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        if let Some(p) = shaledb::internals::parse_internal_key(it.key()) {
            if p.user_key == key {
                out.push(format!("{}:{:?}:{}", p.sequence, p.kind, it.value().len()));
            }
        }
        it.next();
    }
    for t in tombstones {
        out.push(format!("range tombstone {t:?}"));
    }
    out
}

/// When `other` does not scan as the model, panics naming the keys that differ and what the
/// primary and `other` hold for them, with the files of the directory.
fn explain_difference(what: &str, primary: &Db, other: &Db, model: &Model) {
    let got: BTreeMap<Vec<u8>, Vec<u8>> = other
        .range::<std::ops::RangeFull>(..)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .expect("scan");
    if &got == model {
        return;
    }
    let mut report = String::new();
    let keys: std::collections::BTreeSet<&Vec<u8>> = got.keys().chain(model.keys()).collect();
    for k in keys {
        if got.get(k) != model.get(k) {
            report += &format!(
                "\nkey {:?}: model {:?}, {what} {:?}\n  primary entries {:?}\n  {what} entries {:?}",
                String::from_utf8_lossy(k),
                model.get(k).map(|v| v.len()),
                got.get(k).map(|v| v.len()),
                entries_of(primary, k),
                entries_of(other, k),
            );
        }
    }
    let stats = |db: &Db| db.property("shaledb.levelstats").unwrap_or_default();
    panic!(
        "{what} differs from the model:{report}\nprimary tables:\n{}\n{what} tables:\n{}",
        stats(primary),
        stats(other)
    );
}

fn ops_count() -> usize {
    std::env::var("SHALEDB_MODEL_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6000)
}

#[test]
fn model_no_compression_with_bloom() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_model(
        1,
        small_options(CompressionType::None, 10, 256),
        ops_count(),
        dir.path(),
    );
}

#[test]
fn model_lz4_without_bloom() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_model(
        2,
        small_options(CompressionType::Lz4, 0, 1024),
        ops_count(),
        dir.path(),
    );
}

#[test]
fn model_zstd_large_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    run_model(
        3,
        small_options(CompressionType::Zstd, 10, 4096),
        ops_count(),
        dir.path(),
    );
}

#[test]
fn model_snappy_tiny_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::Snappy, 4, 64);
    o.block_restart_interval = 1;
    run_model(4, o, ops_count(), dir.path());
}

/// Data blocks with hash indexes (`DataBlockIndexType::BinaryAndHash`, table format 5), one
/// key per bucket and short restart intervals so buckets collide and keys' versions span
/// intervals; no bloom filter, so gets reach the blocks of tables without their key too.
#[test]
fn model_data_block_hash_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::Lz4, 0, 512);
    o.block_restart_interval = 2;
    o.data_block_index_type = shaledb::DataBlockIndexType::BinaryAndHash;
    o.data_block_hash_table_util_ratio = 1.0;
    run_model(23, o, ops_count(), dir.path());
}

/// Table files mapped into memory (`allow_mmap_reads`): every data block of an uncompressed
/// table is a slice of the map, outside the block cache, pinned by the values it serves
/// while compactions delete (and unmap) its file.
#[test]
fn model_mmap_reads_uncompressed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::None, 10, 256);
    o.allow_mmap_reads = true;
    run_model(41, o, ops_count(), dir.path());
}

/// Mapped tables whose levels mix codecs: compressed blocks are decompressed from the map
/// into the block cache, raw ones served from the map.
#[test]
fn model_mmap_reads_mixed_codecs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::None, 4, 512);
    o.allow_mmap_reads = true;
    o.compression_per_level = vec![
        CompressionType::None,
        CompressionType::Snappy,
        CompressionType::Lz4,
        CompressionType::Zstd,
    ];
    run_model(42, o, ops_count(), dir.path());
}

/// Memtable whole-key bloom filters, some tiny (the smallest memtables get a one-line filter,
/// almost always "maybe"), some sized for the memtable.
#[test]
fn model_memtable_whole_key_bloom() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::Lz4, 10, 1024);
    o.memtable_prefix_bloom_size_ratio = 0.2;
    o.memtable_whole_key_filtering = true;
    run_model(6, o, ops_count(), dir.path());
}

/// Memtables without the hash index (every other model test has it, the default): gets walk
/// the skiplist; and without the bloom either, so nothing answers before the walk.
#[test]
fn model_memtable_without_hash_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::Lz4, 10, 1024);
    o.memtable_hash_index = false;
    o.memtable_prefix_bloom_size_ratio = 0.0;
    run_model(7, o, ops_count(), dir.path());
}

#[test]
fn model_per_level_compression_default_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::None, 10, 512);
    o.compression_per_level = Options::default().compression_per_level;
    o.compression_per_level[1] = CompressionType::Zlib;
    run_model(5, o, ops_count(), dir.path());
}

/// Dynamic level sizes: L0 compacts into the level the data needs, and that level moves up as
/// the data grows; per-level codecs count from it.
#[test]
fn model_dynamic_level_sizes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::None, 10, 512);
    o.level_compaction_dynamic_level_bytes = true;
    o.max_bytes_for_level_base = 8 << 10;
    o.compression_per_level = Options::default().compression_per_level;
    run_model(7, o, ops_count(), dir.path());
}

/// Flushed blocks put into the block cache as they are written (`prepopulate_block_cache`),
/// in a cache small enough that they push each other out: reads mix prepopulated blocks,
/// blocks read from files and blocks of tables compacted away.
#[test]
fn model_prepopulated_block_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::Snappy, 10, 512);
    o.prepopulate_block_cache = shaledb::PrepopulateBlockCache::FlushOnly;
    run_model(8, o, ops_count(), dir.path());
}

/// Zstd with dictionaries: raw-content dictionaries on small blocks and trained ones, so
/// every table read goes through its dictionary (format version 2).
#[test]
fn model_zstd_dictionaries() {
    for (seed, train) in [(9, 0), (10, 64 << 10)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut o = small_options(CompressionType::Zstd, 10, 256);
        o.max_dict_bytes = 2048;
        o.zstd_max_train_bytes = train;
        run_model(seed, o, ops_count(), dir.path());
    }
}

/// Index and filter blocks in the (64 KiB) block cache, evicted and read again all the time.
#[test]
fn model_index_and_filter_in_the_block_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::Lz4, 10, 256);
    o.cache_index_and_filter_blocks = true;
    run_model(11, o, ops_count(), dir.path());
}

/// Tables with a two-level index and filter partitions (format version 3): 128-byte blocks
/// and 128-byte partitions (about five index entries each), so a table has several. The second run adds a prefix extractor,
/// whose prefixes the filter partitions also hold, and checks prefix walks (through the
/// prefix blooms) against the model.
#[test]
fn model_partitioned_index_and_filters() {
    for (seed, prefix) in [(12, false), (13, true)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut o = small_options(CompressionType::Lz4, 10, 128);
        o.index_type = IndexType::TwoLevel;
        o.partition_filters = true;
        o.metadata_block_size = 128;
        if prefix {
            o.prefix_extractor = Some(Arc::new(FixedPrefix(7)));
        }
        run_model(seed, o, ops_count(), dir.path());
        common::assert_partitioned_tables(dir.path(), 3);
    }
}

/// Index and filter partitions of the smallest size (64 bytes: two or three index entries)
/// with `cache_index_and_filter_blocks` in a 16 KiB block cache (one shard): partitions are
/// evicted and read again all the time.
#[test]
fn model_partitions_in_a_small_block_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = small_options(CompressionType::None, 10, 128);
    o.index_type = IndexType::TwoLevel;
    o.partition_filters = true;
    o.metadata_block_size = 64;
    o.cache_index_and_filter_blocks = true;
    o.block_cache_size = 16 << 10;
    o.block_cache_shard_bits = 0;
    run_model(14, o, ops_count(), dir.path());
    common::assert_partitioned_tables(dir.path(), 5);
}

/// Compactions out of L0 and manual ones split into up to three subcompactions (key ranges
/// written by threads side by side), with and without blob files (and their garbage
/// collection), against the model.
#[test]
fn model_subcompactions() {
    for (seed, blobs) in [(30, false), (31, true)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut o = small_options(CompressionType::Snappy, 10, 256);
        o.max_subcompactions = 3;
        if blobs {
            o.enable_blob_files = true;
            o.min_blob_size = 16;
            o.blob_file_size = 8 << 10;
            o.enable_blob_garbage_collection = true;
        }
        run_model(seed, o, ops_count(), dir.path());
    }
}

/// Counts compactions that merged L0 tables into L0 (intra-L0).
#[derive(Default)]
struct IntraL0Count(std::sync::atomic::AtomicU64);

impl shaledb::EventListener for IntraL0Count {
    fn on_compaction_completed(&self, info: &shaledb::CompactionJobInfo) {
        if info.base_input_level == 0 && info.output_level == 0 {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Write buffers far smaller than the base level, values in blob files: L0 compactions of
/// tables of references merge them within L0 (intra-L0) until they hold a multiplier-th of
/// what they overlap below, then go down; blobs separated at flush and at write, against the
/// model.
#[test]
fn model_intra_l0_compactions() {
    for (seed, at_write) in [(34, false), (35, true)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut o = small_options(CompressionType::Snappy, 10, 256);
        o.write_buffer_size = 4 << 10;
        o.max_bytes_for_level_base = 256 << 10;
        o.max_write_buffer_number = 4;
        let count = Arc::new(IntraL0Count::default());
        o.listeners.push(count.clone());
        o.enable_blob_files = true;
        o.min_blob_size = 0;
        o.blob_file_size = 8 << 10;
        o.separate_blobs_at_write = at_write;
        run_model(seed, o, ops_count(), dir.path());
        let intra = count.0.load(std::sync::atomic::Ordering::Relaxed);
        assert!(intra > 0, "seed {seed}: no intra-L0 compaction ran");
    }
}

/// Blob files with a small `min_blob_size` (most values are blobs, the short ones stay in the
/// tables) and small blob files (many per flush and compaction), with and without a codec:
/// every read, across reopens, against the model; one run with table and blob files mapped
/// (`allow_mmap_reads`).
#[test]
fn model_blob_files() {
    for (seed, codec, min_blob_size) in [
        (15, CompressionType::None, 16),
        (16, CompressionType::Lz4, 0),
        (17, CompressionType::Zstd, 40),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut o = small_options(CompressionType::Snappy, 10, 256);
        o.enable_blob_files = true;
        o.min_blob_size = min_blob_size;
        o.blob_file_size = 8 << 10;
        o.blob_compression = codec;
        // One run caches blob values in the block cache (evicted and read again).
        o.blob_cache = seed == 17;
        // Blocks of references are stored raw by default; one run compresses them.
        o.compress_blob_reference_blocks = seed == 16;
        o.allow_mmap_reads = seed == 15;
        run_model(seed, o, ops_count(), dir.path());
        let blobs = std::fs::read_dir(dir.path())
            .expect("list")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".blob"))
            })
            .count();
        assert!(
            blobs > 0,
            "seed {seed}: no blob file was left in the database"
        );
    }
}

/// Values separated when written (`separate_blobs_at_write`): the WAL and memtables hold
/// references, each memtable owns the blob files it wrote, small blob files make memtables
/// fill by their blob bytes; reads before and after flushes, reopens replaying references,
/// and a secondary following the WAL, against the model.
#[test]
fn model_blob_files_separated_at_write() {
    for (seed, codec, min_blob_size) in [
        (22, CompressionType::None, 16),
        (23, CompressionType::Zstd, 0),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut o = small_options(CompressionType::Snappy, 10, 256);
        o.enable_blob_files = true;
        o.separate_blobs_at_write = true;
        o.min_blob_size = min_blob_size;
        o.blob_file_size = 8 << 10;
        o.blob_compression = codec;
        o.blob_cache = seed == 23;
        o.enable_blob_garbage_collection = seed == 23;
        // Blob files written at write time are read unmapped until a version lists them.
        o.allow_mmap_reads = seed == 22;
        run_model(seed, o, ops_count(), dir.path());
    }
}

/// External files ingested among the other operations: over the memtable (a flush first),
/// over tables (a global sequence number), beside them (sequence number 0), under live
/// snapshots (which must not see them), moved or copied, then compacted with the rest; once
/// with a partitioned index and blob files (compaction moves ingested values into blobs).
#[test]
fn model_with_ingestion() {
    for (seed, partitioned) in [(18, false), (19, true)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut o = small_options(CompressionType::Lz4, 10, 256);
        if partitioned {
            o.index_type = IndexType::TwoLevel;
            o.partition_filters = true;
            o.metadata_block_size = 128;
            o.enable_blob_files = true;
            o.min_blob_size = 32;
        }
        let db = dir.path().join("db");
        run_model_with(seed, o, ops_count(), &db, true);
    }
}

/// A compressed secondary tier under a primary block cache of 8 KiB (one shard): nearly
/// every data block read is evicted from the primary at once and comes back from the tier
/// (or, once the tier is full too, from the file); once with zstd dictionaries, index and
/// filter blocks in the primary, and a tier smaller than the data.
#[test]
fn model_compressed_secondary_cache() {
    for (seed, zstd, secondary) in [(20, false, 1 << 20), (21, true, 24 << 10)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let codec = match zstd {
            true => CompressionType::Zstd,
            false => CompressionType::Lz4,
        };
        let mut o = small_options(codec, 10, 256);
        o.block_cache_size = 8 << 10;
        o.block_cache_shard_bits = 0;
        o.compressed_secondary_cache_size = secondary;
        if zstd {
            o.max_dict_bytes = 2048;
            o.cache_index_and_filter_blocks = true;
        }
        run_model(seed, o, ops_count(), dir.path());
    }
}
