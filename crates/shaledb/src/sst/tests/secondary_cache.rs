//! The block cache's compressed secondary tier at the table level: a block the primary
//! evicted is decompressed from the tier with no file read and is the same block; blocks
//! stored uncompressed, reads without `fill_cache` and blocks whose checksum fails never
//! enter it.

use super::*;
use crate::statistics::{Statistics, Ticker};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A file in memory counting its reads.
struct CountedRandom {
    inner: MemRandom,
    reads: Arc<AtomicUsize>,
}

impl RandomAccessFile for CountedRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_exact_at(offset, buf)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

/// A primary of one byte (it keeps only the block inserted last) and a 1 MiB tier.
fn tiny_two_tier_cache() -> Arc<BlockCache> {
    Arc::new(BlockCache::new(1, 0).with_secondary(1 << 20))
}

/// The table in `bytes` read through `cache`, with statistics; the counter of its reads.
fn open_counted(
    bytes: Vec<u8>,
    cache: Arc<BlockCache>,
) -> (Arc<Table>, Arc<AtomicUsize>, Arc<Statistics>) {
    let reads = Arc::new(AtomicUsize::new(0));
    let len = bytes.len() as u64;
    let file = CountedRandom {
        inner: MemRandom(bytes),
        reads: reads.clone(),
    };
    let mut t = Table::open(Arc::new(file), path(), FILE_NUMBER, len, Some(cache)).expect("open");
    let stats = Arc::new(Statistics::new());
    t.set_statistics(Some(stats.clone()));
    (Arc::new(t), reads, stats)
}

fn tier_usage(cache: &BlockCache) -> usize {
    cache.secondary().map_or(0, |s| s.usage())
}

/// Every entry by point lookup (with `verify_checksums`), then by a scan: exact values.
fn read_all(t: &Arc<Table>, e: &[(Vec<u8>, Vec<u8>)], verify: bool, what: &str) {
    for (k, v) in e {
        assert_eq!(&found(get(t, k, verify, true).expect("get")), v, "{what}");
    }
    assert_eq!(&collect(&mut t.iter(ro(verify, true))), e, "{what}");
}

#[test]
fn evicted_blocks_come_back_from_the_tier_without_a_file_read() {
    let e = entries(1000);
    let tables = [
        (CompressionType::Snappy, 0),
        (CompressionType::Zlib, 0),
        (CompressionType::Lz4, 0),
        (CompressionType::Zstd, 0),
        // Zstd with a dictionary: the tier's copy decompresses with the table's dictionary.
        (CompressionType::Zstd, 4096),
    ];
    for (c, dict) in tables {
        let what = format!("{c:?} dictionary {dict}");
        let (bytes, props) = build_with_dictionary(opts(c), &e, dict, 0);
        let blocks = props.num_data_blocks as usize;
        assert!(blocks > 10, "{what}: {blocks} blocks");
        let cache = tiny_two_tier_cache();
        let (t, reads, stats) = open_counted(bytes, cache.clone());
        let opened = reads.load(Ordering::SeqCst);
        read_all(&t, &e, true, &what);
        // Each block was read once (consecutive lookups in a block are primary hits).
        assert_eq!(reads.load(Ordering::SeqCst) - opened, blocks, "{what}");
        let usage = tier_usage(&cache);
        assert!(
            usage > 0 && usage < props.data_size as usize + blocks * 200,
            "{what}"
        );
        // Every block is in the tier: reading everything again reads no file.
        let misses = stats.ticker(Ticker::CompressedSecondaryCacheMiss);
        assert_eq!(misses, blocks as u64, "{what}");
        let before = reads.load(Ordering::SeqCst);
        read_all(&t, &e, true, &what);
        read_all(&t, &e, false, &what);
        assert_eq!(reads.load(Ordering::SeqCst), before, "{what}: no file read");
        assert_eq!(
            stats.ticker(Ticker::CompressedSecondaryCacheMiss),
            misses,
            "{what}"
        );
        // Four passes over every block, the one block the primary kept hit once there.
        assert!(
            stats.ticker(Ticker::CompressedSecondaryCacheHit) >= 4 * blocks as u64 - 4,
            "{what}: {} hits",
            stats.ticker(Ticker::CompressedSecondaryCacheHit)
        );
        assert_eq!(tier_usage(&cache), usage, "{what}: hits insert nothing");
    }
}

