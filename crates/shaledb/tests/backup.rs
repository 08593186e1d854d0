//! `BackupEngine`: a restored backup equals the database when it was taken (families, blob
//! files, merges, range deletions, unflushed writes); backups share tables and blob files
//! (the second copies only what is new); `purge_old` and `delete` remove exactly the shared
//! files no remaining backup has; `verify` and `restore` turn a flipped byte, a cut or a
//! missing file into `Corruption` naming it; a backup under a concurrent writer holds a
//! prefix of the writes with every one acknowledged before the call; the rate limits pace
//! backups and restores.

mod common;

use shaledb::fs::{FileSystem, FsCall, FsHook, HookedFileSystem, MemFileSystem};
use shaledb::internals::BackupMeta;
use shaledb::merge_operators::UInt64Add;
use shaledb::{BackupEngine, CfOptions, Db, Error, Options, ReadOptions};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

const BACKUPS: &str = "/backups";

fn options(fs: &MemFileSystem) -> Options {
    Options {
        merge_operator: Some(Arc::new(UInt64Add)),
        ..common::small_tree_options()
    }
    .with_fs(fs.clone())
}

fn families(fs: &MemFileSystem) -> Vec<(&'static str, CfOptions)> {
    common::default_and_blob_families(options(fs).cf_options())
}

fn open(fs: &MemFileSystem, dir: &str) -> Db {
    Db::open_cf(dir, options(fs), families(fs)).expect("open")
}

use common::round_value as value;

type Contents = Vec<Vec<(Vec<u8>, Vec<u8>)>>;

/// Every key and value of both families.
fn contents(db: &Db) -> Contents {
    common::family_contents(db, &["default", "blobs"])
}

/// One round of writes to both families: puts (large ones go to blob files), merges, a range
/// deletion and a point deletion; flushed unless `flush` is false (then they stay in the WAL).
fn write_round(db: &Db, round: u32, flush: bool) {
    for name in ["default", "blobs"] {
        let cf = db.cf(name).expect("family");
        for i in 0..300 {
            db.put_cf(&cf, format!("k{i:04}"), value(i, round))
                .expect("put");
        }
        for i in 0..20 {
            db.merge_cf(
                &cf,
                format!("count{i:02}"),
                u64::from(round + i).to_le_bytes(),
            )
            .expect("merge");
        }
        db.delete_range_cf(
            &cf,
            format!("k{:04}", 50 + round),
            format!("k{:04}", 60 + round),
        )
        .expect("delete range");
        db.delete_cf(&cf, format!("k{:04}", 200 + round))
            .expect("delete");
        if flush {
            db.flush_cf(&cf).expect("flush");
        }
    }
}

/// Restores backup `id` into `dir` and returns the restored database.
fn restore(engine: &BackupEngine, fs: &MemFileSystem, id: u64, dir: &str) -> Db {
    engine.restore(id, dir).expect("restore");
    let db = open(fs, dir);
    db.verify_checksums().expect("restored database verifies");
    db
}

fn meta(fs: &MemFileSystem, id: u64) -> BackupMeta {
    meta_at(fs, BACKUPS, id)
}

/// Names in `shared/`.
fn shared(fs: &MemFileSystem) -> BTreeSet<String> {
    fs.list_dir(Path::new(&format!("{BACKUPS}/shared")))
        .expect("list")
        .into_iter()
        .collect()
}

/// The shared names backup `id` lists.
fn shared_of(fs: &MemFileSystem, id: u64) -> BTreeSet<String> {
    meta(fs, id)
        .files
        .iter()
        .filter(|f| f.is_shared())
        .map(|f| f.shared_name())
        .collect()
}

