//! Recovering from background errors without a reopen (`Db::resume`, automatic retries):
//! - the disk fills up for tables and blob files: the failed flush suspends writes
//!   (`Error::Suspended`, never `Poisoned`), reads keep agreeing with the acknowledged writes,
//!   and once space is free writes continue by themselves (or after `resume`) with nothing
//!   lost, before and after a reopen;
//! - a compaction that fails on a transient read error does not stop writes and succeeds on
//!   its retry;
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

/// One run of a write workload (puts, deletes, flushes) during which the disk fills up for
/// tables and blob files after `fill_at` mutating operations (never if `None`); then space
/// is freed, `resume` must lift any suspension, more writes and a compaction succeed, and
/// the state equals the acknowledged writes, live and after a reopen. Returns the mutating
/// operations the workload took, and whether writes were suspended.
fn disk_fills_during_a_workload(fill_at: Option<u64>) -> (u64, bool) {
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let mut o = options(&fs, Duration::from_secs(3600));
    o.info_log_level = shaledb::InfoLogLevel::Off;
    let db = Db::open(DIR, o).expect("open");
    let start = fs.mutations();
    if let Some(n) = fill_at {
        fs.fill_disk_from(start + n, &[".sst", ".blob"]);
    }
    let mut model = Model::new();
    let mut suspended = false;
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
    (used, suspended)
}

#[test]
fn the_disk_filling_at_any_point_of_a_workload_loses_nothing() {
    let (total, suspended) = disk_fills_during_a_workload(None);
    assert!(total > 50 && !suspended, "{total} mutating operations");
    let step = (total / 150).max(1);
    let (mut runs, mut suspensions) = (0, 0);
    for n in (0..total).step_by(step as usize) {
        runs += 1;
        suspensions += usize::from(disk_fills_during_a_workload(Some(n)).1);
    }
    // Filling before the last flush stops writes; later, only the final flush fails.
    assert!(
        suspensions * 2 > runs,
        "{suspensions} of {runs} runs saw writes suspended"
    );
}
