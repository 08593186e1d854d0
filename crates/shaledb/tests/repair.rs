//! `shaledb::repair`: a database whose CURRENT or MANIFEST is lost or damaged, or with a
//! damaged table, WAL or blob file, is rebuilt from what is on disk; afterwards every read
//! returns exactly what was written before the damage for every intact file, and the report
//! names what was lost.
#![allow(clippy::field_reassign_with_default)]

use shaledb::fs::{FileSystem, MemFileSystem};
use shaledb::{merge_operators, repair, repair_cf, CfOptions, Db, Options, WriteOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const DIR: &str = "/db";

fn key(i: usize) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn value(i: usize, round: usize) -> Vec<u8> {
    format!("v{i}-{round}-{}", "x".repeat(i % 13)).into_bytes()
}

fn options(fs: &MemFileSystem) -> Options {
    let mut o = Options::default();
    o.fs = Arc::new(fs.clone());
    o.block_size = 256;
    o.max_background_jobs = 1;
    o.create_missing_column_families = true;
    o
}

fn files_with(fs: &MemFileSystem, f: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs
        .file_names()
        .into_iter()
        .filter(|p| p.parent() == Some(Path::new(DIR)))
        .filter(|p| f(&p.file_name().unwrap_or_default().to_string_lossy()))
        .collect();
    v.sort();
    v
}

fn copy(fs: &MemFileSystem) -> MemFileSystem {
    let c = MemFileSystem::new();
    for p in fs.file_names() {
        if let Some(b) = fs.read_file_bytes(&p) {
            c.write_file_bytes(&p, &b);
        }
    }
    c
}

fn remove(fs: &MemFileSystem, pred: impl Fn(&str) -> bool) {
    for p in files_with(fs, pred) {
        fs.remove_file(&p).expect("remove");
    }
}

/// Keys 0..n written in three rounds with overwrites and deletes, flushed and compacted in
/// between (so tables sit at several levels with interleaving sequence numbers), the last
/// round partly in the WAL only. Returns the expected contents.
fn build(fs: &MemFileSystem, n: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(DIR, options(fs)).expect("open");
    let mut model = BTreeMap::new();
    for round in 0..3 {
        for i in (round..n).step_by(round + 1) {
            if i % 17 == 5 && round > 0 {
                db.delete(key(i)).expect("delete");
                model.remove(&key(i));
            } else {
                db.put(key(i), value(i, round)).expect("put");
                model.insert(key(i), value(i, round));
            }
            if round < 2 && i == n / 2 {
                db.flush().expect("flush");
            }
        }
        if round == 0 {
            db.compact_range(None::<&[u8]>, None::<&[u8]>)
                .expect("compact");
        } else if round == 1 {
            db.flush().expect("flush");
        }
    }
    let sync = WriteOptions {
        sync: true,
        ..Default::default()
    };
    db.put_opt(&sync, b"last", b"synced").expect("put");
    model.insert(b"last".to_vec(), b"synced".to_vec());
    drop(db);
    fs.crash();
    model
}

/// The database's contents by a full scan, with every key also read by `get`.
fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    for item in db.range(..) {
        let (k, v) = item.expect("scan");
        assert_eq!(db.get(&k).expect("get").as_deref(), Some(&v[..]), "{k:?}");
        out.insert(k, v.to_vec());
    }
    out
}

fn repaired_contents(fs: &MemFileSystem) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(DIR, options(fs)).expect("open after repair");
    contents(&db)
}

#[test]
fn lost_current_is_rebuilt_with_every_value() {
    let fs = MemFileSystem::new();
    let model = build(&fs, 300);
    remove(&fs, |n| n == "CURRENT");
    assert!(Db::open(DIR, options(&fs)).is_err());
    let report = repair(DIR, &options(&fs)).expect("repair");
    assert!(!report.lost_data(), "{report}");
    assert!(report.old_manifest.is_some(), "{report}");
    assert_eq!(repaired_contents(&fs), model);
    // A second repair of the repaired database changes nothing.
    let again = repair(DIR, &options(&fs)).expect("repair again");
    assert!(!again.lost_data(), "{again}");
    assert_eq!(repaired_contents(&fs), model);
}

