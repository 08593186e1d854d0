//! Recovering from background errors without a reopen (`Db::resume`, automatic retries):
//! - the disk fills up for tables and blob files: the failed flush suspends writes
//!   (`Error::Suspended`, never `Poisoned`), reads keep agreeing with the acknowledged writes,
//!   and once space is free writes continue by themselves (or after `resume`) with nothing
//!   lost, before and after a reopen;
//! - a compaction that fails on a transient read error does not stop writes and succeeds on
//!   its retry;
//! - the disk fills up for the WAL: the write group that failed is refused and never seen,
//!   writes are suspended, and once space is free the recovery (a new WAL, every memtable
//!   flushed, the failed WAL retired and deleted) lets them continue, by itself or through
//!   `resume`; a crash at any point of that recovery reopens with every acknowledged write
//!   and without the failed one;
//! - the disk fills up for a blob file written with the values (`separate_blobs_at_write`):
//!   recovered like a full WAL (the failed group never seen, the file given up and its
//!   acknowledged values relocated by the flush, records of the failed group counted as
//!   garbage), with the same crash-at-any-point test;
//! - a failed WAL sync still poisons, and `resume` cannot lift it;
//! - more failures in a row than `max_bgerror_resume_count` make the error final.

use shaledb::fs::MemFileSystem;
use shaledb::{Db, Error, Options, WriteOptions};
use shaledb_testkit::{Fault, FaultFs, OpKind, Rule, Target};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DIR: &str = "/db";

