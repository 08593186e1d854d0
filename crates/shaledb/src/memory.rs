//! Memory budgets shared by databases and column families: a block [`Cache`] and a
//! [`WriteBufferManager`] bounding memtable memory, which may charge it to the cache so one
//! number bounds memtables, data blocks, index and filter blocks together.
//!
//! The manager counts the memory of every memtable created under it (the arena bytes the
//! memtable reports): the write path reserves a memtable's growth once per write group, and a
//! memtable's whole charge is released when it is dropped (after its flush, once no reader
//! holds it). With a cache, the reservation is mirrored as pinned dummy entries of
//! [`DUMMY_ENTRY_SIZE`] bytes, so the cache evicts blocks to make room for memtables
//! (RocksDB's `WriteBufferManager` with `cost_to_cache`).

use crate::cache::BlockCache;
use crate::sst::Table;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Largest size of one dummy cache entry charging memtable memory to a [`Cache`] (RocksDB's
/// 256 KiB): large enough that a write group rarely crosses a boundary (the only time the
/// cache is touched). A cache with shards smaller than 512 KiB gets entries of half a shard
/// (at least 4 KiB), so that one entry never outgrows the shard it lands in.
const MAX_DUMMY_ENTRY_SIZE: usize = 256 << 10;
const MIN_DUMMY_ENTRY_SIZE: usize = 4 << 10;

/// Shard bits of a [`Cache`] made by [`Cache::new`] (64 shards).
const DEFAULT_SHARD_BITS: u32 = 6;

/// A block cache that several databases (and all their column families) may share: decoded
/// data blocks, index and filter blocks (pinned or high-priority), blob values when asked, and
/// memtable memory charged by a [`WriteBufferManager::with_cache`]. Cloning shares it.
///
/// ```
/// use shaledb::{Cache, Db, Options};
/// let cache = Cache::new(64 << 20);
/// let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
/// let opts = Options::default().with_block_cache(cache.clone());
/// let db1 = Db::open(a.path(), opts.clone()).unwrap();
/// let db2 = Db::open(b.path(), opts).unwrap();
/// db1.put(b"k", b"v").unwrap();
/// db2.put(b"k", b"v").unwrap();
/// assert_eq!(cache.capacity(), 64 << 20);
/// assert!(cache.usage() <= cache.capacity());
/// ```
#[derive(Clone)]
pub struct Cache {
    pub(crate) inner: Arc<BlockCache>,
}

impl Cache {
    /// A cache of `capacity_bytes`, in 64 shards.
    pub fn new(capacity_bytes: usize) -> Cache {
        Cache::with_shard_bits(capacity_bytes, DEFAULT_SHARD_BITS)
    }

    /// A cache of `capacity_bytes` in `2^shard_bits` shards (at most 16 bits).
    pub fn with_shard_bits(capacity_bytes: usize, shard_bits: u32) -> Cache {
        Cache {
            inner: Arc::new(BlockCache::new(capacity_bytes, shard_bits)),
        }
    }

    /// This cache with a compressed secondary tier of `bytes` (RocksDB's
    /// `CompressedSecondaryCache`): data blocks kept as they are stored in their table file,
    /// so a block this cache evicted is decompressed from memory rather than read from the
    /// file again. Worth it when the data outgrows memory and reads would otherwise go to the
    /// disk (direct reads, or an OS cache wanted for other things); each hit still pays a
    /// decompression. `bytes` is charged to the tier alone, on top of
    /// [`capacity`](Cache::capacity) (0: no tier).
    ///
    /// Build it on a cache just made, before cloning it or giving it to a database: the
    /// result is a new cache of the same capacity and shards (clones made before keep the old
    /// one, without the tier).
    ///
    /// Unlike RocksDB, which demotes a block to the tier when the primary evicts it and admits
    /// it on its second access, a block read from its file enters both tiers at once (its
    /// stored bytes are in hand then; keeping them for a later demotion would cost more
    /// memory, recompressing them more CPU). Only compressed data blocks are kept: blocks a
    /// codec did not shrink, index and filter blocks stay out.
    ///
    /// ```
    /// use shaledb::{Cache, Db, Options};
    /// let cache = Cache::new(1 << 20).with_compressed_secondary(8 << 20);
    /// assert_eq!(cache.compressed_secondary_capacity(), 8 << 20);
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default().with_block_cache(cache.clone())).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// let usage = db.property("shaledb.compressed-secondary-cache-usage").unwrap();
    /// assert_eq!(usage, cache.compressed_secondary_usage().to_string());
    /// ```
    #[must_use]
    pub fn with_compressed_secondary(self, bytes: usize) -> Cache {
        if bytes == 0 && self.inner.secondary().is_none() {
            return self;
        }
        let bits = self.inner.shard_count().trailing_zeros();
        Cache {
            inner: Arc::new(BlockCache::new(self.capacity(), bits).with_secondary(bytes)),
        }
    }

    /// Bytes charged by the compressed secondary tier (0 without one).
    pub fn compressed_secondary_usage(&self) -> usize {
        self.inner.secondary().map_or(0, |s| s.usage())
    }

    /// The compressed secondary tier's capacity (0 without one).
    pub fn compressed_secondary_capacity(&self) -> usize {
        self.inner.secondary().map_or(0, |s| s.capacity())
    }

    /// Bytes charged: cached blocks plus pinned reservations (open tables' index and filter,
    /// memtable memory of a manager charging this cache). The compressed secondary tier is
    /// not included (see [`compressed_secondary_usage`](Cache::compressed_secondary_usage)).
    pub fn usage(&self) -> usize {
        self.inner.usage()
    }

    /// Bytes of pinned reservations, which eviction never frees.
    pub fn pinned_usage(&self) -> usize {
        self.inner.pinned_usage()
    }

    /// The capacity given.
    pub fn capacity(&self) -> usize {
        self.inner.capacity()
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("capacity", &self.capacity())
            .field("usage", &self.usage())
            .field(
                "compressed_secondary_capacity",
                &self.compressed_secondary_capacity(),
            )
            .finish()
    }
}