#[test]
fn lost_manifest_is_rebuilt_from_tables_and_wals() {
    let fs = MemFileSystem::new();
    let model = build(&fs, 300);
    remove(&fs, |n| n.starts_with("MANIFEST-") || n == "CURRENT");
    let report = repair(DIR, &options(&fs)).expect("repair");
    assert!(!report.lost_data(), "{report}");
    assert_eq!(report.old_manifest, None);
    assert!(report.wal_records_salvaged() > 0, "{report}");
    assert_eq!(report.families, vec![(0, "default".to_string())]);
    assert_eq!(repaired_contents(&fs), model);
    // The repaired database takes writes and reopens with them.
    {
        let db = Db::open(DIR, options(&fs)).expect("open");
        db.put(b"after", b"repair").expect("put");
    }
    let mut want = model;
    want.insert(b"after".to_vec(), b"repair".to_vec());
    assert_eq!(repaired_contents(&fs), want);
}

#[test]
fn damaged_manifest_is_rebuilt() {
    let fs = MemFileSystem::new();
    let model = build(&fs, 200);
    let manifest = files_with(&fs, |n| n.starts_with("MANIFEST-"))
        .pop()
        .expect("MANIFEST");
    let mut bytes = fs.read_file_bytes(&manifest).expect("bytes");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    fs.write_file_bytes(&manifest, &bytes);
    assert!(Db::open(DIR, options(&fs)).is_err(), "damage not noticed");
    let report = repair(DIR, &options(&fs)).expect("repair");
    assert!(!report.lost_data(), "{report}");
    assert!(report.old_manifest_damage.is_some(), "{report}");
    assert_eq!(repaired_contents(&fs), model);
}

