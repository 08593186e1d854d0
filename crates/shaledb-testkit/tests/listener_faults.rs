//! Event listeners under injected IO errors (FaultFs): a failed flush, a failed WAL sync and
//! a failed MANIFEST sync each give exactly one `on_background_error`, with its reason.

use shaledb::fs::MemFileSystem;
use shaledb::{
    BackgroundErrorInfo, BackgroundErrorReason, Db, EventListener, FlushJobInfo, Options,
    WriteOptions,
};
use shaledb_testkit::{Fault, FaultFs, OpKind, Target};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Errors {
    seen: Mutex<Vec<BackgroundErrorReason>>,
    flushes: Mutex<u64>,
}

impl EventListener for Errors {
    fn on_background_error(&self, info: &BackgroundErrorInfo) {
        assert!(
            info.error.to_string().contains("FaultFs: injected"),
            "{}",
            info.error
        );
        self.seen.lock().expect("lock").push(info.reason);
    }
    fn on_flush_completed(&self, _: &FlushJobInfo) {
        *self.flushes.lock().expect("lock") += 1;
    }
}

fn open(fs: &FaultFs, listener: &Arc<Errors>) -> Db {
    let opts = Options {
        fs: fs.as_dyn(),
        listeners: vec![listener.clone()],
        max_background_jobs: 1,
        ..Default::default()
    };
    Db::open("/db", opts).expect("open")
}

#[test]
fn each_failure_that_stops_writes_is_one_background_error_event() {
    // The syncs of a flush of the only family: the table, the MANIFEST (with several
    // families the full WAL the flush switched from comes between them, db/closed_wals.rs).
    // The table's fails: the flush fails.
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let errors = Arc::new(Errors::default());
    let db = open(&fs, &errors);
    db.put(b"k", b"v").expect("put");
    fs.fail_nth(Target::Kind(OpKind::Sync), 1, Fault::Eio);
    assert!(db.flush().is_err());
    assert!(db.put(b"k2", b"v").is_err());
    assert!(db.flush().is_err());
    assert_eq!(
        *errors.seen.lock().expect("lock"),
        [BackgroundErrorReason::Flush]
    );
    assert_eq!(*errors.flushes.lock().expect("lock"), 0);
    drop(db);

    // A synced write's WAL sync fails.
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let errors = Arc::new(Errors::default());
    let db = open(&fs, &errors);
    fs.fail_nth(Target::Kind(OpKind::Sync), 1, Fault::Eio);
    let sync = WriteOptions::default().with_sync(true);
    assert!(db.put_opt(&sync, b"k", b"v").is_err());
    assert!(db.put(b"k2", b"v").is_err());
    assert_eq!(
        *errors.seen.lock().expect("lock"),
        [BackgroundErrorReason::WriteWal]
    );
    drop(db);

    // The MANIFEST sync of a flush fails.
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let errors = Arc::new(Errors::default());
    let db = open(&fs, &errors);
    db.put(b"k", b"v").expect("put");
    fs.fail_nth(Target::Kind(OpKind::Sync), 2, Fault::Eio);
    assert!(db.flush().is_err());
    assert_eq!(
        *errors.seen.lock().expect("lock"),
        [BackgroundErrorReason::Manifest]
    );
    drop(db);

    // With a second family, the sync of the WAL the flush switched from fails: a WAL
    // error, final.
    let fs = FaultFs::new(Arc::new(MemFileSystem::new()));
    let errors = Arc::new(Errors::default());
    let db = open(&fs, &errors);
    db.create_cf("second", shaledb::CfOptions::default())
        .expect("create family");
    db.put(b"k", b"v").expect("put");
    fs.fail_nth(Target::Kind(OpKind::Sync), 2, Fault::Eio);
    assert!(db.flush().is_err());
    assert!(db.put(b"k2", b"v").is_err());
    assert_eq!(
        *errors.seen.lock().expect("lock"),
        [BackgroundErrorReason::WriteWal]
    );
    assert_eq!(*errors.flushes.lock().expect("lock"), 0);
}
