//! Simulated power loss: random workloads on a `MemFileSystem` (behind a `FaultFs` so the
//! machine can be stopped atomically), with a tiny write buffer so WAL rotation, flushes,
//! compactions and MANIFEST rolls happen all the time; then a power loss at a random point
//! (all unsynced data lost, or a random prefix of each file's unsynced tail kept), reopen and
//! check:
//! - every write acknowledged with `sync = true` is there;
//! - the state equals the model after exactly one prefix of the acknowledged sequence;
//! - the recovered state is itself durable (a second power loss right after reopen changes
//!   nothing).
//!
//! 500 cycles by default; `SHALEDB_POWER_LOSS_CYCLES=N` for long runs, `SHALEDB_SEED=S` to
//! start from another seed (a failure prints the seed that reproduces it).
#![allow(clippy::field_reassign_with_default)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::fs::{FileSystem, MemFileSystem};
use shaledb::{Db, Options};
use shaledb_testkit::model::{
    self, gen_op, read_all, Durability, GenConfig, Model, OpLog, Outcome,
};
use shaledb_testkit::table_layout::{self, format_version};
use shaledb_testkit::{with_timeout, FaultFs, IntraL0Count, OpKind, ReadTriggeredCount};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DIR: &str = "/db";

/// Listeners counting the kinds of compaction a run must reach.
#[derive(Default)]
struct Counts {
    intra_l0: Arc<IntraL0Count>,
    read_triggered: Arc<ReadTriggeredCount>,
}

