//! `Options::cache_index_and_filter_blocks`: with it, the block cache bounds the memory of
//! indexes and filters too (they are evicted and read again); without it they stay in memory
//! for as long as their tables are open, whatever the cache's capacity. Reads are the same.

use shaledb::{Db, Options};

fn options(cache_meta: bool) -> Options {
    Options {
        disable_auto_compactions: true,
        bloom_bits_per_key: 10,
        ..Options::default()
    }
    .with_block_size(256)
    .with_write_buffer_size(256 << 10)
    .with_block_cache_size(128 << 10)
    .with_block_cache_shard_bits(0)
    .with_cache_index_and_filter_blocks(cache_meta)
}

fn key(i: u32) -> String {
    format!("key{i:08}")
}

/// Loads 100,000 keys into a dozen or so tables (no compaction), reads every tenth key and
/// some absent ones, and returns the block cache's usage and capacity afterwards.
fn load_and_read(cache_meta: bool) -> (u64, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options(cache_meta)).expect("open");
    for i in 0..100_000u32 {
        db.put(key(i), format!("v{i}")).expect("put");
    }
    db.flush().expect("flush");
    let tables: u64 = db
        .property("shaledb.num-files-at-level0")
        .expect("files")
        .parse()
        .expect("number");
    assert!(tables >= 8, "{tables} tables");
    for i in (0..100_000u32).step_by(10) {
        assert_eq!(
            db.get(key(i)).expect("get").as_deref(),
            Some(format!("v{i}").as_bytes()),
            "key {i}"
        );
        assert_eq!(db.get(format!("{}x", key(i))).expect("get absent"), None);
    }
    assert_eq!(db.range(..).count(), 100_000);
    db.verify_checksums().expect("verify");
    let prop = |name: &str| -> u64 {
        db.property(name)
            .expect("property")
            .parse()
            .expect("number")
    };
    (
        prop("shaledb.block-cache-usage"),
        prop("shaledb.block-cache-capacity"),
    )
}

#[test]
fn the_block_cache_bounds_index_and_filter_memory_only_with_the_option() {
    let (usage, capacity) = load_and_read(true);
    // One entry may overshoot while it is inserted; everything else was evicted.
    assert!(usage <= capacity + (64 << 10), "{usage} > {capacity}");
    let (pinned, capacity) = load_and_read(false);
    assert!(
        pinned > capacity,
        "indexes and filters of open tables are charged whatever the capacity: {pinned} <= {capacity}"
    );
}
