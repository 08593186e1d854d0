//! Values separated when written (`Options::separate_blobs_at_write`): the WAL and the
//! memtable hold references to blob files written with the values; every read path before
//! and after the flush that adds the files to the MANIFEST, snapshots of overwritten values,
//! reopening (references replayed, values read back and written anew), a reference whose
//! blob did not survive ends the replay, checkpoints and backups of unflushed values, and the
//! options and batches refused.

mod common;

use shaledb::{
    CheckpointOptions, Db, Error, Options, ReadOptions, WalRecoveryMode, WriteBatch, WriteOptions,
};
use std::collections::BTreeMap;
use std::path::Path;

fn options() -> Options {
    Options {
        enable_blob_files: true,
        separate_blobs_at_write: true,
        min_blob_size: 100,
        blob_file_size: 64 << 10,
        write_buffer_size: 64 << 10,
        ..Default::default()
    }
}

/// `options()` with one 4 MiB memtable and blob file: nothing is flushed before a test asks.
fn unflushed_options() -> Options {
    Options {
        write_buffer_size: 4 << 20,
        blob_file_size: 4 << 20,
        ..options()
    }
}

/// A family whose values of 100 bytes or more go to blob files as they are written (the
/// family defaults otherwise).
fn blobs_at_write_family() -> shaledb::CfOptions {
    shaledb::CfOptions {
        enable_blob_files: true,
        separate_blobs_at_write: true,
        min_blob_size: 100,
        ..Default::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Every fifth value is short (stays in the WAL and the memtable), the rest are blobs.
fn value(i: u32, round: u32) -> Vec<u8> {
    match i % 5 {
        0 => format!("short-{i}-{round}").into_bytes(),
        _ => {
            let mut v = format!("value-{i}-{round}-").into_bytes();
            v.extend(common::incompressible(
                u64::from(i * 7 + round),
                400 + (i as usize % 9) * 100,
            ));
            v
        }
    }
}

fn files_with(dir: &Path, extension: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(extension))
        .map(|e| {
            let len = e.metadata().expect("metadata").len();
            (e.file_name().to_string_lossy().into_owned(), len)
        })
        .collect();
    out.sort();
    out
}

fn check_all(db: &Db, want: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    for (k, v) in want {
        let got = db.get(k).expect("get");
        assert_eq!(got.as_deref(), Some(&v[..]), "{what}: get {k:?}");
    }
    let keys: Vec<&Vec<u8>> = want.keys().collect();
    let got = db.multi_get(&keys);
    for ((k, v), g) in want.iter().zip(got) {
        assert_eq!(
            g.expect("multi_get").as_deref(),
            Some(&v[..]),
            "{what}: multi_get {k:?}"
        );
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        want.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(
        common::scan(db, &ReadOptions::default(), false),
        expected,
        "{what}: scan"
    );
    // Walked backward, returned in key order.
    let backward = common::scan(db, &ReadOptions::default(), true);
    assert_eq!(backward, expected, "{what}: reverse scan");
}

#[test]
fn values_separated_at_write_are_read_everywhere_before_and_after_flush() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = unflushed_options();
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    let mut want = BTreeMap::new();
    let mut blob_bytes = 0;
    for i in 0..300 {
        let v = value(i, 0);
        if v.len() >= 100 {
            blob_bytes += v.len() as u64;
        }
        db.put(key(i), &v).expect("put");
        want.insert(key(i), v);
    }
    // The values are in a blob file already; the WAL holds references and short values
    // (counted up to its last record: the zeros of its preallocated space follow).
    let wal: u64 = files_with(dir.path(), ".log")
        .iter()
        .map(|(name, _)| {
            let bytes = std::fs::read(dir.path().join(name)).expect("read WAL");
            bytes
                .iter()
                .rposition(|&b| b != 0)
                .map_or(0, |i| i as u64 + 1)
        })
        .sum();
    let blobs: u64 = files_with(dir.path(), ".blob").iter().map(|f| f.1).sum();
    assert!(
        wal < blob_bytes / 10,
        "WAL of {wal} bytes for {blob_bytes} bytes of blobs"
    );
    assert!(
        blobs >= blob_bytes,
        "blob files of {blobs} bytes for {blob_bytes} bytes of values"
    );
    assert!(
        files_with(dir.path(), ".sst").is_empty(),
        "nothing was flushed yet"
    );
    check_all(&db, &want, "unflushed");

    // A snapshot keeps reading the overwritten values from the memtable's references.
    let snapshot = db.snapshot();
    let before = want.clone();
    for i in (0..300).step_by(3) {
        let v = value(i, 1);
        db.put(key(i), &v).expect("overwrite");
        want.insert(key(i), v);
    }
    let at_snapshot = ReadOptions {
        snapshot: Some(snapshot.clone()),
        ..Default::default()
    };
    for (k, v) in &before {
        let got = db.get_opt(&at_snapshot, k).expect("get at snapshot");
        assert_eq!(got.as_deref(), Some(&v[..]), "snapshot read of {k:?}");
    }
    check_all(&db, &want, "overwritten, unflushed");

    db.flush().expect("flush");
    assert!(!files_with(dir.path(), ".sst").is_empty());
    check_all(&db, &want, "flushed");
    for (k, v) in &before {
        let got = db.get_opt(&at_snapshot, k).expect("get at snapshot");
        assert_eq!(
            got.as_deref(),
            Some(&v[..]),
            "snapshot read of {k:?} after the flush"
        );
    }
    drop(snapshot);
    drop(at_snapshot);

    // Unflushed again, then closed: the reopen replays references.
    for i in (1..300).step_by(4) {
        let v = value(i, 2);
        db.put(key(i), &v).expect("overwrite");
        want.insert(key(i), v);
    }
    db.delete(key(2)).expect("delete");
    want.remove(&key(2));
    db.close().expect("close");
    let db = Db::open(dir.path(), opts.clone()).expect("reopen");
    check_all(&db, &want, "reopened");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    check_all(&db, &want, "compacted");
}

#[test]
fn memtables_fill_by_the_bytes_of_their_blob_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 64 KiB blob files, 4 MiB memtables: the blob bytes decide when a memtable is full.
    let opts = Options {
        write_buffer_size: 4 << 20,
        ..options()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let mut want = BTreeMap::new();
    for i in 0..2000 {
        let v = value(i, 0);
        db.put(key(i), &v).expect("put");
        want.insert(key(i), v);
    }
    db.wait_for_compactions().expect("wait");
    let tables = files_with(dir.path(), ".sst").len();
    assert!(
        tables >= 2,
        "{tables} tables: memtables were not flushed as their blobs grew"
    );
    check_all(&db, &want, "after flushes");
}

/// Writes `n` values (keys from `first`), closes (which syncs the blob files, then the WAL),
/// and returns the expected contents.
fn write_and_close(dir: &Path, opts: &Options, n: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, opts.clone()).expect("open");
    let mut want = BTreeMap::new();
    for i in 1..=n {
        // All blobs (no multiple of 5).
        let i = i * 5 + 1;
        db.put(key(i), value(i, 0)).expect("put");
        want.insert(key(i), value(i, 0));
    }
    db.close().expect("close");
    want
}

