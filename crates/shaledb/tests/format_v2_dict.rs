//! Tables of format version 2 (a zstd dictionary block, docs/format/sstable.md): a database
//! written with dictionaries (tests/data/format-v2-dict, written by `write_the_fixture` below
//! at the commit that introduced the format) opens, reads back exactly and keeps working.

mod common;

use shaledb::{CompressionType, Db, Options};
use std::path::Path;

const FIXTURE: &str = "tests/data/format-v2-dict";

fn options() -> Options {
    let mut o = Options {
        write_buffer_size: 64 << 10,
        block_size: 512,
        max_dict_bytes: 4096,
        zstd_max_train_bytes: 32 << 10,
        ..Default::default()
    };
    o.set_compression(CompressionType::Zstd);
    o
}

fn expected(i: u32) -> Option<Vec<u8>> {
    (!i.is_multiple_of(5)).then(|| {
        format!(
            "{i}|{}|DELIVER IN PERSON|TRUCK|1996-0{}-1{}",
            i * 7 % 1000,
            i % 9 + 1,
            i % 10
        )
        .into_bytes()
    })
}

/// Writes the fixture (run by hand with `--ignored`, then commit its files but LOCK).
#[test]
#[ignore = "writes the committed fixture"]
fn write_the_fixture() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let _ = std::fs::remove_dir_all(&dir);
    let db = Db::open(&dir, options()).expect("open");
    for i in 0..3000u32 {
        db.put(
            format!("key{i:05}"),
            format!(
                "{i}|{}|DELIVER IN PERSON|TRUCK|1996-0{}-1{}",
                i * 7 % 1000,
                i % 9 + 1,
                i % 10
            ),
        )
        .expect("put");
    }
    for i in (0..3000u32).step_by(5) {
        db.delete(format!("key{i:05}")).expect("delete");
    }
    db.flush().expect("flush");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    db.close().expect("close");
    let _ = std::fs::remove_file(dir.join("LOCK"));
}

#[test]
fn a_database_with_dictionary_tables_opens_and_reads_back() {
    let (_tmp, dir) = common::copy_fixture(FIXTURE);
    let shapes = common::table_shapes(&dir);
    assert!(!shapes.is_empty(), "the fixture holds tables");
    for t in &shapes {
        assert_eq!(t.format_version, 2, "{t:?} is format 2");
    }
    // Read back with options that would write no dictionary: reading needs none.
    let db = Db::open(&dir, Options::default()).expect("open");
    for i in 0..3000u32 {
        let got = db
            .get(format!("key{i:05}"))
            .expect("get")
            .map(|v| v.to_vec());
        assert_eq!(got, expected(i), "key{i:05}");
    }
    assert_eq!(db.range(..).count(), 2400);
    db.verify_checksums().expect("verify");
    db.put(b"new", b"row").expect("put");
    db.compact_range(None::<&[u8]>, None::<&[u8]>)
        .expect("compact");
    assert_eq!(db.get(b"new").expect("get").as_deref(), Some(&b"row"[..]));
    assert_eq!(
        db.get(b"key00001").expect("get"),
        expected(1).map(Into::into)
    );
}
