//! End-to-end tests of the `shale` binary on real databases made with the library in temporary
//! directories: exact stdout, stderr and exit codes.

use shaledb::{CfOptions, Db, Options, WriteBatch, WriteOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What one run of `shale` printed and returned.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    stdout: String,
    stderr: String,
    code: i32,
}

fn shale(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(args)
        .output()
        .expect("run shale");
    Run {
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
        code: out.status.code().expect("exit code"),
    }
}

/// `shale --db DB args...`.
fn on(db: &Path, args: &[&str]) -> Run {
    let mut all = vec!["--db", path_str(db)];
    all.extend_from_slice(args);
    shale(&all)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Success with exactly this stdout and nothing on stderr.
fn ok(stdout: &str) -> Run {
    Run {
        stdout: stdout.to_string(),
        stderr: String::new(),
        code: 0,
    }
}

/// Failure: nothing on stdout, exactly this line on stderr, exit code 1.
fn failed(stderr: &str) -> Run {
    Run {
        stdout: String::new(),
        stderr: format!("{stderr}\n"),
        code: 1,
    }
}

/// Files of `dir` with extension `ext`, sorted.
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn flip_byte(path: &Path, offset: usize) {
    let mut bytes = std::fs::read(path).expect("read file");
    bytes[offset] ^= 0x40;
    std::fs::write(path, bytes).expect("write file");
}

/// A database with three keys in one table (a, b\0, c) and nothing in the WAL.
fn small_db(dir: &Path) -> PathBuf {
    let path = dir.join("db");
    let db = Db::open(&path, Options::default()).expect("open");
    db.put(b"a", b"1").expect("put");
    db.put(b"b\x00", b"two\ttabs\t").expect("put");
    db.put(b"c", b"3").expect("put");
    db.flush().expect("flush");
    path
}

#[test]
fn get_put_delete_in_text_and_hex() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    assert_eq!(
        on(&db, &["put", "--create-if-missing", "k\\x00", "v\\\\1"]),
        ok("")
    );
    assert_eq!(on(&db, &["get", "k\\x00"]), ok("v\\\\1\n"));
    assert_eq!(on(&db, &["--hex", "get", "6b00"]), ok("765c31\n"));
    assert_eq!(on(&db, &["--hex", "put", "ff", "0x00"]), ok(""));
    assert_eq!(on(&db, &["get", "\\xff"]), ok("\\x00\n"));
    assert_eq!(on(&db, &["delete", "k\\x00"]), ok(""));
    assert_eq!(
        on(&db, &["get", "k\\x00"]),
        failed("shale: key k\\x00 not found")
    );
    assert_eq!(
        on(&db, &["--hex", "get", "6b00"]),
        failed("shale: key 6b00 not found")
    );
    // What the library sees is what the tool wrote.
    let lib = Db::open(&db, Options::default()).expect("open");
    assert_eq!(
        lib.get(b"\xff").expect("get").as_deref(),
        Some(&b"\x00"[..])
    );
    assert_eq!(lib.get(b"k\x00").expect("get"), None);
}

#[test]
fn bad_keys_and_usage_are_one_line_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = small_db(dir.path());
    assert_eq!(
        on(&db, &["--hex", "get", "6"]),
        failed(
            "shale: the key \"6\" is not valid: hex needs two digits a byte, and 1 is an odd count"
        )
    );
    assert_eq!(
        on(&db, &["get", "a\\q"]),
        failed(
            "shale: the key \"a\\\\q\" is not valid: unknown escape at byte 1 (write a \
             backslash as \\\\, any byte as \\xNN)"
        )
    );
    assert_eq!(
        on(&db, &["frobnicate"]),
        failed("shale: unrecognized subcommand 'frobnicate' (see shale --help)")
    );
    assert_eq!(
        shale(&["get", "a"]),
        failed("shale: this command needs the database: give --db PATH")
    );
    assert_eq!(
        on(&db, &["--cf", "nope", "get", "a"]),
        failed("shale: column family \"nope\" does not exist (list-cf lists them)")
    );
    let absent = dir.path().join("000001.sst");
    assert_eq!(
        shale(&["sst-dump", path_str(&absent)]),
        failed(&format!("shale: there is no file {}", absent.display()))
    );
    let absent = dir.path().join("000001.log");
    assert_eq!(
        shale(&["wal-dump", path_str(&absent)]),
        failed(&format!("shale: there is no file {}", absent.display()))
    );
    let named = dir.path().join("copy.sst");
    std::fs::copy(files(&db, "sst").remove(0), &named).expect("copy");
    assert_eq!(
        shale(&["sst-dump", path_str(&named)]),
        failed(&format!(
            "shale: cannot tell the file number of {}: a .sst file is named by its number, \
             as in 000012.sst",
            named.display()
        ))
    );
    let version = shale(&["--version"]);
    assert_eq!(
        (version.code, version.stdout.as_str()),
        (0, "shale 0.1.0\n")
    );
    assert_eq!(
        on(&db, &["stats", "--property", "shaledb.nope"]),
        failed("shale: there is no property \"shaledb.nope\"")
    );
}