#[test]
fn a_reference_whose_blob_was_lost_ends_the_replay_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = unflushed_options();
    let mut want = write_and_close(dir.path(), &opts, 10);
    let blobs = files_with(dir.path(), ".blob");
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    // The last record loses its tail, as unsynced bytes do in a power loss.
    let path = dir.path().join(&blobs[0].0);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open blob file");
    f.set_len(blobs[0].1 - 1).expect("truncate");
    drop(f);

    // Absolute consistency refuses to open; every other mode recovers the first nine values
    // as it would a WAL with a torn tail.
    let strict = Options {
        wal_recovery_mode: WalRecoveryMode::AbsoluteConsistency,
        ..opts.clone()
    };
    match Db::open(dir.path(), strict) {
        Err(e @ Error::Corruption { .. }) => assert!(e.to_string().contains("blob"), "{e}"),
        other => panic!(
            "absolute consistency opened anyway: {:?}",
            other.map(|_| ())
        ),
    }
    let db = Db::open(dir.path(), opts).expect("reopen");
    let last = want.keys().next_back().cloned().expect("ten keys");
    want.remove(&last);
    check_all(&db, &want, "replayed up to the lost blob");
    // The values are in new blob files now; the damaged one is gone.
    assert!(!dir.path().join(&blobs[0].0).exists());
}

