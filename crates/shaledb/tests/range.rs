//! `Db::range`, `Db::range_opt` and `Db::prefix` against a `BTreeMap` model: random ranges of
//! every bound kind, read forward, in reverse and from both ends at once, at the latest state
//! and at snapshots, with data spread over tables and the memtable.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::{Db, Options, RangeIter, ReadOptions};
use std::collections::BTreeMap;
use std::ops::Bound;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys over a small alphabet, so random bounds often equal stored keys.
fn random_key(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(0..4);
    (0..len).map(|_| rng.gen_range(b'a'..=b'e')).collect()
}

fn random_bound(rng: &mut StdRng) -> Bound<Vec<u8>> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(random_key(rng)),
        _ => Bound::Excluded(random_key(rng)),
    }
}

/// `BTreeMap::range` panics on start > end (or equal and both excluded); such a range is empty.
fn model_range(model: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| {
            let above = match lo {
                Bound::Included(l) => *k >= l,
                Bound::Excluded(l) => *k > l,
                Bound::Unbounded => true,
            };
            let below = match hi {
                Bound::Included(h) => *k <= h,
                Bound::Excluded(h) => *k < h,
                Bound::Unbounded => true,
            };
            above && below
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Takes from both ends in the order `pattern` says (true = front), then drains the front;
/// returns the items in the model's order (front items, then back items reversed).
fn read_mixed(mut it: RangeIter, rng: &mut StdRng) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut front = Vec::new();
    let mut back = Vec::new();
    loop {
        let from_front = rng.gen_bool(0.5);
        let item = if from_front {
            it.next()
        } else {
            it.next_back()
        };
        match item {
            Some(r) => {
                let (k, v) = r.expect("no error");
                let kv = (k, v.into_vec());
                if from_front {
                    front.push(kv);
                } else {
                    back.push(kv);
                }
            }
            None => {
                // Both ends must now report the end.
                assert!(it.next().is_none(), "front after the ends met");
                assert!(it.next_back().is_none(), "back after the ends met");
                break;
            }
        }
    }
    back.reverse();
    front.extend(back);
    front
}

fn check_ranges(db: &Db, ro: &ReadOptions, model: &Model, rng: &mut StdRng, rounds: usize) {
    for _ in 0..rounds {
        let lo = random_bound(rng);
        let hi = random_bound(rng);
        let want = model_range(model, &lo, &hi);
        let range = (lo.clone(), hi.clone());
        let fwd: Vec<_> = db
            .range_opt(ro, range.clone())
            .map(|r| r.map(|(k, v)| (k, v.into_vec())))
            .collect::<Result<_, _>>()
            .expect("forward");
        assert_eq!(fwd, want, "forward {lo:?}..{hi:?}");
        let mut rev: Vec<_> = db
            .range_opt(ro, range.clone())
            .rev()
            .map(|r| r.map(|(k, v)| (k, v.into_vec())))
            .collect::<Result<_, _>>()
            .expect("reverse");
        rev.reverse();
        assert_eq!(rev, want, "reverse {lo:?}..{hi:?}");
        let mixed = read_mixed(db.range_opt(ro, range), rng);
        assert_eq!(mixed, want, "mixed {lo:?}..{hi:?}");
    }
}

fn small_options() -> Options {
    Options {
        write_buffer_size: 4096,
        ..Default::default()
    }
}

#[test]
fn ranges_match_the_model_across_tables_memtable_and_snapshots() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small_options()).expect("open");
    let mut rng = StdRng::seed_from_u64(0x5eed_0012);
    let mut model = Model::new();
    let mut snapshots = Vec::new();
    for round in 0..6 {
        for _ in 0..60 {
            let k = random_key(&mut rng);
            if rng.gen_bool(0.25) {
                db.delete(&k).expect("delete");
                model.remove(&k);
            } else {
                let v = format!("v{round}-{}", rng.gen::<u16>()).into_bytes();
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
        }
        // Flush on most rounds so the data lives in several tables and the memtable.
        if round % 3 != 2 {
            db.flush().expect("flush");
        }
        let ro = ReadOptions {
            snapshot: Some(db.snapshot()),
            ..Default::default()
        };
        snapshots.push((ro, model.clone()));
        check_ranges(&db, &ReadOptions::default(), &model, &mut rng, 40);
    }
    db.compact_range(None, None).expect("compact");
    for (ro, m) in &snapshots {
        check_ranges(&db, ro, m, &mut rng, 20);
    }
    check_ranges(&db, &ReadOptions::default(), &model, &mut rng, 40);
}

#[test]
fn range_opt_intersects_with_read_option_bounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    for k in ["a", "b", "c", "d", "e", "f"] {
        db.put(k, k).expect("put");
    }
    let ro = ReadOptions {
        iterate_lower_bound: Some(b"b".to_vec()),
        iterate_upper_bound: Some(b"e".to_vec()),
        ..Default::default()
    };
    fn keys(it: impl Iterator<Item = shaledb::Result<(Vec<u8>, shaledb::Value)>>) -> Vec<Vec<u8>> {
        it.map(|r| r.expect("item").0).collect()
    }
    assert_eq!(keys(db.range_opt(&ro, ..)), [b"b", b"c", b"d"]);
    assert_eq!(keys(db.range_opt(&ro, "c"..="f")), [b"c", b"d"]);
    assert_eq!(keys(db.range_opt(&ro, .."c")), [b"b"]);
    assert_eq!(keys(db.range_opt(&ro, "a"..="b").rev()), [b"b"]);
    assert!(keys(db.range_opt(&ro, "e"..)).is_empty());
}

