//! Caches: a sharded CLOCK cache used for the block cache (uncompressed blocks, charged by bytes) and
//! the table cache (open tables, charged one per table), and the block cache's optional
//! compressed secondary tier.

mod clock;
mod compressed;
mod table_cache;

pub(crate) use clock::{Priority, ShardedCache};
pub(crate) use compressed::{CompressedSecondaryCache, StoredBlock};
pub(crate) use table_cache::{OpenTable, TableCache};

/// The smallest shard [`shard_bits_for`] makes (RocksDB's `min_shard_size` for its default).
const MIN_SHARD_BYTES: usize = 512 << 10;

/// `wanted` shard bits, lowered until each shard of a `capacity`-byte cache holds at least
/// [`MIN_SHARD_BYTES`]: a shard smaller than a few blocks cannot keep its share of the
/// capacity (an insert never evicts the entry it inserts).
pub(crate) fn shard_bits_for(capacity: usize, wanted: u32) -> u32 {
    let shards_that_fit = (capacity / MIN_SHARD_BYTES).max(1);
    wanted.min(shards_that_fit.ilog2())
}

/// Key of a block in the block cache: (the table's cache id, the block's offset in the file).
pub(crate) type BlockCacheKey = (u64, u64);

/// The primary tier of the block cache: decoded (uncompressed) data blocks charged by their
/// decoded size, plus pinned reservations charging each open table's index and filter. Values
/// are type-erased so both kinds share one byte budget; readers downcast to the type they
/// stored.
pub(crate) type PrimaryCache = ShardedCache<BlockCacheKey, dyn std::any::Any + Send + Sync>;

/// The shared block cache: the primary tier (which it dereferences to, so the many callers
/// that only know the primary are unchanged) and, if configured, a compressed secondary tier
/// that a primary miss consults before the file (see `compressed.rs`).
pub struct BlockCache {
    primary: PrimaryCache,
    secondary: Option<CompressedSecondaryCache>,
}

impl BlockCache {
    /// A cache of `capacity` bytes in `2^shard_bits` shards, without a secondary tier.
    pub fn new(capacity: usize, shard_bits: u32) -> BlockCache {
        BlockCache {
            primary: ShardedCache::new(capacity, shard_bits),
            secondary: None,
        }
    }

    /// The same with a compressed secondary tier of `secondary_bytes` (none if 0), sharded
    /// like the primary.
    pub(crate) fn with_secondary(mut self, secondary_bytes: usize) -> BlockCache {
        let bits = self.primary.shard_count().trailing_zeros();
        self.secondary =
            (secondary_bytes > 0).then(|| CompressedSecondaryCache::new(secondary_bytes, bits));
        self
    }

    /// The compressed secondary tier, if there is one.
    #[inline]
    pub(crate) fn secondary(&self) -> Option<&CompressedSecondaryCache> {
        self.secondary.as_ref()
    }
}

impl std::ops::Deref for BlockCache {
    type Target = PrimaryCache;

    #[inline]
    fn deref(&self) -> &PrimaryCache {
        &self.primary
    }
}

/// What a cached block costs beyond its bytes, charged with it (RocksDB charges its cache
/// metadata too): the map bucket and clock slot (about 80 and 40 bytes with the tables' spare
/// room), the `Arc` holding the block (64) and the allocator's headers. Without it a cache
/// full of 4 KiB blocks held about 5% more than its capacity.
pub(crate) const BLOCK_ENTRY_OVERHEAD: usize = 192;

#[cfg(test)]
mod tests {
    use super::shard_bits_for;

    #[test]
    fn small_caches_get_fewer_shards_of_at_least_half_a_mebibyte() {
        let mib = 1usize << 20;
        assert_eq!(shard_bits_for(32 * mib, 6), 6);
        assert_eq!(shard_bits_for(1 << 30, 6), 6);
        assert_eq!(shard_bits_for(32 * mib - 1, 6), 5);
        assert_eq!(shard_bits_for(4 * mib, 6), 3);
        assert_eq!(shard_bits_for(mib, 6), 1);
        assert_eq!(shard_bits_for(64 << 10, 6), 0);
        assert_eq!(shard_bits_for(0, 6), 0);
        assert_eq!(shard_bits_for(1 << 30, 2), 2);
    }
}