#[test]
fn a_missing_database_is_an_error_and_is_not_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("absent");
    let msg = format!(
        "shale: database at {} does not exist (put and create-cf create one with \
         --create-if-missing)",
        db.display()
    );
    for args in [
        &["get", "a"][..],
        &["put", "a", "1"],
        &["delete", "a"],
        &["scan"],
        &["dump"],
        &["list-cf"],
        &["create-cf", "x"],
        &["drop-cf", "x"],
        &["stats"],
        &["verify"],
        &["compact"],
        &["approximate-size"],
    ] {
        assert_eq!(on(&db, args), failed(&msg), "{args:?}");
    }
    let copy = dir.path().join("copy");
    assert_eq!(on(&db, &["checkpoint", path_str(&copy)]), failed(&msg));
    assert_eq!(
        on(&db, &["manifest-dump"]),
        failed(&format!(
            "shale: database at {} does not exist (it has no CURRENT file)",
            db.display()
        ))
    );
    assert!(!db.exists() && !copy.exists());
    // An explicit flag creates it.
    assert_eq!(on(&db, &["create-cf", "--create-if-missing", "x"]), ok(""));
    assert_eq!(on(&db, &["list-cf"]), ok("default\nx\n"));
}

#[test]
fn scan_with_bounds_prefix_limit_and_reverse() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    {
        let db = Db::open(&path, Options::default()).expect("open");
        for k in ["a", "ab", "abc", "b", "ba", "c"] {
            db.put(k, format!("v{k}")).expect("put");
        }
        db.put(b"b\xff\x00", b"\x01\n").expect("put");
    }
    let all = "a\tva\nab\tvab\nabc\tvabc\nb\tvb\nba\tvba\nb\\xff\\x00\t\\x01\\x0a\nc\tvc\n";
    assert_eq!(on(&path, &["scan"]), ok(all));
    assert_eq!(
        on(&path, &["scan", "--from", "ab", "--to", "b"]),
        ok("ab\tvab\nabc\tvabc\n")
    );
    assert_eq!(
        on(&path, &["scan", "--prefix", "a"]),
        ok("a\tva\nab\tvab\nabc\tvabc\n")
    );
    assert_eq!(
        on(
            &path,
            &["scan", "--prefix", "a", "--from", "ab", "--reverse"]
        ),
        ok("abc\tvabc\nab\tvab\n")
    );
    assert_eq!(
        on(&path, &["scan", "--reverse", "--limit", "2"]),
        ok("c\tvc\nb\\xff\\x00\t\\x01\\x0a\n")
    );
    assert_eq!(on(&path, &["scan", "--limit", "0"]), ok(""));
    assert_eq!(
        on(&path, &["scan", "--prefix", "b\\xff"]),
        ok("b\\xff\\x00\t\\x01\\x0a\n")
    );
    assert_eq!(
        on(&path, &["--hex", "scan", "--prefix", "62ff"]),
        ok("62ff00\t010a\n")
    );
    assert_eq!(on(&path, &["scan", "--from", "c", "--to", "a"]), ok(""));
}

