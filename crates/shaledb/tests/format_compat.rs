//! A database written by the format before column families and merge operands
//! (tests/data/format-v1, see its README) opens with the current code, reads back exactly, and
//! takes the new record types afterwards.

mod common;

use shaledb::merge_operators::UInt64Add;
use shaledb::{CfOptions, Db, Options, ReadOptions};
use std::sync::Arc;

fn expected(i: u32) -> Option<Vec<u8>> {
    match i {
        1 => None,
        2 => Some(b"overwritten in the WAL".to_vec()),
        i if i % 7 == 0 => None,
        i => Some(format!("value{i}-{}", "x".repeat((i % 13) as usize)).into_bytes()),
    }
}

fn check_old_data(db: &Db) {
    for i in 0..2000u32 {
        let got = db
            .get(format!("key{i:05}"))
            .expect("get")
            .map(|v| v.to_vec());
        assert_eq!(got, expected(i), "key{i:05}");
    }
    assert_eq!(db.get(b"wal-a").expect("get").as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"wal-b").expect("get").as_deref(), Some(&b"2"[..]));
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().expect("scan");
    assert_eq!(n, 2000 - 286 - 1 + 2);
}

#[test]
fn a_database_of_the_previous_format_opens_and_takes_new_records() {
    let (_dir, path) = common::copy_fixture("tests/data/format-v1");
    assert_eq!(
        Db::list_cf(&path, &Options::default()).expect("list"),
        ["default"]
    );
    {
        let db = Db::open(&path, Options::default()).expect("open the old database");
        check_old_data(&db);
        // New record types on top: a family, merges, single deletes.
        let cf = db
            .create_cf(
                "counters",
                CfOptions {
                    merge_operator: Some(Arc::new(UInt64Add)),
                    ..Default::default()
                },
            )
            .expect("create_cf");
        db.merge_cf(&cf, b"c", 5u64.to_le_bytes()).expect("merge");
        db.put(b"sd", b"once").expect("put");
        db.single_delete(b"sd").expect("single delete");
        db.compact_range(None, None)
            .expect("compact the old table with new code");
        check_old_data(&db);
    }
    let counters = CfOptions {
        merge_operator: Some(Arc::new(UInt64Add)),
        ..Default::default()
    };
    let db = Db::open_cf(&path, Options::default(), [("counters", counters)]).expect("reopen");
    check_old_data(&db);
    let cf = db.cf("counters").expect("counters");
    assert_eq!(
        db.get_cf(&cf, b"c").expect("get").as_deref(),
        Some(&5u64.to_le_bytes()[..])
    );
    assert_eq!(db.get(b"sd").expect("get"), None);
}

/// Values of tests/data/format-v4-blob-files (see its README).
fn expected_blob_row(i: u32) -> Option<Vec<u8>> {
    match i {
        1 => Some(b"in the WAL".to_vec()),
        i if i % 9 == 0 => None,
        i => Some(format!("blob{i}-{}", "y".repeat((60 + i % 50) as usize)).into_bytes()),
    }
}

fn check_blob_rows(db: &Db, what: &str) {
    for i in 0..600u32 {
        let got = db
            .get(format!("key{i:05}"))
            .expect("get")
            .map(|v| v.to_vec());
        assert_eq!(got, expected_blob_row(i), "{what}: key{i:05}");
    }
    let scanned = common::scan(db, &ReadOptions::default(), false);
    let want: Vec<(Vec<u8>, Vec<u8>)> = (0..600u32)
        .filter_map(|i| expected_blob_row(i).map(|v| (format!("key{i:05}").into_bytes(), v)))
        .collect();
    assert!(scanned == want, "{what}: scan differs");
}

/// Blob references written before a `BlobIndex` entry could carry a write time (a family with
/// a TTL) still decode, read and compact.
#[test]
fn a_database_with_blob_files_of_the_previous_format_opens_and_reads_back() {
    let (_dir, path) = common::copy_fixture("tests/data/format-v4-blob-files");
    let opts = Options {
        enable_blob_files: true,
        min_blob_size: 64,
        blob_file_size: 16 << 10,
        ..Default::default()
    };
    {
        let db = Db::open(&path, opts.clone()).expect("open the old database");
        check_blob_rows(&db, "as written");
        db.compact_range(None::<&[u8]>, None::<&[u8]>)
            .expect("compact with the current code");
        check_blob_rows(&db, "compacted");
    }
    let db = Db::open(&path, opts).expect("reopen");
    check_blob_rows(&db, "reopened");
}

/// A database whose WALs hold marker records (tests/data/format-v5-wal-markers, see its
/// README): two live WALs, the second starting with a TakesOver and a Synced marker. It opens
/// and reads back exactly; the same WALs with the older one cut short are corruption, since
/// it was synced (the newer one records it, and "default" flushed past it).
#[test]
fn a_database_with_wal_markers_opens_and_its_markers_are_evidence() {
    use shaledb::internals::{LogRead, LogReader, WalMarker};
    let (_dir, path) = common::copy_fixture("tests/data/format-v5-wal-markers");
    let newer = path.join("000004.log");
    let fs = shaledb::fs::default_fs();
    let mut reader = LogReader::new(fs.open_sequential(&newer).expect("open"), newer.clone());
    let mut markers = Vec::new();
    while let LogRead::Record { data, .. } = reader.read().expect("read") {
        if let Some(m) = WalMarker::decode(&data) {
            markers.push(m.expect("a valid marker"));
        }
    }
    let older_len = std::fs::metadata(path.join("000002.log"))
        .expect("len")
        .len();
    assert_eq!(
        markers,
        [
            WalMarker::TakesOver {
                from: 2,
                length: older_len
            },
            WalMarker::Synced { through: 2 }
        ]
    );

    let families = || {
        [
            ("default", CfOptions::default()),
            ("side", CfOptions::default()),
        ]
    };
    let cut = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(&path).expect("dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), cut.path().join(entry.file_name())).expect("copy");
    }
    let db = Db::open_cf(&path, Options::default(), families()).expect("open");
    let side = db.cf("side").expect("side");
    for i in 0..120u32 {
        let got = db.get(format!("key{i:03}")).expect("get");
        assert_eq!(
            got.as_deref(),
            Some(format!("value{i}").as_bytes()),
            "key{i:03}"
        );
        let got = db.get_cf(&side, format!("side{i:03}")).expect("get");
        let want = (i < 100).then(|| format!("s{i}").into_bytes());
        assert_eq!(got.map(|v| v.to_vec()), want, "side{i:03}");
    }
    drop(db);

    let older = cut.path().join("000002.log");
    let bytes = std::fs::read(&older).expect("read");
    std::fs::write(&older, &bytes[..bytes.len() - 10]).expect("cut");
    match Db::open_cf(cut.path(), Options::default(), families()) {
        Err(shaledb::Error::Corruption { file, detail, .. }) => {
            assert_eq!(file, older);
            // The family flushed past it proves the sync too (checked first).
            assert!(detail.contains("in a WAL that was synced"), "{detail}");
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("a cut synced WAL was accepted"),
    }
}
