//! The public API's shape: key and value types, options' `Debug` and validation, errors.

use shaledb::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

#[test]
fn keys_and_values_take_any_byte_slice_type() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let wo = WriteOptions::default();
    db.put(b"array", b"1").expect("byte-string literals");
    db.put("str", "2").expect("&str");
    db.put(String::from("string"), String::from("3"))
        .expect("String by value");
    let (k, v) = (b"vec".to_vec(), b"4".to_vec());
    db.put(&k, &v).expect("&Vec<u8>");
    db.put_opt(&wo, k.clone(), v.clone())
        .expect("Vec<u8> by value");
    db.put(&b"slice"[..], &b"5"[..]).expect("&[u8]");
    let mut batch = WriteBatch::new();
    batch.put("batch", vec![b'6']);
    batch.delete(String::from("array"));
    db.write(&wo, &batch).expect("batch");

    assert_eq!(db.get("str").expect("get").as_deref(), Some(&b"2"[..]));
    assert_eq!(
        db.get(String::from("string")).expect("get").as_deref(),
        Some(&b"3"[..])
    );
    assert_eq!(db.get(&k).expect("get").as_deref(), Some(&b"4"[..]));
    assert_eq!(
        db.get_opt(&ReadOptions::default(), b"batch")
            .expect("get")
            .as_deref(),
        Some(&b"6"[..])
    );
    assert_eq!(db.get(b"array").expect("get"), None);
    db.delete("str").expect("delete &str");
    db.delete_opt(&wo, k).expect("delete Vec");
    assert_eq!(db.get("str").expect("get"), None);
    assert_eq!(db.get("vec").expect("get"), None);

    let mut it = db.iter(&ReadOptions::default());
    it.seek("sl");
    assert_eq!(it.key(), b"slice");
    it.seek_for_prev(String::from("sm"));
    assert_eq!(it.key(), b"slice");
}

#[test]
fn options_print_with_debug() {
    let o = Options::default()
        .with_fs(shaledb::fs::MemFileSystem::new())
        .with_write_buffer_size(1 << 20);
    let s = format!("{o:?}");
    assert!(s.starts_with("Options { create_if_missing: true,"), "{s}");
    assert!(s.contains("fs: MemFileSystem,"), "{s}");
    assert!(s.contains("write_buffer_size: 1048576,"), "{s}");
    assert!(s.contains("max_manifest_file_size: 67108864,"), "{s}");
    assert!(s.contains("wal_bytes_per_sync: 8388608,"), "{s}");
    assert!(s.contains("max_total_wal_size: 0,"), "{s}");
    assert!(s.contains("statistics: false, listeners: 0,"), "{s}");
    assert!(s.contains("rate_limit_bytes_per_sec: 0 }"), "{s}");
    assert!(format!("{:?}", Options::default()).contains("fs: PosixFileSystem,"));

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    db.put("a", "1").expect("put");
    let ro = ReadOptions::default()
        .with_snapshot(db.snapshot())
        .with_lower_bound("a")
        .with_fill_cache(false);
    assert_eq!(
        format!("{ro:?}"),
        "ReadOptions { snapshot: Some(Snapshot(1)), iterate_lower_bound: Some([97]), \
         iterate_upper_bound: None, verify_checksums: true, fill_cache: false, tailing: false, \
         prefix_same_as_start: false, total_order_seek: false }"
    );
    let wo = WriteOptions::default().with_sync(true);
    assert_eq!(
        format!("{wo:?}"),
        "WriteOptions { sync: true, disable_wal: false, low_pri: false }"
    );
}

#[test]
fn builders_set_the_same_fields_as_struct_literals() {
    let built = Options::default()
        .with_create_if_missing(false)
        .with_level0_file_num_compaction_trigger(2)
        .with_max_bytes_for_level_multiplier(4.0)
        .with_compression(shaledb::CompressionType::Zstd);
    let literal = Options {
        create_if_missing: false,
        level0_file_num_compaction_trigger: 2,
        max_bytes_for_level_multiplier: 4.0,
        compression_per_level: vec![shaledb::CompressionType::Zstd],
        ..Default::default()
    };
    assert_eq!(format!("{built:?}"), format!("{literal:?}"));
    let upper: Vec<u8> = vec![b'z'];
    let ro = ReadOptions::default()
        .with_upper_bound(upper)
        .with_verify_checksums(false);
    assert_eq!(ro.iterate_upper_bound, Some(b"z".to_vec()));
    assert!(!ro.verify_checksums);
    assert!(WriteOptions::default().with_disable_wal(true).disable_wal);
}

#[test]
fn open_refuses_options_that_cannot_work_naming_the_option() {
    let base = || Options::default().with_fs(shaledb::fs::MemFileSystem::new());
    let cases: Vec<(Options, &str)> = vec![
        (
            base().with_level0_file_num_compaction_trigger(40),
            "level0_stop_writes_trigger (36) must be at least level0_file_num_compaction_trigger (40)",
        ),
        (
            base()
                .with_level0_slowdown_writes_trigger(30)
                .with_level0_stop_writes_trigger(25),
            "level0_stop_writes_trigger (25) must be at least level0_slowdown_writes_trigger (30)",
        ),
        (
            base().with_level0_file_num_compaction_trigger(0),
            "level0_file_num_compaction_trigger must be at least 1",
        ),
        (
            base()
                .with_soft_pending_compaction_bytes_limit(10 << 30)
                .with_hard_pending_compaction_bytes_limit(5 << 30),
            "soft_pending_compaction_bytes_limit (10737418240) must not exceed \
             hard_pending_compaction_bytes_limit (5368709120)",
        ),
        (
            base().with_soft_pending_compaction_bytes_limit(0),
            "soft_pending_compaction_bytes_limit and hard_pending_compaction_bytes_limit must be at least 1",
        ),
        (
            base().with_hard_pending_compaction_bytes_limit(0),
            "soft_pending_compaction_bytes_limit and hard_pending_compaction_bytes_limit must be at least 1",
        ),
        (
            base().with_target_file_size_base(0),
            "target_file_size_base must be at least 1 byte",
        ),
        (
            base().with_target_file_size_multiplier(0),
            "target_file_size_multiplier must be at least 1",
        ),
        (
            base().with_max_bytes_for_level_base(0),
            "max_bytes_for_level_base must be at least 1 byte",
        ),
        (
            base().with_max_bytes_for_level_multiplier(f64::NAN),
            "max_bytes_for_level_multiplier must be a number of at least 1",
        ),
        (
            base().with_max_bytes_for_level_multiplier(0.5),
            "max_bytes_for_level_multiplier must be a number of at least 1",
        ),
        (
            base().with_block_cache_shard_bits(17),
            "block_cache_shard_bits is 17; at most 16",
        ),
    ];
    for (opts, want) in cases {
        match Db::open("/db", opts) {
            Err(shaledb::Error::InvalidArgument(msg)) => {
                assert!(msg.starts_with(want), "expected {want:?}, got {msg:?}")
            }
            Err(e) => panic!("expected InvalidArgument {want:?}, got {e}"),
            Ok(_) => panic!("open accepted options it must refuse: {want}"),
        }
    }
    // The limits themselves are fine, and so is an empty compression list.
    let edge = base()
        .with_level0_file_num_compaction_trigger(4)
        .with_level0_slowdown_writes_trigger(4)
        .with_level0_stop_writes_trigger(4)
        .with_soft_pending_compaction_bytes_limit(1)
        .with_hard_pending_compaction_bytes_limit(1)
        .with_block_cache_shard_bits(16)
        .with_compression_per_level(Vec::new());
    Db::open("/db", edge).expect("edge values open");
}