#[test]
fn dump_shows_every_version_with_sequence_and_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    {
        let db = Db::open(&path, Options::default()).expect("open");
        db.put(b"a", b"1").expect("put"); // 1
        db.put(b"b", b"2").expect("put"); // 2
        db.flush().expect("flush");
        db.put(b"a", b"\x00new").expect("put"); // 3
        db.delete(b"b").expect("delete"); // 4
        db.single_delete(b"c").expect("single delete"); // 5
        db.delete_range(b"x", b"z").expect("delete range"); // 6
    }
    let expected = "a\t3\tPUT\t\\x00new\na\t1\tPUT\t1\nb\t4\tDELETE\t\nb\t2\tPUT\t2\n\
                    c\t5\tSINGLE_DELETE\t\nx\t6\tRANGE_DELETE\tz\n";
    assert_eq!(on(&path, &["dump"]), ok(expected));
    let hex = "61\t3\tPUT\t006e6577\n61\t1\tPUT\t31\n62\t4\tDELETE\t\n62\t2\tPUT\t32\n\
               63\t5\tSINGLE_DELETE\t\n78\t6\tRANGE_DELETE\t7a\n";
    assert_eq!(on(&path, &["--hex", "dump"]), ok(hex));
}

#[test]
fn column_families() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = small_db(dir.path());
    assert_eq!(on(&db, &["list-cf"]), ok("default\n"));
    assert_eq!(on(&db, &["create-cf", "logs"]), ok(""));
    assert_eq!(
        on(&db, &["create-cf", "logs"]),
        failed("shale: invalid argument: column family \"logs\" already exists")
    );
    assert_eq!(on(&db, &["--cf", "logs", "put", "k", "in logs"]), ok(""));
    assert_eq!(on(&db, &["--cf", "logs", "scan"]), ok("k\tin logs\n"));
    assert_eq!(
        on(&db, &["--cf", "logs", "dump"]),
        ok("k\t4\tPUT\tin logs\n")
    );
    assert_eq!(on(&db, &["get", "k"]), failed("shale: key k not found"));
    assert_eq!(on(&db, &["list-cf"]), ok("default\nlogs\n"));
    assert_eq!(on(&db, &["drop-cf", "logs"]), ok(""));
    assert_eq!(on(&db, &["list-cf"]), ok("default\n"));
    assert_eq!(
        on(&db, &["drop-cf", "logs"]),
        failed("shale: column family \"logs\" does not exist (list-cf lists them)")
    );
    assert_eq!(
        on(&db, &["--cf", "logs", "get", "k"]),
        failed("shale: column family \"logs\" does not exist (list-cf lists them)")
    );
}

#[test]
fn sst_dump_prints_properties_and_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = small_db(dir.path());
    let tables = files(&db, "sst");
    assert_eq!(tables.len(), 1);
    let table = &tables[0];
    let run = shale(&["sst-dump", "--verify", path_str(table)]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let size = std::fs::metadata(table).expect("stat").len();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], format!("file: {}", table.display()));
    assert_eq!(lines[2], format!("file size: {size}"));
    for expected in [
        "num entries: 3",
        "num deletions: 0",
        "num data blocks: 1",
        "index partitions: 0",
        "compression: lz4",
        "smallest seqno: 1",
        "largest seqno: 3",
        "prefix extractor: none",
        "num range deletions: 0",
        "checksums: verified",
    ] {
        assert!(lines.contains(&expected), "{expected} in {lines:?}");
    }
    let entries = lines
        .iter()
        .position(|l| *l == "entries:")
        .expect("entries");
    assert_eq!(
        lines[entries + 1..],
        [
            "a\t1\tPUT\t1",
            "b\\x00\t2\tPUT\ttwo\\x09tabs\\x09",
            "c\t3\tPUT\t3"
        ]
    );
    let hex = shale(&["--hex", "sst-dump", path_str(table)]);
    assert!(hex
        .stdout
        .ends_with("entries:\n61\t1\tPUT\t31\n6200\t2\tPUT\t74776f097461627309\n63\t3\tPUT\t33\n"));
    assert!(!hex.stdout.contains("checksums"));
}

#[test]
fn a_damaged_table_is_reported_with_file_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = small_db(dir.path());
    assert_eq!(on(&db, &["verify"]), ok("ok\n"));
    let table = files(&db, "sst").remove(0);
    // The first data block starts at offset 0.
    flip_byte(&table, 3);
    let error = format!(
        "shale: corruption in {} at offset 0: data block checksum mismatch",
        table.display()
    );
    assert_eq!(on(&db, &["verify"]), failed(&error));
    assert_eq!(
        shale(&["sst-dump", "--verify", path_str(&table)]),
        failed(&error)
    );
    assert_eq!(on(&db, &["get", "a"]), failed(&error));
    assert_eq!(on(&db, &["scan"]), failed(&error));
    assert_eq!(on(&db, &["dump"]), failed(&error));
    // Without --verify the properties print, then reading the entries hits the same block.
    let run = shale(&["sst-dump", path_str(&table)]);
    assert!(run.stdout.ends_with("\nentries:\n"), "{run:?}");
    assert_eq!((run.code, run.stderr), (1, format!("{error}\n")));
}

