//! TTL (`CfOptions::ttl`): expired entries are never returned (gets, multi-gets, iterators
//! both ways, snapshots, ranges), are dropped by compaction, keep their write time across
//! reopens; a family's TTL-ness is fixed at creation; a model test with a test clock. Each
//! test runs with values inline and in blob files (`enable_blob_files`), written by flushes
//! and written with the values (`separate_blobs_at_write`), where expired blob values become
//! garbage and garbage collection keeps write times.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::fs::MemFileSystem;
use shaledb::{CfOptions, Clock, Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A clock the test moves by hand.
#[derive(Default)]
struct TestClock(AtomicU64);

impl TestClock {
    fn advance(&self, secs: u64) {
        self.0.fetch_add(secs, Ordering::Relaxed);
    }
}

impl Clock for TestClock {
    fn now_secs(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// How values are stored: inline in the tables, or in blob files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Values {
    Inline,
    /// In blob files from `min_blob_size` bytes on, written by flushes.
    Blob(u64),
    /// In blob files from `min_blob_size` bytes on, written with the values
    /// (`separate_blobs_at_write`: the WAL and memtable hold references with write times).
    BlobAtWrite(u64),
}

const ALL: [Values; 3] = [Values::Inline, Values::Blob(0), Values::BlobAtWrite(0)];

fn opts(clock: &Arc<TestClock>, ttl: Option<u64>, values: Values) -> Options {
    Options {
        write_buffer_size: 16 << 10,
        level0_file_num_compaction_trigger: 2,
        target_file_size_base: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        ttl: ttl.map(Duration::from_secs),
        clock: clock.clone(),
        enable_blob_files: values != Values::Inline,
        min_blob_size: match values {
            Values::Blob(min) | Values::BlobAtWrite(min) => min,
            Values::Inline => 0,
        },
        separate_blobs_at_write: matches!(values, Values::BlobAtWrite(_)),
        ..Default::default()
    }
    .with_fs(MemFileSystem::new())
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn pairs(list: &[(&str, &str)]) -> Pairs {
    list.iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

#[test]
fn expired_entries_are_never_read_and_their_time_survives_reopen() {
    for values in ALL {
        expired_entries_are_never_read_and_their_time_survives_reopen_with(values);
    }
}

fn expired_entries_are_never_read_and_their_time_survives_reopen_with(values: Values) {
    let clock = Arc::new(TestClock(AtomicU64::new(1_000_000)));
    let o = opts(&clock, Some(10), values);
    let dir = Path::new("/ttl-basic");
    let db = Db::open(dir, o.clone()).expect("open");
    db.put(b"a", b"old-a").expect("put");
    let mut b = WriteBatch::new();
    b.put(b"b", b"old-b");
    b.delete(b"zz");
    db.write(&WriteOptions::default(), &b).expect("write");
    clock.advance(5);
    db.put(b"c", b"young-c").expect("put");
    let snap = db.snapshot();
    let ro = ReadOptions::default();
    assert_eq!(
        common::scan(&db, &ro, false),
        pairs(&[("a", "old-a"), ("b", "old-b"), ("c", "young-c")])
    );
    assert_eq!(db.get(b"a").expect("get").as_deref(), Some(&b"old-a"[..]));
    clock.advance(5); // a and b are now exactly 10 s old: expired
    let check = |db: &Db| {
        let ro = ReadOptions::default();
        assert_eq!(db.get(b"a").expect("get"), None);
        assert_eq!(db.get(b"c").expect("get").as_deref(), Some(&b"young-c"[..]));
        let got: Vec<Option<Vec<u8>>> = db
            .multi_get([&b"a"[..], b"b", b"c"])
            .into_iter()
            .map(|r| r.expect("get").map(|v| v.to_vec()))
            .collect();
        assert_eq!(got, vec![None, None, Some(b"young-c".to_vec())]);
        assert_eq!(common::scan(db, &ro, false), pairs(&[("c", "young-c")]));
        assert_eq!(common::scan(db, &ro, true), pairs(&[("c", "young-c")]));
        let range: Vec<(Vec<u8>, Vec<u8>)> = db
            .range(..)
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).expect("item"))
            .collect();
        assert_eq!(range, pairs(&[("c", "young-c")]));
    };
    check(&db);
    // A snapshot taken while they were live does not bring them back: expiry is wall time.
    let at_snap = ReadOptions {
        snapshot: Some(snap.clone()),
        ..Default::default()
    };
    assert_eq!(db.get_opt(&at_snap, b"a").expect("get"), None);
    assert_eq!(
        common::scan(&db, &at_snap, false),
        pairs(&[("c", "young-c")])
    );
    drop(snap);
    db.flush().expect("flush");
    if values != Values::Inline {
        assert_eq!(common::property(&db, "shaledb.num-blob-files"), 1);
    }
    check(&db);
    drop(db);
    let db = Db::open(dir, o).expect("reopen");
    check(&db);
    db.compact_range(None, None).expect("compact");
    check(&db);
    clock.advance(5);
    assert_eq!(
        common::scan(&db, &ReadOptions::default(), false),
        Vec::new()
    );
}

/// A family that is no longer written is never flushed or compacted again; its files still go
/// once everything in them expired (idle background threads look every TTL/2, at least 1 s).
#[test]
fn expired_files_of_an_idle_family_are_dropped() {
    for values in ALL {
        expired_files_of_an_idle_family_are_dropped_with(values);
    }
}

fn expired_files_of_an_idle_family_are_dropped_with(values: Values) {
    let clock = Arc::new(TestClock(AtomicU64::new(1000)));
    let db = Db::open(Path::new("/ttl-idle"), opts(&clock, Some(2), values)).expect("open");
    for i in 0..500u32 {
        db.put(i.to_be_bytes(), [7u8; 50]).expect("put");
    }
    db.flush().expect("flush");
    let files = |db: &Db| -> u64 {
        (0..7)
            .map(|l| {
                db.property(&format!("shaledb.num-files-at-level{l}"))
                    .expect("property")
                    .parse::<u64>()
                    .expect("number")
            })
            .sum()
    };
    assert!(files(&db) > 0);
    // Not expired yet: an idle sweep keeps the files.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(files(&db) > 0, "files dropped before their values expired");
    clock.advance(10);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while files(&db) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "expired files still there after 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        common::scan(&db, &ReadOptions::default(), false),
        Vec::new()
    );
}

#[test]
fn compaction_drops_expired_entries() {
    for values in ALL {
        compaction_drops_expired_entries_with(values);
    }
}

fn compaction_drops_expired_entries_with(values: Values) {
    let clock = Arc::new(TestClock(AtomicU64::new(50)));
    let db = Db::open(Path::new("/ttl-space"), opts(&clock, Some(60), values)).expect("open");
    for i in 0..3000u32 {
        db.put(i.to_be_bytes(), [9u8; 100]).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let size = |db: &Db| -> u64 {
        db.property("shaledb.total-sst-files-size")
            .expect("property")
            .parse()
            .expect("number")
    };
    let full = size(&db);
    clock.advance(30);
    db.put(b"late", b"value").expect("put");
    clock.advance(30);
    db.compact_range(None, None).expect("compact");
    assert!(size(&db) * 20 < full, "{} of {full} bytes kept", size(&db));
    assert_eq!(
        common::scan(&db, &ReadOptions::default(), false),
        pairs(&[("late", "value")])
    );
}

#[test]
fn a_family_keeps_the_ttl_choice_it_was_created_with() {
    for values in ALL {
        a_family_keeps_the_ttl_choice_it_was_created_with_with(values);
    }
}

fn a_family_keeps_the_ttl_choice_it_was_created_with_with(values: Values) {
    let clock = Arc::new(TestClock::default());
    let fs = MemFileSystem::new();
    let with_ttl = opts(&clock, Some(10), values).with_fs(fs.clone());
    let without = opts(&clock, None, values).with_fs(fs.clone());
    let dir = Path::new("/ttl-fixed");
    {
        let db = Db::open(dir, with_ttl.clone()).expect("open");
        db.put(b"k", b"v").expect("put");
        db.create_cf(
            "plain",
            CfOptions {
                ttl: None,
                ..without.cf_options()
            },
        )
        .expect("cf");
    }
    match Db::open_cf(dir, without.clone(), [("plain", without.cf_options())]) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("\"default\""), "{m}"),
        other => panic!("expected InvalidArgument, got {:?}", other.map(|_| ())),
    }
    match Db::open_cf(dir, with_ttl.clone(), [("plain", with_ttl.cf_options())]) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("\"plain\""), "{m}"),
        other => panic!("expected InvalidArgument, got {:?}", other.map(|_| ())),
    }
    // Any duration may be given on reopen.
    let longer = Options {
        ttl: Some(Duration::from_secs(3600)),
        ..with_ttl.clone()
    };
    let db = Db::open_cf(dir, longer, [("plain", without.cf_options())]).expect("reopen");
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    drop(db);
    let merging = Options {
        merge_operator: Some(Arc::new(shaledb::merge_operators::UInt64Add)),
        ..with_ttl
    };
    assert!(matches!(
        Db::open(Path::new("/ttl-merge"), merging),
        Err(Error::InvalidArgument(_))
    ));
    let zero = Options {
        ttl: Some(Duration::ZERO),
        ..without
    };
    assert!(matches!(
        Db::open(Path::new("/ttl-zero"), zero),
        Err(Error::InvalidArgument(_))
    ));
}