/// A power loss took the newest blob file (its directory entry never reached the disk) while
/// WAL records referring to it survived. Recovery and repair number their own files from the
/// highest number on disk, so a flush while they read the WAL writes a blob file of the lost
/// file's number: the references must still read as lost (the replay ends there), not
/// resolve into the new file (a wrong value, or a checksum mismatch refusing the open).
#[test]
fn a_lost_blob_files_number_handed_out_again_while_reading_the_wal_still_reads_as_lost() {
    for repair in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        // Memtables of 4 KiB write blob files of 4 KiB, a few values each, and are full only
        // at 64 KiB of blobs: several files, no flush.
        let opts = Options {
            write_buffer_size: 4096,
            ..options()
        };
        let written = write_and_close(dir.path(), &opts, 12);
        let blobs = files_with(dir.path(), ".blob");
        assert!(blobs.len() >= 3, "{blobs:?}");
        let (lost, _) = blobs.last().expect("blob files").clone();
        std::fs::remove_file(dir.path().join(&lost)).expect("lose the newest blob file");

        // The values read back fill 4 KiB memtables every few values: flushes write blob
        // files anew.
        if repair {
            std::fs::remove_file(dir.path().join("CURRENT")).expect("remove CURRENT");
            let report = shaledb::repair(dir.path(), &opts).expect("repair");
            assert!(report.lost_data(), "{report}");
        }
        let db = Db::open(dir.path(), opts).expect("reopen");
        assert!(
            dir.path().join(&lost).exists(),
            "repair {repair}: the lost file's number was not handed out again; the test \
             proves nothing"
        );
        // Exactly the writes before the first reference into the lost file (keys ascend in
        // write order).
        let in_order: Vec<(Vec<u8>, Vec<u8>)> = written.into_iter().collect();
        let kept = in_order
            .iter()
            .take_while(|(k, _)| db.get(k).expect("get").is_some())
            .count();
        assert!(
            kept > 0 && kept < in_order.len(),
            "repair {repair}: kept {kept}"
        );
        let want: BTreeMap<Vec<u8>, Vec<u8>> = in_order[..kept].iter().cloned().collect();
        check_all(
            &db,
            &want,
            "replayed up to the first reference into the lost file",
        );
    }
}

#[test]
fn checkpoints_and_backups_carry_unflushed_blob_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db_dir = dir.path().join("db");
    let opts = unflushed_options();
    let db = Db::open(&db_dir, opts.clone()).expect("open");
    let mut want = BTreeMap::new();
    for i in 0..200 {
        db.put(key(i), value(i, 0)).expect("put");
        want.insert(key(i), value(i, 0));
    }
    assert!(
        files_with(&db_dir, ".sst").is_empty(),
        "nothing was flushed yet"
    );
    let copy = dir.path().join("copy");
    db.checkpoint_opt(&copy, &CheckpointOptions::default())
        .expect("checkpoint");
    let backups = dir.path().join("backups");
    let engine = shaledb::BackupEngine::open(&backups).expect("backup engine");
    let id = engine.create_backup(&db).expect("backup");
    drop(db);

    let restored = dir.path().join("restored");
    engine.restore(id, &restored).expect("restore");
    for (what, at) in [("checkpoint", &copy), ("restored backup", &restored)] {
        let db = Db::open(at, opts.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
        check_all(&db, &want, what);
    }
}

#[test]
fn options_and_batches_that_cannot_work_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = |o: Options, words: &str| match Db::open(dir.path().join("x"), o) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains(words), "{msg}"),
        other => panic!("opened: {:?}", other.map(|_| ())),
    };
    refused(
        Options {
            enable_blob_files: false,
            ..options()
        },
        "needs enable_blob_files",
    );
    // Only the engine writes blob references: a batch holding one is refused.
    let db = Db::open(dir.path().join("db"), options()).expect("open");
    let mut bytes = vec![0u8; 12];
    bytes[8] = 1; // one record
    bytes.push(3); // a blob reference in the default family
    bytes.extend([1, b'k', 3, 1, 2, 3]);
    let batch: WriteBatch = shaledb::internals::write_batch_from_data(bytes).expect("decodes");
    match db.write(&WriteOptions::default(), &batch) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("blob references"), "{msg}"),
        other => panic!("written: {other:?}"),
    }
    assert_eq!(db.get(b"k").expect("get"), None);
}

