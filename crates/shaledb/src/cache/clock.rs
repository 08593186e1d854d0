//! A sharded cache with byte (or unit) charges and CLOCK eviction.
//!
//! Each shard is a hash map from key to its value and reference bit (plus a slot in a slab
//! the clock hand walks), behind a read-write lock. A hit takes the read lock, reads the map's
//! bucket and only sets the entry's `referenced` bit if clear, so concurrent readers
//! do not serialize on list updates as they would with a strict LRU. An insert takes the write
//! lock and, while the shard is over capacity, sweeps the clock hand over the slab: a referenced
//! entry gets a second chance (its bit is cleared), an unreferenced one is evicted. Values are
//! `Arc`s: an entry evicted while a reader holds it stays alive until the reader drops it, and
//! is no longer charged. `V` may be unsized (`dyn Any + Send + Sync`), so one cache can hold
//! values of several types.
//!
//! High-priority entries (index and filter blocks, RocksDB's high-priority pool) are passed
//! over by the sweep while they hold at most half of their shard, so a stream of data-block
//! misses evicts data blocks first; beyond that share they are swept like any other entry.

use parking_lot::RwLock;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A fast multiply-rotate hasher (the Fx hash of rustc). Cache keys are the engine's own
/// numbers (table ids, offsets, file numbers), never attacker-chosen, so SipHash's flooding
/// resistance buys nothing here and its cost showed up in read profiles.
#[derive(Default, Clone, Copy)]
pub(super) struct FxHasher {
    hash: u64,
}

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

type FxBuild = BuildHasherDefault<FxHasher>;

/// A key's map entry: the value and its reference bit live with the key, so a hit touches
/// the map's bucket and the value's count and nothing else.
struct MapEntry<V: ?Sized> {
    /// Where the entry sits in the clock's slab.
    slot: usize,
    value: Arc<V>,
    referenced: AtomicBool,
}

/// A slab slot: what the clock hand needs to find and evict an entry.
struct Slot<K> {
    key: K,
    charge: usize,
    /// Never evicted; removed only by `erase` (memory reservations).
    pinned: bool,
    /// Kept while the shard's high-priority entries hold at most `HIGH_PRIORITY_SHARE`.
    high: bool,
}

/// The share of a shard's capacity that high-priority entries may hold before they are
/// evicted like other entries (RocksDB's default `high_pri_pool_ratio`).
const HIGH_PRIORITY_SHARE: f64 = 0.5;

/// How an entry is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    /// Evicted by the sweep when not referenced since its last pass.
    Low,
    /// Passed over while high-priority entries hold at most half the shard.
    High,
    /// Never evicted; removed only by `erase`.
    Pinned,
}

struct Shard<K, V: ?Sized> {
    map: HashMap<K, MapEntry<V>, FxBuild>,
    slots: Vec<Option<Slot<K>>>,
    free: Vec<usize>,
    hand: usize,
    usage: usize,
    /// Charge of the high-priority entries.
    high_usage: usize,
    /// Charge of the pinned entries.
    pinned_usage: usize,
    capacity: usize,
    /// The charge high-priority entries may hold before the sweep takes them like others.
    high_capacity: usize,
}

impl<K: Hash + Eq + Clone, V: ?Sized> Shard<K, V> {
    fn new(capacity: usize) -> Self {
        Shard {
            map: HashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            hand: 0,
            usage: 0,
            high_usage: 0,
            pinned_usage: 0,
            capacity,
            high_capacity: (capacity as f64 * HIGH_PRIORITY_SHARE) as usize,
        }
    }

    fn get(&self, key: &K) -> Option<Arc<V>> {
        let e = self.map.get(key)?;
        if !e.referenced.load(Ordering::Relaxed) {
            e.referenced.store(true, Ordering::Relaxed);
        }
        Some(e.value.clone())
    }

    fn remove_slot(&mut self, idx: usize) -> usize {
        match self.slots.get_mut(idx).and_then(Option::take) {
            Some(s) => {
                self.map.remove(&s.key);
                self.usage -= s.charge;
                if s.high {
                    self.high_usage -= s.charge;
                }
                if s.pinned {
                    self.pinned_usage -= s.charge;
                }
                self.free.push(idx);
                s.charge
            }
            None => 0,
        }
    }