/// Random puts, deletes and range deletes while a test clock advances, with flushes,
/// compactions and reopens: reads always equal the model's unexpired entries. Values inline,
/// and values from 50 bytes on in small blob files with garbage collection relocating the
/// older half (so blobs move with their write times).
#[test]
fn model_with_ttl() {
    for values in [Values::Inline, Values::Blob(50), Values::BlobAtWrite(50)] {
        model_with_ttl_and(values);
    }
}

fn model_with_ttl_and(values: Values) {
    const TTL: u64 = 20;
    for seed in 0..4u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let clock = Arc::new(TestClock(AtomicU64::new(1_000)));
        let o = Options {
            blob_file_size: 4096,
            enable_blob_garbage_collection: values != Values::Inline,
            blob_garbage_collection_age_cutoff: 0.5,
            ..opts(&clock, Some(TTL), values)
        };
        let dir = Path::new("/ttl-model");
        let mut db = Db::open(dir, o.clone()).expect("open");
        // key -> (value, write time)
        let mut model: BTreeMap<Vec<u8>, (Vec<u8>, u64)> = BTreeMap::new();
        let mut blob_files_seen = 0;
        for op in 0..3000 {
            let k = format!("k{:04}", rng.gen_range(0..500)).into_bytes();
            match rng.gen_range(0..100) {
                0..=54 => {
                    let v = format!("v{op}-{}", "x".repeat(rng.gen_range(0..150))).into_bytes();
                    db.put(&k, &v).expect("put");
                    model.insert(k, (v, clock.now_secs()));
                }
                55..=62 => {
                    db.delete(&k).expect("delete");
                    model.remove(&k);
                }
                63..=64 => {
                    let end = format!("k{:04}", rng.gen_range(0..500)).into_bytes();
                    if k <= end {
                        db.delete_range(&k, &end).expect("delete_range");
                        model.retain(|key, _| !(k <= *key && *key < end));
                    }
                }
                65..=74 => clock.advance(rng.gen_range(0..4)),
                75..=77 => db.flush().expect("flush"),
                78 => {
                    db.compact_range(None, None).expect("compact");
                    blob_files_seen =
                        blob_files_seen.max(common::property(&db, "shaledb.num-blob-files"));
                }
                79 => {
                    drop(db);
                    db = Db::open(dir, o.clone()).expect("reopen");
                }
                80..=89 => {
                    let now = clock.now_secs();
                    let want = model
                        .get(&k)
                        .filter(|(_, t)| now - t < TTL)
                        .map(|(v, _)| v.clone());
                    let got = db.get(&k).expect("get").map(|v| v.to_vec());
                    assert_eq!(got, want, "{values:?} seed {seed} op {op}: get");
                }
                _ => {
                    let now = clock.now_secs();
                    let want: Pairs = model
                        .iter()
                        .filter(|(_, (_, t))| now - t < TTL)
                        .map(|(k, (v, _))| (k.clone(), v.clone()))
                        .collect();
                    let ro = ReadOptions::default();
                    assert!(
                        common::scan(&db, &ro, false) == want,
                        "{values:?} seed {seed} op {op}: forward"
                    );
                    assert!(
                        common::scan(&db, &ro, true) == want,
                        "{values:?} seed {seed} op {op}: backward"
                    );
                }
            }
        }
        assert_eq!(blob_files_seen > 0, values != Values::Inline, "seed {seed}");
    }
}