#[test]
fn a_restored_backup_equals_the_database_when_it_was_taken() {
    let fs = MemFileSystem::new();
    let db = open(&fs, "/db");
    write_round(&db, 0, true);
    write_round(&db, 1, true);
    db.compact_range(None, None).expect("compact");
    // Unflushed writes: only the WAL has them.
    write_round(&db, 2, false);
    let want = contents(&db);
    assert!(want[1].iter().any(|(_, v)| v.len() >= 100), "blob values");
    let engine = BackupEngine::open_with_fs(BACKUPS, Arc::new(fs.clone())).expect("engine");
    let id = engine.create_backup(&db).expect("backup");
    assert_eq!(id, 1);
    let m = meta(&fs, id);
    let count = |ext: &str| m.files.iter().filter(|f| f.name.ends_with(ext)).count();
    assert!(count(".sst") >= 2 && count(".blob") >= 1 && count(".log") >= 1);
    let manifests = m.files.iter().filter(|f| f.name.starts_with("MANIFEST-"));
    assert_eq!(manifests.count(), 1);
    let info = engine.list().expect("list");
    assert_eq!(info.len(), 1);
    assert_eq!(info[0].id, 1);
    assert_eq!(info[0].file_count, m.files.len());
    assert_eq!(info[0].size, m.files.iter().map(|f| f.size).sum::<u64>());
    engine.verify(id).expect("verify");
    // The database moves on; the backup does not.
    write_round(&db, 3, true);
    assert_ne!(contents(&db), want);
    let restored = restore(&engine, &fs, id, "/restored");
    assert_eq!(contents(&restored), want);
    // The restored database is a database of its own: writes, compactions, reopen.
    restored.put(b"after", b"restore").expect("put");
    restored.compact_range(None, None).expect("compact");
    drop(restored);
    let again = open(&fs, "/restored");
    assert_eq!(
        again.get(b"after").expect("get").as_deref(),
        Some(&b"restore"[..])
    );
    // A restore wants an empty or new directory, and a backup that exists.
    let err = engine.restore(id, "/restored").expect_err("not empty");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("not empty")),
        "{err}"
    );
    let err = engine.restore(9, "/elsewhere").expect_err("no such backup");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("no backup 9")),
        "{err}"
    );
    fs.create_dir_all(Path::new("/empty")).expect("mkdir");
    let empty = restore(&engine, &fs, id, "/empty");
    assert_eq!(contents(&empty), want);
    // One engine per directory.
    let err = BackupEngine::open_with_fs(BACKUPS, Arc::new(fs.clone())).expect_err("locked");
    assert!(matches!(err, Error::Locked(_)), "{err}");
}

/// Counts files created under `shared/`.
#[derive(Default)]
struct SharedCreates(AtomicUsize);

