//! `SstFileWriter` and `Db::ingest`: exact values after ingesting over the memtable, over
//! levels and under snapshots; refused inputs; move versus copy; families; reopen.

mod common;

use shaledb::merge_operators::StringAppend;
use shaledb::{
    CfOptions, Db, Error, IngestOptions, Options, ReadOptions, SstFileWriter, WriteOptions,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn opts() -> Options {
    Options {
        create_if_missing: true,
        ..Default::default()
    }
}

/// Writes an external file at `dir/name` holding `entries` (ascending): `Some(v)` puts `v`,
/// `None` deletes.
fn sst(dir: &Path, name: &str, entries: &[(&str, Option<&str>)]) -> PathBuf {
    let path = dir.join(name);
    let mut w = SstFileWriter::create(&opts(), &path).expect("create");
    for (k, v) in entries {
        match v {
            Some(v) => w.put(k, v).expect("put"),
            None => w.delete(k).expect("delete"),
        }
    }
    let info = w.finish().expect("finish");
    assert_eq!(info.path, path);
    path
}

fn get(db: &Db, k: &str) -> Option<String> {
    db.get(k)
        .expect("get")
        .map(|v| String::from_utf8(v.to_vec()).expect("utf8"))
}

fn get_at(db: &Db, ro: &ReadOptions, k: &str) -> Option<String> {
    db.get_opt(ro, k)
        .expect("get")
        .map(|v| String::from_utf8(v.to_vec()).expect("utf8"))
}

fn scan(db: &Db, ro: &ReadOptions) -> Vec<(String, String)> {
    db.range_opt(ro, ..)
        .map(|r| {
            let (k, v) = r.expect("scan");
            (
                String::from_utf8(k.to_vec()).expect("utf8"),
                String::from_utf8(v.to_vec()).expect("utf8"),
            )
        })
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn files_per_level(db: &Db) -> Vec<usize> {
    (0..7)
        .map(|l| {
            db.property(&format!("shaledb.num-files-at-level{l}"))
                .expect("property")
                .parse()
                .expect("number")
        })
        .collect()
}

#[test]
fn writer_info_and_refused_keys() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("a.sst");
    let mut w = SstFileWriter::create(&opts(), &path).expect("create");
    w.put("b", "1").expect("put");
    let err = w.put("a", "0").expect_err("out of order");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("sorts before")),
        "{err}"
    );
    let err = w.delete("b").expect_err("duplicate");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("repeats")),
        "{err}"
    );
    w.delete("c").expect("delete");
    w.merge("d", "x").expect("merge");
    let info = w.finish().expect("finish");
    assert_eq!(info.smallest_key, b"b");
    assert_eq!(info.largest_key, b"d");
    assert_eq!(info.num_entries, 3);
    assert_eq!(
        info.file_size,
        std::fs::metadata(&path).expect("meta").len()
    );

    let empty = dir.path().join("empty.sst");
    let w = SstFileWriter::create(&opts(), &empty).expect("create");
    let err = w.finish().expect_err("empty");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(!empty.exists(), "an empty writer's file is removed");
}

#[test]
fn ingest_into_an_empty_database_goes_to_the_bottom() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("db"), opts()).expect("open");
    let f = sst(
        dir.path(),
        "f.sst",
        &[("a", Some("1")), ("b", Some("2")), ("c", Some("3"))],
    );
    db.ingest(&[&f], &IngestOptions::default()).expect("ingest");
    assert_eq!(files_per_level(&db), vec![0, 0, 0, 0, 0, 0, 1]);
    assert_eq!(
        scan(&db, &ReadOptions::default()),
        pairs(&[("a", "1"), ("b", "2"), ("c", "3")])
    );
    assert!(f.exists(), "copying keeps the original");
    db.verify_checksums().expect("verify");
    // A later write wins over the ingested value.
    db.put("b", "new").expect("put");
    assert_eq!(get(&db, "b").as_deref(), Some("new"));
}