/// Bounds the memtable memory of every database and column family given it
/// (`Options::write_buffer_manager`), optionally charging that memory to a [`Cache`]. Cloning
/// shares it.
///
/// Past 7/8 of `buffer_size` in active (mutable) memtables, the database being written
/// freezes and flushes its largest active memtable. At `buffer_size` in all (active, and
/// frozen ones not yet flushed and dropped), with `allow_stall`, writes wait until memory is
/// freed, by this database's flushes or another's.
///
/// ```
/// use shaledb::{Cache, Db, Options, WriteBufferManager};
/// let cache = Cache::new(64 << 20);
/// let wbm = WriteBufferManager::with_cache(16 << 20, &cache).allow_stall(true);
/// let dir = tempfile::tempdir().unwrap();
/// let opts = Options::default()
///     .with_block_cache(cache.clone())
///     .with_write_buffer_manager(wbm.clone());
/// let db = Db::open(dir.path(), opts).unwrap();
/// db.put(b"k", &[7u8; 1000]).unwrap();
/// assert!(wbm.memory_usage() >= 1000);
/// // The memtable's memory is charged to the cache, in 256 KiB entries.
/// assert!(cache.pinned_usage() >= wbm.memory_usage());
/// ```
#[derive(Clone)]
pub struct WriteBufferManager {
    inner: Arc<WbmInner>,
}

struct WbmInner {
    buffer_size: usize,
    allow_stall: AtomicBool,
    /// Bytes of every live memtable charged here.
    used: AtomicUsize,
    /// Of which in active memtables (not yet frozen).
    active: AtomicUsize,
    cache: Option<CacheCharge>,
}

/// The dummy entries mirroring `used` in a cache.
struct CacheCharge {
    cache: Cache,
    /// The first key component of this manager's entries (a table cache id no table has).
    id: u64,
    /// Bytes each dummy entry charges.
    entry_size: usize,
    /// How many dummy entries are inserted; changed only under this lock.
    entries: Mutex<usize>,
    /// A copy of `entries` read without the lock: a reservation that stays within the
    /// entries held does not lock.
    entries_hint: AtomicUsize,
}

impl WriteBufferManager {
    /// A manager of `buffer_size` bytes of memtables, not charged to any cache.
    pub fn new(buffer_size: usize) -> WriteBufferManager {
        WriteBufferManager::build(buffer_size, None)
    }

    /// A manager of `buffer_size` bytes of memtables whose memory is also charged to `cache`,
    /// so the cache evicts blocks to make room for memtables: the cache's capacity then
    /// bounds blocks and memtables together.
    pub fn with_cache(buffer_size: usize, cache: &Cache) -> WriteBufferManager {
        let per_shard = cache.capacity() / cache.inner.shard_count();
        let charge = CacheCharge {
            entry_size: (per_shard / 2).clamp(MIN_DUMMY_ENTRY_SIZE, MAX_DUMMY_ENTRY_SIZE),
            cache: cache.clone(),
            id: Table::new_cache_id(),
            entries: Mutex::new(0),
            entries_hint: AtomicUsize::new(0),
        };
        WriteBufferManager::build(buffer_size, Some(charge))
    }

    fn build(buffer_size: usize, cache: Option<CacheCharge>) -> WriteBufferManager {
        WriteBufferManager {
            inner: Arc::new(WbmInner {
                buffer_size,
                allow_stall: AtomicBool::new(false),
                used: AtomicUsize::new(0),
                active: AtomicUsize::new(0),
                cache,
            }),
        }
    }

    /// Stalls writes while memtables hold `buffer_size` or more (RocksDB's `allow_stall`);
    /// without it only the flush at 7/8 bounds them. Applies to every clone.
    #[must_use]
    pub fn allow_stall(self, allow: bool) -> WriteBufferManager {
        self.inner.allow_stall.store(allow, Ordering::Relaxed);
        self
    }

