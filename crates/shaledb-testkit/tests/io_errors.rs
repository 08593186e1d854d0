//! IO errors: for each fault (EIO on any operation, ENOSPC on any mutating one, a short write,
//! a failed fsync, a failed directory sync, a failed rename, a read returning flipped bits) fail the N-th operation for N = 1, 2, ... until a
//! scripted sequence (open, writes, flush, compaction, MANIFEST roll, close) completes
//! without hitting it. Checks:
//! - every failure is an `Err`, never a panic (foreground or background) or a hang;
//! - once the database reports a background error (a failed WAL/MANIFEST write or sync, a
//!   failed flush or compaction) every later write fails with `Error::Poisoned`, or
//!   `Error::Suspended` for the retried ones (a failed flush, a WAL write failing with ENOSPC),
//!   and reads keep working and agree with the acknowledged writes;
//! - a failed table or MANIFEST write surfaces through `db.background_error()`;
//! - after reopening on the un-faulted filesystem every acknowledged write is there (and the
//!   state is one allowed prefix); after a power loss every synced one is.
#![allow(clippy::field_reassign_with_default)]

use rand::rngs::StdRng;
use rand::SeedableRng;
use shaledb::fs::MemFileSystem;
use shaledb::{Db, Error, Options};
use shaledb_testkit::model::{
    self, gen_op, read_all, Durability, GenConfig, Model, OpLog, Outcome,
};
use shaledb_testkit::table_layout::{self, table_formats};
use shaledb_testkit::{with_timeout, Fault, FaultFs, OpKind, StorageMode as Mode, Target};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const DIR: &str = "/db";

static PANICS: AtomicU64 = AtomicU64::new(0);

/// Counts the background errors a database reports to its listeners.
#[derive(Default)]
struct ErrorsReported(AtomicU64);

impl shaledb::EventListener for ErrorsReported {
    fn on_background_error(&self, _: &shaledb::BackgroundErrorInfo) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

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
        // Indexes and filters read again from tables, under the same injected errors.
        o.cache_index_and_filter_blocks = true;
        o.block_cache_size = 16 << 10;
        // Compaction outputs with zstd dictionaries.
        table_layout::write_dictionary_tables(&mut o);
    } else {
        // Tables with index and filter partitions, read through a cache
        // small enough that partitions are evicted and read again under the injected errors.
        table_layout::write_partitioned_tables(&mut o, true, 64);
        o.block_cache_size = 16 << 10;
        // Values of 30 bytes or more in blob files, written and read under the errors too.
        shaledb_testkit::store_values_in_blob_files(&mut o, 30, shaledb::CompressionType::None);
        // Blob appends and syncs in the write path, under the errors too.
        o.separate_blobs_at_write = mode == Mode::BlobsAtWrite;
        if o.separate_blobs_at_write {
            // Several files per memtable, closed as they reach the write buffer's size and
            // synced later: their syncs and footers under the errors too.
            o.blob_file_size = 16 << 10;
        }
        // Split compactions: an error in one range removes the other ranges' files too.
        o.max_subcompactions = 2;
    }
    shaledb_testkit::small_tree(&mut o);
    o.max_manifest_file_size = 300;
    // No automatic retry of a failed flush within a run: `resume` at the end lifts it.
    o.bgerror_resume_retry_interval = Duration::from_secs(3600);
    o
}

fn cfg() -> GenConfig {
    GenConfig {
        key_space: 40,
        sync_ratio: 0.3,
        value_len: (10, 60),
        ..Default::default()
    }
}

/// Checks a live database against the log: reads work and show every acknowledged write.
fn check_reads(db: &Db, log: &OpLog, what: &str) {
    let state = read_all(db, &model::all_keys(&cfg()))
        .unwrap_or_else(|e| panic!("{what}: reads fail after a write error: {e}"));
    if let Err(e) = log.check(&Model::new(), &state, Durability::AllAcked) {
        panic!("{what}: live state: {e}");
    }
}

