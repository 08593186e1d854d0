//! Crash at every point of intra-L0 compactions: the general crash-point suite's trees are too
//! small for L0 tables to be merged within L0 (they must hold less than a multiplier-th of
//! the base level bytes they overlap), so this script first builds a base level of a few
//! hundred keys, every value in a blob file written at write time, then makes small flushes
//! that the picker merges within L0. The machine is stopped after each mutating filesystem
//! operation of that second phase, power is lost, and the database must reopen with every
//! synced write and exactly one prefix of the acknowledged ones, twice. The same phase is
//! swept with an IO error at every operation (EIO, ENOSPC, a corrupted read).
#![allow(clippy::field_reassign_with_default)]

use shaledb::fs::MemFileSystem;
use shaledb::{Db, Options};
use shaledb_testkit::fault::{Fault, OpKind, Target};
use shaledb_testkit::model::{self, Durability, GenConfig, OpLog, Outcome};
use shaledb_testkit::{power_loss_at, with_timeout, FaultFs, IntraL0Count, LoggedWrites, Reopen};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const DIR: &str = "/db";

fn options(fs: &FaultFs) -> Options {
    let mut o = Options::default();
    o.fs = fs.as_dyn();
    shaledb_testkit::small_tree(&mut o);
    // Every value a blob written with its write (the WAL and tables hold references), so
    // every table refers to blob files: the condition for merging L0 within L0.
    shaledb_testkit::store_values_in_blob_files(&mut o, 0, shaledb::CompressionType::None);
    o.separate_blobs_at_write = true;
    o.blob_file_size = 16 << 10;
    // The base level one table holding every key: three small L0 tables overlap all of it.
    shaledb_testkit::merge_level0_within_level0(&mut o, 64 << 10);
    o.merge_operator = Some(model::merge_operator());
    o
}

fn cfg() -> GenConfig {
    GenConfig {
        key_space: 300,
        sync_ratio: 0.25,
        value_len: (10, 40),
        merge_ratio: 0.1,
        range_delete_ratio: 0.0,
        ..Default::default()
    }
}

/// Operations of `target` that `fs` has seen so far.
fn seen(fs: &FaultFs, target: Target) -> u64 {
    let counted = |k: &&OpKind| match target {
        Target::Any => true,
        Target::Mutating => k.is_mutating(),
        Target::Kind(kind) => **k == kind,
    };
    OpKind::ALL
        .iter()
        .filter(counted)
        .map(|&k| fs.count(k))
        .sum()
}

/// Phase one builds the base level (no fault is aimed there); phase two flushes a few
/// writes at a time. Returns the log and what `fs` had seen at the end of phase one
/// (mutating operations, and operations of `target`).
fn script(fs: &FaultFs, intra: Option<Arc<IntraL0Count>>) -> (OpLog, u64) {
    let (log, phase_one, _) = script_counting(fs, intra, Target::Any);
    (log, phase_one)
}

fn script_counting(
    fs: &FaultFs,
    intra: Option<Arc<IntraL0Count>>,
    target: Target,
) -> (OpLog, u64, u64) {
    let mut log = OpLog::default();
    let mut o = options(fs);
    if let Some(intra) = intra {
        o.listeners.push(intra);
    }
    let Ok(db) = Db::open(Path::new(DIR), o) else {
        return (log, 0, 0);
    };
    let mut writes = LoggedWrites::new(cfg(), 11);
    let built = writes.run(&db, 400, &mut log)
        && db.flush().is_ok()
        && db.compact_range(None, None).is_ok()
        && db.wait_for_compactions().is_ok();
    let phase_one = (fs.mutations(), seen(fs, target));
    if !built {
        return (log, phase_one.0, phase_one.1);
    }
    // Small flushes of the same few keys: a table merged with the wrong neighbours (or
    // ordered wrongly in L0) returns an older value of some key.
    writes.narrow_keys(8);
    for _ in 0..6 {
        if !writes.run(&db, 3, &mut log) || db.flush().is_err() {
            return (log, phase_one.0, phase_one.1);
        }
    }
    if db.wait_for_compactions().is_ok() && writes.run(&db, 5, &mut log) {
        let _ = db.close();
    }
    (log, phase_one.0, phase_one.1)
}

