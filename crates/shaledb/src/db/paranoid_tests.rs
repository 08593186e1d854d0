//! `Options::paranoid_checks`: new tables are read back before the MANIFEST names them, and
//! open fails on a table whose size differs from the MANIFEST's record; without the option
//! neither happens (damage then shows when a read reaches the table).

use crate::error::Error;
use crate::fs::{FileSystem, FsCall, FsHook, HookedFileSystem, MemFileSystem};
use crate::options::Options;
use crate::Db;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Counts how often table files are opened for reading.
#[derive(Default)]
struct CountTableOpens(AtomicUsize);

impl FsHook for CountTableOpens {
    fn before(&self, call: FsCall<'_>) -> io::Result<()> {
        if matches!(call, FsCall::OpenRandomAccess(_)) && call.is_table() {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

fn options(fs: Arc<dyn FileSystem>, paranoid_checks: bool) -> Options {
    Options {
        fs,
        paranoid_checks,
        max_background_jobs: 1,
        ..Options::default()
    }
}

#[test]
fn flush_outputs_are_read_back_only_with_paranoid_checks() {
    for (paranoid, opens_after_flush) in [(true, 1), (false, 0)] {
        let fs = Arc::new(HookedFileSystem::new(
            Arc::new(MemFileSystem::new()),
            CountTableOpens::default(),
        ));
        let db = Db::open("/db", options(fs.clone(), paranoid)).expect("open");
        db.put(b"k", b"v").expect("put");
        db.flush().expect("flush");
        assert_eq!(
            fs.hook().0.load(Ordering::SeqCst),
            opens_after_flush,
            "paranoid_checks = {paranoid}"
        );
        // Either way the table is readable (opened now if the flush did not).
        assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
        assert_eq!(fs.hook().0.load(Ordering::SeqCst), 1);
        db.close().expect("close");
    }
}

/// A database with one table, closed; returns the table's path and size.
fn one_table(fs: &MemFileSystem) -> (PathBuf, usize) {
    let db = Db::open("/db", options(Arc::new(fs.clone()), true)).expect("open");
    for i in 0..100u32 {
        db.put(&i.to_be_bytes(), b"value").expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
    let sst = fs
        .file_names()
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("table");
    let len = fs.read_file_bytes(&sst).expect("bytes").len();
    (sst, len)
}

#[test]
fn open_fails_on_a_table_size_mismatch_with_paranoid_checks() {
    let fs = MemFileSystem::new();
    let (sst, len) = one_table(&fs);
    let original = fs.read_file_bytes(&sst).expect("bytes");
    // Extended by 10 bytes, then truncated by 10 bytes.
    let mut longer = original.clone();
    longer.extend_from_slice(&[0; 10]);
    for (bytes, at) in [(longer, len), (original[..len - 10].to_vec(), len - 10)] {
        fs.write_file_bytes(&sst, &bytes);
        match Db::open("/db", options(Arc::new(fs.clone()), true)) {
            Err(Error::Corruption {
                file,
                offset,
                detail,
            }) => {
                assert_eq!((file.as_path(), offset), (sst.as_path(), at as u64));
                assert_eq!(
                    detail,
                    format!(
                        "table is {} bytes on disk but the MANIFEST recorded {len} bytes",
                        bytes.len()
                    )
                );
            }
            Err(e) => panic!("expected corruption, got {e}"),
            Ok(_) => panic!("open accepted a table of {} bytes", bytes.len()),
        }
    }
}

#[test]
fn without_paranoid_checks_open_tolerates_a_size_mismatch() {
    let fs = MemFileSystem::new();
    let (sst, len) = one_table(&fs);
    let original = fs.read_file_bytes(&sst).expect("bytes");
    // Extra bytes past the recorded end are never read: the table works.
    let mut longer = original.clone();
    longer.extend_from_slice(&[0; 10]);
    fs.write_file_bytes(&sst, &longer);
    let db = Db::open("/db", options(Arc::new(fs.clone()), false)).expect("open");
    assert_eq!(
        db.get(&7u32.to_be_bytes()).expect("get").as_deref(),
        Some(&b"value"[..])
    );
    db.close().expect("close");
    // A truncated table opens too, but the first read reaching it fails: never "not found".
    fs.write_file_bytes(&sst, &original[..len - 10]);
    let db = Db::open("/db", options(Arc::new(fs.clone()), false)).expect("open");
    let err = db.get(&7u32.to_be_bytes()).expect_err("truncated table");
    match err {
        Error::Corruption { file, detail, .. } => {
            assert_eq!(file, sst);
            assert_eq!(detail, "file truncated while reading footer");
        }
        e => panic!("expected corruption, got {e}"),
    }
    db.close().expect("close");
}