impl FsHook for SharedCreates {
    fn before(&self, call: FsCall<'_>) -> std::io::Result<()> {
        if let FsCall::Create(p) = call {
            if p.starts_with(format!("{BACKUPS}/shared")) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        Ok(())
    }
}

#[test]
fn backups_share_tables_and_purge_keeps_exactly_what_remaining_backups_list() {
    let fs = MemFileSystem::new();
    let hooked = Arc::new(HookedFileSystem::new(
        Arc::new(fs.clone()),
        SharedCreates::default(),
    ));
    let creates = || hooked.hook().0.load(Ordering::SeqCst);
    let db = open(&fs, "/db");
    let engine = BackupEngine::open_with_fs(BACKUPS, hooked.clone()).expect("engine");
    write_round(&db, 0, true);
    let first = engine.create_backup(&db).expect("backup 1");
    let s1 = shared_of(&fs, first);
    assert_eq!(creates(), s1.len(), "the first backup copies every table");
    assert_eq!(shared(&fs), s1);
    // One more table in the default family (no compaction: auto compactions need two).
    let cf = db.cf("blobs").expect("family");
    db.put(b"one", b"more").expect("put");
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait");
    let second = engine.create_backup(&db).expect("backup 2");
    let s2 = shared_of(&fs, second);
    let new: Vec<_> = s2.difference(&s1).collect();
    assert_eq!(
        creates() - s1.len(),
        new.len(),
        "only new files are copied: {new:?}"
    );
    assert!(!new.is_empty() && new.len() < s1.len(), "{new:?} of {s1:?}");
    // A third backup after a full compaction shares little with the first.
    write_round(&db, 1, true);
    db.compact_range_cf(&cf, None, None).expect("compact");
    db.compact_range(None, None).expect("compact");
    let third = engine.create_backup(&db).expect("backup 3");
    let s3 = shared_of(&fs, third);
    let want = contents(&db);
    assert_eq!(shared(&fs), &(&s1 | &s2) | &s3);
    assert_eq!(
        engine
            .list()
            .expect("list")
            .iter()
            .map(|b| b.id)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    engine.purge_old(2).expect("purge");
    assert_eq!(
        engine
            .list()
            .expect("list")
            .iter()
            .map(|b| b.id)
            .collect::<Vec<_>>(),
        [2, 3]
    );
    assert_eq!(shared(&fs), &s2 | &s3, "the first backup's own files went");
    assert!(!fs.exists(Path::new(&format!("{BACKUPS}/private/1"))));
    engine.delete(second).expect("delete");
    assert_eq!(shared(&fs), s3);
    engine.purge_old(5).expect("nothing to purge");
    engine.verify(third).expect("verify");
    drop(engine);
    // A fresh engine finds the same.
    let engine = BackupEngine::open_with_fs(BACKUPS, Arc::new(fs.clone())).expect("reopen");
    assert_eq!(engine.list().expect("list").len(), 1);
    let restored = restore(&engine, &fs, third, "/restored");
    assert_eq!(contents(&restored), want);
    engine.purge_old(0).expect("purge all");
    assert!(engine.list().expect("list").is_empty());
    assert!(shared(&fs).is_empty());
}

/// Damage one file of a backup with `harm`; verify and restore must name it.
fn damaged(harm: &dyn Fn(&MemFileSystem, &Path), pick: &dyn Fn(&str) -> bool, what: &str) {
    let fs = MemFileSystem::new();
    let db = open(&fs, "/db");
    write_round(&db, 0, true);
    write_round(&db, 1, false);
    let engine = BackupEngine::open_with_fs(BACKUPS, Arc::new(fs.clone())).expect("engine");
    let good = engine.create_backup(&db).expect("backup");
    write_round(&db, 2, true);
    write_round(&db, 3, false);
    let id = engine.create_backup(&db).expect("backup");
    let m = meta(&fs, id);
    // A file only this backup has, so the other stays intact.
    let f = m
        .files
        .iter()
        .find(|f| {
            pick(&f.name) && !(f.is_shared() && shared_of(&fs, good).contains(&f.shared_name()))
        })
        .unwrap_or_else(|| panic!("{what}: no file to damage"));
    let path = if f.is_shared() {
        PathBuf::from(format!("{BACKUPS}/shared/{}", f.shared_name()))
    } else {
        PathBuf::from(format!("{BACKUPS}/private/{id}/{}", f.name))
    };
    harm(&fs, &path);
    for res in [engine.verify(id), engine.restore(id, "/restored")] {
        match res {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    assert!(
        !fs.exists(Path::new("/restored")),
        "{what}: a refused restore left files"
    );
    engine.verify(good).expect("the other backup is intact");
    restore(&engine, &fs, good, "/good");
}

fn flip(fs: &MemFileSystem, path: &Path) {
    let mut b = fs.read_file_bytes(path).expect("file");
    let at = b.len() / 2;
    b[at] ^= 0x04;
    fs.write_file_bytes(path, &b);
}

fn cut(fs: &MemFileSystem, path: &Path) {
    let b = fs.read_file_bytes(path).expect("file");
    fs.write_file_bytes(path, &b[..b.len() - 1]);
}

fn remove(fs: &MemFileSystem, path: &Path) {
    fs.remove_file(path).expect("remove");
}

#[test]
fn verify_and_restore_name_a_damaged_file() {
    let table = |n: &str| n.ends_with(".sst");
    let blob = |n: &str| n.ends_with(".blob");
    let wal = |n: &str| n.ends_with(".log");
    let manifest = |n: &str| n.starts_with("MANIFEST-");
    damaged(&flip, &table, "flipped table byte");
    damaged(&cut, &table, "truncated table");
    damaged(&remove, &table, "missing table");
    damaged(&flip, &blob, "flipped blob byte");
    damaged(&remove, &blob, "missing blob file");
    damaged(&flip, &wal, "flipped WAL byte");
    damaged(&cut, &manifest, "truncated MANIFEST");
}

#[test]
fn a_damaged_meta_file_is_corruption_and_can_be_deleted() {
    let fs = MemFileSystem::new();
    let db = open(&fs, "/db");
    write_round(&db, 0, true);
    let engine = BackupEngine::open_with_fs(BACKUPS, Arc::new(fs.clone())).expect("engine");
    let first = engine.create_backup(&db).expect("backup");
    write_round(&db, 1, true);
    let second = engine.create_backup(&db).expect("backup");
    let path = PathBuf::from(format!("{BACKUPS}/meta/{second}"));
    flip(&fs, &path);
    for err in [
        engine.list().expect_err("list"),
        engine.verify(second).expect_err("verify"),
        engine.restore(second, "/r").expect_err("restore"),
    ] {
        assert!(
            matches!(&err, Error::Corruption { file, .. } if *file == path),
            "{err}"
        );
    }
    // While a meta file cannot be read, no shared file is deleted (it may list any).
    let before = shared(&fs);
    drop(engine);
    let engine = BackupEngine::open_with_fs(BACKUPS, Arc::new(fs.clone())).expect("reopen");
    assert_eq!(shared(&fs), before);
    engine.delete(second).expect("delete the damaged backup");
    assert_eq!(shared(&fs), shared_of(&fs, first));
    engine.verify(first).expect("verify");
}

#[test]
fn leftovers_of_an_interrupted_backup_are_removed_at_open() {
    let fs = MemFileSystem::new();
    let db = open(&fs, "/db");
    write_round(&db, 0, true);
    let engine = BackupEngine::open_with_fs(BACKUPS, Arc::new(fs.clone())).expect("engine");
    let id = engine.create_backup(&db).expect("backup");
    let kept = shared(&fs);
    drop(engine);
    for junk in [
        "shared/000099_00000000_10.sst",
        "shared/000098.sst.tmp",
        "private/2/000007.log",
        "meta/2.tmp",
        "private/7",
    ] {
        fs.write_file_bytes(format!("{BACKUPS}/{junk}"), b"junk");
    }
    let engine = BackupEngine::open_with_fs(BACKUPS, Arc::new(fs.clone())).expect("reopen");
    assert_eq!(shared(&fs), kept);
    assert!(!fs.exists(Path::new(&format!("{BACKUPS}/private/2"))));
    assert!(!fs.exists(Path::new(&format!("{BACKUPS}/meta/2.tmp"))));
    assert!(!fs.exists(Path::new(&format!("{BACKUPS}/private/7"))));
    assert_eq!(engine.list().expect("list").len(), 1);
    engine.verify(id).expect("verify");
    assert_eq!(engine.create_backup(&db).expect("backup"), 2);
}

#[test]
fn backups_under_a_concurrent_writer_hold_every_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("db");
    let fs = MemFileSystem::new();
    let on_disk = |o: Options| Options {
        fs: shaledb::fs::default_fs(),
        ..o
    };
    let db = Arc::new(Db::open_cf(&src, on_disk(options(&fs)), families(&fs)).expect("open"));
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
                db.merge(b"count", 1u64.to_le_bytes()).expect("merge");
                i += 1;
                written.store(u64::from(i), Ordering::Release);
            }
        })
    };
    let engine = BackupEngine::open(dir.path().join("backups")).expect("engine");
    let mut ids = Vec::new();
    for n in 0..4 {
        while written.load(Ordering::Acquire) < 1500 * (n + 1) {
            std::thread::yield_now();
        }
        let before = written.load(Ordering::Acquire);
        ids.push((engine.create_backup(&db).expect("backup"), before));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    for (id, before) in ids {
        let to = dir.path().join(format!("restored{id}"));
        engine.restore(id, &to).expect("restore");
        let r = Db::open_cf(&to, on_disk(options(&fs)), families(&fs)).expect("open restored");
        let cf = r.cf("blobs").expect("family");
        let mut it = r.iter_cf(&cf, &ReadOptions::default()).expect("iterator");
        it.seek_to_first();
        let mut n = 0u32;
        while it.valid() {
            assert_eq!(
                it.key(),
                format!("w{n:08}").as_bytes(),
                "backup {id} has a hole"
            );
            assert_eq!(it.value(), &value(n, 9)[..], "backup {id}, key {n}");
            n += 1;
            it.next();
        }
        it.status().expect("scan");
        assert!(
            u64::from(n) >= before,
            "backup {id}: {n} keys, {before} acknowledged"
        );
        // The merges of the same writes: each put's merge is in, or the one after the last
        // put in the backup (the writer's next write) is.
        let count = r.get(b"count").expect("get").expect("count");
        let count = u64::from_le_bytes(count[..].try_into().expect("8 bytes"));
        assert!(
            count == u64::from(n) || count == u64::from(n) - 1,
            "backup {id}: count {count}, {n} puts"
        );
    }
}