#[test]
fn uncompressed_blocks_and_reads_without_fill_cache_stay_out() {
    let e = entries(1000);
    let (bytes, _) = build(opts(CompressionType::None), &e);
    let cache = tiny_two_tier_cache();
    let (t, reads, _) = open_counted(bytes, cache.clone());
    read_all(&t, &e, true, "none");
    assert_eq!(tier_usage(&cache), 0, "nothing compressed to keep");
    let before = reads.load(Ordering::SeqCst);
    read_all(&t, &e, true, "none");
    assert!(reads.load(Ordering::SeqCst) > before + 10, "read again");

    let (bytes, _) = build(opts(CompressionType::Lz4), &e);
    let cache = tiny_two_tier_cache();
    let (t, _, _) = open_counted(bytes, cache.clone());
    for (k, v) in &e {
        assert_eq!(&found(get(&t, k, true, false).expect("get")), v);
    }
    assert_eq!(collect(&mut t.iter(ro(true, false))), e);
    assert_eq!(tier_usage(&cache), 0, "fill_cache false");
    assert_eq!(
        cache.usage(),
        cache.pinned_usage(),
        "the primary holds only the index and filter reservation"
    );
}

#[test]
fn a_tier_smaller_than_the_data_keeps_values_right_and_its_capacity() {
    let e = entries(3000);
    let (bytes, props) = build(opts(CompressionType::Zstd), &e);
    let capacity = props.data_size as usize / 3;
    let cache = Arc::new(BlockCache::new(1, 0).with_secondary(capacity));
    let (t, reads, stats) = open_counted(bytes, cache.clone());
    for round in 0..3 {
        read_all(&t, &e, true, &format!("round {round}"));
        assert!(tier_usage(&cache) <= capacity, "{}", tier_usage(&cache));
    }
    // A sequential pass over three times the tier's capacity evicts before reuse, but the
    // random lookups below find some blocks there.
    let before = reads.load(Ordering::SeqCst);
    let hits = stats.ticker(Ticker::CompressedSecondaryCacheHit);
    for i in (0..3000).map(|i| (i * 7) % 300) {
        let (k, v) = &e[i];
        assert_eq!(&found(get(&t, k, true, true).expect("get")), v);
    }
    assert!(stats.ticker(Ticker::CompressedSecondaryCacheHit) > hits + 100);
    assert!(reads.load(Ordering::SeqCst) - before < 3000 / 2);
}

/// The first data block's contents damaged in place (`reseal`: with its checksum recomputed
/// so only decoding can tell), or only its stored checksum (contents intact).
fn damaged(c: CompressionType, e: &[(Vec<u8>, Vec<u8>)], contents: bool) -> (Vec<u8>, u64) {
    let (mut bytes, _) = build(opts(c), e);
    let t = open_bytes(bytes.clone(), None).expect("open");
    let h = t.first_data_handle_for_tests();
    match contents {
        true => bytes[h.offset as usize + h.size as usize / 2] ^= 0x5a,
        false => bytes[(h.offset + h.size) as usize + 2] ^= 0x01,
    }
    (bytes, h.offset)
}

#[test]
fn a_damaged_block_is_corruption_every_time_and_never_kept() {
    let e = entries(1000);
    let (bytes, offset) = damaged(CompressionType::Zstd, &e, true);
    let cache = tiny_two_tier_cache();
    let (t, _, _) = open_counted(bytes, cache.clone());
    for attempt in 0..2 {
        match get(&t, &e[0].0, true, true) {
            Err(Error::Corruption {
                file, offset: at, ..
            }) => {
                assert_eq!((file, at), (path(), offset), "attempt {attempt}");
            }
            other => panic!("attempt {attempt}: expected corruption, got {other:?}"),
        }
    }
    assert_eq!(tier_usage(&cache), 0);
    // Other blocks are served and kept.
    let last = e.last().expect("entries");
    assert_eq!(&found(get(&t, &last.0, true, true).expect("get")), &last.1);
    assert!(tier_usage(&cache) > 0);
}

#[test]
fn an_unverified_read_keeps_only_a_block_whose_checksum_holds() {
    let e = entries(1000);
    // The checksum is wrong but the contents decode: an unverified read returns them (as
    // asked) and does not admit the block, so the next read goes to the file again.
    let (bytes, offset) = damaged(CompressionType::Lz4, &e, false);
    let cache = tiny_two_tier_cache();
    let (t, reads, _) = open_counted(bytes, cache.clone());
    assert_eq!(&found(get(&t, &e[0].0, false, true).expect("get")), &e[0].1);
    assert_eq!(tier_usage(&cache), 0, "not admitted");
    // Push it out of the one-byte primary, then read it again: from the file.
    let last = e.last().expect("entries");
    assert_eq!(&found(get(&t, &last.0, false, true).expect("get")), &last.1);
    assert!(
        tier_usage(&cache) > 0,
        "the sound block was checked and admitted"
    );
    let before = reads.load(Ordering::SeqCst);
    assert_eq!(&found(get(&t, &e[0].0, false, true).expect("get")), &e[0].1);
    assert_eq!(reads.load(Ordering::SeqCst), before + 1);
    // Once the primary no longer holds it, a verified read of it is corruption.
    assert_eq!(&found(get(&t, &last.0, false, true).expect("get")), &last.1);
    match get(&t, &e[0].0, true, true) {
        Err(Error::Corruption { offset: at, .. }) => assert_eq!(at, offset),
        other => panic!("expected corruption, got {other:?}"),
    }
}