/// Reads everything (a scan, then a get of every key) while the fault may fire on one of the
/// reads: an injected failure comes back as an IO or corruption error, never a wrong value;
/// reads that succeed agree with the acknowledged writes.
fn reads_under_faults(db: &Db, log: &OpLog, what: &str) {
    let failed = |e: Error, read: &str| {
        assert!(
            matches!(e, Error::Io { .. }) || e.is_corruption(),
            "{what}: {read} failed with {e}, not an IO error or corruption"
        );
    };
    let mut state = Model::new();
    for item in db.range(..) {
        match item {
            Ok((k, v)) => {
                state.insert(k, v.into_vec());
            }
            Err(e) => return failed(e, "scan"),
        }
    }
    for k in model::all_keys(&cfg()) {
        match db.get(&k) {
            Ok(v) => assert_eq!(
                v.as_deref(),
                state.get(&k).map(Vec::as_slice),
                "{what}: a get disagrees with the scan before it"
            ),
            Err(e) => return failed(e, "get"),
        }
    }
    if let Err(e) = log.check(&Model::new(), &state, Durability::AllAcked) {
        panic!("{what}: reads under faults: {e}");
    }
}

fn is_background_path(p: &Path) -> bool {
    let s = p.to_string_lossy();
    s.ends_with(".sst") || s.contains("MANIFEST") || s.ends_with(".dbtmp")
}

/// The script; returns the log of attempted writes.
fn script(fs: &FaultFs, what: &str, mode: Mode) -> OpLog {
    let mut log = OpLog::default();
    let reported = Arc::new(ErrorsReported::default());
    let mut opts = options(fs, mode);
    opts.listeners.push(reported.clone());
    let db = match Db::open(Path::new(DIR), opts) {
        Ok(db) => db,
        Err(_) => return log,
    };
    let opened_at = fs.injected().len();
    let cfg = cfg();
    let mut rng = StdRng::seed_from_u64(11);
    let mut id = 0u64;
    for step in 0..4 {
        for _ in 0..30 {
            let op = gen_op(&mut rng, &cfg, id);
            id += 1;
            let poisoned_before = db.background_error().is_some();
            match op.run(&db) {
                Ok(()) => {
                    assert!(
                        !poisoned_before,
                        "{what}: a write was acknowledged after the background error {:?}",
                        db.background_error()
                    );
                    log.push(op, Outcome::Acked);
                }
                Err(e) => {
                    // A suspended write was refused before reaching the WAL: never applied.
                    if !matches!(e, Error::Suspended(_)) {
                        log.push(op, Outcome::Failed);
                    }
                    if poisoned_before {
                        assert!(
                            matches!(e, Error::Poisoned(_) | Error::Suspended(_)),
                            "{what}: write after a background error failed with {e}, \
                             not Poisoned or Suspended"
                        );
                    }
                    check_reads(&db, &log, what);
                }
            }
        }
        let res = match step {
            0 => db.flush(),
            1 => db.compact_range(None, None),
            2 => db.wait_for_compactions(),
            _ => db.flush(),
        };
        if res.is_err() {
            check_reads(&db, &log, what);
        }
        // Reads of the tables (their index and filter partitions too) the fault may hit.
        reads_under_faults(&db, &log, what);
    }
    // Background work settles (the result may report the injected error).
    let settled = db.wait_for_compactions();
    let bg_faults = fs.injected()[opened_at..]
        .iter()
        .any(|i| i.kind != OpKind::Read && i.kind != OpKind::Remove && is_background_path(&i.path));
    if bg_faults {
        // A failed flush or MANIFEST write shows as the background error; a failed
        // compaction (which does not stop writes) in wait_for_compactions, unless a later
        // one (a manual compaction the script asked for) succeeded and lifted its pause: then
        // the listeners were told.
        assert!(
            db.background_error().is_some()
                || settled.is_err()
                || reported.0.load(Ordering::SeqCst) > 0,
            "{what}: a table or MANIFEST write failed but nothing reports it: {:?}",
            fs.injected()
        );
    }
    if db.background_error().is_some() {
        match db.put(b"after", b"error") {
            Err(Error::Poisoned(_) | Error::Suspended(_)) => {}
            other => panic!("{what}: write after a background error returned {other:?}"),
        }
        check_reads(&db, &log, what);
    }
    resume_after_a_suspension(&db, &mut log, &mut rng, &mut id, what);
    let _ = db.close();
    log
}