#[test]
fn prefix_visits_exactly_the_keys_with_that_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let keys: [&[u8]; 9] = [
        b"",
        b"ab",
        b"ab\x00",
        b"ab\xff",
        b"ac",
        b"\xff",
        b"\xff\xff",
        b"\xff\xff\x01",
        b"a",
    ];
    for k in keys {
        db.put(k, b"v").expect("put");
    }
    db.flush().expect("flush");
    let got = |p: &[u8]| -> Vec<Vec<u8>> { db.prefix(p).map(|r| r.expect("item").0).collect() };
    let got_rev =
        |p: &[u8]| -> Vec<Vec<u8>> { db.prefix(p).rev().map(|r| r.expect("item").0).collect() };
    let want = |p: &[u8]| -> Vec<Vec<u8>> {
        let mut w: Vec<Vec<u8>> = keys
            .iter()
            .filter(|k| k.starts_with(p))
            .map(|k| k.to_vec())
            .collect();
        w.sort();
        w
    };
    for p in [
        &b"ab"[..],
        b"a",
        b"\xff",
        b"\xff\xff",
        b"",
        b"zz",
        b"ab\xff",
    ] {
        let mut w = want(p);
        assert_eq!(got(p), w, "prefix {p:?}");
        w.reverse();
        assert_eq!(got_rev(p), w, "prefix {p:?} reversed");
    }
    assert_eq!(db.prefix(b"\xff\xff").count(), 2);
    // prefix_opt reads a snapshot.
    let ro = ReadOptions {
        snapshot: Some(db.snapshot()),
        ..Default::default()
    };
    db.put(b"abc", b"later").expect("put");
    assert_eq!(db.prefix_opt(&ro, b"ab").count(), 3);
    assert_eq!(db.prefix(b"ab").count(), 4);
}

#[test]
fn a_range_iterator_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    assert_send(&db.range(..));
}

#[test]
fn an_error_is_an_item_that_ends_the_range_from_either_end() {
    let fs = shaledb::fs::MemFileSystem::new();
    let opts = Options {
        fs: std::sync::Arc::new(fs.clone()),
        block_size: 256,
        ..Default::default()
    };
    let dir = std::path::Path::new("/db");
    let db = Db::open(dir, opts.clone()).expect("open");
    for i in 0..200 {
        db.put(format!("k{i:04}"), format!("value-{i}"))
            .expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
    drop(db);
    let sst = fs
        .file_names()
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("a table");
    // Damage the first data block: its checksum no longer matches.
    let mut bytes = fs.read_file_bytes(&sst).expect("table bytes");
    bytes[10] ^= 0xFF;
    fs.write_file_bytes(&sst, &bytes);
    let db = Db::open(dir, opts).expect("reopen");

    let mut fwd = db.range(..);
    match fwd.next() {
        Some(Err(e)) => assert!(e.is_corruption(), "{e}"),
        other => panic!("expected a corruption item first, got {other:?}"),
    }
    assert!(fwd.next().is_none(), "the error ends the sequence");
    assert!(fwd.next_back().is_none(), "from both ends");

    let mut good = 0;
    let mut rev = db.range(..).rev();
    let err = loop {
        match rev.next() {
            Some(Ok((k, _))) => {
                assert_eq!(k, format!("k{:04}", 199 - good).into_bytes());
                good += 1;
            }
            Some(Err(e)) => break e,
            None => panic!("reverse scan ended without reporting the damage"),
        }
    };
    assert!(err.is_corruption(), "{err}");
    assert!(
        good > 0 && good < 200,
        "{good} good items before the damaged block"
    );
    assert!(rev.next().is_none(), "the error ends the sequence");
}

/// Backward over a table, a value of 128 bytes or more shares its cached block instead of
/// being copied (shorter ones are copied); both read back exactly, in a TTL family too (whose
/// stored values end in a write time that must not show).
#[test]
fn reverse_iteration_shares_blocks_for_long_values() {
    for ttl in [None, Some(std::time::Duration::from_secs(3600))] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(
            dir.path(),
            Options {
                ttl,
                ..small_options()
            },
        )
        .expect("open");
        let value = |i: usize| vec![b'a' + (i % 26) as u8; [20, 127, 128, 700][i % 4]];
        for i in 0..200 {
            db.put(format!("k{i:04}"), value(i)).expect("put");
        }
        db.flush().expect("flush");
        let mut seen = 0;
        for (n, item) in db.range(..).rev().enumerate() {
            let (key, v) = item.expect("item");
            let i = 199 - n;
            assert_eq!(key, format!("k{i:04}").into_bytes());
            assert_eq!(v.as_slice(), value(i).as_slice(), "key {i}");
            assert_eq!(v.is_pinned(), value(i).len() >= 128, "key {i}, ttl {ttl:?}");
            seen += 1;
        }
        assert_eq!(seen, 200);
    }
}