fn options(fs: &FaultFs, retry_interval: Duration) -> Options {
    let mut o = Options {
        fs: fs.as_dyn(),
        write_buffer_size: 4096,
        block_size: 256,
        max_background_jobs: 1,
        level0_file_num_compaction_trigger: 3,
        max_bytes_for_level_base: 8 << 10,
        target_file_size_base: 2 << 10,
        bgerror_resume_retry_interval: retry_interval,
        ..Default::default()
    };
    shaledb_testkit::store_values_in_blob_files(&mut o, 30, shaledb::CompressionType::None);
    o
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:05}", i % 700).into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("value{i}-").into_bytes();
    v.resize(10 + (i as usize % 5) * 20, b'x');
    v
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Every key of the model reads back its value, and a scan shows exactly the model.
fn check(db: &Db, model: &Model) {
    for (k, v) in model {
        let got = db.get(k).expect("get");
        assert_eq!(got.as_deref(), Some(&v[..]), "key {}", k.escape_ascii());
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = db
        .range(..)
        .map(|r| r.map(|(k, v)| (k, v.to_vec())))
        .collect::<Result<_, _>>()
        .expect("scan");
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert_eq!(all, want);
}

/// Writes `n` puts starting at `from`, recording the acknowledged ones; returns the first
/// error, if any (then stops).
fn write_some(db: &Db, model: &mut Model, from: u32, n: u32) -> Option<Error> {
    for i in from..from + n {
        match db.put(key(i), value(i)) {
            Ok(()) => {
                model.insert(key(i), value(i));
            }
            Err(e) => return Some(e),
        }
    }
    None
}

/// Polls `f` until it returns true, failing after ten seconds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Fills the "disk" for tables and blob files and writes until a write is refused: it must be
/// a suspension.
fn fill_until_suspended(fs: &FaultFs, db: &Db, model: &mut Model, from: u32) -> u32 {
    fs.fill_disk(&[".sst", ".blob"]);
    let mut i = from;
    loop {
        assert!(i < from + 20_000, "writes never stopped on a full disk");
        if let Some(e) = write_some(db, model, i, 1) {
            assert!(matches!(e, Error::Suspended(_)), "got {e:?}");
            break;
        }
        i += 1;
    }
    // Still suspended, the same way, and reads serve every acknowledged write.
    for _ in 0..3 {
        let e = write_some(db, model, i, 1).expect("writes stay suspended while the disk is full");
        assert!(matches!(e, Error::Suspended(_)), "got {e:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(matches!(db.background_error(), Some(Error::Suspended(_))));
    check(db, model);
    i + 1
}

fn reopen_and_check(fs: &FaultFs, model: &Model) {
    fs.free_disk();
    fs.clear_rules();
    let db = Db::open(DIR, options(fs, Duration::from_secs(1))).expect("reopen");
    check(&db, model);
}

#[test]
fn a_full_disk_suspends_writes_and_they_continue_by_themselves_once_space_is_free() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let db = Db::open(DIR, options(&fs, Duration::from_millis(20))).expect("open");
    let mut model = Model::new();
    assert!(write_some(&db, &mut model, 0, 2000).is_none());
    let next = fill_until_suspended(&fs, &db, &mut model, 2000);
    fs.free_disk();
    // The automatic retry (every 20 ms) lifts the suspension; no reopen, no resume.
    let mut i = next;
    eventually("writes resume by themselves", || {
        let ok = write_some(&db, &mut model, i, 1).is_none();
        i += 1;
        ok
    });
    assert!(write_some(&db, &mut model, i, 3000).is_none());
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    check(&db, &model);
    assert!(db.background_error().is_none());
    drop(db);
    reopen_and_check(&fs, &model);
}

#[test]
fn resume_retries_at_once_and_reports_a_retry_that_fails_again() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    // No automatic retry within the test: only resume retries.
    let db = Db::open(DIR, options(&fs, Duration::from_secs(3600))).expect("open");
    let mut model = Model::new();
    assert!(write_some(&db, &mut model, 0, 1000).is_none());
    let next = fill_until_suspended(&fs, &db, &mut model, 1000);
    // Still full: the retry fails and says so; writes stay suspended.
    match db.resume() {
        Err(Error::Suspended(cause)) => match &*cause {
            Error::Io { source, .. } => {
                assert_eq!(source.kind(), std::io::ErrorKind::StorageFull)
            }
            other => panic!("cause {other:?}"),
        },
        other => panic!("resume on a full disk gave {other:?}"),
    }
    fs.free_disk();
    let e = write_some(&db, &mut model, next, 1).expect("no automatic retry yet");
    assert!(matches!(e, Error::Suspended(_)));
    db.resume().expect("resume once space is free");
    assert!(db.background_error().is_none());
    assert!(write_some(&db, &mut model, next + 1, 2000).is_none());
    db.resume().expect("resume with nothing to recover from");
    check(&db, &model);
    drop(db);
    reopen_and_check(&fs, &model);
}

#[test]
fn a_failed_compaction_does_not_stop_writes_and_succeeds_on_retry() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let mut o = options(&fs, Duration::from_millis(20));
    o.disable_auto_compactions = true;
    let db = Db::open(DIR, o).expect("open");
    let mut model = Model::new();
    assert!(write_some(&db, &mut model, 0, 3000).is_none());
    db.flush().expect("flush");
    // Every table read fails for now: the manual compaction fails...
    fs.add_rule(Rule {
        target: Target::Kind(OpKind::Read),
        nth: 1,
        fault: Fault::Eio,
        sticky: true,
    });
    let e = db
        .compact_range(None, None)
        .expect_err("compaction under EIO");
    assert!(matches!(e, Error::Io { .. }), "got {e:?}");
    // ... but writes go on (as many as fit in the memtable: a flush would read its new
    // table back): a compaction failure is not a suspension.
    assert!(db.background_error().is_none());
    assert!(write_some(&db, &mut model, 3000, 20).is_none());
    fs.clear_rules();
    db.resume().expect("resume");
    db.compact_range(None, None)
        .expect("the compaction succeeds now");
    db.wait_for_compactions().expect("nothing failed any more");
    check(&db, &model);
    drop(db);
    reopen_and_check(&fs, &model);
}

