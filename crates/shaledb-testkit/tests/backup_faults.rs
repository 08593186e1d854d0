//! `BackupEngine` under crashes and IO errors. For each of `create_backup`, `restore` and
//! `purge_old`, every mutating file-system operation it performs is in turn
//! - the last one before a power loss (the machine halts there, then unsynced data and
//!   directory entries are lost): after reopening, the backups listed are the earlier ones
//!   plus, possibly, the interrupted one complete; each verifies and restores to exactly the
//!   database it was taken of, and `shared/` holds exactly the files they list;
//! - failed with EIO: the call fails, leaves nothing behind (no listed backup, no file in
//!   `shared/` nor a directory restored into), and the next call succeeds.

use shaledb::fs::{FileSystem, MemFileSystem};
use shaledb::internals::BackupMeta;
use shaledb::{BackupEngine, CfOptions, Db, Options, ReadOptions};
use shaledb_testkit::{Fault, FaultFs, Target};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

const BACKUPS: &str = "/backups";

fn options(fs: &MemFileSystem) -> Options {
    Options {
        create_missing_column_families: true,
        write_buffer_size: 64 << 10,
        // The database's own background work would not change the counts, but keeps them
        // reproducible.
        disable_auto_compactions: true,
        ..Default::default()
    }
    .with_fs(fs.clone())
}

fn families(fs: &MemFileSystem) -> Vec<(&'static str, CfOptions)> {
    let base = options(fs).cf_options();
    let blobs = CfOptions {
        enable_blob_files: true,
        min_blob_size: 64,
        ..base.clone()
    };
    vec![("default", base), ("blobs", blobs)]
}

type Contents = Vec<Vec<(Vec<u8>, Vec<u8>)>>;

fn contents(db: &Db) -> Contents {
    ["default", "blobs"]
        .iter()
        .map(|name| {
            let cf = db.cf(name).expect("family");
            let mut it = db.iter_cf(&cf, &ReadOptions::default()).expect("iterator");
            let mut out = Vec::new();
            it.seek_to_first();
            while it.valid() {
                out.push((it.key().to_vec(), it.value().to_vec()));
                it.next();
            }
            it.status().expect("scan");
            out
        })
        .collect()
}

/// Writes round `round` to both families (a table and a blob file each when flushed).
fn write_round(db: &Db, round: u32, flush: bool) {
    for name in ["default", "blobs"] {
        let cf = db.cf(name).expect("family");
        for i in 0..120 {
            let mut v = format!("v{i}-{round}-").into_bytes();
            v.resize(10 + (i as usize % 4) * 40, b'y');
            db.put_cf(&cf, format!("k{i:04}"), v).expect("put");
        }
        db.delete_range_cf(&cf, format!("k{:04}", round), format!("k{:04}", round + 5))
            .expect("delete range");
        if flush {
            db.flush_cf(&cf).expect("flush");
        }
    }
}

/// A database, a backup directory on `fault` (over the same memory), and the contents each
/// backup taken so far holds.
struct Setup {
    mem: MemFileSystem,
    fault: FaultFs,
    db: Db,
    engine: BackupEngine,
    expected: BTreeMap<u64, Contents>,
}

/// `backups` backups taken, each after one more round of writes (the last unflushed), then
/// one more round written and flushed (what the next backup adds).
fn setup(backups: u32) -> Setup {
    let mem = MemFileSystem::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open_cf("/db", options(&mem), families(&mem)).expect("open");
    let engine = BackupEngine::open_with_fs(BACKUPS, fault.as_dyn()).expect("engine");
    let mut expected = BTreeMap::new();
    for round in 0..backups {
        write_round(&db, round, true);
        write_round(&db, round + 100, false);
        let id = engine.create_backup(&db).expect("backup");
        expected.insert(id, contents(&db));
    }
    write_round(&db, 50, true);
    write_round(&db, 150, false);
    Setup {
        mem,
        fault,
        db,
        engine,
        expected,
    }
}

fn shared_of(mem: &MemFileSystem, id: u64) -> BTreeSet<String> {
    let path = format!("{BACKUPS}/meta/{id}");
    let bytes = mem.read_file_bytes(&path).expect("meta file");
    BackupMeta::decode(&bytes, Path::new(&path))
        .expect("meta")
        .files
        .iter()
        .filter(|f| f.is_shared())
        .map(|f| f.shared_name())
        .collect()
}

