//! `shaledb::repair` crashed at every point: a repair is run once to count its mutating
//! filesystem operations (create, append, flush, sync, rename, remove, sync_dir); then for
//! every k the machine stops right after the k-th one and power is lost (unsynced bytes
//! gone). Afterwards the database either opens as repaired or not at all, and a second
//! repair always succeeds and gives exactly what an uninterrupted repair gives: nothing more
//! is lost. The database repaired has what makes repair write: tables of two families, one
//! damaged (moved aside), blob files, WAL records (written to tables), and tables an earlier
//! interrupted repair wrote (merged with their copies).
#![allow(clippy::field_reassign_with_default)]

use shaledb::fs::{FileSystem, MemFileSystem};
use shaledb::{repair_cf, CfOptions, Db, Options, WriteOptions};
use shaledb_testkit::FaultFs;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/db";

type Contents = BTreeMap<(String, Vec<u8>), Vec<u8>>;

fn options(fs: Arc<dyn FileSystem>) -> Options {
    let mut o = Options::default();
    o.fs = fs;
    o.block_size = 256;
    o.write_buffer_size = 8 << 10;
    o.max_background_jobs = 1;
    o.disable_auto_compactions = true;
    o.create_missing_column_families = true;
    o.enable_blob_files = true;
    o.min_blob_size = 40;
    o
}

fn families() -> Vec<(&'static str, CfOptions)> {
    vec![("x", CfOptions::default())]
}

fn value(i: usize, cf: &str) -> Vec<u8> {
    let mut v = format!("{cf}-v{i}-").into_bytes();
    v.resize(8 + (i % 5) * 20, b'y');
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

fn files_with(fs: &MemFileSystem, f: impl Fn(&str) -> bool) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = fs
        .file_names()
        .into_iter()
        .filter(|p| p.parent() == Some(Path::new(DIR)))
        .filter(|p| f(&p.file_name().unwrap_or_default().to_string_lossy()))
        .collect();
    v.sort();
    v
}

/// The damaged database: see the module comment.
fn build() -> MemFileSystem {
    let fs = MemFileSystem::new();
    let db = Db::open_cf(DIR, options(Arc::new(fs.clone())), families()).expect("open");
    let x = db.cf("x").expect("x");
    let sync = WriteOptions {
        sync: true,
        ..Default::default()
    };
    for i in 0..150 {
        db.put(format!("k{i:04}"), value(i, "default"))
            .expect("put");
        db.put_cf(&x, format!("k{i:04}"), value(i, "x"))
            .expect("put");
        if i % 50 == 49 {
            db.flush().expect("flush");
            db.flush_cf(&x).expect("flush");
        }
    }
    for i in 150..180 {
        db.put_opt(&sync, format!("k{i:04}"), value(i, "default"))
            .expect("put");
    }
    drop((x, db));
    fs.crash();
    // The MANIFEST and CURRENT are lost and one table is damaged.
    for p in files_with(&fs, |n| n.starts_with("MANIFEST-") || n == "CURRENT") {
        fs.remove_file(&p).expect("remove");
    }
    let tables = files_with(&fs, |n| n.ends_with(".sst"));
    let mut bytes = fs.read_file_bytes(&tables[1]).expect("bytes");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    fs.write_file_bytes(&tables[1], &bytes);
    // The tables an earlier repair wrote from the WAL before it was interrupted.
    let earlier = copy(&fs);
    let report = repair_cf(DIR, &options(Arc::new(earlier.clone())), families()).expect("repair");
    for &n in &report.tables_written {
        let p = Path::new(DIR).join(format!("{n:06}.sst"));
        fs.write_file_bytes(&p, &earlier.read_file_bytes(&p).expect("table"));
    }
    fs
}

/// Every family's contents, by scans.
fn contents(db: &Db) -> Contents {
    let mut out = Contents::new();
    for name in ["default", "x"] {
        let cf = db.cf(name).expect("family");
        let mut it = db
            .iter_cf(&cf, &shaledb::ReadOptions::default())
            .expect("iter");
        it.seek_to_first();
        while it.valid() {
            out.insert((name.to_string(), it.key().to_vec()), it.value().to_vec());
            it.next();
        }
        it.status().expect("scan");
    }
    out
}

fn open_contents(fs: &MemFileSystem) -> shaledb::Result<Contents> {
    let db = Db::open_cf(DIR, options(Arc::new(fs.clone())), families())?;
    Ok(contents(&db))
}

#[test]
fn a_repair_crashed_at_every_point_is_completed_by_repairing_again() {
    let damaged = build();
    // The undisturbed repair: its mutating operations and its result.
    let fs = copy(&damaged);
    let fault = FaultFs::new(Arc::new(fs.clone()));
    let before = fault.mutations();
    let report = repair_cf(DIR, &options(fault.as_dyn()), families()).expect("repair");
    let total = fault.mutations() - before;
    assert!(report.lost_data(), "{report}");
    assert!(report.wal_records_salvaged() > 0, "{report}");
    assert!(!report.blob_files_kept.is_empty(), "{report}");
    let want = open_contents(&fs).expect("open");
    assert!(want.len() > 200, "{} entries", want.len());
    let mut opened_early = 0;
    for k in 1..=total {
        let what = format!("crash after mutating operation {k} of {total}");
        let fs = copy(&damaged);
        let fault = FaultFs::new(Arc::new(fs.clone()));
        fault.halt_after_mutations(k);
        let res = repair_cf(DIR, &options(fault.as_dyn()), families());
        assert!(
            res.is_err() || k == total,
            "{what}: repair did not notice the halt"
        );
        fs.crash();
        // Either the repair is complete, or open refuses.
        if let Ok(got) = open_contents(&fs) {
            assert_eq!(got, want, "{what}: opened an incomplete repair");
            opened_early += 1;
        }
        let fs = copy(&fs);
        fs.crash();
        let again = repair_cf(DIR, &options(Arc::new(fs.clone())), families())
            .unwrap_or_else(|e| panic!("{what}: second repair: {e}"));
        let got = open_contents(&fs).unwrap_or_else(|e| panic!("{what}: open: {e}\n{again}"));
        assert_eq!(got, want, "{what}: {again}");
    }
    eprintln!("repair crashed at each of {total} points; {opened_early} opened as repaired");
}