/// A flush that failed on the (one-shot) fault suspended writes: `resume` retries it, it
/// succeeds, and writes are acknowledged again with nothing lost. A poisoned database
/// refuses to resume.
fn resume_after_a_suspension(db: &Db, log: &mut OpLog, rng: &mut StdRng, id: &mut u64, what: &str) {
    match db.background_error() {
        None => {
            // Compactions paused after a failure (if any) run again and succeed.
            db.resume()
                .unwrap_or_else(|e| panic!("{what}: resume with writes going: {e}"));
            db.wait_for_compactions()
                .unwrap_or_else(|e| panic!("{what}: compactions after resume: {e}"));
            return;
        }
        Some(Error::Suspended(_)) => {}
        Some(_) => {
            assert!(db.resume().is_err(), "{what}: a poisoned database resumed");
            return;
        }
    }
    db.resume()
        .unwrap_or_else(|e| panic!("{what}: resume after a one-shot fault failed: {e}"));
    let cfg = cfg();
    for _ in 0..10 {
        let op = gen_op(rng, &cfg, *id);
        *id += 1;
        op.run(db)
            .unwrap_or_else(|e| panic!("{what}: a write after resume failed: {e}"));
        log.push(op, Outcome::Acked);
    }
    db.flush()
        .unwrap_or_else(|e| panic!("{what}: a flush after resume failed: {e}"));
    check_reads(db, log, what);
}

fn reopen_and_check(mem: &MemFileSystem, log: &OpLog, d: Durability, what: &str, mode: Mode) {
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(Path::new(DIR), options(&fault, mode))
        .unwrap_or_else(|e| panic!("{what}: reopen on the un-faulted filesystem failed: {e}"));
    let state = read_all(&db, &model::all_keys(&cfg())).unwrap_or_else(|e| panic!("{what}: {e}"));
    if let Err(e) = log.check(&Model::new(), &state, d) {
        panic!("{what}: after reopen ({d:?}): {e}");
    }
    db.close().unwrap_or_else(|e| panic!("{what}: close: {e}"));
}

/// Runs the sweep for one fault; returns (runs, faults injected).
fn sweep(name: &'static str, target: Target, fault: Fault, mode: Mode) -> (u64, u64) {
    with_timeout(name, Duration::from_secs(600), move || {
        let mut injected = 0;
        for n in 1.. {
            assert!(n < 20_000, "{name}: the script never completed");
            let what = format!("{name}, operation {n}");
            let mem = MemFileSystem::new();
            let fs = FaultFs::new(Arc::new(mem.clone()));
            fs.fail_nth(target, n, fault);
            let w = what.clone();
            let fs2 = fs.clone();
            let log = with_timeout(&what, Duration::from_secs(60), move || {
                script(&fs2, &w, mode)
            });
            let hit = !fs.injected().is_empty();
            injected += fs.injected().len() as u64;
            drop(fs);
            // Process keeps running (no power loss): every acknowledged write is there.
            reopen_and_check(&mem, &log, Durability::AllAcked, &what, mode);
            // Power loss: every synced one is.
            mem.crash();
            reopen_and_check(&mem, &log, Durability::SyncedOnly, &what, mode);
            if !hit {
                // Every table is format 4 (partitions buffered; dictionaries below L0 with
                // direct IO).
                let want: &[u32] = &[4];
                assert_eq!(table_formats(&mem), want, "{name}: table formats");
                return (n, injected);
            }
        }
        unreachable!()
    })
}

/// Counts panics of any thread (a background thread's panic must fail the test).
fn count_panics() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default_hook(info);
    }));
}

