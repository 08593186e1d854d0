//! Column families: isolation, atomic batches across families, recovery with per-family
//! flush points, dropping with live handles, WAL lifetime, and a model test over several
//! families with creates, drops, flushes, compactions and reopens.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::fs::MemFileSystem;
use shaledb::{CfOptions, ColumnFamily, Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::path::Path;

fn mem_options() -> Options {
    Options::default()
        .with_fs(MemFileSystem::new())
        .with_max_background_jobs(2)
}

fn small_cf() -> CfOptions {
    CfOptions {
        write_buffer_size: 16 << 10,
        max_write_buffer_number: 3,
        target_file_size_base: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        max_bytes_for_level_multiplier: 4.0,
        level0_file_num_compaction_trigger: 2,
        ..Default::default()
    }
}

fn scan(db: &Db, cf: &ColumnFamily) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter_cf(cf, &ReadOptions::default()).expect("iter_cf");
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("scan status");
    out
}

fn table_files(opts: &Options, dir: &Path) -> usize {
    opts.fs
        .list_dir(dir)
        .expect("list")
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .count()
}

fn wal_files(opts: &Options, dir: &Path) -> usize {
    opts.fs
        .list_dir(dir)
        .expect("list")
        .iter()
        .filter(|n| n.ends_with(".log"))
        .count()
}

#[test]
fn families_are_separate_key_spaces_and_survive_reopen() {
    let opts = mem_options();
    let dir = Path::new("/cf-basic");
    {
        let db = Db::open(dir, opts.clone()).expect("open");
        let a = db.create_cf("a", CfOptions::default()).expect("create a");
        let b = db.create_cf("b", CfOptions::default()).expect("create b");
        assert_eq!((a.name(), a.id(), b.id()), ("a", 1, 2));
        db.put(b"k", b"default").expect("put");
        db.put_cf(&a, b"k", b"in a").expect("put a");
        db.put_cf(&b, b"k", b"in b").expect("put b");
        db.delete_cf(&b, b"k").expect("delete b");
        db.flush_cf(&a).expect("flush a");
        assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"default"[..]));
        assert_eq!(
            db.get_cf(&a, b"k").expect("get").as_deref(),
            Some(&b"in a"[..])
        );
        assert_eq!(db.get_cf(&b, b"k").expect("get"), None);
        assert_eq!(
            db.property_cf(&a, "shaledb.num-files-at-level0").as_deref(),
            Some("1")
        );
        assert_eq!(
            db.property("shaledb.num-files-at-level0").as_deref(),
            Some("0")
        );
        assert!(matches!(
            db.create_cf("a", CfOptions::default()),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            db.drop_cf("default"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(db.drop_cf("nope"), Err(Error::InvalidArgument(_))));
    }
    assert_eq!(
        Db::list_cf(dir, &opts).expect("list"),
        vec!["default", "a", "b"]
    );
    let db = Db::open(dir, opts.clone()).expect("reopen");
    let a = db.cf("a").expect("a after reopen");
    let b = db.cf("b").expect("b after reopen");
    assert_eq!(a.id(), 1);
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"default"[..]));
    assert_eq!(
        db.get_cf(&a, b"k").expect("get").as_deref(),
        Some(&b"in a"[..])
    );
    assert_eq!(db.get_cf(&b, b"k").expect("get"), None);
    assert_eq!(db.default_cf().name(), "default");
    // A new family after reopen gets a fresh id.
    assert_eq!(db.create_cf("c", CfOptions::default()).expect("c").id(), 3);
}

#[test]
fn open_cf_creates_missing_families_only_when_asked() {
    let opts = mem_options();
    let dir = Path::new("/cf-open");
    Db::open(dir, opts.clone())
        .expect("create")
        .close()
        .expect("close");
    let err = Db::open_cf(dir, opts.clone(), [("x", CfOptions::default())]);
    assert!(
        matches!(&err, Err(Error::InvalidArgument(m)) if m.contains("create_missing_column_families")),
        "{:?}",
        err.err()
    );
    let opts2 = opts.clone().with_create_missing_column_families(true);
    let db = Db::open_cf(dir, opts2, [("x", small_cf())]).expect("open_cf");
    assert!(db.cf("x").is_some());
    drop(db);
    // Listing a family twice, or with a bad name, is refused.
    let twice = Db::open_cf(
        dir,
        opts.clone(),
        [("x", CfOptions::default()), ("x", CfOptions::default())],
    );
    assert!(matches!(twice, Err(Error::InvalidArgument(_))));
    let empty = Db::open_cf(dir, opts, [("", CfOptions::default())]);
    assert!(matches!(empty, Err(Error::InvalidArgument(_))));
}

