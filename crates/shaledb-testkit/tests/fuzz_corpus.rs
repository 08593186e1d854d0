//! Replays every committed fuzz input (`fuzz/corpus/<target>/*`) through the same target
//! bodies the fuzzer runs, so CI re-checks the corpus without a fuzzer. With
//! `SHALEDB_WRITE_FUZZ_SEEDS=1` it first writes seed inputs made by the engine itself (a real
//! block, table, WAL, version edit, write batch and operation script).

use shaledb::fs::{FileSystem, MemFileSystem};
use shaledb::internals::{BlobFileBuilder, BlobRef};
use shaledb::{
    CompressionType, DataBlockIndexType, Db, FixedPrefix, IndexType, Options, WriteBatch,
    WriteOptions,
};
use shaledb_testkit::fuzz::{self, BlobSample, TARGETS};
use shaledb_testkit::table_layout::{Region, TableLayout};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The sst seed with a two-level index and filter partitions (format version 3, written
/// before format 4; the seed writer no longer makes it).
const PARTITIONED_SEED: &str = "seed-table-partitioned";
/// Its format-4 successor, whose index keeps internal keys (a key's versions span blocks).
const PARTITIONED_SEED_V4: &str = "seed-table-v4-partitioned";

/// A format-5 table, whose data blocks carry hash indexes, and its first data block.
const HASH_INDEX_SEED: &str = "seed-table-v5-hash";
const HASH_INDEX_BLOCK_SEED: &str = "seed-block-hash";

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

fn write_seeds(dir: &Path) {
    let fs = MemFileSystem::new();
    // Tables are format 4 (seeds of formats 1 to 3, written before it, keep their names):
    // restart intervals above 1 so the index has delta-encoded handles.
    let mut o = Options {
        fs: Arc::new(fs.clone()),
        block_size: 256,
        index_block_restart_interval: 4,
        ..Default::default()
    };
    o.set_compression(CompressionType::Snappy);
    let db_dir = Path::new("/seed");
    let db = Db::open(db_dir, o).expect("open");
    let mut b = WriteBatch::new();
    for i in 0..40u32 {
        b.put(
            format!("key{i:03}").as_bytes(),
            format!("value{i}").as_bytes(),
        );
    }
    b.delete(b"key007");
    // A range tombstone: the table gets a range-deletion block, the WAL and batch tag 0xF.
    b.delete_range(b"key010", b"key015");
    db.write(&WriteOptions::default(), &b).expect("write");
    db.flush().expect("flush");
    db.put(b"after", b"flush").expect("put");
    let save = |target: &str, name: &str, bytes: &[u8]| {
        let d = dir.join(target);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join(name), bytes).expect("write seed");
    };
    save(
        "write_batch",
        "seed-batch",
        shaledb::internals::write_batch_data(&b),
    );
    for p in fs.file_names() {
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let bytes = fs.read_file_bytes(&p).expect("bytes");
        if name.ends_with(".sst") {
            save("sst", "seed-table-v4", &bytes);
            // The first data block (without its 5-byte trailer): blocks start at offset 0.
            let mut one = bytes.clone();
            one.truncate(200.min(one.len()));
            save("block", "seed-prefix", &one);
        } else if name.ends_with(".log") {
            save("wal", "seed-wal", &bytes);
        } else if name.starts_with("MANIFEST-") {
            save("wal", "seed-manifest", &bytes);
            // A MANIFEST record's payload is one version edit: skip the 7-byte header.
            if bytes.len() > 7 {
                let len = usize::from(u16::from_le_bytes([bytes[4], bytes[5]]));
                save(
                    "version_edit",
                    "seed-edit",
                    &bytes[7..(7 + len).min(bytes.len())],
                );
            }
        }
    }
    // A table with a zstd dictionary (a compression-dictionary block).
    let dict_fs = MemFileSystem::new();
    let mut o = Options {
        fs: Arc::new(dict_fs.clone()),
        block_size: 128,
        max_dict_bytes: 256,
        index_block_restart_interval: 2,
        ..Default::default()
    };
    o.set_compression(CompressionType::Zstd);
    let db = Db::open(db_dir, o).expect("open");
    for i in 0..30u32 {
        db.put(
            format!("key{i:03}"),
            format!("row {i} | TRUCK | DELIVER IN PERSON"),
        )
        .expect("put");
    }
    db.flush().expect("flush");
    for p in dict_fs.file_names() {
        if p.extension().is_some_and(|e| e == "sst") {
            save(
                "sst",
                "seed-table-v4-dict",
                &dict_fs.read_file_bytes(&p).expect("bytes"),
            );
        }
    }
    // A table with a two-level index and filter partitions: several index and filter
    // partitions, prefixes (FixedPrefix(3)) in the filter partitions, and a key with 12
    // versions (kept by snapshots) across data blocks, so the index keeps internal keys.
    let part_fs = MemFileSystem::new();
    let o = Options {
        fs: Arc::new(part_fs.clone()),
        block_size: 128,
        index_type: IndexType::TwoLevel,
        partition_filters: true,
        metadata_block_size: 64,
        index_block_restart_interval: 3,
        prefix_extractor: Some(Arc::new(FixedPrefix(3))),
        ..Default::default()
    };
    let part = Db::open(db_dir, o).expect("open");
    for i in 0..45u32 {
        let key = format!("{}{i:02}", ["aa", "ab", "ba"][i as usize % 3]);
        part.put(key, format!("value {i}")).expect("put");
    }
    let mut snapshots = Vec::new();
    for v in 0..12 {
        snapshots.push(part.snapshot());
        part.put(b"ab01", format!("newer {v}")).expect("put");
    }
    part.delete(b"ba02").expect("delete");
    part.flush().expect("flush");
    drop(snapshots);
    for p in part_fs.file_names() {
        if p.extension().is_some_and(|e| e == "sst") {
            save(
                "sst",
                PARTITIONED_SEED_V4,
                &part_fs.read_file_bytes(&p).expect("bytes"),
            );
        }
    }
    part.close().expect("close");
    // A table whose data blocks carry hash indexes (format 5), and its first data block
    // whole: restart intervals of two entries, a key with versions across intervals.
    let hash_fs = MemFileSystem::new();
    let o = Options {
        fs: Arc::new(hash_fs.clone()),
        block_size: 256,
        block_restart_interval: 2,
        data_block_index_type: DataBlockIndexType::BinaryAndHash,
        compression_per_level: vec![CompressionType::None],
        ..Default::default()
    };
    let hashed = Db::open(db_dir, o).expect("open");
    let mut snapshots = Vec::new();
    for i in 0..30u32 {
        hashed
            .put(format!("key{i:03}"), format!("value{i}"))
            .expect("put");
        if i % 10 == 3 {
            snapshots.push(hashed.snapshot());
            hashed.put(b"key002", format!("newer {i}")).expect("put");
        }
    }
    hashed.flush().expect("flush");
    drop(snapshots);
    for p in hash_fs.file_names() {
        if p.extension().is_some_and(|e| e == "sst") {
            let bytes = hash_fs.read_file_bytes(&p).expect("bytes");
            save("sst", HASH_INDEX_SEED, &bytes);
            let layout = TableLayout::parse(&bytes).expect("layout");
            let (_, start, end) = layout.blocks[0];
            // Without its 5-byte trailer (codec byte and checksum): the block's contents.
            save("block", HASH_INDEX_BLOCK_SEED, &bytes[start..end - 5]);
        }
    }
    hashed.close().expect("close");
    save(
        "api",
        "seed-ops",
        &[
            0, 1, 5, 7, 3, 1, 4, 0, 2, 3, 5, 0x87, 3, 1, 4, 0, 6, 0, 4, 0,
        ],
    );
    // Puts of k1..k4, a range delete of k2..k4 (0x82: key 2, width 3), scans, flush,
    // compaction and power loss.
    save(
        "api",
        "seed-ops-range",
        &[
            0, 1, 3, 9, 0, 2, 3, 9, 0, 3, 3, 9, 0, 4, 3, 9, 0x82, 2, 3, 4, 0, 5, 0, 3, 3, 6, 0, 4,
            0, 0x87, 0, 4, 0,
        ],
    );
    db.close().expect("close");
    write_blob_seeds(dir);
    write_backup_seed(dir);
}