#[test]
fn a_failed_wal_sync_still_poisons_and_cannot_be_resumed() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let db = Db::open(DIR, options(&fs, Duration::from_millis(20))).expect("open");
    let mut model = Model::new();
    assert!(write_some(&db, &mut model, 0, 100).is_none());
    // No flush runs now, so the next sync is the WAL's. (A failed table sync is retried:
    // the flush writes a new file from the memtable it still holds.)
    db.flush().expect("flush");
    db.wait_for_compactions().expect("compactions");
    fs.fail_nth(Target::Kind(OpKind::Sync), 1, Fault::Eio);
    let sync = WriteOptions {
        sync: true,
        ..Default::default()
    };
    let e = db.put_opt(&sync, b"synced", b"x").expect_err("sync fails");
    assert!(!matches!(e, Error::Suspended(_)), "got {e:?}");
    assert!(matches!(db.put(b"after", b"x"), Err(Error::Poisoned(_))));
    assert!(matches!(db.resume(), Err(Error::Poisoned(_))));
    std::thread::sleep(Duration::from_millis(60));
    assert!(matches!(db.put(b"after", b"x"), Err(Error::Poisoned(_))));
    check(&db, &model);
}

#[test]
fn too_many_failed_retries_make_the_error_final() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let mut o = options(&fs, Duration::from_millis(10));
    o.max_bgerror_resume_count = 2;
    let db = Db::open(DIR, o).expect("open");
    let mut model = Model::new();
    assert!(write_some(&db, &mut model, 0, 500).is_none());
    fs.fill_disk(&[".sst", ".blob"]);
    let mut next = 500;
    while write_some(&db, &mut model, next, 1).is_none() {
        next += 1;
        assert!(next < 20_000, "writes never stopped on a full disk");
    }
    // The first failure and two failed retries, 10 ms apart: final.
    eventually("the error becomes final", || {
        matches!(
            db.background_error(),
            Some(Error::Poisoned(_)) | Some(Error::Io { .. })
        )
    });
    fs.free_disk();
    std::thread::sleep(Duration::from_millis(50));
    assert!(db.resume().is_err());
    assert!(write_some(&db, &mut model, next, 1).is_some());
    check(&db, &model);
    drop(db);
    reopen_and_check(&fs, &model);
}

#[test]
fn fill_disk_only_refuses_the_named_files() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    fs.fill_disk(&[".sst"]);
    let inner = fs.as_dyn();
    assert!(inner.create(Path::new("/x.sst")).is_err());
    let mut f = inner.create(Path::new("/x.log")).expect("a WAL has room");
    f.append(b"abc").expect("append");
    fs.free_disk();
    inner.create(Path::new("/x.sst")).expect("room again");
}

/// True if `e` is a suspension caused by a WAL write or creation.
fn suspended_by_the_wal(e: &Error) -> bool {
    match e {
        Error::Suspended(cause) => {
            matches!(&**cause, Error::Io { context, .. } if context.contains("WAL"))
        }
        _ => false,
    }
}

/// What a full disk stops: tables and blob files (flushes), or those and the WAL (writes).
const TABLES: &[&str] = &[".sst", ".blob"];
const TABLES_AND_WAL: &[&str] = &[".sst", ".blob", ".log"];