#[test]
fn a_batch_across_families_is_atomic_through_recovery() {
    let opts = mem_options();
    let dir = Path::new("/cf-batch");
    {
        let db = Db::open(dir, opts.clone()).expect("open");
        let idx = db.create_cf("index", CfOptions::default()).expect("create");
        let mut batch = WriteBatch::new();
        batch.put(b"doc1", b"hello");
        batch.put_cf(&idx, b"hello", b"doc1");
        batch.delete_cf(&idx, b"stale");
        let ids: Vec<u32> = batch.iter_cf().map(|(cf, _)| cf).collect();
        assert_eq!(ids, vec![0, 1, 1]);
        db.write(
            &WriteOptions {
                sync: true,
                ..Default::default()
            },
            &batch,
        )
        .expect("write");
        // No flush: both halves must come back from the WAL.
    }
    let db = Db::open(dir, opts).expect("reopen");
    let idx = db.cf("index").expect("index");
    assert_eq!(
        db.get(b"doc1").expect("get").as_deref(),
        Some(&b"hello"[..])
    );
    assert_eq!(
        db.get_cf(&idx, b"hello").expect("get").as_deref(),
        Some(&b"doc1"[..])
    );
}

#[test]
fn recovery_respects_each_familys_flush_point() {
    let opts = mem_options();
    let dir = Path::new("/cf-flush-point");
    {
        let db = Db::open(dir, opts.clone()).expect("open");
        let a = db.create_cf("a", CfOptions::default()).expect("a");
        let b = db.create_cf("b", CfOptions::default()).expect("b");
        for i in 0..100u32 {
            db.put_cf(&a, i.to_be_bytes(), b"a1").expect("put");
            db.put_cf(&b, i.to_be_bytes(), b"b1").expect("put");
        }
        db.flush_cf(&a).expect("flush a"); // a's edit moves its log number; b's stays
        for i in 0..50u32 {
            db.put_cf(&a, i.to_be_bytes(), b"a2").expect("put");
            db.delete_cf(&b, i.to_be_bytes()).expect("delete");
        }
    }
    let db = Db::open(dir, opts).expect("reopen");
    let a = db.cf("a").expect("a");
    let b = db.cf("b").expect("b");
    let got_a = scan(&db, &a);
    let got_b = scan(&db, &b);
    assert_eq!(got_a.len(), 100);
    for (i, (k, v)) in got_a.iter().enumerate() {
        assert_eq!(k, &(i as u32).to_be_bytes().to_vec());
        assert_eq!(v, if i < 50 { b"a2" } else { b"a1" });
    }
    let keys_b: Vec<Vec<u8>> = got_b.into_iter().map(|(k, _)| k).collect();
    let want_b: Vec<Vec<u8>> = (50..100u32).map(|i| i.to_be_bytes().to_vec()).collect();
    assert_eq!(keys_b, want_b);
}

