//! The merge operator: values computed from operands across memtables, tables, compactions,
//! recovery, snapshots and both iteration directions, failures reported, and a model test.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::fs::MemFileSystem;
use shaledb::merge_operators::{StringAppend, UInt64Add};
use shaledb::{
    CfOptions, Db, Error, MergeOperator, Options, ReadOptions, WriteBatch, WriteOptions,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn opts_with(op: Arc<dyn MergeOperator>) -> Options {
    Options {
        merge_operator: Some(op),
        write_buffer_size: 16 << 10,
        level0_file_num_compaction_trigger: 2,
        target_file_size_base: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        ..Default::default()
    }
    .with_fs(MemFileSystem::new())
}

fn counter(db: &Db, key: &[u8]) -> Option<u64> {
    db.get(key)
        .expect("get")
        .map(|v| u64::from_le_bytes(v.as_ref().try_into().expect("8 bytes")))
}

fn forward(db: &Db, ro: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(ro);
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("forward status");
    out
}

fn backward(db: &Db, ro: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(ro);
    it.seek_to_last();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().expect("backward status");
    out.reverse();
    out
}

#[test]
fn counters_add_up_across_memtable_tables_compaction_and_reopen() {
    let opts = opts_with(Arc::new(UInt64Add));
    let dir = Path::new("/merge-counters");
    let db = Db::open(dir, opts.clone()).expect("open");
    db.put(b"c", 10u64.to_le_bytes()).expect("base");
    for i in 0..300u64 {
        db.merge(b"c", 1u64.to_le_bytes()).expect("merge");
        db.merge(format!("k{}", i % 7), i.to_le_bytes())
            .expect("merge");
        if i % 100 == 50 {
            db.flush().expect("flush");
        }
    }
    assert_eq!(counter(&db, b"c"), Some(310));
    db.compact_range(None, None).expect("compact");
    assert_eq!(counter(&db, b"c"), Some(310));
    let want_k0: u64 = (0..300u64).filter(|i| i % 7 == 0).sum();
    assert_eq!(counter(&db, b"k0"), Some(want_k0));
    db.merge(b"c", 5u64.to_le_bytes()).expect("merge");
    drop(db);
    let db = Db::open(dir, opts).expect("reopen");
    assert_eq!(counter(&db, b"c"), Some(315));
    assert_eq!(counter(&db, b"k0"), Some(want_k0));
    assert_eq!(counter(&db, b"absent"), None);
}

#[test]
fn merges_over_a_delete_start_from_nothing_and_snapshots_keep_old_values() {
    let opts = opts_with(Arc::new(StringAppend::new(",")));
    let db = Db::open("/merge-delete", opts).expect("open");
    db.put(b"k", b"a").expect("put");
    db.merge(b"k", b"b").expect("merge");
    let snap = db.snapshot();
    db.delete(b"k").expect("delete");
    db.merge(b"k", b"c").expect("merge");
    db.merge(b"k", b"d").expect("merge");
    let check = |db: &Db| {
        assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"c,d"[..]));
        let ro = ReadOptions {
            snapshot: Some(snap.clone()),
            ..Default::default()
        };
        assert_eq!(
            db.get_opt(&ro, b"k").expect("get").as_deref(),
            Some(&b"a,b"[..])
        );
        assert_eq!(forward(db, &ro), vec![(b"k".to_vec(), b"a,b".to_vec())]);
        assert_eq!(backward(db, &ro), vec![(b"k".to_vec(), b"a,b".to_vec())]);
    };
    check(&db);
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    check(&db);
}

#[test]
fn iterators_merge_in_both_directions_and_switch_direction() {
    let opts = opts_with(Arc::new(StringAppend::new("+")));
    let db = Db::open("/merge-iter", opts).expect("open");
    db.put(b"a", b"1").expect("put");
    db.merge(b"b", b"x").expect("merge");
    db.flush().expect("flush");
    db.merge(b"b", b"y").expect("merge");
    db.put(b"c", b"3").expect("put");
    db.merge(b"c", b"z").expect("merge");
    db.merge(b"d", b"only").expect("merge");
    let want: Vec<(Vec<u8>, Vec<u8>)> = [("a", "1"), ("b", "x+y"), ("c", "3+z"), ("d", "only")]
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    let ro = ReadOptions::default();
    assert_eq!(forward(&db, &ro), want);
    assert_eq!(backward(&db, &ro), want);
    // next and prev around merged keys.
    let mut it = db.iter(&ro);
    it.seek(b"b");
    assert_eq!((it.key(), it.value()), (&b"b"[..], &b"x+y"[..]));
    it.next();
    assert_eq!((it.key(), it.value()), (&b"c"[..], &b"3+z"[..]));
    it.prev();
    assert_eq!((it.key(), it.value()), (&b"b"[..], &b"x+y"[..]));
    it.prev();
    assert_eq!((it.key(), it.value()), (&b"a"[..], &b"1"[..]));
    it.next();
    it.next();
    it.next();
    assert_eq!((it.key(), it.value()), (&b"d"[..], &b"only"[..]));
    it.prev();
    assert_eq!((it.key(), it.value()), (&b"c"[..], &b"3+z"[..]));
    // range() goes through the same iterator.
    let items: Vec<_> = db.range(..).collect::<Result<_, _>>().expect("range");
    assert_eq!(items.len(), 4);
    assert_eq!(items[1].1, b"x+y".to_vec());
}

