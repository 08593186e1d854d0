//! Corrupted tables: every byte flip in a table either leaves reads correct (the byte was not
//! used, e.g. a filter bit that only adds a false positive) or is reported as
//! `Error::Corruption` naming the table. Never a wrong value, never a false "not found".
#![allow(clippy::field_reassign_with_default)] // options are built field by field for readability

use shaledb::fs::MemFileSystem;
use shaledb::{CompressionType, Db, Error, Options, ReadOptions};
use std::path::Path;
use std::sync::Arc;

fn key(i: usize) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("v{i}-{}", "y".repeat(i % 13)).into_bytes()
}

const N: usize = 60;

fn build(compression: CompressionType) -> (MemFileSystem, Options, std::path::PathBuf) {
    let fs = MemFileSystem::new();
    let mut o = Options::default();
    o.fs = Arc::new(fs.clone());
    o.block_size = 256;
    o.max_background_jobs = 1;
    o.set_compression(compression);
    let dir = Path::new("/db");
    let db = Db::open(dir, o.clone()).expect("open");
    for i in 0..N {
        db.put(&key(i), &value(i)).expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
    let sst = fs
        .file_names()
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("table");
    (fs, o, sst)
}

/// Reads every key by get and by a full scan; returns how many reads reported corruption.
fn check_reads(db: &Db, table: &Path) -> usize {
    let mut corrupt = 0;
    let batch = db.multi_get((0..N).map(key));
    for (i, batched) in batch.into_iter().enumerate() {
        match db.get(&key(i)) {
            Ok(v) => {
                assert_eq!(v, Some(value(i).into()), "wrong answer for key {i}");
                // A damaged block of other keys in the batch does not fail this one.
                assert_eq!(
                    batched.ok(),
                    Some(v),
                    "multi_get differs from get for key {i}"
                );
            }
            Err(Error::Corruption { file, .. }) => {
                assert_eq!(file, table);
                match batched {
                    Err(Error::Corruption { file, .. }) => assert_eq!(file, table),
                    other => panic!("multi_get of damaged key {i} gave {other:?}"),
                }
                corrupt += 1;
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut i = 0;
    while it.valid() {
        assert_eq!(it.key(), key(i).as_slice(), "scan returned a wrong key");
        assert_eq!(
            it.value(),
            value(i).as_slice(),
            "scan returned a wrong value"
        );
        i += 1;
        it.next();
    }
    match it.status() {
        Ok(()) => assert_eq!(i, N, "scan ended early without an error"),
        Err(Error::Corruption { .. }) => corrupt += 1,
        Err(e) => panic!("unexpected scan error {e}"),
    }
    corrupt
}

fn sweep(compression: CompressionType) {
    let (fs, o, sst) = build(compression);
    let original = fs.read_file_bytes(&sst).expect("bytes");
    let mut detected = 0;
    for offset in 0..original.len() {
        for mask in [0x01u8, 0x80] {
            let mut bytes = original.clone();
            bytes[offset] ^= mask;
            fs.write_file_bytes(&sst, &bytes);
            let db = Db::open("/db", o.clone()).expect("open does not read tables");
            if check_reads(&db, &sst) > 0 {
                detected += 1;
            }
            db.close().expect("close");
        }
    }
    // Truncations: open refuses them (paranoid_checks, the default, compares table sizes with
    // the MANIFEST); without that check the reads that reach the table report them.
    let mut lax = o.clone();
    lax.paranoid_checks = false;
    for cut in [0, 1, original.len() / 2, original.len() - 1] {
        fs.write_file_bytes(&sst, &original[..cut]);
        match Db::open("/db", o.clone()) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, sst),
            Err(e) => panic!("truncation to {cut}: expected corruption, got {e}"),
            Ok(_) => panic!("truncation to {cut} not detected at open"),
        }
        let db = Db::open("/db", lax.clone()).expect("open without paranoid checks");
        assert!(
            check_reads(&db, &sst) > 0,
            "truncation to {cut} not detected"
        );
        db.close().expect("close");
    }
    fs.write_file_bytes(&sst, &original);
    assert!(
        detected > original.len(),
        "only {detected} of {} flips detected",
        2 * original.len()
    );
}

#[test]
fn every_byte_flip_in_an_uncompressed_table_is_caught_or_harmless() {
    sweep(CompressionType::None);
}

#[test]
fn every_byte_flip_in_a_zstd_table_is_caught_or_harmless() {
    sweep(CompressionType::Zstd);
}

#[test]
fn verify_checksums_off_still_never_panics() {
    let (fs, o, sst) = build(CompressionType::Lz4);
    let original = fs.read_file_bytes(&sst).expect("bytes");
    let ro = ReadOptions {
        verify_checksums: false,
        ..Default::default()
    };
    for offset in (0..original.len()).step_by(3) {
        let mut bytes = original.clone();
        bytes[offset] ^= 0xff;
        fs.write_file_bytes(&sst, &bytes);
        let db = Db::open("/db", o.clone()).expect("open");
        for i in 0..N {
            let _ = db.get_opt(&ro, &key(i));
        }
        let mut it = db.iter(&ro);
        it.seek_to_first();
        while it.valid() {
            it.next();
        }
        db.close().expect("close");
    }
}