fn options(fs: &FaultFs, rng: &mut StdRng, counts: &Counts) -> Options {
    let mut o = Options::default();
    o.fs = fs.as_dyn();
    o.listeners.push(counts.intra_l0.clone());
    o.listeners.push(counts.read_triggered.clone());
    o.write_buffer_size = rng.gen_range(4 << 10..16 << 10);
    o.max_write_buffer_number = rng.gen_range(2..4);
    o.block_size = 256;
    o.level0_file_num_compaction_trigger = 2;
    o.level0_slowdown_writes_trigger = 8;
    o.level0_stop_writes_trigger = 12;
    o.max_bytes_for_level_base = 16 << 10;
    o.target_file_size_base = 4 << 10;
    o.max_manifest_file_size = rng.gen_range(256..4096);
    o.max_background_jobs = 2;
    // Flush, relief and lowered compaction threads for some opens.
    if rng.gen_bool(0.5) {
        o.background_cpu_priority = shaledb::CpuPriority::Low;
    }
    // Compactions out of L0 split into up to three ranges for some opens.
    o.max_subcompactions = rng.gen_range(1..=3);
    o.merge_operator = Some(model::merge_operator());
    // Each open picks anew, so a database written one way is also recovered the other way.
    o.use_direct_reads = rng.gen_bool(0.5);
    o.use_direct_io_for_flush_and_compaction = rng.gen_bool(0.5);
    o.level_compaction_dynamic_level_bytes = rng.gen_bool(0.5);
    if rng.gen_bool(0.5) {
        o.prepopulate_block_cache = shaledb::PrepopulateBlockCache::FlushOnly;
    }
    o.cache_index_and_filter_blocks = rng.gen_bool(0.5);
    if rng.gen_bool(0.5) {
        // Zstd with dictionaries below L0 for some opens.
        table_layout::write_dictionary_tables(&mut o);
    }
    if rng.gen_bool(0.5) {
        // A two-level index for some opens, with filter partitions for most.
        let filters = rng.gen_bool(0.75);
        table_layout::write_partitioned_tables(&mut o, filters, rng.gen_range(64..512));
    }
    if rng.gen_bool(0.5) {
        // Blob files for some opens (values written before stay in the tables, and the
        // reverse): a reference must never be durable before its blob.
        let codec = [
            shaledb::CompressionType::None,
            shaledb::CompressionType::Zstd,
        ][rng.gen_range(0..2)];
        shaledb_testkit::store_values_in_blob_files(&mut o, rng.gen_range(0..64), codec);
        // Half of those write the blobs with the values (the WAL holds references).
        o.separate_blobs_at_write = rng.gen_bool(0.5);
        if o.separate_blobs_at_write && rng.gen_bool(0.5) {
            // Files larger than the write buffer: a memtable's blobs roll over into several
            // files closed unsynced, synced with the WAL or by the flush.
            o.blob_file_size = 64 << 10;
        }
        if rng.gen_bool(0.5) {
            // The L0 tables of references merge within L0 before they go down.
            shaledb_testkit::merge_level0_within_level0(&mut o, 64 << 10);
        }
    }
    if rng.gen_bool(0.3) {
        // Tables without filters: the reads after each reopen trigger seek compactions,
        // which run beside the next writes and the power loss.
        o.bloom_bits_per_key = 0;
    }
    if rng.gen_bool(0.3) {
        // Format-5 tables: gets search data blocks through their hash indexes.
        o.data_block_index_type = shaledb::DataBlockIndexType::BinaryAndHash;
    }
    o
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Stops the machine, then loses power.
fn power_loss(fault: &FaultFs, mem: &MemFileSystem, rng: &mut StdRng) {
    fault.halt();
    if rng.gen_bool(0.5) {
        mem.crash();
    } else {
        // Half the time the file system's own journal commit made the directory durable
        // first, with entries the engine had not synced yet (a new WAL, whose predecessor
        // is synced only later: db/closed_wals.rs).
        if rng.gen_bool(0.5) {
            mem.sync_dir(Path::new(DIR)).expect("sync the directory");
        }
        mem.crash_keep_unsynced_prefix(rng.gen());
    }
}

#[derive(Default, Debug)]
struct Stats {
    crashes: u64,
    ops: u64,
    synced_ops: u64,
    /// `Db::sync_wal` calls, each making every op before it durable.
    sync_wal_calls: u64,
    files_created: u64,
    /// Tables found after power losses (format 4 or 5): plain, with a dictionary, with a
    /// two-level index.
    tables_by_kind: [u64; 3],
    /// Of those, format 5: data blocks with hash indexes.
    hash_index_tables: u64,
    /// Blob files found after power losses.
    blob_files: u64,
    /// Compactions that merged L0 tables within L0 before a power loss.
    intra_l0_compactions: u64,
    read_triggered_compactions: u64,
}

fn reopen(mem: &MemFileSystem, rng: &mut StdRng, counts: &Counts) -> Result<(FaultFs, Db), String> {
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(Path::new(DIR), options(&fault, rng, counts))
        .map_err(|e| format!("reopen after power loss failed: {e}"))?;
    Ok((fault, db))
}

fn cycle(seed: u64, stats: &mut Stats) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let cfg = GenConfig {
        key_space: rng.gen_range(20..300),
        sync_ratio: [0.0, 0.05, 0.3, 1.0][rng.gen_range(0..4)],
        merge_ratio: [0.0, 0.2][rng.gen_range(0..2)],
        range_delete_ratio: [0.0, 0.1][rng.gen_range(0..2)],
        ..Default::default()
    };
    let probe = model::all_keys(&cfg);
    let mem = MemFileSystem::new();
    let mut base = Model::new();
    let mut op_id = 0u64;
    let counts = Counts::default();
    for round in 0..3 {
        let (fault, db) = reopen(&mem, &mut rng, &counts)?;
        let got = read_all(&db, &probe).map_err(|e| format!("round {round}: {e}"))?;
        if got != base {
            return Err(format!(
                "round {round}: state after reopen differs from the state checked before: {}",
                model::first_diff(&base, &got)
            ));
        }
        let mut log = OpLog::default();
        // Ops before the last `Db::sync_wal`, which must survive like synced ones.
        let mut synced_by_call = 0;
        let n = rng.gen_range(0..400);
        for _ in 0..n {
            let op = gen_op(&mut rng, &cfg, op_id);
            op_id += 1;
            match op.run(&db) {
                Ok(()) => {
                    stats.ops += 1;
                    stats.synced_ops += u64::from(op.sync);
                    log.push(op, Outcome::Acked);
                }
                Err(e) => return Err(format!("round {round}: write failed: {e}")),
            }
            if rng.gen_bool(0.01) {
                db.flush().map_err(|e| format!("flush failed: {e}"))?;
            }
            if rng.gen_bool(0.02) {
                // Every op acknowledged so far must survive, as if it had been synced.
                db.sync_wal().map_err(|e| format!("sync_wal failed: {e}"))?;
                synced_by_call = log.ops.len();
                stats.sync_wal_calls += 1;
            }
        }
        if rng.gen_bool(0.2) {
            // Let background work get going so the crash lands in the middle of it.
            std::thread::sleep(Duration::from_micros(rng.gen_range(0..2000)));
        }
        stats.files_created += fault.count(OpKind::Create);
        power_loss(&fault, &mem, &mut rng);
        drop(db);
        stats.crashes += 1;
        count_table_formats(&mem, stats);
        stats.blob_files += shaledb_testkit::blob_file_count(&mem) as u64;

        let (fault, db) =
            reopen(&mem, &mut rng, &counts).map_err(|e| format!("round {round}: {e}"))?;
        let state = read_all(&db, &probe).map_err(|e| format!("round {round}: {e}"))?;
        let required = log
            .required_prefix(Durability::SyncedOnly)
            .max(synced_by_call);
        log.check_at_least(&base, &state, required)
            .map_err(|e| format!("round {round}: {e}"))?;
        // Whatever recovery brought back must now be durable.
        power_loss(&fault, &mem, &mut rng);
        drop(db);
        stats.crashes += 1;
        base = state;
    }
    stats.intra_l0_compactions += counts.intra_l0.count();
    stats.read_triggered_compactions += counts.read_triggered.count();
    Ok(())
}