/// The meta file of a backup of a database with a table, a blob file and a WAL.
fn write_backup_seed(dir: &Path) {
    let fs = MemFileSystem::new();
    let o = Options {
        fs: Arc::new(fs.clone()),
        enable_blob_files: true,
        min_blob_size: 8,
        ..Default::default()
    };
    let db = Db::open("/seed", o).expect("open");
    db.put(b"key", b"a value kept in a blob file").expect("put");
    db.flush().expect("flush");
    db.put(b"unflushed", b"v").expect("put");
    let engine = shaledb::BackupEngine::open_with_fs("/backups", Arc::new(fs.clone()))
        .expect("backup engine");
    let id = engine.create_backup(&db).expect("backup");
    let bytes = fs
        .read_file_bytes(format!("/backups/meta/{id}"))
        .expect("meta file");
    let d = dir.join("backup_meta");
    std::fs::create_dir_all(&d).expect("mkdir");
    std::fs::write(d.join("seed-meta"), bytes).expect("write seed");
}

/// Blob files (Snappy, with compressed and raw records; Zstd; none without records) and the
/// encoded references of the sample the `blob_ref` target reads.
fn write_blob_seeds(dir: &Path) {
    let save = |target: &str, name: &str, bytes: &[u8]| {
        let d = dir.join(target);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join(name), bytes).expect("write seed");
    };
    save("blob_file", "seed-blob-snappy", &fuzz::blob_sample().bytes);
    let zstd = BlobSample::build(CompressionType::Zstd);
    save("blob_file", "seed-blob-zstd", &zstd.bytes);
    let empty = blob_file_without_records();
    save("blob_file", "seed-blob-empty", &empty);
    for (key, _, r) in &fuzz::blob_sample().records {
        let mut enc = Vec::new();
        r.encode_to(&mut enc);
        let name = format!("seed-ref-{}", String::from_utf8_lossy(key));
        save("blob_ref", &name, &enc);
    }
}