#[test]
fn overlapping_the_memtable_flushes_first_and_the_file_wins() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("db"), opts()).expect("open");
    db.put("k", "old").expect("put");
    db.put("z", "keep").expect("put");
    let f = sst(dir.path(), "f.sst", &[("j", None), ("k", Some("new"))]);
    let no_flush = IngestOptions {
        allow_blocking_flush: false,
        ..Default::default()
    };
    let err = db.ingest(&[&f], &no_flush).expect_err("needs a flush");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(get(&db, "k").as_deref(), Some("old"));
    assert_eq!(files_per_level(&db), vec![0; 7], "nothing was ingested");

    db.ingest(&[&f], &IngestOptions::default()).expect("ingest");
    assert_eq!(get(&db, "k").as_deref(), Some("new"));
    assert_eq!(get(&db, "j"), None);
    // The memtable was flushed to L0; the file overlaps it, so it sits above it, in L0.
    assert_eq!(files_per_level(&db), vec![2, 0, 0, 0, 0, 0, 0]);
    db.compact_range(None, None).expect("compact");
    assert_eq!(
        scan(&db, &ReadOptions::default()),
        pairs(&[("k", "new"), ("z", "keep")])
    );
}

#[test]
fn overlapping_a_level_goes_above_it_with_a_new_sequence_number() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("db"), opts()).expect("open");
    for k in ["a", "m", "z"] {
        db.put(k, "old").expect("put");
    }
    db.compact_range(None, None).expect("compact");
    assert_eq!(files_per_level(&db), vec![0, 1, 0, 0, 0, 0, 0]);
    // Beside the data, overlapping nothing: the deepest level.
    let beside = sst(dir.path(), "beside.sst", &[("zz", Some("beside"))]);
    db.ingest(&[&beside], &IngestOptions::default())
        .expect("ingest");
    assert_eq!(files_per_level(&db), vec![0, 1, 0, 0, 0, 0, 1]);
    let f = sst(
        dir.path(),
        "f.sst",
        &[("b", Some("new")), ("m", Some("new"))],
    );
    let no_seqno = IngestOptions {
        allow_global_seqno: false,
        ..Default::default()
    };
    let err = db
        .ingest(&[&f], &no_seqno)
        .expect_err("needs a sequence number");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");

    db.ingest(&[&f], &IngestOptions::default()).expect("ingest");
    // Above the level it overlaps: L0.
    assert_eq!(files_per_level(&db), vec![1, 1, 0, 0, 0, 0, 1]);
    let want = pairs(&[
        ("a", "old"),
        ("b", "new"),
        ("m", "new"),
        ("z", "old"),
        ("zz", "beside"),
    ]);
    assert_eq!(scan(&db, &ReadOptions::default()), want);
    // Backward and by seek, through the table's global sequence number.
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_last();
    let mut back = Vec::new();
    while it.valid() {
        back.push(String::from_utf8(it.key().to_vec()).expect("utf8"));
        it.prev();
    }
    assert_eq!(back, vec!["zz", "z", "m", "b", "a"]);
    it.seek("c");
    assert_eq!((it.key(), it.value()), (&b"m"[..], &b"new"[..]));
    // Compaction rewrites the ingested keys with their sequence number: still newest.
    db.compact_range(None, None).expect("compact");
    assert_eq!(files_per_level(&db)[0], 0);
    assert_eq!(scan(&db, &ReadOptions::default()), want);
}

#[test]
fn an_old_snapshot_does_not_see_ingested_keys() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("db"), opts()).expect("open");
    db.put("a", "1").expect("put");
    db.flush().expect("flush");
    let snap = db.snapshot();
    let at_snap = ReadOptions {
        snapshot: Some(snap.clone()),
        ..Default::default()
    };
    // No overlap with anything, but the snapshot forces a sequence number.
    let f = sst(dir.path(), "f.sst", &[("x", Some("9")), ("y", Some("8"))]);
    let no_seqno = IngestOptions {
        allow_global_seqno: false,
        ..Default::default()
    };
    assert!(matches!(
        db.ingest(&[&f], &no_seqno),
        Err(Error::InvalidArgument(_))
    ));
    db.ingest(&[&f], &IngestOptions::default()).expect("ingest");
    assert_eq!(get(&db, "x").as_deref(), Some("9"));
    assert_eq!(get_at(&db, &at_snap, "x"), None);
    assert_eq!(scan(&db, &at_snap), pairs(&[("a", "1")]));
    assert_eq!(
        scan(&db, &ReadOptions::default()),
        pairs(&[("a", "1"), ("x", "9"), ("y", "8")])
    );
    // Overwriting through ingestion: the snapshot keeps the old value, through compaction.
    let g = sst(dir.path(), "g.sst", &[("a", Some("2"))]);
    db.ingest(&[&g], &IngestOptions::default()).expect("ingest");
    assert_eq!(get(&db, "a").as_deref(), Some("2"));
    assert_eq!(get_at(&db, &at_snap, "a").as_deref(), Some("1"));
    db.compact_range(None, None).expect("compact");
    assert_eq!(get_at(&db, &at_snap, "a").as_deref(), Some("1"));
    assert_eq!(scan(&db, &at_snap), pairs(&[("a", "1")]));
    assert_eq!(get(&db, "a").as_deref(), Some("2"));
}