fn sync() -> WriteOptions {
    WriteOptions {
        sync: true,
        ..WriteOptions::default()
    }
}

/// A database whose one WAL holds three records, one a batch across two families.
fn db_with_wal(dir: &Path) -> PathBuf {
    let path = dir.join("db");
    let opts = Options {
        create_missing_column_families: true,
        ..Options::default()
    };
    let db = Db::open_cf(&path, opts, [("logs", CfOptions::default())]).expect("open");
    let logs = db.cf("logs").expect("logs");
    db.put_opt(&sync(), b"k1", b"v1").expect("put");
    let mut batch = WriteBatch::new();
    batch.put_cf(&logs, b"l\x00", b"x");
    batch.delete(b"k1");
    batch.delete_range(b"m", b"n");
    db.write(&sync(), &batch).expect("write");
    db.put_opt(&sync(), b"k2", b"v2").expect("put");
    path
}

#[test]
fn wal_dump_prints_batches_with_sequence_numbers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_with_wal(dir.path());
    let wal = files(&db, "log").remove(0);
    let expected = "record at 0: sequence 1, 1 entries\n  1\tcf 0\tPUT\tk1\tv1\n\
                    record at 26: sequence 2, 3 entries\n  2\tcf 1\tPUT\tl\\x00\tx\n  3\tcf 0\tDELETE\tk1\n  4\tcf 0\tRANGE_DELETE\tm\tn\n\
                    record at 61: sequence 5, 1 entries\n  5\tcf 0\tPUT\tk2\tv2\n";
    assert_eq!(shale(&["wal-dump", path_str(&wal)]), ok(expected));
}

/// A value written to a blob file with the write (`separate_blobs_at_write`) is a
/// `BLOB_INDEX` entry in the WAL, printed with its decoded reference.
#[test]
fn wal_dump_shows_blob_references_written_with_the_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let opts = Options {
        enable_blob_files: true,
        separate_blobs_at_write: true,
        min_blob_size: 10,
        ..Options::default()
    };
    let db = Db::open(&path, opts).expect("open");
    db.put_opt(&sync(), b"k1", b"a value of 23 bytes....")
        .expect("put");
    db.put_opt(&sync(), b"k2", b"short").expect("put");
    drop(db);
    let wal = files(&path, "log").remove(0);
    let blob = files(&path, "blob").remove(0);
    let number: u64 = blob
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("a blob file number");
    let run = shale(&["wal-dump", path_str(&wal)]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.starts_with(&format!(
            "record at 0: sequence 1, 1 entries\n  1\tcf 0\tBLOB_INDEX\tk1\tblob file {number} \
             offset 32 size 23\n"
        )),
        "{run:?}"
    );
    assert!(
        run.stdout.ends_with("  2\tcf 0\tPUT\tk2\tshort\n"),
        "{run:?}"
    );
}