#[test]
fn a_dropped_family_stays_readable_through_its_handles_then_its_files_go() {
    let opts = mem_options();
    let dir = Path::new("/cf-drop");
    let db = Db::open(dir, opts.clone()).expect("open");
    let gone = db.create_cf("gone", CfOptions::default()).expect("create");
    for i in 0..200u32 {
        db.put_cf(&gone, i.to_be_bytes(), vec![7u8; 100])
            .expect("put");
    }
    db.flush_cf(&gone).expect("flush");
    db.put_cf(&gone, b"unflushed", b"v").expect("put");
    assert_eq!(table_files(&opts, dir), 1);
    let mut it = db.iter_cf(&gone, &ReadOptions::default()).expect("iter");
    db.drop_cf("gone").expect("drop");
    assert!(db.cf("gone").is_none());
    assert_eq!(Db::list_cf(dir, &opts).expect("list"), vec!["default"]);
    // Writes through the old handle are refused, reads go on.
    assert!(matches!(
        db.put_cf(&gone, b"x", b"y"),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(
        db.get_cf(&gone, b"unflushed").expect("get").as_deref(),
        Some(&b"v"[..])
    );
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    assert_eq!(n, 201);
    db.wait_for_compactions().expect("wait");
    assert_eq!(
        table_files(&opts, dir),
        1,
        "the iterator and handle keep the table"
    );
    drop(it);
    drop(gone);
    db.wait_for_compactions().expect("wait");
    assert_eq!(
        table_files(&opts, dir),
        0,
        "the last reader gone, the table is deleted"
    );
    // The name can be used again; the new family is empty with a new id.
    let again = db
        .create_cf("gone", CfOptions::default())
        .expect("recreate");
    assert_eq!(again.id(), 2);
    assert_eq!(db.get_cf(&again, b"unflushed").expect("get"), None);
    drop(db);
    // Its WAL records are skipped after reopen: the new family is still empty.
    let db = Db::open(dir, opts).expect("reopen");
    let again = db.cf("gone").expect("recreated family");
    assert_eq!(scan(&db, &again), vec![]);
}

#[test]
fn another_databases_handle_is_refused() {
    let opts = mem_options();
    let one = Db::open("/cf-one", opts.clone()).expect("one");
    let two = Db::open("/cf-two", opts).expect("two");
    let cf = one.create_cf("x", CfOptions::default()).expect("x");
    assert!(matches!(
        two.get_cf(&cf, b"k"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        two.put_cf(&cf, b"k", b"v"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn an_idle_family_does_not_keep_old_wals() {
    let opts = mem_options().with_write_buffer_size(64 << 10);
    let dir = Path::new("/cf-wal");
    let db = Db::open(dir, opts.clone()).expect("open");
    let idle = db.create_cf("idle", CfOptions::default()).expect("idle");
    db.put_cf(&idle, b"once", b"v").expect("put");
    db.flush_cf(&idle).expect("flush idle");
    for i in 0..20_000u32 {
        db.put(i.to_be_bytes(), [1u8; 64]).expect("put");
    }
    db.wait_for_compactions().expect("wait");
    let wals = wal_files(&opts, dir);
    assert!(wals <= 3, "{wals} WAL files are kept");
    drop(db);
    let db = Db::open(dir, opts).expect("reopen");
    let idle = db.cf("idle").expect("idle");
    assert_eq!(
        db.get_cf(&idle, b"once").expect("get").as_deref(),
        Some(&b"v"[..])
    );
    assert_eq!(
        db.get(19_999u32.to_be_bytes()).expect("get").as_deref(),
        Some(&[1u8; 64][..])
    );
}

#[test]
fn per_family_options_apply_to_that_family() {
    let opts = mem_options();
    let dir = Path::new("/cf-options");
    let db = Db::open(dir, opts.clone()).expect("open");
    let tiny = db
        .create_cf(
            "tiny",
            CfOptions {
                write_buffer_size: 8 << 10,
                disable_auto_compactions: true,
                ..Default::default()
            },
        )
        .expect("tiny");
    for i in 0..2000u32 {
        db.put_cf(&tiny, i.to_be_bytes(), [3u8; 40]).expect("put");
        db.put(i.to_be_bytes(), [3u8; 40]).expect("put");
    }
    db.wait_for_compactions().expect("wait");
    let l0: usize = db
        .property_cf(&tiny, "shaledb.num-files-at-level0")
        .and_then(|s| s.parse().ok())
        .expect("property");
    assert!(
        l0 >= 5,
        "the 8 KiB write buffer flushed often: {l0} L0 files"
    );
    assert_eq!(
        db.property("shaledb.num-files-at-level0").as_deref(),
        Some("0")
    );
    let bad = db.create_cf(
        "bad",
        CfOptions {
            num_levels: 1,
            ..Default::default()
        },
    );
    assert!(matches!(bad, Err(Error::InvalidArgument(m)) if m.contains("\"bad\"")));
}

/// The model: each live family's map, by name.
type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn check_model(db: &Db, model: &Model, rng: &mut StdRng) {
    for (name, want) in model {
        let cf = db.cf(name).expect("family in model");
        let got = scan(db, &cf);
        let want_items: Vec<_> = want.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(got == want_items, "family {name} differs from the model");
        for _ in 0..20 {
            let k = format!("k{:03}", rng.gen_range(0..150)).into_bytes();
            let got = db.get_cf(&cf, &k).expect("get").map(|v| v.to_vec());
            assert_eq!(got.as_ref(), want.get(&k), "get {name}/{k:?}");
        }
    }
}

fn run_model(seed: u64, ops: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let base = mem_options()
        .with_create_missing_column_families(true)
        .with_write_buffer_size(16 << 10)
        .with_level0_file_num_compaction_trigger(2)
        .with_target_file_size_base(8 << 10)
        .with_max_bytes_for_level_base(32 << 10);
    let dir = Path::new("/cf-model");
    let names = ["default", "a", "b", "c"];
    let mut model: Model = BTreeMap::from([("default".to_string(), BTreeMap::new())]);
    let mut db = Db::open(dir, base.clone()).expect("open");
    for op in 0..ops {
        let live: Vec<String> = model.keys().cloned().collect();
        let name = &live[rng.gen_range(0..live.len())];
        let cf = db.cf(name).expect("live family");
        let key = format!("k{:03}", rng.gen_range(0..150)).into_bytes();
        match rng.gen_range(0..100) {
            0..=44 => {
                let v = vec![rng.gen_range(b'a'..=b'z'); rng.gen_range(1..300)];
                db.put_cf(&cf, &key, &v).expect("put");
                model.get_mut(name).expect("m").insert(key, v);
            }
            45..=59 => {
                db.delete_cf(&cf, &key).expect("delete");
                model.get_mut(name).expect("m").remove(&key);
            }
            60..=79 => {
                // A batch over several families.
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..8) {
                    let n = &live[rng.gen_range(0..live.len())];
                    let c = db.cf(n).expect("live");
                    let k = format!("k{:03}", rng.gen_range(0..150)).into_bytes();
                    if rng.gen_bool(0.7) {
                        let v = format!("batch{op}").into_bytes();
                        batch.put_cf(&c, &k, &v);
                        model.get_mut(n).expect("m").insert(k, v);
                    } else {
                        batch.delete_cf(&c, &k);
                        model.get_mut(n).expect("m").remove(&k);
                    }
                }
                db.write(&WriteOptions::default(), &batch).expect("batch");
            }
            80..=84 => db.flush_cf(&cf).expect("flush"),
            85..=87 => db.compact_range_cf(&cf, None, None).expect("compact"),
            88..=91 => {
                let n = names[rng.gen_range(1..names.len())];
                if model.contains_key(n) {
                    db.drop_cf(n).expect("drop");
                    model.remove(n);
                } else {
                    db.create_cf(n, CfOptions::default()).expect("create");
                    model.insert(n.to_string(), BTreeMap::new());
                }
            }
            92..=94 => {
                drop(db);
                let families: Vec<(String, CfOptions)> = model
                    .keys()
                    .filter(|n| n.as_str() != "default")
                    .map(|n| (n.clone(), CfOptions::default()))
                    .collect();
                db = Db::open_cf(dir, base.clone(), families).expect("reopen");
            }
            _ => check_model(&db, &model, &mut rng),
        }
    }
    check_model(&db, &model, &mut rng);
    drop(db);
    let mut listed = Db::list_cf(dir, &base).expect("list");
    let db = Db::open(dir, base).expect("final reopen");
    listed.sort();
    assert_eq!(listed, model.keys().cloned().collect::<Vec<_>>());
    check_model(&db, &model, &mut rng);
}

#[test]
fn model_with_families_creates_drops_and_reopens() {
    for seed in 0..3 {
        run_model(seed, 1500);
    }
}

#[test]
fn multi_get_reads_one_view_in_the_callers_order() {
    let db = Db::open("/cf-multi-get", mem_options()).expect("open");
    let cf = db.create_cf("x", CfOptions::default()).expect("x");
    for i in 0..500u32 {
        db.put_cf(&cf, i.to_be_bytes(), i.to_le_bytes())
            .expect("put");
        if i % 2 == 0 {
            db.put(i.to_be_bytes(), b"default").expect("put");
        }
    }
    db.flush_cf(&cf).expect("flush");
    let snap = db.snapshot();
    db.delete_cf(&cf, 7u32.to_be_bytes())
        .expect("delete after the snapshot");
    let keys = [9u32, 7, 1000, 3, 7];
    let ro = ReadOptions {
        snapshot: Some(snap),
        ..Default::default()
    };
    let got: Vec<Option<Vec<u8>>> = db
        .multi_get_cf(&ro, &cf, keys.iter().map(|k| k.to_be_bytes()))
        .into_iter()
        .map(|r| r.expect("multi_get").map(|v| v.to_vec()))
        .collect();
    let want: Vec<Option<Vec<u8>>> = [Some(9u32), Some(7), None, Some(3), Some(7)]
        .iter()
        .map(|k| k.map(|k| k.to_le_bytes().to_vec()))
        .collect();
    assert_eq!(got, want);
    let now = db.multi_get_cf(&ReadOptions::default(), &cf, [7u32.to_be_bytes()]);
    assert!(matches!(now.as_slice(), [Ok(None)]));
    let default: Vec<bool> = db
        .multi_get(keys.iter().map(|k| k.to_be_bytes()))
        .into_iter()
        .map(|r| r.expect("get").is_some())
        .collect();
    assert_eq!(default, vec![false, false, false, false, false]);
    let even: Vec<bool> = db
        .multi_get([4u32.to_be_bytes(), 5u32.to_be_bytes()])
        .into_iter()
        .map(|r| r.expect("get").is_some())
        .collect();
    assert_eq!(even, vec![true, false]);
}

#[test]
fn approximate_sizes_come_from_each_familys_tables() {
    let db = Db::open("/cf-sizes", mem_options()).expect("open");
    let big = db.create_cf("big", CfOptions::default()).expect("big");
    let empty = db.create_cf("empty", CfOptions::default()).expect("empty");
    for i in 0..20_000u32 {
        db.put_cf(&big, i.to_be_bytes(), [9u8; 100]).expect("put");
    }
    db.flush_cf(&big).expect("flush");
    let all = db.approximate_size_cf(&big, ..).expect("size");
    let files: u64 = db
        .property_cf(&big, "shaledb.total-sst-files-size")
        .and_then(|s| s.parse().ok())
        .expect("property");
    assert_eq!(all, files, "the whole range is every file");
    let quarter = db
        .approximate_size_cf(&big, 5_000u32.to_be_bytes()..10_000u32.to_be_bytes())
        .expect("size");
    assert!(
        quarter > all / 5 && quarter < all / 3,
        "{quarter} of {all} for a quarter of the keys"
    );
    let inclusive = db
        .approximate_size_cf(&big, 5_000u32.to_be_bytes()..=9_999u32.to_be_bytes())
        .expect("size");
    assert!(
        inclusive.abs_diff(quarter) <= 8192,
        "{inclusive} vs {quarter}"
    );
    let past = db
        .approximate_size_cf(&big, 30_000u32.to_be_bytes()..)
        .expect("size");
    assert_eq!(past, 0);
    assert_eq!(db.approximate_size_cf(&empty, ..).expect("size"), 0);
    assert_eq!(db.approximate_size(..).expect("size"), 0);
}

#[test]
fn a_rarely_written_family_is_flushed_once_the_wals_grow_past_the_limit() {
    let count_wals_after = |limit: u64| -> usize {
        let opts = mem_options()
            .with_write_buffer_size(64 << 10)
            .with_max_total_wal_size(limit);
        let dir = Path::new("/cf-wal-limit");
        let db = Db::open(dir, opts.clone()).expect("open");
        let rare = db.create_cf("rare", CfOptions::default()).expect("rare");
        db.put_cf(&rare, b"once", b"v").expect("put");
        for i in 0..40_000u32 {
            db.put(i.to_be_bytes(), [1u8; 64]).expect("put");
        }
        db.wait_for_compactions().expect("wait");
        let wals = wal_files(&opts, dir);
        drop(db);
        let db = Db::open(dir, opts).expect("reopen");
        let rare = db.cf("rare").expect("rare");
        assert_eq!(
            db.get_cf(&rare, b"once").expect("get").as_deref(),
            Some(&b"v"[..])
        );
        wals
    };
    let limited = count_wals_after(256 << 10);
    assert!(limited <= 6, "{limited} WALs kept with a 256 KiB limit");
    // The default limit (4 x 2 x 64 MiB for "rare") keeps every WAL since its one write.
    let unlimited = count_wals_after(0);
    assert!(
        unlimited > 20,
        "{unlimited} WALs kept without a limit that bites"
    );
}
