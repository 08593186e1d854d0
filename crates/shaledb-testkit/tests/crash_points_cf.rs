//! Crash at every point with column families: a scripted sequence (open_cf creating two
//! families, batches spanning three families, per-family flushes and compactions, WAL
//! rotation, MANIFEST rolls, close) is counted, then stopped after every mutating filesystem
//! operation, power is lost, and the database must reopen with every synced batch and exactly
//! one prefix of the attempted batches, whole (a batch across families is atomic). Family b
//! writes its larger values to blob files as they are written. Recovery itself is crashed at
//! every point for a sample of the first crashes.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::fs::MemFileSystem;
use shaledb::{CfOptions, Db, Options, ReadOptions, WriteBatch, WriteOptions};
use shaledb_testkit::{power_loss_at, with_timeout, FaultFs};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const DIR: &str = "/db";
const FAMILIES: [&str; 3] = ["default", "a", "b"];

/// (family index, key) -> value.
type State = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

/// One batch: (family index, key, value or delete).
type Batch = Vec<(usize, Vec<u8>, Option<Vec<u8>>)>;

fn options(fs: &FaultFs) -> Options {
    let mut o = Options::default()
        .with_create_missing_column_families(true)
        .with_write_buffer_size(4096)
        .with_block_size(256)
        .with_max_background_jobs(1)
        .with_level0_file_num_compaction_trigger(3)
        .with_max_bytes_for_level_base(8 << 10)
        .with_target_file_size_base(2 << 10)
        .with_max_manifest_file_size(400);
    o.fs = fs.as_dyn();
    o
}

fn families() -> Vec<(&'static str, CfOptions)> {
    let small = CfOptions {
        write_buffer_size: 4096,
        block_size: 256,
        level0_file_num_compaction_trigger: 3,
        max_bytes_for_level_base: 8 << 10,
        target_file_size_base: 2 << 10,
        ..Default::default()
    };
    // Family b keeps values of 40 bytes or more in small blob files written with the values
    // (the WAL holds references), collected as they empty: its flushes and compactions
    // delete blob files while WALs the other families keep still refer to them.
    let blobs = CfOptions {
        enable_blob_files: true,
        separate_blobs_at_write: true,
        min_blob_size: 40,
        blob_file_size: 4096,
        enable_blob_garbage_collection: true,
        blob_garbage_collection_age_cutoff: 0.5,
        ..small.clone()
    };
    vec![("a", small), ("b", blobs)]
}

fn open(fs: &FaultFs) -> shaledb::Result<Db> {
    Db::open_cf(Path::new(DIR), options(fs), families())
}

fn gen_batch(rng: &mut StdRng, id: u64) -> Batch {
    (0..rng.gen_range(1..4))
        .map(|i| {
            let fam = rng.gen_range(0..FAMILIES.len());
            let key = format!("k{:02}", rng.gen_range(0..30)).into_bytes();
            let value = rng
                .gen_bool(0.8)
                .then(|| format!("v{id}.{i}:{}", "x".repeat(rng.gen_range(10..60))).into_bytes());
            (fam, key, value)
        })
        .collect()
}

fn apply(state: &mut State, batch: &Batch) {
    for (fam, key, value) in batch {
        match value {
            Some(v) => state.insert((*fam, key.clone()), v.clone()),
            None => state.remove(&(*fam, key.clone())),
        };
    }
}

fn write(db: &Db, batch: &Batch, sync: bool) -> shaledb::Result<()> {
    let mut b = WriteBatch::new();
    for (fam, key, value) in batch {
        let cf = db
            .cf(FAMILIES[*fam])
            .ok_or_else(|| shaledb::Error::InvalidArgument("family missing".into()))?;
        match value {
            Some(v) => b.put_cf(&cf, key, v),
            None => b.delete_cf(&cf, key),
        }
    }
    db.write(
        &WriteOptions {
            sync,
            ..Default::default()
        },
        &b,
    )
}

/// Attempted batches in order, each with whether it was synced and acknowledged.
#[derive(Default)]
struct Log {
    batches: Vec<(Batch, bool)>,
}