#[test]
fn a_damaged_wal_is_dumped_around_the_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_with_wal(dir.path());
    let wal = files(&db, "log").remove(0);
    // Where the records end (the zeros of the WAL's preallocated space follow).
    let bytes = std::fs::read(&wal).expect("read");
    let len = bytes.iter().rposition(|&b| b != 0).expect("records") + 1;
    // Damage in the middle record: the others are still printed.
    flip_byte(&wal, 40);
    let run = shale(&["wal-dump", path_str(&wal)]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.starts_with(
            "record at 0: sequence 1, 1 entries\n  1\tcf 0\tPUT\tk1\tv1\ndamaged at 26: "
        ),
        "{run:?}"
    );
    assert!(
        run.stdout
            .ends_with("record at 61: sequence 5, 1 entries\n  5\tcf 0\tPUT\tk2\tv2\n"),
        "{run:?}"
    );
    assert!(
        run.stderr.starts_with(&format!(
            "shale: corruption in {} at offset 26: ",
            wal.display()
        )),
        "{run:?}"
    );
    assert_eq!(run.stderr.lines().count(), 1);
    // A torn tail: the last record cut short.
    flip_byte(&wal, 40);
    let bytes = std::fs::read(&wal).expect("read");
    std::fs::write(&wal, &bytes[..len - 3]).expect("truncate");
    let tail = format!(
        "{} ends in a damaged record at offset 61: truncated fragment at end of file \
         (length 19) (recovery drops such a torn tail of the newest log)",
        wal.display()
    );
    let expected = Run {
        stdout: "record at 0: sequence 1, 1 entries\n  1\tcf 0\tPUT\tk1\tv1\n\
                 record at 26: sequence 2, 3 entries\n  2\tcf 1\tPUT\tl\\x00\tx\n  \
                 3\tcf 0\tDELETE\tk1\n  4\tcf 0\tRANGE_DELETE\tm\tn\n\
                 damaged at 61: truncated fragment at end of file (length 19)\n"
            .to_string(),
        stderr: format!("shale: {tail}\n"),
        code: 1,
    };
    assert_eq!(shale(&["wal-dump", path_str(&wal)]), expected);
}

#[test]
fn manifest_dump_prints_the_version_edits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_with_wal(dir.path());
    // The whole-file checksums the MANIFEST records, by file name.
    let crcs: std::collections::BTreeMap<String, u32> = {
        let lib = Db::open(&db, Options::default()).expect("open");
        lib.flush().expect("flush");
        lib.live_file_checksums()
            .into_iter()
            .map(|f| {
                let name = f.path.file_name().expect("name").to_string_lossy();
                (name.into_owned(), f.crc32c.expect("recorded"))
            })
            .collect()
    };
    let run = on(&db, &["manifest-dump"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
    let size = |n: &str| std::fs::metadata(db.join(n)).expect("stat").len();
    let expected = format!(
        "edit at 0:\n  column family: 0\n  merge operator: none\n  log number: 6\n  \
         next file number: 8\n  last sequence: 5\n  max column family: 1\n  \
         add table: level 0, file 4, {} bytes, 2 entries, 1 deletions, 1 range deletions, \
         seqno 3..5, keys k1 @ 3 DELETE .. n @ 72057594037927935 RANGE_DELETE, crc32c {:#010x}\n\
         edit at 56:\n  column family: 1\n  add column family: logs\n  \
         merge operator: none\n  log number: 6\n  add table: level 0, file 5, {} bytes, \
         1 entries, 0 deletions, 0 range deletions, seqno 2..2, keys l\\x00 @ 2 PUT .. \
         l\\x00 @ 2 PUT, crc32c {:#010x}\n",
        size("000004.sst"),
        crcs["000004.sst"],
        size("000005.sst"),
        crcs["000005.sst"],
    );
    assert_eq!(run, ok(&expected));
    // A MANIFEST given by path reads the same.
    let manifest = std::fs::read_to_string(db.join("CURRENT")).expect("CURRENT");
    let by_path = shale(&["manifest-dump", path_str(&db.join(manifest.trim_end()))]);
    assert_eq!(by_path, run);
    // A damaged CURRENT is reported.
    std::fs::write(db.join("CURRENT"), "garbage").expect("write");
    assert_eq!(
        on(&db, &["manifest-dump"]),
        failed(&format!(
            "shale: corruption in {} at offset 0: it does not name a MANIFEST",
            db.join("CURRENT").display()
        ))
    );
}

#[test]
fn blob_files_dump_and_stats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let opts = Options {
        enable_blob_files: true,
        min_blob_size: 10,
        ..Options::default()
    };
    {
        let db = Db::open(&path, opts).expect("open");
        db.put(b"big", b"0123456789abcdef").expect("put");
        db.put(b"small", b"s").expect("put");
        db.put(b"z\x00", vec![0u8; 12]).expect("put");
        db.flush().expect("flush");
    }
    let blob = files(&path, "blob").remove(0);
    let size = std::fs::metadata(&blob).expect("stat").len();
    let run = shale(&["blob-dump", path_str(&blob)]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[2], format!("file size: {size}"));
    assert_eq!(
        lines[3..7],
        [
            "column family: 0",
            "compression: none",
            "records: 2",
            "record bytes: 67"
        ]
    );
    let records: Vec<Vec<&str>> = lines[7..].iter().map(|l| l.split('\t').collect()).collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0][1..], ["big", "0123456789abcdef"]);
    assert_eq!(
        records[1][1..],
        [
            "z\\x00",
            "\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00"
        ]
    );
    // The tables hold references; reads through the tool resolve them.
    let number: u64 = lines[1]
        .trim_start_matches("file number: ")
        .parse()
        .expect("number");
    let dump = on(&path, &["dump"]).stdout;
    assert!(
        dump.starts_with(&format!(
            "big\t1\tBLOB_INDEX\tblob(file {number}, offset {}, size 16, none)\n",
            records[0][0]
        )),
        "{dump}"
    );
    assert!(dump.contains("small\t2\tPUT\ts\n"), "{dump}");
    assert_eq!(on(&path, &["get", "big"]), ok("0123456789abcdef\n"));
    assert_eq!(
        on(&path, &["scan", "--limit", "1"]),
        ok("big\t0123456789abcdef\n")
    );
    let stats = on(&path, &["stats"]).stdout;
    assert!(stats.contains("\nNumber of blob files: 1\n"), "{stats}");
    assert!(stats.contains("\nshaledb.num-blob-files: 1\n"), "{stats}");
    assert_eq!(
        on(
            &path,
            &["stats", "--property", "shaledb.live-blob-file-size"]
        ),
        ok(&format!("{size}\n"))
    );
    assert_eq!(on(&path, &["verify"]), ok("ok\n"));
    // A damaged record: blob-dump and verify name the file and the record's offset.
    flip_byte(&blob, records[1][0].parse::<usize>().expect("offset") + 20);
    let run = shale(&["blob-dump", path_str(&blob)]);
    assert_eq!(run.code, 1);
    let prefix = format!(
        "shale: corruption in {} at offset {}: ",
        blob.display(),
        records[1][0]
    );
    assert!(run.stderr.starts_with(&prefix), "{run:?}");
    let run = on(&path, &["verify"]);
    assert_eq!((run.code, run.stdout.as_str()), (1, ""));
    assert!(
        run.stderr
            .starts_with(&format!("shale: corruption in {}", blob.display())),
        "{run:?}"
    );
}

