//! `Db::checkpoint`: an openable copy with every acknowledged write, made while writes go on,
//! with families, blob files and unflushed data; links on a real file system, copies on the
//! in-memory one; an existing directory refused; deletions resume afterwards.

mod common;

use shaledb::fs::MemFileSystem;
use shaledb::{CfOptions, CheckpointOptions, Db, Options, ReadOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn options() -> Options {
    common::small_tree_options()
}

fn families() -> Vec<(&'static str, CfOptions)> {
    common::default_and_blob_families(options().cf_options())
}

use common::round_value as value;

fn contents(db: &Db) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    common::family_contents(db, &["default", "blobs"])
}

/// Loads both families: flushed tables (and blob files), compacted levels, and writes still
/// in the memtables and WAL.
fn load(db: &Db) {
    for round in 0..3 {
        for (name, _) in families() {
            let cf = db.cf(name).expect("family");
            for i in 0..400 {
                db.put_cf(&cf, format!("k{i:04}"), value(i, round))
                    .expect("put");
            }
            if round < 2 {
                db.flush_cf(&cf).expect("flush");
            }
        }
    }
    db.delete(b"k0007").expect("delete");
}

fn check_copy(src: &Db, copy_dir: &Path, opts: Options) {
    let want = contents(src);
    let copy = Db::open_cf(copy_dir, opts, families()).expect("open the checkpoint");
    assert_eq!(contents(&copy), want);
    copy.verify_checksums().expect("checkpoint verifies");
    // The copy is a database of its own: it takes writes and compactions.
    copy.put(b"after", b"checkpoint").expect("put");
    copy.compact_range(None, None).expect("compact");
    assert_eq!(
        copy.get(b"after").expect("get").as_deref(),
        Some(&b"checkpoint"[..])
    );
}

#[test]
fn a_checkpoint_on_disk_links_tables_and_opens_with_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, copy) = (dir.path().join("db"), dir.path().join("copy"));
    let db = Db::open_cf(&src, options(), families()).expect("open");
    load(&db);
    // Settled first: a compaction finishing after the checkpoint would delete source tables
    // before their inodes are compared.
    db.wait_for_compactions().expect("compactions");
    // What a checkpoint cut short by a crash leaves: removed by the next one.
    let staging = dir.path().join("copy.tmp");
    std::fs::create_dir(&staging).expect("mkdir");
    std::fs::write(staging.join("000001.sst"), b"half a table").expect("write");
    db.checkpoint(&copy).expect("checkpoint");
    assert!(
        !staging.exists(),
        "the leftover staging directory is removed"
    );
    // Tables and blob files are links: the same inode as the source's.
    use std::os::unix::fs::MetadataExt;
    let linked = std::fs::read_dir(&copy)
        .expect("list")
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.ends_with(".sst") || n.ends_with(".blob")
        })
        .map(|e| {
            let a = e.metadata().expect("meta").ino();
            let b = std::fs::metadata(src.join(e.file_name()))
                .expect("source")
                .ino();
            assert_eq!(a, b, "{:?} is not a link", e.file_name());
        })
        .count();
    assert!(linked > 2, "{linked} tables and blob files");
    check_copy(&db, &copy, options());
    let err = db
        .checkpoint(&copy)
        .expect_err("an existing directory is refused");
    assert!(err.to_string().contains("already exists"), "{err}");
}

/// A flush of one family starts a new WAL holding only its marker while the other family's
/// writes stay in the older WAL: the checkpoint copies both WALs, the new one as far as it was
/// written (its marker must be in the file, not in the writer's buffer).
#[test]
fn a_checkpoint_right_after_one_family_flushed_copies_the_new_wal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, copy) = (dir.path().join("db"), dir.path().join("copy"));
    let db = Db::open_cf(&src, options(), families()).expect("open");
    load(&db);
    db.flush().expect("flush the default family alone");
    db.wait_for_compactions().expect("compactions");
    db.checkpoint(&copy).expect("checkpoint");
    check_copy(&db, &copy, options());
}

#[test]
fn a_checkpoint_on_the_in_memory_file_system_copies() {
    let fs = MemFileSystem::new();
    let opts = options().with_fs(fs.clone());
    let db = Db::open_cf("/db", opts.clone(), families()).expect("open");
    load(&db);
    db.checkpoint("/copy").expect("checkpoint");
    check_copy(&db, Path::new("/copy"), opts);
}