#[test]
fn repair_recovers_values_written_with_wal_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = unflushed_options();
    let want = write_and_close(dir.path(), &opts, 40);
    let unflushed = files_with(dir.path(), ".blob");
    assert_eq!(unflushed.len(), 1);
    std::fs::remove_file(dir.path().join("CURRENT")).expect("remove CURRENT");
    let report = shaledb::repair(dir.path(), &opts).expect("repair");
    assert!(!report.lost_data(), "{report}");
    assert_eq!(
        report.wals.iter().map(|w| w.records).sum::<u64>(),
        40,
        "{report}"
    );
    let db = Db::open(dir.path(), opts).expect("open repaired");
    check_all(&db, &want, "repaired");
    // The values were written anew with the repaired tables; the old file went at open.
    assert!(!dir.path().join(&unflushed[0].0).exists());
}

/// A copy of every file of `fs`.
fn copy_fs(fs: &shaledb::fs::MemFileSystem) -> shaledb::fs::MemFileSystem {
    let copy = shaledb::fs::MemFileSystem::new();
    for p in fs.file_names() {
        if let Some(bytes) = fs.read_file_bytes(&p) {
            copy.write_file_bytes(&p, &bytes);
        }
    }
    copy
}

/// Every byte of an unflushed blob file flipped, and the file cut at every length: each
/// reopen gives exactly the values written or fails with `Corruption`; a cut (what a power
/// loss does to unsynced bytes) always opens, with a prefix of the writes.
#[test]
fn damage_to_an_unflushed_blob_file_is_corruption_and_a_cut_is_a_prefix() {
    let fs = shaledb::fs::MemFileSystem::new();
    let dir = Path::new("/sweep");
    let opts = Options {
        fs: std::sync::Arc::new(fs.clone()),
        ..unflushed_options()
    };
    let db = Db::open(dir, opts.clone()).expect("open");
    let keys: Vec<u32> = (0..12).map(|i| i * 5 + 1).collect();
    for &i in &keys {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.close().expect("close");
    let blob = fs
        .file_names()
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "blob"))
        .expect("a blob file");
    let original = fs.read_file_bytes(&blob).expect("bytes");
    let read_back = |trial: &shaledb::fs::MemFileSystem| -> Result<Vec<bool>, Error> {
        let o = Options {
            fs: std::sync::Arc::new(trial.clone()),
            ..opts.clone()
        };
        let db = Db::open(dir, o)?;
        keys.iter()
            .map(|&i| {
                let got = db.get(key(i))?;
                assert!(
                    got.as_deref().is_none_or(|v| v == &value(i, 0)[..]),
                    "a wrong value for key {i}"
                );
                Ok(got.is_some())
            })
            .collect()
    };
    let mut refused = 0;
    for offset in 0..original.len() {
        let trial = copy_fs(&fs);
        let mut bytes = original.clone();
        bytes[offset] ^= 0x40;
        trial.write_file_bytes(&blob, &bytes);
        match read_back(&trial) {
            Ok(present) => assert!(present.iter().all(|&p| p), "byte {offset}: values lost"),
            Err(e @ Error::Corruption { .. }) => {
                assert!(e.to_string().contains("blob"), "byte {offset}: {e}");
                refused += 1;
            }
            Err(e) => panic!("byte {offset}: {e}"),
        }
    }
    assert!(
        refused > original.len() / 2,
        "{refused} of {} flips refused",
        original.len()
    );
    for cut in 0..original.len() {
        let trial = copy_fs(&fs);
        trial.write_file_bytes(&blob, &original[..cut]);
        let present = read_back(&trial).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let n = present.iter().take_while(|&&p| p).count();
        assert!(
            present[n..].iter().all(|&p| !p),
            "cut at {cut}: not a prefix: {present:?}"
        );
    }
}