#[test]
fn stats_compact_checkpoint_and_approximate_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    {
        let db = Db::open(&path, Options::default()).expect("open");
        for i in 0..2000u32 {
            db.put(format!("key{i:05}"), [7u8; 100]).expect("put");
        }
        db.flush().expect("flush");
        db.put(b"key00000", b"new").expect("put");
        db.flush().expect("flush");
    }
    assert_eq!(
        on(
            &path,
            &["stats", "--property", "shaledb.num-files-at-level0"]
        ),
        ok("2\n")
    );
    assert_eq!(
        on(&path, &["stats", "--property", "rocksdb.estimate-num-keys"]),
        ok("2001\n")
    );
    let stats = on(&path, &["stats"]);
    assert_eq!(stats.code, 0);
    assert!(
        stats.stdout.starts_with("** Compaction Stats **\n"),
        "{stats:?}"
    );
    assert!(
        stats.stdout.contains("\nshaledb.last-sequence: 2001\n"),
        "{stats:?}"
    );
    assert!(
        stats
            .stdout
            .ends_with("\nshaledb.background-errors: none\n"),
        "{stats:?}"
    );
    assert_eq!(
        on(
            &path,
            &["compact", "--from", "key00000", "--to", "key99999"]
        ),
        ok("")
    );
    assert_eq!(
        on(
            &path,
            &["stats", "--property", "shaledb.num-files-at-level0"]
        ),
        ok("0\n")
    );
    assert_eq!(
        on(&path, &["stats", "--property", "shaledb.estimate-num-keys"]),
        ok("2000\n")
    );
    let all: u64 = on(&path, &["approximate-size"])
        .stdout
        .trim()
        .parse()
        .expect("number");
    let half: u64 = on(
        &path,
        &["approximate-size", "--from", "key00000", "--to", "key01000"],
    )
    .stdout
    .trim()
    .parse()
    .expect("number");
    // The tool's compaction rewrote the tables with its codecs: the whole range is about the
    // table files' size, whatever they compressed to.
    let tables: u64 = on(
        &path,
        &["stats", "--property", "shaledb.total-sst-files-size"],
    )
    .stdout
    .trim()
    .parse()
    .expect("number");
    assert!(
        all <= tables && all > tables / 2 && half > all / 3 && half < all * 2 / 3,
        "{all} {half} of {tables}"
    );
    assert_eq!(on(&path, &["approximate-size", "--from", "x"]), ok("0\n"));
    let copy = dir.path().join("copy");
    assert_eq!(on(&path, &["checkpoint", path_str(&copy)]), ok(""));
    assert_eq!(on(&copy, &["get", "key00000"]), ok("new\n"));
    assert_eq!(
        on(&path, &["checkpoint", path_str(&copy)]),
        failed(&format!(
            "shale: invalid argument: the checkpoint directory {} already exists; give one that does not",
            copy.display()
        ))
    );
}

