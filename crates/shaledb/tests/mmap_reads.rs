//! Table files mapped into memory (`Options::allow_mmap_reads`): uncompressed data blocks are
//! read in place, never through the block cache; compressed ones are decompressed from the map
//! into it; values pinned in a mapped block outlive the file's deletion; a damaged block is
//! `Corruption` naming the file; blob files are mapped with the tables, and a damaged blob
//! record is `Corruption` naming its file; the option is refused with direct reads; a
//! filesystem that cannot map reads as usual.

mod common;

use shaledb::fs::MemFileSystem;
use shaledb::{CompressionType, Db, Error, Options, ReadOptions, Statistics, Ticker};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const KEYS: u32 = 3000;

fn options(mmap: bool, codec: CompressionType) -> Options {
    let mut o = Options {
        disable_auto_compactions: true,
        statistics: Some(Arc::new(Statistics::new())),
        ..Options::default()
    }
    .with_block_size(1024)
    .with_allow_mmap_reads(mmap);
    o.set_compression(codec);
    o
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:06}", i).into_bytes()
}

/// Compressible by half, so the snappy tables really hold compressed blocks.
fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("v{round}-{i:06}-").into_bytes();
    v.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, 40));
    v.extend(common::incompressible(
        u64::from(i) + u64::from(round) * 1_000_003,
        40,
    ));
    v
}

/// Writes every key in scattered order, flushes and compacts to one sorted run.
fn load(db: &Db, round: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for n in 0..KEYS {
        let i = (n * 7919) % KEYS;
        db.put(key(i), value(i, round)).expect("put");
        model.insert(key(i), value(i, round));
    }
    db.flush().expect("flush");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    model
}

/// Every key by get, multi_get and both scan directions equals the model.
fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(
            db.get(k).expect("get").as_deref(),
            Some(&v[..]),
            "get {k:?}"
        );
    }
    let keys: Vec<&Vec<u8>> = model.keys().step_by(7).collect();
    for (k, got) in keys.iter().zip(db.multi_get(keys.iter())) {
        assert_eq!(
            got.expect("multi_get").as_deref(),
            model.get(*k).map(|v| &v[..])
        );
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let ro = ReadOptions::default();
    for reverse in [false, true] {
        // `scan` returns key order either way.
        assert!(
            common::scan(db, &ro, reverse) == expected,
            "scan, reverse {reverse}"
        );
    }
}

fn data_block_lookups(o: &Options) -> u64 {
    let s = o.statistics.as_ref().expect("statistics");
    s.ticker(Ticker::BlockCacheDataHit) + s.ticker(Ticker::BlockCacheDataMiss)
}

fn tables(dir: &Path) -> Vec<PathBuf> {
    files_named(dir, "sst")
}

fn blob_files(dir: &Path) -> Vec<PathBuf> {
    files_named(dir, "blob")
}

/// The files of `dir` whose names end in `.{extension}`, sorted.
fn files_named(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut t: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    t.sort();
    t
}

/// `options` with every value (they are 90 bytes long) in blob files.
fn blob_options(mmap: bool) -> Options {
    let mut o = options(mmap, CompressionType::None);
    o.enable_blob_files = true;
    o.min_blob_size = 64;
    o
}

#[test]
fn uncompressed_mapped_tables_are_read_without_the_block_cache() {
    for mmap in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let o = options(mmap, CompressionType::None);
        let db = Db::open(dir.path(), o.clone()).expect("open");
        let model = load(&db, 0);
        check(&db, &model);
        let lookups = data_block_lookups(&o);
        match mmap {
            // Served from the map: the cache is neither asked nor filled.
            true => assert_eq!(lookups, 0),
            false => assert!(lookups > u64::from(KEYS), "{lookups} lookups"),
        }
    }
}

#[test]
fn compressed_mapped_blocks_go_through_the_block_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = options(true, CompressionType::Snappy);
    let db = Db::open(dir.path(), o.clone()).expect("open");
    let model = load(&db, 0);
    check(&db, &model);
    let s = o.statistics.as_ref().expect("statistics");
    // Each block is decompressed once from the map, then served by the cache.
    assert!(s.ticker(Ticker::BlockCacheDataMiss) > 0);
    assert!(s.ticker(Ticker::BlockCacheDataHit) > s.ticker(Ticker::BlockCacheDataMiss));
}

#[test]
fn a_value_pinned_in_a_mapped_block_outlives_its_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options(true, CompressionType::None)).expect("open");
    load(&db, 0);
    let before = tables(dir.path());
    let pinned: Vec<_> = (0..KEYS)
        .step_by(97)
        .map(|i| (i, db.get(key(i)).expect("get").expect("present")))
        .collect();
    // Rewrite everything: the old tables are compacted away, their files deleted (and, once
    // nothing holds their blocks, unmapped).
    let model = load(&db, 1);
    common::wait_until("the first tables to be deleted", || {
        tables(dir.path()).iter().all(|t| !before.contains(t))
    });
    for (i, v) in &pinned {
        assert_eq!(&v[..], &value(*i, 0)[..], "pinned value of key {i}");
    }
    check(&db, &model);
}