    /// Inserts and evicts; returns the charge freed.
    fn insert(&mut self, key: K, value: Arc<V>, charge: usize, priority: Priority) -> usize {
        let mut freed = 0;
        if let Some(idx) = self.map.get(&key).map(|e| e.slot) {
            freed += self.remove_slot(idx);
        }
        let slot = Slot {
            key: key.clone(),
            charge,
            pinned: priority == Priority::Pinned,
            high: priority == Priority::High,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        };
        let entry = MapEntry {
            slot: idx,
            value,
            // A high-priority entry past its share still survives one sweep more than a
            // data block.
            referenced: AtomicBool::new(priority == Priority::High),
        };
        self.map.insert(key, entry);
        self.usage += charge;
        if priority == Priority::High {
            self.high_usage += charge;
        }
        if priority == Priority::Pinned {
            self.pinned_usage += charge;
        }
        // Sweep: at most two passes (the first may only clear reference bits).
        let mut steps = 2 * self.slots.len();
        while self.usage > self.capacity && steps > 0 {
            steps -= 1;
            self.hand = (self.hand + 1) % self.slots.len();
            let h = self.hand;
            if h == idx {
                continue; // never evict the entry just inserted
            }
            let Some(s) = self.slots[h].as_ref() else {
                continue;
            };
            if s.pinned
                || (s.high && self.high_usage <= self.high_capacity && steps >= self.slots.len())
            {
                // A high-priority entry within its share survives the first pass; the second
                // pass (only high-priority entries left to evict) takes it like any other.
                continue;
            }
            let referenced = self
                .map
                .get(&s.key)
                .is_some_and(|e| e.referenced.swap(false, Ordering::Relaxed));
            if referenced {
                continue;
            }
            freed += self.remove_slot(h);
        }
        freed
    }
}

/// A thread-safe cache split into `2^shard_bits` independently locked shards.
pub struct ShardedCache<K, V: ?Sized> {
    shards: Vec<RwLock<Shard<K, V>>>,
    hasher: FxBuild,
    usage: AtomicUsize,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: ?Sized> ShardedCache<K, V> {
    /// A cache holding at most `capacity` units of charge across `2^shard_bits` shards.
    pub fn new(capacity: usize, shard_bits: u32) -> Self {
        let n = 1usize << shard_bits.min(16);
        let per_shard = capacity.div_ceil(n);
        ShardedCache {
            shards: (0..n).map(|_| RwLock::new(Shard::new(per_shard))).collect(),
            hasher: FxBuild::default(),
            usage: AtomicUsize::new(0),
            capacity,
        }
    }

    fn shard(&self, key: &K) -> &RwLock<Shard<K, V>> {
        // The high bits of the Fx hash are the well-mixed ones; the shard map uses the low ones.
        let h = (self.hasher.hash_one(key) >> 40) as usize;
        &self.shards[h % self.shards.len()]
    }

    /// Looks up a key and marks it recently used.
    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        self.shard(key).read().get(key)
    }

    /// Inserts (or replaces) an entry with the given charge, evicting cold entries.
    pub fn insert(&self, key: K, value: Arc<V>, charge: usize) {
        self.insert_with_priority(key, value, charge, Priority::Low);
    }

    /// [`ShardedCache::insert`] with the given priority.
    pub(crate) fn insert_with_priority(
        &self,
        key: K,
        value: Arc<V>,
        charge: usize,
        priority: Priority,
    ) {
        let freed = self
            .shard(&key)
            .write()
            .insert(key, value, charge, priority);
        self.usage.fetch_add(charge, Ordering::Relaxed);
        self.usage.fetch_sub(freed, Ordering::Relaxed);
    }

    /// Inserts an entry that is never evicted, only removed by `erase`: a reservation that
    /// charges memory held elsewhere (e.g. an open table's index and filter) to this cache's
    /// budget, so other entries are evicted to make room for it.
    pub fn insert_pinned(&self, key: K, value: Arc<V>, charge: usize) {
        self.insert_with_priority(key, value, charge, Priority::Pinned);
    }

    /// Removes an entry if present.
    pub fn erase(&self, key: &K) {
        let mut shard = self.shard(key).write();
        if let Some(idx) = shard.map.get(key).map(|e| e.slot) {
            let freed = shard.remove_slot(idx);
            self.usage.fetch_sub(freed, Ordering::Relaxed);
        }
    }

    /// Total charge of the entries held.
    pub fn usage(&self) -> usize {
        self.usage.load(Ordering::Relaxed)
    }