/// Fails on any operand equal to "bad".
struct Picky;
impl MergeOperator for Picky {
    fn name(&self) -> &str {
        "picky"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, ops: &[&[u8]]) -> Option<Vec<u8>> {
        if ops.contains(&&b"bad"[..]) {
            return None;
        }
        let mut v = existing.unwrap_or_default().to_vec();
        for op in ops {
            v.extend_from_slice(op);
        }
        Some(v)
    }
}

#[test]
fn a_failed_merge_is_an_error_never_a_value() {
    let db = Db::open("/merge-fail", opts_with(Arc::new(Picky))).expect("open");
    db.put(b"a", b"1").expect("put");
    db.merge(b"k", b"bad").expect("merge");
    db.put(b"z", b"9").expect("put");
    match db.get(b"k") {
        Err(Error::MergeFailed { key, operator }) => {
            assert_eq!((key.as_slice(), operator.as_str()), (&b"k"[..], "picky"));
        }
        other => panic!("expected MergeFailed, got {other:?}"),
    }
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    assert_eq!(it.key(), b"a");
    it.next();
    assert!(!it.valid());
    assert!(matches!(it.status(), Err(Error::MergeFailed { .. })));
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_last();
    assert_eq!(it.key(), b"z");
    it.prev();
    assert!(!it.valid());
    assert!(matches!(it.status(), Err(Error::MergeFailed { .. })));
    // Compaction keeps the operands rather than losing data: the error stays an error.
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert!(matches!(db.get(b"k"), Err(Error::MergeFailed { .. })));
}