/// A finished blob file (number 7) that holds no record.
fn blob_file_without_records() -> Vec<u8> {
    let mem = MemFileSystem::new();
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let dir = Path::new("/empty");
    fs.create_dir_all(dir).expect("mkdir");
    let b = BlobFileBuilder::create(&fs, dir, 7, 0, CompressionType::Lz4, None).expect("create");
    b.finish().expect("finish");
    mem.read_file_bytes(dir.join("000007.blob"))
        .expect("the blob file")
}

#[test]
fn replay_fuzz_corpus() {
    let dir = corpus_dir();
    if std::env::var_os("SHALEDB_WRITE_FUZZ_SEEDS").is_some() {
        write_seeds(&dir);
    }
    let mut replayed = 0;
    for (name, target) in TARGETS {
        let d = dir.join(name);
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let bytes = std::fs::read(e.path()).expect("read corpus file");
            target(&bytes);
            replayed += 1;
        }
    }
    // Garbage and empty inputs for every target, corpus or not.
    for (_, target) in TARGETS {
        target(&[]);
        target(&[0xff; 64]);
        target(&(0..=255u8).collect::<Vec<_>>());
    }
    assert!(replayed > 0, "no corpus under {}", dir.display());
    eprintln!("replayed {replayed} fuzz inputs");
}

/// The sst target starts from format-3 and format-4 tables whose partitions it can mutate.
#[test]
fn the_sst_corpus_holds_tables_with_index_and_filter_partitions() {
    for (seed, version) in [(PARTITIONED_SEED, 3), (PARTITIONED_SEED_V4, 4)] {
        let path = corpus_dir().join("sst").join(seed);
        let bytes = std::fs::read(&path).expect("the partitioned seed table");
        let layout = TableLayout::parse(&bytes).expect("layout");
        assert_eq!((layout.format_version, layout.two_level), (version, true));
        let partitions = layout.count(Region::IndexPartition);
        assert!(partitions >= 3, "{layout:?}");
        assert_eq!(
            layout.count(Region::FilterPartition),
            partitions,
            "{layout:?}"
        );
        assert_eq!(layout.count(Region::FilterPartitionIndex), 1, "{layout:?}");
    }
}