/// Blobs overwritten before their memtable is flushed are garbage of the file the flush
/// adds (exact bytes: 17-byte record header, key, value); once a later memtable overwrote the
/// rest and a compaction dropped the references, the file leaves.
#[test]
fn overwritten_blobs_are_garbage_and_their_files_leave() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = unflushed_options();
    let db = Db::open(dir.path(), opts).expect("open");
    let keys: Vec<u32> = (0..40).map(|i| i * 5 + 1).collect();
    for &i in &keys {
        db.put(key(i), value(i, 0)).expect("put");
    }
    let mut garbage = 0;
    for &i in keys.iter().step_by(2) {
        garbage += 17 + key(i).len() as u64 + value(i, 0).len() as u64;
        db.put(key(i), value(i, 1)).expect("overwrite");
    }
    db.flush().expect("flush");
    assert_eq!(common::property(&db, "shaledb.num-blob-files"), 1);
    assert_eq!(
        common::property(&db, "shaledb.live-blob-file-garbage-size"),
        garbage
    );
    // Every key overwritten in the next memtable: the first file's blobs are all garbage
    // once a compaction drops the older references, and it leaves.
    let first = files_with(dir.path(), ".blob");
    for &i in &keys {
        db.put(key(i), value(i, 2)).expect("overwrite");
    }
    db.flush().expect("flush");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    assert_eq!(common::property(&db, "shaledb.num-blob-files"), 1);
    assert_eq!(
        common::property(&db, "shaledb.live-blob-file-garbage-size"),
        0
    );
    assert!(!dir.path().join(&first[0].0).exists(), "{first:?}");
    let want: BTreeMap<Vec<u8>, Vec<u8>> = keys.iter().map(|&i| (key(i), value(i, 2))).collect();
    check_all(&db, &want, "after the compaction");
}

/// With files larger than the write buffer, a memtable's blobs roll over into files of the
/// write buffer's size (closed as they fill, synced with the WAL or by the flush), as a flush
/// would have written them; so the values of a file all overwritten leave with it.
#[test]
fn a_memtables_blobs_fill_files_of_the_write_buffers_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 16 KiB write buffer, 4 MiB blob files: 300 blobs of 400-1,200 bytes fill several files
    // while the memtable's own bytes (references) stay below its size.
    let opts = Options {
        write_buffer_size: 16 << 10,
        blob_file_size: 4 << 20,
        ..options()
    };
    let db = Db::open(dir.path(), opts.clone()).expect("open");
    let keys: Vec<u32> = (0..300).map(|i| i * 5 + 1).collect();
    let mut want = BTreeMap::new();
    for &i in &keys {
        db.put(key(i), value(i, 0)).expect("put");
        want.insert(key(i), value(i, 0));
    }
    let files = files_with(dir.path(), ".blob");
    assert!(files.len() >= 4, "{files:?}");
    assert!(files.iter().all(|(_, size)| *size < 20 << 10), "{files:?}");
    assert!(files_with(dir.path(), ".sst").is_empty(), "flushed already");
    check_all(&db, &want, "before the flush");
    // A synced write syncs the closed files too; a reopen reads them back from the WAL's
    // references.
    let synced = WriteOptions {
        sync: true,
        ..Default::default()
    };
    db.put_opt(&synced, b"synced", b"x").expect("synced put");
    want.insert(b"synced".to_vec(), b"x".to_vec());
    drop(db);
    let db = Db::open(dir.path(), opts).expect("reopen");
    check_all(&db, &want, "after a reopen");
    // Overwrite the keys of the first file written then: it leaves with the compaction that
    // drops their old references, the others stay.
    let first = files_with(dir.path(), ".blob")
        .into_iter()
        .next()
        .expect("a blob file");
    for &i in &keys[..100] {
        db.put(key(i), value(i, 1)).expect("overwrite");
        want.insert(key(i), value(i, 1));
    }
    db.flush().expect("flush");
    let before = common::property(&db, "shaledb.num-blob-files");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    assert!(!dir.path().join(&first.0).exists(), "{first:?} stayed");
    let after = common::property(&db, "shaledb.num-blob-files");
    assert!(
        after < before && after >= 2,
        "{before} -> {after} blob files"
    );
    check_all(&db, &want, "after the compaction");
}