#[test]
fn reads_work_beside_an_open_database_and_writes_are_locked_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = small_db(dir.path());
    let db = Db::open(&path, Options::default()).expect("open");
    // Reads open read-only: they see the primary's writes up to now, even unflushed ones.
    db.put(b"a", b"2").expect("put");
    assert_eq!(on(&path, &["get", "a"]), ok("2\n"));
    assert_eq!(
        on(&path, &["put", "a", "3"]),
        failed(&format!(
            "shale: database at {} is locked: it is already open in this or another process",
            path.display()
        ))
    );
    // The file dumps need no lock.
    let table = files(&path, "sst").remove(0);
    assert_eq!(shale(&["sst-dump", path_str(&table)]).code, 0);
}

#[test]
fn backup_create_list_verify_restore_purge() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = small_db(dir.path());
    let backups = dir.path().join("backups");
    let b = path_str(&backups);
    assert_eq!(
        on(&path, &["backup", "--backup-dir", b, "create"]),
        ok("backup 1 created\n")
    );
    assert_eq!(on(&path, &["put", "d", "4"]), ok(""));
    let create_limited = [
        "backup",
        "--backup-dir",
        b,
        "create",
        "--rate-limit",
        "1000000",
    ];
    assert_eq!(on(&path, &create_limited), ok("backup 2 created\n"));
    let bad = on(
        &path,
        &[
            "backup",
            "--backup-dir",
            b,
            "create",
            "--rate-limit",
            "fast",
        ],
    );
    assert_eq!(bad.code, 1, "{bad:?}");
    assert!(
        bad.stderr
            .starts_with("shale: invalid value 'fast' for '--rate-limit <BYTES>'"),
        "{bad:?}"
    );
    let list = shale(&["backup", "--backup-dir", b, "list"]);
    assert_eq!(list.code, 0, "{list:?}");
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(lines[0], "id\ttimestamp\tfiles\tbytes");
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[1].starts_with("1\t") && lines[2].starts_with("2\t"));
    assert_eq!(
        shale(&["backup", "--backup-dir", b, "verify", "2"]),
        ok("backup 2 is intact\n")
    );
    let restored = dir.path().join("restored");
    let r = path_str(&restored);
    assert_eq!(
        shale(&[
            "backup",
            "--backup-dir",
            b,
            "restore",
            "1",
            r,
            "--rate-limit",
            "1000000"
        ]),
        ok(&format!("backup 1 restored to {r}\n"))
    );
    // Backup 1 was taken before d.
    assert_eq!(
        on(&restored, &["scan"]),
        ok("a\t1\nb\\x00\ttwo\\x09tabs\\x09\nc\t3\n")
    );
    assert_eq!(
        shale(&["backup", "--backup-dir", b, "purge", "--keep", "1"]),
        ok("")
    );
    let list = shale(&["backup", "--backup-dir", b, "list"]);
    assert_eq!(list.stdout.lines().count(), 2, "{list:?}");
    let missing = shale(&["backup", "--backup-dir", b, "verify", "1"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.starts_with("shale: "), "{missing:?}");
}

#[test]
fn repair_rebuilds_a_lost_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = small_db(dir.path());
    {
        let db = Db::open(&path, Options::default()).expect("open");
        db.put(b"in-wal", b"yes").expect("put");
    }
    std::fs::remove_file(path.join("CURRENT")).expect("remove CURRENT");
    let broken = on(&path, &["get", "a"]);
    assert_eq!(broken.code, 1);
    let run = on(&path, &["repair"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.is_empty());
    assert_eq!(on(&path, &["get", "a"]), ok("1\n"));
    assert_eq!(on(&path, &["get", "in-wal"]), ok("yes\n"));
}