fn blob_opts(clock: &Arc<TestClock>, ttl: u64) -> Options {
    Options {
        disable_auto_compactions: true,
        write_buffer_size: 4 << 20,
        ..opts(clock, Some(ttl), Values::Blob(100))
    }
}

/// Expired values in blob files are dropped by compaction without their blobs being read:
/// their records become garbage, and a blob file whose every value expired leaves.
#[test]
fn expired_blob_values_become_garbage() {
    let clock = Arc::new(TestClock(AtomicU64::new(5_000)));
    let db = Db::open(Path::new("/ttl-blob-garbage"), blob_opts(&clock, 100)).expect("open");
    let value = |i: u32| vec![b'a' + (i % 26) as u8; 400];
    for i in 0..100u32 {
        db.put(i.to_be_bytes(), value(i)).expect("put");
        if i == 49 {
            clock.advance(50);
        }
    }
    db.flush().expect("flush");
    assert_eq!(common::property(&db, "shaledb.num-blob-files"), 1);
    assert_eq!(
        common::property(&db, "shaledb.live-blob-file-garbage-size"),
        0
    );
    let total = common::property(&db, "shaledb.total-blob-file-size");
    clock.advance(50); // the first half is now 100 s old: expired
    db.compact_range(None, None).expect("compact");
    let garbage = common::property(&db, "shaledb.live-blob-file-garbage-size");
    // 50 records of 17 header, 4 key and 400 value bytes.
    assert_eq!(garbage, 50 * (17 + 4 + 400), "of {total}");
    let live: Vec<u32> = db
        .range(..)
        .map(|r| {
            let (k, v) = r.expect("item");
            let i = u32::from_be_bytes(k[..].try_into().expect("4 bytes"));
            assert_eq!(&v[..], &value(i)[..]);
            i
        })
        .collect();
    assert_eq!(live, (50..100).collect::<Vec<_>>());
    clock.advance(50);
    db.compact_range(None, None).expect("compact");
    assert_eq!(common::property(&db, "shaledb.num-blob-files"), 0);
    assert_eq!(db.range(..).count(), 0);
}

