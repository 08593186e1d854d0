//! Memory budgets: `Cache`, `WriteBufferManager` and `Options::memory_budget`. Exact
//! accounting of memtable memory, its release, its charge to a shared cache, the flush at 7/8
//! of the budget, the stall at the budget (and its end when another database flushes), and a
//! model check of values under a tiny budget in four families.

use shaledb::{Cache, CfOptions, Db, Error, Options, ReadOptions, WriteBufferManager};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const DUMMY: usize = 256 << 10;

fn prop(db: &Db, name: &str) -> usize {
    db.property(name)
        .unwrap_or_else(|| panic!("{name} missing"))
        .parse()
        .expect("number")
}

/// Waits (at most 10 s) until `f` holds: memory is freed when the last reader of a flushed
/// memtable lets it go, which the flush thread may do just after `flush` returns.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Bytes a memtable that holds at most `holds` bytes has before its first entry, with
/// default options: its bloom (2%, in whole 64-byte lines) and its hash index (a bucket of 8
/// bytes per 128 bytes, rounded up to a power of two, plus the head node's 8-byte slot).
fn default_memtable_overhead(holds: usize) -> usize {
    let filter = (holds as f64 * 0.02 / 64.0).ceil() as usize * 64;
    let index = (holds / 128).next_power_of_two() * 8 + 8;
    filter + index
}

fn big_memtables() -> Options {
    Options::default()
        .with_write_buffer_size(256 << 20)
        .with_disable_auto_compactions(true)
}

#[test]
fn usage_is_the_memtables_and_is_released_after_flush() {
    let wbm = WriteBufferManager::new(64 << 20);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(
        dir.path(),
        big_memtables().with_write_buffer_manager(wbm.clone()),
    )
    .expect("open");
    assert_eq!(wbm.memory_usage(), 0);
    for i in 0..1000u32 {
        db.put(format!("key{i:06}"), [i as u8; 1000]).expect("put");
    }
    // Exactly what the memtable reports, all of it active.
    let mem = prop(&db, "shaledb.cur-size-all-mem-tables");
    assert_eq!(wbm.memory_usage(), mem);
    assert_eq!(wbm.mutable_memory_usage(), mem);
    // The entries, plus the filter and index sized by the budget (smaller than the write
    // buffer).
    let overhead = default_memtable_overhead(64 << 20);
    assert_eq!(overhead, 1_342_208 + 4_194_312);
    assert!(
        (1000 * 1000 + overhead..1100 * 1000 + overhead).contains(&mem),
        "{mem}"
    );
    assert_eq!(prop(&db, "shaledb.write-buffer-manager-usage"), mem);
    assert_eq!(
        prop(&db, "shaledb.write-buffer-manager-buffer-size"),
        64 << 20
    );
    // A reader keeps the flushed memtable (and its charge) alive; dropping it releases all.
    let it = db.iter(&ReadOptions::default());
    db.flush().expect("flush");
    assert_eq!(wbm.mutable_memory_usage(), 0);
    assert_eq!(wbm.memory_usage(), mem);
    drop(it);
    eventually("release", || wbm.memory_usage() == 0);
    // Closing releases the active memtable's charge too.
    db.put(b"after", b"v").expect("put");
    assert!(wbm.memory_usage() > 0);
    drop(db);
    assert_eq!(wbm.memory_usage(), 0);
    assert_eq!(wbm.mutable_memory_usage(), 0);
}

#[test]
fn memtable_memory_is_charged_to_the_cache_in_whole_entries() {
    let cache = Cache::new(32 << 20);
    let wbm = WriteBufferManager::with_cache(16 << 20, &cache);
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = big_memtables()
        .with_block_cache(cache.clone())
        .with_write_buffer_manager(wbm.clone());
    let db = Db::open(dir.path(), opts).expect("open");
    for i in 0..3000u32 {
        db.put(format!("key{i:06}"), [1u8; 1000]).expect("put");
        let used = wbm.memory_usage();
        // No table is open: the pinned charge is the manager's, rounded up to entries.
        assert_eq!(cache.pinned_usage(), used.div_ceil(DUMMY) * DUMMY);
    }
    assert_eq!(
        prop(&db, "shaledb.block-cache-pinned-usage"),
        cache.pinned_usage()
    );
    drop(db);
    assert_eq!(cache.pinned_usage(), 0);
    assert_eq!(cache.usage(), 0);
}