#[test]
fn a_backup_may_live_on_another_file_system() {
    let (db_fs, backup_fs) = (MemFileSystem::new(), MemFileSystem::new());
    let db = open(&db_fs, "/db");
    write_round(&db, 0, true);
    write_round(&db, 1, false);
    let want = contents(&db);
    let engine = BackupEngine::open_with_fs(BACKUPS, Arc::new(backup_fs.clone())).expect("engine");
    let id = engine.create_backup(&db).expect("backup");
    assert!(
        !db_fs.exists(Path::new(BACKUPS)),
        "written to the database's file system"
    );
    engine.verify(id).expect("verify");
    let restored = restore(&engine, &backup_fs, id, "/restored");
    assert_eq!(contents(&restored), want);
}

/// `backup_rate_limit` and `restore_rate_limit` pace the copies: a backup whose tables, blob
/// files and WALs hold N bytes takes at least N / limit seconds (the limiter's bucket starts
/// empty and never grants more than the rate times the time elapsed), a restore of M bytes at
/// least M / limit. A functional check that the limiters are applied, not a benchmark: only
/// a lower bound with a fifth of slack is asserted, and the limits are set from the sizes so
/// that each step should take about half a second.
#[test]
fn rate_limits_slow_a_backup_and_a_restore_to_their_rate() {
    use shaledb::BackupEngineOptions;
    use std::time::{Duration, Instant};
    let fs = MemFileSystem::new();
    let db = open(&fs, "/db");
    write_round(&db, 1, true);
    write_round(&db, 2, false);
    // The sizes, from an unlimited backup of the same state elsewhere.
    let plain = BackupEngine::open_with_fs("/plain", Arc::new(fs.clone())).expect("open");
    let id = plain.create_backup(&db).expect("backup");
    let total = plain.list().expect("list")[0].size;
    let manifest = meta_at(&fs, "/plain", id)
        .files
        .iter()
        .filter(|f| f.name.starts_with("MANIFEST-"))
        .map(|f| f.size)
        .sum::<u64>();
    // Only the MANIFEST, written from memory, is not read from the database.
    let paced = total - manifest;
    assert!(paced > 100_000, "{paced} bytes to back up");
    let half_second = |bytes: u64| bytes * 2;
    let opts = BackupEngineOptions {
        fs: Arc::new(fs.clone()),
        backup_rate_limit: half_second(paced),
        restore_rate_limit: half_second(total),
    };
    let limited = BackupEngine::open_opt(BACKUPS, opts).expect("open");
    let least = |bytes: u64, rate: u64| Duration::from_secs_f64(0.8 * bytes as f64 / rate as f64);

    let start = Instant::now();
    let id = limited.create_backup(&db).expect("backup");
    let took = start.elapsed();
    assert_eq!(limited.list().expect("list")[0].size, total);
    assert!(
        took >= least(paced, half_second(paced)),
        "a backup of {paced} bytes at {} bytes/s took {took:?}",
        half_second(paced)
    );

    let start = Instant::now();
    let restored = restore(&limited, &fs, id, "/restored");
    let took = start.elapsed();
    assert!(
        took >= least(total, half_second(total)),
        "a restore of {total} bytes at {} bytes/s took {took:?}",
        half_second(total)
    );
    assert_eq!(contents(&restored), contents(&db));
}

fn meta_at(fs: &MemFileSystem, dir: &str, id: u64) -> BackupMeta {
    let path = format!("{dir}/meta/{id}");
    let bytes = fs.read_file_bytes(&path).expect("meta file");
    BackupMeta::decode(&bytes, Path::new(&path)).expect("decode meta")
}
