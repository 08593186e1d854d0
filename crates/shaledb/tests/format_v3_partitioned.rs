//! Tables of format version 3 (a two-level index and filter partitions, docs/format/sstable.md):
//! a database written with `IndexType::TwoLevel` and `partition_filters`
//! (tests/data/format-v3-partitioned, written by `write_the_fixture` below at the commit that
//! introduced the format) opens, reads back exactly (with and without the prefix extractor
//! whose prefixes its filter partitions hold) and keeps working, rewritten in format 4 with one
//! index block and with two levels. The same data in format 4 (delta-encoded index handles,
//! one table keyed by user keys and one by internal keys: tests/data/format-v4-small-index,
//! written by `write_the_fixture` at the commit that introduced that format) reads back the
//! same way.

mod common;

use shaledb::{
    CompressionType, Db, FixedPrefix, IndexType, Options, ReadOptions, Value, WriteBatch,
};
use std::path::Path;
use std::sync::Arc;

const FIXTURE: &str = "tests/data/format-v3-partitioned";
const FIXTURE_V4: &str = "tests/data/format-v4-small-index";
/// The key the format-4 fixture holds 40 older versions of, kept by snapshots at its flush,
/// so they span data blocks and that table's index keeps internal keys.
const MANY_VERSIONS: u32 = 1234;
const ROWS: u32 = 3000;

/// The options the fixture was written with.
fn options() -> Options {
    let mut o = Options {
        write_buffer_size: 64 << 10,
        block_size: 512,
        index_type: IndexType::TwoLevel,
        partition_filters: true,
        metadata_block_size: 256,
        prefix_extractor: Some(Arc::new(FixedPrefix(6))),
        ..Default::default()
    };
    o.set_compression(CompressionType::Lz4);
    o
}

fn key(i: u32) -> String {
    format!("key{i:05}")
}

fn row(i: u32) -> String {
    format!(
        "{i}|{}|DELIVER IN PERSON|TRUCK|1996-0{}-1{}",
        i * 7 % 1000,
        i % 9 + 1,
        i % 10
    )
}

/// The fixture's value of `key(i)`.
fn expected(i: u32) -> Option<Vec<u8>> {
    match i {
        _ if i >= ROWS => None,
        1000..1100 => None, // range-deleted after the update
        _ if i.is_multiple_of(7) => Some(format!("updated {i}").into_bytes()),
        _ if i.is_multiple_of(5) => None,
        _ => Some(row(i).into_bytes()),
    }
}

/// Every entry of the fixture, in key order.
fn expected_entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..ROWS)
        .filter_map(|i| expected(i).map(|v| (key(i).into_bytes(), v)))
        .collect()
}

/// The options the format-4 fixture was written with: restart interval 4 in index blocks, so
/// entries between restart points hold only their block's size.
fn options_v4() -> Options {
    Options {
        index_block_restart_interval: 4,
        ..options()
    }
}

/// Writes the format-4 fixture (run by hand with `--ignored`, then commit its files but LOCK).
/// The format-3 fixture was written by this function, without the versions of
/// `MANY_VERSIONS`, with `options()`, at the commit its README names.
#[test]
#[ignore = "writes the committed fixture"]
fn write_the_fixture() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE_V4);
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir, options_v4()).expect("open");
    for i in 0..ROWS {
        db.put(key(i), row(i)).expect("put");
    }
    for i in (0..ROWS).step_by(5) {
        db.delete(key(i)).expect("delete");
    }
    db.flush().expect("flush");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    // A second, smaller table in L0: updates and a range tombstone over some of them.
    let mut b = WriteBatch::new();
    for i in (0..ROWS).step_by(7) {
        b.put(key(i), format!("updated {i}"));
    }
    db.write(&shaledb::WriteOptions::default(), &b)
        .expect("write");
    db.delete_range(key(1000), key(1100)).expect("delete_range");
    let mut snapshots = Vec::new();
    for v in 0..40 {
        db.put(key(MANY_VERSIONS), format!("older {v}"))
            .expect("put");
        snapshots.push(db.snapshot());
    }
    db.put(key(MANY_VERSIONS), row(MANY_VERSIONS)).expect("put");
    db.flush().expect("flush");
    drop(snapshots);
    db.close().expect("close");
    let _ = std::fs::remove_file(dir.join("LOCK"));
}

fn collect(it: impl Iterator<Item = shaledb::Result<(Vec<u8>, Value)>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|r| r.map(|(k, v)| (k, v.to_vec())))
        .collect::<Result<_, _>>()
        .expect("scan")
}

