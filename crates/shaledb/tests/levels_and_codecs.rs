//! Level shapes and codecs: `level_compaction_dynamic_level_bytes` (L0 compacts into the level
//! the data needs, the levels above stay empty, less garbage under overwrites than static
//! targets), `bottommost_compression`, and `CompactRangeOptions::bottommost_level_compaction`.

mod common;

use shaledb::{Db, Options};
use std::path::Path;

fn options(dynamic: bool) -> Options {
    Options::default()
        .with_write_buffer_size(32 << 10)
        .with_target_file_size_base(32 << 10)
        .with_max_bytes_for_level_base(64 << 10)
        .with_max_bytes_for_level_multiplier(4.0)
        .with_level0_file_num_compaction_trigger(2)
        .with_num_levels(5)
        .with_level_compaction_dynamic_level_bytes(dynamic)
        // Incompressible values and no codec: table bytes are entry bytes.
        .with_compression(shaledb::CompressionType::None)
}

/// 200 incompressible bytes, different for every `seed`.
fn value(seed: u64) -> Vec<u8> {
    common::incompressible(seed, 200)
}

fn level_files(db: &Db) -> Vec<usize> {
    (0..5)
        .map(|l| {
            let p = db.property(&format!("shaledb.num-files-at-level{l}"));
            p.and_then(|s| s.parse().ok()).expect("property")
        })
        .collect()
}

fn number(db: &Db, name: &str) -> u64 {
    db.property(name)
        .and_then(|s| s.parse().ok())
        .expect("property")
}

/// Writes 2,000 keys of 200 bytes five times over (2 MB written, 400 KB live), waits for
/// compactions; returns the bytes in tables.
fn overwrite(db: &Db) -> u64 {
    for round in 0..5u32 {
        for i in 0..2000u32 {
            let key = format!("key{:06}", (i * 7919) % 2000);
            db.put(&key, value(u64::from(round * 2000 + i)))
                .expect("put");
        }
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait");
    number(db, "shaledb.total-sst-files-size")
}

#[test]
fn l0_compacts_into_the_last_level_of_a_small_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options(true)).expect("open");
    assert_eq!(
        number(&db, "shaledb.base-level"),
        4,
        "empty: L0 goes to the last level"
    );
    for i in 0..400u32 {
        db.put(format!("key{i:06}"), [b'v'; 200]).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    db.wait_for_compactions().expect("wait");
    let files = level_files(&db);
    assert_eq!(&files[..4], [0, 0, 0, 0], "levels: {files:?}");
    assert!(files[4] > 0, "levels: {files:?}");
}

#[test]
fn dynamic_targets_keep_less_garbage_than_static_ones() {
    let sizes: Vec<u64> = [false, true]
        .into_iter()
        .map(|dynamic| {
            let dir = tempfile::tempdir().expect("tempdir");
            let path: &Path = dir.path();
            let db = Db::open(path, options(dynamic)).expect("open");
            let size = overwrite(&db);
            let files = level_files(&db);
            if dynamic {
                // About 420 KB in L4: L3 targets a quarter (105 KB), L2 a sixteenth (26 KB,
                // under the 64 KB base), so L2 is the base level and L1 was never needed.
                assert_eq!(number(&db, "shaledb.base-level"), 2, "levels: {files:?}");
                assert_eq!(files[1], 0, "levels: {files:?}");
            }
            size
        })
        .collect();
    let live = 2000 * (9 + 200);
    eprintln!(
        "static {} bytes, dynamic {} bytes, live {live}",
        sizes[0], sizes[1]
    );
    assert!(
        sizes[1] < sizes[0],
        "dynamic {} vs static {}",
        sizes[1],
        sizes[0]
    );
    assert!(
        (sizes[1] as f64) < live as f64 * 1.6,
        "dynamic space amplification: {} bytes for {live} live",
        sizes[1]
    );
}