    /// Total charge of the pinned entries (summed over the shards: not for hot paths).
    pub fn pinned_usage(&self) -> usize {
        self.shards.iter().map(|s| s.read().pinned_usage).sum()
    }

    /// How many shards the capacity is split into.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The configured capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referenced_entries_get_a_second_chance() {
        let c: ShardedCache<u32, u32> = ShardedCache::new(3, 0);
        c.insert(1, Arc::new(10), 1);
        c.insert(2, Arc::new(20), 1);
        c.insert(3, Arc::new(30), 1);
        assert_eq!(c.get(&1).as_deref(), Some(&10)); // 1 is now hot
        c.insert(4, Arc::new(40), 1);
        assert!(c.get(&2).is_none(), "2 was the coldest");
        assert_eq!(c.get(&1).as_deref(), Some(&10));
        assert_eq!(c.get(&3).as_deref(), Some(&30));
        assert_eq!(c.get(&4).as_deref(), Some(&40));
        assert_eq!(c.usage(), 3);
    }

    #[test]
    fn replace_and_erase_keep_usage_exact() {
        let c: ShardedCache<u32, u32> = ShardedCache::new(100, 2);
        c.insert(1, Arc::new(1), 10);
        c.insert(1, Arc::new(2), 30);
        assert_eq!(c.usage(), 30);
        assert_eq!(c.get(&1).as_deref(), Some(&2));
        c.erase(&1);
        assert_eq!(c.usage(), 0);
        assert!(c.get(&1).is_none());
        // An entry larger than the whole shard is still inserted, then evicted by the next.
        c.insert(5, Arc::new(5), 1000);
        assert_eq!(c.get(&5).as_deref(), Some(&5));
    }

    #[test]
    fn many_inserts_stay_bounded() {
        let c: ShardedCache<u64, u64> = ShardedCache::new(1000, 4);
        for i in 0..100_000u64 {
            c.insert(i, Arc::new(i), 7);
            if i % 3 == 0 {
                let _ = c.get(&(i / 2));
            }
        }
        // Per-shard capacity rounding allows a little slack but never unbounded growth.
        assert!(c.usage() <= 1000 + 16 * 7, "usage {}", c.usage());
    }

    #[test]
    fn high_priority_entries_outlast_low_ones_within_their_share() {
        let c: ShardedCache<u32, u32> = ShardedCache::new(10, 0);
        // Two high-priority entries (4 of 10 units, within half the shard).
        c.insert_with_priority(0, Arc::new(0), 2, Priority::High);
        c.insert_with_priority(1, Arc::new(1), 2, Priority::High);
        // A stream of low-priority misses, never read again, evicts only its own kind.
        for i in 10..100 {
            c.insert(i, Arc::new(i), 2);
        }
        assert_eq!(c.get(&0).as_deref(), Some(&0));
        assert_eq!(c.get(&1).as_deref(), Some(&1));
        assert!(c.usage() <= 10, "usage {}", c.usage());
        // Beyond half the shard they are evicted like any other: the shard stays within
        // its capacity however many arrive.
        for i in 200..210 {
            c.insert_with_priority(i, Arc::new(i), 2, Priority::High);
        }
        let kept_high = (200..210).filter(|i| c.get(i).is_some()).count();
        assert!(kept_high <= 5, "{kept_high} high-priority entries kept");
        assert!(c.usage() <= 10, "usage {}", c.usage());
    }

    #[test]
    fn pinned_entries_are_never_evicted() {
        let c: ShardedCache<u32, u32> = ShardedCache::new(10, 0);
        c.insert_pinned(0, Arc::new(0), 6);
        for i in 1..100 {
            c.insert(i, Arc::new(i), 2);
        }
        assert_eq!(c.get(&0).as_deref(), Some(&0));
        assert!(c.usage() <= 10, "usage {}", c.usage());
        c.erase(&0);
        assert!(c.get(&0).is_none());
        assert!(c.usage() <= 4);
    }

    #[test]
    fn concurrent_readers_and_writers() {
        let c: Arc<ShardedCache<u64, u64>> = Arc::new(ShardedCache::new(500, 2));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        let k = (i * 7 + t) % 1000;
                        match c.get(&k) {
                            Some(v) => assert_eq!(*v, k * 3),
                            None => c.insert(k, Arc::new(k * 3), 1),
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert!(c.usage() <= 500 + 4);
    }
}