#[test]
fn one_databases_memtables_evict_anothers_blocks() {
    // One shard, so the cache holds exactly its capacity.
    let cache = Cache::with_shard_bits(4 << 20, 0);
    let wbm = WriteBufferManager::with_cache(4 << 20, &cache);
    let shared = big_memtables()
        .with_block_cache(cache.clone())
        .with_write_buffer_manager(wbm.clone());
    let (da, db_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let a = Db::open(da.path(), shared.clone()).expect("open a");
    for i in 0..8000u32 {
        a.put(format!("key{i:06}"), [2u8; 1000]).expect("put");
    }
    a.flush().expect("flush");
    eventually("a's memtable released", || wbm.memory_usage() == 0);
    for i in 0..8000u32 {
        assert!(a.get(format!("key{i:06}")).expect("get").is_some());
    }
    let blocks_before = cache.usage() - cache.pinned_usage();
    assert!(
        blocks_before > 3 << 20,
        "cache holds {blocks_before} of blocks"
    );

    let b = Db::open(db_dir.path(), shared).expect("open b");
    for i in 0..2500u32 {
        b.put(format!("key{i:06}"), [3u8; 1000]).expect("put");
    }
    let charged = wbm.memory_usage().div_ceil(DUMMY) * DUMMY;
    assert!(charged >= 2500 * 1000);
    let blocks_after = cache.usage() - cache.pinned_usage();
    assert!(cache.usage() <= cache.capacity(), "usage {}", cache.usage());
    assert!(
        blocks_after <= cache.capacity() - charged,
        "{blocks_after} bytes of blocks beside {charged} of memtables"
    );
    // The evicted blocks are read again, correctly.
    for i in (0..8000u32).step_by(7) {
        assert_eq!(
            a.get(format!("key{i:06}")).expect("get").as_deref(),
            Some(&[2u8; 1000][..])
        );
    }
}

#[test]
fn active_memtables_past_seven_eighths_are_flushed() {
    let budget = 8 << 20;
    let wbm = WriteBufferManager::new(budget);
    let dir = tempfile::tempdir().expect("tempdir");
    // Room for many frozen memtables: a family at its max_write_buffer_number waits for its
    // flush instead of freezing another (and the test would depend on flush timing).
    let opts = big_memtables()
        .with_max_write_buffer_number(64)
        .with_write_buffer_manager(wbm.clone());
    let db = Db::open(dir.path(), opts).expect("open");
    let value = [4u8; 4000];
    let mut max_active = 0;
    for i in 0..5000u32 {
        // Past 7/8 before this write: it freezes the memtable first.
        let over = wbm.mutable_memory_usage() > budget - budget / 8;
        db.put(format!("key{i:06}"), value).expect("put");
        if over {
            // A new memtable: this write, its filter and index.
            let fresh = default_memtable_overhead(budget) + 8 * 1024;
            assert!(wbm.mutable_memory_usage() < fresh, "not frozen at {i}");
        }
        max_active = max_active.max(wbm.mutable_memory_usage());
    }
    assert!(max_active > 6 << 20, "{max_active}");
    assert!(max_active <= budget - budget / 8 + 8 * 1024, "{max_active}");
    db.flush().expect("flush");
    // 20 MB in memtables of 7 MB: at least two flushes before the last.
    assert!(prop(&db, "shaledb.num-files-at-level0") >= 3);
    for i in (0..5000u32).step_by(13) {
        assert!(db.get(format!("key{i:06}")).expect("get").is_some());
    }
}

#[test]
fn writes_stall_at_the_budget_until_another_database_flushes() {
    let budget = 2 << 20;
    let wbm = WriteBufferManager::new(budget).allow_stall(true);
    // No hash index: its buckets (128 KiB each of this budget) would leave B room for too few
    // writes to tell a stall from an early one.
    let opts = big_memtables()
        .with_memtable_hash_index(false)
        .with_write_buffer_manager(wbm.clone());
    let (da, dbd) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let a = Db::open(da.path(), opts.clone()).expect("open a");
    let b = Db::open(dbd.path(), opts).expect("open b");
    let value = vec![5u8; 100 << 10];
    // A holds 1.2 MB in a flushed memtable an iterator keeps alive, and 0.3 MB in its active
    // one. B then writes until both hold the budget: active memtables (A's and B's) stay
    // under half of it, so neither the 7/8 rule nor the half rule has B flush its own.
    for i in 0..12u32 {
        a.put(format!("a{i}"), &value).expect("put");
    }
    let it = a.iter(&ReadOptions::default());
    a.flush().expect("flush a");
    for i in 12..15u32 {
        a.put(format!("a{i}"), &value).expect("put");
    }
    assert!(wbm.mutable_memory_usage() < (400 << 10));
    let (tx, rx) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        for i in 0..8u32 {
            b.put(format!("b{i}"), &value).expect("put");
            tx.send(i).expect("send");
        }
        b
    });
    // B's memtable stays under half the budget, so B has nothing to flush: it stalls once
    // both reach the budget, until A's flush frees A's active memtable.
    let mut done = Vec::new();
    while let Ok(i) = rx.recv_timeout(Duration::from_millis(500)) {
        done.push(i);
    }
    assert!(done.len() < 8, "no stall: {done:?}");
    assert!(done.len() >= 3, "stalled too early: {done:?}");
    assert!(wbm.memory_usage() >= budget);
    a.flush().expect("flush a");
    let deadline = Instant::now() + Duration::from_secs(10);
    while done.len() < 8 {
        let left = deadline.saturating_duration_since(Instant::now());
        done.push(rx.recv_timeout(left).expect("b resumes after a's flush"));
    }
    let b = writer.join().expect("writer");
    drop(it);
    assert_eq!(b.get("b7").expect("get").map(|v| v.len()), Some(100 << 10));
}

