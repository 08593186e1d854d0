//! API behaviour: locking, argument checks, large values, properties, destroy.
#![allow(clippy::field_reassign_with_default)] // options are built field by field for readability

use shaledb::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

/// Files in `dir` whose names end with `suffix` (`.sst`, `.log`) or, for `MANIFEST-`, start so.
fn files_named(dir: &std::path::Path, pattern: &str) -> usize {
    std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.ends_with(pattern) || name.starts_with(pattern)
        })
        .count()
}

/// Table files the current version lists, summed over the levels.
fn live_tables(db: &Db) -> usize {
    (0..7)
        .map(|l| {
            db.property(&format!("shaledb.num-files-at-level{l}"))
                .and_then(|s| s.parse::<usize>().ok())
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn second_open_in_the_same_process_is_locked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Locked(p)) => assert_eq!(p, dir.path()),
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("second open succeeded"),
    }
    db.put(b"still", b"works").expect("first handle unaffected");
    db.close().expect("close");
    let again = Db::open(dir.path(), Options::default()).expect("reopen after close");
    assert_eq!(
        again.get(b"still").expect("get"),
        Some(b"works".to_vec().into())
    );
}

#[test]
fn second_open_from_another_process_is_locked() {
    if let Ok(path) = std::env::var("SHALEDB_LOCK_CHILD_DIR") {
        // Child mode: report what a second process sees.
        let code = match Db::open(&path, Options::default()) {
            Err(Error::Locked(_)) => 0,
            _ => 1,
        };
        std::process::exit(code);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let exe = std::env::current_exe().expect("exe");
    let status = std::process::Command::new(exe)
        .args([
            "--exact",
            "second_open_from_another_process_is_locked",
            "--nocapture",
        ])
        .env("SHALEDB_LOCK_CHILD_DIR", dir.path())
        .status()
        .expect("spawn child");
    assert!(
        status.success(),
        "the child process was not refused with Locked"
    );
    db.close().expect("close");
}

#[test]
fn empty_keys_empty_values_and_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::default();
    o.max_key_size = 1024;
    let db = Db::open(dir.path(), o).expect("open");
    db.put(b"", b"empty key").expect("empty key");
    db.put(b"k", b"").expect("empty value");
    assert_eq!(
        db.get(b"").expect("get"),
        Some(b"empty key".to_vec().into())
    );
    assert_eq!(db.get(b"k").expect("get"), Some(Vec::new().into()));
    match db.put(&vec![b'x'; 1025], b"v") {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("max_key_size"), "{msg}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    db.flush().expect("flush");
    assert_eq!(
        db.get(b"").expect("get"),
        Some(b"empty key".to_vec().into())
    );
    assert_eq!(db.get(b"k").expect("get"), Some(Vec::new().into()));
}

#[test]
fn sixty_four_mib_value_round_trips_through_wal_and_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big: Vec<u8> = (0..64usize << 20).map(|i| (i % 251) as u8).collect();
    {
        let db = Db::open(dir.path(), Options::default()).expect("open");
        db.put(b"big", &big).expect("put big");
        assert!(db.get(b"big").expect("get") == Some(big.clone().into()));
        db.close().expect("close");
    }
    // Reopen replays the WAL (64 MiB record) and flushes it to a table.
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    assert!(db.get(b"big").expect("get after replay") == Some(big.clone().into()));
    db.compact_range(None, None).expect("compact");
    assert!(db.get(b"big").expect("get from table") == Some(big.into()));
}