/// The scripted sequence; stops at the first error (the machine halted).
fn script(fs: &FaultFs) -> Log {
    let mut log = Log::default();
    let Ok(db) = open(fs) else {
        return log;
    };
    let mut rng = StdRng::seed_from_u64(11);
    let mut writes = |db: &Db, n: usize, log: &mut Log| -> bool {
        for _ in 0..n {
            let id = log.batches.len() as u64;
            let batch = gen_batch(&mut rng, id);
            let sync = rng.gen_bool(0.25);
            let ok = write(db, &batch, sync).is_ok();
            log.batches.push((batch, sync && ok));
            if !ok {
                return false;
            }
        }
        true
    };
    let steps: [&dyn Fn(&Db) -> bool; 4] = [
        &|db| db.cf("a").is_some_and(|a| db.flush_cf(&a).is_ok()),
        &|db| {
            db.cf("b")
                .is_some_and(|b| db.compact_range_cf(&b, None, None).is_ok())
        },
        &|db| db.wait_for_compactions().is_ok(),
        &|db| db.flush().is_ok(),
    ];
    for step in steps {
        if !writes(&db, 30, &mut log) || !step(&db) {
            return log;
        }
    }
    if writes(&db, 10, &mut log) {
        let _ = db.close();
    }
    log
}

fn read_state(db: &Db) -> Result<State, String> {
    let mut state = State::new();
    for (i, name) in FAMILIES.iter().enumerate() {
        let cf = db.cf(name).ok_or(format!("family {name} missing"))?;
        let mut it = db
            .iter_cf(&cf, &ReadOptions::default())
            .map_err(|e| e.to_string())?;
        it.seek_to_first();
        while it.valid() {
            state.insert((i, it.key().to_vec()), it.value().to_vec());
            it.next();
        }
        it.status().map_err(|e| format!("scan of {name}: {e}"))?;
    }
    Ok(state)
}

/// The state must be that of some prefix of the attempted batches that includes every synced,
/// acknowledged one. Returns the prefix length.
fn check(log: &Log, state: &State) -> Result<usize, String> {
    let required = log
        .batches
        .iter()
        .rposition(|(_, synced)| *synced)
        .map_or(0, |i| i + 1);
    let mut model = State::new();
    for n in 0..=log.batches.len() {
        if n >= required && &model == state {
            return Ok(n);
        }
        if let Some((b, _)) = log.batches.get(n) {
            apply(&mut model, b);
        }
    }
    Err(format!(
        "the recovered state ({} keys) is no prefix of the {} attempted batches at or past \
         the {required} that were synced",
        state.len(),
        log.batches.len()
    ))
}

