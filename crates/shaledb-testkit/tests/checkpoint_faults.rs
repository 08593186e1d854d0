//! `Db::checkpoint` under IO errors: each mutating operation of a checkpoint failed in turn.
//! A failed checkpoint returns the error and leaves no directory; the source database keeps
//! every value and takes writes; a checkpoint that succeeds opens with everything.

use shaledb::fs::MemFileSystem;
use shaledb::{Db, Options};
use shaledb_testkit::{Fault, FaultFs, Target};
use std::sync::Arc;

fn options(fs: &FaultFs) -> Options {
    Options {
        fs: fs.as_dyn(),
        write_buffer_size: 16 << 10,
        // Nothing runs in the background while a fault is armed.
        disable_auto_compactions: true,
        enable_blob_files: true,
        min_blob_size: 64,
        // LOG lines are mutating operations whose failure never fails a call (by design):
        // counted here they would be faults the checkpoint rightly ignores.
        info_log_level: shaledb::InfoLogLevel::Off,
        ..Default::default()
    }
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("v{i}-").into_bytes();
    v.resize(10 + (i as usize % 4) * 40, b'y');
    v
}

fn check_all(db: &Db, what: &str) {
    for i in 0..300 {
        let got = db.get(format!("k{i:04}")).expect("get").map(|v| v.to_vec());
        assert_eq!(got, Some(value(i)), "{what}: key {i}");
    }
}

/// A database with tables, blob files and unflushed writes.
fn build() -> (MemFileSystem, FaultFs, Db) {
    let mem = MemFileSystem::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open("/db", options(&fault)).expect("open");
    for i in 0..300 {
        db.put(format!("k{i:04}"), value(i)).expect("put");
        if i % 100 == 99 {
            db.flush().expect("flush");
        }
    }
    // The cleaner deletes the flushed WALs in the background: done before counting, so every
    // mutating operation counted is the checkpoint's (under load it could run in the middle).
    db.wait_for_compactions().expect("settle");
    (mem, fault, db)
}

#[test]
fn every_failed_checkpoint_operation_is_an_error_and_harms_nothing() {
    // Count the mutating operations of an undisturbed checkpoint.
    let (_, fault, db) = build();
    let before = fault.mutations();
    db.checkpoint("/copy").expect("checkpoint");
    let total = fault.mutations() - before;
    assert!(total > 5, "{total} mutating operations");
    let mut failed = 0;
    for nth in 1..=total {
        let (mem, fault, db) = build();
        fault.fail_nth(Target::Mutating, nth, Fault::Eio);
        let res = db.checkpoint("/copy");
        fault.clear_rules();
        let what = format!("fault at mutating operation {nth} of {total}");
        match res {
            Err(e) => {
                failed += 1;
                assert!(e.to_string().contains("/copy"), "{what}: {e}");
                assert!(
                    !mem.file_names().iter().any(|p| p.starts_with("/copy")),
                    "{what}: a failed checkpoint left files"
                );
            }
            Ok(()) => {
                // The fault hit an operation that does not decide the outcome (none should).
                let copy = Db::open("/copy", options(&FaultFs::new(Arc::new(mem.clone()))))
                    .expect("open the checkpoint");
                check_all(&copy, &what);
            }
        }
        // The source is untouched: every value, writes, a checkpoint again.
        check_all(&db, &what);
        db.put(b"after", b"fault").expect("put after the fault");
        db.checkpoint("/copy2").expect("a second checkpoint");
    }
    assert_eq!(
        failed, total,
        "some injected faults did not fail the checkpoint"
    );
}