#[test]
fn properties_report_levels_and_sizes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // No codec: the table's bytes are the entries' bytes.
    let opts = Options::default().with_compression(shaledb::CompressionType::None);
    let db = Db::open(dir.path(), opts).expect("open");
    for i in 0..1000u32 {
        db.put(format!("key{i:05}").as_bytes(), &[7u8; 100])
            .expect("put");
    }
    assert!(
        db.property("shaledb.cur-size-all-mem-tables")
            .and_then(|s| s.parse::<u64>().ok())
            .expect("mem size")
            > 100_000
    );
    db.flush().expect("flush");
    assert_eq!(
        db.property("shaledb.num-files-at-level0").as_deref(),
        Some("1")
    );
    assert_eq!(
        db.property("shaledb.estimate-num-keys").as_deref(),
        Some("1000")
    );
    let size: u64 = db
        .property("shaledb.total-sst-files-size")
        .and_then(|s| s.parse().ok())
        .expect("size");
    assert!(size > 100_000, "{size}");
    let stats = db.property("shaledb.stats").expect("stats");
    assert!(stats.contains("L0"), "{stats}");
    assert!(db.property("shaledb.block-cache-usage").is_some());
    assert!(db.property("shaledb.no-such-thing").is_none());
    db.compact_range(None, None).expect("compact");
    assert_eq!(
        db.property("shaledb.num-files-at-level0").as_deref(),
        Some("0")
    );
    assert_eq!(
        db.property("shaledb.num-files-at-level1").as_deref(),
        Some("1")
    );
}

#[test]
fn create_if_missing_error_if_exists_and_destroy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let o = Options {
        create_if_missing: false,
        ..Default::default()
    };
    assert!(matches!(Db::open(&path, o), Err(Error::NotFound(_))));
    Db::open(&path, Options::default())
        .expect("create")
        .close()
        .expect("close");
    let o = Options {
        error_if_exists: true,
        ..Default::default()
    };
    assert!(matches!(Db::open(&path, o), Err(Error::AlreadyExists(_))));
    Db::destroy(&path, &Options::default()).expect("destroy");
    assert!(!path.exists());
}

#[test]
fn deletes_and_overwrites_survive_compaction_with_snapshots() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    db.put(b"a", b"1").expect("put");
    let snap = db.snapshot();
    db.put(b"a", b"2").expect("put");
    db.delete(b"a").expect("delete");
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.get(b"a").expect("get"), None);
    let ro = ReadOptions {
        snapshot: Some(snap.clone()),
        ..Default::default()
    };
    assert_eq!(
        db.get_opt(&ro, b"a").expect("get"),
        Some(b"1".to_vec().into())
    );
    drop(ro);
    drop(snap);
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.get(b"a").expect("get"), None);
    assert_eq!(
        db.property("shaledb.estimate-num-keys").as_deref(),
        Some("0")
    );
    let mut b = WriteBatch::new();
    b.put(b"x", b"1");
    b.delete(b"x");
    b.put(b"y", b"2");
    db.write(&WriteOptions::default(), &b).expect("batch");
    assert_eq!(db.get(b"x").expect("get"), None);
    assert_eq!(db.get(b"y").expect("get"), Some(b"2".to_vec().into()));
}

#[test]
fn manifest_rolls_when_it_grows_and_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::default();
    o.max_manifest_file_size = 1; // every edit starts a new MANIFEST
    o.write_buffer_size = 4096;
    o.level0_file_num_compaction_trigger = 2;
    let manifests = |p: &std::path::Path| files_named(p, "MANIFEST-");
    {
        let db = Db::open(dir.path(), o.clone()).expect("open");
        for i in 0..2000u32 {
            db.put(format!("k{i:05}").as_bytes(), &[1u8; 50])
                .expect("put");
        }
        db.wait_for_compactions().expect("settle");
        assert_eq!(manifests(dir.path()), 1, "old MANIFESTs are deleted");
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), o).expect("reopen");
    for i in (0..2000u32).step_by(97) {
        assert_eq!(
            db.get(format!("k{i:05}").as_bytes()).expect("get"),
            Some(vec![1u8; 50].into())
        );
    }
    // Compactions after the reopen roll the MANIFEST too; count once they are done, not
    // while one is between creating the new file and deleting the old.
    db.wait_for_compactions().expect("settle after reopen");
    assert_eq!(manifests(dir.path()), 1);
}

