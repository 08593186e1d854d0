//! Prefix blooms: tables record their extractor's prefixes in their bloom filter, and seeks
//! with `prefix_same_as_start` leave out the tables that cannot hold the target's prefix;
//! results equal a total-order scan of the prefix.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shaledb::fs::MemFileSystem;
use shaledb::{CompressionType, Db, FixedPrefix, Options, ReadOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn opts(fs: &MemFileSystem) -> Options {
    let mut o = Options {
        write_buffer_size: 16 << 10,
        level0_file_num_compaction_trigger: 3,
        target_file_size_base: 8 << 10,
        max_bytes_for_level_base: 32 << 10,
        prefix_extractor: Some(Arc::new(FixedPrefix(4))),
        block_size: 256,
        ..Default::default()
    }
    .with_fs(fs.clone());
    o.set_compression(CompressionType::None);
    o
}

fn prefix_scan(
    db: &Db,
    prefix: &[u8],
    total_order: bool,
    reverse: bool,
) -> shaledb::Result<Vec<Vec<u8>>> {
    let ro = ReadOptions {
        prefix_same_as_start: true,
        total_order_seek: total_order,
        ..Default::default()
    };
    let mut it = db.iter(&ro);
    let mut out = Vec::new();
    if reverse {
        let mut last = prefix.to_vec();
        last.push(0xff);
        it.seek_for_prev(&last);
    } else {
        it.seek(prefix);
    }
    while it.valid() {
        out.push(it.key().to_vec());
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status()?;
    if reverse {
        out.reverse();
    }
    Ok(out)
}

/// A table holding prefixes "aaaa" and "cccc" whose "cccc" data block is damaged: a seek
/// for "bbbb" in total order reads that block and reports the damage; a prefix seek skips
/// the table by its prefix bloom and never reads it.
#[test]
fn a_prefix_seek_does_not_read_tables_without_the_prefix() {
    let fs = MemFileSystem::new();
    let dir = Path::new("/prefix-skip");
    {
        let db = Db::open(dir, opts(&fs)).expect("open");
        for p in ["aaaa", "cccc"] {
            for i in 0..10 {
                db.put(format!("{p}{i}"), [b'v'; 60]).expect("put");
            }
        }
        db.flush().expect("flush");
    }
    let table = fs
        .file_names()
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(".sst"))
        .expect("a table");
    let mut bytes = fs.read_file_bytes(&table).expect("bytes");
    let at = bytes
        .windows(4)
        .position(|w| w == b"cccc")
        .expect("the cccc block");
    bytes[at + 2] ^= 0x40;
    fs.write_file_bytes(&table, &bytes);
    let db = Db::open(dir, opts(&fs)).expect("reopen");
    assert_eq!(
        prefix_scan(&db, b"bbbb", false, false).expect("skipped"),
        Vec::<Vec<u8>>::new()
    );
    let err = prefix_scan(&db, b"bbbb", true, false).expect_err("total order reads the block");
    assert!(err.is_corruption(), "{err}");
    // `Db::prefix` uses the blooms too (the prefix is at least the extractor's 4 bytes), and
    // only those: with `total_order_seek` it reads the damaged block.
    let items: Vec<_> = db.prefix("bbbb").collect();
    assert!(items.is_empty(), "{items:?}");
    let items: Vec<_> = db.prefix("bbbb1").collect();
    assert!(items.is_empty(), "{items:?}");
    let total = ReadOptions {
        total_order_seek: true,
        ..Default::default()
    };
    let items: Vec<_> = db.prefix_opt(&total, "bbbb").collect();
    assert!(
        matches!(items.as_slice(), [Err(e)] if e.is_corruption()),
        "{items:?}"
    );
    // A prefix shorter than the extractor's cannot use them.
    let items: Vec<_> = db.prefix("bbb").collect();
    assert!(
        matches!(items.as_slice(), [Err(e)] if e.is_corruption()),
        "{items:?}"
    );
    // (A scan of "aaaa" reads this table, and the block after its last "aaaa" key.)
}

/// Random keys over 40 prefixes in memtables, L0 and deeper levels: every prefix scan, both
/// ways, with and without blooms, equals the model.
#[test]
fn prefix_scans_equal_the_model() {
    prefix_model(opts(&MemFileSystem::new()));
}

/// The same with memtable blooms holding prefixes and whole keys.
#[test]
fn prefix_scans_with_memtable_blooms_equal_the_model() {
    let o = Options {
        memtable_prefix_bloom_size_ratio: 0.1,
        memtable_whole_key_filtering: true,
        ..opts(&MemFileSystem::new())
    };
    prefix_model(o);
}

fn prefix_model(o: Options) {
    let db = Db::open(Path::new("/prefix-model"), o).expect("open");
    let mut rng = StdRng::seed_from_u64(7);
    let mut model: BTreeMap<Vec<u8>, ()> = BTreeMap::new();
    for op in 0..6000 {
        let k = format!("p{:03}{:04}", rng.gen_range(0..40), rng.gen_range(0..300)).into_bytes();
        if rng.gen_bool(0.15) {
            db.delete(&k).expect("delete");
            model.remove(&k);
        } else {
            db.put(&k, [b'x'; 40]).expect("put");
            model.insert(k, ());
        }
        if op % 1500 == 1499 {
            for p in 0..42 {
                let prefix = format!("p{p:03}").into_bytes();
                let want: Vec<Vec<u8>> = model
                    .keys()
                    .filter(|k| k.starts_with(&prefix))
                    .cloned()
                    .collect();
                for (total, reverse) in [(false, false), (false, true), (true, false)] {
                    let got = prefix_scan(&db, &prefix, total, reverse).expect("scan");
                    assert!(
                        got == want,
                        "op {op} prefix {p} total {total} reverse {reverse}"
                    );
                }
                // `Db::prefix` over the extractor's prefix, a longer and a shorter one, both ways.
                let longer = [prefix.clone(), b"01".to_vec()].concat();
                for q in [&prefix, &longer, &prefix[..3].to_vec()] {
                    let want: Vec<Vec<u8>> =
                        model.keys().filter(|k| k.starts_with(q)).cloned().collect();
                    let got: Vec<Vec<u8>> = db
                        .prefix(q)
                        .map(|r| r.map(|(k, _)| k))
                        .collect::<Result<_, _>>()
                        .expect("prefix");
                    assert!(got == want, "op {op} Db::prefix {q:?}");
                    let mut back: Vec<Vec<u8>> = db
                        .prefix(q)
                        .rev()
                        .map(|r| r.map(|(k, _)| k))
                        .collect::<Result<_, _>>()
                        .expect("prefix rev");
                    back.reverse();
                    assert!(back == want, "op {op} Db::prefix {q:?} from the back");
                }
            }
        }
    }
}

/// The prefix up to and including the last ':' (keys without one have none).
struct UpToLastColon;

impl shaledb::PrefixExtractor for UpToLastColon {
    fn name(&self) -> &str {
        "test.UpToLastColon"
    }
    fn prefix<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        key.iter().rposition(|&b| b == b':').map(|i| &key[..=i])
    }
}

/// `prefix_same_as_start` means "the same prefix as the target, as the extractor gives it"
/// (RocksDB's meaning), not "starts with it": with blooms or without, from memtable or tables.
#[test]
fn iteration_keeps_to_the_extractors_prefix() {
    let fs = MemFileSystem::new();
    let o = Options {
        prefix_extractor: Some(Arc::new(UpToLastColon)),
        ..opts(&fs)
    };
    let db = Db::open(Path::new("/prefix-colon"), o).expect("open");
    for k in ["a:b:c", "a:x", "a:y", "a:z:1", "b:1"] {
        db.put(k, b"v").expect("put");
    }
    for flushed in [false, true] {
        for total_order in [false, true] {
            let ro = ReadOptions {
                prefix_same_as_start: true,
                total_order_seek: total_order,
                ..Default::default()
            };
            let mut it = db.iter(&ro);
            it.seek(b"a:x");
            let mut keys = Vec::new();
            while it.valid() {
                keys.push(String::from_utf8_lossy(it.key()).into_owned());
                it.next();
            }
            it.status().expect("status");
            assert_eq!(
                keys,
                ["a:x", "a:y"],
                "flushed {flushed} total order {total_order}"
            );
        }
        db.flush().expect("flush");
    }
}