/// The block and sst targets start from a format-5 table and one of its data blocks, whose
/// hash index the block decoder accepts.
#[test]
fn the_corpus_holds_a_table_and_a_block_with_hash_indexes() {
    let table = std::fs::read(corpus_dir().join("sst").join(HASH_INDEX_SEED)).expect("seed");
    let layout = TableLayout::parse(&table).expect("layout");
    assert_eq!(layout.format_version, 5);
    let (region, start, end) = layout.blocks[0];
    assert_eq!(region, Region::Data);
    let block =
        std::fs::read(corpus_dir().join("block").join(HASH_INDEX_BLOCK_SEED)).expect("block seed");
    assert_eq!(block, table[start..end - 5]);
    // The restart count's top bit: the block has a hash index.
    assert_eq!(block[block.len() - 1] & 0x80, 0x80);
    shaledb::internals::Block::new(block).expect("a valid block");
}

/// The blob targets over a valid file, each of its one-bit flips and truncations, and every
/// reference into it at every offset: no panic, and the assertions inside the targets hold
/// (a read never returns another record's value).
#[test]
fn blob_targets_over_a_valid_file_its_mutations_and_every_reference() {
    let sample = fuzz::blob_sample();
    let reader = sample.open().expect("the sample opens");
    assert_eq!(sample.records.len(), 4);
    for (key, value, r) in &sample.records {
        assert_eq!(&reader.read(key, r, true).expect("read"), value);
    }
    let codecs: Vec<CompressionType> = sample
        .records
        .iter()
        .map(|(_, _, r)| r.compression)
        .collect();
    assert!(codecs.contains(&CompressionType::Snappy) && codecs.contains(&CompressionType::None));
    let bytes = &sample.bytes;
    fuzz::blob_file(bytes);
    for i in 0..bytes.len() {
        for bit in [0x01u8, 0x80] {
            let mut m = bytes.clone();
            m[i] ^= bit;
            fuzz::blob_file(&m);
        }
    }
    for len in 0..bytes.len() {
        fuzz::blob_file(&bytes[..len]);
    }
    let sizes: Vec<u64> = sample.records.iter().map(|(_, _, r)| r.size).collect();
    let mut encoded = Vec::new();
    for offset in 0..=bytes.len() as u64 {
        for &size in &sizes {
            for compression in [CompressionType::None, CompressionType::Snappy] {
                let r = BlobRef {
                    file_number: 7,
                    offset,
                    size,
                    compression,
                };
                encoded.clear();
                r.encode_to(&mut encoded);
                fuzz::blob_ref(&encoded);
                fuzz::blob_ref(&encoded[..encoded.len() - 1]);
                // A TTL family's entry: the reference and a write time.
                encoded.extend_from_slice(&offset.to_le_bytes());
                fuzz::blob_ref(&encoded);
            }
        }
    }
}

/// The backup_meta seed is a valid meta file; every byte of it flipped, and every cut, goes
/// through the target (decoded as corruption, never a panic).
#[test]
fn the_backup_meta_seed_decodes_and_its_mutations_do_not() {
    let path = corpus_dir().join("backup_meta").join("seed-meta");
    let bytes = std::fs::read(&path).expect("the backup meta seed");
    let meta = shaledb::internals::BackupMeta::decode(&bytes, &path).expect("seed decodes");
    assert_eq!(meta.files.len(), 4, "{meta:?}");
    for i in 0..bytes.len() {
        let mut m = bytes.clone();
        m[i] ^= 0x01;
        fuzz::backup_meta(&m);
        fuzz::backup_meta(&bytes[..i]);
    }
}