/// `bottommost_compression` applies to what compaction writes where nothing lies below;
/// flushes and upper levels keep `compression_per_level`.
#[test]
fn bottommost_compression_applies_to_the_last_level_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = options(false)
        .with_bottommost_compression(Some(shaledb::CompressionType::Zstd))
        .with_compression_level(Some(9))
        // Everything stays in L0 until compact_range.
        .with_disable_auto_compactions(true);
    let db = Db::open(dir.path(), opts).expect("open");
    // Compressible values: 40 distinct 8-byte words repeated.
    for i in 0..2000u32 {
        let v: Vec<u8> = (0..400u32)
            .map(|j| b"shaledb-"[(j % 8) as usize] ^ (i % 40) as u8)
            .collect();
        db.put(format!("key{i:06}"), v).expect("put");
    }
    db.flush().expect("flush");
    // Before compaction the flushed tables hold the values as written (no codec at L0).
    let flushed = number(&db, "shaledb.total-sst-files-size");
    assert!(flushed > 2000 * 400, "flushed {flushed}");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    // Everything in one level, nothing below it.
    let files = level_files(&db);
    assert_eq!(
        files.iter().filter(|&&n| n > 0).count(),
        1,
        "levels: {files:?}"
    );
    assert_eq!(files[0], 0, "levels: {files:?}");
    let compacted = number(&db, "shaledb.total-sst-files-size");
    assert!(
        compacted * 10 < flushed,
        "compacted {compacted} of {flushed}"
    );
    for i in (0..2000u32).step_by(97) {
        let v: Vec<u8> = (0..400u32)
            .map(|j| b"shaledb-"[(j % 8) as usize] ^ (i % 40) as u8)
            .collect();
        assert_eq!(
            db.get(format!("key{i:06}")).expect("get").as_deref(),
            Some(&v[..])
        );
    }
}

/// `CompactRangeOptions::bottommost_level_compaction`: the deepest level holds two versions
/// of every key (a snapshot kept both when they were compacted); once the snapshot is gone,
/// only the modes that rewrite that level drop the old versions.
#[test]
fn bottommost_level_compaction_modes() {
    use shaledb::{BottommostLevelCompaction as B, CompactRangeOptions};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(
        dir.path(),
        options(false).with_disable_auto_compactions(true),
    )
    .expect("open");
    let compact = |mode| {
        let o = CompactRangeOptions {
            bottommost_level_compaction: mode,
        };
        db.compact_range_opt(&o, None, None).expect("compact");
        number(&db, "shaledb.total-sst-files-size")
    };
    for i in 0..1000u64 {
        db.put(format!("key{i:06}"), value(i)).expect("put");
    }
    let snapshot = db.snapshot();
    for i in 0..1000u64 {
        db.put(format!("key{i:06}"), value(i + 1000)).expect("put");
    }
    db.flush().expect("flush");
    let both = compact(B::ForceOptimized);
    assert!(both > 2 * 1000 * 200, "both versions kept: {both}");
    drop(snapshot);
    // Skip, and IfHaveCompactionFilter without a filter, leave the last level alone.
    assert_eq!(compact(B::Skip), both);
    assert_eq!(compact(B::IfHaveCompactionFilter), both);
    let one = compact(B::Force);
    assert!(one < both * 6 / 10, "old versions dropped: {one} of {both}");
    let files = level_files(&db);
    assert_eq!(
        files.iter().filter(|&&n| n > 0).count(),
        1,
        "one level: {files:?}"
    );
    // Nothing left to drop: rewriting again changes nothing, and the live-data estimate is
    // the whole size.
    assert_eq!(compact(B::ForceOptimized), one);
    assert_eq!(number(&db, "shaledb.estimate-live-data-size"), one);
    for i in (0..1000u64).step_by(37) {
        let got = db.get(format!("key{i:06}")).expect("get");
        assert_eq!(got.as_deref(), Some(&value(i + 1000)[..]));
    }
}