#[test]
fn without_snapshot_consistency_a_disjoint_file_keeps_sequence_zero() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("db"), opts()).expect("open");
    let _snap = db.snapshot();
    let f = sst(dir.path(), "f.sst", &[("x", Some("9"))]);
    let o = IngestOptions {
        snapshot_consistency: false,
        allow_global_seqno: false,
        ..Default::default()
    };
    db.ingest(&[&f], &o).expect("no sequence number needed");
    assert_eq!(get(&db, "x").as_deref(), Some("9"));
}

#[test]
fn refused_files_leave_the_database_unchanged() {
    let dir = tempfile::tempdir().expect("dir");
    let dbdir = dir.path().join("db");
    let db = Db::open(&dbdir, opts()).expect("open");
    db.put("q", "1").expect("put");
    db.flush().expect("flush");
    let f1 = sst(dir.path(), "1.sst", &[("a", Some("1")), ("m", Some("1"))]);
    let f2 = sst(dir.path(), "2.sst", &[("m", Some("2")), ("z", Some("2"))]);
    let err = db
        .ingest(&[&f1, &f2], &IngestOptions::default())
        .expect_err("overlap");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("overlap")),
        "{err}"
    );
    // A database's own table is not an external file.
    let own = std::fs::read_dir(&dbdir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("a table");
    let copy = dir.path().join("own.sst");
    std::fs::copy(&own, &copy).expect("copy");
    let err = db
        .ingest(&[&copy], &IngestOptions::default())
        .expect_err("own table");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    // A damaged file.
    let bad = dir.path().join("bad.sst");
    let mut bytes = std::fs::read(&f1).expect("read");
    bytes[5] ^= 0x40;
    std::fs::write(&bad, &bytes).expect("write");
    let err = db
        .ingest(&[&bad], &IngestOptions::default())
        .expect_err("damaged");
    assert!(
        matches!(&err, Error::Corruption { file, .. } if file == &bad),
        "{err}"
    );
    // Missing file, empty list.
    assert!(db
        .ingest(&[dir.path().join("none.sst")], &IngestOptions::default())
        .is_err());
    assert!(matches!(
        db.ingest::<&Path>(&[], &IngestOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(scan(&db, &ReadOptions::default()), pairs(&[("q", "1")]));
    let tables = std::fs::read_dir(&dbdir)
        .expect("list")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sst"))
        })
        .count();
    assert_eq!(tables, 1, "no copy is left behind");
}

#[test]
fn move_links_and_removes_the_originals_copy_keeps_them() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("db"), opts()).expect("open");
    let f1 = sst(dir.path(), "1.sst", &[("a", Some("1"))]);
    let f2 = sst(dir.path(), "2.sst", &[("b", Some("2"))]);
    let mv = IngestOptions {
        move_files: true,
        ..Default::default()
    };
    db.ingest(&[&f1], &mv).expect("move");
    assert!(!f1.exists(), "moved");
    db.ingest(&[&f2], &IngestOptions::default()).expect("copy");
    assert!(f2.exists(), "copied");
    std::fs::remove_file(&f2).expect("the copy does not need the original");
    drop(db);
    let db = Db::open(dir.path().join("db"), opts()).expect("reopen");
    assert_eq!(
        scan(&db, &ReadOptions::default()),
        pairs(&[("a", "1"), ("b", "2")])
    );
}

#[test]
fn several_files_at_once_and_column_families() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("db"), opts()).expect("open");
    let cf = db.create_cf("logs", CfOptions::default()).expect("cf");
    db.put_cf(&cf, "m", "old").expect("put");
    let f1 = sst(dir.path(), "1.sst", &[("a", Some("1")), ("b", Some("1"))]);
    let f2 = sst(dir.path(), "2.sst", &[("m", Some("2")), ("n", Some("2"))]);
    // Given out of order: sorted by key before checking.
    db.ingest_cf(&cf, &[&f2, &f1], &IngestOptions::default())
        .expect("ingest");
    let mut it = db.iter_cf(&cf, &ReadOptions::default()).expect("iter");
    it.seek_to_first();
    let mut cf_scan = Vec::new();
    while it.valid() {
        cf_scan.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("status");
    let want: Vec<(Vec<u8>, Vec<u8>)> = [("a", "1"), ("b", "1"), ("m", "2"), ("n", "2")]
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    assert_eq!(cf_scan, want);
    assert_eq!(
        scan(&db, &ReadOptions::default()),
        vec![],
        "default untouched"
    );
    drop(cf);
    drop(db);
    let db = Db::open_cf(
        dir.path().join("db"),
        opts(),
        [("logs", CfOptions::default())],
    )
    .expect("reopen");
    let cf = db.cf("logs").expect("cf");
    assert_eq!(
        db.get_cf(&cf, "m").expect("get").as_deref(),
        Some(&b"2"[..])
    );
}

