//! Crash at every point of a checkpoint: a database with two families (tables, blob files,
//! unflushed writes, merges and range deletions) makes a checkpoint; run once to count the
//! checkpoint's mutating filesystem operations, then for every k the machine stops right after
//! the k-th of them (`FaultFs::halt_after_mutations`) and power is lost. Afterwards:
//! - the source reopens with every acknowledged write (the last write before the checkpoint
//!   is synced, so all of them are durable);
//! - the checkpoint directory either opens (without `create_if_missing`) holding exactly the
//!   writes acknowledged before the call, or does not exist at all (the copy is built in
//!   `<dir>.tmp` and renamed); a checkpoint that returned `Ok` always opens;
//! - after a crash that left no checkpoint, checkpointing again into the same directory
//!   succeeds (the leftover `<dir>.tmp` is removed first).
//!
//! Plain checkpoints (the WAL copied) and `checkpoint_opt` flushing every family first.
#![allow(clippy::field_reassign_with_default)]

use rand::rngs::StdRng;
use rand::SeedableRng;
use shaledb::fs::{FileSystem, MemFileSystem};
use shaledb::{CfOptions, CheckpointOptions, ColumnFamily, Db, Error, Options};
use shaledb_testkit::model::{
    self, gen_op, read_all_cf, spread_over_families, Durability, GenConfig, Model, OpLog, Outcome,
};
use shaledb_testkit::{power_loss_at, with_timeout, FaultFs};
use std::sync::Arc;
use std::time::Duration;

const DIR: &str = "/db";
const COPY: &str = "/copy";
const FAMILIES: [&str; 2] = ["default", "other"];

fn options(fs: &FaultFs) -> Options {
    let mut o = Options::default();
    o.fs = fs.as_dyn();
    o.create_if_missing = true;
    o.create_missing_column_families = true;
    o.write_buffer_size = 4096;
    o.block_size = 256;
    o.target_file_size_base = 2 << 10;
    // Background work only when asked for (flushes of full memtables still run): the
    // checkpoint's operations are then counted the same in every run.
    o.disable_auto_compactions = true;
    o.merge_operator = Some(model::merge_operator());
    // LOG lines would make the count depend on background timing.
    o.info_log_level = shaledb::InfoLogLevel::Off;
    o
}

fn families(o: &Options) -> Vec<(&'static str, CfOptions)> {
    let mut other = o.cf_options();
    other.enable_blob_files = true;
    other.min_blob_size = 30;
    other.blob_file_size = 4096;
    vec![(FAMILIES[0], o.cf_options()), (FAMILIES[1], other)]
}

fn handles(db: &Db) -> Vec<ColumnFamily> {
    FAMILIES.iter().map(|n| db.cf(n).expect("family")).collect()
}

fn cfg() -> GenConfig {
    GenConfig {
        key_space: 60,
        sync_ratio: 0.1,
        value_len: (10, 80),
        merge_ratio: 0.2,
        range_delete_ratio: 0.1,
        ..Default::default()
    }
}

/// Opens the source and writes: flushed and compacted tables, blob files, and writes left in
/// the memtables and WAL, the last one synced. Returns the database and the log of writes.
fn build(fault: &FaultFs) -> (Db, OpLog) {
    let o = options(fault);
    let db = Db::open_cf(DIR, o.clone(), families(&o)).expect("open");
    let cfs = handles(&db);
    let mut rng = StdRng::seed_from_u64(11);
    let mut log = OpLog::default();
    for id in 0..160u64 {
        let mut op = gen_op(&mut rng, &cfg(), id);
        spread_over_families(&mut rng, &mut op, FAMILIES.len());
        // The last write synced: everything acknowledged before it is durable too.
        op.sync |= id == 159;
        op.run_cf(&db, &cfs).expect("write");
        log.push(op, Outcome::Acked);
        if id == 100 {
            db.compact_range(None, None).expect("compact");
            db.compact_range_cf(&cfs[1], None, None).expect("compact");
        }
    }
    db.wait_for_compactions().expect("settle");
    (db, log)
}

fn checkpoint(db: &Db, flush_first: bool) -> shaledb::Result<()> {
    let opts = CheckpointOptions {
        log_size_for_flush: if flush_first { 0 } else { u64::MAX },
    };
    db.checkpoint_opt(COPY, &opts)
}

