//! Compaction filters: removed keys read as deleted and hide older versions, changed values
//! are read back, values a snapshot can see are left alone, and each family has its own.

use shaledb::fs::MemFileSystem;
use shaledb::{CfOptions, CompactionFilter, Db, Decision, Options, ReadOptions};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Removes "tmp*" keys, upper-cases the values of "up*" keys, counts its calls.
#[derive(Default)]
struct Filter {
    calls: AtomicUsize,
}

impl CompactionFilter for Filter {
    fn name(&self) -> &str {
        "test-filter"
    }
    fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> Decision {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if key.starts_with(b"tmp") {
            Decision::Remove
        } else if key.starts_with(b"up") {
            Decision::Change(value.to_ascii_uppercase())
        } else {
            Decision::Keep
        }
    }
}

fn opts(filter: Arc<Filter>) -> Options {
    Options {
        compaction_filter: Some(filter),
        ..Default::default()
    }
    .with_fs(MemFileSystem::new())
}

fn get(db: &Db, key: &[u8]) -> Option<Vec<u8>> {
    db.get(key).expect("get").map(|v| v.to_vec())
}

#[test]
fn removed_and_changed_values_after_compaction() {
    let filter = Arc::new(Filter::default());
    let db = Db::open("/filter", opts(filter.clone())).expect("open");
    // An older version below the removed one must not come back.
    db.put(b"tmp1", b"old").expect("put");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact"); // filter removes it already
    assert_eq!(get(&db, b"tmp1"), None);
    db.put(b"tmp2", b"old").expect("put");
    db.flush().expect("flush");
    db.put(b"tmp2", b"new").expect("put");
    db.put(b"up1", b"abc").expect("put");
    db.put(b"keep", b"xyz").expect("put");
    assert_eq!(
        get(&db, b"up1"),
        Some(b"abc".to_vec()),
        "memtable: not filtered yet"
    );
    db.compact_range(None, None).expect("compact");
    assert_eq!(get(&db, b"tmp2"), None);
    assert_eq!(get(&db, b"up1"), Some(b"ABC".to_vec()));
    assert_eq!(get(&db, b"keep"), Some(b"xyz".to_vec()));
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut keys = Vec::new();
    while it.valid() {
        keys.push(it.key().to_vec());
        it.next();
    }
    assert_eq!(keys, vec![b"keep".to_vec(), b"up1".to_vec()]);
    assert!(filter.calls.load(Ordering::Relaxed) >= 4);
}

#[test]
fn values_a_snapshot_sees_are_not_filtered() {
    let filter = Arc::new(Filter::default());
    let db = Db::open("/filter-snap", opts(filter)).expect("open");
    db.put(b"tmp", b"v").expect("put");
    db.put(b"up", b"v").expect("put");
    let snap = db.snapshot();
    db.compact_range(None, None).expect("compact");
    let ro = ReadOptions {
        snapshot: Some(snap.clone()),
        ..Default::default()
    };
    assert_eq!(
        db.get_opt(&ro, b"tmp").expect("get").as_deref(),
        Some(&b"v"[..])
    );
    assert_eq!(
        get(&db, b"tmp"),
        Some(b"v".to_vec()),
        "protected by the snapshot"
    );
    assert_eq!(get(&db, b"up"), Some(b"v".to_vec()));
    drop(ro);
    drop(snap);
    db.compact_range(None, None).expect("compact");
    assert_eq!(get(&db, b"tmp"), None);
    assert_eq!(get(&db, b"up"), Some(b"V".to_vec()));
}

#[test]
fn each_family_uses_its_own_filter() {
    let filter = Arc::new(Filter::default());
    let db = Db::open(
        "/filter-cf",
        Options::default().with_fs(MemFileSystem::new()),
    )
    .expect("open");
    let cf = db
        .create_cf(
            "filtered",
            CfOptions {
                compaction_filter: Some(filter),
                ..Default::default()
            },
        )
        .expect("create");
    db.put(b"tmp", b"v").expect("put");
    db.put_cf(&cf, b"tmp", b"v").expect("put");
    db.compact_range(None, None).expect("compact");
    db.compact_range_cf(&cf, None, None).expect("compact");
    assert_eq!(get(&db, b"tmp"), Some(b"v".to_vec()));
    assert_eq!(db.get_cf(&cf, b"tmp").expect("get"), None);
}