#[test]
fn reopen_keeps_ingested_sequence_numbers() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("db");
    let db = Db::open(&path, opts()).expect("open");
    db.put("k", "old").expect("put");
    db.flush().expect("flush");
    let f = sst(dir.path(), "f.sst", &[("k", Some("ingested"))]);
    db.ingest(&[&f], &IngestOptions::default()).expect("ingest");
    drop(db);
    let db = Db::open(&path, opts()).expect("reopen");
    assert_eq!(get(&db, "k").as_deref(), Some("ingested"));
    // The ingested sequence number was recorded: a write after reopen is newer.
    db.put_opt(&WriteOptions::default(), "k", "after")
        .expect("put");
    assert_eq!(get(&db, "k").as_deref(), Some("after"));
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(get(&db, "k").as_deref(), Some("after"));
    db.verify_checksums().expect("verify");
}

#[test]
fn ingested_deletions_and_merge_operands() {
    let dir = tempfile::tempdir().expect("dir");
    let o = Options {
        merge_operator: Some(Arc::new(StringAppend::new(","))),
        ..opts()
    };
    let db = Db::open(dir.path().join("db"), o.clone()).expect("open");
    db.put("del", "x").expect("put");
    db.put("list", "a").expect("put");
    db.flush().expect("flush");
    let path = dir.path().join("f.sst");
    let mut w = SstFileWriter::create(&o, &path).expect("create");
    w.delete("del").expect("delete");
    w.merge("list", "b").expect("merge");
    w.finish().expect("finish");
    db.ingest(&[&path], &IngestOptions::default())
        .expect("ingest");
    assert_eq!(get(&db, "del"), None);
    assert_eq!(get(&db, "list").as_deref(), Some("a,b"));
    db.compact_range(None, None).expect("compact");
    assert_eq!(get(&db, "del"), None);
    assert_eq!(get(&db, "list").as_deref(), Some("a,b"));
}

#[test]
fn many_keys_across_blocks_read_exactly() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("db"), opts()).expect("open");
    // Old values for every third key, in the tree.
    for i in (0..3000).step_by(3) {
        db.put(format!("key{i:05}"), "old").expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let path = dir.path().join("f.sst");
    let mut w = SstFileWriter::create(&opts(), &path).expect("create");
    for i in (0..3000).step_by(2) {
        w.put(format!("key{i:05}"), format!("v{i}")).expect("put");
    }
    w.finish().expect("finish");
    let snap = db.snapshot();
    db.ingest(&[&path], &IngestOptions::default())
        .expect("ingest");
    let at_snap = ReadOptions {
        snapshot: Some(snap),
        ..Default::default()
    };
    for i in 0..3000 {
        let k = format!("key{i:05}");
        let want = match (i % 2, i % 3) {
            (0, _) => Some(format!("v{i}")),
            (_, 0) => Some("old".to_string()),
            _ => None,
        };
        assert_eq!(get(&db, &k), want, "{k}");
        let old = (i % 3 == 0).then(|| "old".to_string());
        assert_eq!(get_at(&db, &at_snap, &k), old, "{k} at the snapshot");
    }
    let keys = db
        .multi_get(&["key00000", "key00001", "key00003", "key02998"])
        .into_iter()
        .map(|r| r.expect("get").map(|v| v.to_vec()))
        .collect::<Vec<_>>();
    assert_eq!(
        keys,
        vec![
            Some(b"v0".to_vec()),
            None,
            Some(b"old".to_vec()),
            Some(b"v2998".to_vec())
        ]
    );
    assert_eq!(scan(&db, &ReadOptions::default()).len(), 1500 + 500);
    assert_eq!(scan(&db, &at_snap).len(), 1000);
    // Seeks at the snapshot land past the ingested keys it must not see.
    let mut it = db.iter(&at_snap);
    it.seek("key00002");
    assert_eq!((it.key(), it.value()), (&b"key00003"[..], &b"old"[..]));
    it.seek_for_prev("key00002");
    assert_eq!((it.key(), it.value()), (&b"key00000"[..], &b"old"[..]));
    it.next();
    assert_eq!(it.key(), b"key00003");
    let mut it = db.iter(&ReadOptions::default());
    it.seek("key00001");
    assert_eq!((it.key(), it.value()), (&b"key00002"[..], &b"v2"[..]));
}

