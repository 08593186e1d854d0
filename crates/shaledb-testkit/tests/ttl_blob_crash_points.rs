//! Crash at every point of a family with a TTL and blob files: its blob references carry the
//! values' write times (docs/format/blob.md). A scripted sequence (writes, flush, compaction
//! with blob garbage collection, close) is run once to count its mutating filesystem
//! operations; then for every k the machine stops after the k-th, power is lost, and the
//! database must reopen with every synced write and one prefix of the acknowledged ones, each
//! value whole (the TTL is long: nothing expires, so the model needs no clock).
#![allow(clippy::field_reassign_with_default)]

use shaledb::fs::MemFileSystem;
use shaledb::{Db, Options};
use shaledb_testkit::model::{self, read_all, Durability, GenConfig, Model, OpLog, Outcome};
use shaledb_testkit::{power_loss_at, with_timeout, FaultFs, LoggedWrites};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const DIR: &str = "/db";

/// `at_write`: blobs written with the values (`separate_blobs_at_write`), the write times
/// beside the references in the WAL too.
fn options(fs: &FaultFs, at_write: bool) -> Options {
    let mut o = Options::default();
    o.fs = fs.as_dyn();
    o.ttl = Some(Duration::from_secs(10 * 365 * 24 * 3600));
    shaledb_testkit::store_values_in_blob_files(&mut o, 30, shaledb::CompressionType::None);
    o.enable_blob_garbage_collection = true;
    o.blob_garbage_collection_age_cutoff = 0.5;
    o.separate_blobs_at_write = at_write;
    shaledb_testkit::small_tree(&mut o);
    o
}

fn cfg() -> GenConfig {
    GenConfig {
        key_space: 30,
        sync_ratio: 0.25,
        value_len: (10, 60),
        merge_ratio: 0.0,
        range_delete_ratio: 0.05,
        ..Default::default()
    }
}

/// The scripted sequence; stops at the first error (the machine halted). Returns the log.
fn script(fs: &FaultFs, at_write: bool) -> OpLog {
    let mut log = OpLog::default();
    let Ok(db) = Db::open(Path::new(DIR), options(fs, at_write)) else {
        return log;
    };
    let mut writes = LoggedWrites::new(cfg(), 11);
    let steps: [&dyn Fn(&Db) -> bool; 2] = [&|db| db.flush().is_ok(), &|db| {
        db.compact_range(None, None).is_ok()
    }];
    for step in steps {
        if !writes.run(&db, 30, &mut log) || !step(&db) {
            return log;
        }
    }
    if !writes.run(&db, 10, &mut log) {
        return log;
    }
    let _ = db.close();
    log
}

fn reopen_and_check(mem: &MemFileSystem, log: &OpLog, what: &str, at_write: bool) {
    let probe = model::all_keys(&cfg());
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(Path::new(DIR), options(&fault, at_write))
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let state = read_all(&db, &probe).unwrap_or_else(|e| panic!("{what}: {e}"));
    if let Err(e) = log.check(&Model::new(), &state, Durability::SyncedOnly) {
        panic!("{what}: {e}");
    }
}

#[test]
fn crash_at_every_point_of_a_ttl_family_with_blob_files() {
    crash_points(false);
}

#[test]
fn crash_at_every_point_of_a_ttl_family_with_blobs_written_at_write() {
    crash_points(true);
}

fn crash_points(at_write: bool) {
    with_timeout(
        "ttl blob crash points",
        Duration::from_secs(900),
        move || {
            let mem = MemFileSystem::new();
            let fault = FaultFs::new(Arc::new(mem.clone()));
            let log = script(&fault, at_write);
            let total = fault.mutations();
            assert!(
                log.ops.iter().all(|(_, o)| *o == Outcome::Acked),
                "undisturbed run failed"
            );
            assert!(
                shaledb_testkit::blob_file_count(&mem) > 0,
                "no blob files in the undisturbed run"
            );
            drop(fault);
            reopen_and_check(&mem, &log, "undisturbed run", at_write);
            for k in 1..=total + 10 {
                let mem = MemFileSystem::new();
                let fault = FaultFs::new(Arc::new(mem.clone()));
                fault.halt_after_mutations(k);
                let log = script(&fault, at_write);
                power_loss_at(&fault, &mem, k);
                let what = format!("crash after mutation {k} of {total}");
                reopen_and_check(&mem, &log, &what, at_write);
            }
            eprintln!("ttl blob crash points (at write: {at_write}): {total} mutating operations");
        },
    );
}
