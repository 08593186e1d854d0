//! `Db::ingest` under crashes and IO errors. Two external files are ingested into a database
//! whose memtable overlaps them (so the ingestion flushes first) and whose tables they
//! overlap (so they take a global sequence number).
//! - Crash: the machine stops after each mutating operation of the ingestion in turn (copy,
//!   sync, flush, MANIFEST, CURRENT...), power is lost, and the reopened database holds
//!   either both files or neither, never one or half of one; an acknowledged ingestion is
//!   all there; no copy is left that no version lists.
//! - IO error: each mutating operation fails in turn; the ingestion returns the error, the
//!   database keeps every value and reads; unless the failure poisoned it (a MANIFEST
//!   write), it takes writes and the same ingestion succeeds when retried.

use shaledb::fs::MemFileSystem;
use shaledb::{Db, Error, IngestOptions, Options, SstFileWriter, WriteOptions};
use shaledb_testkit::{Fault, FaultFs, Target};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "/db";

fn options(fs: &FaultFs) -> Options {
    Options {
        fs: fs.as_dyn(),
        // Nothing runs in the background on its own while a fault is armed.
        disable_auto_compactions: true,
        ..Default::default()
    }
}

fn sync() -> WriteOptions {
    WriteOptions {
        sync: true,
        ..Default::default()
    }
}

/// Keys k000..k099: "old" for all, and k050..k059 rewritten "mem" (synced, unflushed).
fn old_value(i: u32) -> &'static str {
    if (50..60).contains(&i) {
        "mem"
    } else {
        "old"
    }
}

/// File `a` holds k040..k069 even keys, file `b` k070..k089 even keys: value "a"/"b".
fn ingested_value(i: u32) -> Option<&'static str> {
    match i {
        40..=69 if i.is_multiple_of(2) => Some("a"),
        70..=89 if i.is_multiple_of(2) => Some("b"),
        _ => None,
    }
}

fn build() -> (MemFileSystem, FaultFs, Db, Vec<PathBuf>) {
    let mem = MemFileSystem::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let o = options(&fault);
    let db = Db::open(DIR, o.clone()).expect("open");
    for i in 0..100 {
        db.put_opt(&sync(), format!("k{i:03}"), "old").expect("put");
    }
    db.flush().expect("flush");
    for i in 50..60 {
        db.put_opt(&sync(), format!("k{i:03}"), "mem").expect("put");
    }
    let mut files = Vec::new();
    for (name, range) in [("a", 40..70), ("b", 70..90)] {
        let path = PathBuf::from(format!("/ext/{name}.sst"));
        o.fs.create_dir_all(Path::new("/ext")).expect("mkdir");
        let mut w = SstFileWriter::create(&o, &path).expect("writer");
        for i in range.step_by(2) {
            w.put(format!("k{i:03}"), name).expect("put");
        }
        w.finish().expect("finish");
        files.push(path);
    }
    o.fs.sync_dir(Path::new("/ext")).expect("sync");
    o.fs.sync_dir(Path::new("/")).expect("sync");
    (mem, fault, db, files)
}

/// Whether `db` holds the ingested files: `Ok(true)` both, `Ok(false)` neither, `Err` any
/// other state.
fn ingested(db: &Db) -> Result<bool, String> {
    let mut seen = None;
    for i in 0..100 {
        let got = db
            .get(format!("k{i:03}"))
            .map_err(|e| format!("k{i:03}: {e}"))?
            .map(|v| String::from_utf8_lossy(&v).into_owned());
        let (old, new) = (old_value(i), ingested_value(i));
        let state = match (got.as_deref(), new) {
            (Some(v), Some(n)) if v == n => Some(true),
            (Some(v), _) if v == old => new.map(|_| false),
            (g, _) => return Err(format!("k{i:03} is {g:?}")),
        };
        if let Some(s) = state {
            if *seen.get_or_insert(s) != s {
                return Err(format!("k{i:03} disagrees: half an ingestion"));
            }
        }
    }
    seen.ok_or_else(|| "no key tells".to_string())
}

/// The tables in the directory are exactly those the version lists.
fn no_orphans(mem: &MemFileSystem, db: &Db) -> Result<(), String> {
    let on_disk = mem
        .file_names()
        .iter()
        .filter(|p| p.starts_with(DIR) && p.extension().is_some_and(|e| e == "sst"))
        .count();
    let listed: usize = (0..7)
        .map(|l| {
            db.property(&format!("shaledb.num-files-at-level{l}"))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0)
        })
        .sum();
    match on_disk == listed {
        true => Ok(()),
        false => Err(format!("{on_disk} tables on disk, {listed} listed")),
    }
}

