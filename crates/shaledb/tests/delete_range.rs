//! DeleteRange: range tombstones honoured by gets, multi-gets, iterators in both directions,
//! snapshots, merges, flush, compaction and recovery, in families; and a model test with range
//! deletes overlapping everything.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::fs::MemFileSystem;
use shaledb::merge_operators::StringAppend;
use shaledb::{CfOptions, Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn small_opts() -> Options {
    Options {
        write_buffer_size: 16 << 10,
        level0_file_num_compaction_trigger: 2,
        target_file_size_base: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        merge_operator: Some(Arc::new(StringAppend::new(","))),
        ..Default::default()
    }
    .with_fs(MemFileSystem::new())
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn forward(db: &Db, ro: &ReadOptions) -> Pairs {
    let mut it = db.iter(ro);
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("status");
    out
}

fn backward(db: &Db, ro: &ReadOptions) -> Pairs {
    let mut it = db.iter(ro);
    it.seek_to_last();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().expect("status");
    out.reverse();
    out
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn live_keys(db: &Db, ro: &ReadOptions) -> Vec<u32> {
    forward(db, ro)
        .into_iter()
        .map(|(k, _)| {
            std::str::from_utf8(&k[1..])
                .expect("utf8")
                .parse()
                .expect("number")
        })
        .collect()
}

#[test]
fn a_range_delete_hides_keys_in_memtable_tables_and_after_reopen() {
    let opts = small_opts();
    let dir = Path::new("/dr-basic");
    let db = Db::open(dir, opts.clone()).expect("open");
    for i in 0..300 {
        db.put(key(i), [7u8; 100]).expect("put");
    }
    db.flush().expect("flush");
    for i in 300..400 {
        db.put(key(i), [7u8; 100]).expect("put");
    }
    let snap = db.snapshot();
    db.delete_range(key(100), key(350)).expect("delete_range");
    // A write after the tombstone is not deleted by it.
    db.put(key(200), b"new").expect("put");
    let want: Vec<u32> = (0..100).chain([200]).chain(350..400).collect();
    let check = |db: &Db| {
        let ro = ReadOptions::default();
        assert_eq!(live_keys(db, &ro), want);
        let back: Vec<Vec<u8>> = backward(db, &ro).into_iter().map(|(k, _)| k).collect();
        let fwd: Vec<Vec<u8>> = forward(db, &ro).into_iter().map(|(k, _)| k).collect();
        assert_eq!(back, fwd);
        assert_eq!(db.get(key(100)).expect("get"), None);
        assert_eq!(db.get(key(349)).expect("get"), None);
        assert!(db.get(key(99)).expect("get").is_some());
        assert!(db.get(key(350)).expect("get").is_some());
        assert_eq!(db.get(key(200)).expect("get").as_deref(), Some(&b"new"[..]));
        let got = db.multi_get([key(99), key(150), key(320), key(360)]);
        let found: Vec<bool> = got.into_iter().map(|r| r.expect("get").is_some()).collect();
        assert_eq!(found, [true, false, false, true]);
        let mut it = db.iter(&ReadOptions::default());
        it.seek(key(101));
        assert_eq!(it.key(), &key(200)[..]);
        it.seek_for_prev(key(300));
        assert_eq!(it.key(), &key(200)[..]);
        it.seek_for_prev(key(199));
        assert_eq!(it.key(), &key(99)[..]);
    };
    check(&db);
    let old = ReadOptions {
        snapshot: Some(snap.clone()),
        ..Default::default()
    };
    assert_eq!(live_keys(&db, &old), (0..400).collect::<Vec<_>>());
    assert!(db.get_opt(&old, key(150)).expect("get").is_some());
    db.flush().expect("flush");
    check(&db);
    assert_eq!(
        live_keys(&db, &old).len(),
        400,
        "the snapshot still sees all"
    );
    db.compact_range(None, None).expect("compact");
    check(&db);
    assert_eq!(
        live_keys(&db, &old).len(),
        400,
        "compaction keeps what the snapshot sees"
    );
    drop(snap);
    drop(old);
    drop(db);
    let db = Db::open(dir, opts).expect("reopen");
    check(&db);
    db.compact_range(None, None).expect("compact");
    check(&db);
}

#[test]
fn unflushed_range_deletes_survive_recovery_and_batches_are_atomic() {
    let opts = small_opts();
    let dir = Path::new("/dr-wal");
    let db = Db::open(dir, opts.clone()).expect("open");
    let logs = db.create_cf("logs", CfOptions::default()).expect("cf");
    for i in 0..50 {
        db.put(key(i), b"v").expect("put");
        db.put_cf(&logs, key(i), b"l").expect("put");
    }
    let mut b = WriteBatch::new();
    b.delete_range(key(10), key(20));
    b.delete_range_cf(&logs, key(0), key(45));
    b.put(key(15), b"again");
    db.write(&WriteOptions::default(), &b).expect("write");
    drop(logs);
    drop(db);
    let db = Db::open(dir, opts).expect("reopen");
    let logs = db.cf("logs").expect("logs");
    let want: Vec<u32> = (0..10).chain([15]).chain(20..50).collect();
    assert_eq!(live_keys(&db, &ReadOptions::default()), want);
    let mut it = db.iter_cf(&logs, &ReadOptions::default()).expect("iter");
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    assert_eq!(n, 5);
    assert_eq!(db.get_cf(&logs, key(44)).expect("get"), None);
    assert!(db.get_cf(&logs, key(45)).expect("get").is_some());
}

#[test]
fn bad_ranges_are_refused_or_ignored() {
    let db = Db::open(Path::new("/dr-args"), small_opts()).expect("open");
    db.put(b"b", b"1").expect("put");
    match db.delete_range(b"c", b"a") {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("end key"), "{msg}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    db.delete_range(b"b", b"b").expect("empty range");
    assert!(db.get(b"b").expect("get").is_some());
    // In a batch an inverted range deletes nothing (as in RocksDB's write batch).
    let mut batch = WriteBatch::new();
    batch.delete_range(b"z", b"a");
    db.write(&WriteOptions::default(), &batch).expect("write");
    db.flush().expect("flush");
    assert!(db.get(b"b").expect("get").is_some());
}

#[test]
fn merges_over_a_range_delete_start_from_nothing() {
    let db = Db::open(Path::new("/dr-merge"), small_opts()).expect("open");
    db.put(b"m", b"base").expect("put");
    db.merge(b"m", b"a").expect("merge");
    db.flush().expect("flush");
    db.delete_range(b"a", b"z").expect("delete_range");
    db.merge(b"m", b"b").expect("merge");
    let ro = ReadOptions::default();
    assert_eq!(db.get(b"m").expect("get").as_deref(), Some(&b"b"[..]));
    assert_eq!(forward(&db, &ro), vec![(b"m".to_vec(), b"b".to_vec())]);
    assert_eq!(backward(&db, &ro), vec![(b"m".to_vec(), b"b".to_vec())]);
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.get(b"m").expect("get").as_deref(), Some(&b"b"[..]));
    assert_eq!(backward(&db, &ro), vec![(b"m".to_vec(), b"b".to_vec())]);
}

#[test]
fn compaction_drops_what_a_range_delete_covers() {
    let opts = small_opts();
    let db = Db::open(Path::new("/dr-space"), opts).expect("open");
    // Incompressible values: the sizes compared are data, whichever codec a level uses.
    let value = |i: u32| common::incompressible(u64::from(i), 200);
    for i in 0..2000 {
        db.put(key(i), value(i)).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let full = db
        .property("shaledb.total-sst-files-size")
        .expect("prop")
        .parse::<u64>()
        .expect("size");
    db.delete_range(key(0), key(1900)).expect("delete_range");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let after = db
        .property("shaledb.total-sst-files-size")
        .expect("prop")
        .parse::<u64>()
        .expect("size");
    assert!(
        after * 10 < full,
        "compaction kept {after} of {full} bytes after deleting 95% of the keys"
    );
    assert_eq!(
        live_keys(&db, &ReadOptions::default()),
        (1900..2000).collect::<Vec<_>>()
    );
}

/// What the model expects a read at one moment to return.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn model_range_delete(m: &mut Model, begin: &[u8], end: &[u8]) {
    let doomed: Vec<Vec<u8>> = m
        .range(begin.to_vec()..end.to_vec())
        .map(|(k, _)| k.clone())
        .collect();
    for k in doomed {
        m.remove(&k);
    }
}

/// Random puts, deletes, merges and range deletes (overlapping each other and everything
/// else) with flushes, compactions, snapshots and reopens, compared with a model.
#[test]
fn model_with_range_deletes() {
    const N: u32 = 1000;
    for seed in 0..6u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let opts = small_opts();
        let dir = Path::new("/dr-model");
        let mut db = Db::open(dir, opts.clone()).expect("open");
        let mut model = Model::new();
        let mut snapshots = Vec::new();
        for op in 0..3000 {
            let k = format!("k{:04}", rng.gen_range(0..N)).into_bytes();
            let val = format!("v{op}-{}", "x".repeat(rng.gen_range(0..300))).into_bytes();
            match rng.gen_range(0..100) {
                0..=44 => {
                    db.put(&k, &val).expect("put");
                    model.insert(k, val);
                }
                45..=51 => {
                    db.delete(&k).expect("delete");
                    model.remove(&k);
                }
                52..=61 => {
                    db.merge(&k, &val).expect("merge");
                    let next = match model.get(&k) {
                        Some(old) => [old.as_slice(), b",", &val].concat(),
                        None => val,
                    };
                    model.insert(k, next);
                }
                62..=66 => {
                    let a = rng.gen_range(0..N);
                    let b = (a + rng.gen_range(0..N / 5)).min(N);
                    let (begin, end) = (format!("k{a:04}"), format!("k{b:04}"));
                    model_range_delete(&mut model, begin.as_bytes(), end.as_bytes());
                    if rng.gen_bool(0.5) {
                        db.delete_range(&begin, &end).expect("delete_range");
                    } else {
                        // The batch's put comes after its range delete: it survives.
                        let mut batch = WriteBatch::new();
                        batch.delete_range(&begin, &end);
                        batch.put(&k, b"in-batch");
                        db.write(&WriteOptions::default(), &batch).expect("write");
                        model.insert(k.clone(), b"in-batch".to_vec());
                    }
                }
                67..=70 => db.flush().expect("flush"),
                71 => {
                    let a = format!("k{:04}", rng.gen_range(0..N));
                    let b = format!("k{:04}", rng.gen_range(0..N));
                    let (a, b) = if a <= b { (a, b) } else { (b, a) };
                    db.compact_range(Some(a.as_bytes()), Some(b.as_bytes()))
                        .expect("compact");
                }
                72 => db.compact_range(None, None).expect("compact"),
                73..=74 => {
                    if snapshots.len() > 3 {
                        snapshots.remove(0);
                    }
                    snapshots.push((db.snapshot(), model.clone()));
                }
                75 => {
                    snapshots.clear();
                    drop(db);
                    db = Db::open(dir, opts.clone()).expect("reopen");
                }
                76..=86 => check_against(&db, &model, &snapshots, &k, seed, op),
                _ => {
                    let got = db.get(&k).expect("get").map(|v| v.to_vec());
                    assert_eq!(got.as_ref(), model.get(&k), "seed {seed} op {op}: get");
                }
            }
        }
        check_against(&db, &model, &snapshots, b"k0000", seed, 9999);
    }
}

fn check_against(
    db: &Db,
    model: &Model,
    snapshots: &[(shaledb::Snapshot, Model)],
    k: &[u8],
    seed: u64,
    op: usize,
) {
    let want: Pairs = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let ro = ReadOptions::default();
    assert!(forward(db, &ro) == want, "seed {seed} op {op}: forward");
    assert!(backward(db, &ro) == want, "seed {seed} op {op}: backward");
    let got = db.get(k).expect("get").map(|v| v.to_vec());
    assert_eq!(got.as_ref(), model.get(k), "seed {seed} op {op}: get");
    for (snap, old) in snapshots {
        let ro = ReadOptions {
            snapshot: Some(snap.clone()),
            ..Default::default()
        };
        let got = db.get_opt(&ro, k).expect("get").map(|v| v.to_vec());
        assert_eq!(
            got.as_ref(),
            old.get(k),
            "seed {seed} op {op}: snapshot get"
        );
        let want: Pairs = old.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(
            forward(db, &ro) == want,
            "seed {seed} op {op}: snapshot scan"
        );
        assert!(
            backward(db, &ro) == want,
            "seed {seed} op {op}: snapshot reverse"
        );
    }
}

fn files_at_level0(db: &Db) -> usize {
    db.property("shaledb.num-files-at-level0")
        .expect("property")
        .parse()
        .expect("number")
}

/// Files whose every key a range tombstone deletes are dropped when the tombstone is flushed,
/// without a compaction reading them; a snapshot that still sees them keeps them.
#[test]
fn files_under_a_range_delete_are_dropped_without_compaction() {
    let opts = Options {
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 200,
        level0_stop_writes_trigger: 300,
        ..small_opts()
    };
    let db = Db::open(Path::new("/dr-drop"), opts).expect("open");
    for file in 0..6u32 {
        for i in 0..50 {
            db.put(key(file * 100 + i), [3u8; 100]).expect("put");
        }
        db.flush().expect("flush");
    }
    assert_eq!(files_at_level0(&db), 6);
    let snap = db.snapshot();
    // Covers files 1 and 2 entirely and file 3 in part.
    db.delete_range(key(100), key(320)).expect("delete_range");
    db.flush().expect("flush");
    assert_eq!(files_at_level0(&db), 7, "a snapshot still sees the files");
    drop(snap);
    db.delete_range(key(100), key(101)).expect("delete_range");
    db.flush().expect("flush");
    assert_eq!(
        files_at_level0(&db),
        6,
        "files 1 and 2 dropped, two tombstone files added"
    );
    let live = live_keys(&db, &ReadOptions::default());
    let want: Vec<u32> = (0..6u32)
        .flat_map(|f| (0..50).map(move |i| f * 100 + i))
        .filter(|k| !(100..320).contains(k))
        .collect();
    assert_eq!(live, want);
}
