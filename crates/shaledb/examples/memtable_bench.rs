//! A tiny memtable timing: inserts N random 16-byte keys with 100-byte values (one writer),
//! then N random gets, a full forward scan and a full backward scan.
//!
//! `cargo run --release -p shaledb --example memtable_bench [N]` (default N = 1,000,000).

use shaledb::iter::InternalIterator;
use shaledb::key::ValueKind;
use shaledb::memtable::MemTable;
use shaledb::value::LookupResult;
use std::sync::Arc;
use std::time::Instant;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

fn key_of(i: u64) -> [u8; 16] {
    // Distinct for distinct `i`, scattered across the key space.
    let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("{h:016x}").as_bytes());
    k
}

fn per_op(label: &str, n: usize, start: Instant) {
    let el = start.elapsed();
    println!(
        "{label:<10} {:>8.1} ms  {:>7.1} ns/op",
        el.as_secs_f64() * 1e3,
        el.as_nanos() as f64 / n as f64
    );
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let value = [b'v'; 100];
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let mut order: Vec<u64> = (0..n as u64).collect();
    for i in (1..order.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    let keys: Vec<[u8; 16]> = order.iter().map(|&i| key_of(i)).collect();

    let mem = Arc::new(MemTable::new(1));
    let t = Instant::now();
    for (seq, k) in keys.iter().enumerate() {
        mem.add(seq as u64 + 1, ValueKind::Put, k, &value);
    }
    per_op("fill", n, t);

    let t = Instant::now();
    let mut found = 0usize;
    for _ in 0..n {
        let k = &keys[(rng.next() % n as u64) as usize];
        if let LookupResult::Found(v) = mem.get(k, u64::MAX >> 8) {
            found += v.len();
        }
    }
    per_op("get", n, t);
    assert_eq!(found, n * value.len());

    let t = Instant::now();
    let mut it = mem.iter();
    it.seek_to_first();
    let mut count = 0usize;
    while it.valid() {
        count += it.key().len() + it.value().len();
        it.next();
    }
    per_op("scan", n, t);
    assert_eq!(count, n * (16 + 8 + 100));

    let t = Instant::now();
    it.seek_to_last();
    let mut count = 0usize;
    while it.valid() {
        count += 1;
        it.prev();
    }
    per_op("scan-rev", n, t);
    assert_eq!(count, n);
    println!(
        "memory     {:.1} MiB",
        mem.approximate_memory_usage() as f64 / (1 << 20) as f64
    );
}
