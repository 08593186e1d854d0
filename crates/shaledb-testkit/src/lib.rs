//! Durability test machinery for ShaleDB.
//!
//! - [`fault`]: [`FaultFs`], a filesystem wrapper that counts operations by kind, fails the
//!   N-th one (EIO, ENOSPC, short write, corrupted read) and can "halt the machine" so the
//!   wrapped [`shaledb::fs::MemFileSystem`] can then be crashed at an exact point.
//! - [`model`]: the `BTreeMap` reference model, the log of attempted and acknowledged
//!   operations with the checker for "the recovered state is one allowed prefix", and the
//!   workload generator.
//! - [`table_layout`]: which byte ranges of a table file hold which blocks (data, index or
//!   index partitions, filter or filter partitions, metadata), for tests that damage tables.
//!
//! The tests using them live in `tests/` (see docs/testing.md).

pub mod fault;
pub mod fuzz;
pub mod model;
pub mod table_layout;

pub use fault::{Fault, FaultFs, Injected, OpKind, Rule, Target};
pub use model::{Durability, Entry, GenConfig, Model, Op, OpLog, Outcome};

use std::time::Duration;

/// The runs of the crash and IO-error suites: how tables and blob files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageMode {
    /// Partitioned tables, values in blob files written by flushes and compactions.
    Buffered,
    /// Tables read and written with direct IO, dictionaries below L0.
    Direct,
    /// Values in blob files written with the values (`separate_blobs_at_write`).
    BlobsAtWrite,
}

/// Makes `o` store values of at least `min_blob_size` bytes in blob files of about 4 KiB
/// (many per flush and compaction), compressed with `codec`.
pub fn store_values_in_blob_files(
    o: &mut shaledb::Options,
    min_blob_size: u64,
    codec: shaledb::CompressionType,
) {
    o.enable_blob_files = true;
    o.min_blob_size = min_blob_size;
    o.blob_file_size = 4096;
    o.blob_compression = codec;
}

/// Makes L0 tables merge within L0 (intra-L0) reachable: every value a blob (blob files must
/// be enabled, `store_values_in_blob_files`), so tables hold references; a base level of `base`
/// bytes in one table, and each level twice the one above, so a few small flushes of a few keys
/// overlap all of the base level and weigh less than half of it.
pub fn merge_level0_within_level0(o: &mut shaledb::Options, base: u64) {
    o.min_blob_size = 0;
    o.max_bytes_for_level_base = base;
    o.target_file_size_base = base;
    o.max_bytes_for_level_multiplier = 2.0;
}

/// An event listener counting compactions that merged L0 tables into L0 (intra-L0), so a
/// suite can show it reached them.
#[derive(Default)]
pub struct IntraL0Count(std::sync::atomic::AtomicU64);

