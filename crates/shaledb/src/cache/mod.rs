//! Caches: a sharded CLOCK cache used for the block cache (uncompressed blocks, charged by bytes) and
//! the table cache (open tables, charged one per table).

mod clock;
mod table_cache;

pub use clock::ShardedCache;
pub use table_cache::TableCache;

/// Key of a block in the block cache: (the table's cache id, the block's offset in the file).
pub type BlockCacheKey = (u64, u64);
