//! Whole-file checksums (issue 15; RocksDB's file checksums): every table and blob file written
//! by a flush, a compaction, blob garbage collection or an ingestion has the CRC-32C of its
//! bytes recorded in the MANIFEST, which survives a reopen (a new MANIFEST snapshot), a
//! trivial move, a checkpoint and a repair; `verify_file_checksums` turns one flipped byte of a
//! table or a blob file into `Corruption` naming that file; a backup and a copying checkpoint
//! refuse a damaged file, and ingestion a file changed after its validation; a database
//! written before file checksums opens and verifies, its files' unknown checksums skipped.

mod common;

use shaledb::fs::{FsCall, FsHook, HookedFileSystem, MemFileSystem};
use shaledb::{BackupEngine, Db, Error, LiveFileChecksum, Options, SstFileWriter};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn options() -> Options {
    Options {
        enable_blob_files: true,
        min_blob_size: 100,
        blob_file_size: 64 << 10,
        write_buffer_size: 64 << 10,
        enable_blob_garbage_collection: true,
        // Every blob file is old enough: a compaction relocates every blob it reads.
        blob_garbage_collection_age_cutoff: 1.0,
        disable_auto_compactions: true,
        ..Default::default()
    }
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("value-{i:04}-{round}-").into_bytes();
    // Every other value goes to a blob file (at least 100 bytes).
    let len = if i.is_multiple_of(2) {
        300 + (i as usize % 7) * 40
    } else {
        20
    };
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

fn key(i: u32) -> String {
    format!("key{i:04}")
}

/// One round of puts of keys `0..n`, flushed: a table and a blob file.
fn write_round(db: &Db, n: u32, round: u32) {
    for i in 0..n {
        db.put(key(i), value(i, round)).expect("put");
    }
    db.flush().expect("flush");
}

fn is(path: &Path, ext: &str) -> bool {
    path.extension().is_some_and(|e| e == ext)
}

/// The recorded checksum of every live file equals the CRC-32C of its bytes read back; returns
/// the files.
fn check_recorded(db: &Db, what: &str) -> Vec<LiveFileChecksum> {
    check_recorded_but(db, what, &BTreeSet::new())
}

/// [`check_recorded`], where the files named in `unknown` must have no recorded checksum.
fn check_recorded_but(db: &Db, what: &str, unknown: &BTreeSet<String>) -> Vec<LiveFileChecksum> {
    let files = db.live_file_checksums();
    for f in &files {
        let bytes = std::fs::read(&f.path).expect("read a live file");
        assert_eq!(f.size, bytes.len() as u64, "{what}: {}", f.path.display());
        let name = f.path.file_name().expect("name").to_string_lossy();
        let want = match unknown.contains(&*name) {
            true => None,
            false => Some(crc32c::crc32c(&bytes)),
        };
        assert_eq!(f.crc32c, want, "{what}: {}", f.path.display());
    }
    db.verify_file_checksums().expect(what);
    files
}

fn names(files: &[LiveFileChecksum]) -> BTreeSet<String> {
    files
        .iter()
        .map(|f| {
            f.path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// Name and checksum of each file, for comparing listings of two directories.
fn by_name(files: &[LiveFileChecksum]) -> Vec<(String, Option<u32>)> {
    files
        .iter()
        .map(|f| {
            let name = f.path.file_name().expect("name").to_string_lossy();
            (name.into_owned(), f.crc32c)
        })
        .collect()
}

/// An external table of keys `ext0000..ext0049`.
fn external(dir: &Path) -> PathBuf {
    let path = dir.join("external.sst");
    let mut w = SstFileWriter::create(&Options::default(), &path).expect("create");
    for i in 0..50u32 {
        w.put(format!("ext{i:04}"), format!("ingested {i}"))
            .expect("put");
    }
    w.finish().expect("finish");
    path
}

#[test]
fn every_file_written_records_the_crc32c_of_its_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let db = Db::open(&path, options()).expect("open");
    // Flushes: two tables, two blob files.
    write_round(&db, 200, 0);
    write_round(&db, 200, 1);
    let flushed = check_recorded(&db, "flushed");
    assert_eq!(flushed.iter().filter(|f| is(&f.path, "sst")).count(), 2);
    assert_eq!(flushed.iter().filter(|f| is(&f.path, "blob")).count(), 2);
    // Ingestion (copied: the original stays), then a compaction of everything, which
    // relocates every blob (garbage collection) into new blob files.
    let ext = external(dir.path());
    db.ingest(&[&ext], &Default::default()).expect("ingest");
    let ingested = check_recorded(&db, "ingested");
    assert_eq!(ingested.len(), flushed.len() + 1);
    let new = &names(&ingested) - &names(&flushed);
    assert_eq!(new.len(), 1, "{new:?}");
    let copy = ingested
        .iter()
        .find(|f| new.contains(&*f.path.file_name().expect("n").to_string_lossy()))
        .expect("the ingested table");
    let original = std::fs::read(&ext).expect("external file");
    assert_eq!(copy.crc32c, Some(crc32c::crc32c(&original)));
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    let compacted = check_recorded(&db, "compacted");
    let blobs = |files: &[LiveFileChecksum]| -> BTreeSet<String> {
        names(files)
            .into_iter()
            .filter(|n| n.ends_with(".blob"))
            .collect()
    };
    assert!(
        blobs(&compacted).is_disjoint(&blobs(&flushed)),
        "garbage collection rewrote every blob file: {compacted:?}"
    );
    assert!(!blobs(&compacted).is_empty());
    // A reopen starts a new MANIFEST with a snapshot of the state: the same checksums.
    drop(db);
    let db = Db::open(&path, options()).expect("reopen");
    assert_eq!(check_recorded(&db, "reopened"), compacted);
    // A checkpoint's MANIFEST carries the checksums too.
    let copy_dir = dir.path().join("checkpoint");
    db.checkpoint(&copy_dir).expect("checkpoint");
    let copy = Db::open(&copy_dir, options()).expect("open the checkpoint");
    assert_eq!(
        by_name(&check_recorded(&copy, "checkpoint")),
        by_name(&db.live_file_checksums())
    );
}

#[test]
fn a_trivial_move_keeps_the_file_and_its_checksum() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        level0_file_num_compaction_trigger: 2,
        ..Default::default()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    // Two L0 tables of disjoint keys, nothing below: moved to L1 by a MANIFEST edit.
    for prefix in ["a", "b"] {
        for i in 0..10u32 {
            db.put(format!("{prefix}{i}"), "v").expect("put");
        }
        db.flush().expect("flush");
    }
    let before = check_recorded(&db, "before the move");
    common::wait_until("the move", || level0_files(&db) == 0);
    assert_eq!(
        db.property("shaledb.num-files-at-level1").as_deref(),
        Some("2")
    );
    assert_eq!(check_recorded(&db, "moved"), before);
}

#[test]
fn repair_records_the_checksums_of_the_files_it_keeps_and_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    {
        let db = Db::open(&path, options()).expect("open");
        write_round(&db, 200, 0);
        // Left in the WAL: repair writes it to a new table.
        for i in 0..20 {
            db.put(key(i), value(i, 1)).expect("put");
        }
    }
    for name in std::fs::read_dir(&path).expect("list") {
        let name = name.expect("entry").path();
        if name.to_string_lossy().contains("MANIFEST") {
            std::fs::remove_file(name).expect("lose the MANIFEST");
        }
    }
    let report = shaledb::repair(&path, &options()).expect("repair");
    assert!(!report.tables_written.is_empty(), "{report:?}");
    let db = Db::open(&path, options()).expect("open the repaired database");
    let files = check_recorded(&db, "repaired");
    assert!(files.iter().any(|f| is(&f.path, "blob")), "{files:?}");
    assert!(files.len() >= 3, "{files:?}");
}

fn level0_files(db: &Db) -> u64 {
    let n = db
        .property("shaledb.num-files-at-level0")
        .expect("property");
    n.parse().expect("a number")
}

/// XORs the byte at `offset` of `path` (negative: from the end) with 0x40.
fn flip(path: &Path, offset: i64) {
    let mut bytes = std::fs::read(path).expect("read");
    let at = if offset < 0 {
        bytes.len() - offset.unsigned_abs() as usize
    } else {
        offset as usize
    };
    bytes[at] ^= 0x40;
    std::fs::write(path, bytes).expect("write");
}

/// `verify_file_checksums` fails with `Corruption` naming `path` at offset 0 and both
/// checksums.
fn assert_names(db: &Db, path: &Path, recorded: u32) {
    let actual = crc32c::crc32c(&std::fs::read(path).expect("read"));
    match db.verify_file_checksums() {
        Err(Error::Corruption {
            file,
            offset,
            detail,
        }) => {
            assert_eq!((file.as_path(), offset), (path, 0), "{detail}");
            assert!(
                detail.contains(&format!("{actual:#010x}"))
                    && detail.contains(&format!("{recorded:#010x}")),
                "{detail}"
            );
        }
        other => panic!("{}: expected corruption, got {other:?}", path.display()),
    }
}

#[test]
fn a_flipped_byte_in_a_table_or_blob_file_is_corruption_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    write_round(&db, 200, 0);
    let files = check_recorded(&db, "written");
    let table = files.iter().find(|f| is(&f.path, "sst")).expect("table");
    let blob = files.iter().find(|f| is(&f.path, "blob")).expect("blob");
    for (f, offset) in [
        // Inside the first data block (starts at 0) and inside the first record (after the
        // 32-byte header): the block or record checksum catches it too.
        (table, 3),
        (blob, 40),
        // The last byte (the footer's magic number): any byte counts. (Neither format has
        // padding or unused bytes: every byte is under some check of `verify_checksums`.)
        (table, -1),
        (blob, -1),
    ] {
        flip(&f.path, offset);
        assert_names(&db, &f.path, f.crc32c.expect("recorded"));
        assert!(db.verify_checksums().is_err(), "{}", f.path.display());
        flip(&f.path, offset);
        db.verify_file_checksums().expect("restored");
    }
    // A file of another length: corruption naming it (its size no longer matches).
    let mut bytes = std::fs::read(&blob.path).expect("read");
    bytes.push(0);
    std::fs::write(&blob.path, &bytes).expect("write");
    match db.verify_file_checksums() {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, blob.path),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_backup_refuses_a_damaged_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path().join("db"), options()).expect("open");
    write_round(&db, 200, 0);
    let engine = BackupEngine::open(dir.path().join("backups")).expect("engine");
    assert_eq!(engine.create_backup(&db).expect("first backup"), 1);
    let first = check_recorded(&db, "first");
    let refused = |path: &Path| match engine.create_backup(&db) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file.as_path(), offset), (path, 0))
        }
        other => panic!("{}: expected corruption, got {other:?}", path.display()),
    };
    // A file the backup directory already holds (same number and size: only read for its
    // checksum), then a new one (copied).
    let table = first.iter().find(|f| is(&f.path, "sst")).expect("table");
    flip(&table.path, 3);
    refused(&table.path);
    flip(&table.path, 3);
    write_round(&db, 50, 1);
    let second = check_recorded(&db, "second");
    let new_blob = second
        .iter()
        .find(|f| is(&f.path, "blob") && !first.contains(f))
        .expect("a new blob file");
    flip(&new_blob.path, 40);
    refused(&new_blob.path);
    flip(&new_blob.path, 40);
    // Refused backups leave nothing; an intact one is made and verifies.
    let id = engine.create_backup(&db).expect("backup");
    let ids: Vec<u64> = engine.list().expect("list").iter().map(|b| b.id).collect();
    assert_eq!(ids, [1, id]);
    engine.verify(id).expect("verify");
}