/// Reopens, checks the state against `log` (every synced write there), loses power again and
/// checks nothing changed.
fn reopen_and_check(mem: &MemFileSystem, log: &OpLog, what: &str) {
    reopen_and_check_with(mem, log, what, Durability::SyncedOnly);
}

fn reopen_and_check_with(mem: &MemFileSystem, log: &OpLog, what: &str, d: Durability) {
    let probe = model::all_keys(&cfg());
    let reopen = Reopen {
        dir: Path::new(DIR),
        options: &options,
        probe: &probe,
    };
    reopen.check_twice(mem, log, d, what);
}

#[test]
fn crash_at_every_point_of_intra_l0_compactions_recovers() {
    with_timeout("intra-L0 crash points", Duration::from_secs(900), || {
        let mem = MemFileSystem::new();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let intra = Arc::new(IntraL0Count::default());
        let (log, phase_one) = script(&fault, Some(intra.clone()));
        let total = fault.mutations();
        assert!(
            log.ops.iter().all(|(_, o)| *o == Outcome::Acked),
            "undisturbed run failed"
        );
        let merged = intra.count();
        assert!(
            merged > 0,
            "the undisturbed run merged no L0 tables within L0"
        );
        drop(fault);
        reopen_and_check(&mem, &log, "undisturbed run");

        // A little past the end: background timing can shift the count a bit.
        for k in phase_one + 1..=total + 20 {
            let mem = MemFileSystem::new();
            let fault = FaultFs::new(Arc::new(mem.clone()));
            fault.halt_after_mutations(k);
            let (log, _) = script(&fault, None);
            power_loss_at(&fault, &mem, k);
            reopen_and_check(&mem, &log, &format!("crash after mutation {k} of {total}"));
        }
        eprintln!(
            "intra-L0 crash points: {merged} intra-L0 compactions, mutations {phase_one}..{total} \
             crashed"
        );
    });
}

/// An IO error at every operation of the second phase: the error reaches the writer (or
/// poisons the database), and a reopen holds every acknowledged write (the process kept
/// running), then after a power loss every synced one.
#[test]
fn an_io_error_at_every_point_of_intra_l0_compactions_loses_nothing() {
    let cases = [
        ("EIO on any operation", Target::Any, Fault::Eio),
        (
            "ENOSPC on a mutating operation",
            Target::Mutating,
            Fault::Enospc,
        ),
        (
            "a corrupted read",
            Target::Kind(OpKind::Read),
            Fault::CorruptRead,
        ),
    ];
    for (name, target, fault) in cases {
        with_timeout(name, Duration::from_secs(600), move || {
            let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
            let (_, _, phase_one) = script_counting(&fs, None, target);
            let mut injected = 0;
            for n in phase_one + 1.. {
                assert!(n < phase_one + 20_000, "{name}: the script never completed");
                let mem = MemFileSystem::new();
                let fs = FaultFs::new(Arc::new(mem.clone()));
                fs.fail_nth(target, n, fault);
                let (log, _, _) = script_counting(&fs, None, target);
                let hit = !fs.injected().is_empty();
                injected += u64::from(hit);
                drop(fs);
                let what = format!("{name} at operation {n}");
                reopen_and_check_with(&mem, &log, &what, Durability::AllAcked);
                mem.crash();
                reopen_and_check_with(&mem, &log, &what, Durability::SyncedOnly);
                if !hit {
                    break;
                }
            }
            assert!(injected > 0, "{name}: no fault landed in the second phase");
            eprintln!("intra-L0 io errors: {name}: {injected} faults injected");
        });
    }
}
