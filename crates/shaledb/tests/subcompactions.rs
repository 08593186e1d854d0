//! Subcompactions (`Options::max_subcompactions`): a compaction out of L0 and a manual one are
//! split into key ranges written side by side, and the database reads exactly as one whose
//! compactions were not split (same contents, a snapshot's view, range deletions, blob values).

mod common;

use shaledb::{Db, Options, ReadOptions, Statistics, Ticker};
use std::sync::Arc;

fn options(max_subcompactions: u32, blobs: bool) -> Options {
    Options {
        max_subcompactions,
        statistics: Some(Arc::new(Statistics::new())),
        enable_blob_files: blobs,
        min_blob_size: 200,
        ..common::small_tree_options()
    }
}

/// Keys and values, in key order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Writes the same history to `db`: puts over a wide key space in random order, overwrites,
/// deletions and a range deletion, with a snapshot taken half way; returns the snapshot's
/// view, read before any compaction.
fn write_history(db: &Db) -> (shaledb::Snapshot, Entries) {
    let key = |i: u64| format!("key{:06}", (i * 7919) % 20_000).into_bytes();
    let value = |i: u64, round: u64| {
        let mut v = format!("{i}-{round}-").into_bytes();
        v.extend(common::incompressible(
            i + round * 100_000,
            50 + (i % 5) as usize * 100,
        ));
        v
    };
    for i in 0..6_000 {
        db.put(key(i), value(i, 0)).expect("put");
    }
    let snapshot = db.snapshot();
    let ro = ReadOptions {
        snapshot: Some(snapshot.clone()),
        ..Default::default()
    };
    let at_snapshot = common::scan(db, &ro, false);
    for i in (0..6_000).step_by(3) {
        db.put(key(i), value(i, 1)).expect("overwrite");
    }
    for i in (1..6_000).step_by(7) {
        db.delete(key(i)).expect("delete");
    }
    db.delete_range(b"key005000", b"key007000")
        .expect("delete range");
    (snapshot, at_snapshot)
}

#[test]
fn split_compactions_read_as_unsplit_ones() {
    for blobs in [false, true] {
        let mut contents = Vec::new();
        for max_subcompactions in [1, 4] {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = Db::open(dir.path(), options(max_subcompactions, blobs)).expect("open");
            let (snapshot, at_snapshot) = write_history(&db);
            db.compact_range(None::<&[u8]>, None::<&[u8]>)
                .expect("compact");
            let ro = ReadOptions {
                snapshot: Some(snapshot),
                ..Default::default()
            };
            assert_eq!(
                common::scan(&db, &ro, false),
                at_snapshot,
                "snapshot's view"
            );
            let latest = common::scan(&db, &ReadOptions::default(), false);
            assert_eq!(common::scan(&db, &ReadOptions::default(), true), latest);
            let stats = db.statistics().expect("statistics");
            let split = stats.ticker(Ticker::SubcompactionsRun);
            match max_subcompactions {
                1 => assert_eq!(split, 0),
                // The manual compaction and some out of L0 were split: several ranges each.
                _ => assert!(split >= 4, "{split} subcompactions"),
            }
            drop(db);
            // The split outputs form a valid tree: it reopens and reads the same.
            let db = Db::open(dir.path(), options(max_subcompactions, blobs)).expect("reopen");
            assert_eq!(common::scan(&db, &ReadOptions::default(), false), latest);
            contents.push(latest);
        }
        assert_eq!(contents[0], contents[1], "blobs: {blobs}");
        assert!(contents[0].len() > 3_000, "{} keys", contents[0].len());
    }
}

#[test]
fn zero_subcompactions_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    match Db::open(dir.path(), options(0, false)) {
        Err(shaledb::Error::InvalidArgument(m)) => {
            assert!(m.contains("max_subcompactions"), "{m}")
        }
        other => panic!("opened with max_subcompactions 0: {:?}", other.map(|_| ())),
    }
}