/// One run of a write workload (puts, deletes, flushes) during which the disk fills up for
/// files named `full` after `fill_at` mutating operations (never if `None`); then space is
/// freed, `resume` must lift any suspension, more writes and a compaction succeed, and the
/// state equals the acknowledged writes, live and after a reopen (a write that failed is
/// never seen). Returns the mutating operations the workload took, whether writes were
/// suspended, and whether by the WAL.
fn disk_fills_during_a_workload(fill_at: Option<u64>, full: &[&str]) -> (u64, bool, bool) {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let mut o = options(&fs, Duration::from_secs(3600));
    o.info_log_level = shaledb::InfoLogLevel::Off;
    let db = Db::open(DIR, o).expect("open");
    let start = fs.mutations();
    if let Some(n) = fill_at {
        fs.fill_disk_from(start + n, full);
    }
    let mut model = Model::new();
    let (mut suspended, mut by_wal) = (false, false);
    for i in 0..600u32 {
        let res = if i % 7 == 3 {
            db.delete(key(i))
                .map(|()| model.remove(&key(i)).map_or((), drop))
        } else {
            db.put(key(i), value(i))
                .map(|()| model.insert(key(i), value(i)).map_or((), drop))
        };
        if let Err(e) = res {
            assert!(matches!(e, Error::Suspended(_)), "write {i}: {e:?}");
            suspended = true;
            by_wal |= suspended_by_the_wal(&e);
            // Failed, so never seen, live or after the reopen: the model keeps the last
            // acknowledged value or absence.
            let want = model.get(&key(i)).map(|v| &v[..]);
            assert_eq!(db.get(key(i)).expect("get").as_deref(), want, "write {i}");
        }
        if i % 150 == 149 {
            if let Err(e) = db.flush() {
                assert!(matches!(e, Error::Suspended(_)), "flush at {i}: {e:?}");
            }
        }
    }
    let used = fs.mutations() - start;
    fs.free_disk();
    db.resume().expect("resume once space is free");
    assert!(write_some(&db, &mut model, 1000, 200).is_none());
    db.compact_range(None, None).expect("compact");
    check(&db, &model);
    drop(db);
    reopen_and_check(&fs, &model);
    (used, suspended, by_wal)
}

#[test]
fn the_disk_filling_at_any_point_of_a_workload_loses_nothing() {
    let (total, suspended, _) = disk_fills_during_a_workload(None, TABLES);
    assert!(total > 50 && !suspended, "{total} mutating operations");
    let step = (total / 150).max(1);
    let (mut runs, mut suspensions, mut by_wal) = (0, 0, 0);
    for (i, n) in (0..total).step_by(step as usize).enumerate() {
        // Every other run the WAL has no room either: a WAL append (or the creation of the
        // next WAL) fails wherever the disk fills.
        let full = [TABLES, TABLES_AND_WAL][i % 2];
        let (_, suspended, wal) = disk_fills_during_a_workload(Some(n), full);
        runs += 1;
        suspensions += usize::from(suspended);
        by_wal += usize::from(wal);
    }
    // Filling before the last flush stops writes; later, only the final flush fails.
    assert!(
        suspensions * 2 > runs,
        "{suspensions} of {runs} runs saw writes suspended"
    );
    assert!(
        by_wal * 3 > runs,
        "{by_wal} of {runs} runs saw the WAL fill"
    );
}