fn names(mem: &MemFileSystem, dir: &str) -> BTreeSet<String> {
    mem.list_dir(Path::new(dir))
        .map(|v| v.into_iter().collect())
        .unwrap_or_default()
}

/// Every listed backup (each one of `expected`'s) verifies and restores to what it was taken
/// of. Returns the listed ids.
fn check_listed(
    mem: &MemFileSystem,
    engine: &BackupEngine,
    expected: &BTreeMap<u64, Contents>,
    what: &str,
) -> Vec<u64> {
    let listed: Vec<u64> = engine.list().expect("list").iter().map(|b| b.id).collect();
    for &id in &listed {
        let want = expected
            .get(&id)
            .unwrap_or_else(|| panic!("{what}: backup {id} listed but never taken"));
        engine
            .verify(id)
            .unwrap_or_else(|e| panic!("{what}: verify {id}: {e}"));
        let to = format!("/restored-{id}");
        engine
            .restore(id, &to)
            .unwrap_or_else(|e| panic!("{what}: restore {id}: {e}"));
        let db = Db::open_cf(&to, options(mem), families(mem)).expect("open restored");
        assert_eq!(&contents(&db), want, "{what}: backup {id}");
        drop(db);
        remove_tree(mem, &to);
    }
    listed
}

/// [`check_listed`], and the backup directory holds nothing else: `shared/` exactly the
/// files the listed backups list, `private/` and `meta/` exactly theirs.
fn check_backups(
    mem: &MemFileSystem,
    engine: &BackupEngine,
    expected: &BTreeMap<u64, Contents>,
    what: &str,
) -> Vec<u64> {
    let listed = check_listed(mem, engine, expected, what);
    let shared: BTreeSet<String> = listed.iter().flat_map(|&id| shared_of(mem, id)).collect();
    assert_eq!(
        names(mem, &format!("{BACKUPS}/shared")),
        shared,
        "{what}: shared files"
    );
    let ids: BTreeSet<String> = listed.iter().map(|id| id.to_string()).collect();
    assert_eq!(
        names(mem, &format!("{BACKUPS}/private")),
        ids,
        "{what}: private dirs"
    );
    assert_eq!(
        names(mem, &format!("{BACKUPS}/meta")),
        ids,
        "{what}: meta files"
    );
    listed
}

fn remove_tree(mem: &MemFileSystem, dir: &str) {
    for n in names(mem, dir) {
        mem.remove_file(&Path::new(dir).join(n)).expect("remove");
    }
    mem.remove_dir(Path::new(dir)).expect("remove dir");
}

/// Halts the machine after `k` more mutating operations (the fault file system counts from
/// its creation).
fn halt_after(fault: &FaultFs, k: u64) {
    if k == 0 {
        fault.halt();
    } else {
        fault.halt_after_mutations(fault.mutations() + k);
    }
}

/// Counts the mutating operations `op` performs on an undisturbed `setup(backups)`.
fn count_mutations(backups: u32, op: &dyn Fn(&Setup)) -> u64 {
    let s = setup(backups);
    let before = s.fault.mutations();
    op(&s);
    let n = s.fault.mutations() - before;
    assert!(n > 5, "{n} mutating operations");
    n
}

/// Halts the machine after each of `op`'s mutating operations in turn (and after the last,
/// when `op` has returned), loses power, and checks the backups: each listed one intact,
/// nothing else in the directory; once `op` has returned, the backups listed are `done`.
fn crash_at_every_point(
    backups: u32,
    name: &str,
    op: &dyn Fn(&Setup),
    extra: &dyn Fn(&mut Setup),
    done: &[u64],
) {
    let total = count_mutations(backups, op);
    for k in 0..=total {
        for keep_prefix in [false, true] {
            let mut s = setup(backups);
            extra(&mut s);
            halt_after(&s.fault, k);
            op(&s);
            let Setup {
                mem,
                db,
                engine,
                expected,
                ..
            } = s;
            drop(engine);
            drop(db);
            if keep_prefix {
                mem.crash_keep_unsynced_prefix(k);
            } else {
                mem.crash();
            }
            let what = format!(
                "{name}: power loss after mutation {k} of {total} (torn tails kept: {keep_prefix})"
            );
            let engine = BackupEngine::open_with_fs(BACKUPS, Arc::new(mem.clone()))
                .unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            let listed = check_backups(&mem, &engine, &expected, &what);
            if k == total {
                assert_eq!(listed, done, "{what}");
            }
        }
    }
}