/// Every key (and absent ones around them) by get and multi-get, scans both ways, and a
/// seek into the middle of every index partition's worth of keys.
fn check_contents(db: &Db) {
    for i in 0..ROWS + 10 {
        let got = db.get(key(i)).expect("get").map(|v| v.to_vec());
        assert_eq!(got, expected(i), "{}", key(i));
    }
    for absent in ["key", "key00001x", "key01050", "key02999z", "kez", ""] {
        assert_eq!(db.get(absent).expect("get"), None, "{absent:?}");
    }
    let keys: Vec<String> = (0..ROWS + 10).rev().step_by(3).map(key).collect();
    for (k, got) in keys.iter().zip(db.multi_get(&keys)) {
        let i: u32 = k[3..].parse().expect("number");
        assert_eq!(
            got.expect("multi_get").map(|v| v.to_vec()),
            expected(i),
            "{k}"
        );
    }
    let all = expected_entries();
    assert_eq!(all.len(), 2403, "the expected contents");
    assert!(collect(db.range(..)) == all, "forward scan differs");
    let mut back = collect(db.range(..).rev());
    back.reverse();
    assert!(back == all, "backward scan differs");
    for i in (0..ROWS).step_by(37) {
        let from = key(i);
        let want: Vec<_> = all
            .iter()
            .filter(|(k, _)| k.as_slice() >= from.as_bytes())
            .take(5)
            .cloned()
            .collect();
        assert!(
            collect(db.range(from.clone()..).take(5)) == want,
            "seek to {from}"
        );
    }
}

/// Prefix walks (`Db::prefix`, and with the fixture's extractor seeks with
/// `prefix_same_as_start`) of every prefix and of prefixes no key has: with the extractor
/// these go through the fixture's prefix blooms.
fn check_prefixes(db: &Db, extractor: bool) {
    let all = expected_entries();
    for p in (0..=30)
        .map(|p| format!("key{p:03}"))
        .chain(["key999".into(), "kez000".into()])
    {
        let want: Vec<_> = all
            .iter()
            .filter(|(k, _)| k.starts_with(p.as_bytes()))
            .cloned()
            .collect();
        assert!(collect(db.prefix(&p)) == want, "prefix {p}");
        if !extractor {
            continue;
        }
        let ro = ReadOptions {
            prefix_same_as_start: true,
            ..Default::default()
        };
        let mut it = db.iter(&ro);
        it.seek(&p);
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status().expect("prefix seek");
        assert!(got == want, "prefix seek {p}");
    }
}

#[test]
fn a_database_with_partitioned_tables_opens_and_reads_back() {
    let (_tmp, dir) = common::copy_fixture(FIXTURE);
    let shapes = common::assert_partitioned_tables(&dir, 10);
    assert_eq!(shapes.len(), 2, "{shapes:?}");
    assert!(shapes.iter().all(|s| s.format_version == 3), "{shapes:?}");
    // Read with options that would write one index block and no prefixes: reading needs none.
    {
        let db = Db::open(&dir, Options::default()).expect("open");
        check_contents(&db);
        check_prefixes(&db, false);
        db.verify_checksums().expect("verify");
    }
    // With the fixture's own options the prefix walks use its partitioned prefix blooms.
    {
        let db = Db::open(&dir, options()).expect("open with the fixture's options");
        check_contents(&db);
        check_prefixes(&db, true);
    }
    // Rewritten as format 4 with one index block by a full compaction with default options,
    // then as format 4 with two levels.
    for (opts, two_level) in [(Options::default(), false), (options(), true)] {
        let extractor = opts.prefix_extractor.is_some();
        let db = Db::open(&dir, opts).expect("open");
        db.put(b"new", b"row").expect("put");
        db.compact_range(None::<&[u8]>, None::<&[u8]>)
            .expect("compact");
        assert_eq!(db.get(b"new").expect("get").as_deref(), Some(&b"row"[..]));
        db.delete(b"new").expect("delete");
        db.compact_range(None::<&[u8]>, None::<&[u8]>)
            .expect("compact");
        check_contents(&db);
        check_prefixes(&db, extractor);
        db.verify_checksums().expect("verify");
        db.close().expect("close");
        let shapes = common::table_shapes(&dir);
        assert!(!shapes.is_empty());
        for s in shapes {
            assert_eq!((s.format_version, s.two_level), (4, two_level), "{s:?}");
        }
    }
}

#[test]
fn a_database_with_format_4_tables_opens_and_reads_back() {
    let (_tmp, dir) = common::copy_fixture(FIXTURE_V4);
    // A smaller index than format 3's: 9 partitions where the same data had 26.
    let shapes = common::assert_partitioned_tables(&dir, 9);
    // The compacted table has one version per key (user-key index); the L0 table has the
    // versions of MANY_VERSIONS across blocks (internal-key index).
    let forms: Vec<_> = shapes
        .iter()
        .map(|s| (s.format_version, s.index_user_keys))
        .collect();
    assert_eq!(forms, [(4, true), (4, false)], "{shapes:?}");
    assert_eq!(
        expected(MANY_VERSIONS),
        Some(row(MANY_VERSIONS).into_bytes())
    );
    for opts in [Options::default(), options_v4()] {
        let extractor = opts.prefix_extractor.is_some();
        let db = Db::open(&dir, opts).expect("open");
        check_contents(&db);
        check_prefixes(&db, extractor);
        db.verify_checksums().expect("verify");
        db.close().expect("close");
    }
}