#[test]
fn merges_are_refused_without_an_operator() {
    let fs = MemFileSystem::new();
    let db = Db::open("/merge-none", Options::default().with_fs(fs)).expect("open");
    let err = db.merge(b"k", b"v");
    assert!(
        matches!(&err, Err(Error::InvalidArgument(m)) if m.contains("merge_operator")),
        "{err:?}"
    );
    let mut b = WriteBatch::new();
    b.put(b"x", b"1");
    b.merge(b"k", b"v");
    assert!(matches!(
        db.write(&WriteOptions::default(), &b),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(
        db.get(b"x").expect("get"),
        None,
        "the batch was refused whole"
    );
}

#[test]
fn each_family_merges_with_its_own_operator() {
    let opts = Options::default()
        .with_fs(MemFileSystem::new())
        .with_create_missing_column_families(true);
    let families = [
        (
            "counts",
            CfOptions {
                merge_operator: Some(Arc::new(UInt64Add)),
                ..Default::default()
            },
        ),
        (
            "lists",
            CfOptions {
                merge_operator: Some(Arc::new(StringAppend::new("|"))),
                ..Default::default()
            },
        ),
    ];
    let db = Db::open_cf("/merge-cf", opts.clone(), families.clone()).expect("open");
    let counts = db.cf("counts").expect("counts");
    let lists = db.cf("lists").expect("lists");
    let mut b = WriteBatch::new();
    b.merge_cf(&counts, b"k", 2u64.to_le_bytes());
    b.merge_cf(&lists, b"k", b"a");
    db.write(&WriteOptions::default(), &b).expect("batch");
    db.merge_cf(&counts, b"k", 3u64.to_le_bytes())
        .expect("merge");
    db.merge_cf(&lists, b"k", b"b").expect("merge");
    assert!(matches!(
        db.merge(b"k", b"x"),
        Err(Error::InvalidArgument(_))
    ));
    drop(db);
    let db = Db::open_cf("/merge-cf", opts, families).expect("reopen");
    let counts = db.cf("counts").expect("counts");
    let lists = db.cf("lists").expect("lists");
    assert_eq!(
        db.get_cf(&counts, b"k").expect("get").as_deref(),
        Some(&5u64.to_le_bytes()[..])
    );
    assert_eq!(
        db.get_cf(&lists, b"k").expect("get").as_deref(),
        Some(&b"a|b"[..])
    );
}

/// Random puts, deletes and merges (string append) with flushes, compactions, snapshots and
/// reopens, compared with a model after every step that reads.
#[test]
fn model_with_merges() {
    for seed in 0..4u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let opts = opts_with(Arc::new(StringAppend::new(",")));
        let dir = Path::new("/merge-model");
        let mut db = Db::open(dir, opts.clone()).expect("open");
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut snapshots = Vec::new();
        for op in 0..3000 {
            let key = format!("k{:02}", rng.gen_range(0..60)).into_bytes();
            let val = format!("v{op}").into_bytes();
            match rng.gen_range(0..100) {
                0..=29 => {
                    db.put(&key, &val).expect("put");
                    model.insert(key, val);
                }
                30..=39 => {
                    db.delete(&key).expect("delete");
                    model.remove(&key);
                }
                40..=84 => {
                    db.merge(&key, &val).expect("merge");
                    let next = match model.get(&key) {
                        Some(old) => [old.as_slice(), b",", &val].concat(),
                        None => val,
                    };
                    model.insert(key, next);
                }
                85..=87 => db.flush().expect("flush"),
                88 => db.compact_range(None, None).expect("compact"),
                89..=90 => {
                    if snapshots.len() > 3 {
                        snapshots.remove(0);
                    }
                    snapshots.push((db.snapshot(), model.clone()));
                }
                91 => {
                    snapshots.clear();
                    drop(db);
                    db = Db::open(dir, opts.clone()).expect("reopen");
                }
                _ => {
                    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    let ro = ReadOptions::default();
                    assert!(forward(&db, &ro) == want, "seed {seed} op {op}: forward");
                    assert!(backward(&db, &ro) == want, "seed {seed} op {op}: backward");
                    let got = db.get(&key).expect("get").map(|v| v.to_vec());
                    assert_eq!(got.as_ref(), model.get(&key), "seed {seed} op {op}: get");
                    for (snap, old) in &snapshots {
                        let ro = ReadOptions {
                            snapshot: Some(snap.clone()),
                            ..Default::default()
                        };
                        let got = db.get_opt(&ro, &key).expect("get").map(|v| v.to_vec());
                        assert_eq!(got.as_ref(), old.get(&key), "seed {seed}: snapshot get");
                        let want: Vec<_> =
                            old.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                        assert!(forward(&db, &ro) == want, "seed {seed}: snapshot scan");
                    }
                }
            }
        }
    }
}

#[test]
fn a_family_must_be_reopened_with_the_merge_operator_it_was_written_with() {
    let fs = MemFileSystem::new();
    let plain = Options::default().with_fs(fs.clone());
    let dir = Path::new("/merge-recorded");
    {
        let db = Db::open(dir, plain.clone()).expect("open");
        let cf = CfOptions {
            merge_operator: Some(Arc::new(UInt64Add)),
            ..Default::default()
        };
        let counts = db.create_cf("counts", cf).expect("create");
        db.merge_cf(&counts, b"k", 1u64.to_le_bytes())
            .expect("merge");
    }
    // Db::open gives every family default options: no operator for "counts".
    let err = Db::open(dir, plain.clone()).err().expect("refused");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("\"counts\"") && m.contains("UInt64AddOperator")),
        "{err}"
    );
    let other = CfOptions {
        merge_operator: Some(Arc::new(StringAppend::new(","))),
        ..Default::default()
    };
    let err = Db::open_cf(dir, plain.clone(), [("counts", other)])
        .err()
        .expect("refused");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("StringAppendOperator")),
        "{err}"
    );
    let same = CfOptions {
        merge_operator: Some(Arc::new(UInt64Add)),
        ..Default::default()
    };
    let db = Db::open_cf(dir, plain, [("counts", same)]).expect("same operator");
    let counts = db.cf("counts").expect("counts");
    assert_eq!(
        db.get_cf(&counts, b"k").expect("get").as_deref(),
        Some(&1u64.to_le_bytes()[..])
    );
}

#[test]
fn compaction_combines_operands_every_reader_sees() {
    let opts = opts_with(Arc::new(UInt64Add));
    let db = Db::open("/merge-collapse", opts).expect("open");
    let entries = |db: &Db| -> u64 {
        db.property("shaledb.estimate-num-keys")
            .and_then(|s| s.parse().ok())
            .expect("property")
    };
    // No base at all: at the bottom level the operands become one put.
    for _ in 0..100 {
        db.merge(b"no-base", 1u64.to_le_bytes()).expect("merge");
    }
    // A base put below operands.
    db.put(b"with-base", 1000u64.to_le_bytes()).expect("put");
    for _ in 0..50 {
        db.merge(b"with-base", 2u64.to_le_bytes()).expect("merge");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(entries(&db), 2, "one entry per key after compaction");
    assert_eq!(counter(&db, b"no-base"), Some(100));
    assert_eq!(counter(&db, b"with-base"), Some(1100));
    // A snapshot between operands keeps what it can see: its view stays right.
    let snap = db.snapshot();
    for _ in 0..10 {
        db.merge(b"no-base", 1u64.to_le_bytes()).expect("merge");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let ro = ReadOptions {
        snapshot: Some(snap.clone()),
        ..Default::default()
    };
    let at_snap = db
        .get_opt(&ro, b"no-base")
        .expect("get")
        .map(|v| v.to_vec());
    assert_eq!(at_snap, Some(100u64.to_le_bytes().to_vec()));
    assert_eq!(counter(&db, b"no-base"), Some(110));
    drop(ro);
    drop(snap);
    db.compact_range(None, None).expect("compact");
    assert_eq!(entries(&db), 2);
    assert_eq!(counter(&db, b"no-base"), Some(110));
}