/// A WAL kept for another family still holds references of a family that flushed them long
/// ago; their blob file may be gone (its blobs all overwritten and compacted away). Replay
/// skips those entries without reading their blobs, so the other family's writes after them
/// come back whole.
#[test]
fn a_flushed_familys_references_in_a_kept_wal_are_not_read_at_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        create_if_missing: true,
        create_missing_column_families: true,
        ..Default::default()
    };
    let blobs = blobs_at_write_family();
    let families = || {
        [
            ("blobs", blobs.clone()),
            ("plain", shaledb::CfOptions::default()),
        ]
    };
    let db = Db::open_cf(dir.path(), opts.clone(), families()).expect("open");
    let (b, p) = (
        db.cf("blobs").expect("blobs"),
        db.cf("plain").expect("plain"),
    );
    let keys: Vec<u32> = (0..20).map(|i| i * 5 + 1).collect();
    for &i in &keys {
        db.put_cf(&b, key(i), value(i, 0)).expect("put blob");
    }
    // The plain family's writes stay in this WAL, after the blob family's references.
    for i in 0..20 {
        db.put_cf(&p, key(i), b"plain").expect("put plain");
    }
    db.flush_cf(&b).expect("flush blobs");
    let first = files_with(dir.path(), ".blob");
    assert_eq!(first.len(), 1);
    // Every blob overwritten and compacted away: the first blob file is deleted.
    for &i in &keys {
        db.put_cf(&b, key(i), value(i, 1)).expect("overwrite");
    }
    db.flush_cf(&b).expect("flush blobs");
    db.compact_range_cf(&b, None, None).expect("compact");
    assert!(!dir.path().join(&first[0].0).exists(), "{first:?}");
    db.close().expect("close");

    let db = Db::open_cf(dir.path(), opts, families()).expect("reopen");
    let (b, p) = (
        db.cf("blobs").expect("blobs"),
        db.cf("plain").expect("plain"),
    );
    for i in 0..20 {
        let got = db.get_cf(&p, key(i)).expect("get plain");
        assert_eq!(got.as_deref(), Some(&b"plain"[..]), "plain key {i}");
    }
    for &i in &keys {
        let got = db.get_cf(&b, key(i)).expect("get blob");
        assert_eq!(got.as_deref(), Some(&value(i, 1)[..]), "blob key {i}");
    }
}

/// Closing while writers create blob files (a new file every couple of values) finishes: a
/// writer takes its file number before its memtable's lock, which close holds to sync.
#[test]
fn close_during_writes_that_create_blob_files_finishes() {
    for round in 0..20u32 {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options {
            blob_file_size: 4096,
            ..options()
        };
        let db = std::sync::Arc::new(Db::open(dir.path(), opts).expect("open"));
        let writers: Vec<_> = (0..2u32)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for i in 0.. {
                        let v = common::incompressible(u64::from(i + t * 1_000_000), 3000);
                        if db.put(key(i * 2 + t), v).is_err() {
                            break;
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(
            5 + u64::from(round % 5) * 5,
        ));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let closer = db.clone();
        std::thread::spawn(move || {
            let _ = done_tx.send(closer.close());
        });
        let closed = done_rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("round {round}: close did not finish"));
        closed.expect("close");
        for w in writers {
            w.join().expect("writer");
        }
    }
}

/// Dropping a family deletes the blob files its memtables wrote with their values (no
/// version lists them, no recovery reads them); the other families and a reopen are intact.
#[test]
fn dropping_a_family_deletes_its_unflushed_blob_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        create_missing_column_families: true,
        ..Default::default()
    };
    let blobs = blobs_at_write_family();
    let db = Db::open_cf(dir.path(), opts.clone(), [("blobs", blobs)]).expect("open");
    let b = db.cf("blobs").expect("blobs");
    for i in 0..20 {
        db.put_cf(&b, key(i), value(i * 5 + 1, 0)).expect("put");
        db.put(key(i), b"kept").expect("put default");
    }
    assert_eq!(files_with(dir.path(), ".blob").len(), 1);
    drop(b);
    db.drop_cf("blobs").expect("drop");
    common::wait_until("the dropped family's blob file is deleted", || {
        files_with(dir.path(), ".blob").is_empty()
    });
    db.close().expect("close");
    let db = Db::open(dir.path(), opts).expect("reopen");
    for i in 0..20 {
        assert_eq!(db.get(key(i)).expect("get").as_deref(), Some(&b"kept"[..]));
    }
}