#[test]
fn ingest_adds_files_written_by_sst_file_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = small_db(dir.path());
    let file = dir.path().join("bulk.sst");
    let mut w = shaledb::SstFileWriter::create(&Options::default(), &file).expect("writer");
    w.put(b"x1", b"one").expect("put");
    w.put(b"x2", b"two").expect("put");
    w.finish().expect("finish");
    assert_eq!(on(&path, &["ingest", path_str(&file)]), ok(""));
    assert_eq!(
        on(&path, &["scan", "--prefix", "x"]),
        ok("x1\tone\nx2\ttwo\n")
    );
    // A file that is not an SST file is refused with one sentence.
    let junk = dir.path().join("junk.sst");
    std::fs::write(&junk, b"not a table").expect("write");
    let run = on(&path, &["ingest", path_str(&junk)]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
}

#[test]
fn checkpoint_with_flush_copies_tables_and_no_wal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    {
        let opts = Options {
            create_missing_column_families: true,
            ..Default::default()
        };
        let families = [("default", opts.cf_options()), ("logs", opts.cf_options())];
        let db = Db::open_cf(&path, opts, families).expect("open");
        db.put(b"a", b"1").expect("put");
        let logs = db.cf("logs").expect("family");
        db.put_cf(&logs, b"k", b"in logs").expect("put");
    }
    let copy = dir.path().join("copy");
    assert_eq!(
        on(&path, &["checkpoint", "--flush", path_str(&copy)]),
        ok("")
    );
    assert_eq!(files(&copy, "log"), Vec::<PathBuf>::new());
    assert!(!files(&copy, "sst").is_empty());
    assert_eq!(on(&copy, &["get", "a"]), ok("1\n"));
    assert_eq!(on(&copy, &["--cf", "logs", "scan"]), ok("k\tin logs\n"));
    // The copy is a database of its own.
    assert_eq!(on(&copy, &["put", "b", "2"]), ok(""));
    assert_eq!(on(&copy, &["scan"]), ok("a\t1\nb\t2\n"));
    assert_eq!(on(&path, &["get", "b"]), failed("shale: key b not found"));
}

#[test]
fn merge_operator_and_ttl_databases_open_with_the_flags() {
    use shaledb::merge_operators::UInt64Add;
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    {
        let opts = Options {
            merge_operator: Some(Arc::new(UInt64Add)),
            create_missing_column_families: true,
            ..Default::default()
        };
        let counters = CfOptions {
            merge_operator: Some(Arc::new(UInt64Add)),
            ..opts.cf_options()
        };
        let db = Db::open_cf(&path, opts, [("counters", counters)]).expect("open");
        db.merge(b"hits", 5u64.to_le_bytes()).expect("merge");
        db.merge(b"hits", 2u64.to_le_bytes()).expect("merge");
        let cf = db.cf("counters").expect("family");
        db.merge_cf(&cf, b"n", 1u64.to_le_bytes()).expect("merge");
    }
    let without = on(&path, &["get", "hits"]);
    assert_eq!(without.code, 1);
    assert!(without.stderr.contains("merge operator"), "{without:?}");
    let with = ["--merge-operator", "uint64add", "--hex"];
    let args = |rest: &[&'static str]| with.iter().chain(rest).copied().collect::<Vec<_>>();
    assert_eq!(
        on(&path, &args(&["get", "68697473"])),
        ok("0700000000000000\n")
    );
    assert_eq!(
        on(&path, &args(&["--cf", "counters", "get", "6e"])),
        ok("0100000000000000\n")
    );
    let bad = on(&path, &["--merge-operator", "max", "get", "hits"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("unknown merge operator"), "{bad:?}");

    let ttl_path = dir.path().join("ttl");
    {
        let opts = Options {
            ttl: Some(std::time::Duration::from_secs(3600)),
            ..Default::default()
        };
        let db = Db::open(&ttl_path, opts).expect("open");
        db.put(b"k", b"v").expect("put");
    }
    assert_eq!(on(&ttl_path, &["get", "k"]).code, 1);
    assert_eq!(on(&ttl_path, &["--ttl", "3600", "get", "k"]), ok("v\n"));
}