/// The faults swept, each at every operation it can hit.
fn cases() -> [(&'static str, Target, Fault); 7] {
    [
        ("EIO on any operation", Target::Any, Fault::Eio),
        (
            "ENOSPC on any mutating operation",
            Target::Mutating,
            Fault::Enospc,
        ),
        (
            "short write",
            Target::Kind(OpKind::Append),
            Fault::ShortWrite,
        ),
        ("failed fsync", Target::Kind(OpKind::Sync), Fault::Eio),
        (
            "failed directory sync",
            Target::Kind(OpKind::SyncDir),
            Fault::Eio,
        ),
        ("failed rename", Target::Kind(OpKind::Rename), Fault::Eio),
        (
            "corrupted read",
            Target::Kind(OpKind::Read),
            Fault::CorruptRead,
        ),
    ]
}

#[test]
fn every_nth_io_failure_is_an_error_and_loses_nothing_synced() {
    count_panics();
    for (name, target, fault) in cases() {
        let (runs, injected) = sweep(name, target, fault, Mode::Buffered);
        eprintln!("io errors: {name}: {runs} runs, {injected} faults injected");
    }
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a thread panicked");
}

/// The same faults with direct IO: table files go through other code (aligned transfers,
/// the alignment padding of a file's last block, flushed blocks put in the cache as they are
/// written), and every fault that reaches the write path reaches it there too.
#[test]
fn every_nth_io_failure_with_direct_io() {
    count_panics();
    for (name, target, fault) in cases() {
        let (runs, injected) = sweep(name, target, fault, Mode::Direct);
        eprintln!("io errors, direct IO: {name}: {runs} runs, {injected} faults injected");
    }
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a thread panicked");
}

/// The same faults with values written to blob files as they are written: a failed blob
/// append, sync or directory sync in the write path fails the write, never acknowledges a
/// reference to a blob that is not there.
#[test]
fn every_nth_io_failure_with_blobs_written_at_write() {
    count_panics();
    for (name, target, fault) in cases() {
        let (runs, injected) = sweep(name, target, fault, Mode::BlobsAtWrite);
        eprintln!("io errors, blobs at write: {name}: {runs} runs, {injected} faults injected");
    }
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a thread panicked");
}

/// The first failure, with its OS error kind, is what `Poisoned` carries and what
/// `std::error::Error::source` returns, for the failing write and every later one.
#[test]
fn poisoned_errors_carry_the_first_failure_as_their_source() {
    fn cause_kind(e: &Error) -> std::io::ErrorKind {
        assert!(
            matches!(e, Error::Poisoned(_)),
            "expected Poisoned, got {e}"
        );
        let source = std::error::Error::source(e).expect("Poisoned has a source");
        match source.downcast_ref::<Error>() {
            Some(Error::Io { source, context }) => {
                assert!(context.contains("WAL"), "context names the WAL: {context}");
                source.kind()
            }
            other => panic!("source is not an Io error: {other:?}"),
        }
    }
    let mem = MemFileSystem::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(Path::new(DIR), options(&fault, Mode::Buffered)).expect("open");
    let sync = shaledb::WriteOptions {
        sync: true,
        ..Default::default()
    };
    db.put_opt(&sync, b"before", b"ok")
        .expect("a write before the fault");
    fault.fail_nth(Target::Kind(OpKind::Sync), 1, Fault::Enospc);
    let full = std::io::Error::from_raw_os_error(libc::ENOSPC).kind();
    let first = db
        .put_opt(&sync, b"k", b"v")
        .expect_err("the synced write fails");
    assert_eq!(cause_kind(&first), full);
    assert!(
        first.to_string().contains("refuses writes"),
        "Display explains: {first}"
    );
    let later = db.put(b"k2", b"v").expect_err("later writes are refused");
    assert_eq!(cause_kind(&later), full);
    let bg = db
        .background_error()
        .expect("a background error is recorded");
    assert_eq!(cause_kind(&bg), full);
    assert_eq!(
        db.get(b"before").expect("reads work").as_deref(),
        Some(&b"ok"[..])
    );
}
