//! A sharded LRU cache with byte (or unit) charges.
//!
//! Each shard is a hash map plus an intrusive doubly linked list threaded through a slab of
//! nodes, so lookups, inserts and evictions are O(1). Values are `Arc`s: an entry evicted while a
//! reader still holds it stays alive until the reader drops it, and is no longer charged.
//! `V` may be unsized (`dyn Any + Send + Sync`), so one cache can hold values of several types.
//! Shards are chosen by key hash so concurrent readers rarely contend on the same mutex.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const NIL: usize = usize::MAX;

struct Node<K, V: ?Sized> {
    key: K,
    value: Arc<V>,
    charge: usize,
    prev: usize,
    next: usize,
}

struct Shard<K, V: ?Sized> {
    map: HashMap<K, usize>,
    nodes: Vec<Option<Node<K, V>>>,
    free: Vec<usize>,
    // Most recently used at head.
    head: usize,
    tail: usize,
    usage: usize,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: ?Sized> Shard<K, V> {
    fn new(capacity: usize) -> Self {
        Shard {
            map: HashMap::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            usage: 0,
            capacity,
        }
    }

    fn unlink(&mut self, idx: usize) {
        let (prev, next) = match self.nodes.get(idx).and_then(|n| n.as_ref()) {
            Some(n) => (n.prev, n.next),
            None => return,
        };
        if prev == NIL {
            self.head = next;
        } else if let Some(Some(p)) = self.nodes.get_mut(prev) {
            p.next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else if let Some(Some(n)) = self.nodes.get_mut(next) {
            n.prev = prev;
        }
    }

    fn push_front(&mut self, idx: usize) {
        let old_head = self.head;
        if let Some(Some(n)) = self.nodes.get_mut(idx) {
            n.prev = NIL;
            n.next = old_head;
        }
        if old_head != NIL {
            if let Some(Some(h)) = self.nodes.get_mut(old_head) {
                h.prev = idx;
            }
        } else {
            self.tail = idx;
        }
        self.head = idx;
    }

    fn remove_idx(&mut self, idx: usize) -> Option<Node<K, V>> {
        self.unlink(idx);
        let node = self.nodes.get_mut(idx)?.take()?;
        self.map.remove(&node.key);
        self.usage -= node.charge;
        self.free.push(idx);
        Some(node)
    }

    fn get(&mut self, key: &K) -> Option<Arc<V>> {
        let idx = *self.map.get(key)?;
        self.unlink(idx);
        self.push_front(idx);
        self.nodes.get(idx)?.as_ref().map(|n| n.value.clone())
    }

    fn insert(&mut self, key: K, value: Arc<V>, charge: usize) -> usize {
        let mut freed = 0;
        if let Some(&idx) = self.map.get(&key) {
            if let Some(n) = self.remove_idx(idx) {
                freed += n.charge;
            }
        }
        let node = Node {
            key: key.clone(),
            value,
            charge,
            prev: NIL,
            next: NIL,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.nodes[i] = Some(node);
                i
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() - 1
            }
        };
        self.map.insert(key, idx);
        self.usage += charge;
        self.push_front(idx);
        // Evict from the cold end, but never the entry just inserted.
        while self.usage > self.capacity && self.tail != NIL && self.tail != idx {
            let t = self.tail;
            if let Some(n) = self.remove_idx(t) {
                freed += n.charge;
            }
        }
        freed
    }
}

/// A thread-safe LRU cache split into `2^shard_bits` independently locked shards.
pub struct ShardedLruCache<K, V: ?Sized> {
    shards: Vec<Mutex<Shard<K, V>>>,
    hasher: std::collections::hash_map::RandomState,
    usage: AtomicUsize,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: ?Sized> ShardedLruCache<K, V> {
    /// A cache holding at most `capacity` units of charge across `2^shard_bits` shards.
    pub fn new(capacity: usize, shard_bits: u32) -> Self {
        let n = 1usize << shard_bits.min(16);
        let per_shard = capacity.div_ceil(n);
        ShardedLruCache {
            shards: (0..n).map(|_| Mutex::new(Shard::new(per_shard))).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
            usage: AtomicUsize::new(0),
            capacity,
        }
    }

    fn shard(&self, key: &K) -> &Mutex<Shard<K, V>> {
        let h = self.hasher.hash_one(key) as usize;
        &self.shards[h % self.shards.len()]
    }

    /// Looks up a key and marks it recently used.
    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        self.shard(key).lock().get(key)
    }

    /// Inserts (or replaces) an entry with the given charge, evicting cold entries.
    pub fn insert(&self, key: K, value: Arc<V>, charge: usize) {
        let freed = self.shard(&key).lock().insert(key, value, charge);
        self.usage.fetch_add(charge, Ordering::Relaxed);
        self.usage.fetch_sub(freed, Ordering::Relaxed);
    }

    /// Removes an entry if present.
    pub fn erase(&self, key: &K) {
        let mut shard = self.shard(key).lock();
        if let Some(&idx) = shard.map.get(key) {
            if let Some(n) = shard.remove_idx(idx) {
                self.usage.fetch_sub(n.charge, Ordering::Relaxed);
            }
        }
    }

    /// Total charge of the entries held.
    pub fn usage(&self) -> usize {
        self.usage.load(Ordering::Relaxed)
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
    fn evicts_least_recently_used() {
        let c: ShardedLruCache<u32, u32> = ShardedLruCache::new(3, 0);
        c.insert(1, Arc::new(10), 1);
        c.insert(2, Arc::new(20), 1);
        c.insert(3, Arc::new(30), 1);
        assert_eq!(c.get(&1).as_deref(), Some(&10)); // 1 is now hot
        c.insert(4, Arc::new(40), 1);
        assert!(c.get(&2).is_none(), "2 was coldest");
        assert_eq!(c.get(&1).as_deref(), Some(&10));
        assert_eq!(c.get(&3).as_deref(), Some(&30));
        assert_eq!(c.get(&4).as_deref(), Some(&40));
        assert_eq!(c.usage(), 3);
    }

    #[test]
    fn replace_and_erase_keep_usage_exact() {
        let c: ShardedLruCache<u32, u32> = ShardedLruCache::new(100, 2);
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
        let c: ShardedLruCache<u64, u64> = ShardedLruCache::new(1000, 4);
        for i in 0..100_000u64 {
            c.insert(i, Arc::new(i), 7);
        }
        // Per-shard capacity rounding allows a little slack but never unbounded growth.
        assert!(c.usage() <= 1000 + 16 * 7, "usage {}", c.usage());
    }
}
