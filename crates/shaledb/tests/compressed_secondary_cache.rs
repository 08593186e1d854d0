//! The block cache's compressed secondary tier (`Options::compressed_secondary_cache_size`,
//! `Cache::with_compressed_secondary`): under a primary cache far smaller than the data,
//! reading everything again reads no table file when the tier holds the data (and many
//! without it), with buffered and direct reads; values are always the model's; a damaged
//! block on disk stays a corruption error however often it is read; the tier's usage is
//! reported and bounded.

mod common;

use common::CountReads;
use shaledb::fs::{FileSystem, HookedFileSystem, MemFileSystem};
use shaledb::{Cache, CompressionType, Db, Error, Options, Statistics, Ticker};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const KEYS: u32 = 4000;

/// A 16 KiB primary cache (one shard) over about 400 KiB of compressible data in 1 KiB
/// blocks, `secondary` bytes of tier.
fn options(fs: Arc<dyn FileSystem>, secondary: usize, direct: bool) -> Options {
    let mut o = Options {
        fs,
        disable_auto_compactions: true,
        statistics: Some(Arc::new(Statistics::new())),
        ..Options::default()
    }
    .with_block_size(1024)
    .with_block_cache_size(16 << 10)
    .with_block_cache_shard_bits(0)
    .with_compressed_secondary_cache_size(secondary)
    .with_use_direct_reads(direct);
    o.set_compression(CompressionType::Lz4);
    o
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i:05}-{}", "abcdefgh".repeat(10 + (i % 5) as usize)).into_bytes()
}

/// Writes every key, compacts into one level; returns the model.
fn load(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for i in 0..KEYS {
        let key = format!("key{:05}", (i * 7919) % KEYS).into_bytes();
        let v = value(i);
        db.put(&key, &v).expect("put");
        model.insert(key, v);
    }
    db.flush().expect("flush");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    model
}

fn prop(db: &Db, name: &str) -> usize {
    db.property(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("property {name}"))
}

/// Table-file reads of the second and third reading of everything (the first fills the
/// caches), after a reopen so nothing is cached from the writes, and the tier's hits; checks
/// the tier's usage.
fn rereads(secondary: usize, direct: bool) -> (u64, u64) {
    let fs = Arc::new(HookedFileSystem::new(
        Arc::new(MemFileSystem::new()),
        CountReads::of("sst"),
    ));
    let db = Db::open("/db", options(fs.clone(), secondary, direct)).expect("open");
    let model = load(&db);
    drop(db);
    let opts = options(fs.clone(), secondary, direct);
    let stats = opts.statistics.clone().expect("statistics");
    let db = Db::open("/db", opts).expect("reopen");
    common::check_keys_and_scan(&db, &model, KEYS);
    let before = fs.hook().reads();
    common::check_keys_and_scan(&db, &model, KEYS);
    common::check_keys_and_scan(&db, &model, KEYS);
    let reads = fs.hook().reads() - before;

    let usage = prop(&db, "shaledb.compressed-secondary-cache-usage");
    assert_eq!(
        prop(&db, "shaledb.compressed-secondary-cache-capacity"),
        secondary
    );
    assert!(usage <= secondary, "usage {usage} of {secondary}");
    let (hits, misses) = (
        stats.ticker(Ticker::CompressedSecondaryCacheHit),
        stats.ticker(Ticker::CompressedSecondaryCacheMiss),
    );
    if secondary == 0 {
        assert_eq!((usage, hits, misses), (0, 0, 0), "no tier, nothing counted");
    } else {
        assert!(usage > 0 && misses > 0, "{usage} {misses}");
    }
    (reads, hits)
}

#[test]
fn a_tier_holding_the_data_serves_rereads_without_file_reads() {
    for direct in [false, true] {
        let (without, _) = rereads(0, direct);
        assert!(
            without > 500,
            "direct {direct}: {without} reads without a tier"
        );
        let (reads, hits) = rereads(4 << 20, direct);
        assert_eq!(reads, 0, "direct {direct}");
        assert!(hits >= without, "direct {direct}: {hits} hits");
        // A tier smaller than the data, read in a cycle larger than it, is evicted before
        // reuse (as any CLOCK or LRU cache is): it then saves nothing but costs no extra
        // read either, and values stay right.
        assert_eq!(rereads(64 << 10, direct), (without, 0), "direct {direct}");
    }
}