/// The WAL files in the database directory, by number.
fn wal_files(fs: &dyn shaledb::fs::FileSystem) -> Vec<String> {
    let mut names: Vec<String> = fs
        .list_dir(Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

/// A key no other write uses, for the writes that fail.
fn failed_key(i: u32) -> Vec<u8> {
    format!("failed{i:05}").into_bytes()
}

/// The error is a suspension caused by a full disk.
fn assert_suspended_for_space(e: &Error) {
    match e {
        Error::Suspended(cause) => match &**cause {
            Error::Io { source, .. } => {
                assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{e}")
            }
            other => panic!("cause {other:?}"),
        },
        other => panic!("expected a suspension, got {other:?}"),
    }
}

/// Writes a few keys to a fresh WAL, then fills the disk for the WAL only: the next write
/// fails at its append, is never visible, and suspends writes; reads serve every
/// acknowledged write. Returns the failed WAL's name.
fn fill_wal_until_suspended(fs: &FaultFs, db: &Db, model: &mut Model, from: u32) -> String {
    // A fresh WAL and memtable with room for the next writes: the failure is an append.
    db.flush().expect("flush");
    assert!(write_some(db, model, from, 20).is_none());
    let wals = wal_files(&*fs.as_dyn());
    let failed_wal = wals.last().expect("a live WAL").clone();
    fs.fill_disk(&[".log"]);
    let e = db
        .put(failed_key(0), b"never")
        .expect_err("the WAL is full");
    assert_suspended_for_space(&e);
    assert!(e.to_string().contains("writing WAL"), "{e}");
    for i in 1..4 {
        // A write batch, a sync write, a write without the WAL: all refused.
        let mut b = shaledb::WriteBatch::new();
        b.put(failed_key(i), b"never");
        let wo = WriteOptions {
            sync: i == 2,
            disable_wal: i == 3,
            ..Default::default()
        };
        let e = db.write(&wo, b).expect_err("writes stay suspended");
        assert!(matches!(e, Error::Suspended(_)), "got {e:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(matches!(db.background_error(), Some(Error::Suspended(_))));
    assert!(matches!(db.flush(), Err(Error::Suspended(_))));
    for i in 0..4 {
        assert_eq!(db.get(failed_key(i)).expect("get"), None);
    }
    check(db, model);
    failed_wal
}

/// After recovery: the failed writes are nowhere, and the failed WAL was deleted.
fn check_failed_wal_retired(fs: &FaultFs, db: &Db, failed_wal: &str) {
    for i in 0..4 {
        assert_eq!(db.get(failed_key(i)).expect("get"), None);
    }
    eventually("the failed WAL is deleted", || {
        !wal_files(&*fs.as_dyn()).iter().any(|w| w == failed_wal)
    });
}

#[test]
fn a_full_disk_for_the_wal_suspends_writes_until_a_new_wal_takes_over_by_itself() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let db = Db::open(DIR, options(&fs, Duration::from_millis(20))).expect("open");
    let mut model = Model::new();
    // Some in tables, some only in the memtable (and the WAL that fails).
    assert!(write_some(&db, &mut model, 0, 1000).is_none());
    let failed_wal = fill_wal_until_suspended(&fs, &db, &mut model, 5000);
    // Retries fail while the disk stays full (no new WAL can be created).
    std::thread::sleep(Duration::from_millis(100));
    assert!(matches!(db.put(b"k", b"v"), Err(Error::Suspended(_))));
    fs.free_disk();
    let mut i = 1000;
    eventually("writes resume by themselves", || {
        let ok = write_some(&db, &mut model, i, 1).is_none();
        i += 1;
        ok
    });
    assert!(db.background_error().is_none());
    check_failed_wal_retired(&fs, &db, &failed_wal);
    assert!(write_some(&db, &mut model, i, 2000).is_none());
    check(&db, &model);
    drop(db);
    reopen_and_check(&fs, &model);
    let db = Db::open(DIR, options(&fs, Duration::from_secs(1))).expect("reopen");
    check_failed_wal_retired(&fs, &db, &failed_wal);
}

#[test]
fn resume_replaces_a_wal_that_filled_up() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    // Column families: every family's memtable moves to the new WAL, with data or not.
    let mut o = options(&fs, Duration::from_secs(3600));
    o.create_missing_column_families = true;
    let cf_opts = shaledb::CfOptions::default();
    let db = Db::open_cf(DIR, o, vec![("other".to_string(), cf_opts)]).expect("open");
    let other = db.cf("other").expect("family");
    db.put_cf(&other, b"in-other", b"x").expect("put");
    let mut model = Model::new();
    assert!(write_some(&db, &mut model, 0, 500).is_none());
    let failed_wal = fill_wal_until_suspended(&fs, &db, &mut model, 5000);
    // Still full: the retry fails and says so.
    assert_suspended_for_space(&db.resume().expect_err("the disk is still full"));
    fs.free_disk();
    assert!(matches!(db.put(b"k", b"v"), Err(Error::Suspended(_))));
    db.resume().expect("resume once space is free");
    assert!(db.background_error().is_none());
    check_failed_wal_retired(&fs, &db, &failed_wal);
    assert!(write_some(&db, &mut model, 500, 1000).is_none());
    check(&db, &model);
    assert_eq!(
        db.get_cf(&other, b"in-other").expect("get").as_deref(),
        Some(&b"x"[..])
    );
    drop(other);
    drop(db);
    fs.clear_rules();
    let mut o = options(&fs, Duration::from_secs(1));
    o.create_missing_column_families = true;
    let db = Db::open_cf(DIR, o, vec![("other".to_string(), Default::default())]).expect("reopen");
    check(&db, &model);
    let other = db.cf("other").expect("family");
    assert_eq!(
        db.get_cf(&other, b"in-other").expect("get").as_deref(),
        Some(&b"x"[..])
    );
}

/// The sync writes acknowledged in the crash test: only in the failed WAL when it fails.
const SYNCED: u32 = 40;

/// A database whose WAL failed for lack of space in the middle of a record (a short write):
/// writes 0..300 are in tables, `SYNCED` sync writes only in the failed WAL, which ends
/// with half of the failed write's record.
fn wal_torn_by_a_full_disk(fs: &FaultFs) -> (Db, Model) {
    let o = options(fs, Duration::from_secs(3600));
    // The next appends are the WAL's (header, payload): the payload is torn.
    let (db, model) = torn_after_synced_writes(fs, o, 2, vec![b'f'; 200]);
    assert!(fs.injected()[0].path.to_string_lossy().ends_with(".log"));
    (db, model)
}

/// Opens a database with `o`, writes 0..300 into tables and `SYNCED` sync writes after them,
/// then fails the `nth` append from there (nothing runs in the background) with a short
/// write while writing `failed_value` under `failed_key(0)`: the write must be refused with
/// a suspension for lack of space.
fn torn_after_synced_writes(
    fs: &FaultFs,
    mut o: Options,
    nth: u64,
    failed_value: Vec<u8>,
) -> (Db, Model) {
    o.info_log_level = shaledb::InfoLogLevel::Off;
    let db = Db::open(DIR, o).expect("open");
    let mut model = Model::new();
    assert!(write_some(&db, &mut model, 0, 300).is_none());
    db.flush().expect("flush");
    db.wait_for_compactions().expect("compactions");
    let sync = WriteOptions {
        sync: true,
        ..Default::default()
    };
    for i in 300..300 + SYNCED {
        db.put_opt(&sync, key(i), value(i)).expect("sync put");
        model.insert(key(i), value(i));
    }
    fs.fail_nth(Target::Kind(OpKind::Append), nth, Fault::ShortWrite);
    let e = db
        .put(failed_key(0), failed_value)
        .expect_err("half the record is written");
    assert_suspended_for_space(&e);
    (db, model)
}

#[test]
fn a_crash_at_any_point_of_the_recovery_from_a_full_wal_loses_nothing() {
    crash_at_any_point_of_the_recovery(wal_torn_by_a_full_disk, options);
}

/// Crashes (with power loss) at every point of `resume` in a database `torn` leaves
/// suspended for lack of space; each reopen with `reopen_options` must hold exactly the
/// acknowledged writes.
fn crash_at_any_point_of_the_recovery(
    torn: fn(&FaultFs) -> (Db, Model),
    reopen_options: fn(&FaultFs, Duration) -> Options,
) {
    let (mut points, mut finished) = (0, false);
    for k in 0..400u64 {
        let mem = MemFileSystem::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let (db, model) = torn(&fs);
        match k {
            0 => fs.halt(),
            _ => fs.halt_after_mutations(fs.mutations() + k),
        }
        // Fails at the crash point (or succeeds if it came after the last step that counts).
        let done = db.resume().is_ok() && !fs.is_halted();
        // Halt + power loss: every unsynced byte is gone (the writes that count were synced
        // or flushed), on odd k a random prefix of them stays.
        fs.halt();
        drop(db);
        if k % 2 == 0 {
            mem.crash();
        } else {
            mem.crash_keep_unsynced_prefix(k);
        }
        points += 1;
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, reopen_options(&fs, Duration::from_secs(1)))
            .unwrap_or_else(|e| panic!("reopen after a crash at point {k}: {e}"));
        check(&db, &model);
        assert_eq!(db.get(failed_key(0)).expect("get"), None, "crash at {k}");
        if done {
            finished = true;
            break;
        }
    }
    assert!(finished, "the recovery never finished");
    // A new WAL, a directory sync, a table, the MANIFEST edit and its sync at least.
    assert!(points > 5, "{points} crash points");
}

/// `options` with large values written to blob files as they are written: a write group
/// appends to a blob file before the WAL.
fn options_blobs_at_write(fs: &FaultFs, retry_interval: Duration) -> Options {
    Options {
        separate_blobs_at_write: true,
        ..options(fs, retry_interval)
    }
}

/// A value that goes to a blob file with `options_blobs_at_write` (at least 30 bytes).
fn blob_value(byte: u8) -> Vec<u8> {
    vec![byte; 200]
}

#[test]
fn a_full_disk_for_blobs_written_with_their_values_suspends_writes_until_space_is_free() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let o = options_blobs_at_write(&fs, Duration::from_secs(3600));
    let db = Db::open(DIR, o).expect("open");
    let mut model = Model::new();
    assert!(write_some(&db, &mut model, 0, 1000).is_none());
    // Nothing runs in the background; the active memtable's blob file holds acknowledged
    // values (four of every five values are at least 30 bytes).
    db.flush().expect("flush");
    db.wait_for_compactions().expect("compactions");
    assert!(write_some(&db, &mut model, 1000, 10).is_none());
    fs.fill_disk(&[".blob"]);
    let e = db
        .put(failed_key(0), blob_value(b'f'))
        .expect_err("the blob file is full");
    assert_suspended_for_space(&e);
    let injected = fs.injected();
    assert_eq!(injected.len(), 1, "{injected:?}");
    assert!(injected[0].path.to_string_lossy().ends_with(".blob"));
    // The acknowledged values are read from the given-up file; the failed one is not there.
    check(&db, &model);
    assert_eq!(db.get(failed_key(0)).expect("get"), None);
    // The recovery's flush relocates those values to new blob files: not while it is full.
    assert_suspended_for_space(&db.resume().expect_err("the disk is still full"));
    fs.free_disk();
    db.resume().expect("resume once space is free");
    assert!(db.background_error().is_none());
    assert!(write_some(&db, &mut model, 1010, 1000).is_none());
    check(&db, &model);
    assert_eq!(db.get(failed_key(0)).expect("get"), None);
    drop(db);
    let db = Db::open(DIR, options_blobs_at_write(&fs, Duration::from_secs(1))).expect("reopen");
    check(&db, &model);
    assert_eq!(db.get(failed_key(0)).expect("get"), None);
}