#[test]
fn a_family_with_a_ttl_refuses_ingestion() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path().join("db"), opts()).expect("open");
    let cf = db
        .create_cf(
            "ttl",
            CfOptions {
                ttl: Some(std::time::Duration::from_secs(3600)),
                ..Default::default()
            },
        )
        .expect("cf");
    let f = sst(dir.path(), "f.sst", &[("a", Some("1"))]);
    let err = db
        .ingest_cf(&cf, &[&f], &IngestOptions::default())
        .expect_err("ttl");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("TTL")),
        "{err}"
    );
}

/// Snapshots taken while ingestions keep sequence number 0 (no snapshot exists when each one
/// decides): a snapshot's view of the ingested keys never changes after it is taken.
#[test]
fn a_snapshot_taken_during_an_ingestion_keeps_its_view() {
    let dir = tempfile::tempdir().expect("dir");
    let db = Arc::new(Db::open(dir.path().join("db"), opts()).expect("open"));
    let files: Vec<PathBuf> = (0..150)
        .map(|i| {
            let k = format!("k{i:03}");
            sst(dir.path(), &format!("{i}.sst"), &[(k.as_str(), Some("v"))])
        })
        .collect();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (db, done) = (db.clone(), done.clone());
        std::thread::spawn(move || {
            let mut checked = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let ro = ReadOptions {
                    snapshot: Some(db.snapshot()),
                    ..Default::default()
                };
                let before = scan(&db, &ro);
                std::thread::yield_now();
                assert_eq!(scan(&db, &ro), before, "a snapshot's view changed");
                checked += 1;
            }
            checked
        })
    };
    let o = IngestOptions {
        snapshot_consistency: true,
        ..Default::default()
    };
    for f in &files {
        // Each file lands beside the others; with no snapshot alive it may keep sequence
        // number 0, otherwise it takes a new one.
        db.ingest(&[f], &o).expect("ingest");
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    assert!(reader.join().expect("reader") > 0);
    assert_eq!(scan(&db, &ReadOptions::default()).len(), 150);
}

/// Ingesting over a memtable whose values went to blob files as they were written
/// (`separate_blobs_at_write`): the flush first finishes those files, the file's values win,
/// the untouched blob values stay readable, through a reopen (the WAL's references are no
/// longer needed) and a compaction that moves the ingested values into blob files too.
#[test]
fn ingesting_over_values_written_to_blob_files_at_write() {
    let dir = tempfile::tempdir().expect("dir");
    let blobs = Options {
        enable_blob_files: true,
        separate_blobs_at_write: true,
        min_blob_size: 8,
        ..opts()
    };
    let long = |tag: &str| format!("{tag}-{}", "v".repeat(40));
    let db = Db::open(dir.path().join("db"), blobs.clone()).expect("open");
    for k in ["a", "k", "z"] {
        db.put(k, long(&format!("old-{k}"))).expect("put");
    }
    let snapshot = ReadOptions {
        snapshot: Some(db.snapshot()),
        ..Default::default()
    };
    let new_k = long("new-k");
    let f = sst(dir.path(), "f.sst", &[("a", None), ("k", Some(&new_k))]);
    db.ingest(&[&f], &IngestOptions::default()).expect("ingest");
    let want = pairs(&[("k", &new_k), ("z", &long("old-z"))]);
    assert_eq!(scan(&db, &ReadOptions::default()), want);
    // A snapshot from before still reads the old values, now in the finished blob files.
    let old: Vec<(String, String)> = ["a", "k", "z"]
        .iter()
        .map(|k| (k.to_string(), long(&format!("old-{k}"))))
        .collect();
    assert_eq!(scan(&db, &snapshot), old, "the snapshot's view");
    drop(snapshot);
    drop(db);

    let db = Db::open(dir.path().join("db"), blobs).expect("reopen");
    assert_eq!(scan(&db, &ReadOptions::default()), want, "after reopen");
    assert_eq!(get(&db, "a"), None);
    db.compact_range(None, None).expect("compact");
    assert_eq!(scan(&db, &ReadOptions::default()), want, "after compaction");
    let blob_files = common::blob_files_in(&dir.path().join("db"));
    assert!(blob_files > 0, "no blob file after the compaction");
}
