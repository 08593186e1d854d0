//! Several writers, readers and iterators at once while flushes and compactions run; at the
//! end the database holds exactly the union of what was written.
#![allow(clippy::field_reassign_with_default)] // options are built field by field for readability

use shaledb::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

#[test]
fn writers_readers_and_iterators_with_background_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::default();
    o.write_buffer_size = 32 << 10;
    o.target_file_size_base = 16 << 10;
    o.max_bytes_for_level_base = 64 << 10;
    o.level0_file_num_compaction_trigger = 2;
    o.max_background_jobs = 3;
    let db = Arc::new(Db::open(dir.path(), o).expect("open"));
    let writers = 4;
    let per_writer = 3000;
    let stop = Arc::new(AtomicBool::new(false));

    let mut handles = Vec::new();
    for w in 0..writers {
        let db = db.clone();
        handles.push(thread::spawn(move || {
            let mut mine = BTreeMap::new();
            for i in 0..per_writer {
                let k = format!("w{w}-{:05}", i % 1000).into_bytes();
                let v = format!("{w}:{i}").into_bytes();
                if i % 7 == 0 {
                    let mut b = WriteBatch::new();
                    b.put(&k, &v);
                    b.put(format!("b{w}-{i:05}").as_bytes(), b"batch");
                    db.write(
                        &WriteOptions {
                            sync: i % 100 == 0,
                            disable_wal: false,
                            ..Default::default()
                        },
                        &b,
                    )
                    .expect("batch");
                    mine.insert(format!("b{w}-{i:05}").into_bytes(), b"batch".to_vec());
                    mine.insert(k, v);
                } else if i % 11 == 0 {
                    db.delete(&k).expect("delete");
                    mine.remove(&k);
                } else {
                    db.put(&k, &v).expect("put");
                    mine.insert(k, v);
                }
            }
            mine
        }));
    }
    let mut readers = Vec::new();
    for r in 0..2 {
        let db = db.clone();
        let stop = stop.clone();
        readers.push(thread::spawn(move || {
            let mut scans = 0;
            while !stop.load(Ordering::Relaxed) {
                // A writer's own keys only move forward in its sequence: values parse.
                let k = format!("w{r}-{:05}", scans % 1000).into_bytes();
                if let Some(v) = db.get(&k).expect("get") {
                    assert!(v.starts_with(format!("{r}:").as_bytes()));
                }
                let mut it = db.iter(&ReadOptions::default());
                it.seek_to_first();
                let mut prev: Option<Vec<u8>> = None;
                let mut n = 0;
                while it.valid() && n < 2000 {
                    if let Some(p) = &prev {
                        assert!(p.as_slice() < it.key(), "iterator out of order");
                    }
                    prev = Some(it.key().to_vec());
                    it.next();
                    n += 1;
                }
                it.status().expect("iterator status");
                scans += 1;
            }
            scans
        }));
    }
    let mut expected = BTreeMap::new();
    for h in handles {
        expected.extend(h.join().expect("writer thread"));
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().expect("reader thread") > 0);
    }
    db.wait_for_compactions().expect("compactions");
    let got: BTreeMap<_, _> = db
        .range(..)
        .map(|r| r.map(|(k, v)| (k, v.into_vec())))
        .collect::<Result<_, _>>()
        .expect("scan");
    assert_eq!(got.len(), expected.len());
    assert!(
        got == expected,
        "final contents differ from the union of writes"
    );
    for (k, v) in expected.iter().step_by(37) {
        assert_eq!(db.get(k).expect("get").as_deref(), Some(v.as_slice()));
    }
    let l0: usize = db
        .property("shaledb.num-files-at-level0")
        .and_then(|s| s.parse().ok())
        .expect("property");
    assert!(l0 < 20, "compaction did not keep up: {l0} L0 files");
}

#[test]
fn user_bytes_count_every_group_member() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Db::open(dir.path(), Options::default()).expect("open"));
    let threads = 8;
    let per_thread = 200;
    let mut handles = Vec::new();
    for t in 0..threads {
        let db = db.clone();
        handles.push(thread::spawn(move || {
            let mut bytes = 0u64;
            for i in 0..per_thread {
                let mut b = WriteBatch::new();
                b.put(format!("t{t}-{i:05}").as_bytes(), &[t as u8; 100]);
                bytes += b.approximate_size() as u64;
                // Sync writes are slow, so writers queue up and form groups.
                let wo = WriteOptions {
                    sync: true,
                    disable_wal: false,
                    ..Default::default()
                };
                db.write(&wo, &b).expect("write");
            }
            bytes
        }));
    }
    let expected: u64 = handles.into_iter().map(|h| h.join().expect("writer")).sum();
    // Writers that joined another's group are counted too, not only group leaders.
    assert_eq!(
        db.property("shaledb.user-bytes-written"),
        Some(expected.to_string())
    );
    db.close().expect("close");
}