/// A database whose blob file written with the values failed for lack of space in the middle
/// of a record: writes 0..300 are in tables, `SYNCED` sync writes only in the WAL and the
/// active memtable's blob file, which ends with part of the failed write's record.
fn blob_torn_by_a_full_disk(fs: &FaultFs) -> (Db, Model) {
    let o = options_blobs_at_write(fs, Duration::from_secs(3600));
    // The next append is the failed write's blob record.
    let (db, model) = torn_after_synced_writes(fs, o, 1, blob_value(b'f'));
    assert!(fs.injected()[0].path.to_string_lossy().ends_with(".blob"));
    (db, model)
}

#[test]
fn a_crash_at_any_point_of_the_recovery_from_a_full_blob_file_loses_nothing() {
    crash_at_any_point_of_the_recovery(blob_torn_by_a_full_disk, options_blobs_at_write);
}

#[test]
fn records_of_a_failed_group_in_a_file_that_stays_count_as_its_garbage() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let mut o = options_blobs_at_write(&fs, Duration::from_secs(3600));
    o.create_missing_column_families = true;
    // Memtables large enough that nothing flushes until the test asks.
    o.write_buffer_size = 1 << 20;
    o.blob_file_size = 1 << 20;
    let other_opts = o.cf_options();
    let db = Db::open_cf(DIR, o, vec![("other".to_string(), other_opts)]).expect("open");
    let other = db.cf("other").expect("family");
    // Each family's active memtable has its blob file.
    db.put(b"a0", blob_value(1)).expect("put");
    db.put_cf(&other, b"b0", blob_value(2)).expect("put");
    // The appends of one blob value (a write without the WAL appends nothing else).
    let no_wal = WriteOptions {
        disable_wal: true,
        ..Default::default()
    };
    let before = fs.count(OpKind::Append);
    db.put_opt(&no_wal, b"a1", blob_value(3)).expect("put");
    let per_value = fs.count(OpKind::Append) - before;
    assert!(per_value > 0);
    // A batch whose first value (default family) is appended and whose second (the other
    // family) fails: the first's record stays in a file that will be listed, unreferenced.
    fs.fail_nth(Target::Kind(OpKind::Append), per_value + 1, Fault::Enospc);
    let mut batch = shaledb::WriteBatch::new();
    batch.put(b"a2", blob_value(4));
    batch.put_cf(&other, b"b2", blob_value(5));
    let e = db
        .write(&WriteOptions::default(), batch)
        .expect_err("the second value fails");
    assert_suspended_for_space(&e);
    db.resume().expect("resume");
    assert_eq!(db.get(b"a2").expect("get"), None);
    assert_eq!(db.get_cf(&other, b"b2").expect("get"), None);
    assert_eq!(db.get(b"a1").expect("get"), Some(blob_value(3).into()));
    let garbage = |db: &Db, cf: &shaledb::ColumnFamily| -> u64 {
        db.property_cf(cf, "shaledb.live-blob-file-garbage-size")
            .expect("property")
            .parse()
            .expect("a number")
    };
    // The orphaned record: its 17-byte header, key and value.
    let default_cf = db.default_cf();
    assert_eq!(garbage(&db, &default_cf), 17 + 2 + 200);
    // The other family's file was given up (its values relocated), so it has no garbage.
    assert_eq!(garbage(&db, &other), 0);
    assert_eq!(
        db.get_cf(&other, b"b0").expect("get").as_deref(),
        Some(&blob_value(2)[..])
    );
}

