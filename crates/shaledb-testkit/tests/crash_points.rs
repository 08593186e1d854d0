//! Crash at every point: a scripted sequence (open, writes, WAL rotation, flush, compaction,
//! MANIFEST roll, close) is run once to count its mutating filesystem operations (create,
//! append, flush, sync, rename, remove, sync_dir); then for every k the machine is stopped
//! right after the k-th one (`FaultFs::halt_after_mutations`), power is lost, and the database
//! must reopen with every synced write and exactly one prefix of the acknowledged writes.
//! Recovery itself is crashed at every point too, for a sample of the first crashes.
#![allow(clippy::field_reassign_with_default)]

use shaledb::fs::MemFileSystem;
use shaledb::{Db, Options};
use shaledb_testkit::model::{self, Durability, GenConfig, Model, OpLog, Outcome};
use shaledb_testkit::table_layout::{self, table_formats};
use shaledb_testkit::{
    power_loss_at, with_timeout, FaultFs, LoggedWrites, Reopen, StorageMode as Mode,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const DIR: &str = "/db";

/// The suite's options in `mode`.
fn options(fs: &FaultFs, mode: Mode) -> Options {
    let direct = mode == Mode::Direct;
    let mut o = Options::default();
    o.fs = fs.as_dyn();
    o.use_direct_reads = direct;
    o.use_direct_io_for_flush_and_compaction = direct;
    // The direct run also puts flushed blocks into the block cache as they are written: the
    // blocks of a flush that failed must never be read.
    if direct {
        o.prepopulate_block_cache = shaledb::PrepopulateBlockCache::FlushOnly;
        // Compaction outputs with zstd dictionaries.
        table_layout::write_dictionary_tables(&mut o);
    } else {
        // Every table with a two-level index and filter partitions.
        table_layout::write_partitioned_tables(&mut o, true, 64);
        // Values of 30 bytes or more (about 60%) in blob files: a crash at any point of a
        // blob write leaves no reference to a missing or partial blob.
        shaledb_testkit::store_values_in_blob_files(&mut o, 30, shaledb::CompressionType::Lz4);
        // The WAL holds references to blobs written before it: a crash at any point leaves
        // no durable reference to a lost blob, and a lost blob never hides a synced write.
        o.separate_blobs_at_write = mode == Mode::BlobsAtWrite;
        if o.separate_blobs_at_write {
            // A memtable's blobs fill several files of the write buffer's size (4 KiB),
            // closed unsynced: a crash between one's close and the flush loses none.
            o.blob_file_size = 16 << 10;
        }
        // Compactions out of L0 and the manual one split into two ranges written side by
        // side: a crash while both write leaves neither's files in the tree.
        o.max_subcompactions = 2;
    }
    shaledb_testkit::small_tree(&mut o);
    // Every few edits start a new MANIFEST (and switch CURRENT).
    o.max_manifest_file_size = 300;
    o.merge_operator = Some(model::merge_operator());
    o
}

fn cfg() -> GenConfig {
    GenConfig {
        key_space: 40,
        sync_ratio: 0.25,
        value_len: (10, 60),
        merge_ratio: 0.2,
        range_delete_ratio: 0.1,
        ..Default::default()
    }
}

/// The scripted sequence. Stops at the first error (the machine halted). Returns the log of
/// attempted writes.
fn script(fs: &FaultFs, mode: Mode) -> OpLog {
    let mut log = OpLog::default();
    let Ok(db) = Db::open(Path::new(DIR), options(fs, mode)) else {
        return log;
    };
    let mut writes = LoggedWrites::new(cfg(), 7);
    let steps: [&dyn Fn(&Db) -> bool; 4] = [
        &|db| db.flush().is_ok(),
        &|db| db.compact_range(None, None).is_ok(),
        &|db| db.wait_for_compactions().is_ok(),
        &|db| db.flush().is_ok(),
    ];
    for step in steps {
        // Enough writes to fill a memtable or two (automatic WAL rotation and flush).
        if !writes.run(&db, 40, &mut log) || !step(&db) {
            return log;
        }
    }
    if !writes.run(&db, 10, &mut log) {
        return log;
    }
    let _ = db.close();
    log
}

/// Reopens on the un-faulted filesystem, checks the state against `log` and that a second
/// power loss right after the reopen changes nothing. Returns the state.
fn reopen_and_check(mem: &MemFileSystem, log: &OpLog, what: &str, mode: Mode) -> Model {
    let probe = model::all_keys(&cfg());
    let reopen = Reopen {
        dir: Path::new(DIR),
        options: &|fs| options(fs, mode),
        probe: &probe,
    };
    reopen.check_twice(mem, log, Durability::SyncedOnly, what)
}

/// Tables with index and filter partitions, and values in blob files.
#[test]
fn crash_after_every_mutating_operation_recovers() {
    crash_points(Mode::Buffered);
}

/// The same with every table read and written with direct IO, and dictionaries below L0.
#[test]
fn crash_after_every_mutating_operation_recovers_with_direct_io() {
    crash_points(Mode::Direct);
}

/// The buffered run with values written to blob files as they are written: the WAL holds
/// references to them.
#[test]
fn crash_after_every_mutating_operation_recovers_with_blobs_written_at_write() {
    crash_points(Mode::BlobsAtWrite);
}

fn crash_points(mode: Mode) {
    with_timeout("crash points", Duration::from_secs(1200), move || {
        // Count the mutating operations of an undisturbed run.
        let mem = MemFileSystem::new();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let log = script(&fault, mode);
        let total = fault.mutations();
        assert!(
            log.ops.iter().all(|(_, o)| *o == Outcome::Acked),
            "undisturbed run failed"
        );
        assert!(
            mem.file_names()
                .iter()
                .any(|p| p.extension().is_some_and(|e| e == "sst")),
            "script made no tables"
        );
        // Every table is written as format 4 (partitions in the buffered run, dictionaries
        // below L0 in the direct one).
        let formats = table_formats(&mem);
        let want: &[u32] = &[4];
        assert_eq!(formats, want, "table formats of the undisturbed run");
        // The buffered run keeps most values in blob files.
        let blobs = shaledb_testkit::blob_file_count(&mem);
        assert_eq!(
            blobs > 0,
            mode != Mode::Direct,
            "{blobs} blob files in the undisturbed run"
        );
        drop(fault);
        reopen_and_check(&mem, &log, "undisturbed run", mode);

        let mut recovery_points = 0u64;
        // A little past the end: background timing can shift the count a bit.
        for k in 1..=total + 20 {
            let mem = MemFileSystem::new();
            let fault = FaultFs::new(Arc::new(mem.clone()));
            fault.halt_after_mutations(k);
            let log = script(&fault, mode);
            power_loss_at(&fault, &mem, k);
            let what = format!("crash after mutation {k} of {total}");
            reopen_and_check(&mem, &log, &what, mode);

            // Crash the first recovery at every point too (for every 7th k, to stay fast).
            if k.is_multiple_of(7) {
                let mem = MemFileSystem::new();
                let fault = FaultFs::new(Arc::new(mem.clone()));
                fault.halt_after_mutations(k);
                let log = script(&fault, mode);
                power_loss_at(&fault, &mem, k);
                for j in 1.. {
                    let trial = clone_fs(&mem);
                    let f = FaultFs::new(Arc::new(trial.clone()));
                    f.halt_after_mutations(j);
                    let opened = Db::open(Path::new(DIR), options(&f, mode));
                    let finished = !f.is_halted();
                    power_loss_at(&f, &trial, j);
                    drop(opened);
                    recovery_points += 1;
                    let what = format!("{what}, then crash after mutation {j} of recovery");
                    reopen_and_check(&trial, &log, &what, mode);
                    if finished {
                        break;
                    }
                }
            }
        }
        eprintln!(
            "crash points ({mode:?}): {total} mutating operations in the script, {} crash points, \
             {recovery_points} crash points inside recovery",
            total + 20
        );
    });
}

/// A durable copy of every file of `fs` (already crashed, so everything present is durable).
fn clone_fs(fs: &MemFileSystem) -> MemFileSystem {
    let copy = MemFileSystem::new();
    for p in fs.file_names() {
        if let Some(bytes) = fs.read_file_bytes(&p) {
            copy.write_file_bytes(&p, &bytes);
        }
    }
    copy
}
