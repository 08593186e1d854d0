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
