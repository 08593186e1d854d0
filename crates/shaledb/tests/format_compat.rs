//! A database written by the format before column families and merge operands
//! (tests/data/format-v1, see its README) opens with the current code, reads back exactly, and
//! takes the new record types afterwards.

mod common;

use shaledb::merge_operators::UInt64Add;
use shaledb::{CfOptions, Db, Options, ReadOptions};
use std::sync::Arc;

fn expected(i: u32) -> Option<Vec<u8>> {
    match i {
        1 => None,
        2 => Some(b"overwritten in the WAL".to_vec()),
        i if i % 7 == 0 => None,
        i => Some(format!("value{i}-{}", "x".repeat((i % 13) as usize)).into_bytes()),
    }
}

fn check_old_data(db: &Db) {
    for i in 0..2000u32 {
        let got = db
            .get(format!("key{i:05}"))
            .expect("get")
            .map(|v| v.to_vec());
        assert_eq!(got, expected(i), "key{i:05}");
    }
    assert_eq!(db.get(b"wal-a").expect("get").as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"wal-b").expect("get").as_deref(), Some(&b"2"[..]));
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().expect("scan");
    assert_eq!(n, 2000 - 286 - 1 + 2);
}

#[test]
fn a_database_of_the_previous_format_opens_and_takes_new_records() {
    let (_dir, path) = common::copy_fixture("tests/data/format-v1");
    assert_eq!(
        Db::list_cf(&path, &Options::default()).expect("list"),
        ["default"]
    );
    {
        let db = Db::open(&path, Options::default()).expect("open the old database");
        check_old_data(&db);
        // New record types on top: a family, merges, single deletes.
        let cf = db
            .create_cf(
                "counters",
                CfOptions {
                    merge_operator: Some(Arc::new(UInt64Add)),
                    ..Default::default()
                },
            )
            .expect("create_cf");
        db.merge_cf(&cf, b"c", 5u64.to_le_bytes()).expect("merge");
        db.put(b"sd", b"once").expect("put");
        db.single_delete(b"sd").expect("single delete");
        db.compact_range(None, None)
            .expect("compact the old table with new code");
        check_old_data(&db);
    }
    let counters = CfOptions {
        merge_operator: Some(Arc::new(UInt64Add)),
        ..Default::default()
    };
    let db = Db::open_cf(&path, Options::default(), [("counters", counters)]).expect("reopen");
    check_old_data(&db);
    let cf = db.cf("counters").expect("counters");
    assert_eq!(
        db.get_cf(&cf, b"c").expect("get").as_deref(),
        Some(&5u64.to_le_bytes()[..])
    );
    assert_eq!(db.get(b"sd").expect("get"), None);
}

/// Values of tests/data/format-v4-blob-files (see its README).
fn expected_blob_row(i: u32) -> Option<Vec<u8>> {
    match i {
        1 => Some(b"in the WAL".to_vec()),
        i if i % 9 == 0 => None,
        i => Some(format!("blob{i}-{}", "y".repeat((60 + i % 50) as usize)).into_bytes()),
    }
}

fn check_blob_rows(db: &Db, what: &str) {
    for i in 0..600u32 {
        let got = db
            .get(format!("key{i:05}"))
            .expect("get")
            .map(|v| v.to_vec());
        assert_eq!(got, expected_blob_row(i), "{what}: key{i:05}");
    }
    let scanned = common::scan(db, &ReadOptions::default(), false);
    let want: Vec<(Vec<u8>, Vec<u8>)> = (0..600u32)
        .filter_map(|i| expected_blob_row(i).map(|v| (format!("key{i:05}").into_bytes(), v)))
        .collect();
    assert!(scanned == want, "{what}: scan differs");
}

/// Blob references written before a `BlobIndex` entry could carry a write time (a family with
/// a TTL) still decode, read and compact.
#[test]
fn a_database_with_blob_files_of_the_previous_format_opens_and_reads_back() {
    let (_dir, path) = common::copy_fixture("tests/data/format-v4-blob-files");
    let opts = Options {
        enable_blob_files: true,
        min_blob_size: 64,
        blob_file_size: 16 << 10,
        ..Default::default()
    };
    {
        let db = Db::open(&path, opts.clone()).expect("open the old database");
        check_blob_rows(&db, "as written");
        db.compact_range(None::<&[u8]>, None::<&[u8]>)
            .expect("compact with the current code");
        check_blob_rows(&db, "compacted");
    }
    let db = Db::open(&path, opts).expect("reopen");
    check_blob_rows(&db, "reopened");
}