#[test]
fn memory_budget_conflicts_and_minimum_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let both = Options::default()
        .with_memory_budget(64 << 20)
        .with_block_cache(Cache::new(1 << 20));
    match Db::open(dir.path(), both) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("memory_budget"), "{m}"),
        other => panic!("expected InvalidArgument, got {:?}", other.map(|_| ())),
    }
    let tiny = Options::default().with_memory_budget(1000);
    match Db::open(dir.path(), tiny) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("1 MiB"), "{m}"),
        other => panic!("expected InvalidArgument, got {:?}", other.map(|_| ())),
    }
    let db = Db::open(dir.path(), Options::default().with_memory_budget(64 << 20)).expect("open");
    assert_eq!(prop(&db, "shaledb.block-cache-capacity"), 64 << 20);
    assert_eq!(
        prop(&db, "shaledb.write-buffer-manager-buffer-size"),
        16 << 20
    );
}

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn values_stay_correct_under_a_tiny_budget_in_four_families() {
    let dir = tempfile::tempdir().expect("tempdir");
    let names = ["default", "one", "two", "three"];
    let opts = Options::default()
        .with_create_missing_column_families(true)
        .with_memory_budget(1 << 20)
        .with_bloom_bits_per_key(10);
    let families = || {
        names[1..]
            .iter()
            .map(|n| (n.to_string(), CfOptions::default()))
    };
    let mut models: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new(); 4];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    {
        let db = Db::open_cf(dir.path(), opts.clone(), families()).expect("open");
        let cfs: Vec<_> = names.iter().map(|n| db.cf(n).expect("cf")).collect();
        for step in 0..30_000u32 {
            let f = rng.below(4) as usize;
            let key = format!("k{:05}", rng.below(3000)).into_bytes();
            match rng.below(10) {
                0..=4 => {
                    let len = rng.below(2000) as usize;
                    let value: Vec<u8> = (0..len).map(|j| (step as usize + j) as u8).collect();
                    db.put_cf(&cfs[f], &key, &value).expect("put");
                    models[f].insert(key, value);
                }
                5 => {
                    db.delete_cf(&cfs[f], &key).expect("delete");
                    models[f].remove(&key);
                }
                _ => {
                    let got = db.get_cf(&cfs[f], &key).expect("get");
                    assert_eq!(
                        got.as_deref(),
                        models[f].get(&key).map(Vec::as_slice),
                        "family {f} key {key:?} at step {step}"
                    );
                }
            }
        }
        // The budget held the memtables: a quarter of 1 MiB, give or take a write group.
        let wbm = prop(&db, "shaledb.write-buffer-manager-usage");
        assert!(wbm <= (1 << 20) / 4 + (64 << 10), "{wbm}");
        assert!(prop(&db, "shaledb.block-cache-usage") <= (1 << 20) + (64 << 10));
    }
    let db = Db::open_cf(dir.path(), opts, families()).expect("reopen");
    for (f, name) in names.iter().enumerate() {
        let cf = db.cf(name).expect("cf");
        let mut it = db.iter_cf(&cf, &ReadOptions::default()).expect("iter");
        let mut got = Vec::new();
        it.seek_to_first();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        let want: Vec<(Vec<u8>, Vec<u8>)> = models[f].clone().into_iter().collect();
        assert_eq!(got.len(), want.len(), "family {name}");
        assert!(got == want, "family {name} differs from the model");
    }
}