    /// Bytes of the live memtables charged here (active, frozen, and flushed ones a reader
    /// still holds).
    pub fn memory_usage(&self) -> usize {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// Of [`memory_usage`](Self::memory_usage), the bytes in active memtables.
    pub fn mutable_memory_usage(&self) -> usize {
        self.inner.active.load(Ordering::Relaxed)
    }

    /// The budget given.
    pub fn buffer_size(&self) -> usize {
        self.inner.buffer_size
    }

    /// Whether writes stall at the budget.
    pub fn stalls(&self) -> bool {
        self.inner.allow_stall.load(Ordering::Relaxed)
    }

    /// Whether the database being written should freeze and flush its largest active memtable
    /// (RocksDB's `ShouldFlush`): active memtables past 7/8 of the budget, or all of them
    /// at the budget with at least half of it active.
    pub(crate) fn should_flush(&self) -> bool {
        let size = self.inner.buffer_size;
        let active = self.mutable_memory_usage();
        active > size - size / 8 || (self.memory_usage() >= size && active >= size / 2)
    }

    /// Whether writes must wait for memory to be freed.
    pub(crate) fn should_stall(&self) -> bool {
        self.stalls() && self.memory_usage() >= self.inner.buffer_size
    }

    /// Charges `bytes` more of an active memtable.
    pub(crate) fn reserve(&self, bytes: usize) {
        self.inner.active.fetch_add(bytes, Ordering::Relaxed);
        let used = self.inner.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.sync_cache(used);
    }

    /// `bytes` of a memtable stop being active (it was frozen).
    pub(crate) fn mark_immutable(&self, bytes: usize) {
        self.inner.active.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Releases a dropped memtable's `bytes` (`active`: it was never frozen).
    pub(crate) fn free(&self, bytes: usize, active: bool) {
        if active {
            self.inner.active.fetch_sub(bytes, Ordering::Relaxed);
        }
        let used = self.inner.used.fetch_sub(bytes, Ordering::Relaxed) - bytes;
        self.sync_cache(used);
    }

    /// Makes the cache's dummy entries cover `used` bytes (rounded up to whole entries).
    /// Touches the cache only when a boundary is crossed.
    fn sync_cache(&self, used: usize) {
        let Some(c) = &self.inner.cache else {
            return;
        };
        if used.div_ceil(c.entry_size) == c.entries_hint.load(Ordering::Relaxed) {
            return;
        }
        let mut entries = c.entries.lock();
        // Read again under the lock: concurrent reservations and frees settle in turn, and
        // the last one to take the lock sees the final count.
        let want = self.memory_usage().div_ceil(c.entry_size);
        while *entries < want {
            let key = (c.id, *entries as u64);
            c.cache.inner.insert_pinned(key, Arc::new(()), c.entry_size);
            *entries += 1;
        }
        while *entries > want {
            *entries -= 1;
            c.cache.inner.erase(&(c.id, *entries as u64));
        }
        c.entries_hint.store(*entries, Ordering::Relaxed);
    }
}

impl Drop for CacheCharge {
    fn drop(&mut self) {
        let entries = *self.entries.get_mut();
        for i in 0..entries {
            self.cache.inner.erase(&(self.id, i as u64));
        }
    }
}

impl std::fmt::Debug for WriteBufferManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBufferManager")
            .field("buffer_size", &self.buffer_size())
            .field("memory_usage", &self.memory_usage())
            .field("allow_stall", &self.stalls())
            .field("charged_to_cache", &self.inner.cache.is_some())
            .finish()
    }
}

/// A memtable's charge to a manager: how much of it is reserved, released on drop.
pub(crate) struct MemCharge {
    wbm: WriteBufferManager,
    charged: AtomicUsize,
    active: AtomicBool,
}

impl MemCharge {
    pub(crate) fn new(wbm: WriteBufferManager) -> MemCharge {
        MemCharge {
            wbm,
            charged: AtomicUsize::new(0),
            active: AtomicBool::new(true),
        }
    }

    /// Reserves the growth from what was charged to `usage`. Write groups inserting at once
    /// may call it together: each reserves only what it moved the charge by.
    pub(crate) fn grow_to(&self, usage: usize) {
        if !self.active.load(Ordering::Relaxed) {
            return;
        }
        let mut charged = self.charged.load(Ordering::Relaxed);
        while usage > charged {
            match self.charged.compare_exchange_weak(
                charged,
                usage,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.wbm.reserve(usage - charged);
                    return;
                }
                Err(now) => charged = now,
            }
        }
    }

    /// The memtable was frozen: its charge no longer counts as active.
    pub(crate) fn freeze(&self) {
        if self.active.swap(false, Ordering::Relaxed) {
            self.wbm
                .mark_immutable(self.charged.load(Ordering::Relaxed));
        }
    }
}

impl Drop for MemCharge {
    fn drop(&mut self) {
        self.wbm
            .free(*self.charged.get_mut(), *self.active.get_mut());
    }
}
