//! Iterators read ahead in blob files whose records they read in order, and only there: reads
//! and bytes read from blob files are counted through a hooked file system.

mod common;

use common::CountReads;
use shaledb::fs::{FileSystem, HookedFileSystem, MemFileSystem};
use shaledb::{Db, Options, ReadOptions};
use std::collections::BTreeMap;
use std::path::Path;

use std::sync::Arc;

type Fs = Arc<HookedFileSystem<CountReads>>;

/// Bytes of a blob record's header (docs/format/blob.md).
const RECORD_HEADER: u64 = 17;

fn open() -> (Db, Fs) {
    let fs = Arc::new(HookedFileSystem::new(
        Arc::new(MemFileSystem::new()),
        CountReads::of("blob"),
    ));
    let opts = Options {
        create_if_missing: true,
        enable_blob_files: true,
        min_blob_size: 100,
        // No compactions: the files stay as the test wrote them.
        disable_auto_compactions: true,
        fs: fs.clone(),
        ..Options::default()
    };
    (Db::open("/db", opts).expect("open"), fs)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("value {i} round {round} ").into_bytes();
    v.resize(500 + (i as usize * 7) % 400, b'a' + (i % 26) as u8);
    v
}

/// Scans everything forward, checking every value against `model`; returns the blob reads
/// and bytes the scan took.
fn scan(db: &Db, fs: &Fs, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> (u64, u64) {
    let before = fs.hook().now();
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut expected = model.iter();
    while it.valid() {
        let (k, v) = expected.next().expect("more keys than the model");
        assert_eq!(it.key(), k.as_slice());
        assert_eq!(it.try_value().expect("value"), v.as_slice());
        it.next();
    }
    it.status().expect("scan");
    assert!(expected.next().is_none(), "fewer keys than the model");
    let after = fs.hook().now();
    (after.0 - before.0, after.1 - before.1)
}

/// Bytes of the blob records of `model`'s values (header, key, value).
fn needed_bytes(model: &BTreeMap<Vec<u8>, Vec<u8>>) -> u64 {
    model
        .iter()
        .map(|(k, v)| RECORD_HEADER + k.len() as u64 + v.len() as u64)
        .sum()
}

#[test]
fn a_scan_of_blobs_written_in_key_order_reads_ahead() {
    let (db, fs) = open();
    let mut model = BTreeMap::new();
    for i in 0..3000 {
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    db.flush().expect("flush");
    let (reads, bytes) = scan(&db, &fs, &model);
    // ~2 MB of records: a few dozen reads (8 KiB windows doubling to 256 KiB), not 3000.
    assert!(reads < 40, "{reads} reads for {} records", model.len());
    let needed = needed_bytes(&model);
    assert!(
        bytes >= needed && bytes <= needed + 256 * 1024,
        "{bytes} bytes read for {needed}"
    );
}

#[test]
fn interleaved_files_each_read_ahead() {
    let (db, fs) = open();
    let mut model = BTreeMap::new();
    // Four flushes of every fourth key: consecutive keys in different files, each file's
    // records still in key order.
    for f in 0..4 {
        for i in (f..2000).step_by(4) {
            db.put(key(i), value(i, 0)).expect("put");
            model.insert(key(i), value(i, 0));
        }
        db.flush().expect("flush");
    }
    let (reads, bytes) = scan(&db, &fs, &model);
    assert!(reads < 80, "{reads} reads for {} records", model.len());
    let needed = needed_bytes(&model);
    assert!(
        bytes <= needed + 4 * 256 * 1024,
        "{bytes} read for {needed}"
    );
}

#[test]
fn overwritten_keys_leave_gaps_the_windows_read_over() {
    let (db, fs) = open();
    let mut model = BTreeMap::new();
    for i in 0..2000 {
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    db.flush().expect("flush");
    // A second file overwriting every third key: the first file's records are read with
    // gaps, the second's in order.
    for i in (0..2000).step_by(3) {
        db.put(key(i), value(i, 1)).expect("put");
        model.insert(key(i), value(i, 1));
    }
    db.flush().expect("flush");
    let (reads, bytes) = scan(&db, &fs, &model);
    assert!(reads < 60, "{reads} reads for {} records", model.len());
    // The garbage read over is at most the overwritten records: within twice what is needed.
    let needed = needed_bytes(&model);
    assert!(bytes <= 2 * needed, "{bytes} read for {needed}");
}

/// `files` blob files, file `f` holding every `files`-th key from `f`: a key-order scan reads
/// them round robin (the shape random writes leave).
fn interleaved_files(files: u64) -> (Db, Fs, BTreeMap<Vec<u8>, Vec<u8>>) {
    let (db, fs) = open();
    let mut model = BTreeMap::new();
    for f in 0..files {
        for i in (f..2000).step_by(files as usize) {
            db.put(key(i), value(i, 0)).expect("put");
            model.insert(key(i), value(i, 0));
        }
        db.flush().expect("flush");
    }
    // Blob files are opened (header and footer read) by a first read of each.
    for f in 0..files {
        db.get(key(f)).expect("get");
    }
    (db, fs, model)
}

#[test]
fn twenty_files_read_round_robin_are_each_read_ahead() {
    let (db, fs, model) = interleaved_files(20);
    let (reads, bytes) = scan(&db, &fs, &model);
    // 100 records per file: two alone, then windows of 8 KiB and up to the file's share.
    assert!(
        reads <= 20 * 12,
        "{reads} reads for {} records",
        model.len()
    );
    let needed = needed_bytes(&model);
    assert!(bytes <= needed + (1 << 20), "{bytes} read for {needed}");
}

#[test]
fn scattered_reads_read_each_record_alone() {
    // More files than an iterator follows (64), so a scan never reads ahead; every record
    // is one read of exactly its bytes.
    let (db, fs, model) = interleaved_files(80);
    let needed = needed_bytes(&model);
    assert_eq!(scan(&db, &fs, &model), (2000, needed));
}

#[test]
fn random_seeks_read_each_record_alone() {
    // One file of 2000 records (a read's neighbour within a few KiB is rare), seeks to keys
    // in random order, one value each: no pattern, no window.
    let (db, fs, _) = interleaved_files(1);
    let before = fs.hook().now();
    let mut it = db.iter(&ReadOptions::default());
    let mut x: u64 = 7;
    let mut want = 0;
    for _ in 0..500 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = (x >> 33) % 2000;
        it.seek(key(i));
        assert_eq!(it.try_value().expect("value"), value(i, 0).as_slice());
        want += RECORD_HEADER + key(i).len() as u64 + value(i, 0).len() as u64;
    }
    let after = fs.hook().now();
    assert_eq!((after.0 - before.0, after.1 - before.1), (500, want));
}

#[test]
fn gets_and_multi_gets_never_read_ahead() {
    let (db, fs) = open();
    for i in 0..500 {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    db.get(key(0)).expect("get"); // opens the blob file
    let before = fs.hook().now();
    for i in 0..500 {
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i, 0).into()));
    }
    let keys: Vec<Vec<u8>> = (0..500).map(key).collect();
    for (i, got) in db.multi_get(&keys).into_iter().enumerate() {
        assert_eq!(got.expect("multi_get"), Some(value(i as u64, 0).into()));
    }
    let after = fs.hook().now();
    let one_pass: u64 = (0..500)
        .map(|i| RECORD_HEADER + key(i).len() as u64 + value(i, 0).len() as u64)
        .sum();
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1000, 2 * one_pass)
    );
}