#[test]
fn a_checkpoint_during_writes_holds_a_prefix_of_them_and_deletions_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("db");
    let db = Arc::new(Db::open_cf(&src, options(), families()).expect("open"));
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, written, stop) = (db.clone(), written.clone(), stop.clone());
        std::thread::spawn(move || {
            let cf = db.cf("blobs").expect("family");
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                db.put_cf(&cf, format!("w{i:08}"), value(i, 9))
                    .expect("put");
                i += 1;
                written.store(u64::from(i), Ordering::Release);
            }
        })
    };
    for n in 0..4 {
        while written.load(Ordering::Acquire) < 2000 * (n + 1) {
            std::thread::yield_now();
        }
        let before = written.load(Ordering::Acquire);
        let copy = dir.path().join(format!("copy{n}"));
        db.checkpoint(&copy).expect("checkpoint");
        let c = Db::open_cf(&copy, options(), families()).expect("open the checkpoint");
        let cf = c.cf("blobs").expect("family");
        let mut keys = Vec::new();
        let mut it = c.iter_cf(&cf, &ReadOptions::default()).expect("iterator");
        it.seek_to_first();
        while it.valid() {
            keys.push(it.key().to_vec());
            it.next();
        }
        it.status().expect("scan");
        // Keys w0..wN-1 for some N at least what was acknowledged before the call: a prefix.
        assert!(
            keys.len() as u64 >= before,
            "{} keys, {before} acknowledged",
            keys.len()
        );
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(
                k,
                format!("w{i:08}").as_bytes(),
                "checkpoint {n} has a hole"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    // Deletions resumed: the tables the compactions made obsolete leave the directory.
    let live = |db: &Db| -> usize {
        ["default", "blobs"]
            .iter()
            .map(|name| {
                let cf = db.cf(name).expect("family");
                (0..7)
                    .map(|l| {
                        db.property_cf(&cf, &format!("shaledb.num-files-at-level{l}"))
                            .and_then(|n| n.parse::<usize>().ok())
                            .unwrap_or(0)
                    })
                    .sum::<usize>()
            })
            .sum()
    };
    let on_disk = || {
        std::fs::read_dir(&src)
            .expect("list")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".sst"))
            })
            .count()
    };
    db.compact_range_cf(&db.cf("blobs").expect("family"), None, None)
        .expect("compact");
    common::wait_until("obsolete tables deleted", || on_disk() == live(&db));
}

#[test]
fn a_finished_checkpoint_survives_a_power_loss() {
    let fs = MemFileSystem::new();
    let opts = options().with_fs(fs.clone());
    let db = Db::open_cf("/db", opts.clone(), families()).expect("open");
    load(&db);
    let want = contents(&db);
    db.checkpoint("/copy").expect("checkpoint");
    // Everything the checkpoint wrote was synced: a power loss now keeps all of it (the
    // source's unsynced WAL tail may go, the copy's may not).
    drop(db);
    fs.crash();
    let copy = Db::open_cf("/copy", opts, families()).expect("open the checkpoint");
    assert_eq!(contents(&copy), want);
}

/// The copy's WAL file names.
fn wal_names(fs: &MemFileSystem, dir: &str) -> Vec<String> {
    fs.file_names()
        .iter()
        .filter(|p| p.starts_with(dir) && p.extension().is_some_and(|e| e == "log"))
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn log_size_for_flush_flushes_first_and_the_copy_carries_no_wal() {
    let fs = MemFileSystem::new();
    let opts = options().with_fs(fs.clone());
    let db = Db::open_cf("/db", opts.clone(), families()).expect("open");
    load(&db);
    let mut wal_bytes = 0;
    for p in fs.file_names() {
        if p.starts_with("/db") && p.extension().is_some_and(|e| e == "log") {
            wal_bytes += fs.read_file_bytes(&p).map_or(0, |b| b.len() as u64);
        }
    }
    assert!(wal_bytes > 0, "load leaves unflushed writes");
    let flush_at = |bytes| CheckpointOptions {
        log_size_for_flush: bytes,
    };
    // The default and a threshold above the logs' size copy the WAL without flushing.
    assert_eq!(CheckpointOptions::default(), flush_at(u64::MAX));
    db.checkpoint_opt("/never", &CheckpointOptions::default())
        .expect("checkpoint");
    db.checkpoint_opt("/above", &flush_at(wal_bytes * 2 + (1 << 20)))
        .expect("checkpoint");
    for copy in ["/never", "/above"] {
        assert!(!wal_names(&fs, copy).is_empty(), "{copy} has no WAL");
        check_copy(&db, Path::new(copy), opts.clone());
    }
    // At or below the live logs' size every family is flushed first: the copy is tables and
    // blob files. (Not `wal_bytes / 2`: the sum above may include WALs already obsolete whose
    // deletion is still queued, which could put half of it above the live logs' size.)
    db.checkpoint_opt("/at", &flush_at(1)).expect("checkpoint");
    assert_eq!(wal_names(&fs, "/at"), Vec::<String>::new());
    check_copy(&db, Path::new("/at"), opts.clone());
    // 0 always flushes; with nothing unflushed there is nothing to flush, and still no WAL.
    db.checkpoint_opt("/always", &flush_at(0))
        .expect("checkpoint");
    assert_eq!(wal_names(&fs, "/always"), Vec::<String>::new());
    check_copy(&db, Path::new("/always"), opts.clone());
    // Writes after the flush are in the WAL again, and a copy without flushing carries it.
    db.put(b"late", b"write").expect("put");
    db.checkpoint("/late").expect("checkpoint");
    assert!(!wal_names(&fs, "/late").is_empty());
    check_copy(&db, Path::new("/late"), opts.clone());
    // A WAL-less copy reopens twice (its first open starts a WAL and records its number).
    drop(db);
    let copy = Db::open_cf("/at", opts.clone(), families()).expect("reopen");
    copy.put(b"x", b"y").expect("put");
    drop(copy);
    let copy = Db::open_cf("/at", opts, families()).expect("reopen again");
    assert_eq!(copy.get(b"x").expect("get").as_deref(), Some(&b"y"[..]));
}
