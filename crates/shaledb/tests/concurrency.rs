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

/// Writers whose groups hand the queue on after their WAL append and insert at the same time
/// (`allow_concurrent_memtable_write`), with memtables switched every few hundred writes:
/// each writer reads its own write once it returns, a batch is never seen half applied, what
/// a snapshot shows never changes (a group published before an earlier one finished
/// inserting would show up later at the same snapshot), and every write is there at the end
/// and after a reopen (a memtable frozen while a group still inserted into it would lose
/// entries in its flush). Then the same with the option off.
fn writers_read_their_writes_and_snapshots_repeat(concurrent: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = Options::default()
        .with_write_buffer_size(64 << 10)
        .with_allow_concurrent_memtable_write(concurrent);
    let db = Arc::new(Db::open(dir.path(), o).expect("open"));
    let writers = 6;
    let per_writer = 4000u32;
    let stop = Arc::new(AtomicBool::new(false));
    let keys = |w: usize| (format!("w{w}-a"), format!("w{w}-b"));
    let read_all = |db: &Db, ro: &ReadOptions| -> Vec<(u32, u32)> {
        let value = |k: &str| {
            db.get_opt(ro, k).expect("get").map_or(0, |v| {
                u32::from_le_bytes(v[..4].try_into().expect("4 bytes"))
            })
        };
        (0..writers)
            .map(|w| {
                let (a, b) = keys(w);
                (value(&a), value(&b))
            })
            .collect()
    };
    thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (db, stop) = (db.clone(), stop.clone());
                s.spawn(move || {
                    let mut checks = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let snap = db.snapshot();
                        let ro = ReadOptions {
                            snapshot: Some(snap.clone()),
                            ..Default::default()
                        };
                        let first = read_all(&db, &ro);
                        for (a, b) in &first {
                            assert_eq!(a, b, "a batch seen half applied");
                        }
                        thread::yield_now();
                        assert_eq!(read_all(&db, &ro), first, "a snapshot changed");
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let db = db.clone();
                s.spawn(move || {
                    let (a, b) = keys(w);
                    for i in 1..=per_writer {
                        let mut batch = WriteBatch::new();
                        // Padding so memtables fill and switch while groups are inflight.
                        let mut v = i.to_le_bytes().to_vec();
                        v.resize(100, 0);
                        batch.put(&a, &v);
                        batch.put(&b, &v);
                        batch.put(format!("u{w}-{i:05}"), i.to_le_bytes());
                        db.write(&WriteOptions::default(), &batch).expect("write");
                        let got = db.get(&a).expect("get").expect("own write");
                        assert_eq!(&got[..4], &i.to_le_bytes(), "writer {w} missed its write");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("writer");
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            assert!(r.join().expect("reader") > 0);
        }
    });
    let expected: Vec<(u32, u32)> = (0..writers).map(|_| (per_writer, per_writer)).collect();
    assert_eq!(read_all(&db, &ReadOptions::default()), expected);
    db.wait_for_compactions().expect("compactions");
    let unique = db.prefix("u").count();
    assert_eq!(unique, writers * per_writer as usize, "writes lost");
    // Every entry got its own sequence number, groups or not.
    let last: u64 = db
        .property("shaledb.last-sequence")
        .and_then(|s| s.parse().ok())
        .expect("last-sequence");
    assert_eq!(last, u64::from(per_writer) * writers as u64 * 3);
    // Memtables were switched (and flushed) while the writers ran.
    let table_bytes: u64 = db
        .property("shaledb.total-sst-files-size")
        .and_then(|s| s.parse().ok())
        .expect("total-sst-files-size");
    assert!(table_bytes > 0);
    db.close().expect("close");
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    assert_eq!(read_all(&db, &ReadOptions::default()), expected);
    let unique = db.prefix("u").count();
    assert_eq!(unique, writers * per_writer as usize, "writes lost");
}

#[test]
fn concurrent_memtable_writes_keep_snapshots_and_read_your_writes() {
    writers_read_their_writes_and_snapshots_repeat(true);
}

#[test]
fn serial_memtable_writes_keep_snapshots_and_read_your_writes() {
    writers_read_their_writes_and_snapshots_repeat(false);
}
