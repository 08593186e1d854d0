//! A table entry whose internal key cannot be parsed (here: an unknown kind byte, planted with
//! the block checksum recomputed so no checksum catches it) is `Error::Corruption` naming the
//! table and the block's offset on every read path: get, both iterator directions, and
//! compaction input. Before, iterators skipped such entries (a damaged key became "not found").

use crate::error::Error;
use crate::fs::{FileSystem, MemFileSystem};
use crate::options::{Options, ReadOptions};
use crate::sst::{reseal_block_for_tests, BlockHandle, Table};
use crate::Db;
use std::path::PathBuf;
use std::sync::Arc;

const N: usize = 60;

fn key(i: usize) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("value-{i:04}").into_bytes()
}

struct Damaged {
    opts: Options,
    sst: PathBuf,
    /// The key whose kind byte was damaged.
    victim: usize,
    /// The offset of the data block holding it.
    block: BlockHandle,
    /// The first key of the data block after it.
    next_block_first: usize,
}

/// One table of N keys in small uncompressed blocks; the kind byte of the first key of the
/// third data block is set to 0x7f and that block's checksum recomputed.
fn damaged_db() -> Damaged {
    let fs = MemFileSystem::new();
    let mut opts = Options {
        fs: Arc::new(fs.clone()),
        block_size: 256,
        max_background_jobs: 1,
        ..Options::default()
    };
    opts.set_compression(crate::CompressionType::None);
    let db = Db::open("/db", opts.clone()).expect("open");
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
    let mut bytes = fs.read_file_bytes(&sst).expect("bytes");
    let file = fs.open_random_access(&sst).expect("open table");
    let number: u64 = sst
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("table number");
    let table = Table::open(file, sst.clone(), number, bytes.len() as u64, None).expect("table");
    let handles = table.data_handles_for_tests();
    assert!(handles.len() > 3, "{} data blocks", handles.len());
    let block = handles[2];
    let range = block.offset as usize..(block.offset + block.size) as usize;
    // The first value stored in the block: its entry's key trailer is the 8 bytes before it.
    let (victim, value_pos) = (0..N)
        .filter_map(|i| find(&bytes, &value(i)).map(|p| (i, p)))
        .find(|(_, p)| range.contains(p))
        .expect("a value in the third block");
    let next_block_first = (0..N)
        .find(|&i| find(&bytes, &value(i)).is_some_and(|p| p >= handles[3].offset as usize))
        .expect("a value in the fourth block");
    assert!(next_block_first - victim < opts.block_restart_interval);
    let kind_byte = value_pos - 8;
    assert_eq!(bytes[kind_byte], 1, "kind byte of a put");
    bytes[kind_byte] = 0x7f;
    reseal_block_for_tests(&mut bytes, block);
    fs.write_file_bytes(&sst, &bytes);
    Damaged {
        opts,
        sst,
        victim,
        block,
        next_block_first,
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn assert_names_block(err: Error, d: &Damaged, path: &str) {
    match err {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(
                (file.as_path(), offset),
                (d.sst.as_path(), d.block.offset),
                "{path}"
            );
        }
        e => panic!("{path}: expected corruption, got {e}"),
    }
}

fn read_options() -> [ReadOptions; 2] {
    [
        ReadOptions {
            verify_checksums: false,
            ..Default::default()
        },
        ReadOptions::default(),
    ]
}

#[test]
fn get_of_a_malformed_key_is_corruption_naming_table_and_block() {
    let d = damaged_db();
    let db = Db::open("/db", d.opts.clone()).expect("open");
    for ro in read_options() {
        let err = db.get_opt(&ro, &key(d.victim)).expect_err("damaged key");
        assert_names_block(err, &d, "get");
    }
    db.close().expect("close");
}

#[test]
fn forward_iteration_stops_with_corruption_at_a_malformed_key() {
    let d = damaged_db();
    let db = Db::open("/db", d.opts.clone()).expect("open");
    for ro in read_options() {
        let mut it = db.iter(&ro);
        it.seek_to_first();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push(it.key().to_vec());
            it.next();
        }
        assert_eq!(seen, (0..d.victim).map(key).collect::<Vec<_>>());
        assert_names_block(it.status().expect_err("forward"), &d, "forward");
    }
    db.close().expect("close");
}

#[test]
fn reverse_iteration_stops_with_corruption_at_a_malformed_key() {
    let d = damaged_db();
    let db = Db::open("/db", d.opts.clone()).expect("open");
    for ro in read_options() {
        let mut it = db.iter(&ro);
        it.seek_to_last();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push(it.key().to_vec());
            it.prev();
        }
        // Moving backward inside a block decodes from the restart point before the wanted
        // entry; these blocks hold fewer entries than `block_restart_interval`, so the damaged
        // block has one restart point, the victim. The first key of the next block is not
        // yielded either: to yield a key backward the iterator must step past all of its
        // versions, i.e. into the damaged block.
        let first_unreachable = d.next_block_first + 1;
        assert_eq!(
            seen,
            (first_unreachable..N).rev().map(key).collect::<Vec<_>>()
        );
        assert_names_block(it.status().expect_err("reverse"), &d, "reverse");
    }
    db.close().expect("close");
}

#[test]
fn compaction_of_a_malformed_key_is_corruption_naming_table_and_block() {
    let d = damaged_db();
    let db = Db::open("/db", d.opts.clone()).expect("open");
    let err = db.compact_range(None, None).expect_err("compaction input");
    assert_names_block(err, &d, "compaction");
    let _ = db.close();
}
