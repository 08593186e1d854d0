//! Scans must not allocate per entry: a counting global allocator checks that iterating N
//! entries (from a flushed table and from a memtable, forward and backward) allocates a number
//! of times bounded by the number of blocks read, not by N.

use shaledb::{Db, Options, ReadOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct CountingAllocator;

thread_local! {
    // Const-initialized, so reading it never allocates (no lazy init inside the allocator).
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with` fails only during thread teardown; such allocations are not ours to count.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method forwards to the system allocator unchanged; counting touches only a
// const-initialized thread-local cell and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

const N: usize = 20_000;
const BLOCK_SIZE: usize = 4096;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("value-{i:010}").into_bytes()
}

fn open(dir: &std::path::Path, fill: bool) -> Db {
    let opts = Options {
        block_size: BLOCK_SIZE,
        write_buffer_size: 64 << 20,
        disable_auto_compactions: true,
        // No codec: blocks are BLOCK_SIZE on disk too, which the bounds below count on.
        compression_per_level: vec![shaledb::CompressionType::None],
        ..Options::default()
    };
    let db = Db::open(dir, opts).expect("open");
    for i in (0..N).filter(|_| fill) {
        db.put(&key(i), &value(i)).expect("put");
    }
    db
}

/// Scans the whole database one way; returns (allocations during the scan, entries seen).
fn scan(db: &Db, forward: bool) -> (u64, usize) {
    let keys: Vec<Vec<u8>> = (0..N).map(key).collect();
    let values: Vec<Vec<u8>> = (0..N).map(value).collect();
    let mut it = db.iter(&ReadOptions::default());
    let before = allocations();
    if forward {
        it.seek_to_first();
    } else {
        it.seek_to_last();
    }
    let mut seen = 0usize;
    while it.valid() {
        let i = if forward { seen } else { N - 1 - seen };
        assert_eq!(it.key(), keys[i].as_slice());
        assert_eq!(it.value(), values[i].as_slice());
        seen += 1;
        if forward {
            it.next();
        } else {
            it.prev();
        }
    }
    let after = allocations();
    it.status().expect("scan status");
    (after - before, seen)
}

#[test]
fn scanning_a_memtable_allocates_nothing_per_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), true);
    for forward in [true, false] {
        let (allocs, seen) = scan(&db, forward);
        assert_eq!(seen, N);
        assert!(
            allocs <= 16,
            "forward={forward}: {allocs} allocations for {N} memtable entries"
        );
    }
}

#[test]
fn scanning_a_table_allocates_per_block_not_per_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), true);
    db.flush().expect("flush");
    let table_bytes: u64 = std::fs::read_dir(dir.path())
        .expect("list")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    // An upper bound on the number of blocks (the file also holds index and filter).
    let blocks = table_bytes / BLOCK_SIZE as u64 + 1;
    assert!(
        blocks * 20 < N as u64,
        "the test needs many entries per block"
    );
    drop(db);
    for forward in [true, false] {
        // Reopened, so every block comes from disk (and goes into the block cache) ...
        let db = open(dir.path(), false);
        let (allocs, seen) = scan(&db, forward);
        assert_eq!(seen, N);
        assert!(
            allocs <= 3 * blocks + 32,
            "forward={forward}: {allocs} allocations for {N} entries in <= {blocks} blocks"
        );
        // ... then again from the block cache: only the iterator's own setup allocates.
        let (allocs, seen) = scan(&db, forward);
        assert_eq!(seen, N);
        assert!(
            allocs <= 32,
            "forward={forward}: {allocs} allocations for {N} cached entries"
        );
    }
}

#[test]
fn short_scans_on_one_iterator_allocate_nothing_per_seek_once_cached() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), true);
    db.flush().expect("flush");
    // Half the keys stay in the memtable, so the merge has a table and a memtable child.
    for i in (0..N).step_by(2) {
        db.put(&key(i), &value(i)).expect("put");
    }
    let keys: Vec<Vec<u8>> = (0..N).map(key).collect();
    let mut it = db.iter(&ReadOptions::default());
    // Warm the block cache and the iterator's buffers.
    it.seek_to_first();
    while it.valid() {
        it.next();
    }
    let before = allocations();
    let mut seen = 0usize;
    for start in (0..N - 10).step_by(97) {
        it.seek(&keys[start]);
        for expected in &keys[start..start + 10] {
            assert_eq!(it.key(), expected.as_slice());
            seen += 1;
            it.next();
        }
        it.seek_for_prev(&keys[start + 5]);
        assert_eq!(it.key(), keys[start + 5].as_slice());
        it.prev();
    }
    let allocs = allocations() - before;
    it.status().expect("status");
    assert_eq!(seen, 10 * (N - 10).div_ceil(97));
    assert!(
        allocs <= 16,
        "{allocs} allocations for {seen} entries in short scans"
    );
}

fn table_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum()
}

#[test]
fn compaction_allocates_per_block_not_per_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), true);
    db.flush().expect("flush");
    for i in 0..N {
        db.put(&key(i), &value(i + 1)).expect("put");
    }
    db.flush().expect("flush");
    // Blocks read (both inputs) plus blocks written (about one input's worth).
    let blocks = 3 * table_bytes(dir.path()) / 2 / BLOCK_SIZE as u64 + 1;
    // `compact_range` runs the compaction on this thread.
    let before = allocations();
    db.compact_range(None, None).expect("compact");
    let allocs = allocations() - before;
    assert!(
        allocs <= 4 * blocks + 512,
        "{allocs} allocations to compact {} entries through about {blocks} blocks",
        2 * N
    );
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut seen = 0;
    while it.valid() {
        assert_eq!(it.value(), value(seen + 1).as_slice());
        seen += 1;
        it.next();
    }
    assert_eq!(seen, N);
}

/// YCSB E's shape: a new iterator per short scan. Its setup allocates per child (the boxed
/// child, its index and data block key buffers) plus a few for the merge and the pin; nothing
/// per file of a level and nothing per entry.
#[test]
fn a_short_scan_on_a_new_iterator_allocates_per_child() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), true);
    db.flush().expect("flush");
    for round in 1..=4 {
        for i in (0..N).step_by(5) {
            db.put(&key(i), &value(i + round)).expect("put");
        }
        db.flush().expect("flush");
    }
    // The memtable and five L0 tables.
    let children = 6;
    let keys: Vec<Vec<u8>> = (0..N).map(key).collect();
    let scans = (0..N - 10).step_by(997).count() as u64;
    for pass in 0..2 {
        let before = allocations();
        for start in (0..N - 10).step_by(997) {
            let mut it = db.iter(&ReadOptions::default());
            it.seek(&keys[start]);
            for expected in &keys[start..start + 10] {
                assert_eq!(it.key(), expected.as_slice());
                it.next();
            }
        }
        let per_scan = (allocations() - before) / scans;
        if pass == 1 {
            // Blocks are cached by now; only the iterator's setup allocates.
            assert!(
                per_scan <= 4 * children + 8,
                "{per_scan} allocations per short scan"
            );
        }
    }
}