impl IntraL0Count {
    /// Intra-L0 compactions completed so far.
    pub fn count(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl shaledb::EventListener for IntraL0Count {
    fn on_compaction_completed(&self, info: &shaledb::CompactionJobInfo) {
        if info.base_input_level == 0 && info.output_level == 0 {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// An event listener counting read-triggered compactions (`Options::seek_compaction`), so a
/// suite can show it reached them.
#[derive(Default)]
pub struct ReadTriggeredCount(std::sync::atomic::AtomicU64);

impl ReadTriggeredCount {
    /// Read-triggered compactions completed so far.
    pub fn count(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl shaledb::EventListener for ReadTriggeredCount {
    fn on_compaction_completed(&self, info: &shaledb::CompactionJobInfo) {
        if info.reason == shaledb::CompactionReason::ReadTriggered {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The small tree the crash and IO-error tests write: 4 KiB memtables, 256-byte blocks, one
/// background job, L0 compacted at 3 files, 8 KiB level base and 2 KiB tables, so a few
/// hundred small writes flush, compact and reach several levels.
pub fn small_tree(o: &mut shaledb::Options) {
    o.write_buffer_size = 4096;
    o.block_size = 256;
    o.max_background_jobs = 1;
    o.level0_file_num_compaction_trigger = 3;
    o.max_bytes_for_level_base = 8 << 10;
    o.target_file_size_base = 2 << 10;
}

/// Halts `fault` (nothing more reaches `mem`) and loses power on `mem`: for even `k` every
/// unsynced byte is lost, for odd `k` a prefix of the unsynced data chosen by `k` survives, so
/// a sweep over crash points `k` tries both.
pub fn power_loss_at(fault: &FaultFs, mem: &shaledb::fs::MemFileSystem, k: u64) {
    fault.halt();
    if k.is_multiple_of(2) {
        mem.crash();
    } else {
        mem.crash_keep_unsynced_prefix(k);
    }
}

/// Generated writes run against a database and logged (the crash tests' workload).
pub struct LoggedWrites {
    rng: rand::rngs::StdRng,
    cfg: GenConfig,
    next_id: u64,
}

impl LoggedWrites {
    /// Operations drawn from `cfg` with a generator seeded by `seed`.
    pub fn new(cfg: GenConfig, seed: u64) -> Self {
        use rand::SeedableRng;
        LoggedWrites {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
            cfg,
            next_id: 0,
        }
    }

    /// Draws the following operations' keys from the first `key_space` keys only (a subset
    /// of the keys drawn before): later writes then overwrite one another often.
    pub fn narrow_keys(&mut self, key_space: u32) {
        self.cfg.key_space = key_space;
    }

    /// Runs the next `n` operations on `db`, logging each as acknowledged or failed; returns
    /// false at the first failure (the machine halted).
    pub fn run(&mut self, db: &shaledb::Db, n: usize, log: &mut OpLog) -> bool {
        for _ in 0..n {
            let op = model::gen_op(&mut self.rng, &self.cfg, self.next_id);
            self.next_id += 1;
            let ok = op.run(db).is_ok();
            log.push(op, if ok { Outcome::Acked } else { Outcome::Failed });
            if !ok {
                return false;
            }
        }
        true
    }
}

/// Where and how the crash tests reopen a database: its directory on the crashed file
/// system, the options for a file system, and the keys whose state is compared.
pub struct Reopen<'a> {
    /// The database's directory.
    pub dir: &'a std::path::Path,
    /// The test's options over a fault-injecting view of the file system.
    pub options: &'a dyn Fn(&FaultFs) -> shaledb::Options,
    /// The keys read and compared with the model.
    pub probe: &'a [Vec<u8>],
}

impl Reopen<'_> {
    /// Reopens the database in `mem`, checks its state against `log` at durability `d`, loses
    /// power right after and checks a second reopen reads the same state (what recovery
    /// found stays durable). Returns the state; panics naming `what` on any difference.
    pub fn check_twice(
        &self,
        mem: &shaledb::fs::MemFileSystem,
        log: &OpLog,
        d: Durability,
        what: &str,
    ) -> Model {
        let fault = FaultFs::new(std::sync::Arc::new(mem.clone()));
        let db = shaledb::Db::open(self.dir, (self.options)(&fault))
            .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
        let state = model::read_all(&db, self.probe).unwrap_or_else(|e| panic!("{what}: {e}"));
        if let Err(e) = log.check(&Model::new(), &state, d) {
            panic!("{what}: {e}");
        }
        power_loss_at(&fault, mem, 0);
        drop(db);
        let fault = FaultFs::new(std::sync::Arc::new(mem.clone()));
        let db = shaledb::Db::open(self.dir, (self.options)(&fault))
            .unwrap_or_else(|e| panic!("{what}: second reopen failed: {e}"));
        let again = model::read_all(&db, self.probe).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            again == state,
            "{what}: recovered state was not durable: {}",
            model::first_diff(&state, &again)
        );
        state
    }
}

/// The number of blob files (`*.blob`) in `fs`.
pub fn blob_file_count(fs: &shaledb::fs::MemFileSystem) -> usize {
    fs.file_names()
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "blob"))
        .count()
}

/// Runs `f` on a new thread and fails (panics) if it does not finish within `limit`: a hang
/// becomes a test failure instead of a stuck CI job. Panics inside `f` are re-raised.
pub fn with_timeout<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(limit) {
        Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: did not finish within {limit:?} (hang)")
        }
    }
}