/// A database written before file checksums (tests/data, the previous format) opens, and
/// its files, whose checksums are unknown, are skipped by the check; files written from then
/// on get one.
#[test]
fn files_of_the_previous_format_have_unknown_checksums_and_are_skipped() {
    for fixture in ["tests/data/format-v4-blob-files", "tests/data/format-v1"] {
        let (_dir, path) = common::copy_fixture(fixture);
        let opts = Options {
            enable_blob_files: true,
            min_blob_size: 64,
            blob_file_size: 16 << 10,
            ..Default::default()
        };
        let fixture_files: BTreeSet<String> = std::fs::read_dir(&path)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        let db = Db::open(&path, opts.clone()).expect("open the old database");
        // The fixture's files are unknown; a table the open flushed from its WAL is not.
        let old = check_recorded_but(&db, fixture, &fixture_files);
        assert!(old.iter().any(|f| f.crc32c.is_none()), "{fixture}: {old:?}");
        // Unknown: even a damaged old file is not this check's to find.
        let table = old
            .iter()
            .find(|f| is(&f.path, "sst") && f.crc32c.is_none())
            .expect("a table");
        flip(&table.path, -1);
        db.verify_file_checksums().expect("skipped");
        flip(&table.path, -1);
        db.compact_range(None::<&[u8]>, None::<&[u8]>)
            .expect("compact");
        drop(db);
        let db = Db::open(&path, opts).expect("reopen");
        // Compaction rewrote the tables; blob files are kept as they are (unknown still).
        let new = check_recorded_but(&db, fixture, &fixture_files);
        assert!(new.iter().any(|f| is(&f.path, "sst")), "{fixture}");
        assert!(new
            .iter()
            .all(|f| is(&f.path, "blob") || f.crc32c.is_some()));
    }
}

