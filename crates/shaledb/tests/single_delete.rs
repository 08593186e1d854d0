//! SingleDelete: reads see a delete through memtables, tables, compaction and recovery, in
//! both iteration directions and in families; snapshots keep the value they saw.

mod common;

use shaledb::fs::MemFileSystem;
use shaledb::{CfOptions, Db, Options, ReadOptions, WriteBatch, WriteOptions};
use std::path::Path;

fn keys(db: &Db, ro: &ReadOptions, reverse: bool) -> Vec<Vec<u8>> {
    common::scan(db, ro, reverse)
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

#[test]
fn single_deleted_keys_read_as_deleted_everywhere() {
    let opts = Options::default()
        .with_fs(MemFileSystem::new())
        .with_write_buffer_size(16 << 10);
    let dir = Path::new("/sd");
    let db = Db::open(dir, opts.clone()).expect("open");
    for i in 0..200u32 {
        db.put(i.to_be_bytes(), [1u8; 50]).expect("put");
    }
    db.flush().expect("flush");
    let snap = db.snapshot();
    for i in (0..200u32).filter(|i| i % 3 == 0) {
        db.single_delete(i.to_be_bytes()).expect("single delete");
    }
    let mut b = WriteBatch::new();
    b.single_delete(1u32.to_be_bytes());
    db.write(&WriteOptions::default(), &b).expect("batch");
    let want: Vec<Vec<u8>> = (0..200u32)
        .filter(|i| i % 3 != 0 && *i != 1)
        .map(|i| i.to_be_bytes().to_vec())
        .collect();
    let check = |db: &Db, snap: Option<&shaledb::Snapshot>| {
        let ro = ReadOptions::default();
        assert_eq!(keys(db, &ro, false), want);
        assert_eq!(keys(db, &ro, true), want);
        assert_eq!(db.get(3u32.to_be_bytes()).expect("get"), None);
        assert!(db.get(2u32.to_be_bytes()).expect("get").is_some());
        if let Some(snap) = snap {
            let ro = ReadOptions {
                snapshot: Some(snap.clone()),
                ..Default::default()
            };
            assert_eq!(keys(db, &ro, false).len(), 200);
            assert!(db.get_opt(&ro, 3u32.to_be_bytes()).expect("get").is_some());
        }
    };
    check(&db, Some(&snap));
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    check(&db, Some(&snap));
    drop(snap);
    db.compact_range(None, None).expect("compact");
    let entries: u64 = db
        .property("shaledb.estimate-num-keys")
        .and_then(|s| s.parse().ok())
        .expect("property");
    assert_eq!(
        entries,
        want.len() as u64,
        "puts and single deletes vanished together"
    );
    drop(db);
    let db = Db::open(dir, opts).expect("reopen");
    check(&db, None);
}

#[test]
fn single_delete_in_a_family_and_through_the_wal() {
    let opts = Options::default().with_fs(MemFileSystem::new());
    let dir = Path::new("/sd-cf");
    {
        let db = Db::open(dir, opts.clone()).expect("open");
        let cf = db.create_cf("x", CfOptions::default()).expect("x");
        db.put_cf(&cf, b"k", b"v").expect("put");
        db.put(b"k", b"default").expect("put");
        let mut b = WriteBatch::new();
        b.single_delete_cf(&cf, b"k");
        db.write(&WriteOptions::default(), &b).expect("batch");
        db.single_delete_cf(&cf, b"never-written")
            .expect("single delete");
    }
    let db = Db::open(dir, opts).expect("reopen");
    let cf = db.cf("x").expect("x");
    assert_eq!(db.get_cf(&cf, b"k").expect("get"), None);
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"default"[..]));
}