#[test]
fn replaced_tables_are_deleted_soon_after_readers_let_go() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::default();
    o.write_buffer_size = 8 << 10;
    o.level0_file_num_compaction_trigger = 2;
    let db = Db::open(dir.path(), o).expect("open");
    let tables = |p: &std::path::Path| files_named(p, ".sst");
    for i in 0..3000u32 {
        db.put(format!("k{:05}", i % 700).as_bytes(), &[2u8; 40])
            .expect("put");
    }
    // An iterator pins the current tables while compactions replace them.
    let it = db.iter(&ReadOptions::default());
    for i in 0..3000u32 {
        db.put(format!("k{:05}", i % 700).as_bytes(), &[3u8; 40])
            .expect("put");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("settle");
    let live = live_tables(&db);
    assert!(
        tables(dir.path()) > live,
        "the iterator should still pin replaced tables"
    );
    drop(it);
    // No further writes: the idle background threads must delete the unpinned tables.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while tables(dir.path()) != live && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(tables(dir.path()), live, "obsolete tables left on disk");
}

#[test]
fn wait_for_compactions_returns_with_only_live_files_on_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::default();
    o.write_buffer_size = 8 << 10;
    o.level0_file_num_compaction_trigger = 2;
    let db = Db::open(dir.path(), o).expect("open");
    let count = |pattern: &str| files_named(dir.path(), pattern);
    // Several rounds: the background thread used to delete a compaction's inputs just after
    // reporting it done, so a caller could see them on disk after the wait returned.
    for round in 0..20u32 {
        for i in 0..1500u32 {
            db.put(
                format!("k{:05}", (i * 7 + round) % 900).as_bytes(),
                &[4u8; 40],
            )
            .expect("put");
        }
        db.wait_for_compactions().expect("settle");
        let live = live_tables(&db);
        assert!(
            live > 0,
            "round {round}: the writes should have made tables"
        );
        assert_eq!(
            count(".sst"),
            live,
            "round {round}: replaced tables left on disk"
        );
        assert_eq!(
            count(".log"),
            1,
            "round {round}: only the active WAL should be left"
        );
    }
}

#[test]
fn compact_range_returns_with_only_live_files_on_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::default();
    o.write_buffer_size = 8 << 10;
    o.disable_auto_compactions = true;
    let db = Db::open(dir.path(), o).expect("open");
    for round in 0..10u32 {
        for i in 0..1500u32 {
            db.put(
                format!("k{:05}", (i * 7 + round) % 900).as_bytes(),
                &[4u8; 40],
            )
            .expect("put");
        }
        // The full compaction replaces every table; they used to be deleted by the cleaner
        // thread some time after compact_range returned.
        db.compact_range(None, None).expect("compact");
        let live = live_tables(&db);
        assert!(
            live > 0,
            "round {round}: the compaction should leave tables"
        );
        assert_eq!(
            files_named(dir.path(), ".sst"),
            live,
            "round {round}: replaced tables left on disk after compact_range"
        );
    }
}

