//! Direct IO (`use_direct_reads`, `use_direct_io_for_flush_and_compaction`): tables go
//! through the filesystem's direct calls and nothing else, the data reads back the same on
//! the in-memory filesystem (which enforces the kernel's alignment rules) and on the real one,
//! and a filesystem without direct IO is refused at open with a sentence naming the option.
//! The crash, power-loss and IO-error suites in shaledb-testkit run in direct mode too.

mod common;

use shaledb::fs::{FileSystem, FsCall, FsHook, HookedFileSystem, MemFileSystem};
use shaledb::{Db, Error, Options};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Counts how table files are opened; `direct: false` refuses the direct calls, as a
/// filesystem without O_DIRECT does.
#[derive(Default)]
struct TableCounting {
    direct: bool,
    buffered_table_reads: AtomicUsize,
    buffered_table_writes: AtomicUsize,
    direct_table_reads: AtomicUsize,
    direct_table_writes: AtomicUsize,
}

impl TableCounting {
    fn new(direct: bool) -> Arc<HookedFileSystem<TableCounting>> {
        let hook = TableCounting {
            direct,
            ..TableCounting::default()
        };
        Arc::new(HookedFileSystem::new(Arc::new(MemFileSystem::new()), hook))
    }
}

impl FsHook for TableCounting {
    fn before(&self, call: FsCall<'_>) -> io::Result<()> {
        let direct = matches!(
            call,
            FsCall::CreateDirect(_) | FsCall::OpenRandomAccessDirect(_)
        );
        if direct && !self.direct {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "no O_DIRECT here",
            ));
        }
        let counter = match call {
            FsCall::Create(_) => &self.buffered_table_writes,
            FsCall::OpenRandomAccess(_) => &self.buffered_table_reads,
            FsCall::CreateDirect(_) => &self.direct_table_writes,
            FsCall::OpenRandomAccessDirect(_) => &self.direct_table_reads,
            _ => return Ok(()),
        };
        if call.is_table() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

fn small(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        fs,
        ..Options::default()
    }
    .with_write_buffer_size(16 << 10)
    .with_block_size(512)
    .with_target_file_size_base(32 << 10)
    .with_max_bytes_for_level_base(64 << 10)
    .with_level0_file_num_compaction_trigger(2)
    .with_use_direct_reads(true)
    .with_use_direct_io_for_flush_and_compaction(true)
    // Odd-sized and smaller than a block: readahead refills land off the alignment.
    .with_compaction_readahead_size(5000)
}

/// Writes, overwrites and deletes 3000 keys with flushes and compactions; returns the model.
fn load(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for i in 0..6000u32 {
        let key = format!("key{:05}", (i * 7919) % 3000).into_bytes();
        if i % 11 == 0 {
            db.delete(&key).expect("delete");
            model.remove(&key);
        } else {
            let value = format!("value-{i}-{}", "v".repeat((i % 97) as usize)).into_bytes();
            db.put(&key, &value).expect("put");
            model.insert(key, value);
        }
    }
    db.flush().expect("flush");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    model
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    common::check_keys_and_scan(db, model, 3000);
}

#[test]
fn tables_go_through_direct_io_only_and_read_back_after_reopen() {
    let fs = TableCounting::new(true);
    let dir = Path::new("/direct");
    let db = Db::open(dir, small(fs.clone())).expect("open");
    let model = load(&db);
    check(&db, &model);
    drop(db);
    let db = Db::open(dir, small(fs.clone())).expect("reopen");
    check(&db, &model);
    assert!(fs.hook().direct_table_writes.load(Ordering::SeqCst) > 2);
    assert!(fs.hook().direct_table_reads.load(Ordering::SeqCst) > 2);
    assert_eq!(fs.hook().buffered_table_writes.load(Ordering::SeqCst), 0);
    assert_eq!(fs.hook().buffered_table_reads.load(Ordering::SeqCst), 0);
    drop(db);

    // Written directly, read buffered: the files are the same files.
    let buffered = small(fs.clone())
        .with_use_direct_reads(false)
        .with_use_direct_io_for_flush_and_compaction(false);
    let db = Db::open(dir, buffered).expect("reopen buffered");
    check(&db, &model);
    assert!(fs.hook().buffered_table_reads.load(Ordering::SeqCst) > 0);
}

#[test]
fn a_filesystem_without_direct_io_is_refused_at_open() {
    for (reads, writes, option) in [
        (true, false, "use_direct_reads"),
        (false, true, "use_direct_io_for_flush_and_compaction"),
    ] {
        let fs = TableCounting::new(false);
        let opts = small(fs.clone())
            .with_use_direct_reads(reads)
            .with_use_direct_io_for_flush_and_compaction(writes);
        match Db::open(Path::new("/refused"), opts) {
            Err(Error::InvalidArgument(msg)) => {
                assert!(msg.starts_with(&format!("{option} is set")), "{msg}");
                assert!(msg.contains("no O_DIRECT here"), "{msg}");
            }
            other => panic!("{option}: expected InvalidArgument, got {:?}", other.err()),
        }
    }
}

/// The real filesystem, where the kernel checks alignment itself (skipped where the
/// temporary directory refuses O_DIRECT).
#[test]
fn direct_io_on_the_real_filesystem() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let opts = small(shaledb::fs::default_fs());
    let db = match Db::open(&dir, opts.clone()) {
        Ok(db) => db,
        Err(Error::InvalidArgument(msg)) if msg.contains("refuses direct IO") => return,
        Err(e) => panic!("open: {e}"),
    };
    let model = load(&db);
    check(&db, &model);
    drop(db);
    let db = Db::open(&dir, opts).expect("reopen");
    check(&db, &model);
}