#[test]
fn failed_reads_are_errors_and_leave_nothing_wrong_in_the_tier() {
    let fs = Arc::new(HookedFileSystem::new(
        Arc::new(MemFileSystem::new()),
        CountReads::of("sst"),
    ));
    let db = Db::open("/db", options(fs.clone(), 0, false)).expect("open");
    let model = load(&db);
    drop(db);
    let db = Db::open("/db", options(fs.clone(), 4 << 20, false)).expect("reopen");
    // Every third table read fails: each get is the model's value or an IO error.
    fs.hook().fail_every.store(3, Ordering::SeqCst);
    let mut failed = 0;
    for (k, v) in &model {
        match db.get(k) {
            Ok(got) => assert_eq!(got.as_deref(), Some(&v[..])),
            Err(Error::Io { .. }) => failed += 1,
            Err(e) => panic!("expected an IO error, got {e}"),
        }
    }
    assert!(failed > 10, "{failed} failed gets");
    // Without faults everything reads right, from the tier or the files.
    fs.hook().fail_every.store(0, Ordering::SeqCst);
    common::check_keys_and_scan(&db, &model, KEYS);
    let before = fs.hook().reads();
    common::check_keys_and_scan(&db, &model, KEYS);
    assert_eq!(fs.hook().reads(), before, "all from the tier");
}

/// The first data block of the only table of a database at `dir`, damaged (a compressed 1 KiB
/// block is longer than 20 bytes).
fn damage_first_block(dir: &Path) -> std::path::PathBuf {
    let sst = std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("a table");
    let mut bytes = std::fs::read(&sst).expect("read");
    bytes[20] ^= 0x5a;
    std::fs::write(&sst, bytes).expect("write");
    sst
}

#[test]
fn a_damaged_block_stays_corruption_and_the_rest_is_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = Cache::with_shard_bits(16 << 10, 0).with_compressed_secondary(4 << 20);
    let opts = || options(Options::default().fs, 0, false).with_block_cache(cache.clone());
    let db = Db::open(dir.path(), opts()).expect("open");
    let model = load(&db);
    drop(db);
    let sst = damage_first_block(dir.path());
    let db = Db::open(dir.path(), opts()).expect("reopen");
    let first = model.keys().next().expect("keys").clone();
    for attempt in 0..3 {
        match db.get(&first) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, sst, "attempt {attempt}"),
            other => panic!("attempt {attempt}: expected corruption, got {other:?}"),
        }
        // Every other block is read (and kept) in between.
        for (k, v) in model.iter().skip(100) {
            assert_eq!(db.get(k).expect("get").as_deref(), Some(&v[..]));
        }
    }
    assert!(cache.compressed_secondary_usage() > 0);
    assert!(cache.compressed_secondary_usage() <= cache.compressed_secondary_capacity());
    assert!(db.range(..).any(|r| r.is_err()), "a scan meets the damage");
}

#[test]
fn a_shared_cache_and_the_size_option_together_are_refused() {
    let o = Options::default()
        .with_block_cache(Cache::new(1 << 20))
        .with_compressed_secondary_cache_size(1 << 20);
    match o.validate() {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.contains("Cache::with_compressed_secondary"), "{m}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // With memory_budget the tier comes on top of the budget.
    let dir = tempfile::tempdir().expect("tempdir");
    let o = Options::default()
        .with_memory_budget(8 << 20)
        .with_compressed_secondary_cache_size(2 << 20);
    let db = Db::open(dir.path(), o).expect("open");
    assert_eq!(prop(&db, "shaledb.block-cache-capacity"), 8 << 20);
    assert_eq!(
        prop(&db, "shaledb.compressed-secondary-cache-capacity"),
        2 << 20
    );
    db.create_cf("other", Default::default())
        .expect("a family derived from the options");
}