#[test]
fn a_table_an_iterator_holds_is_deleted_when_the_iterator_is_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let count = |pattern: &str| files_named(dir.path(), pattern);
    db.put(b"a", b"1").expect("put");
    db.flush().expect("flush");
    let mut it = db.iter(&ReadOptions::default());
    db.put(b"a", b"2").expect("put");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("settle");
    assert_eq!(live_tables(&db), 1);
    // The iterator's version still lists the first flush's table: it stays.
    assert_eq!(count(".sst"), 2);
    it.seek_to_first();
    assert_eq!(it.value(), b"1");
    drop(it);
    // Dropping the last version that lists it queues it; the cleaner deletes it without any
    // further call into the database.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while count(".sst") != 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(count(".sst"), 1);
    assert_eq!(db.get(b"a").expect("get").as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_sequential_load_is_written_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::default();
    o.write_buffer_size = 16 << 10;
    o.level0_file_num_compaction_trigger = 2;
    let db = Db::open(dir.path(), o).expect("open");
    for i in 0..20_000u32 {
        db.put(format!("k{i:07}").as_bytes(), &[5u8; 60])
            .expect("put");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("settle");
    let prop = |name: &str| -> u64 {
        db.property(name)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("property {name}"))
    };
    assert!(prop("shaledb.num-files-at-level0") < 2, "L0 was compacted");
    assert!(
        prop("shaledb.num-files-at-level1") > 2,
        "L0 files moved down"
    );
    // Flushes wrote every live byte once; compactions only moved files.
    assert_eq!(
        prop("shaledb.compaction-bytes-written"),
        prop("shaledb.total-sst-files-size")
    );
    for i in (0..20_000u32).step_by(113) {
        assert_eq!(
            db.get(format!("k{i:07}").as_bytes()).expect("get"),
            Some(vec![5u8; 60].into())
        );
    }
}

#[test]
fn sync_without_the_wal_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let wo = WriteOptions {
        sync: true,
        disable_wal: true,
        ..Default::default()
    };
    let mut batch = WriteBatch::new();
    batch.put(b"b", b"2");
    for res in [
        db.put_opt(&wo, b"a", b"1"),
        db.delete_opt(&wo, b"a"),
        db.write(&wo, &batch),
        db.write(&wo, &WriteBatch::new()),
    ] {
        match res {
            Err(Error::InvalidArgument(msg)) => {
                assert!(msg.contains("WriteOptions::sync"), "{msg}");
                assert!(msg.contains("WriteOptions::disable_wal"), "{msg}");
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
    assert_eq!(db.get(b"a").expect("get"), None);
    assert_eq!(db.get(b"b").expect("get"), None);
    // Each alone is fine.
    for (sync, disable_wal) in [(true, false), (false, true)] {
        db.put_opt(
            &WriteOptions {
                sync,
                disable_wal,
                ..Default::default()
            },
            b"a",
            b"1",
        )
        .expect("valid combination");
    }
    db.close().expect("close");
}

/// (stall count, stall seconds) from the `shaledb.stats` property.
fn write_stalls(db: &Db) -> (u64, f64) {
    let stats = db.property("shaledb.stats").expect("stats");
    let line = stats
        .lines()
        .find_map(|l| l.strip_prefix("Write stalls: "))
        .expect("stall line");
    let (count, rest) = line.split_once(" (total ").expect("count");
    let secs = rest.split_once(" s)").expect("seconds").0;
    (
        count.parse().expect("count"),
        secs.parse().expect("seconds"),
    )
}

#[test]
fn slowed_writes_pass_at_the_delayed_write_rate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::default();
    // One L0 file puts the database in the slowdown state; no compaction takes it away.
    o.level0_slowdown_writes_trigger = 1;
    o.level0_file_num_compaction_trigger = 100;
    o.level0_stop_writes_trigger = 200;
    o.delayed_write_rate = 32 << 10;
    let db = Db::open(dir.path(), o).expect("open");
    db.put(b"first", b"x").expect("put");
    assert_eq!(write_stalls(&db).0, 0, "not slowed before L0 has a file");
    db.flush().expect("flush");
    let value = vec![7u8; 1024];
    let start = std::time::Instant::now();
    for i in 0..64u32 {
        db.put(&i.to_be_bytes(), &value).expect("put");
    }
    let elapsed = start.elapsed();
    // 64 writes of more than 1 KiB each at 32 KiB/s: at least 2 s (no credit at the start of
    // a slowdown). A lower bound only; the margin absorbs clock granularity.
    assert!(
        elapsed >= std::time::Duration::from_millis(1900),
        "64 KiB took {elapsed:?} at 32 KiB/s"
    );
    // Each of the 64 single-writer groups waits unless a late wake-up earned it a whole
    // write's credit, which a loaded machine can do; the stall time is most of the 2 s.
    let (count, secs) = write_stalls(&db);
    assert!((32..=64).contains(&count), "{count} stalls");
    assert!(secs >= 1.0, "stall time {secs} s");
    db.close().expect("close");
}

#[test]
fn range_values_share_table_blocks_and_outlive_the_db() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        block_cache_size: 64 << 10,
        ..Default::default()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let value = |i: usize| format!("value-{i:05}-{}", "y".repeat(90)).into_bytes();
    let key = |i: usize| format!("key{i:05}").into_bytes();
    for i in 0..2000 {
        db.put(key(i), value(i)).expect("put");
    }
    db.flush().expect("flush");
    db.put(b"key99999", b"in the memtable").expect("put");

    // Forward over tables: every value shares its block; the memtable's is a copy.
    let items: Vec<_> = db.range(..).collect::<Result<_, _>>().expect("range");
    assert_eq!(items.len(), 2001);
    for (i, (k, v)) in items.iter().take(2000).enumerate() {
        assert_eq!(k, &key(i));
        assert_eq!(v, &value(i));
        assert!(v.is_pinned(), "item {i} was copied");
    }
    let (last_key, last) = &items[2000];
    assert_eq!(last_key, b"key99999");
    assert_eq!(last, b"in the memtable");
    assert!(!last.is_pinned());

    // From the back the iterator holds each value in its own buffer: a copy, same bytes.
    let (k, v) = db.range(..).nth_back(1).expect("item").expect("ok");
    assert_eq!((k, v.is_pinned()), (key(1999), false));
    assert_eq!(v, value(1999));

    // The values keep their blocks alive past cache eviction and the database.
    for i in 0..2000 {
        assert_eq!(db.get(key(i)).expect("get").expect("present"), value(i));
    }
    drop(db);
    for (i, (_, v)) in items.iter().take(2000).enumerate() {
        assert_eq!(v, &value(i));
    }
}

