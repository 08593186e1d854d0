//! `Options::prepopulate_block_cache`: with `FlushOnly` the data blocks a flush writes are in
//! the block cache when the flush returns, so reading what was just flushed reads no table
//! file; compaction outputs are not put there; without the option reads go to the files. The
//! data read is the data written in every case (model check, reopen).

mod common;

use common::CountReads;
use shaledb::fs::{FileSystem, HookedFileSystem, MemFileSystem};
use shaledb::{Db, Options, PrepopulateBlockCache};
use std::collections::BTreeMap;
use std::sync::Arc;

fn options(fs: Arc<dyn FileSystem>, prepopulate: PrepopulateBlockCache) -> Options {
    Options {
        fs,
        // Flushed tables are opened (and their index read) before the flush returns, so the
        // reads counted afterwards are data-block reads.
        paranoid_checks: true,
        disable_auto_compactions: true,
        ..Options::default()
    }
    .with_prepopulate_block_cache(prepopulate)
    .with_block_size(1024)
    .with_block_cache_size(64 << 20)
}

/// Puts, overwrites and deletes over `rounds` flushes; returns the model.
fn load(db: &Db, rounds: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for round in 0..rounds {
        for i in 0..3000u32 {
            let key = format!("key{:05}", (i * 7919 + round) % 4000).into_bytes();
            if i % 13 == 0 {
                db.delete(&key).expect("delete");
                model.remove(&key);
            } else {
                let value = format!("value-{round}-{i}-{}", "x".repeat((i % 61) as usize));
                db.put(&key, value.as_bytes()).expect("put");
                model.insert(key, value.into_bytes());
            }
        }
        db.flush().expect("flush");
    }
    model
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    common::check_keys_and_scan(db, model, 4000);
}

/// Loads a database with `prepopulate`, then returns the model and the table reads that
/// reading everything back took.
fn reads_after_flushes(prepopulate: PrepopulateBlockCache) -> u64 {
    let fs = Arc::new(HookedFileSystem::new(
        Arc::new(MemFileSystem::new()),
        CountReads::of("sst"),
    ));
    let db = Db::open("/db", options(fs.clone(), prepopulate)).expect("open");
    let model = load(&db, 3);
    assert_eq!(
        db.property("shaledb.num-files-at-level0").as_deref(),
        Some("3")
    );
    let before = fs.hook().reads();
    check(&db, &model);
    let reads = fs.hook().reads() - before;

    // A compaction's outputs are not put into the cache: reading them reads the files.
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    let before = fs.hook().reads();
    check(&db, &model);
    assert!(
        fs.hook().reads() > before,
        "compaction outputs read from their files"
    );
    drop(db);

    // A reopened database starts with an empty cache and reads the same data.
    let db = Db::open("/db", options(fs.clone(), prepopulate)).expect("reopen");
    check(&db, &model);
    reads
}

#[test]
fn flushed_blocks_are_read_from_the_cache_only_with_flush_only() {
    assert_eq!(
        reads_after_flushes(PrepopulateBlockCache::FlushOnly),
        0,
        "every block of the three flushed tables was in the cache"
    );
    assert!(reads_after_flushes(PrepopulateBlockCache::Disable) > 10);
}

#[test]
fn cache_usage_grows_by_the_flushed_blocks() {
    let usage = |prepopulate| {
        let fs = Arc::new(MemFileSystem::new());
        let db = Db::open("/db", options(fs, prepopulate)).expect("open");
        load(&db, 1);
        let usage: u64 = db
            .property("shaledb.block-cache-usage")
            .expect("usage")
            .parse()
            .expect("number");
        let data: u64 = db
            .property("shaledb.total-sst-files-size")
            .expect("size")
            .parse()
            .expect("number");
        (usage, data)
    };
    let (with, data) = usage(PrepopulateBlockCache::FlushOnly);
    let (without, _) = usage(PrepopulateBlockCache::Disable);
    // Blocks are cached uncompressed and this data barely compresses: the flushed blocks
    // weigh about what the table's data blocks weigh.
    assert!(with - without > data / 2, "{with} - {without} vs {data}");
}