/// Several writers at once, so write groups are pipelined (`allow_concurrent_memtable_write`:
/// a group leaves the queue once in the WAL and inserts while the next one is appended), when
/// the disk fills up for the WAL: each writer stops at its first refused write. Every
/// acknowledged write is there, before and after the recovery and after a reopen, and no
/// refused one ever is (the group that failed never reached a memtable, and the recovery
/// froze no memtable a group was still inserting into).
#[test]
fn a_full_disk_for_the_wal_under_concurrent_writers_loses_no_acknowledged_write() {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let db = Db::open(DIR, options(&fs, Duration::from_millis(20))).expect("open");
    fs.fill_disk_from(fs.mutations() + 1000, &[".log"]);
    let writers = 4u32;
    let start = std::sync::Barrier::new(writers as usize);
    let outcomes: Vec<(Model, Vec<u8>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|t| {
                let (db, start) = (&db, &start);
                s.spawn(move || {
                    let mut acked = Model::new();
                    start.wait();
                    for i in 0.. {
                        let (k, v) = (format!("w{t}-{i:06}").into_bytes(), value(i));
                        match db.put(&k, &v) {
                            Ok(()) => {
                                acked.insert(k, v);
                            }
                            Err(e) => {
                                assert_suspended_for_space(&e);
                                return (acked, k);
                            }
                        }
                    }
                    unreachable!("the disk fills up")
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("writer"))
            .collect()
    });
    let mut model = Model::new();
    let mut refused = Vec::new();
    for (acked, failed) in outcomes {
        model.extend(acked);
        refused.push(failed);
    }
    assert!(
        model.len() > 100,
        "{} writes before the disk filled",
        model.len()
    );
    let refused_none = |db: &Db| {
        for k in &refused {
            assert_eq!(db.get(k).expect("get"), None, "{}", k.escape_ascii());
        }
    };
    check(&db, &model);
    refused_none(&db);
    fs.free_disk();
    db.resume().expect("resume once space is free");
    check(&db, &model);
    refused_none(&db);
    drop(db);
    reopen_and_check(&fs, &model);
    let db = Db::open(DIR, options(&fs, Duration::from_secs(1))).expect("reopen");
    refused_none(&db);
}