/// How many of the `writes` puts of round `round` (keys ascending in write order) `db` holds:
/// they must be a prefix of the writes, every value right, at least `at_least` of them.
fn written_prefix(db: &Db, writes: u32, round: u32, at_least: u32, what: &str) -> u32 {
    let mut seen = 0;
    while seen < writes {
        match db.get(key(seen)).expect("get") {
            Some(v) => {
                assert_eq!(v, value(seen, round), "{what}: value of write {seen}");
                seen += 1;
            }
            None => break,
        }
    }
    assert!(
        seen >= at_least,
        "{what}: {seen} writes, {at_least} acknowledged before"
    );
    if seen < writes {
        let last = db.get(key(writes - 1)).expect("get");
        assert_eq!(last, None, "{what}: not a prefix");
    }
    seen
}

/// A secondary instance follows a primary whose values go to blob files as they are written:
/// its catch-ups read the WAL's references into files the primary is still appending to (no
/// footer yet), while the primary writes, flushes and rolls over to new files. After each
/// catch-up the secondary holds exactly the writes acknowledged before it began, or more
/// (a prefix of the writes in order), every value right; at the end, all of them.
#[test]
fn a_secondary_follows_references_into_blob_files_still_being_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 64 KiB memtables full at 256 KiB of blobs: files roll over and memtables flush while the
    // secondary reads.
    let opts = Options {
        write_buffer_size: 64 << 10,
        blob_file_size: 256 << 10,
        ..options()
    };
    let db = std::sync::Arc::new(Db::open(dir.path(), opts.clone()).expect("open"));
    let sec = Db::open_secondary(dir.path(), dir.path().join("sec"), opts).expect("secondary");
    const WRITES: u32 = 3000;
    let acked = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let writer = {
        let (db, acked) = (db.clone(), acked.clone());
        std::thread::spawn(move || {
            for i in 0..WRITES {
                db.put(key(i), value(i, 1)).expect("put");
                acked.store(i + 1, std::sync::atomic::Ordering::Release);
            }
        })
    };
    let check = |at_least: u32| {
        sec.try_catch_up_with_primary().expect("catch up");
        written_prefix(&sec, WRITES, 1, at_least, "secondary")
    };
    let mut catch_ups = 0;
    while !writer.is_finished() {
        check(acked.load(std::sync::atomic::Ordering::Acquire));
        catch_ups += 1;
    }
    writer.join().expect("writer");
    assert_eq!(check(WRITES), WRITES);
    assert!(
        catch_ups > 3,
        "only {catch_ups} catch-ups while the primary wrote"
    );
    assert!(files_with(dir.path(), ".blob").len() > 1);
}

/// Checkpoints and backups taken while a writer thread writes values to blob files with each
/// write (files rolling over, memtables flushing): each copy opens with a prefix of the writes
/// in order, at least every write acknowledged before the copy began, every value right.
#[test]
fn checkpoints_and_backups_taken_during_writes_hold_a_prefix_with_its_blobs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db_dir = dir.path().join("db");
    let opts = Options {
        write_buffer_size: 64 << 10,
        blob_file_size: 256 << 10,
        ..options()
    };
    let db = std::sync::Arc::new(Db::open(&db_dir, opts.clone()).expect("open"));
    const WRITES: u32 = 15_000;
    let acked = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let writer = {
        let (db, acked) = (db.clone(), acked.clone());
        std::thread::spawn(move || {
            for i in 0..WRITES {
                db.put(key(i), value(i, 2)).expect("put");
                acked.store(i + 1, std::sync::atomic::Ordering::Release);
            }
        })
    };
    let engine = shaledb::BackupEngine::open(dir.path().join("backups")).expect("backup engine");
    let mut copies = Vec::new();
    for n in 0.. {
        let before = acked.load(std::sync::atomic::Ordering::Acquire);
        let at = dir.path().join(format!("copy{n}"));
        if n % 2 == 0 {
            db.checkpoint_opt(&at, &CheckpointOptions::default())
                .expect("checkpoint");
        } else {
            let id = engine.create_backup(&db).expect("backup");
            engine.restore(id, &at).expect("restore");
        }
        copies.push((at, before));
        if writer.is_finished() && n >= 3 {
            break;
        }
    }
    writer.join().expect("writer");
    for (at, before) in &copies {
        let copy = Db::open(at, opts.clone()).unwrap_or_else(|e| panic!("{}: {e}", at.display()));
        written_prefix(&copy, WRITES, 2, *before, &at.display().to_string());
    }
    let during = copies.iter().filter(|(_, before)| *before < WRITES).count();
    assert!(
        during >= 2,
        "only {during} copies taken while the writer ran"
    );
}