#[test]
fn a_damaged_table_is_moved_to_lost_and_reported() {
    let fs = MemFileSystem::new();
    let db = Db::open(DIR, options(&fs)).expect("open");
    for i in 0..100 {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    for i in 100..200 {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    drop(db);
    let tables = files_with(&fs, |n| n.ends_with(".sst"));
    assert_eq!(tables.len(), 2);
    let damaged = tables[0].clone();
    let mut bytes = fs.read_file_bytes(&damaged).expect("bytes");
    bytes[10] ^= 1;
    fs.write_file_bytes(&damaged, &bytes);
    remove(&fs, |n| n == "CURRENT");
    let report = repair(DIR, &options(&fs)).expect("repair");
    assert!(report.lost_data(), "{report}");
    assert_eq!(report.tables_lost.len(), 1, "{report}");
    let lost = &report.tables_lost[0];
    assert_eq!(lost.file, damaged);
    assert_eq!(
        lost.moved_to,
        Path::new(DIR)
            .join("lost")
            .join(damaged.file_name().expect("name"))
    );
    assert_eq!(lost.bytes, bytes.len() as u64);
    assert!(lost.reason.contains("corruption"), "{}", lost.reason);
    assert_eq!(
        fs.read_file_bytes(&lost.moved_to),
        Some(bytes),
        "moved, not changed"
    );
    assert!(report.to_string().contains("lost"), "{report}");
    let want: BTreeMap<Vec<u8>, Vec<u8>> = (100..200).map(|i| (key(i), value(i, 0))).collect();
    assert_eq!(repaired_contents(&fs), want);
}

#[test]
fn a_damaged_wal_is_salvaged_up_to_and_after_the_damage() {
    let fs = MemFileSystem::new();
    let db = Db::open(DIR, options(&fs)).expect("open");
    let sync = WriteOptions {
        sync: true,
        ..Default::default()
    };
    for i in 0..50 {
        db.put_opt(&sync, key(i), value(i, 0)).expect("put");
    }
    drop(db);
    fs.crash();
    let wal = files_with(&fs, |n| n.ends_with(".log")).pop().expect("WAL");
    let mut bytes = fs.read_file_bytes(&wal).expect("bytes");
    // Each record: 7-byte header + 12-byte batch header + tag, two lengths, key, value.
    let rec = |i: usize| 7 + 12 + 3 + key(i).len() + value(i, 0).len();
    let at: usize = (0..20).map(rec).sum::<usize>() + 20; // inside record 20
    bytes[at] ^= 0x10;
    fs.write_file_bytes(&wal, &bytes);
    assert!(
        Db::open(DIR, options(&fs)).is_err(),
        "mid-WAL damage refused by open"
    );
    let report = repair(DIR, &options(&fs)).expect("repair");
    assert!(report.lost_data(), "{report}");
    let w = report
        .wals
        .iter()
        .find(|w| !w.damage.is_empty())
        .expect("damage reported");
    assert_eq!(w.damage.len(), 1, "{report}");
    assert_eq!(
        w.damage[0].0,
        (0..20).map(rec).sum::<usize>() as u64,
        "{report}"
    );
    assert_eq!(w.records, 49, "{report}");
    let want: BTreeMap<Vec<u8>, Vec<u8>> = (0..50)
        .filter(|&i| i != 20)
        .map(|i| (key(i), value(i, 0)))
        .collect();
    assert_eq!(repaired_contents(&fs), want);
}

fn family_options() -> Vec<(&'static str, CfOptions)> {
    let counters = CfOptions {
        merge_operator: Some(Arc::new(merge_operators::UInt64Add)),
        ..Default::default()
    };
    let ttl = CfOptions {
        ttl: Some(Duration::from_secs(1_000_000)),
        ..Default::default()
    };
    vec![
        ("x", CfOptions::default()),
        ("counters", counters),
        ("ttl", ttl),
    ]
}

/// Writes to the default family and "x", "counters" (merge) and "ttl" (a TTL family), some
/// flushed, some only in the WAL.
fn build_families(fs: &MemFileSystem) {
    let db = Db::open_cf(DIR, options(fs), family_options()).expect("open");
    let (x, counters, ttl) = (
        db.cf("x").expect("x"),
        db.cf("counters").expect("counters"),
        db.cf("ttl").expect("ttl"),
    );
    for i in 0..60 {
        db.put(key(i), value(i, 0)).expect("put");
        db.put_cf(&x, key(i), value(i, 1)).expect("put");
        db.put_cf(&ttl, key(i), value(i, 2)).expect("put");
        db.merge_cf(&counters, b"c", 1u64.to_le_bytes())
            .expect("merge");
        if i == 30 {
            for cf in [db.default_cf(), x.clone(), counters.clone(), ttl.clone()] {
                db.flush_cf(&cf).expect("flush");
            }
        }
    }
    drop((x, counters, ttl, db));
    fs.crash();
}

fn check_families(fs: &MemFileSystem) {
    let db = Db::open_cf(DIR, options(fs), family_options()).expect("open after repair");
    let (x, counters, ttl) = (
        db.cf("x").expect("x"),
        db.cf("counters").expect("counters"),
        db.cf("ttl").expect("ttl"),
    );
    for i in 0..60 {
        assert_eq!(
            db.get(key(i)).expect("get").as_deref(),
            Some(&value(i, 0)[..])
        );
        assert_eq!(
            db.get_cf(&x, key(i)).expect("get").as_deref(),
            Some(&value(i, 1)[..])
        );
        assert_eq!(
            db.get_cf(&ttl, key(i)).expect("get").as_deref(),
            Some(&value(i, 2)[..])
        );
    }
    assert_eq!(
        db.get_cf(&counters, b"c").expect("get").as_deref(),
        Some(&60u64.to_le_bytes()[..])
    );
    let mut names = Db::list_cf(DIR, &options(fs)).expect("list");
    names.sort();
    assert_eq!(names, ["counters", "default", "ttl", "x"]);
}

#[test]
fn families_keep_their_names_data_merge_operators_and_ttl_without_a_manifest() {
    let fs = MemFileSystem::new();
    build_families(&fs);
    remove(&fs, |n| n.starts_with("MANIFEST-") || n == "CURRENT");
    // Repaired with default options only: names come from the tables' properties, the
    // TTL flag from their write times, and the merge operator is left unrecorded.
    let report = repair(DIR, &options(&fs)).expect("repair");
    assert!(!report.lost_data(), "{report}");
    let mut names: Vec<&str> = report.families.iter().map(|(_, n)| n.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["counters", "default", "ttl", "x"], "{report}");
    assert_eq!(report.families[0], (0, "default".to_string()));
    check_families(&fs);
}

#[test]
fn families_repaired_with_their_options_and_a_readable_manifest() {
    let fs = MemFileSystem::new();
    build_families(&fs);
    remove(&fs, |n| n == "CURRENT");
    let report = repair_cf(DIR, &options(&fs), family_options()).expect("repair");
    assert!(!report.lost_data(), "{report}");
    check_families(&fs);
    // The merge operator is recorded: opening "counters" without it is refused.
    match Db::open_cf(DIR, options(&fs), [("x", CfOptions::default())]) {
        Err(shaledb::Error::InvalidArgument(_)) => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened without the merge operator"),
    }
}

fn blob_options(fs: &MemFileSystem) -> Options {
    let mut o = options(fs);
    o.enable_blob_files = true;
    o.min_blob_size = 8;
    o
}

#[test]
fn blob_files_are_kept_and_a_damaged_one_costs_only_its_values() {
    let fs = MemFileSystem::new();
    let db = Db::open(DIR, blob_options(&fs)).expect("open");
    for i in 0..80 {
        db.put(key(i), value(i, 0)).expect("put");
        if i == 39 {
            db.flush().expect("flush");
        }
    }
    db.flush().expect("flush");
    drop(db);
    let blobs = files_with(&fs, |n| n.ends_with(".blob"));
    assert_eq!(blobs.len(), 2);
    // Intact: everything comes back, both blob files kept.
    let intact = copy(&fs);
    remove(&intact, |n| n == "CURRENT");
    let report = repair(DIR, &blob_options(&intact)).expect("repair");
    assert!(!report.lost_data(), "{report}");
    assert_eq!(report.blob_files_kept.len(), 2, "{report}");
    let all: BTreeMap<Vec<u8>, Vec<u8>> = (0..80).map(|i| (key(i), value(i, 0))).collect();
    let db = Db::open(DIR, blob_options(&intact)).expect("open");
    assert_eq!(contents(&db), all);
    db.verify_checksums().expect("verify");
    drop(db);
    // The first blob file truncated: its table is rewritten without those values.
    let bytes = fs.read_file_bytes(&blobs[0]).expect("bytes");
    fs.write_file_bytes(&blobs[0], &bytes[..bytes.len() / 2]);
    remove(&fs, |n| n == "CURRENT");
    let report = repair(DIR, &blob_options(&fs)).expect("repair");
    assert!(report.lost_data(), "{report}");
    // Values under min_blob_size (8 bytes) stay in the table and survive.
    let in_blob = |i: usize| value(i, 0).len() >= 8;
    let lost = (0..40).filter(|&i| in_blob(i)).count();
    assert!(lost > 20, "{lost}");
    assert_eq!(report.blob_values_lost, lost as u64, "{report}");
    assert_eq!(report.blob_files_lost.len(), 1, "{report}");
    assert_eq!(report.blob_files_lost[0].file, blobs[0]);
    let db = Db::open(DIR, blob_options(&fs)).expect("open");
    let want: BTreeMap<Vec<u8>, Vec<u8>> = (0..80)
        .filter(|&i| i >= 40 || !in_blob(i))
        .map(|i| (key(i), value(i, 0)))
        .collect();
    assert_eq!(contents(&db), want);
    db.verify_checksums().expect("verify");
}

#[test]
fn repair_of_an_open_database_is_refused() {
    let fs = MemFileSystem::new();
    let db = Db::open(DIR, options(&fs)).expect("open");
    let e = repair(DIR, &options(&fs)).expect_err("locked");
    assert!(matches!(e, shaledb::Error::Locked(_)), "{e}");
    drop(db);
    let e = repair("/nothing", &options(&fs)).expect_err("missing");
    assert!(matches!(e, shaledb::Error::NotFound(_)), "{e}");
}

/// A repair interrupted after it wrote tables from the WALs (before its MANIFEST): the next
/// repair finds those tables and replays the same WALs again. The copies of each write are
/// merged into one (the tables' sequence ranges interleave, so they are merged into new
/// tables rather than left in L0), and every value is exact.
#[test]
fn tables_of_an_interrupted_repair_are_merged_with_their_copies() {
    let fs = MemFileSystem::new();
    let model = build(&fs, 300);
    remove(&fs, |n| n.starts_with("MANIFEST-") || n == "CURRENT");
    let first = copy(&fs);
    let report = repair(DIR, &options(&first)).expect("repair of the copy");
    assert!(!report.tables_written.is_empty(), "{report}");
    for &n in &report.tables_written {
        let p = Path::new(DIR).join(format!("{n:06}.sst"));
        fs.write_file_bytes(&p, &first.read_file_bytes(&p).expect("table"));
    }
    let report2 = repair(DIR, &options(&fs)).expect("repair");
    assert!(!report2.lost_data(), "{report2}");
    for n in &report.tables_written {
        assert!(
            !report2.tables_kept.contains(n),
            "{n} not merged: {report2}"
        );
    }
    assert_eq!(repaired_contents(&fs), model);
    let db = Db::open(DIR, options(&fs)).expect("open");
    db.verify_checksums().expect("verify");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    assert_eq!(contents(&db), model);
}