/// Flips a byte of the external file when the database creates its copy, after it was
/// validated: the copy's checksum differs from the validated bytes'.
struct ChangeWhileCopying {
    fs: MemFileSystem,
    external: PathBuf,
    armed: Arc<AtomicBool>,
}

impl FsHook for ChangeWhileCopying {
    fn before(&self, call: FsCall<'_>) -> std::io::Result<()> {
        if let FsCall::Create(path) = call {
            if path != self.external && self.armed.swap(false, Ordering::SeqCst) {
                let mut bytes = self.fs.read_file_bytes(&self.external).expect("external");
                bytes[3] ^= 0x40;
                self.fs.write_file_bytes(&self.external, &bytes);
            }
        }
        Ok(())
    }
}

#[test]
fn an_external_file_changed_after_validation_is_not_ingested() {
    let mem = MemFileSystem::new();
    let external = PathBuf::from("/external.sst");
    let armed = Arc::new(AtomicBool::new(false));
    let hook = ChangeWhileCopying {
        fs: mem.clone(),
        external: external.clone(),
        armed: armed.clone(),
    };
    let fs = HookedFileSystem::new(Arc::new(mem.clone()), hook);
    let opts = Options::default().with_fs(fs);
    let mut w = SstFileWriter::create(&opts, &external).expect("create");
    w.put("k", "v").expect("put");
    w.finish().expect("finish");
    let db = Db::open("/db", opts).expect("open");
    armed.store(true, Ordering::SeqCst);
    match db.ingest(&[&external], &Default::default()) {
        Err(Error::Corruption {
            file,
            offset,
            detail,
        }) => {
            assert_eq!((file, offset), (external, 0), "{detail}");
            assert!(detail.contains("changed while it was ingested"), "{detail}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    assert!(!armed.load(Ordering::SeqCst), "the hook ran");
    assert_eq!(db.get("k").expect("get"), None);
    assert!(db.live_file_checksums().is_empty());
    let copies: Vec<_> = mem
        .file_names()
        .into_iter()
        .filter(|p| p.starts_with("/db") && is(p, "sst"))
        .collect();
    assert!(copies.is_empty(), "{copies:?}");
}

/// On a file system without hard links a checkpoint copies each file, and refuses a damaged
/// one as a backup does.
#[test]
fn a_checkpoint_that_copies_refuses_a_damaged_file() {
    let mem = MemFileSystem::new();
    let db = Db::open("/db", options().with_fs(mem.clone())).expect("open");
    write_round(&db, 200, 0);
    let files = db.live_file_checksums();
    let blob = files.iter().find(|f| is(&f.path, "blob")).expect("blob");
    let mut bytes = mem.read_file_bytes(&blob.path).expect("blob bytes");
    bytes[40] ^= 0x40;
    mem.write_file_bytes(&blob.path, &bytes);
    match db.checkpoint("/copy") {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file.as_path(), offset), (blob.path.as_path(), 0))
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    let left: Vec<_> = mem
        .file_names()
        .into_iter()
        .filter(|p| p.starts_with("/copy") || p.starts_with("/copy.tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    bytes[40] ^= 0x40;
    mem.write_file_bytes(&blob.path, &bytes);
    db.checkpoint("/copy").expect("checkpoint");
    let copy = Db::open("/copy", options().with_fs(mem.clone())).expect("open the copy");
    assert_eq!(by_name(&copy.live_file_checksums()), by_name(&files));
    copy.verify_file_checksums().expect("verify the copy");
}