#[test]
fn a_damaged_mapped_block_is_corruption_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), options(true, CompressionType::None)).expect("open");
        load(&db, 0);
    }
    let table = tables(dir.path()).pop().expect("one table");
    let mut bytes = std::fs::read(&table).expect("read table");
    bytes[20] ^= 0x40; // inside the first data block, which holds the first keys
    std::fs::write(&table, &bytes).expect("write table");
    let db = Db::open(dir.path(), options(true, CompressionType::None)).expect("reopen");
    for _ in 0..3 {
        match db.get(key(0)) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, table),
            other => panic!("a damaged block must be corruption, got {other:?}"),
        }
    }
    // Keys in undamaged blocks still read.
    assert_eq!(
        db.get(key(KEYS - 1)).expect("get").as_deref(),
        Some(&value(KEYS - 1, 0)[..])
    );
}

#[test]
fn mmap_and_direct_reads_are_refused_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = options(true, CompressionType::None).with_use_direct_reads(true);
    match Db::open(dir.path(), o) {
        Err(Error::InvalidArgument(m)) => {
            assert!(
                m.contains("allow_mmap_reads") && m.contains("use_direct_reads"),
                "{m}"
            )
        }
        other => panic!("expected InvalidArgument, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn a_filesystem_that_cannot_map_reads_as_usual() {
    let mut o = options(true, CompressionType::None);
    o.fs = Arc::new(MemFileSystem::new());
    let db = Db::open(Path::new("/db"), o.clone()).expect("open");
    let model = load(&db, 0);
    check(&db, &model);
    assert!(data_block_lookups(&o) > u64::from(KEYS));
}

/// A sweep of single flipped bytes over a mapped table: every key reads back its value or
/// fails with `Corruption` naming the table, never a wrong value and never a false "not found"
/// (the open itself may refuse the table).
#[test]
fn flipped_bytes_in_a_mapped_table_are_never_wrong_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = {
        let db = Db::open(dir.path(), options(true, CompressionType::None)).expect("open");
        load(&db, 0)
    };
    let table = tables(dir.path()).pop().expect("one table");
    let pristine = std::fs::read(&table).expect("read table");
    let step = pristine.len() / 61;
    for at in (0..pristine.len()).step_by(step) {
        let mut damaged = pristine.clone();
        damaged[at] ^= 0x10;
        std::fs::write(&table, &damaged).expect("write table");
        let db = match Db::open(dir.path(), options(true, CompressionType::None)) {
            Ok(db) => db,
            Err(Error::Corruption { file, .. }) => {
                assert_eq!(file, table, "byte {at}");
                continue;
            }
            Err(e) => panic!("byte {at}: open failed with {e:?}"),
        };
        for (k, v) in model.iter().step_by(5) {
            match db.get(k) {
                Ok(Some(got)) => assert_eq!(&got[..], &v[..], "byte {at}, key {k:?}"),
                Err(Error::Corruption { file, .. }) => assert_eq!(file, table, "byte {at}"),
                other => panic!("byte {at}, key {k:?}: {other:?}"),
            }
        }
    }
    std::fs::write(&table, &pristine).expect("restore");
}

/// With the option, the blob files a get reads are mapped (listed in `/proc/self/maps`), and
/// without it none is; either way every value reads back.
#[test]
fn blob_files_are_mapped_with_the_tables() {
    for mmap in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), blob_options(mmap)).expect("open");
        let model = load(&db, 0);
        check(&db, &model);
        let blobs = blob_files(dir.path());
        assert!(!blobs.is_empty(), "no blob file written");
        let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
        let mapped = blobs
            .iter()
            .map(|b| std::fs::canonicalize(b).expect("canonical path"))
            .filter(|b| maps.contains(b.to_str().expect("UTF-8 path")))
            .count();
        assert_eq!(mapped, if mmap { blobs.len() } else { 0 }, "mmap {mmap}");
    }
}

/// A sweep of single flipped bytes over a mapped blob file: every key reads back its value or
/// fails with `Corruption` naming the blob file, never a wrong value and never a false "not
/// found".
#[test]
fn flipped_bytes_in_a_mapped_blob_file_are_never_wrong_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = {
        let db = Db::open(dir.path(), blob_options(true)).expect("open");
        load(&db, 0)
    };
    let blob = match &blob_files(dir.path())[..] {
        [one] => one.clone(),
        other => panic!("expected one blob file, found {other:?}"),
    };
    let pristine = std::fs::read(&blob).expect("read blob file");
    let step = pristine.len() / 61;
    let mut corruptions = 0;
    for at in (0..pristine.len()).step_by(step) {
        let mut damaged = pristine.clone();
        damaged[at] ^= 0x10;
        std::fs::write(&blob, &damaged).expect("write blob file");
        let db = Db::open(dir.path(), blob_options(true)).expect("reopen");
        for (k, v) in model.iter().step_by(5) {
            match db.get(k) {
                Ok(Some(got)) => assert_eq!(&got[..], &v[..], "byte {at}, key {k:?}"),
                Err(Error::Corruption { file, .. }) => {
                    assert_eq!(file, blob, "byte {at}");
                    corruptions += 1;
                }
                other => panic!("byte {at}, key {k:?}: {other:?}"),
            }
        }
    }
    std::fs::write(&blob, &pristine).expect("restore");
    assert!(corruptions > 0, "no flipped byte was found");
}