/// Fails each of `op`'s mutating operations in turn with EIO; `op` must fail, and `check`
/// sees the result.
fn fail_every_operation(
    backups: u32,
    op: &dyn Fn(&Setup) -> shaledb::Result<()>,
    check: &dyn Fn(&Setup, &str),
) {
    let total = count_mutations(backups, &|s| op(s).expect("undisturbed"));
    for nth in 1..=total {
        let s = setup(backups);
        s.fault.fail_nth(Target::Mutating, nth, Fault::Eio);
        let res = op(&s);
        s.fault.clear_rules();
        let what = format!("EIO at mutation {nth} of {total}");
        assert!(res.is_err(), "{what}: the call succeeded");
        check(&s, &what);
    }
}

#[test]
fn create_backup_crashed_at_every_point_keeps_earlier_backups() {
    crash_at_every_point(
        2,
        "create_backup",
        &|s| {
            let _ = s.engine.create_backup(&s.db);
        },
        // The interrupted backup, if it made it, holds what the database holds now.
        &|s| {
            let id = s.expected.keys().last().copied().unwrap_or(0) + 1;
            s.expected.insert(id, contents(&s.db));
        },
        &[1, 2, 3],
    );
}

#[test]
fn create_backup_failing_at_every_point_leaves_nothing() {
    fail_every_operation(
        1,
        &|s| s.engine.create_backup(&s.db).map(|_| ()),
        &|s, what| {
            check_backups(&s.mem, &s.engine, &s.expected, what);
            let id = s
                .engine
                .create_backup(&s.db)
                .expect("a backup after the fault");
            s.engine.verify(id).expect("verify");
        },
    );
}

#[test]
fn restore_crashed_at_every_point_harms_no_backup() {
    let restore = |s: &Setup| {
        let _ = s.engine.restore(2, "/target");
    };
    let total = count_mutations(2, &restore);
    for k in 0..=total {
        let s = setup(2);
        halt_after(&s.fault, k);
        restore(&s);
        let Setup {
            mem,
            db,
            engine,
            expected,
            ..
        } = s;
        drop((engine, db));
        mem.crash();
        let what = format!("restore: power loss after mutation {k} of {total}");
        // What is in the target is either nothing that opens as a database with data
        // missing: Db::open refuses it, or it holds no database file yet, or it is complete.
        let files = names(&mem, "/target");
        match Db::open_cf("/target", options(&mem), families(&mem)) {
            Err(e) => assert!(e.is_corruption(), "{what}: {e}"),
            Ok(db) => {
                let got = contents(&db);
                // A finished restore survives the power loss whole.
                assert!(
                    got == expected[&2] || (files.is_empty() && k < total),
                    "{what}: a partial restore opened ({files:?})"
                );
            }
        }
        let engine = BackupEngine::open_with_fs(BACKUPS, Arc::new(mem.clone())).expect("reopen");
        check_backups(&mem, &engine, &expected, &what);
    }
}

#[test]
fn restore_failing_at_every_point_leaves_no_directory() {
    fail_every_operation(2, &|s| s.engine.restore(2, "/target"), &|s, what| {
        assert!(!s.mem.exists(Path::new("/target")), "{what}: files left");
        check_backups(&s.mem, &s.engine, &s.expected, what);
    });
}

#[test]
fn purge_crashed_at_every_point_keeps_whole_backups() {
    crash_at_every_point(
        3,
        "purge_old",
        &|s| {
            let _ = s.engine.purge_old(1);
        },
        &|_| {},
        &[3],
    );
}

#[test]
fn purge_failing_at_every_point_keeps_whole_backups_and_can_be_retried() {
    fail_every_operation(3, &|s| s.engine.purge_old(1), &|s, what| {
        // A purge that failed may leave files it had still to remove: the next one does.
        check_listed(&s.mem, &s.engine, &s.expected, what);
        s.engine.purge_old(1).expect("purge again");
        let ids: Vec<u64> = s
            .engine
            .list()
            .expect("list")
            .iter()
            .map(|b| b.id)
            .collect();
        assert_eq!(ids, [3], "{what}");
        check_backups(&s.mem, &s.engine, &s.expected, what);
    });
}