fn count_ingest_mutations(move_files: bool) -> u64 {
    let (_, fault, db, files) = build();
    let before = fault.mutations();
    let o = IngestOptions {
        move_files,
        ..Default::default()
    };
    db.ingest(&files, &o).expect("ingest");
    assert_eq!(ingested(&db), Ok(true));
    fault.mutations() - before
}

fn crash_at_every_point(move_files: bool) {
    let total = count_ingest_mutations(move_files);
    assert!(total > 6, "{total} mutating operations");
    let (mut all, mut none) = (0, 0);
    // The count varies a little (the cleaner thread deletes the WAL the flush freed when it
    // gets to it), so crash later and later until an ingestion runs to its end.
    for k in 0.. {
        assert!(k <= 2 * total + 20, "the ingestion never ran to its end");
        let (mem, fault, db, files) = build();
        fault.halt_after_mutations(fault.mutations() + k);
        let o = IngestOptions {
            move_files,
            ..Default::default()
        };
        let acked = db.ingest(&files, &o).is_ok();
        let finished = !fault.is_halted();
        fault.halt();
        drop(db);
        mem.crash();
        let what = format!("crash after mutation {k} of about {total} (move {move_files})");
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, options(&fs)).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
        match ingested(&db) {
            Ok(true) => all += 1,
            Ok(false) => {
                assert!(!acked, "{what}: an acknowledged ingestion was lost");
                none += 1;
            }
            Err(e) => panic!("{what}: {e}"),
        }
        no_orphans(&mem, &db).unwrap_or_else(|e| panic!("{what}: {e}"));
        db.put("after", "crash").expect("writes after reopen");
        if finished {
            break;
        }
    }
    assert!(all > 0 && none > 0, "{all} complete, {none} absent");
}

#[test]
fn a_crash_at_any_point_of_a_copy_ingestion_leaves_all_or_nothing() {
    crash_at_every_point(false);
}

#[test]
fn a_crash_at_any_point_of_a_move_ingestion_leaves_all_or_nothing() {
    crash_at_every_point(true);
}

#[test]
fn an_io_error_at_any_point_is_returned_and_leaves_the_database_usable() {
    let total = count_ingest_mutations(false);
    let mut poisoned = 0;
    for nth in 1..=total {
        let (mem, fault, db, files) = build();
        fault.fail_nth(Target::Mutating, nth, Fault::Eio);
        let res = db.ingest(&files, &IngestOptions::default());
        fault.clear_rules();
        let what = format!("fault at mutating operation {nth} of {total}");
        let state = ingested(&db).unwrap_or_else(|e| panic!("{what}: {e}"));
        match res {
            Ok(()) => assert!(state, "{what}: acknowledged but not visible"),
            Err(e) => assert!(!state, "{what}: failed ({e}) but visible"),
        }
        if db.put_opt(&sync(), "after", "fault").is_err() {
            // A failed MANIFEST write poisons the database: reopen decides.
            assert!(db.background_error().is_some(), "{what}");
            poisoned += 1;
            drop(db);
            let db = Db::open(DIR, options(&FaultFs::new(Arc::new(mem.clone()))))
                .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            ingested(&db).unwrap_or_else(|e| panic!("{what}: after reopen: {e}"));
            no_orphans(&mem, &db).unwrap_or_else(|e| panic!("{what}: {e}"));
            continue;
        }
        if !state {
            db.ingest(&files, &IngestOptions::default())
                .unwrap_or_else(|e| panic!("{what}: retry: {e}"));
            assert_eq!(ingested(&db), Ok(true), "{what}: after the retry");
        }
        no_orphans(&mem, &db).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    assert!(poisoned < total, "not every fault may poison the database");
}

#[test]
fn a_damaged_external_file_is_corruption_and_ingests_nothing() {
    let (mem, _fault, db, files) = build();
    let mut bytes = mem.read_file_bytes(&files[1]).expect("file");
    bytes[3] ^= 1;
    mem.write_file_bytes(&files[1], &bytes);
    let err = db
        .ingest(&files, &IngestOptions::default())
        .expect_err("damaged");
    assert!(
        matches!(&err, Error::Corruption { file, .. } if file == &files[1]),
        "{err}"
    );
    assert_eq!(ingested(&db), Ok(false));
    no_orphans(&mem, &db).expect("no copy left");
}
