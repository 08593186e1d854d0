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

fn options(fs: &FaultFs) -> Options {
    let mut o = Options::default();
    o.fs = fs.as_dyn();
    o.ttl = Some(Duration::from_secs(10 * 365 * 24 * 3600));
    shaledb_testkit::store_values_in_blob_files(&mut o, 30, shaledb::CompressionType::None);
    o.enable_blob_garbage_collection = true;
    o.blob_garbage_collection_age_cutoff = 0.5;
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
fn script(fs: &FaultFs) -> OpLog {
    let mut log = OpLog::default();
    let Ok(db) = Db::open(Path::new(DIR), options(fs)) else {
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

fn reopen_and_check(mem: &MemFileSystem, log: &OpLog, what: &str) {
    let probe = model::all_keys(&cfg());
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(Path::new(DIR), options(&fault))
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let state = read_all(&db, &probe).unwrap_or_else(|e| panic!("{what}: {e}"));
    if let Err(e) = log.check(&Model::new(), &state, Durability::SyncedOnly) {
        panic!("{what}: {e}");
    }
}

#[test]
fn crash_at_every_point_of_a_ttl_family_with_blob_files() {
    with_timeout("ttl blob crash points", Duration::from_secs(900), || {
        let mem = MemFileSystem::new();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let log = script(&fault);
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
        reopen_and_check(&mem, &log, "undisturbed run");
        for k in 1..=total + 10 {
            let mem = MemFileSystem::new();
            let fault = FaultFs::new(Arc::new(mem.clone()));
            fault.halt_after_mutations(k);
            let log = script(&fault);
            power_loss_at(&fault, &mem, k);
            reopen_and_check(&mem, &log, &format!("crash after mutation {k} of {total}"));
        }
        eprintln!("ttl blob crash points: {total} mutating operations");
    });
}
