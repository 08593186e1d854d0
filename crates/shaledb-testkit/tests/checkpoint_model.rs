//! Checkpoints and backups under a concurrent writer equal the database at one sequence
//! number: one writer thread runs random puts, deletes, merges and range deletions (single or
//! in batches across three families, one with blob files) while tiny memtables keep flushes,
//! WAL switches and compactions going; meanwhile checkpoints (some flushing first) and
//! backups are taken. The writer logs every acknowledged op in order (one writer: log order
//! is sequence order). Each checkpoint, and each restored backup, must equal the model after
//! one prefix of the log that holds every op acknowledged before the call began.

use rand::rngs::StdRng;
use rand::SeedableRng;
use shaledb::fs::MemFileSystem;
use shaledb::{BackupEngine, CfOptions, CheckpointOptions, ColumnFamily, Db, Options};
use shaledb_testkit::model::{
    self, gen_op, read_all_cf, spread_over_families, GenConfig, Model, Op, OpLog, Outcome,
};
use shaledb_testkit::with_timeout;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const FAMILIES: [&str; 3] = ["default", "blobs", "third"];
/// Ops the writer runs at least (it goes on until every copy is taken, then `AFTER` more).
const OPS: usize = 3000;
/// Ops after the last copy returned: none of them may be in any copy.
const AFTER: usize = 50;
/// Copies taken while the writer runs: checkpoints and backups in turn.
const COPIES: usize = 10;

fn options(fs: &MemFileSystem) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        create_missing_column_families: true,
        write_buffer_size: 8 << 10,
        max_write_buffer_number: 3,
        block_size: 512,
        target_file_size_base: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        level0_file_num_compaction_trigger: 2,
        max_manifest_file_size: 4096,
        merge_operator: Some(model::merge_operator()),
        ..Default::default()
    }
}

fn families(o: &Options) -> Vec<(&'static str, CfOptions)> {
    let blobs = CfOptions {
        enable_blob_files: true,
        min_blob_size: 40,
        blob_file_size: 8 << 10,
        ..o.cf_options()
    };
    vec![
        (FAMILIES[0], o.cf_options()),
        (FAMILIES[1], blobs),
        (FAMILIES[2], o.cf_options()),
    ]
}

fn handles(db: &Db) -> Vec<ColumnFamily> {
    FAMILIES.iter().map(|n| db.cf(n).expect("family")).collect()
}

fn cfg() -> GenConfig {
    GenConfig {
        key_space: 150,
        sync_ratio: 0.0,
        value_len: (10, 100),
        merge_ratio: 0.2,
        range_delete_ratio: 0.1,
        ..Default::default()
    }
}

/// A copy taken meanwhile: where it is, and how many ops were acknowledged before the call.
enum Copy {
    Checkpoint(String, usize),
    Backup(u64, usize),
}

/// Opens the database in `dir` and checks it against the log; returns the prefix it holds.
fn check(fs: &MemFileSystem, dir: &str, log: &OpLog, required: usize, what: &str) -> usize {
    let mut o = options(fs);
    o.create_if_missing = false;
    let db =
        Db::open_cf(dir, o.clone(), families(&o)).unwrap_or_else(|e| panic!("{what}: open: {e}"));
    let state = read_all_cf(&db, &handles(&db), &model::all_keys(&cfg()))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    log.check_at_least(&Model::new(), &state, required)
        .unwrap_or_else(|e| panic!("{what} ({required} ops acknowledged before it): {e}"))
}

/// What the writer thread shares with the test: the ops it acknowledged, in order, their
/// count, and whether every copy has been taken.
#[derive(Default)]
struct Shared {
    log: Mutex<Vec<Op>>,
    acked: AtomicUsize,
    copied: AtomicBool,
}

/// Runs at least `OPS` random ops, until every copy is taken and `AFTER` ops more.
fn spawn_writer(db: Arc<Db>, shared: Arc<Shared>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let cfs = handles(&db);
        let mut rng = StdRng::seed_from_u64(5);
        let mut end = None;
        for id in 0.. {
            if id >= OPS
                && shared.copied.load(Ordering::SeqCst)
                && id == *end.get_or_insert(id + AFTER)
            {
                break;
            }
            let mut op = gen_op(&mut rng, &cfg(), id as u64);
            spread_over_families(&mut rng, &mut op, FAMILIES.len());
            op.run_cf(&db, &cfs).expect("write");
            // Logged before the count moves: a copy never requires an unlogged op.
            shared.log.lock().expect("log").push(op);
            shared.acked.fetch_add(1, Ordering::SeqCst);
        }
    })
}

/// Takes the copies, spread over the writer's first `OPS` ops, checkpoints (every other one
/// flushing first) and backups in turn.
fn take_copies(db: &Db, engine: &BackupEngine, shared: &Shared) -> Vec<Copy> {
    let mut copies = Vec::new();
    for i in 0..COPIES {
        while shared.acked.load(Ordering::SeqCst) < (i + 1) * OPS / (COPIES + 2) {
            std::thread::yield_now();
        }
        let required = shared.acked.load(Ordering::SeqCst);
        if i % 2 == 0 {
            let dir = format!("/checkpoint{i}");
            let opts = CheckpointOptions {
                log_size_for_flush: if i % 4 == 0 { u64::MAX } else { 0 },
            };
            db.checkpoint_opt(&dir, &opts).expect("checkpoint");
            copies.push(Copy::Checkpoint(dir, required));
        } else {
            let id = engine.create_backup(db).expect("backup");
            copies.push(Copy::Backup(id, required));
        }
    }
    copies
}

#[test]
fn checkpoints_and_backups_under_a_writer_equal_one_prefix_of_the_writes() {
    with_timeout(
        "checkpoints under a writer",
        Duration::from_secs(600),
        || {
            let fs = MemFileSystem::new();
            let o = options(&fs);
            let db = Arc::new(Db::open_cf("/db", o.clone(), families(&o)).expect("open"));
            let engine = BackupEngine::open_with_fs("/backups", Arc::new(fs.clone()))
                .expect("backup engine");
            let shared = Arc::new(Shared::default());
            let writer = spawn_writer(db.clone(), shared.clone());
            let copies = take_copies(&db, &engine, &shared);
            shared.copied.store(true, Ordering::SeqCst);
            writer.join().expect("writer");
            let ops = std::mem::take(&mut *shared.log.lock().expect("log"));
            let total = ops.len();
            assert!(total >= OPS + AFTER, "{total} ops");
            let log = OpLog {
                ops: ops.into_iter().map(|op| (op, Outcome::Acked)).collect(),
            };
            // The source itself holds every write.
            let state = read_all_cf(&db, &handles(&db), &model::all_keys(&cfg())).expect("read");
            assert_eq!(log.check_at_least(&Model::new(), &state, total), Ok(total));
            drop(db);
            let mut prefixes = Vec::new();
            for c in copies {
                let (dir, what, required) = match c {
                    Copy::Checkpoint(dir, required) => (dir.clone(), dir, required),
                    Copy::Backup(id, required) => {
                        let dir = format!("/restored{id}");
                        engine.restore(id, &dir).expect("restore");
                        (dir, format!("backup {id}"), required)
                    }
                };
                prefixes.push((required, check(&fs, &dir, &log, required, &what)));
            }
            eprintln!("(ops acknowledged before the copy, ops in the copy): {prefixes:?}");
            // No copy holds a write made after the last copy returned.
            assert!(
                prefixes.iter().all(|&(_, p)| p <= total - AFTER),
                "{prefixes:?} of {total}"
            );
        },
    );
}