/// Garbage collection moves live blobs to new files with their write times: they expire when
/// they would have, after the move and across a reopen.
#[test]
fn relocated_blobs_keep_their_write_times() {
    let clock = Arc::new(TestClock(AtomicU64::new(9_000)));
    let dir = Path::new("/ttl-blob-gc");
    let o = Options {
        enable_blob_garbage_collection: true,
        blob_garbage_collection_age_cutoff: 1.0,
        ..blob_opts(&clock, 100)
    };
    let db = Db::open(dir, o.clone()).expect("open");
    for i in 0..40u32 {
        db.put(i.to_be_bytes(), vec![i as u8; 300]).expect("put");
    }
    db.flush().expect("flush");
    clock.advance(60);
    // Overwrite a quarter so the first file has garbage; compaction relocates the rest into
    // one new file (without garbage collection the first file would stay, with garbage).
    for i in (0..40u32).step_by(4) {
        db.put(i.to_be_bytes(), vec![200u8; 250]).expect("put");
    }
    db.flush().expect("flush");
    assert_eq!(common::property(&db, "shaledb.num-blob-files"), 2);
    db.compact_range(None, None).expect("compact");
    assert_eq!(common::property(&db, "shaledb.num-blob-files"), 1);
    assert_eq!(
        common::property(&db, "shaledb.live-blob-file-garbage-size"),
        0
    );
    drop(db);
    let db = Db::open(dir, o).expect("reopen");
    let read = |db: &Db| -> Vec<u32> {
        (0..40u32)
            .filter(|i| db.get(i.to_be_bytes()).expect("get").is_some())
            .collect()
    };
    assert_eq!(read(&db).len(), 40);
    clock.advance(40); // the first writes are 100 s old, the overwrites 40 s
    assert_eq!(read(&db), (0..40).step_by(4).collect::<Vec<_>>());
    db.compact_range(None, None).expect("compact");
    assert_eq!(read(&db), (0..40).step_by(4).collect::<Vec<_>>());
    let scanned: Vec<Vec<u8>> = db.range(..).map(|r| r.expect("item").1.to_vec()).collect();
    assert_eq!(scanned, vec![vec![200u8; 250]; 10]);
}