/// Opens `dir` (never creating it) and checks it holds exactly every write of `log`.
/// `Ok(false)`: no database there (`NotFound`).
fn check_dir(mem: &MemFileSystem, dir: &str, log: &OpLog, what: &str) -> bool {
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let mut o = options(&fault);
    o.create_if_missing = false;
    o.create_missing_column_families = false;
    let db = match Db::open_cf(dir, o.clone(), families(&o)) {
        Ok(db) => db,
        Err(Error::NotFound(_)) => return false,
        Err(e) => panic!("{what}: opening {dir}: {e}"),
    };
    let probe = model::all_keys(&cfg());
    let state = read_all_cf(&db, &handles(&db), &probe).unwrap_or_else(|e| panic!("{what}: {e}"));
    if let Err(e) = log.check(&Model::new(), &state, Durability::AllAcked) {
        panic!("{what}: {dir}: {e}");
    }
    true
}

/// Reopens the source after a crash that left no checkpoint and checkpoints into the same
/// directory again: it must succeed over whatever the first attempt left behind.
fn checkpoint_again(mem: &MemFileSystem, log: &OpLog, what: &str) {
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let o = options(&fault);
    let db = Db::open_cf(DIR, o.clone(), families(&o)).expect("reopen the source");
    db.checkpoint(COPY)
        .unwrap_or_else(|e| panic!("{what}: checkpointing again: {e}"));
    drop(db);
    assert!(
        check_dir(mem, COPY, log, what),
        "{what}: the second checkpoint"
    );
    let again = format!("{COPY}.tmp");
    assert!(
        !mem.exists(std::path::Path::new(&again)),
        "{what}: {again} left"
    );
}

fn crash_points(flush_first: bool) {
    with_timeout(
        "checkpoint crash points",
        Duration::from_secs(600),
        move || {
            let mem = MemFileSystem::new();
            let fault = FaultFs::new(Arc::new(mem.clone()));
            let (db, log) = build(&fault);
            let before = fault.mutations();
            checkpoint(&db, flush_first).expect("undisturbed checkpoint");
            let total = fault.mutations() - before;
            drop(db);
            assert!(total > 10, "{total} mutating operations");
            let wals = mem
                .file_names()
                .iter()
                .filter(|p| p.starts_with(COPY) && p.extension().is_some_and(|e| e == "log"))
                .count();
            assert_eq!(wals == 0, flush_first, "{wals} WALs in the checkpoint");
            assert!(check_dir(&mem, COPY, &log, "undisturbed"));

            let (mut opened, mut absent) = (0, 0);
            // A little past the end: a flush's background work can shift the count a bit.
            for k in 1..=total + 5 {
                let mem = MemFileSystem::new();
                let fault = FaultFs::new(Arc::new(mem.clone()));
                let (db, log) = build(&fault);
                fault.halt_after_mutations(fault.mutations() + k);
                let res = checkpoint(&db, flush_first);
                power_loss_at(&fault, &mem, k);
                drop(db);
                let what =
                    format!("crash after mutation {k} of {total} (flush first: {flush_first})");
                assert!(
                    check_dir(&mem, DIR, &log, &what),
                    "{what}: the source is gone"
                );
                if check_dir(&mem, COPY, &log, &what) {
                    opened += 1;
                } else {
                    assert!(
                        res.is_err(),
                        "{what}: a checkpoint that returned Ok is gone"
                    );
                    let copy_files: Vec<_> = mem
                        .file_names()
                        .into_iter()
                        .filter(|p| p.starts_with(COPY))
                        .collect();
                    assert!(copy_files.is_empty(), "{what}: left {copy_files:?}");
                    assert!(!mem.exists(std::path::Path::new(COPY)), "{what}");
                    absent += 1;
                    if absent % 4 == 1 {
                        checkpoint_again(&mem, &log, &what);
                    }
                }
            }
            // Early crashes leave no checkpoint, the last ones a complete one.
            assert!(opened > 0 && absent > 0, "{opened} opened, {absent} absent");
            eprintln!(
            "checkpoint crash points (flush first: {flush_first}): {total} mutating operations, \
             {opened} checkpoints opened, {absent} absent"
        );
        },
    );
}

#[test]
fn crash_at_every_point_of_a_checkpoint() {
    crash_points(false);
}

#[test]
fn crash_at_every_point_of_a_checkpoint_that_flushes_first() {
    crash_points(true);
}