/// Reopens, checks the state, loses power again and checks the state did not change.
fn reopen_and_check(mem: &MemFileSystem, log: &Log, what: &str) {
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = open(&fault).unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let state = read_state(&db).unwrap_or_else(|e| panic!("{what}: {e}"));
    if let Err(e) = check(log, &state) {
        panic!("{what}: {e}");
    }
    power_loss_at(&fault, mem, 0);
    drop(db);
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = open(&fault).unwrap_or_else(|e| panic!("{what}: second reopen failed: {e}"));
    let again = read_state(&db).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(again == state, "{what}: recovered state was not durable");
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

#[test]
fn crash_after_every_mutating_operation_recovers_every_family() {
    with_timeout(
        "crash points with families",
        Duration::from_secs(1200),
        || {
            let mem = MemFileSystem::new();
            let fault = FaultFs::new(Arc::new(mem.clone()));
            let log = script(&fault);
            let total = fault.mutations();
            assert_eq!(log.batches.len(), 130, "undisturbed run stopped early");
            drop(fault);
            reopen_and_check(&mem, &log, "undisturbed run");
            let mut recovery_points = 0u64;
            for k in 1..=total + 20 {
                let mem = MemFileSystem::new();
                let fault = FaultFs::new(Arc::new(mem.clone()));
                fault.halt_after_mutations(k);
                let log = script(&fault);
                power_loss_at(&fault, &mem, k);
                let what = format!("crash after mutation {k} of {total}");
                reopen_and_check(&mem, &log, &what);
                if !k.is_multiple_of(11) {
                    continue;
                }
                // Crash the recovery of the same crashed state at every point too.
                let mem = MemFileSystem::new();
                let fault = FaultFs::new(Arc::new(mem.clone()));
                fault.halt_after_mutations(k);
                let log = script(&fault);
                power_loss_at(&fault, &mem, k);
                for j in 1.. {
                    let trial = clone_fs(&mem);
                    let f = FaultFs::new(Arc::new(trial.clone()));
                    f.halt_after_mutations(j);
                    let opened = open(&f);
                    let finished = !f.is_halted();
                    power_loss_at(&f, &trial, j);
                    drop(opened);
                    recovery_points += 1;
                    let what = format!("{what}, then crash after mutation {j} of recovery");
                    reopen_and_check(&trial, &log, &what);
                    if finished {
                        break;
                    }
                }
            }
            eprintln!(
                "crash points with families: {total} mutating operations, {recovery_points} \
             crash points inside recovery"
            );
        },
    );
}

/// Writes the same keys and values to families "a" and "b" without the WAL, and flushes
/// after every round: with `atomic_flush` one flush covers both families; without it each
/// family is flushed on its own (the control).
fn no_wal_script(fs: &FaultFs, atomic: bool) {
    let mut o = options(fs).with_atomic_flush(atomic);
    o.write_buffer_size = 1 << 20; // only the explicit flushes write tables
    let Ok(db) = Db::open_cf(Path::new(DIR), o, families()) else {
        return;
    };
    let (Some(a), Some(b)) = (db.cf("a"), db.cf("b")) else {
        return;
    };
    let no_wal = WriteOptions {
        disable_wal: true,
        ..Default::default()
    };
    for round in 0..5u32 {
        for i in 0..20u32 {
            let key = format!("k{:02}", (i * 7 + round) % 30);
            let value = format!("round{round}.{i}");
            let mut batch = WriteBatch::new();
            batch.put_cf(&a, &key, &value);
            batch.put_cf(&b, &key, &value);
            if db.write(&no_wal, &batch).is_err() {
                return;
            }
        }
        let flushed = if atomic {
            db.flush_cf(&a).is_ok()
        } else {
            db.flush_cf(&a).is_ok() && db.flush_cf(&b).is_ok()
        };
        if !flushed {
            return;
        }
    }
    let _ = db.close();
}

/// Whether families "a" and "b" hold the same data after recovering `mem`.
fn families_agree(mem: &MemFileSystem, k: u64) -> bool {
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = open(&fault).unwrap_or_else(|e| panic!("crash after {k}: reopen failed: {e}"));
    let state = read_state(&db).unwrap_or_else(|e| panic!("crash after {k}: {e}"));
    let family = |i: usize| -> BTreeMap<Vec<u8>, Vec<u8>> {
        state
            .iter()
            .filter(|((f, _), _)| *f == i)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect()
    };
    family(1) == family(2)
}

/// Crashes the no-WAL script after every mutating operation; returns how many crash points
/// left the two families disagreeing.
fn disagreements(atomic: bool) -> usize {
    let mem = MemFileSystem::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    no_wal_script(&fault, atomic);
    let total = fault.mutations();
    assert!(families_agree(&mem, 0), "undisturbed run");
    let mut bad = 0;
    for k in 1..=total + 10 {
        let mem = MemFileSystem::new();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        fault.halt_after_mutations(k);
        no_wal_script(&fault, atomic);
        power_loss_at(&fault, &mem, k);
        if !families_agree(&mem, k) {
            bad += 1;
        }
    }
    bad
}

#[test]
fn atomic_flush_keeps_families_consistent_without_the_wal() {
    with_timeout(
        "atomic flush crash points",
        Duration::from_secs(600),
        || {
            assert_eq!(
                disagreements(true),
                0,
                "atomic flush left families disagreeing"
            );
            // The control: flushing the families one by one leaves crash points where one
            // family's flush is durable and the other's is not, so the check above can fail.
            assert!(
                disagreements(false) > 0,
                "the control found no disagreement"
            );
        },
    );
}