#[test]
fn get_pins_cached_blocks_and_the_value_outlives_eviction_and_the_db() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        block_cache_size: 64 << 10,
        ..Default::default()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let value = |i: usize| format!("value-{i:05}-{}", "x".repeat(90)).into_bytes();
    let key = |i: usize| format!("key{i:05}").into_bytes();
    for i in 0..2000 {
        db.put(&key(i), &value(i)).expect("put");
    }
    db.flush().expect("flush");
    db.put(b"mem", b"in the memtable").expect("put");

    // Read around the cache: an owned copy, and the block is not cached.
    let ro = ReadOptions {
        fill_cache: false,
        ..Default::default()
    };
    let v = db.get_opt(&ro, &key(1999)).expect("get").expect("present");
    assert_eq!(v, value(1999));
    assert!(!v.is_pinned());

    // The first read caches the block; the value points into it.
    let pinned = db.get(&key(10)).expect("get").expect("present");
    assert_eq!(pinned, value(10));
    assert!(pinned.is_pinned());
    let again = db.get(&key(11)).expect("get").expect("present");
    assert_eq!(again, value(11));
    assert!(again.is_pinned());

    let mem = db.get(b"mem").expect("get").expect("present");
    assert_eq!(mem, b"in the memtable");
    assert!(!mem.is_pinned());

    // Reading every key pushes ~220 KB of blocks through a 64 KiB cache, evicting the first.
    for i in 0..2000 {
        assert_eq!(db.get(&key(i)).expect("get").expect("present"), value(i));
    }
    drop(db);
    assert_eq!(pinned, value(10));
    assert_eq!(pinned.into_vec(), value(10));
}