#[test]
fn reverse_scans_and_corruption_inside_a_window_are_unchanged() {
    let (db, fs) = open();
    let mut model = BTreeMap::new();
    for i in 0..1000 {
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    db.flush().expect("flush");
    db.get(key(0)).expect("get"); // opens the blob file
                                  // Backward: no forward pattern, one read per record.
    let before = fs.hook().now();
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_last();
    let mut expected = model.iter().rev();
    while it.valid() {
        let (k, v) = expected.next().expect("key");
        assert_eq!((it.key(), it.try_value().expect("value")), (&k[..], &v[..]));
        it.prev();
    }
    it.status().expect("scan");
    assert_eq!(fs.hook().now().0 - before.0, 1000);

    // A flipped byte in a record in the middle of the file: the scan reading it from a
    // window still fails its checksum there.
    let blob = blob_files(&fs).into_iter().next().expect("one blob file");
    let mem = fs.inner().clone();
    let mut bytes = mem.read_to_vec(&blob).expect("read blob file");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    let mut f = mem.create(&blob).expect("rewrite");
    f.append(&bytes).expect("append");
    f.sync().expect("sync");
    drop(f);
    drop(it);
    drop(db);
    let opts = Options {
        enable_blob_files: true,
        min_blob_size: 100,
        disable_auto_compactions: true,
        fs: fs.clone(),
        ..Options::default()
    };
    let db = Db::open("/db", opts).expect("reopen");
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut n = 0;
    let err = loop {
        assert!(it.valid(), "the scan ended without the damaged record");
        match it.try_value() {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        it.next();
    };
    assert!(n > 100 && n < 1000, "{n} good values before the damage");
    let msg = err.to_string();
    assert!(msg.contains("checksum mismatch"), "{msg}");
    assert!(msg.contains(".blob"), "{msg}");
}

fn blob_files(fs: &Fs) -> Vec<std::path::PathBuf> {
    fs.list_dir(Path::new("/db"))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".blob"))
        .map(|n| Path::new("/db").join(n))
        .collect()
}

#[test]
fn values_larger_than_any_window_are_read_as_header_then_value() {
    let (db, fs) = open();
    let mut model = BTreeMap::new();
    for i in 0..6u64 {
        // 300 KB: past the largest window (256 KiB).
        let v = vec![b'a' + i as u8; 300_000 + i as usize];
        db.put(key(i), &v).expect("put");
        model.insert(key(i), v);
    }
    db.flush().expect("flush");
    db.get(key(0)).expect("get"); // opens the blob file
                                  // Two reads per record (header and key, then the value into its own buffer, as a get of
                                  // a large value), exactly the record's bytes: never a window, never a byte more.
    assert_eq!(scan(&db, &fs, &model), (12, needed_bytes(&model)));
    // Forward and backward alike.
    let before = fs.hook().now();
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_last();
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.try_value().expect("value"), model[it.key()].as_slice());
        n += 1;
        it.prev();
    }
    it.status().expect("reverse scan");
    assert_eq!(n, 6);
    let after = fs.hook().now();
    assert_eq!(after.0 - before.0, 12);
}