/// Adds the tables in `mem` to the count by format version.
fn count_table_formats(mem: &MemFileSystem, stats: &mut Stats) {
    for p in mem.file_names() {
        if p.extension().is_some_and(|e| e == "sst") {
            // A table being written when the power went is not a table yet.
            let Some(bytes) = mem.read_file_bytes(&p) else {
                continue;
            };
            match format_version(&bytes) {
                Some(4) => {}
                Some(5) => stats.hash_index_tables += 1,
                _ => continue,
            }
            // The metaindex and properties blocks are stored raw: their names can be found.
            let names = |name: &[u8]| bytes.windows(name.len()).any(|w| w == name);
            let kind = match (
                names(b"rocksdb.compression_dict"),
                names(b"shaledb.index.two_level"),
            ) {
                (_, true) => 2,
                (true, false) => 1,
                (false, false) => 0,
            };
            stats.tables_by_kind[kind] += 1;
        }
    }
}

#[test]
fn power_loss_at_random_points_keeps_synced_writes_and_a_prefix() {
    let cycles = env_u64("SHALEDB_POWER_LOSS_CYCLES", 500);
    let first = env_u64("SHALEDB_SEED", 0xD0_0000);
    let start = Instant::now();
    let stats = with_timeout("power loss", Duration::from_secs(3600 * 24), move || {
        let mut stats = Stats::default();
        for seed in first..first + cycles {
            if let Err(e) = cycle(seed, &mut stats) {
                panic!("cycle with SHALEDB_SEED={seed} failed: {e}");
            }
        }
        stats
    });
    eprintln!(
        "power loss: {cycles} cycles, {} power losses, {} acknowledged ops ({} synced), \
         {} sync_wal calls, {} files created, tables after power losses plain/dictionary/two-level: {:?} \
         ({} with data-block hash indexes), blob files {}, intra-L0 compactions {}, \
         read-triggered compactions {}, in {:?}",
        stats.crashes,
        stats.ops,
        stats.synced_ops,
        stats.sync_wal_calls,
        stats.files_created,
        stats.tables_by_kind,
        stats.hash_index_tables,
        stats.blob_files,
        stats.intra_l0_compactions,
        stats.read_triggered_compactions,
        start.elapsed()
    );
    assert!(stats.ops > 0);
    // Tables of every format were there to recover: plain, with dictionaries, partitioned.
    if cycles >= 50 {
        assert!(stats.tables_by_kind.iter().all(|&n| n > 0), "{stats:?}");
        assert!(stats.hash_index_tables > 0, "no format-5 table: {stats:?}");
        assert!(
            stats.blob_files > 0,
            "no blob file survived a power loss: {stats:?}"
        );
        assert!(
            stats.intra_l0_compactions > 0,
            "no power loss came after an intra-L0 compaction: {stats:?}"
        );
        assert!(
            stats.read_triggered_compactions > 0,
            "no power loss came after a read-triggered compaction: {stats:?}"
        );
    }
    // WAL rotations, flushes and compactions must have happened for the test to mean much.
    assert!(stats.files_created > 10 * cycles, "{stats:?}");
}
