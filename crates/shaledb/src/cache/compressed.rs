//! The compressed secondary tier of the block cache (issue 14; RocksDB's
//! `CompressedSecondaryCache`, built our own way).
//!
//! It holds data blocks *as stored in the table file*: the codec id and the compressed
//! contents (the varint decoded length and the codec's bytes), without the trailer, whose
//! checksum was checked when the block was read. A primary-cache miss looks here before the
//! file: a hit decompresses into the primary cache with no IO, which is what pays when the
//! data outgrows memory and the OS page cache is not there to catch the re-read (direct
//! reads) or is wanted for something else.
//!
//! Admission: a block read from the file with `fill_cache` enters both tiers at once, while
//! its stored bytes are still in hand. RocksDB instead demotes a block when the primary evicts
//! it and admits it only on its second access; demotion would need either the stored bytes kept
//! next to every decoded block (more memory than the tier saves) or a recompression at eviction
//! time under the primary's shard lock, so we pay the memory of holding a hot block in both
//! tiers (at its compressed size) instead. Blocks stored uncompressed (no codec, or one that did
//! not save 12.5%) stay out: a copy here would cost as much as in the primary and save only
//! the read. Index and filter blocks stay out too: they are held by the table or kept in the
//! primary with high priority, and filters are stored uncompressed.
//!
//! The tier has its own byte capacity, charged and reported apart from the primary
//! (`shaledb.compressed-secondary-cache-usage`); an entry larger than a shard's capacity is
//! not admitted, so usage never exceeds the capacity.

use super::{BlockCacheKey, ShardedCache, BLOCK_ENTRY_OVERHEAD};
use crate::compression::CompressionType;
use std::sync::Arc;

/// A block's stored form: its codec and its contents as written in the table file (before
/// the trailer).
pub(crate) struct StoredBlock {
    pub(crate) kind: CompressionType,
    pub(crate) contents: Box<[u8]>,
}

impl StoredBlock {
    /// What the tier charges for it: its bytes and the entry's bookkeeping.
    fn charge(&self) -> usize {
        self.contents.len() + BLOCK_ENTRY_OVERHEAD
    }
}

/// The compressed tier: a sharded CLOCK cache of [`StoredBlock`]s charged by their bytes.
pub(crate) struct CompressedSecondaryCache {
    blocks: ShardedCache<BlockCacheKey, StoredBlock>,
    /// The most one entry may be charged: a shard's capacity.
    max_entry: usize,
}

impl CompressedSecondaryCache {
    /// A tier of `capacity` bytes in `2^shard_bits` shards.
    pub(crate) fn new(capacity: usize, shard_bits: u32) -> CompressedSecondaryCache {
        let blocks = ShardedCache::new(capacity, shard_bits);
        let max_entry = capacity / blocks.shard_count();
        CompressedSecondaryCache { blocks, max_entry }
    }

    /// The stored block under `key`, marked recently used.
    #[inline]
    pub(crate) fn get(&self, key: &BlockCacheKey) -> Option<Arc<StoredBlock>> {
        self.blocks.get(key)
    }

    /// Admits a block read from its file (trailer checked, decoded without error). Blocks
    /// stored uncompressed, and blocks larger than a shard, are not admitted.
    pub(crate) fn insert(&self, key: BlockCacheKey, block: StoredBlock) {
        if block.kind == CompressionType::None {
            return;
        }
        let charge = block.charge();
        if charge > self.max_entry {
            return;
        }
        self.blocks.insert(key, Arc::new(block), charge);
    }

    /// Bytes charged by the blocks held.
    pub(crate) fn usage(&self) -> usize {
        self.blocks.usage()
    }

    /// The capacity given.
    pub(crate) fn capacity(&self) -> usize {
        self.blocks.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(byte: u8, len: usize) -> Vec<u8> {
        vec![byte; len]
    }

    /// Inserts `contents` stored with `kind`.
    fn put(tier: &CompressedSecondaryCache, key: BlockCacheKey, kind: CompressionType, c: &[u8]) {
        let contents = c.into();
        tier.insert(key, StoredBlock { kind, contents });
    }

    #[test]
    fn holds_compressed_blocks_and_charges_their_bytes() {
        let tier = CompressedSecondaryCache::new(1 << 20, 0);
        put(&tier, (1, 0), CompressionType::Zstd, &contents(7, 1000));
        put(&tier, (1, 4096), CompressionType::Lz4, &contents(9, 500));
        assert_eq!(tier.usage(), 1000 + 500 + 2 * BLOCK_ENTRY_OVERHEAD);
        let b = tier.get(&(1, 0)).expect("held");
        assert_eq!(b.kind, CompressionType::Zstd);
        assert_eq!(&*b.contents, &contents(7, 1000)[..]);
        let b = tier.get(&(1, 4096)).expect("held");
        assert_eq!(b.kind, CompressionType::Lz4);
        assert_eq!(&*b.contents, &contents(9, 500)[..]);
        assert!(tier.get(&(2, 0)).is_none(), "another table's id");
        assert_eq!(tier.capacity(), 1 << 20);
    }

    #[test]
    fn uncompressed_and_oversized_blocks_are_not_admitted() {
        let tier = CompressedSecondaryCache::new(4096, 0);
        put(&tier, (1, 0), CompressionType::None, &contents(1, 100));
        assert!(tier.get(&(1, 0)).is_none());
        put(&tier, (1, 1), CompressionType::Snappy, &contents(1, 4096));
        assert!(tier.get(&(1, 1)).is_none(), "larger than the shard");
        assert_eq!(tier.usage(), 0);
    }

    #[test]
    fn evicts_by_bytes_keeping_recently_used_blocks() {
        // Room for four 1000-byte blocks (each charged 1192).
        let per = 1000 + BLOCK_ENTRY_OVERHEAD;
        let tier = CompressedSecondaryCache::new(4 * per + 10, 0);
        for i in 0..4u64 {
            put(
                &tier,
                (1, i),
                CompressionType::Zstd,
                &contents(i as u8, 1000),
            );
        }
        assert_eq!(tier.usage(), 4 * per);
        assert!(tier.get(&(1, 0)).is_some()); // 0 is now hot
        put(&tier, (1, 4), CompressionType::Zstd, &contents(4, 1000));
        assert_eq!(tier.usage(), 4 * per, "one block made room for one");
        assert!(tier.get(&(1, 0)).is_some(), "the hot block stayed");
        assert!(tier.get(&(1, 4)).is_some(), "the new block is in");
        let kept = (1..4).filter(|&i| tier.get(&(1, i)).is_some()).count();
        assert_eq!(kept, 2, "one cold block was evicted");
        // A stream of new blocks never takes the tier past its capacity.
        for i in 10..200u64 {
            put(
                &tier,
                (2, i),
                CompressionType::Zstd,
                &contents(1, 100 + i as usize),
            );
            assert!(tier.usage() <= tier.capacity(), "usage {}", tier.usage());
        }
    }

    #[test]
    fn shards_split_the_capacity() {
        let tier = CompressedSecondaryCache::new(64 << 10, 2);
        assert_eq!(tier.blocks.shard_count(), 4);
        for i in 0..1000u64 {
            put(
                &tier,
                (3, i * 4096),
                CompressionType::Zstd,
                &contents(2, 2000),
            );
        }
        assert!(tier.usage() <= 64 << 10, "usage {}", tier.usage());
        assert!(tier.usage() >= 32 << 10, "the tier fills: {}", tier.usage());
    }
}