#[test]
fn tailing_iterators_see_later_writes_and_refresh_moves_any_iterator_forward() {
    let db = Db::open(
        "/tailing",
        Options::default().with_fs(shaledb::fs::MemFileSystem::new()),
    )
    .expect("open");
    db.put(b"a", b"1").expect("put");
    let collect = |it: &mut shaledb::DbIterator| {
        let mut keys = Vec::new();
        while it.valid() {
            keys.push(it.key().to_vec());
            it.next();
        }
        it.status().expect("status");
        keys
    };
    let mut tail = db.iter(&ReadOptions {
        tailing: true,
        ..Default::default()
    });
    let mut plain = db.iter(&ReadOptions::default());
    tail.seek_to_first();
    assert_eq!(collect(&mut tail), vec![b"a".to_vec()]);
    db.put(b"b", b"2").expect("put");
    db.flush().expect("flush");
    db.put(b"c", b"3").expect("put");
    tail.seek(b"a");
    assert_eq!(
        collect(&mut tail),
        vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
    );
    plain.seek_to_first();
    assert_eq!(
        collect(&mut plain),
        vec![b"a".to_vec()],
        "a plain iterator keeps its view"
    );
    plain.refresh().expect("refresh");
    assert!(!plain.valid(), "unpositioned after refresh");
    plain.seek_to_first();
    assert_eq!(collect(&mut plain).len(), 3);
    let mut snap_it = db.iter(&ReadOptions {
        snapshot: Some(db.snapshot()),
        tailing: true,
        ..Default::default()
    });
    db.put(b"d", b"4").expect("put");
    snap_it.seek_to_first();
    assert_eq!(
        collect(&mut snap_it).len(),
        3,
        "a snapshot's view never changes"
    );
    assert!(matches!(
        snap_it.refresh(),
        Err(shaledb::Error::InvalidArgument(_))
    ));
}

#[test]
fn low_priority_writes_go_through_when_compaction_keeps_up() {
    let db = Db::open(
        "/low-pri",
        Options::default().with_fs(shaledb::fs::MemFileSystem::new()),
    )
    .expect("open");
    let wo = WriteOptions::default().with_low_pri(true);
    for i in 0..100u32 {
        db.put_opt(&wo, i.to_be_bytes(), b"v")
            .expect("low-priority put");
    }
    assert_eq!(
        db.get(99u32.to_be_bytes()).expect("get").as_deref(),
        Some(&b"v"[..])
    );
}

#[test]
fn prefix_same_as_start_ends_iteration_at_the_seek_targets_prefix() {
    use shaledb::FixedPrefix;
    use std::sync::Arc;
    let opts = Options {
        prefix_extractor: Some(Arc::new(FixedPrefix(3))),
        ..Default::default()
    }
    .with_fs(shaledb::fs::MemFileSystem::new());
    let db = Db::open("/prefix-seek", opts).expect("open");
    for k in ["aa", "aaa1", "aaa2", "aab1", "abc", "b"] {
        db.put(k, k).expect("put");
    }
    db.flush().expect("flush");
    db.put("aaa3", "aaa3").expect("put");
    let keys = |ro: &ReadOptions, seek: &[u8], back: bool| {
        let mut it = db.iter(ro);
        if back {
            it.seek_for_prev(seek);
        } else {
            it.seek(seek);
        }
        let mut out = Vec::new();
        while it.valid() {
            out.push(String::from_utf8(it.key().to_vec()).expect("utf8"));
            if back {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status().expect("status");
        out
    };
    let same = ReadOptions {
        prefix_same_as_start: true,
        ..Default::default()
    };
    assert_eq!(keys(&same, b"aaa", false), ["aaa1", "aaa2", "aaa3"]);
    assert_eq!(keys(&same, b"aaa2", false), ["aaa2", "aaa3"]);
    assert_eq!(keys(&same, b"aaa9", true), ["aaa3", "aaa2", "aaa1"]);
    assert_eq!(keys(&same, b"aac", false), Vec::<String>::new());
    let all = ReadOptions::default();
    assert_eq!(
        keys(&all, b"aaa", false),
        ["aaa1", "aaa2", "aaa3", "aab1", "abc", "b"]
    );
    // seek_to_first is not limited.
    let mut it = db.iter(&same);
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    assert_eq!(n, 7);
}
