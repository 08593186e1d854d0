//! Caches: a sharded CLOCK cache used for the block cache (uncompressed blocks, charged by bytes) and
//! the table cache (open tables, charged one per table).

mod clock;
mod table_cache;

pub(crate) use clock::{Priority, ShardedCache};
pub(crate) use table_cache::{OpenTable, TableCache};

/// Key of a block in the block cache: (the table's cache id, the block's offset in the file).
pub(crate) type BlockCacheKey = (u64, u64);

/// The shared block cache: decoded (uncompressed) data blocks charged by their decoded size,
/// plus pinned reservations charging each open table's index and filter. Values are
/// type-erased so both kinds share one byte budget; readers downcast to the type they stored.
pub(crate) type BlockCache = ShardedCache<BlockCacheKey, dyn std::any::Any + Send + Sync>;

/// What a cached block costs beyond its bytes, charged with it (RocksDB charges its cache
/// metadata too): the map bucket and clock slot (about 80 and 40 bytes with the tables' spare
/// room), the `Arc` holding the block (64) and the allocator's headers. Without it a cache
/// full of 4 KiB blocks held about 5% more than its capacity.
pub(crate) const BLOCK_ENTRY_OVERHEAD: usize = 192;
